#include "tests/support/prom.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool fail(char *why, size_t whylen, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static bool fail(char *why, size_t whylen, int line, const char *fmt, ...)
{
    int n = snprintf(why, whylen, "line %d: ", line);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < whylen) vsnprintf(why + n, whylen - (size_t)n, fmt, ap);
    va_end(ap);
    return false;
}

static bool is_name_start(char c, bool colon)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
}

static bool is_name_char(char c, bool colon)
{
    return is_name_start(c, colon) || (c >= '0' && c <= '9');
}

/* A metric (colon) or label name at *s..end: its length, 0 if none. */
static size_t name_len(const char *s, const char *end, bool colon)
{
    if (s >= end || !is_name_start(*s, colon)) return 0;
    size_t n = 1;
    while (s + n < end && is_name_char(s[n], colon))
        n++;
    return n;
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static bool parse_float(const char *s, size_t n, double *out)
{
    char buf[64];
    if (n == 0 || n >= sizeof(buf)) return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (!strcmp(buf, "+Inf")) return *out = INFINITY, true;
    if (!strcmp(buf, "-Inf")) return *out = -INFINITY, true;
    if (!strcmp(buf, "NaN")) return *out = NAN, true;
    for (size_t i = 0; i < n; i++)
        if (!strchr("0123456789+-.eE", buf[i])) return false;
    char *e;
    *out = strtod(buf, &e);
    return *e == '\0';
}

static const char *find_type(const vt_prom *p, const char *name)
{
    for (size_t i = 0; i < p->ntypes; i++)
        if (!strcmp(p->type_names[i], name)) return p->types[i];
    return NULL;
}

static bool has_help(const vt_prom *p, const char *name)
{
    for (size_t i = 0; i < p->nhelps; i++)
        if (!strcmp(p->help_names[i], name)) return true;
    return false;
}

const char *vt_prom_type(const vt_prom *p, const char *family)
{
    return find_type(p, family);
}

/* The family a sample name belongs to (malloc'd), or NULL. */
static char *family_of(const vt_prom *p, const char *name)
{
    if (find_type(p, name)) return strdup(name);
    static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
    size_t n = strlen(name);
    for (int i = 0; i < 3; i++) {
        size_t sl = strlen(suffixes[i]);
        if (n > sl && !strcmp(name + n - sl, suffixes[i])) {
            char *base = dup_n(name, n - sl);
            const char *t = find_type(p, base);
            if (t && (!strcmp(t, "histogram") || (!strcmp(t, "summary") && i > 0))) return base;
            free(base);
        }
    }
    return NULL;
}

static bool parse_comment(vt_prom *p, const char *s, const char *end, int line, const char *cur_family,
                          char *why, size_t whylen)
{
    bool help = end - s >= 7 && !memcmp(s, "# HELP ", 7);
    bool type = end - s >= 7 && !memcmp(s, "# TYPE ", 7);
    if (!help && !type) return fail(why, whylen, line, "a comment that is neither # HELP nor # TYPE");
    s += 7;
    size_t nl = name_len(s, end, true);
    if (!nl) return fail(why, whylen, line, "no valid metric name");
    char *name = dup_n(s, nl);
    s += nl;
    if (help) {
        if (s < end && *s != ' ') { fail(why, whylen, line, "HELP name not followed by a space"); free(name); return false; }
        for (const char *c = s; c < end; c++)
            if (*c == '\\' && (c + 1 >= end || (c[1] != '\\' && c[1] != 'n')))
                { fail(why, whylen, line, "bad escape in HELP text"); free(name); return false; }
        if (has_help(p, name)) { fail(why, whylen, line, "second HELP for %s", name); free(name); return false; }
        p->help_names = realloc(p->help_names, (p->nhelps + 1) * sizeof(char *));
        p->help_names[p->nhelps++] = name;
        return true;
    }
    if (s >= end || *s != ' ') { fail(why, whylen, line, "TYPE name not followed by a space"); free(name); return false; }
    s++;
    static const char *const kinds[] = {"counter", "gauge", "histogram", "summary", "untyped"};
    const char *kind = NULL;
    for (int i = 0; i < 5; i++)
        if ((size_t)(end - s) == strlen(kinds[i]) && !memcmp(s, kinds[i], (size_t)(end - s))) kind = kinds[i];
    if (!kind) { fail(why, whylen, line, "unknown TYPE"); free(name); return false; }
    if (find_type(p, name)) { fail(why, whylen, line, "second TYPE for %s", name); free(name); return false; }
    for (size_t i = 0; i < p->n; i++) {
        char *f = family_of(p, p->samples[i].name);
        bool same = f && !strcmp(f, name);
        bool prefix = !strncmp(p->samples[i].name, name, strlen(name));
        free(f);
        if (same || !strcmp(p->samples[i].name, name) || (prefix && !strcmp(kind, "histogram") && 0))
            { fail(why, whylen, line, "TYPE for %s after its samples", name); free(name); return false; }
    }
    (void)cur_family;
    p->type_names = realloc(p->type_names, (p->ntypes + 1) * sizeof(char *));
    p->types = realloc(p->types, (p->ntypes + 1) * sizeof(char *));
    p->type_names[p->ntypes] = name;
    p->types[p->ntypes++] = strdup(kind);
    return true;
}

static bool parse_sample(vt_prom *p, const char *s, const char *end, int line, char *why, size_t whylen)
{
    size_t nl = name_len(s, end, true);
    if (!nl) return fail(why, whylen, line, "no valid metric name");
    char *name = dup_n(s, nl);
    s += nl;
    char labels[2048];
    size_t ll = 0;
    char seen[16][128];
    int nseen = 0;
    if (s < end && *s == '{') {
        s++;
        while (s < end && *s != '}') {
            size_t ln = name_len(s, end, false);
            if (!ln || ln >= 128) { fail(why, whylen, line, "bad label name"); free(name); return false; }
            for (int i = 0; i < nseen; i++)
                if (strlen(seen[i]) == ln && !memcmp(seen[i], s, ln))
                    { fail(why, whylen, line, "label %.*s twice", (int)ln, s); free(name); return false; }
            if (nseen < 16) {
                memcpy(seen[nseen], s, ln);
                seen[nseen++][ln] = '\0';
            }
            const char *lstart = s;
            s += ln;
            if (s + 1 >= end || s[0] != '=' || s[1] != '"')
                { fail(why, whylen, line, "label without =\"value\""); free(name); return false; }
            s += 2;
            while (s < end && *s != '"') {
                if (*s == '\\') {
                    if (s + 1 >= end || (s[1] != '\\' && s[1] != '"' && s[1] != 'n'))
                        { fail(why, whylen, line, "bad escape in a label value"); free(name); return false; }
                    s++;
                } else if (*s == '\n') {
                    { fail(why, whylen, line, "raw line feed in a label value"); free(name); return false; }
                }
                s++;
            }
            if (s >= end) { fail(why, whylen, line, "unterminated label value"); free(name); return false; }
            s++; /* the closing quote */
            size_t pl = (size_t)(s - lstart);
            if (ll + pl + 2 >= sizeof(labels)) { fail(why, whylen, line, "labels too long"); free(name); return false; }
            if (ll) labels[ll++] = ',';
            memcpy(labels + ll, lstart, pl);
            ll += pl;
            if (s < end && *s == ',') s++;
            else if (s < end && *s != '}') { fail(why, whylen, line, "labels not separated by ,"); free(name); return false; }
        }
        if (s >= end) { fail(why, whylen, line, "unterminated label set"); free(name); return false; }
        s++;
    }
    labels[ll] = '\0';
    if (s >= end || *s != ' ') { fail(why, whylen, line, "no space before the value"); free(name); return false; }
    s++;
    const char *v = s;
    while (s < end && *s != ' ')
        s++;
    double value;
    if (!parse_float(v, (size_t)(s - v), &value)) { fail(why, whylen, line, "bad value"); free(name); return false; }
    if (s < end) { /* a timestamp: an integer */
        s++;
        if (s >= end) { fail(why, whylen, line, "trailing space"); free(name); return false; }
        for (; s < end; s++)
            if (!((*s >= '0' && *s <= '9') || *s == '-')) { fail(why, whylen, line, "bad timestamp"); free(name); return false; }
    }
    char *fam = family_of(p, name);
    if (!fam) { fail(why, whylen, line, "sample %s has no TYPE", name); free(name); return false; }
    if (!has_help(p, fam)) { fail(why, whylen, line, "family %s has no HELP", fam); free(name); free(fam); return false; }
    if (!strcmp(find_type(p, fam), "counter") && !(value >= 0))
        { fail(why, whylen, line, "counter %s below 0", name); free(name); free(fam); return false; }
    /* Contiguous families, no duplicates. */
    if (p->n) {
        char *prev = family_of(p, p->samples[p->n - 1].name);
        bool same = prev && !strcmp(prev, fam);
        free(prev);
        if (!same)
            for (size_t i = 0; i < p->n; i++) {
                char *f = family_of(p, p->samples[i].name);
                bool clash = f && !strcmp(f, fam);
                free(f);
                if (clash) { fail(why, whylen, line, "family %s is split", fam); free(name); free(fam); return false; }
            }
    }
    for (size_t i = 0; i < p->n; i++)
        if (!strcmp(p->samples[i].name, name) && !strcmp(p->samples[i].labels, labels))
            { fail(why, whylen, line, "sample %s{%s} twice", name, labels); free(name); free(fam); return false; }
    free(fam);
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 64;
        p->samples = realloc(p->samples, p->cap * sizeof(*p->samples));
    }
    p->samples[p->n++] = (vt_prom_sample){.name = name, .labels = strdup(labels), .value = value};
    return true;
}

/* labels without the le pair, and le's value. */
static void split_le(const char *labels, char *rest, size_t cap, char *le, size_t lecap)
{
    rest[0] = le[0] = '\0';
    const char *s = labels;
    size_t rl = 0;
    while (*s) {
        const char *e = s;
        bool inq = false;
        while (*e && (inq || *e != ',')) {
            if (*e == '\\' && inq) e++;
            else if (*e == '"') inq = !inq;
            e++;
        }
        size_t n = (size_t)(e - s);
        if (n > 4 && !strncmp(s, "le=\"", 4)) {
            snprintf(le, lecap, "%.*s", (int)(n - 5), s + 4);
        } else if (rl + n + 2 < cap) {
            if (rl) rest[rl++] = ',';
            memcpy(rest + rl, s, n);
            rl += n;
            rest[rl] = '\0';
        }
        s = *e ? e + 1 : e;
    }
}

static bool check_histograms(const vt_prom *p, char *why, size_t whylen)
{
    for (size_t t = 0; t < p->ntypes; t++) {
        if (strcmp(p->types[t], "histogram")) continue;
        const char *base = p->type_names[t];
        char bucket[256], sum[256], count[256];
        snprintf(bucket, sizeof(bucket), "%s_bucket", base);
        snprintf(sum, sizeof(sum), "%s_sum", base);
        snprintf(count, sizeof(count), "%s_count", base);
        for (size_t i = 0; i < p->n; i++) {
            if (strcmp(p->samples[i].name, count)) continue;
            const char *series = p->samples[i].labels;
            double prev_le = -INFINITY, prev_v = 0, inf_v = -1;
            int nb = 0;
            for (size_t j = 0; j < p->n; j++) {
                if (strcmp(p->samples[j].name, bucket)) continue;
                char rest[2048], le[64];
                split_le(p->samples[j].labels, rest, sizeof(rest), le, sizeof(le));
                if (strcmp(rest, series)) continue;
                double lv;
                if (!parse_float(le, strlen(le), &lv))
                    return fail(why, whylen, 0, "%s{%s}: bad le \"%s\"", bucket, series, le);
                if (!(lv > prev_le)) return fail(why, whylen, 0, "%s{%s}: le not ascending at %s", bucket, series, le);
                if (p->samples[j].value < prev_v)
                    return fail(why, whylen, 0, "%s{%s}: buckets not cumulative at le=%s", bucket, series, le);
                prev_le = lv;
                prev_v = p->samples[j].value;
                if (isinf(lv)) inf_v = p->samples[j].value;
                nb++;
            }
            if (nb == 0 || inf_v < 0) return fail(why, whylen, 0, "%s{%s}: no +Inf bucket", bucket, series);
            if (inf_v != p->samples[i].value)
                return fail(why, whylen, 0, "%s{%s}: +Inf bucket %g != _count %g", bucket, series, inf_v,
                            p->samples[i].value);
            if (isnan(vt_prom_get(p, sum, series, NAN))) return fail(why, whylen, 0, "%s{%s}: no _sum", base, series);
        }
        /* and every bucket series has its _count */
        for (size_t j = 0; j < p->n; j++) {
            if (strcmp(p->samples[j].name, bucket)) continue;
            char rest[2048], le[64];
            split_le(p->samples[j].labels, rest, sizeof(rest), le, sizeof(le));
            if (!le[0]) return fail(why, whylen, 0, "%s{%s}: a bucket without le", bucket, p->samples[j].labels);
            if (isnan(vt_prom_get(p, count, rest, NAN))) return fail(why, whylen, 0, "%s{%s}: no _count", base, rest);
        }
    }
    return true;
}

bool vt_prom_parse(const char *text, size_t len, vt_prom *p, char *why, size_t whylen)
{
    memset(p, 0, sizeof(*p));
    if (len == 0 || text[len - 1] != '\n') return fail(why, whylen, 0, "the text does not end with a line feed");
    const char *s = text, *end = text + len;
    int line = 0;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        line++;
        if (nl == s) return fail(why, whylen, line, "empty line");
        for (const char *c = s; c < nl; c++)
            if (*c == '\r' || *c == '\0') return fail(why, whylen, line, "CR or NUL in a line");
        bool ok = *s == '#' ? parse_comment(p, s, nl, line, NULL, why, whylen)
                            : parse_sample(p, s, nl, line, why, whylen);
        if (!ok) return false;
        s = nl + 1;
    }
    return check_histograms(p, why, whylen);
}

void vt_prom_free(vt_prom *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->samples[i].name);
        free(p->samples[i].labels);
    }
    for (size_t i = 0; i < p->ntypes; i++) {
        free(p->type_names[i]);
        free(p->types[i]);
    }
    for (size_t i = 0; i < p->nhelps; i++)
        free(p->help_names[i]);
    free(p->samples);
    free(p->type_names);
    free(p->types);
    free(p->help_names);
    memset(p, 0, sizeof(*p));
}

double vt_prom_get(const vt_prom *p, const char *name, const char *labels, double def)
{
    for (size_t i = 0; i < p->n; i++)
        if (!strcmp(p->samples[i].name, name) && !strcmp(p->samples[i].labels, labels)) return p->samples[i].value;
    return def;
}

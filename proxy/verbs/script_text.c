#include "proxy/verbs/script_text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growing byte buffer; abort() on allocation failure, as the rest of
 * the build tool and the test do. */
typedef struct text_buf {
    char *data;
    size_t len, cap;
} text_buf;

static void text_append(text_buf *b, const char *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        while (b->len + n + 1 > b->cap)
            b->cap = b->cap ? b->cap * 2 : 4096;
        b->data = realloc(b->data, b->cap);
        if (!b->data) abort();
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static char *read_file(const char *path, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    text_buf b = {0};
    char chunk[8192];
    size_t got;
    while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0)
        text_append(&b, chunk, got);
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        snprintf(err, errlen, "cannot read %s", path);
        free(b.data);
        return NULL;
    }
    if (!b.data) text_append(&b, "", 0);
    *len = b.len;
    return b.data;
}

/* A comment-only line: blanks, then "--". */
static int comment_line(const char *p, size_t n)
{
    size_t i = 0;
    while (i < n && (p[i] == ' ' || p[i] == '\t'))
        i++;
    return n - i >= 2 && p[i] == '-' && p[i + 1] == '-';
}

/* A helper's function, in the assembled text: from its line "local
 * function NAME(" (at the line's start) through its line "end" (the
 * helpers' style: a function's body is indented, so its first line that is
 * "end" alone closes it). */
typedef struct fn_span {
    size_t start, end;     /* [start, end) of the text */
    size_t name, name_len; /* its name's offset and length */
    int dead;              /* named nowhere else: dropped */
} fn_span;

typedef struct fn_spans {
    fn_span *v;
    size_t n, cap;
    int open; /* the last one's "end" not seen yet */
} fn_spans;

static int ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Note a helper's line at text offset `at` (its length n, newline apart).
 * Anything off the style leaves the function it is in kept, whole: a
 * line at the line's start that is not its "end" (a body is indented), a
 * function on one line ("local function f() return 1 end") included. */
static void fn_note_line(fn_spans *fs, const char *p, size_t n, size_t at)
{
    static const char head[] = "local function ";
    size_t hl = sizeof(head) - 1;
    if (n > 0 && p[n - 1] == '\r') n--;
    if (fs->open) {
        if (n == 3 && memcmp(p, "end", 3) == 0) {
            fs->open = 0;
            fs->v[fs->n - 1].end = at + n + 1 + (p[n] == '\r');
            return;
        }
        if (n == 0 || p[0] == ' ' || p[0] == '\t') return; /* (its body) */
        fs->open = 0;
        fs->n--; /* not in the style: kept */
    }
    if (n <= hl || memcmp(p, head, hl) != 0) return;
    size_t k = hl;
    while (k < n && ident_char(p[k]))
        k++;
    if (k == hl || (n >= 4 && memcmp(p + n - 4, " end", 4) == 0)) return; /* (on one line: kept) */
    if (fs->n == fs->cap) {
        fs->cap = fs->cap ? fs->cap * 2 : 32;
        fs->v = realloc(fs->v, fs->cap * sizeof(*fs->v));
        if (!fs->v) abort();
    }
    fs->v[fs->n++] = (fn_span){at, 0, at + hl, k - hl, 0};
    fs->open = 1;
}

/* A helper's text without its comment-only lines: what explains it stays
 * in lua/lib/, and every script that includes it stays under Redis's
 * pre-auth limit for one argument (16 KiB; see the verb table's unit
 * test). A helper has no long strings (checked), so a line that starts
 * with "--" is a comment. Its functions are noted in fs. */
static void append_code(text_buf *out, const char *p, size_t n, fn_spans *fs)
{
    size_t pos = 0;
    while (pos < n) {
        const char *nl = memchr(p + pos, '\n', n - pos);
        size_t line_len = nl ? (size_t)(nl - (p + pos)) : n - pos;
        size_t next = nl ? pos + line_len + 1 : n;
        if (!comment_line(p + pos, line_len)) {
            fn_note_line(fs, p + pos, line_len, out->len);
            text_append(out, p + pos, next - pos);
        }
        pos = next;
    }
}

static int fn_in_dead(const fn_spans *fs, size_t at)
{
    for (size_t i = 0; i < fs->n; i++)
        if (fs->v[i].dead && at >= fs->v[i].start && at < fs->v[i].end) return 1;
    return 0;
}

/* Is f's name used anywhere but in f itself and in dropped functions (a
 * call, a mention in a comment or a string: any whole word counts)? */
static int fn_named(const text_buf *t, const fn_spans *fs, const fn_span *f)
{
    const char *name = t->data + f->name;
    for (size_t at = 0; at + f->name_len <= t->len; at++) {
        if (t->data[at] != name[0] || memcmp(t->data + at, name, f->name_len) != 0) continue;
        if ((at > 0 && ident_char(t->data[at - 1])) ||
            (at + f->name_len < t->len && ident_char(t->data[at + f->name_len])))
            continue;
        if ((at >= f->start && at < f->end) || fn_in_dead(fs, at)) continue;
        return 1;
    }
    return 0;
}

/* The text without the helpers' functions that nothing else names (to a
 * fixed point: a function only a dropped one called goes too). A script
 * includes whole helper files; Redis would make a closure of each of
 * their functions on every call, used or not. */
static void drop_unnamed(text_buf *t, fn_spans *fs)
{
    int changed = 1;
    while (changed) {
        changed = 0;
        for (size_t i = 0; i < fs->n; i++) {
            fn_span *f = &fs->v[i];
            if (f->dead || f->end == 0 || fn_named(t, fs, f)) continue;
            f->dead = 1;
            changed = 1;
        }
    }
    size_t w = 0;
    for (size_t r = 0; r < t->len;) {
        size_t skip = 0;
        for (size_t i = 0; i < fs->n && !skip; i++)
            if (fs->v[i].dead && fs->v[i].start == r) skip = fs->v[i].end - r;
        if (skip) {
            r += skip;
            continue;
        }
        t->data[w++] = t->data[r++];
    }
    t->len = w;
    if (t->data) t->data[w] = '\0';
}

/* Is the line [p, p+n) an include line? Sets the named path. */
static int include_line(const char *p, size_t n, const char **name, size_t *name_len)
{
    size_t k = strlen(SCRIPT_INCLUDE_PREFIX);
    if (n < k || memcmp(p, SCRIPT_INCLUDE_PREFIX, k) != 0) return 0;
    *name = p + k;
    *name_len = n - k;
    return 1;
}

/* "lib/" followed by [a-z0-9_] and ".lua": nothing else may be named. */
static int lib_name_ok(const char *p, size_t n)
{
    if (n < 9 || memcmp(p, "lib/", 4) != 0 || memcmp(p + n - 4, ".lua", 4) != 0) return 0;
    for (size_t i = 4; i < n - 4; i++) {
        char ch = p[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_')) return 0;
    }
    return 1;
}

char *script_assemble(const char *path, size_t *len, char *err, size_t errlen)
{
    size_t n;
    char *src = read_file(path, &n, err, errlen);
    if (!src) return NULL;
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (slash)
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    else
        snprintf(dir, sizeof(dir), ".");

    text_buf out = {0};
    fn_spans fs = {0};
    size_t pos = 0;
    while (pos < n) {
        const char *nl = memchr(src + pos, '\n', n - pos);
        size_t line_len = nl ? (size_t)(nl - (src + pos)) : n - pos;
        size_t next = nl ? pos + line_len + 1 : n;
        const char *name;
        size_t name_len;
        if (!include_line(src + pos, line_len, &name, &name_len)) {
            text_append(&out, src + pos, next - pos);
            pos = next;
            continue;
        }
        if (!lib_name_ok(name, name_len)) {
            snprintf(err, errlen, "%s: '%.*s': an include names a file lib/<name>.lua", path, (int)line_len,
                     src + pos);
            goto fail;
        }
        char lib_path[4200];
        snprintf(lib_path, sizeof(lib_path), "%s/%.*s", dir, (int)name_len, name);
        size_t lib_len;
        char *lib = read_file(lib_path, &lib_len, err, errlen);
        if (!lib) goto fail;
        if (strstr(lib, "\n" SCRIPT_INCLUDE_PREFIX) ||
            strncmp(lib, SCRIPT_INCLUDE_PREFIX, strlen(SCRIPT_INCLUDE_PREFIX)) == 0) {
            snprintf(err, errlen, "%s: a helper includes nothing (the script includes what it needs)",
                     lib_path);
            free(lib);
            goto fail;
        }
        if (lib_len == 0 || lib[lib_len - 1] != '\n') {
            snprintf(err, errlen, "%s: a helper ends with a newline", lib_path);
            free(lib);
            goto fail;
        }
        if (strstr(lib, "[[") || strstr(lib, "[=")) {
            snprintf(err, errlen, "%s: a helper has no long strings or long comments ('[[', '[=')", lib_path);
            free(lib);
            goto fail;
        }
        append_code(&out, lib, lib_len, &fs);
        fs.open = 0; /* (a function left open at a file's end is kept) */
        if (fs.n && fs.v[fs.n - 1].end == 0) fs.n--;
        free(lib);
        pos = next;
    }
    free(src);
    drop_unnamed(&out, &fs);
    free(fs.v);
    if (!out.data) text_append(&out, "", 0);
    *len = out.len;
    return out.data;
fail:
    free(src);
    free(out.data);
    free(fs.v);
    return NULL;
}

char *script_text_pre7(const char *body, size_t len)
{
    char *t = malloc(len + 1);
    if (!t) abort();
    memcpy(t, body, len);
    t[len] = '\0';
    if (len >= 2 && t[0] == '#' && t[1] == '!') t[0] = t[1] = '-';
    return t;
}

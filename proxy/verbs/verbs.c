#include "proxy/verbs/verbs.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <openssl/sha.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/verbs/script_check.h"
#include "protocol/resp_write.h"
#include "proxy/verbs/script_file.h"
#include "proxy/verbs/script_text.h"
#include "proxy/verbs/verb_scripts.h"
#include "proxy/cmd/command.h"
#include "proxy/cmd/command_table.h"

/* ---- Redis's number parsing (integers: cmd_arg_ll) ---- */

/* Redis's string2d (getDoubleFromObject): strtod over the whole argument,
 * no leading space, not NaN, no overflow to infinity (written "inf" is
 * fine). */
static int parse_double(const resp_arg *a, double *out)
{
    char small[128];
    char *buf = a->len < sizeof(small) ? small : malloc(a->len + 1);
    if (!buf) return 0;
    memcpy(buf, a->ptr, a->len);
    buf[a->len] = '\0';
    int ok = 0;
    if (a->len > 0 && !isspace((unsigned char)buf[0]) && strlen(buf) == a->len) {
        char *end;
        errno = 0;
        double v = strtod(buf, &end);
        ok = *end == '\0' && !isnan(v) &&
             !(errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL || fpclassify(v) == FP_ZERO));
        if (ok) *out = v;
    }
    if (buf != small) free(buf);
    return ok;
}

static int arg_is(const resp_arg *a, const char *lower)
{
    size_t n = strlen(lower);
    if (a->len != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (tolower((unsigned char)a->ptr[i]) != lower[i]) return 0;
    return 1;
}

/* An option word as Redis reads one in a command of its own (strcasecmp
 * on the argument as a C string): what follows a NUL byte is not read. */
static int option_is(const resp_arg *a, const char *lower)
{
    size_t n = strlen(lower);
    if (a->len < n || (a->len > n && a->ptr[n] != '\0')) return 0;
    for (size_t i = 0; i < n; i++)
        if (tolower((unsigned char)a->ptr[i]) != lower[i]) return 0;
    return 1;
}

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

#define ERR_SYNTAX "ERR syntax error"
#define ERR_FLOAT "ERR value is not a valid float"
#define ERR_INT "ERR value is not an integer or out of range"
#define ERR_POSITIVE "ERR value is out of range, must be positive"

static int check_float(const resp_arg *a, char *err, size_t errlen)
{
    double d;
    return parse_double(a, &d) ? 0 : fail(err, errlen, ERR_FLOAT);
}

static int check_float_or_now(const resp_arg *a, char *err, size_t errlen)
{
    return arg_is(a, "now") ? 0 : check_float(a, err, errlen);
}

/* COUNT and LIMIT: an integer, not below 0. */
static int check_count(const resp_arg *a, char *err, size_t errlen)
{
    long long v;
    if (!cmd_arg_ll(a, &v)) return fail(err, errlen, ERR_INT);
    return v < 0 ? fail(err, errlen, ERR_POSITIVE) : 0;
}

/* A time in milliseconds: an integer above 0, as SET ... PX wants it. */
static int check_ms(const verb_def *v, const resp_arg *a, char *err, size_t errlen)
{
    long long ms;
    if (!cmd_arg_ll(a, &ms)) return fail(err, errlen, ERR_INT);
    return ms <= 0 ? fail(err, errlen, "ERR invalid expire time in '%s' command", v->name) : 0;
}

/* ---- the built-in verbs' checks (arity is already right) ---- */

static int check_ztick(const verb_def *v, int argc, const resp_arg *argv, verb_call *call, char *err,
                       size_t errlen)
{
    (void)v;
    (void)call;
    if (check_float(&argv[2], err, errlen) || check_float(&argv[3], err, errlen)) return -1;
    if (argc == 5 && !arg_is(&argv[4], "withscores")) return fail(err, errlen, ERR_SYNTAX);
    if (argc > 5) return fail(err, errlen, ERR_SYNTAX);
    return 0;
}

static int check_qpop(const verb_def *v, int argc, const resp_arg *argv, verb_call *call, char *err,
                      size_t errlen)
{
    for (int i = 2; i < argc; i++) {
        int left = argc - i - 1; /* values after the option word */
        if (arg_is(&argv[i], "count") && left >= 1) {
            if (check_count(&argv[++i], err, errlen)) return -1;
        } else if (arg_is(&argv[i], "maxscore") && left >= 1) {
            if (check_float_or_now(&argv[++i], err, errlen)) return -1;
        } else if (arg_is(&argv[i], "lease") && left >= 2) {
            if (check_ms(v, &argv[i + 2], err, errlen)) return -1;
            call->keys[1] = i + 1; /* the last LEASE wins, as in the script */
            call->nkeys = 2;
            i += 2;
        } else {
            return fail(err, errlen, ERR_SYNTAX);
        }
    }
    return 0;
}

static int check_qextend(const verb_def *v, int argc, const resp_arg *argv, verb_call *call, char *err,
                         size_t errlen)
{
    (void)argc;
    (void)call;
    return check_ms(v, &argv[3], err, errlen);
}

static int check_qreclaim(const verb_def *v, int argc, const resp_arg *argv, verb_call *call, char *err,
                          size_t errlen)
{
    (void)v;
    (void)call;
    if (check_float_or_now(&argv[3], err, errlen)) return -1;
    for (int i = 4; i < argc; i++) {
        if (arg_is(&argv[i], "count") && i + 1 < argc) {
            if (check_count(&argv[++i], err, errlen)) return -1;
        } else {
            return fail(err, errlen, ERR_SYNTAX);
        }
    }
    return 0;
}

static int check_lockrenew(const verb_def *v, int argc, const resp_arg *argv, verb_call *call, char *err,
                           size_t errlen)
{
    (void)call;
    return check_ms(v, &argv[argc - 1], err, errlen);
}

static int check_hsetver(const verb_def *v, int argc, const resp_arg *argv, verb_call *call, char *err,
                         size_t errlen)
{
    (void)call;
    long long ver;
    if ((argc - 3) % 2 != 0)
        return fail(err, errlen, "ERR wrong number of arguments for '%s' command", v->name);
    return cmd_arg_ll(&argv[2], &ver) ? 0 : fail(err, errlen, ERR_INT);
}

static int check_zwindow(const verb_def *v, int argc, const resp_arg *argv, verb_call *call, char *err,
                         size_t errlen)
{
    (void)call;
    if (check_ms(v, &argv[2], err, errlen)) return -1;
    for (int i = 4; i < argc; i++) {
        if (arg_is(&argv[i], "limit") && i + 1 < argc) {
            if (check_count(&argv[++i], err, errlen)) return -1;
        } else {
            return fail(err, errlen, ERR_SYNTAX);
        }
    }
    return 0;
}

/* A ZPAGE cursor: "0" (the first page), or what a page of the same
 * direction returned: 'a' (ascending) or 'r' (REV), the last member's score
 * as Redis printed it (a float: exact), ':', the member's bytes in
 * lower-case hex. lua/zpage.lua checks the same. */
static int cursor_ok(const resp_arg *a, int rev)
{
    if (a->len == 1 && a->ptr[0] == '0') return 1;
    if (a->len < 3 || a->ptr[0] != (rev ? 'r' : 'a')) return 0;
    const char *colon = memchr(a->ptr + 1, ':', a->len - 1);
    if (!colon || colon == a->ptr + 1) return 0;
    resp_arg score = {.ptr = a->ptr + 1, .len = (size_t)(colon - (a->ptr + 1))};
    double d;
    if (!parse_double(&score, &d)) return 0;
    size_t hex = a->len - (size_t)(colon + 1 - a->ptr);
    if (hex % 2) return 0;
    for (const char *p = colon + 1; p < a->ptr + a->len; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return 0;
    return 1;
}

static int check_zpage(const verb_def *v, int argc, const resp_arg *argv, verb_call *call, char *err,
                       size_t errlen)
{
    (void)v;
    (void)call;
    int rev = 0;
    for (int i = 4; i < argc; i++) {
        if (arg_is(&argv[i], "rev"))
            rev = 1;
        else if (!arg_is(&argv[i], "withscores"))
            return fail(err, errlen, ERR_SYNTAX);
    }
    long long count;
    if (!cmd_arg_ll(&argv[3], &count)) return fail(err, errlen, ERR_INT);
    if (count <= 0) return fail(err, errlen, ERR_POSITIVE);
    return cursor_ok(&argv[2], rev) ? 0 : fail(err, errlen, "ERR invalid cursor");
}

/* ZSNAPSHOT dest ttl-ms numkeys key [key ...] [WEIGHTS w ...]
 * [AGGREGATE SUM|MIN|MAX|COUNT]: ZUNIONSTORE's options, its texts (with
 * the verb's name), every argument error before anything is read. */
static int check_zsnapshot(const verb_def *v, int argc, const resp_arg *argv, verb_call *call, char *err,
                           size_t errlen)
{
    if (check_ms(v, &argv[2], err, errlen)) return -1;
    long long numkeys;
    if (!cmd_arg_ll(&argv[3], &numkeys)) return fail(err, errlen, ERR_INT);
    if (numkeys < 1) return fail(err, errlen, "ERR at least 1 input key is needed for '%s' command", v->name);
    if (numkeys > argc - 4) return fail(err, errlen, ERR_SYNTAX);
    call->range_first = 4;
    call->range_count = (int)numkeys;
    for (int i = 4 + (int)numkeys; i < argc;) {
        int left = argc - i - 1;
        if (arg_is(&argv[i], "weights") && left >= numkeys) {
            for (int k = 1; k <= numkeys; k++) {
                double w;
                if (!parse_double(&argv[i + k], &w))
                    return fail(err, errlen, "ERR weight value is not a float");
            }
            i += 1 + (int)numkeys;
        } else if (arg_is(&argv[i], "aggregate") && left >= 1) {
            const resp_arg *a = &argv[i + 1];
            if (!arg_is(a, "sum") && !arg_is(a, "min") && !arg_is(a, "max") && !arg_is(a, "count"))
                return fail(err, errlen, ERR_SYNTAX);
            i += 2;
        } else {
            return fail(err, errlen, ERR_SYNTAX);
        }
    }
    return 0;
}

/* body/sha are filled from the embedded scripts by verbs_build. */
static verb_def builtins[] = {
    {.name = "ztick",
     .syntax = "ZTICK key delta threshold [WITHSCORES]",
     .summary = "Adds delta to every member's score, then removes and returns the members whose new score "
                "is at least threshold (a conveyor tick).",
     .group = "sorted-set",
     .arity = -4,
     .numkeys = 1,
     .hidden_max_members = 1,
     .check = check_ztick},
    {.name = "qpop",
     .syntax = "QPOP key [COUNT count] [MAXSCORE max|NOW] [LEASE leasekey ms]",
     .summary = "Pops the lowest-score members of a priority queue, optionally only those due by MAXSCORE, "
                "optionally leasing them into leasekey until server time + ms.",
     .group = "sorted-set",
     .arity = -2,
     .numkeys = 1,
     .check = check_qpop},
    {.name = "qack",
     .syntax = "QACK leasekey member [member ...]",
     .summary = "Removes finished members from a lease set; returns how many were removed.",
     .group = "sorted-set",
     .arity = -3,
     .numkeys = 1},
    {.name = "qextend",
     .syntax = "QEXTEND leasekey member ms",
     .summary = "Moves a leased member's deadline to server time + ms; 1, or 0 if it is not leased.",
     .group = "sorted-set",
     .arity = 4,
     .numkeys = 1,
     .check = check_qextend},
    {.name = "qreclaim",
     .syntax = "QRECLAIM leasekey key score|NOW [COUNT count]",
     .summary = "Moves members whose lease deadline has passed back into the queue at score; returns them.",
     .group = "sorted-set",
     .arity = -4,
     .numkeys = 2,
     .check = check_qreclaim},
    {.name = "lockrelease",
     .syntax = "LOCKRELEASE key token",
     .summary = "Deletes the lock only if its value is token; 1 or 0.",
     .group = "string",
     .arity = 3,
     .numkeys = 1},
    {.name = "lockrenew",
     .syntax = "LOCKRENEW key token ms",
     .summary = "Sets the lock's time to live to ms only if its value is token; 1 or 0.",
     .group = "string",
     .arity = 4,
     .numkeys = 1,
     .check = check_lockrenew},
    {.name = "lockhandover",
     .syntax = "LOCKHANDOVER key oldtoken newtoken ms",
     .summary = "Gives the lock to newtoken with time to live ms only if it is held by oldtoken; 1 or 0.",
     .group = "string",
     .arity = 5,
     .numkeys = 1,
     .check = check_lockrenew},
    {.name = "hsetver",
     .syntax = "HSETVER key version field value [field value ...]",
     .summary = "Writes the fields and the version field only if the stored version is missing or not "
                "greater than version; 1 applied, 0 outdated.",
     .group = "hash",
     .arity = -5,
     .numkeys = 1,
     .check = check_hsetver},
    {.name = "zwindow",
     .syntax = "ZWINDOW key window-ms member [LIMIT max]",
     .summary = "Sliding-window log on the server clock: drops entries older than the window, adds member "
                "unless LIMIT is reached; returns [added, count].",
     .group = "sorted-set",
     .arity = -4,
     .numkeys = 1,
     .check = check_zwindow},
    {.name = "zpage",
     .syntax = "ZPAGE key cursor count [REV] [WITHSCORES]",
     .summary =
         "Keyset paging over a live sorted set: the count members after the cursor in (score, member) "
         "order; returns [next-cursor, members]. Every member whose score does not change during the walk "
         "is seen exactly once.",
     .group = "sorted-set",
     .arity = -4,
     .numkeys = 1,
     .readonly = 1,
     .check = check_zpage},
    {.name = "zsnapshot",
     .syntax = "ZSNAPSHOT dest ttl-ms numkeys key [key ...] [WEIGHTS weight [weight ...]] "
               "[AGGREGATE SUM|MIN|MAX|COUNT]",
     .summary =
         "Builds dest as the union of the keys with a time to live, atomically and only if dest does not "
         "exist yet; returns [1, ttl-ms] when built, [0, remaining-ttl-ms] when it was there.",
     .group = "sorted-set",
     .arity = -5,
     .numkeys = 1,
     .check = check_zsnapshot},
};
#define NBUILTINS ((int)(sizeof(builtins) / sizeof(builtins[0])))

/* Redis's commands the proxy completes where the upstream lacks a part of
 * them (verbs_find_polyfill). Syntax and arity are Redis's; ZUNION and
 * ZINTER share a script (read-only, sent as EVALSHA_RO, with the client's
 * RESP version: WITHSCORES pairs are nested in RESP3), and so do the STORE
 * variants. */
static verb_def polyfills[] = {
    {.name = "zunion",
     .syntax = "ZUNION numkeys key [key ...] [WEIGHTS weight [weight ...]] AGGREGATE COUNT [WITHSCORES]",
     .summary = "Polyfill: ZUNION with AGGREGATE COUNT (Redis 8.8) on a Redis without it.",
     .group = "sorted-set",
     .arity = -3,
     .readonly = 1,
     .hidden_protocol = 1,
     .polyfill = 1,
     .script = "zcount"},
    {.name = "zinter",
     .syntax = "ZINTER numkeys key [key ...] [WEIGHTS weight [weight ...]] AGGREGATE COUNT [WITHSCORES]",
     .summary = "Polyfill: ZINTER with AGGREGATE COUNT (Redis 8.8) on a Redis without it.",
     .group = "sorted-set",
     .arity = -3,
     .readonly = 1,
     .hidden_protocol = 1,
     .polyfill = 1,
     .script = "zcount"},
    {.name = "zunionstore",
     .syntax = "ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS weight [weight ...]] AGGREGATE COUNT",
     .summary = "Polyfill: ZUNIONSTORE with AGGREGATE COUNT (Redis 8.8) on a Redis without it.",
     .group = "sorted-set",
     .arity = -4,
     .numkeys = 1,
     .polyfill = 1,
     .script = "zcountstore"},
    {.name = "zinterstore",
     .syntax = "ZINTERSTORE destination numkeys key [key ...] [WEIGHTS weight [weight ...]] AGGREGATE COUNT",
     .summary = "Polyfill: ZINTERSTORE with AGGREGATE COUNT (Redis 8.8) on a Redis without it.",
     .group = "sorted-set",
     .arity = -4,
     .numkeys = 1,
     .polyfill = 1,
     .script = "zcountstore"},
};

/* Commands on conveyor keys (proxy/conveyor/conveyor.h): each entry is one
 * script, taking the client's RESP version, the conveyor mask and the
 * command (docs/conveyor.md#what-the-scripts-get). Sent as a polyfill is:
 * its errors are the script's, never the proxy's. */
#define TRANSLATION(tr, nm, scr, ro)                                                                         \
    {                                                                                                        \
        .name = nm, .syntax = nm " (a command on a conveyor key)",                                           \
        .summary = "A command on a conveyor key, translated to positions.", .group = "sorted-set",           \
        .arity = -2, .readonly = ro, .hidden_protocol = 1, .polyfill = 1, .translation = tr, .script = scr   \
    }
static verb_def translations[] = {
    TRANSLATION(VERB_TR_READ, "conveyor-read", "conveyor_read", 1),
    TRANSLATION(VERB_TR_WRITE, "conveyor-write", "conveyor_write", 0),
    TRANSLATION(VERB_TR_KEY, "conveyor-key", "conveyor_key", 0),
    TRANSLATION(VERB_TR_TICK, "conveyor-tick", "conveyor_tick", 0),
    TRANSLATION(VERB_TR_AGGREGATE, "conveyor-aggregate", "conveyor_aggregate", 0),
    TRANSLATION(VERB_TR_STORE, "conveyor-store", "conveyor_store", 0),
    TRANSLATION(VERB_TR_ADMIN, "conveyor-admin", "conveyor_admin", 0),
    TRANSLATION(VERB_TR_QPOP, "conveyor-qpop", "conveyor_qpop", 0),
    TRANSLATION(VERB_TR_QRECLAIM, "conveyor-qreclaim", "conveyor_qreclaim", 0),
    TRANSLATION(VERB_TR_QEXTEND, "conveyor-qextend", "conveyor_qextend", 0),
    TRANSLATION(VERB_TR_ZWINDOW, "conveyor-zwindow", "conveyor_zwindow", 0),
    TRANSLATION(VERB_TR_ZPAGE, "conveyor-zpage", "conveyor_zpage", 1),
    TRANSLATION(VERB_TR_ZSNAPSHOT, "conveyor-zsnapshot", "conveyor_zsnapshot", 0),
};
#undef TRANSLATION
#define NTRANSLATIONS ((int)(sizeof(translations) / sizeof(translations[0])))
#define NPOLYFILLS ((int)(sizeof(polyfills) / sizeof(polyfills[0])))

static int builtins_ready;

/* Attach the embedded scripts to the built-ins (once). */
static void attach_script(verb_def *v, const char *source)
{
    const char *script = v->script ? v->script : v->name;
    v->source = source;
    for (int j = 0; j < verb_scripts_count; j++) {
        if (strcmp(verb_scripts[j].name, script) == 0) {
            v->body = verb_scripts[j].body;
            v->body_len = verb_scripts[j].len;
            memcpy(v->sha, verb_scripts[j].sha, 40);
            v->sha[40] = '\0';
            v->body_pre7 = verb_scripts[j].body_pre7;
            memcpy(v->sha_pre7, verb_scripts[j].sha_pre7, 40);
            v->sha_pre7[40] = '\0';
        }
    }
    if (!v->body) {
        /* The build embeds every script in lua/: a missing one is a build bug. */
        fprintf(stderr, "verbproxy: built-in %s has no embedded script (lua/%s.lua)\n", v->name, script);
        abort();
    }
}

static void builtins_init(void)
{
    if (builtins_ready) return;
    for (int i = 0; i < NBUILTINS; i++)
        attach_script(&builtins[i], "builtin");
    for (int i = 0; i < NPOLYFILLS; i++)
        attach_script(&polyfills[i], "polyfill");
    for (int i = 0; i < NTRANSLATIONS; i++)
        attach_script(&translations[i], "conveyor");
    builtins_ready = 1;
}

const verb_def *verbs_builtin(int *count)
{
    builtins_init();
    *count = NBUILTINS;
    return builtins;
}

const verb_def *verbs_find_builtin(const char *lower)
{
    builtins_init();
    for (int i = 0; i < NBUILTINS; i++)
        if (strcmp(builtins[i].name, lower) == 0) return &builtins[i];
    return NULL;
}

const char *verbs_body(const verb_def *v, verb_dialect d)
{
    return d == VERB_DIALECT_PRE7 ? v->body_pre7 : v->body;
}

const char *verbs_sha(const verb_def *v, verb_dialect d)
{
    return d == VERB_DIALECT_PRE7 ? v->sha_pre7 : v->sha;
}

void verbs_sha1_hex(const char *p, size_t n, char out[41])
{
    unsigned char md[SHA_DIGEST_LENGTH];
    SHA1((const unsigned char *)p, n, md);
    for (int i = 0; i < SHA_DIGEST_LENGTH; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* ---- custom verbs ---- */

void verbs_free_def(verb_def *v)
{
    if (!v || !v->owned) return;
    free((char *)v->syntax);
    free((char *)v->summary);
    free((char *)v->body);
    free((char *)v->body_pre7);
    free((char *)v->source);
    free(v);
}

static int parse_int_word(const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno || v < INT_MIN || v > INT_MAX) return 0;
    *out = (int)v;
    return 1;
}

int verbs_parse_custom(const char *value, const char *basedir, verb_def **out, char *err, size_t errlen)
{
    char copy[1024];
    if (snprintf(copy, sizeof(copy), "%s", value) >= (int)sizeof(copy))
        return fail(err, errlen, "verb line too long");
    char *words[8];
    int nw = 0;
    for (char *save = NULL, *w = strtok_r(copy, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        if (nw == 8)
            return fail(err, errlen, "too many words: expected NAME path numkeys N [arity A] [readonly]");
        words[nw++] = w;
    }
    if (nw < 4 || strcasecmp(words[2], "numkeys") != 0)
        return fail(err, errlen, "expected NAME path numkeys N [arity A] [readonly]");

    char lower[VERB_NAME_MAX];
    size_t nl = strlen(words[0]);
    if (nl == 0 || nl >= sizeof(lower))
        return fail(err, errlen, "verb name must be 1 to %d characters", VERB_NAME_MAX - 1);
    for (size_t i = 0; i <= nl; i++) {
        unsigned char ch = (unsigned char)words[0][i];
        if (ch && !isalnum(ch) && ch != '_' && ch != '-' && ch != '.')
            return fail(err, errlen, "verb name '%s' may hold only letters, digits, '_', '-' and '.'",
                        words[0]);
        lower[i] = (char)tolower(ch);
    }
    if (cmd_table_find(lower, nl)) /* Redis's own, of this version or a newer (proxy/cmd/command_table.h) */
        return fail(err, errlen, "verb '%s' would shadow the Redis command %s", words[0], lower);
    if (verbs_find_builtin(lower))
        return fail(err, errlen, "verb '%s' would shadow the built-in verb %s", words[0], lower);
    if (strcmp(lower, "verbproxy") == 0)
        return fail(err, errlen, "verb '%s' would shadow the proxy's own VERBPROXY command", words[0]);

    int numkeys;
    if (!parse_int_word(words[3], &numkeys) || numkeys < 0 || numkeys > VERB_MAX_KEYS)
        return fail(err, errlen, "numkeys must be 0 to %d, not '%s'", VERB_MAX_KEYS, words[3]);
    int arity = -(1 + numkeys), readonly = 0;
    for (int i = 4; i < nw; i++) {
        if (strcasecmp(words[i], "arity") == 0 && i + 1 < nw) {
            if (!parse_int_word(words[++i], &arity) || arity == 0 || arity == 1 || arity == -1)
                return fail(err, errlen, "arity must be a Redis arity (name included: 2, -2, ...), not '%s'",
                            words[i]);
        } else if (strcasecmp(words[i], "readonly") == 0) {
            readonly = 1;
        } else {
            return fail(err, errlen, "unexpected '%s': expected [arity A] [readonly]", words[i]);
        }
    }
    /* The keys must fit in every call the arity allows. */
    int min_args = arity > 0 ? arity : -arity;
    if (min_args < 1 + numkeys)
        return fail(err, errlen, "arity %d leaves no room for %d keys", arity, numkeys);

    char path[4096];
    if (words[1][0] == '/' || !basedir || !*basedir)
        snprintf(path, sizeof(path), "%s", words[1]);
    else
        snprintf(path, sizeof(path), "%s/%s", basedir, words[1]);
    size_t len;
    char *body = verbs_read_script(path, &len, err, errlen);
    if (!body) return -1;
    /* Redis would refuse it: every call would answer -NOSCRIPT and the
     * readiness probe fail. Refused here, with Redis's own words. */
    char why[VERB_ERR_MAX * 2];
    script_flags flags;
    if (script_check_compiles(body, len, &flags, why, sizeof(why)) < 0) {
        free(body);
        return fail(err, errlen, "verb '%s': script %s does not load in Redis: %s", words[0], path, why);
    }
    if (readonly && flags.shebang && flags.no_writes == 0) {
        /* (Redis's reply to every EVALSHA_RO of it) */
        free(body);
        return fail(
            err, errlen,
            "verb '%s' is readonly but script %s has a shebang without flags=no-writes: Redis "
            "would answer every call ERR Can not execute a script with write flag using *_ro command.",
            words[0], path);
    }

    verb_def *v = calloc(1, sizeof(*v));
    if (!v) abort();
    memcpy(v->name, lower, nl + 1);
    char syntax[256];
    int n = snprintf(syntax, sizeof(syntax), "%s", words[0]);
    for (size_t i = 0; words[0][i]; i++)
        syntax[i] = (char)toupper((unsigned char)words[0][i]);
    for (int k = 0; k < numkeys && n < (int)sizeof(syntax); k++)
        n += snprintf(syntax + n, sizeof(syntax) - (size_t)n, " key%s",
                      numkeys > 1 ? (char[]){(char)('1' + k), 0} : "");
    if (n < (int)sizeof(syntax)) snprintf(syntax + n, sizeof(syntax) - (size_t)n, " [arg ...]");
    v->syntax = strdup(syntax);
    char summary[4200];
    snprintf(summary, sizeof(summary), "Custom verb: runs %s with %d key%s.", path, numkeys,
             numkeys == 1 ? "" : "s");
    v->summary = strdup(summary);
    v->group = "scripting";
    v->arity = arity;
    v->numkeys = numkeys;
    v->readonly = readonly;
    v->body = body;
    v->body_len = len;
    verbs_sha1_hex(body, len, v->sha);
    v->body_pre7 = script_text_pre7(body, len);
    verbs_sha1_hex(v->body_pre7, len, v->sha_pre7);
    v->source = strdup(path);
    v->owned = 1;
    if (!v->syntax || !v->summary || !v->source) abort();
    *out = v;
    return 0;
}

/* ---- the table ---- */

static unsigned name_hash(const char *lower, size_t len)
{
    unsigned h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)lower[i]) * 16777619u;
    return h;
}

/* Room for n more bytes at the end of *buf: where they go. */
static char *append_room(char **buf, size_t *len, size_t *cap, size_t n)
{
    if (*len + n > *cap) {
        while (*len + n > *cap)
            *cap = *cap ? *cap * 2 : 4096;
        *buf = realloc(*buf, *cap);
        if (!*buf) abort();
    }
    char *at = *buf + *len;
    *len += n;
    return at;
}

int verbs_build(verb_table *t, verb_def **custom, int ncustom, long long ztick_max_members, char *err,
                size_t errlen)
{
    memset(t, 0, sizeof(*t));
    builtins_init();
    /* The table's own copies of the built-ins and polyfills: `id` is
     * per table, and a table outlives a reload while requests refer to it
     * (proxy/ops/reload.c), beside the next one. */
    t->fixed = malloc((size_t)(NBUILTINS + NPOLYFILLS + NTRANSLATIONS) * sizeof(*t->fixed));
    if (!t->fixed) abort();
    memcpy(t->fixed, builtins, (size_t)NBUILTINS * sizeof(*t->fixed));
    memcpy(t->fixed + NBUILTINS, polyfills, (size_t)NPOLYFILLS * sizeof(*t->fixed));
    memcpy(t->fixed + NBUILTINS + NPOLYFILLS, translations, (size_t)NTRANSLATIONS * sizeof(*t->fixed));
    t->nnamed = NBUILTINS + ncustom;
    t->count = t->nnamed + NPOLYFILLS + NTRANSLATIONS;
    t->verbs = calloc((size_t)t->count, sizeof(*t->verbs));
    t->broken = calloc((size_t)t->count, 1);
    t->load_ids = calloc((size_t)t->count, sizeof(int));
    t->script_of = calloc((size_t)t->count, sizeof(int));
    if (!t->verbs || !t->broken || !t->load_ids || !t->script_of) abort();
    for (int d = 0; d < VERB_DIALECTS; d++) {
        t->load_off[d] = calloc((size_t)t->count, sizeof(size_t));
        t->load_size[d] = calloc((size_t)t->count, sizeof(size_t));
        if (!t->load_off[d] || !t->load_size[d]) abort();
    }
    for (int i = 0; i < NBUILTINS; i++)
        t->verbs[i] = &t->fixed[i];
    for (int i = 0; i < ncustom; i++)
        t->verbs[NBUILTINS + i] = custom[i];
    for (int i = 0; i < NPOLYFILLS + NTRANSLATIONS; i++)
        t->verbs[t->nnamed + i] = &t->fixed[NBUILTINS + i];
    for (int i = 0; i < t->count; i++)
        t->verbs[i]->id = i;
    snprintf(t->ztick_max, sizeof(t->ztick_max), "%lld", ztick_max_members);

    t->nslots = 16;
    while (t->nslots < t->nnamed * 4)
        t->nslots *= 2;
    t->slots = malloc((size_t)t->nslots * sizeof(int));
    if (!t->slots) abort();
    for (int i = 0; i < t->nslots; i++)
        t->slots[i] = -1;
    for (int i = 0; i < t->nnamed; i++) {
        const char *name = t->verbs[i]->name;
        if (verbs_find(t, name, strlen(name))) {
            fail(err, errlen, "verb '%s' is defined twice", name);
            verbs_free(t);
            return -1;
        }
        unsigned s = name_hash(name, strlen(name)) & (unsigned)(t->nslots - 1);
        while (t->slots[s] >= 0)
            s = (s + 1) & (unsigned)(t->nslots - 1);
        t->slots[s] = i;
    }

    size_t cap[VERB_DIALECTS] = {0};
    for (int i = 0; i < t->count; i++) {
        const verb_def *v = t->verbs[i];
        int loaded = -1;
        for (int j = 0; j < t->nloads && loaded < 0; j++)
            if (strcmp(t->verbs[t->load_ids[j]]->sha, v->sha) == 0) loaded = j;
        if (loaded >= 0) { /* one script for several entries: loaded once */
            t->script_of[i] = loaded;
            continue;
        }
        int j = t->nloads++;
        t->script_of[i] = j;
        t->load_ids[j] = i;
        for (int d = 0; d < VERB_DIALECTS; d++) {
            t->load_off[d][j] = t->load_len[d];
            const resp_arg argv[] = {
                {"SCRIPT", 6}, {"LOAD", 4}, {verbs_body(v, (verb_dialect)d), v->body_len}};
            resp_write_command(
                append_room(&t->load_cmds[d], &t->load_len[d], &cap[d], resp_write_command_size(3, argv)), 3,
                argv);
            t->load_size[d][j] = t->load_len[d] - t->load_off[d][j];
        }
    }
    return 0;
}

void verbs_adopt_custom(verb_table *t, verb_def **custom, int ncustom)
{
    t->custom = custom;
    t->ncustom = ncustom;
}

void verbs_free(verb_table *t)
{
    for (int i = 0; i < t->ncustom; i++) {
        verbs_free_def(t->custom[i]);
    }
    free(t->custom);
    free(t->fixed);
    free(t->verbs);
    free(t->slots);
    free(t->broken);
    for (int d = 0; d < VERB_DIALECTS; d++) {
        free(t->load_cmds[d]);
        free(t->load_off[d]);
        free(t->load_size[d]);
    }
    free(t->load_ids);
    free(t->script_of);
    memset(t, 0, sizeof(*t));
}

const verb_def *verbs_find(const verb_table *t, const char *name, size_t len)
{
    if (len == 0 || len >= VERB_NAME_MAX || t->nslots == 0) return NULL;
    char lower[VERB_NAME_MAX];
    for (size_t i = 0; i < len; i++) {
        char ch = name[i];
        lower[i] = ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
    }
    unsigned s = name_hash(lower, len) & (unsigned)(t->nslots - 1);
    for (; t->slots[s] >= 0; s = (s + 1) & (unsigned)(t->nslots - 1)) {
        const verb_def *v = t->verbs[t->slots[s]];
        if (strlen(v->name) == len && memcmp(v->name, lower, len) == 0) return v;
    }
    return NULL;
}

/* The polyfill entry for this command name, or NULL. The hot path: every
 * command passes here. */
static const verb_def *polyfill_named(const verb_table *t, const resp_arg *name)
{
    size_t n = name->len;
    if ((n != 6 && n != 11) || (name->ptr[0] | 0x20) != 'z') return NULL;
    for (int i = t->nnamed; i < t->count; i++)
        if (!t->verbs[i]->translation && strlen(t->verbs[i]->name) == n && arg_is(name, t->verbs[i]->name))
            return t->verbs[i];
    return NULL;
}

const verb_def *verbs_translation(const verb_table *t, verb_translation which)
{
    for (int i = t->nnamed; i < t->count; i++)
        if (t->verbs[i]->translation == which) return t->verbs[i];
    return NULL;
}

int verbs_may_polyfill(const verb_table *t, const resp_arg *name)
{
    return polyfill_named(t, name) != NULL;
}

const verb_def *verbs_find_polyfill(const verb_table *t, int argc, const resp_arg *argv, verb_call *call)
{
    const verb_def *v = polyfill_named(t, &argv[0]);
    if (!v || argc < -v->arity) return NULL;
    /* zunionInterDiffGenericCommand's reading of the arguments. */
    int store = v->numkeys == 1, numkeys_at = store ? 2 : 1;
    long long setnum;
    if (!cmd_arg_ll(&argv[numkeys_at], &setnum) || setnum < 1 || setnum > argc - (numkeys_at + 1))
        return NULL;
    int count = 0;
    for (int j = numkeys_at + 1 + (int)setnum; j < argc;) {
        int remaining = argc - j;
        if (remaining >= setnum + 1 && option_is(&argv[j], "weights")) {
            for (int k = 1; k <= setnum; k++) {
                double w;
                if (!parse_double(&argv[j + k], &w)) goto done;
            }
            j += 1 + (int)setnum;
        } else if (remaining >= 2 && option_is(&argv[j], "aggregate")) {
            const resp_arg *a = &argv[j + 1];
            if (option_is(a, "count"))
                count = 1;
            else if (!option_is(a, "sum") && !option_is(a, "min") && !option_is(a, "max"))
                goto done;
            j += 2;
        } else if (remaining >= 1 && !store && option_is(&argv[j], "withscores")) {
            j++;
        } else {
            goto done;
        }
    }
done:
    if (!count) return NULL;
    call->nkeys = store;
    call->keys[0] = 1;
    call->range_first = numkeys_at + 1;
    call->range_count = (int)setnum;
    call->first_arg = 0; /* ARGV: the command word, then everything after it */
    return v;
}

int verbs_check(const verb_def *v, int argc, const resp_arg *argv, verb_call *call, char *err, size_t errlen)
{
    if ((v->arity > 0 && argc != v->arity) || (v->arity < 0 && argc < -v->arity)) {
        fail(err, errlen, "ERR wrong number of arguments for '%s' command", v->name);
        return VERB_ERR_ARITY;
    }
    call->nkeys = v->numkeys;
    for (int i = 0; i < v->numkeys; i++)
        call->keys[i] = 1 + i;
    call->range_first = call->range_count = 0;
    call->first_arg = 1 + v->numkeys;
    return v->check && v->check(v, argc, argv, call, err, errlen) < 0 ? VERB_ERR_VALUE : 0;
}

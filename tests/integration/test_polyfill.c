/* test_polyfill.c - AGGREGATE COUNT (Redis 8.8) through the proxy, on Redis 7.0.
 *
 * ZUNION, ZINTER, ZUNIONSTORE and ZINTERSTORE with AGGREGATE COUNT: each
 * member's score is the sum of the WEIGHTS of the input keys holding it (1
 * each without WEIGHTS), whatever its scores there. Redis 7.0 answers such
 * a call "-ERR syntax error"; the proxy runs it as its own script, and the
 * client must get exactly what Redis 8.8 would send.
 *
 * There is no Redis 8.8 here, so the stories ask Redis 7.0 itself: 8.8's
 * COUNT over some sources is 7.0's AGGREGATE SUM over copies of them in
 * which every member has score 1 (weight * 1 is the weight). The copies
 * keep each source's cardinality (a set stays a set, a missing key stays
 * missing, a key given twice is its copy given twice), so Redis sorts them
 * the same way and adds in the same order: sums of 0.1 and 0.2, and
 * inf + -inf (0), come out the same too. Every reply is compared with that
 * oracle's byte for byte, in RESP2 and in RESP3; a STORE variant's reply,
 * then its destination (ZRANGE, TYPE, PTTL) with the oracle's.
 *
 * Errors and a later AGGREGATE that wins use the same idea without copies:
 * in 8.8 COUNT and SUM are read alike, so the COUNT call's answer is Redis's
 * own answer to the call with SUM in its place. Calls that are not COUNT
 * calls (numkeys wrong, COUNT only as a key or a weight, no AGGREGATE
 * COUNT at all) must reach Redis untouched: the same bytes as Redis's
 * answer to the very same call, and VERBPROXY STATS polyfill_calls still.
 *
 * The proxy learns the server and the client's protocol on the way (a
 * HELLO of its own, the client's HELLOs and RESETs), so the stories also
 * pipeline HELLO, RESET, MULTI, CLIENT REPLY SKIP and SUBSCRIBE with the
 * calls, and run them before AUTH on a password-protected Redis and on a
 * Redis that refuses HELLO: a held call must always be answered.
 *
 * VP_TEST_DIRECT=1: Redis 7.0 alone has no COUNT: every story skips. */
#include <stdarg.h>
#include <time.h>

#include "tests/support/checks.h"

static vt_env env;
static const char *password; /* the redis-server's requirepass (NULL: none) */
static redisContext *admin;  /* straight to Redis, for fixtures; opened on first use */
static char story[96];       /* said first in every failure (the randomized case's seed and round) */

static void start(const char *requirepass, const char *polyfill)
{
    static const char *args[3];
    args[0] = "--aggregate-count-polyfill";
    args[1] = polyfill;
    args[2] = NULL;
    password = requirepass;
    vt_env_start(&env, &(vt_redis_opts){.requirepass = requirepass},
                 &(vt_proxy_opts){.extra_args = polyfill ? args : NULL});
}

static void setup(void)
{
    start(NULL, NULL);
}

static void setup_no(void)
{
    start(NULL, "no");
}

static void setup_yes(void)
{
    start(NULL, "yes");
}

static void teardown(void)
{
    if (admin) redisFree(admin);
    admin = NULL;
    vt_env_stop(&env);
}

TestSuite(polyfill, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);
TestSuite(polyfill_no, .init = setup_no, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);
TestSuite(polyfill_yes, .init = setup_yes, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

#define SYNTAX_ERROR "-ERR syntax error\r\n"
#define COPY_PREFIX "one:" /* the oracle's score-1 copy of a key */
#define SUM_PREFIX "sum:"  /* where the oracle's SUM call stores */
#define MAX_ARGS 256
#define ARG_POOL (256 * 1024) /* a key name of 100,000 bytes fits, twice */
#define ZADD_CHUNK 1000       /* members per ZADD when filling a key */
#define SHOWN 160             /* bytes of a reply shown around a difference */
#define SHOWN_ARG 64          /* bytes of an argument shown */

/* ---- talking to Redis and the proxy ---- */

static redisContext *redis_admin(void)
{
    if (!admin) {
        admin = vt_must_connect(env.redis->port);
        if (password) {
            redisReply *r = vt_cmd(admin, "AUTH %s", password);
            vt_assert_status(r, "OK");
            freeReplyObject(r);
        }
    }
    return admin;
}

/* Run a command straight on Redis; it must not fail. */
static void run(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(redis_admin(), fmt, ap);
    va_end(ap);
    cr_assert(r && r->type != REDIS_REPLY_ERROR, "\"%s\" on Redis: %s", fmt, VT_DESCRIBE(r));
    freeReplyObject(r);
}

/* Read exactly n replies (and nothing more) into got. */
static void read_replies(int fd, vt_buf *got, size_t n, const char *what)
{
    bool ok = vt_sock_read_replies(fd, got, n, VT_READ_DEADLINE_MS);
    cr_assert(ok, "%s: %zu replies did not come in time; got \"%s\"%s", what, n, vt_buf_escaped(got),
              got->eof ? " then EOF" : "");
    cr_assert_eq(vt_resp_count_replies(got->data, got->len), n, "%s: more than %zu replies: \"%s\"", what, n,
                 vt_buf_escaped(got));
}

/* Drop the first n replies of b (a HELLO's map, whose id differs). */
static void skip_replies(vt_buf *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        long long len = vt_resp_reply_len(b->data, b->len);
        cr_assert(len > 0, "no whole reply to skip in \"%s\"", vt_buf_escaped(b));
        vt_buf_consume(b, (size_t)len);
    }
}

/* A raw connection to port speaking RESP `resp` (HELLO 3 answered first),
 * after AUTH with `auth` if not NULL. */
static int raw_open(int port, int resp, const char *auth)
{
    int fd = vt_must_sock(port);
    vt_buf req = {0}, got = {0};
    if (auth) vt_buf_cmd(&req, "AUTH", auth, NULL);
    if (resp == 3) vt_buf_cmd(&req, "HELLO", "3", NULL);
    if (req.len) {
        cr_assert(vt_sock_send_buf(fd, &req), "send failed");
        read_replies(fd, &got, (auth ? 1 : 0) + (resp == 3 ? 1 : 0), "AUTH / HELLO 3");
        if (auth) {
            cr_assert(got.len >= 5 && memcmp(got.data, "+OK\r\n", 5) == 0, "AUTH: \"%s\"",
                      vt_buf_escaped(&got));
            skip_replies(&got, 1);
        }
        if (resp == 3)
            cr_assert(got.len > 0 && got.data[0] == '%', "HELLO 3 should answer a map, got \"%s\"",
                      vt_buf_escaped(&got));
    }
    vt_buf_free(&req);
    vt_buf_free(&got);
    return fd;
}

/* The two ends every comparison talks to, in one protocol: the proxy (as
 * a client does) and Redis itself (the oracle). */
typedef struct sides {
    int proxy, redis;
    int resp;
} sides;

static sides sides_open(int resp)
{
    VT_SKIP_IF_DIRECT();
    return (sides){.proxy = raw_open(env.proxy->port, resp, password),
                   .redis = raw_open(env.redis->port, resp, password),
                   .resp = resp};
}

static void sides_close(sides *s)
{
    close(s->proxy);
    close(s->redis);
}

static long long polyfill_calls(void)
{
    return vt_proxy_stat(env.proxy->port, "polyfill_calls");
}

/* ---- argument lists ---- */

typedef struct args {
    int argc;
    const char *argv[MAX_ARGS];
    size_t lens[MAX_ARGS];
    char pool[ARG_POOL];
    size_t used;
} args;

static void args_addb(args *a, const char *p, size_t n)
{
    cr_assert(a->argc < MAX_ARGS && a->used + n + 1 <= sizeof(a->pool), "argument list too long");
    char *s = a->pool + a->used;
    memcpy(s, p, n);
    s[n] = '\0';
    a->used += n + 1;
    a->argv[a->argc] = s;
    a->lens[a->argc++] = n;
}

static void args_add(args *a, const char *s)
{
    args_addb(a, s, strlen(s));
}

static void args_addf(args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void args_addf(args *a, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    cr_assert(n >= 0 && (size_t)n < sizeof(buf));
    args_add(a, buf);
}

/* prefix and s as one argument (a key and its copy's name). */
static void args_add_prefixed(args *a, const char *prefix, const char *s)
{
    size_t pl = strlen(prefix), sl = strlen(s);
    cr_assert(a->argc < MAX_ARGS && a->used + pl + sl + 1 <= sizeof(a->pool), "argument list too long");
    char *at = a->pool + a->used;
    memcpy(at, prefix, pl);
    memcpy(at + pl, s, sl + 1);
    a->used += pl + sl + 1;
    a->argv[a->argc] = at;
    a->lens[a->argc++] = pl + sl;
}

/* The call on one line, escaped, for failure messages. */
static const char *args_show(const args *a, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < a->argc && used + 8 < cap; i++) {
        size_t shown = a->lens[i] < SHOWN_ARG ? a->lens[i] : SHOWN_ARG;
        const char *e = vt_escape(a->argv[i], shown);
        int n =
            snprintf(out + used, cap - used, i ? " \"%s\"%s" : "%s%s", e, shown < a->lens[i] ? "..." : "");
        if (n < 0) break;
        used += (size_t)n < cap - used ? (size_t)n : cap - used - 1;
    }
    return out;
}

/* An option word as Redis reads one (strcasecmp on the argument: what
 * follows a NUL byte is not read). */
static bool word_is(const char *p, size_t n, const char *lower)
{
    size_t l = strlen(lower);
    if (n < l || (n > l && p[l] != '\0')) return false;
    for (size_t i = 0; i < l; i++)
        if ((p[i] | 0x20) != lower[i]) return false;
    return true;
}

static bool is_store(const char *cmd)
{
    return strlen(cmd) == strlen("zunionstore");
}

/* Send one command, read its one reply into got (emptied first). */
static void ask(int fd, const args *a, vt_buf *got)
{
    vt_buf req = {0};
    char shown[512];
    vt_buf_cmd_argv(&req, a->argc, (const char **)a->argv, a->lens);
    vt_buf_reset(got);
    cr_assert(vt_sock_send_buf(fd, &req), "send failed: %s", args_show(a, shown, sizeof(shown)));
    read_replies(fd, got, 1, args_show(a, shown, sizeof(shown)));
    vt_buf_free(&req);
}

static void ask_words(int fd, vt_buf *got, const char *w0, const char *w1, const char *w2, const char *w3)
{
    args a = {0};
    const char *w[] = {w0, w1, w2, w3};
    for (int i = 0; i < 4 && w[i]; i++)
        args_add(&a, w[i]);
    ask(fd, &a, got);
}

/* want and got must be the same bytes; else show where they part. */
static void same_bytes(const char *what, const vt_buf *want, const vt_buf *got)
{
    if (got->len == want->len && memcmp(got->data, want->data, want->len) == 0) return;
    size_t at = 0;
    while (at < got->len && at < want->len && got->data[at] == want->data[at])
        at++;
    size_t from = at > SHOWN / 2 ? at - SHOWN / 2 : 0;
    size_t wl = want->len - from < SHOWN ? want->len - from : SHOWN;
    size_t gl = got->len - from < SHOWN ? got->len - from : SHOWN;
    cr_assert(false,
              "%s\n  Redis 8.8 (the oracle) and the proxy part at byte %zu (of %zu and %zu); from byte %zu:\n"
              "  want \"%s\"\n  got  \"%s\"",
              what, at, want->len, got->len, from, vt_escape(want->data + from, wl),
              vt_escape(got->data + from, gl));
}

/* ---- the oracle: SUM over score-1 copies ---- */

/* Fill a sorted set (scores[i] for members[i]; lens NULL: C strings). */
static void zadd(const char *key, int n, const char *const *members, const size_t *lens,
                 const char *const *scores)
{
    static const char *argv[2 + 2 * ZADD_CHUNK];
    static size_t alens[2 + 2 * ZADD_CHUNK];
    for (int from = 0; from < n; from += ZADD_CHUNK) {
        argv[0] = "ZADD", alens[0] = 4;
        argv[1] = key, alens[1] = strlen(key);
        int argc = 2;
        for (int i = from; i < n && i < from + ZADD_CHUNK; i++) {
            argv[argc] = scores[i], alens[argc++] = strlen(scores[i]);
            argv[argc] = members[i], alens[argc++] = lens ? lens[i] : strlen(members[i]);
        }
        redisReply *r = vt_cmd_argv(redis_admin(), argc, argv, alens);
        cr_assert(r && r->type == REDIS_REPLY_INTEGER, "ZADD %s: %s", key, VT_DESCRIBE(r));
        freeReplyObject(r);
    }
}

static void sadd(const char *key, int n, const char *const *members, const size_t *lens)
{
    static const char *argv[2 + ZADD_CHUNK];
    static size_t alens[2 + ZADD_CHUNK];
    for (int from = 0; from < n; from += ZADD_CHUNK) {
        argv[0] = "SADD", alens[0] = 4;
        argv[1] = key, alens[1] = strlen(key);
        int argc = 2;
        for (int i = from; i < n && i < from + ZADD_CHUNK; i++)
            argv[argc] = members[i], alens[argc++] = lens ? lens[i] : strlen(members[i]);
        redisReply *r = vt_cmd_argv(redis_admin(), argc, argv, alens);
        cr_assert(r && r->type == REDIS_REPLY_INTEGER, "SADD %s: %s", key, VT_DESCRIBE(r));
        freeReplyObject(r);
    }
}

/* COPY_PREFIX key: a sorted set's members, each with score 1 (the same
 * cardinality); a set, or a key of another type, copied as it is (a set's
 * members score 1 already); nothing for a missing key. */
static void make_copy(const char *key)
{
    char *copy = malloc(strlen(COPY_PREFIX) + strlen(key) + 1);
    strcpy(copy, COPY_PREFIX);
    strcat(copy, key);
    run("DEL %s", copy);
    redisReply *t = vt_cmd(redis_admin(), "TYPE %s", key);
    cr_assert(t && t->type == REDIS_REPLY_STATUS, "TYPE %s: %s", key, VT_DESCRIBE(t));
    if (strcmp(t->str, "zset") == 0) {
        redisReply *m = vt_cmd(redis_admin(), "ZRANGE %s 0 -1", key);
        cr_assert(m && m->type == REDIS_REPLY_ARRAY, "ZRANGE %s: %s", key, VT_DESCRIBE(m));
        const char **members = malloc((m->elements + 1) * sizeof(*members));
        size_t *lens = malloc((m->elements + 1) * sizeof(*lens));
        const char **ones = malloc((m->elements + 1) * sizeof(*ones));
        for (size_t i = 0; i < m->elements; i++) {
            members[i] = m->element[i]->str;
            lens[i] = m->element[i]->len;
            ones[i] = "1";
        }
        zadd(copy, (int)m->elements, members, lens, ones);
        free(members);
        free(lens);
        free(ones);
        freeReplyObject(m);
    } else if (strcmp(t->str, "none") != 0) {
        run("COPY %s %s", key, copy);
    }
    freeReplyObject(t);
    free(copy);
}

/* One COUNT call: cmd as sent (any case), the STORE variants' dest,
 * the sources, and the options as words separated by spaces ("^@" in a
 * word stands for a NUL byte). */
#define MAX_SOURCES 24

typedef struct zcall {
    const char *cmd;
    const char *dest;
    int nkeys;
    const char *keys[MAX_SOURCES];
    const char *opts;
} zcall;

/* The call as the client sends it (to_oracle false), or as the oracle's
 * SUM over the copies (true): keys and dest with COPY_PREFIX, and an
 * AGGREGATE's value COUNT (any case) read as SUM. */
static void zcall_args(const zcall *z, bool to_oracle, args *a)
{
    const char *prefix = to_oracle ? COPY_PREFIX : "";
    memset(a, 0, sizeof(*a));
    args_add(a, z->cmd);
    if (z->dest) args_add_prefixed(a, prefix, z->dest);
    args_addf(a, "%d", z->nkeys);
    for (int i = 0; i < z->nkeys; i++)
        args_add_prefixed(a, prefix, z->keys[i]);
    const char *p = z->opts ? z->opts : "";
    bool after_aggregate = false;
    while (*p) {
        while (*p == ' ')
            p++;
        size_t n = strcspn(p, " ");
        if (n == 0) break;
        char word[256];
        size_t len = 0;
        for (size_t i = 0; i < n && len < sizeof(word); i++, len++) {
            bool nul = p[i] == '^' && i + 1 < n && p[i + 1] == '@';
            word[len] = nul ? '\0' : p[i];
            i += nul;
        }
        if (to_oracle && after_aggregate && word_is(word, len, "count"))
            args_add(a, "SUM");
        else
            args_addb(a, word, len);
        after_aggregate = word_is(word, len, "aggregate");
        p += n;
    }
}

static void make_copies(const zcall *z)
{
    for (int i = 0; i < z->nkeys; i++)
        make_copy(z->keys[i]);
    if (z->dest) make_copy(z->dest);
}

/* A STORE variant's destination through the proxy and the oracle's: the
 * same members and scores, type, and time to live. */
static void same_destination(const sides *s, const char *what, const char *dest, const char *oracle_dest)
{
    static const char *const checks[] = {"ZRANGE", "TYPE", "PTTL"};
    vt_buf want = {0}, got = {0};
    char shown[2400];
    for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
        args o = {0}, p = {0};
        args_add(&o, checks[i]);
        args_add(&o, oracle_dest);
        args_add(&p, checks[i]);
        args_add(&p, dest);
        if (i == 0) {
            static const char *const range[] = {"0", "-1", "WITHSCORES"};
            for (int k = 0; k < 3; k++) {
                args_add(&o, range[k]);
                args_add(&p, range[k]);
            }
        }
        ask(s->redis, &o, &want);
        ask(s->proxy, &p, &got);
        snprintf(shown, sizeof(shown), "%s\n  then %s of the destination (RESP%d)", what, checks[i], s->resp);
        same_bytes(shown, &want, &got);
    }
    vt_buf_free(&want);
    vt_buf_free(&got);
}

/* The proxy's answer to the COUNT call z equals the oracle's (SUM over
 * the score-1 copies, on Redis 7.0), byte for byte; for a STORE variant
 * the destinations are then the same too. */
static void expect_count(const sides *s, const zcall *z)
{
    args proxy_call, oracle_call;
    zcall_args(z, false, &proxy_call);
    zcall_args(z, true, &oracle_call);
    make_copies(z);
    vt_buf want = {0}, got = {0};
    char shown[2048], what[2200];
    args_show(&proxy_call, shown, sizeof(shown));
    snprintf(what, sizeof(what), "%sRESP%d %s", story, s->resp, shown);
    ask(s->redis, &oracle_call, &want);
    cr_assert(want.len > 0 && want.data[0] != '-', "%s\n  the oracle itself failed: \"%s\"", what,
              vt_buf_escaped(&want));
    ask(s->proxy, &proxy_call, &got);
    same_bytes(what, &want, &got);
    if (z->dest) same_destination(s, what, z->dest, oracle_call.argv[1]);
    vt_buf_free(&want);
    vt_buf_free(&got);
}

/* A NULL-terminated list of words, as a call. */
static void words_args(const char *const *words, args *a)
{
    memset(a, 0, sizeof(*a));
    for (int i = 0; words[i]; i++)
        args_add(a, words[i]);
}

#define WORDS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* A COUNT call whose answer does not depend on counting: an error, or a
 * later AGGREGATE that wins. Its answer equals Redis's own to the same
 * call with every AGGREGATE COUNT read as SUM (8.8 reads them alike), on
 * the same sources; a STORE variant's oracle stores at SUM_PREFIX dest,
 * and when both succeed the destinations are compared. */
static void expect_like_sum(const sides *s, const char *const *words)
{
    args proxy_call, oracle_call;
    words_args(words, &proxy_call);
    words_args(words, &oracle_call);
    bool store = is_store(words[0]);
    char oracle_dest[256] = "";
    if (store) {
        snprintf(oracle_dest, sizeof(oracle_dest), SUM_PREFIX "%s", words[1]);
        oracle_call.argv[1] = oracle_dest;
        oracle_call.lens[1] = strlen(oracle_dest);
        run("DEL %s", oracle_dest);
    }
    for (int i = 1; i < oracle_call.argc; i++)
        if (word_is(oracle_call.argv[i - 1], oracle_call.lens[i - 1], "aggregate") &&
            word_is(oracle_call.argv[i], oracle_call.lens[i], "count"))
            oracle_call.argv[i] = "SUM", oracle_call.lens[i] = 3;
    vt_buf want = {0}, got = {0};
    char shown[2048], what[2200];
    snprintf(what, sizeof(what), "RESP%d %s", s->resp, args_show(&proxy_call, shown, sizeof(shown)));
    ask(s->redis, &oracle_call, &want); /* first: the sources are as they were */
    ask(s->proxy, &proxy_call, &got);
    same_bytes(what, &want, &got);
    if (store && want.data[0] == ':') same_destination(s, what, words[1], oracle_dest);
    vt_buf_free(&want);
    vt_buf_free(&got);
}

/* A call the proxy must not touch: the same bytes as Redis's answer to the
 * very same call (asked first, so both see the same keys). */
static void expect_untouched(const sides *s, const char *const *words)
{
    args call;
    words_args(words, &call);
    vt_buf want = {0}, got = {0};
    char shown[2048], what[2200];
    snprintf(what, sizeof(what), "RESP%d %s (untouched)", s->resp, args_show(&call, shown, sizeof(shown)));
    ask(s->redis, &call, &want);
    ask(s->proxy, &call, &got);
    same_bytes(what, &want, &got);
    vt_buf_free(&want);
    vt_buf_free(&got);
}

/* ---- the fixture ---- */

/* Members that need byte order among equal scores: NUL, bytes >= 0x80,
 * the empty string, prefixes, upper before lower case. */
static const char *const binary_members[] = {"",     "\0",   "\0\0", "a",        "a\0", "a\0z",
                                             "ab",   "a b",  "-b",   "B",        "Z",   " ",
                                             "\x7f", "\x80", "\xff", "\xc3\xa9", "zz",  "\x01"};
static const size_t binary_lens[] = {0, 1, 2, 1, 2, 3, 2, 3, 2, 1, 1, 1, 1, 1, 1, 2, 2, 1};
#define NBINARY ((int)(sizeof(binary_lens) / sizeof(binary_lens[0])))

/* Sources of different sizes (6, 3, 9, 4, 3, 18, 7), several of size 3
 * (Redis's sort keeps their order), scores that play no part
 * (inf, -inf, fractions), a plain set in each encoding, members only some
 * sources share, a string for WRONGTYPE. */
static void fill_fixture(void)
{
    zadd("za", 6, WORDS("a", "b", "c", "d", "e", "x"), NULL, WORDS("1", "2", "3", "inf", "-inf", "0.5"));
    zadd("zb", 3, WORDS("b", "c", "f"), NULL, WORDS("10", "20", "30"));
    zadd("zc", 9, WORDS("a", "c", "e", "g", "h", "i", "j", "k", "1"), NULL,
         WORDS("5", "5", "5", "5", "5", "5", "5", "5", "-2.5"));
    sadd("sa", 4, WORDS("a", "c", "f", "z"), NULL);
    sadd("si", 3, WORDS("1", "2", "3"), NULL); /* an intset */
    /* three sources of size 3 sharing b and c: (0.1 + 0.2) + 0.3 is not
     * (0.3 + 0.2) + 0.1, so their order counts */
    sadd("sb", 3, WORDS("b", "c", "z"), NULL);
    zadd("zd", 3, WORDS("c", "b", "q"), NULL, WORDS("-1", "1", "1e300"));
    const char *sevens[NBINARY];
    for (int i = 0; i < NBINARY; i++)
        sevens[i] = i % 3 ? "7" : "-7";
    zadd("zbin", NBINARY, binary_members, binary_lens, sevens);
    /* a set sharing some of them, one it does not */
    static const char *const some[] = {"", "\0", "a\0", "\xff", "ab", "\xc3\xa9", "q"};
    static const size_t some_lens[] = {0, 1, 2, 1, 2, 2, 1};
    sadd("sbin", 7, some, some_lens);
    run("SET str text");
}

/* Source lists: one source, several, sets and sorted sets, missing keys,
 * a key given twice, equal cardinalities, binary members. */
static const char *const source_lists[][6] = {
    {"za"},
    {"za", "zb"},
    {"zb", "za"},
    {"za", "zb", "zc"},
    {"zc", "sa", "za", "si"},
    {"za", "missing"},
    {"missing"},
    {"za", "za"},
    {"zb", "za", "zb"},
    {"zbin", "sbin"},
    {"sbin", "zbin", "zbin"},
    {"sa", "si"},
    {"si", "zb"},
    {"zb", "si", "zc", "missing", "sa"},
    {"zd", "zb", "sb"},
    {"sb", "zd", "za", "zb"},
};
#define NLISTS (sizeof(source_lists) / sizeof(source_lists[0]))

/* WEIGHTS, the i-th weight of a call being set[i % 4]: integers,
 * fractions whose sum depends on the order, negative, zero (and -0),
 * infinities (inf + -inf is 0), hex floats, other spellings strtod takes. */
static const char *const weight_sets[][4] = {
    {"1", "1", "1", "1"},
    {"2", "3", "5", "7"},
    {"0.1", "0.2", "0.3", "0.7"},
    {"-1", "2", "-3.5", "4"},
    {"0", "1", "-0", "0"},
    {"inf", "-inf", "inf", "1"},
    {"0x1p-3", "0x10", "-0x1.8p1", "1e1"},
    {"+1.5", "Infinity", "-INF", "1E-2"},
};
#define NWEIGHTS (sizeof(weight_sets) / sizeof(weight_sets[0]))

static int list_len(const char *const *list, int max)
{
    int n = 0;
    while (n < max && list[n])
        n++;
    return n;
}

/* Options for a call with n sources: WEIGHTS from weight_sets[w] (w < 0:
 * none), AGGREGATE COUNT, WITHSCORES, in an order and case that vary
 * with `variant`. */
static void options(char *out, size_t cap, int n, int w, bool withscores, int variant)
{
    char weights[256] = "";
    if (w >= 0) {
        size_t used = (size_t)snprintf(weights, sizeof(weights), variant % 2 ? "weights" : "WEIGHTS");
        for (int i = 0; i < n; i++)
            used += (size_t)snprintf(weights + used, sizeof(weights) - used, " %s", weight_sets[w][i % 4]);
    }
    static const char *const counts[] = {"AGGREGATE COUNT", "aggregate count", "Aggregate Count"};
    const char *count = counts[variant % 3];
    const char *ws = withscores ? (variant % 2 ? "withscores" : "WITHSCORES") : "";
    if (variant % 4 < 2)
        snprintf(out, cap, "%s %s %s", weights, count, ws);
    else
        snprintf(out, cap, "%s %s %s", ws, count, weights);
}

/* ---- 1. replies: the proxy's COUNT against the oracle ---- */

/* The destination of a STORE variant, by turns: missing, a sorted set, a
 * string with a time to live (replaced whatever it was, or deleted when
 * the result is empty). */
static const char *fresh_destination(int turn)
{
    switch (turn % 3) {
    case 0:
        run("DEL dst:new");
        return "dst:new";
    case 1:
        run("ZADD dst:zset 1 old 2 a");
        return "dst:zset";
    default:
        run("SET dst:string old PX 100000");
        return "dst:string";
    }
}

/* Every source list with every kind of WEIGHTS (the STORE variants: a few
 * of them) and without, with WITHSCORES and without (not STORE), command
 * names and options in varying order and case, in RESP `resp`. */
static void count_calls_in(int resp, bool store, long long *calls)
{
    sides s = sides_open(resp);
    static const char *const cmds[] = {"ZUNION", "ZINTER", "zunion", "Zinter"};
    static const char *const store_cmds[] = {"ZUNIONSTORE", "ZINTERSTORE", "zunionstore", "ZinterStore"};
    static const int store_weights[] = {-1, 2, 5, 6};
    int nweights = store ? (int)(sizeof(store_weights) / sizeof(store_weights[0])) : (int)NWEIGHTS + 1;
    char opts[512];
    int variant = 0;
    for (size_t l = 0; l < NLISTS; l++) {
        zcall z = {.nkeys = list_len(source_lists[l], 6), .opts = opts};
        memcpy(z.keys, source_lists[l], sizeof(source_lists[l]));
        for (int w = 0; w < nweights; w++) {
            for (int withscores = 0; withscores < (store ? 1 : 2); withscores++) {
                for (int c = 0; c < 2; c++) {
                    z.cmd = (store ? store_cmds : cmds)[c + 2 * (variant % 2)];
                    if (store) z.dest = fresh_destination(variant);
                    options(opts, sizeof(opts), z.nkeys, store ? store_weights[w] : w - 1, withscores,
                            variant++);
                    expect_count(&s, &z);
                    (*calls)++;
                }
            }
        }
    }
    sides_close(&s);
}

/* count_calls_in RESP2 and RESP3; VERBPROXY STATS polyfill_calls counts
 * every call. */
static void count_calls(bool store)
{
    VT_SKIP_IF_DIRECT();
    fill_fixture();
    long long before = polyfill_calls(), calls = 0;
    count_calls_in(2, store, &calls);
    count_calls_in(3, store, &calls);
    cr_assert_eq(polyfill_calls(), before + calls,
                 "VERBPROXY STATS polyfill_calls: %lld before, %lld calls, %lld after", before, calls,
                 polyfill_calls());
}

Test(polyfill, zunion_and_zinter_count_answer_as_redis_8_8_in_resp2_and_resp3)
{
    count_calls(false);
}

Test(polyfill, zunionstore_and_zinterstore_count_store_what_redis_8_8_stores)
{
    count_calls(true);
}

Test(polyfill, a_destination_that_is_also_a_source_is_read_before_it_is_replaced)
{
    sides s = sides_open(2);
    zadd("ds:a", 3, WORDS("a", "b", "c"), NULL, WORDS("1", "2", "3"));
    zadd("ds:b", 2, WORDS("b", "d"), NULL, WORDS("1", "1"));
    expect_count(&s, &(zcall){"ZUNIONSTORE", "ds:a", 2, {"ds:a", "ds:b"}, "AGGREGATE COUNT"});
    expect_count(
        &s,
        &(zcall){"ZINTERSTORE", "ds:b", 3, {"ds:a", "ds:b", "ds:b"}, "WEIGHTS 0.1 0.2 0.3 AGGREGATE COUNT"});
    /* an empty result deletes it */
    expect_count(&s, &(zcall){"ZINTERSTORE", "ds:a", 2, {"ds:a", "ds:missing"}, "AGGREGATE COUNT"});
    sides_close(&s);
}

Test(polyfill, members_with_equal_counts_come_in_byte_order)
{
    sides s2 = sides_open(2), s3 = sides_open(3);
    fill_fixture();
    /* every member of zbin ties: the order is the bytes' alone */
    static const char *const cases[][2] = {
        {"ZUNION", "AGGREGATE COUNT WITHSCORES"},
        {"ZUNION", "AGGREGATE COUNT"},
        {"ZINTER", "WEIGHTS 2 0.5 AGGREGATE COUNT WITHSCORES"},
        {"ZUNION", "WEIGHTS 1 -0 AGGREGATE COUNT WITHSCORES"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        zcall z = {cases[i][0], NULL, 2, {"zbin", "sbin"}, cases[i][1]};
        expect_count(&s2, &z);
        expect_count(&s3, &z);
    }
    expect_count(&s2, &(zcall){"ZUNIONSTORE", "bin:dst", 2, {"sbin", "zbin"}, "AGGREGATE COUNT"});
    expect_count(&s3, &(zcall){"ZUNIONSTORE", "bin:dst", 1, {"zbin"}, "AGGREGATE COUNT"});
    sides_close(&s2);
    sides_close(&s3);
}

/* ---- large inputs ---- */

#define LARGE_SOURCES 5
#define LARGE_MEMBERS 20000

Test(polyfill, five_sources_of_twenty_thousand_members)
{
    sides s2 = sides_open(2), s3 = sides_open(3);
    /* overlapping ranges of different sizes (two of the same), scores
     * that differ, one source a plain set */
    static const int first[LARGE_SOURCES] = {0, 5000, 10000, 0, 2000};
    static const int count[LARGE_SOURCES] = {20000, 19999, 20000, 15000, 20000};
    char **members = malloc(LARGE_MEMBERS * sizeof(*members));
    char **scores = malloc(LARGE_MEMBERS * sizeof(*scores));
    for (int k = 0; k < LARGE_SOURCES; k++) {
        char key[16];
        snprintf(key, sizeof(key), "big:%d", k);
        for (int i = 0; i < count[k]; i++) {
            members[i] = malloc(16);
            scores[i] = malloc(16);
            snprintf(members[i], 16, "m:%d", first[k] + i);
            snprintf(scores[i], 16, "%d.25", (first[k] + i) % 97);
        }
        if (k == 2)
            sadd(key, count[k], (const char *const *)members, NULL);
        else
            zadd(key, count[k], (const char *const *)members, NULL, (const char *const *)scores);
        for (int i = 0; i < count[k]; i++) {
            free(members[i]);
            free(scores[i]);
        }
    }
    free(members);
    free(scores);

    static const char *const opts[] = {"AGGREGATE COUNT WITHSCORES",
                                       "WEIGHTS 0.1 0.2 0.3 0.4 0.5 AGGREGATE COUNT WITHSCORES",
                                       "AGGREGATE COUNT"};
    for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
        for (int c = 0; c < 2; c++) {
            zcall z = {
                c ? "ZINTER" : "ZUNION", NULL, 5, {"big:0", "big:1", "big:2", "big:3", "big:4"}, opts[i]};
            expect_count(&s2, &z);
            if (i < 2) expect_count(&s3, &z);
        }
    }
    expect_count(&s2, &(zcall){"ZUNIONSTORE",
                               "big:dst",
                               5,
                               {"big:0", "big:1", "big:2", "big:3", "big:4"},
                               "WEIGHTS 0.1 0.2 0.3 0.4 0.5 AGGREGATE COUNT"});
    expect_count(&s3, &(zcall){"ZINTERSTORE",
                               "big:dst",
                               5,
                               {"big:4", "big:3", "big:2", "big:1", "big:0"},
                               "AGGREGATE COUNT WEIGHTS 1 2 3 4 5"});
    sides_close(&s2);
    sides_close(&s3);
}

/* A request longer than the proxy reads at once (64 KiB) is forwarded
 * while it arrives, on an own connection, unless the proxy must rewrite
 * it: a COUNT call must be read whole first. */
#define LONG_KEY_BYTES 100000

Test(polyfill, a_call_longer_than_64_kib_is_read_whole_first)
{
    sides s[2] = {sides_open(2), sides_open(3)}; /* HELLO 3: an own connection */
    fill_fixture();
    vt_buf got = {0};
    /* SELECT 1 takes the RESP2 one to a connection of its own too */
    ask_words(s[0].proxy, &got, "SELECT", "1", NULL, NULL);
    ask_words(s[0].proxy, &got, "SELECT", "0", NULL, NULL);
    vt_assert_bytes(&got, "+OK\r\n");
    vt_buf_free(&got);
    char *key = malloc(LONG_KEY_BYTES + 1), *dest = malloc(LONG_KEY_BYTES + 1);
    memset(key, 'k', LONG_KEY_BYTES);
    memset(dest, 'd', LONG_KEY_BYTES);
    key[LONG_KEY_BYTES] = dest[LONG_KEY_BYTES] = '\0';
    sadd(key, 3, WORDS("a", "q", "f"), NULL);
    for (int p = 0; p < 2; p++) {
        expect_count(
            &s[p],
            &(zcall){"ZUNION", NULL, 3, {"za", key, "zb"}, "WEIGHTS 0.1 0.2 0.3 AGGREGATE COUNT WITHSCORES"});
        expect_count(&s[p], &(zcall){"ZINTERSTORE", dest, 2, {key, "sa"}, "AGGREGATE COUNT"});
    }
    free(key);
    free(dest);
    sides_close(&s[0]);
    sides_close(&s[1]);
}

/* ---- a randomized case ---- */

#define RANDOM_ROUNDS 150
#define RANDOM_POOL 40

static unsigned random_seed(void)
{
    const char *env_seed = getenv("VP_TEST_SEED");
    if (env_seed && *env_seed) return (unsigned)strtoul(env_seed, NULL, 10);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (unsigned)ts.tv_nsec ^ (unsigned)ts.tv_sec ^ ((unsigned)getpid() << 16);
}

static unsigned pick(unsigned *state, unsigned n)
{
    return (unsigned)(rand_r(state) % n);
}

Test(polyfill, randomized_calls_match_the_oracle)
{
    sides s[2] = {sides_open(2), sides_open(3)};
    unsigned seed = random_seed(), state = seed;
    fprintf(stderr, "polyfill/randomized_calls_match_the_oracle: seed %u (VP_TEST_SEED=%u repeats it)\n",
            seed, seed);
    /* members: short names, and the binary ones */
    const char *pool[RANDOM_POOL];
    size_t pool_lens[RANDOM_POOL];
    char names[RANDOM_POOL][8];
    for (int i = 0; i < RANDOM_POOL; i++) {
        if (i < NBINARY) {
            pool[i] = binary_members[i];
            pool_lens[i] = binary_lens[i];
        } else {
            snprintf(names[i], sizeof(names[i]), "%d", i % 3 ? i : -i); /* some integers: intsets */
            pool[i] = names[i];
            pool_lens[i] = strlen(names[i]);
        }
    }
    static const char *const score_pool[] = {"1", "-1", "0", "2.5", "inf", "-inf", "1e300", "0.1"};
    static const char *const weight_pool[] = {"1",   "2",    "-1",     "0",    "-0",   "0.1",   "0.2",  "0.3",
                                              "inf", "-inf", "0x1p-3", "1e-2", "+2.5", "1e308", "-7.25"};
    static const char *const cmds[] = {"ZUNION", "ZINTER", "ZUNIONSTORE", "ZINTERSTORE"};
    for (int round = 0; round < RANDOM_ROUNDS; round++) {
        char keys[6][16];
        zcall z = {.cmd = cmds[pick(&state, 4)], .nkeys = 1 + (int)pick(&state, 6)};
        if (is_store(z.cmd)) z.dest = "r:dst";
        for (int k = 0; k < z.nkeys; k++) {
            snprintf(keys[k], sizeof(keys[k]), "r:%d", k);
            z.keys[k] = keys[k];
            run("DEL %s", keys[k]);
            unsigned kind = pick(&state, 8);
            if (kind == 0 && k > 0) {
                z.keys[k] = z.keys[pick(&state, (unsigned)k)]; /* a key given again */
                continue;
            }
            if (kind == 1) continue; /* missing */
            const char *members[RANDOM_POOL], *scores[RANDOM_POOL];
            size_t lens[RANDOM_POOL];
            int n = 0;
            unsigned density = 2 + pick(&state, 5);
            bool integers = kind == 2; /* an intset */
            for (int i = 0; i < RANDOM_POOL; i++) {
                if (pick(&state, density) != 0) continue;
                if (integers && i < NBINARY) continue;
                members[n] = pool[i];
                lens[n] = pool_lens[i];
                scores[n++] = score_pool[pick(&state, sizeof(score_pool) / sizeof(score_pool[0]))];
            }
            if (n == 0) continue;
            if (kind <= 3)
                sadd(keys[k], n, members, lens);
            else
                zadd(keys[k], n, members, lens, scores);
        }
        /* the options, in a random order: WEIGHTS (or not), AGGREGATE
         * COUNT (maybe after another AGGREGATE it overrides), WITHSCORES */
        char parts[3][256] = {"", "", ""};
        if (pick(&state, 3)) {
            size_t used =
                (size_t)snprintf(parts[0], sizeof(parts[0]), pick(&state, 2) ? "WEIGHTS" : "weights");
            for (int k = 0; k < z.nkeys; k++)
                used +=
                    (size_t)snprintf(parts[0] + used, sizeof(parts[0]) - used, " %s",
                                     weight_pool[pick(&state, sizeof(weight_pool) / sizeof(weight_pool[0]))]);
        }
        static const char *const before[] = {"", "AGGREGATE MIN ", "aggregate max ", "AGGREGATE SUM "};
        snprintf(parts[1], sizeof(parts[1]), "%s%s", before[pick(&state, 4)],
                 pick(&state, 2) ? "AGGREGATE COUNT" : "aggregate Count");
        if (!z.dest && pick(&state, 2)) snprintf(parts[2], sizeof(parts[2]), "WITHSCORES");
        unsigned order = pick(&state, 6);
        static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
        char opts[800];
        snprintf(opts, sizeof(opts), "%s %s %s", parts[orders[order][0]], parts[orders[order][1]],
                 parts[orders[order][2]]);
        z.opts = opts;
        sides *side = &s[pick(&state, 2)];
        /* a failure names the seed and the round */
        snprintf(story, sizeof(story), "seed %u, round %d: ", seed, round);
        expect_count(side, &z);
    }
    sides_close(&s[0]);
    sides_close(&s[1]);
}

/* ---- 2. errors in Redis 8.8's order and texts ---- */

Test(polyfill, wrongtype_beats_a_later_option_error_and_leaves_the_destination)
{
    sides s = sides_open(2);
    fill_fixture();
    run("SET keep:dst untouched");
    long long before = polyfill_calls();
    const char *const *calls[] = {
        WORDS("ZUNION", "2", "za", "str", "AGGREGATE", "COUNT", "BOGUS"),
        WORDS("ZINTER", "2", "str", "missing", "AGGREGATE", "COUNT", "WEIGHTS", "x", "y"),
        WORDS("ZINTER", "2", "missing", "str", "AGGREGATE", "COUNT"),
        WORDS("ZUNIONSTORE", "keep:dst", "2", "za", "str", "AGGREGATE", "COUNT", "WITHSCORES"),
        WORDS("ZINTERSTORE", "keep:dst", "1", "str", "AGGREGATE", "COUNT", "AGGREGATE", "avg"),
    };
    for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
        expect_like_sum(&s, calls[i]);
    vt_buf got = {0};
    ask_words(s.proxy, &got, "GET", "keep:dst", NULL, NULL);
    vt_assert_bytes(&got, "$9\r\nuntouched\r\n");
    vt_buf_free(&got);
    cr_assert_eq(polyfill_calls(), before + (long long)(sizeof(calls) / sizeof(calls[0])));
    sides_close(&s);
}

Test(polyfill, option_errors_after_count_are_redis_8_8s)
{
    sides s[2] = {sides_open(2), sides_open(3)};
    fill_fixture();
    const char *const *calls[] = {
        WORDS("ZUNION", "2", "za", "zb", "AGGREGATE", "COUNT", "WEIGHTS", "x", "1"),
        WORDS("ZUNION", "2", "za", "zb", "AGGREGATE", "COUNT", "WEIGHTS", "1", "nan"),
        WORDS("ZUNION", "2", "za", "zb", "AGGREGATE", "COUNT", "WEIGHTS", "1e400", "1"),
        WORDS("ZUNION", "2", "za", "zb", "AGGREGATE", "COUNT", "WEIGHTS", "1e-400", "1"),
        WORDS("ZUNION", "2", "za", "zb", "AGGREGATE", "COUNT", "WEIGHTS", " 1", "1"),
        WORDS("ZUNION", "2", "za", "zb", "AGGREGATE", "COUNT", "WEIGHTS", "1 ", "1"),
        WORDS("ZUNION", "2", "za", "zb", "AGGREGATE", "COUNT", "WEIGHTS", "", "1"),
        WORDS("ZUNION", "2", "za", "zb", "AGGREGATE", "COUNT", "WEIGHTS", "0x", "1"),
        WORDS("ZUNION", "2", "za", "zb", "AGGREGATE", "COUNT", "WEIGHTS", "1e", "1"),
        WORDS("ZINTER", "2", "za", "zb", "AGGREGATE", "COUNT", "WEIGHTS", "1"),           /* too few */
        WORDS("ZINTER", "2", "za", "zb", "AGGREGATE", "COUNT", "WEIGHTS", "1", "2", "3"), /* too many */
        WORDS("ZUNION", "2", "za", "zb", "AGGREGATE", "COUNT", "AGGREGATE"),
        WORDS("ZUNION", "2", "za", "zb", "AGGREGATE", "COUNT", "AGGREGATE", "avg"),
        WORDS("ZUNION", "2", "za", "zb", "AGGREGATE", "COUNT", "BOGUS"),
        WORDS("ZUNION", "2", "za", "zb", "AGGREGATE", "COUNT", "WITHSCORE"),
        WORDS("ZINTER", "1", "za", "AGGREGATE", "COUNT", "LIMIT", "1"),
        WORDS("ZUNIONSTORE", "e:dst", "2", "za", "zb", "AGGREGATE", "COUNT", "WITHSCORES"),
        WORDS("ZINTERSTORE", "e:dst", "2", "za", "zb", "WITHSCORES", "AGGREGATE", "COUNT"),
        WORDS("ZINTERSTORE", "e:dst", "2", "za", "zb", "AGGREGATE", "COUNT", "WEIGHTS", "1", "x"),
        WORDS("ZUNIONSTORE", "e:dst", "1", "za", "AGGREGATE", "COUNT", "WEIGHTS"),
    };
    long long before = polyfill_calls();
    for (int p = 0; p < 2; p++)
        for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
            expect_like_sum(&s[p], calls[i]);
    /* every one of them is a COUNT call but the one where Redis refuses
     * WITHSCORES before it reads AGGREGATE COUNT */
    cr_assert_eq(polyfill_calls(), before + 2 * (long long)(sizeof(calls) / sizeof(calls[0]) - 1),
                 "polyfill_calls: %lld before, %lld after", before, polyfill_calls());
    sides_close(&s[0]);
    sides_close(&s[1]);
}

Test(polyfill, option_words_are_read_up_to_a_nul_byte_as_redis_reads_them)
{
    sides s[2] = {sides_open(2), sides_open(3)};
    fill_fixture();
    static const zcall calls[] = {
        {"ZUNION", NULL, 2, {"za", "zb"}, "AGGREGATE COUNT^@x WITHSCORES"},
        {"ZUNION", NULL, 2, {"za", "zb"}, "AGGREGATE^@ count WITHSCORES^@zz"},
        {"ZINTER", NULL, 2, {"za", "zc"}, "WEIGHTS^@ 0.1 0.2 AGGREGATE COUNT WITHSCORES"},
        {"ZINTER", NULL, 2, {"za", "zc"}, "AGGREGATE COUNT weights^@x 0.1 0.2 WITHSCORES"},
        {"ZUNIONSTORE", "nul:dst", 2, {"za", "zb"}, "AGGREGATE count^@"},
    };
    for (int p = 0; p < 2; p++)
        for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
            expect_count(&s[p], &calls[i]);
    sides_close(&s[0]);
    sides_close(&s[1]);
}

Test(polyfill, a_later_aggregate_wins_and_redis_runs_its_own_command)
{
    sides s[2] = {sides_open(2), sides_open(3)};
    fill_fixture();
    const char *const *calls[] = {
        WORDS("ZUNION", "2", "za", "zb", "AGGREGATE", "COUNT", "AGGREGATE", "MAX", "WITHSCORES"),
        WORDS("ZUNION", "2", "za", "zb", "AGGREGATE", "COUNT", "AGGREGATE", "min"),
        WORDS("ZINTER", "3", "za", "zb", "zc", "AGGREGATE", "COUNT", "WEIGHTS", "2", "0.5", "-1", "AGGREGATE",
              "sum", "WITHSCORES"),
        WORDS("ZINTER", "2", "zc", "sa", "WITHSCORES", "AGGREGATE", "count", "AGGREGATE", "Max", "WEIGHTS",
              "1", "1", "WEIGHTS", "3", "0.1"),
        WORDS("ZUNION", "2", "za", "missing", "AGGREGATE", "COUNT", "AGGREGATE", "MIN", "WITHSCORES",
              "WITHSCORES"),
        WORDS("ZUNIONSTORE", "w:dst", "2", "za", "zb", "AGGREGATE", "COUNT", "AGGREGATE", "MAX"),
        WORDS("ZINTERSTORE", "w:dst", "2", "za", "zc", "AGGREGATE", "COUNT", "WEIGHTS", "0.1", "0.2",
              "AGGREGATE", "SUM"),
        WORDS("ZINTERSTORE", "w:dst", "2", "za", "missing", "AGGREGATE", "COUNT", "AGGREGATE", "MIN"),
    };
    for (int p = 0; p < 2; p++)
        for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
            expect_like_sum(&s[p], calls[i]);
    sides_close(&s[0]);
    sides_close(&s[1]);
}

Test(polyfill, numkeys_errors_pass_through_untouched)
{
    sides s[2] = {sides_open(2), sides_open(3)};
    fill_fixture();
    const char *const *calls[] = {
        WORDS("ZUNION", "0", "za", "AGGREGATE", "COUNT"),
        WORDS("ZUNION", "0", "AGGREGATE", "COUNT"), /* the options would start at once */
        WORDS("ZINTERSTORE", "n:dst", "0", "AGGREGATE", "COUNT"),
        WORDS("ZINTER", "-1", "za", "AGGREGATE", "COUNT"),
        WORDS("ZUNION", "abc", "za", "AGGREGATE", "COUNT"),
        WORDS("ZUNION", "1.5", "za", "AGGREGATE", "COUNT"),
        WORDS("ZUNION", "+1", "za", "AGGREGATE", "COUNT"),
        WORDS("ZUNION", "01", "za", "AGGREGATE", "COUNT"),
        WORDS("ZUNION", "-0", "za", "AGGREGATE", "COUNT"),
        WORDS("ZUNION", " 1", "za", "AGGREGATE", "COUNT"),
        WORDS("ZUNION", "99999999999999999999", "za", "AGGREGATE", "COUNT"),
        WORDS("ZUNION", "9223372036854775807", "za", "AGGREGATE", "COUNT"),
        WORDS("ZINTER", "5", "za", "AGGREGATE", "COUNT"),
        WORDS("ZINTER", "4", "za", "zb", "AGGREGATE", "COUNT"),
        WORDS("ZUNIONSTORE", "n:dst", "0", "za", "AGGREGATE", "COUNT"),
        WORDS("ZINTERSTORE", "n:dst", "x", "za", "AGGREGATE", "COUNT"),
        WORDS("ZUNIONSTORE", "n:dst", "4", "za", "AGGREGATE", "COUNT"),
        WORDS("ZINTERSTORE", "n:dst", "-5", "AGGREGATE", "COUNT"),
        WORDS("ZUNION", "1"),               /* arity */
        WORDS("ZUNIONSTORE", "n:dst", "1"), /* arity */
    };
    long long before = polyfill_calls();
    for (int p = 0; p < 2; p++)
        for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
            expect_untouched(&s[p], calls[i]);
    cr_assert_eq(polyfill_calls(), before,
                 "numkeys errors are Redis's: polyfill_calls moved from %lld to %lld", before,
                 polyfill_calls());
    sides_close(&s[0]);
    sides_close(&s[1]);
}

Test(polyfill, calls_without_aggregate_count_are_never_touched)
{
    sides s[2] = {sides_open(2), sides_open(3)};
    fill_fixture();
    zadd("AGGREGATE", 2, WORDS("a", "b"), NULL, WORDS("1", "2"));
    zadd("COUNT", 2, WORDS("b", "c"), NULL, WORDS("3", "4"));
    const char *const *calls[] = {
        WORDS("ZUNION", "2", "za", "zb", "WITHSCORES"),
        WORDS("ZUNION", "2", "za", "zb", "AGGREGATE", "SUM", "WITHSCORES"),
        WORDS("ZINTER", "2", "za", "zb", "AGGREGATE", "MIN", "WEIGHTS", "2", "3", "WITHSCORES"),
        WORDS("ZUNION", "2", "AGGREGATE", "COUNT"),                           /* two keys */
        WORDS("ZUNION", "2", "AGGREGATE", "COUNT", "WITHSCORES"),             /* two keys */
        WORDS("ZINTER", "3", "za", "AGGREGATE", "COUNT", "AGGREGATE", "MAX"), /* three keys */
        WORDS("ZUNIONSTORE", "COUNT", "2", "AGGREGATE", "za"),
        WORDS("ZUNION", "2", "za", "zb", "WEIGHTS", "COUNT", "1", "AGGREGATE",
              "COUNT"),                                                         /* weight error first */
        WORDS("ZUNION", "2", "za", "zb", "WEIGHTS", "1", "AGGREGATE", "COUNT"), /* "AGGREGATE" as a weight */
        WORDS("ZUNION", "2", "za", "zb", "BOGUS", "AGGREGATE", "COUNT"),        /* syntax error first */
        WORDS("ZUNION", "2", "za", "zb", "AGGREGATE", "avg", "AGGREGATE", "COUNT"),
        WORDS("ZUNION", "2", "za", "zb", "AGGREGATE", "SUM", "COUNT"),
        WORDS("ZUNION", "2", "za", "zb", "COUNT"),
        WORDS("ZUNION", "2", "za", "zb", "AGGREGATE"),
        WORDS("ZUNION", "1", "za", "WITHSCORES", "AGGREGATE"),
        WORDS("ZUNIONSTORE", "t:dst", "2", "za", "zb", "BOGUS", "AGGREGATE", "COUNT"),
        WORDS("ZUNIONSTORE", "t:dst", "2", "za", "zb", "AGGREGATE", "MAX"),
        WORDS("ZDIFF", "2", "za", "zb", "AGGREGATE", "COUNT"),
        WORDS("ZDIFFSTORE", "t:dst", "2", "za", "zb", "AGGREGATE", "COUNT"),
        WORDS("ZINTERCARD", "2", "za", "zb", "AGGREGATE", "COUNT"),
        WORDS("ZUNIONS", "2", "za", "zb", "AGGREGATE", "COUNT"),
        WORDS("SUNION", "AGGREGATE", "COUNT"),
    };
    long long before = polyfill_calls();
    for (int p = 0; p < 2; p++)
        for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
            expect_untouched(&s[p], calls[i]);
    cr_assert_eq(polyfill_calls(), before, "polyfill_calls moved from %lld to %lld", before,
                 polyfill_calls());
    sides_close(&s[0]);
    sides_close(&s[1]);
}

/* ---- 3. aggregate-count-polyfill no | yes (auto: every story above) ---- */

Test(polyfill_no, the_call_reaches_redis_untouched)
{
    sides s[2] = {sides_open(2), sides_open(3)};
    run("ZADD za 1 a 2 b");
    const char *const *calls[] = {
        WORDS("ZUNION", "1", "za", "AGGREGATE", "COUNT", "WITHSCORES"),
        WORDS("ZINTER", "2", "za", "za", "WEIGHTS", "1", "2", "aggregate", "count"),
        WORDS("ZUNIONSTORE", "no:dst", "1", "za", "AGGREGATE", "COUNT"),
        WORDS("ZINTERSTORE", "no:dst", "1", "za", "AGGREGATE", "COUNT", "AGGREGATE", "MAX"),
    };
    long long before = polyfill_calls();
    vt_buf got = {0};
    for (int p = 0; p < 2; p++) {
        for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
            expect_untouched(&s[p], calls[i]);
        args a;
        words_args(calls[0], &a);
        ask(s[p].proxy, &a, &got);
        vt_assert_bytes(&got, SYNTAX_ERROR); /* Redis 7.0's */
    }
    vt_buf_free(&got);
    cr_assert_eq(polyfill_calls(), before);
    sides_close(&s[0]);
    sides_close(&s[1]);
}

Test(polyfill_yes, the_call_runs_as_the_proxys_script)
{
    sides s[2] = {sides_open(2), sides_open(3)};
    fill_fixture();
    long long before = polyfill_calls();
    for (int p = 0; p < 2; p++) {
        expect_count(
            &s[p],
            &(zcall){
                "ZUNION", NULL, 3, {"zc", "sa", "za"}, "WEIGHTS 0.1 0.2 0.3 AGGREGATE COUNT WITHSCORES"});
        expect_count(&s[p], &(zcall){"ZINTER", NULL, 2, {"zbin", "sbin"}, "AGGREGATE COUNT WITHSCORES"});
        expect_count(&s[p], &(zcall){"ZUNIONSTORE", "yes:dst", 2, {"za", "zb"}, "AGGREGATE COUNT"});
        expect_count(&s[p], &(zcall){"ZINTERSTORE", "yes:dst", 2, {"za", "missing"}, "AGGREGATE COUNT"});
    }
    cr_assert_eq(polyfill_calls(), before + 8);
    sides_close(&s[0]);
    sides_close(&s[1]);
}

/* ---- 4. the client's protocol on its own connection, MULTI ---- */

/* A call whose reply shows the protocol. */
static const zcall resp_probe = {"ZUNION", NULL, 3, {"zc", "sa", "za"}, "AGGREGATE COUNT WITHSCORES"};

/* Send `pre` (commands with `pre_replies` replies, which must be
 * `pre_want` unless it is NULL: a HELLO's map holds an id) and the COUNT
 * call z in one write on fd, a connection to the proxy; the call's reply
 * must be the oracle's in RESP `resp`. */
static void expect_after_on(int fd, const char *what, const vt_buf *pre, size_t pre_replies,
                            const char *pre_want, const zcall *z, int resp)
{
    VT_SKIP_IF_DIRECT();
    int oracle = raw_open(env.redis->port, resp, password);
    args proxy_call, oracle_call;
    zcall_args(z, false, &proxy_call);
    zcall_args(z, true, &oracle_call);
    make_copies(z);
    vt_buf want = {0}, got = {0}, req = {0};
    ask(oracle, &oracle_call, &want);

    if (pre->len) vt_buf_append(&req, pre->data, pre->len);
    vt_buf_cmd_argv(&req, proxy_call.argc, proxy_call.argv, proxy_call.lens);
    cr_assert(vt_sock_send_buf(fd, &req));
    read_replies(fd, &got, pre_replies + 1, what);
    if (pre_want) {
        size_t n = strlen(pre_want);
        cr_assert(got.len >= n && memcmp(got.data, pre_want, n) == 0, "%s: expected \"%s\" first, got \"%s\"",
                  what, vt_escape(pre_want, n), vt_buf_escaped(&got));
    }
    skip_replies(&got, pre_replies);
    char shown[1024], full[1200];
    snprintf(full, sizeof(full), "%s, then %s: the call's reply in RESP%d", what,
             args_show(&proxy_call, shown, sizeof(shown)), resp);
    same_bytes(full, &want, &got);
    vt_buf_free(&want);
    vt_buf_free(&got);
    vt_buf_free(&req);
    close(oracle);
}

/* The same on a new connection. */
static void expect_after(const char *what, const vt_buf *pre, size_t pre_replies, const char *pre_want,
                         const zcall *z, int resp)
{
    VT_SKIP_IF_DIRECT();
    int fd = vt_must_sock(env.proxy->port);
    expect_after_on(fd, what, pre, pre_replies, pre_want, z, resp);
    close(fd);
}

/* Commands pipelined with the call (up to three, of up to two words
 * each), and the protocol its reply must then be in. */
typedef struct protocol_step {
    const char *cmd[3][2];
    int resp;
} protocol_step;

/* Each step in one write with resp_probe: on fd, or (fd < 0) each on a
 * new connection. */
static void expect_steps(int fd, const protocol_step *steps, size_t n)
{
    vt_buf pre = {0};
    for (size_t i = 0; i < n; i++) {
        char what[128] = "";
        size_t k = 0;
        vt_buf_reset(&pre);
        for (; k < 3 && steps[i].cmd[k][0]; k++) {
            const char *const *c = steps[i].cmd[k];
            vt_buf_cmd(&pre, c[0], c[1], NULL);
            snprintf(what + strlen(what), sizeof(what) - strlen(what), "%s%s%s%s", k ? ", " : "", c[0],
                     c[1] ? " " : "", c[1] ? c[1] : "");
        }
        if (fd >= 0)
            expect_after_on(fd, what, &pre, k, NULL, &resp_probe, steps[i].resp);
        else
            expect_after(what, &pre, k, NULL, &resp_probe, steps[i].resp);
    }
    vt_buf_free(&pre);
}

Test(polyfill, a_hello_or_reset_pipelined_with_the_first_call_says_its_protocol)
{
    fill_fixture();
    static const protocol_step steps[] = {
        {{{"HELLO", "3"}}, 3},
        {{{"HELLO", "3"}, {"HELLO", NULL}}, 3}, /* HELLO without a version keeps RESP3 */
        {{{"HELLO", "3"}, {"HELLO", "4"}}, 3},  /* a refused HELLO changes nothing */
        {{{"HELLO", "3"}, {"RESET", NULL}}, 2},
        {{{"HELLO", "3"}, {"HELLO", "2"}}, 2},
        {{{"HELLO", "3"}, {"RESET", NULL}, {"HELLO", "3"}}, 3},
    };
    expect_steps(-1, steps, sizeof(steps) / sizeof(steps[0]));
}

Test(polyfill, the_protocol_is_followed_over_a_connections_life)
{
    VT_SKIP_IF_DIRECT();
    fill_fixture();
    int fd = vt_must_sock(env.proxy->port);
    vt_buf none = {0};
    expect_after_on(fd, "a new connection", &none, 0, NULL, &resp_probe, 2);
    /* from here on the proxy knows the server: each HELLO and RESET,
     * pipelined with the call, says the protocol */
    static const protocol_step steps[] = {
        {{{"HELLO", "3"}}, 3},
        {{{"HELLO", "2"}}, 2},
        {{{"HELLO", "3"}}, 3},
        {{{"HELLO", NULL}}, 3},
        {{{"RESET", NULL}}, 2},
        {{{"HELLO", "3"}, {"RESET", NULL}}, 2}, /* HELLO answered after the RESET was sent */
        {{{"HELLO", "3"}}, 3},
        {{{"HELLO", "4"}}, 3},
        {{{"HELLO", "2"}, {"HELLO", "3"}}, 3},
        {{{"RESET", NULL}, {"HELLO", "3"}}, 3},
        {{{"RESET", NULL}}, 2},
    };
    expect_steps(fd, steps, sizeof(steps) / sizeof(steps[0]));
    close(fd);

    /* one round trip at a time */
    sides s = sides_open(2);
    vt_buf got = {0};
    ask_words(s.proxy, &got, "HELLO", "3", NULL, NULL);
    ask_words(s.proxy, &got, "HELLO", "2", NULL, NULL);
    cr_assert(got.data[0] == '*', "HELLO 2: \"%s\"", vt_buf_escaped(&got));
    expect_count(&s, &resp_probe);
    ask_words(s.proxy, &got, "HELLO", "3", NULL, NULL);
    ask_words(s.proxy, &got, "RESET", NULL, NULL, NULL);
    vt_assert_bytes(&got, "+RESET\r\n");
    expect_count(&s, &resp_probe);
    vt_buf_free(&got);
    sides_close(&s);
}

Test(polyfill, a_hello_3_queued_in_a_transaction_switches_the_protocol_at_exec)
{
    fill_fixture();
    sides s = sides_open(3);
    close(s.proxy);
    s.proxy = vt_must_sock(env.proxy->port);
    vt_buf got = {0}, req = {0};
    vt_buf_cmd(&req, "MULTI", NULL);
    vt_buf_cmd(&req, "HELLO", "3", NULL);
    vt_buf_cmd(&req, "EXEC", NULL);
    cr_assert(vt_sock_send_buf(s.proxy, &req));
    read_replies(s.proxy, &got, 3, "MULTI, HELLO 3, EXEC");
    cr_assert(vt_buf_contains(&got, "+QUEUED\r\n*1\r\n%7\r\n"), "EXEC should hold HELLO's map: \"%s\"",
              vt_buf_escaped(&got));
    expect_count(&s, &resp_probe);
    vt_buf_free(&got);
    vt_buf_free(&req);
    sides_close(&s);
}

/* The COUNT calls appended to the request for the proxy, and as the
 * oracle's SUM calls (their copies made) to the request for Redis. */
static void append_calls(vt_buf *proxy_req, vt_buf *oracle_req, const zcall *calls, int n)
{
    for (int i = 0; i < n; i++) {
        args a;
        make_copies(&calls[i]);
        zcall_args(&calls[i], true, &a);
        vt_buf_cmd_argv(oracle_req, a.argc, a.argv, a.lens);
        zcall_args(&calls[i], false, &a);
        vt_buf_cmd_argv(proxy_req, a.argc, a.argv, a.lens);
    }
}

/* The COUNT calls in one write each way, in MULTI/EXEC if `transaction`,
 * after `pre` (pre_replies replies, not compared) on the proxy's side:
 * the replies (+QUEUED and EXEC's too) are the oracle's, and then the
 * destinations. */
static void expect_batch(const sides *s, const vt_buf *pre, size_t pre_replies, const zcall *calls, int n,
                         bool transaction)
{
    vt_buf want = {0}, got = {0}, oreq = {0}, preq = {0};
    if (pre->len) vt_buf_append(&preq, pre->data, pre->len);
    if (transaction) {
        vt_buf_cmd(&oreq, "MULTI", NULL);
        vt_buf_cmd(&preq, "MULTI", NULL);
    }
    append_calls(&preq, &oreq, calls, n);
    if (transaction) {
        vt_buf_cmd(&oreq, "EXEC", NULL);
        vt_buf_cmd(&preq, "EXEC", NULL);
    }
    size_t replies = (size_t)n + (transaction ? 2 : 0);
    cr_assert(vt_sock_send_buf(s->redis, &oreq));
    read_replies(s->redis, &want, replies, "the oracle's calls");
    cr_assert(vt_sock_send_buf(s->proxy, &preq));
    read_replies(s->proxy, &got, pre_replies + replies, "the calls");
    skip_replies(&got, pre_replies);
    char what[256];
    snprintf(what, sizeof(what), "%s%d COUNT calls%s in one write (RESP%d, %zu commands before)",
             transaction ? "MULTI, " : "", n, transaction ? ", EXEC" : "", s->resp, pre_replies);
    same_bytes(what, &want, &got);
    for (int i = 0; i < n; i++)
        if (calls[i].dest) {
            char oracle_dest[256];
            snprintf(oracle_dest, sizeof(oracle_dest), COPY_PREFIX "%s", calls[i].dest);
            same_destination(s, what, calls[i].dest, oracle_dest);
        }
    vt_buf_free(&want);
    vt_buf_free(&got);
    vt_buf_free(&oreq);
    vt_buf_free(&preq);
}

static const zcall tx_calls[] = {
    {"ZUNION", NULL, 3, {"zc", "sa", "za"}, "AGGREGATE COUNT WITHSCORES"},
    {"ZINTER", NULL, 2, {"zbin", "sbin"}, "WEIGHTS 0.1 0.2 AGGREGATE COUNT WITHSCORES"},
    {"ZUNIONSTORE", "tx:dst", 2, {"za", "zb"}, "WEIGHTS inf -inf AGGREGATE COUNT"},
    {"ZINTER", NULL, 2, {"za", "missing"}, "AGGREGATE COUNT"},
    {"ZUNION", NULL, 2, {"za", "zb"}, "AGGREGATE COUNT BOGUS"}, /* errors fail alone in EXEC */
    {"ZINTER", NULL, 2, {"za", "str"}, "AGGREGATE COUNT WITHSCORES"},
};
#define NTX ((int)(sizeof(tx_calls) / sizeof(tx_calls[0])))

Test(polyfill, in_multi_exec_each_element_is_redis_8_8s_answer)
{
    fill_fixture();
    vt_buf none = {0};
    for (int resp = 2; resp <= 3; resp++) {
        sides s = sides_open(resp);
        expect_batch(&s, &none, 0, tx_calls, NTX, true);
        sides_close(&s);
    }
}

Test(polyfill, a_hello_3_not_yet_answered_before_multi_skip_or_subscribe_still_says_resp3)
{
    fill_fixture();
    /* HELLO 3, MULTI, the calls, EXEC in one write */
    VT_SKIP_IF_DIRECT();
    sides s = {
        .proxy = vt_must_sock(env.proxy->port), .redis = raw_open(env.redis->port, 3, NULL), .resp = 3};
    vt_buf pre = {0};
    vt_buf_cmd(&pre, "HELLO", "3", NULL);
    expect_batch(&s, &pre, 1, tx_calls, NTX, true);
    sides_close(&s);

    /* HELLO 3, CLIENT REPLY SKIP, PING (unanswered), the call */
    vt_buf_cmd(&pre, "CLIENT", "REPLY", "SKIP", NULL);
    vt_buf_cmd(&pre, "PING", NULL);
    expect_after("HELLO 3, CLIENT REPLY SKIP, PING", &pre, 1, NULL, &resp_probe, 3);

    /* HELLO 3, SUBSCRIBE (RESP3 allows commands while subscribed) */
    vt_buf_reset(&pre);
    vt_buf_cmd(&pre, "HELLO", "3", NULL);
    vt_buf_cmd(&pre, "SUBSCRIBE", "pf:channel", NULL);
    expect_after("HELLO 3, SUBSCRIBE", &pre, 2, NULL, &resp_probe, 3);
    vt_buf_free(&pre);
}

Test(polyfill, after_a_script_flush_behind_the_proxys_back_the_calls_still_answer)
{
    fill_fixture();
    vt_buf none = {0};
    for (int resp = 2; resp <= 3; resp++) {
        sides s = sides_open(resp);
        expect_batch(&s, &none, 0, tx_calls, NTX, false); /* the scripts are loaded */
        long long recovered = vt_proxy_stat(env.proxy->port, "noscript_recoveries");
        run("SCRIPT FLUSH");
        expect_batch(&s, &none, 0, tx_calls, NTX, false);
        cr_assert_gt(vt_proxy_stat(env.proxy->port, "noscript_recoveries"), recovered,
                     "the calls met no NOSCRIPT: the story did not happen");
        sides_close(&s);
    }
}

/* ---- a Redis that refuses HELLO ---- */

/* A STORE variant to check beside resp_probe. */
static const zcall store_probe = {"ZUNIONSTORE", "au:dst", 2, {"za", "zb"}, "AGGREGATE COUNT"};

static void setup_nohello(void)
{
    static const char *const args[] = {"--rename-command", "HELLO", "", NULL};
    password = NULL;
    vt_env_start(&env, &(vt_redis_opts){.extra_args = args}, NULL);
}

TestSuite(polyfill_nohello, .init = setup_nohello, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

Test(polyfill_nohello, where_the_server_refuses_hello_the_script_answers)
{
    fill_fixture();
    for (int own = 0; own < 2; own++) {
        sides s = sides_open(2);
        vt_buf got = {0};
        if (own) {
            /* SELECT 1 takes it to a connection of its own */
            ask_words(s.proxy, &got, "SELECT", "1", NULL, NULL);
            ask_words(s.proxy, &got, "SELECT", "0", NULL, NULL);
            vt_assert_bytes(&got, "+OK\r\n");
        }
        expect_count(&s, &resp_probe);
        expect_count(&s, &store_probe);
        expect_count(&s, &resp_probe);
        /* a HELLO queued in a transaction (refused) leaves the protocol
         * unsure until the proxy asks, which is refused too */
        ask_words(s.proxy, &got, "MULTI", NULL, NULL, NULL);
        ask_words(s.proxy, &got, "HELLO", "3", NULL, NULL);
        ask_words(s.proxy, &got, "EXEC", NULL, NULL, NULL);
        cr_assert(got.len > 0 && got.data[0] == '-', "EXEC after an unknown command: \"%s\"",
                  vt_buf_escaped(&got));
        expect_count(&s, &resp_probe);
        vt_buf_free(&got);
        sides_close(&s);
    }
}

/* ---- 5. a password-protected Redis ---- */

#define PASSWORD "s3cret-pass"
#define NOAUTH "-NOAUTH Authentication required.\r\n"

static void setup_auth(void)
{
    start(PASSWORD, NULL);
}

TestSuite(polyfill_auth, .init = setup_auth, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

/* The COUNT call z on fd before AUTH: -NOAUTH, as any command. */
static void expect_noauth(int fd, const zcall *z)
{
    args a;
    zcall_args(z, false, &a);
    vt_buf got = {0};
    ask(fd, &a, &got);
    vt_assert_bytes(&got, NOAUTH);
    vt_buf_free(&got);
}

static void auth_on(int fd)
{
    vt_buf got = {0};
    ask_words(fd, &got, "AUTH", PASSWORD, NULL, NULL);
    vt_assert_bytes(&got, "+OK\r\n");
    vt_buf_free(&got);
}

Test(polyfill_auth, before_auth_the_call_gets_noauth_and_after_auth_it_works)
{
    VT_SKIP_IF_DIRECT();
    fill_fixture();
    sides s = {
        .proxy = vt_must_sock(env.proxy->port), .redis = raw_open(env.redis->port, 2, PASSWORD), .resp = 2};
    long long lost = vt_proxy_stat(env.proxy->port, "upstream_lost");
    expect_noauth(s.proxy, &resp_probe);
    expect_noauth(s.proxy, &store_probe);
    expect_noauth(s.proxy, &resp_probe);
    /* no upstream connection was closed under it (or anyone) */
    cr_assert_eq(vt_proxy_stat(env.proxy->port, "upstream_lost"), lost, "an upstream connection was lost");
    auth_on(s.proxy);
    expect_count(&s, &resp_probe);
    expect_count(&s, &store_probe);
    close(s.proxy);

    /* pipelined: the call, AUTH, the call */
    vt_buf pre = {0};
    args a;
    zcall_args(&resp_probe, false, &a);
    vt_buf_cmd_argv(&pre, a.argc, a.argv, a.lens);
    vt_buf_cmd(&pre, "AUTH", PASSWORD, NULL);
    expect_after("the call, AUTH", &pre, 2, NOAUTH "+OK\r\n", &resp_probe, 2);
    /* the call, HELLO 3 AUTH, the call: RESP3 from there on */
    vt_buf_reset(&pre);
    vt_buf_cmd_argv(&pre, a.argc, a.argv, a.lens);
    vt_buf_cmd(&pre, "HELLO", "3", "AUTH", "default", PASSWORD, NULL);
    expect_after("the call, HELLO 3 AUTH", &pre, 2, NOAUTH "%7\r\n", &resp_probe, 3);
    vt_buf_free(&pre);
    close(s.redis);
}

static void own_connection_before_auth(void)
{
    VT_SKIP_IF_DIRECT();
    fill_fixture();
    sides s = {
        .proxy = vt_must_sock(env.proxy->port), .redis = raw_open(env.redis->port, 2, PASSWORD), .resp = 2};
    /* SELECT 1 takes it to a connection of its own (whatever Redis says) */
    vt_buf got = {0};
    ask_words(s.proxy, &got, "SELECT", "1", NULL, NULL);
    vt_assert_bytes(&got, NOAUTH);
    expect_noauth(s.proxy, &resp_probe);
    expect_noauth(s.proxy, &store_probe);
    /* a HELLO queued in a transaction leaves the protocol unsure */
    ask_words(s.proxy, &got, "MULTI", NULL, NULL, NULL);
    ask_words(s.proxy, &got, "HELLO", "3", NULL, NULL);
    ask_words(s.proxy, &got, "EXEC", NULL, NULL, NULL);
    expect_noauth(s.proxy, &resp_probe);
    cr_assert_eq(vt_proxy_stat(env.proxy->port, "upstream_lost"), 0, "an upstream connection was lost");
    auth_on(s.proxy);
    ask_words(s.proxy, &got, "SELECT", "0", NULL, NULL);
    vt_assert_bytes(&got, "+OK\r\n");
    expect_count(&s, &resp_probe);
    expect_count(&s, &store_probe);
    vt_buf_free(&got);
    sides_close(&s);
}

Test(polyfill_auth, a_client_on_its_own_connection_before_auth_is_answered_too)
{
    own_connection_before_auth();
}

static void setup_auth_yes(void)
{
    start(PASSWORD, "yes");
}

TestSuite(polyfill_auth_yes, .init = setup_auth_yes, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

Test(polyfill_auth_yes, a_client_on_its_own_connection_before_auth_is_answered_too)
{
    own_connection_before_auth();
}

/* ---- 6. bystanders ---- */

#define BYSTANDER_ROUNDS 40

/* A pipeline of COUNT calls (and a PING between) in one write, in RESP
 * `resp`: the request for the proxy and the replies it must get. */
static void pipeline_of_calls(int resp, vt_buf *req, vt_buf *want)
{
    static const zcall calls[] = {
        {"ZUNION", NULL, 3, {"zc", "sa", "za"}, "AGGREGATE COUNT WITHSCORES"},
        {"ZINTER", NULL, 2, {"zbin", "sbin"}, "AGGREGATE COUNT WITHSCORES"},
        {"ZUNION", NULL, 4, {"zb", "si", "zc", "sa"}, "WEIGHTS 0.1 0.2 0.3 0.4 AGGREGATE COUNT WITHSCORES"},
        {"ZUNIONSTORE", "by:dst", 2, {"za", "zb"}, "AGGREGATE COUNT"},
        {"ZINTER", NULL, 2, {"za", "missing"}, "AGGREGATE COUNT"},
    };
    int ncalls = (int)(sizeof(calls) / sizeof(calls[0]));
    int redis = raw_open(env.redis->port, resp, NULL);
    vt_buf oreq = {0};
    int n = 0;
    for (int rep = 0; rep < 8; rep++) {
        append_calls(req, &oreq, calls, ncalls);
        vt_buf_cmd(&oreq, "PING", NULL);
        vt_buf_cmd(req, "PING", NULL);
        n += ncalls + 1;
    }
    cr_assert(vt_sock_send_buf(redis, &oreq));
    read_replies(redis, want, (size_t)n, "the oracle's pipeline");
    vt_buf_free(&oreq);
    close(redis);
}

Test(polyfill, bystanders_pipelining_beside_count_calls_get_every_reply)
{
    VT_SKIP_IF_DIRECT();
    fill_fixture();
    vt_buf req[2] = {{0}}, want[2] = {{0}}, got = {0};
    pipeline_of_calls(2, &req[0], &want[0]);
    pipeline_of_calls(3, &req[1], &want[1]);
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, 4, 50);
    /* one client on the shared connection (RESP2), one on its own (RESP3) */
    int fd[2] = {raw_open(env.proxy->port, 2, NULL), raw_open(env.proxy->port, 3, NULL)};
    for (int round = 0; round < BYSTANDER_ROUNDS; round++) {
        for (int p = 0; p < 2; p++) {
            vt_buf_reset(&got);
            cr_assert(vt_sock_send_buf(fd[p], &req[p]));
            vt_sock_read_len(fd[p], &got, want[p].len, VT_READ_DEADLINE_MS);
            char what[96];
            snprintf(what, sizeof(what), "round %d: a pipeline of COUNT calls in RESP%d", round, p + 2);
            same_bytes(what, &want[p], &got);
        }
    }
    cr_assert(vt_bystanders_wait(b, 50, VT_READ_DEADLINE_MS), "the bystanders stopped being served");
    vt_assert_bystanders_ok(b);
    for (int p = 0; p < 2; p++) {
        close(fd[p]);
        vt_buf_free(&req[p]);
        vt_buf_free(&want[p]);
    }
    vt_buf_free(&got);
}

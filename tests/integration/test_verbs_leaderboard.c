/* test_verbs_leaderboard.c - a leaderboard's two verbs, ZPAGE and ZSNAPSHOT,
 * as a user sees them (docs/verbs.md is the contract told here:
 * docs/verbs.md#zpage, docs/verbs.md#zsnapshot and
 * docs/verbs.md#leaderboards-zpage-zsnapshot-aggregate-count).
 *
 * ZPAGE pages through a sorted set that changes under the reader: a page is
 * the members strictly after the last one the reader saw, by (score,
 * member), whether or not that member is still there. The story that needs
 * it: paging a leaderboard by rank (ZRANGE REV start stop) shows a member
 * twice when another climbs above it between two pages; ZPAGE shows every
 * member that did not move exactly once. Pages are compared with Redis's
 * own order (ZRANGE ... WITHSCORES of the set as it is when the page is
 * read): a still set walked in pages of every size, a cursor whose member
 * was removed or rescored (after each member of a set, each change), scores
 * at the edges of the doubles, ties of binary members, and long walks while
 * other members are added, removed and rescored between the pages, by
 * another client or inside the same transaction (seeded: a failure names
 * its seed, and VP_TEST_SEED=<n> runs that walk again).
 *
 * ZSNAPSHOT builds a union once, with a time to live: its content is
 * compared with what ZUNIONSTORE of the same arguments builds on Redis
 * itself, byte for byte; AGGREGATE COUNT (which this Redis lacks) with what
 * ZUNIONSTORE builds from copies of the sources as plain sets, where every
 * member scores 1. Eight clients racing for one snapshot get one builder
 * and one content. A ttl-ms at the int64 edge with a union that outlasts
 * the room left still gives the snapshot its TTL (and ZWINDOW's window the
 * same, told here as the same finding); a snapshot found with no TTL is
 * given one and rebuilt after it.
 *
 * Argument errors are the proxy's, each pipelined with an ECHO that must be
 * answered right after it; then each verb's script, called directly with
 * EVALSHA, refuses the same calls with the same texts.
 *
 * VP_TEST_DIRECT=1: Redis itself has no such commands; the suite skips. */
#include <limits.h>
#include <pthread.h>
#include <strings.h>
#include <time.h>

#include "proxy/verbs/script_text.h"
#include "tests/support/checks.h"
#include "tests/support/expect.h"
#include "tests/support/rng.h"

static vt_env env;

static void setup(void)
{
    vt_env_start(&env, NULL, NULL);
}

static void teardown(void)
{
    vt_env_stop(&env);
}

/* One timeout for every test of the file, long enough for the big unions
 * under ASan on a busy machine (about 9 s on an idle one). Not one per
 * test: when the tests of one run have different timeouts, criterion's
 * runner leaks a timeout record, and LeakSanitizer fails the run for it. */
#define TIMEOUT_S 120

TestSuite(zpage, .init = setup, .fini = teardown, .timeout = TIMEOUT_S);
TestSuite(zsnapshot, .init = setup, .fini = teardown, .timeout = TIMEOUT_S);

#define WRONGTYPE "-WRONGTYPE Operation against a key holding the wrong kind of value"
#define ERR_SYNTAX "ERR syntax error"
#define ERR_INT "ERR value is not an integer or out of range"
#define ERR_POSITIVE "ERR value is out of range, must be positive"
#define ERR_CURSOR "ERR invalid cursor"
#define ERR_WEIGHT "ERR weight value is not a float"
#define ERR_EXPIRE "ERR invalid expire time in 'zsnapshot' command"
#define ERR_NUMKEYS "ERR at least 1 input key is needed for 'zsnapshot' command"
#define ERR_ARITY(verb) "ERR wrong number of arguments for '" verb "' command"

#define SNAP_TTL 600000 /* ms: no snapshot of a story expires during it */
#define SNAP_TTL_TEXT "600000"

/* ---- helpers ---- */

/* A connection through the proxy. */
static redisContext *client(void)
{
    VT_SKIP_IF_DIRECT();
    return vt_must_connect(env.proxy->port);
}

/* A connection to Redis itself: what Redis's own commands build. */
static redisContext *redis_direct(void)
{
    return vt_must_connect(env.redis->port);
}

/* A command as words, each its own copy. */
typedef struct words {
    char **v;
    int n, cap;
} words;

static void words_add(words *w, const char *s)
{
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 32;
        w->v = realloc(w->v, (size_t)w->cap * sizeof(*w->v));
        cr_assert(w->v);
    }
    w->v[w->n] = strdup(s);
    cr_assert(w->v[w->n]);
    w->n++;
}

/* Each word of line, split at spaces ('' is an empty word). */
static void words_split(words *w, const char *line)
{
    char *copy = strdup(line);
    cr_assert(copy);
    for (char *save = NULL, *t = strtok_r(copy, " ", &save); t; t = strtok_r(NULL, " ", &save))
        words_add(w, strcmp(t, "''") == 0 ? "" : t);
    free(copy);
}

static redisReply *words_run(redisContext *c, const words *w)
{
    return vt_cmd_argv(c, w->n, (const char **)w->v, NULL);
}

static void words_free(words *w)
{
    for (int i = 0; i < w->n; i++)
        free(w->v[i]);
    free(w->v);
    memset(w, 0, sizeof(*w));
}

/* A reply that must be an integer (ZADD, ZREM, DEL...). */
static void expect_integer(redisReply *r, const char *what)
{
    cr_assert(r && r->type == REDIS_REPLY_INTEGER, "%s: got %s", what, VT_DESCRIBE(r));
    freeReplyObject(r);
}

/* Both keys hold the same members with the same scores, as Redis prints
 * them (asked straight from Redis, so nothing of the proxy is in between). */
static void expect_same_zset_at(int line, redisContext *d, const char *key, const char *want_key)
{
    redisReply *got = vt_cmd(d, "ZRANGE %s 0 -1 WITHSCORES", key);
    redisReply *want = vt_cmd(d, "ZRANGE %s 0 -1 WITHSCORES", want_key);
    char why[1200];
    cr_assert(got && want && want->type == REDIS_REPLY_ARRAY, "line %d: ZRANGE %s / %s failed", line, key,
              want_key);
    cr_assert(vt_reply_equal(want, got, why, sizeof(why)),
              "line %d: %s is not what %s holds (%zu values): %s", line, key, want_key, want->elements, why);
    freeReplyObject(got);
    freeReplyObject(want);
}

/* ---- ZPAGE: sorted-set entries in Redis's order ---- */

#define SCORE_TEXT_MAX 48 /* "-4.9406564584124654e-324" and the like */

/* One member of a sorted set as ZRANGE ... WITHSCORES gave it. */
typedef struct entry {
    char *member; /* len bytes and a NUL after them */
    size_t len;
    double score;
    char score_text[SCORE_TEXT_MAX]; /* as Redis printed it */
} entry;

typedef struct entries {
    entry *e;
    size_t n, cap;
} entries;

static void entry_set(entry *e, char *member, size_t len, const char *score_text, size_t tlen)
{
    e->member = member;
    e->len = len;
    cr_assert(tlen > 0 && tlen < sizeof(e->score_text), "score \"%s\" is not one Redis prints",
              vt_escape(score_text, tlen));
    memcpy(e->score_text, score_text, tlen);
    e->score_text[tlen] = '\0';
    char *end;
    e->score = strtod(e->score_text, &end);
    cr_assert(*end == '\0', "score \"%s\" is not a number", e->score_text);
}

static void entries_push(entries *l, const char *member, size_t len, const char *score_text, size_t tlen)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->e = realloc(l->e, l->cap * sizeof(*l->e));
        cr_assert(l->e);
    }
    char *copy = malloc(len + 1);
    cr_assert(copy);
    memcpy(copy, member, len);
    copy[len] = '\0';
    entry_set(&l->e[l->n++], copy, len, score_text, tlen);
}

static void entries_free(entries *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->e[i].member);
    free(l->e);
    memset(l, 0, sizeof(*l));
}

/* ZRANGE's order: score, then member bytes (memcmp; a prefix first); REV
 * reverses both. */
static int entry_cmp(const entry *a, const entry *b, bool rev)
{
    int c = (a->score > b->score) - (a->score < b->score);
    if (c == 0) {
        c = memcmp(a->member, b->member, a->len < b->len ? a->len : b->len);
        c = c ? (c > 0) - (c < 0) : (a->len > b->len) - (a->len < b->len);
    }
    return rev ? -c : c;
}

/* Everything in key, in ZRANGE's order (REV: reversed), with its scores. */
static entries zrange_all(redisContext *c, const char *key, bool rev)
{
    redisReply *r =
        rev ? vt_cmd(c, "ZRANGE %s 0 -1 REV WITHSCORES", key) : vt_cmd(c, "ZRANGE %s 0 -1 WITHSCORES", key);
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements % 2 == 0, "ZRANGE %s: got %s", key,
              VT_DESCRIBE(r));
    entries l = {0};
    for (size_t i = 0; i < r->elements; i += 2)
        entries_push(&l, r->element[i]->str, r->element[i]->len, r->element[i + 1]->str,
                     r->element[i + 1]->len);
    freeReplyObject(r);
    return l;
}

/* The cursor ZPAGE gives after e (malloc'd): 'a' or 'r', the score as
 * Redis printed it, ':', the member's bytes in lower-case hex. */
static char *cursor_after(const entry *e, bool rev)
{
    size_t cap = 1 + strlen(e->score_text) + 1 + 2 * e->len + 1;
    char *s = malloc(cap);
    cr_assert(s);
    int o = snprintf(s, cap, "%c%s:", rev ? 'r' : 'a', e->score_text);
    for (size_t i = 0; i < e->len; i++)
        o += snprintf(s + o, cap - (size_t)o, "%02x", (unsigned char)e->member[i]);
    return s;
}

/* [cursor, [member, (score,) ...]] */
static bool page_shaped(const redisReply *r, bool withscores)
{
    return r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
           r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_ARRAY &&
           r->element[1]->elements % (withscores ? 2 : 1) == 0;
}

/* ZPAGE key cursor count [REV] [WITHSCORES]; the caller frees the page. */
static redisReply *zpage(redisContext *c, const char *key, const char *cursor, long long count, bool rev,
                         bool withscores)
{
    char n[24];
    snprintf(n, sizeof(n), "%lld", count);
    const char *argv[6] = {"ZPAGE", key, cursor, n};
    int argc = 4;
    if (rev) argv[argc++] = "REV";
    if (withscores) argv[argc++] = "WITHSCORES";
    redisReply *r = vt_cmd_argv(c, argc, argv, NULL);
    cr_assert(page_shaped(r, withscores), "ZPAGE %s %s %s: expected [cursor, [member, %s...]], got %s", key,
              cursor, n, withscores ? "score, " : "", VT_DESCRIBE(r));
    return r;
}

/* The page must be exactly want->e[from ..], count of them or as many as
 * are left (members, and scores as Redis printed them), and its cursor the
 * one after its last member, or "0" when that is the last of want. */
static void expect_page_at(int line, const char *what, const redisReply *r, const entries *want, size_t from,
                           long long count, bool rev, bool withscores)
{
    size_t left = from < want->n ? want->n - from : 0;
    size_t n = (unsigned long long)count < left ? (size_t)count : left;
    size_t per = withscores ? 2 : 1;
    const redisReply *items = r->element[1];
    cr_assert(items->elements == n * per, "line %d: %s: %zu members on the page, want %zu: got %s", line,
              what, items->elements / per, n, VT_DESCRIBE(r));
    for (size_t i = 0; i < n; i++) {
        const entry *e = &want->e[from + i];
        const redisReply *m = items->element[i * per];
        cr_assert(m->len == e->len && memcmp(m->str, e->member, e->len) == 0,
                  "line %d: %s: member %zu is \"%s\", want \"%s\" (score %s)", line, what, i,
                  vt_escape(m->str, m->len), vt_escape(e->member, e->len), e->score_text);
        if (withscores)
            cr_assert(strcmp(items->element[i * 2 + 1]->str, e->score_text) == 0,
                      "line %d: %s: \"%s\" has score %s, want %s", line, what, vt_escape(e->member, e->len),
                      items->element[i * 2 + 1]->str, e->score_text);
    }
    const char *cursor = r->element[0]->str;
    if (from + n == want->n) {
        cr_assert(strcmp(cursor, "0") == 0, "line %d: %s: the page reached the end, but its cursor is \"%s\"",
                  line, what, vt_escape(cursor, strlen(cursor)));
    } else {
        char *next = cursor_after(&want->e[from + n - 1], rev);
        cr_assert(strcmp(cursor, next) == 0, "line %d: %s: cursor \"%s\", want \"%s\"", line, what, cursor,
                  next);
        free(next);
    }
}

/* Walk a set nobody changes from cursor "0" in pages of count: the pages
 * put together are exactly ZRANGE's order, each cursor is the one after
 * its page's last member, and the page that reaches the end says "0" (no
 * empty page after it). */
static void expect_walk_at(int line, redisContext *c, const char *key, long long count, bool rev,
                           bool withscores)
{
    entries all = zrange_all(c, key, rev);
    char *cursor = strdup("0");
    size_t at = 0;
    for (int pages = 0;; pages++) {
        char what[160];
        snprintf(what, sizeof(what), "%s walk of %s in pages of %lld%s, page %d", rev ? "REV" : "ascending",
                 key, count, withscores ? " WITHSCORES" : "", pages);
        cr_assert(pages <= (int)all.n, "line %d: %s: more pages than members", line, what);
        redisReply *r = zpage(c, key, cursor, count, rev, withscores);
        expect_page_at(line, what, r, &all, at, count, rev, withscores);
        at += r->element[1]->elements / (withscores ? 2 : 1);
        free(cursor);
        cursor = strdup(r->element[0]->str);
        freeReplyObject(r);
        if (strcmp(cursor, "0") == 0) break;
    }
    cr_assert(at == all.n, "line %d: the walk of %s saw %zu members of %zu", line, key, at, all.n);
    free(cursor);
    entries_free(&all);
}
#define expect_walk(c, key, count, rev, withscores)                                                          \
    expect_walk_at(__LINE__, (c), (key), (count), (rev), (withscores))

/* What can happen to the member a cursor names before the next page. */
enum change { KEPT, REMOVED, TO_MINUS_INF, TO_PLUS_INF, REPLACED_BY_NEIGHBOURS, NCHANGES };
static const char *const change_name[NCHANGES] = {
    "kept (the fast path)",
    "removed",
    "rescored to -inf",
    "rescored to +inf",
    "removed, with new members tied just before and just after it",
};

/* op key [score] member, whose reply is an integer. */
static void zset_op(redisContext *c, const char *op, const char *key, const char *score, const char *member,
                    size_t len)
{
    const char *argv[4] = {op, key};
    size_t lens[4] = {strlen(op), strlen(key)};
    int argc = 2;
    if (score) {
        argv[argc] = score;
        lens[argc++] = strlen(score);
    }
    argv[argc] = member;
    lens[argc++] = len;
    expect_integer(vt_cmd_argv(c, argc, argv, lens), op);
}

static void change_member(redisContext *c, const char *key, const entry *e, enum change ch)
{
    switch (ch) {
    case KEPT:
        break;
    case REMOVED:
        zset_op(c, "ZREM", key, NULL, e->member, e->len);
        break;
    case TO_MINUS_INF:
        zset_op(c, "ZADD", key, "-inf", e->member, e->len);
        break;
    case TO_PLUS_INF:
        zset_op(c, "ZADD", key, "+inf", e->member, e->len);
        break;
    case REPLACED_BY_NEIGHBOURS:
        zset_op(c, "ZREM", key, NULL, e->member, e->len);
        /* member + "\0" comes right after it, its prefix before it */
        zset_op(c, "ZADD", key, e->score_text, e->member, e->len + 1);
        if (e->len > 0) zset_op(c, "ZADD", key, e->score_text, e->member, e->len - 1);
        break;
    case NCHANGES:
        cr_assert_fail("no such change");
    }
}

#define CHANGE_PAGE 3

/* Take the cursor after every member of key in turn, change that member in
 * every way (change_name), and check that the next page is exactly the
 * members now strictly after the cursor's (score, member). The set is put
 * back (COPY) after each. */
static void every_cursor_every_change(redisContext *c, const char *key, bool rev)
{
    char saved[128];
    snprintf(saved, sizeof(saved), "%s:saved", key);
    expect_integer(vt_cmd(c, "COPY %s %s REPLACE", key, saved), "COPY");
    entries before = zrange_all(c, key, rev);
    cr_assert(before.n > 0, "%s is empty", key);
    for (size_t i = 0; i < before.n; i++) {
        for (int ch = 0; ch < NCHANGES; ch++) {
            const entry *at = &before.e[i];
            char *cursor = cursor_after(at, rev);
            change_member(c, key, at, (enum change)ch);
            entries now = zrange_all(c, key, rev);
            size_t from = 0;
            while (from < now.n && entry_cmp(&now.e[from], at, rev) <= 0)
                from++;
            redisReply *page = zpage(c, key, cursor, CHANGE_PAGE, rev, true);
            char what[256];
            snprintf(what, sizeof(what), "%s page after \"%s\" (score %s), %s", rev ? "REV" : "ascending",
                     vt_escape(at->member, at->len), at->score_text, change_name[ch]);
            expect_page_at(__LINE__, what, page, &now, from, CHANGE_PAGE, rev, true);
            freeReplyObject(page);
            entries_free(&now);
            free(cursor);
            expect_integer(vt_cmd(c, "COPY %s %s REPLACE", saved, key), "COPY back");
        }
    }
    entries_free(&before);
}

/* ---- ZPAGE key cursor count [REV] [WITHSCORES] ---- */

/* Paging by rank misleads as soon as the board moves: ZPAGE does not. */
Test(zpage, the_bestseller_story)
{
    redisContext *c = client();
    EXPECT(c, ":6", "ZADD books 500 atlas 400 brume 300 cedar 200 dune 100 ember 50 fable");
    /* by rank: page 1, then fable sells 1000 copies, then page 2 */
    EXPECT(c, "[\"atlas\", \"brume\", \"cedar\"]", "ZRANGE books 0 2 REV");
    EXPECT(c, "\"1050\"", "ZINCRBY books 1000 fable");
    EXPECT(c, "[\"cedar\", \"dune\", \"ember\"]", "ZRANGE books 3 5 REV");
    /* cedar was shown twice: everything below fable's new place moved down one rank */

    EXPECT(c, "\"50\"", "ZINCRBY books -1000 fable");
    EXPECT(c, "[\"r300:6365646172\", [\"atlas\", \"brume\", \"cedar\"]]", "ZPAGE books 0 3 REV");
    EXPECT(c, "\"1050\"", "ZINCRBY books 1000 fable");
    EXPECT(c, "[\"0\", [\"dune\", \"ember\"]]", "ZPAGE books r300:6365646172 3 REV");
    /* every book that did not move was seen once; fable moved behind the
     * reader (above the cursor) and is not seen: it moved */
    redisFree(c);
}

Test(zpage, pages_ascending_and_rev_with_and_without_scores)
{
    redisContext *c = client();
    EXPECT(c, ":5", "ZADD zp:p 1 a 2 b 3 c 4 d 5 e");
    EXPECT(c, "[\"a2:62\", [\"a\", \"b\"]]", "ZPAGE zp:p 0 2");
    EXPECT(c, "[\"a4:64\", [\"c\", \"3\", \"d\", \"4\"]]", "ZPAGE zp:p a2:62 2 WITHSCORES");
    EXPECT(c, "[\"0\", [\"e\"]]", "ZPAGE zp:p a4:64 2");
    EXPECT(c, "[\"r4:64\", [\"e\", \"5\", \"d\", \"4\"]]", "ZPAGE zp:p 0 2 REV WITHSCORES");
    EXPECT(c, "[\"r2:62\", [\"c\", \"b\"]]", "ZPAGE zp:p r4:64 2 rev");
    EXPECT(c, "[\"0\", [\"a\", \"1\"]]", "ZPAGE zp:p r2:62 2 WithScores Rev");
    /* options in any case, any order, repeated */
    EXPECT(c, "[\"r4:64\", [\"e\", \"5\", \"d\", \"4\"]]", "ZPAGE zp:p 0 2 withscores REV rev WITHSCORES");
    /* the verb's name in any case */
    EXPECT(c, "[\"a1:61\", [\"a\"]]", "zpage zp:p 0 1");
    EXPECT(c, "[\"a1:61\", [\"a\"]]", "ZPage zp:p 0 1");
    for (long long count = 1; count <= 6; count++) {
        expect_walk(c, "zp:p", count, false, false);
        expect_walk(c, "zp:p", count, true, true);
    }
    redisFree(c);
}

Test(zpage, the_page_that_reaches_the_end_says_0_and_a_bigger_count_is_fine)
{
    redisContext *c = client();
    EXPECT(c, ":6", "ZADD zp:e 1 a 2 b 3 c 4 d 5 e 6 f");
    /* 6 in pages of 3: the second page is the last, no empty third page */
    EXPECT(c, "[\"a3:63\", [\"a\", \"b\", \"c\"]]", "ZPAGE zp:e 0 3");
    EXPECT(c, "[\"0\", [\"d\", \"e\", \"f\"]]", "ZPAGE zp:e a3:63 3");
    EXPECT(c, "[\"r4:64\", [\"f\", \"e\", \"d\"]]", "ZPAGE zp:e 0 3 REV");
    EXPECT(c, "[\"0\", [\"c\", \"b\", \"a\"]]", "ZPAGE zp:e r4:64 3 REV");
    /* 6 in pages of 4 and of 5 */
    EXPECT(c, "[\"0\", [\"e\", \"f\"]]", "ZPAGE zp:e a4:64 4");
    EXPECT(c, "[\"0\", [\"f\"]]", "ZPAGE zp:e a5:65 5");
    /* one page holds them all */
    EXPECT(c, "[\"0\", [\"a\", \"b\", \"c\", \"d\", \"e\", \"f\"]]", "ZPAGE zp:e 0 6");
    EXPECT(c, "[\"0\", [\"a\", \"b\", \"c\", \"d\", \"e\", \"f\"]]", "ZPAGE zp:e 0 7");
    EXPECT(c, "[\"0\", [\"f\", \"e\", \"d\", \"c\", \"b\", \"a\"]]", "ZPAGE zp:e 0 9223372036854775807 REV");
    EXPECT(c, "[\"0\", [\"c\", \"3\", \"d\", \"4\", \"e\", \"5\", \"f\", \"6\"]]",
           "ZPAGE zp:e a2:62 9223372036854775807 WITHSCORES");
    /* a cursor at or past the last member: the empty end */
    EXPECT(c, "[\"0\", []]", "ZPAGE zp:e a6:66 3");
    EXPECT(c, "[\"0\", []]", "ZPAGE zp:e a7:00 3");
    EXPECT(c, "[\"0\", []]", "ZPAGE zp:e r1:61 3 REV");
    EXPECT(c, "[\"0\", []]", "ZPAGE zp:e a1e300: 3");
    redisFree(c);
}

Test(zpage, a_missing_key_is_one_empty_last_page)
{
    redisContext *c = client();
    EXPECT(c, "[\"0\", []]", "ZPAGE zp:none 0 10");
    EXPECT(c, "[\"0\", []]", "ZPAGE zp:none 0 10 REV WITHSCORES");
    EXPECT(c, "[\"0\", []]", "ZPAGE zp:none a1:61 10");
    EXPECT(c, "[\"0\", []]", "ZPAGE zp:none r1:61 10 REV");
    EXPECT(c, ":0", "EXISTS zp:none");
    redisFree(c);
}

Test(zpage, a_key_of_another_type_is_wrongtype_and_left_alone)
{
    redisContext *c = client();
    EXPECT(c, "+OK", "SET zp:s text");
    EXPECT(c, ":2", "SADD zp:set a b");
    EXPECT(c, ":1", "HSET zp:h f v");
    EXPECT(c, WRONGTYPE, "ZPAGE zp:s 0 10");
    EXPECT(c, WRONGTYPE, "ZPAGE zp:s a1:61 10 WITHSCORES");
    EXPECT(c, WRONGTYPE, "ZPAGE zp:set 0 10");
    EXPECT(c, WRONGTYPE, "ZPAGE zp:h r1:61 1 REV");
    EXPECT(c, "\"text\"", "GET zp:s");
    EXPECT(c, ":2", "SCARD zp:set");
    EXPECT(c, "[\"f\", \"v\"]", "HGETALL zp:h");
    redisFree(c);
}

/* Binary members, as ZADD takes them; all tied at 7 unless said. */
static const struct {
    const char *bytes;
    size_t len;
} binary_members[] = {
    {"", 0},     {"\0", 1},     {"\0\0", 2}, {"\0\x01", 2}, {"\x01", 1},     {"A", 1},
    {"Z", 1},    {"a", 1},      {"a\0", 2},  {"a\0b", 3},   {"ab", 2},       {"\x7f", 1},
    {"\x80", 1}, {"\x80\0", 2}, {"\xfe", 1}, {"\xff", 1},   {"\xff\xff", 2},
};
#define NBINARY (sizeof(binary_members) / sizeof(binary_members[0]))

static void add_binary_ties(redisContext *c, const char *key)
{
    for (size_t i = 0; i < NBINARY; i++)
        zset_op(c, "ZADD", key, "7", binary_members[i].bytes, binary_members[i].len);
    EXPECT(c, ":2", "ZADD %s 6 low 8 high", key);
}

Test(zpage, ties_go_by_member_bytes_with_binary_and_empty_members)
{
    redisContext *c = client();
    add_binary_ties(c, "zp:t");
    EXPECT(c, "[\"a7:00\", [\"low\", \"\", \"\\x00\"]]", "ZPAGE zp:t 0 3");
    EXPECT(c, "[\"a7:0000\", [\"\\x00\\x00\"]]", "ZPAGE zp:t a7:00 1");
    EXPECT(c, "[\"a7:\", [\"\"]]", "ZPAGE zp:t a6:6c6f77 1");
    EXPECT(c, "[\"r7:ffff\", [\"high\", \"\\xff\\xff\"]]", "ZPAGE zp:t 0 2 REV");
    EXPECT(c, "[\"r7:80\", [\"\\xff\", \"\\xfe\", \"\\x80\\x00\", \"\\x80\"]]", "ZPAGE zp:t r7:ffff 4 REV");
    EXPECT(c, "[\"0\", [\"low\"]]", "ZPAGE zp:t r7: 4 REV");
    /* and two hundred more ties among them */
    for (int i = 0; i < 200; i++)
        EXPECT(c, ":1", "ZADD zp:t 7 tie-%03d", i);
    static const long long counts[] = {1, 2, 3, 7, 16, 1000};
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        expect_walk(c, "zp:t", counts[i], false, i % 2 == 0);
        expect_walk(c, "zp:t", counts[i], true, i % 2 == 1);
    }
    redisFree(c);
}

/* The member a cursor names need not be there any more: the next page
 * starts right after where it stood, by (score, member). */
Test(zpage, after_a_removed_or_rescored_member_the_page_starts_where_it_stood)
{
    redisContext *c = client();
    EXPECT(c, ":9", "ZADD zp:r 4 p 4 q 5 m0 5 m1 5 m2 5 m3 5 m4 6 r 6 s");
    EXPECT(c, "[\"a5:6d31\", [\"p\", \"q\", \"m0\", \"m1\"]]", "ZPAGE zp:r 0 4");
    EXPECT(c, ":1", "ZREM zp:r m1");
    EXPECT(c, "[\"a5:6d33\", [\"m2\", \"m3\"]]", "ZPAGE zp:r a5:6d31 2");
    /* m3 climbs away and new members tie at 5 on both sides of it */
    EXPECT(c, ":0", "ZADD zp:r 9 m3");
    EXPECT(c, ":2", "ZADD zp:r 5 m2a 5 m3a");
    EXPECT(c, "[\"0\", [\"m3a\", \"5\", \"m4\", \"5\", \"r\", \"6\", \"s\", \"6\", \"m3\", \"9\"]]",
           "ZPAGE zp:r a5:6d33 10 WITHSCORES");

    EXPECT(c, ":9", "ZADD zp:v 4 p 4 q 5 m0 5 m1 5 m2 5 m3 5 m4 6 r 6 s");
    EXPECT(c, "[\"r5:6d34\", [\"s\", \"r\", \"m4\"]]", "ZPAGE zp:v 0 3 REV");
    EXPECT(c, ":1", "ZREM zp:v m4");
    EXPECT(c, ":2", "ZADD zp:v 5 m5 5 m35");
    EXPECT(c, "[\"r5:6d32\", [\"m35\", \"m3\", \"m2\"]]", "ZPAGE zp:v r5:6d34 3 REV");
    EXPECT(c, ":0", "ZADD zp:v 1 m2");
    EXPECT(c, "[\"0\", [\"m1\", \"5\", \"m0\", \"5\", \"q\", \"4\", \"p\", \"4\", \"m2\", \"1\"]]",
           "ZPAGE zp:v r5:6d32 10 REV WITHSCORES");
    /* removed with no tie left at its score */
    EXPECT(c, ":1", "ZREM zp:v r");
    EXPECT(c, ":1", "ZREM zp:v s");
    EXPECT(c, "[\"r5:6d35\", [\"m5\"]]", "ZPAGE zp:v r6:73 1 REV");
    redisFree(c);
}

Test(zpage, after_every_member_whatever_happened_to_it_among_ties)
{
    redisContext *c = client();
    EXPECT(c, ":11", "ZADD zp:c 4 p 4 q 5 m0 5 m1 5 m2 5 m3 5 m4 5 m5 5 m6 6 r 6 s");
    add_binary_ties(c, "zp:c");
    every_cursor_every_change(c, "zp:c", false);
    every_cursor_every_change(c, "zp:c", true);
    redisFree(c);
}

/* Scores at the edges of the doubles: Redis prints each exactly, and the
 * cursor carries that text, so a page after a removed member starts
 * exactly after it, even next to a neighbour one ulp away. `printed` is
 * Redis 7.0's text (%.17g); Redis 7.2 and Valkey print the shortest text
 * that reads back as the same double ("0.1"), so the cursors below carry
 * whatever the server under test prints, checked to be the same double. */
static const struct {
    const char *member, *score, *printed;
} edges[] = {
    {"minus-inf", "-inf", "-inf"},
    {"minus-inf-2", "-inf", "-inf"},
    {"minus-max", "-1.7976931348623157e308", "-1.7976931348623157e+308"},
    {"minus-tiny", "-5e-324", "-4.9406564584124654e-324"},
    {"minus-zero", "-0", "0"},
    {"zero", "0", "0"},
    {"tiny", "5e-324", "4.9406564584124654e-324"},
    {"biggest-subnormal", "2.2250738585072009e-308", "2.2250738585072009e-308"},
    {"smallest-normal", "2.2250738585072014e-308", "2.2250738585072014e-308"},
    {"tenth", "0.1", "0.10000000000000001"},
    {"below-one", "0.99999999999999989", "0.99999999999999989"},
    {"one", "1", "1"},
    {"above-one", "1.0000000000000002", "1.0000000000000002"},
    {"two-53", "9007199254740992", "9007199254740992"},
    {"two-53-plus-1", "9007199254740993", "9007199254740992"}, /* not a double: Redis rounds it */
    {"two-53-plus-2", "9007199254740994", "9007199254740994"},
    {"e308", "1e308", "1e+308"},
    {"max", "1.7976931348623157e308", "1.7976931348623157e+308"},
    {"plus-inf", "inf", "inf"},
    {"plus-inf-2", "+inf", "inf"},
};
#define NEDGES (sizeof(edges) / sizeof(edges[0]))

/* The server's text of a member's score (ZSCORE), checked against the
 * table's. */
static char served[NEDGES][40];

static const char *served_text(const char *member)
{
    for (size_t i = 0; i < NEDGES; i++)
        if (strcmp(edges[i].member, member) == 0) return served[i];
    cr_assert_fail("no edge member %s", member);
    return NULL;
}

Test(zpage, scores_at_the_edges_of_the_doubles_page_in_order_and_their_cursors_are_exact)
{
    redisContext *c = client();
    for (size_t i = 0; i < NEDGES; i++) {
        EXPECT(c, ":1", "ZADD zp:x %s %s", edges[i].score, edges[i].member);
        redisReply *r = vt_cmd(c, "ZSCORE zp:x %s", edges[i].member);
        cr_assert(r && r->type == REDIS_REPLY_STRING && r->len < sizeof(served[i]), "ZSCORE %s: %s",
                  edges[i].member, VT_DESCRIBE(r));
        snprintf(served[i], sizeof(served[i]), "%s", r->str);
        freeReplyObject(r);
        double a = strtod(served[i], NULL), b = strtod(edges[i].printed, NULL);
        cr_assert(memcmp(&a, &b, sizeof(a)) == 0 || (a == 0 && b == 0), "ZSCORE %s: %s is not %s",
                  edges[i].member, served[i], edges[i].printed);
    }
    char want[256];
    EXPECT(c, "[\"a-inf:6d696e75732d696e66\", [\"minus-inf\"]]", "ZPAGE zp:x 0 1");
    snprintf(want, sizeof(want), "[\"a%s:74696e79\", [\"zero\", \"tiny\"]]", served_text("tiny"));
    EXPECT(c, want, "ZPAGE zp:x a0:6d696e75732d7a65726f 2");
    snprintf(want, sizeof(want), "[\"r%s:65333038\", [\"plus-inf-2\", \"plus-inf\", \"max\", \"e308\"]]",
             served_text("e308"));
    EXPECT(c, want, "ZPAGE zp:x 0 4 REV");
    /* one removed: the page goes on after it, not at its neighbour one ulp below */
    EXPECT(c, ":1", "ZREM zp:x one");
    snprintf(want, sizeof(want), "[\"a%s:61626f76652d6f6e65\", [\"above-one\"]]", served_text("above-one"));
    EXPECT(c, want, "ZPAGE zp:x a1:6f6e65 1");
    snprintf(want, sizeof(want), "[\"r%s:62656c6f772d6f6e65\", [\"below-one\"]]", served_text("below-one"));
    EXPECT(c, want, "ZPAGE zp:x r1:6f6e65 1 REV");
    EXPECT(c, ":1", "ZADD zp:x 1 one");
    for (long long count = 1; count <= 3; count++) {
        expect_walk(c, "zp:x", count, false, true);
        expect_walk(c, "zp:x", count, true, count != 2);
    }
    every_cursor_every_change(c, "zp:x", false);
    every_cursor_every_change(c, "zp:x", true);
    redisFree(c);
}

/* ---- argument errors: the proxy's, and the scripts' own ---- */

typedef struct refusal {
    const char *err, *call;
} refusal;

/* The script of a built-in verb, loaded on Redis as the proxy loads it
 * (the file with its helpers put in, in the server's dialect); its SHA
 * (malloc'd). */
static char *load_script(redisContext *d, const char *name)
{
    char path[512], err[256];
    snprintf(path, sizeof(path), "%s/lua/%s.lua", SOURCE_DIR, name);
    size_t len;
    char *body = script_assemble(path, &len, err, sizeof(err));
    cr_assert(body, "%s: %s", path, err);
    if (vt_redis_version() < 700) { /* 6.2: the shebang a comment */
        char *pre7 = script_text_pre7(body, len);
        free(body);
        body = pre7;
    }
    redisReply *r = vt_cmd(d, "SCRIPT LOAD %b", body, len);
    cr_assert(r && r->type == REDIS_REPLY_STRING && r->len == 40, "SCRIPT LOAD %s: %s", path, VT_DESCRIBE(r));
    char *sha = strdup(r->str);
    freeReplyObject(r);
    free(body);
    return sha;
}

/* How many of a call's words after its first key are keys too: ZSNAPSHOT's
 * numkeys run when numkeys names one, else the word after numkeys (what a
 * direct caller would most likely send); ZPAGE none. */
static int extra_keys(const words *w)
{
    if (strcasecmp(w->v[0], "zsnapshot") != 0 || w->n < 5) return 0;
    char *end;
    long long n = strtoll(w->v[3], &end, 10);
    return *end == '\0' && w->v[3][0] && n >= 1 && n <= w->n - 4 ? (int)n : 1;
}

/* Each call is refused by the proxy with its error text, the connection
 * going on in order (an ECHO pipelined after it comes right back); Redis
 * ran no script for any. Then each verb's script, run directly with
 * EVALSHA and the keys laid out as the proxy lays them out (KEYS = the key
 * words, ARGV = every word after the first key), refuses it the same way. */
static void expect_refused(redisContext *c, const refusal *calls, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        words w = {0};
        words_split(&w, calls[i].call);
        cr_assert(redisAppendCommandArgv(c, w.n, (const char **)w.v, NULL) == REDIS_OK);
        vt_expect_err_then_echo(__LINE__, c, calls[i].call, calls[i].err);
        words_free(&w);
    }
    vt_expect_no_script_ran(env.redis->port);

    redisContext *d = redis_direct();
    char *zpage_sha = load_script(d, "zpage"), *zsnapshot_sha = load_script(d, "zsnapshot");
    for (size_t i = 0; i < n; i++) {
        words call = {0}, eval = {0};
        words_split(&call, calls[i].call);
        int nkeys = 1 + extra_keys(&call);
        char numkeys[16];
        snprintf(numkeys, sizeof(numkeys), "%d", nkeys);
        words_add(&eval, "EVALSHA");
        words_add(&eval, strcasecmp(call.v[0], "zpage") == 0 ? zpage_sha : zsnapshot_sha);
        words_add(&eval, numkeys);
        words_add(&eval, call.v[1]);
        for (int k = 0; k < nkeys - 1; k++)
            words_add(&eval, call.v[4 + k]);
        for (int k = 2; k < call.n; k++)
            words_add(&eval, call.v[k]);
        char want[256], what[512];
        snprintf(want, sizeof(want), "-%s", calls[i].err);
        snprintf(what, sizeof(what), "the script itself, called as the proxy would call it for: %s",
                 calls[i].call);
        vt_check_reply(__LINE__, what, d, words_run(d, &eval), want);
        words_free(&call);
        words_free(&eval);
    }
    free(zpage_sha);
    free(zsnapshot_sha);
    redisFree(d);
}

Test(zpage, argument_errors_are_answered_in_order_with_redis_texts_by_proxy_and_script_alike)
{
    redisContext *c = client();
    EXPECT(c, "+OK", "SET zp:str text");
    EXPECT_ERR(c, ERR_ARITY("zpage"), "ZPAGE");
    EXPECT_ERR(c, ERR_ARITY("zpage"), "ZPAGE zp:k");
    EXPECT_ERR(c, ERR_ARITY("zpage"), "ZPAGE zp:k 0");
    EXPECT_ERR(c, ERR_ARITY("zpage"), "zPage zp:k 0");
    static const refusal calls[] = {
        /* count */
        {ERR_INT, "ZPAGE zp:k 0 x"},
        {ERR_INT, "ZPAGE zp:k 0 1.5"},
        {ERR_INT, "ZPAGE zp:k 0 ''"},
        {ERR_INT, "ZPAGE zp:k 0 +1"},
        {ERR_INT, "ZPAGE zp:k 0 01"},
        {ERR_INT, "ZPAGE zp:k 0 1e3"},
        {ERR_INT, "ZPAGE zp:k 0 9223372036854775808"},
        {ERR_POSITIVE, "ZPAGE zp:k 0 0"},
        {ERR_POSITIVE, "ZPAGE zp:k 0 -1"},
        {ERR_POSITIVE, "ZPAGE zp:k 0 -9223372036854775808"},
        /* options */
        {ERR_SYNTAX, "ZPAGE zp:k 0 1 FOO"},
        {ERR_SYNTAX, "ZPAGE zp:k 0 1 REVERSE"},
        {ERR_SYNTAX, "ZPAGE zp:k 0 1 WITHSCORE"},
        {ERR_SYNTAX, "ZPAGE zp:k 0 1 REV LIMIT 1"},
        {ERR_SYNTAX, "ZPAGE zp:k 0 1 ''"},
        /* cursors: another direction's, or not one ZPAGE gives */
        {ERR_CURSOR, "ZPAGE zp:k r1:61 1"},
        {ERR_CURSOR, "ZPAGE zp:k a1:61 1 REV"},
        {ERR_CURSOR, "ZPAGE zp:k a1:6 1"},
        {ERR_CURSOR, "ZPAGE zp:k a1:6g 1"},
        {ERR_CURSOR, "ZPAGE zp:k a1:6A 1"},
        {ERR_CURSOR, "ZPAGE zp:k a1:61:62 1"},
        {ERR_CURSOR, "ZPAGE zp:k ax:61 1"},
        {ERR_CURSOR, "ZPAGE zp:k anan:61 1"},
        {ERR_CURSOR, "ZPAGE zp:k a1e999:61 1"},
        {ERR_CURSOR, "ZPAGE zp:k a1e-999:61 1"},
        {ERR_CURSOR, "ZPAGE zp:k a:61 1"},
        {ERR_CURSOR, "ZPAGE zp:k a1 1"},
        {ERR_CURSOR, "ZPAGE zp:k a 1"},
        {ERR_CURSOR, "ZPAGE zp:k b1:61 1"},
        {ERR_CURSOR, "ZPAGE zp:k A1:61 1"},
        {ERR_CURSOR, "ZPAGE zp:k 00 1"},
        {ERR_CURSOR, "ZPAGE zp:k -0 1"},
        {ERR_CURSOR, "ZPAGE zp:k ''' 1"},
        {ERR_CURSOR, "ZPAGE zp:k '' 1"},
        /* options first, then count, then the cursor; all before the key is read */
        {ERR_SYNTAX, "ZPAGE zp:k bad x FOO"},
        {ERR_INT, "ZPAGE zp:k bad x"},
        {ERR_POSITIVE, "ZPAGE zp:k bad 0"},
        {ERR_CURSOR, "ZPAGE zp:k bad 1"},
        {ERR_CURSOR, "ZPAGE zp:str bad 1"},
        {ERR_SYNTAX, "ZPAGE zp:str 0 1 FOO"},
    };
    expect_refused(c, calls, sizeof(calls) / sizeof(calls[0]));
    EXPECT(c, "\"text\"", "GET zp:str");
    EXPECT(c, ":1", "ZADD zp:k 1 a");
    EXPECT(c, "[\"0\", [\"a\"]]", "ZPAGE zp:k 0 1");
    redisFree(c);
}

/* Inside MULTI the verb travels as EVAL and runs in EXEC; a bad value is
 * that command's error in EXEC's reply, a wrong number of arguments aborts. */
Test(zpage, inside_a_transaction)
{
    redisContext *c = client();
    EXPECT(c, ":3", "ZADD zp:tx 1 a 2 b 3 c");
    EXPECT(c, "+OK", "MULTI");
    EXPECT(c, "+QUEUED", "ZPAGE zp:tx 0 2");
    EXPECT(c, "+QUEUED", "ZREM zp:tx b");
    EXPECT(c, "+QUEUED", "ZPAGE zp:tx a2:62 2 WITHSCORES");
    EXPECT(c, "+QUEUED", "ZPAGE zp:tx bad 2");
    EXPECT(c, "+QUEUED", "ZPAGE zp:tx 0 2 REV");
    EXPECT(c,
           "[[\"a2:62\", [\"a\", \"b\"]], :1, [\"0\", [\"c\", \"3\"]], -" ERR_CURSOR
           ", [\"0\", [\"c\", \"a\"]]]",
           "EXEC");
    EXPECT(c, "+OK", "MULTI");
    EXPECT(c, "+QUEUED", "ZREM zp:tx a");
    EXPECT(c, "-" ERR_ARITY("zpage"), "ZPAGE zp:tx 0");
    EXPECT(c, "-EXECABORT Transaction discarded because of previous errors.", "EXEC");
    EXPECT(c, "[\"a\", \"c\"]", "ZRANGE zp:tx 0 -1");
    redisFree(c);
}

/* ---- ZPAGE on a live set: the guarantee ---- */

#define LIVE_KEY "zp:live"
#define LIVE_MEMBERS 3000    /* at the start, two thirds of them never touched */
#define LIVE_MAX_PAGES 20000 /* a walk that long has gone round in circles */
#define LIVE_MEMBER_MAX 16
#define LIVE_ZADD_BATCH 500

/* Member number i: i in bijective base 8 over these bytes (0 is "", 1..8
 * one byte, 9..72 two bytes, ...): every number another member, and their
 * byte order mixes "", \0, bytes >= 0x80 and prefixes. */
static const unsigned char live_alphabet[8] = {0x00, 0x01, 'a', 'b', 0x7f, 0x80, 0xfe, 0xff};

static size_t live_member(long i, char out[LIVE_MEMBER_MAX])
{
    char rev[LIVE_MEMBER_MAX];
    size_t n = 0;
    for (; i > 0; i = (i - 1) / 8)
        rev[n++] = (char)live_alphabet[(i - 1) % 8];
    for (size_t k = 0; k < n; k++)
        out[k] = rev[n - 1 - k];
    return n;
}

/* The number of a member, or -1 if it is none of them. */
static long live_number(const char *m, size_t len)
{
    long i = 0;
    for (size_t k = 0; k < len; k++) {
        const unsigned char *d = memchr(live_alphabet, (unsigned char)m[k], sizeof(live_alphabet));
        if (!d || len >= 8) return -1;
        i = i * 8 + (long)(d - live_alphabet) + 1;
    }
    return i;
}

/* Mostly small whole numbers (many ties), sometimes an edge of the doubles. */
static void live_score(vt_rng *g, char out[SCORE_TEXT_MAX])
{
    static const char *const rare[] = {"-inf", "inf", "0.5", "-0", "1e308", "5e-324", "9007199254740993",
                                       "-2.5"};
    if (vt_rng_pick(g, 8) == 0)
        snprintf(out, SCORE_TEXT_MAX, "%s", rare[vt_rng_pick(g, 8)]);
    else
        snprintf(out, SCORE_TEXT_MAX, "%d", vt_rng_pick(g, 40));
}

/* One walk over LIVE_KEY while members it must not rely on change. */
typedef struct live {
    uint64_t seed;
    vt_rng g;
    bool rev, in_multi;
    bool stable[LIVE_MEMBERS];  /* never touched by a change */
    double score[LIVE_MEMBERS]; /* a stable member's score */
    int seen[LIVE_MEMBERS];     /* times a stable member was on a page */
    long *movable;              /* numbers the changes may touch */
    size_t nmovable, capmovable;
    long next_new; /* the next number never used */
    entry last;    /* the last member seen (the cursor's); member in last_bytes */
    char last_bytes[LIVE_MEMBER_MAX + 1];
    bool have_last;
    int cursor_changes; /* the cursor's member removed or rescored */
    int tied_adds;      /* new members tied at the cursor's score */
} live;

#define live_assert(l, cond, fmt, ...)                                                                       \
    cr_assert((cond), "%s walk%s, seed %llu (VP_TEST_SEED=%llu repeats it): " fmt,                           \
              (l)->rev ? "REV" : "ascending", (l)->in_multi ? " inside MULTI" : "",                          \
              (unsigned long long)(l)->seed, (unsigned long long)(l)->seed, __VA_ARGS__)

static void live_add_movable(live *l, long number)
{
    if (l->nmovable == l->capmovable) {
        l->capmovable = l->capmovable ? 2 * l->capmovable : 1024;
        l->movable = realloc(l->movable, l->capmovable * sizeof(*l->movable));
        cr_assert(l->movable);
    }
    l->movable[l->nmovable++] = number;
}

/* The set: LIVE_MEMBERS members, two thirds of them stable. */
static void live_start(live *l, redisContext *c, uint64_t seed, bool rev, bool in_multi)
{
    memset(l, 0, sizeof(*l));
    l->seed = seed;
    l->g = vt_rng_seeded(seed);
    l->rev = rev;
    l->in_multi = in_multi;
    l->next_new = LIVE_MEMBERS;
    expect_integer(vt_cmd(c, "DEL %s", LIVE_KEY), "DEL");
    for (int first = 0; first < LIVE_MEMBERS; first += LIVE_ZADD_BATCH) {
        const char *argv[2 + 2 * LIVE_ZADD_BATCH];
        size_t lens[2 + 2 * LIVE_ZADD_BATCH];
        char scores[LIVE_ZADD_BATCH][SCORE_TEXT_MAX], members[LIVE_ZADD_BATCH][LIVE_MEMBER_MAX];
        argv[0] = "ZADD";
        argv[1] = LIVE_KEY;
        lens[0] = 4;
        lens[1] = strlen(LIVE_KEY);
        int argc = 2;
        for (int i = first; i < first + LIVE_ZADD_BATCH && i < LIVE_MEMBERS; i++) {
            int k = i - first;
            live_score(&l->g, scores[k]);
            argv[argc] = scores[k];
            lens[argc++] = strlen(scores[k]);
            argv[argc] = members[k];
            lens[argc++] = live_member(i, members[k]);
            l->stable[i] = vt_rng_pick(&l->g, 3) != 0;
            l->score[i] = strtod(scores[k], NULL);
            if (!l->stable[i]) live_add_movable(l, i);
        }
        expect_integer(vt_cmd_argv(c, argc, argv, lens), "ZADD");
    }
}

/* Append 0..5 changes to members the walk may not rely on (to ctx, whose
 * replies the caller reads): the cursor's member removed or rescored when
 * it is one of them, new members tied at the cursor's score, others added,
 * removed or rescored. Returns how many commands it appended. */
static int live_changes(live *l, redisContext *ctx)
{
    int n = vt_rng_pick(&l->g, 6), sent = 0;
    long cursor = l->have_last ? live_number(l->last.member, l->last.len) : -1;
    bool cursor_movable = cursor >= 0 && !(cursor < LIVE_MEMBERS && l->stable[cursor]);
    for (int k = 0; k < n; k++) {
        char member[LIVE_MEMBER_MAX], score[SCORE_TEXT_MAX];
        long number;
        const char *op = "ZADD";
        int what = vt_rng_pick(&l->g, 6);
        live_score(&l->g, score);
        if (what <= 1 && cursor_movable) {
            number = cursor;
            if (what == 0) op = "ZREM";
            l->cursor_changes++;
        } else if (what == 2 && l->have_last) {
            number = l->next_new++;
            live_add_movable(l, number);
            snprintf(score, sizeof(score), "%s", l->last.score_text);
            l->tied_adds++;
        } else if (what == 3 || what == 4) {
            number = l->movable[vt_rng_pick(&l->g, (int)l->nmovable)];
            if (what == 3) op = "ZREM";
        } else {
            number = l->next_new++;
            live_add_movable(l, number);
        }
        size_t len = live_member(number, member);
        const char *argv[4] = {op, LIVE_KEY, score, member};
        size_t lens[4] = {4, strlen(LIVE_KEY), strlen(score), len};
        if (op[1] == 'R') { /* ZREM key member */
            argv[2] = member;
            lens[2] = len;
        }
        cr_assert(redisAppendCommandArgv(ctx, op[1] == 'R' ? 3 : 4, argv, lens) == REDIS_OK);
        sent++;
    }
    return sent;
}

static void live_expect_change_replies(live *l, redisContext *ctx, int n)
{
    for (int k = 0; k < n; k++) {
        redisReply *r = vt_get_reply(ctx);
        live_assert(l, r && r->type == REDIS_REPLY_INTEGER, "a change got %s", VT_DESCRIBE(r));
        freeReplyObject(r);
    }
}

/* Check one page against everything seen before it; returns its cursor
 * (malloc'd). */
static char *live_page(live *l, const redisReply *p, int page)
{
    live_assert(l, page_shaped(p, true), "page %d: expected [cursor, [member, score, ...]], got %s", page,
                VT_DESCRIBE(p));
    const redisReply *items = p->element[1];
    for (size_t i = 0; i < items->elements; i += 2) {
        const redisReply *m = items->element[i], *s = items->element[i + 1];
        entry e;
        entry_set(&e, m->str, m->len, s->str, s->len);
        live_assert(l, !l->have_last || entry_cmp(&l->last, &e, l->rev) < 0,
                    "page %d: \"%s\" (%s) does not come after \"%s\" (%s)", page, vt_escape(m->str, m->len),
                    s->str, vt_escape(l->last.member, l->last.len), l->last.score_text);
        long number = live_number(m->str, m->len);
        live_assert(l, number >= 0 && number < l->next_new, "page %d: \"%s\" was never added", page,
                    vt_escape(m->str, m->len));
        if (number < LIVE_MEMBERS && l->stable[number]) {
            l->seen[number]++;
            live_assert(l, l->seen[number] == 1, "page %d: the untouched \"%s\" is seen a second time", page,
                        vt_escape(m->str, m->len));
            live_assert(l, e.score == l->score[number], "page %d: the untouched \"%s\" has score %s", page,
                        vt_escape(m->str, m->len), s->str);
        }
        memcpy(l->last_bytes, m->str, m->len);
        l->last_bytes[m->len] = '\0';
        entry_set(&l->last, l->last_bytes, m->len, s->str, s->len);
        l->have_last = true;
    }
    const char *cursor = p->element[0]->str;
    if (strcmp(cursor, "0") != 0) {
        live_assert(l, items->elements > 0, "page %d: an empty page with cursor \"%s\"", page, cursor);
        char *want = cursor_after(&l->last, l->rev);
        live_assert(l, strcmp(cursor, want) == 0, "page %d: cursor \"%s\", want \"%s\"", page, cursor, want);
        free(want);
    }
    return strdup(cursor);
}

/* The walk: each page after a batch of changes, sent by `other` (another
 * client) before it, or queued with it in one MULTI on the walker's own
 * connection. Then every stable member was seen exactly once. */
static void live_walk(live *l, redisContext *walker, redisContext *other)
{
    char *cursor = strdup("0");
    for (int page = 0;; page++) {
        live_assert(l, page < LIVE_MAX_PAGES, "%d pages and no end", page);
        char count[16];
        snprintf(count, sizeof(count), "%d", 1 + vt_rng_pick(&l->g, 16));
        const char *argv[6] = {"ZPAGE", LIVE_KEY, cursor, count, "WITHSCORES", "REV"};
        int argc = l->rev ? 6 : 5;
        redisReply *owner, *p;
        if (l->in_multi) {
            cr_assert(redisAppendCommand(walker, "MULTI") == REDIS_OK);
            int n = live_changes(l, walker);
            cr_assert(redisAppendCommandArgv(walker, argc, argv, NULL) == REDIS_OK);
            cr_assert(redisAppendCommand(walker, "EXEC") == REDIS_OK);
            for (int k = 0; k < n + 2; k++) {
                redisReply *r = vt_get_reply(walker);
                live_assert(l, r && r->type == REDIS_REPLY_STATUS, "MULTI or QUEUED: got %s", VT_DESCRIBE(r));
                freeReplyObject(r);
            }
            owner = vt_get_reply(walker);
            live_assert(l, owner && owner->type == REDIS_REPLY_ARRAY && owner->elements == (size_t)n + 1,
                        "EXEC: got %s", VT_DESCRIBE(owner));
            for (int k = 0; k < n; k++)
                live_assert(l, owner->element[k]->type == REDIS_REPLY_INTEGER, "a change in EXEC got %s",
                            VT_DESCRIBE(owner->element[k]));
            p = owner->element[n];
        } else {
            live_expect_change_replies(l, other, live_changes(l, other));
            owner = p = vt_cmd_argv(walker, argc, argv, NULL);
        }
        free(cursor);
        cursor = live_page(l, p, page);
        freeReplyObject(owner);
        if (strcmp(cursor, "0") == 0) break;
    }
    free(cursor);
    for (long i = 0; i < LIVE_MEMBERS; i++) {
        char m[LIVE_MEMBER_MAX];
        size_t len = live_member(i, m);
        live_assert(l, !l->stable[i] || l->seen[i] == 1, "the untouched \"%s\" (score %.17g) was never seen",
                    vt_escape(m, len), l->score[i]);
    }
    /* the walk met what it is about */
    live_assert(l, l->cursor_changes > 20 && l->tied_adds > 20,
                "only %d changes of the cursor's member and %d ties added at its score", l->cursor_changes,
                l->tied_adds);
    free(l->movable);
}

static uint64_t test_seed(void)
{
    const char *s = getenv("VP_TEST_SEED");
    if (s && *s) return strtoull(s, NULL, 10);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_sec * 1000003u) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
}

Test(zpage, a_walk_sees_every_untouched_member_once_in_order_while_another_client_changes_the_others)
{
    redisContext *walker = client(), *other = client();
    uint64_t seed = test_seed();
    static live l;
    for (int rev = 0; rev <= 1; rev++) {
        live_start(&l, other, seed + (uint64_t)rev, rev, false);
        live_walk(&l, walker, other);
    }
    redisFree(walker);
    redisFree(other);
}

Test(zpage, a_walk_sees_every_untouched_member_once_in_order_when_the_changes_share_its_transactions)
{
    redisContext *walker = client();
    uint64_t seed = test_seed();
    static live l;
    for (int rev = 0; rev <= 1; rev++) {
        live_start(&l, walker, seed + (uint64_t)rev, rev, true);
        live_walk(&l, walker, NULL);
    }
    redisFree(walker);
}

/* ---- ZSNAPSHOT dest ttl-ms numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX|COUNT] ---- */

/* [0, remaining], remaining within (0, ttl]. */
static long long expect_already_there_at(int line, redisReply *r, long long ttl)
{
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                  r->element[0]->type == REDIS_REPLY_INTEGER && r->element[0]->integer == 0 &&
                  r->element[1]->type == REDIS_REPLY_INTEGER,
              "line %d: expected [:0, :<remaining ms>], got %s", line, VT_DESCRIBE(r));
    long long left = r->element[1]->integer;
    freeReplyObject(r);
    vt_within_at(line, left, 1, ttl, "the snapshot's remaining ms");
    return left;
}
#define expect_already_there(r, ttl) expect_already_there_at(__LINE__, (r), (ttl))

/* ZSNAPSHOT dest SNAP_TTL <args> through the proxy builds [1, SNAP_TTL]
 * and exactly what ZUNIONSTORE dest:ref <args> builds on Redis itself
 * (want_key, if not NULL, is compared instead of that), with dest's TTL
 * set; a union ZUNIONSTORE leaves empty builds no key. */
static void expect_snapshot_at(int line, redisContext *c, redisContext *d, const char *dest,
                               const words *args, const char *want_key)
{
    char ref[256], ttl[24], what[160];
    snprintf(ref, sizeof(ref), "%s:ref", dest);
    snprintf(ttl, sizeof(ttl), "%s", SNAP_TTL_TEXT);
    words snap = {0}, store = {0};
    words_add(&snap, "ZSNAPSHOT");
    words_add(&snap, dest);
    words_add(&snap, ttl);
    words_add(&store, "ZUNIONSTORE");
    words_add(&store, ref);
    for (int i = 0; i < args->n; i++) {
        words_add(&snap, args->v[i]);
        words_add(&store, args->v[i]);
    }
    snprintf(what, sizeof(what), "ZSNAPSHOT %s %s %s %s ...", dest, ttl, args->v[0], args->v[1]);
    vt_check_reply(line, what, c, words_run(c, &snap), "[:1, :" SNAP_TTL_TEXT "]");
    if (!want_key) {
        redisReply *r = words_run(d, &store);
        cr_assert(r && r->type == REDIS_REPLY_INTEGER, "line %d: ZUNIONSTORE: got %s", line, VT_DESCRIBE(r));
        freeReplyObject(r);
        want_key = ref;
    }
    expect_same_zset_at(line, d, dest, want_key);
    redisReply *r = vt_cmd(d, "EXISTS %s", want_key);
    bool exists = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    r = vt_cmd(d, "PTTL %s", dest);
    cr_assert(r && r->type == REDIS_REPLY_INTEGER, "line %d: PTTL: got %s", line, VT_DESCRIBE(r));
    if (exists)
        vt_within_at(line, r->integer, 1, SNAP_TTL, "PTTL of the snapshot");
    else
        cr_assert(r->integer == -2, "line %d: an empty union made a key %s (PTTL %lld)", line, dest,
                  r->integer);
    freeReplyObject(r);
    words_free(&snap);
    words_free(&store);
}

/* The same from a line of words. */
static void expect_snapshot_line_at(int line, redisContext *c, redisContext *d, const char *dest,
                                    const char *args, const char *want_key)
{
    words w = {0};
    words_split(&w, args);
    expect_snapshot_at(line, c, d, dest, &w, want_key);
    words_free(&w);
}
#define expect_like_zunionstore(c, d, dest, args)                                                            \
    expect_snapshot_line_at(__LINE__, (c), (d), (dest), (args), NULL)

/* What AGGREGATE COUNT must build, at ref: ZUNIONSTORE ... AGGREGATE SUM
 * over copies of the sources as plain sets, where every member scores 1 so
 * each source adds its weight. The copies have the sources' sizes, in the
 * same order, so Redis adds the weights in the order it would add the
 * sources: the same sums, bit for bit. `weights` is NULL or n words. */
static void count_oracle(redisContext *d, const char *ref, int n, char *const *sources, char *const *weights)
{
    char copy[256];
    for (int i = 0; i < n; i++)
        cr_assert(redisAppendCommand(d, "TYPE %s", sources[i]) == REDIS_OK);
    char *kind = malloc((size_t)n);
    cr_assert(kind);
    for (int i = 0; i < n; i++) {
        redisReply *r = vt_get_reply(d);
        cr_assert(r && r->type == REDIS_REPLY_STATUS, "TYPE: got %s", VT_DESCRIBE(r));
        kind[i] = r->str[0]; /* z(set), s(et), n(one) */
        freeReplyObject(r);
    }
    for (int i = 0; i < n; i++) {
        snprintf(copy, sizeof(copy), "%s:as-set", sources[i]);
        if (kind[i] == 'z')
            redisAppendCommand(d, "ZRANGE %s 0 -1", sources[i]);
        else if (kind[i] == 's')
            redisAppendCommand(d, "SUNIONSTORE %s %s", copy, sources[i]);
        else
            redisAppendCommand(d, "DEL %s", copy);
    }
    int sadds = 0;
    for (int i = 0; i < n; i++) {
        redisReply *r = vt_get_reply(d);
        cr_assert(r && (r->type == REDIS_REPLY_ARRAY || r->type == REDIS_REPLY_INTEGER), "copying: got %s",
                  VT_DESCRIBE(r));
        if (kind[i] == 'z') {
            snprintf(copy, sizeof(copy), "%s:as-set", sources[i]);
            const char **argv = malloc((r->elements + 2) * sizeof(*argv));
            size_t *lens = malloc((r->elements + 2) * sizeof(*lens));
            cr_assert(argv && lens);
            argv[0] = "SADD";
            lens[0] = 4;
            argv[1] = copy;
            lens[1] = strlen(copy);
            for (size_t k = 0; k < r->elements; k++) {
                argv[k + 2] = r->element[k]->str;
                lens[k + 2] = r->element[k]->len;
            }
            cr_assert(redisAppendCommandArgv(d, (int)r->elements + 2, argv, lens) == REDIS_OK);
            sadds++;
            free(argv);
            free(lens);
        }
        freeReplyObject(r);
    }
    for (int i = 0; i < sadds; i++)
        expect_integer(vt_get_reply(d), "SADD");
    words w = {0};
    char nk[16];
    snprintf(nk, sizeof(nk), "%d", n);
    words_add(&w, "ZUNIONSTORE");
    words_add(&w, ref);
    words_add(&w, nk);
    for (int i = 0; i < n; i++) {
        snprintf(copy, sizeof(copy), "%s:as-set", sources[i]);
        words_add(&w, copy);
    }
    if (weights) {
        words_add(&w, "WEIGHTS");
        for (int i = 0; i < n; i++)
            words_add(&w, weights[i]);
    }
    words_add(&w, "AGGREGATE");
    words_add(&w, "SUM");
    expect_integer(words_run(d, &w), "ZUNIONSTORE of the copies");
    words_free(&w);
    free(kind);
}

/* ZSNAPSHOT dest SNAP_TTL <args> AGGREGATE COUNT, args being "numkeys
 * key... [WEIGHTS w...]", builds what count_oracle builds. */
static void expect_count_at(int line, redisContext *c, redisContext *d, const char *dest, const words *args)
{
    int n = atoi(args->v[0]);
    cr_assert(n >= 1 && args->n >= 1 + n);
    char ref[256];
    snprintf(ref, sizeof(ref), "%s:count-ref", dest);
    count_oracle(d, ref, n, args->v + 1, args->n >= 2 + 2 * n ? args->v + 2 + n : NULL);
    words w = {0};
    for (int i = 0; i < args->n; i++)
        words_add(&w, args->v[i]);
    words_add(&w, "AGGREGATE");
    words_add(&w, "COUNT");
    expect_snapshot_at(line, c, d, dest, &w, ref);
    words_free(&w);
}

static void expect_count_line_at(int line, redisContext *c, redisContext *d, const char *dest,
                                 const char *args)
{
    words w = {0};
    words_split(&w, args);
    expect_count_at(line, c, d, dest, &w);
    words_free(&w);
}
#define expect_like_count(c, d, dest, args) expect_count_line_at(__LINE__, (c), (d), (dest), (args))

Test(zsnapshot, built_once_with_its_ttl_then_it_answers_the_time_left)
{
    redisContext *c = client(), *d = redis_direct();
    EXPECT(c, ":3", "ZADD zs:a 1 x 2 y 3 z");
    EXPECT(c, ":2", "ZADD zs:b 10 y 20 w");
    long long t0 = vt_server_ms(c);
    EXPECT(c, "[:1, :60000]", "ZSNAPSHOT zs:snap 60000 2 zs:a zs:b");
    long long t1 = vt_server_ms(c);
    vt_assert_within(vt_pexpiretime(d, "zs:snap"), t0 + 60000, t1 + 60000, "the snapshot's expiry");
    EXPECT(d, "[\"x\", \"1\", \"z\", \"3\", \"y\", \"12\", \"w\", \"20\"]", "ZRANGE zs:snap 0 -1 WITHSCORES");
    /* the sources move on; the snapshot stays as it was */
    EXPECT(c, ":1", "ZADD zs:a 100 v");
    EXPECT(c, ":0", "ZADD zs:b 0 w");
    long long left = expect_already_there(vt_cmd(c, "ZSNAPSHOT zs:snap 60000 2 zs:a zs:b"), 60000);
    redisReply *r = vt_cmd(d, "PTTL zs:snap");
    cr_assert(r && r->type == REDIS_REPLY_INTEGER && r->integer > 0 && r->integer <= left,
              "PTTL %s after the answer %lld", VT_DESCRIBE(r), left);
    freeReplyObject(r);
    /* another ttl or other sources change nothing either */
    expect_already_there(vt_cmd(c, "ZSNAPSHOT zs:snap 5 1 zs:a"), 60000);
    expect_already_there(vt_cmd(c, "ZSNAPSHOT zs:snap 60000 1 zs:a AGGREGATE COUNT"), 60000);
    EXPECT(d, "[\"x\", \"1\", \"z\", \"3\", \"y\", \"12\", \"w\", \"20\"]", "ZRANGE zs:snap 0 -1 WITHSCORES");
    vt_assert_within(vt_pexpiretime(d, "zs:snap"), t0 + 60000, t1 + 60000,
                     "the snapshot's expiry, unchanged");
    redisFree(c);
    redisFree(d);
}

Test(zsnapshot, the_content_is_what_zunionstore_builds)
{
    redisContext *c = client(), *d = redis_direct();
    EXPECT(c, ":4", "ZADD zs:a 1 x 2.5 y -3 z 0.1 t");
    EXPECT(c, ":4", "ZADD zs:b 10 y 20 w -inf z 0.2 t");
    EXPECT(c, ":3", "SADD zs:s x w u");
    EXPECT(c, ":2", "ZADD zs:i inf x -inf w");
    expect_like_zunionstore(c, d, "zs:1", "1 zs:a");
    expect_like_zunionstore(c, d, "zs:2", "2 zs:a zs:b");
    expect_like_zunionstore(c, d, "zs:3", "3 zs:a zs:b zs:s AGGREGATE SUM");
    expect_like_zunionstore(c, d, "zs:4", "3 zs:a zs:b zs:s AGGREGATE MIN");
    expect_like_zunionstore(c, d, "zs:5", "3 zs:a zs:b zs:s AGGREGATE MAX");
    expect_like_zunionstore(c, d, "zs:6", "3 zs:a zs:b zs:s WEIGHTS -2 0.1 3.5");
    expect_like_zunionstore(c, d, "zs:7", "3 zs:a zs:b zs:s WEIGHTS -0.3 1e-3 -1 AGGREGATE MIN");
    expect_like_zunionstore(c, d, "zs:8", "3 zs:a zs:b zs:s WEIGHTS 0.7 -0.25 2 AGGREGATE max");
    /* missing keys are empty sets */
    expect_like_zunionstore(c, d, "zs:9", "4 zs:none zs:a zs:none2 zs:s WEIGHTS 5 0.5 7 -1");
    /* inf * 0 and inf + -inf are NaN: Redis makes them 0 */
    expect_like_zunionstore(c, d, "zs:10", "3 zs:a zs:i zs:b WEIGHTS 0 1 1");
    expect_like_zunionstore(c, d, "zs:11", "2 zs:i zs:b WEIGHTS inf -inf AGGREGATE min");
    expect_like_zunionstore(c, d, "zs:12", "2 zs:s zs:i WEIGHTS -inf 0x10");
    /* options in any case, repeated: the last one wins */
    expect_like_zunionstore(c, d, "zs:13",
                            "2 zs:a zs:b weights 1 2 Aggregate Min WEIGHTS 3 -1 aggregate MAX");
    /* a key named twice counts twice */
    expect_like_zunionstore(c, d, "zs:14", "3 zs:a zs:a zs:b WEIGHTS 1 0.1 1");
    redisFree(c);
    redisFree(d);
}

Test(zsnapshot, aggregate_count_scores_each_member_with_the_weights_of_the_sources_holding_it)
{
    redisContext *c = client(), *d = redis_direct();
    EXPECT(c, ":3", "ZADD zc:a 5 x 7 y -inf w");
    EXPECT(c, ":2", "SADD zc:b x z");
    EXPECT(c, ":1", "ZADD zc:d 100 z");
    /* their scores play no part; a plain set counts like a sorted set; a
     * missing key holds nothing */
    EXPECT(c, "[:1, :60000]", "ZSNAPSHOT zc:1 60000 4 zc:a zc:b zc:none zc:d AGGREGATE COUNT");
    EXPECT(c, "[\"w\", \"1\", \"y\", \"1\", \"x\", \"2\", \"z\", \"2\"]", "ZRANGE zc:1 0 -1 WITHSCORES");
    EXPECT(c, "[:1, :60000]",
           "ZSNAPSHOT zc:2 60000 4 zc:a zc:b zc:none zc:d WEIGHTS 2 0.5 9 -1 aggregate count");
    EXPECT(c, "[\"z\", \"-0.5\", \"w\", \"2\", \"y\", \"2\", \"x\", \"2.5\"]", "ZRANGE zc:2 0 -1 WITHSCORES");
    /* inf + -inf is 0, as Redis makes every NaN sum */
    EXPECT(c, "[:1, :60000]", "ZSNAPSHOT zc:3 60000 2 zc:a zc:b WEIGHTS inf -inf AGGREGATE COUNT");
    EXPECT(c, "[\"z\", \"-inf\", \"x\", \"0\", \"w\", \"inf\", \"y\", \"inf\"]",
           "ZRANGE zc:3 0 -1 WITHSCORES");
    /* a source named twice counts twice; the last AGGREGATE wins */
    EXPECT(c, "[:1, :60000]", "ZSNAPSHOT zc:4 60000 2 zc:b zc:b AGGREGATE MAX AGGREGATE COUNT");
    EXPECT(c, "[\"x\", \"2\", \"z\", \"2\"]", "ZRANGE zc:4 0 -1 WITHSCORES");
    /* a COUNT that a later AGGREGATE overrides is not sent to a Redis
     * without it (which would refuse it) */
    EXPECT(c, "[:1, :60000]", "ZSNAPSHOT zc:5 60000 1 zc:b AGGREGATE COUNT AGGREGATE SUM");
    EXPECT(c, "[\"x\", \"1\", \"z\", \"1\"]", "ZRANGE zc:5 0 -1 WITHSCORES");
    EXPECT(c, "[:1, :60000]", "ZSNAPSHOT zc:5b 60000 2 zc:a zc:d aggregate count WEIGHTS 2 3 AGGREGATE MIN");
    EXPECT(c, "[\"w\", \"-inf\", \"x\", \"10\", \"y\", \"14\", \"z\", \"300\"]",
           "ZRANGE zc:5b 0 -1 WITHSCORES");
    /* and against ZUNIONSTORE over plain-set copies, with sums that depend
     * on the order of the additions */
    expect_like_count(c, d, "zc:6", "4 zc:a zc:b zc:none zc:d WEIGHTS 0.1 0.2 0.3 0.7");
    expect_like_count(c, d, "zc:7", "3 zc:d zc:a zc:b");
    expect_like_count(c, d, "zc:8", "1 zc:none");
    redisFree(c);
    redisFree(d);
}

/* ---- eight clients, one snapshot ---- */

#define RACERS 8
#define RACE_ROUNDS 3

typedef struct racer {
    int port;
    pthread_barrier_t *start;
    char dest[64];
    redisReply *built; /* ZSNAPSHOT's reply */
    redisReply *read;  /* ZRANGE dest 0 -1 WITHSCORES, pipelined right behind it */
    char problem[256];
} racer;

static void *race(void *arg)
{
    racer *r = arg;
    redisContext *c = vt_connect(r->port);
    pthread_barrier_wait(r->start);
    if (!c) {
        snprintf(r->problem, sizeof(r->problem), "could not connect");
        return NULL;
    }
    redisAppendCommand(c, "ZSNAPSHOT %s %d 3 big:0 big:1 big:2 WEIGHTS 1 0.5 -2", r->dest, SNAP_TTL);
    redisAppendCommand(c, "ZRANGE %s 0 -1 WITHSCORES", r->dest);
    r->built = vt_get_reply(c);
    r->read = r->built ? vt_get_reply(c) : NULL;
    if (!r->read) snprintf(r->problem, sizeof(r->problem), "no reply: %s", c->errstr);
    redisFree(c);
    return NULL;
}

/* nsources sources big:0.. of up to `size` members each, overlapping: big:k
 * holds m<(j * (k + 2)) % 50000>, scores tenths (sums depend on the order
 * of the additions); every third one is a plain set. */
static void fill_big_sources(redisContext *d, int nsources, int size)
{
    for (int k = 0; k < nsources; k++) {
        words w = {0};
        char key[32], buf[48];
        snprintf(key, sizeof(key), "big:%d", k);
        words_add(&w, k % 3 == 2 ? "SADD" : "ZADD");
        words_add(&w, key);
        for (int j = 0; j < size; j++) {
            if (k % 3 != 2) {
                snprintf(buf, sizeof(buf), "%.17g", ((j * 7919 + k * 104729) % 20001 - 10000) / 10.0);
                words_add(&w, buf);
            }
            snprintf(buf, sizeof(buf), "m%d", (j * (k + 2)) % 50000);
            words_add(&w, buf);
        }
        expect_integer(words_run(d, &w), "filling a source");
        words_free(&w);
    }
}

Test(zsnapshot, eight_clients_racing_for_one_snapshot_get_one_builder_and_one_content)
{
    VT_SKIP_IF_DIRECT();
    redisContext *d = redis_direct();
    fill_big_sources(d, 3, 20000);
    for (int round = 0; round < RACE_ROUNDS; round++) {
        racer racers[RACERS];
        pthread_t threads[RACERS];
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, RACERS);
        for (int i = 0; i < RACERS; i++) {
            racers[i] = (racer){.port = env.proxy->port, .start = &start};
            snprintf(racers[i].dest, sizeof(racers[i].dest), "race:%d", round);
            cr_assert(pthread_create(&threads[i], NULL, race, &racers[i]) == 0);
        }
        for (int i = 0; i < RACERS; i++)
            pthread_join(threads[i], NULL);
        pthread_barrier_destroy(&start);

        char ref[64];
        snprintf(ref, sizeof(ref), "race:%d:ref", round);
        expect_integer(vt_cmd(d, "ZUNIONSTORE %s 3 big:0 big:1 big:2 WEIGHTS 1 0.5 -2", ref), "ZUNIONSTORE");
        redisReply *want = vt_cmd(d, "ZRANGE %s 0 -1 WITHSCORES", ref);
        cr_assert(want && want->type == REDIS_REPLY_ARRAY && want->elements > 20000);
        int builders = 0;
        for (int i = 0; i < RACERS; i++) {
            racer *r = &racers[i];
            cr_assert(r->problem[0] == '\0', "round %d, client %d: %s", round, i, r->problem);
            if (r->built->type == REDIS_REPLY_ARRAY && r->built->elements == 2 &&
                r->built->element[0]->type == REDIS_REPLY_INTEGER && r->built->element[0]->integer == 1) {
                builders++;
                cr_assert(r->built->element[1]->integer == SNAP_TTL, "round %d, client %d: built %s", round,
                          i, VT_DESCRIBE(r->built));
                freeReplyObject(r->built);
            } else {
                expect_already_there(r->built, SNAP_TTL);
            }
            char why[1200];
            cr_assert(vt_reply_equal(want, r->read, why, sizeof(why)),
                      "round %d, client %d read another snapshot than ZUNIONSTORE's: %s", round, i, why);
            freeReplyObject(r->read);
        }
        cr_assert(builders == 1, "round %d: %d clients built the snapshot", round, builders);
        freeReplyObject(want);
    }
    redisFree(d);
}

/* ---- what is already there ---- */

/* A sorted set already at dest keeps its content. One with no TTL (a
 * user's, or a snapshot an older proxy's failed PEXPIRE left: issue 22,
 * finding 8) gets ttl-ms, so it is not answered [0, -1] forever; a TTL it
 * has is left as it is. */
Test(zsnapshot, an_existing_sorted_set_keeps_its_content_and_gets_the_ttl_only_if_it_had_none)
{
    redisContext *c = client(), *d = redis_direct();
    EXPECT(c, ":1", "ZADD zs:src 1 fresh");
    EXPECT(c, ":1", "ZADD zs:kept 7 old");
    long long t0 = vt_server_ms(c);
    long long left = expect_already_there(vt_cmd(c, "ZSNAPSHOT zs:kept 60000 1 zs:src"), 60000);
    long long t1 = vt_server_ms(c);
    EXPECT(c, "[\"old\", \"7\"]", "ZRANGE zs:kept 0 -1 WITHSCORES");
    long long at = vt_pexpiretime(d, "zs:kept");
    vt_assert_within(at, t0 + 60000, t1 + 60000, "the expiry it was given");
    vt_assert_within(left, at - t1, 60000, "the time left it answered");
    /* now it has one: the next call leaves it as it is */
    expect_already_there(vt_cmd(c, "ZSNAPSHOT zs:kept 5 1 zs:src"), 60000);
    cr_assert_eq(vt_pexpiretime(d, "zs:kept"), at, "a TTL it had was changed");
    EXPECT(c, ":1", "PEXPIRE zs:kept 5000");
    expect_already_there(vt_cmd(c, "ZSNAPSHOT zs:kept 60000 1 zs:src"), 5000);
    EXPECT(c, "[\"old\", \"7\"]", "ZRANGE zs:kept 0 -1 WITHSCORES");
    redisFree(c);
    redisFree(d);
}

static redisContext *g_expiry_watch;
static const char *g_expiry_key;

static bool key_gone(void *arg)
{
    (void)arg;
    redisReply *r = vt_cmd(g_expiry_watch, "EXISTS %s", g_expiry_key);
    cr_assert(r && r->type == REDIS_REPLY_INTEGER, "EXISTS: got %s", VT_DESCRIBE(r));
    bool gone = r->integer == 0;
    freeReplyObject(r);
    return gone;
}

/* The story of finding 8 after the failed PEXPIRE: a snapshot with no TTL
 * (made here as an older proxy left it: ZUNIONSTORE without PEXPIRE) while
 * the sources move on. The next call gives it its TTL; once that is over,
 * the snapshot is built again from the sources as they are. Bystanders
 * throughout. */
Test(zsnapshot, a_snapshot_left_without_a_ttl_is_given_one_and_rebuilt_after_it)
{
    redisContext *c = client(), *d = redis_direct();
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, 4, 50);
    EXPECT(c, ":2", "ZADD zs:src 1 a 2 b");
    EXPECT(d, ":2", "ZUNIONSTORE zs:stale 1 zs:src");
    EXPECT(c, ":1", "ZADD zs:src 3 c");
    expect_already_there(vt_cmd(c, "ZSNAPSHOT zs:stale 300 1 zs:src"), 300);
    EXPECT(c, "[\"a\", \"1\", \"b\", \"2\"]", "ZRANGE zs:stale 0 -1 WITHSCORES");
    g_expiry_watch = d;
    g_expiry_key = "zs:stale";
    cr_assert(vt_wait_until(key_gone, NULL, 10000), "zs:stale did not expire within 10 s of a 300 ms TTL");
    EXPECT(c, "[:1, :60000]", "ZSNAPSHOT zs:stale 60000 1 zs:src");
    EXPECT(c, "[\"a\", \"1\", \"b\", \"2\", \"c\", \"3\"]", "ZRANGE zs:stale 0 -1 WITHSCORES");
    expect_already_there(vt_cmd(c, "ZSNAPSHOT zs:stale 60000 1 zs:src"), 60000);
    cr_assert(vt_bystanders_wait(b, 50, 10000), "the bystanders were not served after the story");
    vt_assert_bystanders_ok(b);
    redisFree(c);
    redisFree(d);
}

Test(zsnapshot, a_dest_of_another_type_is_wrongtype_and_left_as_it_is)
{
    redisContext *c = client();
    EXPECT(c, ":1", "ZADD zs:src 1 m");
    EXPECT(c, "+OK", "SET zs:str text");
    EXPECT(c, ":1", "RPUSH zs:list a");
    EXPECT(c, ":1", "HSET zs:hash f v");
    EXPECT(c, ":1", "SADD zs:set m");
    static const char *const dests[] = {"zs:str", "zs:list", "zs:hash", "zs:set"};
    for (size_t i = 0; i < sizeof(dests) / sizeof(dests[0]); i++) {
        EXPECT(c, WRONGTYPE, "ZSNAPSHOT %s 60000 1 zs:src", dests[i]);
        EXPECT(c, WRONGTYPE, "ZSNAPSHOT %s 60000 1 zs:src AGGREGATE COUNT", dests[i]);
        EXPECT(c, ":-1", "PTTL %s", dests[i]);
    }
    EXPECT(c, "\"text\"", "GET zs:str");
    EXPECT(c, "[\"a\"]", "LRANGE zs:list 0 -1");
    EXPECT(c, "[\"f\", \"v\"]", "HGETALL zs:hash");
    EXPECT(c, "[\"m\"]", "SMEMBERS zs:set");
    redisFree(c);
}

Test(zsnapshot, a_source_of_a_wrong_type_is_wrongtype_and_no_snapshot_is_made)
{
    redisContext *c = client();
    EXPECT(c, ":1", "ZADD zs:a 1 m");
    EXPECT(c, ":1", "SADD zs:s m");
    EXPECT(c, "+OK", "SET zs:str text");
    EXPECT(c, ":1", "RPUSH zs:list a");
    EXPECT(c, ":1", "HSET zs:hash f v");
    EXPECT(c, WRONGTYPE, "ZSNAPSHOT zs:snap 60000 3 zs:a zs:s zs:str");
    EXPECT(c, WRONGTYPE, "ZSNAPSHOT zs:snap 60000 2 zs:list zs:a AGGREGATE MIN");
    EXPECT(c, WRONGTYPE, "ZSNAPSHOT zs:snap 60000 3 zs:s zs:hash zs:a WEIGHTS 1 2 3 AGGREGATE COUNT");
    EXPECT(c, ":0", "EXISTS zs:snap");
    EXPECT(c, "\"text\"", "GET zs:str");
    EXPECT(c, "[:1, :60000]", "ZSNAPSHOT zs:snap 60000 2 zs:a zs:s");
    EXPECT(c, "[\"m\", \"2\"]", "ZRANGE zs:snap 0 -1 WITHSCORES");
    redisFree(c);
}

Test(zsnapshot, an_empty_union_stores_nothing_and_reads_as_the_empty_snapshot)
{
    redisContext *c = client();
    EXPECT(c, "[:1, :60000]", "ZSNAPSHOT zs:empty 60000 2 zs:none zs:none2");
    EXPECT(c, ":0", "EXISTS zs:empty");
    EXPECT(c, "[:1, :60000]", "ZSNAPSHOT zs:empty 60000 1 zs:none AGGREGATE COUNT");
    EXPECT(c, ":0", "EXISTS zs:empty");
    EXPECT(c, "[\"0\", []]", "ZPAGE zs:empty 0 10");
    redisFree(c);
}

Test(zsnapshot, the_dest_may_be_one_of_its_sources)
{
    redisContext *c = client();
    EXPECT(c, ":2", "ZADD zs:a 1 x 2 y");
    EXPECT(c, ":1", "SADD zs:s y");
    /* dest does not exist yet: as a source it is empty */
    EXPECT(c, "[:1, :60000]", "ZSNAPSHOT zs:self 60000 3 zs:self zs:a zs:s WEIGHTS 5 2 3");
    EXPECT(c, "[\"x\", \"2\", \"y\", \"7\"]", "ZRANGE zs:self 0 -1 WITHSCORES");
    expect_already_there(vt_cmd(c, "ZSNAPSHOT zs:self 60000 2 zs:self zs:a"), 60000);
    EXPECT(c, "[\"x\", \"2\", \"y\", \"7\"]", "ZRANGE zs:self 0 -1 WITHSCORES");
    EXPECT(c, "[:1, :60000]", "ZSNAPSHOT zs:self2 60000 2 zs:a zs:self2 AGGREGATE COUNT");
    EXPECT(c, "[\"x\", \"1\", \"y\", \"1\"]", "ZRANGE zs:self2 0 -1 WITHSCORES");
    redisFree(c);
}

/* PEXPIRE's own limits: above 0, and server time + ttl within int64. The
 * TTL set is exact; the reply's number passes through a Lua number (a
 * double), so it is exact up to 2^53 ms. */
Test(zsnapshot, the_ttl_is_exact_up_to_the_int64_limit)
{
    redisContext *c = client(), *d = redis_direct();
    EXPECT(c, ":1", "ZADD zs:a 1 m");
    EXPECT(c, "[:1, :1]", "ZSNAPSHOT zs:1ms 1 1 zs:a");
    long long t0 = vt_server_ms(c);
    EXPECT(c, "[:1, :9007199254740992]", "ZSNAPSHOT zs:2p53 9007199254740992 1 zs:a");
    long long t1 = vt_server_ms(c);
    vt_assert_within(vt_pexpiretime(d, "zs:2p53"), t0 + 9007199254740992LL, t1 + 9007199254740992LL,
                     "expiry");
    t0 = vt_server_ms(c);
    redisReply *r = vt_cmd(c, "ZSNAPSHOT zs:2p53p1 9007199254740993 1 zs:a");
    t1 = vt_server_ms(c);
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->integer == 1, "got %s",
              VT_DESCRIBE(r));
    freeReplyObject(r);
    vt_assert_within(vt_pexpiretime(d, "zs:2p53p1"), t0 + 9007199254740993LL, t1 + 9007199254740993LL,
                     "expiry");
    /* server time + ttl: an hour inside int64, then an hour past it */
    long long now = vt_server_ms(c);
    t0 = vt_server_ms(c);
    r = vt_cmd(c, "ZSNAPSHOT zs:far %lld 1 zs:a", LLONG_MAX - now - 3600000);
    t1 = vt_server_ms(c);
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->integer == 1, "got %s",
              VT_DESCRIBE(r));
    freeReplyObject(r);
    vt_assert_within(vt_pexpiretime(d, "zs:far"), t0 + (LLONG_MAX - now - 3600000),
                     t1 + (LLONG_MAX - now - 3600000), "expiry");
    EXPECT(c, "-" ERR_EXPIRE, "ZSNAPSHOT zs:past %lld 1 zs:a", LLONG_MAX - now + 3600000);
    EXPECT(c, "-" ERR_EXPIRE, "ZSNAPSHOT zs:past 9223372036854775807 1 zs:a");
    EXPECT(c, "-" ERR_EXPIRE, "ZSNAPSHOT zs:past 9223372036854775807 1 zs:a AGGREGATE COUNT");
    EXPECT(c, ":0", "EXISTS zs:past");
    redisFree(c);
    redisFree(d);
}

/* ---- the time to live at the int64 edge, set after a long write (issue 22, finding 8) ----
 *
 * ttl-ms so close to PEXPIRE's limit (server time + ttl-ms within int64)
 * that the clock moving on while the script writes passes it. The script
 * checked the sum against the clock it read before the write; Redis 7.0's
 * PEXPIRE adds the clock as it is when PEXPIRE runs, after the write, and
 * refused: "invalid expire time in 'pexpire'", the key written and left
 * with no TTL (a snapshot answered [0, -1] by every later call, never
 * rebuilt). What must happen instead: the call is refused before anything
 * is written, or the key gets its TTL. */

#define EDGE_MEMBERS 150000

/* n members in key, scores from `score` (pipelined ZADDs of 10,000). */
static void fill_members(redisContext *d, const char *key, int n, const char *score)
{
    int calls = 0;
    for (int first = 0; first < n; first += 10000, calls++) {
        words w = {0};
        char buf[32];
        words_add(&w, "ZADD");
        words_add(&w, key);
        for (int j = first; j < n && j < first + 10000; j++) {
            if (score) {
                words_add(&w, score);
            } else {
                snprintf(buf, sizeof(buf), "%d", j);
                words_add(&w, buf);
            }
            snprintf(buf, sizeof(buf), "m%d", j);
            words_add(&w, buf);
        }
        cr_assert(redisAppendCommandArgv(d, w.n, (const char **)w.v, NULL) == REDIS_OK);
        words_free(&w);
    }
    for (; calls > 0; calls--)
        expect_integer(vt_get_reply(d), "filling");
}

/* Redis's own time for the EVALSHAs since CONFIG RESETSTAT (INFO
 * commandstats), in µs: how long the verb's script ran. */
static long long evalsha_usec(redisContext *d)
{
    redisReply *r = vt_cmd(d, "INFO commandstats");
    cr_assert(r && r->type == REDIS_REPLY_STRING, "INFO: got %s", VT_DESCRIBE(r));
    const char *p = strstr(r->str, "cmdstat_evalsha:");
    long long calls = 0, usec = 0;
    cr_assert(p && sscanf(p, "cmdstat_evalsha:calls=%lld,usec=%lld", &calls, &usec) == 2 && calls >= 1,
              "no EVALSHA in INFO commandstats:\n%s", r->str);
    freeReplyObject(r);
    return usec;
}

/* server time `now` + ttl, or LLONG_MAX if that passes it. */
static long long plus_capped(long long now, long long ttl)
{
    return ttl > LLONG_MAX - now ? LLONG_MAX : now + ttl;
}

/* One call at the edge: ttl = LLONG_MAX - (server time) - room, the verb
 * (fmt with one %lld for the ttl) sent through c. Returns false when it was
 * refused before any write (the check ran after the room was gone: the
 * caller tries again with more room), after checking that `key` is as it
 * was (PEXPIRETIME `before`). Else the reply must be `built` (the ttl in
 * its place, where "%lld" is) and the key's expiry between the server's
 * times before and after + ttl; *ttl_out gets the ttl, *usec_out the time
 * the script ran. Anything else fails the test. */
static bool call_at_the_edge(redisContext *c, redisContext *d, const char *fmt, const char *key,
                             long long before, const char *refusal, long long room, long long *ttl_out,
                             long long *usec_out, redisReply **reply_out)
{
    EXPECT(d, "+OK", "CONFIG RESETSTAT");
    long long now = vt_server_ms(c);
    long long ttl = LLONG_MAX - now - room;
    long long t0 = vt_server_ms(c);
    redisReply *r = vt_cmd(c, fmt, ttl);
    long long t1 = vt_server_ms(c);
    cr_assert(r != NULL, "no reply: %s", c->errstr);
    long long at = vt_pexpiretime(d, key);
    if (r->type == REDIS_REPLY_ERROR && strcmp(r->str, refusal) == 0) {
        cr_assert(at == before, "refused (%s), yet %s's expiry went from %lld to %lld", r->str, key, before,
                  at);
        freeReplyObject(r);
        return false;
    }
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                  r->element[0]->type == REDIS_REPLY_INTEGER && r->element[1]->type == REDIS_REPLY_INTEGER,
              "ttl %lld (%lld ms of room): got %s; %s's PEXPIRETIME is now %lld (-1: written without a TTL)",
              ttl, room, VT_DESCRIBE(r), key, at);
    vt_assert_within(at, plus_capped(t0, ttl), plus_capped(t1, ttl), "the expiry set at the edge");
    *ttl_out = ttl;
    *usec_out = evalsha_usec(d);
    *reply_out = r;
    return true;
}

Test(zsnapshot, a_ttl_at_the_int64_edge_is_set_even_when_the_clock_passes_the_edge_during_the_union)
{
    redisContext *c = client(), *d = redis_direct();
    fill_members(d, "edge:src", EDGE_MEMBERS, NULL);
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, 4, 50);
    long long ttl = 0, usec = 0, room = 5;
    redisReply *r = NULL;
    /* room: the ms between the test's TIME and the script's, which a busy
     * machine may stretch; each refusal (nothing written) doubles it. */
    while (!call_at_the_edge(c, d, "ZSNAPSHOT edge:snap %lld 1 edge:src", "edge:snap", -2, ERR_EXPIRE, room,
                             &ttl, &usec, &r)) {
        cr_assert(room < 160, "refused at the check with %lld ms of room: the machine is too slow", room);
        room *= 2;
    }
    /* the union took longer than the room left: a PEXPIRE ttl run after it
     * would have passed int64 (else this story could not fail). The
     * script's TIME is not before the test's, and a clock read `usec` later
     * is at least usec / 1000 - 1 ms further on. */
    cr_assert(usec / 1000 > room + 2,
              "the union took %lld us, not beyond the %lld ms of room: make the source larger", usec, room);
    cr_assert(r->element[0]->integer == 1 && r->element[1]->integer >= ttl - 1024 &&
                  r->element[1]->integer <= ttl + 1024,
              "expected [1, ~%lld] (a double's precision), got %s", ttl, VT_DESCRIBE(r));
    freeReplyObject(r);
    EXPECT(d, ":150000", "ZUNIONSTORE edge:ref 1 edge:src");
    expect_same_zset_at(__LINE__, d, "edge:snap", "edge:ref");
    /* a later call: the snapshot is there, answered with the time it has
     * left (PTTL: its expiry - the clock, within a double's precision) */
    long long at = vt_pexpiretime(d, "edge:snap");
    long long t0 = vt_server_ms(c);
    r = vt_cmd(c, "ZSNAPSHOT edge:snap 60000 1 edge:src");
    long long t1 = vt_server_ms(c);
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->integer == 0 &&
                  r->element[1]->integer >= at - t1 - 1024 && r->element[1]->integer <= at - t0 + 1024,
              "the next call: expected [0, %lld..%lld], got %s", at - t1, at - t0, VT_DESCRIBE(r));
    freeReplyObject(r);
    cr_assert_eq(vt_pexpiretime(d, "edge:snap"), at, "the next call changed the snapshot's TTL");
    cr_assert(vt_bystanders_wait(b, 50, 10000), "the bystanders were not served after the story");
    vt_assert_bystanders_ok(b);
    redisFree(c);
    redisFree(d);
}

/* ZWINDOW has the same shape: it removes the entries older than the window
 * and adds the member, then sets the TTL to window-ms. With a window at the
 * edge, the removal of many entries logged at times before it (-1e19 ms)
 * takes longer than the room left. (Told here, beside ZSNAPSHOT's, as the
 * same finding.) */
Test(zsnapshot, zwindow_at_the_int64_edge_sets_its_ttl_even_when_the_clock_passes_the_edge_during_its_writes)
{
    redisContext *c = client(), *d = redis_direct();
    fill_members(d, "edge:win", EDGE_MEMBERS, "-1e19");
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, 4, 50);
    long long ttl = 0, usec = 0, room = 5;
    redisReply *r = NULL;
    while (!call_at_the_edge(c, d, "ZWINDOW edge:win %lld now", "edge:win", -1,
                             "ERR invalid expire time in 'zwindow' command", room, &ttl, &usec, &r)) {
        cr_assert(room < 160, "refused at the check with %lld ms of room: the machine is too slow", room);
        room *= 2;
    }
    cr_assert(usec / 1000 > room + 2, "the removal took %lld us, not beyond the %lld ms of room: add entries",
              usec, room);
    vt_check_reply(__LINE__, "ZWINDOW at the edge", c, r, "[:1, :1]");
    EXPECT(d, "[\"now\"]", "ZRANGE edge:win 0 -1");
    /* a later call with a window of a minute: its TTL, as documented */
    EXPECT(c, "[:1, :1]", "ZWINDOW edge:win 60000 now");
    redisReply *t = vt_cmd(d, "PTTL edge:win");
    cr_assert(t && t->type == REDIS_REPLY_INTEGER, "PTTL: got %s", VT_DESCRIBE(t));
    vt_assert_within(t->integer, 1, 60000, "the window's TTL after a later call");
    freeReplyObject(t);
    cr_assert(vt_bystanders_wait(b, 50, 10000), "the bystanders were not served after the story");
    vt_assert_bystanders_ok(b);
    redisFree(c);
    redisFree(d);
}

Test(zsnapshot, argument_errors_are_answered_in_order_with_redis_texts_by_proxy_and_script_alike)
{
    redisContext *c = client();
    EXPECT(c, "+OK", "SET zs:str text");
    EXPECT_ERR(c, ERR_ARITY("zsnapshot"), "ZSNAPSHOT");
    EXPECT_ERR(c, ERR_ARITY("zsnapshot"), "ZSNAPSHOT zs:d");
    EXPECT_ERR(c, ERR_ARITY("zsnapshot"), "ZSNAPSHOT zs:d 1000");
    EXPECT_ERR(c, ERR_ARITY("zsnapshot"), "zSnapshot zs:d 1000 1");
    static const refusal calls[] = {
        /* ttl-ms */
        {ERR_INT, "ZSNAPSHOT zs:d x 1 zs:a"},
        {ERR_INT, "ZSNAPSHOT zs:d 1.5 1 zs:a"},
        {ERR_INT, "ZSNAPSHOT zs:d '' 1 zs:a"},
        {ERR_INT, "ZSNAPSHOT zs:d +5 1 zs:a"},
        {ERR_INT, "ZSNAPSHOT zs:d 01 1 zs:a"},
        {ERR_INT, "ZSNAPSHOT zs:d 9223372036854775808 1 zs:a"},
        {ERR_EXPIRE, "ZSNAPSHOT zs:d 0 1 zs:a"},
        {ERR_EXPIRE, "ZSNAPSHOT zs:d -1 1 zs:a"},
        {ERR_EXPIRE, "ZSNAPSHOT zs:d -9223372036854775808 1 zs:a"},
        /* numkeys */
        {ERR_INT, "ZSNAPSHOT zs:d 1000 x zs:a"},
        {ERR_INT, "ZSNAPSHOT zs:d 1000 1.0 zs:a"},
        {ERR_INT, "ZSNAPSHOT zs:d 1000 '' zs:a"},
        {ERR_INT, "ZSNAPSHOT zs:d 1000 01 zs:a"},
        {ERR_INT, "ZSNAPSHOT zs:d 1000 -0 zs:a"},
        {ERR_NUMKEYS, "ZSNAPSHOT zs:d 1000 0 zs:a"},
        {ERR_NUMKEYS, "ZSNAPSHOT zs:d 1000 -1 zs:a"},
        {ERR_SYNTAX, "ZSNAPSHOT zs:d 1000 2 zs:a"},
        {ERR_SYNTAX, "ZSNAPSHOT zs:d 1000 9223372036854775807 zs:a"},
        /* WEIGHTS */
        {ERR_SYNTAX, "ZSNAPSHOT zs:d 1000 1 zs:a WEIGHTS"},
        {ERR_SYNTAX, "ZSNAPSHOT zs:d 1000 2 zs:a zs:b WEIGHTS 1"},
        {ERR_SYNTAX, "ZSNAPSHOT zs:d 1000 1 zs:a WEIGHTS 1 2"},
        {ERR_WEIGHT, "ZSNAPSHOT zs:d 1000 1 zs:a WEIGHTS x"},
        {ERR_WEIGHT, "ZSNAPSHOT zs:d 1000 1 zs:a WEIGHTS nan"},
        {ERR_WEIGHT, "ZSNAPSHOT zs:d 1000 1 zs:a WEIGHTS ''"},
        {ERR_WEIGHT, "ZSNAPSHOT zs:d 1000 1 zs:a WEIGHTS 1e999"},
        {ERR_WEIGHT, "ZSNAPSHOT zs:d 1000 2 zs:a zs:b WEIGHTS 1 1x"},
        /* AGGREGATE and anything else */
        {ERR_SYNTAX, "ZSNAPSHOT zs:d 1000 1 zs:a AGGREGATE"},
        {ERR_SYNTAX, "ZSNAPSHOT zs:d 1000 1 zs:a AGGREGATE AVG"},
        {ERR_SYNTAX, "ZSNAPSHOT zs:d 1000 1 zs:a AGGREGATE COUNTS"},
        {ERR_SYNTAX, "ZSNAPSHOT zs:d 1000 1 zs:a AGGREGATE SUM x"},
        {ERR_SYNTAX, "ZSNAPSHOT zs:d 1000 1 zs:a WITHSCORES"},
        {ERR_SYNTAX, "ZSNAPSHOT zs:d 1000 1 zs:a LIMIT 1"},
        /* in Redis's order: ttl, numkeys, then the options left to right;
         * all before any key is read */
        {ERR_EXPIRE, "ZSNAPSHOT zs:d 0 x zs:a"},
        {ERR_INT, "ZSNAPSHOT zs:d x 0 zs:a"},
        {ERR_NUMKEYS, "ZSNAPSHOT zs:d 1000 0 zs:a AGGREGATE AVG"},
        {ERR_WEIGHT, "ZSNAPSHOT zs:d 1000 1 zs:a WEIGHTS x AGGREGATE AVG"},
        {ERR_SYNTAX, "ZSNAPSHOT zs:d 1000 1 zs:a AGGREGATE AVG WEIGHTS x"},
        {ERR_EXPIRE, "ZSNAPSHOT zs:str 0 1 zs:a"},
        {ERR_SYNTAX, "ZSNAPSHOT zs:d 1000 1 zs:str FOO"},
    };
    expect_refused(c, calls, sizeof(calls) / sizeof(calls[0]));
    EXPECT(c, ":0", "EXISTS zs:d");
    EXPECT(c, "\"text\"", "GET zs:str");
    EXPECT(c, ":1", "ZADD zs:a 1 m");
    EXPECT(c, "[:1, :1000]", "ZSNAPSHOT zs:d 1000 1 zs:a");
    redisFree(c);
}

Test(zsnapshot, inside_a_transaction)
{
    redisContext *c = client();
    EXPECT(c, ":2", "ZADD zs:a 1 x 2 y");
    EXPECT(c, "+OK", "MULTI");
    EXPECT(c, "+QUEUED", "ZSNAPSHOT zs:tx 60000 1 zs:a");
    EXPECT(c, "+QUEUED", "ZADD zs:a 10 z");
    EXPECT(c, "+QUEUED", "ZSNAPSHOT zs:tx 60000 1 zs:a");
    EXPECT(c, "+QUEUED", "ZSNAPSHOT zs:tx2 0 1 zs:a");
    EXPECT(c, "+QUEUED", "ZSNAPSHOT zs:tx3 60000 1 zs:a AGGREGATE COUNT");
    EXPECT(c, "+QUEUED", "ZRANGE zs:tx 0 -1 WITHSCORES");
    redisReply *r = vt_cmd(c, "EXEC");
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 6, "EXEC: got %s", VT_DESCRIBE(r));
    vt_check_reply(__LINE__, "the first ZSNAPSHOT", c, r->element[0], "[:1, :60000]");
    vt_check_reply(__LINE__, "ZADD", c, r->element[1], ":1");
    expect_already_there(r->element[2], 60000);
    vt_check_reply(__LINE__, "ZSNAPSHOT with ttl 0", c, r->element[3], "-" ERR_EXPIRE);
    vt_check_reply(__LINE__, "ZSNAPSHOT COUNT", c, r->element[4], "[:1, :60000]");
    vt_check_reply(__LINE__, "ZRANGE", c, r->element[5], "[\"x\", \"1\", \"y\", \"2\"]");
    r->elements = 0; /* each element was freed above */
    freeReplyObject(r);
    EXPECT(c, "[\"x\", \"1\", \"y\", \"1\", \"z\", \"1\"]", "ZRANGE zs:tx3 0 -1 WITHSCORES");
    EXPECT(c, "+OK", "MULTI");
    EXPECT(c, "+QUEUED", "DEL zs:a");
    EXPECT(c, "-" ERR_ARITY("zsnapshot"), "ZSNAPSHOT zs:tx4 60000 1");
    EXPECT(c, "-EXECABORT Transaction discarded because of previous errors.", "EXEC");
    EXPECT(c, ":1", "EXISTS zs:a");
    redisFree(c);
}

/* ---- big unions ---- */

Test(zsnapshot, seven_sources_of_twenty_thousand_members)
{
    redisContext *c = client(), *d = redis_direct();
    fill_big_sources(d, 7, 20000);
    const char *all = "7 big:0 big:1 big:2 big:3 big:4 big:5 big:6";
    char args[512];
    expect_like_zunionstore(c, d, "big:sum", all);
    snprintf(args, sizeof(args), "%s WEIGHTS 1 -2.5 0.1 3 -0.75 1e-3 2", all);
    expect_like_zunionstore(c, d, "big:weighted", args);
    snprintf(args, sizeof(args), "%s WEIGHTS 0.3 -1 1 2 0.1 -0.2 5 AGGREGATE MIN", all);
    expect_like_zunionstore(c, d, "big:min", args);
    snprintf(args, sizeof(args), "%s WEIGHTS 0.3 -1 1 2 0.1 -0.2 5 AGGREGATE MAX", all);
    expect_like_zunionstore(c, d, "big:max", args);
    expect_like_count(c, d, "big:count", all);
    snprintf(args, sizeof(args), "%s WEIGHTS 0.1 0.2 0.3 0.4 0.5 0.6 0.7", all);
    expect_like_count(c, d, "big:count-weighted", args);
    redisFree(c);
    redisFree(d);
}

/* More arguments than one redis.call can carry (Lua's C stack holds about
 * 8,000 values): the script computes the union itself, with Redis's
 * arithmetic, and it must come out as ZUNIONSTORE's, bit for bit. */
#define MANY_SOURCES 8100
#define MANY_NAMES 300 /* members, shared by the sources */

static void many_sources_args(words *w, int n, const char *weights_pattern[], int nweights,
                              const char *aggregate)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%d", n);
    words_add(w, buf);
    for (int i = 0; i < n; i++) {
        snprintf(buf, sizeof(buf), "many:%d", i);
        words_add(w, buf);
    }
    if (nweights) {
        words_add(w, "WEIGHTS");
        for (int i = 0; i < n; i++)
            words_add(w, weights_pattern[(i * 5) % nweights]);
    }
    if (aggregate) {
        words_add(w, "AGGREGATE");
        words_add(w, aggregate);
    }
}

Test(zsnapshot, thousands_of_sources_too_many_for_one_call)
{
    redisContext *c = client(), *d = redis_direct();
    vt_rng g = vt_rng_seeded(8100);
    static const char *const scores[] = {"0.1", "-2.5", "1e-3", "3", "inf", "-inf", "7.25", "0.3"};
    int pending = 0;
    for (int i = 0; i < MANY_SOURCES; i++) {
        if (i % 4 == 3) continue; /* missing */
        words w = {0};
        char buf[32];
        words_add(&w, i % 4 == 0 ? "SADD" : "ZADD");
        snprintf(buf, sizeof(buf), "many:%d", i);
        words_add(&w, buf);
        for (int k = 1 + vt_rng_pick(&g, 5); k > 0; k--) {
            if (i % 4 != 0) words_add(&w, scores[vt_rng_pick(&g, 8)]);
            snprintf(buf, sizeof(buf), "m%d", vt_rng_pick(&g, MANY_NAMES));
            words_add(&w, buf);
        }
        cr_assert(redisAppendCommandArgv(d, w.n, (const char **)w.v, NULL) == REDIS_OK);
        pending++;
        words_free(&w);
    }
    for (; pending > 0; pending--)
        expect_integer(vt_get_reply(d), "filling the sources");

    static const char *weights[] = {"0.1", "-0.3", "1", "2.5", "1e-5", "0.7", "0"}; /* 0 * inf is NaN */
    static const struct {
        int n, nweights;
        const char *aggregate;
    } cases[] = {
        {MANY_SOURCES, 0, NULL}, {MANY_SOURCES, 0, "MAX"}, {4000, 7, "SUM"},
        {4000, 7, "MIN"},        {4000, 7, "max"},         {1600, 7, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        words w = {0};
        char dest[32];
        snprintf(dest, sizeof(dest), "many:snap:%zu", i);
        many_sources_args(&w, cases[i].n, weights, cases[i].nweights, cases[i].aggregate);
        expect_snapshot_at(__LINE__, c, d, dest, &w, NULL);
        words_free(&w);
    }
    words w = {0};
    many_sources_args(&w, MANY_SOURCES, weights, 0, NULL);
    expect_count_at(__LINE__, c, d, "many:count", &w);
    words_free(&w);
    many_sources_args(&w, 4000, weights, 7, NULL);
    expect_count_at(__LINE__, c, d, "many:count-weighted", &w);
    words_free(&w);
    redisFree(c);
    redisFree(d);
}

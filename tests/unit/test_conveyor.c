/* proxy/conveyor/: the glob matcher against its oracle, a real
 * redis-server's KEYS (seeded random keys and patterns over a small
 * alphabet heavy in '*', '?', '[', ']', '^', '-' and '\'); the offset
 * key's name (its slot is the key's, checked with CLUSTER KEYSLOT, and it
 * is one-to-one); and which commands conveyor_plan translates, with the
 * KEYS and ARGV it builds. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "proxy/config.h"
#include "proxy/conveyor/conveyor.h"
#include "proxy/conveyor/glob.h"
#include "proxy/conveyor/offset_key.h"
#include "proxy/route/hashslot.h"
#include "tests/support/client.h"
#include "tests/support/rng.h"
#include "tests/support/servers.h"

static vt_redis *redis;
static redisContext *rc;

/* KEYS needs keys, which a cluster node without slots refuses. */
static void setup_plain(void)
{
    vt_redis_opts o = {.tls = VT_REDIS_TLS_NONE};
    redis = vt_redis_start(&o);
    cr_assert_not_null(redis, "redis-server did not start");
    rc = vt_connect(redis->port);
    cr_assert_not_null(rc);
}

static void setup(void)
{
    char bus[16];
    snprintf(bus, sizeof(bus), "%d", vt_free_port());
    const char *extra[] = {"--cluster-enabled", "yes", "--cluster-port", bus, NULL};
    vt_redis_opts o = {.tls = VT_REDIS_TLS_NONE, .extra_args = extra};
    redis = vt_redis_start(&o);
    cr_assert_not_null(redis, "redis-server did not start");
    rc = vt_connect(redis->port);
    cr_assert_not_null(rc);
}

static void teardown(void)
{
    if (rc) redisFree(rc);
    vt_redis_free(redis);
}

TestSuite(conveyor, .init = setup, .fini = teardown, .timeout = 120);

static void random_text(vt_rng *g, const char *alphabet, char *out, size_t max, size_t *len)
{
    size_t n = (size_t)vt_rng_pick(g, (int)max), k = strlen(alphabet);
    for (size_t i = 0; i < n; i++)
        out[i] = alphabet[vt_rng_pick(g, (int)k)];
    out[n] = '\0';
    *len = n;
}

/* Redis's KEYS pattern over a database holding `keys`: which of them match. */
/* (a suite of its own: a Test's .init runs after its suite's, not
 * instead of it) */
TestSuite(conveyor_glob, .init = setup_plain, .fini = teardown, .timeout = 120);

Test(conveyor_glob, glob_matches_what_redis_keys_matches)
{
    enum { NKEYS = 300, NPATTERNS = 1500 };
    static char keys[NKEYS][12];
    static size_t lens[NKEYS];
    vt_rng g = vt_rng_seeded(20261206);
    redisReply *r = redisCommand(rc, "FLUSHALL");
    freeReplyObject(r);
    for (int i = 0; i < NKEYS; i++) {
        do {
            random_text(&g, "ab-^[]\\*?", keys[i], 9, &lens[i]);
        } while (lens[i] == 0);
        r = redisCommand(rc, "SET %b x", keys[i], lens[i]);
        cr_assert(r && r->type == REDIS_REPLY_STATUS);
        freeReplyObject(r);
    }
    int matched = 0;
    for (int p = 0; p < NPATTERNS; p++) {
        char pattern[16];
        size_t plen;
        random_text(&g, "ab*?[]^-\\", pattern, 10, &plen);
        r = redisCommand(rc, "KEYS %b", pattern, plen);
        cr_assert(r && r->type == REDIS_REPLY_ARRAY);
        for (int i = 0; i < NKEYS; i++) {
            int in_redis = 0;
            for (size_t j = 0; j < r->elements && !in_redis; j++)
                in_redis = r->element[j]->len == lens[i] && memcmp(r->element[j]->str, keys[i], lens[i]) == 0;
            int ours = glob_match(pattern, keys[i], lens[i]);
            cr_expect_eq(ours, in_redis, "pattern '%s' key '%s': ours %d, Redis's KEYS %d", pattern, keys[i],
                         ours, in_redis);
            matched += ours;
        }
        freeReplyObject(r);
    }
    cr_expect_gt(matched, 1000, "the patterns match some keys (%d)", matched);
}

Test(conveyor, glob_hand_picked)
{
    cr_expect(glob_match("line:*", "line:1", 6));
    cr_expect(!glob_match("line:*", "lines:1", 7));
    cr_expect(glob_match("*", "", 0), "KEYS * lists the empty key");
    cr_expect(!glob_match("**", "", 0), "KEYS ** does not");
    cr_expect(glob_match("a\\*b", "a*b", 3));
    cr_expect(!glob_match("a\\*b", "axb", 3));
    cr_expect(glob_match("[^a]x", "bx", 2));
    cr_expect(glob_match("[z-a]", "m", 1), "a reversed range is Redis's too");
    cr_expect(glob_match("k\\", "k\\", 2), "a trailing backslash matches itself");
    cr_expect(glob_match("a?c", "a\0c", 3), "keys are bytes");
}

static long long keyslot(const char *key, size_t len)
{
    redisReply *r = redisCommand(rc, "CLUSTER KEYSLOT %b", key, len);
    cr_assert(r && r->type == REDIS_REPLY_INTEGER);
    long long s = r->integer;
    freeReplyObject(r);
    return s;
}

Test(conveyor, every_slot_has_a_tag_that_hashes_to_it)
{
    for (int s = 0; s < HASHSLOT_COUNT; s++) {
        const char *t = offset_key_tag(s);
        cr_assert(strlen(t) >= 1 && strlen(t) <= 3);
        cr_assert(!strchr(t, '{') && !strchr(t, '}'));
        cr_assert_eq(hashslot_of(t, strlen(t)), s);
    }
    cr_expect_str_eq(offset_key_tag(hashslot_of("0", 1)), "0", "the first letter's slot has it");
}

Test(conveyor, the_offset_key_shares_its_keys_slot)
{
    vt_rng g = vt_rng_seeded(7);
    for (int i = 0; i < 2000; i++) {
        char key[24], name[24 + OFFSET_KEY_EXTRA];
        size_t len;
        random_text(&g, "ab{}:\x01\xff", key, 20, &len);
        size_t head = offset_key_head(key, len, name);
        memcpy(name + head, key, len);
        cr_assert_eq(keyslot(name, head + len), keyslot(key, len), "key '%.*s'", (int)len, key);
        cr_assert(memcmp(name, OFFSET_KEY_PREFIX, sizeof(OFFSET_KEY_PREFIX) - 1) == 0);
        /* One-to-one: the first '}' ends the tag, the key follows ':'. */
        const char *close = memchr(name, '}', head + len);
        cr_assert(close && close[1] == ':' && (size_t)(close + 2 - name) == head);
    }
}

/* ---- conveyor_plan ---- */

static vp_config conf;
static verb_table verbs;
static conveyor_scratch scratch;

static void plan_setup(void)
{
    conf_defaults(&conf);
    char err[256];
    cr_assert_eq(conf_set(&conf, "conveyor", "line:*", err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(conf_set(&conf, "conveyor", "belt", err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(verbs_build(&verbs, NULL, 0, 100000, err, sizeof(err)), 0, "%s", err);
}

static void plan_teardown(void)
{
    conveyor_scratch_free(&scratch);
    verbs_free(&verbs);
    conf_free(&conf);
}

/* The plan for a command written as words: its script's translation (0:
 * not translated) and, in out, KEYS and ARGV as "k1 o1 ... | mask argv...". */
static int plan(const char *line, char *out, size_t outlen)
{
    static char copy[512];
    resp_arg argv[32];
    int argc = 0;
    snprintf(copy, sizeof(copy), "%s", line);
    for (char *w = strtok(copy, " "); w && argc < 32; w = strtok(NULL, " "))
        argv[argc++] = (resp_arg){w, strlen(w)};
    const verb_def *v;
    verb_call call;
    const resp_arg *xargv;
    int xargc;
    if (!conveyor_plan(&conf, &verbs, 0, argc, argv, &scratch, &v, &call, &xargv, &xargc)) return 0;
    size_t n = 0;
    for (int i = 0; i < call.range_count; i++)
        n += (size_t)snprintf(out + n, outlen - n, "%.*s ", (int)xargv[call.range_first + i].len,
                              xargv[call.range_first + i].ptr);
    n += (size_t)snprintf(out + n, outlen - n, "|");
    for (int i = call.first_arg; i < xargc; i++)
        n += (size_t)snprintf(out + n, outlen - n, " %.*s", (int)xargv[i].len, xargv[i].ptr);
    cr_assert_eq(call.nkeys, 0);
    cr_assert(v->hidden_protocol, "the client's RESP version goes first");
    return (int)v->translation;
}

static const char *okey(const char *key)
{
    static char names[4][64];
    static int next;
    char *name = names[next++ % 4];
    size_t head = offset_key_head(key, strlen(key), name);
    snprintf(name + head, 64 - head, "%s", key);
    return name;
}

Test(conveyor_plan, what_is_translated_and_how, .init = plan_setup, .fini = plan_teardown)
{
    char out[1024], want[1024];
    cr_expect_eq(plan("ZADD line:1 5 a", out, sizeof(out)), VERB_TR_WRITE);
    snprintf(want, sizeof(want), "line:1 %s | 1 ZADD line:1 5 a", okey("line:1"));
    cr_expect_str_eq(out, want);
    cr_expect_eq(plan("zrangebyscore belt 1 2", out, sizeof(out)), VERB_TR_READ);
    cr_expect_eq(plan("ZTICK line:x 1 10", out, sizeof(out)), VERB_TR_TICK);
    /* Keys in Redis's order, each with its offset key; the mask says which
     * are conveyor keys. */
    cr_expect_eq(plan("DEL a line:2 b", out, sizeof(out)), VERB_TR_KEY);
    snprintf(want, sizeof(want), "a %s line:2 %s b %s | 010 DEL a line:2 b", okey("a"), okey("line:2"),
             okey("b"));
    cr_expect_str_eq(out, want);
    cr_expect_eq(plan("ZUNIONSTORE d 2 x belt", out, sizeof(out)), VERB_TR_AGGREGATE);
    snprintf(want, sizeof(want), "d %s x %s belt %s | 001 ZUNIONSTORE d 2 x belt", okey("d"), okey("x"),
             okey("belt"));
    cr_expect_str_eq(out, want);
    cr_expect_eq(plan("RENAME line:1 other", out, sizeof(out)), VERB_TR_KEY);
}

Test(conveyor_plan, what_goes_to_redis_as_it_is, .init = plan_setup, .fini = plan_teardown)
{
    char out[1024];
    cr_expect_eq(plan("ZADD plain 5 a", out, sizeof(out)), 0, "no conveyor key");
    cr_expect_eq(plan("GET line:1", out, sizeof(out)), 0, "reads no score");
    cr_expect_eq(plan("ZCARD line:1", out, sizeof(out)), 0, "reads no score");
    cr_expect_eq(plan("ZRANGE line:1 0 -1", out, sizeof(out)), 0, "by rank without scores");
    cr_expect_eq(plan("ZRANGE line:1 0 -1 REV", out, sizeof(out)), 0);
    cr_expect_eq(plan("ZRANGE line:1 0 -1 withscores", out, sizeof(out)), VERB_TR_READ);
    cr_expect_eq(plan("ZRANGE line:1 (1 5 BYSCORE", out, sizeof(out)), VERB_TR_READ);
    cr_expect_eq(plan("ZRANGE line:1 -inf +inf BYSCORE LIMIT 0 5", out, sizeof(out)), 0, "infinite ends");
    cr_expect_eq(plan("ZRANGE line:1 (+INF -inf BYSCORE REV", out, sizeof(out)), 0);
    cr_expect_eq(plan("ZRANGE line:1 -inf 5 BYSCORE", out, sizeof(out)), VERB_TR_READ, "one end finite");
    cr_expect_eq(plan("ZRANGE line:1 -inf +inf BYSCORE WITHSCORES", out, sizeof(out)), VERB_TR_READ);
    cr_expect_eq(plan("ZRANGEBYSCORE line:1 -inf +inf LIMIT 0 100", out, sizeof(out)), 0);
    cr_expect_eq(plan("ZREVRANGEBYSCORE line:1 +infinity (-inf", out, sizeof(out)), 0);
    cr_expect_eq(plan("ZRANGEBYSCORE line:1 -inf +inf WITHSCORES", out, sizeof(out)), VERB_TR_READ);
    cr_expect_eq(plan("ZRANGEBYSCORE line:1 -inf 0x10", out, sizeof(out)), VERB_TR_READ);
    cr_expect_eq(plan("ZRANGEBYSCORE line:1 -inff +inf", out, sizeof(out)), VERB_TR_READ,
                 "Redis's error: the script's");
    cr_expect_eq(plan("ZCOUNT line:1 -inf +inf", out, sizeof(out)), 0);
    cr_expect_eq(plan("ZCOUNT line:1 -inf 3", out, sizeof(out)), VERB_TR_READ);
    cr_expect_eq(plan("ZRANK line:1 a", out, sizeof(out)), 0);
    cr_expect_eq(plan("ZRANK line:1 a WITHSCORE", out, sizeof(out)), VERB_TR_READ);
    cr_expect_eq(plan("ZRANDMEMBER line:1 3", out, sizeof(out)), 0);
    cr_expect_eq(plan("ZADD line:1", out, sizeof(out)), 0, "a wrong arity is Redis's to answer");
    cr_expect_eq(plan("ZSCORE line:1 a b", out, sizeof(out)), 0);
    cr_expect_eq(plan("ZUNIONSTORE d x belt", out, sizeof(out)), 0, "numkeys no number: Redis's error");
    cr_expect_eq(plan("ZDIFF 2 belt x", out, sizeof(out)), 0, "no scores");
    cr_expect_eq(plan("ZDIFF 2 belt x WITHSCORES", out, sizeof(out)), VERB_TR_READ);
    cr_expect_eq(plan("ZRANGESTORE d belt 0 -1", out, sizeof(out)), VERB_TR_STORE);
}

Test(conveyor_plan, nothing_without_a_pattern)
{
    vp_config none;
    conf_defaults(&none);
    verb_table t;
    char err[128];
    cr_assert_eq(verbs_build(&t, NULL, 0, 0, err, sizeof(err)), 0);
    resp_arg argv[] = {{"ZADD", 4}, {"line:1", 6}, {"1", 1}, {"a", 1}};
    const verb_def *v;
    verb_call call;
    const resp_arg *xargv;
    int xargc;
    conveyor_scratch s = {0};
    cr_expect_eq(conveyor_plan(&none, &t, 0, 4, argv, &s, &v, &call, &xargv, &xargc), 0);
    cr_expect_eq(conveyor_may_translate(&none, &argv[0]), 0);
    conveyor_scratch_free(&s);
    verbs_free(&t);
    conf_free(&none);
}

/* proxy/route/hashslot.c against the oracle: a real redis-server started with
 * --cluster-enabled yes answers CLUSTER KEYSLOT (it needs no slots
 * assigned). Many seeded random keys of bytes weighted towards '{' and '}'
 * (and NUL, and bytes >= 0x80), and the hand-picked brace cases. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "proxy/route/hashslot.h"
#include "tests/support/client.h"
#include "tests/support/rng.h"
#include "tests/support/servers.h"

static vt_redis *redis;
static redisContext *rc;

static void setup(void)
{
    char bus[16];
    snprintf(bus, sizeof(bus), "%d", vt_free_port());
    const char *extra[] = {"--cluster-enabled", "yes", "--cluster-port", bus, NULL};
    vt_redis_opts o = {.tls = VT_REDIS_TLS_NONE, .extra_args = extra};
    redis = vt_redis_start(&o);
    cr_assert_not_null(redis, "redis-server --cluster-enabled yes did not start");
    rc = vt_connect(redis->port);
    cr_assert_not_null(rc);
}

static void teardown(void)
{
    if (rc) redisFree(rc);
    vt_redis_free(redis);
}

TestSuite(hashslot, .init = setup, .fini = teardown, .timeout = 60);

static long long keyslot(const char *key, size_t len)
{
    redisReply *r = redisCommand(rc, "CLUSTER KEYSLOT %b", key, len);
    cr_assert(r && r->type == REDIS_REPLY_INTEGER, "CLUSTER KEYSLOT: %s", r ? r->str : rc->errstr);
    long long s = r->integer;
    freeReplyObject(r);
    return s;
}

Test(hashslot, crc16_xmodem_check_value)
{
    cr_assert_eq(hashslot_crc16("123456789", 9), 0x31C3);
    cr_assert_eq(hashslot_crc16("", 0), 0);
}

Test(hashslot, brace_cases_agree_with_cluster_keyslot)
{
    static const char *keys[] = {"",
                                 "a",
                                 "{",
                                 "}",
                                 "{}",
                                 "}{",
                                 "{a",
                                 "a}",
                                 "{a}",
                                 "a{b}c",
                                 "{}a",
                                 "a{}",
                                 "a{}{b}",
                                 "{a}{b}",
                                 "{{a}}",
                                 "{{}}",
                                 "a{b{c}d}",
                                 "{}{a}",
                                 "{a}}",
                                 "}{a}",
                                 "{ }",
                                 "{user1000}.following",
                                 "{user1000}.followers",
                                 "foo{}{bar}",
                                 "foo{{bar}}zap",
                                 "foo{bar}{zap}",
                                 "123456789",
                                 "{123456789}",
                                 "x{123456789"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        cr_assert_eq(hashslot_of(keys[i], strlen(keys[i])), keyslot(keys[i], strlen(keys[i])), "key '%s'",
                     keys[i]);
    /* NUL bytes are key bytes, inside and outside a tag */
    static const char nul1[] = "a\0{b}", nul2[] = "{\0}x", nul3[] = "\0\0";
    cr_assert_eq(hashslot_of(nul1, 5), keyslot(nul1, 5));
    cr_assert_eq(hashslot_of(nul2, 4), keyslot(nul2, 4));
    cr_assert_eq(hashslot_of(nul3, 2), keyslot(nul3, 2));
    /* the tag decides: both keys in one slot */
    cr_assert_eq(hashslot_of("{user1000}.following", 20), hashslot_of("{user1000}.followers", 20));
}

Test(hashslot, random_keys_agree_with_cluster_keyslot)
{
    uint64_t seed =
        getenv("VP_TEST_SEED") ? strtoull(getenv("VP_TEST_SEED"), NULL, 10) : (uint64_t)time(NULL);
    fprintf(stderr, "hashslot random keys: VP_TEST_SEED=%llu\n", (unsigned long long)seed);
    vt_rng g = vt_rng_seeded(seed);
    enum { KEYS = 20000, BATCH = 1000, MAXLEN = 40 };
    static char key[BATCH][MAXLEN];
    static size_t len[BATCH];
    int seen_slots[HASHSLOT_COUNT] = {0}, distinct = 0;
    for (int done = 0; done < KEYS; done += BATCH) {
        for (int i = 0; i < BATCH; i++) {
            len[i] = (size_t)vt_rng_pick(&g, MAXLEN);
            for (size_t k = 0; k < len[i]; k++) {
                int p = vt_rng_pick(&g, 10);
                key[i][k] = p == 0 ? '{' : p == 1 ? '}' : p == 2 ? '\0' : (char)vt_rng_pick(&g, 256);
            }
            cr_assert_eq(redisAppendCommand(rc, "CLUSTER KEYSLOT %b", key[i], len[i]), REDIS_OK);
        }
        for (int i = 0; i < BATCH; i++) {
            redisReply *r = vt_get_reply(rc);
            cr_assert(r && r->type == REDIS_REPLY_INTEGER);
            int mine = hashslot_of(key[i], len[i]);
            cr_assert_eq(mine, r->integer, "key '%s' (%zu bytes): ours %d, Redis %lld",
                         vt_escape(key[i], len[i]), len[i], mine, r->integer);
            if (!seen_slots[mine]++) distinct++;
            freeReplyObject(r);
        }
    }
    cr_assert_gt(distinct, 5000, "random keys should spread over many slots (%d)", distinct);
}

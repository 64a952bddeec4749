/* test_bystander.c - the bystanders (tests/support/bystander.h) themselves.
 *
 * Every hostile story leans on them to prove isolation, so they must be able
 * to fail: here they pass on a quiet proxy, and notice a wrong reply and a cut
 * connection when a story causes one. */
#include "tests/support/checks.h"
#include "tests/support/cluster_env.h"

static vt_env env;

static void setup(void)
{
    vt_env_start(&env, NULL, NULL);
}

static void teardown(void)
{
    vt_env_stop(&env);
}

TestSuite(bystander, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

Test(bystander, honest_clients_pass_on_a_quiet_proxy)
{
    vt_bystanders *b = vt_bystanders_start(env.proxy->port, 8);
    cr_assert(b != NULL);
    /* Long enough that every bystander has sent a large value (batch 8). */
    cr_assert(vt_bystanders_wait(b, 12 * 20, VT_READ_DEADLINE_MS), "the bystanders did not get going");
    vt_assert_bystanders_ok(b);
}

Test(bystander, a_changed_reply_is_noticed)
{
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, 2, 24);
    /* Their counters start again from 1: the next INCR answers wrong. */
    if (vt_cluster_mode()) { /* every primary's keys */
        vt_redis *again = vt_cluster_env_borrow();
        cr_assert(again, "FLUSHALL on the cluster's primaries failed");
        vt_redis_free(again);
    } else {
        redisContext *direct = vt_must_connect(env.redis->port);
        redisReply *r = vt_cmd(direct, "FLUSHALL");
        vt_assert_status(r, "OK");
        freeReplyObject(r);
        redisFree(direct);
    }
    cr_assert(!vt_bystanders_wait(b, 1000000, VT_READ_DEADLINE_MS),
              "the bystanders went on as if nothing happened");
    char why[512];
    cr_assert(!vt_bystanders_stop(b, NULL, why, sizeof(why)));
    cr_assert(strstr(why, "wrong reply") != NULL, "unexpected verdict: %s", why);
}

Test(bystander, a_cut_connection_is_noticed)
{
    VT_SKIP_IF_DIRECT();
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, 2, 24);
    /* The proxy goes away under them. */
    vt_proxy_kill(env.proxy);
    cr_assert(!vt_bystanders_wait(b, 1000000, VT_READ_DEADLINE_MS), "the bystanders went on without a proxy");
    char why[512];
    cr_assert(!vt_bystanders_stop(b, NULL, why, sizeof(why)));
    cr_assert(strstr(why, "closed") != NULL || strstr(why, "lost") != NULL, "unexpected verdict: %s", why);
    vt_proxy_free(env.proxy);
    env.proxy = NULL;
}

/* test_batch_hold.c - the batch hold of a shared connection
 * (proxy/upstream/upstream_hold.c): many clients' small batches may wait up to
 * `shared-batch-hold` microseconds for more, a client alone never waits,
 * and nothing waits with `shared-batch-hold 0`. Every reply is checked by
 * bystanders (tests/support/bystander.h) while holds happen.
 *
 * Registered once: the hold is the shared connection's, the stories set
 * their own settings. */
#include "tests/support/checks.h"

static vt_env env;

static void start(const char *hold)
{
    VT_SKIP_IF_DIRECT();
    static const char *args[3];
    args[0] = "--shared-batch-hold";
    args[1] = hold;
    args[2] = NULL;
    vt_proxy_opts po = {.extra_args = args};
    vt_env_start(&env, NULL, &po);
}

static void teardown(void)
{
    vt_env_stop(&env);
}

TestSuite(batch_hold, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

/* One client sending one command at a time, however fast, is never held:
 * nobody else is due, waiting would only add to its latency. */
Test(batch_hold, a_client_alone_never_waits)
{
    start("1000");
    redisContext *c = vt_must_connect(env.proxy->port);
    for (int i = 0; i < 2000; i++) {
        redisReply *r = vt_cmd(c, "SET bh:alone %d", i);
        vt_assert_status(r, "OK");
        freeReplyObject(r);
    }
    redisFree(c);
    cr_assert_eq(vt_proxy_stat(env.proxy->port, "shared_batch_holds"), 0);
}

typedef struct {
    int port;
} hold_wait;

static bool held_once(void *arg)
{
    return vt_proxy_stat(((hold_wait *)arg)->port, "shared_batch_holds") > 0;
}

/* 32 clients pipelining at once: small batches wait for the others (a
 * millisecond at most here), and every reply still comes right, in order
 * and in time. */
Test(batch_hold, many_clients_wait_for_each_other_and_every_reply_is_right)
{
    start("1000");
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, VT_BYSTANDERS_MAX, 20);
    hold_wait w = {env.proxy->port};
    cr_assert(vt_wait_until(held_once, &w, 10000), "32 clients under way and no batch ever waited");
    cr_assert(vt_bystanders_wait(b, 200, VT_READ_DEADLINE_MS), "the bystanders stalled");
    vt_assert_bystanders_ok(b);
}

/* shared-batch-hold 0: the queue is written at every loop iteration, as
 * before the hold existed. */
Test(batch_hold, zero_turns_it_off)
{
    start("0");
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, VT_BYSTANDERS_MAX, 20);
    cr_assert(vt_bystanders_wait(b, 200, VT_READ_DEADLINE_MS), "the bystanders stalled");
    vt_assert_bystanders_ok(b);
    cr_assert_eq(vt_proxy_stat(env.proxy->port, "shared_batch_holds"), 0);
}

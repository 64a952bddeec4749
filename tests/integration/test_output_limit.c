/* test_output_limit.c - Redis's client-output-buffer-limit for normal
 * clients, behind the proxy (issue 9, item 5).
 *
 * Redis closes a client whose unsent replies pass the limit. On a shared
 * upstream connection that client is every client on it, so while the normal
 * class has a limit the proxy gives every client a connection of its own
 * (proxy/upstream/upstream_outlimit.c): the client whose reply is too big is closed,
 * as by Redis directly, and nobody else notices. Told with bystanders, with
 * the limit set at start-up and through the proxy at run time. */
#include "tests/support/checks.h"

static vt_env env;

#define BIG_VALUE (2 * 1024 * 1024) /* twice the limit set below */

static void setup_limited(void)
{
    /* (as separate words: Redis 6.2 quotes one word with spaces in it) */
    static const char *const args[] = {"--client-output-buffer-limit", "normal", "1mb", "1mb", "0", NULL};
    vt_env_start(&env, &(vt_redis_opts){.extra_args = args}, NULL);
}

static void setup_default(void)
{
    vt_env_start(&env, NULL, NULL);
}

static void teardown(void)
{
    vt_env_stop(&env);
}

static void store_big(void)
{
    vt_store_filled(env.redis->port, "ol:big", BIG_VALUE, 'o');
}

/* A client asks for a reply over the limit: Redis closes it without a reply,
 * as it would a direct client. */
static void expect_closed_for_a_big_reply(void)
{
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, got = {0};
    vt_buf_cmd(&req, "GET", "ol:big", NULL);
    cr_assert(vt_sock_send_buf(fd, &req));
    cr_assert(vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS), "the client over the limit was not closed");
    cr_assert_eq(got.len, 0, "it got \"%s\" before the close", vt_buf_escaped(&got));
    close(fd);
    vt_buf_free(&req);
    vt_buf_free(&got);
}

static bool sharing_is_off(void *arg)
{
    (void)arg;
    return vt_proxy_stat(env.proxy->port, "sharing_off") == 1;
}

static bool sharing_is_on(void *arg)
{
    (void)arg;
    return vt_proxy_stat(env.proxy->port, "sharing_off") == 0;
}

TestSuite(output_limit, .init = setup_limited, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

Test(output_limit, a_reply_over_the_limit_closes_only_the_client_that_asked)
{
    store_big();
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, 4, 24);
    for (int i = 0; i < 3; i++)
        expect_closed_for_a_big_reply();
    cr_assert(vt_bystanders_wait(b, 120, VT_READ_DEADLINE_MS), "the bystanders were held up");
    vt_assert_bystanders_ok(b);
    if (!vt_direct_mode() && vt_proxy_shared_upstreams(env.proxy) > 0)
        cr_assert(sharing_is_off(NULL), "VERBPROXY STATS does not say sharing is off");
}

TestSuite(output_limit_set_later, .init = setup_default, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

/* The limit set through the proxy while clients share: they move to
 * connections of their own at their next command, and a big reply then costs
 * only its client; lifted again, new clients share again. */
Test(output_limit_set_later, a_limit_set_through_the_proxy_takes_every_client_off_the_shared_connection)
{
    store_big();
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, 4, 24);
    redisContext *admin = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(admin, "CONFIG SET client-output-buffer-limit %s", "normal 1mb 1mb 0");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    bool proxied = !vt_direct_mode() && vt_proxy_shared_upstreams(env.proxy) > 0;
    if (proxied) cr_assert(vt_wait_until(sharing_is_off, NULL, VT_READ_DEADLINE_MS), "sharing did not stop");
    /* The bystanders' next batches go on connections of their own. */
    cr_assert(vt_bystanders_wait(b, 24, VT_READ_DEADLINE_MS));
    for (int i = 0; i < 3; i++)
        expect_closed_for_a_big_reply();
    cr_assert(vt_bystanders_wait(b, 120, VT_READ_DEADLINE_MS), "the bystanders were held up");
    vt_assert_bystanders_ok(b);

    r = vt_cmd(admin, "CONFIG SET client-output-buffer-limit %s", "normal 0 0 0");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    if (proxied) cr_assert(vt_wait_until(sharing_is_on, NULL, VT_READ_DEADLINE_MS), "sharing did not resume");
    redisFree(admin);
}

/* CONFIG SET of a limit pipelined with a reply over it: the CONFIG SET
 * takes its client to its own connection first, so the big reply closes
 * only that client (Redis's verdict on it), never the shared connection
 * under the bystanders. */
Test(output_limit_set_later, a_limit_set_and_a_big_reply_in_one_pipeline_cost_only_their_client)
{
    store_big();
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, 4, 24);
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, got = {0};
    vt_buf_cmd(&req, "CONFIG", "SET", "client-output-buffer-limit", "normal 1mb 1mb 0", NULL);
    vt_buf_cmd(&req, "GET", "ol:big", NULL);
    cr_assert(vt_sock_send_buf(fd, &req));
    cr_assert(vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS), "the client over the limit was not closed");
    /* (Redis frees the +OK with the client when the GET's reply passes the
     * limit in the same round, so nothing at all may come, as directly.) */
    cr_assert(got.len == 0 || (got.len == 5 && memcmp(got.data, "+OK\r\n", 5) == 0), "got \"%s\"",
              vt_buf_escaped(&got));
    close(fd);
    cr_assert(vt_bystanders_wait(b, 120, VT_READ_DEADLINE_MS), "the bystanders were held up");
    vt_assert_bystanders_ok(b);
    redisContext *admin = vt_must_connect(env.redis->port);
    redisReply *r = vt_cmd(admin, "CONFIG SET client-output-buffer-limit %s", "normal 0 0 0");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    redisFree(admin);
    vt_buf_free(&req);
    vt_buf_free(&got);
}

/* test_blocking.c - blocking commands wait upstream, not in the proxy.
 *
 * A client blocked in BLPOP, BZPOPMIN or XREAD BLOCK through the proxy is
 * released by another client's write, gets its reply, and then the commands
 * it pipelined behind the blocking one. Each test waits until Redis reports
 * the client as blocked (INFO blocked_clients) before writing, so nothing
 * depends on timing. */
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

TestSuite(blocking, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

/* Send a command without reading its reply. */
static void send_only(redisContext *c, const char *cmd)
{
    int done = 0;
    cr_assert_eq(redisAppendCommand(c, cmd), REDIS_OK);
    while (!done)
        cr_assert_eq(redisBufferWrite(c, &done), REDIS_OK, "write: %s", c->errstr);
}

/* Blocked on `key`, as its Redis sees it (its node's, in the cluster variant). */
static void wait_blocked(const char *key, long long n)
{
    cr_assert(vt_wait_until_blocked(vt_cluster_env_key_port(key, env.redis->port), n, VT_READ_DEADLINE_MS),
              "Redis never saw %lld blocked client(s)", n);
}

Test(blocking, blpop_is_released_by_another_clients_lpush)
{
    redisContext *worker = vt_must_connect(env.proxy->port);
    redisContext *producer = vt_must_connect(env.proxy->port);

    send_only(worker, "BLPOP bl:jobs 10");
    send_only(worker, "PING"); /* pipelined behind the blocked command */
    wait_blocked("bl:jobs", 1);

    redisReply *r = vt_cmd(producer, "LPUSH bl:jobs job-1");
    vt_assert_int(r, 1);
    freeReplyObject(r);

    r = vt_get_reply(worker);
    vt_assert_array(r, 2);
    vt_assert_str(r->element[0], "bl:jobs");
    vt_assert_str(r->element[1], "job-1");
    freeReplyObject(r);
    r = vt_get_reply(worker);
    vt_assert_status(r, "PONG");
    freeReplyObject(r);

    redisFree(worker);
    redisFree(producer);
}

Test(blocking, bzpopmin_is_released_by_zadd)
{
    redisContext *worker = vt_must_connect(env.proxy->port);
    redisContext *producer = vt_must_connect(env.proxy->port);

    send_only(worker, "BZPOPMIN bl:prio 10");
    wait_blocked("bl:prio", 1);

    redisReply *r = vt_cmd(producer, "ZADD bl:prio 2 low 1 high");
    vt_assert_int(r, 2);
    freeReplyObject(r);

    r = vt_get_reply(worker);
    vt_assert_array(r, 3);
    vt_assert_str(r->element[0], "bl:prio");
    vt_assert_str(r->element[1], "high");
    vt_assert_str(r->element[2], "1");
    freeReplyObject(r);

    redisFree(worker);
    redisFree(producer);
}

Test(blocking, xread_block_is_released_by_xadd)
{
    redisContext *reader = vt_must_connect(env.proxy->port);
    redisContext *writer = vt_must_connect(env.proxy->port);

    send_only(reader, "XREAD BLOCK 10000 STREAMS bl:events $");
    wait_blocked("bl:events", 1);

    redisReply *r = vt_cmd(writer, "XADD bl:events 7-1 kind click");
    vt_assert_str(r, "7-1");
    freeReplyObject(r);

    /* [[stream, [[id, [field, value]]]]] */
    r = vt_get_reply(reader);
    vt_assert_array(r, 1);
    redisReply *stream = r->element[0];
    vt_assert_array(stream, 2);
    vt_assert_str(stream->element[0], "bl:events");
    vt_assert_array(stream->element[1], 1);
    redisReply *entry = stream->element[1]->element[0];
    vt_assert_array(entry, 2);
    vt_assert_str(entry->element[0], "7-1");
    vt_assert_array(entry->element[1], 2);
    vt_assert_str(entry->element[1]->element[0], "kind");
    vt_assert_str(entry->element[1]->element[1], "click");
    freeReplyObject(r);

    redisFree(reader);
    redisFree(writer);
}

Test(blocking, two_clients_blocked_on_one_list_are_served_in_order)
{
    redisContext *first = vt_must_connect(env.proxy->port);
    redisContext *second = vt_must_connect(env.proxy->port);
    redisContext *producer = vt_must_connect(env.proxy->port);

    send_only(first, "BRPOP bl:shared 10");
    wait_blocked("bl:shared", 1);
    send_only(second, "BRPOP bl:shared 10");
    wait_blocked("bl:shared", 2);

    redisReply *r = vt_cmd(producer, "RPUSH bl:shared a b");
    vt_assert_int(r, 2);
    freeReplyObject(r);

    r = vt_get_reply(first);
    vt_assert_array(r, 2);
    vt_assert_str(r->element[1], "b");
    freeReplyObject(r);
    r = vt_get_reply(second);
    vt_assert_array(r, 2);
    vt_assert_str(r->element[1], "a");
    freeReplyObject(r);

    redisFree(first);
    redisFree(second);
    redisFree(producer);
}

Test(blocking, a_blocking_command_that_times_out_answers_nil_and_the_connection_goes_on)
{
    redisContext *c = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(c, "BLPOP bl:never 0.1");
    vt_assert_nil(r);
    freeReplyObject(r);
    r = vt_cmd(c, "ECHO after-timeout");
    vt_assert_str(r, "after-timeout");
    freeReplyObject(r);
    redisFree(c);
}

Test(blocking, wait_with_no_replicas_answers_zero)
{
    redisContext *c = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(c, "SET bl:w 1");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(c, "WAIT 0 0");
    vt_assert_int(r, 0);
    freeReplyObject(r);
    redisFree(c);
}

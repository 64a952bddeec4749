/* test_pubsub.c - a subscriber through the proxy, as on Redis.
 *
 * Subscribe mode breaks "one request, one reply": SUBSCRIBE a b answers
 * twice, UNSUBSCRIBE with no channel answers once per channel (or once with
 * nil), and messages arrive when nobody asked. After leaving subscribe mode
 * (UNSUBSCRIBE/PUNSUBSCRIBE all, or RESET) the same connection must carry
 * ordinary commands again. */
#include "tests/support/checks.h"

static vt_env env;

static void setup(void)
{
    vt_env_start(&env, NULL, NULL);
}

static void teardown(void)
{
    vt_env_stop(&env);
}

TestSuite(pubsub, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

/* A pub/sub event: [kind, a, b] with b a bulk string, or an integer when
 * count >= 0. */
static void assert_event3(redisReply *r, const char *kind, const char *a, const char *b, long long count)
{
    vt_assert_array(r, 3);
    vt_assert_str(r->element[0], kind);
    if (a)
        vt_assert_str(r->element[1], a);
    else
        vt_assert_nil(r->element[1]);
    if (b)
        vt_assert_str(r->element[2], b);
    else
        vt_assert_int(r->element[2], count);
}

static void publish(redisContext *c, const char *cmd, const char *channel, const char *msg,
                    long long receivers)
{
    redisReply *r = vt_cmd(c, "%s %s %s", cmd, channel, msg);
    vt_assert_int(r, receivers);
    freeReplyObject(r);
}

Test(pubsub, a_subscriber_receives_messages_then_leaves_subscribe_mode_and_works_normally)
{
    VT_SKIP_IN_CLUSTER("a connection that subscribed stays on its node after leaving subscribe mode "
                       "(docs/upstreams.md#cluster-upstream: state that cannot follow)");
    redisContext *alice = vt_must_connect(env.proxy->port);
    redisContext *bob = vt_must_connect(env.proxy->port);

    redisReply *r = vt_cmd(alice, "SUBSCRIBE news sports");
    assert_event3(r, "subscribe", "news", NULL, 1);
    freeReplyObject(r);
    r = vt_get_reply(alice);
    assert_event3(r, "subscribe", "sports", NULL, 2);
    freeReplyObject(r);
    r = vt_cmd(alice, "PSUBSCRIBE weather.*");
    assert_event3(r, "psubscribe", "weather.*", NULL, 3);
    freeReplyObject(r);

    publish(bob, "PUBLISH", "news", "hello", 1);
    r = vt_get_reply(alice);
    assert_event3(r, "message", "news", "hello", 0);
    freeReplyObject(r);

    publish(bob, "PUBLISH", "weather.paris", "sunny", 1);
    r = vt_get_reply(alice);
    vt_assert_array(r, 4);
    vt_assert_str(r->element[0], "pmessage");
    vt_assert_str(r->element[1], "weather.*");
    vt_assert_str(r->element[2], "weather.paris");
    vt_assert_str(r->element[3], "sunny");
    freeReplyObject(r);

    /* PING in subscribe mode answers as a pub/sub event */
    r = vt_cmd(alice, "PING");
    vt_assert_array(r, 2);
    vt_assert_str(r->element[0], "pong");
    vt_assert_str(r->element[1], "");
    freeReplyObject(r);
    r = vt_cmd(alice, "PING are-you-there");
    vt_assert_array(r, 2);
    vt_assert_str(r->element[1], "are-you-there");
    freeReplyObject(r);

    /* ordinary commands are refused by Redis while subscribed */
    r = vt_cmd(alice, "GET news");
    vt_assert_error(r, "ERR Can't execute 'get'");
    freeReplyObject(r);

    /* UNSUBSCRIBE from everything: one reply per channel, in any order */
    r = vt_cmd(alice, "UNSUBSCRIBE");
    redisReply *r2 = vt_get_reply(alice);
    vt_assert_array(r, 3);
    vt_assert_array(r2, 3);
    vt_assert_str(r->element[0], "unsubscribe");
    vt_assert_str(r2->element[0], "unsubscribe");
    bool news_first = strcmp(r->element[1]->str, "news") == 0;
    vt_assert_str(r->element[1], news_first ? "news" : "sports");
    vt_assert_str(r2->element[1], news_first ? "sports" : "news");
    vt_assert_int(r->element[2], 2);
    vt_assert_int(r2->element[2], 1);
    freeReplyObject(r);
    freeReplyObject(r2);

    r = vt_cmd(alice, "PUNSUBSCRIBE");
    assert_event3(r, "punsubscribe", "weather.*", NULL, 0);
    freeReplyObject(r);

    /* out of subscribe mode: the same connection is an ordinary one again */
    r = vt_cmd(alice, "SET ps:after done");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(alice, "GET ps:after");
    vt_assert_str(r, "done");
    freeReplyObject(r);
    r = vt_cmd(alice, "PING");
    vt_assert_status(r, "PONG");
    freeReplyObject(r);
    publish(bob, "PUBLISH", "news", "nobody-listens", 0);

    redisFree(alice);
    redisFree(bob);
}

Test(pubsub, reset_leaves_subscribe_mode)
{
    redisContext *alice = vt_must_connect(env.proxy->port);
    redisContext *bob = vt_must_connect(env.proxy->port);

    redisReply *r = vt_cmd(alice, "SUBSCRIBE ch");
    assert_event3(r, "subscribe", "ch", NULL, 1);
    freeReplyObject(r);
    r = vt_cmd(alice, "PSUBSCRIBE p*");
    assert_event3(r, "psubscribe", "p*", NULL, 2);
    freeReplyObject(r);

    r = vt_cmd(alice, "RESET");
    vt_assert_status(r, "RESET");
    freeReplyObject(r);

    r = vt_cmd(alice, "SET ps:reset yes");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(alice, "GET ps:reset");
    vt_assert_str(r, "yes");
    freeReplyObject(r);
    publish(bob, "PUBLISH", "ch", "gone", 0);
    publish(bob, "PUBLISH", "pattern", "gone", 0);

    redisFree(alice);
    redisFree(bob);
}

Test(pubsub, sharded_subscribe_receives_spublish)
{
    VT_SKIP_BEFORE(700, "shard channels (SSUBSCRIBE, SPUBLISH) came with Redis 7.0");
    redisContext *alice = vt_must_connect(env.proxy->port);
    redisContext *bob = vt_must_connect(env.proxy->port);

    redisReply *r = vt_cmd(alice, "SSUBSCRIBE orders");
    assert_event3(r, "ssubscribe", "orders", NULL, 1);
    freeReplyObject(r);

    publish(bob, "SPUBLISH", "orders", "order-42", 1);
    r = vt_get_reply(alice);
    assert_event3(r, "smessage", "orders", "order-42", 0);
    freeReplyObject(r);

    r = vt_cmd(alice, "SUNSUBSCRIBE");
    assert_event3(r, "sunsubscribe", "orders", NULL, 0);
    freeReplyObject(r);

    r = vt_cmd(alice, "GET ps:sharded");
    vt_assert_nil(r);
    freeReplyObject(r);

    redisFree(alice);
    redisFree(bob);
}

Test(pubsub, unsubscribe_without_subscriptions_answers_once_with_nil)
{
    redisContext *c = vt_must_connect(env.proxy->port);

    /* Valkey 8 refuses these outside subscribed mode (-NOSUB); the proxy
     * passes that on, and the client is still not subscribed. */
    static const char *const unsubs[] = {"unsubscribe", "punsubscribe", "sunsubscribe"};
    redisReply *r;
    for (size_t i = 0; i < 3; i++) {
        r = vt_cmd(c, unsubs[i]);
        if (i == 2 && vt_redis_version() < 700) { /* (shard channels came with 7.0) */
            vt_assert_error(r, vt_unknown_command(unsubs[i], NULL));
        } else if (strcmp(vt_server_says(), "Valkey") == 0) {
            char want[96];
            snprintf(want, sizeof(want), "NOSUB '%s' command executed not in subscribed mode", unsubs[i]);
            vt_assert_error(r, want);
        } else {
            assert_event3(r, unsubs[i], NULL, NULL, 0);
        }
        freeReplyObject(r);
    }
    r = vt_cmd(c, "ECHO not-subscribed"); /* (refused while subscribed, in RESP2) */
    vt_assert_str(r, "not-subscribed");
    freeReplyObject(r);

    /* subscribing twice to one channel answers twice, both with count 1 */
    r = vt_cmd(c, "SUBSCRIBE dup dup");
    assert_event3(r, "subscribe", "dup", NULL, 1);
    freeReplyObject(r);
    r = vt_get_reply(c);
    assert_event3(r, "subscribe", "dup", NULL, 1);
    freeReplyObject(r);
    r = vt_cmd(c, "UNSUBSCRIBE dup nothere");
    assert_event3(r, "unsubscribe", "dup", NULL, 0);
    freeReplyObject(r);
    r = vt_get_reply(c);
    assert_event3(r, "unsubscribe", "nothere", NULL, 0);
    freeReplyObject(r);

    r = vt_cmd(c, "ECHO still-in-sync");
    vt_assert_str(r, "still-in-sync");
    freeReplyObject(r);
    redisFree(c);
}

Test(pubsub, a_pipelined_subscribe_session_gets_exact_bytes)
{
    VT_SKIP_IN_CLUSTER("a connection that subscribed stays on its node after leaving subscribe mode "
                       "(docs/upstreams.md#cluster-upstream: state that cannot follow)");
    int fd = vt_must_sock(env.proxy->port);
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(fd, "SUBSCRIBE a\r\nPING\r\nUNSUBSCRIBE\r\nPING\r\nGET ps:none\r\n"));
    vt_expect_bytes(fd, &got,
                    "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n"
                    "*2\r\n$4\r\npong\r\n$0\r\n\r\n"
                    "*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:0\r\n"
                    "+PONG\r\n"
                    "$-1\r\n");
    vt_buf_free(&got);
    close(fd);
}

Test(pubsub, a_thousand_messages_arrive_in_order)
{
    enum { MESSAGES = 1000 };
    redisContext *alice = vt_must_connect(env.proxy->port);
    redisContext *bob = vt_must_connect(env.proxy->port);

    redisReply *r = vt_cmd(alice, "SUBSCRIBE stream");
    assert_event3(r, "subscribe", "stream", NULL, 1);
    freeReplyObject(r);

    for (int i = 0; i < MESSAGES; i++)
        redisAppendCommand(bob, "PUBLISH stream msg-%d", i);
    for (int i = 0; i < MESSAGES; i++) {
        r = vt_get_reply(bob);
        vt_assert_int(r, 1);
        freeReplyObject(r);
    }
    for (int i = 0; i < MESSAGES; i++) {
        char want[32];
        snprintf(want, sizeof(want), "msg-%d", i);
        r = vt_get_reply(alice);
        assert_event3(r, "message", "stream", want, 0);
        freeReplyObject(r);
    }
    redisFree(alice);
    redisFree(bob);
}

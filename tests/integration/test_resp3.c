/* test_resp3.c - a RESP3 client (HELLO 3) through the proxy, checked byte by byte.
 *
 * hiredis 0.14 cannot parse RESP3, so these tests read raw bytes. The hard
 * part for a proxy is the push ('>'): an invalidation or a pub/sub message
 * arrives when nobody asked, possibly while a request is pending, and must
 * be forwarded at once without being taken for that request's reply. In
 * RESP3 the confirmations of SUBSCRIBE/UNSUBSCRIBE are pushes too, yet they do
 * answer the command. */
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

TestSuite(resp3, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

/* Send a command and expect exactly `want` back. */
static void exchange(int fd, const char *request, const char *want)
{
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(fd, request), "send %s", request);
    vt_expect_bytes(fd, &got, want);
    vt_buf_free(&got);
}

/* HELLO 3 and check the handshake map. */
static int resp3_connection(void)
{
    int fd = vt_must_sock(env.proxy->port);
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(fd, "HELLO 3\r\n"));
    cr_assert(vt_sock_read_replies(fd, &got, 1, VT_READ_DEADLINE_MS), "no HELLO reply, got \"%s\"",
              vt_buf_escaped(&got));
    cr_assert(got.len > 4 && memcmp(got.data, "%7\r\n", 4) == 0, "HELLO 3 should answer a map, got \"%s\"",
              vt_buf_escaped(&got));
    /* (Valkey 8's says "valkey", unless extended-redis-compatibility) */
    const char *server = strcmp(vt_server_says(), "Valkey") == 0 ? "$6\r\nserver\r\n$6\r\nvalkey\r\n"
                                                                 : "$6\r\nserver\r\n$5\r\nredis\r\n";
    cr_assert(vt_buf_contains(&got, server), "got \"%s\"", vt_buf_escaped(&got));
    cr_assert(vt_buf_contains(&got, "$5\r\nproto\r\n:3\r\n"), "got \"%s\"", vt_buf_escaped(&got));
    cr_assert_eq((long long)got.len, vt_resp_reply_len(got.data, got.len),
                 "bytes after the HELLO reply: \"%s\"", vt_buf_escaped(&got));
    vt_buf_free(&got);
    return fd;
}

Test(resp3, hello_3_switches_the_connection_to_resp3_replies)
{
    int fd = resp3_connection();

    exchange(fd, "HSET r3:h field value\r\n", ":1\r\n");
    exchange(fd, "HGETALL r3:h\r\n", "%1\r\n$5\r\nfield\r\n$5\r\nvalue\r\n");
    exchange(fd, "GET r3:missing\r\n", "_\r\n");
    exchange(fd, "ZADD r3:z 1.5 m\r\nZSCORE r3:z m\r\n", ":1\r\n,1.5\r\n");
    exchange(fd, "SADD r3:s only\r\nSMEMBERS r3:s\r\n", ":1\r\n~1\r\n$4\r\nonly\r\n");
    exchange(fd, "ZRANGE r3:z 0 -1 WITHSCORES\r\n", "*1\r\n*2\r\n$1\r\nm\r\n,1.5\r\n");

    /* and back to RESP2 on the same connection */
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(fd, "HELLO 2\r\n"));
    cr_assert(vt_sock_read_replies(fd, &got, 1, VT_READ_DEADLINE_MS));
    cr_assert(got.data[0] == '*', "HELLO 2 answers an array, got \"%s\"", vt_buf_escaped(&got));
    vt_buf_free(&got);
    exchange(fd, "GET r3:missing\r\nHGETALL r3:h\r\n", "$-1\r\n*2\r\n$5\r\nfield\r\n$5\r\nvalue\r\n");
    close(fd);
}

Test(resp3, client_tracking_invalidation_arrives_out_of_band)
{
    int alice = resp3_connection();
    redisContext *bob = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(bob, "SET r3:tracked v1");
    vt_assert_status(r, "OK");
    freeReplyObject(r);

    exchange(alice, "CLIENT TRACKING ON\r\n", "+OK\r\n");
    exchange(alice, "GET r3:tracked\r\n", "$2\r\nv1\r\n");

    /* Bob changes the key: Alice is told, though she asked nothing */
    r = vt_cmd(bob, "SET r3:tracked v2");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    vt_buf got = {0};
    vt_expect_bytes(alice, &got, ">2\r\n$10\r\ninvalidate\r\n*1\r\n$10\r\nr3:tracked\r\n");
    vt_buf_free(&got);

    /* normal replies go on after the push */
    exchange(alice, "PING\r\n", "+PONG\r\n");
    exchange(alice, "GET r3:tracked\r\n", "$2\r\nv2\r\n");

    /* a push while a request is pending (Alice is blocked in BLPOP) is
     * forwarded at once, and is not taken for the BLPOP's reply */
    cr_assert(vt_sock_send_str(alice, "BLPOP r3:queue 10\r\n"));
    cr_assert(vt_wait_until_blocked(env.redis->port, 1, VT_READ_DEADLINE_MS), "BLPOP never blocked");
    r = vt_cmd(bob, "SET r3:tracked v3");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    vt_expect_bytes(alice, &got, ">2\r\n$10\r\ninvalidate\r\n*1\r\n$10\r\nr3:tracked\r\n");
    vt_buf_reset(&got);
    r = vt_cmd(bob, "RPUSH r3:queue job");
    vt_assert_int(r, 1);
    freeReplyObject(r);
    vt_expect_bytes(alice, &got, "*2\r\n$8\r\nr3:queue\r\n$3\r\njob\r\n");
    vt_buf_free(&got);

    exchange(alice, "PING\r\n", "+PONG\r\n");
    redisFree(bob);
    close(alice);
}

Test(resp3, pubsub_messages_are_pushes_and_commands_still_work_while_subscribed)
{
    int alice = resp3_connection();
    redisContext *bob = vt_must_connect(env.proxy->port);

    /* the SUBSCRIBE confirmation is a push that answers the command; the GET
     * after it (allowed in RESP3 while subscribed) gets its own reply */
    exchange(alice, "SUBSCRIBE r3:ch\r\nGET r3:nothing\r\n",
             ">3\r\n$9\r\nsubscribe\r\n$5\r\nr3:ch\r\n:1\r\n_\r\n");

    redisReply *r = vt_cmd(bob, "PUBLISH r3:ch hi");
    vt_assert_int(r, 1);
    freeReplyObject(r);
    vt_buf got = {0};
    vt_expect_bytes(alice, &got, ">3\r\n$7\r\nmessage\r\n$5\r\nr3:ch\r\n$2\r\nhi\r\n");
    vt_buf_free(&got);

    exchange(alice, "PING\r\n", "+PONG\r\n");
    exchange(alice, "SET r3:k v\r\nGET r3:k\r\n", "+OK\r\n$1\r\nv\r\n");
    exchange(alice, "UNSUBSCRIBE\r\nPING\r\n", ">3\r\n$11\r\nunsubscribe\r\n$5\r\nr3:ch\r\n:0\r\n+PONG\r\n");

    redisFree(bob);
    close(alice);
}

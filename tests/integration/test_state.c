/* test_state.c - connection state belongs to the client's own connection.
 *
 * SELECT, CLIENT SETNAME, CLIENT REPLY and QUIT change the state of one
 * connection. Through the proxy each client has its own upstream connection,
 * so one client's state never shows up in another's, and a new client starts
 * clean (database 0, no name). */
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

TestSuite(state, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

static void expect_status(redisContext *c, const char *cmd, const char *status)
{
    redisReply *r = vt_cmd(c, cmd);
    vt_assert_reply(r, c);
    cr_assert(r->type == REDIS_REPLY_STATUS && strcmp(r->str, status) == 0, "%s: expected +%s, got %s", cmd,
              status, VT_DESCRIBE(r));
    freeReplyObject(r);
}

static void expect_get(redisContext *c, const char *key, const char *want)
{
    redisReply *r = vt_cmd(c, "GET %s", key);
    if (want)
        vt_assert_str(r, want);
    else
        vt_assert_nil(r);
    freeReplyObject(r);
}

Test(state, select_isolates_two_clients)
{
    VT_SKIP_IN_CLUSTER("a Redis Cluster has database 0 only (SELECT n is refused)");
    redisContext *alice = vt_must_connect(env.proxy->port);
    redisContext *bob = vt_must_connect(env.proxy->port);

    expect_status(alice, "SELECT 1", "OK");
    expect_status(alice, "SET st:k alice-in-db1", "OK");
    expect_status(bob, "SET st:k bob-in-db0", "OK");

    expect_get(alice, "st:k", "alice-in-db1");
    expect_get(bob, "st:k", "bob-in-db0");

    expect_status(bob, "SELECT 1", "OK");
    expect_get(bob, "st:k", "alice-in-db1");
    redisFree(alice);
    redisFree(bob);

    /* a new client starts in database 0 whatever the last one selected */
    redisContext *carol = vt_must_connect(env.proxy->port);
    expect_get(carol, "st:k", "bob-in-db0");
    redisFree(carol);
}

Test(state, client_setname_is_seen_by_getname_on_that_connection_only)
{
    redisContext *alice = vt_must_connect(env.proxy->port);
    redisContext *bob = vt_must_connect(env.proxy->port);

    redisReply *r = vt_cmd(alice, "CLIENT GETNAME");
    vt_assert_nil(r);
    freeReplyObject(r);
    expect_status(alice, "CLIENT SETNAME alice-app", "OK");
    r = vt_cmd(alice, "CLIENT GETNAME");
    vt_assert_str(r, "alice-app");
    freeReplyObject(r);
    r = vt_cmd(bob, "CLIENT GETNAME");
    vt_assert_nil(r);
    freeReplyObject(r);

    /* Redis itself lists the name on the connection the proxy opened for Alice */
    redisContext *admin = vt_must_connect(env.redis->port);
    r = vt_cmd(admin, "CLIENT LIST");
    cr_assert(r && r->type == REDIS_REPLY_STRING && strstr(r->str, "name=alice-app "), "CLIENT LIST: %s",
              VT_DESCRIBE(r));
    freeReplyObject(r);
    redisFree(admin);
    redisFree(alice);
    redisFree(bob);
}

Test(state, client_reply_off_on_skip_give_exactly_the_replies_redis_sends)
{
    VT_SKIP_IN_CLUSTER("CLIENT REPLY keeps the connection on one node, and the story's key may be another's");
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, got = {0};
    vt_buf_cmd(&req, "CLIENT", "REPLY", "OFF", NULL);  /* no reply */
    vt_buf_cmd(&req, "SET", "st:r", "1", NULL);        /* no reply */
    vt_buf_cmd(&req, "INCR", "st:r", NULL);            /* no reply */
    vt_buf_cmd(&req, "CLIENT", "REPLY", "ON", NULL);   /* +OK */
    vt_buf_cmd(&req, "GET", "st:r", NULL);             /* $1 2 */
    vt_buf_cmd(&req, "CLIENT", "REPLY", "SKIP", NULL); /* no reply */
    vt_buf_cmd(&req, "INCR", "st:r", NULL);            /* skipped */
    vt_buf_cmd(&req, "GET", "st:r", NULL);             /* $1 3 */
    vt_buf_cmd(&req, "PING", NULL);                    /* +PONG */
    cr_assert(vt_sock_send_buf(fd, &req));
    vt_expect_bytes(fd, &got, "+OK\r\n$1\r\n2\r\n$1\r\n3\r\n+PONG\r\n");

    /* nothing more is owed: the next request gets the next reply */
    vt_buf_reset(&got);
    cr_assert(vt_sock_send_str(fd, "ECHO last\r\n"));
    vt_expect_bytes(fd, &got, "$4\r\nlast\r\n");
    vt_buf_free(&req);
    vt_buf_free(&got);
    close(fd);
}

Test(state, quit_answers_ok_then_closes_the_connection)
{
    int fd = vt_must_sock(env.proxy->port);
    vt_buf got = {0};
    /* the PING after QUIT is never answered */
    cr_assert(vt_sock_send_str(fd, "PING\r\nQUIT\r\nPING\r\n"));
    cr_assert(vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS), "connection still open after QUIT; got \"%s\"",
              vt_buf_escaped(&got));
    vt_assert_bytes(&got, "+PONG\r\n+OK\r\n");
    vt_buf_free(&got);
    close(fd);

    /* and the proxy goes on serving others */
    redisContext *c = vt_must_connect(env.proxy->port);
    expect_status(c, "PING", "PONG");
    redisFree(c);
}

/* test_transactions.c - MULTI/EXEC/DISCARD/WATCH behave as on Redis.
 *
 * MULTI and WATCH give a client an upstream connection of its own (it may
 * have shared one before), so a transaction and its WATCHes live on that
 * connection; another client's write (through the proxy too) must abort it
 * exactly as on Redis. */
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

TestSuite(transactions, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

/* Run one command and check its status reply. */
static void ok(redisContext *c, const char *cmd, const char *status)
{
    redisReply *r = vt_cmd(c, cmd);
    vt_assert_reply(r, c);
    cr_assert(r->type == REDIS_REPLY_STATUS && strcmp(r->str, status) == 0, "%s: expected +%s, got %s", cmd,
              status, VT_DESCRIBE(r));
    freeReplyObject(r);
}

Test(transactions, multi_exec_runs_the_queued_commands_atomically)
{
    /* (one hash tag: in the cluster variant a transaction is one slot's) */
    redisContext *c = vt_must_connect(env.proxy->port);
    ok(c, "MULTI", "OK");
    ok(c, "SET {tx}:a 10", "QUEUED");
    ok(c, "INCRBY {tx}:a 5", "QUEUED");
    ok(c, "LPUSH {tx}:l x y", "QUEUED");
    ok(c, "GET {tx}:a", "QUEUED");

    redisReply *r = vt_cmd(c, "EXEC");
    vt_assert_array(r, 4);
    vt_assert_status(r->element[0], "OK");
    vt_assert_int(r->element[1], 15);
    vt_assert_int(r->element[2], 2);
    vt_assert_str(r->element[3], "15");
    freeReplyObject(r);

    /* and the connection is back to normal */
    r = vt_cmd(c, "GET {tx}:a");
    vt_assert_str(r, "15");
    freeReplyObject(r);
    redisFree(c);
}

Test(transactions, discard_drops_the_queue)
{
    redisContext *c = vt_must_connect(env.proxy->port);
    ok(c, "SET tx:d before", "OK");
    ok(c, "MULTI", "OK");
    ok(c, "SET tx:d after", "QUEUED");
    ok(c, "DISCARD", "OK");

    redisReply *r = vt_cmd(c, "GET tx:d");
    vt_assert_str(r, "before");
    freeReplyObject(r);
    r = vt_cmd(c, "EXEC");
    vt_assert_error(r, "ERR EXEC without MULTI");
    freeReplyObject(r);
    redisFree(c);
}

Test(transactions, watch_aborts_exec_when_another_client_changes_the_key)
{
    redisContext *alice = vt_must_connect(env.proxy->port);
    redisContext *bob = vt_must_connect(env.proxy->port);

    ok(alice, "SET tx:balance 100", "OK");
    ok(alice, "WATCH tx:balance", "OK");
    redisReply *r = vt_cmd(alice, "GET tx:balance");
    vt_assert_str(r, "100");
    freeReplyObject(r);

    /* Bob changes the key between Alice's read and her EXEC */
    ok(bob, "SET tx:balance 50", "OK");

    ok(alice, "MULTI", "OK");
    ok(alice, "SET tx:balance 90", "QUEUED");
    r = vt_cmd(alice, "EXEC");
    vt_assert_nil(r);
    freeReplyObject(r);

    r = vt_cmd(alice, "GET tx:balance");
    vt_assert_str(r, "50");
    freeReplyObject(r);

    /* without interference the same transaction goes through */
    ok(alice, "WATCH tx:balance", "OK");
    ok(alice, "MULTI", "OK");
    ok(alice, "SET tx:balance 40", "QUEUED");
    r = vt_cmd(alice, "EXEC");
    vt_assert_array(r, 1);
    vt_assert_status(r->element[0], "OK");
    freeReplyObject(r);

    redisFree(alice);
    redisFree(bob);
}

Test(transactions, a_queued_syntax_error_aborts_exec_with_execabort)
{
    redisContext *c = vt_must_connect(env.proxy->port);
    ok(c, "SET tx:e untouched", "OK");
    ok(c, "MULTI", "OK");
    ok(c, "SET tx:e touched", "QUEUED");

    redisReply *r = vt_cmd(c, "NOSUCHCOMMAND tx:e");
    vt_assert_error(r, vt_unknown_command("NOSUCHCOMMAND", (const char *const[]){"tx:e", NULL}));
    freeReplyObject(r);
    r = vt_cmd(c, "GET");
    vt_assert_error(r, "ERR wrong number of arguments for 'get' command");
    freeReplyObject(r);

    r = vt_cmd(c, "EXEC");
    vt_assert_error(r, "EXECABORT Transaction discarded because of previous errors.");
    freeReplyObject(r);

    r = vt_cmd(c, "GET tx:e");
    vt_assert_str(r, "untouched");
    freeReplyObject(r);
    redisFree(c);
}

Test(transactions, a_runtime_error_inside_exec_is_one_element_of_the_result)
{
    redisContext *c = vt_must_connect(env.proxy->port);
    ok(c, "MULTI", "OK");
    ok(c, "SET tx:r text", "QUEUED");
    ok(c, "INCR tx:r", "QUEUED");
    ok(c, "APPEND tx:r !", "QUEUED");

    redisReply *r = vt_cmd(c, "EXEC");
    vt_assert_array(r, 3);
    vt_assert_status(r->element[0], "OK");
    vt_assert_error(r->element[1], "ERR value is not an integer or out of range");
    vt_assert_int(r->element[2], 5);
    freeReplyObject(r);
    redisFree(c);
}

Test(transactions, a_pipelined_transaction_gets_every_reply_in_order)
{
    /* what client libraries do: MULTI ... EXEC in one write */
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, got = {0};
    vt_buf_cmd(&req, "MULTI", NULL);
    vt_buf_cmd(&req, "SET", "tx:p", "1", NULL);
    vt_buf_cmd(&req, "INCR", "tx:p", NULL);
    vt_buf_cmd(&req, "EXEC", NULL);
    vt_buf_cmd(&req, "MULTI", NULL);
    vt_buf_cmd(&req, "INCR", "tx:p", NULL);
    vt_buf_cmd(&req, "DISCARD", NULL);
    vt_buf_cmd(&req, "GET", "tx:p", NULL);
    cr_assert(vt_sock_send_buf(fd, &req));
    vt_expect_bytes(fd, &got,
                    "+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n:2\r\n+OK\r\n+QUEUED\r\n+OK\r\n$1\r\n2\r\n");
    vt_buf_free(&req);
    vt_buf_free(&got);
    close(fd);
}

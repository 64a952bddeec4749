/* test_edge_accounting.c - the corners of reply counting, each a byte
 * sequence where a proxy that counts replies wrongly would hang, lose a reply
 * or send one too many. Every expectation is what Redis 7.0 itself sends
 * (VP_TEST_DIRECT=1 checks them against Redis).
 *
 * The proxy's own protocol error is the probe: it must come after exactly
 * the replies Redis sends for what came before, then the connection closes. */
#include <sys/socket.h>

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

TestSuite(edge_accounting, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

#define GARBAGE "*1\r\n$x\r\n"
#define GARBAGE_REPLY "-ERR Protocol error: invalid bulk length\r\n"

#define EXPECT_CLOSED_AFTER(request, reply)                                                                  \
    vt_expect_closed_after(env.proxy->port, (request), sizeof(request) - 1, (reply))

Test(edge_accounting, reset_while_a_skip_is_in_force_is_not_answered)
{
    EXPECT_CLOSED_AFTER("CLIENT REPLY SKIP\r\nRESET\r\nGET ea:none\r\n" GARBAGE, "$-1\r\n" GARBAGE_REPLY);
}

Test(edge_accounting, an_empty_request_uses_up_a_skip)
{
    EXPECT_CLOSED_AFTER("CLIENT REPLY SKIP\r\n\r\nGET ea:none\r\n" GARBAGE, "$-1\r\n" GARBAGE_REPLY);
}

Test(edge_accounting, reset_with_arguments_is_an_arity_error_and_changes_nothing)
{
    EXPECT_CLOSED_AFTER("SUBSCRIBE ea:a\r\nRESET x\r\nPING\r\n" GARBAGE,
                        "*3\r\n$9\r\nsubscribe\r\n$4\r\nea:a\r\n:1\r\n"
                        "-ERR wrong number of arguments for 'reset' command\r\n"
                        "*2\r\n$4\r\npong\r\n$0\r\n\r\n" GARBAGE_REPLY);
}

Test(edge_accounting, multi_with_arguments_does_not_start_a_transaction)
{
    EXPECT_CLOSED_AFTER("MULTI x\r\nEXEC\r\n" GARBAGE,
                        "-ERR wrong number of arguments for 'multi' command\r\n"
                        "-ERR EXEC without MULTI\r\n" GARBAGE_REPLY);
}

Test(edge_accounting, replconf_ack_from_a_client_is_not_answered)
{
    EXPECT_CLOSED_AFTER("REPLCONF ACK 0\r\nGET ea:none\r\n" GARBAGE, "$-1\r\n" GARBAGE_REPLY);
}

/* MONITOR then MULTI: the connection is uncounted and inside a transaction;
 * the error must still come last (after Redis's own monitor line for MULTI,
 * whose timestamp we cannot predict). */
Test(edge_accounting, garbage_inside_a_transaction_while_monitoring)
{
    int fd = vt_must_sock(env.proxy->port);
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(fd, "MONITOR\r\nMULTI\r\n" GARBAGE));
    bool closed = vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS);
    cr_assert(closed, "the connection stayed open: \"%s\"", vt_buf_escaped(&got));
    const char *head = "+OK\r\n+OK\r\n", *tail = GARBAGE_REPLY;
    cr_assert(got.len > strlen(head) + strlen(tail) && memcmp(got.data, head, strlen(head)) == 0 &&
                  memcmp(got.data + got.len - strlen(tail), tail, strlen(tail)) == 0,
              "got \"%s\"", vt_buf_escaped(&got));
    cr_assert(vt_buf_contains(&got, "\"MULTI\""), "no monitor line for MULTI: \"%s\"", vt_buf_escaped(&got));
    vt_buf_free(&got);
    close(fd);
}

Test(edge_accounting, garbage_after_client_reply_off_and_on)
{
    EXPECT_CLOSED_AFTER("CLIENT REPLY OFF\r\nPING\r\nCLIENT REPLY ON\r\nPING\r\n" GARBAGE,
                        "+OK\r\n+PONG\r\n" GARBAGE_REPLY);
}

/* A client that sends its requests and then half-closes its socket
 * (printf ... | nc -N) still gets every reply, then the close. */
Test(edge_accounting, a_client_that_half_closes_still_gets_its_replies)
{
    int fd = vt_must_sock(env.proxy->port);
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(fd, "SET ea:h 1\r\nINCR ea:h\r\nGET ea:h\r\nPING\r\n"));
    cr_assert(shutdown(fd, SHUT_WR) == 0);
    bool closed = vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS);
    vt_assert_bytes(&got, "+OK\r\n:2\r\n$1\r\n2\r\n+PONG\r\n");
    cr_assert(closed, "the connection stayed open after the replies");
    vt_buf_free(&got);
    close(fd);
}

/* `head` (a printf format taking the payload length), then n bytes of 'v':
 * the start of a request large enough for the proxy to stream it. */
static void append_large_start(vt_buf *req, const char *head, size_t n)
{
    char line[128];
    snprintf(line, sizeof(line), head, n);
    vt_buf_append_str(req, line);
    char *value = malloc(n);
    memset(value, 'v', n);
    vt_buf_append(req, value, n);
    free(value);
}

/* A large request already streaming to Redis that turns out malformed: the
 * proxy answers it with the protocol error (Redis, holding half a request,
 * would wait) and closes, and Redis never runs it. */
Test(edge_accounting, a_streamed_request_that_turns_out_malformed)
{
    vt_buf req = {0};
    append_large_start(&req, "*4\r\n$3\r\nSET\r\n$4\r\nea:s\r\n$%zu\r\n", 300000);
    vt_buf_append_str(&req, "\r\n$zz\r\n");
    vt_expect_closed_after(env.proxy->port, req.data, req.len, GARBAGE_REPLY);
    vt_buf_free(&req);

    redisContext *c = vt_must_connect(env.redis->port);
    redisReply *r = vt_cmd(c, "EXISTS ea:s");
    vt_assert_int(r, 0);
    freeReplyObject(r);
    redisFree(c);
}

/* After a protocol error the proxy still notices the client leave: a
 * blocked command's upstream connection does not outlive its client. */
Test(edge_accounting, a_client_that_leaves_after_garbage_behind_a_blpop_frees_everything)
{
    int fd = vt_must_sock(env.proxy->port);
    cr_assert(vt_sock_send_str(fd, "BLPOP ea:never 0\r\n" GARBAGE));
    cr_assert(vt_wait_until_blocked(env.redis->port, 1, VT_READ_DEADLINE_MS), "BLPOP never blocked");
    close(fd);
    long long seen;
    cr_assert(vt_wait_info(env.redis->port, "clients", "blocked_clients", 0, VT_READ_DEADLINE_MS, &seen),
              "Redis still has %lld blocked clients", seen);
}

/* A request the proxy must hold whole (SUBSCRIBE is never streamed) that
 * outgrows client-query-buffer-limit: the client is closed without a reply,
 * as Redis does, and nobody else notices. */
Test(edge_accounting, a_request_over_the_query_buffer_limit_closes_only_its_client)
{
    VT_SKIP_IF_DIRECT();
    /* this story needs its own proxy settings: replace the suite's pair */
    static const char *const args[] = {"--client-query-buffer-limit", "1mb", NULL};
    vt_proxy_opts po = {.extra_args = args};
    vt_env_stop(&env);
    vt_env_start(&env, NULL, &po);

    redisContext *other = vt_must_connect(env.proxy->port);
    int fd = vt_must_sock(env.proxy->port);
    size_t big = 3 * 1024 * 1024;
    vt_buf req = {0};
    char head[64];
    snprintf(head, sizeof(head), "*2\r\n$9\r\nSUBSCRIBE\r\n$%zu\r\n", big);
    vt_buf_append_str(&req, head);
    char *chan = malloc(big);
    memset(chan, 'c', big);
    vt_buf_append(&req, chan, big);
    free(chan);
    vt_buf_append_str(&req, "\r\n");
    vt_sock_send_buf(fd, &req); /* may fail half-way: the proxy closes on us */
    vt_buf got = {0};
    bool closed = vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS);
    cr_assert(closed, "still open");
    cr_assert_eq(got.len, 0, "got a reply: \"%s\"", vt_buf_escaped(&got));
    vt_buf_free(&got);
    vt_buf_free(&req);
    close(fd);

    redisReply *r = vt_cmd(other, "PING");
    vt_assert_status(r, "PONG");
    freeReplyObject(r);
    redisFree(other);
}

Test(edge_accounting, replconf_answers_or_not_by_its_own_rules)
{
    EXPECT_CLOSED_AFTER("REPLCONF ACK\r\nPING\r\n" GARBAGE, "-ERR syntax error\r\n+PONG\r\n" GARBAGE_REPLY);
}

Test(edge_accounting, a_skip_refused_in_subscribe_mode_does_not_hide_reset)
{
    /* (Redis's words: 6.2 names the command 'client', and no S) */
    const char *refused = vt_redis_version() >= 700
                              ? "-ERR Can't execute 'client|reply': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / "
                                "QUIT / RESET are allowed in this context\r\n"
                              : "-ERR Can't execute 'client': only (P)SUBSCRIBE / (P)UNSUBSCRIBE / PING / QUIT / "
                                "RESET are allowed in this context\r\n";
    char want[512];
    snprintf(want, sizeof(want), "*3\r\n$9\r\nsubscribe\r\n$5\r\nea:ch\r\n:1\r\n%s+RESET\r\n" GARBAGE_REPLY,
             refused);
    EXPECT_CLOSED_AFTER("SUBSCRIBE ea:ch\r\nCLIENT REPLY SKIP\r\nRESET\r\n" GARBAGE, want);
}

Test(edge_accounting, a_skip_queued_in_multi_skips_nothing_yet)
{
    EXPECT_CLOSED_AFTER("MULTI\r\nCLIENT REPLY SKIP\r\nRESET\r\nGET ea:none\r\n" GARBAGE,
                        "+OK\r\n+QUEUED\r\n+RESET\r\n$-1\r\n" GARBAGE_REPLY);
}

/* Garbage, then the client half-closes while Redis is still busy with an
 * earlier request: that reply and the error still arrive, then the close.
 * (Proxy-only: Redis itself drops the reply of a command still blocked when
 * it reads the EOF; the proxy delivers what comes within its grace period.) */
Test(edge_accounting, a_client_that_half_closes_after_garbage_gets_what_it_was_owed)
{
    VT_SKIP_IF_DIRECT();
    int fd = vt_must_sock(env.proxy->port);
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(fd, "BLPOP ea:empty 0.3\r\n" GARBAGE));
    cr_assert(shutdown(fd, SHUT_WR) == 0);
    bool closed = vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS);
    vt_assert_bytes(&got, "*-1\r\n" GARBAGE_REPLY);
    cr_assert(closed, "the connection stayed open");
    vt_buf_free(&got);
    close(fd);
}

/* Through a password-protected Redis: the closing barrier's RESET logs the
 * connection out, and its PING is answered -NOAUTH; the error still comes. */
Test(edge_accounting, garbage_in_subscribe_mode_against_a_password_protected_redis)
{
    vt_env_stop(&env);
    vt_redis_opts ro = {.requirepass = "s3cret"};
    vt_env_start(&env, &ro, NULL);
    EXPECT_CLOSED_AFTER("AUTH s3cret\r\nSUBSCRIBE ea:ch\r\n" GARBAGE,
                        "+OK\r\n*3\r\n$9\r\nsubscribe\r\n$5\r\nea:ch\r\n:1\r\n" GARBAGE_REPLY);
}

/* The proxy's bulk limit is lower than Redis's: a request already streaming
 * to Redis that breaks it is answered by the proxy (Redis would wait). */
Test(edge_accounting, a_streamed_request_over_the_proxys_own_bulk_limit)
{
    VT_SKIP_IF_DIRECT();
    static const char *const args[] = {"--proto-max-bulk-len", "1mb", NULL};
    vt_proxy_opts po = {.extra_args = args};
    vt_env_stop(&env);
    vt_env_start(&env, NULL, &po);

    vt_buf req = {0};
    vt_buf_append_str(&req, "PING\r\n");
    append_large_start(&req, "*5\r\n$4\r\nMSET\r\n$1\r\na\r\n$%zu\r\n", 200000);
    vt_buf_append_str(&req, "\r\n$1\r\nb\r\n$2000000\r\n");
    vt_expect_closed_after(env.proxy->port, req.data, req.len,
                           "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n");
    vt_buf_free(&req);
}

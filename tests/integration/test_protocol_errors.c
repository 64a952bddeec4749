/* test_protocol_errors.c - a client that sends garbage is answered as Redis
 * answers it, then disconnected; nobody else notices.
 *
 * Redis replies "-ERR Protocol error: <why>" and closes the connection, after
 * the replies of the good commands that came before the garbage. The proxy
 * must send the same bytes in the same order, close, and keep serving every
 * other client, including one in the middle of a long pipeline. */
#include <pthread.h>

#include "tests/support/checks.h"

#define INLINE_MAX (64 * 1024) /* Redis's PROTO_INLINE_MAX_SIZE */
#define BYSTANDER_COMMANDS 20000

static vt_env env;

static void setup(void)
{
    vt_env_start(&env, NULL, NULL);
}

static void teardown(void)
{
    vt_env_stop(&env);
}

TestSuite(protocol_errors, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

/* Send `request`, expect exactly `reply` and then the connection closed;
 * honest clients pipelining on the same proxy (and, by default, the same
 * shared upstream connection) meanwhile get every reply, in order. */
static void expect_closed_after(const char *request, size_t len, const char *reply)
{
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, 2, 20);
    vt_expect_closed_after(env.proxy->port, request, len, reply);

    /* the proxy itself is fine */
    redisContext *c = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(c, "PING");
    vt_assert_status(r, "PONG");
    freeReplyObject(r);
    redisFree(c);
    cr_assert(vt_bystanders_wait(b, 20, VT_READ_DEADLINE_MS), "the bystanders were held up");
    vt_assert_bystanders_ok(b);
}

#define EXPECT_CLOSED_AFTER(request, reply) expect_closed_after((request), sizeof(request) - 1, (reply))

Test(protocol_errors, a_non_numeric_multibulk_length)
{
    EXPECT_CLOSED_AFTER("*abc\r\n", "-ERR Protocol error: invalid multibulk length\r\n");
}

Test(protocol_errors, a_multibulk_length_beyond_int_max)
{
    EXPECT_CLOSED_AFTER("*3000000000\r\n", "-ERR Protocol error: invalid multibulk length\r\n");
}

Test(protocol_errors, a_non_numeric_bulk_length)
{
    EXPECT_CLOSED_AFTER("*1\r\n$abc\r\n", "-ERR Protocol error: invalid bulk length\r\n");
}

Test(protocol_errors, a_negative_bulk_length)
{
    EXPECT_CLOSED_AFTER("*2\r\n$3\r\nGET\r\n$-1\r\n", "-ERR Protocol error: invalid bulk length\r\n");
}

Test(protocol_errors, a_bulk_longer_than_proto_max_bulk_len)
{
    EXPECT_CLOSED_AFTER("*1\r\n$536870913\r\n", "-ERR Protocol error: invalid bulk length\r\n");
}

Test(protocol_errors, a_multibulk_argument_without_its_dollar)
{
    EXPECT_CLOSED_AFTER("*1\r\nPING\r\n", "-ERR Protocol error: expected '$', got 'P'\r\n");
}

Test(protocol_errors, an_inline_command_with_unbalanced_quotes)
{
    EXPECT_CLOSED_AFTER("SET k \"abc\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n");
}

/* Exactly one byte over the limit, so the server has read everything we sent
 * when it closes (unread bytes would turn its close into a reset). */
static void expect_too_long(const char *prefix, char fill, const char *reply)
{
    size_t plen = strlen(prefix);
    size_t len = plen + INLINE_MAX + 1;
    char *req = malloc(len);
    memcpy(req, prefix, plen);
    memset(req + plen, fill, INLINE_MAX + 1);
    expect_closed_after(req, len, reply);
    free(req);
}

Test(protocol_errors, an_inline_request_over_64k_without_newline)
{
    expect_too_long("", 'a', "-ERR Protocol error: too big inline request\r\n");
}

Test(protocol_errors, a_multibulk_count_line_over_64k)
{
    expect_too_long("*", '1', "-ERR Protocol error: too big mbulk count string\r\n");
}

Test(protocol_errors, a_bulk_length_line_over_64k)
{
    expect_too_long("*1\r\n$", '1', "-ERR Protocol error: too big bulk count string\r\n");
}

Test(protocol_errors, good_commands_before_the_garbage_get_their_replies_first)
{
    EXPECT_CLOSED_AFTER("PING\r\n"
                        "*3\r\n$3\r\nSET\r\n$6\r\npe:key\r\n$5\r\nvalue\r\n"
                        "GET pe:key\r\n"
                        "*abc\r\n"
                        "SET pe:after garbage\r\n",
                        "+PONG\r\n+OK\r\n$5\r\nvalue\r\n-ERR Protocol error: invalid multibulk length\r\n");

    /* what came before the garbage ran, what came after did not */
    redisContext *c = vt_must_connect(env.redis->port);
    redisReply *r = vt_cmd(c, "GET pe:key");
    vt_assert_str(r, "value");
    freeReplyObject(r);
    r = vt_cmd(c, "EXISTS pe:after");
    vt_assert_int(r, 0);
    freeReplyObject(r);
    redisFree(c);
}

Test(protocol_errors, requests_redis_ignores_get_no_reply_and_do_not_close)
{
    int fd = vt_must_sock(env.proxy->port);
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(fd, "*0\r\n*-1\r\n\r\n   \r\nPING\r\n"));
    vt_expect_bytes(fd, &got, "+PONG\r\n");
    vt_buf_free(&got);
    close(fd);
}

Test(protocol_errors, a_bulk_not_followed_by_crlf_is_cut_where_redis_cuts_it)
{
    /* Redis takes the 3 declared bytes "PIN" and skips the next two ("GX")
     * without looking at them */
    int fd = vt_must_sock(env.proxy->port);
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(fd, "*1\r\n$3\r\nPINGX\r\nPING\r\n"));
    char want[600];
    snprintf(want, sizeof(want), "-%s\r\n+PONG\r\n", vt_unknown_command("PIN", NULL));
    vt_expect_bytes(fd, &got, want);
    vt_buf_free(&got);
    close(fd);
}

/* ---- a bystander in the middle of a long pipeline ---- */

typedef struct sender {
    int fd;
    vt_buf *bytes;
    bool ok;
} sender;

static void *send_pipeline(void *arg)
{
    sender *s = arg;
    s->ok = vt_sock_send_buf(s->fd, s->bytes);
    return NULL;
}

Test(protocol_errors, another_clients_pipeline_keeps_getting_all_its_replies)
{
    vt_buf pipeline = {0}, want = {0}, got = {0};
    for (int i = 1; i <= BYSTANDER_COMMANDS; i++) {
        char line[32];
        vt_buf_cmd(&pipeline, "INCR", "pe:bystander", NULL);
        snprintf(line, sizeof(line), ":%d\r\n", i);
        vt_buf_append_str(&want, line);
    }

    int bystander = vt_must_sock(env.proxy->port);
    sender s = {.fd = bystander, .bytes = &pipeline};
    pthread_t t;
    pthread_create(&t, NULL, send_pipeline, &s);

    /* the bystander's pipeline is under way... */
    cr_assert(vt_sock_read_len(bystander, &got, 100, VT_READ_DEADLINE_MS), "bystander got no replies: \"%s\"",
              vt_buf_escaped(&got));

    /* ...when another client sends garbage and is thrown out */
    int vandal = vt_must_sock(env.proxy->port);
    vt_buf vgot = {0};
    cr_assert(vt_sock_send_str(vandal, "*1\r\n$x\r\n"));
    cr_assert(vt_sock_read_eof(vandal, &vgot, VT_READ_DEADLINE_MS), "vandal not disconnected");
    vt_assert_bytes(&vgot, "-ERR Protocol error: invalid bulk length\r\n");
    close(vandal);
    vt_buf_free(&vgot);

    /* the bystander gets every reply, in order */
    vt_sock_read_len(bystander, &got, want.len, 30000);
    pthread_join(t, NULL);
    cr_assert(s.ok, "sending the bystander's pipeline failed");
    cr_assert_eq(got.len, want.len, "bystander got %zu of %zu bytes%s", got.len, want.len,
                 got.eof ? " then EOF" : "");
    cr_assert(memcmp(got.data, want.data, want.len) == 0, "bystander's replies are not :1 ... :%d in order",
              BYSTANDER_COMMANDS);

    vt_buf_free(&pipeline);
    vt_buf_free(&want);
    vt_buf_free(&got);
    close(bystander);
}

/* In subscribe mode the proxy cannot count replies; its own error must still
 * come after everything Redis sent before it (the confirmations, a message
 * published in between), then the connection closes. */
Test(protocol_errors, garbage_in_subscribe_mode_comes_after_the_subscription_stream)
{
    int fd = vt_must_sock(env.proxy->port);
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(fd, "SUBSCRIBE pe:ch1 pe:ch2\r\n"));
    vt_expect_bytes(fd, &got,
                    "*3\r\n$9\r\nsubscribe\r\n$6\r\npe:ch1\r\n:1\r\n"
                    "*3\r\n$9\r\nsubscribe\r\n$6\r\npe:ch2\r\n:2\r\n");
    vt_buf_reset(&got);

    redisContext *pub = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(pub, "PUBLISH pe:ch2 hello");
    vt_assert_int(r, 1);
    freeReplyObject(r);

    cr_assert(vt_sock_send_str(fd, "PING\r\n*1\r\ngarbage\r\n"));
    bool closed = vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS);
    vt_assert_bytes(&got, "*3\r\n$7\r\nmessage\r\n$6\r\npe:ch2\r\n$5\r\nhello\r\n"
                          "*2\r\n$4\r\npong\r\n$0\r\n\r\n"
                          "-ERR Protocol error: expected '$', got 'g'\r\n");
    cr_assert(closed, "the connection stayed open");
    vt_buf_free(&got);
    close(fd);

    r = vt_cmd(pub, "PING");
    vt_assert_status(r, "PONG");
    freeReplyObject(r);
    redisFree(pub);
}

/* After leaving subscribe mode the proxy counts again: an error after
 * UNSUBSCRIBE lands right after the last reply. */
Test(protocol_errors, garbage_after_leaving_subscribe_mode)
{
    EXPECT_CLOSED_AFTER("SUBSCRIBE pe:a\r\nUNSUBSCRIBE pe:a\r\nGET pe:none\r\n*1\r\n$-5\r\n",
                        "*3\r\n$9\r\nsubscribe\r\n$4\r\npe:a\r\n:1\r\n"
                        "*3\r\n$11\r\nunsubscribe\r\n$4\r\npe:a\r\n:0\r\n"
                        "$-1\r\n"
                        "-ERR Protocol error: invalid bulk length\r\n");
}

/* CLIENT REPLY OFF silences Redis's protocol error too: nothing, then close. */
Test(protocol_errors, client_reply_off_silences_the_protocol_error)
{
    EXPECT_CLOSED_AFTER("PING\r\nCLIENT REPLY OFF\r\nPING\r\n*x\r\n", "+PONG\r\n");
}

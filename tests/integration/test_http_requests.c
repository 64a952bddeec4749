/* test_http_requests.c - an HTTP request sent to the proxy.
 *
 * Redis takes a command named POST or "Host:" (any case, inline or
 * multibulk) for a cross-protocol attack: it logs a warning and closes the
 * connection at once, without a reply, and drops the replies to what it
 * read together with it (src/server.c, securityWarningCommand). Forwarded,
 * such a line would make Redis close the proxy's shared connection under
 * every other client on it; the proxy closes the sender itself instead and
 * sends nothing of it upstream. Every story runs with bystanders. */
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

TestSuite(http_requests, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

/* Send `req` on a new connection and expect the connection closed with
 * nothing sent back. */
static void expect_silent_close(const char *req)
{
    int fd = vt_must_sock(env.proxy->port);
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(fd, req), "send failed");
    cr_assert(vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS), "%s: the connection stayed open; got \"%s\"",
              vt_escape(req, strlen(req)), vt_buf_escaped(&got));
    cr_assert(got.len == 0, "%s: expected no reply, got \"%s\"", vt_escape(req, strlen(req)),
              vt_buf_escaped(&got));
    vt_buf_free(&got);
    close(fd);
}

/* Proxy only: nothing of it reached Redis, so Redis closed no upstream
 * connection (a shared one, or the sender's own). */
static void expect_no_upstream_lost(void)
{
    if (vt_direct_mode()) return;
    long long lost = vt_proxy_stat(env.proxy->port, "upstream_lost");
    cr_assert_eq(lost, 0, "Redis closed %lld upstream connection(s): the request was forwarded", lost);
}

static redisReply *direct_get(const char *key)
{
    redisContext *d = vt_must_connect(env.redis->port);
    redisReply *r = vt_cmd(d, "GET %s", key);
    redisFree(d);
    return r;
}

Test(http_requests, a_browser_post_is_closed_silently_and_nobody_else_notices)
{
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, 4, 50);
    /* What a browser sends when a page posts to the Redis port, with a
     * command smuggled in the body. */
    for (int i = 0; i < 20; i++)
        expect_silent_close("POST / HTTP/1.1\r\nHost: 127.0.0.1:6380\r\nContent-Length: 14\r\n\r\n"
                            "SET ht:owned 1\r\n");
    cr_assert(vt_bystanders_wait(b, 50, VT_READ_DEADLINE_MS), "the bystanders stopped being served");
    vt_assert_bystanders_ok(b);
    redisReply *r = direct_get("ht:owned");
    vt_assert_nil(r);
    freeReplyObject(r);
    expect_no_upstream_lost();
}

Test(http_requests, host_and_post_in_any_case_inline_or_multibulk)
{
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, 4, 50);
    expect_silent_close("Host: example.com\r\n");
    expect_silent_close("hOsT:\r\n");
    expect_silent_close("post\r\n");
    expect_silent_close("*2\r\n$5\r\nHOST:\r\n$1\r\nx\r\n");
    expect_silent_close("*3\r\n$4\r\nPoSt\r\n$1\r\n/\r\n$8\r\nHTTP/1.1\r\n");
    cr_assert(vt_bystanders_wait(b, 50, VT_READ_DEADLINE_MS), "the bystanders stopped being served");
    vt_assert_bystanders_ok(b);
    expect_no_upstream_lost();

    /* Only those exact names: "host" without its colon is an unknown
     * command, as from Redis. */
    int fd = vt_must_sock(env.redis->port); /* (Redis's words: 6.2 quotes with `) */
    vt_buf req = {0}, want = {0};
    vt_buf_append_str(&req, "host x\r\nPING\r\n");
    cr_assert(vt_sock_send_buf(fd, &req));
    cr_assert(vt_sock_read_replies(fd, &want, 2, VT_READ_DEADLINE_MS), "Redis: \"%s\"", vt_buf_escaped(&want));
    cr_assert(strncmp(want.data, "-ERR unknown command ", 21) == 0, "Redis: \"%s\"", vt_buf_escaped(&want));
    close(fd);
    fd = vt_must_sock(env.proxy->port);
    vt_buf_append(&want, "", 1); /* (a C string for vt_exchange) */
    vt_exchange(fd, &req, want.data);
    vt_buf_free(&req);
    vt_buf_free(&want);
    close(fd);
}

/* Redis has already written the replies to what it read before; what came
 * in the same read as the POST runs, but its replies are never sent. */
Test(http_requests, replies_to_earlier_reads_arrive_those_read_with_the_post_do_not)
{
    vt_bystanders *b = vt_bystanders_start(env.proxy->port, 2);
    cr_assert(b != NULL);
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    vt_buf_append_str(&req, "SET ht:a 1\r\n");
    vt_exchange(fd, &req, "+OK\r\n");

    vt_buf got = {0};
    cr_assert(vt_sock_send_str(fd, "SET ht:b 2\r\nPING\r\nPOST / HTTP/1.1\r\nSET ht:c 3\r\n"));
    cr_assert(vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS), "the connection stayed open; got \"%s\"",
              vt_buf_escaped(&got));
    cr_assert(got.len == 0, "expected no reply, got \"%s\"", vt_buf_escaped(&got));
    close(fd);

    redisReply *r = direct_get("ht:b");
    vt_assert_str(r, "2"); /* it ran */
    freeReplyObject(r);
    r = direct_get("ht:c");
    vt_assert_nil(r); /* it did not: nothing after the POST */
    freeReplyObject(r);
    cr_assert(vt_bystanders_wait(b, 50, VT_READ_DEADLINE_MS), "the bystanders stopped being served");
    vt_assert_bystanders_ok(b);
    expect_no_upstream_lost();
    vt_buf_free(&got);
    vt_buf_free(&req);
}

Test(http_requests, inside_a_transaction_too)
{
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    vt_buf_append_str(&req, "MULTI\r\nSET ht:m 1\r\n");
    vt_exchange(fd, &req, "+OK\r\n+QUEUED\r\n");
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(fd, "POST /\r\nEXEC\r\n"));
    cr_assert(vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS), "the connection stayed open; got \"%s\"",
              vt_buf_escaped(&got));
    cr_assert(got.len == 0, "expected no reply, got \"%s\"", vt_buf_escaped(&got));
    close(fd);
    redisReply *r = direct_get("ht:m");
    vt_assert_nil(r);
    freeReplyObject(r);
    vt_buf_free(&got);
    vt_buf_free(&req);
}

Test(http_requests, the_proxy_logs_redis_warning)
{
    VT_SKIP_IF_DIRECT();
    expect_silent_close("POST / HTTP/1.1\r\n");
    expect_silent_close("Host: x\r\n");
    char *log = vt_proxy_log(env.proxy);
    const char *line = strstr(log, "Possible SECURITY ATTACK detected");
    cr_assert(line != NULL, "no warning in the proxy's log:\n%s", log);
    cr_assert(strstr(line + 1, "Possible SECURITY ATTACK detected") == NULL,
              "logged more than once a minute, unlike Redis:\n%s", log);
    free(log);
}

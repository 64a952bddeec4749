/* test_metrics_http.c - the admin endpoint meets hostile and sloppy HTTP
 * clients while RESP clients keep being served.
 *
 * Only GET and HEAD are served (405 with Allow otherwise), unknown paths
 * 404; a request head over 8 KiB gets 431, a body 400, garbage 400; past
 * 64 connections at once the next ones are closed at once; a slow-loris
 * client that never finishes its request is closed after 5 s. Bystanders
 * pipelining through the proxy meanwhile lose nothing. (Registered once:
 * nothing here depends on how the proxy reaches Redis.) */

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>

#include "tests/support/checks.h"
#include "tests/support/http.h"

static vt_env env;
static int mport;
static char portarg[16];

static void setup(void)
{
    if (vt_direct_mode()) return;
    mport = vt_free_port();
    snprintf(portarg, sizeof(portarg), "%d", mport);
    static const char *args[] = {"--metrics-port", portarg, NULL};
    vt_proxy_opts po = {.extra_args = args};
    vt_env_start(&env, NULL, &po);
}

static void teardown(void)
{
    vt_env_stop(&env);
}

TestSuite(metrics_http, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

static vt_http_resp raw(const char *req)
{
    return vt_http_raw(mport, req, strlen(req), 10000);
}

Test(metrics_http, methods_and_paths)
{
    VT_SKIP_IF_DIRECT();
    vt_http_resp r = raw("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    cr_assert_eq(r.status, 405, "%s", vt_buf_escaped(&r.raw));
    cr_assert(strstr(r.raw.data, "\r\nAllow: GET, HEAD\r\n"), "%s", vt_buf_escaped(&r.raw));
    cr_assert(strstr(r.raw.data, "\r\nConnection: close\r\n"), "%s", vt_buf_escaped(&r.raw));
    vt_http_free(&r);
    r = raw("DELETE /readyz HTTP/1.1\r\nHost: x\r\n\r\n");
    cr_assert_eq(r.status, 405, "%s", vt_buf_escaped(&r.raw));
    vt_http_free(&r);
    r = vt_http_get(mport, "/nope");
    cr_assert_eq(r.status, 404, "%s", vt_buf_escaped(&r.raw));
    vt_http_free(&r);
    r = vt_http_get(mport, "/healthz?verbose=1");
    cr_assert_eq(r.status, 200, "%s", vt_buf_escaped(&r.raw));
    cr_assert(r.body && !strcmp(r.body, "ok\n"), "%s", vt_buf_escaped(&r.raw));
    vt_http_free(&r);
    /* HEAD: the headers of a GET, no body. */
    r = raw("HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    cr_assert_eq(r.status, 200, "%s", vt_buf_escaped(&r.raw));
    cr_assert(r.body && r.body_len == 0, "HEAD got a body: %s", vt_buf_escaped(&r.raw));
    cr_assert(!strstr(r.raw.data, "Content-Length: 0\r\n"), "%s", vt_buf_escaped(&r.raw));
    vt_http_free(&r);
    /* HTTP/1.0 works too. */
    r = raw("GET /healthz HTTP/1.0\r\n\r\n");
    cr_assert_eq(r.status, 200, "%s", vt_buf_escaped(&r.raw));
    vt_http_free(&r);
}

/* Closed by the server without a byte, within timeout_ms? */
static bool closed_silently(int fd, int timeout_ms)
{
    vt_buf b = {0};
    bool closed = vt_sock_read_eof(fd, &b, timeout_ms);
    bool silent = b.len == 0;
    vt_buf_free(&b);
    return closed && silent;
}

Test(metrics_http, hostile_clients_cost_resp_bystanders_nothing)
{
    VT_SKIP_IF_DIRECT();
    vt_bystanders *by = vt_must_start_bystanders(env.proxy->port, 4, 50);

    /* An oversized head: 431. */
    size_t big = 9 * 1024;
    char *req = malloc(big + 128);
    int n = snprintf(req, big + 128, "GET /metrics HTTP/1.1\r\nX-Big: ");
    memset(req + n, 'a', big);
    memcpy(req + n + big, "\r\n\r\n", 5);
    vt_http_resp r = raw(req);
    cr_assert_eq(r.status, 431, "%s", vt_buf_escaped(&r.raw));
    vt_http_free(&r);
    free(req);
    /* A body: 400. Garbage: 400. */
    r = raw("GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
    cr_assert_eq(r.status, 400, "%s", vt_buf_escaped(&r.raw));
    vt_http_free(&r);
    r = raw("\x01\x02 garbage\r\n\r\n");
    cr_assert_eq(r.status, 400, "%s", vt_buf_escaped(&r.raw));
    vt_http_free(&r);
    /* RESP on the admin port: not HTTP, 400. */
    r = raw("*1\r\n$4\r\nPING\r\n");
    cr_assert_eq(r.status, 400, "%s", vt_buf_escaped(&r.raw));
    vt_http_free(&r);

    /* 64 connections held open, then more: those are closed at once. */
    int fds[70];
    for (int i = 0; i < 70; i++)
        fds[i] = vt_must_sock(mport);
    for (int i = 64; i < 70; i++)
        cr_assert(closed_silently(fds[i], 3000), "connection %d past the limit was not closed", i + 1);
    /* The first ones are served. */
    const char get[] = "GET /healthz HTTP/1.1\r\n\r\n";
    vt_sock_send(fds[0], get, sizeof(get) - 1);
    vt_buf b = {0};
    vt_sock_read_eof(fds[0], &b, 5000);
    cr_assert(vt_buf_contains(&b, "HTTP/1.1 200 OK"), "%s", vt_buf_escaped(&b));
    vt_buf_free(&b);
    for (int i = 0; i < 70; i++)
        close(fds[i]);
    cr_assert(vt_bystanders_wait(by, 50, 10000), "bystanders stalled");

    /* Slow loris: a byte now and then, never a whole request. Closed at
     * the 5 s deadline, without a response. */
    int fd = vt_must_sock(mport);
    long long t0 = vt_now_ms();
    const char *slow = "GET /metrics HTTP/1.1\r\nX-Slow: ";
    bool closed = false;
    for (size_t i = 0; !closed && vt_now_ms() - t0 < 15000; i++) {
        char ch = slow[i < strlen(slow) ? i : strlen(slow) - 1];
        vt_sock_send(fd, &ch, 1);
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 300) > 0) {
            char buf[64];
            ssize_t got = read(fd, buf, sizeof(buf));
            cr_assert(got <= 0, "the slow client got a response: %.*s", (int)got, buf);
            closed = true;
        }
    }
    long long took = vt_now_ms() - t0;
    cr_assert(closed, "the slow client was never closed");
    cr_assert(took >= 4000 && took < 9000, "closed after %lld ms, not at the 5 s deadline", took);
    close(fd);

    /* Still served after all that. */
    r = vt_http_get(mport, "/healthz");
    cr_assert_eq(r.status, 200);
    vt_http_free(&r);
    cr_assert(vt_bystanders_wait(by, 50, 10000), "bystanders stalled");
    vt_assert_bystanders_ok(by);
}

/* Start-up with a bad admin address stops with the reason and status 1. */
Test(metrics_http, bad_metrics_bind_stops_startup)
{
    VT_SKIP_IF_DIRECT();
    char cmd[512], out[2048];
    snprintf(cmd, sizeof(cmd),
             "timeout 10 %s --port %d --upstream 127.0.0.1:%d --metrics-port %d --metrics-bind not-an-address 2>&1",
             VP_BINARY, vt_free_port(), env.redis->port, vt_free_port());
    FILE *f = popen(cmd, "r");
    cr_assert(f != NULL);
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    int st = pclose(f);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d: %s", st, out);
    cr_assert(strstr(out, "metrics-bind 'not-an-address' is not an IPv4 or IPv6 address"), "%s", out);
}

/* `verbproxy --healthcheck [HOST:]PORT[/PATH]`, what a Dockerfile's
 * HEALTHCHECK runs: exit 0 only on a 2xx answer, 1 with a one-line reason
 * otherwise. Told against a tiny HTTP responder (a thread of the test that
 * answers one connection with canned bytes and records the request), a port
 * nobody listens on, one that never answers, and a real redis-server (the
 * operator's likely slip: the proxy's RESP port instead of the admin port).
 *
 * Registered once (CMakeLists.txt): no upstream mode matters here. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proxy/ops/healthcheck.h"
#include "tests/support/servers.h"

/* One canned answer to one connection. */
typedef struct responder {
    int listen_fd;
    int port;
    const char *answer; /* NULL: accept, read the request, never answer */
    int drops;          /* connections first dropped unanswered, a reset and a close in turn */
    int accepted;       /* connections accepted */
    char request[2048]; /* what the client sent, up to the blank line */
    pthread_t thread;
    int release[2]; /* a byte here lets a silent responder go */
} responder;

/* Read the request up to its blank line into r->request. */
static void read_request(responder *r, int fd)
{
    size_t n = 0;
    r->request[0] = '\0';
    while (n < sizeof(r->request) - 1 && !strstr(r->request, "\r\n\r\n")) {
        ssize_t got = recv(fd, r->request + n, sizeof(r->request) - 1 - n, 0);
        if (got <= 0) break;
        n += (size_t)got;
        r->request[n] = '\0';
    }
}

/* Close without a byte of an answer: a reset (SO_LINGER 0) or a FIN. */
static void drop(int fd, bool reset)
{
    if (reset) {
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    close(fd);
}

static void *respond(void *arg)
{
    responder *r = arg;
    int fd;
    for (;;) {
        fd = accept(r->listen_fd, NULL, NULL);
        if (fd < 0) return NULL;
        r->accepted++;
        read_request(r, fd);
        if (r->accepted > r->drops) break;
        drop(fd, r->accepted % 2 == 1);
    }
    if (r->answer) {
        size_t len = strlen(r->answer);
        for (size_t off = 0; off < len;) {
            ssize_t w = send(fd, r->answer + off, len - off, MSG_NOSIGNAL);
            if (w <= 0) break;
            off += (size_t)w;
        }
    } else {
        char b;
        ssize_t ignored = read(r->release[0], &b, 1); /* held until the test is done */
        (void)ignored;
    }
    close(fd);
    return NULL;
}

/* Answer the connection after `drops` dropped ones. */
static void responder_start_after_drops(responder *r, const char *answer, int drops)
{
    memset(r, 0, sizeof(*r));
    r->answer = answer;
    r->drops = drops;
    cr_assert_eq(pipe(r->release), 0);
    r->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(r->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(bind(r->listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(listen(r->listen_fd, 4), 0);
    socklen_t sl = sizeof(sa);
    getsockname(r->listen_fd, (struct sockaddr *)&sa, &sl);
    r->port = ntohs(sa.sin_port);
    cr_assert_eq(pthread_create(&r->thread, NULL, respond, r), 0);
}

static void responder_start(responder *r, const char *answer)
{
    responder_start_after_drops(r, answer, 0);
}

static void responder_stop(responder *r)
{
    shutdown(r->listen_fd, SHUT_RDWR); /* a responder still in accept() returns */
    cr_assert_eq(write(r->release[1], "x", 1), 1);
    pthread_join(r->thread, NULL);
    close(r->listen_fd);
    close(r->release[0]);
    close(r->release[1]);
}

/* Run `verbproxy --healthcheck target`: its exit status; both streams in out. */
static int healthcheck(const char *target, char *out, size_t outlen)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "timeout 20 %s --healthcheck '%s'", VP_BINARY, target);
    return vt_run_capture(cmd, out, outlen);
}

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

Test(healthcheck, a_200_is_healthy_and_the_default_path_is_healthz)
{
    responder r;
    responder_start(&r, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nok\n");
    char target[32], out[1024];
    snprintf(target, sizeof(target), "%d", r.port);
    int rc = healthcheck(target, out, sizeof(out));
    responder_stop(&r);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, out);
    cr_assert(strncmp(r.request, "GET /healthz HTTP/1.1\r\n", 23) == 0, "request: %s", r.request);
    cr_assert(strstr(r.request, "\r\nHost: 127.0.0.1:"), "no Host header: %s", r.request);
    cr_assert(strstr(out, "HTTP 200: ok"), "%s", out);
}

Test(healthcheck, a_503_fails_with_its_reason_on_one_line)
{
    responder r;
    /* No Content-Length: the body ends with the connection (HTTP/1.0 style). */
    responder_start(&r, "HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\n\r\n"
                        "draining: SIGTERM received\nsecond line\n");
    char target[64], out[1024];
    snprintf(target, sizeof(target), "127.0.0.1:%d/readyz", r.port);
    int rc = healthcheck(target, out, sizeof(out));
    responder_stop(&r);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, out);
    cr_assert(strncmp(r.request, "GET /readyz HTTP/1.1\r\n", 22) == 0, "request: %s", r.request);
    cr_assert(strstr(out, "HTTP 503: draining: SIGTERM received\n"), "%s", out);
    cr_assert_eq(lines(out), 1, "one line, not: %s", out);
}

Test(healthcheck, other_2xx_codes_are_healthy_and_3xx_is_not)
{
    responder r;
    responder_start(&r, "HTTP/1.1 204 No Content\r\n\r\n");
    char target[64], out[1024];
    snprintf(target, sizeof(target), "localhost:%d/healthz", r.port);
    int rc = healthcheck(target, out, sizeof(out));
    responder_stop(&r);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, out);

    responder_start(&r,
                    "HTTP/1.1 301 Moved Permanently\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n");
    snprintf(target, sizeof(target), "%d", r.port);
    rc = healthcheck(target, out, sizeof(out));
    responder_stop(&r);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, out);
    cr_assert(strstr(out, "HTTP 301"), "%s", out);
}

Test(healthcheck, nobody_listening_is_unhealthy)
{
    char target[32], out[1024];
    snprintf(target, sizeof(target), "%d", vt_free_port());
    int rc = healthcheck(target, out, sizeof(out));
    cr_assert_eq(rc, 1, "exit %d: %s", rc, out);
    cr_assert(strstr(out, "Connection refused"), "%s", out);
    cr_assert_eq(lines(out), 1, "%s", out);
}

Test(healthcheck, garbage_and_a_cut_response_are_unhealthy)
{
    responder r;
    responder_start(&r, "+PONG\r\n");
    char target[32], out[1024];
    snprintf(target, sizeof(target), "%d", r.port);
    int rc = healthcheck(target, out, sizeof(out));
    responder_stop(&r);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, out);
    cr_assert(strstr(out, "not an HTTP response"), "%s", out);

    /* A status line of 200 and a body cut short of its Content-Length. */
    responder_start(&r, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nok");
    snprintf(target, sizeof(target), "%d", r.port);
    rc = healthcheck(target, out, sizeof(out));
    responder_stop(&r);
    cr_assert_eq(rc, 1, "a cut 200 passed: %s", out);
    cr_assert(strstr(out, "connection closed before a full response"), "%s", out);
}

Test(healthcheck, the_redis_port_by_mistake_is_unhealthy)
{
    vt_redis *redis = vt_redis_start(&(vt_redis_opts){.tls = VT_REDIS_TLS_NONE});
    cr_assert(redis != NULL);
    char target[32], out[1024];
    snprintf(target, sizeof(target), "%d", redis->port);
    int rc = healthcheck(target, out, sizeof(out));
    vt_redis_free(redis);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, out);
    cr_assert_eq(lines(out), 1, "%s", out);
}

Test(healthcheck, a_silent_server_times_out)
{
    responder r;
    responder_start(&r, NULL);
    char target[32], out[1024];
    snprintf(target, sizeof(target), "%d", r.port);
    long long t0 = vt_now_ms();
    int rc = healthcheck(target, out, sizeof(out));
    long long took = vt_now_ms() - t0;
    responder_stop(&r);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, out);
    cr_assert(strstr(out, "no full response within"), "%s", out);
    cr_assert(took >= HEALTHCHECK_TIMEOUT_MS - 100 && took < HEALTHCHECK_TIMEOUT_MS + 5000, "took %lld ms",
              took);
}

Test(healthcheck, a_malformed_target_is_refused)
{
    char out[1024];
    const char *bad[] = {"", "host:", "host:70000", ":80", "[::1]80", "80/a b"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = healthcheck(bad[i], out, sizeof(out));
        cr_assert_eq(rc, 1, "'%s': exit %d: %s", bad[i], rc, out);
        cr_assert(strstr(out, "is not [HOST:]PORT[/PATH]"), "'%s': %s", bad[i], out);
    }
}

/* Issue 22, finding 4: an admin port full of idle connections used to
 * close the probe's connection unanswered, and the probe failed at once
 * with most of its 3 s left. A connection closed or reset before a byte of
 * an answer is now tried again (an idempotent GET: RFC 9110 9.2.2) within
 * the same deadline. */
Test(healthcheck, a_connection_dropped_unanswered_is_tried_again)
{
    responder r;
    responder_start_after_drops(&r, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n", 4);
    char target[32], out[1024];
    snprintf(target, sizeof(target), "%d", r.port);
    long long t0 = vt_now_ms();
    int rc = healthcheck(target, out, sizeof(out));
    long long took = vt_now_ms() - t0;
    responder_stop(&r);
    cr_assert_eq(rc, 0, "exit %d after %d connections: %s", rc, r.accepted, out);
    cr_assert_eq(r.accepted, 5, "%d connections", r.accepted);
    cr_assert(strncmp(r.request, "GET /healthz HTTP/1.1\r\n", 23) == 0, "request: %s", r.request);
    cr_assert(took < HEALTHCHECK_TIMEOUT_MS, "took %lld ms", took);
}

/* Dropped every time: unhealthy at the deadline, saying so on one line. */
Test(healthcheck, a_server_that_always_drops_is_unhealthy_at_the_deadline)
{
    responder r;
    responder_start_after_drops(&r, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n", 1000000);
    char target[32], out[1024];
    snprintf(target, sizeof(target), "%d", r.port);
    long long t0 = vt_now_ms();
    int rc = healthcheck(target, out, sizeof(out));
    long long took = vt_now_ms() - t0;
    responder_stop(&r);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, out);
    cr_assert(strstr(out, "attempts in"), "%s", out);
    /* The last attempt's reason: a drop, or, when the deadline came while
     * it was still connecting (a busy machine: the responder's accept queue
     * full), the connect timing out. */
    cr_assert(strstr(out, "closed before a response") || strstr(out, "Connection reset by peer") ||
                  strstr(out, "Connection timed out"),
              "%s", out);
    cr_assert_eq(lines(out), 1, "%s", out);
    cr_assert(took >= HEALTHCHECK_TIMEOUT_MS - 300 && took < HEALTHCHECK_TIMEOUT_MS + 5000, "took %lld ms",
              took);
}

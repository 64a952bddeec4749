/* test_tls_close.c - how a TLS client's connection ends. A strict TLS
 * client (OpenSSL 3, Python's ssl with suppress_ragged_eofs=False) reads
 * a close without close_notify as a truncation ("unexpected eof while
 * reading"). Redis 7.0 sends close_notify whenever it closes a TLS client
 * whose handshake is over (connTLSClose): after QUIT, after a protocol
 * error, at `timeout`. A client on verbproxy's tls-port reads to the end
 * and must see the same clean end as one on Redis's, with the same bytes
 * before it; so must one closed by the SIGTERM drain, and one that sent
 * its own close_notify behind a request gets the reply first (both
 * proxy-only). A client past maxclients is closed before its handshake,
 * without a word or an alert, as by Redis (test_tls.c). The proxy's own
 * TLS connections to the upstream end the same way when it closes them
 * (an upstream that shows what it reads: openssl s_server -msg).
 * Certificates: tls_certs.h. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/checks.h"
#include "tests/support/tls_certs.h"
#include "tests/support/tls_client.h"

#define PASS "tls-close-pw"

static vt_redis *upstream, *reference;
static vt_proxy *proxy;
static int proxy_tls_port;

static void setup(void)
{
    vt_ignore_sigpipe();
    cr_assert(vt_certs_get(), "cannot make the test certificates");
    upstream = vt_redis_start(NULL);
    cr_assert(upstream, "redis-server did not start");
    static const char *const ref_args[] = {"--timeout", "1", NULL};
    reference = vt_redis_start(&(vt_redis_opts){
        .tls = VT_REDIS_TLS_ALSO, .requirepass = PASS, .extra_args = ref_args, .standalone = true});
    cr_assert(reference, "the reference redis-server with TLS did not start");
    proxy_tls_port = vt_free_port();
    static char tp[16];
    snprintf(tp, sizeof(tp), "%d", proxy_tls_port);
    static const char *args[32];
    int n = 0;
    const char *fixed[] = {"--tls-port",
                           tp,
                           "--tls-cert-file",
                           vt_cert_path("server.crt"),
                           "--tls-key-file",
                           vt_cert_path("server.key"),
                           "--tls-ca-cert-file",
                           vt_cert_path("ca.crt"),
                           "--tls-auth-clients",
                           "no",
                           "--requirepass",
                           PASS,
                           "--timeout",
                           "1",
                           "--shutdown-timeout",
                           "1",
                           NULL};
    for (int i = 0; fixed[i]; i++)
        args[n++] = fixed[i];
    args[n] = NULL;
    proxy = vt_proxy_start(upstream, &(vt_proxy_opts){.extra_args = args});
    cr_assert(proxy, "verbproxy did not start");
}

static void teardown(void)
{
    vt_proxy_free(proxy);
    vt_redis_free(reference);
    vt_redis_free(upstream);
}

TestSuite(tls_close, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

/* On a new TLS connection to `port`: send `req`, read to the end. The
 * bytes read go to `got`; returns how it ended. */
static vt_tls_end tell(int port, const char *req, vt_buf *got)
{
    char why[256];
    vt_tls_client *t = vt_tls_connect(port, NULL, NULL, why, sizeof(why));
    cr_assert(t, "TLS connect to %d failed: %s", port, why);
    cr_assert(vt_tls_send_str(t, req), "TLS write to %d failed", port);
    vt_tls_end e = vt_tls_read_to_end(t, got, VT_READ_DEADLINE_MS);
    vt_tls_free(t);
    return e;
}

/* The same request to Redis and to the proxy: Redis ends with
 * close_notify after `want`, and so must the proxy, after the same bytes. */
static void expect_clean_end_as_redis(const char *req, const char *want)
{
    VT_SKIP_IF_DIRECT();
    vt_buf ref = {0}, got = {0};
    vt_tls_end e = tell(reference->tls_port, req, &ref);
    cr_assert_eq(e, VT_TLS_END_CLOSE_NOTIFY, "Redis: ended with %s after \"%s\"", vt_tls_end_name(e),
                 vt_buf_escaped(&ref));
    vt_assert_bytes(&ref, want);
    e = tell(proxy_tls_port, req, &got);
    cr_assert_eq(e, VT_TLS_END_CLOSE_NOTIFY, "verbproxy: ended with %s after \"%s\" (Redis: close_notify)",
                 vt_tls_end_name(e), vt_buf_escaped(&got));
    vt_assert_bytes(&got, want);
    vt_buf_free(&ref);
    vt_buf_free(&got);
}

Test(tls_close, quit_ends_with_close_notify_after_its_ok)
{
    expect_clean_end_as_redis("AUTH " PASS "\r\nPING\r\nQUIT\r\n", "+OK\r\n+PONG\r\n+OK\r\n");
}

Test(tls_close, a_protocol_error_before_auth_ends_with_close_notify_after_the_error)
{
    expect_clean_end_as_redis("*11\r\n", "-ERR Protocol error: unauthenticated multibulk length\r\n");
}

Test(tls_close, a_protocol_error_after_auth_ends_with_close_notify_after_the_error)
{
    expect_clean_end_as_redis("AUTH " PASS "\r\n*1\r\n$x\r\n",
                              "+OK\r\n-ERR Protocol error: invalid bulk length\r\n");
}

Test(tls_close, timeout_ends_an_idle_client_with_close_notify)
{
    expect_clean_end_as_redis("AUTH " PASS "\r\n", "+OK\r\n");
}

/* The SIGTERM drain closes an idle client at shutdown-timeout: a clean
 * end over TLS too. (Proxy-only: Redis's shutdown just exits.) */
Test(tls_close, the_drain_closes_a_tls_client_with_close_notify)
{
    VT_SKIP_IF_DIRECT();
    char why[256];
    vt_tls_client *t = vt_tls_connect(proxy_tls_port, NULL, NULL, why, sizeof(why));
    cr_assert(t, "TLS connect failed: %s", why);
    cr_assert(vt_tls_send_str(t, "AUTH " PASS "\r\nPING\r\n"));
    vt_buf got = {0};
    cr_assert(vt_tls_read_replies(t, &got, 2, VT_READ_DEADLINE_MS), "got \"%s\"", vt_buf_escaped(&got));
    cr_assert(vt_proxy_signal(proxy, SIGTERM));
    vt_tls_end e = vt_tls_read_to_end(t, &got, VT_READ_DEADLINE_MS);
    cr_assert_eq(e, VT_TLS_END_CLOSE_NOTIFY, "ended with %s after \"%s\"", vt_tls_end_name(e),
                 vt_buf_escaped(&got));
    vt_assert_bytes(&got, "+OK\r\n+PONG\r\n");
    vt_buf_free(&got);
    vt_tls_free(t);
    int status;
    cr_assert(vt_proxy_wait_exit(proxy, 10000, &status), "the drain did not end");
}

/* A client that sends its close_notify right behind a request (it is done
 * writing, still reading) gets its reply, then the proxy's close_notify.
 * (Proxy-only: Redis closes once its read finds the client's end, without
 * close_notify: docs/security.md#tls, "How a TLS connection ends".) */
Test(tls_close, a_client_that_half_closed_gets_its_reply_then_close_notify)
{
    VT_SKIP_IF_DIRECT();
    char why[256];
    vt_tls_client *t = vt_tls_connect(proxy_tls_port, NULL, NULL, why, sizeof(why));
    cr_assert(t, "TLS connect failed: %s", why);
    cr_assert(vt_tls_send_str(t, "AUTH " PASS "\r\nPING\r\n"));
    cr_assert_eq(SSL_shutdown(t->ssl), 0, "our close_notify did not go out");
    vt_buf got = {0};
    vt_tls_end e = vt_tls_read_to_end(t, &got, VT_READ_DEADLINE_MS);
    cr_assert_eq(e, VT_TLS_END_CLOSE_NOTIFY, "ended with %s after \"%s\"", vt_tls_end_name(e),
                 vt_buf_escaped(&got));
    vt_assert_bytes(&got, "+OK\r\n+PONG\r\n");
    vt_buf_free(&got);
    vt_tls_free(t);
}

/* ---- the upstream side ---- */

/* openssl s_server -msg as the upstream, logging every record it reads
 * ("<<<") and writes. Its stdin is a pipe the test holds open: at the end
 * of its stdin s_server would close the connection itself. */
static pid_t s_server_msg(int port, const char *log, int *stdin_w)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(p[0], 0);
        dup2(fd, 1);
        dup2(fd, 2);
        close(p[1]);
        char ps[16];
        snprintf(ps, sizeof(ps), "%d", port);
        execlp("openssl", "openssl", "s_server", "-accept", ps, "-msg", "-cert", vt_cert_path("server.crt"),
               "-key", vt_cert_path("server.key"), (char *)NULL);
        _exit(127);
    }
    close(p[0]);
    *stdin_w = p[1];
    return pid;
}

static void s_server_stop(pid_t pid, int stdin_w)
{
    close(stdin_w);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* A line of the log that starts with `start` and holds `needle`. */
typedef struct log_wait {
    const char *log, *start, *needle;
} log_wait;

static bool log_has(void *arg)
{
    log_wait *w = arg;
    char *s = vt_read_file(w->log);
    bool ok = false;
    for (char *line = s, *nl; line && *line && !ok; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        ok = strncmp(line, w->start, strlen(w->start)) == 0 && strstr(line, w->needle) != NULL;
    }
    free(s);
    return ok;
}

/* A client leaves: its own upstream connection (shared-upstreams 0) is
 * closed by the proxy, which says so with close_notify first. */
Test(tls_close, the_proxy_ends_its_own_upstream_tls_connection_with_close_notify)
{
    VT_SKIP_IF_DIRECT();
    int port = vt_free_port(), stdin_w;
    char log[64];
    snprintf(log, sizeof(log), "/tmp/vt-sserver-close-%d.log", getpid());
    pid_t pid = s_server_msg(port, log, &stdin_w);
    log_wait accepting = {log, "ACCEPT", ""};
    if (!vt_wait_until(log_has, &accepting, 5000)) {
        s_server_stop(pid, stdin_w);
        cr_assert_fail("s_server did not start");
    }
    char up[64];
    snprintf(up, sizeof(up), "127.0.0.1:%d", port);
    const char *args[] = {"--upstream-tls",
                          "yes",
                          "--upstream-tls-ca-cert-file",
                          vt_cert_path("ca.crt"),
                          "--shared-upstreams",
                          "0",
                          NULL};
    vt_proxy *p = vt_proxy_start_upstream(up, &(vt_proxy_opts){.extra_args = args});
    if (!p) {
        s_server_stop(pid, stdin_w);
        cr_assert_fail("verbproxy did not start");
    }
    /* (Its connection opens as the client connects.) */
    int fd = vt_sock_tcp(p->port);
    log_wait done = {log, "<<< ", ", Finished"}; /* (read: the proxy's) */
    bool up_done = fd >= 0 && vt_wait_until(log_has, &done, 5000);
    if (fd >= 0) close(fd);
    log_wait notify = {log, "<<< ", "close_notify"};
    bool seen = up_done && vt_wait_until(log_has, &notify, 5000);
    char *text = vt_read_file(log);
    /* (s_server stopped before any assertion: a failed one ends the test.) */
    vt_proxy_free(p);
    s_server_stop(pid, stdin_w);
    unlink(log);
    cr_assert(up_done, "the proxy's upstream handshake did not finish: %s", text);
    cr_assert(seen, "s_server read no close_notify from the proxy: %s", text);
    free(text);
}

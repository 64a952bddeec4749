/* TLS both ways. An operator points verbproxy at a Redis that speaks only
 * TLS (--port 0 --tls-port), with or without client certificates, and gets
 * the same replies as over plaintext; a certificate that fails a check
 * (unknown CA, expired, wrong name, a refused client certificate) gets
 * every waiting request "-ERR upstream unavailable: <addr>: TLS: <reason>"
 * naming the check, counted in VERBPROXY STATS; upstream-tls-server-name
 * fixes a name mismatch; upstream-tls-verify no works and warns; SNI
 * reaches the server. Clients reach verbproxy over TLS too (tls-port):
 * pipelines, replies of several MB both ways, a client that stops reading
 * while big replies arrive, tls-auth-clients, maxclients, redis-cli --tls.
 * Certificates: tests/support/tls_certs.h. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/checks.h"
#include "tests/support/expect.h"
#include "tests/support/tls_certs.h"
#include "tests/support/tls_client.h"

/* ---- the TLS client (tests/support/tls_client.h) ---- */

/* Connect, handshake and PING (with TLS 1.3 a refused client certificate
 * shows only at the first read); NULL with OpenSSL's reason in why. */
static vt_tls_client *tls_connect(int port, const char *cert, const char *key, char *why, size_t whylen)
{
    vt_tls_client *t = vt_tls_connect(port, cert, key, why, whylen);
    if (!t) return NULL;
    vt_buf pong = {0};
    bool ok = vt_tls_send_str(t, "PING\r\n") && vt_tls_read_replies(t, &pong, 1, VT_READ_DEADLINE_MS) &&
              pong.len == 7 && memcmp(pong.data, "+PONG\r\n", 7) == 0;
    vt_buf_free(&pong);
    if (ok) return t;
    unsigned long e = ERR_peek_last_error();
    snprintf(why, whylen, "%s", e ? ERR_reason_error_string(e) : "closed");
    vt_tls_free(t);
    return NULL;
}

static vt_tls_client *tls_must_connect(int port)
{
    char why[256];
    vt_tls_client *t = tls_connect(port, NULL, NULL, why, sizeof(why));
    cr_assert(t, "TLS connect to %d failed: %s", port, why);
    return t;
}

static void tls_send(vt_tls_client *t, const void *p, size_t n)
{
    cr_assert(vt_tls_send(t, p, n), "TLS write failed");
}

/* Read until `count` whole replies are in b (deadline). */
static void tls_read_replies(vt_tls_client *t, vt_buf *b, size_t count)
{
    cr_assert(vt_tls_read_replies(t, b, count, 20000), "only %zu of %zu replies within 20 s",
              vt_resp_count_replies(b->data, b->len), count);
}

/* ---- helpers ---- */

/* A Redis on TLS only, with the named certificate. */
static vt_redis *tls_redis(const char *cert, const char *auth_clients)
{
    vt_redis *r = vt_redis_start(
        &(vt_redis_opts){.tls = VT_REDIS_TLS_ONLY, .tls_cert = cert, .tls_auth_clients = auth_clients});
    cr_assert(r, "redis-server with TLS did not start");
    return r;
}

/* (At loglevel notice: its counters are in the log when it stops.) */
static vt_proxy *tls_proxy(vt_redis *r, const char *const *extra)
{
    static const char *args[24];
    int n = 0;
    args[n++] = "--loglevel";
    args[n++] = "notice";
    for (int i = 0; extra && extra[i] && n < 23; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    vt_proxy *p = vt_proxy_start(r, &(vt_proxy_opts){.extra_args = args, .connect_timeout_ms = 3000});
    cr_assert(p, "verbproxy did not start");
    return p;
}

/* A counter of VERBPROXY STATS. (While the upstream is unavailable a
 * request may be answered with that error: asked again then.) */
static long long proxy_stat(int port, const char *name)
{
    char key[96], last[512] = "";
    snprintf(key, sizeof(key), "\n%s:", name);
    for (long long end = vt_now_ms() + 5000; vt_now_ms() < end; usleep(20000)) {
        redisContext *c = vt_must_connect(port);
        redisReply *r = vt_cmd(c, "VERBPROXY STATS");
        vt_assert_reply(r, c);
        const char *at = r->type == REDIS_REPLY_STRING ? strstr(r->str, key) : NULL;
        long long v = at ? atoll(at + strlen(key)) : -1;
        snprintf(last, sizeof(last), "%s", VT_DESCRIBE(r));
        freeReplyObject(r);
        redisFree(c);
        if (v >= 0) return v;
    }
    cr_assert_fail("no %s in VERBPROXY STATS: %s", name, last);
    return -1;
}

/* A GET through the proxy is refused: the reply names the TLS check.
 * (Also a client certificate Redis refuses, which TLS 1.3 tells after the
 * client's side of the handshake: when the proxy's first request crossed
 * the alert and the server's close reset the connection, the proxy still
 * reads the alert before it answers.) */
static void expect_tls_refusal(vt_proxy *p, const char *reason)
{
    redisContext *c = vt_must_connect(p->port);
    redisReply *r = vt_cmd(c, "GET k");
    char want[512];
    snprintf(want, sizeof(want), "ERR upstream unavailable: %s: TLS: %s", p->upstream, reason);
    cr_assert(r && r->type == REDIS_REPLY_ERROR && strstr(r->str, want) == r->str, "expected -%s..., got %s",
              want, VT_DESCRIBE(r));
    freeReplyObject(r);
    redisFree(c);
    /* Counted: VERBPROXY STATS itself would wait for the upstream, so
     * the counters it logs when it stops. */
    vt_proxy_stop(p);
    char *log = vt_proxy_log(p);
    const char *at = strstr(log, "tls_handshake_failures=");
    cr_assert(at && atoll(at + strlen("tls_handshake_failures=")) >= 1,
              "the failed handshake is not counted: %s", log);
    free(log);
}

static void expect_works(vt_proxy *p)
{
    redisContext *c = vt_must_connect(p->port);
    redisReply *r = vt_cmd(c, "SET tls:k v");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(c, "GET tls:k");
    vt_assert_str(r, "v");
    freeReplyObject(r);
    redisFree(c);
}

static void setup(void)
{
    vt_ignore_sigpipe();
    cr_assert(vt_certs_get(), "cannot make the test certificates");
}

TestSuite(tls, .init = setup, .timeout = VT_TEST_TIMEOUT_S);

/* ---- upstream TLS ---- */

Test(tls, a_tls_only_redis_serves_verbs_pipelines_and_transactions)
{
    VT_SKIP_IF_DIRECT();
    vt_redis *r = tls_redis("server", "no");
    vt_proxy *p = tls_proxy(r, NULL);
    cr_assert(p->upstream_tls);
    redisContext *c = vt_must_connect(p->port);
    for (int i = 0; i < 1000; i++)
        redisAppendCommand(c, "INCR tls:n");
    for (int i = 0; i < 1000; i++) {
        redisReply *rep = vt_get_reply(c);
        vt_assert_int(rep, i + 1);
        freeReplyObject(rep);
    }
    EXPECT(c, "+OK", "MULTI");
    redisReply *q = vt_cmd(c, "INCR tls:n");
    vt_assert_status(q, "QUEUED");
    freeReplyObject(q);
    q = vt_cmd(c, "EXEC");
    vt_assert_array(q, 1);
    cr_assert_eq(q->element[0]->integer, 1001);
    freeReplyObject(q);
    EXPECT(c, ":0", "LOCKRELEASE tls:lock nobody"); /* a virtual verb: EVALSHA over TLS */
    redisFree(c);
    vt_proxy_free(p);
    vt_redis_free(r);
}

Test(tls, a_client_certificate_is_required_by_redis_tls_auth_clients_yes)
{
    VT_SKIP_IF_DIRECT();
    vt_redis *r = tls_redis("server", "yes");
    /* without one: Redis's alert is the reason */
    vt_proxy *p = tls_proxy(r, NULL);
    expect_tls_refusal(p, "tlsv13 alert certificate required");
    vt_proxy_free(p);
    /* one from another CA */
    const char *o[] = {"--upstream-tls-cert-file", vt_cert_path("other-client.crt"),
                       "--upstream-tls-key-file", vt_cert_path("other-client.key"), NULL};
    p = tls_proxy(r, o);
    expect_tls_refusal(p, "tlsv1 alert unknown ca");
    vt_proxy_free(p);
    /* the right one */
    const char *good[] = {"--upstream-tls-cert-file", vt_cert_path("client.crt"), "--upstream-tls-key-file",
                          vt_cert_path("client.key"), NULL};
    p = tls_proxy(r, good);
    expect_works(p);
    vt_proxy_free(p);
    vt_redis_free(r);
}

Test(tls, an_unknown_ca_an_expired_certificate_and_a_wrong_name_are_refused_with_the_reason)
{
    VT_SKIP_IF_DIRECT();
    struct {
        const char *cert, *reason;
    } cases[] = {
        {"unknown", "unable to get local issuer certificate"},
        {"expired", "certificate has expired"},
        {"wrong-name", "IP address mismatch"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        vt_redis *r = tls_redis(cases[i].cert, "no");
        vt_proxy *p = tls_proxy(r, NULL);
        expect_tls_refusal(p, cases[i].reason);
        vt_proxy_free(p);
        vt_redis_free(r);
    }
    /* a host name checked against DNS names */
    vt_redis *r = tls_redis("wrong-name", "no");
    char up[64];
    snprintf(up, sizeof(up), "localhost:%d", r->tls_port);
    const char *byname[] = {"--upstream", up, NULL};
    vt_proxy *p = tls_proxy(r, byname);
    snprintf(p->upstream, sizeof(p->upstream), "%s", up);
    expect_tls_refusal(p, "hostname mismatch");
    vt_proxy_free(p);
    vt_redis_free(r);
}

Test(tls, server_name_fixes_a_name_mismatch_and_verify_no_works_with_a_warning)
{
    VT_SKIP_IF_DIRECT();
    vt_redis *r = tls_redis("named", "no"); /* DNS:redis.example only, like Memorystore's IP-less name */
    vt_proxy *p = tls_proxy(r, NULL);
    expect_tls_refusal(p, "IP address mismatch");
    vt_proxy_free(p);
    const char *sn[] = {"--upstream-tls-server-name", "redis.example", NULL};
    p = tls_proxy(r, sn);
    expect_works(p);
    vt_proxy_free(p);
    vt_redis_free(r);

    r = tls_redis("unknown", "no");
    const char *nv[] = {"--upstream-tls-verify", "no", NULL};
    p = tls_proxy(r, nv);
    expect_works(p);
    char *log = vt_proxy_log(p);
    cr_assert(strstr(log, "upstream-tls-verify no") != NULL, "no warning in the log: %s", log);
    free(log);
    vt_proxy_free(p);
    vt_redis_free(r);
}

/* openssl s_server as the upstream: it prints the SNI it received. */
static pid_t s_server(int port, const char *log)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        char p[16];
        snprintf(p, sizeof(p), "%d", port);
        execlp("openssl", "openssl", "s_server", "-accept", p, "-naccept", "1", "-cert",
               vt_cert_path("server.crt"), "-key", vt_cert_path("server.key"), "-cert2",
               vt_cert_path("named.crt"), "-key2", vt_cert_path("named.key"), "-servername", "redis.example",
               (char *)NULL);
        _exit(127);
    }
    return pid;
}

static bool file_has(const char *path, const char *needle)
{
    char *s = vt_read_file(path);
    bool ok = strstr(s, needle) != NULL;
    free(s);
    return ok;
}

typedef struct sni_wait {
    const char *log, *needle;
} sni_wait;

static bool sni_seen(void *arg)
{
    sni_wait *w = arg;
    return file_has(w->log, w->needle);
}

/* The SNI the proxy sends to an `openssl s_server` upstream at host:port,
 * given upstream-tls-server-name `server_name` (NULL: none): `want` (NULL:
 * none at all) as s_server reports it, once the handshake is over
 * (s_server prints the cipher; the proxy verified the certificate, which
 * names localhost, 127.0.0.1 and, the second one s_server switches to on
 * that SNI, redis.example). */
/* The proxy (--upstream-tls yes and `tls_args`) in front of an `openssl
 * s_server` upstream at host:port, once its handshake with it is over
 * (s_server prints the cipher; the proxy verified the certificate, which
 * names localhost, 127.0.0.1 and, the second one s_server switches to on
 * that SNI, redis.example): what s_server printed (the caller frees it). */
static char *s_server_handshake_log(const char *host, const char *const *tls_args)
{
    int port = vt_free_port();
    char log[64];
    snprintf(log, sizeof(log), "/tmp/vt-sserver-%d.log", getpid());
    pid_t pid = s_server(port, log);
    sni_wait accepting = {log, "ACCEPT"};
    cr_assert(vt_wait_until(sni_seen, &accepting, 5000), "s_server did not start");
    char up[64];
    snprintf(up, sizeof(up), "%s:%d", host, port);
    const char *args[16] = {"--upstream-tls", "yes"};
    for (int i = 0; tls_args[i] && i < 13; i++)
        args[2 + i] = tls_args[i];
    vt_proxy *p = vt_proxy_start_upstream(up, &(vt_proxy_opts){.extra_args = args});
    cr_assert(p);
    int fd = vt_must_sock(p->port);
    vt_sock_send_str(fd, "PING\r\n");
    sni_wait w = {log, "CIPHER is"};
    bool through = vt_wait_until(sni_seen, &w, 5000);
    char *text = vt_read_file(log);
    close(fd);
    vt_proxy_free(p);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    unlink(log);
    cr_assert(through, "no TLS handshake with s_server: %s", text);
    return text;
}

/* The SNI the proxy sends, given upstream-tls-server-name `server_name`
 * (NULL: none): `want` (NULL: none at all) as s_server reports it. */
static void expect_sni(const char *host, const char *server_name, const char *want)
{
    const char *args[] = {"--upstream-tls-ca-cert-file", vt_cert_path("ca.crt"),
                          server_name ? "--upstream-tls-server-name" : NULL, server_name, NULL};
    char *text = s_server_handshake_log(host, args);
    char line[96];
    snprintf(line, sizeof(line), "Hostname in TLS extension: \"%s\"", want ? want : "");
    if (want)
        cr_assert(strstr(text, line), "s_server did not see the SNI %s: %s", want, text);
    else
        cr_assert(!strstr(text, "Hostname in TLS extension"), "an SNI was sent for %s: %s", host, text);
    free(text);
}

/* upstream-tls-ca-cert-dir (a hashed directory, as `openssl rehash` makes
 * it) verifies as the file does; upstream-tls-ciphersuites (TLS 1.3) and,
 * with upstream-tls-protocols TLSv1.2, upstream-tls-ciphers choose what
 * s_server sees negotiated. */
Test(tls, upstream_ca_dir_ciphersuites_ciphers_and_protocols)
{
    VT_SKIP_IF_DIRECT();
    char cadir[64], cmd[512];
    snprintf(cadir, sizeof(cadir), "/tmp/vt-cadir-%d", getpid());
    snprintf(cmd, sizeof(cmd), "rm -rf %s && mkdir %s && cp %s %s/ && openssl rehash %s", cadir, cadir,
             vt_cert_path("ca.crt"), cadir, cadir);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    const char *v13[] = {"--upstream-tls-ca-cert-dir", cadir, "--upstream-tls-ciphersuites",
                         "TLS_CHACHA20_POLY1305_SHA256", NULL};
    char *text = s_server_handshake_log("127.0.0.1", v13);
    cr_assert(strstr(text, "CIPHER is TLS_CHACHA20_POLY1305_SHA256"), "%s", text);
    free(text);
    const char *v12[] = {"--upstream-tls-ca-cert-dir",
                         cadir,
                         "--upstream-tls-protocols",
                         "TLSv1.2",
                         "--upstream-tls-ciphers",
                         "ECDHE-ECDSA-AES128-GCM-SHA256",
                         NULL};
    text = s_server_handshake_log("127.0.0.1", v12);
    cr_assert(strstr(text, "CIPHER is ECDHE-ECDSA-AES128-GCM-SHA256"), "%s", text);
    free(text);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", cadir);
    cr_assert_eq(system(cmd), 0);
}

Test(tls, the_server_name_is_sent_as_sni)
{
    VT_SKIP_IF_DIRECT();
    expect_sni("127.0.0.1", "redis.example", "redis.example");
}

/* Without upstream-tls-server-name the SNI is the upstream's host name,
 * and an IP literal sends none (RFC 6066 allows no address there). */
Test(tls, the_upstream_host_name_is_the_default_sni)
{
    VT_SKIP_IF_DIRECT();
    expect_sni("localhost", NULL, "localhost");
}

Test(tls, an_upstream_ip_address_sends_no_sni)
{
    VT_SKIP_IF_DIRECT();
    expect_sni("127.0.0.1", NULL, NULL);
}

Test(tls, failing_handshakes_cost_the_bystanders_nothing)
{
    VT_SKIP_IF_DIRECT();
    vt_redis *r = tls_redis("server", "no");
    int tls_port = vt_free_port();
    char tp[16];
    snprintf(tp, sizeof(tp), "%d", tls_port);
    const char *args[] = {"--tls-port",
                          tp,
                          "--tls-cert-file",
                          vt_cert_path("server.crt"),
                          "--tls-key-file",
                          vt_cert_path("server.key"),
                          "--tls-ca-cert-file",
                          vt_cert_path("ca.crt"),
                          NULL};
    vt_proxy *p = tls_proxy(r, args);
    vt_bystanders *b = vt_must_start_bystanders(p->port, 3, 30);
    for (int i = 0; i < 20; i++) {
        /* plaintext on the TLS port, a client without a certificate
         * (tls-auth-clients yes, the default), one from another CA */
        int fd = vt_must_sock(tls_port);
        vt_sock_send_str(fd, "PING\r\n");
        vt_buf got = {0};
        cr_assert(vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS), "plaintext on tls-port was not closed");
        cr_assert(!vt_buf_contains(&got, "PONG"));
        vt_buf_free(&got);
        close(fd);
        char why[256];
        cr_assert_null(tls_connect(tls_port, NULL, NULL, why, sizeof(why)), "served without a certificate");
        cr_assert_null(tls_connect(tls_port, "other-client.crt", "other-client.key", why, sizeof(why)),
                       "served with another CA's certificate");
    }
    char why[256];
    vt_tls_client *t = tls_connect(tls_port, "client.crt", "client.key", why, sizeof(why));
    cr_assert(t, "a client with a good certificate was refused: %s", why);
    vt_tls_free(t);
    cr_assert_geq(proxy_stat(p->port, "tls_client_handshake_failures"), 40);
    vt_assert_bystanders_ok(b);
    vt_proxy_free(p);
    vt_redis_free(r);
}

/* ---- clients over TLS ---- */

typedef struct tls_env {
    vt_redis *redis;
    vt_proxy *proxy;
    int tls_port;
} tls_env;

/* (requirepass: the proxy's own password, or NULL for none.) */
static void tls_env_start(tls_env *e, const char *auth_clients, const char *maxclients,
                          const char *requirepass)
{
    e->redis = tls_redis("server", "no");
    e->tls_port = vt_free_port();
    static char tp[16];
    snprintf(tp, sizeof(tp), "%d", e->tls_port);
    const char *args[] = {"--tls-port",
                          tp,
                          "--tls-cert-file",
                          vt_cert_path("server.crt"),
                          "--tls-key-file",
                          vt_cert_path("server.key"),
                          "--tls-ca-cert-file",
                          vt_cert_path("ca.crt"),
                          "--tls-auth-clients",
                          auth_clients,
                          "--maxclients",
                          maxclients,
                          requirepass ? "--requirepass" : NULL,
                          requirepass,
                          NULL};
    e->proxy = tls_proxy(e->redis, args);
}

static void tls_env_stop(tls_env *e)
{
    vt_proxy_free(e->proxy);
    vt_redis_free(e->redis);
}

Test(tls, big_replies_and_pipelines_both_ways_over_tls)
{
    VT_SKIP_IF_DIRECT();
    tls_env e;
    tls_env_start(&e, "no", "100", NULL);
    vt_tls_client *t = tls_must_connect(e.tls_port);
    /* a 6 MB value up and down */
    size_t big = 6u << 20;
    char *v = malloc(big);
    for (size_t i = 0; i < big; i++)
        v[i] = (char)('a' + i % 23);
    vt_buf req = {0};
    const char *argv[] = {"SET", "tls:big", v};
    size_t lens[] = {3, 7, big};
    vt_buf_cmd_argv(&req, 3, argv, lens);
    vt_buf_cmd(&req, "GET", "tls:big", NULL);
    tls_send(t, req.data, req.len);
    vt_buf got = {0};
    tls_read_replies(t, &got, 2);
    cr_assert(got.len == 5 + 1 + 9 + big + 2, "got %zu bytes", got.len);
    cr_assert(memcmp(got.data + 5 + 10, v, big) == 0, "the big value came back changed"); /* +OK, $6291456 */
    /* 20,000 pipelined commands in one write */
    vt_buf_reset(&req);
    vt_buf_reset(&got);
    for (int i = 0; i < 20000; i++)
        vt_buf_cmd(&req, "INCR", "tls:n", NULL);
    tls_send(t, req.data, req.len);
    tls_read_replies(t, &got, 20000);
    cr_assert(vt_buf_contains(&got, ":20000\r\n"));
    cr_assert_eq(vt_resp_count_replies(got.data, got.len), 20000);
    vt_buf_free(&req);
    vt_buf_free(&got);
    free(v);
    vt_tls_free(t);
    tls_env_stop(&e);
}

Test(tls, a_tls_client_that_stops_reading_gets_every_big_reply_when_it_resumes)
{
    VT_SKIP_IF_DIRECT();
    tls_env e;
    tls_env_start(&e, "no", "100", NULL);
    redisContext *c = vt_must_connect(e.proxy->port);
    size_t big = 4u << 20;
    char *v = malloc(big);
    memset(v, 'x', big);
    redisReply *r = redisCommand(c, "SET tls:big %b", v, big);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    redisFree(c);
    vt_tls_client *t = tls_must_connect(e.tls_port);
    vt_buf req = {0};
    for (int i = 0; i < 16; i++) /* 64 MB of replies, far over buffer-limit */
        vt_buf_cmd(&req, "GET", "tls:big", NULL);
    vt_buf_cmd(&req, "PING", NULL);
    tls_send(t, req.data, req.len);
    /* not reading: the proxy must hold back, not buffer it all or drop it */
    usleep(1500 * 1000);
    vt_buf got = {0};
    tls_read_replies(t, &got, 17);
    cr_assert_eq(got.len, 16 * (big + 2 + 10) + 7);
    cr_assert(memcmp(got.data + got.len - 7, "+PONG\r\n", 7) == 0);
    vt_buf_free(&req);
    vt_buf_free(&got);
    free(v);
    vt_tls_free(t);
    tls_env_stop(&e);
}

Test(tls, tls_auth_clients_optional_and_yes)
{
    VT_SKIP_IF_DIRECT();
    char why[256];
    tls_env e;
    tls_env_start(&e, "optional", "100", NULL);
    vt_tls_client *t = tls_connect(e.tls_port, NULL, NULL, why, sizeof(why));
    cr_assert(t, "optional: refused without a certificate: %s", why);
    vt_tls_free(t);
    cr_assert_null(tls_connect(e.tls_port, "other-client.crt", "other-client.key", why, sizeof(why)),
                   "optional: served a certificate of another CA");
    tls_env_stop(&e);
    tls_env_start(&e, "yes", "100", NULL);
    cr_assert_null(tls_connect(e.tls_port, NULL, NULL, why, sizeof(why)),
                   "yes: served without a certificate");
    t = tls_connect(e.tls_port, "client.crt", "client.key", why, sizeof(why));
    cr_assert(t, "yes: refused a good certificate: %s", why);
    vt_tls_free(t);
    tls_env_stop(&e);
}

Test(tls, past_maxclients_a_tls_client_is_closed_without_a_word)
{
    VT_SKIP_IF_DIRECT();
    tls_env e;
    tls_env_start(&e, "no", "1", NULL);
    /* (The harness's own probe of the port may still hold the one place.) */
    char why[256];
    vt_tls_client *first = NULL;
    for (long long end = vt_now_ms() + 3000; !first && vt_now_ms() < end; usleep(20000))
        first = tls_connect(e.tls_port, NULL, NULL, why, sizeof(why));
    cr_assert(first, "the first TLS client was refused: %s", why);
    int fd = vt_must_sock(e.tls_port);
    vt_buf got = {0};
    cr_assert(vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS),
              "the TLS client past maxclients was not closed");
    cr_assert_eq(got.len, 0, "it was sent bytes: \"%s\"", vt_buf_escaped(&got));
    close(fd);
    /* plaintext: Redis's error, as before */
    vt_buf_free(&got);
    got = (vt_buf){0};
    fd = vt_must_sock(e.proxy->port);
    vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS);
    vt_assert_bytes(&got, "-ERR max number of clients reached\r\n");
    close(fd);
    vt_buf_free(&got);
    vt_tls_free(first);
    tls_env_stop(&e);
}

Test(tls, redis_cli_tls_through_the_proxy)
{
    VT_SKIP_IF_DIRECT();
    tls_env e;
    tls_env_start(&e, "no", "100", NULL);
    char cmd[512];
    snprintf(cmd, sizeof(cmd),
             "redis-cli --tls --cacert %s -p %d SET tls:cli hello && redis-cli --tls --cacert %s -p %d GET "
             "tls:cli",
             vt_cert_path("ca.crt"), e.tls_port, vt_cert_path("ca.crt"), e.tls_port);
    FILE *f = popen(cmd, "r");
    char out[256] = {0};
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    cr_assert_eq(pclose(f), 0, "redis-cli failed: %s", out);
    cr_assert_str_eq(out, "OK\nhello\n");
    tls_env_stop(&e);
}

/* ---- start-up ---- */

static int run(const char *args, char *out, size_t outlen)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "timeout 10 %s %s 2>&1", VP_BINARY, args);
    FILE *f = popen(cmd, "r");
    size_t n = fread(out, 1, outlen - 1, f);
    out[n] = '\0';
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(tls, bad_tls_settings_stop_start_up_with_file_line_and_reason)
{
    char path[] = "/tmp/vt-tls-conf-XXXXXX";
    int fd = mkstemp(path);
    const char *text = "port 0\nupstream-tls yes\nupstream-tls-ca-cert-file /nonexistent/ca.crt\n";
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    char out[4096], args[512], want[256];
    snprintf(args, sizeof(args), "--config %s", path);
    cr_assert_eq(run(args, out, sizeof(out)), 1, "%s", out);
    snprintf(want, sizeof(want), "%s:3: 'upstream-tls-ca-cert-file': cannot read /nonexistent/ca.crt", path);
    cr_assert(strstr(out, want), "'%s' not in '%s'", want, out);
    unlink(path);
    cr_assert_eq(run("--upstream-tls-protocols TLSv9", out, sizeof(out)), 1, "%s", out);
    cr_assert(strstr(out, "'upstream-tls-protocols' must list"), "%s", out);
    /* a key that is not the certificate's: found at start, not at the first connect */
    snprintf(args, sizeof(args),
             "--port 0 --tls-port %d --tls-cert-file %s --tls-key-file %s --tls-auth-clients no",
             vt_free_port(), vt_cert_path("server.crt"), vt_cert_path("client.key"));
    cr_assert_eq(run(args, out, sizeof(out)), 1, "%s", out);
    cr_assert(strstr(out, "tls-key-file"), "%s", out);
    snprintf(args, sizeof(args), "--port 0 --tls-port %d --tls-cert-file %s --tls-key-file %s",
             vt_free_port(), vt_cert_path("server.crt"), vt_cert_path("server.key"));
    cr_assert_eq(run(args, out, sizeof(out)), 1, "%s", out);
    cr_assert(strstr(out, "Either tls-ca-cert-file or tls-ca-cert-dir must be specified"), "%s", out);
}

#define KEY_PASS "kp-s3cret-Pw"

/* tls-key-file-pass opens an encrypted key (a wrong one stops start-up),
 * and is wiped from the command line; tls-protocols holds on the client
 * side: a TLS 1.2-only client is refused by a proxy limited to TLS 1.3. */
Test(tls, an_encrypted_key_with_tls_key_file_pass_and_tls_protocols)
{
    VT_SKIP_IF_DIRECT();
    char key[96], cmd[512];
    snprintf(key, sizeof(key), "/tmp/vt-enc-key-%d.pem", getpid());
    snprintf(cmd, sizeof(cmd), "openssl pkey -in %s -aes256 -passout pass:%s -out %s 2>/dev/null",
             vt_cert_path("server.key"), KEY_PASS, key);
    cr_assert_eq(system(cmd), 0, "cannot encrypt the key: %s", cmd);

    char out[4096], args[512];
    snprintf(args, sizeof(args),
             "--port 0 --tls-port %d --tls-cert-file %s --tls-key-file %s --tls-key-file-pass wrong-one "
             "--tls-auth-clients no",
             vt_free_port(), vt_cert_path("server.crt"), key);
    cr_assert_eq(run(args, out, sizeof(out)), 1, "started with a wrong key password: %s", out);
    cr_assert(strstr(out, "tls-key-file"), "%s", out);

    vt_redis *r = tls_redis("server", "no");
    int tls_port = vt_free_port();
    char tp[16];
    snprintf(tp, sizeof(tp), "%d", tls_port);
    const char *pargs[] = {"--tls-port",
                           tp,
                           "--tls-cert-file",
                           vt_cert_path("server.crt"),
                           "--tls-key-file",
                           key,
                           "--tls-key-file-pass",
                           KEY_PASS,
                           "--tls-auth-clients",
                           "no",
                           "--tls-protocols",
                           "TLSv1.3",
                           NULL};
    vt_proxy *p = tls_proxy(r, pargs);
    vt_tls_client *t = tls_must_connect(tls_port); /* (TLS 1.3 by default) */
    vt_tls_free(t);

    /* a client that speaks TLS 1.2 only */
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
    int fd = vt_must_sock(tls_port);
    SSL *ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    cr_assert_neq(SSL_connect(ssl), 1, "a TLS 1.2 client was served by a TLSv1.3-only proxy");
    SSL_free(ssl);
    close(fd);
    SSL_CTX_free(ctx);

    cr_assert_eq(vt_proc_file_holds(p->pid, "cmdline", KEY_PASS), 0,
                 "the key's password is in ps (or unreadable)");
    vt_proxy_free(p);
    vt_redis_free(r);
    unlink(key);
}

/* Issue 22, finding 1, over TLS: a client on tls-port that has not
 * authenticated to the proxy's own password sends a request over 64 KiB
 * (within Redis's pre-auth limits) in two pieces, the first read by the
 * proxy before the second is sent. It is judged whole at the gate and
 * answered -NOAUTH; the script never runs. Authenticated bystanders
 * (plaintext) are served throughout. */
Test(tls, a_large_request_in_pieces_before_auth_is_refused_over_tls)
{
    VT_SKIP_IF_DIRECT();
    tls_env e;
    tls_env_start(&e, "no", "100", "tls-pass");
    vt_bystanders *b = vt_bystanders_start_auth(e.proxy->port, 3, "tls-pass");
    cr_assert(b && vt_bystanders_wait(b, 30, VT_READ_DEADLINE_MS), "the bystanders did not get going");

    vt_buf req = {0}, got = {0};
    vt_buf_big_preauth_eval(&req, "return redis.call('incr','tls:ran')");
    char why[256];
    vt_tls_client *t = vt_tls_connect(e.tls_port, NULL, NULL, why, sizeof(why));
    cr_assert(t, "TLS connect failed: %s", why);
    tls_send(t, req.data, 70000);
    cr_assert(vt_sock_wait_taken(t->fd, VT_READ_DEADLINE_MS), "the proxy did not read the first piece");
    tls_send(t, req.data + 70000, req.len - 70000);
    tls_read_replies(t, &got, 1);
    cr_assert_str_eq(vt_buf_escaped(&got), "-NOAUTH Authentication required.\\r\\n");
    vt_buf_reset(&got);
    tls_send(t, "AUTH tls-pass\r\nEXISTS tls:ran\r\n", 31);
    tls_read_replies(t, &got, 2);
    cr_assert_str_eq(vt_buf_escaped(&got), "+OK\\r\\n:0\\r\\n", "the script ran");
    vt_tls_free(t);
    cr_assert(vt_bystanders_wait(b, 30, VT_READ_DEADLINE_MS), "the bystanders stopped being served");
    vt_assert_bystanders_ok(b);
    vt_buf_free(&req);
    vt_buf_free(&got);
    tls_env_stop(&e);
}

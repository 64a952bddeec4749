/* upstream-mode sentinel: the proxy in front of a primary, a replica and 3
 * sentinels (tests/support/sentinel.h), all real processes.
 *  - it finds the primary through the sentinels (given by name: localhost)
 *    and serves GET/SET and a verb; VERBPROXY INFO names the primary;
 *  - SENTINEL FAILOVER under checked traffic (tests/support/traffic.h, with
 *    verbs): every session gets right replies in order, then at most a
 *    clean close or "upstream unavailable" errors (a connection opened in
 *    the moment the old primary is demoted: ROLE says replica); after the
 *    switch, writes land on the new primary and a verb works there (its
 *    script loaded before it: no NOSCRIPT reaches the client);
 *    exactly one switch is counted for the failover;
 *  - SIGKILL of the primary: after the sentinels promote the replica, the
 *    proxy serves again within a deadline (one switch);
 *  - a lagging sentinel (it names the dead old primary with config-epoch
 *    0) left as the only one to ask after a failover: the proxy stays on
 *    the new primary (no switch back) and says why in its log;
 *  - a wrong sentinel-pass: /readyz 503 with the sentinel's WRONGPASS, and
 *    requests answered "upstream unavailable" with the reason.
 * -READONLY is not allowed for the traffic: sentinel demotes a primary
 * with SLAVEOF and CLIENT KILL in one MULTI, so no connection of the proxy
 * survives into the replica role, and new ones are checked with ROLE.
 * No TLS variant (CMakeLists.txt: the sentinels would have to announce TLS
 * ports, and the proxy's sentinel connections are plaintext). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/support/bystander.h"
#include "tests/support/checks.h"
#include "tests/support/client.h"
#include "tests/support/http.h"
#include "tests/support/sentinel.h"
#include "tests/support/servers.h"
#include "tests/support/traffic.h"

static vt_sentinel_set *set;
static vt_redis *lagging; /* a 4th sentinel (vt_sentinel_new_lagging), or NULL */
static vt_proxy *proxy;
static int metrics_port;
static bool proxy_verbose;         /* start the proxy with --loglevel verbose */
static const char *upstream_pass;  /* start the proxy with --upstream-pass this, or NULL */
static vt_redis *primary, *second; /* real nodes named by a fake sentinel, or NULL */
typedef struct fake_peer fake_peer;
static fake_peer *fake_sentinel, *fake_node; /* hostile peers (below), or NULL */
static void fake_free(fake_peer *f);
static char hang_release[64]; /* the hanging resolver's release file, or "" */

static void teardown(void)
{
    if (hang_release[0]) { /* (the proxy's exit joins the pool's threads) */
        FILE *f = fopen(hang_release, "w");
        if (f) fclose(f);
    }
    vt_proxy_free(proxy);
    if (hang_release[0]) unlink(hang_release);
    hang_release[0] = '\0';
    fake_free(fake_sentinel);
    fake_free(fake_node);
    vt_redis_free(primary);
    vt_redis_free(second);
    vt_redis_free(lagging);
    vt_sentinel_free(set);
    proxy = NULL;
    fake_sentinel = fake_node = NULL;
    primary = second = NULL;
    proxy_verbose = false;
    upstream_pass = NULL;
    lagging = NULL;
    set = NULL;
}

TestSuite(sentinel, .timeout = 120, .fini = teardown);

static void start_set(const char *sentinel_pass)
{
    VT_SKIP_IF_DIRECT();
    set = vt_sentinel_start(sentinel_pass);
    cr_assert(set, "the primary, the replica and the sentinels did not start");
}

/* The proxy in front of the set: its 3 sentinels as host:port (host
 * "127.0.0.1" or a name), or the `sentinels` given (NULL-terminated
 * "--sentinel", "ADDR" pairs' ADDRs) when not NULL. */
static void start_proxy(const char *proxy_pass, const char *host, const char *const *sentinels)
{
    const char *args[32];
    char ports[VT_SENTINELS][32], mport[16];
    int n = 0;
    if (sentinels) {
        args[n++] = "--upstream-mode";
        args[n++] = "sentinel";
        for (int i = 0; sentinels[i]; i++) {
            args[n++] = "--sentinel";
            args[n++] = sentinels[i];
        }
        args[n++] = "--sentinel-master";
        args[n++] = VT_SENTINEL_MASTER;
    } else {
        vt_sentinel_proxy_args(set, host, args, ports);
        while (args[n])
            n++;
    }
    metrics_port = vt_free_port();
    snprintf(mport, sizeof(mport), "%d", metrics_port);
    args[n++] = "--metrics-port";
    args[n++] = mport;
    if (proxy_pass) {
        args[n++] = "--sentinel-pass";
        args[n++] = proxy_pass;
    }
    if (upstream_pass) {
        args[n++] = "--upstream-pass";
        args[n++] = upstream_pass;
    }
    if (proxy_verbose) {
        args[n++] = "--loglevel"; /* (after the harness's own: this one wins) */
        args[n++] = "verbose";
    }
    args[n] = NULL;
    vt_proxy_opts opts = {.extra_args = args, .connect_timeout_ms = 1000};
    /* (--upstream is ignored in sentinel mode: a port nobody listens on
     * proves it.) */
    char nowhere[32];
    snprintf(nowhere, sizeof(nowhere), "127.0.0.1:%d", vt_free_port());
    proxy = vt_proxy_start_upstream(nowhere, &opts);
    cr_assert(proxy, "verbproxy did not start");
}

static void start(const char *sentinel_pass, const char *proxy_pass)
{
    start_set(sentinel_pass);
    start_proxy(proxy_pass, "127.0.0.1", NULL);
}

typedef struct ready_want {
    int status;
    const char *body_has;
} ready_want;

static bool readyz_is(void *arg)
{
    ready_want *w = arg;
    vt_http_resp r = vt_http_get(metrics_port, "/readyz");
    bool ok = r.status == w->status && (!w->body_has || (r.body && strstr(r.body, w->body_has)));
    vt_http_free(&r);
    return ok;
}

static void assert_ready(void)
{
    ready_want w = {200, NULL};
    cr_assert(vt_wait_until(readyz_is, &w, 10000), "/readyz did not become 200");
}

/* SET, GET and a verb through the proxy; the key is then on `primary_port`. */
static void assert_serves(const char *key, int primary_port)
{
    redisContext *c = vt_must_connect(proxy->port);
    redisReply *r = vt_cmd(c, "SET %s v-%s", key, key);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(c, "GET %s", key);
    char want[128];
    snprintf(want, sizeof(want), "v-%s", key);
    vt_assert_str(r, want);
    freeReplyObject(r);
    /* A verb: its script is loaded on this node before it runs. */
    r = vt_cmd(c, "ZADD q:%s 1 job", key);
    vt_assert_int(r, 1);
    freeReplyObject(r);
    r = vt_cmd(c, "QPOP q:%s", key);
    cr_assert(r && r->type != REDIS_REPLY_ERROR, "QPOP: %s", VT_DESCRIBE(r));
    cr_assert(strstr(VT_DESCRIBE(r), "job"), "QPOP: %s", VT_DESCRIBE(r));
    freeReplyObject(r);
    redisFree(c);
    redisContext *d = vt_must_connect(primary_port);
    r = vt_cmd(d, "GET %s", key);
    vt_assert_str(r, want);
    freeReplyObject(r);
    redisFree(d);
}

static char *proxy_info(void)
{
    redisContext *c = vt_must_connect(proxy->port);
    redisReply *r = vt_cmd(c, "VERBPROXY INFO");
    cr_assert(r && r->type == REDIS_REPLY_STRING, "VERBPROXY INFO: %s", VT_DESCRIBE(r));
    char *s = strdup(r->str);
    freeReplyObject(r);
    redisFree(c);
    return s;
}

/* sentinel_switches from VERBPROXY INFO (-1 if it cannot be read). */
static long long switches_now(void)
{
    redisContext *c = vt_connect(proxy->port);
    if (!c) return -1;
    redisReply *r = vt_cmd(c, "VERBPROXY INFO");
    const char *at = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "sentinel_switches:") : NULL;
    long long n = at ? atoll(at + strlen("sentinel_switches:")) : -1;
    if (r) freeReplyObject(r);
    redisFree(c);
    return n;
}

typedef struct upstream_want {
    int port;
} upstream_want;

/* VERBPROXY INFO says upstream:127.0.0.1:<port>. */
static bool proxy_is_on(void *arg)
{
    upstream_want *w = arg;
    redisContext *c = vt_connect(proxy->port);
    if (!c) return false;
    redisReply *r = vt_cmd(c, "VERBPROXY INFO");
    char want[64];
    snprintf(want, sizeof(want), "upstream:127.0.0.1:%d\r\n", w->port);
    bool ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, want);
    if (r) freeReplyObject(r);
    redisFree(c);
    return ok;
}

/* (The sentinels are given by name: resolved without blocking the loop,
 * proxy/route/sentinel.c; this shows that names work, not that nothing blocks.) */
Test(sentinel, finds_the_primary_and_serves)
{
    start_set("sentinel-secret");
    start_proxy("sentinel-secret", "localhost", NULL);
    assert_ready();
    int primary = set->nodes[0]->port;
    assert_serves("first", primary);
    char *info = proxy_info();
    char want[64];
    snprintf(want, sizeof(want), "upstream:127.0.0.1:%d", primary);
    bool names_it = strstr(info, want) != NULL, none = strstr(info, "sentinel_switches:0") != NULL;
    free(info);
    cr_assert(names_it, "VERBPROXY INFO does not say %s", want);
    cr_assert(none, "VERBPROXY INFO counts a switch");
    char *log = vt_proxy_log(proxy);
    cr_assert(!strstr(log, "sentinel-secret"), "the sentinel password is in the log:\n%s", log);
    free(log);
}

typedef struct served_want {
    const char *key;
} served_want;

/* A new client gets SET answered +OK (the proxy serves again). */
static bool proxy_serves(void *arg)
{
    served_want *w = arg;
    redisContext *c = vt_connect(proxy->port);
    if (!c) return false;
    redisReply *r = vt_cmd(c, "SET %s again", w->key);
    bool ok = r && r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "OK");
    if (r) freeReplyObject(r);
    redisFree(c);
    return ok;
}

static vt_traffic *start_traffic(void)
{
    /* Requests read while no primary is known are answered "upstream
     * unavailable" (never sent); those read after the switch are served:
     * one pipeline may see both (docs/upstreams.md#sentinel-upstream). */
    vt_traffic_opts o = {
        .workers = 4, .tx_workers = 1, .verbs = true, .allow_unavailable = true, .allow_recovery = true};
    vt_traffic *t = vt_traffic_start(proxy->port, &o);
    cr_assert(t, "traffic did not start");
    cr_assert(vt_traffic_wait_replies(t, 500, 10000), "traffic is not under way");
    return t;
}

static void finish_traffic(vt_traffic *t)
{
    bool went_on = vt_traffic_wait_replies(t, 500, 20000);
    vt_traffic_result res;
    bool ok = vt_traffic_stop(t, &res);
    cr_log_info("traffic: %lld sessions (%lld complete, %lld closed, %lld unavailable), %lld replies",
                res.sessions, res.complete, res.closed, res.unavailable, res.replies);
    cr_assert(ok, "a session got a wrong reply: %s", res.why);
    cr_assert(went_on, "traffic did not go on after the switch");
    cr_assert(res.complete > 0);
}

Test(sentinel, failover_under_traffic)
{
    start(NULL, NULL);
    assert_ready();
    int old = set->nodes[0]->port;
    vt_traffic *t = start_traffic();
    cr_assert(vt_sentinel_failover(set, 20000), "SENTINEL FAILOVER was not taken");
    int now = vt_sentinel_wait_switch(set, old, 20000);
    cr_assert(now > 0, "the sentinels did not switch");
    cr_assert_eq(now, set->nodes[1]->port);
    served_want w = {"after-failover"};
    cr_assert(vt_wait_until(proxy_serves, &w, 10000), "the proxy does not serve after the failover");
    finish_traffic(t);
    /* Requests after the switch land on the new primary; a verb works there
     * at once (loaded on the new node before it ran). */
    assert_serves("second", now);
    char *info = proxy_info();
    char want[64];
    snprintf(want, sizeof(want), "upstream:127.0.0.1:%d", now);
    bool names_it = strstr(info, want) != NULL;
    /* Exactly one: a sentinel that has not heard of the failover yet names
     * the old primary with the old config-epoch, which the proxy ignores. */
    bool counted = strstr(info, "sentinel_switches:1\r\n") != NULL;
    cr_assert(names_it, "VERBPROXY INFO does not say %s:\n%s", want, info);
    cr_assert(counted, "VERBPROXY INFO does not count exactly one switch:\n%s", info);
    free(info);
    assert_ready();
}

Test(sentinel, primary_killed)
{
    start(NULL, NULL);
    assert_ready();
    int old = set->nodes[0]->port;
    vt_traffic *t = start_traffic();
    long long killed_at = vt_now_ms();
    vt_redis_kill(set->nodes[0]);
    int now = vt_sentinel_wait_switch(set, old, 30000);
    cr_assert(now > 0, "the sentinels did not promote the replica");
    /* The proxy hears +switch-master (or its poll, every second): it serves
     * again within 3 s of the promotion. */
    served_want w = {"after-kill"};
    cr_assert(vt_wait_until(proxy_serves, &w, 3000), "the proxy does not serve within 3 s of the promotion");
    cr_log_info("served again %lld ms after the SIGKILL", vt_now_ms() - killed_at);
    finish_traffic(t);
    assert_serves("third", now);
    cr_assert_eq(switches_now(), 1, "not exactly one switch for one failover");
}

/* The proxy has asked the lagging sentinel: it says so in its log (the
 * fix), or it has switched again (the flaw). */
static bool lagging_answer_seen(void *arg)
{
    (void)arg;
    char *log = vt_proxy_log(proxy);
    bool said = strstr(log, "a lagging sentinel") != NULL;
    free(log);
    return said || switches_now() != 1;
}

/* A sentinel that has not heard of a failover names the old primary with
 * the old config-epoch; when it is the one the proxy asks, the proxy must
 * not switch back (a switch retires the shared connections and closes
 * clients with requests in flight: needless disruption). The 4th sentinel
 * here monitors the old primary alone and is started after that node died,
 * so nothing can tell it of the failover: it lags for good. Then the only
 * other sentinel the proxy knows is killed, so every poll reaches it. */
Test(sentinel, a_lagging_sentinel_does_not_move_the_proxy_back)
{
    start_set(NULL);
    int old = set->nodes[0]->port;
    lagging = vt_sentinel_new_lagging(set, old);
    cr_assert(lagging);
    char s0[32], lag[32];
    snprintf(s0, sizeof(s0), "127.0.0.1:%d", set->sentinels[0]->port);
    snprintf(lag, sizeof(lag), "127.0.0.1:%d", lagging->port);
    const char *sentinels[] = {s0, lag, NULL};
    start_proxy(NULL, NULL, sentinels);
    assert_ready();
    cr_assert(vt_sentinel_failover(set, 20000), "SENTINEL FAILOVER was not taken");
    int now = vt_sentinel_wait_switch(set, old, 20000);
    cr_assert_eq(now, set->nodes[1]->port, "the sentinels did not switch");
    upstream_want u = {now};
    cr_assert(vt_wait_until(proxy_is_on, &u, 10000), "the proxy did not follow the failover");
    cr_assert_eq(switches_now(), 1);

    /* The old primary dies; the lagging sentinel starts and names it. */
    vt_redis_kill(set->nodes[0]);
    cr_assert(vt_redis_launch(lagging), "the 4th sentinel did not start");
    int port = -1, new_port = -1;
    long long epoch = -1, new_epoch = -1;
    cr_assert(vt_sentinel_master_at(set, lagging->port, &port, &epoch));
    cr_assert(port == old && epoch == 0, "the 4th sentinel names port %d epoch %lld", port, epoch);
    cr_assert(vt_sentinel_master_at(set, set->sentinels[1]->port, &new_port, &new_epoch));
    cr_assert(new_port == now && new_epoch > 0, "sentinel 1 names port %d epoch %lld", new_port, new_epoch);

    /* The proxy's other sentinel goes: every poll now reaches the laggard. */
    vt_redis_kill(set->sentinels[0]);
    cr_assert(vt_wait_until(lagging_answer_seen, NULL, 10000), "the proxy never asked the lagging sentinel");
    char *log = vt_proxy_log(proxy);
    cr_log_info("%s", log);
    free(log);
    cr_assert_eq(switches_now(), 1, "the proxy switched back to the old primary");
    cr_assert(proxy_is_on(&u), "the proxy left the new primary");
    assert_ready();
    assert_serves("after-lag", now);
    cr_assert_eq(switches_now(), 1, "the proxy switched back to the old primary");
}

Test(sentinel, wrong_sentinel_pass_fails_readiness_with_the_reason)
{
    start("right-pass", "wrong-pass");
    ready_want w = {503, "WRONGPASS"};
    cr_assert(vt_wait_until(readyz_is, &w, 10000), "/readyz is not 503 with WRONGPASS");
    redisContext *c = vt_must_connect(proxy->port);
    redisReply *r = vt_cmd(c, "GET k");
    vt_assert_error(r, "ERR upstream unavailable");
    cr_assert(strstr(r->str, "no primary known") && strstr(r->str, "WRONGPASS"), "%s", r->str);
    freeReplyObject(r);
    redisFree(c);
    char *log = vt_proxy_log(proxy);
    cr_assert(!strstr(log, "wrong-pass"), "the sentinel password is in the log:\n%s", log);
    free(log);
}

/* ---- hostile peers: a fake sentinel and a fake node ----
 *
 * A small real TCP server the test owns (a thread), speaking just enough
 * RESP to answer the proxy as a real sentinel or Redis would, then sending
 * the bytes a story chooses. It is a hostile peer on the plain-TCP link,
 * not a mock of Redis: the data a story serves comes from a real
 * redis-server.
 *  - as a sentinel: AUTH +OK; SENTINEL MASTER <name> a real sentinel's
 *    field/value array naming 127.0.0.1:<primary_port> with <epoch> (then
 *    `after_master`, if any: bytes nobody asked for); SUBSCRIBE
 *    +switch-master confirmed; `fake_publish` sends raw bytes to every
 *    subscribed connection;
 *  - as a node: AUTH +OK (as a node with that password would), ROLE
 *    answered `role_reply`; anything else -ERR; every byte received kept
 *    (`received`) to show what reached it.
 * `accepts` counts the connections it accepted. */

#define FAKE_CONNS 16

struct fake_peer {
    int listen_fd, port;
    bool sentinel;
    pthread_t thread;
    pthread_mutex_t mu; /* guards everything below */
    bool stop;
    int primary_port;
    long long epoch;
    char after_master[64];
    vt_buf publish; /* to send to every subscriber */
    int masters_asked, subscribes, accepts;
    int fail_every; /* > 0: every fail_every-th SENTINEL MASTER gets an error */
    char role_reply[128];
    vt_buf received;
    int roles_asked;
    int fds[FAKE_CONNS];
    vt_buf in[FAKE_CONNS];
    bool subscribed[FAKE_CONNS];
};

/* One multibulk command at b's start: its arguments (up to max, each
 * NUL-terminated in place of its CR). Its length, 0 while incomplete, -1
 * if it is not one. */
static long long fake_command(vt_buf *b, char **argv, int max, int *argc)
{
    long long len = vt_resp_reply_len(b->data, b->len);
    if (len <= 0) return len;
    if (b->data[0] != '*') return -1;
    char *p = b->data + 1;
    long n = strtol(p, &p, 10);
    p += 2;
    *argc = 0;
    for (long i = 0; i < n; i++) {
        if (*p != '$') return -1;
        long l = strtol(p + 1, &p, 10);
        p += 2;
        if (*argc < max) argv[(*argc)++] = p;
        p[l] = '\0';
        p += l + 2;
    }
    return len;
}

static void fake_send(int fd, const char *s, size_t n)
{
    (void)vt_sock_send(fd, s, n);
}

static void fake_send_str(int fd, const char *s)
{
    fake_send(fd, s, strlen(s));
}

/* A bulk string of text into b. */
static void fake_bulk(vt_buf *b, const char *text)
{
    char head[32];
    snprintf(head, sizeof(head), "$%zu\r\n", strlen(text));
    vt_buf_append_str(b, head);
    vt_buf_append_str(b, text);
    vt_buf_append_str(b, "\r\n");
}

/* SENTINEL MASTER's answer as Redis 7's Sentinel words it (fewer fields). */
static void fake_master_reply(fake_peer *f, int fd)
{
    char port[16], epoch[32];
    snprintf(port, sizeof(port), "%d", f->primary_port);
    snprintf(epoch, sizeof(epoch), "%lld", f->epoch);
    const char *fields[] = {"name",
                            VT_SENTINEL_MASTER,
                            "ip",
                            "127.0.0.1",
                            "port",
                            port,
                            "runid",
                            "0123456789abcdef",
                            "flags",
                            "master",
                            "link-pending-commands",
                            "0",
                            "config-epoch",
                            epoch,
                            "num-slaves",
                            "0",
                            "quorum",
                            "1"};
    int n = (int)(sizeof(fields) / sizeof(fields[0]));
    vt_buf b = {0};
    char head[16];
    snprintf(head, sizeof(head), "*%d\r\n", n);
    vt_buf_append_str(&b, head);
    for (int i = 0; i < n; i++)
        fake_bulk(&b, fields[i]);
    vt_buf_append_str(&b, f->after_master);
    fake_send(fd, b.data, b.len);
    vt_buf_free(&b);
}

static void fake_answer(fake_peer *f, int i, int argc, char **argv)
{
    int fd = f->fds[i];
    const char *cmd = argc ? argv[0] : "";
    if (!f->sentinel) {
        if (!strcasecmp(cmd, "ROLE")) {
            f->roles_asked++;
            fake_send_str(fd, f->role_reply);
        } else if (!strcasecmp(cmd, "AUTH")) {
            fake_send_str(fd, "+OK\r\n");
        } else {
            fake_send_str(fd, "-ERR the fake node got it\r\n");
        }
        return;
    }
    if (!strcasecmp(cmd, "AUTH")) {
        fake_send_str(fd, "+OK\r\n");
    } else if (!strcasecmp(cmd, "SENTINEL") && argc == 3 && !strcasecmp(argv[1], "MASTER")) {
        f->masters_asked++;
        if (f->fail_every && f->masters_asked % f->fail_every == 0)
            fake_send_str(fd, "-ERR No such master with that name\r\n");
        else
            fake_master_reply(f, fd);
    } else if (!strcasecmp(cmd, "SUBSCRIBE") && argc == 2) {
        f->subscribes++;
        f->subscribed[i] = true;
        fake_send_str(fd, "*3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n");
    } else {
        fake_send_str(fd, "-ERR unknown command\r\n");
    }
}

static void fake_drop(fake_peer *f, int i)
{
    close(f->fds[i]);
    f->fds[i] = -1;
    f->subscribed[i] = false;
    vt_buf_free(&f->in[i]);
}

/* What connection i sent: kept (a node) and answered command by command. */
static void fake_read(fake_peer *f, int i)
{
    char buf[4096];
    ssize_t n = read(f->fds[i], buf, sizeof(buf));
    if (n <= 0) {
        fake_drop(f, i);
        return;
    }
    if (!f->sentinel) vt_buf_append(&f->received, buf, (size_t)n);
    vt_buf_append(&f->in[i], buf, (size_t)n);
    for (;;) {
        char *argv[8];
        int argc = 0;
        long long len = fake_command(&f->in[i], argv, 8, &argc);
        if (len < 0) {
            fake_drop(f, i);
            return;
        }
        if (len == 0) return;
        fake_answer(f, i, argc, argv);
        vt_buf_consume(&f->in[i], (size_t)len);
    }
}

static void fake_accept(fake_peer *f)
{
    int fd = accept(f->listen_fd, NULL, NULL);
    if (fd < 0) return;
    f->accepts++;
    for (int i = 0; i < FAKE_CONNS; i++)
        if (f->fds[i] < 0) {
            f->fds[i] = fd;
            return;
        }
    close(fd);
}

static void fake_flush_publish(fake_peer *f)
{
    if (!f->publish.len) return;
    for (int i = 0; i < FAKE_CONNS; i++)
        if (f->fds[i] >= 0 && f->subscribed[i]) fake_send(f->fds[i], f->publish.data, f->publish.len);
    vt_buf_reset(&f->publish);
}

/* The server's loop: poll()'s timeout only bounds how soon `stop` and
 * `publish` are seen. */
static void *fake_run(void *arg)
{
    fake_peer *f = arg;
    for (;;) {
        struct pollfd p[FAKE_CONNS + 1];
        int who[FAKE_CONNS + 1], n = 0;
        pthread_mutex_lock(&f->mu);
        bool stop = f->stop;
        fake_flush_publish(f);
        p[n].fd = f->listen_fd, p[n].events = POLLIN, who[n++] = -1;
        for (int i = 0; i < FAKE_CONNS; i++)
            if (f->fds[i] >= 0) p[n].fd = f->fds[i], p[n].events = POLLIN, who[n++] = i;
        pthread_mutex_unlock(&f->mu);
        if (stop) return NULL;
        if (poll(p, (nfds_t)n, 20) <= 0) continue;
        pthread_mutex_lock(&f->mu);
        for (int k = 0; k < n; k++) {
            if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            if (who[k] < 0)
                fake_accept(f);
            else if (f->fds[who[k]] == p[k].fd)
                fake_read(f, who[k]);
        }
        pthread_mutex_unlock(&f->mu);
    }
}

static fake_peer *fake_start(bool sentinel)
{
    fake_peer *f = calloc(1, sizeof(*f));
    cr_assert(f);
    f->sentinel = sentinel;
    for (int i = 0; i < FAKE_CONNS; i++)
        f->fds[i] = -1;
    pthread_mutex_init(&f->mu, NULL);
    f->port = vt_free_port();
    f->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(f->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(bind(f->listen_fd, (struct sockaddr *)&a, sizeof(a)) == 0, "bind: %s", strerror(errno));
    cr_assert(listen(f->listen_fd, 16) == 0);
    cr_assert(pthread_create(&f->thread, NULL, fake_run, f) == 0);
    return f;
}

static void fake_free(fake_peer *f)
{
    if (!f) return;
    pthread_mutex_lock(&f->mu);
    f->stop = true;
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->thread, NULL);
    for (int i = 0; i < FAKE_CONNS; i++)
        if (f->fds[i] >= 0) fake_drop(f, i);
    close(f->listen_fd);
    vt_buf_free(&f->publish);
    vt_buf_free(&f->received);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

static void fake_publish(fake_peer *f, const char *bytes, size_t len)
{
    pthread_mutex_lock(&f->mu);
    vt_buf_append(&f->publish, bytes, len);
    pthread_mutex_unlock(&f->mu);
}

/* The sentinel's answer from now on: the primary on `port`, with `epoch`. */
static void fake_name_primary(fake_peer *f, int port, long long epoch)
{
    pthread_mutex_lock(&f->mu);
    f->primary_port = port;
    f->epoch = epoch;
    pthread_mutex_unlock(&f->mu);
}

static int fake_count(fake_peer *f, const int *counter)
{
    pthread_mutex_lock(&f->mu);
    int n = *counter;
    pthread_mutex_unlock(&f->mu);
    return n;
}

typedef struct count_want {
    fake_peer *f;
    const int *counter;
    int at_least;
} count_want;

static bool fake_count_reached(void *arg)
{
    count_want *w = arg;
    return fake_count(w->f, w->counter) >= w->at_least;
}

/* Until the counter (one of f's) reaches at_least. */
static bool fake_wait_count(fake_peer *f, const int *counter, int at_least, int timeout_ms)
{
    count_want w = {f, counter, at_least};
    return vt_wait_until(fake_count_reached, &w, timeout_ms);
}

static bool fake_received_has(fake_peer *f, const char *needle)
{
    pthread_mutex_lock(&f->mu);
    bool has = vt_buf_contains(&f->received, needle);
    pthread_mutex_unlock(&f->mu);
    return has;
}

/* The proxy with the fake sentinel as its only sentinel. */
static void start_proxy_on_fake_sentinel(void)
{
    char addr[32];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", fake_sentinel->port);
    const char *sentinels[] = {addr, NULL};
    start_proxy(NULL, NULL, sentinels);
}

/* A +switch-master message whose text is `payload` (len bytes), into b. */
static void switch_message(vt_buf *b, const char *payload, size_t len)
{
    char head[64];
    snprintf(head, sizeof(head), "*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n$%zu\r\n", len);
    vt_buf_append_str(b, head);
    vt_buf_append(b, payload, len);
    vt_buf_append_str(b, "\r\n");
}

typedef struct log_want {
    const char *needle;
} log_want;

static bool proxy_log_has(void *arg)
{
    log_want *w = arg;
    char *log = vt_proxy_log(proxy);
    bool has = strstr(log, w->needle) != NULL;
    free(log);
    return has;
}

/* Messages on the +switch-master channel that are RESP but not a
 * sentinel's message: the first two are issue 22's (hiredis 0.14 asserted
 * on them and the proxy died), the rest the other shapes hiredis's
 * subscribe handling asserts on or a lenient parser would take. */
static const char *const not_messages[] = {
    "*1\r\n$7\r\nmessage\r\n",
    "*3\r\n$7\r\nmessage\r\n:1\r\n:2\r\n",
    "*2\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n",
    "*3\r\n:1\r\n:2\r\n:3\r\n",
    "*0\r\n",
    "*-1\r\n",
    "+OK\r\n",
    ":42\r\n",
    "$-1\r\n",
    "-ERR not a message\r\n",
    "*3\r\n$11\r\nunsubscribe\r\n$14\r\n+switch-master\r\n$1\r\nx\r\n",
    "*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$14\r\n+switch-master\r\n$5\r\nhello\r\n",
    "*3\r\n$7\r\nmessage\r\n$5\r\nother\r\n$4\r\ntext\r\n",
    "*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n*1\r\n:1\r\n",
    "*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n$-1\r\n",
    "*3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n",
    "%1\r\n+a\r\n+b\r\n",
    ">3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n$5\r\nhello\r\n",
};

/* Well-framed messages whose text is not "<master> <old-ip> <old-port>
 * <new-ip> <new-port>": each names `to` somewhere, so a lenient parser
 * would move the proxy there. How many: the return value. */
static int bad_switch_texts(vt_buf *b, int to)
{
    char t[8][160];
    int n = 0;
    snprintf(t[n++], sizeof(t[0]), "%s 127.0.0.1 1 127.0.0.1", VT_SENTINEL_MASTER);
    snprintf(t[n++], sizeof(t[0]), "%s 127.0.0.1 1 127.0.0.1 %d extra", VT_SENTINEL_MASTER, to);
    snprintf(t[n++], sizeof(t[0]), "%s 127.0.0.1 1 127.0.0.1 %d99999", VT_SENTINEL_MASTER, to);
    snprintf(t[n++], sizeof(t[0]), "%s  127.0.0.1 1 127.0.0.1 %d", VT_SENTINEL_MASTER, to);
    snprintf(t[n++], sizeof(t[0]), "%s 127.0.0.1 1 127.0.0.1 %d ", VT_SENTINEL_MASTER, to);
    snprintf(t[n++], sizeof(t[0]), "%s 127.0.0.1 1 127.0.0.1:%d 0", VT_SENTINEL_MASTER, to);
    snprintf(t[n++], sizeof(t[0]), "%s 127.0.0.1 1 127.0.0.1\r\n%d 6379", VT_SENTINEL_MASTER, to);
    for (int i = 0; i < n; i++)
        switch_message(b, t[i], strlen(t[i]));
    /* A NUL inside the new host: the text's length says it is there. */
    char nul[160];
    int len = snprintf(nul, sizeof(nul), "%s 127.0.0.1 1 127.0.0.1x %d", VT_SENTINEL_MASTER, to);
    *strchr(nul, 'x') = '\0';
    switch_message(b, nul, (size_t)len);
    return n + 1;
}

/* Issue 22, finding 6: anyone who can write on the plain-TCP link to a
 * sentinel could stop the proxy with `*1 message` (hiredis asserted). The
 * fake sentinel names a real redis-server, then sends every malformed
 * message above and more, with bystanders pipelining throughout: the proxy
 * stays up, serves them through the real primary, stays on it, and logs
 * the first of each kind as a warning. Then bytes that are not RESP end
 * that subscription (a new one is made), and a well-formed +switch-master
 * is still followed (the subscription works: this story can fail). */
Test(sentinel, malformed_switch_master_messages_are_ignored)
{
    VT_SKIP_IF_DIRECT();
    vt_ignore_sigpipe();
    vt_redis_opts plain = {.tls = VT_REDIS_TLS_NONE};
    primary = vt_redis_start(&plain);
    second = vt_redis_start(&plain);
    cr_assert(primary && second, "redis-server did not start");
    fake_sentinel = fake_start(true);
    fake_name_primary(fake_sentinel, primary->port, 1);
    proxy_verbose = true; /* every malformed message logged, with a count */
    start_proxy_on_fake_sentinel();
    assert_ready();
    cr_assert(fake_wait_count(fake_sentinel, &fake_sentinel->subscribes, 1, 10000),
              "the proxy never subscribed");
    vt_bystanders *b = vt_bystanders_start(proxy->port, 4);
    cr_assert(b, "the bystanders did not start");
    cr_assert(vt_bystanders_wait(b, 50, 10000), "the bystanders are not served");

    vt_buf msgs = {0};
    int n = (int)(sizeof(not_messages) / sizeof(not_messages[0]));
    for (int i = 0; i < n; i++)
        vt_buf_append_str(&msgs, not_messages[i]);
    n += bad_switch_texts(&msgs, second->port);
    /* Well formed, another master's: not malformed, and it moves nothing. */
    char other[128];
    snprintf(other, sizeof(other), "othermaster 127.0.0.1 %d 127.0.0.1 %d", primary->port, second->port);
    switch_message(&msgs, other, strlen(other));
    fake_publish(fake_sentinel, msgs.data, msgs.len);
    vt_buf_free(&msgs);

    char counted[64];
    snprintf(counted, sizeof(counted), "ignored (%d so far)", n);
    log_want all = {counted};
    bool seen = vt_wait_until(proxy_log_has, &all, 10000);
    cr_assert(vt_proxy_alive(proxy), "the proxy died on a malformed +switch-master message");
    cr_assert(seen, "the proxy did not log %d malformed messages", n);
    cr_assert(vt_bystanders_wait(b, 50, 10000), "the bystanders are not served after the messages");
    vt_assert_bystanders_ok(b);
    upstream_want on_primary = {primary->port};
    cr_assert(proxy_is_on(&on_primary), "a malformed message moved the proxy");
    cr_assert_eq(switches_now(), 0);
    char *log = vt_proxy_log(proxy);
    bool warned = strstr(log, "# sentinel: malformed message on the +switch-master subscription") != NULL;
    free(log);
    cr_assert(warned, "no warning about the malformed messages in the log");

    /* Not RESP: that subscription is over, a new one is made. */
    static const char garbage[] = "this is not RESP\r\n";
    fake_publish(fake_sentinel, garbage, sizeof(garbage) - 1);
    cr_assert(fake_wait_count(fake_sentinel, &fake_sentinel->subscribes, 2, 10000),
              "the proxy did not subscribe again after bytes that are not RESP");
    cr_assert(vt_proxy_alive(proxy));

    /* A sentinel's real message is still followed. */
    fake_name_primary(fake_sentinel, second->port, 2);
    char real[128];
    snprintf(real, sizeof(real), "%s 127.0.0.1 %d 127.0.0.1 %d", VT_SENTINEL_MASTER, primary->port,
             second->port);
    vt_buf sw = {0};
    switch_message(&sw, real, strlen(real));
    fake_publish(fake_sentinel, sw.data, sw.len);
    vt_buf_free(&sw);
    upstream_want on_second = {second->port};
    cr_assert(vt_wait_until(proxy_is_on, &on_second, 10000), "a well-formed +switch-master was not followed");
    assert_serves("after-malformed", second->port);
}

/* A reply nobody asked for on the asking connection (hiredis asserted on
 * that too: not subscribed, no callback waiting): that connection is
 * dropped, the answer before it stands, and the proxy serves. */
Test(sentinel, a_reply_nobody_asked_for_costs_nobody_a_reply)
{
    VT_SKIP_IF_DIRECT();
    vt_ignore_sigpipe();
    vt_redis_opts plain = {.tls = VT_REDIS_TLS_NONE};
    primary = vt_redis_start(&plain);
    cr_assert(primary, "redis-server did not start");
    fake_sentinel = fake_start(true);
    fake_name_primary(fake_sentinel, primary->port, 1);
    snprintf(fake_sentinel->after_master, sizeof(fake_sentinel->after_master), "+OK\r\n:1\r\n");
    start_proxy_on_fake_sentinel();
    assert_ready();
    vt_bystanders *b = vt_bystanders_start(proxy->port, 4);
    cr_assert(b, "the bystanders did not start");
    /* Asked at start and every second: each answer came with two more. */
    cr_assert(fake_wait_count(fake_sentinel, &fake_sentinel->masters_asked, 3, 10000),
              "the proxy stopped asking the sentinel");
    cr_assert(vt_proxy_alive(proxy), "the proxy died on a reply nobody asked for");
    cr_assert(vt_bystanders_wait(b, 50, 10000), "the bystanders are not served");
    vt_assert_bystanders_ok(b);
    assert_serves("unasked", primary->port);
}

/* Issue 22, finding 10: a node a sentinel names must say ROLE master
 * before any request reaches it. The fake sentinel names a fake node that
 * answers ROLE with something else each time: every client request is
 * answered "upstream unavailable ... not the primary" and none of its
 * bytes reach the node. (No bystanders: the only primary is the hostile
 * one; every client's reply is checked instead.) The last ROLE answer is
 * a master's: the request then reaches the node, so this story can fail. */
/* Has the proxy heard the sentinel name a primary? Until it has (its
 * first answer still on its way on a loaded machine), a request is
 * answered "no primary known"; once it has, one goes to the node's ROLE
 * check (the node's answer, set by the story, is not a master's). */
static bool sentinel_answered(void *arg)
{
    (void)arg;
    redisContext *c = vt_must_connect(proxy->port);
    redisReply *r = vt_cmd(c, "SET vt:role:first never");
    bool named = r && !(r->type == REDIS_REPLY_ERROR && strstr(r->str, "no primary known"));
    freeReplyObject(r);
    redisFree(c);
    return named;
}

Test(sentinel, a_node_that_does_not_say_master_gets_no_request)
{
    VT_SKIP_IF_DIRECT();
    vt_ignore_sigpipe();
    fake_node = fake_start(false);
    fake_sentinel = fake_start(true);
    fake_name_primary(fake_sentinel, fake_node->port, 1);
    start_proxy_on_fake_sentinel();
    static const char *const roles[] = {
        "+OK\r\n",
        ":1\r\n",
        "*0\r\n",
        "*-1\r\n",
        "$6\r\nmaster\r\n",
        "+master\r\n",
        "*3\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6379\r\n",
        "*2\r\n:1\r\n$6\r\nmaster\r\n",
        "*1\r\n$7\r\nmasters\r\n",
        "*1\r\n*1\r\n$6\r\nmaster\r\n",
        "-NOPERM this user has no permissions to run the 'role' command\r\n",
    };
    pthread_mutex_lock(&fake_node->mu);
    snprintf(fake_node->role_reply, sizeof(fake_node->role_reply), "%s", roles[0]);
    pthread_mutex_unlock(&fake_node->mu);
    cr_assert(vt_wait_until(sentinel_answered, NULL, 10000), "the sentinel's answer never reached the proxy");
    for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++) {
        pthread_mutex_lock(&fake_node->mu);
        snprintf(fake_node->role_reply, sizeof(fake_node->role_reply), "%s", roles[i]);
        int asked = fake_node->roles_asked;
        pthread_mutex_unlock(&fake_node->mu);
        redisContext *c = vt_must_connect(proxy->port);
        redisReply *r = vt_cmd(c, "SET vt:role:%d never", (int)i);
        cr_assert(r && r->type == REDIS_REPLY_ERROR, "ROLE %s: SET got %s",
                  vt_escape(roles[i], strlen(roles[i])), VT_DESCRIBE(r));
        cr_assert(strstr(r->str, "upstream unavailable") && strstr(r->str, "not the primary"),
                  "ROLE %s: SET got %s", vt_escape(roles[i], strlen(roles[i])), r->str);
        freeReplyObject(r);
        redisFree(c);
        cr_assert(fake_count(fake_node, &fake_node->roles_asked) > asked, "the proxy did not ask ROLE");
    }
    cr_assert(vt_proxy_alive(proxy));
    cr_assert(!fake_received_has(fake_node, "vt:role:"), "a request reached a node that never said master");

    /* A master's answer: now the request goes there (the node refuses it). */
    pthread_mutex_lock(&fake_node->mu);
    snprintf(fake_node->role_reply, sizeof(fake_node->role_reply), "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n");
    pthread_mutex_unlock(&fake_node->mu);
    redisContext *c = vt_must_connect(proxy->port);
    redisReply *r = vt_cmd(c, "SET vt:role:control reached");
    vt_assert_error(r, "ERR the fake node got it");
    freeReplyObject(r);
    redisFree(c);
    cr_assert(fake_received_has(fake_node, "vt:role:control"));
}

/* The fake sentinel's "+switch-master" message for our master, from
 * `from` to `to` (both 127.0.0.1), appended to b. */
static void switch_to(vt_buf *b, int from, int to)
{
    char text[128];
    snprintf(text, sizeof(text), "%s 127.0.0.1 %d 127.0.0.1 %d", VT_SENTINEL_MASTER, from, to);
    switch_message(b, text, strlen(text));
}

/* A +switch-master is a hint, not a move: a forged one (the plain-TCP
 * link, or one misbehaving sentinel) named a node of the attacker's that
 * answers ROLE master, and the proxy moved there at once, leaving the
 * epoch it held; the sentinels, still naming the real primary at that
 * same epoch, were all taken for lagging ones, so it stayed there (with
 * the upstream password and every client's bytes) until a real failover.
 * Here the fake sentinel sends such a message and keeps answering SENTINEL
 * MASTER with the real primary at the same epoch: the fake node gets no
 * connection at all (no AUTH, no request), and the bystanders are served
 * by the real primary throughout. */
Test(sentinel, a_forged_switch_master_moves_nothing)
{
    VT_SKIP_IF_DIRECT();
    vt_ignore_sigpipe();
    vt_redis_opts o = {.tls = VT_REDIS_TLS_NONE, .requirepass = "upstream-secret"};
    primary = vt_redis_start(&o);
    cr_assert(primary, "redis-server did not start");
    fake_node = fake_start(false);
    pthread_mutex_lock(&fake_node->mu);
    snprintf(fake_node->role_reply, sizeof(fake_node->role_reply), "*1\r\n$6\r\nmaster\r\n");
    pthread_mutex_unlock(&fake_node->mu);
    fake_sentinel = fake_start(true);
    fake_name_primary(fake_sentinel, primary->port, 1);
    upstream_pass = "upstream-secret";
    start_proxy_on_fake_sentinel();
    assert_ready();
    cr_assert(fake_wait_count(fake_sentinel, &fake_sentinel->subscribes, 1, 10000),
              "the proxy never subscribed");
    vt_bystanders *b = vt_bystanders_start(proxy->port, 4);
    cr_assert(b, "the bystanders did not start");
    cr_assert(vt_bystanders_wait(b, 50, 10000), "the bystanders are not served");

    int asked = fake_count(fake_sentinel, &fake_sentinel->masters_asked);
    vt_buf forged = {0};
    switch_to(&forged, primary->port, fake_node->port);
    fake_publish(fake_sentinel, forged.data, forged.len);
    vt_buf_free(&forged);
    /* The question the message prompts, and the poll after it: each
     * answered with the real primary at epoch 1. */
    cr_assert(fake_wait_count(fake_sentinel, &fake_sentinel->masters_asked, asked + 2, 10000),
              "the proxy did not ask the sentinel after the message");
    cr_assert(vt_bystanders_wait(b, 50, 10000), "the bystanders are not served after the forged message");
    upstream_want on_primary = {primary->port};
    cr_assert(proxy_is_on(&on_primary), "the forged +switch-master moved the proxy");
    cr_assert_eq(switches_now(), 0);
    vt_assert_bystanders_ok(b);
    int node_accepts = fake_count(fake_node, &fake_node->accepts);
    cr_assert_eq(node_accepts, 0, "the forged primary got %d connection(s)%s", node_accepts,
                 fake_received_has(fake_node, "upstream-secret") ? ", with the upstream password" : "");
    cr_assert(vt_proxy_alive(proxy));
}

/* +switch-master messages are coalesced: each one dropped the question in
 * flight and asked again on a new connection (600 of them in one 64 KiB
 * read: the round never ended), and each moved every client's upstream.
 * The fake sentinel sends 2,000 switches alternating between the real
 * primary and another real redis-server while naming the primary at the
 * same epoch: the bystanders lose nothing, the proxy stays on the primary
 * and opens at most a couple of connections to the sentinel for them. */
Test(sentinel, a_flood_of_switch_master_messages_costs_nothing)
{
    VT_SKIP_IF_DIRECT();
    vt_ignore_sigpipe();
    vt_redis_opts plain = {.tls = VT_REDIS_TLS_NONE};
    primary = vt_redis_start(&plain);
    second = vt_redis_start(&plain);
    cr_assert(primary && second, "redis-server did not start");
    fake_sentinel = fake_start(true);
    fake_name_primary(fake_sentinel, primary->port, 1);
    start_proxy_on_fake_sentinel();
    assert_ready();
    cr_assert(fake_wait_count(fake_sentinel, &fake_sentinel->subscribes, 1, 10000),
              "the proxy never subscribed");
    vt_bystanders *b = vt_bystanders_start(proxy->port, 4);
    cr_assert(b, "the bystanders did not start");
    cr_assert(vt_bystanders_wait(b, 50, 10000), "the bystanders are not served");

    int accepts = fake_count(fake_sentinel, &fake_sentinel->accepts);
    int asked = fake_count(fake_sentinel, &fake_sentinel->masters_asked);
    vt_buf flood = {0};
    for (int i = 0; i < 1000; i++) {
        switch_to(&flood, primary->port, second->port);
        switch_to(&flood, second->port, primary->port);
    }
    fake_publish(fake_sentinel, flood.data, flood.len);
    vt_buf_free(&flood);
    /* Questions after the flood (the hints' rounds, then the poll). */
    cr_assert(fake_wait_count(fake_sentinel, &fake_sentinel->masters_asked, asked + 3, 10000),
              "the proxy stopped asking the sentinel");
    cr_assert(vt_bystanders_wait(b, 50, 10000), "the bystanders are not served after the flood");
    vt_assert_bystanders_ok(b);
    int opened = fake_count(fake_sentinel, &fake_sentinel->accepts) - accepts;
    cr_log_info("the flood: %d new connection(s) to the sentinel, %d questions", opened,
                fake_count(fake_sentinel, &fake_sentinel->masters_asked) - asked);
    cr_assert(opened <= 2, "2,000 +switch-master messages opened %d connections to the sentinel", opened);
    upstream_want on_primary = {primary->port};
    cr_assert(proxy_is_on(&on_primary), "the flood moved the proxy");
    cr_assert_eq(switches_now(), 0);
    cr_assert(vt_proxy_alive(proxy));
}

/* Lines in the file at path (0 if it is not there). */
static int file_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int n = 0, c;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

/* A lookup left stale by a timeout is not doubled: after a connect-timeout
 * with a sentinel's name still being looked up, each new attempt at that
 * sentinel started another uv_getaddrinfo, so a resolver that hangs filled
 * libuv's 4-thread pool (one more per connect-timeout). The proxy runs with
 * a resolver that hangs on one name (tests/support/preload/
 * hang_resolver.c, LD_PRELOAD) and two sentinels: the fake one, which
 * answers every 2nd SENTINEL MASTER with an error so that the proxy turns
 * to the other, by that hanging name, again and again. The name is looked
 * up once, however many times it is tried; the bystanders are served
 * throughout (the primary the fake sentinel named is kept). */
Test(sentinel, a_hanging_name_lookup_is_not_started_again)
{
    VT_SKIP_IF_DIRECT();
#ifdef VP_SANITIZED
    cr_skip_test("LD_PRELOAD before the ASan runtime: not in a sanitized build");
#endif
    vt_ignore_sigpipe();
    vt_redis_opts plain = {.tls = VT_REDIS_TLS_NONE};
    primary = vt_redis_start(&plain);
    cr_assert(primary, "redis-server did not start");
    fake_sentinel = fake_start(true);
    fake_name_primary(fake_sentinel, primary->port, 1);
    pthread_mutex_lock(&fake_sentinel->mu);
    fake_sentinel->fail_every = 2;
    pthread_mutex_unlock(&fake_sentinel->mu);
    char lookups[64];
    snprintf(lookups, sizeof(lookups), "/tmp/vt-hang-%d.log", (int)getpid());
    snprintf(hang_release, sizeof(hang_release), "/tmp/vt-hang-%d.release", (int)getpid());
    unlink(lookups);
    unlink(hang_release);
    setenv("VT_HANG_LOG", lookups, 1);
    setenv("VT_HANG_RELEASE", hang_release, 1);
    setenv("LD_PRELOAD", VT_HANG_RESOLVER, 1);
    char addr[32];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", fake_sentinel->port);
    const char *sentinels[] = {addr, "vt-hang.invalid:26379", NULL};
    proxy_verbose = true;
    start_proxy(NULL, NULL, sentinels);
    unsetenv("LD_PRELOAD"); /* (the proxy has it; nothing started later needs it) */
    assert_ready();
    vt_bystanders *b = vt_bystanders_start(proxy->port, 4);
    cr_assert(b, "the bystanders did not start");
    cr_assert(vt_bystanders_wait(b, 50, 10000), "the bystanders are not served");
    /* 8 questions to the fake sentinel: 4 errors, each followed by a turn
     * to the hanging name (which ends at the connect-timeout, 1 s). */
    cr_assert(fake_wait_count(fake_sentinel, &fake_sentinel->masters_asked, 8, 30000),
              "the proxy stopped asking the sentinel");
    cr_assert(vt_bystanders_wait(b, 50, 10000), "the bystanders are not served");
    vt_assert_bystanders_ok(b);
    log_want waited = {"waiting for the lookup of its name already under way"};
    bool adopted = proxy_log_has(&waited);
    int n = file_lines(lookups);
    unlink(lookups);
    cr_assert(n >= 1, "the hanging name was never looked up: the story did not happen");
    cr_assert_eq(n, 1, "the hanging name was looked up %d times while the first lookup still hung", n);
    cr_assert(adopted, "the proxy never turned to the hanging name again");
    upstream_want on_primary = {primary->port};
    cr_assert(proxy_is_on(&on_primary));
    cr_assert(vt_proxy_alive(proxy));
}

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
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void teardown(void)
{
    vt_proxy_free(proxy);
    vt_redis_free(lagging);
    vt_sentinel_free(set);
    proxy = NULL;
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
     * one pipeline may see both (README, "Sentinel upstream"). */
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

/* upstream-mode sentinel: the proxy in front of a primary, a replica and 3
 * sentinels (tests/support/sentinel.h), all real processes.
 *  - it finds the primary through the sentinels and serves GET/SET and a
 *    verb; VERBPROXY INFO names the primary;
 *  - SENTINEL FAILOVER under checked traffic (tests/support/traffic.h, with
 *    verbs): every session gets right replies in order, then at most a
 *    clean close or "upstream unavailable" errors (a connection opened in
 *    the moment the old primary is demoted: ROLE says replica); after the
 *    switch, writes land on the new primary and a verb works there (its
 *    script loaded before it: no NOSCRIPT reaches the client);
 *  - SIGKILL of the primary: after the sentinels promote the replica, the
 *    proxy serves again within a deadline;
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
static vt_proxy *proxy;
static int metrics_port;

static void teardown(void)
{
    vt_proxy_free(proxy);
    vt_sentinel_free(set);
    proxy = NULL;
    set = NULL;
}

TestSuite(sentinel, .timeout = 120, .fini = teardown);

static void start(const char *sentinel_pass, const char *proxy_pass)
{
    VT_SKIP_IF_DIRECT();
    set = vt_sentinel_start(sentinel_pass);
    cr_assert(set, "the primary, the replica and the sentinels did not start");
    const char *args[32];
    char ports[VT_SENTINELS][32], mport[16];
    vt_sentinel_proxy_args(set, args, ports);
    int n = 0;
    while (args[n])
        n++;
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

Test(sentinel, finds_the_primary_and_serves)
{
    start("sentinel-secret", "sentinel-secret");
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
    vt_traffic_opts o = {.workers = 4, .tx_workers = 1, .verbs = true, .allow_unavailable = true};
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
    /* (At least 1: a sentinel that has not yet heard of the failover may
     * name the old primary to a poll for a moment; README, limits.) */
    bool counted = strstr(info, "sentinel_switches:0") == NULL;
    free(info);
    cr_assert(names_it, "VERBPROXY INFO does not say %s", want);
    cr_assert(counted, "VERBPROXY INFO counts no switch");
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

/* test_metrics.c - an operator scrapes the proxy's admin endpoint.
 *
 * /metrics parses as strict Prometheus text 0.0.4 (tests/support/prom.h)
 * and each figure moves as traffic of its kind flows: GETs and SETs, a
 * verb, error replies from Redis and from the proxy, an unknown command
 * (cmd="other"), a connection refused at maxclients, an upstream nobody
 * listens on, a NOSCRIPT recovery; the histogram's buckets add up. /readyz
 * follows a Redis that stops and comes back, and refuses a wrong upstream
 * password. VERBPROXY INFO gives the same figures over RESP, also with
 * metrics-port 0 (then nothing is timed). After SIGTERM /readyz is 503
 * "draining" while clients are still served. */

#include <signal.h>
#include <sys/wait.h>

#include "tests/support/checks.h"
#include "tests/support/http.h"
#include "tests/support/prom.h"

static vt_env env;
static int mport;

static vt_proxy *start_with_metrics(const vt_redis *r, const char *upstream, int *port,
                                    const char *const *more)
{
    /* (The proxy keeps pointing at its arguments: one set per proxy.) */
    static char portargs[4][16];
    static const char *argsets[4][16];
    static int next;
    char *portarg = portargs[next % 4];
    const char **args = argsets[next++ % 4];
    *port = vt_free_port();
    snprintf(portarg, 16, "%d", *port);
    args[0] = "--metrics-port";
    args[1] = portarg;
    int n = 2;
    for (int i = 0; more && more[i] && n < 15; i++)
        args[n++] = more[i];
    args[n] = NULL;
    vt_proxy_opts po = {.extra_args = args};
    vt_proxy *p = upstream ? vt_proxy_start_upstream(upstream, &po) : vt_proxy_start(r, &po);
    cr_assert(p != NULL, "verbproxy did not start (see stderr)");
    return p;
}

static void setup(void)
{
    if (vt_direct_mode()) return;
    env.redis = vt_redis_start(NULL);
    cr_assert(env.redis != NULL, "redis-server did not start");
    env.proxy = start_with_metrics(env.redis, NULL, &mport, NULL);
}

static void teardown(void)
{
    vt_env_stop(&env);
}

TestSuite(metrics, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

/* GET /metrics, strictly parsed (the test fails on any violation). */
static vt_prom scrape(int port)
{
    vt_http_resp r = vt_http_get(port, "/metrics");
    cr_assert_eq(r.status, 200, "GET /metrics: %s", vt_buf_escaped(&r.raw));
    cr_assert(strstr(r.raw.data, "Content-Type: text/plain; version=0.0.4"), "content type: %s",
              vt_buf_escaped(&r.raw));
    vt_prom p;
    char why[512];
    bool ok = vt_prom_parse(r.body, r.body_len, &p, why, sizeof(why));
    cr_assert(ok, "not strict Prometheus text: %s\n%.*s", why, (int)r.body_len, r.body);
    vt_http_free(&r);
    return p;
}

static double val(const vt_prom *p, const char *name, const char *labels)
{
    return vt_prom_get(p, name, labels, 0);
}

#define DELTA(a, b, name, labels) (val(&(b), name, labels) - val(&(a), name, labels))

Test(metrics, every_family_typed_and_counters_move_with_traffic)
{
    VT_SKIP_IF_DIRECT();
    vt_prom a = scrape(mport);
    cr_assert_eq(val(&a, "verbproxy_build_info", "version=\"0.1.0\""), 1);
    cr_assert_str_eq(vt_prom_type(&a, "verbproxy_command_duration_seconds"), "histogram");
    cr_assert_str_eq(vt_prom_type(&a, "verbproxy_commands_total"), "counter");
    cr_assert_str_eq(vt_prom_type(&a, "verbproxy_connected_clients"), "gauge");
    cr_assert(val(&a, "process_resident_memory_bytes", "") > 0);
    cr_assert(val(&a, "process_open_fds", "") > 0);
    cr_assert(val(&a, "process_start_time_seconds", "") > 1.7e9);

    redisContext *c = vt_must_connect(env.proxy->port);
    for (int i = 0; i < 3; i++)
        freeReplyObject(vt_cmd(c, "SET mk v%d", i));
    for (int i = 0; i < 5; i++) {
        redisReply *r = vt_cmd(c, "GET mk");
        vt_assert_str(r, "v2");
        freeReplyObject(r);
    }
    redisReply *r = vt_cmd(c, "LOCKRELEASE lk tok");
    vt_assert_int(r, 0);
    freeReplyObject(r);
    r = vt_cmd(c, "INCR mk"); /* Redis's error */
    vt_assert_error(r, "ERR value is not an integer");
    freeReplyObject(r);
    r = vt_cmd(c, "LOCKRELEASE lk"); /* the proxy's error */
    vt_assert_error(r, "ERR wrong number of arguments for 'lockrelease'");
    freeReplyObject(r);
    r = vt_cmd(c, "NOSUCHCOMMAND x");
    vt_assert_error(r, "ERR unknown command");
    freeReplyObject(r);

    vt_prom b = scrape(mport);
    cr_assert_eq(DELTA(a, b, "verbproxy_commands_total", "cmd=\"set\""), 3);
    cr_assert_eq(DELTA(a, b, "verbproxy_commands_total", "cmd=\"get\""), 5);
    cr_assert_eq(DELTA(a, b, "verbproxy_commands_total", "cmd=\"incr\""), 1);
    cr_assert_eq(DELTA(a, b, "verbproxy_commands_total", "cmd=\"lockrelease\""), 2);
    cr_assert_eq(DELTA(a, b, "verbproxy_commands_total", "cmd=\"other\""), 1);
    cr_assert_eq(DELTA(a, b, "verbproxy_command_errors_total", "cmd=\"incr\""), 1);
    cr_assert_eq(DELTA(a, b, "verbproxy_command_errors_total", "cmd=\"lockrelease\""), 1);
    cr_assert_eq(DELTA(a, b, "verbproxy_command_errors_total", "cmd=\"other\""), 1);
    cr_assert_eq(DELTA(a, b, "verbproxy_command_errors_total", "cmd=\"get\""), 0);
    /* SET, GET and INCR are Redis's "string" family; each verb is its own. */
    cr_assert_eq(DELTA(a, b, "verbproxy_command_duration_seconds_count", "family=\"string\""), 9);
    cr_assert_eq(
        DELTA(a, b, "verbproxy_command_duration_seconds_count", "family=\"verb\",verb=\"lockrelease\""), 2);
    cr_assert_eq(DELTA(a, b, "verbproxy_command_duration_seconds_bucket", "family=\"string\",le=\"+Inf\""),
                 9);
    cr_assert(DELTA(a, b, "verbproxy_command_duration_seconds_sum", "family=\"string\"") > 0);
    cr_assert_eq(DELTA(a, b, "verbproxy_verb_calls_total", ""), 1);
    cr_assert_eq(DELTA(a, b, "verbproxy_verb_argument_errors_total", ""), 1);
    cr_assert_eq(DELTA(a, b, "verbproxy_connections_received_total", ""), 1);
    cr_assert_eq(val(&b, "verbproxy_connected_clients", ""), 1);
    cr_assert(DELTA(a, b, "verbproxy_net_input_bytes_total", "") >= 11 * 20);
    cr_assert(DELTA(a, b, "verbproxy_net_output_bytes_total", "") >= 11 * 4);
    cr_assert(val(&b, "verbproxy_upstream_connects_total", "") >= 1);
    cr_assert_eq(val(&b, "verbproxy_draining", ""), 0);

    /* The same figures over RESP. */
    r = vt_cmd(c, "VERBPROXY INFO commandstats");
    cr_assert(r && r->type == REDIS_REPLY_STRING, "%s", VT_DESCRIBE(r));
    cr_assert(strstr(r->str, "# Commandstats\r\n"), "%s", r->str);
    cr_assert(strstr(r->str, "cmdstat_get:calls=5,failed_calls=0,usec="), "%s", r->str);
    cr_assert(strstr(r->str, "cmdstat_incr:calls=1,failed_calls=1,"), "%s", r->str);
    cr_assert(strstr(r->str, "cmdstat_lockrelease:calls=2,failed_calls=1,"), "%s", r->str);
    freeReplyObject(r);
    r = vt_cmd(c, "VERBPROXY INFO");
    cr_assert(r && r->type == REDIS_REPLY_STRING, "%s", VT_DESCRIBE(r));
    cr_assert(strstr(r->str, "# Server\r\n") &&
                  strstr(r->str, "\r\n\r\n# Clients\r\nconnected_clients:1\r\n") &&
                  strstr(r->str, "# Stats\r\n") && strstr(r->str, "# Upstream\r\n") &&
                  !strstr(r->str, "# Commandstats"),
              "%s", r->str);
    freeReplyObject(r);
    r = vt_cmd(c, "VERBPROXY INFO nosuchsection");
    vt_assert_str(r, "");
    freeReplyObject(r);
    redisFree(c);
    vt_prom_free(&a);
    vt_prom_free(&b);
}

static bool noscript_recovered(void *arg)
{
    (void)arg;
    vt_prom p = scrape(mport);
    bool ok = val(&p, "verbproxy_noscript_recoveries_total", "") >= 1;
    vt_prom_free(&p);
    return ok;
}

Test(metrics, noscript_recovery_counted)
{
    VT_SKIP_IF_DIRECT();
    redisContext *c = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(c, "LOCKRELEASE lk tok");
    vt_assert_int(r, 0);
    freeReplyObject(r);
    redisContext *direct = vt_must_connect(env.redis->port);
    freeReplyObject(vt_cmd(direct, "SCRIPT FLUSH"));
    redisFree(direct);
    r = vt_cmd(c, "LOCKRELEASE lk tok");
    vt_assert_int(r, 0);
    freeReplyObject(r);
    cr_assert(vt_wait_until(noscript_recovered, NULL, 5000),
              "verbproxy_noscript_recoveries_total did not move");
    redisFree(c);
}

/* The counters the first story cannot move: a client that moves to a
 * connection of its own, the connection that takes it, and a NOSCRIPT
 * recovery that a later command of its client overtook. */
Test(metrics, pinned_connects_and_reordered_recoveries_counted)
{
    VT_SKIP_IF_DIRECT();
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    vt_buf_cmd(&req, "LOCKRELEASE", "mr:l", "x", NULL); /* its script loaded */
    vt_exchange(fd, &req, ":0\r\n");
    vt_prom a = scrape(mport);

    /* after a flush behind the proxy's back, the INCR runs before the
     * verb's retry: one recovery, reordered */
    redisContext *direct = vt_must_connect(env.redis->port);
    freeReplyObject(vt_cmd(direct, "SCRIPT FLUSH"));
    redisFree(direct);
    vt_buf_cmd(&req, "LOCKRELEASE", "mr:l", "x", NULL);
    vt_buf_cmd(&req, "INCR", "mr:n", NULL);
    vt_exchange(fd, &req, ":0\r\n:1\r\n");
    /* connection state: on a shared connection the client moves to one of
     * its own (a new upstream connection); with own connections it has one */
    vt_buf_cmd(&req, "SELECT", "1", NULL);
    vt_exchange(fd, &req, "+OK\r\n");
    redisContext *other = vt_must_connect(env.proxy->port); /* with own connections: a new one */
    redisReply *r = vt_cmd(other, "PING");
    vt_assert_status(r, "PONG");
    freeReplyObject(r);

    vt_prom b = scrape(mport);
    cr_assert_eq(DELTA(a, b, "verbproxy_noscript_recoveries_total", ""), 1);
    cr_assert_eq(DELTA(a, b, "verbproxy_noscript_reordered_total", ""), 1);
    bool shared = vt_proxy_shared_upstreams(env.proxy) > 0;
    cr_assert_eq(DELTA(a, b, "verbproxy_clients_pinned_total", ""), shared ? 1 : 0);
    cr_assert_geq(DELTA(a, b, "verbproxy_upstream_connects_total", ""), 1);
    redisFree(other);
    close(fd);
    vt_buf_free(&req);
    vt_prom_free(&a);
    vt_prom_free(&b);
}

static int clients_port;

static bool no_clients(void *arg)
{
    (void)arg;
    vt_prom p = scrape(clients_port);
    bool none = val(&p, "verbproxy_connected_clients", "") == 0;
    vt_prom_free(&p);
    return none;
}

Test(metrics, connection_refused_at_maxclients_counted)
{
    VT_SKIP_IF_DIRECT();
    int port2;
    static const char *const more[] = {"--maxclients", "2", NULL};
    vt_proxy *p = start_with_metrics(env.redis, NULL, &port2, more);
    /* (The harness's own check that the port accepts is a client too,
     * until the proxy sees it leave.) */
    clients_port = port2;
    cr_assert(vt_wait_until(no_clients, NULL, 5000));
    redisContext *c1 = vt_must_connect(p->port), *c2 = vt_must_connect(p->port);
    redisReply *r1 = vt_cmd(c1, "PING"), *r2 = vt_cmd(c2, "PING");
    vt_assert_status(r1, "PONG");
    vt_assert_status(r2, "PONG");
    freeReplyObject(r1);
    freeReplyObject(r2);
    int fd = vt_must_sock(p->port);
    vt_buf got = {0};
    vt_sock_read_eof(fd, &got, 5000);
    cr_assert(vt_buf_contains(&got, "max number of clients reached"), "got %s", vt_buf_escaped(&got));
    close(fd);
    vt_buf_free(&got);
    vt_prom s = scrape(port2);
    cr_assert_eq(val(&s, "verbproxy_rejected_connections_total", "reason=\"maxclients\""), 1);
    cr_assert_eq(val(&s, "verbproxy_rejected_connections_total", "reason=\"protected_mode\""), 0);
    vt_prom_free(&s);
    redisFree(c1);
    redisFree(c2);
    cr_assert(vt_proxy_stop(p));
    vt_proxy_free(p);
}

typedef struct ready_want {
    int port;
    int status;
    const char *body_has;
} ready_want;

static bool readyz_is(void *arg)
{
    ready_want *w = arg;
    vt_http_resp r = vt_http_get(w->port, "/readyz");
    bool ok = r.status == w->status && (!w->body_has || (r.body && strstr(r.body, w->body_has)));
    vt_http_free(&r);
    return ok;
}

Test(metrics, upstream_down_counts_connect_failures_and_fails_readiness)
{
    VT_SKIP_IF_DIRECT();
    char up[64];
    snprintf(up, sizeof(up), "127.0.0.1:%d", vt_free_port()); /* nobody listens */
    int port2;
    vt_proxy *p = start_with_metrics(NULL, up, &port2, NULL);
    redisContext *c = vt_must_connect(p->port);
    redisReply *r = vt_cmd(c, "GET k");
    vt_assert_error(r, "ERR upstream unavailable");
    freeReplyObject(r);
    ready_want w = {port2, 503, "refused"};
    cr_assert(vt_wait_until(readyz_is, &w, 5000), "/readyz is not 503 'refused'");
    vt_prom s = scrape(port2);
    cr_assert(val(&s, "verbproxy_upstream_connect_failures_total", "reason=\"refused\"") >= 1);
    cr_assert_eq(val(&s, "verbproxy_upstream_connect_failures_total", "reason=\"auth\""), 0);
    cr_assert_eq(val(&s, "verbproxy_command_errors_total", "cmd=\"get\""), 1);
    cr_assert_eq(val(&s, "verbproxy_up", ""), 0);
    vt_prom_free(&s);
    /* /healthz: the process serves all the same. */
    vt_http_resp h = vt_http_get(port2, "/healthz");
    cr_assert_eq(h.status, 200);
    vt_http_free(&h);
    redisFree(c);
    cr_assert(vt_proxy_stop(p));
    vt_proxy_free(p);
}

static bool up_is(void *arg)
{
    vt_prom p = scrape(mport);
    bool ok = val(&p, "verbproxy_up", "") == *(double *)arg;
    vt_prom_free(&p);
    return ok;
}

Test(metrics, readyz_follows_redis_stopping_and_returning)
{
    VT_SKIP_IF_DIRECT();
    ready_want ok = {mport, 200, "ready"}, down = {mport, 503, "not ready"};
    cr_assert(vt_wait_until(readyz_is, &ok, 10000), "/readyz never became 200");
    double one = 1, zero = 0;
    cr_assert(vt_wait_until(up_is, &one, 5000));
    vt_redis_stop(env.redis);
    cr_assert(vt_wait_until(readyz_is, &down, 10000), "/readyz stayed 200 with Redis stopped");
    cr_assert(vt_wait_until(up_is, &zero, 5000));
    cr_assert(vt_redis_launch(env.redis));
    cr_assert(vt_wait_until(readyz_is, &ok, 10000), "/readyz did not come back to 200");
    cr_assert(vt_wait_until(up_is, &one, 5000));
    /* And clients are served again. */
    redisContext *c = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(c, "PING");
    vt_assert_status(r, "PONG");
    freeReplyObject(r);
    redisFree(c);
}

static bool draining_is_one(void *arg)
{
    vt_prom p = scrape(*(int *)arg);
    bool ok = val(&p, "verbproxy_draining", "") == 1;
    vt_prom_free(&p);
    return ok;
}

/* SIGTERM: readiness fails at once ("draining") so Kubernetes takes the
 * pod out of its Service, while the admin endpoint and the clients are
 * still served; the last client leaving ends the process (exit 0). */
Test(metrics, readyz_says_draining_after_sigterm_while_clients_are_served)
{
    VT_SKIP_IF_DIRECT();
    int port2;
    static const char *const more[] = {"--shutdown-timeout", "60", NULL};
    vt_proxy *p = start_with_metrics(env.redis, NULL, &port2, more);
    ready_want ok = {port2, 200, "ready"}, draining = {port2, 503, "not ready: draining"};
    cr_assert(vt_wait_until(readyz_is, &ok, 10000), "/readyz never became 200");
    redisContext *c = vt_must_connect(p->port);
    redisReply *r = vt_cmd(c, "SET m:drain 1");
    vt_assert_status(r, "OK");
    freeReplyObject(r);

    cr_assert(vt_proxy_signal(p, SIGTERM));
    cr_assert(vt_wait_until(readyz_is, &draining, 10000), "/readyz does not say draining after SIGTERM");
    cr_assert(vt_wait_until(draining_is_one, &port2, 5000), "verbproxy_draining is not 1");
    vt_http_resp h = vt_http_get(port2, "/healthz");
    cr_assert_eq(h.status, 200, "/healthz while draining: %s", vt_buf_escaped(&h.raw));
    vt_http_free(&h);
    /* the connected client is still served, and so is a new one */
    r = vt_cmd(c, "GET m:drain");
    vt_assert_str(r, "1");
    freeReplyObject(r);
    redisContext *late = vt_must_connect(p->port);
    r = vt_cmd(late, "INCR m:drain");
    vt_assert_int(r, 2);
    freeReplyObject(r);
    redisFree(late);
    redisFree(c);

    int status = -1;
    cr_assert(vt_proxy_wait_exit(p, 10000, &status), "the proxy did not exit once its clients left");
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status %d", status);
    vt_proxy_free(p);
}

Test(metrics, verbproxy_info_without_metrics_port)
{
    VT_SKIP_IF_DIRECT();
    vt_proxy *p = vt_proxy_start(env.redis, NULL);
    cr_assert(p);
    redisContext *c = vt_must_connect(p->port);
    for (int i = 0; i < 4; i++)
        freeReplyObject(vt_cmd(c, "GET nokey"));
    freeReplyObject(vt_cmd(c, "INCR a b"));
    redisReply *r = vt_cmd(c, "VERBPROXY INFO all");
    cr_assert(r && r->type == REDIS_REPLY_STRING, "%s", VT_DESCRIBE(r));
    /* Counted, not timed: no usec without metrics-port. */
    cr_assert(strstr(r->str, "cmdstat_get:calls=4,failed_calls=0\r\n"), "%s", r->str);
    cr_assert(strstr(r->str, "cmdstat_incr:calls=1,failed_calls=1\r\n"), "%s", r->str);
    cr_assert(strstr(r->str, "metrics_port:0\r\n") && !strstr(r->str, "upstream_ready:"), "%s", r->str);
    freeReplyObject(r);
    r = vt_cmd(c, "VERBPROXY INFO a b");
    vt_assert_error(r, "ERR wrong number of arguments for 'verbproxy|info'");
    freeReplyObject(r);
    redisFree(c);
    cr_assert(vt_proxy_stop(p));
    vt_proxy_free(p);
}

/* ---- credentials: a Redis with requirepass ---- */

#define UPSTREAM_PASS "metrics-s3cret"

TestSuite(metrics_auth, .timeout = VT_TEST_TIMEOUT_S);

Test(metrics_auth, readyz_refuses_a_wrong_password_and_takes_the_right_one)
{
    VT_SKIP_IF_DIRECT();
    vt_redis_opts ro = {.requirepass = UPSTREAM_PASS};
    vt_env e = {0};
    e.redis = vt_redis_start(&ro);
    cr_assert(e.redis);
    int port2;
    static const char *const wrong[] = {"--upstream-pass", "not-it", NULL};
    e.proxy = start_with_metrics(e.redis, NULL, &port2, wrong);
    ready_want w = {port2, 503, "WRONGPASS"};
    cr_assert(vt_wait_until(readyz_is, &w, 10000), "/readyz is not 503 WRONGPASS");
    vt_prom s = scrape(port2);
    cr_assert(val(&s, "verbproxy_upstream_connect_failures_total", "reason=\"auth\"") >= 1);
    cr_assert(val(&s, "verbproxy_upstream_auth_failures_total", "") >= 1);
    cr_assert_eq(val(&s, "verbproxy_up", ""), 0);
    vt_prom_free(&s);
    cr_assert(vt_proxy_stop(e.proxy));
    vt_proxy_free(e.proxy);

    static const char *const right[] = {"--upstream-pass", UPSTREAM_PASS, NULL};
    e.proxy = start_with_metrics(e.redis, NULL, &port2, right);
    ready_want ok = {port2, 200, "ready"};
    cr_assert(vt_wait_until(readyz_is, &ok, 10000), "/readyz is not 200 with the right password");
    vt_env_stop(&e);
}

/* A Redis whose user "app" may run anything but SCRIPT (LOAD), and a
 * proxy (metrics on *port2) that logs in as app. */
static void start_script_denied(vt_env *e, int *port2)
{
    static const char *const user[] = {"--user", "app",   "on",      ">app-pw", "~*",
                                       "&*",     "+@all", "-script", NULL};
    vt_redis_opts ro = {.extra_args = user, .standalone = true};
    e->redis = vt_redis_start(&ro);
    cr_assert(e->redis);
    static const char *const creds[] = {"--upstream-user", "app", "--upstream-pass", "app-pw", NULL};
    e->proxy = start_with_metrics(e->redis, NULL, port2, creds);
}

/* Ready means the verbs' scripts can be loaded, checked, not assumed: an
 * upstream user that may not run SCRIPT answers the probe's PING, but not
 * its SCRIPT LOAD. Once Redis allows it, the next check says ready. */
Test(metrics_auth, readyz_fails_while_the_scripts_cannot_be_loaded)
{
    VT_SKIP_IF_DIRECT();
    vt_env e = {0};
    int port2;
    start_script_denied(&e, &port2);
    ready_want w = {port2, 503, "SCRIPT LOAD of"};
    cr_assert(vt_wait_until(readyz_is, &w, 10000), "/readyz is not 503 while SCRIPT is denied");
    w.body_has = "NOPERM";
    cr_assert(vt_wait_until(readyz_is, &w, 10000), "/readyz does not give Redis's NOPERM");

    redisContext *direct = vt_must_connect(e.redis->port);
    redisReply *r = vt_cmd(direct, "ACL SETUSER app +script");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    redisFree(direct);
    ready_want ok = {port2, 200, "ready"};
    cr_assert(vt_wait_until(readyz_is, &ok, 10000), "/readyz is not 200 once SCRIPT is allowed");
    vt_env_stop(&e);
}

/* A verb whose script the server will not load answers the server's own
 * refusal, never NOSCRIPT: alone, pipelined three deep (the two behind the
 * first load meet NOSCRIPT and get the same), and again once more. The
 * refusal is logged once for the connection, with the verb, and counted;
 * plain commands on the same connection are answered as ever. */
Test(metrics_auth, a_verb_whose_script_is_refused_answers_the_refusal_logged_once_and_counted)
{
    VT_SKIP_IF_DIRECT();
    vt_env e = {0};
    int port2;
    start_script_denied(&e, &port2);
    /* Redis's words to that user's SCRIPT LOAD */
    redisContext *direct = vt_must_connect(e.redis->port);
    redisReply *r = vt_cmd(direct, "AUTH app app-pw");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(direct, "SCRIPT LOAD %s", "return 1");
    cr_assert(r && r->type == REDIS_REPLY_ERROR, "SCRIPT LOAD was not refused: %s", VT_DESCRIBE(r));
    char refusal[256];
    snprintf(refusal, sizeof(refusal), "%s", r->str);
    freeReplyObject(r);
    redisFree(direct);

    redisContext *c = vt_must_connect(e.proxy->port);
    r = vt_cmd(c, "ZTICK zt 1 10");
    cr_assert(r && r->type == REDIS_REPLY_ERROR && strcmp(r->str, refusal) == 0, "ZTICK: want \"%s\", got %s",
              refusal, VT_DESCRIBE(r));
    freeReplyObject(r);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(redisAppendCommand(c, "ZTICK zt 1 10"), REDIS_OK);
    cr_assert_eq(redisAppendCommand(c, "SET plain ok"), REDIS_OK);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(redisGetReply(c, (void **)&r), REDIS_OK, "reply %d of the pipeline", i);
        if (i < 3)
            cr_assert(r->type == REDIS_REPLY_ERROR && strcmp(r->str, refusal) == 0,
                      "pipelined ZTICK %d: want \"%s\", got %s", i, refusal, VT_DESCRIBE(r));
        else
            vt_assert_status(r, "OK");
        freeReplyObject(r);
    }
    r = vt_cmd(c, "GET plain");
    vt_assert_str(r, "ok");
    freeReplyObject(r);

    vt_prom s = scrape(port2);
    cr_assert_geq(val(&s, "verbproxy_script_load_failures_total", ""), 2, "two loads were refused at least");
    vt_prom_free(&s);
    char *log = vt_proxy_log(e.proxy);
    cr_assert_not_null(log);
    int lines = 0;
    for (const char *at = log; (at = strstr(at, "SCRIPT LOAD of verb ztick refused")); at++)
        lines++;
    cr_assert_eq(lines, 1, "the refusal was logged %d times for one connection:\n%s", lines, log);
    free(log);
    redisFree(c);
    vt_env_stop(&e);
}

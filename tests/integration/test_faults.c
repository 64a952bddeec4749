/* test_faults.c - the link between verbproxy and Redis breaks, stalls, crawls.
 *
 * Clients pipeline mixed traffic through verbproxy -> faultproxy -> redis:
 * several workers at once (GET/SET/INCR with known values, values over
 * 16 KiB so replies stream, MULTI/EXEC on some, ZTICK, QPOP and
 * LOCKRELEASE), every reply checked byte for byte (tests/support/traffic.h).
 * Then the link misbehaves (tests/support/faultproxy.h): the reply or the
 * request stream is cut or reset at a byte, on every connection, or by the
 * test at any moment; replies or requests stall; both directions arrive in
 * pieces of a few bytes, or slowly. And Redis is SIGKILLed mid-pipeline.
 *
 * What every client must see, for every command: the right reply in order,
 * or a clean close after right replies (what a client of a Redis that went
 * away sees). Never a wrong reply, a reply out of order, a reply of someone
 * else, or a hang past the session deadline. Faults that lose nothing
 * (stalls, slices) must cost nobody a reply: every session completes and
 * bystanders see nothing. Afterwards the proxy is alive and serves new
 * clients; under ASan it has nothing to report (it would have died).
 *
 * Each story was seen to fail with the proxy broken on purpose: a client
 * left open after its upstream is lost (the cut, reset and kill stories
 * hang), or given a made-up error for what was never answered (they see a
 * wrong reply); a bulk's CRLF split between reads taken as its end (the
 * slices on the link to Redis); the request parser not waiting for the
 * byte after a header's CR (the slices on the clients' links); clients held
 * back for a backlog never resumed (the faults_tight stalls, shared); a
 * shared connection dropped when a client leaves owed replies (the
 * vanishing clients); and with the check broken (every story).
 *
 * Proxy-only (no verbproxy to put in front of the link in VP_TEST_DIRECT). */
#include "tests/support/checks.h"
#include "tests/support/bystander.h"
#include "tests/support/faultproxy.h"
#include "tests/support/traffic.h"

#define WORKERS 6
#define TX_WORKERS 2
#define SESSIONS 6            /* per worker and phase */
#define STORY_MS 30000        /* a story's phase must end within this */
#define CUT_REPLIES_AT 150001 /* odd offsets: inside a reply, mostly inside a big one */
#define CUT_REQUESTS_AT 90001
#define STALL_MS 200
#define TIGHT_BUFFER_LIMIT "64kb"
#define BYSTANDERS 3
#define BYSTANDER_REPLIES 24 /* two batches each */

static vt_redis *redis;
static vt_faultproxy *fp;
static vt_proxy *proxy;

/* redis <- fault proxy <- verbproxy (with extra flags, may be NULL). */
static void start_all(const char *const *proxy_args)
{
    if (vt_direct_mode()) return;
    redis = vt_redis_start(NULL);
    cr_assert(redis, "redis-server did not start (see stderr)");
    fp = vt_faultproxy_start(redis->port);
    cr_assert(fp, "the fault proxy did not start (see stderr)");
    char upstream[32];
    snprintf(upstream, sizeof(upstream), "127.0.0.1:%d", vt_faultproxy_port(fp));
    proxy = vt_proxy_start_upstream(upstream, &(vt_proxy_opts){.extra_args = proxy_args});
    cr_assert(proxy, "verbproxy did not start (see stderr)");
}

static void setup(void)
{
    start_all(NULL);
}

/* A small buffer-limit: while the link stalls, clients are held back and
 * resumed (backlog towards the upstream, replies towards slow clients). */
static void setup_tight(void)
{
    static const char *const tight[] = {"--buffer-limit", TIGHT_BUFFER_LIMIT, NULL};
    start_all(tight);
}

static void teardown(void)
{
    vt_env env = {.redis = redis, .proxy = proxy};
    if (redis || proxy) vt_env_stop(&env); /* a proxy that died fails the test */
    vt_faultproxy_stop(fp);
    redis = NULL;
    proxy = NULL;
    fp = NULL;
}

TestSuite(faults, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);
TestSuite(faults_tight, .init = setup_tight, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

static vt_traffic *traffic_start_opts(vt_traffic_opts o)
{
    o.workers = WORKERS;
    o.tx_workers = TX_WORKERS;
    o.verbs = true;
    vt_traffic *t = vt_traffic_start(proxy->port, &o);
    cr_assert(t, "traffic did not start");
    return t;
}

static vt_traffic *traffic_start(int sessions)
{
    return traffic_start_opts((vt_traffic_opts){.sessions = sessions});
}

static void print_result(const char *phase, const vt_traffic_result *r)
{
    fprintf(stderr,
            "vt: %s::%s %s: %lld sessions (%lld complete, %lld closed, %lld unavailable), %lld replies\n",
            criterion_current_suite->name, criterion_current_test->name, phase, r->sessions, r->complete,
            r->closed, r->unavailable, r->replies);
}

/* Every worker ran its sessions; nothing wrong, out of order or late. */
static vt_traffic_result traffic_finish(vt_traffic *t, const char *phase)
{
    vt_traffic_result r;
    bool ok = vt_traffic_finish(t, &r);
    if (getenv("VP_TEST_VERBOSE")) print_result(phase, &r);
    cr_assert(ok, "%s: %s", phase, r.why);
    return r;
}

/* A fault that loses nothing: every session complete. */
static void expect_all_complete(const vt_traffic_result *r, const char *phase)
{
    cr_assert(r->complete == r->sessions && r->sessions == WORKERS * SESSIONS,
              "%s: %lld of %lld sessions complete (%lld closed), expected all %d", phase, r->complete,
              r->sessions, r->closed, WORKERS * SESSIONS);
}

/* After the story: the proxy is alive, and a clean round of traffic (the
 * faults disarmed) gets every reply. */
static void expect_proxy_serves(void)
{
    cr_assert(vt_proxy_alive(proxy), "verbproxy died");
    vt_traffic_result r = traffic_finish(traffic_start(2), "after the faults");
    cr_assert(r.complete == r.sessions && r.sessions == WORKERS * 2,
              "after the faults: %lld of %lld sessions complete (%lld closed)", r.complete, r.sessions,
              r.closed);
}

/* A fault on every upstream connection while the traffic runs. */
static void story_fault_on_every_connection(vt_fault f)
{
    VT_SKIP_IF_DIRECT();
    f.scope = VT_FP_EACH;
    int id = vt_faultproxy_arm(fp, &f);
    cr_assert(id >= 0);
    vt_traffic_result r = traffic_finish(traffic_start(SESSIONS), "under the fault");
    cr_assert(vt_faultproxy_fired(fp, id) >= 1, "the fault never fired (%lld bytes each way)",
              vt_faultproxy_stats(fp).bytes[f.dir]);
    cr_assert(r.closed >= 1, "the fault fired %lld times and closed no client: was it inside a pipeline?",
              vt_faultproxy_fired(fp, id));
    cr_assert(r.replies > 0, "no reply got through at all");
    vt_faultproxy_disarm(fp, id);
    expect_proxy_serves();
}

Test(faults, reply_streams_cut_at_a_byte_give_right_replies_then_a_clean_close)
{
    story_fault_on_every_connection(
        (vt_fault){.action = VT_FP_CUT, .dir = VT_FP_FROM_TARGET, .at = CUT_REPLIES_AT});
}

Test(faults, request_streams_cut_at_a_byte_give_right_replies_then_a_clean_close)
{
    story_fault_on_every_connection(
        (vt_fault){.action = VT_FP_CUT, .dir = VT_FP_TO_TARGET, .at = CUT_REQUESTS_AT});
}

Test(faults, reply_streams_reset_at_a_byte_give_right_replies_then_a_close)
{
    story_fault_on_every_connection(
        (vt_fault){.action = VT_FP_RESET, .dir = VT_FP_FROM_TARGET, .at = CUT_REPLIES_AT});
}

Test(faults, request_streams_reset_at_a_byte_give_right_replies_then_a_close)
{
    story_fault_on_every_connection(
        (vt_fault){.action = VT_FP_RESET, .dir = VT_FP_TO_TARGET, .at = CUT_REQUESTS_AT});
}

static bool someone_owed(void *t)
{
    return vt_traffic_owed(t) > 0;
}

static bool someone_owed_through_fp(void *t)
{
    return vt_traffic_owed(t) > 0 && vt_faultproxy_stats(fp).open > 0;
}

/* Wait for `more` replies; if the traffic failed or stalled, stop it and
 * fail saying why (a worker's reason, or a stall). */
static void expect_traffic_flows(vt_traffic *t, const char *when)
{
    if (vt_traffic_wait_replies(t, 400, STORY_MS)) return;
    vt_traffic_result r;
    bool ok = vt_traffic_stop(t, &r);
    print_result(when, &r);
    cr_assert(false, "traffic stopped %s: %s", when, ok ? "no 400 more replies in time" : r.why);
}

/* One fault of `action` on every upstream connection open now. A client
 * owed replies may have no upstream connection open at that instant (with
 * own connections: a session that just started, its connection still being
 * made), so an arming can hit none; arm again, with a deadline, until one is
 * hit. The connections hit. */
static long long fault_open_connections(vt_traffic *t, vt_fp_action action, int *armed)
{
    long long hit = 0;
    for (int tries = 0; hit == 0 && tries < 6; tries++) {
        cr_assert(vt_wait_until(someone_owed_through_fp, t, STORY_MS),
                  "no client is owed replies with an upstream connection open");
        int id = vt_faultproxy_arm(fp, &(vt_fault){.action = action, .scope = VT_FP_OPEN});
        cr_assert(id >= 0);
        (*armed)++;
        hit = vt_faultproxy_fired(fp, id);
        vt_faultproxy_disarm(fp, id);
    }
    return hit;
}

/* The test cuts, then resets, every upstream connection at moments of its
 * choosing while replies stream. A connection still being set up (a
 * client's own one, opened at its MULTI) is hit too: nothing of the
 * client's was sent on it, so what waits for it is answered "upstream
 * unavailable", and its next request connects again (docs/compatibility.md,
 * "Upstream unreachable"); that session's later replies are then for
 * requests of which some never ran, so they are only counted. */
Test(faults, connections_cut_and_reset_by_the_test_mid_traffic)
{
    VT_SKIP_IF_DIRECT();
    vt_traffic *t = traffic_start_opts((vt_traffic_opts){.allow_unavailable = true, .allow_recovery = true});
    const vt_fp_action actions[] = {VT_FP_CUT, VT_FP_RESET};
    long long fired = 0;
    int armed = 0;
    for (int i = 0; i < 4; i++) {
        char when[32];
        snprintf(when, sizeof(when), "before fault %d", i);
        expect_traffic_flows(t, when);
        fired += fault_open_connections(t, actions[i % 2], &armed);
    }
    /* The faults may all have hit connections with nothing in flight at
     * that instant (every reply read): nobody is closed then. Fault again,
     * in turn, until a client is (its session ends soon after its cut, so
     * the traffic runs on between faults). */
    for (int i = 0; vt_traffic_closed(t) == 0 && armed + 6 <= VT_FP_MAX_FAULTS; i++) {
        expect_traffic_flows(t, "between the faults");
        fired += fault_open_connections(t, actions[i % 2], &armed);
    }
    expect_traffic_flows(t, "after the faults");
    vt_traffic_result r;
    bool ok = vt_traffic_stop(t, &r);
    if (getenv("VP_TEST_VERBOSE")) print_result("under the faults", &r);
    cr_assert(ok, "%s", r.why);
    cr_assert(fired >= 4, "the faults hit %lld connections, expected at least one each", fired);
    cr_assert(r.closed >= 1, "no client was closed by %lld cuts and resets", fired);
    expect_proxy_serves();
}

/* ---- faults that lose nothing: nobody may lose a reply ---- */

/* Bystanders on their own connections, under way before the fault. */
static vt_bystanders *bystanders_start(void)
{
    vt_bystanders *b = vt_bystanders_start(proxy->port, BYSTANDERS);
    cr_assert(b, "the bystanders did not start");
    cr_assert(vt_bystanders_wait(b, BYSTANDER_REPLIES, STORY_MS), "the bystanders did not get going");
    return b;
}

/* Still served after the fault, and nothing went wrong for them. */
static void bystanders_check(vt_bystanders *b)
{
    char why[512] = "no more replies";
    bool served = vt_bystanders_wait(b, BYSTANDER_REPLIES, STORY_MS);
    if (!served) vt_bystanders_failed(b, why, sizeof(why));
    cr_assert(served, "the bystanders stopped being served: %s", why);
    vt_assert_bystanders_ok(b);
}

static bool everyone_owed(void *t)
{
    return vt_traffic_owed(t) == WORKERS;
}

static int stalled_fault = -1;

static bool requests_held(void *unused)
{
    (void)unused;
    return vt_faultproxy_held(fp, stalled_fault) > 256;
}

/* Replies stop on every upstream connection (after a few KiB of each)
 * until the test releases them, once every worker has sent its pipeline
 * and waits for replies. */
static void story_replies_stalled_until_released(void)
{
    VT_SKIP_IF_DIRECT();
    vt_bystanders *by = bystanders_start();
    int id = vt_faultproxy_arm(
        fp, &(vt_fault){.action = VT_FP_STALL, .dir = VT_FP_FROM_TARGET, .at = 20011, .scope = VT_FP_EACH});
    cr_assert(id >= 0);
    vt_traffic *t = traffic_start(SESSIONS);
    cr_assert(vt_faultproxy_wait_fired(fp, id, 1, STORY_MS), "no reply stream reached the stall");
    cr_assert(vt_wait_until(everyone_owed, t, STORY_MS), "only %d of %d workers wait for replies",
              vt_traffic_owed(t), WORKERS);
    vt_faultproxy_release(fp, id);
    vt_traffic_result r = traffic_finish(t, "stalled, then released");
    expect_all_complete(&r, "stalled, then released");
    bystanders_check(by);
    expect_proxy_serves();
}

/* Requests stop for STALL_MS on every upstream connection, once each. */
static void story_requests_stalled_for_a_while(void)
{
    VT_SKIP_IF_DIRECT();
    vt_bystanders *by = bystanders_start();
    int id = vt_faultproxy_arm(fp, &(vt_fault){.action = VT_FP_STALL,
                                               .dir = VT_FP_TO_TARGET,
                                               .at = 50021,
                                               .scope = VT_FP_EACH,
                                               .stall_ms = STALL_MS});
    cr_assert(id >= 0);
    vt_traffic_result r = traffic_finish(traffic_start(SESSIONS), "requests stalled");
    cr_assert(vt_faultproxy_fired(fp, id) >= 1, "the stall never fired");
    expect_all_complete(&r, "requests stalled");
    bystanders_check(by);
    expect_proxy_serves();
}

Test(faults, replies_stalled_until_released_all_arrive_in_order)
{
    story_replies_stalled_until_released();
}

Test(faults, requests_stalled_for_a_while_lose_nothing)
{
    story_requests_stalled_for_a_while();
}

Test(faults_tight, replies_stalled_until_released_all_arrive_in_order)
{
    story_replies_stalled_until_released();
}

Test(faults_tight, requests_stalled_for_a_while_lose_nothing)
{
    story_requests_stalled_for_a_while();
}

/* Both directions in pieces: on every connection, SLICE_WINDOWS windows
 * of 4 KiB in pieces of 1..7 bytes, each followed by 36 KiB in pieces of
 * up to 1460 bytes with pauses (a slow link); replies and requests split
 * anywhere, in streamed values, in headers, between replies. */
#define SLICE_WINDOWS 5
#define SLICE_TINY (4 * 1024)
#define SLICE_PERIOD (40 * 1024)

Test(faults, replies_and_requests_in_small_pieces_lose_nothing)
{
    VT_SKIP_IF_DIRECT();
    vt_bystanders *by = bystanders_start();
    for (int d = 0; d < 2; d++) {
        for (int k = 0; k < SLICE_WINDOWS; k++) {
            long long at = (long long)k * SLICE_PERIOD;
            vt_fault tiny = {.action = VT_FP_SLICE,
                             .dir = d,
                             .scope = VT_FP_EACH,
                             .at = at,
                             .chunk = 7,
                             .random = true,
                             .seed = 17u * (unsigned)(k + 1) + (unsigned)d,
                             .pause_us = 20,
                             .len = SLICE_TINY};
            vt_fault slow = tiny;
            slow.at = at + SLICE_TINY;
            slow.chunk = 1460;
            slow.pause_us = 200;
            slow.len = SLICE_PERIOD - SLICE_TINY;
            cr_assert(vt_faultproxy_arm(fp, &tiny) >= 0);
            cr_assert(vt_faultproxy_arm(fp, &slow) >= 0);
        }
    }
    vt_traffic_result r = traffic_finish(traffic_start(SESSIONS), "sliced");
    expect_all_complete(&r, "sliced");
    bystanders_check(by);
    expect_proxy_serves();
}

/* ---- Redis dies ---- */

#define VICTIM_GETS 100

/* A raw client owed replies for sure when Redis dies: VICTIM_GETS GETs,
 * then a BLPOP that never returns, then one more GET. */
static int victim_start(int port, vt_buf *want)
{
    redisContext *admin = vt_must_connect(redis->port);
    redisReply *r = vt_cmd(admin, "SET vtf:victim 0123456789");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    redisFree(admin);
    int fd = vt_must_sock(port);
    vt_buf req = {0};
    for (int i = 0; i < VICTIM_GETS; i++) {
        vt_buf_cmd(&req, "GET", "vtf:victim", NULL);
        vt_buf_append_str(want, "$10\r\n0123456789\r\n");
    }
    vt_buf_cmd(&req, "BLPOP", "vtf:never", "0", NULL);
    vt_buf_cmd(&req, "GET", "vtf:victim", NULL);
    cr_assert(vt_sock_send_buf(fd, &req));
    vt_buf_free(&req);
    cr_assert(vt_wait_until_blocked(redis->port, 1, VT_READ_DEADLINE_MS), "the victim's BLPOP never blocked");
    return fd;
}

/* Everything before the BLPOP, then a close, within the deadline. */
static void victim_check(int fd, const vt_buf *want)
{
    vt_buf got = {0};
    cr_assert(vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS), "the victim was left hanging after %zu bytes",
              got.len);
    cr_assert(got.len == want->len && memcmp(got.data, want->data, want->len) == 0,
              "the victim expected its %d GET replies then a close, got %zu bytes: \"%s\"", VICTIM_GETS,
              got.len, vt_buf_escaped(&got));
    vt_buf_free(&got);
    close(fd);
}

/* Redis is SIGKILLed while clients pipeline through a verbproxy in front
 * of it (no fault proxy: the real thing). Sessions that start while it is
 * down get "upstream unavailable" for what they send. Once it is back,
 * everyone is served again. */
Test(faults, redis_sigkilled_mid_pipeline_gives_right_replies_then_a_close)
{
    VT_SKIP_IF_DIRECT();
    vt_proxy *direct = vt_proxy_start(redis, NULL);
    cr_assert(direct, "verbproxy did not start");
    vt_traffic *t = vt_traffic_start(direct->port, &(vt_traffic_opts){.workers = WORKERS,
                                                                      .tx_workers = TX_WORKERS,
                                                                      .verbs = true,
                                                                      .allow_unavailable = true});
    cr_assert(t);
    vt_buf want = {0};
    int victim = victim_start(direct->port, &want);
    cr_assert(vt_traffic_wait_replies(t, 1000, STORY_MS), "traffic did not get going");
    cr_assert(vt_wait_until(someone_owed, t, STORY_MS), "no worker is owed replies");
    vt_redis_kill(redis);

    victim_check(victim, &want);
    vt_traffic_result r;
    bool ok = vt_traffic_stop(t, &r);
    if (getenv("VP_TEST_VERBOSE")) print_result("Redis killed", &r);
    cr_assert(ok, "Redis killed: %s", r.why);
    cr_assert(vt_proxy_alive(direct), "verbproxy died with Redis");

    cr_assert(vt_redis_launch(redis), "redis-server did not restart");
    t = vt_traffic_start(
        direct->port,
        &(vt_traffic_opts){.workers = WORKERS, .tx_workers = TX_WORKERS, .sessions = 2, .verbs = true});
    cr_assert(t);
    r = traffic_finish(t, "Redis back");
    cr_assert(r.complete == r.sessions && r.sessions == WORKERS * 2,
              "Redis back: %lld of %lld sessions complete (%lld closed)", r.complete, r.sessions, r.closed);
    vt_buf_free(&want);
    cr_assert(vt_proxy_stop(direct), "verbproxy did not stop cleanly");
    vt_proxy_free(direct);
}

/* Requests stop on the link, so every worker is owed replies Redis never
 * saw; then Redis is SIGKILLed and the link let go. */
Test(faults, redis_sigkilled_with_requests_held_on_the_link_closes_the_clients_owed)
{
    VT_SKIP_IF_DIRECT();
    vt_traffic *t = vt_traffic_start(proxy->port, &(vt_traffic_opts){.workers = WORKERS,
                                                                     .tx_workers = TX_WORKERS,
                                                                     .verbs = true,
                                                                     .allow_unavailable = true});
    cr_assert(t);
    cr_assert(vt_traffic_wait_replies(t, 500, STORY_MS), "traffic did not get going");
    int id = vt_faultproxy_arm(
        fp, &(vt_fault){.action = VT_FP_STALL, .dir = VT_FP_TO_TARGET, .scope = VT_FP_EACH});
    cr_assert(id >= 0);
    cr_assert(vt_wait_until(everyone_owed, t, STORY_MS), "only %d of %d workers wait for replies",
              vt_traffic_owed(t), WORKERS);
    /* Requests written after the stall (more than the proxy's own PING)
     * are what Redis never sees: without them every request may have been
     * answered before the kill, and nobody need be closed. */
    stalled_fault = id;
    cr_assert(vt_wait_until(requests_held, NULL, STORY_MS), "the stall holds %lld request bytes",
              vt_faultproxy_held(fp, id));
    vt_redis_kill(redis);
    vt_faultproxy_release(fp, id);

    vt_traffic_result r;
    bool ok = vt_traffic_stop(t, &r);
    if (getenv("VP_TEST_VERBOSE")) print_result("Redis killed", &r);
    cr_assert(ok, "Redis killed: %s", r.why);
    cr_assert(r.closed >= 1, "no client owed replies was closed");
    cr_assert(vt_proxy_alive(proxy), "verbproxy died with Redis");
    cr_assert(vt_redis_launch(redis), "redis-server did not restart");
    expect_proxy_serves();
}

/* ---- the clients' side of the proxy ---- */

/* A second fault proxy in front of verbproxy: clients -> front -> verbproxy
 * -> fault proxy -> redis. */
static vt_faultproxy *front_start(void)
{
    vt_faultproxy *front = vt_faultproxy_start(proxy->port);
    cr_assert(front, "the front fault proxy did not start");
    return front;
}

static vt_traffic *traffic_via(vt_faultproxy *front, int sessions)
{
    vt_traffic *t = vt_traffic_start(vt_faultproxy_port(front), &(vt_traffic_opts){.workers = WORKERS,
                                                                                   .tx_workers = TX_WORKERS,
                                                                                   .sessions = sessions,
                                                                                   .verbs = true});
    cr_assert(t, "traffic did not start");
    return t;
}

/* Requests reach the proxy in pieces of 1..7 bytes (the proxy's request
 * parser resumes anywhere: inside a bulk header, a CRLF, a 20 KiB value)
 * and its replies leave in pieces: nothing lost, nobody else slowed. */
Test(faults, client_links_in_small_pieces_lose_nothing)
{
    VT_SKIP_IF_DIRECT();
    vt_bystanders *by = bystanders_start();
    vt_faultproxy *front = front_start();
    for (int d = 0; d < 2; d++)
        cr_assert(vt_faultproxy_arm(front, &(vt_fault){.action = VT_FP_SLICE,
                                                       .dir = d,
                                                       .scope = VT_FP_EACH,
                                                       .chunk = 7,
                                                       .random = true,
                                                       .seed = 99u + (unsigned)d,
                                                       .pause_us = 20,
                                                       .len = 8 * 1024}) >= 0);
    vt_traffic_result r = traffic_finish(traffic_via(front, SESSIONS), "client links sliced");
    expect_all_complete(&r, "client links sliced");
    vt_faultproxy_stop(front);
    bystanders_check(by);
    expect_proxy_serves();
}

/* Clients vanish mid-pipeline: first their request streams are cut (the
 * proxy sees a FIN after part of a pipeline), then their connections reset
 * while replies stream to them. The bystanders, on connections of their
 * own, lose nothing. */
static void clients_vanish(vt_faultproxy *front, vt_fault f, const char *phase)
{
    f.scope = VT_FP_EACH;
    int id = vt_faultproxy_arm(front, &f);
    cr_assert(id >= 0);
    vt_traffic_result r = traffic_finish(traffic_via(front, SESSIONS / 2), phase);
    cr_assert(vt_faultproxy_fired(front, id) == r.sessions, "%s: fired %lld times in %lld sessions", phase,
              vt_faultproxy_fired(front, id), r.sessions);
    cr_assert(r.closed == r.sessions, "%s: %lld of %lld sessions were not cut", phase, r.sessions - r.closed,
              r.sessions);
    vt_faultproxy_disarm(front, id);
}

Test(faults, clients_cut_and_reset_mid_pipeline_cost_nobody_else_a_reply)
{
    VT_SKIP_IF_DIRECT();
    vt_bystanders *by = bystanders_start();
    vt_faultproxy *front = front_start();
    clients_vanish(front, (vt_fault){.action = VT_FP_CUT, .dir = VT_FP_TO_TARGET, .at = 30001},
                   "requests cut");
    clients_vanish(front, (vt_fault){.action = VT_FP_RESET, .dir = VT_FP_FROM_TARGET, .at = 40001},
                   "reset mid-reply");
    vt_faultproxy_stop(front);
    bystanders_check(by);
    expect_proxy_serves();
}

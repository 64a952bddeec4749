/* test_faultproxy.c - the fault proxy itself does what its header says.
 *
 * tests/support/faultproxy.h sits between verbproxy and Redis in
 * test_faults; these stories check it on its own, a raw client -> fault
 * proxy -> redis-server, so a fault story that passes is not passing
 * because a fault never happened: bytes pass unchanged, a cut ends the
 * stream at exactly the byte asked for with a FIN, a reset is an RST, a
 * stall holds bytes until released (or for its time), a slice delivers in
 * pieces, a spent fault leaves later connections alone, and a target that
 * is down resets the connection. And the checked traffic the fault
 * stories run notices a wrong reply (FLUSHALL under it) and takes a cut
 * for a close, not a failure. No verbproxy here. */
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "tests/support/checks.h"
#include "tests/support/faultproxy.h"
#include "tests/support/traffic.h"

#define VALUE_LEN 100
#define NOTHING_MS 300 /* how long "nothing arrives" is watched */
#define STALL_MS 300
#define SLICE_PAUSE_US 20000

static vt_redis *redis;
static vt_faultproxy *fp;
static char value[VALUE_LEN + 1];

static void setup(void)
{
    redis = vt_redis_start(NULL);
    cr_assert(redis, "redis-server did not start (see stderr)");
    fp = vt_faultproxy_start(redis->port);
    cr_assert(fp, "the fault proxy did not start (see stderr)");
    for (int i = 0; i < VALUE_LEN; i++)
        value[i] = (char)('a' + i % 26);
    redisContext *c = vt_must_connect(redis->port);
    redisReply *r = vt_cmd(c, "SET fp:v %s", value);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    redisFree(c);
}

static void teardown(void)
{
    vt_faultproxy_stop(fp);
    vt_redis_free(redis);
    fp = NULL;
    redis = NULL;
}

TestSuite(faultproxy, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

/* The reply to GET fp:v, byte for byte. */
static void want_reply(vt_buf *want)
{
    vt_buf_reset(want);
    vt_buf_append_str(want, "$100\r\n");
    vt_buf_append_str(want, value);
    vt_buf_append_str(want, "\r\n");
}

static int must_sock(void)
{
    return vt_must_sock(vt_faultproxy_port(fp));
}

Test(faultproxy, without_a_fault_bytes_pass_unchanged_and_a_half_close_is_passed_on)
{
    redisContext *c = vt_must_connect(vt_faultproxy_port(fp));
    static char big[300 * 1000];
    memset(big, 'x', sizeof(big));
    redisReply *r = vt_cmd(c, "SET fp:big %b", big, sizeof(big));
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(c, "GET fp:big");
    cr_assert(r && r->type == REDIS_REPLY_STRING && r->len == sizeof(big) && memcmp(r->str, big, r->len) == 0,
              "the big value came back changed");
    freeReplyObject(r);
    redisFree(c);

    /* printf 'PING\r\n' | nc -N: the reply, then the close */
    int fd = must_sock();
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(fd, "PING\r\n"));
    shutdown(fd, SHUT_WR);
    cr_assert(vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS), "no close after the half-close");
    vt_assert_bytes(&got, "+PONG\r\n");
    cr_assert(got.err == 0, "a reset (%s), not a close", strerror(got.err));
    vt_buf_free(&got);
    close(fd);
    vt_fp_stats s = vt_faultproxy_stats(fp);
    cr_assert(s.accepted == 2 && s.refused == 0 && s.fired == 0, "%lld accepted, %lld refused, %lld fired",
              s.accepted, s.refused, s.fired);
}

Test(faultproxy, a_cut_ends_the_reply_stream_at_exactly_that_byte_with_a_fin_and_is_spent)
{
    int id = vt_faultproxy_arm(fp, &(vt_fault){.action = VT_FP_CUT, .dir = VT_FP_FROM_TARGET, .at = 50});
    cr_assert(id >= 0);
    vt_buf want = {0}, got = {0};
    want_reply(&want);
    int fd = must_sock();
    cr_assert(vt_sock_send_str(fd, "GET fp:v\r\n"));
    cr_assert(vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS), "not closed");
    cr_assert(got.len == 50 && memcmp(got.data, want.data, 50) == 0,
              "expected the first 50 bytes, got \"%s\"", vt_buf_escaped(&got));
    cr_assert(got.err == 0, "a reset (%s), not a FIN", strerror(got.err));
    close(fd);
    cr_assert_eq(vt_faultproxy_fired(fp, id), 1);

    /* spent: the next connection gets the whole reply */
    fd = must_sock();
    vt_buf_reset(&got);
    cr_assert(vt_sock_send_str(fd, "GET fp:v\r\n"));
    cr_assert(vt_sock_read_len(fd, &got, want.len, VT_READ_DEADLINE_MS), "got \"%s\"", vt_buf_escaped(&got));
    cr_assert(got.len == want.len && memcmp(got.data, want.data, want.len) == 0);
    close(fd);
    cr_assert_eq(vt_faultproxy_fired(fp, id), 1);
    vt_buf_free(&want);
    vt_buf_free(&got);
}

static bool fp_a_set(void *arg)
{
    (void)arg;
    redisContext *c = vt_must_connect(redis->port);
    redisReply *r = vt_cmd(c, "EXISTS fp:a");
    bool set = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    redisFree(c);
    return set;
}

Test(faultproxy, a_cut_of_the_request_stream_delivers_what_came_before_it_only)
{
    /* "SET fp:a 1\r\n" is 12 bytes: Redis gets it, not the SET after it;
     * its reply would come after the cut, so the client sees just the close */
    cr_assert(vt_faultproxy_arm(fp, &(vt_fault){.action = VT_FP_CUT, .dir = VT_FP_TO_TARGET, .at = 12}) >= 0);
    int fd = must_sock();
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(fd, "SET fp:a 1\r\nSET fp:b 2\r\n"));
    cr_assert(vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS), "not closed");
    vt_assert_bytes(&got, "");
    cr_assert(got.err == 0, "a reset (%s), not a FIN", strerror(got.err));
    close(fd);
    cr_assert(vt_wait_until(fp_a_set, NULL, VT_READ_DEADLINE_MS),
              "Redis did not run the command before the cut");
    redisContext *c = vt_must_connect(redis->port);
    redisReply *r = vt_cmd(c, "EXISTS fp:b");
    vt_assert_int(r, 0);
    freeReplyObject(r);
    redisFree(c);
    vt_buf_free(&got);
}

Test(faultproxy, a_reset_is_an_rst)
{
    cr_assert(vt_faultproxy_arm(fp, &(vt_fault){.action = VT_FP_RESET, .dir = VT_FP_FROM_TARGET, .at = 50}) >=
              0);
    vt_buf want = {0}, got = {0};
    want_reply(&want);
    int fd = must_sock();
    cr_assert(vt_sock_send_str(fd, "GET fp:v\r\n"));
    cr_assert(vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS), "not closed");
    cr_assert(got.err == ECONNRESET, "expected a reset, got %s after \"%s\"",
              got.err ? strerror(got.err) : "a FIN", vt_buf_escaped(&got));
    cr_assert(got.len <= 50 && memcmp(got.data ? got.data : "", want.data, got.len) == 0,
              "more than the 50 bytes, or other bytes: \"%s\"", vt_buf_escaped(&got));
    close(fd);
    vt_buf_free(&want);
    vt_buf_free(&got);
}

static bool request_forwarded(void *arg)
{
    (void)arg;
    return vt_faultproxy_stats(fp).bytes[VT_FP_TO_TARGET] >= (long long)strlen("PING\r\n");
}

Test(faultproxy, a_stall_holds_replies_until_released)
{
    int id = vt_faultproxy_arm(
        fp, &(vt_fault){.action = VT_FP_STALL, .dir = VT_FP_FROM_TARGET, .scope = VT_FP_EACH});
    cr_assert(id >= 0);
    int fd = must_sock();
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(fd, "PING\r\n"));
    cr_assert(vt_wait_until(request_forwarded, NULL, VT_READ_DEADLINE_MS), "the request did not get through");
    cr_assert(!vt_sock_read_len(fd, &got, 1, NOTHING_MS), "a stalled reply arrived: \"%s\"",
              vt_buf_escaped(&got));
    cr_assert_eq(vt_faultproxy_fired(fp, id), 1);
    vt_faultproxy_release(fp, id);
    vt_expect_bytes(fd, &got, "+PONG\r\n");
    close(fd);
    vt_buf_free(&got);
}

Test(faultproxy, a_timed_stall_ends_by_itself)
{
    cr_assert(vt_faultproxy_arm(
                  fp, &(vt_fault){.action = VT_FP_STALL, .dir = VT_FP_TO_TARGET, .stall_ms = STALL_MS}) >= 0);
    int fd = must_sock();
    vt_buf got = {0};
    long long t0 = vt_now_ms();
    cr_assert(vt_sock_send_str(fd, "PING\r\n"));
    vt_expect_bytes(fd, &got, "+PONG\r\n");
    cr_assert_geq(vt_now_ms() - t0, STALL_MS - 20, "the reply came after %lld ms, before the stall ended",
                  vt_now_ms() - t0);
    close(fd);
    vt_buf_free(&got);
}

Test(faultproxy, a_slice_delivers_in_pieces_with_pauses)
{
    cr_assert(vt_faultproxy_arm(fp, &(vt_fault){.action = VT_FP_SLICE,
                                                .dir = VT_FP_FROM_TARGET,
                                                .chunk = 10,
                                                .pause_us = SLICE_PAUSE_US}) >= 0);
    vt_buf want = {0}, got = {0};
    want_reply(&want);
    int fd = must_sock();
    long long t0 = vt_now_ms();
    cr_assert(vt_sock_send_str(fd, "GET fp:v\r\n"));
    int reads = 0;
    while (got.len < want.len && vt_sock_read_len(fd, &got, got.len + 1, VT_READ_DEADLINE_MS))
        reads++;
    cr_assert(got.len == want.len && memcmp(got.data, want.data, want.len) == 0, "got \"%s\"",
              vt_buf_escaped(&got));
    long long pieces = ((long long)want.len + 9) / 10;
    cr_assert_geq(vt_now_ms() - t0, (pieces - 1) * SLICE_PAUSE_US / 1000 - 20, "%lld pieces took %lld ms",
                  pieces, vt_now_ms() - t0);
    cr_assert_gt(reads, 1, "the reply came in one piece");
    close(fd);
    vt_buf_free(&want);
    vt_buf_free(&got);
}

Test(faultproxy, a_target_that_is_down_resets_the_connection)
{
    /* A port held by a socket that never listens: a connect to it is
     * refused, and no other test's server can take it meanwhile (a merely
     * free port once answered with another test's listener). */
    int held = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof(sa);
    cr_assert(held >= 0 && bind(held, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
                  getsockname(held, (struct sockaddr *)&sa, &sl) == 0,
              "cannot hold a port");
    vt_faultproxy *nowhere = vt_faultproxy_start(ntohs(sa.sin_port));
    cr_assert(nowhere);
    int fd = vt_must_sock(vt_faultproxy_port(nowhere));
    vt_buf got = {0};
    /* (Nothing is sent: a send after the reset arrived would take the
     * reset's error, and the read after it would see only the end.) */
    cr_assert(vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS), "not closed");
    cr_assert(got.len == 0 && got.err == ECONNRESET, "expected a reset, got %s and \"%s\"",
              got.err ? strerror(got.err) : "a FIN", vt_buf_escaped(&got));
    close(fd);
    vt_fp_stats s = vt_faultproxy_stats(nowhere);
    cr_assert(s.accepted == 1 && s.refused == 1, "%lld accepted, %lld refused", s.accepted, s.refused);
    vt_faultproxy_stop(nowhere);
    close(held);
    vt_buf_free(&got);
}

Test(faultproxy, faults_that_make_no_sense_are_refused)
{
    cr_assert_eq(vt_faultproxy_arm(fp, &(vt_fault){.action = VT_FP_SLICE}), -1, "a slice of 0 bytes");
    cr_assert_eq(vt_faultproxy_arm(fp, &(vt_fault){.action = VT_FP_CUT, .at = -1}), -1, "a negative offset");
}

/* ---- the checked traffic (tests/support/traffic.h) the fault stories run ---- */

static bool traffic_failed(void *t)
{
    return vt_traffic_failed(t);
}

/* Redis loses every key under the workers: the next GET or INCR is wrong,
 * and the traffic says so (a checker that cannot fail proves nothing). */
Test(faultproxy, traffic_notices_a_wrong_reply)
{
    vt_traffic *t = vt_traffic_start(vt_faultproxy_port(fp), &(vt_traffic_opts){.workers = 2});
    cr_assert(t);
    cr_assert(vt_traffic_wait_replies(t, 100, VT_READ_DEADLINE_MS), "traffic did not get going");
    redisContext *c = vt_must_connect(redis->port);
    long long deadline = vt_now_ms() + VT_READ_DEADLINE_MS;
    while (!vt_wait_until(traffic_failed, t, 5) && vt_now_ms() < deadline) {
        redisReply *r = vt_cmd(c, "FLUSHALL");
        vt_assert_status(r, "OK");
        freeReplyObject(r);
    }
    redisFree(c);
    vt_traffic_result res;
    cr_assert(!vt_traffic_stop(t, &res), "FLUSHALL under the traffic went unnoticed");
    cr_assert(strstr(res.why, "wrong") != NULL, "expected a wrong reply, got: %s", res.why);
}

/* Every session's reply stream is cut: each session is closed, none
 * failed, and the replies before the cut were checked. */
Test(faultproxy, traffic_takes_a_cut_as_a_close)
{
    int id = vt_faultproxy_arm(
        fp, &(vt_fault){.action = VT_FP_CUT, .dir = VT_FP_FROM_TARGET, .at = 50001, .scope = VT_FP_EACH});
    cr_assert(id >= 0);
    vt_traffic *t = vt_traffic_start(vt_faultproxy_port(fp), &(vt_traffic_opts){.workers = 2, .sessions = 3});
    cr_assert(t);
    vt_traffic_result res;
    cr_assert(vt_traffic_finish(t, &res), "%s", res.why);
    cr_assert(res.sessions == 6 && res.closed == 6, "%lld sessions, %lld closed", res.sessions, res.closed);
    cr_assert_eq(vt_faultproxy_fired(fp, id), 6);
    cr_assert_gt(res.replies, 0, "no reply before the cuts was checked");
}

/* test_verbs_noscript.c - a verb always gets its real reply, whatever
 * happened to Redis's script cache.
 *
 * The proxy sends a verb as EVALSHA of a script it loaded on that upstream
 * connection. Redis may forget the script: SCRIPT FLUSH (from another client
 * or through the proxy itself), a restart. The proxy then loads it again and
 * retries, and the client sees the verb's real reply in its place in the
 * pipeline, never NOSCRIPT. Inside MULTI the proxy sends EVAL with the
 * script's body, so EXEC never holds a NOSCRIPT either. That holds also when
 * the NOSCRIPT comes back after the client has opened a transaction,
 * subscribed, started MONITOR or asked CLIENT REPLY OFF|SKIP behind the verb.
 *
 * Argument errors in MULTI behave as Redis's: a wrong argument count is
 * answered at once and makes EXEC answer EXECABORT; a bad value is queued
 * and fails alone, as its element of EXEC's reply. `VERBPROXY STATS` counts
 * recoveries.
 *
 * Determinism: a "SCRIPT FLUSH behind the proxy's back" is sent on a direct
 * connection to Redis between two pipelines whose replies the test has read,
 * so the proxy's EVALSHA surely meets an empty cache.
 *
 * Verbs are proxy-only: the suite is skipped under VP_TEST_DIRECT=1. */
#include <sys/socket.h>

#include <openssl/sha.h>

#include "proxy/verbs/script_text.h"
#include "tests/support/checks.h"

#define PASSWORD "s3cret-pass"
#define PAIRS 100           /* verb + plain command pairs after a flush */
#define LONG_PIPELINE 20000 /* ZTICK + INCR pairs in one write */
/* Its first reply waits for all of it: the first tick's NOSCRIPT retry is
 * sent behind the 40,000 requests already on the way, and replies go out in
 * order. Measured: 1.3 s in the optimised build, 4.8 s with ASan on an idle
 * 2-core machine, over 10 s with ASan beside other suites. */
#define LONG_PIPELINE_DEADLINE_MS 60000

static vt_env env;

static void setup(void)
{
    vt_env_start(&env, NULL, NULL);
}

static void teardown(void)
{
    vt_env_stop(&env);
}

TestSuite(verbs_noscript, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

/* ---- helpers ---- */

/* A direct connection to Redis (authenticated when it has a password). */
static redisContext *admin_connect(const char *password)
{
    redisContext *admin = vt_must_connect(env.redis->port);
    if (password) {
        redisReply *r = vt_cmd(admin, "AUTH %s", password);
        vt_assert_status(r, "OK");
        freeReplyObject(r);
    }
    return admin;
}

/* Run one command on c and expect exactly this status. */
static void ok(redisContext *c, const char *cmd, const char *status)
{
    redisReply *r = vt_cmd(c, cmd);
    vt_assert_reply(r, c);
    cr_assert(r->type == REDIS_REPLY_STATUS && strcmp(r->str, status) == 0, "%s: expected +%s, got %s", cmd,
              status, VT_DESCRIBE(r));
    freeReplyObject(r);
}

/* Redis forgets every script, behind the proxy's back. */
static void flush_scripts_directly(const char *password)
{
    redisContext *admin = admin_connect(password);
    ok(admin, "SCRIPT FLUSH", "OK");
    redisReply *r = vt_cmd(admin, "SCRIPT EXISTS 0000000000000000000000000000000000000000");
    vt_assert_array(r, 1);
    freeReplyObject(r);
    redisFree(admin);
}

/* Expect an error reply with exactly this text. */
#define expect_error_text(r, text)                                                                           \
    cr_assert((r) && (r)->type == REDIS_REPLY_ERROR && strcmp((r)->str, (text)) == 0,                        \
              "expected -%s, got %s", (text), VT_DESCRIBE(r))

/* Send `req` on fd and expect exactly `want` back. */

/* ---- (a) a flush between pipelines ---- */

Test(verbs_noscript, a_flush_between_pipelines_loses_no_reply_and_keeps_their_order)
{
    VT_SKIP_IF_DIRECT();
    redisContext *admin = admin_connect(NULL);
    redisReply *r = vt_cmd(admin, "ZADD ns:q 1 a 2 b 3 c");
    vt_assert_int(r, 3);
    freeReplyObject(r);
    r = vt_cmd(admin, "ZADD ns:z 0 crate-1 10 crate-2 90 crate-3");
    vt_assert_int(r, 3);
    freeReplyObject(r);
    ok(admin, "SET ns:lock tok", "OK");

    /* batch 1: the proxy loads the scripts on this client's connection */
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    vt_buf_cmd(&req, "QPOP", "ns:q", NULL);
    vt_buf_cmd(&req, "ZTICK", "ns:z", "15", "100", NULL);
    vt_buf_cmd(&req, "LOCKRELEASE", "ns:lock", "other", NULL);
    vt_exchange(fd, &req, "*2\r\n$1\r\na\r\n$1\r\n1\r\n*1\r\n$7\r\ncrate-3\r\n:0\r\n");

    flush_scripts_directly(NULL);

    /* batch 2: verbs and plain commands, interleaved, in one write; no plain
     * command reads a key a verb of this batch writes */
    vt_buf want = {0};
    vt_buf_cmd(&req, "SET", "ns:plain", "1", NULL);
    vt_buf_append_str(&want, "+OK\r\n");
    vt_buf_cmd(&req, "QPOP", "ns:q", "COUNT", "5", NULL);
    vt_buf_append_str(&want, "*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n");
    vt_buf_cmd(&req, "INCR", "ns:plain", NULL);
    vt_buf_append_str(&want, ":2\r\n");
    vt_buf_cmd(&req, "ZTICK", "ns:z", "80", "100", "WITHSCORES", NULL); /* crate-1 -> 95, crate-2 -> 105 */
    vt_buf_append_str(&want, "*2\r\n$7\r\ncrate-2\r\n$3\r\n105\r\n");
    vt_buf_cmd(&req, "GET", "ns:plain", NULL);
    vt_buf_append_str(&want, "$1\r\n2\r\n");
    vt_buf_cmd(&req, "LOCKRELEASE", "ns:lock", "tok", NULL);
    vt_buf_append_str(&want, ":1\r\n");
    vt_buf_cmd(&req, "HSETVER", "ns:h", "5", "f", "v", NULL);
    vt_buf_append_str(&want, ":1\r\n");
    vt_buf_cmd(&req, "QPOP", "ns:q", NULL); /* after COUNT 5 took the rest */
    vt_buf_append_str(&want, "$-1\r\n");
    for (int i = 0; i < PAIRS; i++) {
        char key[32], line[32];
        snprintf(key, sizeof(key), "ns:h:%d", i);
        vt_buf_cmd(&req, "HSETVER", key, "1", "f", "v", NULL);
        vt_buf_append_str(&want, ":1\r\n");
        vt_buf_cmd(&req, "INCR", "ns:count", NULL);
        snprintf(line, sizeof(line), ":%d\r\n", i + 1);
        vt_buf_append_str(&want, line);
    }
    vt_buf_cmd(&req, "PING", NULL);
    vt_buf_append_str(&want, "+PONG\r\n");
    vt_buf_append(&want, "", 1);
    vt_exchange(fd, &req, want.data);

    /* and each verb ran exactly once */
    r = vt_cmd(admin, "ZRANGE ns:z 0 -1 WITHSCORES");
    vt_assert_array(r, 2);
    vt_assert_str(r->element[0], "crate-1");
    vt_assert_str(r->element[1], "95");
    freeReplyObject(r);
    r = vt_cmd(admin, "EXISTS ns:q ns:lock");
    vt_assert_int(r, 0);
    freeReplyObject(r);
    r = vt_cmd(admin, "HGET ns:h version");
    vt_assert_str(r, "5");
    freeReplyObject(r);
    r = vt_cmd(admin, "HGET ns:h:%d version", PAIRS - 1);
    vt_assert_str(r, "1");
    freeReplyObject(r);
    r = vt_cmd(admin, "GET ns:count");
    vt_assert_str(r, "100");
    freeReplyObject(r);

    vt_buf_free(&req);
    vt_buf_free(&want);
    redisFree(admin);
    close(fd);
}

/* A long pipeline (many reads and writes for the proxy, replies held behind
 * a recovering verb while more stream in): Redis's cache is flushed before
 * it, and once more while it is in flight. Every tick still answers in its
 * place and runs exactly once: the anchor moves by one per tick. */
Test(verbs_noscript, a_long_pipeline_across_two_flushes_runs_every_verb_once_in_order)
{
    VT_SKIP_IF_DIRECT();
    redisContext *admin = admin_connect(NULL);
    redisReply *r = vt_cmd(admin, "ZADD lp:belt 0 anchor");
    vt_assert_int(r, 1);
    freeReplyObject(r);

    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, want = {0}, got = {0};
    vt_buf_cmd(&req, "ZTICK", "lp:belt", "1", "1000000000", NULL); /* loads the scripts */
    vt_exchange(fd, &req, "*0\r\n");
    flush_scripts_directly(NULL);

    for (int i = 0; i < LONG_PIPELINE; i++) {
        char line[32];
        vt_buf_cmd(&req, "ZTICK", "lp:belt", "1", "1000000000", NULL);
        vt_buf_append_str(&want, "*0\r\n");
        vt_buf_cmd(&req, "INCR", "lp:n", NULL);
        snprintf(line, sizeof(line), ":%d\r\n", i + 1);
        vt_buf_append_str(&want, line);
    }
    cr_assert(vt_sock_send_buf(fd, &req), "send failed");
    cr_assert(vt_sock_read_len(fd, &got, 1, LONG_PIPELINE_DEADLINE_MS), "no reply at all");
    flush_scripts_directly(NULL);
    vt_sock_read_len(fd, &got, want.len, LONG_PIPELINE_DEADLINE_MS);
    size_t same = 0;
    while (same < got.len && same < want.len && got.data[same] == want.data[same])
        same++;
    if (got.len != want.len || same != want.len) {
        char expected[256];
        snprintf(expected, sizeof(expected), "%s",
                 vt_escape(want.data + same, want.len - same < 60 ? want.len - same : 60));
        cr_assert_fail("%zu of %zu reply bytes; at byte %zu expected \"%s\", got \"%s\"", got.len, want.len,
                       same, expected, vt_escape(got.data + same, got.len - same < 60 ? got.len - same : 60));
    }

    r = vt_cmd(admin, "ZSCORE lp:belt anchor");
    char ticks[32];
    snprintf(ticks, sizeof(ticks), "%d", LONG_PIPELINE + 1);
    vt_assert_str(r, ticks);
    freeReplyObject(r);
    vt_buf_free(&req);
    vt_buf_free(&want);
    vt_buf_free(&got);
    redisFree(admin);
    close(fd);
}

/* ---- (b) the upstream restarts ---- */

/* Has the proxy noticed `want` more lost upstream connections than `base`? */
typedef struct lost_wait {
    long long base, want;
} lost_wait;

static bool upstreams_lost(void *arg)
{
    lost_wait *w = arg;
    return vt_proxy_stat(env.proxy->port, "upstream_lost") >= w->base + w->want;
}

Test(verbs_noscript, after_an_upstream_restart_clients_with_state_are_closed_and_the_others_use_verbs_at_once)
{
    VT_SKIP_IF_DIRECT();
    redisContext *admin = admin_connect(NULL);
    redisReply *r = vt_cmd(admin, "ZADD rs:q 1 a");
    vt_assert_int(r, 1);
    freeReplyObject(r);
    redisFree(admin);

    /* one client with connection state (its own upstream connection), one
     * on the shared connection */
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, got = {0};
    vt_buf_cmd(&req, "WATCH", "rs:w", NULL);
    vt_buf_cmd(&req, "QPOP", "rs:q", NULL);
    vt_exchange(fd, &req, "+OK\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n");
    redisContext *idle = vt_must_connect(env.proxy->port);
    r = vt_cmd(idle, "PING");
    vt_assert_status(r, "PONG");
    freeReplyObject(r);

    long long recoveries = vt_proxy_stat(env.proxy->port, "noscript_recoveries");
    lost_wait lost = {.base = vt_proxy_stat(env.proxy->port, "upstream_lost"), .want = 2};
    cr_assert(vt_redis_restart(env.redis), "redis-server did not restart");

    /* the stateful client's upstream connection is gone: so is the
     * client's, with nothing more said */
    bool closed = vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS);
    cr_assert(closed, "the client was not closed after its upstream went away; got \"%s\"",
              vt_buf_escaped(&got));
    cr_assert_eq(got.len, 0, "expected no bytes before the close, got \"%s\"", vt_buf_escaped(&got));
    close(fd);
    /* the shared connection's loss is noticed too; the client owed nothing
     * there carries on */
    cr_assert(vt_wait_until(upstreams_lost, &lost, VT_READ_DEADLINE_MS),
              "the proxy did not notice both lost upstream connections");

    if (vt_proxy_shared_upstreams(env.proxy) == 0) {
        /* every client had a connection of its own: the idle one is
         * closed as well, and comes back */
        r = vt_cmd(idle, "PING");
        cr_assert(r == NULL, "the idle client was not closed: %s", VT_DESCRIBE(r));
        redisFree(idle);
        idle = vt_must_connect(env.proxy->port);
    }

    /* a fresh Redis knows no script; the old idle client's and a new
     * client's verbs work at once */
    admin = admin_connect(NULL);
    r = vt_cmd(admin, "ZADD rs:q 1 x 2 y");
    vt_assert_int(r, 2);
    freeReplyObject(r);
    ok(admin, "SET rs:lock t", "OK");

    r = vt_cmd(idle, "QPOP rs:q");
    vt_assert_array(r, 2);
    vt_assert_str(r->element[0], "x");
    vt_assert_str(r->element[1], "1");
    freeReplyObject(r);
    redisContext *c = vt_must_connect(env.proxy->port);
    r = vt_cmd(c, "ZTICK rs:q 10 5");
    vt_assert_array(r, 1);
    vt_assert_str(r->element[0], "y");
    freeReplyObject(r);
    r = vt_cmd(c, "LOCKRELEASE rs:lock t");
    vt_assert_int(r, 1);
    freeReplyObject(r);
    r = vt_cmd(c, "HSETVER rs:h 1 f v");
    vt_assert_int(r, 1);
    freeReplyObject(r);
    r = vt_cmd(admin, "EXISTS rs:q rs:lock");
    vt_assert_int(r, 0);
    freeReplyObject(r);

    /* loaded before first use on the new connection, not recovered */
    long long after = vt_proxy_stat(env.proxy->port, "noscript_recoveries");
    cr_assert_eq(after, recoveries,
                 "noscript_recoveries went from %lld to %lld: the new connection's first verbs "
                 "met NOSCRIPT instead of loaded scripts",
                 recoveries, after);

    redisFree(c);
    redisFree(idle);
    redisFree(admin);
    vt_buf_free(&req);
    vt_buf_free(&got);
}

/* ---- (c) transactions ---- */

Test(verbs_noscript, exec_holds_each_verbs_real_reply_even_after_a_flush)
{
    VT_SKIP_IF_DIRECT();
    redisContext *admin = admin_connect(NULL);
    redisReply *r = vt_cmd(admin, "ZADD tx:q 1 a 2 b 3 c");
    vt_assert_int(r, 3);
    freeReplyObject(r);
    r = vt_cmd(admin, "ZADD tx:z 0 m1 50 m2");
    vt_assert_int(r, 2);
    freeReplyObject(r);
    ok(admin, "SET tx:lock t", "OK");

    /* a fresh connection: no script loaded on it yet */
    redisContext *c = vt_must_connect(env.proxy->port);
    ok(c, "MULTI", "OK");
    ok(c, "QPOP tx:q", "QUEUED");
    ok(c, "SET tx:s x", "QUEUED");
    ok(c, "ZTICK tx:z 50 100 WITHSCORES", "QUEUED");
    ok(c, "LOCKRELEASE tx:lock nope", "QUEUED");
    ok(c, "GET tx:s", "QUEUED");
    r = vt_cmd(c, "EXEC");
    vt_assert_array(r, 5);
    vt_assert_array(r->element[0], 2);
    vt_assert_str(r->element[0]->element[0], "a");
    vt_assert_str(r->element[0]->element[1], "1");
    vt_assert_status(r->element[1], "OK");
    vt_assert_array(r->element[2], 2);
    vt_assert_str(r->element[2]->element[0], "m2");
    vt_assert_str(r->element[2]->element[1], "100");
    vt_assert_int(r->element[3], 0);
    vt_assert_str(r->element[4], "x");
    freeReplyObject(r);

    /* the cache is flushed before MULTI, and again while commands queue */
    flush_scripts_directly(NULL);
    ok(c, "MULTI", "OK");
    ok(c, "QPOP tx:q COUNT 1", "QUEUED");
    flush_scripts_directly(NULL);
    ok(c, "HSETVER tx:h 3 f v", "QUEUED");
    ok(c, "INCR tx:n", "QUEUED");
    ok(c, "LOCKRELEASE tx:lock t", "QUEUED");
    r = vt_cmd(c, "EXEC");
    vt_assert_array(r, 4);
    vt_assert_array(r->element[0], 2);
    vt_assert_str(r->element[0]->element[0], "b");
    vt_assert_str(r->element[0]->element[1], "2");
    vt_assert_int(r->element[1], 1);
    vt_assert_int(r->element[2], 1);
    vt_assert_int(r->element[3], 1);
    freeReplyObject(r);

    /* out of the transaction, verbs go on working */
    r = vt_cmd(c, "ZTICK tx:z 1 100 WITHSCORES");
    vt_assert_array(r, 0);
    freeReplyObject(r);
    r = vt_cmd(admin, "ZSCORE tx:z m1");
    vt_assert_str(r, "51");
    freeReplyObject(r);
    r = vt_cmd(admin, "EXISTS tx:lock");
    vt_assert_int(r, 0);
    freeReplyObject(r);
    redisFree(c);
    redisFree(admin);
}

Test(verbs_noscript, a_pipelined_transaction_with_verbs_gets_every_reply_in_order)
{
    VT_SKIP_IF_DIRECT();
    redisContext *admin = admin_connect(NULL);
    redisReply *r = vt_cmd(admin, "ZADD tx:pq 1 a 2 b 3 c");
    vt_assert_int(r, 3);
    freeReplyObject(r);
    redisFree(admin);

    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    vt_buf_cmd(&req, "QPOP", "tx:pq", NULL); /* loads the scripts on this connection */
    vt_exchange(fd, &req, "*2\r\n$1\r\na\r\n$1\r\n1\r\n");
    flush_scripts_directly(NULL);

    vt_buf_cmd(&req, "MULTI", NULL);
    vt_buf_cmd(&req, "QPOP", "tx:pq", "COUNT", "2", NULL);
    vt_buf_cmd(&req, "INCR", "tx:pn", NULL);
    vt_buf_cmd(&req, "ZTICK", "tx:pz", "1", "2", NULL);
    vt_buf_cmd(&req, "EXEC", NULL);
    vt_buf_cmd(&req, "QPOP", "tx:pq", NULL);
    vt_exchange(fd, &req,
                "+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n"
                "*3\r\n*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n:1\r\n*0\r\n"
                "$-1\r\n");
    vt_buf_free(&req);
    close(fd);
}

/* A verb that meets NOSCRIPT with a transaction right behind it in the same
 * write: by the time the NOSCRIPT comes back, MULTI has been sent (and, in
 * the second round, is still open: EXEC comes in a later write, as from an
 * asynchronous client that does not wait before starting a transaction).
 * The verb still gets its real reply in its place, and EXEC its real
 * replies. */
Test(verbs_noscript, a_verb_recovered_while_a_transaction_follows_it_keeps_its_real_reply)
{
    VT_SKIP_IF_DIRECT();
    redisContext *admin = admin_connect(NULL);
    redisReply *r = vt_cmd(admin, "ZADD tx:before 1 a 2 b");
    vt_assert_int(r, 2);
    freeReplyObject(r);
    r = vt_cmd(admin, "ZADD tx:inside 1 x 2 y 3 z");
    vt_assert_int(r, 3);
    freeReplyObject(r);
    redisFree(admin);

    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    vt_buf_cmd(&req, "LOCKRELEASE", "tx:none", "t", NULL); /* loads the scripts on this connection */
    vt_exchange(fd, &req, ":0\r\n");

    /* round 1: the whole transaction in the same write */
    flush_scripts_directly(NULL);
    vt_buf_cmd(&req, "QPOP", "tx:before", NULL);
    vt_buf_cmd(&req, "MULTI", NULL);
    vt_buf_cmd(&req, "QPOP", "tx:inside", NULL);
    vt_buf_cmd(&req, "INCR", "tx:m", NULL);
    vt_buf_cmd(&req, "EXEC", NULL);
    vt_buf_cmd(&req, "QPOP", "tx:inside", NULL);
    vt_exchange(fd, &req,
                "*2\r\n$1\r\na\r\n$1\r\n1\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n"
                "*2\r\n*2\r\n$1\r\nx\r\n$1\r\n1\r\n:1\r\n"
                "*2\r\n$1\r\ny\r\n$1\r\n2\r\n");

    /* round 2: the transaction is still open when the NOSCRIPT comes back */
    flush_scripts_directly(NULL);
    vt_buf_cmd(&req, "QPOP", "tx:before", NULL);
    vt_buf_cmd(&req, "MULTI", NULL);
    vt_buf_cmd(&req, "QPOP", "tx:inside", NULL);
    vt_exchange(fd, &req, "*2\r\n$1\r\nb\r\n$1\r\n2\r\n+OK\r\n+QUEUED\r\n");
    vt_buf_cmd(&req, "EXEC", NULL);
    vt_exchange(fd, &req, "*1\r\n*2\r\n$1\r\nz\r\n$1\r\n3\r\n");
    vt_buf_free(&req);
    close(fd);
}

/* WATCH, then a verb on another key outside the transaction (on a fresh
 * connection, so the proxy loads its scripts right then; later after a
 * flush, so it recovers right then): the watch must survive whatever the
 * proxy sent for the verb, and still be broken by another client's write. */
Test(verbs_noscript, watch_survives_a_verb_and_is_aborted_by_another_clients_write)
{
    VT_SKIP_IF_DIRECT();
    redisContext *admin = admin_connect(NULL);
    redisReply *r = vt_cmd(admin, "ZADD w:q 1 a 2 b");
    vt_assert_int(r, 2);
    freeReplyObject(r);
    redisContext *alice = vt_must_connect(env.proxy->port);
    redisContext *bob = vt_must_connect(env.proxy->port);

    /* round 1: first verb on the connection, Bob writes: aborted */
    ok(alice, "SET w:balance 100", "OK");
    ok(alice, "WATCH w:balance", "OK");
    r = vt_cmd(alice, "QPOP w:q");
    vt_assert_array(r, 2);
    vt_assert_str(r->element[0], "a");
    freeReplyObject(r);
    ok(bob, "SET w:balance 50", "OK");
    ok(alice, "MULTI", "OK");
    ok(alice, "SET w:balance 90", "QUEUED");
    r = vt_cmd(alice, "EXEC");
    vt_assert_nil(r);
    freeReplyObject(r);
    r = vt_cmd(alice, "GET w:balance");
    vt_assert_str(r, "50");
    freeReplyObject(r);

    /* round 2: a NOSCRIPT recovery inside the watch, nobody writes: applied */
    ok(alice, "WATCH w:balance", "OK");
    flush_scripts_directly(NULL);
    r = vt_cmd(alice, "LOCKRELEASE w:lock x");
    vt_assert_int(r, 0);
    freeReplyObject(r);
    ok(alice, "MULTI", "OK");
    ok(alice, "SET w:balance 40", "QUEUED");
    r = vt_cmd(alice, "EXEC");
    vt_assert_array(r, 1);
    vt_assert_status(r->element[0], "OK");
    freeReplyObject(r);

    /* round 3: a NOSCRIPT recovery inside the watch, Bob writes: aborted */
    ok(alice, "WATCH w:balance", "OK");
    flush_scripts_directly(NULL);
    r = vt_cmd(alice, "QPOP w:q");
    vt_assert_array(r, 2);
    vt_assert_str(r->element[0], "b");
    freeReplyObject(r);
    ok(bob, "SET w:balance 7", "OK");
    ok(alice, "MULTI", "OK");
    ok(alice, "SET w:balance 1", "QUEUED");
    r = vt_cmd(alice, "EXEC");
    vt_assert_nil(r);
    freeReplyObject(r);
    r = vt_cmd(admin, "GET w:balance");
    vt_assert_str(r, "7");
    freeReplyObject(r);

    redisFree(alice);
    redisFree(bob);
    redisFree(admin);
}

/* As on Redis, a client's own write to a key it watches breaks its watch:
 * a verb that writes is a write. */
Test(verbs_noscript, a_verb_that_writes_a_watched_key_aborts_the_transaction)
{
    VT_SKIP_IF_DIRECT();
    redisContext *admin = admin_connect(NULL);
    redisReply *r = vt_cmd(admin, "ZADD w:jobs 1 a 2 b");
    vt_assert_int(r, 2);
    freeReplyObject(r);
    redisContext *c = vt_must_connect(env.proxy->port);
    ok(c, "WATCH w:jobs", "OK");
    r = vt_cmd(c, "QPOP w:jobs");
    vt_assert_array(r, 2);
    vt_assert_str(r->element[0], "a");
    freeReplyObject(r);
    ok(c, "MULTI", "OK");
    ok(c, "SET w:done 1", "QUEUED");
    r = vt_cmd(c, "EXEC");
    vt_assert_nil(r);
    freeReplyObject(r);
    r = vt_cmd(admin, "EXISTS w:done");
    vt_assert_int(r, 0);
    freeReplyObject(r);
    redisFree(c);
    redisFree(admin);
}

/* ---- (d) argument errors in MULTI ---- */

Test(verbs_noscript, a_verb_with_wrong_arity_in_multi_is_refused_at_once_and_exec_aborts)
{
    VT_SKIP_IF_DIRECT();
    redisContext *admin = admin_connect(NULL);
    ok(admin, "SET tx:e untouched", "OK");
    redisContext *c = vt_must_connect(env.proxy->port);
    ok(c, "MULTI", "OK");
    ok(c, "SET tx:e touched", "QUEUED");

    redisReply *r = vt_cmd(c, "QPOP");
    expect_error_text(r, "ERR wrong number of arguments for 'qpop' command");
    freeReplyObject(r);
    r = vt_cmd(c, "ZTICK tx:z 1");
    expect_error_text(r, "ERR wrong number of arguments for 'ztick' command");
    freeReplyObject(r);
    r = vt_cmd(c, "LOCKRENEW tx:l t");
    expect_error_text(r, "ERR wrong number of arguments for 'lockrenew' command");
    freeReplyObject(r);
    r = vt_cmd(c, "QEXTEND tx:lease m 100 extra");
    expect_error_text(r, "ERR wrong number of arguments for 'qextend' command");
    freeReplyObject(r);
    ok(c, "INCR tx:n", "QUEUED"); /* the transaction is still open */

    r = vt_cmd(c, "EXEC");
    expect_error_text(r, "EXECABORT Transaction discarded because of previous errors.");
    freeReplyObject(r);
    r = vt_cmd(admin, "GET tx:e");
    vt_assert_str(r, "untouched");
    freeReplyObject(r);
    r = vt_cmd(admin, "EXISTS tx:n");
    vt_assert_int(r, 0);
    freeReplyObject(r);

    /* the transaction is over, the connection is normal again */
    r = vt_cmd(c, "EXEC");
    expect_error_text(r, "ERR EXEC without MULTI");
    freeReplyObject(r);
    r = vt_cmd(c, "LOCKRELEASE tx:l t");
    vt_assert_int(r, 0);
    freeReplyObject(r);
    redisFree(c);
    redisFree(admin);
}

Test(verbs_noscript, a_pipelined_bad_verb_in_multi_gives_the_same_bytes_as_redis_for_a_bad_command)
{
    VT_SKIP_IF_DIRECT();
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    /* first what Redis itself does with a wrong-arity command... */
    vt_buf_cmd(&req, "MULTI", NULL);
    vt_buf_cmd(&req, "INCR", "tx:f", NULL);
    vt_buf_cmd(&req, "GET", NULL);
    vt_buf_cmd(&req, "EXEC", NULL);
    vt_exchange(fd, &req,
                "+OK\r\n+QUEUED\r\n-ERR wrong number of arguments for 'get' command\r\n"
                "-EXECABORT Transaction discarded because of previous errors.\r\n");
    /* ...and the same with a verb */
    vt_buf_cmd(&req, "MULTI", NULL);
    vt_buf_cmd(&req, "INCR", "tx:f", NULL);
    vt_buf_cmd(&req, "HSETVER", "tx:h", "1", "f", NULL);
    vt_buf_cmd(&req, "EXEC", NULL);
    vt_buf_cmd(&req, "GET", "tx:f", NULL);
    vt_exchange(fd, &req,
                "+OK\r\n+QUEUED\r\n-ERR wrong number of arguments for 'hsetver' command\r\n"
                "-EXECABORT Transaction discarded because of previous errors.\r\n$-1\r\n");
    vt_buf_free(&req);
    close(fd);
}

/* A value Redis would only judge when running the command (an integer that
 * is not one, a bad option) is not an arity error: as with INCRBY k abc, the
 * verb is queued, its error is its element of EXEC's reply, and the rest of
 * the transaction runs. */
Test(verbs_noscript, a_verb_with_a_bad_value_in_multi_is_queued_and_fails_alone_in_exec)
{
    VT_SKIP_IF_DIRECT();
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    vt_buf_cmd(&req, "MULTI", NULL);
    vt_buf_cmd(&req, "SET", "tx:o", "touched", NULL);
    vt_buf_cmd(&req, "INCRBY", "tx:o2", "abc", NULL); /* Redis's own */
    vt_buf_cmd(&req, "QPOP", "tx:q", "COUNT", "abc", NULL);
    vt_buf_cmd(&req, "ZTICK", "tx:z", "nan", "1", NULL);
    vt_buf_cmd(&req, "QPOP", "tx:q", "COUNT", "-1", NULL);
    vt_buf_cmd(&req, "LOCKRENEW", "tx:l", "t", "0", NULL);
    vt_buf_cmd(&req, "QPOP", "tx:q", "LEASE", "tx:lease", NULL);
    vt_buf_cmd(&req, "HSETVER", "tx:h", "1", "f", "v", "g", NULL); /* a field without a value */
    vt_buf_cmd(&req, "EXEC", NULL);
    vt_buf_cmd(&req, "GET", "tx:o", NULL);
    vt_exchange(fd, &req,
                "+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n"
                "+QUEUED\r\n"
                "*8\r\n+OK\r\n"
                "-ERR value is not an integer or out of range\r\n"
                "-ERR value is not an integer or out of range\r\n"
                "-ERR value is not a valid float\r\n"
                "-ERR value is out of range, must be positive\r\n"
                "-ERR invalid expire time in 'lockrenew' command\r\n"
                "-ERR syntax error\r\n"
                "-ERR wrong number of arguments for 'hsetver' command\r\n"
                "$7\r\ntouched\r\n");

    /* outside MULTI the same errors come in their place in a pipeline */
    vt_buf_cmd(&req, "SET", "tx:o", "1", NULL);
    vt_buf_cmd(&req, "QPOP", "tx:q", "COUNT", "-1", NULL);
    vt_buf_cmd(&req, "GET", "tx:o", NULL);
    vt_exchange(fd, &req, "+OK\r\n-ERR value is out of range, must be positive\r\n$1\r\n1\r\n");
    vt_buf_free(&req);
    close(fd);
}

/* Counting stops after SUBSCRIBE or CLIENT REPLY SKIP (the proxy cannot know
 * which replies will come): a verb right before one, meeting NOSCRIPT, must
 * still get its real reply. `mode` is sent right behind the verb, `then` after
 * it; `want` is everything the client must read. */
static void verb_then_uncounted(const char *key, const vt_buf *mode, const char *want)
{
    redisContext *admin = admin_connect(NULL);
    redisReply *r = vt_cmd(admin, "ZADD %s 1 a", key);
    vt_assert_int(r, 1);
    freeReplyObject(r);
    redisFree(admin);

    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    vt_buf_cmd(&req, "LOCKRELEASE", "sk:none", "t", NULL); /* loads the scripts on this connection */
    vt_exchange(fd, &req, ":0\r\n");
    flush_scripts_directly(NULL);

    vt_buf_cmd(&req, "QPOP", key, NULL);
    vt_buf_append(&req, mode->data, mode->len);
    vt_exchange(fd, &req, want);
    vt_buf_free(&req);
    close(fd);
}

Test(verbs_noscript, a_verb_recovered_right_before_subscribe_keeps_its_real_reply)
{
    VT_SKIP_IF_DIRECT();
    vt_buf mode = {0};
    vt_buf_cmd(&mode, "SUBSCRIBE", "sk:ch", NULL);
    verb_then_uncounted("sk:q1", &mode,
                        "*2\r\n$1\r\na\r\n$1\r\n1\r\n*3\r\n$9\r\nsubscribe\r\n$5\r\nsk:ch\r\n:1\r\n");
    vt_buf_free(&mode);
}

Test(verbs_noscript, a_verb_recovered_right_before_client_reply_skip_keeps_its_real_reply)
{
    VT_SKIP_IF_DIRECT();
    vt_buf mode = {0};
    vt_buf_cmd(&mode, "CLIENT", "REPLY", "SKIP", NULL);
    vt_buf_cmd(&mode, "PING", "skipped", NULL);
    vt_buf_cmd(&mode, "PING", NULL);
    verb_then_uncounted("sk:q2", &mode, "*2\r\n$1\r\na\r\n$1\r\n1\r\n+PONG\r\n");
    vt_buf_free(&mode);
}

Test(verbs_noscript, a_verb_recovered_right_before_client_reply_off_keeps_its_real_reply)
{
    VT_SKIP_IF_DIRECT();
    vt_buf mode = {0};
    vt_buf_cmd(&mode, "CLIENT", "REPLY", "OFF", NULL);
    vt_buf_cmd(&mode, "PING", "unheard", NULL);
    vt_buf_cmd(&mode, "CLIENT", "REPLY", "ON", NULL);
    verb_then_uncounted("sk:q3", &mode, "*2\r\n$1\r\na\r\n$1\r\n1\r\n+OK\r\n");
    vt_buf_free(&mode);
}

Test(verbs_noscript, a_verb_recovered_right_before_monitor_keeps_its_real_reply)
{
    VT_SKIP_IF_DIRECT();
    vt_buf mode = {0};
    vt_buf_cmd(&mode, "MONITOR", NULL);
    verb_then_uncounted("sk:q4", &mode, "*2\r\n$1\r\na\r\n$1\r\n1\r\n+OK\r\n");
    vt_buf_free(&mode);
}

/* ---- (e) SCRIPT FLUSH through the proxy ---- */

/* A built-in verb's pinned SHA, from VERBPROXY VERBS. */
static const char *verb_sha(const char *name)
{
    static char sha[41];
    redisContext *c = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(c, "VERBPROXY VERBS");
    cr_assert(r && r->type == REDIS_REPLY_ARRAY, "%s", VT_DESCRIBE(r));
    sha[0] = '\0';
    for (size_t i = 0; i < r->elements; i++)
        if (strcmp(r->element[i]->element[0]->str, name) == 0)
            snprintf(sha, sizeof(sha), "%s", r->element[i]->element[2]->str);
    cr_assert(sha[0], "no verb %s", name);
    freeReplyObject(r);
    redisFree(c);
    return sha;
}

/* The SHA-1 the proxy loads a built-in verb's script under on the server
 * under test: as VERBPROXY VERBS lists it, or on Redis 6.2 that of its
 * 6.2 text (the shebang a comment). */
static const char *verb_sha_loaded(const char *name)
{
    if (vt_redis_version() >= 700) return verb_sha(name);
    char path[512], err[256];
    snprintf(path, sizeof(path), "%s/lua/%s.lua", SOURCE_DIR, name);
    size_t len;
    char *body = script_assemble(path, &len, err, sizeof(err));
    cr_assert(body, "%s: %s", path, err);
    char *pre7 = script_text_pre7(body, len);
    unsigned char md[SHA_DIGEST_LENGTH];
    SHA1((const unsigned char *)pre7, len, md);
    static char hex[2 * SHA_DIGEST_LENGTH + 1];
    for (int i = 0; i < SHA_DIGEST_LENGTH; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    free(body);
    free(pre7);
    return hex;
}

/* A fresh connection with the scripts loaded, then flushed behind its back. */
static int loaded_then_flushed(void)
{
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    vt_buf_cmd(&req, "LOCKRELEASE", "rv:none", "t", NULL);
    vt_exchange(fd, &req, ":0\r\n");
    vt_buf_free(&req);
    flush_scripts_directly(NULL);
    return fd;
}

Test(verbs_noscript, a_verb_recovered_before_select_runs_in_the_database_it_was_sent_in)
{
    VT_SKIP_IF_DIRECT();
    int fd = loaded_then_flushed();
    vt_buf req = {0};
    vt_buf_cmd(&req, "HSETVER", "rv:h", "1", "f", "v", NULL);
    vt_buf_cmd(&req, "SELECT", "1", NULL);
    vt_buf_cmd(&req, "EXISTS", "rv:h", NULL);
    vt_exchange(fd, &req, ":1\r\n+OK\r\n:0\r\n");
    vt_buf_free(&req);
    close(fd);
    redisContext *admin = admin_connect(NULL);
    redisReply *r = vt_cmd(admin, "HGET rv:h f");
    vt_assert_str(r, "v"); /* db 0, where the client was when it sent HSETVER */
    freeReplyObject(r);
    redisFree(admin);
}

Test(verbs_noscript, a_large_request_after_a_recovered_verb_arrives_whole)
{
    VT_SKIP_IF_DIRECT();
    int fd = loaded_then_flushed();
    size_t vlen = 1024 * 1024;
    char *val = malloc(vlen);
    memset(val, 'x', vlen);
    vt_buf req = {0};
    vt_buf_cmd(&req, "LOCKRELEASE", "rv:k", "t", NULL);
    const char *argv[] = {"SET", "rv:big", val};
    size_t lens[] = {3, 6, vlen};
    vt_buf_cmd_argv(&req, 3, argv, lens);
    vt_buf_cmd(&req, "PING", NULL);
    /* the verb and the start of the SET now, the rest once the proxy has
     * had the chance to stream the SET while the verb is retried */
    size_t first = 200000;
    cr_assert(vt_sock_send(fd, req.data, first));
    /* The verb met NOSCRIPT and the proxy reloaded: its script is back. */
    redisContext *admin = admin_connect(NULL);
    char cmd[80];
    snprintf(cmd, sizeof(cmd), "SCRIPT EXISTS %s", verb_sha_loaded("lockrelease"));
    long long deadline = vt_now_ms() + VT_READ_DEADLINE_MS;
    bool reloaded = false;
    while (!reloaded && vt_now_ms() < deadline) {
        redisReply *e = vt_cmd(admin, cmd);
        vt_assert_array(e, 1);
        reloaded = e->element[0]->integer == 1;
        freeReplyObject(e);
    }
    cr_assert(reloaded, "the proxy did not reload the scripts while the SET was half sent");
    cr_assert(vt_sock_send(fd, req.data + first, req.len - first));
    vt_buf got = {0};
    vt_expect_bytes(fd, &got, ":0\r\n+OK\r\n+PONG\r\n");
    redisReply *r = vt_cmd(admin, "STRLEN rv:big");
    vt_assert_int(r, (long long)vlen);
    freeReplyObject(r);
    r = vt_cmd(admin, "GETRANGE rv:big -3 -1");
    vt_assert_str(r, "xxx");
    freeReplyObject(r);
    redisFree(admin);
    vt_buf_free(&got);
    vt_buf_free(&req);
    free(val);
    close(fd);
}

Test(verbs_noscript, a_client_that_half_closes_gets_the_commands_held_behind_a_verb_run)
{
    VT_SKIP_IF_DIRECT();
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    vt_buf_cmd(&req, "LOCKRELEASE", "rv:k", "t", NULL);
    vt_buf_cmd(&req, "MULTI", NULL);
    vt_buf_cmd(&req, "SET", "rv:a", "1", NULL);
    vt_buf_cmd(&req, "EXEC", NULL);
    cr_assert(vt_sock_send_buf(fd, &req));
    shutdown(fd, SHUT_WR);
    vt_buf got = {0};
    cr_assert(vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS), "no EOF; got %s", vt_buf_escaped(&got));
    const char *want = ":0\r\n+OK\r\n+QUEUED\r\n*1\r\n+OK\r\n";
    cr_assert(got.len == strlen(want) && memcmp(got.data, want, got.len) == 0, "got %s",
              vt_buf_escaped(&got));
    redisContext *admin = admin_connect(NULL);
    redisReply *r = vt_cmd(admin, "GET rv:a");
    vt_assert_str(r, "1");
    freeReplyObject(r);
    redisFree(admin);
    vt_buf_free(&got);
    vt_buf_free(&req);
    close(fd);
}

Test(verbs_noscript, script_flush_through_the_proxy_then_verbs_still_work)
{
    VT_SKIP_IF_DIRECT();
    redisContext *admin = admin_connect(NULL);
    redisReply *r = vt_cmd(admin, "ZADD e:q 1 a 2 b 3 c");
    vt_assert_int(r, 3);
    freeReplyObject(r);

    /* Bob has used verbs before the flush */
    redisContext *bob = vt_must_connect(env.proxy->port);
    r = vt_cmd(bob, "QPOP e:none");
    vt_assert_nil(r);
    freeReplyObject(r);

    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    vt_buf_cmd(&req, "QPOP", "e:q", NULL);
    vt_buf_cmd(&req, "SCRIPT", "FLUSH", NULL);
    vt_buf_cmd(&req, "QPOP", "e:q", NULL);
    vt_buf_cmd(&req, "LOCKRELEASE", "e:l", "x", NULL);
    vt_buf_cmd(&req, "SCRIPT", "FLUSH", "ASYNC", NULL);
    vt_buf_cmd(&req, "QPOP", "e:q", "COUNT", "1", NULL);
    vt_exchange(fd, &req,
                "*2\r\n$1\r\na\r\n$1\r\n1\r\n+OK\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n:0\r\n+OK\r\n"
                "*2\r\n$1\r\nc\r\n$1\r\n3\r\n");
    vt_buf_cmd(&req, "SCRIPT", "FLUSH", NULL);
    vt_exchange(fd, &req, "+OK\r\n");
    vt_buf_cmd(&req, "ZTICK", "e:q", "1", "1", NULL);
    vt_exchange(fd, &req, "*0\r\n");
    /* a flush queued in a transaction takes effect at EXEC */
    vt_buf_cmd(&req, "MULTI", NULL);
    vt_buf_cmd(&req, "SCRIPT", "FLUSH", NULL);
    vt_buf_cmd(&req, "EXEC", NULL);
    vt_buf_cmd(&req, "LOCKRELEASE", "e:l", "x", NULL);
    vt_exchange(fd, &req, "+OK\r\n+QUEUED\r\n*1\r\n+OK\r\n:0\r\n");

    /* the flush went through to Redis, and Bob's verbs still work too */
    r = vt_cmd(bob, "HSETVER e:h 2 f v");
    vt_assert_int(r, 1);
    freeReplyObject(r);
    r = vt_cmd(admin, "HGET e:h version");
    vt_assert_str(r, "2");
    freeReplyObject(r);
    vt_buf_free(&req);
    close(fd);
    redisFree(bob);
    redisFree(admin);
}

/* How many scripts Redis holds (INFO memory), asked directly. */
static long long cached_scripts(redisContext *admin)
{
    long long n = vt_info_int(admin, "memory", "number_of_cached_scripts");
    cr_assert(n >= 0, "no number_of_cached_scripts in INFO memory");
    return n;
}

/* How many verbs the proxy has (one script each). */
/* The scripts VERBPROXY VERBS lists: its distinct SHA-1s (the polyfills
 * for ZUNION and ZINTER share one script, as do their STORE variants). */
static long long verb_count(void)
{
    redisContext *c = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(c, "VERBPROXY VERBS");
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements > 0, "%s", VT_DESCRIBE(r));
    long long n = 0;
    for (size_t i = 0; i < r->elements; i++) {
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(r->element[i]->element[2]->str, r->element[j]->element[2]->str) == 0;
        n += !seen;
    }
    freeReplyObject(r);
    redisFree(c);
    return n;
}

Test(verbs_noscript, script_flush_through_the_proxy_loads_no_script_until_a_verb_runs)
{
    VT_SKIP_IF_DIRECT();
    redisContext *admin = admin_connect(NULL);
    long long verbs = verb_count();
    /* a client that never used a verb flushes: Redis holds no script after
     * it, as without the proxy (the PING behind each flush has run
     * whatever the proxy might have sent behind it on that connection) */
    redisContext *c = vt_must_connect(env.proxy->port);
    static const char *const flushes[] = {"SCRIPT FLUSH", "SCRIPT FLUSH ASYNC", "SCRIPT FLUSH SYNC"};
    for (size_t i = 0; i < sizeof(flushes) / sizeof(flushes[0]); i++) {
        ok(c, flushes[i], "OK");
        ok(c, "PING", "PONG");
        long long n = cached_scripts(admin);
        cr_assert_eq(n, 0, "after %s through the proxy Redis holds %lld scripts", flushes[i], n);
    }
    /* the first verb loads its own script alone, and works; the next verb
     * its own; the same verb again nothing */
    redisReply *r = vt_cmd(c, "LOCKRELEASE sf:lock t");
    vt_assert_int(r, 0);
    freeReplyObject(r);
    cr_assert_eq(cached_scripts(admin), 1, "a verb ran: its script (and no other) should be loaded");
    r = vt_cmd(c, "ZWINDOW sf:w 1000 m");
    vt_assert_array(r, 2);
    freeReplyObject(r);
    r = vt_cmd(c, "LOCKRELEASE sf:lock t");
    vt_assert_int(r, 0);
    freeReplyObject(r);
    cr_assert_eq(cached_scripts(admin), 2, "two verbs ran: their two scripts");
    cr_assert_lt(2, verbs, "(fewer than all of them)");
    /* flushed again by a client that has used verbs: nothing until its next verb */
    ok(c, "SCRIPT FLUSH", "OK");
    ok(c, "PING", "PONG");
    cr_assert_eq(cached_scripts(admin), 0, "after a second flush Redis holds scripts again");
    r = vt_cmd(c, "HSETVER sf:h 1 f v");
    vt_assert_int(r, 1);
    freeReplyObject(r);
    cr_assert_eq(cached_scripts(admin), 1);
    redisFree(c);
    redisFree(admin);
}

/* A client on a connection of its own (CLIENT GETNAME moves one off the
 * shared connection) that has used a verb. */
static redisContext *own_client_with_verbs(const char *lock)
{
    redisContext *c = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(c, "CLIENT GETNAME");
    vt_assert_nil(r);
    freeReplyObject(r);
    r = vt_cmd(c, "LOCKRELEASE %s t", lock);
    vt_assert_int(r, 0);
    freeReplyObject(r);
    return c;
}

static void expect_lockrelease(redisContext *c, const char *key, long long want)
{
    redisReply *r = vt_cmd(c, "LOCKRELEASE %s t", key);
    vt_assert_int(r, want);
    freeReplyObject(r);
}

Test(verbs_noscript, a_flush_through_the_proxy_costs_no_other_connection_a_noscript)
{
    VT_SKIP_IF_DIRECT();
    /* Bob on a connection of his own, Carol where clients start (the shared
     * connection by default), both with their scripts loaded */
    redisContext *bob = own_client_with_verbs("fx:bob");
    redisContext *carol = vt_must_connect(env.proxy->port);
    expect_lockrelease(carol, "fx:carol", 0);
    long long rec0 = vt_proxy_stat(env.proxy->port, "noscript_recoveries");

    /* Alice flushes through the proxy, plainly, then queued in a transaction */
    redisContext *alice = vt_must_connect(env.proxy->port);
    ok(alice, "SCRIPT FLUSH", "OK");
    expect_lockrelease(bob, "fx:bob", 0);
    expect_lockrelease(carol, "fx:carol", 0);
    expect_lockrelease(alice, "fx:alice", 0);
    long long rec1 = vt_proxy_stat(env.proxy->port, "noscript_recoveries");
    cr_assert_eq(rec1, rec0,
                 "noscript_recoveries went from %lld to %lld after a flush made through the proxy", rec0,
                 rec1);

    ok(alice, "MULTI", "OK");
    ok(alice, "SCRIPT FLUSH", "QUEUED");
    redisReply *r = vt_cmd(alice, "EXEC");
    vt_assert_array(r, 1);
    vt_assert_status(r->element[0], "OK");
    freeReplyObject(r);
    expect_lockrelease(bob, "fx:bob", 0);
    expect_lockrelease(carol, "fx:carol", 0);
    long long rec2 = vt_proxy_stat(env.proxy->port, "noscript_recoveries");
    cr_assert_eq(rec2, rec0, "noscript_recoveries went from %lld to %lld after a flush in MULTI", rec0, rec2);
    redisFree(alice);
    redisFree(carol);
    redisFree(bob);
}

/* Redis shows a connection blocked in BLPOP with at least `min_qbuf` bytes
 * of its input still unread (what was pipelined behind it). */
typedef struct blocked_with_input {
    int redis_port;
    size_t min_qbuf;
} blocked_with_input;

static bool is_blocked_with_input(void *arg)
{
    blocked_with_input *w = arg;
    redisContext *c = vt_connect(w->redis_port);
    if (!c) return false;
    redisReply *r = vt_cmd(c, "CLIENT LIST");
    bool found = false;
    for (const char *line = r && r->type == REDIS_REPLY_STRING ? r->str : ""; *line && !found;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char one[1024];
        snprintf(one, sizeof(one), "%.*s ", (int)len, line);
        const char *q = strstr(one, " qbuf=");
        found = strstr(one, " cmd=blpop ") && q && strtoull(q + 6, NULL, 10) >= w->min_qbuf;
        line += len + (end ? 1 : 0);
    }
    freeReplyObject(r);
    redisFree(c);
    return found;
}

Test(verbs_noscript, a_flush_that_runs_after_another_connection_reloaded_costs_it_no_noscript)
{
    VT_SKIP_IF_DIRECT();
    redisContext *bob = own_client_with_verbs("fl:bob");
    long long rec0 = vt_proxy_stat(env.proxy->port, "noscript_recoveries");

    /* Alice's SCRIPT FLUSH waits in Redis behind her BLPOP: the proxy has
     * sent it, Redis has not run it */
    int alice = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, got = {0};
    vt_buf_cmd(&req, "BLPOP", "fl:wake", "0", NULL);
    vt_buf flush = {0};
    vt_buf_cmd(&flush, "SCRIPT", "FLUSH", NULL);
    vt_buf_append(&req, flush.data, flush.len);
    cr_assert(vt_sock_send_buf(alice, &req));
    blocked_with_input w = {.redis_port = env.redis->port, .min_qbuf = flush.len};
    cr_assert(vt_wait_until(is_blocked_with_input, &w, VT_READ_DEADLINE_MS),
              "Redis never showed Alice blocked with her SCRIPT FLUSH unread");

    /* meanwhile Bob's verb: its scripts are loaded again, before the flush runs */
    expect_lockrelease(bob, "fl:bob", 0);
    /* the flush runs */
    redisContext *admin = admin_connect(NULL);
    redisReply *r = vt_cmd(admin, "LPUSH fl:wake x");
    vt_assert_int(r, 1);
    freeReplyObject(r);
    vt_expect_bytes(alice, &got, "*2\r\n$7\r\nfl:wake\r\n$1\r\nx\r\n+OK\r\n");
    cr_assert_eq(cached_scripts(admin), 0);
    /* Bob's next verb loads once more instead of meeting NOSCRIPT */
    expect_lockrelease(bob, "fl:bob", 0);
    long long rec1 = vt_proxy_stat(env.proxy->port, "noscript_recoveries");
    cr_assert_eq(rec1, rec0,
                 "noscript_recoveries went from %lld to %lld: Bob's loads ran before Alice's flush and "
                 "were taken as current after it",
                 rec0, rec1);
    vt_buf_free(&flush);
    vt_buf_free(&req);
    vt_buf_free(&got);
    close(alice);
    redisFree(admin);
    redisFree(bob);
}

/* ---- (f) VERBPROXY STATS ---- */

Test(verbs_noscript, stats_count_recoveries_and_reordered_recoveries)
{
    VT_SKIP_IF_DIRECT();
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    vt_buf_cmd(&req, "LOCKRELEASE", "st:l", "x", NULL);
    vt_exchange(fd, &req, ":0\r\n");
    long long rec0 = vt_proxy_stat(env.proxy->port, "noscript_recoveries"),
              reo0 = vt_proxy_stat(env.proxy->port, "noscript_reordered");

    /* a lone verb meets NOSCRIPT: one recovery, nothing reordered */
    flush_scripts_directly(NULL);
    vt_buf_cmd(&req, "LOCKRELEASE", "st:l", "x", NULL);
    vt_exchange(fd, &req, ":0\r\n");
    long long rec1 = vt_proxy_stat(env.proxy->port, "noscript_recoveries"),
              reo1 = vt_proxy_stat(env.proxy->port, "noscript_reordered");
    cr_assert_eq(rec1, rec0 + 1, "noscript_recoveries: %lld before, %lld after one recovery", rec0, rec1);
    cr_assert_eq(reo1, reo0, "noscript_reordered: %lld before, %lld after a recovery with nothing behind it",
                 reo0, reo1);

    /* a verb with plain commands right behind it in the same write: Redis
     * has run them by the time the NOSCRIPT comes back */
    flush_scripts_directly(NULL);
    vt_buf_cmd(&req, "LOCKRELEASE", "st:l", "x", NULL);
    vt_buf_cmd(&req, "INCR", "st:n", NULL);
    vt_buf_cmd(&req, "GET", "st:n", NULL);
    vt_exchange(fd, &req, ":0\r\n:1\r\n$1\r\n1\r\n");
    long long rec2 = vt_proxy_stat(env.proxy->port, "noscript_recoveries"),
              reo2 = vt_proxy_stat(env.proxy->port, "noscript_reordered");
    cr_assert_eq(rec2, rec1 + 1, "noscript_recoveries: %lld before, %lld after one recovery", rec1, rec2);
    cr_assert_eq(reo2, reo1 + 1,
                 "noscript_reordered: %lld before, %lld after a recovery that later commands "
                 "overtook",
                 reo1, reo2);

    /* no flush: no recovery */
    vt_buf_cmd(&req, "LOCKRELEASE", "st:l", "x", NULL);
    vt_buf_cmd(&req, "INCR", "st:n", NULL);
    vt_exchange(fd, &req, ":0\r\n:2\r\n");
    cr_assert_eq(vt_proxy_stat(env.proxy->port, "noscript_recoveries"), rec2);
    cr_assert_eq(vt_proxy_stat(env.proxy->port, "noscript_reordered"), reo2);
    vt_buf_free(&req);
    close(fd);
}

/* A verb behind another verb after a flush meets NOSCRIPT too: it did not
 * run before the first one's retry, so neither recovery reordered anything.
 * A plain command behind both did run before both retries. */
Test(verbs_noscript, stats_count_only_recoveries_that_a_later_command_really_overtook)
{
    VT_SKIP_IF_DIRECT();
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    /* both verbs' scripts loaded on the connection (each is loaded at its
     * first call), so both meet the flush */
    vt_buf_cmd(&req, "LOCKRELEASE", "so:l", "x", NULL);
    vt_buf_cmd(&req, "HSETVER", "so:h", "0", "f", "u", NULL);
    vt_exchange(fd, &req, ":0\r\n:1\r\n");
    long long rec0 = vt_proxy_stat(env.proxy->port, "noscript_recoveries"),
              reo0 = vt_proxy_stat(env.proxy->port, "noscript_reordered");

    flush_scripts_directly(NULL);
    vt_buf_cmd(&req, "LOCKRELEASE", "so:l", "x", NULL);
    vt_buf_cmd(&req, "HSETVER", "so:h", "1", "f", "v", NULL);
    vt_exchange(fd, &req, ":0\r\n:1\r\n");
    long long rec1 = vt_proxy_stat(env.proxy->port, "noscript_recoveries"),
              reo1 = vt_proxy_stat(env.proxy->port, "noscript_reordered");
    cr_assert_eq(rec1, rec0 + 2, "noscript_recoveries: %lld before, %lld after two pipelined verbs", rec0,
                 rec1);
    cr_assert_eq(reo1, reo0,
                 "noscript_reordered: %lld before, %lld after two pipelined verbs, neither of which ran "
                 "before the other's retry",
                 reo0, reo1);

    flush_scripts_directly(NULL);
    vt_buf_cmd(&req, "LOCKRELEASE", "so:l", "x", NULL);
    vt_buf_cmd(&req, "HSETVER", "so:h", "2", "f", "w", NULL);
    vt_buf_cmd(&req, "INCR", "so:n", NULL);
    vt_exchange(fd, &req, ":0\r\n:1\r\n:1\r\n");
    long long rec2 = vt_proxy_stat(env.proxy->port, "noscript_recoveries"),
              reo2 = vt_proxy_stat(env.proxy->port, "noscript_reordered");
    cr_assert_eq(rec2, rec1 + 2, "noscript_recoveries: %lld before, %lld after two pipelined verbs", rec1,
                 rec2);
    cr_assert_eq(reo2, reo1 + 2, "noscript_reordered: %lld before, %lld after an INCR overtook both verbs",
                 reo1, reo2);
    vt_buf_free(&req);
    close(fd);
}

/* ---- (g) a password-protected Redis ---- */

static void setup_auth(void)
{
    vt_redis_opts ro = {.requirepass = PASSWORD};
    vt_env_start(&env, &ro, NULL);
}

TestSuite(verbs_noscript_auth, .init = setup_auth, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

Test(verbs_noscript_auth, a_verb_before_auth_gets_noauth_and_works_after_auth)
{
    VT_SKIP_IF_DIRECT();
    redisContext *admin = admin_connect(PASSWORD);
    redisReply *r = vt_cmd(admin, "ZADD au:q 1 a 2 b");
    vt_assert_int(r, 2);
    freeReplyObject(r);

    redisContext *c = vt_must_connect(env.proxy->port);
    r = vt_cmd(c, "QPOP au:q");
    expect_error_text(r, "NOAUTH Authentication required.");
    freeReplyObject(r);
    r = vt_cmd(c, "LOCKRELEASE au:l x");
    expect_error_text(r, "NOAUTH Authentication required.");
    freeReplyObject(r);
    r = vt_cmd(c, "ZCARD au:q");
    expect_error_text(r, "NOAUTH Authentication required.");
    freeReplyObject(r);

    ok(c, "AUTH " PASSWORD, "OK");
    r = vt_cmd(c, "QPOP au:q");
    vt_assert_array(r, 2);
    vt_assert_str(r->element[0], "a");
    vt_assert_str(r->element[1], "1");
    freeReplyObject(r);

    /* a flush behind the proxy's back: recovered on the authenticated
     * connection */
    flush_scripts_directly(PASSWORD);
    r = vt_cmd(c, "QPOP au:q");
    vt_assert_array(r, 2);
    vt_assert_str(r->element[0], "b");
    vt_assert_str(r->element[1], "2");
    freeReplyObject(r);
    r = vt_cmd(c, "LOCKRELEASE au:l x");
    vt_assert_int(r, 0);
    freeReplyObject(r);
    redisFree(c);
    redisFree(admin);
}

/* Before AUTH Redis closes a connection that sends a bulk over 16384
 * bytes (its pre-auth limit). A verb's SCRIPT LOAD goes ahead of its first
 * EVALSHA even before the client authenticated (Redis refuses the load
 * with -NOAUTH, and it is sent again later): so no script may be longer,
 * and every verb and polyfill before AUTH gets -NOAUTH on a connection
 * that goes on. (ZSNAPSHOT's script was 18 KiB once: this closed the
 * client's own connection.) */
Test(verbs_noscript_auth, every_verb_before_auth_gets_noauth_and_the_connection_goes_on)
{
    VT_SKIP_IF_DIRECT();
    static const char *const calls[] = {
        "ZTICK au:z 1 2",
        "QPOP au:q",
        "QACK au:l m",
        "QEXTEND au:l m 10",
        "QRECLAIM au:l au:q NOW",
        "LOCKRELEASE au:k t",
        "LOCKRENEW au:k t 10",
        "LOCKHANDOVER au:k t u 10",
        "HSETVER au:h 1 f v",
        "ZWINDOW au:w 1000 m",
        "ZPAGE au:z 0 10",
        "ZSNAPSHOT au:s 1000 2 au:a au:b",
        "ZUNION 2 au:a au:b AGGREGATE COUNT",
        "ZUNIONSTORE au:d 2 au:a au:b AGGREGATE COUNT",
    };
    redisContext *c = vt_must_connect(env.proxy->port);
    for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
        redisReply *r = vt_cmd(c, calls[i]);
        cr_assert(r != NULL, "%s: the connection was closed (%s)", calls[i], c->errstr);
        expect_error_text(r, "NOAUTH Authentication required.");
        freeReplyObject(r);
        r = vt_cmd(c, "PING");
        cr_assert(r != NULL, "after %s: the connection was closed (%s)", calls[i], c->errstr);
        expect_error_text(r, "NOAUTH Authentication required.");
        freeReplyObject(r);
    }
    redisFree(c);
}

Test(verbs_noscript_auth, a_pipeline_of_verb_auth_verb_gets_noauth_ok_and_the_real_reply)
{
    VT_SKIP_IF_DIRECT();
    redisContext *admin = admin_connect(PASSWORD);
    redisReply *r = vt_cmd(admin, "ZADD au:p 1 a");
    vt_assert_int(r, 1);
    freeReplyObject(r);
    redisFree(admin);

    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    vt_buf_cmd(&req, "QPOP", "au:p", NULL);
    vt_buf_cmd(&req, "AUTH", PASSWORD, NULL);
    vt_buf_cmd(&req, "QPOP", "au:p", NULL);
    vt_buf_cmd(&req, "QPOP", "au:p", NULL);
    vt_exchange(fd, &req, "-NOAUTH Authentication required.\r\n+OK\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n$-1\r\n");
    vt_buf_free(&req);
    close(fd);
}

Test(verbs_noscript_auth, hello_3_auth_then_verbs_answer_in_resp3)
{
    VT_SKIP_IF_DIRECT();
    redisContext *admin = admin_connect(PASSWORD);
    redisReply *r = vt_cmd(admin, "ZADD au:h 1 a 2 b");
    vt_assert_int(r, 2);
    freeReplyObject(r);
    redisFree(admin);

    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, got = {0};
    vt_buf_cmd(&req, "LOCKRELEASE", "au:l", "x", NULL);
    vt_exchange(fd, &req, "-NOAUTH Authentication required.\r\n");

    vt_buf_cmd(&req, "HELLO", "3", "AUTH", "default", PASSWORD, NULL);
    cr_assert(vt_sock_send_buf(fd, &req));
    vt_buf_reset(&req);
    cr_assert(vt_sock_read_replies(fd, &got, 1, VT_READ_DEADLINE_MS), "no HELLO reply; got \"%s\"",
              vt_buf_escaped(&got));
    cr_assert(got.data[0] == '%' && vt_buf_contains(&got, "$5\r\nproto\r\n:3\r\n"),
              "HELLO 3 should answer a RESP3 map, got \"%s\"", vt_buf_escaped(&got));
    cr_assert_eq((size_t)vt_resp_reply_len(got.data, got.len), got.len, "more than the HELLO reply: \"%s\"",
                 vt_buf_escaped(&got));
    vt_buf_free(&got);

    vt_buf_cmd(&req, "QPOP", "au:h", NULL);
    vt_buf_cmd(&req, "LOCKRELEASE", "au:l", "x", NULL);
    vt_buf_cmd(&req, "QPOP", "au:h", "COUNT", "0", NULL);
    vt_exchange(fd, &req, "*2\r\n$1\r\na\r\n$1\r\n1\r\n:0\r\n*0\r\n");

    flush_scripts_directly(PASSWORD);
    vt_buf_cmd(&req, "QPOP", "au:h", NULL);
    vt_buf_cmd(&req, "QPOP", "au:h", NULL); /* empty now: a RESP3 null */
    vt_buf_cmd(&req, "PING", NULL);
    vt_exchange(fd, &req, "*2\r\n$1\r\nb\r\n$1\r\n2\r\n_\r\n+PONG\r\n");
    vt_buf_free(&req);
    close(fd);
}

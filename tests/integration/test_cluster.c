/* upstream-mode cluster against a real Redis Cluster (tests/support/
 * cluster.h: 3 primaries + 3 replicas):
 *
 *   - pipelines over keys in every slot, transactions on one hash tag and
 *     verbs get every reply right and in order (the traffic checker);
 *   - what the proxy answers itself: CLUSTER KEYSLOT, the other CLUSTER
 *     subcommands refused, SELECT, PING, CROSSSLOT for multi-key commands
 *     and verbs over several slots, as Redis's own texts;
 *   - a transaction goes to its keys' node (the MULTI waits for the command
 *     after it), and after EXEC the client reaches every node again;
 *   - a slot moved under pipelines (MIGRATING/IMPORTING, MIGRATE, SETSLOT
 *     NODE): -ASK and -MOVED are followed by the proxy, never shown, and
 *     every reply is right.
 * No TLS and no own-connection variant (cluster mode needs shared
 * connections): registered once (CMake's VP_INTEGRATION_ONCE). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/checks.h"
#include "tests/support/cluster.h"
#include "tests/support/traffic.h"

static vt_cluster *cl;
static vt_proxy *proxy;

static void setup(void)
{
    cl = vt_cluster_start();
    cr_assert_not_null(cl, "the cluster did not come up (see stderr)");
    static const char *const args[] = {"--upstream-mode", "cluster", NULL};
    proxy = vt_proxy_start(cl->node[0], &(vt_proxy_opts){.extra_args = args});
    cr_assert_not_null(proxy, "verbproxy did not start");
}

static void teardown(void)
{
    vt_proxy_free(proxy);
    vt_cluster_free(cl);
}

TestSuite(cluster, .init = setup, .fini = teardown, .timeout = 180);

static long long node_dbsize(int i)
{
    redisContext *c = vt_must_connect(cl->node[i]->port);
    redisReply *r = vt_cmd(c, "DBSIZE");
    cr_assert(r && r->type == REDIS_REPLY_INTEGER, "DBSIZE: %s", VT_DESCRIBE(r));
    long long n = r->integer;
    freeReplyObject(r);
    redisFree(c);
    return n;
}

Test(cluster, traffic_over_every_primary_gets_every_reply_in_order)
{
    vt_traffic *t = vt_traffic_start(
        proxy->port,
        &(vt_traffic_opts){.workers = 8, .tx_workers = 2, .sessions = 4, .verbs = true, .cluster = true});
    cr_assert(t);
    vt_traffic_result r;
    bool ok = vt_traffic_finish(t, &r);
    cr_assert(ok, "%s", r.why);
    cr_assert_eq(r.complete, r.sessions, "%lld of %lld sessions complete", r.complete, r.sessions);
    int primaries_with_keys = 0;
    for (int i = 0; i < VT_CLUSTER_NODES; i++)
        if (vt_cluster_is_primary(cl, i) && node_dbsize(i) > 0) primaries_with_keys++;
    cr_assert_eq(primaries_with_keys, 3, "the keys reached %d primaries, expected all 3",
                 primaries_with_keys);
}

Test(cluster, the_proxy_answers_as_one_standalone_redis)
{
    /* a and b hash to different slots (15495, 3300). */
    static const char req[] =
        "*3\r\n$7\r\nCLUSTER\r\n$7\r\nKEYSLOT\r\n$3\r\nfoo\r\n"
        "*2\r\n$7\r\nCLUSTER\r\n$4\r\nINFO\r\n"
        "*2\r\n$6\r\nSELECT\r\n$1\r\n1\r\n"
        "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n"
        "*1\r\n$4\r\nPING\r\n"
        "*3\r\n$6\r\nRENAME\r\n$1\r\na\r\n$1\r\nb\r\n"
        "*5\r\n$6\r\nMSETNX\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n"
        "*6\r\n$9\r\nZSNAPSHOT\r\n$1\r\nd\r\n$4\r\n1000\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\nb\r\n"
        "*3\r\n$3\r\nSET\r\n$4\r\n{x}a\r\n$1\r\n1\r\n"
        "*3\r\n$6\r\nRENAME\r\n$4\r\n{x}a\r\n$4\r\n{x}b\r\n"
        "*2\r\n$3\r\nGET\r\n$4\r\n{x}b\r\n";
    static const char want[] = ":12182\r\n"
                               "-ERR This instance has cluster support disabled\r\n"
                               "-ERR SELECT is not allowed in cluster mode\r\n"
                               "+OK\r\n"
                               "+PONG\r\n"
                               "-CROSSSLOT Keys in request don't hash to the same slot\r\n"
                               "-CROSSSLOT Keys in request don't hash to the same slot\r\n"
                               "-CROSSSLOT Keys in request don't hash to the same slot\r\n"
                               "+OK\r\n"
                               "+OK\r\n"
                               "$1\r\n1\r\n";
    int fd = vt_sock_tcp(proxy->port);
    cr_assert_geq(fd, 0);
    cr_assert(vt_sock_send(fd, req, sizeof(req) - 1));
    vt_buf got = {0};
    cr_assert(vt_sock_read_len(fd, &got, sizeof(want) - 1, VT_READ_DEADLINE_MS), "got only \"%s\"",
              vt_buf_escaped(&got));
    vt_assert_bytes(&got, want);
    vt_buf_free(&got);
    close(fd);
}

Test(cluster, a_transaction_runs_on_its_keys_node_and_the_client_goes_on_everywhere)
{
    redisContext *c = vt_must_connect(proxy->port);
    redisReply *r = vt_cmd(c, "MULTI");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(c, "INCR {tx}n");
    vt_assert_status(r, "QUEUED");
    freeReplyObject(r);
    r = vt_cmd(c, "SET {tx}k v");
    vt_assert_status(r, "QUEUED");
    freeReplyObject(r);
    r = vt_cmd(c, "EXEC");
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2, "EXEC: %s", VT_DESCRIBE(r));
    freeReplyObject(r);
    /* Keys of every node after it: the connection is not held to one. */
    for (int i = 0; i < 30; i++) {
        char key[32], val[32];
        snprintf(key, sizeof(key), "after-tx:%d", i);
        snprintf(val, sizeof(val), "v%d", i);
        r = vt_cmd(c, "SET %s %s", key, val);
        vt_assert_status(r, "OK");
        freeReplyObject(r);
        r = vt_cmd(c, "GET %s", key);
        vt_assert_str(r, val);
        freeReplyObject(r);
    }
    /* A transaction over two nodes: CROSSSLOT while queueing, EXECABORT. */
    r = vt_cmd(c, "MULTI");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(c, "SET a 1");
    vt_assert_status(r, "QUEUED");
    freeReplyObject(r);
    r = vt_cmd(c, "SET b 1");
    cr_assert(r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "CROSSSLOT", 9) == 0, "SET b: %s",
              VT_DESCRIBE(r));
    freeReplyObject(r);
    r = vt_cmd(c, "EXEC");
    cr_assert(r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "EXECABORT", 9) == 0, "EXEC: %s",
              VT_DESCRIBE(r));
    freeReplyObject(r);
    /* An empty transaction never reaches Redis, and answers as Redis. */
    r = vt_cmd(c, "MULTI");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(c, "EXEC");
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 0, "EXEC: %s", VT_DESCRIBE(r));
    freeReplyObject(r);
    redisFree(c);
}

/* ---- a slot moved under pipelines ---- */

#define MOVE_KEYS 16

typedef struct mover_check {
    int port;
    const char *tag; /* every key in its slot */
    volatile int stop;
    long long rounds;
    char why[512];
} mover_check;

/* Pipelines of SET, GET, INCR over the tag's keys; every reply checked. */
static void *mover_check_run(void *arg)
{
    mover_check *m = arg;
    redisContext *c = vt_connect(m->port);
    if (!c) {
        snprintf(m->why, sizeof(m->why), "no connection");
        return NULL;
    }
    long long counter = 0;
    while (!m->stop && !m->why[0]) {
        for (int i = 0; i < MOVE_KEYS; i++) {
            redisAppendCommand(c, "SET %s:k%d r%lld-%d", m->tag, i, m->rounds, i);
            redisAppendCommand(c, "GET %s:k%d", m->tag, i);
        }
        redisAppendCommand(c, "INCR %s:n", m->tag);
        for (int i = 0; i < MOVE_KEYS && !m->why[0]; i++) {
            char want[64];
            snprintf(want, sizeof(want), "r%lld-%d", m->rounds, i);
            redisReply *r = NULL;
            if (redisGetReply(c, (void **)&r) != REDIS_OK || !r || r->type != REDIS_REPLY_STATUS)
                snprintf(m->why, sizeof(m->why), "SET %s:k%d: %s", m->tag, i, VT_DESCRIBE(r));
            if (r) freeReplyObject(r);
            r = NULL;
            if (!m->why[0] && (redisGetReply(c, (void **)&r) != REDIS_OK || !r ||
                               r->type != REDIS_REPLY_STRING || strcmp(r->str, want) != 0))
                snprintf(m->why, sizeof(m->why), "GET %s:k%d: expected %s, got %s", m->tag, i, want,
                         VT_DESCRIBE(r));
            if (r) freeReplyObject(r);
        }
        redisReply *r = NULL;
        if (!m->why[0] && (redisGetReply(c, (void **)&r) != REDIS_OK || !r ||
                           r->type != REDIS_REPLY_INTEGER || r->integer != ++counter))
            snprintf(m->why, sizeof(m->why), "INCR %s:n: expected %lld, got %s", m->tag, counter,
                     VT_DESCRIBE(r));
        if (r) freeReplyObject(r);
        m->rounds++;
    }
    redisFree(c);
    return NULL;
}

static bool stat_positive(void *name)
{
    return vt_proxy_stat(proxy->port, name) > 0;
}

static long long rounds_target;

static bool rounds_past(void *arg)
{
    mover_check *m = arg;
    return m->rounds >= rounds_target || m->why[0];
}

Test(cluster, a_slot_moved_under_pipelines_loses_and_shows_nothing)
{
    mover_check m = {.port = proxy->port, .tag = "{moving}"};
    int slot = vt_cluster_keyslot(cl, "{moving}");
    int from = vt_cluster_slot_owner(cl, 0, slot);
    cr_assert_geq(from, 0);
    int to = -1;
    for (int i = 0; i < VT_CLUSTER_NODES && to < 0; i++)
        if (i != from && vt_cluster_is_primary(cl, i)) to = i;
    cr_assert_geq(to, 0);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, mover_check_run, &m), 0);
    rounds_target = 20;
    cr_assert(vt_wait_until(rounds_past, &m, 10000), "the checker did not get going: %s", m.why);
    /* Migrating: once its keys moved, the source answers -ASK for them. */
    cr_assert(vt_cluster_move_begin(cl, slot, to));
    cr_assert(vt_cluster_move_keys(cl, slot, to));
    cr_assert(vt_wait_until(stat_positive, "cluster_ask", 10000), "no -ASK was followed");
    /* Done: the source answers -MOVED. */
    cr_assert(vt_cluster_move_finish(cl, slot, to));
    cr_assert(vt_wait_until(stat_positive, "cluster_moved", 10000), "no -MOVED was followed");
    long long after = m.rounds;
    rounds_target = after + 20;
    cr_assert(vt_wait_until(rounds_past, &m, 10000), "the checker stopped after the move: %s", m.why);
    m.stop = 1;
    pthread_join(th, NULL);
    cr_assert(!m.why[0], "%s", m.why);
    cr_assert_gt(m.rounds, after, "no round after the move");
    /* Everything is on the new owner. */
    redisContext *c = vt_must_connect(cl->node[to]->port);
    redisReply *r = vt_cmd(c, "GET {moving}:n");
    cr_assert(r && r->type == REDIS_REPLY_STRING && atoll(r->str) == m.rounds,
              "the counter on the new owner: %s", VT_DESCRIBE(r));
    freeReplyObject(r);
    redisFree(c);
}

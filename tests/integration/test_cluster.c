/* upstream-mode cluster against a real Redis Cluster (tests/support/
 * cluster.h: 3 primaries + 3 replicas):
 *
 *   - pipelines over keys in every slot, transactions on one hash tag and
 *     verbs get every reply right and in order (the traffic checker);
 *   - what the proxy answers itself: CLUSTER KEYSLOT, the other CLUSTER
 *     subcommands refused, SELECT, PING, CROSSSLOT for multi-key commands
 *     and verbs over several slots, as Redis's own texts;
 *   - a transaction goes to its keys' node (the MULTI waits for the command
 *     after it), also from a connection of the client's own on another
 *     node (after HELLO 2 or 3), and after EXEC the client reaches every
 *     node again;
 *   - a slot moved under pipelines (MIGRATING/IMPORTING, MIGRATE, SETSLOT
 *     NODE): -ASK and -MOVED are followed by the proxy, never shown, and
 *     every reply is right.
 * The cluster_tls suite makes a cluster with TLS ports, bus and
 * replication, and the proxy reaches it over TLS. No TLS variant and no
 * own-connection variant (cluster mode needs shared connections):
 * registered once (CMake's VP_INTEGRATION_ONCE). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The traffic checker's sessions, every reply checked, and their keys on
 * all three primaries. */
static void traffic_reaches_every_primary(int workers, int tx_workers, int sessions)
{
    vt_traffic *t = vt_traffic_start(proxy->port, &(vt_traffic_opts){.workers = workers,
                                                                     .tx_workers = tx_workers,
                                                                     .sessions = sessions,
                                                                     .verbs = true,
                                                                     .cluster = true});
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

Test(cluster, traffic_over_every_primary_gets_every_reply_in_order)
{
    traffic_reaches_every_primary(8, 2, 4);
}

/* ---- over TLS: every node connection and the map's fetch ---- */

static void setup_tls(void)
{
    cl = vt_cluster_start_tls();
    cr_assert_not_null(cl, "the TLS cluster did not come up (see stderr)");
    static const char *const args[] = {"--upstream-mode", "cluster", NULL};
    /* the seed is node 0's TLS port, so the map comes over TLS and names
     * the nodes' TLS ports: a node reached in plaintext would not answer */
    proxy = vt_proxy_start(cl->node[0], &(vt_proxy_opts){.extra_args = args, .upstream_tls = true});
    cr_assert_not_null(proxy, "verbproxy did not start");
}

TestSuite(cluster_tls, .init = setup_tls, .fini = teardown, .timeout = 180);

Test(cluster_tls, traffic_over_tls_to_every_primary_gets_every_reply_in_order)
{
    cr_assert(strstr(proxy->upstream, "127.0.0.1:") &&
                  atoi(strchr(proxy->upstream, ':') + 1) == cl->node[0]->tls_port,
              "the proxy's seed is %s, not node 0's TLS port", proxy->upstream);
    traffic_reaches_every_primary(4, 1, 3);
    /* and a multi-slot MGET split over the nodes, merged */
    redisContext *c = vt_must_connect(proxy->port);
    redisReply *rep = vt_cmd(c, "MSET {a}k 1 {b}k 2 {c}k 3");
    cr_assert(rep && rep->type == REDIS_REPLY_ERROR && strstr(rep->str, "CROSSSLOT"), "%s", VT_DESCRIBE(rep));
    freeReplyObject(rep);
    const char *keys[] = {"{a}k", "{b}k", "{c}k"};
    for (int i = 0; i < 3; i++) {
        rep = vt_cmd(c, "SET %s v%d", keys[i], i);
        vt_assert_status(rep, "OK");
        freeReplyObject(rep);
    }
    rep = vt_cmd(c, "MGET {a}k {b}k {c}k");
    cr_assert(rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 3, "%s", VT_DESCRIBE(rep));
    for (int i = 0; i < 3; i++)
        cr_assert(rep->element[i]->type == REDIS_REPLY_STRING && rep->element[i]->str[1] == '0' + i,
                  "MGET: %s", VT_DESCRIBE(rep));
    freeReplyObject(rep);
    redisFree(c);
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

/* Two hash tags served by different primaries. */
static void tags_on_two_nodes(char a[16], char b[16])
{
    int owner_a = -1;
    for (int i = 0; i < 1000; i++) {
        char tag[16];
        snprintf(tag, sizeof(tag), "{t%d}", i);
        int owner = vt_cluster_slot_owner(cl, 0, vt_cluster_keyslot(cl, tag));
        if (owner_a < 0) {
            owner_a = owner;
            memcpy(a, tag, sizeof(tag));
        } else if (owner >= 0 && owner != owner_a) {
            memcpy(b, tag, sizeof(tag));
            return;
        }
    }
    cr_assert_fail("no two tags on two nodes");
}

/* MULTI, SET tag:x 1, INCR tag:n, EXEC on fd: run, n now n_after. */
static void expect_tx_runs(int fd, const char *tag, int n_after)
{
    char x[32], n[32], want[160];
    snprintf(x, sizeof(x), "%s:x", tag);
    snprintf(n, sizeof(n), "%s:n", tag);
    vt_buf req = {0}, got = {0};
    vt_buf_cmd(&req, "MULTI", NULL);
    vt_buf_cmd(&req, "SET", x, "1", NULL);
    vt_buf_cmd(&req, "INCR", n, NULL);
    vt_buf_cmd(&req, "EXEC", NULL);
    /* (the same bytes in RESP2 and RESP3) */
    snprintf(want, sizeof(want), "+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n:%d\r\n", n_after);
    cr_assert(vt_sock_send_buf(fd, &req));
    cr_assert(vt_sock_read_replies(fd, &got, 4, VT_READ_DEADLINE_MS), "transaction on %s: \"%s\"", tag,
              vt_buf_escaped(&got));
    cr_assert(got.len == strlen(want) && memcmp(got.data, want, got.len) == 0, "transaction on %s: \"%s\"",
              tag, vt_buf_escaped(&got));
    vt_buf_free(&req);
    vt_buf_free(&got);
}

/* A client that said HELLO (2 or 3) is on a connection of its own, on
 * whichever node it was; its transaction still goes to its keys' node,
 * with its protocol taken along (the model test found every command of
 * such a transaction answered -CROSSSLOT, and EXEC -EXECABORT). So does
 * one whose last command went to another node. */
Test(cluster, a_transaction_after_hello_runs_on_its_keys_node)
{
    char a[16], b[16];
    tags_on_two_nodes(a, b);
    for (int proto = 2; proto <= 3; proto++) {
        char ta[24], tb[24];
        snprintf(ta, sizeof(ta), "%s%d", a, proto);
        snprintf(tb, sizeof(tb), "%s%d", b, proto);
        int fd = vt_sock_tcp(proxy->port);
        cr_assert_geq(fd, 0);
        vt_buf req = {0}, got = {0};
        char ps[4];
        snprintf(ps, sizeof(ps), "%d", proto);
        vt_buf_cmd(&req, "HELLO", ps, NULL);
        cr_assert(vt_sock_send_buf(fd, &req));
        cr_assert(vt_sock_read_replies(fd, &got, 1, VT_READ_DEADLINE_MS), "HELLO %d", proto);
        cr_assert(vt_buf_contains(&got, "proto"), "HELLO %d: \"%s\"", proto, vt_buf_escaped(&got));
        vt_buf_free(&got);
        vt_buf_free(&req);
        expect_tx_runs(fd, ta, 1);
        expect_tx_runs(fd, tb, 1);
        expect_tx_runs(fd, ta, 2);
        /* still in its protocol: a missing key is RESP3's null */
        cr_assert(vt_sock_send_str(fd, "*2\r\n$3\r\nGET\r\n$7\r\nmissing\r\n"));
        cr_assert(vt_sock_read_replies(fd, &got, 1, VT_READ_DEADLINE_MS));
        vt_assert_bytes(&got, proto == 3 ? "_\r\n" : "$-1\r\n");
        vt_buf_free(&got);
        close(fd);
    }
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
        /* split: one part on the moving slot, one elsewhere */
        redisAppendCommand(c, "MGET %s:k0 elsewhere:%lld %s:k1", m->tag, m->rounds, m->tag);
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
        r = NULL;
        char want0[64], want1[64];
        snprintf(want0, sizeof(want0), "r%lld-0", m->rounds);
        snprintf(want1, sizeof(want1), "r%lld-1", m->rounds);
        if (!m->why[0] &&
            (redisGetReply(c, (void **)&r) != REDIS_OK || !r || r->type != REDIS_REPLY_ARRAY ||
             r->elements != 3 || r->element[0]->type != REDIS_REPLY_STRING ||
             strcmp(r->element[0]->str, want0) != 0 || r->element[1]->type != REDIS_REPLY_NIL ||
             r->element[2]->type != REDIS_REPLY_STRING || strcmp(r->element[2]->str, want1) != 0))
            snprintf(m->why, sizeof(m->why), "MGET %s:k0 elsewhere %s:k1: expected [%s, nil, %s], got %s",
                     m->tag, m->tag, want0, want1, VT_DESCRIBE(r));
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

/* ---- split and fanned-out commands ---- */

#define SPLIT_KEYS 600

static redisReply *argv_cmd(redisContext *c, const char *name, int from, int to, int with_missing)
{
    int cap = 2 * (to - from) + 2;
    const char **argv = calloc((size_t)cap, sizeof(*argv));
    size_t *lens = calloc((size_t)cap, sizeof(*lens));
    char(*keys)[32] = calloc((size_t)cap, sizeof(*keys));
    int argc = 0;
    argv[argc++] = name;
    for (int i = from; i < to; i++) {
        snprintf(keys[argc], sizeof(keys[0]), "sk:%d", i);
        argv[argc] = keys[argc];
        argc++;
        if (with_missing && i % 7 == 0) {
            snprintf(keys[argc], sizeof(keys[0]), "missing:%d", i);
            argv[argc] = keys[argc];
            argc++;
        }
    }
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    redisReply *r = redisCommandArgv(c, argc, argv, lens);
    free(keys);
    free(lens);
    free(argv);
    return r;
}

static void assert_integer(redisReply *r, long long want, const char *what)
{
    cr_assert(r && r->type == REDIS_REPLY_INTEGER && r->integer == want, "%s: expected %lld, got %s", what,
              want, VT_DESCRIBE(r));
    freeReplyObject(r);
}

/* (vt_assert_* evaluate their reply more than once: a command's reply is
 * taken here first.) */
static void expect_status(redisReply *r, const char *want)
{
    vt_assert_status(r, want);
    freeReplyObject(r);
}

static void expect_error(redisReply *r, const char *prefix)
{
    vt_assert_error(r, prefix);
    freeReplyObject(r);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

Test(cluster, split_and_fanned_out_commands_answer_as_one_redis)
{
    redisContext *c = vt_must_connect(proxy->port);
    expect_status(vt_cmd(c, "FLUSHALL"), "OK");
    for (int i = 0; i < SPLIT_KEYS; i++)
        redisAppendCommand(c, "SET sk:%d v%d", i, i);
    for (int i = 0; i < SPLIT_KEYS; i++) {
        redisReply *r = NULL;
        cr_assert_eq(redisGetReply(c, (void **)&r), REDIS_OK);
        expect_status(r, "OK");
    }
    /* DBSIZE sums the primaries, which each hold some. */
    assert_integer(vt_cmd(c, "DBSIZE"), SPLIT_KEYS, "DBSIZE");
    long long sum = 0;
    for (int i = 0; i < VT_CLUSTER_NODES; i++)
        if (vt_cluster_is_primary(cl, i)) {
            long long n = node_dbsize(i);
            cr_assert_gt(n, 0, "primary %d holds no key", i);
            sum += n;
        }
    cr_assert_eq(sum, SPLIT_KEYS);

    /* MGET over every slot: the values in key order, missing keys nil. */
    redisReply *r = argv_cmd(c, "MGET", 0, SPLIT_KEYS, 1);
    cr_assert(r && r->type == REDIS_REPLY_ARRAY, "MGET: %s", VT_DESCRIBE(r));
    size_t e = 0;
    for (int i = 0; i < SPLIT_KEYS; i++) {
        char want[32];
        snprintf(want, sizeof(want), "v%d", i);
        cr_assert(e < r->elements && r->element[e]->type == REDIS_REPLY_STRING &&
                      strcmp(r->element[e]->str, want) == 0,
                  "MGET element %zu (sk:%d): %s", e, i,
                  e < r->elements ? VT_DESCRIBE(r->element[e]) : "none");
        e++;
        if (i % 7 == 0) {
            cr_assert(e < r->elements && r->element[e]->type == REDIS_REPLY_NIL, "missing:%d not nil", i);
            e++;
        }
    }
    cr_assert_eq(e, r->elements);
    freeReplyObject(r);

    /* EXISTS and TOUCH count each key as Redis does (missing ones 0). */
    assert_integer(argv_cmd(c, "EXISTS", 0, 100, 1), 100, "EXISTS");
    assert_integer(argv_cmd(c, "TOUCH", 100, 200, 1), 100, "TOUCH");
    assert_integer(vt_cmd(c, "EXISTS sk:1 sk:1 sk:2 missing"), 3, "EXISTS with a key twice");

    /* KEYS over every primary: each key once. */
    r = vt_cmd(c, "KEYS sk:*");
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == SPLIT_KEYS, "KEYS: %s", VT_DESCRIBE(r));
    freeReplyObject(r);

    /* A whole SCAN: the cursor walks node after node and every key comes
     * back (nothing is written meanwhile: no key twice either). */
    char **seen = calloc(SPLIT_KEYS * 2, sizeof(*seen));
    size_t nseen = 0;
    char cursor[32] = "0";
    int calls = 0;
    do {
        r = vt_cmd(c, "SCAN %s COUNT 40", cursor);
        cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2, "SCAN: %s", VT_DESCRIBE(r));
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements; i++) {
            cr_assert_lt(nseen, SPLIT_KEYS * 2, "SCAN returned far too many keys");
            seen[nseen++] = strdup(r->element[1]->element[i]->str);
        }
        freeReplyObject(r);
        cr_assert_lt(++calls, 1000, "SCAN never ended");
    } while (strcmp(cursor, "0") != 0);
    cr_assert_eq(nseen, SPLIT_KEYS, "SCAN returned %zu keys", nseen);
    qsort(seen, nseen, sizeof(*seen), cmp_str);
    for (size_t i = 1; i < nseen; i++)
        cr_assert_str_neq(seen[i - 1], seen[i], "SCAN returned %s twice", seen[i]);
    for (size_t i = 0; i < nseen; i++)
        free(seen[i]);
    free(seen);
    expect_error(vt_cmd(c, "SCAN notanumber"), "ERR invalid cursor");

    /* Split commands pipelined with plain ones: every reply in order. */
    for (int i = 0; i < 200; i++) {
        redisAppendCommand(c, "MGET sk:%d sk:%d sk:%d", i, i + 1, i + 2);
        redisAppendCommand(c, "INCR {split}n");
        redisAppendCommand(c, "DBSIZE");
    }
    for (int i = 0; i < 200; i++) {
        cr_assert_eq(redisGetReply(c, (void **)&r), REDIS_OK);
        cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 3, "MGET %d: %s", i, VT_DESCRIBE(r));
        for (int k = 0; k < 3; k++) {
            char want[32];
            snprintf(want, sizeof(want), "v%d", i + k);
            cr_assert_str_eq(r->element[k]->str, want, "MGET %d element %d", i, k);
        }
        freeReplyObject(r);
        cr_assert_eq(redisGetReply(c, (void **)&r), REDIS_OK);
        assert_integer(r, i + 1, "INCR");
        cr_assert_eq(redisGetReply(c, (void **)&r), REDIS_OK);
        assert_integer(r, SPLIT_KEYS + 1, "DBSIZE in the pipeline");
    }

    /* Scripts: loaded on every primary; EXISTS true only where all have it. */
    r = vt_cmd(c, "SCRIPT LOAD %s", "return 'split'");
    cr_assert(r && r->type == REDIS_REPLY_STRING && strlen(r->str) == 40, "SCRIPT LOAD: %s", VT_DESCRIBE(r));
    char sha[41];
    snprintf(sha, sizeof(sha), "%s", r->str);
    freeReplyObject(r);
    for (int i = 0; i < VT_CLUSTER_NODES; i++) {
        if (!vt_cluster_is_primary(cl, i)) continue;
        redisContext *d = vt_must_connect(cl->node[i]->port);
        r = vt_cmd(d, "SCRIPT EXISTS %s", sha);
        cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->element[0]->integer == 1, "primary %d lacks it", i);
        freeReplyObject(r);
        redisFree(d);
    }
    r = vt_cmd(c, "SCRIPT EXISTS %s 0000000000000000000000000000000000000000", sha);
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->integer == 1 &&
                  r->element[1]->integer == 0,
              "SCRIPT EXISTS: %s", VT_DESCRIBE(r));
    freeReplyObject(r);
    /* SCRIPT FLUSH everywhere; a verb after it still answers (no NOSCRIPT). */
    expect_status(vt_cmd(c, "SCRIPT FLUSH"), "OK");
    r = vt_cmd(c, "SCRIPT EXISTS %s", sha);
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->element[0]->integer == 0, "after FLUSH: %s",
              VT_DESCRIBE(r));
    freeReplyObject(r);
    for (int i = 0; i < 20; i++) {
        r = vt_cmd(c, "ZTICK {zt%d}z 1 100", i);
        cr_assert(r && r->type == REDIS_REPLY_ARRAY, "ZTICK after SCRIPT FLUSH: %s", VT_DESCRIBE(r));
        freeReplyObject(r);
    }

    /* RANDOMKEY: one of the keys. */
    r = vt_cmd(c, "RANDOMKEY");
    cr_assert(r && r->type == REDIS_REPLY_STRING && (strncmp(r->str, "sk:", 3) == 0 || r->str[0] == '{'),
              "RANDOMKEY: %s", VT_DESCRIBE(r));
    freeReplyObject(r);

    /* MSET over several slots is not split by default (not atomic). */
    expect_error(vt_cmd(c, "MSET a 1 b 2"), "CROSSSLOT Keys in request don't hash to the same slot");
    /* Inside a transaction a split command is Redis's CROSSSLOT. */
    expect_status(vt_cmd(c, "MULTI"), "OK");
    expect_status(vt_cmd(c, "SET {tx}a 1"), "QUEUED");
    expect_error(vt_cmd(c, "MGET a b"), "CROSSSLOT Keys in request don't hash to the same slot");
    r = vt_cmd(c, "EXEC");
    cr_assert(r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "EXECABORT", 9) == 0, "EXEC: %s",
              VT_DESCRIBE(r));
    freeReplyObject(r);

    /* DEL and UNLINK sum what each node removed; FLUSHALL empties all. */
    assert_integer(argv_cmd(c, "DEL", 0, 300, 1), 300, "DEL");
    assert_integer(argv_cmd(c, "UNLINK", 0, SPLIT_KEYS, 0), SPLIT_KEYS - 300, "UNLINK");
    assert_integer(vt_cmd(c, "EXISTS sk:1 sk:599"), 0, "EXISTS after DEL");
    expect_status(vt_cmd(c, "FLUSHALL"), "OK");
    assert_integer(vt_cmd(c, "DBSIZE"), 0, "DBSIZE after FLUSHALL");
    r = vt_cmd(c, "RANDOMKEY");
    cr_assert(r && r->type == REDIS_REPLY_NIL, "RANDOMKEY of nothing: %s", VT_DESCRIBE(r));
    freeReplyObject(r);
    redisFree(c);

    /* cluster-split-writes yes: MSET split by slot, every key written. */
    static const char *const args[] = {"--upstream-mode", "cluster", "--cluster-split-writes", "yes", NULL};
    vt_proxy *split = vt_proxy_start(cl->node[0], &(vt_proxy_opts){.extra_args = args});
    cr_assert_not_null(split, "verbproxy with cluster-split-writes did not start");
    c = vt_must_connect(split->port);
    expect_status(vt_cmd(c, "MSET a 1 b 2 c 3 {a}x 4"), "OK");
    r = vt_cmd(c, "MGET c {a}x b a");
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 4 && strcmp(r->element[0]->str, "3") == 0 &&
                  strcmp(r->element[1]->str, "4") == 0 && strcmp(r->element[2]->str, "2") == 0 &&
                  strcmp(r->element[3]->str, "1") == 0,
              "MGET after a split MSET: %s", VT_DESCRIBE(r));
    freeReplyObject(r);
    expect_error(vt_cmd(c, "MSETNX a 1 b 2"), "CROSSSLOT");
    redisFree(c);
    vt_proxy_free(split);
}

/* ---- state that follows a client to every node ---- */

static size_t count_of(const vt_buf *b, const char *needle)
{
    size_t n = 0, nl = strlen(needle);
    for (size_t i = 0; i + nl <= b->len; i++)
        if (memcmp(b->data + i, needle, nl) == 0) n++;
    return n;
}

Test(cluster, a_resp3_client_with_a_name_and_tracking_reaches_every_node)
{
    int fd = vt_sock_tcp(proxy->port);
    cr_assert_geq(fd, 0);
    vt_buf got = {0};
    /* HELLO 3 and CLIENT SETNAME on the connection of its first node... */
    cr_assert(vt_sock_send_str(fd, "*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n"
                                   "*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n$2\r\nr3\r\n"));
    cr_assert(vt_sock_read_replies(fd, &got, 2, VT_READ_DEADLINE_MS), "HELLO, SETNAME: \"%s\"",
              vt_buf_escaped(&got));
    cr_assert(vt_buf_contains(&got, "proto") && vt_buf_contains(&got, "+OK\r\n"));
    /* ... then keys of every node, pipelined: RESP3 replies (a missing key
     * is _), the name everywhere. */
    vt_buf req = {0}, want = {0};
    for (int i = 0; i < 60; i++) {
        char key[32], val[32];
        snprintf(key, sizeof(key), "r3:%d", i);
        snprintf(val, sizeof(val), "v%d", i);
        char none[48], line[96];
        snprintf(none, sizeof(none), "none:%s", key);
        vt_buf_cmd(&req, "SET", key, val, NULL);
        vt_buf_cmd(&req, "GET", key, NULL);
        vt_buf_cmd(&req, "GET", none, NULL);
        vt_buf_cmd(&req, "CLIENT", "GETNAME", NULL);
        snprintf(line, sizeof(line), "+OK\r\n$%zu\r\n%s\r\n_\r\n$2\r\nr3\r\n", strlen(val), val);
        vt_buf_append_str(&want, line);
    }
    cr_assert(vt_sock_send_buf(fd, &req));
    vt_buf_free(&got);
    cr_assert(vt_sock_read_len(fd, &got, want.len, VT_READ_DEADLINE_MS), "got only \"%s\"",
              vt_buf_escaped(&got));
    cr_assert(got.len == want.len && memcmp(got.data, want.data, want.len) == 0, "got \"%s\"",
              vt_buf_escaped(&got));
    vt_buf_free(&got);
    /* Its connection to each node has the name (Redis's own CLIENT LIST). */
    int named = 0;
    for (int i = 0; i < VT_CLUSTER_NODES; i++) {
        if (!vt_cluster_is_primary(cl, i)) continue;
        redisContext *d = vt_must_connect(cl->node[i]->port);
        redisReply *r = vt_cmd(d, "CLIENT LIST");
        cr_assert(r && r->type == REDIS_REPLY_STRING);
        /* (CLIENT LIST shows resp= from Redis 7.0 on) */
        if (strstr(r->str, "name=r3 ") && (strstr(r->str, "resp=3") || vt_redis_version() < 700)) named++;
        freeReplyObject(r);
        redisFree(d);
    }
    cr_assert_eq(named, 3, "%d primaries have its RESP3 connection named r3", named);

    /* Tracking set on one node follows it: keys read on every node are
     * invalidated by each node when another client changes them. */
    cr_assert(vt_sock_send_str(fd, "*3\r\n$6\r\nCLIENT\r\n$8\r\nTRACKING\r\n$2\r\nON\r\n"));
    cr_assert(vt_sock_read_replies(fd, &got, 1, VT_READ_DEADLINE_MS));
    vt_assert_bytes(&got, "+OK\r\n");
    vt_buf_free(&got);
    vt_buf_free(&req);
    for (int i = 0; i < 30; i++) {
        char key[32];
        snprintf(key, sizeof(key), "r3:%d", i);
        vt_buf_cmd(&req, "GET", key, NULL);
    }
    cr_assert(vt_sock_send_buf(fd, &req));
    cr_assert(vt_sock_read_replies(fd, &got, 30, VT_READ_DEADLINE_MS));
    vt_buf_free(&got);
    redisContext *other = vt_must_connect(proxy->port);
    for (int i = 0; i < 30; i++) {
        redisReply *r = vt_cmd(other, "SET r3:%d changed", i);
        vt_assert_status(r, "OK");
        freeReplyObject(r);
    }
    long long deadline = vt_now_ms() + VT_READ_DEADLINE_MS;
    while (count_of(&got, ">2\r\n$10\r\ninvalidate\r\n") < 30 && vt_now_ms() < deadline)
        vt_sock_read_contains(fd, &got, "\x01never", 200);
    cr_assert_eq(count_of(&got, ">2\r\n$10\r\ninvalidate\r\n"), 30, "invalidations: \"%s\"",
                 vt_buf_escaped(&got));
    redisFree(other);
    vt_buf_free(&got);
    vt_buf_free(&req);
    vt_buf_free(&want);
    close(fd);
}

/* ---- pub/sub ---- */

Test(cluster, pubsub_and_shard_channels_reach_their_subscribers)
{
    VT_SKIP_BEFORE(700, "shard channels (SSUBSCRIBE, SPUBLISH) came with Redis 7.0");
    /* Shard channels of every primary, a subscriber each, and a plain
     * channel. */
    const char *chans[] = {"a", "b", "c", "d", "e", "f"};
    int fd[6];
    vt_buf got = {0};
    for (int i = 0; i < 6; i++) {
        fd[i] = vt_sock_tcp(proxy->port);
        cr_assert_geq(fd[i], 0);
        vt_buf req = {0};
        vt_buf_cmd(&req, "SSUBSCRIBE", chans[i], NULL);
        cr_assert(vt_sock_send_buf(fd[i], &req));
        vt_buf_free(&req);
        cr_assert(vt_sock_read_replies(fd[i], &got, 1, VT_READ_DEADLINE_MS), "SSUBSCRIBE %s: \"%s\"",
                  chans[i], vt_buf_escaped(&got));
        char want[64];
        snprintf(want, sizeof(want), "*3\r\n$10\r\nssubscribe\r\n$1\r\n%s\r\n:1\r\n", chans[i]);
        vt_assert_bytes(&got, want);
        vt_buf_free(&got);
    }
    int sub = vt_sock_tcp(proxy->port);
    cr_assert(vt_sock_send_str(sub, "*2\r\n$9\r\nSUBSCRIBE\r\n$5\r\nplain\r\n"));
    cr_assert(vt_sock_read_replies(sub, &got, 1, VT_READ_DEADLINE_MS));
    vt_buf_free(&got);
    /* Several shard channels of different slots in one call: Redis's
     * CROSSSLOT. */
    int other = vt_sock_tcp(proxy->port);
    cr_assert(vt_sock_send_str(other, "*3\r\n$10\r\nSSUBSCRIBE\r\n$1\r\na\r\n$1\r\nb\r\n"));
    cr_assert(vt_sock_read_replies(other, &got, 1, VT_READ_DEADLINE_MS));
    vt_assert_bytes(&got, "-CROSSSLOT Keys in request don't hash to the same slot\r\n");
    vt_buf_free(&got);
    close(other);

    redisContext *pub = vt_must_connect(proxy->port);
    for (int i = 0; i < 6; i++) {
        redisReply *r = vt_cmd(pub, "SPUBLISH %s m%d", chans[i], i);
        cr_assert(r && r->type == REDIS_REPLY_INTEGER && r->integer == 1, "SPUBLISH %s: %s", chans[i],
                  VT_DESCRIBE(r));
        freeReplyObject(r);
    }
    redisReply *r = vt_cmd(pub, "PUBLISH plain hello");
    cr_assert(r && r->type == REDIS_REPLY_INTEGER, "PUBLISH: %s", VT_DESCRIBE(r));
    freeReplyObject(r);
    for (int i = 0; i < 6; i++) {
        char m[96];
        snprintf(m, sizeof(m), "*3\r\n$8\r\nsmessage\r\n$1\r\n%s\r\n$2\r\nm%d\r\n", chans[i], i);
        cr_assert(vt_sock_read_len(fd[i], &got, strlen(m), VT_READ_DEADLINE_MS), "%s: \"%s\"", chans[i],
                  vt_buf_escaped(&got));
        vt_assert_bytes(&got, m);
        vt_buf_free(&got);
        close(fd[i]);
    }
    /* PUBLISH went to one node; the cluster took it to the subscriber's. */
    cr_assert(vt_sock_read_contains(sub, &got, "$5\r\nhello\r\n", VT_READ_DEADLINE_MS), "\"%s\"",
              vt_buf_escaped(&got));
    vt_buf_free(&got);
    redisFree(pub);
    close(sub);
}

/* ---- a runaway script ---- */

static bool some_primary_busy(void *arg)
{
    (void)arg;
    /* (every node: a busy one cannot say whether it is a primary) */
    for (int i = 0; i < VT_CLUSTER_NODES; i++) {
        redisContext *d = vt_connect(cl->node[i]->port);
        if (!d) continue;
        redisReply *r = vt_cmd(d, "PING");
        bool busy = r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "BUSY", 4) == 0;
        if (r) freeReplyObject(r);
        redisFree(d);
        if (busy) return true;
    }
    return false;
}

Test(cluster, script_kill_reaches_the_busy_primary_past_the_script)
{
    for (int i = 0; i < VT_CLUSTER_NODES; i++) {
        redisContext *d = vt_must_connect(cl->node[i]->port);
        /* (busy-reply-threshold's old name, which Redis 6.2 knows too) */
        expect_status(vt_cmd(d, "CONFIG SET lua-time-limit 100"), "OK");
        redisFree(d);
    }
    redisContext *runner = vt_must_connect(proxy->port);
    cr_assert_eq(redisAppendCommand(runner, "EVAL %s 0", "while true do end"), REDIS_OK);
    cr_assert_eq(redisBufferWrite(runner, &(int){0}), REDIS_OK);
    int done = 0;
    while (!done)
        cr_assert_eq(redisBufferWrite(runner, &done), REDIS_OK);
    cr_assert(vt_wait_until(some_primary_busy, NULL, 10000), "the script never ran");
    /* Every primary gets it on a connection no busy script holds up: the
     * busy one kills its script, the others say NOTBUSY: +OK. */
    redisContext *killer = vt_must_connect(proxy->port);
    expect_status(vt_cmd(killer, "SCRIPT KILL"), "OK");
    redisReply *r = NULL;
    cr_assert_eq(redisGetReply(runner, (void **)&r), REDIS_OK);
    cr_assert(r && r->type == REDIS_REPLY_ERROR && strstr(r->str, "Script killed"), "the runner got %s",
              VT_DESCRIBE(r));
    freeReplyObject(r);
    /* Nothing busy now: SCRIPT KILL is Redis's NOTBUSY from every node. */
    expect_error(vt_cmd(killer, "SCRIPT KILL"), "NOTBUSY");
    expect_status(vt_cmd(runner, "SET after-kill 1"), "OK");
    redisFree(killer);
    redisFree(runner);
}

/* ---- a big slot map ---- */

Test(cluster, a_slot_map_fragmented_past_16_kib_is_read_whole)
{
    /* 600 slots moved one by one: about 1,200 ranges, CLUSTER SLOTS far
     * over the 16 KiB a reply is held whole up to. */
    int to;
    cr_assert(vt_cluster_fragment(cl, 600, &to), "could not fragment the cluster");
    redisContext *d = vt_must_connect(cl->node[0]->port);
    redisReply *r = vt_cmd(d, "CLUSTER SLOTS");
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements > 1000, "CLUSTER SLOTS: %zu ranges",
              r ? r->elements : 0);
    freeReplyObject(r);
    redisFree(d);
    /* A proxy started now learns that map... */
    static const char *const args[] = {"--upstream-mode", "cluster", NULL};
    vt_proxy *fresh = vt_proxy_start(cl->node[0], &(vt_proxy_opts){.extra_args = args});
    cr_assert_not_null(fresh);
    redisContext *c = vt_must_connect(fresh->port);
    for (int i = 0; i < 2000; i++)
        redisAppendCommand(c, "SET frag:%d %d", i, i);
    for (int i = 0; i < 2000; i++) {
        cr_assert_eq(redisGetReply(c, (void **)&r), REDIS_OK);
        expect_status(r, "OK");
    }
    /* ... and uses it: no key went to a wrong node first. */
    cr_assert_eq(vt_proxy_stat(fresh->port, "cluster_moved"), 0, "requests were redirected");
    cr_assert_eq(vt_proxy_stat(fresh->port, "cluster_fetch_failures"), 0);
    redisFree(c);
    vt_proxy_free(fresh);
}

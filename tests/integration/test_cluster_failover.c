/* upstream-mode cluster while the cluster changes under load (tests/support/
 * cluster.h: 3 primaries + 3 replicas, a fresh cluster per story):
 *
 *   - a slot resharded (MIGRATING/IMPORTING, MIGRATE, SETSLOT NODE) while 8
 *     clients pipeline writes, reads, a multi-key MGET and verbs (ZTICK,
 *     QPOP with LEASE + QACK, LOCKRELEASE) on keys of that slot: no error
 *     reaches a client, every reply is right and in order, every write is
 *     on the new owner afterwards; -TRYAGAIN (the slot's keys split between
 *     source and target) is retried with backoff in the request's place,
 *     and passed on once the tries are spent;
 *   - CLUSTER FAILOVER on a replica under the same load: nothing visible,
 *     verbs work on the new primary (its scripts loaded before the first
 *     one), and QPOP + QACK workers see each job exactly once across it;
 *   - SIGKILL of a primary under load: each client gets right replies, or
 *     the outage's errors (-CLUSTERDOWN, "upstream unavailable") or a clean
 *     close; once the replica is promoted every request succeeds, verbs
 *     included.
 * Cluster mode needs shared connections and the cluster is plaintext:
 * registered once (CMake's VP_INTEGRATION_ONCE). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/checks.h"
#include "tests/support/cluster.h"
#include "tests/support/http.h"
#include "tests/support/prom.h"

static vt_cluster *cl;
static vt_proxy *proxy;
static int metrics_port;
static char metrics_arg[16];

static bool proxy_writes_everywhere(void *arg);

static void setup_with_node_timeout(int ms)
{
    cl = vt_cluster_start_node_timeout(ms);
    cr_assert_not_null(cl, "the cluster did not come up (see stderr)");
    metrics_port = vt_free_port();
    snprintf(metrics_arg, sizeof(metrics_arg), "%d", metrics_port);
    static const char *args[] = {"--upstream-mode", "cluster", "--metrics-port", metrics_arg, NULL};
    proxy = vt_proxy_start(cl->node[0], &(vt_proxy_opts){.extra_args = args});
    cr_assert_not_null(proxy, "verbproxy did not start");
    cr_assert(vt_wait_until(proxy_writes_everywhere, NULL, VT_CLUSTER_DEADLINE_MS),
              "the proxy does not reach every primary");
}

/* Every primary answers a write through the proxy: a cluster that just
 * said cluster_state:ok can still flap on a busy machine. */
static bool proxy_writes_everywhere(void *arg)
{
    (void)arg;
    static const char *const keys[] = {"{a}", "{b}", "{c}", "{d}", "{e}", "{f}", "{g}", "{h}"};
    redisContext *c = vt_connect(proxy->port);
    if (!c) return false;
    bool ok = true;
    for (size_t i = 0; ok && i < sizeof(keys) / sizeof(keys[0]); i++) {
        redisReply *r = redisCommand(c, "SET %s:up 1", keys[i]);
        ok = r && r->type == REDIS_REPLY_STATUS;
        if (r) freeReplyObject(r);
    }
    redisFree(c);
    return ok;
}

/* Resharding and CLUSTER FAILOVER: the harness's long node timeout. With
 * a short one a node that a busy machine keeps from answering pings for
 * 2 s is marked failing, and the cluster says -CLUSTERDOWN in the middle of
 * a story that expects nothing visible. */
static void setup(void)
{
    setup_with_node_timeout(VT_CLUSTER_NODE_TIMEOUT_MS);
}

/* A primary's SIGKILL must be judged within the story's deadlines: 2 s. */
static void setup_kill(void)
{
    setup_with_node_timeout(2000);
}

static void teardown(void)
{
    vt_proxy_free(proxy);
    vt_cluster_free(cl);
}

TestSuite(cluster_failover, .init = setup, .fini = teardown, .timeout = 120);
TestSuite(cluster_kill, .init = setup_kill, .fini = teardown, .timeout = 120);

/* ---- the load: pipelined rounds on a hash tag, every reply checked ---- */

#define WORKERS 8
#define KEYS 4

typedef struct worker {
    int port;
    int id;
    char tag[32];  /* every key of this worker in its slot */
    bool tolerant; /* an outage: its errors and a close are allowed (then reconnect) */
    volatile int stop;
    volatile long long rounds;    /* rounds with every reply right */
    volatile long long disturbed; /* rounds that met an outage's error or a close */
    volatile long long closes;
    char last_outage[160]; /* the last outage error it got */
    long long counter;     /* the last INCR */
    bool resync;           /* the next INCR sets the counter (writes may have been lost) */
    bool popped_prev;      /* the last round's QPOP got its job into the lease set */
    bool popped;           /* this round's did */
    char why[768];
} worker;

static bool outage_error(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_ERROR &&
           (strncmp(r->str, "CLUSTERDOWN", 11) == 0 || strncmp(r->str, "ERR upstream unavailable", 24) == 0);
}

static void round_send(redisContext *c, worker *w, long long round)
{
    const char *t = w->tag;
    int id = w->id;
    for (int j = 0; j < KEYS; j++)
        redisAppendCommand(c, "SET %s:w%d:k%d r%lld-%d", t, id, j, round, j);
    for (int j = 0; j < KEYS; j++)
        redisAppendCommand(c, "GET %s:w%d:k%d", t, id, j);
    redisAppendCommand(c, "INCR %s:w%d:n", t, id);
    redisAppendCommand(c, "MGET %s:w%d:k0 %s:w%d:k1 %s:w%d:k2 %s:w%d:k3", t, id, t, id, t, id, t, id);
    redisAppendCommand(c, "ZADD %s:w%d:z %lld m%lld", t, id, round, round);
    redisAppendCommand(c, "ZTICK %s:w%d:z 0 %lld", t, id, round);
    redisAppendCommand(c, "SET %s:w%d:lock tok%lld PX 60000", t, id, round);
    redisAppendCommand(c, "LOCKRELEASE %s:w%d:lock tok%lld", t, id, round);
    redisAppendCommand(c, "ZADD %s:w%d:q %lld j%lld", t, id, round, round);
    /* two keys of one slot: -TRYAGAIN while they are split by a migration */
    redisAppendCommand(c, "QPOP %s:w%d:q COUNT 100 LEASE %s:w%d:l 60000", t, id, t, id);
    /* the job the last round popped: acknowledged once its QPOP answered,
     * as a client does (requests pipelined behind a -TRYAGAIN run before
     * its retry: docs/upstreams.md#cluster-upstream, -TRYAGAIN) */
    redisAppendCommand(c, "QACK %s:w%d:l j%lld", t, id, round - 1);
}

/* The reply to the i-th request of the round. NULL: right. */
static const char *round_check(worker *w, long long round, int i, const redisReply *r, char *buf, size_t len)
{
    char want[64];
    if (i < KEYS) {
        if (r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0) return NULL;
        return "SET: expected +OK";
    }
    if (i < 2 * KEYS) {
        snprintf(want, sizeof(want), "r%lld-%d", round, i - KEYS);
        if (r->type == REDIS_REPLY_STRING && strcmp(r->str, want) == 0) return NULL;
        snprintf(buf, len, "GET k%d: expected %s", i - KEYS, want);
        return buf;
    }
    switch (i - 2 * KEYS) {
    case 0: /* INCR */
        if (r->type != REDIS_REPLY_INTEGER) return "INCR: expected an integer";
        if (w->resync) {
            w->resync = false;
            w->counter = r->integer;
            return NULL;
        }
        if (r->integer != w->counter + 1) {
            snprintf(buf, len, "INCR: expected %lld", w->counter + 1);
            return buf;
        }
        w->counter++;
        return NULL;
    case 1: /* MGET */
        if (r->type != REDIS_REPLY_ARRAY || r->elements != KEYS) return "MGET: expected 4 values";
        for (int j = 0; j < KEYS; j++) {
            snprintf(want, sizeof(want), "r%lld-%d", round, j);
            if (r->element[j]->type != REDIS_REPLY_STRING || strcmp(r->element[j]->str, want) != 0) {
                snprintf(buf, len, "MGET: value %d: expected %s", j, want);
                return buf;
            }
        }
        return NULL;
    case 2: /* ZADD of a new member */
    case 6:
        return r->type == REDIS_REPLY_INTEGER && r->integer == 1 ? NULL : "ZADD: expected :1";
    case 3: /* ZTICK: the one member at the threshold */
        snprintf(want, sizeof(want), "m%lld", round);
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->type == REDIS_REPLY_STRING &&
            strcmp(r->element[0]->str, want) == 0)
            return NULL;
        snprintf(buf, len, "ZTICK: expected [%s]", want);
        return buf;
    case 4:
        return r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0 ? NULL : "SET lock: expected +OK";
    case 5:
        return r->type == REDIS_REPLY_INTEGER && r->integer == 1 ? NULL : "LOCKRELEASE: expected :1";
    case 8: /* QACK of the last round's job */
        if (r->type == REDIS_REPLY_INTEGER && (w->popped_prev ? r->integer == 1 : r->integer <= 1))
            return NULL;
        return w->popped_prev ? "QACK: expected :1" : "QACK: expected :0 or :1";
    case 7: { /* QPOP: this round's job; an outage may have left older ones */
        snprintf(want, sizeof(want), "j%lld", round);
        if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 || r->elements % 2) return "QPOP: expected pairs";
        const redisReply *last = r->element[r->elements - 2];
        if (last->type == REDIS_REPLY_STRING && strcmp(last->str, want) == 0 &&
            (w->tolerant || r->elements == 2)) {
            w->popped = true;
            return NULL;
        }
        snprintf(buf, len, "QPOP: expected %s last%s", want, w->tolerant ? "" : " and alone");
        return buf;
    }
    }
    return "a reply too many";
}

#define ROUND_REPLIES (2 * KEYS + 9)

static void *worker_run(void *arg)
{
    worker *w = arg;
    redisContext *c = NULL;
    long long round = 0;
    while (!w->stop && !w->why[0]) {
        if (!c && !(c = vt_connect(w->port))) {
            snprintf(w->why, sizeof(w->why), "worker %d: no connection", w->id);
            break;
        }
        round++;
        w->popped = false;
        round_send(c, w, round);
        bool disturbed = false, closed = false;
        for (int i = 0; i < ROUND_REPLIES && !w->why[0]; i++) {
            redisReply *r = NULL;
            if (redisGetReply(c, (void **)&r) != REDIS_OK || !r) {
                if (!w->tolerant || (c->err != REDIS_ERR_EOF && c->err != REDIS_ERR_IO))
                    snprintf(w->why, sizeof(w->why), "worker %d round %lld reply %d: connection: %s", w->id,
                             round, i, c->errstr);
                closed = true;
                break;
            }
            char buf[128];
            const char *bad = NULL;
            if (w->tolerant && outage_error(r)) {
                disturbed = true;
                snprintf(w->last_outage, sizeof(w->last_outage), "%s", r->str);
            } else if (!disturbed || r->type != REDIS_REPLY_ERROR)
                bad = disturbed ? NULL : round_check(w, round, i, r, buf, sizeof(buf));
            else
                bad = "an error that is not the outage's";
            if (bad)
                snprintf(w->why, sizeof(w->why), "worker %d (%s) round %lld reply %d: %s, got %s", w->id,
                         w->tag, round, i, bad, VT_DESCRIBE(r));
            freeReplyObject(r);
        }
        w->popped_prev = w->popped && !closed;
        if (closed) {
            redisFree(c);
            c = NULL;
            w->closes++;
        }
        if (closed || disturbed) {
            w->disturbed++;
            w->resync = true; /* lost writes (SIGKILL) may take the counter back */
        } else if (!w->why[0]) {
            w->rounds++;
        }
    }
    if (c) redisFree(c);
    return NULL;
}

typedef struct load {
    worker w[WORKERS];
    pthread_t th[WORKERS];
} load;

/* tags[i % ntags] for worker i. */
static void load_start(load *l, const char *const *tags, int ntags, bool tolerant)
{
    memset(l, 0, sizeof(*l));
    for (int i = 0; i < WORKERS; i++) {
        l->w[i].port = proxy->port;
        l->w[i].id = i;
        l->w[i].tolerant = tolerant;
        l->w[i].resync = true;
        snprintf(l->w[i].tag, sizeof(l->w[i].tag), "%s", tags[i % ntags]);
        cr_assert_eq(pthread_create(&l->th[i], NULL, worker_run, &l->w[i]), 0);
    }
}

static const char *load_failure(load *l)
{
    for (int i = 0; i < WORKERS; i++)
        if (l->w[i].why[0]) return l->w[i].why;
    return NULL;
}

typedef struct load_wait {
    load *l;
    long long min_rounds; /* each worker past this many right rounds */
} load_wait;

static bool load_past(void *arg)
{
    load_wait *lw = arg;
    if (load_failure(lw->l)) return true;
    for (int i = 0; i < WORKERS; i++)
        if (lw->l->w[i].rounds < lw->min_rounds) return false;
    return true;
}

/* Every worker does `more` right rounds from now. */
static void load_more(load *l, long long more, int timeout_ms, const char *when)
{
    long long min = -1;
    for (int i = 0; i < WORKERS; i++)
        if (min < 0 || l->w[i].rounds < min) min = l->w[i].rounds;
    load_wait lw = {l, min + more};
    bool ok = vt_wait_until(load_past, &lw, timeout_ms);
    const char *why = load_failure(l);
    cr_assert(!why, "%s: %s", when, why);
    char state[2048] = "";
    for (int i = 0, at = 0; i < WORKERS && at < (int)sizeof(state); i++)
        at += snprintf(state + at, sizeof(state) - (size_t)at,
                       " w%d(%s) %lld right %lld disturbed %lld closes (%s);", i, l->w[i].tag, l->w[i].rounds,
                       l->w[i].disturbed, l->w[i].closes, l->w[i].last_outage);
    cr_assert(ok, "%s: the workers did not do %lld more rounds in %d ms:%s", when, more, timeout_ms, state);
}

static void load_stop(load *l)
{
    for (int i = 0; i < WORKERS; i++)
        l->w[i].stop = 1;
    for (int i = 0; i < WORKERS; i++)
        pthread_join(l->th[i], NULL);
    const char *why = load_failure(l);
    cr_assert(!why, "%s", why);
}

/* ---- the cluster ---- */

/* The replica of primary p (ROLE names its primary's port). */
static int replica_of(int p)
{
    for (int i = 0; i < VT_CLUSTER_NODES; i++) {
        if (i == p) continue;
        redisReply *r = vt_cluster_node_cmd(cl, i, "ROLE");
        bool mine = r && r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
                    strcmp(r->element[0]->str, "slave") == 0 && r->element[2]->integer == cl->node[p]->port;
        if (r) freeReplyObject(r);
        if (mine) return i;
    }
    return -1;
}

static int other_primary(int not )
{
    for (int i = 0; i < VT_CLUSTER_NODES; i++)
        if (i != not &&vt_cluster_is_primary(cl, i)) return i;
    return -1;
}

/* A hash tag whose slot node `want` serves: {<prefix>N}. */
static void tag_on(int want, const char *prefix, char *out, size_t len)
{
    for (int n = 0; n < 1000; n++) {
        snprintf(out, len, "{%s%d}", prefix, n);
        if (vt_cluster_key_node(cl, out) == want) return;
    }
    cr_assert_fail("no tag of prefix %s on node %d", prefix, want);
}

static long long stat_of(const char *name)
{
    return vt_proxy_stat(proxy->port, name);
}

typedef struct stat_wait {
    const char *name;
    long long above;
} stat_wait;

static bool stat_above(void *arg)
{
    stat_wait *s = arg;
    return stat_of(s->name) > s->above;
}

/* Every worker's last right round is on the node serving its tag now
 * (straight, no proxy). */
static void assert_writes_in_place(load *l)
{
    for (int i = 0; i < WORKERS; i++) {
        worker *w = &l->w[i];
        int at = vt_cluster_key_node(cl, w->tag);
        cr_assert_geq(at, 0);
        redisContext *c = vt_must_connect(cl->node[at]->port);
        redisReply *r = vt_cmd(c, "GET %s:w%d:n", w->tag, w->id);
        cr_assert(r && r->type == REDIS_REPLY_STRING && atoll(r->str) == w->counter,
                  "worker %d's counter on node %d: expected %lld, got %s", i, at, w->counter, VT_DESCRIBE(r));
        freeReplyObject(r);
        r = vt_cmd(c, "ZCARD %s:w%d:l", w->tag, w->id);
        cr_assert(r && r->type == REDIS_REPLY_INTEGER && r->integer == 1,
                  "worker %d's lease set: every job acknowledged but the last round's, got %s", i,
                  VT_DESCRIBE(r));
        freeReplyObject(r);
        r = vt_cmd(c, "EXISTS %s:w%d:k0 %s:w%d:k3", w->tag, w->id, w->tag, w->id);
        cr_assert(r && r->type == REDIS_REPLY_INTEGER && r->integer == 2, "worker %d's keys on node %d: %s",
                  i, at, VT_DESCRIBE(r));
        freeReplyObject(r);
        redisFree(c);
    }
}

/* ---- resharding ---- */

static const char tryagain_err[] = "-TRYAGAIN Multiple keys request during rehashing of slot\r\n";

/* A slot's keys split between source and target: a command over both is
 * answered -TRYAGAIN by the source. The proxy tries again in the
 * request's place; left so, its tries run out and the client gets the
 * error between its neighbours' replies; when the rest moves while it
 * waits, the client gets the values. A verb -ASKed to the target meets a
 * connection without its script: loaded first, then ASKING, then the verb
 * (not ASKING, the load, then the verb without it: -MOVED back). */
static void split_slot_story(void)
{
    int slot = vt_cluster_keyslot(cl, "{sp}");
    int from = vt_cluster_slot_owner(cl, 0, slot);
    cr_assert_geq(from, 0);
    int to = other_primary(from);
    cr_assert_geq(to, 0);
    redisContext *c = vt_must_connect(proxy->port);
    redisReply *r = vt_cmd(c, "MSET {sp}:a A {sp}:b B");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    redisFree(c);
    cr_assert(vt_cluster_move_begin(cl, slot, to));
    r = vt_cluster_node_cmd(cl, from, "MIGRATE 127.0.0.1 %d %s 0 5000 KEYS {sp}:a", cl->node[to]->port, "");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    long long tries0 = stat_of("cluster_tryagain");
    int fd = vt_must_sock(proxy->port);
    static const char req[] = "*3\r\n$3\r\nSET\r\n$5\r\nplain\r\n$1\r\n1\r\n"
                              "*3\r\n$4\r\nMGET\r\n$6\r\n{sp}:a\r\n$6\r\n{sp}:b\r\n"
                              "*3\r\n$11\r\nLOCKRELEASE\r\n$6\r\n{sp}:a\r\n$3\r\ntok\r\n"
                              "*2\r\n$3\r\nGET\r\n$5\r\nplain\r\n";
    char want[256];
    snprintf(want, sizeof(want), "+OK\r\n%s:0\r\n$1\r\n1\r\n", tryagain_err);
    cr_assert(vt_sock_send(fd, req, sizeof(req) - 1));
    vt_buf got = {0};
    cr_assert(vt_sock_read_len(fd, &got, strlen(want), VT_READ_DEADLINE_MS), "got only \"%s\"",
              vt_buf_escaped(&got));
    vt_assert_bytes(&got, want);
    vt_buf_reset(&got);
    long long tries1 = stat_of("cluster_tryagain");
    cr_assert_eq(tries1 - tries0, 5, "the proxy tried %lld times, expected 5", tries1 - tries0);
    cr_assert_gt(stat_of("cluster_ask"), 0, "the verb was not -ASKed");
    vt_http_resp h = vt_http_get(metrics_port, "/metrics");
    cr_assert_eq(h.status, 200, "/metrics: %s", vt_buf_escaped(&h.raw));
    vt_prom prom;
    char why[256];
    cr_assert(vt_prom_parse(h.body, h.body_len, &prom, why, sizeof(why)), "/metrics: %s", why);
    double tried = vt_prom_get(&prom, "verbproxy_cluster_redirects_total", "kind=\"tryagain\"", -1);
    vt_prom_free(&prom);
    vt_http_free(&h);
    cr_assert_eq((long long)tried, tries1, "redirects_total{kind=\"tryagain\"} %g, STATS %lld", tried,
                 tries1);
    cr_assert_eq(stat_of("cluster_moved"), 0, "a -MOVED while the slot was only migrating");
    /* The target loses its scripts: the verb -ASKed there meets NOSCRIPT,
     * and its retry after the load carries ASKING too. */
    r = vt_cluster_node_cmd(cl, to, "SCRIPT FLUSH");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    long long noscript0 = stat_of("noscript_recoveries");
    static const char verb[] = "*3\r\n$11\r\nLOCKRELEASE\r\n$6\r\n{sp}:a\r\n$3\r\ntok\r\n";
    cr_assert(vt_sock_send(fd, verb, sizeof(verb) - 1));
    cr_assert(vt_sock_read_len(fd, &got, 4, VT_READ_DEADLINE_MS), "got only \"%s\"", vt_buf_escaped(&got));
    vt_assert_bytes(&got, ":0\r\n");
    vt_buf_reset(&got);
    cr_assert_eq(stat_of("noscript_recoveries"), noscript0 + 1, "no NOSCRIPT recovery on the target");
    cr_assert_eq(stat_of("cluster_moved"), 0, "a -MOVED after the NOSCRIPT recovery");
    static const char mget[] = "*3\r\n$4\r\nMGET\r\n$6\r\n{sp}:a\r\n$6\r\n{sp}:b\r\n";
    cr_assert(vt_sock_send(fd, mget, sizeof(mget) - 1));
    cr_assert(vt_wait_until(stat_above, &(stat_wait){"cluster_tryagain", tries1}, 5000),
              "the MGET was not answered -TRYAGAIN");
    cr_assert(vt_cluster_move_keys(cl, slot, to));
    cr_assert(vt_sock_read_len(fd, &got, 18, VT_READ_DEADLINE_MS), "got only \"%s\"", vt_buf_escaped(&got));
    vt_assert_bytes(&got, "*2\r\n$1\r\nA\r\n$1\r\nB\r\n");
    vt_buf_free(&got);
    close(fd);
    cr_assert(vt_cluster_move_finish(cl, slot, to));
}

/* A client that leaves while its request waits for its next try: the
 * request is dropped (under ASan: nothing of the client touched after). */
static void leaving_client_story(void)
{
    int slot = vt_cluster_keyslot(cl, "{sq}");
    int from = vt_cluster_slot_owner(cl, 0, slot);
    int to = other_primary(from);
    cr_assert(from >= 0 && to >= 0);
    redisContext *c = vt_must_connect(proxy->port);
    redisReply *r = vt_cmd(c, "MSET {sq}:a A {sq}:b B");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    cr_assert(vt_cluster_move_begin(cl, slot, to));
    r = vt_cluster_node_cmd(cl, from, "MIGRATE 127.0.0.1 %d %s 0 5000 KEYS {sq}:a", cl->node[to]->port, "");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    int gone = vt_must_sock(proxy->port);
    long long tries0 = stat_of("cluster_tryagain");
    static const char mget[] = "*3\r\n$4\r\nMGET\r\n$6\r\n{sq}:a\r\n$6\r\n{sq}:b\r\n";
    cr_assert(vt_sock_send(gone, mget, sizeof(mget) - 1));
    cr_assert(vt_wait_until(stat_above, &(stat_wait){"cluster_tryagain", tries0}, 5000),
              "the MGET was not answered -TRYAGAIN");
    close(gone);
    /* A bystander meanwhile, then past the last try's time. */
    for (int i = 0; i < 20; i++) {
        r = vt_cmd(c, "MGET {sq}:b {sq}:b");
        cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2, "%s", VT_DESCRIBE(r));
        freeReplyObject(r);
    }
    cr_assert(vt_cluster_move_keys(cl, slot, to));
    cr_assert(vt_cluster_move_finish(cl, slot, to));
    r = vt_cmd(c, "MGET {sq}:a {sq}:b");
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                  r->element[0]->type == REDIS_REPLY_STRING,
              "%s", VT_DESCRIBE(r));
    freeReplyObject(r);
    redisFree(c);
}

Test(cluster_failover, a_slot_resharded_under_eight_pipelining_clients_shows_nothing)
{
    split_slot_story();
    leaving_client_story();
    /* The load's slot moves as redis-cli --cluster reshard moves it: its
     * workers' MGET and QPOP ... LEASE (whose lease key comes and goes)
     * meet -TRYAGAIN while the keys are split, -ASK, then -MOVED. */
    const char *tags[] = {"{mv}"};
    int slot = vt_cluster_keyslot(cl, "{mv}");
    int from = vt_cluster_slot_owner(cl, 0, slot);
    cr_assert_geq(from, 0);
    int to = other_primary(from);
    cr_assert_geq(to, 0);
    long long moved0 = stat_of("cluster_moved"), ask0 = stat_of("cluster_ask");
    load l;
    load_start(&l, tags, 1, false);
    load_more(&l, 10, 20000, "before the move");
    cr_assert(vt_cluster_move_begin(cl, slot, to));
    cr_assert(vt_cluster_move_keys(cl, slot, to));
    /* Every key is on the target now, the slot still the source's: each
     * request on it is -ASKed. Held so until one is (a busy machine can
     * move the keys before any worker sends another round). */
    cr_assert(vt_wait_until(stat_above, &(stat_wait){"cluster_ask", ask0}, 20000), "no -ASK followed");
    cr_assert(vt_cluster_move_finish(cl, slot, to));
    load_more(&l, 10, 20000, "after the move");
    load_stop(&l);
    cr_assert_gt(stat_of("cluster_moved"), moved0, "no -MOVED followed");
    cr_assert_eq(vt_cluster_key_node(cl, "{mv}"), to);
    assert_writes_in_place(&l);
}

/* ---- CLUSTER FAILOVER, with QPOP's exactly-once across it ---- */

#define JOBS 3000
#define QWORKERS 4

typedef struct qworker {
    int port;
    const char *tag;
    int *seen; /* per job, times popped (atomics: every worker's) */
    volatile long long *acked;
    char why[512];
} qworker;

/* QPOP ... LEASE then QACK of what it got, until the queue is empty. */
static void *qworker_run(void *arg)
{
    qworker *q = arg;
    redisContext *c = vt_connect(q->port);
    if (!c) {
        snprintf(q->why, sizeof(q->why), "no connection");
        return NULL;
    }
    for (;;) {
        redisReply *r = vt_cmd(c, "QPOP %s:jobs COUNT 8 LEASE %s:lease 60000", q->tag, q->tag);
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements % 2) {
            snprintf(q->why, sizeof(q->why), "QPOP: %s", VT_DESCRIBE(r));
            if (r) freeReplyObject(r);
            break;
        }
        if (r->elements == 0) {
            freeReplyObject(r);
            break;
        }
        const char *argv[2 + 8];
        size_t lens[2 + 8];
        char lease[64];
        snprintf(lease, sizeof(lease), "%s:lease", q->tag);
        argv[0] = "QACK", lens[0] = 4, argv[1] = lease, lens[1] = strlen(lease);
        int n = 2;
        for (size_t k = 0; k < r->elements; k += 2) {
            int job = atoi(r->element[k]->str + 3); /* "job<N>" */
            if (job >= 0 && job < JOBS) __atomic_fetch_add(&q->seen[job], 1, __ATOMIC_RELAXED);
            argv[n] = r->element[k]->str, lens[n++] = r->element[k]->len;
        }
        redisReply *a = vt_cmd_argv(c, n, argv, lens);
        bool ok = a && a->type == REDIS_REPLY_INTEGER && a->integer == n - 2;
        if (!ok)
            snprintf(q->why, sizeof(q->why), "QACK of %d: %s", n - 2, VT_DESCRIBE(a));
        else
            __atomic_fetch_add(q->acked, n - 2, __ATOMIC_RELAXED);
        if (a) freeReplyObject(a);
        freeReplyObject(r);
        if (!ok) break;
    }
    redisFree(c);
    return NULL;
}

static bool acked_past(void *arg)
{
    return __atomic_load_n((volatile long long *)arg, __ATOMIC_RELAXED) >= JOBS / 3;
}

Test(cluster_failover, cluster_failover_under_load_shows_nothing_and_each_job_is_popped_once)
{
    int p = vt_cluster_key_node(cl, "{fo}");
    cr_assert_geq(p, 0);
    int rep = replica_of(p);
    cr_assert_geq(rep, 0, "no replica of node %d", p);
    char on_p[32], on_p2[32], elsewhere[32];
    tag_on(p, "fo", on_p, sizeof(on_p));
    tag_on(p, "fp", on_p2, sizeof(on_p2));
    tag_on(other_primary(p), "fe", elsewhere, sizeof(elsewhere));
    /* The queue, on the primary that fails over. */
    redisContext *c = vt_must_connect(proxy->port);
    for (int base = 0; base < JOBS; base += 500) {
        const char *argv[2 + 1000];
        size_t lens[2 + 1000];
        static char names[500][16], scores[500][16];
        char key[64];
        snprintf(key, sizeof(key), "%s:jobs", on_p);
        argv[0] = "ZADD", lens[0] = 4, argv[1] = key, lens[1] = strlen(key);
        int n = 2;
        for (int k = 0; k < 500; k++) {
            snprintf(scores[k], sizeof(scores[k]), "%d", base + k);
            snprintf(names[k], sizeof(names[k]), "job%d", base + k);
            argv[n] = scores[k], lens[n++] = strlen(scores[k]);
            argv[n] = names[k], lens[n++] = strlen(names[k]);
        }
        redisReply *r = vt_cmd_argv(c, n, argv, lens);
        vt_assert_int(r, 500);
        freeReplyObject(r);
    }
    redisFree(c);
    long long noscript0 = stat_of("noscript_recoveries");

    const char *tags[] = {on_p, elsewhere, on_p2};
    load l;
    load_start(&l, tags, 3, false);
    static int seen[JOBS];
    memset(seen, 0, sizeof(seen));
    volatile long long acked = 0;
    qworker q[QWORKERS];
    pthread_t qth[QWORKERS];
    for (int i = 0; i < QWORKERS; i++) {
        q[i] = (qworker){.port = proxy->port, .tag = on_p, .seen = seen, .acked = &acked};
        cr_assert_eq(pthread_create(&qth[i], NULL, qworker_run, &q[i]), 0);
    }
    load_more(&l, 5, 20000, "before the failover");
    cr_assert(vt_wait_until(acked_past, (void *)&acked, 20000), "the queue workers did not get going");
    cr_assert(vt_cluster_failover(cl, rep));
    cr_assert(!vt_cluster_is_primary(cl, p), "node %d is still a primary", p);
    load_more(&l, 10, 20000, "after the failover");
    load_stop(&l);
    for (int i = 0; i < QWORKERS; i++)
        pthread_join(qth[i], NULL);
    for (int i = 0; i < QWORKERS; i++)
        cr_assert(!q[i].why[0], "queue worker %d: %s", i, q[i].why);
    cr_assert_eq(acked, JOBS, "%lld jobs acknowledged of %d", acked, JOBS);
    for (int j = 0; j < JOBS; j++)
        cr_assert_eq(seen[j], 1, "job%d popped %d times", j, seen[j]);
    /* Everything on the new primary: the load's writes, no lease left. */
    assert_writes_in_place(&l);
    redisContext *n = vt_must_connect(cl->node[rep]->port);
    redisReply *r = vt_cmd(n, "ZCARD %s:lease", on_p);
    vt_assert_int(r, 0);
    freeReplyObject(r);
    redisFree(n);
    /* The verbs on the new primary found their scripts loaded: no NOSCRIPT
     * even behind the scenes. */
    cr_assert_eq(stat_of("noscript_recoveries"), noscript0, "a NOSCRIPT after the failover");
}

/* ---- SIGKILL of a primary ---- */

typedef struct promoted_wait {
    int replica, dead;
} promoted_wait;

/* The replica is a primary and every live node says the cluster is ok. */
static bool promoted(void *arg)
{
    promoted_wait *w = arg;
    if (!vt_cluster_is_primary(cl, w->replica)) return false;
    for (int i = 0; i < VT_CLUSTER_NODES; i++) {
        if (i == w->dead) continue;
        redisReply *r = vt_cluster_node_cmd(cl, i, "CLUSTER INFO");
        bool ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_state:ok");
        if (r) freeReplyObject(r);
        if (!ok) return false;
    }
    return true;
}

static bool proxy_serves(void *tag)
{
    redisContext *c = vt_connect(proxy->port);
    if (!c) return false;
    redisReply *r = redisCommand(c, "SET %s:probe 1", (const char *)tag);
    bool ok = r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    if (r) freeReplyObject(r);
    redisFree(c);
    return ok;
}

typedef struct rounds_wait {
    load *l;
    long long from[WORKERS];
} rounds_wait;

static bool each_did_one_more(void *arg)
{
    rounds_wait *rw = arg;
    if (load_failure(rw->l)) return true;
    for (int i = 0; i < WORKERS; i++)
        if (rw->l->w[i].rounds <= rw->from[i]) return false;
    return true;
}

/* Each worker finishes a right round it started after now (load_more
 * counts from the slowest worker, so a faster one's round under way could
 * still end after it). */
static void each_worker_one_more_round(load *l)
{
    rounds_wait rw = {.l = l};
    for (int i = 0; i < WORKERS; i++)
        rw.from[i] = l->w[i].rounds + 1; /* (the round under way may count as right) */
    bool ok = vt_wait_until(each_did_one_more, &rw, 20000);
    const char *why = load_failure(l);
    cr_assert(!why, "right after the promotion: %s", why);
    cr_assert(ok, "right after the promotion: a worker did no right round in 20 s");
}

static long long disturbed_total(load *l)
{
    long long n = 0;
    for (int i = 0; i < WORKERS; i++)
        n += l->w[i].disturbed;
    return n;
}

Test(cluster_kill, a_primary_killed_under_load_costs_only_its_outage)
{
    /* The proxy's one seed, so the map must come from the nodes it learned. */
    int p = 0;
    cr_assert(vt_cluster_is_primary(cl, p), "node 0 is not a primary");
    int rep = replica_of(p);
    cr_assert_geq(rep, 0, "no replica of node %d", p);
    char on_p[32], on_p2[32], elsewhere[32];
    tag_on(p, "kl", on_p, sizeof(on_p));
    tag_on(p, "km", on_p2, sizeof(on_p2));
    tag_on(other_primary(p), "ke", elsewhere, sizeof(elsewhere));
    const char *tags[] = {on_p, elsewhere, on_p2};
    load l;
    load_start(&l, tags, 3, true);
    load_more(&l, 5, 20000, "before the kill");
    vt_redis_kill(cl->node[p]);
    /* A new client during the outage: a key of a live primary is served
     * (or, once the nodes mark the dead one failed, -CLUSTERDOWN), never
     * refused for the dead node's sake (it serves slot 0, the keyless
     * commands' and new clients' first node). */
    char key[64];
    snprintf(key, sizeof(key), "%s:new", elsewhere);
    for (int i = 0; i < 5; i++) {
        redisContext *n = vt_must_connect(proxy->port);
        redisReply *r = vt_cmd(n, "SET %s %d", key, i);
        cr_assert(r && (r->type == REDIS_REPLY_STATUS ||
                        (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "CLUSTERDOWN", 11) == 0)),
                  "a new client's SET on a live primary during the outage: %s", VT_DESCRIBE(r));
        freeReplyObject(r);
        redisFree(n);
    }
    promoted_wait pw = {rep, p};
    cr_assert(vt_wait_until(promoted, &pw, VT_CLUSTER_DEADLINE_MS), "node %d was not promoted", rep);
    cr_assert(vt_wait_until(proxy_serves, on_p, 15000), "the proxy did not reach the new primary");
    cr_assert_gt(disturbed_total(&l), 0, "the kill cost no worker a request: the story tested nothing");
    /* A round a worker had under way when the proxy first served the new
     * primary may still end with the outage's error: each worker finishes
     * one more right round before the count is taken. */
    each_worker_one_more_round(&l);
    long long disturbed = disturbed_total(&l);
    /* From now on every request succeeds, the verbs on the new primary too. */
    load_more(&l, 10, 20000, "after the promotion");
    cr_assert_eq(disturbed_total(&l), disturbed, "requests failed after the promotion");
    load_stop(&l);
    for (int i = 0; i < WORKERS; i++)
        cr_assert_gt(l.w[i].rounds, 0, "worker %d did no right round", i);
}

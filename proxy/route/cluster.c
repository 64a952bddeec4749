/* cluster.c - Redis Cluster as the upstream: the slot map, its refresh, the
 * plan of each command, and redirects (see cluster.h). */
#include "proxy/route/cluster.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

#include "proxy/verbs/verbs.h"
#include "proxy/cmd/command.h"
#include "protocol/resp_write.h"
#include "proxy/buffer.h"
#include "proxy/route/cluster_merge.h"
#include "proxy/route/hashslot.h"
#include "proxy/log.h"
#include "proxy/route/redirect.h"
#include "proxy/route/redirect_check.h"
#include "proxy/route/route.h"
#include "proxy/route/route_keys.h"
#include "proxy/route/route_plan.h"
#include "proxy/server.h"
#include "proxy/route/slotmap.h"
#include "proxy/route/topology.h"
#include "proxy/route/tryagain.h"
#include "proxy/upstream/upstream.h"

/* How long a fetch may take beyond the connect timeout before it counts
 * as failed. */
#define CLUSTER_FETCH_ANSWER_MS 2000
/* How often the policy is looked at (it says when to fetch; libuv timers
 * count milliseconds, and a fetch at most once a second needs no finer). */
#define CLUSTER_TICK_MS 100
/* Keys a command may have before the plan's arrays grow (rplan_space). */
#define CLUSTER_INLINE_KEYS 16

static const char clusterdown_unserved[] = "-CLUSTERDOWN Hash slot not served\r\n";
static const char crossslot[] = RPLAN_ERR_CROSSSLOT "\r\n";

struct cluster_state {
    slotmap map;
    topo policy;
    /* Per slot, the node serving it (NULL: none), from `map`. */
    upstream_node *slot_node[HASHSLOT_COUNT];
    upstream_node *any;        /* the first covered slot's node */
    upstream_node **primaries; /* every node serving a slot in the map */
    int nprimaries;
    int ready; /* a map was accepted */
    /* The fetch in flight: its own connection (closed once answered). */
    upstream_conn *fetch;
    uint64_t fetch_started;
    unsigned fetch_turn; /* round robin over the nodes known */
    uv_timer_t timer;
    tryagain_q *tryagain;     /* requests answered -TRYAGAIN, waiting to go again */
    rcheck_q *rcheck;         /* redirects waiting for their node's view (redirect_check.h) */
    resp_request_parser reqp; /* a redirected request read again: which command, its keys */
    vp_buf probe;             /* EXISTS of a script's keys, for its redirect's check */
    char last_error[160];
    /* Planning scratch, kept across commands. */
    rplan_scratch scratch;
    const char **argp;
    size_t *lens;
    int arg_cap;
    rplan_space space;
    void *space_mem;
    int space_cap;
    int *idx; /* arg_cap: a split part's argument indices */
    /* A CLUSTER_SPLIT decision's parts: part i's request is
     * part_reqs[part_off[i] .. part_off[i+1]) for part_node[i]. */
    vp_buf part_reqs;
    size_t *part_off;
    upstream_node **part_node;
    int nparts, part_cap;
    resp_arg *part_args; /* a part's arguments, for route_session_ops.split_part */
    int part_args_cap;
    rplan_merge merge;
    int merge_nkeys;           /* MGET: the keys (their parts and places: space.group, space.pos) */
    unsigned scan_node;        /* SCAN: the part's node ordinal ... */
    unsigned scan_nnodes;      /* ... of this many primaries */
    upstream_node **fan_nodes; /* fan-out: the primaries in the order of their lowest slot */
    int fan_cap;
};

static int cluster_follow_checked(vp_server *srv, upstream_node *from, const up_entry *e, const char *req,
                                  size_t reqlen, const redirect *r);

static uint64_t cluster_now(vp_server *srv)
{
    return uv_now(srv->loop);
}

int cluster_ready(const vp_server *srv)
{
    return srv->cluster && srv->cluster->ready;
}

upstream_node *cluster_any_node(vp_server *srv)
{
    cluster_state *cs = srv->cluster;
    if (!cs || !cs->any) return route_primary(srv);
    /* A primary with a connection that works, if one has: a new client, or
     * one whose connection failed, first goes here before its commands are
     * routed, and a dead node (the first slot's, killed, until its replica
     * is promoted) would fail every command it sent, for live nodes too. */
    for (int p = 0; p < cs->nprimaries; p++)
        if (upstream_node_is_ready(cs->primaries[p])) return cs->primaries[p];
    return cs->any;
}

/* ---- fetching the map ---- */

static void cluster_slots_answered(upstream_conn *up, void *arg, const char *p, size_t n);
static void cluster_fetch_failed(upstream_conn *up, void *arg, const char *why);

/* The fetch connection tells nobody but the cluster. */
static const upstream_owner cluster_fetch_owner = {.failed = cluster_fetch_failed,
                                                   .lost = cluster_fetch_failed};

static void cluster_fetch_start(vp_server *srv)
{
    cluster_state *cs = srv->cluster;
    /* Round robin over every node known (seeds, primaries seen): a node
     * that is down, or that lost its view, is not asked twice in a row. */
    upstream_node *node = srv->nodes[cs->fetch_turn++ % (unsigned)srv->nnodes];
    static const char slots_cmd[] = RESP_LIT_ARRAY(2) RESP_LIT_BULK(7, "CLUSTER") RESP_LIT_BULK(5, "SLOTS");
    upstream_conn *up = upstream_open(srv, node, NULL, &cluster_fetch_owner, NULL);
    upstream_ask(up, slots_cmd, sizeof(slots_cmd) - 1, cluster_slots_answered, NULL, UP_ASK_LARGE);
    cs->fetch = up;
    cs->fetch_started = cluster_now(srv);
    srv->stats.cluster_fetches++;
    vp_log(VP_LOG_DEBUG, "cluster: asking %s for the slot map", node->addr);
}

static void cluster_fetch_done(vp_server *srv)
{
    cluster_state *cs = srv->cluster;
    if (cs->fetch) upstream_close(cs->fetch);
    cs->fetch = NULL;
}

static void cluster_fetch_failed_now(vp_server *srv, const char *addr, const char *why)
{
    cluster_state *cs = srv->cluster;
    cluster_fetch_done(srv);
    topo_fetch_failed(&cs->policy, cluster_now(srv));
    srv->stats.cluster_fetch_failures++;
    if (strcmp(cs->last_error, why) != 0)
        vp_log(VP_LOG_WARNING, "cluster: no slot map from %s: %s", addr, why);
    snprintf(cs->last_error, sizeof(cs->last_error), "%s: %s", addr, why);
    if (!cs->ready) {
        char reason[sizeof(cs->last_error) + 16];
        snprintf(reason, sizeof(reason), "no slot map: %s", cs->last_error);
        route_session()->cluster_failed(srv, reason);
    }
}

static void cluster_tick(uv_timer_t *t)
{
    vp_server *srv = t->data;
    cluster_state *cs = srv->cluster;
    uint64_t now = cluster_now(srv);
    if (cs->fetch &&
        now - cs->fetch_started > (uint64_t)srv->conf.connect_timeout_ms + CLUSTER_FETCH_ANSWER_MS)
        cluster_fetch_failed_now(srv, cs->fetch->node->addr, "no answer to CLUSTER SLOTS in time");
    if (!cs->fetch && topo_should_fetch(&cs->policy, now)) cluster_fetch_start(srv);
    rcheck_tick(cs->rcheck, now);
}

/* The map was accepted: every slot's node, found or added by address. */
static void cluster_apply(vp_server *srv, slotmap *fresh)
{
    cluster_state *cs = srv->cluster;
    slotmap_replace(&cs->map, fresh);
    const slotmap *m = &cs->map;
    upstream_node **by_index = vp_malloc((size_t)(m->nnodes ? m->nnodes : 1) * sizeof(*by_index));
    memset(by_index, 0, (size_t)(m->nnodes ? m->nnodes : 1) * sizeof(*by_index));
    cs->any = NULL;
    free(cs->primaries);
    cs->primaries = vp_malloc((size_t)(m->nnodes ? m->nnodes : 1) * sizeof(*cs->primaries));
    cs->nprimaries = 0;
    int primaries = 0;
    for (int s = 0; s < HASHSLOT_COUNT; s++) {
        int i = slotmap_owner(m, s);
        if (i < 0) {
            cs->slot_node[s] = NULL;
            continue;
        }
        if (!by_index[i]) {
            by_index[i] = route_node_add(srv, m->nodes[i].host, strlen(m->nodes[i].host), m->nodes[i].port);
            primaries++;
            if (by_index[i]) cs->primaries[cs->nprimaries++] = by_index[i];
        }
        cs->slot_node[s] = by_index[i];
        if (!cs->any) cs->any = by_index[i];
    }
    free(by_index);
    int first = !cs->ready;
    cs->ready = 1;
    cs->last_error[0] = '\0';
    vp_log(first ? VP_LOG_NOTICE : VP_LOG_VERBOSE, "cluster: slot map: %d slots served by %d primaries",
           m->covered, primaries);
    route_session()->cluster_ready(srv);
}

/* The answer to our CLUSTER SLOTS (whole, p..p+n) on the fetch connection. */
static void cluster_slots_answered(upstream_conn *up, void *arg, const char *p, size_t n)
{
    (void)arg;
    vp_server *srv = up->srv;
    cluster_state *cs = srv->cluster;
    if (!cs || up != cs->fetch) return;
    char addr[sizeof(up->node->addr)];
    snprintf(addr, sizeof(addr), "%s", up->node->addr);
    char host[sizeof(up->node->host)];
    snprintf(host, sizeof(host), "%s", up->node->host);
    cluster_fetch_done(srv);
    slotmap fresh;
    slotmap_init(&fresh);
    char err[160];
    if (slotmap_parse_slots(&fresh, p, n, host, err, sizeof(err)) < 0) {
        slotmap_free(&fresh);
        cluster_fetch_failed_now(srv, addr, err);
        return;
    }
    uint64_t now = cluster_now(srv);
    topo_verdict v = topo_fetched(&cs->policy, now, cs->ready ? cs->map.covered : -1, fresh.covered);
    if (v == TOPO_ACCEPT) {
        cluster_apply(srv, &fresh);
    } else {
        vp_log(VP_LOG_WARNING, "cluster: %s's slot map covers %d slots, the one in use %d: %s", addr,
               fresh.covered, cs->map.covered,
               v == TOPO_HOLD ? "asking another node" : "kept the one in use");
    }
    slotmap_free(&fresh);
}

/* The fetch connection failed or was lost. */
static void cluster_fetch_failed(upstream_conn *up, void *arg, const char *why)
{
    (void)arg;
    vp_server *srv = up->srv;
    cluster_state *cs = srv->cluster;
    if (!cs || up != cs->fetch) return;
    char addr[sizeof(up->node->addr)];
    snprintf(addr, sizeof(addr), "%s", up->node->addr);
    cs->fetch = NULL; /* (closed by its caller) */
    cluster_fetch_failed_now(srv, addr, why);
}

void cluster_suspect(vp_server *srv, const char *why)
{
    cluster_state *cs = srv->cluster;
    if (!cs) return;
    vp_log(VP_LOG_DEBUG, "cluster: refreshing the slot map soon: %s", why);
    topo_want(&cs->policy, cluster_now(srv), TOPO_CONN_FAILED);
}

/* ---- start, stop ---- */

/* The check phase, after the poll phase's reads: the clients whose
 * replies came from several nodes in it get them in one write each. */
static void cluster_flush_check(uv_check_t *h)
{
    route_session()->flush_deferred(h->data);
}

/* A client's request (or a silent one) answered with a whole error: a
 * -MOVED or -ASK goes where it says, a -TRYAGAIN is sent again shortly
 * (tryagain.h), if the connection kept it (shared connections keep every
 * request until answered) and it was not redirected too often already. A
 * -CLUSTERDOWN goes on to the client, and the map is fetched again. */
static int cluster_error_reply(upstream_conn *up, const up_entry *e, const char *p, size_t n)
{
    if (n > 12 && memcmp(p, "-CLUSTERDOWN", 12) == 0) cluster_suspect(up->srv, "a reply said -CLUSTERDOWN");
    if (!cluster_is_redirect(p, n)) return 0;
    if (!e->client || !e->keep || e->flush_epoch || e->redirects >= CLUSTER_MAX_REDIRECTS) {
        cluster_note_redirect(up, p, n); /* passed on; the map learns it */
        return 0;
    }
    return 1;
}

static const upstream_watch cluster_watch = {.error_reply = cluster_error_reply,
                                             .redirect = cluster_redirect};

int cluster_start(vp_server *srv)
{
    cluster_state *cs = vp_malloc(sizeof(*cs));
    memset(cs, 0, sizeof(*cs));
    slotmap_init(&cs->map);
    rplan_scratch_init(&cs->scratch);
    srv->cluster = cs;
    for (int i = 0; i < srv->conf.ncluster_seeds; i++)
        route_node_add(srv, srv->conf.cluster_seed_hosts[i], strlen(srv->conf.cluster_seed_hosts[i]),
                       srv->conf.cluster_seed_ports[i]);
    if (srv->nnodes == 0) {
        vp_log(VP_LOG_WARNING, "cluster mode: no usable seed node (a host name too long?)");
        srv->cluster = NULL;
        free(cs);
        return -1;
    }
    topo_init(&cs->policy, cluster_now(srv));
    uv_timer_init(srv->loop, &cs->timer);
    cs->timer.data = srv;
    cs->tryagain = tryagain_new(srv);
    cs->rcheck = rcheck_new(srv, cluster_follow_checked);
    resp_request_init(&cs->reqp, NULL);
    uv_timer_start(&cs->timer, cluster_tick, 0, CLUSTER_TICK_MS);
    uv_check_init(srv->loop, &srv->flush_check);
    srv->flush_check.data = srv;
    uv_check_start(&srv->flush_check, cluster_flush_check);
    srv->upstream_watch = &cluster_watch;
    route_set_any_node(cluster_any_node);
    vp_log(VP_LOG_NOTICE, "cluster mode: %d seed node(s), the first %s", srv->conf.ncluster_seeds,
           srv->nodes[0]->addr);
    return 0;
}

static void cluster_timer_closed(uv_handle_t *h)
{
    cluster_state *cs = h->data;
    slotmap_free(&cs->map);
    resp_request_free(&cs->reqp);
    vp_buf_free(&cs->probe);
    free(cs->primaries);
    free(cs->argp);
    free(cs->lens);
    free(cs->idx);
    free(cs->space_mem);
    vp_buf_free(&cs->part_reqs);
    free(cs->part_off);
    free(cs->part_node);
    free(cs->part_args);
    free(cs->fan_nodes);
    free(cs);
}

void cluster_stop(vp_server *srv)
{
    cluster_state *cs = srv->cluster;
    if (!cs) return;
    cluster_fetch_done(srv);
    tryagain_free(cs->tryagain);
    rcheck_free(cs->rcheck);
    srv->cluster = NULL;
    route_session()->flush_deferred(srv);
    uv_close((uv_handle_t *)&srv->flush_check, NULL);
    uv_timer_stop(&cs->timer);
    cs->timer.data = cs;
    uv_close((uv_handle_t *)&cs->timer, cluster_timer_closed);
}

/* ---- planning ---- */

static void answer(cluster_decision *d, const char *reply, size_t len, int error)
{
    d->kind = CLUSTER_ANSWER;
    d->reply = reply;
    d->len = len;
    d->error = error;
}

static void answer_text(cluster_decision *d, const char *text, int error)
{
    int n = snprintf(d->buf, sizeof(d->buf), "%s\r\n", text);
    if (n < 0 || (size_t)n >= sizeof(d->buf)) n = (int)sizeof(d->buf) - 1;
    answer(d, d->buf, (size_t)n, error);
}

static void go_slot(cluster_state *cs, cluster_decision *d, int slot)
{
    d->slot = slot;
    d->node = cs->slot_node[slot];
    if (!d->node)
        answer(d, clusterdown_unserved, sizeof(clusterdown_unserved) - 1, 1);
    else
        d->kind = CLUSTER_GO;
}

/* A verb: every key in one slot, found from its checked call. */
static void plan_verb(cluster_state *cs, int argc, const resp_arg *argv, const verb_def *v,
                      cluster_decision *d)
{
    verb_call call;
    char err[VERB_ERR_MAX];
    if (verbs_check(v, argc, argv, &call, err, sizeof(err)) < 0) return; /* answered by the dispatch */
    int slot = -1;
    for (int k = 0; k < call.nkeys + call.range_count; k++) {
        int a = k < call.nkeys ? call.keys[k] : call.range_first + (k - call.nkeys);
        int s = hashslot_of(argv[a].ptr, argv[a].len);
        if (slot >= 0 && s != slot) {
            answer(d, crossslot, sizeof(crossslot) - 1, 1);
            return;
        }
        slot = s;
    }
    if (slot >= 0) go_slot(cs, d, slot);
}

static void plan_grow_args(cluster_state *cs, int argc)
{
    if (argc <= cs->arg_cap) return;
    int cap = cs->arg_cap ? cs->arg_cap : 16;
    while (cap < argc)
        cap *= 2;
    free(cs->argp);
    free(cs->lens);
    free(cs->idx);
    cs->argp = vp_malloc((size_t)cap * sizeof(*cs->argp));
    cs->lens = vp_malloc((size_t)cap * sizeof(*cs->lens));
    cs->idx = vp_malloc((size_t)cap * sizeof(*cs->idx));
    cs->arg_cap = cap;
}

static void plan_grow_space(cluster_state *cs, int keys)
{
    if (keys <= cs->space_cap && cs->space_mem) return;
    int cap = cs->space_cap ? cs->space_cap : CLUSTER_INLINE_KEYS;
    while (cap < keys)
        cap *= 2;
    free(cs->space_mem);
    cs->space_mem = vp_malloc(rplan_space_bytes(cap));
    rplan_space_init(&cs->space, cap, cs->space_mem);
    cs->space_cap = cap;
}

static void plan_split(vp_server *srv, const resp_arg *argv, const rplan *plan, cluster_decision *d);
static void plan_fanout(vp_server *srv, int argc, const resp_arg *argv, const rplan *plan,
                        cluster_decision *d);

void cluster_plan(vp_server *srv, int argc, const resp_arg *argv, const verb_def *v, cluster_decision *d)
{
    cluster_state *cs = srv->cluster;
    memset(d, 0, offsetof(cluster_decision, buf));
    d->slot = -1;
    if (!cs->ready) {
        d->kind = CLUSTER_WAIT;
        return;
    }
    d->kind = CLUSTER_GO; /* any node, unless said otherwise */
    if (v) {
        plan_verb(cs, argc, argv, v, d);
        return;
    }
    if (argc == 4 && cmd_arg_is(&argv[0], "verbproxy") && cmd_arg_is(&argv[1], "conveyor")) {
        /* VERBPROXY CONVEYOR INFO|REBASE key: the key's node (a script
         * there, proxy/conveyor/conveyor.h) */
        go_slot(cs, d, hashslot_of(argv[3].ptr, argv[3].len));
        return;
    }
    plan_grow_args(cs, argc);
    plan_grow_space(cs, CLUSTER_INLINE_KEYS);
    for (int i = 0; i < argc; i++) {
        cs->argp[i] = argv[i].ptr;
        cs->lens[i] = argv[i].len;
    }
    const cmd_info *cmd = cmd_table_lookup(argc, cs->argp, cs->lens);
    unsigned opts = srv->conf.cluster_split_writes ? RPLAN_SPLIT_WRITES : 0;
    rplan plan;
    if (rplan_make(&plan, cmd, argc, cs->argp, cs->lens, opts, &cs->space, &cs->scratch) ==
        RPLAN_NEED_SPACE) {
        plan_grow_space(cs, plan.nkeys);
        rplan_make(&plan, cmd, argc, cs->argp, cs->lens, opts, &cs->space, &cs->scratch);
    }
    switch (plan.kind) {
    case RPLAN_SINGLE:
        go_slot(cs, d, plan.slot);
        return;
    case RPLAN_ANY:
    case RPLAN_NEED_SPACE:
        return;
    case RPLAN_ERROR:
        answer_text(d, plan.error, 1);
        return;
    case RPLAN_LOCAL:
        switch (plan.local) {
        case RPLAN_LOCAL_PONG:
            answer(d, "+PONG\r\n", 7, 0);
            return;
        case RPLAN_LOCAL_ARG1: /* Redis echoes it as well as we would */
            return;
        case RPLAN_LOCAL_OK:
            answer(d, "+OK\r\n", 5, 0);
            return;
        case RPLAN_LOCAL_INTEGER: {
            answer(d, d->buf, resp_write_integer(d->buf, plan.integer), 0);
            return;
        }
        case RPLAN_LOCAL_ERROR:
            answer_text(d, plan.error, 1);
            return;
        }
        return;
    case RPLAN_SPLIT:
        plan_split(srv, argv, &plan, d);
        return;
    case RPLAN_FANOUT:
        plan_fanout(srv, argc, argv, &plan, d);
        return;
    }
}

/* ---- split and fanned-out commands ---- */

static void parts_reset(cluster_state *cs, int nparts)
{
    if (nparts > cs->part_cap) {
        int cap = cs->part_cap ? cs->part_cap : 8;
        while (cap < nparts)
            cap *= 2;
        free(cs->part_off);
        free(cs->part_node);
        cs->part_off = vp_malloc(((size_t)cap + 1) * sizeof(*cs->part_off));
        cs->part_node = vp_malloc((size_t)cap * sizeof(*cs->part_node));
        cs->part_cap = cap;
    }
    cs->part_reqs.len = 0;
    cs->nparts = 0;
    cs->part_off[0] = 0;
}

/* Part `nparts` for `node`: the arguments idx[0..argc) of argv, argument
 * `swap` (if >= 0) replaced by swap_p/swap_n. */
static void part_add(cluster_state *cs, upstream_node *node, const resp_arg *argv, const int *idx, int argc,
                     int swap, const char *swap_p, size_t swap_n)
{
    vp_buf *b = &cs->part_reqs;
    vp_buf_resp_array(b, argc);
    for (int i = 0; i < argc; i++) {
        if (idx[i] == swap)
            vp_buf_resp_bulk(b, swap_p, swap_n);
        else
            vp_buf_resp_bulk(b, argv[idx[i]].ptr, argv[idx[i]].len);
    }
    cs->part_node[cs->nparts++] = node;
    cs->part_off[cs->nparts] = b->len;
}

static void go_parts(cluster_state *cs, cluster_decision *d, rplan_merge merge)
{
    d->kind = CLUSTER_SPLIT;
    d->nparts = cs->nparts;
    cs->merge = merge;
}

/* A part the session sends otherwise (route_session_ops.split_part): its
 * arguments are cs->idx[0..n) of argv. 1 when it was added so. */
static int part_rewritten(vp_server *srv, upstream_node *node, const resp_arg *argv, int n)
{
    cluster_state *cs = srv->cluster;
    const route_session_ops *ops = route_session();
    if (!ops || !ops->split_part) return 0;
    if (n > cs->part_args_cap) {
        cs->part_args_cap = n + 16;
        cs->part_args = vp_realloc(cs->part_args, (size_t)cs->part_args_cap * sizeof(*cs->part_args));
    }
    for (int i = 0; i < n; i++)
        cs->part_args[i] = argv[cs->idx[i]];
    if (!ops->split_part(srv, n, cs->part_args, &cs->part_reqs)) return 0;
    cs->part_node[cs->nparts++] = node;
    cs->part_off[cs->nparts] = cs->part_reqs.len;
    return 1;
}

/* MGET, DEL, ... over several slots: one part per slot, its keys in their
 * order. */
static void plan_split(vp_server *srv, const resp_arg *argv, const rplan *plan, cluster_decision *d)
{
    cluster_state *cs = srv->cluster;
    parts_reset(cs, plan->ngroups);
    for (int g = 0; g < plan->ngroups; g++) {
        upstream_node *node = cs->slot_node[cs->space.groups[g].slot];
        if (!node) {
            answer(d, clusterdown_unserved, sizeof(clusterdown_unserved) - 1, 1);
            return;
        }
        int n = rplan_group_args(plan, g, cs->idx, cs->arg_cap);
        if (!part_rewritten(srv, node, argv, n)) part_add(cs, node, argv, cs->idx, n, -1, NULL, 0);
    }
    cs->merge_nkeys = plan->nkeys;
    go_parts(cs, d, plan->merge);
}

/* The primaries, each once, in the order of their lowest slot: the order
 * fan-out replies merge in, and a SCAN cursor's node ordinal. */
static int fanout_nodes(vp_server *srv, cluster_state *cs)
{
    if (cs->fan_cap < srv->nnodes) {
        free(cs->fan_nodes);
        cs->fan_cap = srv->nnodes;
        cs->fan_nodes = vp_malloc((size_t)cs->fan_cap * sizeof(*cs->fan_nodes));
    }
    int n = 0;
    upstream_node *last = NULL;
    for (int s = 0; s < HASHSLOT_COUNT; s++) {
        upstream_node *node = cs->slot_node[s];
        if (!node || node == last) continue;
        last = node;
        int seen = 0;
        for (int i = 0; i < n && !seen; i++)
            seen = cs->fan_nodes[i] == node;
        if (!seen && n < cs->fan_cap) cs->fan_nodes[n++] = node;
    }
    return n;
}

/* DBSIZE, KEYS, FLUSHALL, SCRIPT LOAD, ...: the command as it is to every
 * primary. SCAN: to the node its cursor names, with that node's cursor. */
static void plan_fanout(vp_server *srv, int argc, const resp_arg *argv, const rplan *plan,
                        cluster_decision *d)
{
    cluster_state *cs = srv->cluster;
    int np = fanout_nodes(srv, cs);
    if (np == 0) {
        answer(d, clusterdown_unserved, sizeof(clusterdown_unserved) - 1, 1);
        return;
    }
    for (int i = 0; i < argc; i++)
        cs->idx[i] = i;
    if (plan->merge == RPLAN_MERGE_SCAN) {
        unsigned node;
        uint64_t node_cursor;
        if (rplan_scan_decode(argv[1].ptr, argv[1].len, &node, &node_cursor) < 0) {
            answer_text(d, RPLAN_ERR_CURSOR, 1);
            return;
        }
        if (node >= (unsigned)np) {
            /* a cursor of a node gone since (fewer primaries now): the end */
            static const char done[] = RESP_LIT_ARRAY(2) RESP_LIT_BULK(1, "0") RESP_LIT_ARRAY(0);
            answer(d, done, sizeof(done) - 1, 0);
            return;
        }
        char cur[24];
        int n = snprintf(cur, sizeof(cur), "%llu", (unsigned long long)node_cursor);
        parts_reset(cs, 1);
        part_add(cs, cs->fan_nodes[node], argv, cs->idx, argc, 1, cur, (size_t)n);
        cs->scan_node = node;
        cs->scan_nnodes = (unsigned)np;
        go_parts(cs, d, RPLAN_MERGE_SCAN);
        d->fanout = 1;
        return;
    }
    parts_reset(cs, np);
    for (int i = 0; i < np; i++)
        part_add(cs, cs->fan_nodes[i], argv, cs->idx, argc, -1, NULL, 0);
    go_parts(cs, d, plan->merge);
    d->fanout = 1;
}

void cluster_part(vp_server *srv, int i, upstream_node **node, const char **req, size_t *len)
{
    cluster_state *cs = srv->cluster;
    *node = cs->part_node[i];
    *req = cs->part_reqs.data + cs->part_off[i];
    *len = cs->part_off[i + 1] - cs->part_off[i];
}

struct cmerge *cluster_part_merge(vp_server *srv)
{
    cluster_state *cs = srv->cluster;
    cmerge *m = cmerge_new(cs->merge, cs->nparts, cs->merge == RPLAN_MERGE_MGET ? cs->merge_nkeys : 0,
                           cs->space.group, cs->space.pos);
    if (cs->merge == RPLAN_MERGE_SCAN) cmerge_set_scan(m, cs->scan_node, cs->scan_nnodes);
    return m;
}

/* ---- redirects ---- */

int cluster_is_redirect(const char *p, size_t n)
{
    return (n > 7 && memcmp(p, "-MOVED ", 7) == 0) || (n > 5 && memcmp(p, "-ASK ", 5) == 0) ||
           (n >= 9 && memcmp(p, "-TRYAGAIN", 9) == 0);
}

void cluster_detach_client(vp_server *srv, struct client_session *c)
{
    if (!srv->cluster) return;
    tryagain_detach_client(srv->cluster->tryagain, c);
    rcheck_detach_client(srv->cluster->rcheck, c);
}

/* ---- who said it: Redis, or a script ---- */

/* A redirected request, read again from the bytes its connection kept. */
typedef struct redirect_origin {
    int script;        /* it ran a script: an error may be the script's own text */
    int nkeys;         /* script: its keys, found as Redis finds them */
    int slot;          /* script: its first key's slot (Redis refuses keys of several) */
    int multiple_keys; /* script: a key other than the first (Redis's -TRYAGAIN needs one) */
} redirect_origin;

/* The commands whose error reply a client can choose: a script's
 * redis.error_reply, returned after its writes ran. */
static int runs_script(const resp_arg *name)
{
    static const char *const names[] = {"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strlen(names[i]) == name->len && strncasecmp(name->ptr, names[i], name->len) == 0) return 1;
    return 0;
}

static void script_keys(cluster_state *cs, int argc, const resp_arg *argv, redirect_origin *o)
{
    plan_grow_args(cs, argc);
    for (int i = 0; i < argc; i++) {
        cs->argp[i] = argv[i].ptr;
        cs->lens[i] = argv[i].len;
    }
    const cmd_info *cmd = cmd_table_lookup(argc, cs->argp, cs->lens);
    int n = cmd ? rkeys_find(cmd, argc, cs->argp, cs->lens, cs->idx, cs->arg_cap) : 0;
    o->nkeys = n < cs->arg_cap ? n : cs->arg_cap;
    if (o->nkeys == 0) return;
    const resp_arg *first = &argv[cs->idx[0]];
    o->slot = hashslot_of(first->ptr, first->len);
    for (int k = 1; k < o->nkeys; k++) {
        const resp_arg *a = &argv[cs->idx[k]];
        if (a->len != first->len || memcmp(a->ptr, first->ptr, a->len) != 0) o->multiple_keys = 1;
    }
}

/* A call of one of the proxy's own verbs (built-in, or a polyfill): its
 * scripts return no redirect. A custom verb (a `verb` line) is the
 * operator's Lua, which may return any error text (redis.error_reply):
 * taken as a script's, like EVAL. */
static int builtin_verb(const upstream_conn *up, const up_entry *e)
{
    const verb_table *t = upstream_verbs(up);
    if (e->verb < 0 || e->verb >= t->count) return 0; /* (never) unknown: not Redis's words */
    return !t->verbs[e->verb]->owned;
}

static void origin_of(cluster_state *cs, const upstream_conn *up, const up_entry *e, const char *req,
                      size_t reqlen, redirect_origin *o)
{
    memset(o, 0, sizeof(*o));
    o->slot = -1;
    if (e->kind == UP_VERB && builtin_verb(up, e)) return;
    /* (a custom verb is sent as EVALSHA <sha> <numkeys> <keys> ...: its
     * keys are found below as a script's) */
    if (e->kind != UP_REPLY && e->kind != UP_VERB) return;
    size_t used = 0;
    resp_request_reset(&cs->reqp);
    if (resp_request_parse(&cs->reqp, req, reqlen, &used) != RESP_REQ_COMMAND) {
        o->script = 1; /* (a kept request is whole: never) unknown, so not Redis's words */
        return;
    }
    if (!runs_script(&cs->reqp.argv[0])) return;
    o->script = 1;
    script_keys(cs, cs->reqp.argc, cs->reqp.argv, o);
}

/* ---- following ---- */

/* The node at host:port if the proxy learned it from the cluster (a seed,
 * a node of the slot map, one a check confirmed); NULL for any other
 * address: nothing is sent there on a redirect's word. */
static upstream_node *known_node(vp_server *srv, const char *host, size_t hostlen, int port)
{
    for (int i = 0; i < srv->nnodes; i++) {
        upstream_node *n = srv->nodes[i];
        if (n->port == port && strlen(n->host) == hostlen && memcmp(n->host, host, hostlen) == 0) return n;
    }
    if (slotmap_find(&srv->cluster->map, host, hostlen, port) >= 0)
        return route_node_add(srv, host, hostlen, port);
    return NULL;
}

/* Redis's own -MOVED to a known node: the slot is that node's from now on
 * (until the next map), and a fresh map is wanted soon. */
static void learn_moved(vp_server *srv, upstream_node *node, const redirect *r)
{
    cluster_state *cs = srv->cluster;
    if (slotmap_moved(&cs->map, r->slot, r->host, r->hostlen, r->port) >= 0) {
        cs->slot_node[r->slot] = node;
        if (!cs->any) cs->any = node;
    }
}

static void count_followed(vp_server *srv, const redirect *r)
{
    if (r->kind == REDIRECT_MOVED) {
        srv->stats.cluster_moved++;
        topo_want(&srv->cluster->policy, cluster_now(srv), TOPO_MOVED);
    } else {
        srv->stats.cluster_ask++;
    }
}

/* Send the kept request e to `node` (after ASKING when `asking`), its
 * reply for the same pending reply of the client. 0 when it cannot go: the error goes on. */
static int send_again(vp_server *srv, const upstream_conn *from, upstream_node *node, const up_entry *e,
                      const char *req, size_t reqlen, int asking)
{
    upstream_conn *to = upstream_shared(srv, node, e->client ? upstream_clients()->id(e->client) : 0);
    if (to == from) return 0; /* sent where it was: a loop; the client gets the error */
    if (e->kind == UP_VERB && e->verb >= upstream_verbs(to)->count) return 0; /* a reload dropped it */
    up_entry moved = *e;
    moved.redirects++;
    moved.tries = 0; /* a new node: its own tries */
    upstream_resend(to, &moved, req, reqlen, asking);
    return 1;
}

static int cluster_follow_checked(vp_server *srv, upstream_node *from, const up_entry *e, const char *req,
                                  size_t reqlen, const redirect *r)
{
    cluster_state *cs = srv->cluster;
    if (!cs || !e->client) return 0;
    if (r->kind == REDIRECT_TRYAGAIN) return tryagain_hold(cs->tryagain, from, e, req, reqlen);
    upstream_node *node = route_node_add(srv, r->host, r->hostlen, r->port); /* (a node of the cluster) */
    if (!node || node == from) return 0;
    count_followed(srv, r);
    return send_again(srv, NULL, node, e, req, reqlen, r->kind == REDIRECT_ASK);
}

static void refuse(vp_server *srv, const upstream_conn *up, const char *p, size_t n, const char *why)
{
    srv->stats.cluster_refused++;
    vp_log(VP_LOG_VERBOSE, "cluster: a reply from %s reading %.*s was not followed: %s", up->node->addr,
           (int)(n > 2 ? n - 2 : n), p, why);
}

/* EXISTS of the script's keys (origin_of's: the parser's arguments, at
 * cs->idx), into cs->probe: all there on the replying node means the
 * script ran (redirect_check.h). */
static void exists_probe(cluster_state *cs, const redirect_origin *o)
{
    const resp_arg *argv = cs->reqp.argv;
    cs->probe.len = 0;
    vp_buf_resp_array(&cs->probe, o->nkeys + 1);
    vp_buf_resp_bulk(&cs->probe, "EXISTS", 6);
    for (int k = 0; k < o->nkeys; k++) {
        const resp_arg *a = &argv[cs->idx[k]];
        vp_buf_resp_bulk(&cs->probe, a->ptr, a->len);
    }
}

/* A script's -MOVED, -ASK or -TRYAGAIN: one Redis cannot have given that
 * command (no key, another slot, -TRYAGAIN for one key) is the script's
 * own, passed on at once; the rest is checked (redirect_check.h). */
static int script_redirect(upstream_conn *up, const up_entry *e, const char *req, size_t reqlen,
                           const char *p, size_t n, const redirect *r, const redirect_origin *o)
{
    vp_server *srv = up->srv;
    int redis_could = o->nkeys > 0 && (r->kind == REDIRECT_TRYAGAIN ? o->multiple_keys : r->slot == o->slot);
    if (!redis_could) {
        refuse(srv, up, p, n, "a script's error Redis cannot have given that command");
        return 0;
    }
    cluster_state *cs = srv->cluster;
    exists_probe(cs, o);
    rcheck_want w = {.script = 1,
                     .slot = o->slot,
                     .multiple_keys = o->multiple_keys,
                     .nkeys = o->nkeys,
                     .probe = cs->probe.data,
                     .probelen = cs->probe.len};
    if (rcheck_hold(cs->rcheck, up->node, e, req, reqlen, p, n, r, &w)) return 1;
    refuse(srv, up, p, n, "too many redirects held for checks");
    return 0;
}

void cluster_note_redirect(upstream_conn *up, const char *p, size_t n)
{
    redirect r;
    if (!up->srv->cluster || redirect_parse(p, n, &r) != REDIRECT_MOVED) return;
    /* Not followed, and perhaps a script's: the map is asked for again,
     * never changed on its word. */
    topo_want(&up->srv->cluster->policy, cluster_now(up->srv), TOPO_MOVED);
}

int cluster_redirect(upstream_conn *up, const up_entry *e, const char *req, size_t reqlen, const char *p,
                     size_t n)
{
    vp_server *srv = up->srv;
    redirect r;
    cluster_state *cs = srv->cluster;
    if (!cs || redirect_parse(p, n, &r) == REDIRECT_NONE || r.kind == REDIRECT_CLUSTERDOWN) return 0;
    if (r.kind != REDIRECT_TRYAGAIN && r.hostlen == 0) { /* ":port": the replying node's host */
        r.host = up->node->host;
        r.hostlen = strlen(up->node->host);
    }
    redirect_origin o;
    origin_of(cs, up, e, req, reqlen, &o);
    if (o.script) return script_redirect(up, e, req, reqlen, p, n, &r, &o);
    /* The same node, the same way, a little later (tryagain.h). */
    if (r.kind == REDIRECT_TRYAGAIN) return tryagain_hold(cs->tryagain, up->node, e, req, reqlen);
    upstream_node *node = known_node(srv, r.host, r.hostlen, r.port);
    if (!node) {
        /* Redis's words, but an address the proxy never learned: only
         * once the node that said it lists that node. */
        rcheck_want w = {.script = 0, .slot = -1};
        if (rcheck_hold(cs->rcheck, up->node, e, req, reqlen, p, n, &r, &w)) return 1;
        refuse(srv, up, p, n, "too many redirects held for checks");
        return 0;
    }
    if (r.kind == REDIRECT_MOVED) learn_moved(srv, node, &r);
    count_followed(srv, &r);
    return send_again(srv, up, node, e, req, reqlen, r.kind == REDIRECT_ASK);
}

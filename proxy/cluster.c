/* cluster.c - Redis Cluster as the upstream: the slot map, its refresh, the
 * plan of each command, and redirects (see cluster.h). */
#include "proxy/cluster.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "lua/verbs.h"
#include "proxy/buffer.h"
#include "proxy/client.h"
#include "proxy/hashslot.h"
#include "proxy/log.h"
#include "proxy/redirect.h"
#include "proxy/route.h"
#include "proxy/route_keys.h"
#include "proxy/route_plan.h"
#include "proxy/server.h"
#include "proxy/slotmap.h"
#include "proxy/topology.h"
#include "proxy/upstream.h"
#include "proxy/upstream_internal.h"

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
    route_node *slot_node[HASHSLOT_COUNT];
    route_node *any; /* the first covered slot's node */
    int ready;       /* a map was accepted */
    /* The fetch in flight: its own connection (closed once answered). */
    upstream_conn *fetch;
    uint64_t fetch_started;
    unsigned fetch_turn; /* round robin over the nodes known */
    uv_timer_t timer;
    char last_error[160];
    /* Planning scratch, kept across commands. */
    rplan_scratch scratch;
    const char **argp;
    size_t *lens;
    int arg_cap;
    rplan_space space;
    void *space_mem;
    int space_cap;
};

static uint64_t cluster_now(vp_server *srv)
{
    return uv_now(srv->loop);
}

int cluster_ready(const vp_server *srv)
{
    return srv->cluster && srv->cluster->ready;
}

route_node *cluster_any_node(vp_server *srv)
{
    cluster_state *cs = srv->cluster;
    return cs && cs->any ? cs->any : route_primary(srv);
}

/* ---- fetching the map ---- */

static void cluster_fetch_start(vp_server *srv)
{
    cluster_state *cs = srv->cluster;
    /* Round robin over every node known (seeds, primaries seen): a node
     * that is down, or that lost its view, is not asked twice in a row. */
    route_node *node = srv->nodes[cs->fetch_turn++ % (unsigned)srv->nnodes];
    static const char slots_cmd[] = "*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n";
    upstream_conn *up = upstream_open(srv, node, NULL);
    up->topo = 1;
    outq_add(&up->out, slots_cmd, sizeof(slots_cmd) - 1);
    up_fifo_push(up, NULL, UP_SLOTS);
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
        client_cluster_failed(srv, reason);
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
}

/* The map was accepted: every slot's node, found or added by address. */
static void cluster_apply(vp_server *srv, slotmap *fresh)
{
    cluster_state *cs = srv->cluster;
    slotmap_replace(&cs->map, fresh);
    const slotmap *m = &cs->map;
    route_node **by_index = vp_malloc((size_t)(m->nnodes ? m->nnodes : 1) * sizeof(*by_index));
    memset(by_index, 0, (size_t)(m->nnodes ? m->nnodes : 1) * sizeof(*by_index));
    cs->any = NULL;
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
    client_cluster_ready(srv);
}

void cluster_slots_answered(upstream_conn *up, const char *p, size_t n)
{
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

void cluster_fetch_failed(upstream_conn *up, const char *why)
{
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
    client_flush_deferred(h->data);
}

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
    uv_timer_start(&cs->timer, cluster_tick, 0, CLUSTER_TICK_MS);
    uv_check_init(srv->loop, &srv->flush_check);
    srv->flush_check.data = srv;
    uv_check_start(&srv->flush_check, cluster_flush_check);
    vp_log(VP_LOG_NOTICE, "cluster mode: %d seed node(s), the first %s", srv->conf.ncluster_seeds,
           srv->nodes[0]->addr);
    return 0;
}

static void cluster_timer_closed(uv_handle_t *h)
{
    cluster_state *cs = h->data;
    slotmap_free(&cs->map);
    free(cs->argp);
    free(cs->lens);
    free(cs->space_mem);
    free(cs);
}

void cluster_stop(vp_server *srv)
{
    cluster_state *cs = srv->cluster;
    if (!cs) return;
    cluster_fetch_done(srv);
    srv->cluster = NULL;
    client_flush_deferred(srv);
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
    cs->argp = vp_malloc((size_t)cap * sizeof(*cs->argp));
    cs->lens = vp_malloc((size_t)cap * sizeof(*cs->lens));
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
    plan_grow_args(cs, argc);
    plan_grow_space(cs, CLUSTER_INLINE_KEYS);
    for (int i = 0; i < argc; i++) {
        cs->argp[i] = argv[i].ptr;
        cs->lens[i] = argv[i].len;
    }
    const rkeys_cmd *cmd = rkeys_lookup(argc, cs->argp, cs->lens);
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
            int n = snprintf(d->buf, sizeof(d->buf), ":%lld\r\n", plan.integer);
            answer(d, d->buf, (size_t)n, 0);
            return;
        }
        case RPLAN_LOCAL_ERROR:
            answer_text(d, plan.error, 1);
            return;
        }
        return;
    case RPLAN_SPLIT:
    case RPLAN_FANOUT: {
        /* Not yet: an error, never a partial answer from one node. */
        int n = snprintf(d->buf, sizeof(d->buf),
                         "-ERR verbproxy: '%.*s' %s is not supported in cluster mode yet\r\n",
                         (int)(argv[0].len > 32 ? 32 : argv[0].len), argv[0].ptr,
                         plan.kind == RPLAN_SPLIT ? "with keys in several slots" : "over every primary");
        answer(d, d->buf, (size_t)n, 1);
        return;
    }
    }
}

/* ---- redirects ---- */

int cluster_is_redirect(const char *p, size_t n)
{
    return (n > 7 && memcmp(p, "-MOVED ", 7) == 0) || (n > 5 && memcmp(p, "-ASK ", 5) == 0);
}

int cluster_redirect(upstream_conn *up, const up_entry *e, const char *req, size_t reqlen, const char *p,
                     size_t n)
{
    vp_server *srv = up->srv;
    cluster_state *cs = srv->cluster;
    redirect r;
    if (!cs || redirect_parse(p, n, &r) == REDIRECT_NONE) return 0;
    if (r.kind != REDIRECT_MOVED && r.kind != REDIRECT_ASK) return 0;
    const char *host = r.hostlen ? r.host : up->node->host;
    size_t hostlen = r.hostlen ? r.hostlen : strlen(up->node->host);
    route_node *node = route_node_add(srv, host, hostlen, r.port);
    if (!node) return 0;
    if (r.kind == REDIRECT_MOVED) {
        srv->stats.cluster_moved++;
        if (slotmap_moved(&cs->map, r.slot, host, hostlen, r.port) >= 0) {
            cs->slot_node[r.slot] = node;
            if (!cs->any) cs->any = node;
        }
        topo_want(&cs->policy, cluster_now(srv), TOPO_MOVED);
    } else {
        srv->stats.cluster_ask++;
    }
    upstream_conn *to = upstream_shared(srv, node, e->client ? e->client->id : 0);
    if (to == up) return 0; /* sent where it was: a loop; the client gets the error */
    upstream_resend(to, e, req, reqlen, r.kind == REDIRECT_ASK);
    return 1;
}

#include "proxy/upstream/upstream.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "lua/verbs.h"
#include "proxy/session/client.h"
#include "proxy/route/cluster.h"
#include "proxy/route/route.h"
#include "proxy/session/limits.h"
#include "proxy/log.h"
#include "proxy/pool.h"
#include "proxy/ops/readiness.h"
#include "proxy/route/sentinel.h"
#include "proxy/route/sentinel_parse.h"
#include "proxy/net/tls.h"
#include "proxy/upstream/upstream_hold.h"
#include "proxy/upstream/upstream_internal.h"

/* Read size per uv read, Redis's PROTO_IOBUF_LEN. */
#define UP_READ_CHUNK (16 * 1024)
#define UP_READ_MAX (1024 * 1024)
/* A reply still incomplete past this size is handed on piece by piece
 * instead of being held whole: this bounds what the proxy holds per reply. */
#define UP_STREAM_THRESHOLD (16 * 1024)
/* ... except the slot map (CLUSTER SLOTS): read whole, however fragmented
 * the cluster's slots are (at most 16384 ranges of a few nodes each). */
#define UP_SLOTS_MAX (16 * 1024 * 1024)
#define UP_KEEP_BYTES (64 * 1024)
#define NOSCRIPT_PREFIX "-NOSCRIPT"
/* A verb is sent again at most this often (a flush between each retry). */
#define UP_NOSCRIPT_RETRIES 2

/* A barrier is a PING with this connection's own token, so no reply a
 * client asked for can be taken for it. Its answer in RESP2 subscribe mode is
 * ["pong", token]; anywhere else the token as a bulk string. */
#define BARRIER_PREFIX "verbproxy:barrier:"
#define RESET_REPLY "+RESET\r\n"

typedef enum up_route {
    ROUTE_REPLY,         /* the client's oldest waiting slot */
    ROUTE_PUSH,          /* straight to the client, out of band / uncounted */
    ROUTE_SWALLOW,       /* our barrier's answer: releases the waiting slot */
    ROUTE_SWALLOW_KEEP,  /* the +RESET of a closing barrier: the PING's answer follows */
    ROUTE_RESET,         /* a +RESET that ends raw mode */
    ROUTE_SCRIPT_LOAD,   /* our SCRIPT LOAD's answer: checked, dropped */
    ROUTE_OUTPUT_PROBE,  /* our output-limit probe's answer: read, dropped */
    ROUTE_DEFAULT_PROBE, /* our ACL GETUSER default's answer: read, dropped */
    ROUTE_NOSCRIPT,      /* a verb's NOSCRIPT: reload and send it again */
    ROUTE_SERVER,        /* our HELLO's answer: read, dropped */
    ROUTE_AUTH,          /* our AUTH's answer: the connection is ready, or failed */
    ROUTE_PROBE,         /* the readiness probe's answer (readiness.c) */
    ROUTE_ROLE,          /* our ROLE's answer (sentinel mode): is it the primary? */
    ROUTE_SLOTS,         /* our CLUSTER SLOTS' answer (cluster mode) */
    ROUTE_REDIRECT       /* a -MOVED, -ASK or -TRYAGAIN for a kept request (cluster mode): sent again */
} up_route;

static void up_close_cb(uv_handle_t *h);
static void up_make_barrier(upstream_conn *up);
static void up_on_connect(uv_connect_t *req, int status);
static void up_on_written(outq *q, int status);

/* ---- the FIFO of what the upstream owes ---- */

/* The first ring comes from a pool and goes back when nothing is owed, so
 * an idle connection holds none; one grown past it is kept, as before. */
#define UP_FIFO_FIRST 64
static vp_pool up_fifo_rings = VP_POOL_INIT("fifo_rings", UP_FIFO_FIRST * sizeof(up_entry));

static void up_fifo_ring_free(upstream_conn *up)
{
    if (up->fifo_cap == UP_FIFO_FIRST)
        vp_pool_put(&up_fifo_rings, up->fifo);
    else
        free(up->fifo);
    up->fifo = NULL;
    up->fifo_cap = up->fifo_head = 0;
}

/* The entry for the next request; its reply goes to the slot the client
 * is about to queue. */
up_entry *up_fifo_push(upstream_conn *up, struct client_session *c, up_entry_kind kind)
{
    if (up->fifo_len == up->fifo_cap) {
        size_t ncap = up->fifo_cap ? up->fifo_cap * 2 : UP_FIFO_FIRST;
        up_entry *n = up->fifo_cap ? vp_malloc(ncap * sizeof(*n)) : vp_pool_get(&up_fifo_rings);
        for (size_t i = 0; i < up->fifo_len; i++)
            n[i] = up->fifo[(up->fifo_head + i) % up->fifo_cap];
        if (up->fifo) up_fifo_ring_free(up);
        up->fifo = n;
        up->fifo_cap = ncap;
        up->fifo_head = 0;
    }
    up_entry *e = &up->fifo[(up->fifo_head + up->fifo_len) % up->fifo_cap];
    *e = (up_entry){
        .client = c, .seq = c ? client_next_seq(c) : 0, .kind = kind, .verb = -1, .sent = up->sent++};
    up->fifo_len++;
    if (kind == UP_VERB) up->verbs_in_flight++;
    return e;
}

static up_entry *fifo_head(upstream_conn *up)
{
    return up->fifo_len ? &up->fifo[up->fifo_head] : NULL;
}

/* Done with the oldest entry: the bytes it kept go too. */
void up_fifo_pop(upstream_conn *up)
{
    up_entry_kind kind = up->fifo[up->fifo_head].kind;
    if (kind == UP_VERB) up->verbs_in_flight--;
    if (kind == UP_HELLO || kind == UP_SERVER_PROBE) up_server_entry_done(up, &up->fifo[up->fifo_head]);
    up->kept_head += up->fifo[up->fifo_head].keep;
    if (up->kept_head >= up->kept.len) up->kept.len = up->kept_head = 0;
    unsigned long long done = up->fifo[up->fifo_head].sent + 1; /* entries answered */
    while (up->nbatches && done >= up->batch_end[0]) {
        up->nbatches--;
        memmove(up->batch_end, up->batch_end + 1, (size_t)up->nbatches * sizeof(up->batch_end[0]));
    }
    up->fifo_head = (up->fifo_head + 1) % up->fifo_cap;
    up->fifo_len--;
    if (up->fifo_len == 0 && up->fifo_cap == UP_FIFO_FIRST) up_fifo_ring_free(up);
}

/* ---- barriers ---- */

static void up_make_barrier(upstream_conn *up)
{
    /* Unique enough: nobody guesses it by accident, and it differs per
     * connection. */
    static unsigned long long seq;
    unsigned long long r =
        uv_hrtime() ^ ((unsigned long long)(uintptr_t)up << 16) ^ (++seq * 0x9E3779B97F4A7C15ULL);
    char token[40];
    int tl = snprintf(token, sizeof(token), BARRIER_PREFIX "%016llx", r);
    snprintf(up->barrier_cmd, sizeof(up->barrier_cmd), "*2\r\n$4\r\nPING\r\n$%d\r\n%s\r\n", tl, token);
    snprintf(up->barrier_reply, sizeof(up->barrier_reply), "$%d\r\n%s\r\n", tl, token);
}

/* ---- connecting ---- */

static void up_release_handle(uv_handle_t *h)
{
    if (!uv_is_closing(h)) uv_close(h, up_close_cb);
}

void upstream_close(upstream_conn *up)
{
    if (up->state == UPSTREAM_CLOSED) return;
    up->state = UPSTREAM_CLOSED;
    up->client = NULL;
    if (up->retired) {
        upstream_conn **p = &up->srv->retired;
        while (*p && *p != up)
            p = &(*p)->retired_next;
        if (*p) *p = up->retired_next;
    }
    if (up->side && up->node->side == up)
        up->node->side = NULL;
    else if (up->shared && !up->side && up->node->shared[up->shared_index] == up)
        up->node->shared[up->shared_index] = NULL;
    uv_timer_stop(&up->timer);
    up_release_handle((uv_handle_t *)&up->timer);
    if (up->tls && !up->lost && outq_close_notify(&up->out))
        vp_log(VP_LOG_DEBUG, "upstream %s: close_notify sent", up_addr(up));
    if (up->resolving) uv_cancel((uv_req_t *)&up->resolve_req); /* its callback drops the last ref */
    if (up->stream_inited) up_release_handle(&up->h.handle);
}

/* ---- across a reload (proxy/ops/reload.c) ---- */

const verb_table *upstream_verbs(const upstream_conn *up)
{
    return up->vt ? up->vt : &up->srv->verbs;
}

/* Its verbs sent with a replaced table are all answered (or it closes):
 * from now on it uses the live one, loading its scripts afresh (the load
 * indexes are the new table's). */
void up_release_vt(upstream_conn *up)
{
    verb_table *t = up->vt;
    if (!t) return;
    up->vt = NULL;
    up->scripts_loaded = 0;
    if (--t->refs == 0) {
        verbs_free(t);
        free(t);
    }
}

static void up_keep_verbs(upstream_conn *up, verb_table *old, int *kept)
{
    if (!up || up->state == UPSTREAM_CLOSED || up->vt || up->verbs_in_flight == 0) return;
    up->vt = old;
    old->refs++;
    (*kept)++;
}

int upstream_keep_verbs(vp_server *srv, verb_table *old)
{
    int kept = 0;
    for (int n = 0; n < srv->nnodes; n++) {
        for (int i = 0; i < VP_MAX_SHARED_UPSTREAMS; i++)
            up_keep_verbs(srv->nodes[n]->shared[i], old, &kept);
        up_keep_verbs(srv->nodes[n]->side, old, &kept);
    }
    for (upstream_conn *up = srv->retired; up; up = up->retired_next)
        up_keep_verbs(up, old, &kept);
    for (struct client_session *c = srv->clients; c; c = c->next)
        if (c->up && !c->up->shared) up_keep_verbs(c->up, old, &kept);
    return kept;
}

/* A retired connection that owes nothing more closes; its clients take a
 * new shared connection with their next command. */
static void up_retired_check(upstream_conn *up)
{
    if (!up->retired || up->state == UPSTREAM_CLOSED || up->fifo_len) return;
    vp_log(VP_LOG_DEBUG, "upstream %s: a connection replaced by the reload owes nothing more: closed",
           up_addr(up));
    if (!up->side) client_shared_retired(up->srv, up, 1);
    upstream_close(up);
}

static void up_retire(upstream_conn *up)
{
    vp_server *srv = up->srv;
    up->retired = 1;
    up->retired_next = srv->retired;
    srv->retired = up;
    if (!up->side) client_shared_retired(srv, up, 0);
    up_retired_check(up);
}

void upstream_primary_moved(vp_server *srv)
{
    /* Every client that sent commands through the old primary is closed
     * once it has its replies, as Sentinel's CLIENT KILL TYPE normal on the
     * demoted node closes a direct client: writes the old primary took
     * after the promotion are lost, and a client moved on silently would
     * see its own writes vanish (an INCR going back). One that never sent
     * anything moves on. */
    struct client_session *next;
    for (struct client_session *c = srv->clients; c; c = next) {
        next = c->next; /* (client_drain_close may close c, never another) */
        if (c->up && c->up->shared && client_used_shared(c)) client_drain_close(c);
    }
    /* Clients owing the retired connections nothing move now; the ones
     * left on them have requests in flight on the old primary. */
    upstream_retire_shared(srv);
    srv->upstream_auth_failure[0] = '\0';
    for (struct client_session *c = srv->clients; c; c = next) {
        next = c->next; /* (client_drain_close may close c, never another) */
        if (c->up && (!c->up->shared || c->up->retired)) client_drain_close(c);
    }
    ready_upstream_moved(srv);
}

void upstream_retire_shared(vp_server *srv)
{
    for (int n = 0; n < srv->nnodes; n++) {
        route_node *node = srv->nodes[n];
        for (int i = 0; i < VP_MAX_SHARED_UPSTREAMS; i++) {
            upstream_conn *up = node->shared[i];
            if (!up) continue;
            node->shared[i] = NULL;
            up_retire(up);
        }
        if (node->side) {
            upstream_conn *up = node->side;
            node->side = NULL;
            up_retire(up);
        }
    }
}

static void up_maybe_free(upstream_conn *up)
{
    if (up->handles_open > 0 || up->resolving) return;
    if (up->own_counted) up->srv->own_upstreams--;
    up_release_vt(up);
    outq_free(&up->out);
    vp_tls_free(up->tls);
    vp_pool_buf_release(&up->in);
    vp_buf_free(&up->kept);
    vp_buf_free(&up->scratch);
    if (up->fifo) up_fifo_ring_free(up);
    free(up);
}

static void up_close_cb(uv_handle_t *h)
{
    upstream_conn *up = h->data;
    up->handles_open--;
    up_maybe_free(up);
}

/* A connect that did not succeed: tell the client once, then go away. */
static void up_fail(upstream_conn *up, const char *reason)
{
    struct client_session *c = up->client;
    char why[160];
    snprintf(why, sizeof(why), "%s", reason);
    up->srv->stats.upstream_connect_failures++;
    metrics_connect_failed(&up->srv->metrics, why, up->authing && up->state == UPSTREAM_READY);
    vp_log(VP_LOG_VERBOSE, "upstream %s: connect failed: %s", up_addr(up), why);
    sentinel_recheck(up->srv, why);
    upstream_close(up);
    if (c)
        client_upstream_failed(c, why);
    else if (up->side)
        up_side_failed(up, why);
    else if (up->shared)
        client_shared_failed(up->srv, up, why);
    else if (up->probe)
        ready_probe_failed(up, why);
    else if (up->topo)
        cluster_fetch_failed(up, why);
}

static void up_read_refusal(upstream_conn *up);
static int up_is_refusal(const char *p, size_t n);

/* Mid-session loss: the client gets what already arrived, then is closed. */
static void up_lost(upstream_conn *up, const char *reason)
{
    struct client_session *c = up->client;
    char why[160];
    if (up->tls && !up->replied) {
        /* TLS 1.3: a server refusing our certificate says so (an alert)
         * after our side of the handshake is over, so before any reply
         * this is a failed handshake. When our first request crossed the
         * alert, the server's close resets the connection and the write
         * fails before the alert is read: it is read now. Only if none
         * came is the reset (or close) what is said. */
        up->srv->stats.tls_handshake_failures++;
        int refused = 1;
        if (strncmp(reason, "TLS: ", 5) == 0) {
            snprintf(why, sizeof(why), "%s", reason);
        } else if (vp_tls_read_late_alert(up->tls)) {
            snprintf(why, sizeof(why), "TLS: %s", vp_tls_error(up->tls));
        } else {
            refused = 0;
            snprintf(why, sizeof(why), "TLS: %s right after the handshake (a refused client certificate?)",
                     reason);
        }
        reason = why;
        /* Refused by the handshake, Redis ran none of what was sent (it
         * never finished accepting): the oldest request waiting gets the
         * error a failed connect gives, as a refusal, before the client is
         * closed. (A plain close or reset may follow a request that ran,
         * e.g. SHUTDOWN: then the client sees only the close.) */
        if (refused) {
            int n = snprintf(up->refusal, sizeof(up->refusal), "-ERR upstream unavailable: %s: %s",
                             up_addr(up), reason);
            if (n > (int)sizeof(up->refusal) - 3) n = (int)sizeof(up->refusal) - 3;
            memcpy(up->refusal + n, "\r\n", 2);
            up->refusal_len = (unsigned char)(n + 2);
        }
    }
    up->srv->stats.upstream_lost++;
    up_read_refusal(up); /* (before the close takes the socket) */
    if (up->refusal_len)
        vp_log(VP_LOG_VERBOSE, "upstream %s: refused the connection: %.*s", up_addr(up),
               (int)up->refusal_len - 2, up->refusal);
    else
        vp_log(VP_LOG_VERBOSE, "upstream %s: connection lost: %s", up_addr(up), reason);
    sentinel_recheck(up->srv, reason);
    up->lost = 1;
    upstream_close(up);
    if (c)
        client_upstream_lost(c, reason);
    else if (up->side)
        up_side_lost(up, reason);
    else if (up->shared)
        client_shared_lost(up->srv, up, reason);
    else if (up->probe)
        ready_probe_failed(up, reason);
    else if (up->topo)
        cluster_fetch_failed(up, reason);
}

static void up_on_timeout(uv_timer_t *t)
{
    upstream_conn *up = t->data;
    if (up->state != UPSTREAM_CONNECTING && !up->authing && !up->role_check)
        return; /* (connect-timeout covers our AUTH and ROLE too) */
    if (up->error[0]) {
        up_fail(up, up->error); /* a failure parked by upstream_open */
    } else if (up->tls && !vp_tls_established(up->tls)) {
        up->srv->stats.tls_handshake_failures++;
        up_fail(up, "TLS: handshake timed out");
    } else {
        up_fail(up, "connection timed out");
    }
}

static int up_start_connect(upstream_conn *up, const struct sockaddr *sa)
{
    vp_server *srv = up->srv;
    int rc = uv_tcp_init(srv->loop, &up->h.tcp);
    if (rc < 0) return rc;
    up->h.handle.data = up;
    up->stream_inited = 1;
    up->handles_open++;
    uv_tcp_nodelay(&up->h.tcp, 1);
    return uv_tcp_connect(&up->connect_req, &up->h.tcp, sa, up_on_connect);
}

static void up_on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    upstream_conn *up = req->data;
    up->resolving = 0;
    if (up->state == UPSTREAM_CLOSED) {
        if (res) uv_freeaddrinfo(res);
        up_maybe_free(up);
        return;
    }
    if (status < 0) {
        char why[128];
        snprintf(why, sizeof(why), "cannot resolve host: %s", uv_strerror(status));
        up_fail(up, why);
        return;
    }
    int rc = up_start_connect(up, res->ai_addr);
    uv_freeaddrinfo(res);
    if (rc < 0) up_fail(up, uv_strerror(rc));
}

/* With upstream credentials, AUTH is the connection's first request:
 * queued before anything else can be, sent when the transport is ready
 * (up_transport_ready), and the connection takes clients' requests once it
 * is answered +OK (up_auth_answered). */
static void up_queue_auth(upstream_conn *up)
{
    const vp_config *conf = &up->srv->conf;
    if (!conf->upstream_auth) return;
    /* Copied: a reload may replace the settings before it is written. */
    outq_add_copy(&up->out, conf->upstream_auth, conf->upstream_auth_len);
    up_fifo_push(up, NULL, UP_AUTH);
    up->authing = 1;
}

/* Sentinel mode: ROLE follows (our AUTH and) goes before anything else, and
 * the connection takes no client's request until it says "master": the
 * address the sentinels gave may already be a demoted node's. */
static void up_queue_role(upstream_conn *up)
{
    static const char role[] = "*1\r\n$4\r\nROLE\r\n";
    if (up->srv->conf.upstream_mode != CONF_MODE_SENTINEL) return;
    outq_add(&up->out, role, sizeof(role) - 1);
    up_fifo_push(up, NULL, UP_ROLE);
    up->role_check = 1;
}

upstream_conn *upstream_open(vp_server *srv, route_node *node, struct client_session *client)
{
    upstream_conn *up = vp_malloc(sizeof(*up));
    memset(up, 0, sizeof(*up));
    up->srv = srv;
    up->node = node;
    up->client = client;
    up->hold_batch = 1; /* (a client that never joined one has 0) */
    up->state = UPSTREAM_CONNECTING;
    up->connect_req.data = up;
    up->resolve_req.data = up;
    uv_timer_init(srv->loop, &up->timer);
    up->timer.data = up;
    up->handles_open = 1;
    outq_init(&up->out, &up->h.stream, up, up_on_written);
    srv->stats.upstream_connects++;
    if (client) { /* (a shared one is opened without a client) */
        srv->own_upstreams++;
        up->own_counted = 1;
    }
    up_make_barrier(up);
    up_queue_auth(up);
    up_queue_role(up);

    const vp_config *conf = &srv->conf;
    int rc = 0;
    if (!node->host[0]) {
        /* Sentinel mode before any sentinel named a primary: failed from
         * the loop, with the sentinels' reason. */
        snprintf(up->error, sizeof(up->error), "no primary known: %.108s", sentinel_error(srv));
        uv_timer_start(&up->timer, up_on_timeout, 0, 0);
        return up;
    }
    if (node->port == 0) {
        rc = uv_pipe_init(srv->loop, &up->h.pipe, 0);
        if (rc == 0) {
            up->h.handle.data = up;
            up->stream_inited = 1;
            up->handles_open++;
            uv_pipe_connect(&up->connect_req, &up->h.pipe, node->host, up_on_connect);
        }
    } else {
        struct sockaddr_storage ss;
        if (uv_ip4_addr(node->host, node->port, (struct sockaddr_in *)&ss) == 0 ||
            uv_ip6_addr(node->host, node->port, (struct sockaddr_in6 *)&ss) == 0) {
            rc = up_start_connect(up, (struct sockaddr *)&ss);
        } else {
            char port[16];
            snprintf(port, sizeof(port), "%d", node->port);
            struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
            rc = uv_getaddrinfo(srv->loop, &up->resolve_req, up_on_resolved, node->host, port, &hints);
            if (rc == 0) up->resolving = 1;
        }
    }
    if (rc < 0) {
        /* Report from the loop, never from inside the caller. */
        snprintf(up->error, sizeof(up->error), "%s", uv_strerror(rc));
        uv_timer_start(&up->timer, up_on_timeout, 0, 0);
    } else {
        uv_timer_start(&up->timer, up_on_timeout, (uint64_t)conf->connect_timeout_ms, 0);
    }
    return up;
}

int upstream_is_ready(const upstream_conn *up)
{
    return up->state == UPSTREAM_READY && !up->authing && !up->role_check && !up->setting_up &&
           (!up->shared || up->auth != UP_AUTH_UNKNOWN);
}

int upstream_was_set_up(const upstream_conn *up)
{
    return !up->authing && !up->role_check && !up->setting_up && (!up->shared || up->auth != UP_AUTH_UNKNOWN);
}

int upstream_requires_auth(const upstream_conn *up)
{
    return up->auth == UP_AUTH_REQUIRED;
}

int upstream_node_requires_auth(const upstream_conn *up)
{
    if (up->node->default_needs_auth) return 1; /* (upstream_defauth.c) */
    for (int i = 0; i < up->srv->conf.shared_upstreams && i < VP_MAX_SHARED_UPSTREAMS; i++)
        if (up->node->shared[i] && upstream_requires_auth(up->node->shared[i])) return 1;
    return 0;
}

/* ---- shared connections ---- */

static const char no_evict[] = "*3\r\n$6\r\nCLIENT\r\n$8\r\nNO-EVICT\r\n$2\r\non\r\n";

upstream_conn *upstream_shared(vp_server *srv, route_node *node, unsigned long long client_id)
{
    int i = (int)(client_id % (unsigned long long)srv->conf.shared_upstreams);
    if (!node->shared[i]) {
        upstream_conn *up = upstream_open(srv, node, NULL);
        up->shared = 1;
        up->shared_index = i;
        node->shared[i] = up;
        /* Many clients' replies queue on it: under maxmemory-clients Redis
         * must not take it for one big client and evict it. (Refused by a
         * Redis before 7.0 or an ACL: then nothing changes.) */
        upstream_forward_silent(up, no_evict, sizeof(no_evict) - 1);
        /* Whether Redis has AGGREGATE COUNT (upstream_server.c), known
         * before any client's command. */
        if (srv->conf.aggregate_count == CONF_POLYFILL_AUTO) upstream_ask_server(up);
        /* Clients use it once Redis said whether they may share
         * (upstream_outlimit.c). */
        up->setting_up = 1;
        upstream_probe_output_limit(up);
    }
    return node->shared[i];
}

void upstream_detach_client(upstream_conn *up, struct client_session *c)
{
    for (size_t i = 0; i < up->fifo_len; i++) {
        up_entry *e = &up->fifo[(up->fifo_head + i) % up->fifo_cap];
        if (e->client == c) e->client = NULL;
    }
}

/* A shared connection's queue is written before the loop iteration ends
 * once this much has gathered, so that Redis works on the first part while
 * the proxy still reads the rest from clients (with one write per iteration
 * the proxy, Redis and the clients took turns; on 2 cores, 8 KiB gave 8-15%
 * more throughput at -P 16 for the same proxy CPU, and changes nothing at
 * -P 1, where an iteration gathers less). */
#define UP_FLUSH_EARLY_BYTES 8192

/* Writes a shared connection's queue, unless UP_SHARED_BATCHES earlier
 * writes are still being answered: then what gathers goes when the oldest
 * is (up_on_read). While Redis works through one write the next one grows,
 * so the writes stay large however the loop iterations fall; without the
 * limit, each iteration that found a client or two ready wrote them alone,
 * and at -P 16 such rounds cost the proxy and Redis twice the CPU per
 * request. */
static int up_shared_write(upstream_conn *up)
{
    if (up->flush_error) return up->flush_error;
    if (up->nbatches == UP_SHARED_BATCHES) return 0;
    int rc = upstream_flush(up);
    if (rc == 0 && up->sent != up->marked) {
        up->batch_end[up->nbatches++] = up->sent;
        up->marked = up->sent;
        up_hold_written(up);
    }
    return rc;
}

void upstream_flush_early(upstream_conn *up)
{
    if (up->state != UPSTREAM_READY || outq_size(&up->out) < UP_FLUSH_EARLY_BYTES) return;
    int rc = up_shared_write(up);
    if (rc < 0) up->flush_error = rc;
}

/* Write a shared connection's queue and let the clients held back for its
 * backlog go on. */
static void up_shared_flush(upstream_conn *up)
{
    size_t resume_below = (size_t)up->srv->conf.buffer_limit / 2;
    if (up_hold_wait(up, UP_FLUSH_EARLY_BYTES)) return; /* more is due: the timerfd wakes the loop */
    int rc = up_shared_write(up);
    /* What the clients held back send goes now too, before the loop waits,
     * and again while the kernel takes it all, for a few rounds (then the
     * replies to what went wake the loop again, and reading them has its
     * turn). */
    for (int round = 0; round < 4 && rc == 0 && up->waiters && outq_size(&up->out) <= resume_below; round++) {
        client_shared_drained(up->srv, up);
        if (up->state != UPSTREAM_READY) return;
        rc = up_shared_write(up);
    }
    if (rc < 0) up_lost(up, uv_strerror(rc));
}

void upstream_flush_shared(vp_server *srv)
{
    for (int n = 0; n < srv->nnodes; n++) {
        route_node *node = srv->nodes[n];
        for (int i = 0; i < srv->conf.shared_upstreams; i++) {
            upstream_conn *up = node->shared[i];
            if (up && up->state == UPSTREAM_READY) up_shared_flush(up);
        }
        if (node->side && node->side->state == UPSTREAM_READY) up_shared_flush(node->side);
    }
    /* A retired one may hold requests queued before the reload retired it
     * (in this very iteration): they go too. */
    upstream_conn *next;
    for (upstream_conn *up = srv->retired; up; up = next) {
        next = up->retired_next; /* (a write error closes it, which unlinks it) */
        if (up->state == UPSTREAM_READY && outq_size(&up->out)) up_shared_flush(up);
    }
}

void upstream_close_shared(vp_server *srv)
{
    for (int n = 0; n < srv->nnodes; n++) {
        for (int i = 0; i < VP_MAX_SHARED_UPSTREAMS; i++)
            if (srv->nodes[n]->shared[i]) upstream_close(srv->nodes[n]->shared[i]);
        if (srv->nodes[n]->side) upstream_close(srv->nodes[n]->side);
    }
    while (srv->retired)
        upstream_close(srv->retired); /* (unlinks it) */
    up_hold_close();
}

/* ---- reading replies ---- */

static void up_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    upstream_conn *up = h->data;
    vp_pool_buf_reserve(&up->in, UP_READ_CHUNK);
    size_t room = up->in.cap - up->in.len;
    if (room > UP_READ_MAX) room = UP_READ_MAX; /* uv_buf_t lengths are unsigned int */
    *buf = uv_buf_init(up->in.data + up->in.len, (unsigned int)room);
}

static int bytes_are(const char *p, size_t n, const char *lit)
{
    size_t l = strlen(lit);
    return n == l && memcmp(p, lit, l) == 0;
}

/* The answers to a closing barrier are "+RESET" (absent when a SKIP was in
 * force) and then the PING's: the token, or "-NOAUTH" when Redis needs a
 * password (RESET logged the connection out). A "+RESET" is held back until
 * the next reply shows whose it was: the client may have sent RESET too. */
#define NOAUTH_REPLY "-NOAUTH Authentication required.\r\n"

static up_route up_decide_close_barrier(upstream_conn *up, const char *p, size_t n)
{
    int held = up->reset_held;
    if (bytes_are(p, n, up->barrier_reply) || (held && bytes_are(p, n, NOAUTH_REPLY))) {
        up->reset_held = 0; /* that +RESET was ours */
        return ROUTE_SWALLOW;
    }
    /* Anything else: a +RESET held so far was the client's. */
    if (held && up->client) client_push(up->client, RESET_REPLY, sizeof(RESET_REPLY) - 1);
    up->reset_held = bytes_are(p, n, RESET_REPLY);
    return up->reset_held ? ROUTE_SWALLOW_KEEP : ROUTE_PUSH;
}

#define NOAUTH_PREFIX "-NOAUTH "

/* A shared connection never sends AUTH, so whether Redis requires it there
 * shows in the replies: -NOAUTH to one of the proxy's own requests says it
 * does (a client's error reply proves nothing: a script can return any
 * error text); a reply that is not an error says it does not (a command
 * passed the check, e.g. after CONFIG SET requirepass ""); other errors say
 * nothing, since Redis finds an unknown command or a wrong arity first. The
 * first reply is to the proxy's own CLIENT NO-EVICT, which passes that far
 * on any Redis: it settles the question before any client's command is sent
 * (upstream_is_ready); the output-limit probe every UP_OUTPUT_PROBE_MS asks
 * again. While it is required, clients that have not authenticated leave
 * the shared connection for their own (client_may_share). */
static void up_learn_auth(upstream_conn *up, const up_entry *e, const char *p, size_t n)
{
    if (p[0] != '-' && up->auth == UP_AUTH_NOT_REQUIRED) return; /* the common case */
    if (up->auth == UP_AUTH_UNKNOWN) up->announce_ready = 1;
    int ours = e && !e->client;
    if (p[0] != '-') {
        if (up->auth == UP_AUTH_REQUIRED) up->reauth_pending = 1;
        up->auth = UP_AUTH_NOT_REQUIRED;
    } else if (ours && n >= sizeof(NOAUTH_PREFIX) - 1 &&
               memcmp(p, NOAUTH_PREFIX, sizeof(NOAUTH_PREFIX) - 1) == 0) {
        if (up->auth != UP_AUTH_REQUIRED)
            vp_log(VP_LOG_NOTICE,
                   "upstream %s requires AUTH and the proxy has no upstream-pass: clients that have not "
                   "authenticated get connections of their own",
                   up_addr(up));
        up->auth = UP_AUTH_REQUIRED;
    } else if (up->auth == UP_AUTH_UNKNOWN)
        up->auth = UP_AUTH_NOT_REQUIRED;
}

/* Cluster mode: a client's request answered -MOVED or -ASK goes where it
 * says, one answered -TRYAGAIN is sent again shortly (tryagain.h), if the
 * connection kept it (shared connections keep every request until
 * answered) and it was not redirected too often already. A -CLUSTERDOWN
 * goes on to the client, and the map is fetched again. */
static up_route up_decide_redirect(upstream_conn *up, const up_entry *e, const char *p, size_t n, int whole)
{
    if (!up->srv->cluster || !whole || p[0] != '-') return ROUTE_REPLY;
    if (n > 12 && memcmp(p, "-CLUSTERDOWN", 12) == 0) cluster_suspect(up->srv, "a reply said -CLUSTERDOWN");
    if (!cluster_is_redirect(p, n)) return ROUTE_REPLY;
    if (!e->client || !e->keep || e->flush_epoch || e->redirects >= CLUSTER_MAX_REDIRECTS) {
        cluster_note_redirect(up, p, n); /* passed on; the map learns it */
        return ROUTE_REPLY;
    }
    return ROUTE_REDIRECT;
}

/* Where does the reply starting at p go? `whole` says p..p+n is all of it. */
static up_route up_decide(upstream_conn *up, const char *p, size_t n, int whole)
{
    if (up->framer.type == '>') return ROUTE_PUSH;
    if (up->shared) up_learn_auth(up, fifo_head(up), p, n);
    up_entry *e;
    while ((e = fifo_head(up)) && e->kind == UP_RAW_START) {
        up->raw_rx = 1;
        up_fifo_pop(up);
    }
    if (!up->raw_rx) {
        if (e && e->kind == UP_REPLY) return up_decide_redirect(up, e, p, n, whole);
        if (e && e->kind == UP_AUTH) return ROUTE_AUTH;
        if (e && e->kind == UP_ROLE) return ROUTE_ROLE;
        if (e && e->kind == UP_PROBE) return whole ? ROUTE_PROBE : ROUTE_REPLY; /* (dropped) */
        if (e && e->kind == UP_SLOTS) return whole ? ROUTE_SLOTS : ROUTE_REPLY; /* (dropped: too big) */
        if (e && e->kind == UP_SCRIPT_LOAD) return ROUTE_SCRIPT_LOAD;
        if (e && e->kind == UP_OUTPUT_PROBE) return whole ? ROUTE_OUTPUT_PROBE : ROUTE_REPLY; /* (dropped) */
        if (e && e->kind == UP_DEFAULT_PROBE)
            return whole ? ROUTE_DEFAULT_PROBE : ROUTE_REPLY;                           /* (dropped) */
        if (e && e->kind == UP_SERVER_PROBE) return whole ? ROUTE_SERVER : ROUTE_REPLY; /* (dropped) */
        if (e && e->kind == UP_HELLO) {
            if (whole) up_check_hello(up, e, p, n);
            return ROUTE_REPLY;
        }
        if (e && e->kind == UP_VERB) {
            /* Redis and Valkey word NOSCRIPT differently: the code is enough. */
            int noscript = whole && n >= sizeof(NOSCRIPT_PREFIX) - 1 &&
                           memcmp(p, NOSCRIPT_PREFIX, sizeof(NOSCRIPT_PREFIX) - 1) == 0;
            if (noscript && e->retries < UP_NOSCRIPT_RETRIES) return ROUTE_NOSCRIPT;
            return up_decide_redirect(up, e, p, n, whole);
        }
        /* (Not for an error before any reply: Redis refusing the
         * connection before the proxy sent anything, see up_note_refusal.) */
        if (up->replied || !whole || p[0] != '-')
            vp_log(VP_LOG_WARNING, "upstream %s: reply nobody asked for; passing it on", up_addr(up));
        return ROUTE_PUSH;
    }
    if (e && whole) {
        if (e->kind == UP_CLOSE_BARRIER) return up_decide_close_barrier(up, p, n);
        if (e->kind == UP_RESET && bytes_are(p, n, RESET_REPLY)) return ROUTE_RESET;
    }
    return ROUTE_PUSH;
}

/* Our AUTH was answered (p..p+n, whole if `done`). +OK: the connection is
 * ready for its clients once this read is handed on (announce_ready).
 * Anything else fails it as a connect that did not succeed: each request
 * waiting for it gets "upstream unavailable: <address>: <Redis's text>",
 * and the log says so once per change of the answer, not once per
 * connection. What Redis writes to a connection it refuses (maxclients,
 * protected mode) is left to up_note_refusal: Redis closes next, and the
 * clients get its own error. */
static void up_auth_answered(upstream_conn *up, const char *p, size_t n, int done)
{
    vp_server *srv = up->srv;
    if (done && up_is_refusal(p, n)) return;
    if (done && n == 5 && memcmp(p, "+OK\r\n", 5) == 0) {
        up->authing = 0;
        if (!up->role_check) uv_timer_stop(&up->timer);
        up->announce_ready = 1;
        if (srv->upstream_auth_failure[0]) {
            vp_log(VP_LOG_WARNING, "upstream %s: AUTH accepted again", srv->conf.upstream);
            srv->upstream_auth_failure[0] = '\0';
        }
        return;
    }
    char why[sizeof(srv->upstream_auth_failure)];
    if (done && n >= 3 && p[0] == '-')
        snprintf(why, sizeof(why), "%.*s", (int)(n - 3), p + 1);
    else
        snprintf(why, sizeof(why), "unexpected reply to AUTH");
    srv->stats.upstream_auth_failures++;
    if (strcmp(why, srv->upstream_auth_failure) != 0) {
        snprintf(srv->upstream_auth_failure, sizeof(srv->upstream_auth_failure), "%s", why);
        vp_log(VP_LOG_WARNING, "upstream %s: AUTH refused: %s (requests waiting for a connection get it)",
               srv->conf.upstream, why);
    }
    up_fail(up, why);
}

/* Our ROLE's answer, piece by piece (p..p+n; `done` on the last). An
 * array starting with "master": the connection is the primary's and ready
 * (once AUTH is answered too). Anything else (another role, an error such
 * as -NOAUTH or -NOPERM, +OK, an integer, an empty array: whatever answers
 * on the address a sentinel gave may be anything) is no primary: failed
 * like a connect, "not the primary", and the sentinels are asked again.
 * The judging is sentinel_parse_role's (fuzzed); a first piece always
 * holds the array's header and first element when they are "master"
 * (small replies come whole, a streamed one's first piece is long). */
static void up_role_answered(upstream_conn *up, const char *p, size_t n, int done)
{
    char why[160], said[64];
    if (up->role_check == 1) { /* its first piece */
        if (done && up_is_refusal(p, n)) return;
        int ok = sentinel_parse_role(p, n, said, sizeof(said));
        up->role_check = ok ? 2 : 3;
        if (!ok) snprintf(up->error, sizeof(up->error), "not the primary: ROLE says %.60s", said);
    }
    if (!done) return;
    up_fifo_pop(up);
    if (up->role_check == 3) {
        snprintf(why, sizeof(why), "%s", up->error);
        up->error[0] = '\0';
        up_fail(up, why);
        return;
    }
    up->role_check = 0;
    if (!up->authing) uv_timer_stop(&up->timer);
    up->announce_ready = 1;
}

/* Hand n bytes of the current reply on; `done` marks its last piece. The
 * client only queues them (it writes at client_round_end), so nothing here
 * can close either side. */
static void up_deliver(upstream_conn *up, const char *p, size_t n, int done)
{
    up_entry *e = fifo_head(up);
    struct client_session *c = e && up->route != ROUTE_PUSH ? e->client : up->client;
    if (up->shared && c) client_touch(c); /* flushed at the end of the read */
    switch (up->route) {
    case ROUTE_PUSH:
        if (c) client_push(c, p, n);
        return;
    case ROUTE_REPLY:
    case ROUTE_RESET: {
        unsigned long long seq = e->seq;
        if (done) {
            if (up->retries_in_flight) up_note_answered(up, e);
            if (e->flush_epoch) up_script_flush_answered(up, e->flush_epoch);
            up_fifo_pop(up);
            if (up->route == ROUTE_RESET) up->raw_rx = 0; /* counting again from here */
        }
        if (c) client_reply(c, seq, p, n, done);
        /* A demoted primary answers writes -READONLY: passed on, and the
         * sentinels asked again (sentinel mode). */
        if (p && n > 9 && p[0] == '-' && up->srv->sentinel && memcmp(p, "-READONLY", 9) == 0)
            sentinel_recheck(up->srv, "a reply said -READONLY");
        return;
    }
    case ROUTE_SWALLOW_KEEP:
        return;
    case ROUTE_SWALLOW: {
        unsigned long long seq = e->seq;
        up_fifo_pop(up);
        if (c) client_reply(c, seq, NULL, 0, 1);
        return;
    }
    case ROUTE_SCRIPT_LOAD:
        up_check_script_load(up, e, p, n);
        up_fifo_pop(up);
        return;
    case ROUTE_OUTPUT_PROBE:
        up_fifo_pop(up);
        up_check_output_limit(up, p, n);
        return;
    case ROUTE_DEFAULT_PROBE:
        up_fifo_pop(up);
        up_check_default_user(up, p, n);
        return;
    case ROUTE_SERVER: {
        unsigned long long sent = e->sent;
        up->server = UP_SERVER_UNKNOWN; /* answered: not "asked" when popped */
        up_fifo_pop(up);
        up_check_server(up, sent, p, n);
        return;
    }
    case ROUTE_AUTH:
        up_fifo_pop(up);
        up_auth_answered(up, p, n, done);
        return;
    case ROUTE_ROLE:
        up_role_answered(up, p, n, done);
        return;
    case ROUTE_SLOTS:
        up_fifo_pop(up);
        cluster_slots_answered(up, p, n); /* (closes this connection) */
        return;
    case ROUTE_REDIRECT: {
        up_entry old = *e;
        if (!cluster_redirect(up, &old, up->kept.data + up->kept_head, old.keep, p, n)) {
            up->route = ROUTE_REPLY; /* the client gets the error */
            up_deliver(up, p, n, done);
            return;
        }
        if (old.kind == UP_VERB && old.retries > 0) up->retries_in_flight--; /* (moved with it) */
        up_fifo_pop(up);
        return;
    }
    case ROUTE_PROBE: {
        int which = e->verb;
        up_fifo_pop(up);
        ready_probe_answered(up, which, p, n);
        return;
    }
    case ROUTE_NOSCRIPT:
        if (!up_retry_verb(up)) {
            up->route = ROUTE_REPLY; /* could not retry: the client gets the NOSCRIPT */
            up_deliver(up, p, n, done);
        }
        return;
    }
}

/* Is every reply still owed on this connection the client's own, from Redis
 * (not our SCRIPT LOADs, silent requests or a barrier)? Only then can the
 * rest of the stream go to it unframed without a reply it did not ask for. */
static int up_owes_only_client(const upstream_conn *up)
{
    for (size_t i = 0; i < up->fifo_len; i++) {
        const up_entry *e = &up->fifo[(up->fifo_head + i) % up->fifo_cap];
        if (e->client != up->client) return 0;
        if (e->kind == UP_SCRIPT_LOAD || e->kind == UP_CLOSE_BARRIER) return 0;
    }
    return !up->reset_held;
}

/* The framer found bytes that are not RESP at in[in_pos..]. Where a reply
 * ends can no longer be known. On a connection of the client's own the rest
 * of the session becomes a byte pipe both ways, as after SYNC, so a client
 * that understands what its server sent goes on as on a direct connection;
 * the client says whether its queue allows that (a reply of the proxy's
 * own waiting behind Redis's could not be placed). A shared connection
 * cannot be a pipe for many clients: it is lost, and each client owed a
 * reply gets the ones framed before this point, then a close. */
static void up_unframed(upstream_conn *up)
{
    struct client_session *c = up->client;
    if (up->shared || !c || !up_owes_only_client(up) || !client_can_become_pipe(c)) {
        vp_log(VP_LOG_WARNING, "upstream %s: unreadable reply (%s); closing %s", up_addr(up),
               up->framer.error, up->shared ? "the shared connection" : "the client's connection");
        up_lost(up, "protocol error from upstream");
        return;
    }
    while (up->fifo_len)
        up_fifo_pop(up);
    up->opaque_rx = 1;
    up->raw_tx = 1;
    up->streaming = 0;
    /* What the client holds of the current reply goes out first (it logs
     * the change); then up_process hands on everything from in_pos as it
     * is. */
    client_become_pipe(c, up->framer.error);
}

/* Called for every reply as it starts (n: its length if whole, else 0).
 * The first one on the connection, an error for a request of the proxy's
 * own (no client is given it), is what Redis refused the connection with;
 * any later reply means it did not. */
static int up_is_refusal(const char *p, size_t n)
{
    static const char maxclients[] = "-ERR max number of clients reached";
    static const char denied[] = "-DENIED ";
    return (n >= sizeof(maxclients) - 1 && memcmp(p, maxclients, sizeof(maxclients) - 1) == 0) ||
           (n >= sizeof(denied) - 1 && memcmp(p, denied, sizeof(denied) - 1) == 0);
}

static void up_note_refusal(upstream_conn *up, const char *p, size_t n)
{
    up_entry *e = fifo_head(up);
    int first = !up->replied;
    up->replied = 1;
    up->refusal_len = 0;
    if (!first || n < 3 || n > sizeof(up->refusal) || p[0] != '-' || !e || e->client) return;
    /* What Redis writes to a connection it will not serve (maxclients,
     * protected mode), not an error of a command it ran (CLIENT NO-EVICT on
     * a Redis before 7.0). */
    if (!up_is_refusal(p, n)) return;
    if (up->route != ROUTE_REPLY && up->route != ROUTE_SCRIPT_LOAD && up->route != ROUTE_AUTH &&
        up->route != ROUTE_ROLE)
        return;
    memcpy(up->refusal, p, n);
    up->refusal_len = (unsigned char)n;
}

/* A write to a connection Redis refused can fail (EPIPE) before what Redis
 * wrote ahead of its close is read: if nothing was answered yet, look at
 * what the kernel holds for an error line (whoever it answers: it is the
 * reply to the oldest command waiting). */
static void up_read_refusal(upstream_conn *up)
{
    uv_os_fd_t fd;
    /* (Not over TLS: the kernel holds ciphertext. A Redis refusing a TLS
     * client closes without a word anyway.) */
    if (up->tls || up->replied || up->refusal_len || up->state != UPSTREAM_READY ||
        uv_fileno(&up->h.handle, &fd) != 0)
        return;
    char buf[sizeof(up->refusal)];
    size_t n = up->in.len - up->in_pos; /* the start of a reply, read already */
    if (n > sizeof(buf)) return;
    if (n) memcpy(buf, up->in.data + up->in_pos, n);
    ssize_t got = recv(fd, buf + n, sizeof(buf) - n, MSG_DONTWAIT);
    if (got > 0) n += (size_t)got;
    char *end = n > 1 ? memchr(buf, '\n', n) : NULL;
    if (n < 3 || buf[0] != '-' || !end || end[-1] != '\r' || !up_is_refusal(buf, n)) return;
    up->replied = 1;
    up->refusal_len = (unsigned char)(end + 1 - buf);
    memcpy(up->refusal, buf, up->refusal_len);
}

const char *upstream_refusal(upstream_conn *up, size_t *len)
{
    up_read_refusal(up);
    *len = up->refusal_len;
    return up->refusal_len ? up->refusal : NULL;
}

static void up_process(upstream_conn *up)
{
    while (up->in_pos < up->in.len && up->state == UPSTREAM_READY) {
        const char *base = up->in.data + up->in_pos;
        size_t avail = up->in.len - up->in_pos;
        if (up->opaque_rx) {
            up->route = ROUTE_PUSH;
            up_deliver(up, base, avail, 0);
            up->in_pos += avail;
            break;
        }
        if (!up->streaming && fifo_head(up) && fifo_head(up)->kind == UP_OPAQUE_START) {
            up_fifo_pop(up);
            up->opaque_rx = 1;
            continue;
        }
        size_t used = 0;
        resp_frame_status st = resp_frame_scan(&up->framer, base, avail, &used);
        if (st == RESP_FRAME_ERROR) {
            up_unframed(up);
            continue; /* a pipe now, or closed */
        }
        if (st == RESP_FRAME_DONE) {
            if (!up->streaming) {
                up->route = up_decide(up, base, used, 1);
                up_note_refusal(up, base, used);
            }
            up->streaming = 0;
            up->in_pos += used;
            up_deliver(up, base, used, 1);
            continue;
        }
        /* Partial: hold a small reply back until it is whole (a reply is
         * then handed on in one piece and can be recognised); stream a big
         * one. */
        if (!up->streaming) {
            if (up->framer.consumed < (up->topo ? UP_SLOTS_MAX : UP_STREAM_THRESHOLD)) {
                resp_frame_reset(&up->framer);
                break;
            }
            up->route = up_decide(up, base, used, 0);
            up_note_refusal(up, base, 0);
            up->streaming = 1;
        }
        up->in_pos += used;
        if (used) up_deliver(up, base, used, 0);
        break;
    }
}

/* Everything read is handed on: the read buffer goes back to its pool. */
static void up_release_in(upstream_conn *up)
{
    vp_pool_buf_release_idle(&up->in);
}

/* A shared connection made while Redis required AUTH never authenticated:
 * Redis let it in while the password was gone, and would shut it out again
 * the moment one is set, with the clients that came meanwhile, which Redis
 * alone keeps in (their connections, made without a password, are). RESET
 * makes Redis take it for the default user now, which needs no password:
 * in for good, as a connection made now (upstream_defauth.c then asks the
 * clients that come after a new password for it). RESET also ends
 * CLIENT NO-EVICT and clears the name: NO-EVICT goes again, and a name on
 * the shared connection is only ever for the moment. Sent after the read,
 * not from inside it: the replies' queue must not change under it. */
static void up_reauth_after_read(upstream_conn *up)
{
    static const char reset[] = "*1\r\n$5\r\nRESET\r\n";
    up->reauth_pending = 0;
    if (up->state != UPSTREAM_READY || !upstream_is_counting(up)) return;
    upstream_forward_silent(up, reset, sizeof(reset) - 1);
    upstream_forward_silent(up, no_evict, sizeof(no_evict) - 1);
}

static void up_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    upstream_conn *up = s->data;
    if (nread == 0) {
        up_release_in(up); /* EAGAIN: the block taken for it goes back */
        return;
    }
    if (nread < 0) {
        if (up->tls && vp_tls_error(up->tls)[0]) {
            char why[160];
            snprintf(why, sizeof(why), "TLS: %s", vp_tls_error(up->tls));
            up_lost(up, why);
            return;
        }
        up_lost(up, nread == UV_EOF ? "connection closed by upstream" : uv_strerror((int)nread));
        return;
    }
    up->in.len += (size_t)nread;
    up_process(up);
    /* Before its client sends more: verbs from a reloaded table need it. */
    if (up->vt && up->verbs_in_flight == 0) up_release_vt(up);
    /* The clients' output may point into `in`: flush it before compacting. */
    if (up->client)
        client_round_end(up->client);
    else if (up->shared)
        client_flush_touched(up->srv);
    if (up->state == UPSTREAM_CLOSED) return;
    if (up->reauth_pending) up_reauth_after_read(up);
    if (up->announce_ready) {
        /* Its setup is answered (our AUTH, whether Redis requires AUTH, its
         * output limit): its clients' requests may go now
         * (upstream_is_ready). */
        up->announce_ready = 0;
        if (upstream_is_ready(up) && up->client)
            client_upstream_ready(up->client);
        else if (upstream_is_ready(up) && up->shared && !up->side)
            client_shared_ready(up->srv, up);
        if (up->state != UPSTREAM_READY) return;
    }
    if (up->shared) {
        /* What gathered while earlier writes were answered (and NOSCRIPT
         * retries). */
        up_shared_flush(up);
        if (up->state != UPSTREAM_READY) return;
    } else if (outq_size(&up->out)) { /* NOSCRIPT retries */
        int rc = upstream_flush(up);
        if (rc < 0) {
            up_lost(up, uv_strerror(rc));
            return;
        }
    }
    vp_buf_consume(&up->in, up->in_pos);
    up->in_pos = 0;
    up_release_in(up);
    vp_buf_shrink(&up->kept, UP_KEEP_BYTES); /* after a large verb (only when empty) */
    up_retired_check(up);
}

static void up_read_start(upstream_conn *up)
{
    if (up->tls)
        vp_tls_read_start(up->tls, up_alloc, up_on_read);
    else
        uv_read_start(&up->h.stream, up_alloc, up_on_read);
}

static void up_read_stop(upstream_conn *up)
{
    if (up->tls)
        vp_tls_read_stop(up->tls);
    else
        uv_read_stop(&up->h.stream);
}

/* The stream carries plaintext to Redis from here on: right after the TCP
 * connect, or after the TLS handshake. What is queued goes, our AUTH
 * first when there are credentials (queued by upstream_open before
 * anything else could be); then its clients are told once AUTH is
 * answered (up_auth_answered), or at once without credentials. */
static void up_transport_ready(upstream_conn *up)
{
    if (!up->authing && !up->role_check) uv_timer_stop(&up->timer); /* else it bounds our AUTH, ROLE too */
    up->state = UPSTREAM_READY;
    up->reading = 1;
    up_read_start(up);
    vp_log(VP_LOG_DEBUG, "upstream %s: connected%s", up_addr(up), up->tls ? " (TLS)" : "");
    if (up->authing || up->role_check || up->probe || up->topo) {
        /* A shared one writes at the end of the loop iteration. (The
         * probe's requests were queued behind our AUTH.) */
        int rc = up->shared ? 0 : upstream_flush(up);
        if (rc < 0) up_fail(up, uv_strerror(rc));
        return;
    }
    if (up->client)
        client_upstream_ready(up->client);
    else if (up->shared && !up->setting_up)
        client_shared_ready(up->srv, up);
}

static void up_on_tls_handshake(vp_tls *t, int status)
{
    upstream_conn *up = vp_tls_data(t);
    if (up->state != UPSTREAM_CONNECTING) return;
    if (status < 0) {
        char why[160];
        snprintf(why, sizeof(why), "TLS: %s", vp_tls_error(t));
        up->srv->stats.tls_handshake_failures++;
        up_fail(up, why);
        return;
    }
    up_transport_ready(up);
}

static void up_on_tls_raw_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    upstream_conn *up = s->data;
    vp_tls_on_raw_read(up->tls, nread, buf);
}

static void up_on_connect(uv_connect_t *req, int status)
{
    upstream_conn *up = req->data;
    if (status == UV_ECANCELED || up->state != UPSTREAM_CONNECTING) return;
    if (status < 0) {
        uv_timer_stop(&up->timer);
        up_fail(up, uv_strerror(status));
        return;
    }
    if (up->node->port) limits_tcp_keepalive(&up->h.tcp, up->srv->conf.tcp_keepalive);
    if (!up->srv->tls_upstream) {
        up_transport_ready(up);
        return;
    }
    /* TLS: the handshake first, within the connect timeout. */
    up->tls = outq_tls_new(&up->out, up->srv->tls_upstream, up->node->host, up_on_tls_raw_read);
    vp_tls_set_data(up->tls, up);
    int rc = vp_tls_handshake(up->tls, up_on_tls_handshake);
    if (rc < 0) {
        char why[160];
        snprintf(why, sizeof(why), "TLS: %s",
                 vp_tls_error(up->tls)[0] ? vp_tls_error(up->tls) : uv_strerror(rc));
        up->srv->stats.tls_handshake_failures++;
        uv_timer_stop(&up->timer);
        up_fail(up, why);
    }
}

/* ---- sending requests ---- */

static void up_on_written(outq *q, int status)
{
    upstream_conn *up = q->owner;
    /* (While connecting, only a TLS handshake writes: its failure is read.) */
    if (up->state != UPSTREAM_READY) return;
    if (status < 0) {
        up_lost(up, uv_strerror(status));
        return;
    }
    if (outq_size(q) != 0) return;
    if (up->client)
        client_upstream_drained(up->client);
    else if (up->shared && up->waiters)
        client_shared_drained(up->srv, up);
}

/* Copy a request into `kept` and queue it from there: written with the
 * rest, and still at hand until its entry (whose `keep` the caller sets to
 * n) is answered. req must not point into `kept` (it may move). */
static void up_send_kept(upstream_conn *up, const char *req, size_t n)
{
    size_t off = up->kept.len;
    vp_buf_append(&up->kept, req, n);
    outq_add_ref(&up->out, &up->kept, off, n);
}

void upstream_resend(upstream_conn *up, const up_entry *e, const char *req, size_t n, int asking)
{
    static const char asking_cmd[] = "*1\r\n$6\r\nASKING\r\n";
    /* The script first: ASKING lets in only the command right after it
     * (Redis clears the flag once any other command ran), so a SCRIPT LOAD
     * between them sent the verb without it, -MOVED back to the source. */
    if (e->kind == UP_VERB) up_ensure_script(up, upstream_verbs(up)->verbs[e->verb]);
    if (asking) upstream_forward_silent(up, asking_cmd, sizeof(asking_cmd) - 1);
    up->srv->stats.commands_forwarded++;
    up_send_kept(up, req, n);
    up_entry *r = up_fifo_push(up, e->client, e->kind);
    r->seq = e->seq;
    r->keep = (unsigned)n;
    r->verb = e->verb;
    r->retries = e->retries;
    r->redirects = e->redirects;
    r->tries = e->tries;
    r->asked = (unsigned char)(asking != 0);
    if (e->kind == UP_VERB && e->retries > 0) up->retries_in_flight++;
}

void upstream_forward_silent(upstream_conn *up, const char *p, size_t n)
{
    outq_add_copy(&up->out, p, n);
    up_fifo_push(up, NULL, UP_REPLY); /* no client: the reply is dropped */
}

void upstream_forward_bytes(upstream_conn *up, const char *p, size_t n)
{
    outq_add(&up->out, p, n);
}

void upstream_forward_empty(upstream_conn *up, const char *p, size_t n)
{
    outq_add(&up->out, p, n);
    /* Redis resets the client after an empty request too, which ends a
     * pending CLIENT REPLY SKIP. */
    up->skip_next = 0;
}

/* RESET makes Redis authenticate the connection as the default user again
 * (clientSetDefaultAuth): with upstream credentials our AUTH follows it at
 * once, before anything the client sends next, its answer dropped. */
static void up_reauth(upstream_conn *up)
{
    const vp_config *conf = &up->srv->conf;
    if (!conf->upstream_auth) return;
    outq_add_copy(&up->out, conf->upstream_auth, conf->upstream_auth_len); /* (a reload may free them) */
    up_fifo_push(up, NULL, UP_REPLY);                                      /* no client: dropped */
}

/* The command changes how Redis answers at EXEC time, or is one the proxy
 * cannot count: note it for EXEC. */
static int up_is_special(cmd_kind kind)
{
    return kind != CMD_PLAIN && kind != CMD_MULTI && kind != CMD_EXEC && kind != CMD_DISCARD;
}

static int up_forward(upstream_conn *up, struct client_session *c, const char *p, size_t n, cmd_kind kind,
                      int copy);

int upstream_forward(upstream_conn *up, struct client_session *c, const char *p, size_t n, cmd_kind kind)
{
    return up_forward(up, c, p, n, kind, 0);
}

int upstream_forward_copy(upstream_conn *up, struct client_session *c, const char *p, size_t n, cmd_kind kind)
{
    return up_forward(up, c, p, n, kind, 1);
}

int upstream_forward_part(upstream_conn *up, struct client_session *c, unsigned long long seq,
                          const char *req, size_t n)
{
    up->srv->stats.commands_forwarded++;
    up->srv->stats.shared_commands++;
    up_hold_note(up, c);
    up_send_kept(up, req, n);
    up_entry *e = up_fifo_push(up, c, UP_REPLY);
    e->seq = seq;
    e->keep = (unsigned)n;
    return 1;
}

static int up_forward(upstream_conn *up, struct client_session *c, const char *p, size_t n, cmd_kind kind,
                      int copy)
{
    up->srv->stats.commands_forwarded++;
    if (up->shared) {
        /* Written at the end of the loop iteration, with other clients'
         * requests, while this client's buffer has moved on: copied. A
         * shared connection only carries plain commands (client.c). */
        up->srv->stats.shared_commands++;
        if (c) up_hold_note(up, c);
        if (up->srv->cluster) {
            /* Kept until answered, to be sent again after a -MOVED or
             * -ASK (up_decide_redirect): the one copy, as outq's. */
            up_send_kept(up, p, n);
            up_fifo_push(up, c, UP_REPLY)->keep = (unsigned)n;
            return 1;
        }
        outq_add_copy(&up->out, p, n);
        up_fifo_push(up, c, UP_REPLY);
        return 1;
    }
    int skip_eaten = 0;
    if (kind == CMD_RESET && up->skip_next && up->srv->conf.upstream_auth) {
        /* A CLIENT REPLY SKIP would take the RESET's reply, and our AUTH
         * after it could not be told apart in the uncounted stream: a PING
         * takes the SKIP instead, and the RESET's reply, which the client
         * does not expect, is dropped (its +RESET counts again). */
        static const char ping[] = "*1\r\n$4\r\nPING\r\n";
        outq_add(&up->out, ping, sizeof(ping) - 1);
        up->skip_next = 0;
        skip_eaten = 1;
    }
    if (copy)
        outq_add_copy(&up->out, p, n);
    else
        outq_add(&up->out, p, n);

    /* RESET runs even inside MULTI and clears every mode. Its +RESET is not
     * sent when a CLIENT REPLY SKIP is in force; then the proxy cannot tell
     * where the old stream ends and stays uncounted (still in order). */
    if (kind == CMD_RESET) {
        int answered = !up->skip_next;
        upstream_note_reset(up);
        up->in_multi = up->multi_special = 0;
        up->reply_off = up->skip_next = 0;
        if (!answered) return 0;
        struct client_session *owner = skip_eaten ? NULL : c; /* NULL: dropped */
        if (up->raw_tx) {
            up_fifo_push(up, owner, UP_RESET);
            up->raw_tx = 0;
        } else {
            up_fifo_push(up, owner, UP_REPLY);
        }
        up_reauth(up);
        return !skip_eaten;
    }

    int replies = 1;   /* does this command answer? */
    int enter_raw = 0; /* does counting stop after it? */
    int queued = up->in_multi;
    if (up->in_multi) {
        /* Queued: one +QUEUED (or an error) each; EXEC answers once. */
        if (kind == CMD_EXEC || kind == CMD_DISCARD) {
            up->in_multi = 0;
            enter_raw = kind == CMD_EXEC && up->multi_special;
        } else if (up_is_special(kind)) {
            up->multi_special = 1;
        }
    } else {
        switch (kind) {
        case CMD_MULTI:
            up->in_multi = 1;
            up->multi_special = 0;
            break;
        case CMD_MONITOR:
        case CMD_SUBSCRIBE:
            replies = 0;
            enter_raw = 1;
            break;
        /* CLIENT REPLY OFF/SKIP may be refused (ACL, subscribe context), and
         * whether it was shows only in replies that may never come: count
         * no more, and keep the switches only as a best guess. */
        case CMD_CLIENT_REPLY_OFF:
            up->reply_off = 1;
            replies = 0;
            enter_raw = 1;
            break;
        case CMD_CLIENT_REPLY_SKIP:
            replies = 0;
            enter_raw = 1;
            break;
        case CMD_CLIENT_REPLY_ON:
            up->reply_off = 0;
            break;
        case CMD_UNCOUNTABLE:
            replies = 0;
            enter_raw = 1;
            break;
        case CMD_REPLICATION:
            up_fifo_push(up, c, UP_OPAQUE_START);
            up->raw_tx = 1;
            return 0;
        default:
            break;
        }
    }
    /* A SKIP applies to the next command; one queued in MULTI skips nothing
     * now (and EXEC will be uncounted). */
    up->skip_next = kind == CMD_CLIENT_REPLY_SKIP && !queued;

    int counted = 0;
    if (!up->raw_tx && replies) {
        up_fifo_push(up, c, UP_REPLY);
        counted = 1;
    }
    if (enter_raw && !up->raw_tx) {
        up_fifo_push(up, c, UP_RAW_START);
        up->raw_tx = 1;
    }
    return counted;
}

int upstream_closing_reply(upstream_conn *up, struct client_session *c)
{
    /* Counting: the reply just takes its place in the client's queue. */
    if (!up->raw_tx) return 0;
    /* The connection ends after this reply, so put Redis in a known state
     * first (out of MULTI, subscribe mode, MONITOR, CLIENT REPLY OFF/SKIP)
     * and let a PING mark the end of what it sends before. A SKIP in force
     * eats +RESET: see up_decide_close_barrier. */
    int flags = UP_LOCAL_BARRIER;
    if (up->reply_off || up->skip_next) flags |= UP_LOCAL_DROP; /* Redis would not answer either */
    outq_add(&up->out, "*1\r\n$5\r\nRESET\r\n", 15);
    outq_add(&up->out, up->barrier_cmd, strlen(up->barrier_cmd));
    up_fifo_push(up, c, UP_CLOSE_BARRIER);
    up->srv->stats.barriers_sent++;
    return flags;
}

int upstream_is_counting(const upstream_conn *up)
{
    return !up->raw_tx;
}

int upstream_flush(upstream_conn *up)
{
    if (up->state != UPSTREAM_READY) return 0;
    int rc = outq_flush(&up->out);
    /* Every piece is written or copied now: the kept requests may move. */
    if (up->kept_head > UP_KEEP_BYTES && up->kept_head > up->kept.len / 2) {
        vp_buf_consume(&up->kept, up->kept_head);
        up->kept_head = 0;
    }
    return rc;
}

void upstream_write_failed(upstream_conn *up, int status)
{
    up_lost(up, uv_strerror(status));
}

size_t upstream_backlog(const upstream_conn *up)
{
    return outq_size(&up->out);
}

void upstream_pause_reading(upstream_conn *up)
{
    if (up->state == UPSTREAM_READY && up->reading) {
        up_read_stop(up);
        up->reading = 0;
    }
}

void upstream_resume_reading(upstream_conn *up)
{
    if (up->state == UPSTREAM_READY && !up->reading) {
        up->reading = 1;
        up_read_start(up);
    }
}

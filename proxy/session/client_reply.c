/* client_reply.c - a client's replies in request order: the ring of
 * pending replies (one per request that will be answered, filled by
 * sequence number whichever connection answers), replies the proxy makes
 * itself, COMMAND replies completed with the verbs, and writing them out
 * (client_flush, the touched and deferred lists that write a client once
 * per read of a shared connection or per loop phase). */
#include "proxy/session/client.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/session/introspect.h"
#include "proxy/route/cluster_merge.h"
#include "proxy/log.h"
#include "proxy/pool.h"
#include "proxy/net/tls.h"
#include "proxy/session/client_internal.h"

/* Rings of pending replies come from pools of 8 to 256 pending replies (up to the deepest
 * window on a shared connection) and go back when no reply is owed; a
 * client pipelining deeper than that has a ring of its own. Most clients
 * are owed one reply at a time: a small first ring keeps what thousands of
 * them hold at once (and the pool keeps afterwards) small. */
#define CLIENT_FIRST_PENDING 8

#define CLIENT_RING_POOLS 6

/* ---- the queue of pending replies ---- */

static vp_pool client_pending_rings[CLIENT_RING_POOLS] = {
    VP_POOL_INIT("slot_rings_8", 8 * sizeof(client_pending)),
    VP_POOL_INIT("slot_rings_16", 16 * sizeof(client_pending)),
    VP_POOL_INIT("slot_rings_32", 32 * sizeof(client_pending)),
    VP_POOL_INIT("slot_rings_64", 64 * sizeof(client_pending)),
    VP_POOL_INIT("slot_rings_128", 128 * sizeof(client_pending)),
    VP_POOL_INIT("slot_rings_256", 256 * sizeof(client_pending)),
};

client_pending *pending_at(client_session *c, size_t i)
{
    return &c->pending[(c->pending_head + i) % c->pending_cap];
}

static vp_pool *pending_ring_pool(size_t cap)
{
    for (int i = 0; i < CLIENT_RING_POOLS; i++)
        if (cap == (size_t)CLIENT_FIRST_PENDING << i) return &client_pending_rings[i];
    return NULL;
}

static client_pending *pending_ring_new(size_t cap)
{
    vp_pool *p = pending_ring_pool(cap);
    return p ? vp_pool_get(p) : vp_malloc(cap * sizeof(client_pending));
}

static void pending_ring_free(client_pending *ring, size_t cap)
{
    vp_pool *p = pending_ring_pool(cap);
    if (p)
        vp_pool_put(p, ring);
    else
        free(ring);
}

/* No reply owed: an idle client holds no ring. */
void pending_ring_release(client_session *c)
{
    if (!c->pending) return;
    pending_ring_free(c->pending, c->pending_cap);
    c->pending = NULL;
    c->pending_cap = c->pending_head = 0;
}

static void pending_ring_grow(client_session *c)
{
    size_t ncap = c->pending_cap ? c->pending_cap * 2 : CLIENT_FIRST_PENDING;
    client_pending *n = pending_ring_new(ncap);
    for (size_t i = 0; i < c->pending_len; i++)
        n[i] = *pending_at(c, i);
    if (c->pending) pending_ring_free(c->pending, c->pending_cap);
    c->pending = n;
    c->pending_cap = ncap;
    c->pending_head = 0;
}

client_pending *pending_push(client_session *c, client_pending_kind kind)
{
    if (c->pending_len == c->pending_cap) pending_ring_grow(c);
    client_pending *s = pending_at(c, c->pending_len++);
    memset(s, 0, sizeof(*s));
    s->kind = kind;
    s->cmd = c->cur_cmd;
    s->t0 = c->read_ns;
    return s;
}

/* A reply held in its pending reply (one that overtook another: in cluster mode a
 * node answering before the node of an earlier request, which is common)
 * starts in a pooled block, so holding a small one allocates nothing. */
#define CLIENT_PENDING_SMALL 256

static vp_pool client_pending_small = VP_POOL_INIT("slot_replies", CLIENT_PENDING_SMALL);

static void pending_data_free(client_pending *s)
{
    if (s->pooled)
        vp_pool_put(&client_pending_small, s->data);
    else
        free(s->data);
    s->pooled = 0;
}

void pending_drop_data(client_pending *s)
{
    pending_data_free(s);
    s->data = NULL;
    s->len = s->cap = 0;
}

/* Give the pending reply a reply made elsewhere (malloc'd, now the pending reply's). */
static void pending_data_take(client_pending *s, char *data, size_t len, size_t cap)
{
    pending_data_free(s);
    s->data = data;
    s->len = len;
    s->cap = cap;
}

void pending_pop(client_session *c)
{
    client_pending *s = pending_at(c, 0);
    pending_data_free(s);
    free(s->verb_ids);
    cmerge_free(s->merge);
    s->data = NULL;
    s->verb_ids = NULL;
    s->merge = NULL;
    c->pending_head = (c->pending_head + 1) % c->pending_cap;
    c->pending_len--;
    c->pending_seq++;
    c->front_started = 0;
    if (c->pending_len == 0) pending_ring_release(c);
}

void pending_append(client_pending *s, const char *p, size_t n)
{
    if (s->len + n > s->cap) {
        if (!s->data && n <= CLIENT_PENDING_SMALL) {
            s->data = vp_pool_get(&client_pending_small);
            s->cap = CLIENT_PENDING_SMALL;
            s->pooled = 1;
        } else {
            size_t cap = s->cap ? s->cap * 2 : CLIENT_PENDING_SMALL;
            while (cap < s->len + n)
                cap *= 2;
            char *data = vp_malloc(cap);
            if (s->len) memcpy(data, s->data, s->len);
            pending_data_take(s, data, s->len, cap);
        }
    }
    memcpy(s->data + s->len, p, n);
    s->len += n;
}

unsigned long long client_next_seq(const client_session *c)
{
    return c->pending_seq + c->pending_len;
}

/* Local replies at the front of the queue have nothing to wait for. */
void client_release_ready(client_session *c)
{
    while (c->pending_len && pending_at(c, 0)->kind == PENDING_READY) {
        client_pending *s = pending_at(c, 0);
        outq_add_copy(&c->out, s->data, s->len);
        c->srv->metrics.net_output_bytes += s->len;
        metrics_reply_done(&c->srv->metrics, s->cmd, s->len && metrics_is_error(s->data[0]), s->t0);
        pending_pop(c);
    }
}

/* A close after which nothing can be said over TLS: the socket broke (a
 * reset, a failed write, a TLS error, a handshake cut short). */
void client_close_gone(client_session *c)
{
    c->gone = 1;
    client_close(c);
}

static void client_on_shutdown(uv_shutdown_t *req, int status)
{
    client_session *c = req->data;
    free(req);
    if (status < 0 && !c->closing) client_close_gone(c); /* (ECANCELED: closed meanwhile) */
}

/* The end of a drain: rather than close with the client's latest requests
 * unread (the kernel would answer them with a reset, which can destroy
 * replies the client has not read yet), send FIN and close once the
 * client closes too (client_on_read), or at the drain's bound. Over TLS
 * the close_notify goes ahead of the FIN (libuv shuts the stream down
 * once it is written). */
static int client_linger(client_session *c)
{
    if (!c->linger || c->eof_at) return 0; /* (after its EOF nothing is unread) */
    if (c->shut) return 1;
    if (c->tls) {
        if (!vp_tls_established(c->tls)) return 0; /* (its handshake is cut short: just closed) */
        (void)outq_close_notify(&c->out);
    }
    uv_shutdown_t *req = vp_malloc(sizeof(*req));
    req->data = c;
    if (uv_shutdown(req, &c->h.stream, client_on_shutdown) < 0) {
        free(req);
        return 0;
    }
    c->shut = 1;
    return 1;
}

void client_maybe_finish(client_session *c)
{
    if (c->close_when_done && !c->closing && client_idle(c) && !client_linger(c)) client_close(c);
}

void client_flush(client_session *c)
{
    if (c->closing) return;
    if (outq_size(&c->out)) c->last_io = uv_now(c->srv->loop); /* (Redis counts a write as interaction) */
    int rc = outq_flush(&c->out);
    metrics_clock_expire(&c->srv->metrics); /* the next replies are another batch */
    if (rc < 0) {
        vp_log(VP_LOG_VERBOSE, "client %llu %s: write failed: %s", c->id, c->addr, uv_strerror(rc));
        client_close_gone(c);
        return;
    }
    /* A slow reader must not make the proxy hold an unbounded reply stream.
     * A shared connection cannot stop for one client: that client's
     * requests are not read instead (what it is owed already is held). */
    if (c->up && outq_size(&c->out) > (size_t)c->srv->conf.buffer_limit) {
        if (!c->up->shared) {
            upstream_pause_reading(c->up);
        } else if (!c->output_held) {
            /* And its next command goes on a connection of its own, where
             * Redis holds what it does not read. */
            c->output_held = 1;
            c->slow_reader = 1;
            client_stop_reading(c);
        }
    }
    client_maybe_finish(c);
}

void client_on_written(outq *q, int status)
{
    client_session *c = q->owner;
    if (c->closing) return;
    if (status < 0) {
        vp_log(VP_LOG_VERBOSE, "client %llu %s: write failed: %s", c->id, c->addr, uv_strerror(status));
        client_close_gone(c);
        return;
    }
    if (c->owed_wait && client_owed_released(c)) {
        /* Its window was one while the kernel pushed back. */
        c->owed_wait = 0;
        client_start_reading(c);
        client_process_input(c);
        if (c->closing) return;
    }
    if (outq_size(q) <= (size_t)c->srv->conf.buffer_limit / 2) {
        if (c->output_held) {
            c->output_held = 0;
            client_start_reading(c);
            client_process_input(c);
            if (c->closing) return;
        } else if (c->up && !c->up->shared) {
            upstream_resume_reading(c->up);
        }
    }
    client_maybe_finish(c);
}

/* A reply the proxy makes itself, queued in request order. */
void client_queue_local(client_session *c, const char *p, size_t n)
{
    c->srv->stats.local_replies++;
    if (c->pending_len == 0) {
        outq_add_copy(&c->out, p, n);
        c->srv->metrics.net_output_bytes += n;
        metrics_reply_done(&c->srv->metrics, c->cur_cmd, n && metrics_is_error(p[0]), c->read_ns);
        return;
    }
    pending_append(pending_push(c, PENDING_READY), p, n);
}

/* The proxy's reply before the connection closes (a protocol error, or
 * "upstream unavailable" with no upstream). */
static void client_add_local(client_session *c, const char *p, size_t n)
{
    if (c->up) {
        int flags = upstream_closing_reply(c->up, c);
        if (flags & UP_LOCAL_BARRIER)
            pending_push(c, PENDING_WAITING)->cmd = CMDID_NONE; /* answers no command */
        if (flags & UP_LOCAL_DROP) return;
    }
    client_queue_local(c, p, n);
}

void client_add_error(client_session *c, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    size_t n = resp_write_verrorf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    client_add_local(c, msg, n);
}

/* COMMAND INFO/DOCS naming a verb: Redis's reply with the verbs filled in. */
static void client_patch_reply(client_session *c, client_pending *s)
{
    vp_buf out = {0};
    if (introspect_patch_reply(&c->srv->verbs, s->patch, s->verb_ids, s->nverb_ids, s->data, s->len, &out) ==
        0) {
        pending_data_take(s, out.data, out.len, out.cap);
    } else {
        vp_buf_free(&out); /* not the reply expected (an error): as Redis sent it */
    }
}

/* Bytes of a reply on a shared connection: a big one makes its client go
 * one request at a time, and move at its next command. */
static void client_count_reply(client_session *c, size_t n, int done)
{
    c->reply_bytes += n;
    if (c->reply_bytes > CLIENT_BIG_REPLY && !c->big_replies) {
        c->big_replies = 1;
        vp_log(VP_LOG_DEBUG,
               "client %llu %s: a reply over %d bytes on the shared connection; it moves at its next command",
               c->id, c->addr, CLIENT_BIG_REPLY);
    }
    if (done) c->reply_bytes = 0;
}

/* Cluster mode: a piece of one part's reply of a split command. Once every
 * part is in, the pending reply holds the merged reply. */
static void client_reply_part(client_session *c, client_pending *s, int part, const char *p, size_t n,
                              int done)
{
    client_count_reply(c, n, done);
    if (!cmerge_add(s->merge, part, p, n, done)) return;
    vp_buf out = {0};
    cmerge_result(s->merge, &out);
    cmerge_free(s->merge);
    s->merge = NULL;
    pending_data_take(s, out.data, out.len, out.cap);
    s->kind = PENDING_READY;
    client_release_ready(c);
}

/* A client that left the shared connection because Redis required AUTH
 * (or sent RESET since): Redis answers such a client's commands -NOAUTH,
 * all but AUTH, HELLO (which clear the mark when sent), QUIT and RESET. Any
 * other reply that is not an error, to a command sent since it was marked,
 * says Redis no longer requires it (CONFIG SET requirepass ""): Redis
 * judges what the client sends from then on. */
void client_learn_upstream_auth(client_session *c, const char *p, size_t n)
{
    static const char reset[] = "+RESET\r\n";
    if (!p || !n || p[0] == '-' || (n >= sizeof(reset) - 1 && memcmp(p, reset, sizeof(reset) - 1) == 0))
        return;
    c->upstream_noauth = 0;
}

void client_reply(client_session *c, unsigned long long seq, const char *p, size_t n, int done)
{
    if (c->closing) return;
    unsigned part = (unsigned)(seq >> CLIENT_PART_SHIFT);
    seq &= (1ULL << CLIENT_PART_SHIFT) - 1;
    if (c->upstream_noauth && seq >= c->noauth_seq) client_learn_upstream_auth(c, p, n);
    unsigned long long idx = seq - c->pending_seq;
    if (seq < c->pending_seq || idx >= c->pending_len || pending_at(c, idx)->kind != PENDING_WAITING ||
        (part && !pending_at(c, idx)->merge)) {
        vp_log(VP_LOG_WARNING, "client %llu: reply for no waiting pending reply; dropped", c->id);
        return;
    }
    client_pending *s = pending_at(c, idx);
    if (part) {
        client_reply_part(c, s, (int)part - 1, p, n, done);
        return;
    }
    if (s->merge) {
        /* the whole command answered at once (a refusal): the parts are not
         * waited for */
        cmerge_free(s->merge);
        s->merge = NULL;
    }
    if (c->up && c->up->shared) client_count_reply(c, n, done);
    if (s->replace) {
        if (done) s->kind = PENDING_READY;
    } else if (idx == 0 && !s->patch && !s->pop_wait && !s->wrap && s->len == 0) {
        /* The common case: the front pending reply is answered and goes straight out. (Not
         * once part of it was held: in cluster mode another node's reply
         * can start arriving while the pending reply is not yet at the front.) */
        if (p) outq_add(&c->out, p, n);
        c->srv->metrics.net_output_bytes += n;
        if (!c->front_started && n) s->err = metrics_is_error(p[0]);
        if (done) {
            metrics_reply_done(&c->srv->metrics, s->cmd, s->err, s->t0);
            pending_pop(c);
        } else {
            c->front_started = 1;
        }
    } else {
        /* Held: a reply overtook one still owed before it (a NOSCRIPT
         * retry), or one to rewrite. */
        if (p) pending_append(s, p, n);
        if (done) {
            if (s->patch) client_patch_reply(c, s);
            if (s->wrap && client_conveyor_unwrap(c, seq, s)) return;
            if (s->pop_wait && client_block_answered(c, s)) return;
            s->kind = PENDING_READY;
        }
    }
    if (done) client_release_ready(c);
}

void client_push(client_session *c, const char *p, size_t n)
{
    if (c->closing) return;
    outq_add(&c->out, p, n);
    c->srv->metrics.net_output_bytes += n;
}

void client_round_end(client_session *c)
{
    if (c->pop_resume) client_resume(c); /* (a blocking pop answered: client_block.c) */
    if (c->settling && !c->closing && c->up &&
        (c->up->shared ? c->pending_len == 0 : upstream_is_settled(c->up))) {
        /* What the held command waited for is answered: go on from it. */
        c->settling = 0;
        client_start_reading(c);
        client_process_input(c);
    }
    if (c->owed_wait && !c->closing && client_owed_released(c)) {
        /* It was owed its whole window, and the kernel took every reply so
         * far: a client that pipelines deep and reads may be owed more. */
        if (!outq_backed_up(&c->out) && !c->big_replies && c->share_window < CLIENT_SHARED_MAX_OWED)
            c->share_window = (unsigned short)(c->share_window * 2);
        c->owed_wait = 0;
        client_start_reading(c);
        client_process_input(c);
    }
    client_flush(c);
}

/* ---- shared connections ---- */

void client_touch(client_session *c)
{
    if (c->touched) return;
    c->touched = 1;
    c->touched_next = c->srv->touched;
    c->srv->touched = c;
}

/* Cluster mode: a client's pipeline spans nodes, whose replies arrive in
 * separate reads, each of which wrote the client the part it completed (at
 * -P 16, two writes per pipeline where one node needs one: as many more
 * wakeups and reads for the client). A client still owed replies, given
 * little, is written in the check phase instead, once the poll phase's
 * other reads are in; its pieces point into this upstream's read buffer,
 * so they are copied now (small: CLIENT_DEFER_BYTES). */
#define CLIENT_DEFER_BYTES 16384

static int client_defer_flush(client_session *c)
{
    vp_server *srv = c->srv;
    if (!srv->cluster || c->closing || c->pending_len == 0 || c->settling || c->owed_wait ||
        outq_size(&c->out) > CLIENT_DEFER_BYTES)
        return 0;
    outq_copy_now(&c->out);
    if (!c->deferred) {
        c->deferred = 1;
        c->deferred_next = srv->deferred;
        srv->deferred = c;
    }
    return 1;
}

void client_flush_touched(vp_server *srv)
{
    client_session *c;
    while ((c = srv->touched)) {
        srv->touched = c->touched_next;
        c->touched = 0;
        if (!client_defer_flush(c)) client_round_end(c);
    }
}

/* (The check phase runs before the closing phase's callbacks free a client
 * closed meanwhile: every client listed is still there.) */
void client_flush_deferred(vp_server *srv)
{
    client_session *c;
    while ((c = srv->deferred)) {
        srv->deferred = c->deferred_next;
        c->deferred = 0;
        client_round_end(c);
    }
}

/* A COMMAND reply still owed names verbs by id: the new table's ids, by
 * name (a verb the reload removed is left out of the listings, and is no
 * verb where a name was asked for). */
static void client_remap_patch(client_pending *s, const verb_table *old, const verb_table *now)
{
    int listing = s->patch == INTROSPECT_PATCH_INFO_ALL || s->patch == INTROSPECT_PATCH_LIST ||
                  s->patch == INTROSPECT_PATCH_COUNT;
    if (listing) {
        /* The whole listing: the verbs there are now. */
        free(s->verb_ids);
        s->nverb_ids = now->nnamed;
        s->verb_ids = vp_malloc((size_t)(now->nnamed ? now->nnamed : 1) * sizeof(int));
        for (int i = 0; i < now->nnamed; i++)
            s->verb_ids[i] = i;
        return;
    }
    for (int i = 0; i < s->nverb_ids; i++) {
        int id = s->verb_ids[i];
        if (id < 0) continue;
        const char *name = old->verbs[id]->name;
        const verb_def *v = verbs_find(now, name, strlen(name));
        s->verb_ids[i] = v ? v->id : -1;
    }
}

void client_verbs_replaced(vp_server *srv, const verb_table *old)
{
    for (client_session *c = srv->clients; c; c = c->next)
        for (size_t i = 0; i < c->pending_len; i++) {
            client_pending *s = pending_at(c, i);
            if (s->patch && s->kind == PENDING_WAITING) client_remap_patch(s, old, &srv->verbs);
        }
}

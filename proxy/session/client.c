#include "proxy/session/client.h"

#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/crypto.h>

#include "proxy/session/admin.h"
#include "proxy/session/auth.h"
#include "proxy/route/cluster.h"
#include "proxy/session/client_nodes.h"
#include "proxy/route/cluster_merge.h"
#include "proxy/session/limits.h"
#include "proxy/log.h"
#include "proxy/pool.h"
#include "proxy/route/route.h"
#include "proxy/route/route_plan.h"
#include "proxy/net/keepalive.h"
#include "proxy/net/tls.h"

/* Read size per uv read, Redis's PROTO_IOBUF_LEN: a pool block
 * (VP_POOL_BUF_SIZE), given back once everything in it is parsed. */
#define CLIENT_READ_CHUNK (16 * 1024)
#define CLIENT_READ_MAX (1024 * 1024)
/* Rings of pending replies come from pools of 8 to 256 pending replies (up to the deepest
 * window on a shared connection) and go back when no reply is owed; a
 * client pipelining deeper than that has a ring of its own. Most clients
 * are owed one reply at a time: a small first ring keeps what thousands of
 * them hold at once (and the pool keeps afterwards) small. */
#define CLIENT_FIRST_PENDING 8
#define CLIENT_RING_POOLS 6
/* An incomplete request past this size is forwarded piece by piece. */
#define CLIENT_STREAM_THRESHOLD (64 * 1024)
/* What the proxy holds for a client on a shared connection is bounded by
 * how many replies it may be owed there at once (client_share_window): a
 * shared connection cannot stop reading for one client, so every reply it
 * owes is read and held until that client takes it. A new client may be
 * owed CLIENT_SHARED_FIRST_WINDOW replies. A client is not read further
 * while it is owed its window, until half are in; if by then the kernel
 * took every reply it was given, the window doubles, up to
 * CLIENT_SHARED_MAX_OWED (client_round_end). */
#define CLIENT_SHARED_FIRST_WINDOW 16
#define CLIENT_SHARED_MAX_OWED 256
/* A reply this big on a shared connection holds up every reply behind it
 * (Redis would interleave it with other clients' writes): its client goes
 * one request at a time and moves to a connection of its own at its next
 * command. */
#define CLIENT_BIG_REPLY (64 * 1024)
/* How long a client that sent EOF is still given the replies it is owed. */
#define CLIENT_EOF_GRACE_MS 2000

static void client_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void client_process_input(client_session *c);
static void client_stop_reading(client_session *c);
static void client_start_reading(client_session *c);
static int client_owed_released(const client_session *c);

/* ---- the reply pending reply queue ---- */

static vp_pool client_pending_rings[CLIENT_RING_POOLS] = {
    VP_POOL_INIT("slot_rings_8", 8 * sizeof(client_pending)),
    VP_POOL_INIT("slot_rings_16", 16 * sizeof(client_pending)),
    VP_POOL_INIT("slot_rings_32", 32 * sizeof(client_pending)),
    VP_POOL_INIT("slot_rings_64", 64 * sizeof(client_pending)),
    VP_POOL_INIT("slot_rings_128", 128 * sizeof(client_pending)),
    VP_POOL_INIT("slot_rings_256", 256 * sizeof(client_pending)),
};

static client_pending *pending_at(client_session *c, size_t i)
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
static void pending_ring_release(client_session *c)
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

static client_pending *pending_push(client_session *c, client_pending_kind kind)
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

/* Give the pending reply a reply made elsewhere (malloc'd, now the pending reply's). */
static void pending_data_take(client_pending *s, char *data, size_t len, size_t cap)
{
    pending_data_free(s);
    s->data = data;
    s->len = len;
    s->cap = cap;
}

static void pending_pop(client_session *c)
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

static void pending_append(client_pending *s, const char *p, size_t n)
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
static void client_release_ready(client_session *c)
{
    while (c->pending_len && pending_at(c, 0)->kind == PENDING_READY) {
        client_pending *s = pending_at(c, 0);
        outq_add_copy(&c->out, s->data, s->len);
        c->srv->metrics.net_output_bytes += s->len;
        metrics_reply_done(&c->srv->metrics, s->cmd, s->len && metrics_is_error(s->data[0]), s->t0);
        pending_pop(c);
    }
}

/* ---- output ---- */

static int client_idle(client_session *c);

/* A close after which nothing can be said over TLS: the socket broke (a
 * reset, a failed write, a TLS error, a handshake cut short). */
static void client_close_gone(client_session *c)
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

static void client_maybe_finish(client_session *c)
{
    if (c->close_when_done && !c->closing && client_idle(c) && !client_linger(c)) client_close(c);
}

static void client_flush(client_session *c)
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

static void client_on_written(outq *q, int status)
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
static void client_queue_local(client_session *c, const char *p, size_t n)
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

/* An error reply: fmt is the text after the '-', e.g. "ERR ...". */
static void client_add_error(client_session *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void client_add_error(client_session *c, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    size_t n = resp_write_verrorf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    client_add_local(c, msg, n);
}

/* ---- which upstream ---- */

/* The address its requests go to, for the errors and logs that name it:
 * cluster mode's node of the command at hand, else `upstream`. */
static const char *client_upstream_name(const client_session *c)
{
    return c->srv->cluster && c->route_node ? c->route_node->addr : c->srv->conf.upstream;
}

static void client_want_own(client_session *c);

/* How many replies a client on a shared connection may be owed now. One
 * while its replies wait unwritten (the kernel pushed back) or may be big:
 * then the proxy holds at most buffer-limit (client_flush stops reading it
 * there) plus one reply for it. */
static size_t client_share_window(const client_session *c)
{
    if (c->big_replies || outq_backed_up(&c->out)) return 1;
    return c->share_window;
}

/* A client held for its window (owed_wait) goes on once half of it is in. */
static int client_owed_released(const client_session *c)
{
    return c->pending_len <= client_share_window(c) / 2;
}

/* May this command go on the client's shared connection now? If not, the
 * client is set to wait (its replies owed, its move to a connection of its
 * own) and the command is parsed again when that is over. */
static int client_may_share(client_session *c, int argc, const resp_arg *argv)
{
    if (c->up->retired) {
        /* A reload replaced its shared connection: what it sends next goes
         * on the new one once what it sent here is answered (not before:
         * it could run first). client_round_end resumes it. */
        c->settling = 1;
        return 0;
    }
    if (c->pending_len >= client_share_window(c)) {
        c->owed_wait = 1; /* client_round_end and client_on_written resume */
        client_stop_reading(c);
        return 0;
    }
    if (upstream_client_needs_auth(c->up, c->id) && !cmd_is_quit(argc, argv) &&
        !admin_is_own_command(&argv[0])) {
        /* Redis requires AUTH and the shared connection has none (no
         * upstream-pass): Redis applies its limits for connections that
         * have not authenticated to the shared one as a whole. Since the
         * CVE-2025-21605 fix (Redis 7.0.15 in Debian, 7.2.8, 7.4.3) that
         * includes closing it once more than 1 KiB of its replies wait
         * unwritten, which a burst of about thirty -NOAUTH answers to
         * several clients reaches. On a connection of its own each client
         * meets those limits alone, as without the proxy. (QUIT and the
         * proxy's own VERBPROXY commands are answered here.) The same for
         * a client that connected after the default user got a password:
         * the shared connection, made before, is in, and Redis would ask
         * this client for the password (upstream_defauth.c). */
        client_want_own(c); /* (client_move_to_own marks it upstream_noauth) */
        return 0;
    }
    if (cmd_is_select_zero(argc, argv)) return 1; /* answered by client_dispatch */
    if (c->slow_reader || c->big_replies || c->srv->sharing_off || cmd_needs_own_connection(argc, argv)) {
        client_want_own(c);
        return 0;
    }
    /* SWAPDB: a NOSCRIPT retry of a verb before it must not run after it. */
    if (c->pending_len && cmd_arg_is(&argv[0], "swapdb")) {
        c->settling = 1;
        return 0;
    }
    return 1;
}

static void client_detach_each(upstream_conn *up, void *arg)
{
    client_session *c = arg;
    if (up != c->up) upstream_detach_client(up, c);
}

/* Cluster mode: a client may be owed replies on any node's shared
 * connections (client_route): it leaves them all. */
static void client_detach_cluster(client_session *c)
{
    vp_server *srv = c->srv;
    if (!srv->cluster || !c->used_shared) return;
    cluster_detach_client(srv, c); /* (a request waiting to go again after -TRYAGAIN) */
    upstream_each_shared(srv, UP_EACH_SHARED | UP_EACH_RETIRED, client_detach_each, c);
}

/* Leave its upstream connection: close its own, or just stop being owed
 * anything on a shared one. */
static void client_release_upstream(client_session *c)
{
    upstream_side_detach(c->srv, c);
    client_detach_cluster(c);
    cnodes_close_parked(c);
    if (!c->up) return;
    if (c->up->shared) {
        upstream_detach_client(c->up, c);
        if (c->shared_wait) c->up->waiters--;
    } else {
        upstream_close(c->up);
    }
    c->up = NULL;
    c->shared_wait = c->output_held = c->owed_wait = 0;
}

/* A connection of its own for a client that was on a shared one first:
 * what the shared one stood for goes ahead of its commands, on every such
 * connection it opens (a failed connect is retried with its next command). */
static upstream_conn *client_open_own(client_session *c)
{
    upstream_conn *up = upstream_open(c->srv, route_node_for(c->srv, c), c, &client_own_owner, c);
    /* WAIT counts replicas that have the connection's last write: make
     * that at least everything it wrote on the shared one (a PUBLISH is
     * replicated and changes nothing). */
    static const char sync_write[] = RESP_LIT_ARRAY(3) RESP_LIT_BULK(7, "PUBLISH")
        RESP_LIT_BULK(19, "__verbproxy__:moved") RESP_LIT_BULK(0, "");
    if (c->used_shared) upstream_forward_silent(up, sync_write, sizeof(sync_write) - 1);
    /* Its name and library info, kept from the shared connection. */
    for (int i = 0; i < 3; i++)
        if (c->setters[i].len) upstream_forward_silent(up, c->setters[i].data, c->setters[i].len);
    return up;
}

/* No descriptor left for a connection of its own: the waiting command gets
 * what Redis says to a connection it cannot take, then the close. */
static void client_refuse_no_descriptor(client_session *c)
{
    vp_log(VP_LOG_VERBOSE, "client %llu %s: no descriptor left for its own upstream connection; closing",
           c->id, c->addr);
    c->srv->stats.rejected_connections++;
    c->srv->metrics.rejected_no_descriptor++;
    client_queue_local(c, LIMITS_MAXCLIENTS_ERR, sizeof(LIMITS_MAXCLIENTS_ERR) - 1);
    c->settling = 0;
    c->input_done = 1;
    c->close_when_done = 1;
}

/* Its own connection, or a shared one while it needs no state. NULL when
 * it was refused for want of a descriptor. */
static upstream_conn *client_connect(client_session *c)
{
    if (c->own_upstream) return client_open_own(c);
    if (c->srv->conf.shared_upstreams == 0)
        return upstream_open(c->srv, route_node_for(c->srv, c), c, &client_own_owner, c);
    if (c->srv->sharing_off) {
        /* Redis limits a client's output (upstream_outlimit.c). */
        if (!limits_may_open_own(c->srv)) {
            client_refuse_no_descriptor(c);
            return NULL;
        }
        c->own_upstream = 1;
        return client_open_own(c);
    }
    return route_shared_for(c->srv, c);
}

/* Redis takes it for a connection that has not authenticated (see
 * upstream_noauth). Replies to what it sent before say nothing about that
 * (client_learn_upstream_auth). */
static void client_mark_upstream_noauth(client_session *c)
{
    c->upstream_noauth = 1;
    c->noauth_seq = client_next_seq(c);
}

/* Leave the shared connection for one of its own. Only once nothing is
 * owed on the shared one: what the client sent there has then run. */
static void client_move_to_own(client_session *c)
{
    /* Leaving a shared connection Redis has not authenticated, it has not
     * authenticated either (an AUTH would have moved it first), whatever
     * moved it: its first command, or a first request streamed in pieces
     * (client_stream_partial). Nor has it where the default user got a
     * password since the shared connection was made: on Redis the client
     * would be in, but its new connection is not (upstream_defauth.c). */
    if (c->up && c->up->shared && upstream_node_requires_auth(c->up)) client_mark_upstream_noauth(c);
    client_release_upstream(c);
    if (!limits_may_open_own(c->srv)) {
        client_refuse_no_descriptor(c);
        return;
    }
    c->own_upstream = 1;
    c->settling = 0;
    c->up = client_open_own(c);
    c->srv->stats.clients_pinned++;
    vp_log(VP_LOG_DEBUG, "client %llu %s: moved to its own upstream connection", c->id, c->addr);
}

/* The command at hand needs a connection of its own (it stays in the
 * buffer and is parsed again there). Returns after moving, or after
 * marking the client to move once its replies are in (client_round_end). */
static void client_want_own(client_session *c)
{
    if (c->pending_len) {
        c->settling = 1;
        return;
    }
    client_move_to_own(c);
}

/* Off a shared connection a reload retired, owing nothing there: its next
 * command takes the new one (client_connect). Replies it is owed on the
 * side connection stay owed. */
static void client_leave_retired(client_session *c)
{
    if (c->shared_wait) c->up->waiters--;
    c->up = NULL;
    c->shared_wait = c->owed_wait = c->settling = 0;
}

/* ---- input ---- */

/* A client not read has no read watching its socket: unless a write to it
 * is in flight, the proxy would hear nothing of its death (a reset leaves
 * it waiting, and its upstream connection open with it, for good if it is
 * owed a reply that never comes: a BLPOP with a command held behind it).
 * So the paused are counted, and client_cron looks at their sockets. */
static void client_stop_reading(client_session *c)
{
    if (c->reading) {
        if (c->tls)
            vp_tls_read_stop(c->tls);
        else
            uv_read_stop(&c->h.stream);
        c->reading = 0;
        if (!c->paused) {
            c->paused = 1;
            c->srv->clients_paused++;
        }
    }
}

static void client_unpause(client_session *c)
{
    if (c->paused) {
        c->paused = 0;
        c->srv->clients_paused--;
    }
}

static void client_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    client_session *c = h->data;
    vp_pool_buf_reserve(&c->in, CLIENT_READ_CHUNK);
    size_t room = c->in.cap - c->in.len;
    if (room > CLIENT_READ_MAX) room = CLIENT_READ_MAX; /* uv_buf_t lengths are unsigned int */
    /* Before AUTH to the proxy's own users, Redis's reads exactly: 16 KiB
     * (no argument is big enough for more), each answered and written
     * before the next, so a client is closed for its unwritten replies
     * (client_auth_gate) where Redis would close it. */
    if (c->srv->conf.auth.configured && !c->authed && room > CLIENT_READ_CHUNK) room = CLIENT_READ_CHUNK;
    *buf = uv_buf_init(c->in.data + c->in.len, (unsigned int)room);
}

static void client_start_reading(client_session *c)
{
    if (c->shared_wait || c->output_held || c->owed_wait) return; /* resumed when that is over */
    if (!c->reading && !c->eof_at && !c->closing) {
        c->reading = 1;
        client_unpause(c);
        if (c->tls)
            vp_tls_read_start(c->tls, client_alloc, client_on_read);
        else
            uv_read_start(&c->h.stream, client_alloc, client_on_read);
    }
}

/* Redis answers a protocol error and closes the connection after the reply;
 * the replies owed for earlier requests go out first. */
static void client_protocol_error(client_session *c, const char *msg)
{
    c->srv->stats.protocol_errors++;
    vp_log(VP_LOG_VERBOSE, "client %llu %s: %s", c->id, c->addr, msg);
    client_add_error(c, "ERR %s", msg);
    c->input_done = 1;
    c->close_when_done = 1;
}

/* A reply the proxy makes on a connection that goes on (a verb's argument
 * error, VERBPROXY): `reply` is the whole RESP reply; `err` the same as
 * error text (no '-', no CRLF) if it is an error, and `arity` says whether
 * it is one Redis would find before queueing the command in MULTI (a wrong
 * argument count, an unknown command) rather than one the command itself
 * returns at EXEC. Where Redis's replies are not being counted only an error
 * can be delivered, by Redis itself. */
static void client_answer(client_session *c, const char *reply, size_t n, const char *err, int arity)
{
    switch (upstream_local_mode(c->up)) {
    case UP_LOCAL_IN_ORDER:
        client_queue_local(c, reply, n);
        return;
    case UP_LOCAL_IN_MULTI:
        if (err && !arity) {
            /* Queued: +QUEUED now, the error in its place in EXEC's reply. */
            if (upstream_error_in_stream(c->up, c, err)) pending_push(c, PENDING_WAITING);
            return;
        }
        /* As Redis answers a command it cannot queue: the error now, and
         * EXEC aborts. A proxy reply that is not an error cannot be part of
         * a transaction. */
        if (!err) {
            reply = "-ERR VERBPROXY is not allowed inside MULTI\r\n";
            n = strlen(reply);
        }
        if (upstream_flag_multi(c->up, c)) {
            client_pending *s = pending_push(c, PENDING_WAITING);
            s->replace = 1;
            pending_append(s, reply, n);
            c->srv->stats.local_replies++;
        }
        return;
    case UP_LOCAL_IN_STREAM:
        if (!err)
            err = "ERR VERBPROXY cannot answer while replies are not counted (subscribe mode, MONITOR, "
                  "CLIENT REPLY OFF|SKIP)";
        upstream_error_in_stream(c->up, c, err);
        return;
    }
}

static void client_verb_error(client_session *c, const char *err, int arity)
{
    char line[VERB_ERR_MAX + 8];
    int n = snprintf(line, sizeof(line), "-%s\r\n", err);
    c->srv->stats.verb_argument_errors++;
    client_answer(c, line, (size_t)n, err, arity);
}

static void client_call_verb(client_session *c, const verb_def *v, const resp_arg *argv, int argc)
{
    verb_call call;
    char err[VERB_ERR_MAX];
    if (c->srv->verbs.broken[v->id]) {
        snprintf(err, sizeof(err),
                 "ERR verb %s is disabled: the upstream's SHA-1 for its script is not the pinned %s (see the "
                 "proxy's log)",
                 v->name, v->sha);
        client_verb_error(c, err, 0);
        return;
    }
    int rc = verbs_check(v, argc, argv, &call, err, sizeof(err));
    if (rc < 0 && rc == VERB_ERR_ARITY) {
        client_verb_error(c, err, 1);
        return;
    }
    if ((c->up->shared && upstream_requires_auth(c->up)) || c->upstream_noauth) {
        /* What Redis says to the EVALSHA (after an arity error, before any
         * other): and the rewritten request, two or three elements longer
         * than the verb, must not meet Redis's pre-auth limit of 10, which
         * would close the connection where Redis would answer the verb. */
        static const char noauth[] = "-NOAUTH Authentication required.\r\n";
        client_queue_local(c, noauth, sizeof(noauth) - 1);
        return;
    }
    if (rc < 0) {
        client_verb_error(c, err, 0);
        return;
    }
    if (c->up->shared) c->used_shared = 1;
    if (upstream_forward_verb(c->up, c, v, &call, argc, argv)) pending_push(c, PENDING_WAITING);
}

/* ZUNION & co. with AGGREGATE COUNT where the upstream lacks it
 * (upstream_server.c): the proxy's script, with Redis 8.8's reply. Its
 * errors are the script's (Redis checks key types before options), so
 * nothing is refused here; a script the upstream loaded under another SHA
 * leaves the command to Redis, which refuses COUNT as it would without the
 * proxy. */
static void client_call_polyfill(client_session *c, const verb_def *v, const verb_call *call,
                                 const resp_arg *argv, int argc)
{
    if (c->up->shared) c->used_shared = 1;
    c->srv->stats.polyfill_calls++;
    if (upstream_forward_verb(c->up, c, v, call, argc, argv)) pending_push(c, PENDING_WAITING);
}

/* Must this command wait before it can be sent on its own connection: a
 * polyfill call whose server or protocol is not known yet? */
static int client_polyfill_must_wait(client_session *c, int argc, const resp_arg *argv)
{
    verb_call call;
    const verb_def *v = verbs_find_polyfill(&c->srv->verbs, argc, argv, &call);
    return v && upstream_polyfill_must_wait(c->up, v);
}

static void client_admin(client_session *c, const resp_arg *argv, int argc)
{
    vp_buf out = {0};
    admin_command(c->srv, argc, argv, &out);
    if (out.len && out.data[0] == '-') {
        char err[VERB_ERR_MAX];
        size_t el = out.len - 3 < sizeof(err) - 1 ? out.len - 3 : sizeof(err) - 1;
        memcpy(err, out.data + 1, el);
        err[el] = '\0';
        /* Inside MULTI refused as a whole, like an unknown command. */
        client_answer(c, out.data, out.len, err, 1);
    } else {
        client_answer(c, out.data, out.len, NULL, 1);
    }
    vp_buf_free(&out);
}

/* CLIENT SETNAME/SETINFO sent on a shared connection: kept to be sent
 * again if the client moves (the last of each kind). */
static void client_keep_setter(client_session *c, int argc, const resp_arg *argv, const char *p, size_t n)
{
    int i = argc == 3 ? 0 : cmd_arg_is(&argv[2], "lib-name") ? 1 : cmd_arg_is(&argv[2], "lib-ver") ? 2 : -1;
    if (i < 0) return; /* Redis refuses any other attribute */
    /* Nor does it take a value with a space, newline or other character
     * outside '!'..'~' (clientSetName, 7.2's SETINFO): keep what it took. */
    const resp_arg *v = &argv[argc - 1];
    for (size_t k = 0; k < v->len; k++)
        if (v->ptr[k] < '!' || v->ptr[k] > '~') return;
    /* Exactly its size (not a 4 KiB vp_buf): kept for the whole session. */
    vp_buf_free(&c->setters[i]);
    c->setters[i].data = vp_malloc(n);
    memcpy(c->setters[i].data, p, n);
    c->setters[i].len = c->setters[i].cap = n;
}

static int is_config_set(int argc, const resp_arg *argv)
{
    return argc >= 2 && cmd_arg_is(&argv[0], "config") && cmd_arg_is(&argv[1], "set");
}

static int is_script_flush(int argc, const resp_arg *argv)
{
    return argc >= 2 && argv[0].len == 6 && cmd_arg_is(&argv[0], "script") && cmd_arg_is(&argv[1], "flush");
}

/* Redis's warning for an HTTP request, logged at most once a minute as
 * Redis does. */
#define CLIENT_HTTP_LOG_EVERY_MS 60000

/* An HTTP request line ("POST / HTTP/1.1", "Host: x"): Redis takes it for
 * a cross-protocol attack (securityWarningCommand) and closes the
 * connection at once. What it read with it has run, but those replies are
 * never written; replies to what it read before were written already. So
 * for this client alone: nothing more goes upstream, the replies to
 * requests of its last read are dropped, and it is closed once those owed
 * for earlier reads are delivered. */
static void client_http_request(client_session *c)
{
    static uint64_t logged_at;
    uint64_t now = uv_now(c->srv->loop);
    if (logged_at == 0 || now - logged_at > CLIENT_HTTP_LOG_EVERY_MS) {
        logged_at = now;
        vp_log(VP_LOG_WARNING,
               "client %llu %s: Possible SECURITY ATTACK detected. It looks like somebody is sending POST or "
               "Host: commands to Redis. This is likely due to an attacker attempting to use Cross Protocol "
               "Scripting to compromise your Redis instance. Connection aborted.",
               c->id, c->addr);
    }
    for (size_t i = 0; i < c->pending_len; i++) {
        if (c->pending_seq + i < c->read_seq) continue;
        if (i == 0 && c->front_started) continue; /* half of it is out: it goes out whole */
        client_pending *s = pending_at(c, i);
        s->replace = 1; /* what Redis sends for it is dropped */
        s->patch = 0;
        s->len = 0;
    }
    c->input_done = 1;
    c->close_when_done = 1;
}

/* What Redis says to AUTH or HELLO where the proxy will not judge it: queued
 * in a transaction (Redis would run it at EXEC) or while replies are not
 * counted. */
#define CLIENT_AUTH_NOT_HERE                                                                                 \
    "ERR AUTH and HELLO AUTH are answered by verbproxy itself, which cannot do so inside MULTI or while "    \
    "replies are not counted (subscribe mode, MONITOR, CLIENT REPLY OFF|SKIP)"

/* Redis's reply buffer (PROTO_REPLY_CHUNK_BYTES). Since the CVE-2025-21605
 * fix (Redis 7.0.15 as Debian ships it, 7.2.8, 7.4.3) a client that has
 * not authenticated is closed as soon as its unwritten replies overflow
 * it, none of them written: 481 pipelined -NOAUTH (16,354 bytes) are
 * answered, 482 close the connection. */
#define CLIENT_UNAUTH_REPLY_MAX 16384

/* Bytes of replies the client is owed and not yet written: the output
 * queue and the replies made and held in order behind others. */
static size_t client_unwritten(client_session *c)
{
    size_t n = outq_size(&c->out);
    for (size_t i = 0; i < c->pending_len; i++)
        n += pending_at(c, i)->len;
    return n;
}

/* The proxy has users of its own (auth.h): AUTH and HELLO ... AUTH are
 * answered here and never forwarded, and before authentication only AUTH,
 * HELLO and QUIT go on (RESET is answered here; the parser holds the
 * client to Redis's pre-auth limits meanwhile, and a client whose answers
 * pile up past Redis's output limit is closed, as by Redis). Returns 1
 * when the command was answered (the client may be closing then). */
static int client_auth_gate(client_session *c, int argc, const resp_arg *argv)
{
    char reply[AUTH_REPLY_MAX];
    size_t n = 0;
    int authed = c->authed;
    auth_verdict v = auth_judge(&c->srv->conf.auth, argc, argv, &authed, reply, &n);
    if (v != AUTH_ANSWER) {
        c->authed = (unsigned)authed; /* a HELLO that authenticated goes on (client_dispatch strips AUTH) */
        return 0;
    }
    if (n > 10 && memcmp(reply, "-WRONGPASS", 10) == 0) c->srv->stats.auth_failures++;
    metrics_count(&c->srv->metrics, c->cur_cmd);
    up_local_mode mode = c->up ? upstream_local_mode(c->up) : UP_LOCAL_IN_ORDER;
    if (mode == UP_LOCAL_IN_ORDER || !c->authed) {
        c->authed = (unsigned)authed;
        client_queue_local(c, reply, n);
        if (!c->authed && client_unwritten(c) > CLIENT_UNAUTH_REPLY_MAX) {
            /* As Redis: closed, with nothing more written (the close
             * drops what is queued). */
            vp_log(VP_LOG_VERBOSE,
                   "client %llu %s: closing: replies over %d bytes unwritten before AUTH (as Redis)", c->id,
                   c->addr, CLIENT_UNAUTH_REPLY_MAX);
            c->input_done = 1;
            client_close(c);
        }
        return 1;
    }
    char line[sizeof(CLIENT_AUTH_NOT_HERE) + 8];
    int ln = snprintf(line, sizeof(line), "-%s\r\n", CLIENT_AUTH_NOT_HERE);
    client_answer(c, line, (size_t)ln, CLIENT_AUTH_NOT_HERE, 1);
    return 1;
}

/* How client_admit lets a request go. */
typedef enum client_admission {
    ADMIT_FORWARD,  /* it may go upstream (a streamed one: from its first bytes on) */
    ADMIT_ANSWERED, /* a whole request the proxy answered itself */
    ADMIT_WHOLE     /* the head of a large request: the proxy must read all of it first */
} client_admission;

/* The one gate (issue 22). Every request a client sends passes here before
 * any byte of it goes upstream: whole (client_parse_batch), or the head of
 * a large one about to be streamed (client_stream_partial), inside MULTI,
 * pipelined or over TLS alike, since all of them come through those two.
 * A streamed request is forwarded before the proxy has read it, so it is
 * let go only where reading the rest could change nothing the proxy
 * decides: the client is authenticated to the proxy's own users, and its
 * command is one the proxy neither judges (AUTH, HELLO), rewrites (verbs,
 * polyfills), answers (VERBPROXY), follows (CONFIG, ACL, connection state)
 * nor routes by its keys (cluster mode). Anything else is read whole and
 * judged here like any request. (Redis's own password, where the proxy
 * has no upstream-pass, is judged by Redis on the client's connection of
 * its own, within the pre-auth limits the parser keeps.)
 *
 * ADMIT_FORWARD sets c->admitted for the command at hand: the forwarding
 * paths refuse a command without it (client_not_admitted), so a new path
 * that skips the gate fails closed instead of leaking. */
static client_admission client_admit(client_session *c, int argc, const resp_arg *argv, int whole)
{
    if (!whole) {
        if (argc < 1 || c->srv->cluster) return ADMIT_WHOLE;
        if (c->srv->conf.auth.configured && !c->authed) return ADMIT_WHOLE;
        const resp_arg *name = &argv[0];
        if (cmd_name_may_be_special(name) || cmd_name_read_whole(name) ||
            verbs_find(&c->srv->verbs, name->ptr, name->len) || verbs_may_polyfill(&c->srv->verbs, name) ||
            admin_is_own_command(name))
            return ADMIT_WHOLE;
    } else if (c->srv->conf.auth.configured && client_auth_gate(c, argc, argv)) {
        return ADMIT_ANSWERED;
    }
    c->admitted = 1;
    return ADMIT_FORWARD;
}

/* A command reached a forwarding path without passing client_admit: a
 * defect of the proxy's. Nothing of it goes upstream; the client is closed
 * as after a protocol error, and the log says where. */
static int client_not_admitted(client_session *c, const char *where)
{
    if (c->admitted) return 0;
    vp_log(VP_LOG_WARNING, "client %llu %s: a command reached %s without passing the gate: closed", c->id,
           c->addr, where);
    client_protocol_error(c, "internal error");
    return 1;
}

static void client_dispatch(client_session *c, const resp_arg *argv, int argc, const char *p, size_t n)
{
    if (client_not_admitted(c, "dispatch")) return;
    if (cmd_is_http_request(argc, argv)) {
        client_http_request(c);
        return;
    }
    if (c->answering_unavailable) {
        metrics_count(&c->srv->metrics, c->cur_cmd);
        client_add_error(c, "ERR upstream unavailable: %s: %s", client_upstream_name(c), c->up_error);
        return;
    }
    metrics_count(&c->srv->metrics, c->cur_cmd);
    /* (Its id, found once by client_parse_batch, says whether it is a verb.) */
    const verb_def *v = cmdid_verb(&c->srv->metrics.ids, c->cur_cmd);
    if (v) {
        client_call_verb(c, v, argv, argc);
        return;
    }
    verb_call call;
    if ((v = verbs_find_polyfill(&c->srv->verbs, argc, argv, &call)) && upstream_polyfill_wanted(c->up) &&
        !c->srv->verbs.broken[v->id]) {
        client_call_polyfill(c, v, &call, argv, argc);
        return;
    }
    if (admin_is_own_command(&argv[0])) {
        client_admin(c, argv, argc);
        return;
    }
    if (c->up->shared && cmd_is_quit(argc, argv)) {
        /* Redis answers +OK and closes; the shared connection must stay. */
        client_queue_local(c, "+OK\r\n", 5);
        c->input_done = 1;
        c->close_when_done = 1;
        return;
    }
    if (c->up->shared && cmd_is_select_zero(argc, argv) && !upstream_requires_auth(c->up)) {
        /* It is there already. (Where Redis wants AUTH first, it goes to
         * Redis for its -NOAUTH.) */
        client_queue_local(c, "+OK\r\n", 5);
        return;
    }
    if (c->up->shared && cmd_is_out_of_band(argc, argv)) {
        /* SCRIPT KILL and the like must not wait behind the busy script. */
        /* (On the node whose script is busy: the client's.) */
        if (upstream_side_forward(c->srv, route_node_for(c->srv, c), c, p, n))
            pending_push(c, PENDING_WAITING);
        return;
    }
    if (c->up->shared) {
        c->used_shared = 1;
        if (cmd_is_client_setter(argc, argv)) client_keep_setter(c, argc, argv, p, n);
    }
    cmd_kind kind = cmd_classify(argc, argv);
    if (kind == CMD_REPLICATION) c->opaque = 1;
    int *verb_ids = NULL, nids = 0;
    admin_patch_kind patch = kind == CMD_PLAIN
                                 ? admin_command_patch(&c->srv->verbs, argc, argv, &verb_ids, &nids)
                                 : ADMIN_PATCH_NONE;
    int answered;
    if (c->srv->conf.auth.configured && argc > 2 && cmd_arg_is(&argv[0], "hello")) {
        /* The proxy's own users judged its AUTH option (client_auth_gate):
         * Redis gets the rest, and answers it. Never longer than the
         * request it comes from. */
        size_t cap = n + 16;
        char *hello = vp_malloc(cap);
        size_t hn = auth_hello_strip(argc, argv, hello, cap);
        answered = upstream_forward_copy(c->up, c, hello, hn, kind);
        OPENSSL_cleanse(hello, cap);
        free(hello);
    } else {
        answered = upstream_forward(c->up, c, p, n, kind);
    }
    if (kind == CMD_RESET) {
        /* As Redis's clientSetDefaultAuth: the default user again. */
        c->authed = (unsigned)auth_default_authenticated(&c->srv->conf.auth);
        c->pubsub = c->monitor = 0;
        /* Redis too takes it for the default user again, which needs a
         * password where Redis requires AUTH (without upstream-pass: with
         * it the proxy authenticates the connection again). */
        if (!c->up->shared && upstream_node_requires_auth(c->up)) client_mark_upstream_noauth(c);
    } else if (kind == CMD_SUBSCRIBE && !cmd_name_unsubscribes(&argv[0])) {
        c->pubsub = 1;
    } else if (kind == CMD_MONITOR) {
        c->monitor = 1;
    }
    if (answered && !c->up->shared && cmd_arg_is(&argv[0], "hello")) upstream_note_hello(c->up);
    if (!c->up->shared && (cmd_arg_is(&argv[0], "auth") || cmd_arg_is(&argv[0], "hello")))
        upstream_note_auth(c->up);
    /* Once it may have authenticated, Redis judges what it sends (a wrong
     * password included: its verbs then go to Redis as on any connection
     * of its own). */
    if (c->upstream_noauth && cmd_may_authenticate(argc, argv)) c->upstream_noauth = 0;
    if (answered) {
        client_pending *s = pending_push(c, PENDING_WAITING);
        s->patch = patch;
        s->verb_ids = verb_ids;
        s->nverb_ids = nids;
    } else {
        free(verb_ids);
    }
    if ((kind == CMD_PLAIN && is_script_flush(argc, argv)) || kind == CMD_EXEC || kind == CMD_DISCARD ||
        kind == CMD_RESET)
        upstream_scripts_flushed(c->up, kind, answered);
    /* It may have set an output limit that makes sharing unsafe. */
    if (kind == CMD_PLAIN && is_config_set(argc, argv)) upstream_probe_output_limit(c->up);
    /* It may have given the default user a password (upstream_defauth.c). */
    if (kind == CMD_PLAIN && (is_config_set(argc, argv) || cmd_arg_is(&argv[0], "acl")))
        upstream_probe_default_user(c->up);
}

/* A large request is forwarded as it arrives instead of being held whole:
 * once an incomplete multibulk request passes CLIENT_STREAM_THRESHOLD and its
 * name says it is a plain command (one reply, nothing the proxy must read in
 * its arguments, not a verb), its settled bytes go upstream and leave the
 * buffer. */
static void client_stream_partial(client_session *c, const char *p, size_t avail)
{
    size_t n;
    if (!c->streaming) {
        if (avail < CLIENT_STREAM_THRESHOLD) return;
        /* The gate first: a request it wants whole (cluster mode's, which
         * are routed by their keys, included) waits where it is, and one
         * from a client that has not authenticated moves nobody. */
        const resp_arg *argv;
        int argc = resp_request_partial_args(&c->parser, p, &argv);
        if (client_admit(c, argc, argv, 0) != ADMIT_FORWARD) return;
        if (c->up->shared) {
            /* Half a request on a shared connection would hold up everyone
             * behind it: streaming is done on a connection of its own.
             * Until it moves, reading stops at buffer-limit. */
            client_want_own(c);
            if (c->settling && avail > (size_t)c->srv->conf.buffer_limit) client_stop_reading(c);
            return;
        }
        /* Not while replies are not counted, nor while a NOSCRIPT retry
         * could land inside a half-sent request. */
        if (!upstream_is_counting(c->up) || c->up->verbs_in_flight) return;
        if (client_not_admitted(c, "streaming")) return;
        n = resp_request_release(&c->parser, avail);
        if (n == 0) return;
        c->streaming = 1;
        c->cur_cmd = (unsigned short)cmdid_lookup(&c->srv->metrics.ids, argv[0].ptr, argv[0].len);
        metrics_count(&c->srv->metrics, c->cur_cmd);
        if (upstream_forward(c->up, c, p, n, CMD_PLAIN)) pending_push(c, PENDING_WAITING);
        c->cur_cmd = CMDID_NONE;
    } else {
        n = resp_request_release(&c->parser, avail);
        if (n == 0) return;
        upstream_forward_bytes(c->up, p, n);
    }
    c->in_pos += n;
}

static void client_protocol_error(client_session *c, const char *msg);

static void client_stream_error(client_session *c, const char *msg)
{
    if (c->pending_len == 0 || pending_at(c, c->pending_len - 1)->kind != PENDING_WAITING) {
        client_protocol_error(c, msg); /* cannot happen: streaming needs a counted pending reply */
        return;
    }
    c->srv->stats.protocol_errors++;
    vp_log(VP_LOG_VERBOSE, "client %llu %s: %s (in a streamed request)", c->id, c->addr, msg);
    char line[256];
    size_t n = resp_write_errorf(line, sizeof(line), "ERR %s", msg);
    client_pending *s = pending_at(c, c->pending_len - 1); /* the streamed request's */
    s->kind = PENDING_READY;
    pending_append(s, line, n);
    client_release_ready(c);
    c->streaming = 0;
    c->input_done = 1;
    c->close_when_done = 1;
}

/* client_answer for an error Redis finds before queueing a command (as
 * its -MOVED, -CROSSSLOT), given as the whole line "-TEXT\r\n". */
static void client_answer_error_line(client_session *c, const char *line, size_t n)
{
    char err[320];
    snprintf(err, sizeof(err), "%.*s", n > 3 ? (int)(n - 3) : 0, line + 1);
    client_answer(c, line, n, err, 1);
}

/* Cluster mode: a MULTI from a client on a shared connection is answered
 * +OK by the proxy and held back (multi_deferred): the transaction belongs
 * on the node of its keys, known from the command after it, which a client
 * may send only once it has the +OK. That command then moves the client to
 * a connection of its own on that node, where the MULTI goes first (its +OK
 * dropped). An empty transaction never reaches Redis. Returns 0 when the
 * command was answered here, 1 to route it (the MULTI sent first), -1 to
 * hold it until the client is on its own connection. */
static int client_route_deferred_multi(client_session *c, int argc, const resp_arg *argv,
                                       const cluster_decision *d)
{
    cmd_kind kind = cmd_classify(argc, argv);
    if (kind == CMD_EXEC || kind == CMD_DISCARD) {
        c->multi_deferred = 0;
        metrics_count(&c->srv->metrics, c->cur_cmd);
        if (kind == CMD_EXEC)
            client_queue_local(c, RESP_LIT_ARRAY(0), sizeof(RESP_LIT_ARRAY(0)) - 1);
        else
            client_queue_local(c, "+OK\r\n", 5);
        return 0;
    }
    if (c->up->shared) {
        c->route_node = d->kind == CLUSTER_GO && d->node ? d->node : c->up->node;
        client_want_own(c); /* now, or once its replies are in (settling) */
        return -1;
    }
    static const char multi[] = RESP_LIT_ARRAY(1) RESP_LIT_BULK(5, "MULTI");
    c->multi_deferred = 0;
    c->own_tx = 1;
    if (upstream_forward(c->up, c, multi, sizeof(multi) - 1, CMD_MULTI)) {
        client_pending *s = pending_push(c, PENDING_WAITING);
        s->replace = 1; /* answered +OK already */
        s->cmd = CMDID_NONE;
    }
    return 1;
}

/* Cluster mode: what a command sent on the client's own connection leaves
 * there (client_nodes.h). A transaction (MULTI, WATCH) until EXEC, DISCARD
 * or UNWATCH; state that follows the client to other nodes (HELLO, AUTH,
 * CLIENT TRACKING, ...), kept to be sent there first; state that cannot
 * (subscriptions, MONITOR, CLIENT REPLY OFF) pins it to this node until
 * RESET. */
static void client_note_own_state(client_session *c, int argc, const resp_arg *argv)
{
    switch (cnodes_effect_of(argc, argv, upstream_local_mode(c->up) == UP_LOCAL_IN_MULTI)) {
    case CNODES_TX:
        c->own_tx = 1;
        break;
    case CNODES_TX_END:
        c->own_tx = 0;
        break;
    case CNODES_PINNED:
        c->own_state = 1;
        break;
    case CNODES_FOLLOWS:
        if (cnodes_keep(c, argc, argv) < 0) c->own_state = 1; /* too much to take along */
        break;
    case CNODES_RESET:
        c->own_tx = c->own_state = 0;
        cnodes_forget(c);
        cnodes_close_parked(c);
        break;
    case CNODES_NONE:
        break;
    }
}

/* Cluster mode: a command split by hash slot or fanned out over every primary
 * (CLUSTER_SPLIT): its parts go on the nodes' shared connections, their
 * replies to one pending reply, merged there (cluster_merge.h). A client on a
 * connection of its own goes back to the shared ones for it, once its
 * replies are in, unless that connection holds state (a transaction: there
 * Redis's CROSSSLOT, which aborts it). Returns 0 (sent or answered) or -1
 * (held, as client_route). */
static int client_route_split(client_session *c, const cluster_decision *d, int argc, const resp_arg *argv)
{
    vp_server *srv = c->srv;
    if (c->up && !c->up->shared) {
        if (c->own_tx || c->own_state) {
            metrics_count(&srv->metrics, c->cur_cmd);
            char line[320];
            int n;
            if (upstream_local_mode(c->up) == UP_LOCAL_IN_MULTI && !d->fanout)
                n = snprintf(line, sizeof(line), "%s\r\n", RPLAN_ERR_CROSSSLOT);
            else
                n = snprintf(line, sizeof(line),
                             "-ERR verbproxy: '%.*s' %s is not supported on a connection holding state (on "
                             "cluster node %s)\r\n",
                             (int)(argv[0].len > 32 ? 32 : argv[0].len), argv[0].ptr,
                             d->fanout ? "over every primary" : "with keys in several slots",
                             c->up->node->addr);
            client_answer_error_line(c, line, (size_t)n);
            return 0;
        }
        if (c->pending_len) {
            c->settling = 1;
            return -1;
        }
        upstream_close(c->up);
        c->up = NULL;
        c->own_upstream = 0;
    }
    upstream_node *node;
    const char *req;
    size_t len;
    /* SCRIPT KILL, FUNCTION KILL: never behind the busy script (the nodes'
     * side connections, upstream_side.c) */
    int side = cmd_is_out_of_band(argc, argv);
    for (int i = 0; i < d->nparts && !side; i++) {
        cluster_part(srv, i, &node, &req, &len);
        upstream_conn *up = upstream_shared(srv, node, c->id);
        if (!upstream_is_ready(up)) { /* client_shared_ready resumes it */
            c->route_node = node;
            c->up = up;
            return -1;
        }
    }
    if (c->up && c->up->retired) {
        c->settling = 1; /* as client_may_share */
        return -1;
    }
    if (c->pending_len >= client_share_window(c)) {
        c->owed_wait = 1;
        client_stop_reading(c);
        return -1;
    }
    metrics_count(&srv->metrics, c->cur_cmd);
    unsigned long long seq = client_next_seq(c);
    client_pending *s = pending_push(c, PENDING_WAITING);
    s->merge = cluster_part_merge(srv);
    for (int i = 0; i < d->nparts; i++) {
        cluster_part(srv, i, &node, &req, &len);
        unsigned long long part_seq = CLIENT_PART_SEQ(seq, (unsigned long long)i);
        if (side) {
            upstream_side_forward_part(srv, node, c, part_seq, req, len);
            continue;
        }
        c->up = upstream_shared(srv, node, c->id);
        upstream_forward_part(c->up, c, part_seq, req, len);
    }
    if (!c->up) c->up = upstream_shared(srv, node, c->id); /* (it left its own: side parts only) */
    c->route_node = node;
    c->used_shared = 1;
    return 0;
}

/* Cluster mode: where the command at hand goes (cluster.h). 1: on with it,
 * c->up being its node's connection; 0: answered here; -1: held, left in
 * the buffer until the slot map or the node's connection is ready
 * (client_cluster_ready, client_shared_ready resume it), or until the
 * replies it is owed are in (settling). */
static int client_route(client_session *c, int argc, const resp_arg *argv)
{
    vp_server *srv = c->srv;
    if (c->answering_unavailable) return 1;
    cluster_decision d;
    cluster_plan(srv, argc, argv, cmdid_verb(&srv->metrics.ids, c->cur_cmd), &d);
    if (d.kind == CLUSTER_WAIT) {
        c->cluster_wait = 1;
        return -1;
    }
    if (c->multi_deferred && c->up) {
        int rc = client_route_deferred_multi(c, argc, argv, &d);
        if (rc <= 0) return rc;
    } else if (c->up && c->up->shared && cmd_classify(argc, argv) == CMD_MULTI) {
        metrics_count(&srv->metrics, c->cur_cmd);
        client_queue_local(c, "+OK\r\n", 5);
        c->multi_deferred = 1;
        return 0;
    }
    int own = c->up && !c->up->shared;
    if (d.kind == CLUSTER_ANSWER) {
        /* On its own connection Redis answers what is no error (a PING in
         * subscribe mode, a transaction's +QUEUED). */
        if (own && !d.error) return 1;
        metrics_count(&srv->metrics, c->cur_cmd);
        if (!c->up) {
            client_queue_local(c, d.reply, d.len);
            return 0;
        }
        if (d.error)
            client_answer_error_line(c, d.reply, d.len);
        else
            client_answer(c, d.reply, d.len, NULL, 1);
        return 0;
    }
    if (d.kind == CLUSTER_SPLIT) return client_route_split(c, &d, argc, argv);
    upstream_node *node = d.node ? d.node : c->up ? c->up->node : cluster_any_node(srv);
    if (!c->up || c->up->node == node) {
        c->route_node = node;
        if (own) client_note_own_state(c, argc, argv);
        return 1;
    }
    if (own && !c->own_state && !c->own_tx) {
        /* Nothing of the session lives on its node (it moved for a
         * transaction now over, a blocking command, or its output): once
         * what it is owed is in, it leaves that connection and goes on as
         * a new client would, on the command's node (moved to its own
         * connection again if it still needs one). */
        if (c->pending_len) {
            c->settling = 1;
            return -1;
        }
        if (cnodes_has_state(c)) {
            /* Its protocol, user, tracking go along: its own connection
             * to that node, with them sent first. */
            if (!cnodes_switch(c, node)) {
                client_refuse_no_descriptor(c);
                return 0;
            }
            if (!upstream_is_ready(c->up)) return -1; /* routed again once it is */
            client_note_own_state(c, argc, argv);
            return 1;
        }
        c->route_node = node;
        upstream_close(c->up);
        c->up = NULL;
        c->own_upstream = 0;
        c->up = client_connect(c);
        return c->up && upstream_is_ready(c->up) ? 1 : -1;
    }
    if (own) {
        /* Its connection's state (a transaction, WATCH, subscriptions,
         * MONITOR, CLIENT REPLY OFF) lives on one node. In a transaction
         * this is Redis's -MOVED while queueing, which aborts it at EXEC:
         * here CROSSSLOT. */
        metrics_count(&srv->metrics, c->cur_cmd);
        char line[320];
        int n = upstream_local_mode(c->up) == UP_LOCAL_IN_MULTI
                    ? snprintf(line, sizeof(line), "%s\r\n", RPLAN_ERR_CROSSSLOT)
                    : snprintf(line, sizeof(line),
                               "-ERR verbproxy: this connection holds state on cluster node %s; slot %d is "
                               "served by %s\r\n",
                               c->up->node->addr, d.slot, node->addr);
        client_answer_error_line(c, line, (size_t)n);
        return 0;
    }
    /* Another node's shared connection: what it was sent elsewhere stays
     * owed there, and its pending replies keep the order. */
    c->route_node = node;
    c->up = upstream_shared(srv, node, c->id);
    return upstream_is_ready(c->up) ? 1 : -1;
}

/* Parse and dispatch what is buffered. Returns 1 when it stopped early
 * because more than `limit` bytes wait to go upstream. */
static int client_parse_batch(client_session *c, size_t limit)
{
    /* On a shared connection a client held back for the connection's sake
     * is not parsed either (what it sent may already be read). One held for
     * its own output is: what it sent runs, as it would on Redis, but its
     * next command moves it (slow_reader), where Redis holds what it does
     * not read. */
    if (c->shared_wait || c->owed_wait) return 0;
    int routed;
    while (c->in_pos < c->in.len && !c->input_done) {
        const char *p = c->in.data + c->in_pos;
        size_t avail = c->in.len - c->in_pos;
        if (c->opaque) {
            if (c->up) upstream_forward_bytes(c->up, p, avail);
            c->in_pos += avail;
            return 0;
        }
        size_t used = 0;
        c->admitted = 0; /* each command passes the gate (client_admit) again */
        /* Where Redis has not authenticated the client, Redis's pre-auth
         * limits are applied here, with Redis's texts: on a shared
         * connection one oversized request must not get it closed; on the
         * connection of its own it moved to for that, Redis would judge
         * the same. */
        c->parser.unauthenticated =
            (c->up && c->up->shared && upstream_requires_auth(c->up)) || c->upstream_noauth || !c->authed;
        resp_req_status st = resp_request_parse(&c->parser, p, avail, &used);
        if (st == RESP_REQ_INCOMPLETE) {
            if (c->up) client_stream_partial(c, p, avail);
            return c->up && upstream_backlog(c->up) > limit;
        }
        if (st == RESP_REQ_ERROR) {
            if (c->streaming) {
                /* Redis has the start of this request and waits for the
                 * rest, which will not come: the request's own pending reply (the
                 * last) gets the error, after the replies owed before it,
                 * and closing the connection drops Redis's half request. */
                client_stream_error(c, resp_request_error(&c->parser));
                return 0;
            }
            client_protocol_error(c, resp_request_error(&c->parser));
            return 0;
        }
        if (st == RESP_REQ_COMMAND && !c->streaming)
            c->cur_cmd = (unsigned short)cmdid_lookup(&c->srv->metrics.ids, c->parser.argv[0].ptr,
                                                      c->parser.argv[0].len);
        if (st == RESP_REQ_COMMAND && c->streaming) {
            upstream_forward_bytes(c->up, p, used); /* the rest of a streamed request */
            c->streaming = 0;
        } else if (st == RESP_REQ_COMMAND &&
                   client_admit(c, c->parser.argc, c->parser.argv, 1) == ADMIT_ANSWERED) {
            /* answered at the gate (the proxy's own users) */
        } else if (st == RESP_REQ_COMMAND && c->srv->cluster &&
                   (routed = client_route(c, c->parser.argc, c->parser.argv)) <= 0) {
            if (routed < 0) { /* held: parsed again once it may go */
                if (c->in.len - c->in_pos > limit) client_stop_reading(c);
                c->cur_cmd = CMDID_NONE;
                return 0;
            }
            /* answered by client_route */
        } else if (st == RESP_REQ_COMMAND) {
            if (c->up && c->up->shared && !client_may_share(c, c->parser.argc, c->parser.argv)) {
                /* Left in the buffer, parsed again once it may go. Reading
                 * goes on up to buffer-limit, so a client that leaves is
                 * still noticed. */
                if (c->in.len - c->in_pos > limit) client_stop_reading(c);
                c->cur_cmd = CMDID_NONE;
                return 0;
            }
            if (c->up && !c->up->shared &&
                ((c->up->verbs_in_flight &&
                  upstream_must_settle_verbs(c->up, c->parser.argc, c->parser.argv)) ||
                 client_polyfill_must_wait(c, c->parser.argc, c->parser.argv))) {
                /* Left in the buffer, parsed again once they are. Reading
                 * goes on up to buffer-limit, so a client that leaves is
                 * still noticed. */
                c->settling = 1;
                if (c->in.len - c->in_pos > limit) client_stop_reading(c);
                c->cur_cmd = CMDID_NONE;
                return 0;
            }
            client_dispatch(c, c->parser.argv, c->parser.argc, p, used);
        } else if (c->up && !c->up->shared) {
            upstream_forward_empty(c->up, p, used); /* keeps the pieces contiguous */
        }
        c->cur_cmd = CMDID_NONE;
        c->in_pos += used;
        if (c->up && upstream_backlog(c->up) > limit) return 1;
    }
    return 0;
}

static void client_process_input(client_session *c)
{
    if (c->closing || c->input_done) return;
    if (c->in_pos == c->in.len) return;
    if (c->up && c->up->retired && c->pending_len == 0 && !c->shared_wait) client_leave_retired(c);
    if (!c->up && !c->answering_unavailable) c->up = client_connect(c); /* retry */
    if (c->up && !upstream_is_ready(c->up)) {
        /* Hold requests until the connect settles, one way or the other. */
        if (c->in.len > (size_t)c->srv->conf.buffer_limit) client_stop_reading(c);
        return;
    }

    size_t limit = (size_t)c->srv->conf.buffer_limit;
    for (;;) {
        int more = client_parse_batch(c, limit);
        /* The forwarded pieces point into `in`: write them before compacting.
         * (A shared connection has copied them; see up_shared_write for
         * when it writes.) */
        if (c->up && c->up->shared) {
            upstream_flush_early(c->up);
        } else if (c->up) {
            int rc = upstream_flush(c->up);
            if (rc < 0) {
                upstream_write_failed(c->up, rc); /* (tells this client) */
                return;
            }
        }
        if (c->input_done) {
            c->in.len = c->in_pos = 0; /* nothing more will be parsed */
        } else {
            vp_buf_consume(&c->in, c->in_pos);
            c->in_pos = 0;
        }
        if (!more || c->input_done) break;
        /* The batch stopped because the upstream has a backlog. If the
         * kernel took it all, carry on; otherwise wait for the write to
         * drain (client_upstream_drained resumes). */
        if (upstream_backlog(c->up) > limit) {
            client_stop_reading(c);
            if (c->up->shared && !c->shared_wait) {
                c->shared_wait = 1; /* client_shared_drained resumes */
                c->up->waiters++;
            }
            break;
        }
    }
    vp_pool_buf_release_idle(&c->in); /* all parsed: the buffer goes back */
    client_flush(c);
}

/* Nothing left to do before closing? (Not while a connect is pending: the
 * requests waiting for it are still to be answered.) */
static int client_idle(client_session *c)
{
    /* Nor while a command is held back (settling), or requests read are
     * not parsed yet (held on a shared connection). */
    return c->pending_len == 0 && outq_size(&c->out) == 0 && !(c->up && !upstream_is_ready(c->up)) &&
           !c->settling && !c->shared_wait && !c->owed_wait;
}

/* End of input (read, or seen by client_check_paused). */
static void client_input_ended(client_session *c)
{
    /* (shut: the drain's FIN went out, this EOF is the answer to it) */
    if (client_idle(c) || c->shut) {
        /* (Over TLS it is answered with close_notify, as TLS asks, and as
         * when replies were still owed: a client that is done writing and
         * still reads sees a clean end either way. Redis sends none once
         * its read found the end, connTLSRead: docs/security.md#tls,
         * "How a TLS connection ends".) */
        vp_log(VP_LOG_DEBUG, "client %llu %s: closed the connection", c->id, c->addr);
        client_close(c);
        return;
    }
    /* End of input with replies still owed: a client that half-closed
     * (printf ... | nc -N) still gets them, as from Redis, which answers
     * what it read before it sees the EOF. One that is really gone is
     * found out by the next write, or let go after a grace period
     * (a blocked BLPOP would otherwise hold its upstream forever). */
    client_stop_reading(c);
    c->close_when_done = 1;
    c->eof_at = uv_now(c->srv->loop);
    c->srv->clients_draining++;
}

static void client_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    client_session *c = s->data;
    if (nread <= 0) {
        /* Nothing read (EAGAIN after a full read, or the end): the block
         * the alloc callback took goes back unless it holds input. */
        vp_pool_buf_release_idle(&c->in);
    }
    if (nread == 0) return;
    if (nread < 0) {
        if (nread != UV_EOF) {
            vp_log(VP_LOG_DEBUG, "client %llu %s: %s", c->id, c->addr, uv_strerror((int)nread));
            client_close_gone(c);
            return;
        }
        client_input_ended(c);
        return;
    }
    if (c->input_done) {
        /* Answered and closing: read only to notice the client leave. */
        c->in.len = c->in_pos = 0;
        vp_pool_buf_release_idle(&c->in);
        return;
    }
    c->in.len += (size_t)nread;
    c->srv->metrics.net_input_bytes += (unsigned long long)nread;
    c->read_ns = metrics_read_clock(&c->srv->metrics); /* once per read: the t0 of its commands */
    c->last_io = uv_now(c->srv->loop);
    c->read_seq = client_next_seq(c); /* see client_http_request */
    /* (Not while a connect is pending: reading stops at buffer-limit then,
     * and what is held is complete requests, not one oversized one.) */
    int connecting = c->up && !upstream_is_ready(c->up);
    if (!connecting && !c->settling && c->in.len > (size_t)c->srv->conf.client_query_buffer_limit) {
        /* As Redis: a request that would not fit is not answered, the
         * connection is closed (and nothing else suffers). */
        vp_log(VP_LOG_WARNING,
               "client %llu %s: closing: query buffer over client-query-buffer-limit (%zu bytes)", c->id,
               c->addr, c->in.len);
        client_close(c);
        return;
    }
    client_process_input(c);
}

/* Redis's `timeout` (clientsCronHandleTimeout): a client idle that long is
 * closed without a reply, unless it waits for a reply (a blocking command,
 * or anything still owed), subscribed, is a MONITOR or a replica (SYNC).
 * One walk a second from the cron, so an idle client costs no timer. */
static void client_close_idle(vp_server *srv, uint64_t now)
{
    uint64_t limit = (uint64_t)srv->conf.timeout * 1000;
    client_session *next;
    for (client_session *c = srv->clients; c; c = next) {
        next = c->next;
        if (c->pending_len || c->pubsub || c->monitor || c->opaque || c->eof_at || c->settling ||
            c->closing || c->in_pos < c->in.len || now - c->last_io <= limit)
            continue;
        vp_log(VP_LOG_VERBOSE, "client %llu %s: closing: idle for over %lld seconds (timeout)", c->id,
               c->addr, srv->conf.timeout);
        srv->stats.clients_timed_out++;
        client_close(c);
    }
}

/* Is a client the proxy does not read still there? (See
 * client_stop_reading.) Asked of the kernel without taking anything from
 * the socket: a reset or a full close ends it now; a half close with
 * nothing before it unread is the end of its input, as a read would have
 * found. (Over TLS the session may still hold requests it read: there
 * only the reset or full close is acted on.) */
static void client_check_paused(client_session *c)
{
    uv_os_fd_t fd;
    if (uv_fileno(&c->h.handle, &fd) != 0) return;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 0) != 1) return;
    if (p.revents & (POLLERR | POLLHUP)) {
        vp_log(VP_LOG_VERBOSE, "client %llu %s: gone while not read (%s); closing", c->id, c->addr,
               p.revents & POLLERR ? "reset" : "closed");
        client_close_gone(c);
        return;
    }
    char b;
    if (!c->tls && (p.revents & POLLIN) && recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
        vp_log(VP_LOG_DEBUG, "client %llu %s: sent EOF while not read", c->id, c->addr);
        client_input_ended(c);
    }
}

void client_cron(vp_server *srv)
{
    uint64_t now = uv_now(srv->loop);
    if (srv->conf.timeout) client_close_idle(srv, now);
    if (srv->clients_paused) {
        /* (A write in flight would fail at a reset; one at EOF is let go
         * by the grace below.) */
        client_session *next;
        for (client_session *c = srv->clients; c; c = next) {
            next = c->next;
            if (c->paused && !c->eof_at && !c->closing && !outq_backed_up(&c->out)) client_check_paused(c);
        }
    }
    if (srv->clients_draining == 0) return;
    client_session *next;
    for (client_session *c = srv->clients; c; c = next) {
        next = c->next;
        if (c->eof_at && now - c->eof_at >= CLIENT_EOF_GRACE_MS) {
            vp_log(VP_LOG_VERBOSE, "client %llu %s: gone for %d ms with replies owed; closing", c->id,
                   c->addr, CLIENT_EOF_GRACE_MS);
            client_close(c);
        }
    }
}

/* ---- upstream events ---- */

void client_upstream_ready(client_session *c)
{
    client_start_reading(c);
    client_process_input(c);
    client_maybe_finish(c); /* a client that left while we connected */
}

void client_upstream_failed(client_session *c, const char *reason)
{
    c->up = NULL;
    /* Cluster mode: its retry must not go back to the node that failed
     * (a killed primary) for good: the next command's own node, from the
     * map as it is then (client_route), once a fetch followed the failure. */
    if (c->srv->cluster) c->route_node = NULL;
    c->shared_wait = c->output_held = c->owed_wait = 0; /* nothing of that connection's holds it now */
    snprintf(c->up_error, sizeof(c->up_error), "%s", reason);
    /* One line per second at most: in an outage every client hits this.
     * (None for a refused AUTH: up_auth_answered logs each change once.) */
    uint64_t now = uv_now(c->srv->loop);
    int auth_refused = c->srv->upstream_auth_failure[0] && strcmp(reason, c->srv->upstream_auth_failure) == 0;
    if (!auth_refused &&
        (c->srv->unavailable_logged_at == 0 || now - c->srv->unavailable_logged_at >= 1000)) {
        c->srv->unavailable_logged_at = now;
        vp_log(VP_LOG_WARNING, "upstream %s unavailable: %s", client_upstream_name(c), reason);
    }
    /* Every request already here gets the error now; later ones retry. */
    c->answering_unavailable = 1;
    client_process_input(c);
    c->answering_unavailable = 0;
    client_start_reading(c);
    client_maybe_finish(c);
}

/* Redis refused the connection (upstream_refusal): the client's oldest
 * command still waiting gets that error as its reply, as it would from
 * Redis directly. */
static void client_take_refusal(client_session *c)
{
    size_t n;
    const char *err = c->up ? upstream_refusal(c->up, &n) : NULL;
    if (!err) return;
    for (size_t i = 0; i < c->pending_len; i++) {
        if (pending_at(c, i)->kind == PENDING_WAITING) {
            client_reply(c, c->pending_seq + i, err, n, 1);
            return;
        }
    }
    if (c->pending_len == 0) outq_add_copy(&c->out, err, n); /* none waiting: as Redis, before the close */
}

void client_upstream_lost(client_session *c, const char *reason)
{
    client_take_refusal(c);
    client_release_upstream(c);
    vp_log(VP_LOG_VERBOSE,
           "client %llu %s: upstream connection lost (%s); closing after delivering what arrived", c->id,
           c->addr, reason);
    /* What the upstream never answered will not be answered: drop those
     * pending replies (and the local replies queued behind them), deliver the rest. */
    while (c->pending_len)
        pending_pop(c);
    c->input_done = 1;
    c->close_when_done = 1;
    c->settling = 0; /* a held command will not be sent now */
    client_flush(c);
}

int client_can_become_pipe(const client_session *c)
{
    if (c->closing) return 0;
    for (size_t i = 0; i < c->pending_len; i++) {
        const client_pending *s = &c->pending[(c->pending_head + i) % c->pending_cap];
        if (s->kind != PENDING_WAITING || s->replace) return 0;
        if (i > 0 && s->len) return 0; /* held behind an unanswered one */
    }
    return 1;
}

void client_become_pipe(client_session *c, const char *why)
{
    vp_log(VP_LOG_WARNING,
           "client %llu %s: its upstream sent a reply that is not RESP (%s); the rest of the session is a "
           "byte pipe, as after SYNC",
           c->id, c->addr, why);
    if (c->pending_len && pending_at(c, 0)->len) {
        client_pending *s = pending_at(c, 0); /* a reply held to be patched: as Redis sent it */
        outq_add_copy(&c->out, s->data, s->len);
    }
    while (c->pending_len)
        pending_pop(c);
    c->opaque = 1;
    c->settling = 0; /* a command held back goes now, as bytes */
    client_start_reading(c);
    client_process_input(c);
}

/* COMMAND INFO/DOCS naming a verb: Redis's reply with the verbs filled in. */
static void client_patch_reply(client_session *c, client_pending *s)
{
    vp_buf out = {0};
    if (admin_patch_reply(&c->srv->verbs, s->patch, s->verb_ids, s->nverb_ids, s->data, s->len, &out) == 0) {
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
static void client_learn_upstream_auth(client_session *c, const char *p, size_t n)
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
    } else if (idx == 0 && !s->patch && s->len == 0) {
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

void client_upstream_drained(client_session *c)
{
    if (c->closing) return;
    if (!c->input_done) {
        client_start_reading(c);
        client_process_input(c);
    }
    client_maybe_finish(c); /* a half-closed client held back may be done now */
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

/* (Each walks every client: these are rare events. A call may close the
 * client at hand, never another one.) */

void client_shared_ready(vp_server *srv, upstream_conn *up)
{
    client_session *next;
    for (client_session *c = srv->clients; c; c = next) {
        next = c->next;
        if (c->up == up) client_upstream_ready(c);
    }
}

/* Cluster mode: a client may be owed replies on a shared connection it is
 * not on (c->up went on to another node's). */
static int client_elsewhere(const upstream_conn *up, const up_entry *e)
{
    return up->srv->cluster && e->client && e->client->up != up;
}

/* A shared connection that failed to connect: requests of clients now on
 * another node's connection were never sent; each gets the error a failed
 * connect gives, in its pending reply. */
static void client_fail_elsewhere(upstream_conn *up, const char *why)
{
    char msg[384];
    size_t n = resp_write_errorf(msg, sizeof(msg), "ERR upstream unavailable: %s: %s", up->node->addr, why);
    for (size_t i = 0; i < upstream_owed(up); i++) {
        const up_entry *e = upstream_owed_at(up, i);
        if (!client_elsewhere(up, e)) continue;
        client_reply(e->client, e->seq, msg, n, 1); /* (only queues) */
        client_touch(e->client);
    }
}

void client_shared_failed(vp_server *srv, upstream_conn *up, const char *reason)
{
    if (srv->cluster) cluster_suspect(srv, reason);
    client_fail_elsewhere(up, reason);
    client_session *next;
    for (client_session *c = srv->clients; c; c = next) {
        next = c->next;
        if (c->up == up) client_upstream_failed(c, reason);
    }
}

/* A client owed replies is closed after what arrived, as on a connection of
 * its own; one owed nothing never notices and takes a new connection with
 * its next command. */
void client_shared_lost(vp_server *srv, upstream_conn *up, const char *reason)
{
    /* Redis refused the connection (maxclients): the clients waiting for it
     * to be set up get its error and the close, as Redis would give them. */
    size_t refusal_len;
    int refused = upstream_refusal(up, &refusal_len) != NULL;
    /* Lost before its setup was answered (the upstream accepts and closes:
     * a load balancer without a backend, a TLS-only port): for its clients,
     * whose requests were held, a failed connect; their next request tries
     * again, so they never make the proxy reconnect in a loop. */
    int set_up = upstream_was_set_up(up);
    if (srv->cluster) {
        cluster_suspect(srv, reason);
        if (!set_up) client_fail_elsewhere(up, reason);
        /* A client owed a reply here but now on another node's connection
         * is closed after what arrived, as one on this connection. */
        for (size_t i = 0; set_up && i < upstream_owed(up); i++) {
            const up_entry *e = upstream_owed_at(up, i);
            if (client_elsewhere(up, e)) e->client->on_lost = 1;
        }
    }
    client_session *next;
    for (client_session *c = srv->clients; c; c = next) {
        next = c->next;
        if (c->on_lost) {
            c->on_lost = 0;
            client_upstream_lost(c, reason);
            continue;
        }
        if (c->up != up) continue;
        if (!set_up && !refused) {
            client_upstream_failed(c, reason);
        } else if (c->pending_len || refused) {
            client_upstream_lost(c, reason);
        } else {
            /* Its next command (maybe one already read) takes a new one. */
            client_release_upstream(c);
            client_start_reading(c);
            client_process_input(c);
            client_maybe_finish(c);
        }
    }
}

void client_cluster_ready(vp_server *srv)
{
    client_session *next;
    for (client_session *c = srv->clients; c; c = next) {
        next = c->next;
        if (!c->cluster_wait) continue;
        c->cluster_wait = 0;
        client_start_reading(c);
        client_process_input(c);
        client_maybe_finish(c);
    }
}

void client_cluster_failed(vp_server *srv, const char *reason)
{
    client_session *next;
    for (client_session *c = srv->clients; c; c = next) {
        next = c->next;
        if (!c->cluster_wait) continue;
        c->cluster_wait = 0;
        client_upstream_failed(c, reason);
    }
}

void client_shared_retired(vp_server *srv, upstream_conn *up, int all)
{
    client_session *next;
    for (client_session *c = srv->clients; c; c = next) {
        next = c->next;
        if (c->up != up || (!all && (c->pending_len || c->shared_wait))) continue;
        client_leave_retired(c);
        client_start_reading(c);
        client_process_input(c);
        client_maybe_finish(c);
    }
}

/* A COMMAND reply still owed names verbs by id: the new table's ids, by
 * name (a verb the reload removed is left out of the listings, and is no
 * verb where a name was asked for). */
static void client_remap_patch(client_pending *s, const verb_table *old, const verb_table *now)
{
    int listing =
        s->patch == ADMIN_PATCH_INFO_ALL || s->patch == ADMIN_PATCH_LIST || s->patch == ADMIN_PATCH_COUNT;
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

void client_shared_drained(vp_server *srv, upstream_conn *up)
{
    client_session *next;
    for (client_session *c = srv->clients; c && up->waiters; c = next) {
        next = c->next;
        if (c->up != up || !c->shared_wait) continue;
        c->shared_wait = 0;
        up->waiters--;
        client_upstream_drained(c);
    }
}

/* ---- lifetime ---- */

int client_used_shared(const client_session *c)
{
    return c->used_shared;
}

void client_drain_close(client_session *c)
{
    if (c->closing) return;
    /* What it sent and is not yet upstream is dropped unanswered, as by a
     * server that stops reading; a command held back (settling, waiting
     * for its share window) was not sent either. */
    c->input_done = 1;
    c->in.len = c->in_pos = 0;
    vp_pool_buf_release_idle(&c->in);
    if (c->shared_wait && c->up) c->up->waiters--;
    c->settling = c->shared_wait = c->owed_wait = c->output_held = 0;
    c->close_when_done = 1;
    c->linger = 1;
    /* Read on, only to notice it leave (client_on_read drops the bytes). */
    client_start_reading(c);
    client_flush(c); /* (closes it now if nothing is owed) */
}

static void client_close_cb(uv_handle_t *h)
{
    client_session *c = h->data;
    outq_free(&c->out);
    vp_tls_free(c->tls);
    vp_pool_buf_release(&c->in);
    for (int i = 0; i < 3; i++)
        vp_buf_free(&c->setters[i]);
    resp_request_free(&c->parser);
    while (c->pending_len)
        pending_pop(c);
    pending_ring_release(c);
    cnodes_free(c);
    free(c);
}

void client_close(client_session *c)
{
    if (c->closing) return;
    c->closing = 1;
    client_release_upstream(c);
    if (c->prev)
        c->prev->next = c->next;
    else
        c->srv->clients = c->next;
    if (c->next) c->next->prev = c->prev;
    c->srv->stats.clients_connected--;
    if (c->eof_at) c->srv->clients_draining--;
    client_unpause(c);
    /* What it was owed is written (or given up: a kill, a limit, the
     * drain's bound); a strict TLS client reads a clean end, not a
     * truncation. Best effort, as Redis's SSL_shutdown on its non-blocking
     * socket. */
    if (c->tls && !c->gone && outq_close_notify(&c->out))
        vp_log(VP_LOG_DEBUG, "client %llu %s: close_notify sent", c->id, c->addr);
    vp_log(VP_LOG_DEBUG, "client %llu %s: closed", c->id, c->addr);
    uv_close(&c->h.handle, client_close_cb);
}

static void client_describe(client_session *c, int is_unix)
{
    if (is_unix) {
        snprintf(c->addr, sizeof(c->addr), "unix");
        return;
    }
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    char ip[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (uv_tcp_getpeername(&c->h.tcp, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET) {
            uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof(ip));
            port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof(ip));
            port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        }
    }
    snprintf(c->addr, sizeof(c->addr), "%s:%d", ip, port);
}

/* Redis 7.0's protected mode (acceptCommonHandler), whatever `bind` is:
 * while the default user has no password, a TCP client from anywhere but
 * 127.0.0.1 or ::1 gets this text and the close. */
#define CLIENT_DENIED                                                                                        \
    "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set "   \
    "for the default user. In this mode connections are only accepted from the loopback interface. If you "  \
    "want to connect from external computers to Redis you may adopt one of the following solutions: 1) "     \
    "Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback "      \
    "interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis "    \
    "is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change "         \
    "permanent. 2) Alternatively you can just disable the protected mode by editing the Redis "              \
    "configuration file, and setting the protected mode option to 'no', and then restarting the server. "    \
    "3) If you started the server manually just for testing, restart it with the '--protected-mode no' "     \
    "option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of "  \
    "the above things in order for the server to start accepting connections from the outside.\r\n"

static int client_protected_refusal(client_session *c)
{
    if (!c->srv->conf.protected_mode || !auth_default_nopass(&c->srv->conf.auth)) return 0;
    const char *colon = strrchr(c->addr, ':');
    size_t iplen = colon ? (size_t)(colon - c->addr) : strlen(c->addr);
    if ((iplen == 9 && memcmp(c->addr, "127.0.0.1", 9) == 0) ||
        (iplen == 3 && memcmp(c->addr, "::1", 3) == 0))
        return 0;
    vp_log(VP_LOG_VERBOSE, "client %llu %s: refused: protected mode", c->id, c->addr);
    c->srv->metrics.rejected_protected_mode++;
    if (c->tls) {
        /* Redis answers a TLS client once its handshake is over
         * (clientAcceptHandler): written then (client_on_tls_handshake),
         * and the client closed. */
        outq_add_copy(&c->out, CLIENT_DENIED, sizeof(CLIENT_DENIED) - 1);
        c->close_when_done = 1;
        return 1;
    }
    /* A best effort, as Redis's: never wait for a client we refuse. */
    uv_buf_t b = uv_buf_init((char *)CLIENT_DENIED, sizeof(CLIENT_DENIED) - 1);
    (void)uv_try_write(&c->h.stream, &b, 1);
    client_close(c);
    return 1;
}

static void client_on_tls_raw_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    client_session *c = s->data;
    vp_tls_on_raw_read(c->tls, nread, buf);
}

/* Its requests are read (client_start_reading) once the handshake is
 * over; a failed one only closes it (nothing can be written to it). */
static void client_on_tls_handshake(vp_tls *t, int status)
{
    client_session *c = vp_tls_data(t);
    if (status == 0) {
        vp_log(VP_LOG_DEBUG, "client %llu %s: TLS handshake done", c->id, c->addr);
        /* What waited for it (the error of a client refused at accept). */
        client_flush(c);
        client_maybe_finish(c);
        return;
    }
    c->srv->stats.tls_client_handshake_failures++;
    vp_log(VP_LOG_VERBOSE, "client %llu %s: TLS handshake failed: %s", c->id, c->addr, vp_tls_error(t));
    client_close_gone(c);
}

void client_accept(vp_server *srv, uv_stream_t *listener, int is_unix, int tls)
{
    client_session *c = vp_malloc(sizeof(*c));
    memset(c, 0, sizeof(*c));
    c->srv = srv;
    c->id = ++srv->next_client_id;
    c->share_window = CLIENT_SHARED_FIRST_WINDOW;
    c->cur_cmd = CMDID_NONE;
    int rc = is_unix ? uv_pipe_init(srv->loop, &c->h.pipe, 0) : uv_tcp_init(srv->loop, &c->h.tcp);
    if (rc < 0) {
        vp_log(VP_LOG_WARNING, "accept: cannot init handle: %s", uv_strerror(rc));
        free(c);
        return;
    }
    c->h.handle.data = c;
    c->prev = NULL;
    c->next = srv->clients;
    if (srv->clients) srv->clients->prev = c;
    srv->clients = c;
    srv->stats.clients_connected++;
    srv->stats.connections_received++;
    outq_init(&c->out, &c->h.stream, c, client_on_written);
    resp_request_init(&c->parser, &srv->limits);

    rc = uv_accept(listener, &c->h.stream);
    if (rc < 0) {
        vp_log(VP_LOG_WARNING, "accept failed: %s", uv_strerror(rc));
        client_close(c);
        return;
    }
    if (!is_unix) {
        uv_tcp_nodelay(&c->h.tcp, 1);
        net_tcp_keepalive(&c->h.tcp, srv->conf.tcp_keepalive);
    }
    client_describe(c, is_unix);
    vp_log(VP_LOG_DEBUG, "client %llu %s: connected%s", c->id, c->addr, tls ? " on tls-port" : "");
    if (tls) {
        c->tls = outq_tls_new(&c->out, srv->tls_clients, NULL, client_on_tls_raw_read);
        vp_tls_set_data(c->tls, c);
        if ((rc = vp_tls_handshake(c->tls, client_on_tls_handshake)) < 0) {
            vp_log(VP_LOG_WARNING, "client %llu %s: cannot start TLS: %s", c->id, c->addr, uv_strerror(rc));
            client_close(c);
            return;
        }
    }
    c->last_io = uv_now(srv->loop);
    c->authed = (unsigned)auth_default_authenticated(&srv->conf.auth);
    if (!is_unix && client_protected_refusal(c)) return;
    /* Connect upstream at once so the first request does not pay for it. */
    c->up = client_connect(c);
    if (c->close_when_done) {
        client_flush(c); /* refused: Redis's error, then the close */
        return;
    }
    client_start_reading(c);
}

/* Sentinel mode: the primary moved (srv->conf.upstream* names the new one).
 * Every client that sent commands through the old primary is closed once
 * it has its replies, as Sentinel's CLIENT KILL TYPE normal on the
 * demoted node closes a direct client: writes the old primary took after
 * the promotion are lost, and a client moved on silently would see its
 * own writes vanish (an INCR going back). One that never sent anything
 * moves on. The shared connections are retired (upstream_retire_shared). */
void client_primary_moved(vp_server *srv)
{
    client_session *next;
    for (client_session *c = srv->clients; c; c = next) {
        next = c->next; /* (client_drain_close may close c, never another) */
        if (c->up && c->up->shared && client_used_shared(c)) client_drain_close(c);
    }
    /* Clients owing the retired connections nothing move now; the ones
     * left on them have requests in flight on the old primary. */
    upstream_retire_shared(srv);
    srv->upstream_auth_failure[0] = '\0';
    for (client_session *c = srv->clients; c; c = next) {
        next = c->next; /* (client_drain_close may close c, never another) */
        if (c->up && (!c->up->shared || c->up->retired)) client_drain_close(c);
    }
}

/* ---- what upstream connections call (upstream.h's callbacks) ---- */

/* A client's own connection tells the client. */
static void own_ready(upstream_conn *up, void *arg)
{
    (void)up;
    client_upstream_ready(arg);
}

static void own_failed(upstream_conn *up, void *arg, const char *why)
{
    (void)up;
    client_upstream_failed(arg, why);
}

static void own_lost(upstream_conn *up, void *arg, const char *why)
{
    (void)up;
    client_upstream_lost(arg, why);
}

static void own_drained(upstream_conn *up, void *arg)
{
    (void)up;
    client_upstream_drained(arg);
}

static void own_read_done(upstream_conn *up, void *arg)
{
    (void)up;
    client_round_end(arg);
}

const upstream_owner client_own_owner = {.ready = own_ready,
                                         .failed = own_failed,
                                         .lost = own_lost,
                                         .drained = own_drained,
                                         .read_done = own_read_done};

/* A shared connection tells every client on it (arg: the server). */
static void shared_ready(upstream_conn *up, void *arg)
{
    client_shared_ready(arg, up);
}

static void shared_failed(upstream_conn *up, void *arg, const char *why)
{
    client_shared_failed(arg, up, why);
}

static void shared_lost(upstream_conn *up, void *arg, const char *why)
{
    client_shared_lost(arg, up, why);
}

static void shared_drained(upstream_conn *up, void *arg)
{
    client_shared_drained(arg, up);
}

static void shared_read_done(upstream_conn *up, void *arg)
{
    (void)up;
    client_flush_touched(arg);
}

static void shared_retired(upstream_conn *up, void *arg, int closing)
{
    client_shared_retired(arg, up, closing);
}

static const upstream_owner client_shared_owner = {.ready = shared_ready,
                                                   .failed = shared_failed,
                                                   .lost = shared_lost,
                                                   .drained = shared_drained,
                                                   .read_done = shared_read_done,
                                                   .retired = shared_retired};

static const upstream_client_ops client_upstream_ops = {.next_seq = client_next_seq,
                                                        .reply = client_reply,
                                                        .push = client_push,
                                                        .touch = client_touch,
                                                        .can_become_pipe = client_can_become_pipe,
                                                        .become_pipe = client_become_pipe,
                                                        .lost = client_upstream_lost};

void client_register(void)
{
    upstream_set_session(&client_upstream_ops, &client_shared_owner);
}

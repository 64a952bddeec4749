/* upstream.c - an upstream connection's I/O: reading and framing the
 * replies (protocol/resp_frame), handing each to whoever is owed it
 * (up_deliver: a client's pending reply through the session's upstream_client_ops,
 * an ask's callback, the watch's redirect), a stream that stops being
 * RESP, what Redis writes to a connection it refuses; writing what is
 * queued; and the failures and losses its owner hears of. Setup is
 * upstream_setup.c's, counting upstream_count.c's, the ring of what is
 * owed upstream_fifo.c's, the shared pool upstream_pool.c's. */
#include "proxy/upstream/upstream.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "proxy/log.h"
#include "proxy/pool.h"
#include "proxy/net/tls.h"
#include "proxy/upstream/upstream_internal.h"

/* Read size per uv read, Redis's PROTO_IOBUF_LEN. */
#define UP_READ_CHUNK (16 * 1024)
#define UP_READ_MAX (1024 * 1024)
/* A reply still incomplete past this size is handed on piece by piece
 * instead of being held whole: this bounds what the proxy holds per reply. */
#define UP_STREAM_THRESHOLD (16 * 1024)
/* ... except the answer to an ask with UP_ASK_LARGE (a slot map: read
 * whole, however fragmented the cluster's slots are, at most 16384 ranges
 * of a few nodes each). */
#define UP_LARGE_MAX (16 * 1024 * 1024)
#define UP_KEEP_BYTES (64 * 1024)

/* The session's ways to reach a client and its shared connections' owner
 * (upstream_set_session). One process, one of each. */
static const upstream_client_ops *up_clients;
static const upstream_owner *up_shared_owner;

void upstream_set_session(const upstream_client_ops *clients, const upstream_owner *shared)
{
    up_clients = clients;
    up_shared_owner = shared;
}

const upstream_client_ops *upstream_clients(void)
{
    return up_clients;
}

const upstream_owner *up_shared_owner_of(void)
{
    return up_shared_owner;
}

/* A connect that did not succeed: tell the owner once, then go away. */
void up_fail(upstream_conn *up, const char *reason)
{
    const upstream_owner *o = up->owner;
    void *arg = up->owner_arg;
    char why[160];
    snprintf(why, sizeof(why), "%s", reason);
    up->srv->stats.upstream_connect_failures++;
    metrics_connect_failed(&up->srv->metrics, why, up->authing && up->state == UPSTREAM_READY);
    vp_log(VP_LOG_VERBOSE, "upstream %s: connect failed: %s", up_addr(up), why);
    if (up->srv->upstream_watch && up->srv->upstream_watch->trouble)
        up->srv->upstream_watch->trouble(up->srv, why);
    upstream_close(up);
    if (o && o->failed) o->failed(up, arg, why);
}

static void up_read_refusal(upstream_conn *up);

/* Mid-session loss: the owner is told (a client gets what already arrived,
 * then is closed). */
void up_lost(upstream_conn *up, const char *reason)
{
    const upstream_owner *o = up->owner;
    void *arg = up->owner_arg;
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
            up->refusal_len = (unsigned char)resp_write_errorf(
                up->refusal, sizeof(up->refusal), "ERR upstream unavailable: %s: %s", up_addr(up), reason);
        }
    }
    up->srv->stats.upstream_lost++;
    up_read_refusal(up); /* (before the close takes the socket) */
    if (up->refusal_len)
        vp_log(VP_LOG_VERBOSE, "upstream %s: refused the connection: %.*s", up_addr(up),
               (int)up->refusal_len - 2, up->refusal);
    else
        vp_log(VP_LOG_VERBOSE, "upstream %s: connection lost: %s", up_addr(up), reason);
    if (up->srv->upstream_watch && up->srv->upstream_watch->trouble)
        up->srv->upstream_watch->trouble(up->srv, reason);
    up->lost = 1;
    upstream_close(up);
    if (o && o->lost) o->lost(up, arg, reason);
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

/* A conveyor translation's whole reply "+VERBPROXY-NIL-ARRAY" (a script
 * can return no nil array: lib/conveyor.lua, conveyor_nil_array) becomes
 * the nil array Redis's own command replies: *-1 in RESP2, _ in RESP3
 * (the protocol the script was told, up_call_tail). */
static void up_nil_array(upstream_conn *up, const up_entry *e, const char **p, size_t *n)
{
    static const char marker[] = "+" VERB_NIL_ARRAY_MARKER "\r\n";
    if (*n != sizeof(marker) - 1 || memcmp(*p, marker, *n) != 0) return;
    const verb_table *t = upstream_verbs(up);
    if (e->verb < 0 || e->verb >= t->count || !t->verbs[e->verb]->translation) return;
    static char nil[8];
    *n = resp_write_null_array(nil, up->resp3);
    *p = nil;
}

/* Hand n bytes of the current reply on; `done` marks its last piece. The
 * client only queues them (it writes at client_round_end), so nothing here
 * can close either side. */
static void up_deliver(upstream_conn *up, const char *p, size_t n, int done)
{
    up_entry *e = up_fifo_head(up);
    struct client_session *c = e && up->route != ROUTE_PUSH ? e->client : up->client;
    if (up->shared && c) up_clients->touch(c); /* flushed at the end of the read */
    switch (up->route) {
    case ROUTE_PUSH:
        if (c) up_clients->push(c, p, n);
        return;
    case ROUTE_REPLY:
    case ROUTE_RESET: {
        unsigned long long seq = e->seq;
        if (e->kind == UP_VERB && done) up_nil_array(up, e, &p, &n);
        if (done) {
            if (up->retries_in_flight) up_note_answered(up, e);
            if (e->flush_epoch) up_script_flush_answered(up, e->flush_epoch);
            up_fifo_pop(up);
            if (up->route == ROUTE_RESET) up->raw_rx = 0; /* counting again from here */
        }
        if (c) up_clients->reply(c, seq, p, n, done);
        return;
    }
    case ROUTE_WRAP_REFUSED: {
        unsigned long long seq = e->seq;
        up_fifo_pop(up);
        if (c) up_clients->wrap_refused(c, seq, up, p, n); /* (may send on this connection) */
        return;
    }
    case ROUTE_WRAP_OPEN:
        up->route = ROUTE_REPLY;
        up_deliver(up, p, n, done);
        up_lost(up,
                "EXEC is unknown to the server (rename-command): a transaction of the proxy's was left open");
        return;
    case ROUTE_SWALLOW_KEEP:
        return;
    case ROUTE_SWALLOW: {
        unsigned long long seq = e->seq;
        up_fifo_pop(up);
        if (c) up_clients->reply(c, seq, NULL, 0, 1);
        return;
    }
    case ROUTE_ASK: {
        upstream_answer_fn answer = e->answer;
        void *arg = e->answer_arg;
        up_fifo_pop(up);
        answer(up, arg, p, n);
        return;
    }
    case ROUTE_SERVER: {
        unsigned long long sent = e->sent;
        up->server = UP_SERVER_UNKNOWN; /* answered: not "asked" when popped */
        up_fifo_pop(up);
        up_check_server(up, sent, p, n);
        return;
    }
    case ROUTE_REDIRECT: {
        up_entry old = *e;
        const upstream_watch *w = up->srv->upstream_watch;
        if (!w->redirect(up, &old, up->kept.data + up->kept_head, old.keep, p, n)) {
            up->route = ROUTE_REPLY; /* the client gets the error */
            up_deliver(up, p, n, done);
            return;
        }
        if (old.kind == UP_VERB && old.retries > 0) up->retries_in_flight--; /* (moved with it) */
        up_fifo_pop(up);
        return;
    }
    case ROUTE_NOSCRIPT: {
        /* Behind a SCRIPT LOAD the server refused: its refusal, in the
         * server's words, is the verb's answer (a retry would meet it again). */
        size_t len;
        const char *refused = up_load_error(up, e->verb, &len);
        if (refused) {
            up->route = ROUTE_REPLY;
            up_deliver(up, refused, len, done);
            return;
        }
        if (!up_retry_verb(up)) {
            up->route = ROUTE_REPLY; /* could not retry: the client gets the NOSCRIPT */
            up_deliver(up, p, n, done);
        }
        return;
    }
    }
}

/* Is every reply still owed on this connection the client's own, from Redis
 * (not our SCRIPT LOADs, silent requests or a barrier)? Only then can the
 * rest of the stream go to it unframed without a reply it did not ask for. */
static int up_owes_only_client(const upstream_conn *up)
{
    for (size_t i = 0; i < up->fifo_len; i++) {
        const up_entry *e = upstream_owed_at(up, i);
        if (e->client != up->client) return 0;
        if (e->kind == UP_ASK || e->kind == UP_CLOSE_BARRIER) return 0;
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
    if (up->shared || !c || !up_owes_only_client(up) || !up_clients->can_become_pipe(c)) {
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
    up_clients->become_pipe(c, up->framer.error);
}

/* Called for every reply as it starts (n: its length if whole, else 0).
 * The first one on the connection, an error for a request of the proxy's
 * own (no client is given it), is what Redis refused the connection with;
 * any later reply means it did not. */
int upstream_is_refusal(const char *p, size_t n)
{
    static const char maxclients[] = "-ERR max number of clients reached";
    static const char denied[] = "-DENIED ";
    return (n >= sizeof(maxclients) - 1 && memcmp(p, maxclients, sizeof(maxclients) - 1) == 0) ||
           (n >= sizeof(denied) - 1 && memcmp(p, denied, sizeof(denied) - 1) == 0);
}

static void up_note_refusal(upstream_conn *up, const char *p, size_t n)
{
    up_entry *e = up_fifo_head(up);
    int first = !up->replied;
    up->replied = 1;
    up->refusal_len = 0;
    if (!first || n < 3 || n > sizeof(up->refusal) || p[0] != '-' || !e || e->client) return;
    /* What Redis writes to a connection it will not serve (maxclients,
     * protected mode), not an error of a command it ran (CLIENT NO-EVICT on
     * a Redis before 7.0). */
    if (!upstream_is_refusal(p, n)) return;
    /* (The server probe is one of ours too: a verb's first request on an
     * own connection, which the verb waits behind.) */
    if (up->route != ROUTE_REPLY && up->route != ROUTE_SERVER &&
        !(up->route == ROUTE_ASK && (e->ask_flags & UP_ASK_REFUSAL)))
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
    if (n < 3 || buf[0] != '-' || !end || end[-1] != '\r' || !upstream_is_refusal(buf, n)) return;
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
        if (!up->streaming && up_fifo_head(up) && up_fifo_head(up)->kind == UP_OPAQUE_START) {
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
            const up_entry *e = up_fifo_head(up);
            int large = e && e->kind == UP_ASK && (e->ask_flags & UP_ASK_LARGE);
            if (up->framer.consumed < (large ? UP_LARGE_MAX : UP_STREAM_THRESHOLD)) {
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
    const upstream_owner *o = up->owner; /* (a loss in the read clears it) */
    void *arg = up->owner_arg;
    up_process(up);
    /* Before its client sends more: verbs from a reloaded table need it. */
    if (up->vt && up->verbs_in_flight == 0) up_release_vt(up);
    /* The clients' output may point into `in`: flush it before compacting
     * (a shared connection's clients even when it was lost in the read). */
    if (o && o->read_done && (up->state != UPSTREAM_CLOSED || up->shared)) o->read_done(up, arg);
    if (up->state == UPSTREAM_CLOSED) return;
    if (up->reauth_pending) up_reauth_after_read(up);
    if (up->announce_ready) {
        /* Its setup is answered (our AUTH, whether Redis requires AUTH, its
         * output limit): its clients' requests may go now
         * (upstream_is_ready). */
        up->announce_ready = 0;
        if (upstream_is_ready(up) && up->owner && up->owner->ready) up->owner->ready(up, up->owner_arg);
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

void up_read_start(upstream_conn *up)
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

/* ---- sending requests ---- */

void up_on_written(outq *q, int status)
{
    upstream_conn *up = q->owner;
    /* (While connecting, only a TLS handshake writes: its failure is read.) */
    if (up->state != UPSTREAM_READY) return;
    if (status < 0) {
        up_lost(up, uv_strerror(status));
        return;
    }
    if (outq_size(q) != 0) return;
    if (up->owner && up->owner->drained && (!up->shared || up->waiters))
        up->owner->drained(up, up->owner_arg);
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

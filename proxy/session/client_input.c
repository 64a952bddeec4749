/* client_input.c - a client's input: reading (paused while its output or
 * its shared connection's backlog must drain), cutting requests with the
 * parser (client_parse_batch), streaming a large one as it arrives, the
 * protocol errors Redis gives, and the end of input. Each whole request
 * goes to client_dispatch (client_dispatch.c). */
#include "proxy/session/client.h"

#include <sys/socket.h>

#include "proxy/log.h"
#include "proxy/pool.h"
#include "proxy/net/tls.h"
#include "proxy/session/client_internal.h"

/* Read size per uv read, Redis's PROTO_IOBUF_LEN: a pool block
 * (VP_POOL_BUF_SIZE), given back once everything in it is parsed. */
#define CLIENT_READ_CHUNK (16 * 1024)

#define CLIENT_READ_MAX (1024 * 1024)

/* An incomplete request past this size is forwarded piece by piece. */
#define CLIENT_STREAM_THRESHOLD (64 * 1024)

/* ---- input ---- */

/* A client not read has no read watching its socket: unless a write to it
 * is in flight, the proxy would hear nothing of its death (a reset leaves
 * it waiting, and its upstream connection open with it, for good if it is
 * owed a reply that never comes: a BLPOP with a command held behind it).
 * So the paused are counted, and client_cron looks at their sockets. */
void client_stop_reading(client_session *c)
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

void client_unpause(client_session *c)
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

void client_start_reading(client_session *c)
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
void client_protocol_error(client_session *c, const char *msg)
{
    c->srv->stats.protocol_errors++;
    vp_log(VP_LOG_VERBOSE, "client %llu %s: %s", c->id, c->addr, msg);
    client_add_error(c, "ERR %s", msg);
    c->input_done = 1;
    c->close_when_done = 1;
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
void client_http_request(client_session *c)
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

/* A large request is forwarded as it arrives instead of being held whole:
 * once an incomplete multibulk request passes CLIENT_STREAM_THRESHOLD and its
 * name says it is a plain command (one reply, nothing the proxy must read in
 * its arguments, not a verb), its settled bytes go upstream and leave the
 * buffer. */
void client_stream_partial(client_session *c, const char *p, size_t avail)
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

/* Parse and dispatch what is buffered. Returns 1 when it stopped early
 * because more than `limit` bytes wait to go upstream. */
int client_parse_batch(client_session *c, size_t limit)
{
    /* On a shared connection a client held back for the connection's sake
     * is not parsed either (what it sent may already be read). One held for
     * its own output is: what it sent runs, as it would on Redis, but its
     * next command moves it (slow_reader), where Redis holds what it does
     * not read. */
    if (c->shared_wait || c->owed_wait || c->pop_wait) return 0;
    int routed;
    while (c->in_pos < c->in.len && !c->input_done && !c->pop_wait) {
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
                 client_verb_must_wait(c, c->parser.argc, c->parser.argv))) {
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

int client_send_upstream(client_session *c)
{
    /* (A shared connection has copied what it was given; see
     * up_shared_write for when it writes.) */
    if (c->up && c->up->shared) {
        upstream_flush_early(c->up);
    } else if (c->up) {
        int rc = upstream_flush(c->up);
        if (rc < 0) {
            upstream_write_failed(c->up, rc); /* (tells this client) */
            return -1;
        }
    }
    return 0;
}

void client_process_input(client_session *c)
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
        /* The forwarded pieces point into `in`: write them before compacting. */
        if (client_send_upstream(c) < 0) return;
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
int client_idle(client_session *c)
{
    /* Nor while a command is held back (settling), or requests read are
     * not parsed yet (held on a shared connection). */
    return c->pending_len == 0 && outq_size(&c->out) == 0 && !(c->up && !upstream_is_ready(c->up)) &&
           !c->settling && !c->shared_wait && !c->owed_wait;
}

/* End of input (read, or seen by client_check_paused). */
void client_input_ended(client_session *c)
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

void client_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
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

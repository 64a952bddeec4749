/* client.c - a client session's life: accepted (the protected-mode
 * refusal, TLS), described for the logs, idle and paused clients checked
 * once a second (client_cron), drained and closed. The rest of the session
 * is in the client_*.c files beside it: input, dispatch, the pending
 * replies, the upstream connections and, in cluster mode, routing. */
#include "proxy/session/client.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "proxy/session/auth.h"
#include "proxy/log.h"
#include "proxy/pool.h"
#include "proxy/net/keepalive.h"
#include "proxy/net/tls.h"
#include "proxy/session/client_internal.h"

static void client_on_tls_handshake(vp_tls *t, int status);

/* How long a client that sent EOF is still given the replies it is owed. */
#define CLIENT_EOF_GRACE_MS 2000

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
void client_check_paused(client_session *c)
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
    client_block_forget(c);
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

/* upstream_setup.c - an upstream connection's life before and after it
 * serves: resolving, connecting, the TLS handshake, our AUTH and the
 * watch's setup asks (sentinel's ROLE) within the connect timeout, then
 * telling its owner it is ready; and its close and free. Asks
 * (upstream_ask) are queued here too. */
#include "proxy/upstream/upstream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "proxy/log.h"
#include "proxy/net/tls.h"
#include "proxy/pool.h"
#include "proxy/net/keepalive.h"
#include "proxy/upstream/upstream_internal.h"

static void up_close_cb(uv_handle_t *h);
static void up_on_connect(uv_connect_t *req, int status);

/* Every connection open, linked through all_next (upstream_open adds it,
 * up_maybe_free takes it off). */
static upstream_conn *up_all;

upstream_conn *up_open_list(void)
{
    return up_all;
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
    up->owner = NULL; /* never calls anyone again */
    if (up->retired) {
        upstream_conn **p = &up->srv->retired;
        while (*p && *p != up)
            p = &(*p)->retired_next;
        if (*p) *p = up->retired_next;
    }
    up_leave_node(up);
    uv_timer_stop(&up->timer);
    up_release_handle((uv_handle_t *)&up->timer);
    if (up->tls && !up->lost && outq_close_notify(&up->out))
        vp_log(VP_LOG_DEBUG, "upstream %s: close_notify sent", up_addr(up));
    if (up->resolving) uv_cancel((uv_req_t *)&up->resolve_req); /* its callback drops the last ref */
    if (up->stream_inited) up_release_handle(&up->h.handle);
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
    up_forget_load_errors(up);
    up_fifo_free(up);
    if (up->all_next) up->all_next->all_prev = up->all_prev;
    *(up->all_prev ? &up->all_prev->all_next : &up_all) = up->all_next;
    free(up);
}

static void up_close_cb(uv_handle_t *h)
{
    upstream_conn *up = h->data;
    up->handles_open--;
    up_maybe_free(up);
}

static void up_on_timeout(uv_timer_t *t)
{
    upstream_conn *up = t->data;
    if (up->state != UPSTREAM_CONNECTING && !up->authing && !up->setup_asks)
        return; /* (connect-timeout covers our AUTH and the setup asks too) */
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

static void up_auth_answered(upstream_conn *up, void *arg, const char *p, size_t n);

/* With upstream credentials, AUTH is the connection's first request:
 * queued before anything else can be, sent when the transport is ready
 * (up_transport_ready), and the connection takes clients' requests once it
 * is answered +OK (up_auth_answered). */
static void up_queue_auth(upstream_conn *up)
{
    const vp_config *conf = &up->srv->conf;
    if (!conf->upstream_auth) return;
    /* (Copied: a reload may replace the settings before it is written.) */
    upstream_ask(up, conf->upstream_auth, conf->upstream_auth_len, up_auth_answered, NULL, UP_ASK_REFUSAL);
    up->authing = 1;
}

void upstream_ask(upstream_conn *up, const char *req, size_t n, upstream_answer_fn answer, void *arg,
                  unsigned flags)
{
    outq_add_copy(&up->out, req, n);
    up_push_ask(up, answer, arg, flags);
}

void up_push_ask(upstream_conn *up, upstream_answer_fn answer, void *arg, unsigned flags)
{
    up_entry *e = up_fifo_push(up, NULL, UP_ASK);
    e->answer = answer;
    e->answer_arg = arg;
    e->ask_flags = flags;
    if (flags & UP_ASK_SETUP) up->setup_asks++;
}

/* Its setup is all answered (our AUTH, the watch's asks): the connect
 * timeout is over, and its owner is told after the read (announce_ready). */
static void up_setup_step_done(upstream_conn *up)
{
    if (!up->authing && !up->setup_asks) uv_timer_stop(&up->timer);
    up->announce_ready = 1;
}

void upstream_setup_done(upstream_conn *up)
{
    if (up->setup_asks > 0) up->setup_asks--;
    up_setup_step_done(up);
}

upstream_conn *upstream_open(vp_server *srv, upstream_node *node, struct client_session *client,
                             const upstream_owner *owner, void *arg)
{
    upstream_conn *up = vp_malloc(sizeof(*up));
    memset(up, 0, sizeof(*up));
    up->srv = srv;
    up->node = node;
    up->client = client;
    up->owner = owner;
    up->owner_arg = arg;
    up->all_next = up_all;
    if (up_all) up_all->all_prev = up;
    up_all = up;
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
    if (srv->upstream_watch && srv->upstream_watch->opened) srv->upstream_watch->opened(up);

    const vp_config *conf = &srv->conf;
    int rc = 0;
    if (!node->host[0]) {
        /* Sentinel mode before any sentinel named a primary: failed from
         * the loop, with the sentinels' reason. */
        const upstream_watch *w = srv->upstream_watch;
        snprintf(up->error, sizeof(up->error), "no primary known: %.108s",
                 w && w->why_no_address ? w->why_no_address(srv) : "no address");
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
    return up->state == UPSTREAM_READY && !up->authing && !up->setup_asks && !up->setting_up &&
           (!up->shared || up->auth != UP_AUTH_UNKNOWN);
}

int upstream_was_set_up(const upstream_conn *up)
{
    return !up->authing && !up->setup_asks && !up->setting_up && (!up->shared || up->auth != UP_AUTH_UNKNOWN);
}

int upstream_requires_auth(const upstream_conn *up)
{
    return up->auth == UP_AUTH_REQUIRED;
}

/* Our AUTH was answered (p..p+n, whole if `done`). +OK: the connection is
 * ready for its clients once this read is handed on (announce_ready).
 * Anything else fails it as a connect that did not succeed: each request
 * waiting for it gets "upstream unavailable: <address>: <Redis's text>",
 * and the log says so once per change of the answer, not once per
 * connection. What Redis writes to a connection it refuses (maxclients,
 * protected mode) is left to up_note_refusal: Redis closes next, and the
 * clients get its own error. */
static void up_auth_answered(upstream_conn *up, void *arg, const char *p, size_t n)
{
    (void)arg;
    vp_server *srv = up->srv;
    if (upstream_is_refusal(p, n)) return;
    if (n == 5 && memcmp(p, "+OK\r\n", 5) == 0) {
        up->authing = 0;
        up_setup_step_done(up);
        if (srv->upstream_auth_failure[0]) {
            vp_log(VP_LOG_WARNING, "upstream %s: AUTH accepted again", srv->conf.upstream);
            srv->upstream_auth_failure[0] = '\0';
        }
        return;
    }
    char why[sizeof(srv->upstream_auth_failure)];
    if (n >= 3 && p[0] == '-')
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

void upstream_setup_failed(upstream_conn *up, const char *why)
{
    char text[160];
    snprintf(text, sizeof(text), "%s", why); /* (why may be the caller's, freed with what it owns) */
    up_fail(up, text);
}

/* The stream carries plaintext to Redis from here on: right after the TCP
 * connect, or after the TLS handshake. What is queued goes, our AUTH
 * first when there are credentials (queued by upstream_open before
 * anything else could be); then its clients are told once AUTH is
 * answered (up_auth_answered), or at once without credentials. */
static void up_transport_ready(upstream_conn *up)
{
    if (!up->authing && !up->setup_asks) uv_timer_stop(&up->timer); /* else it bounds our AUTH, setup too */
    up->state = UPSTREAM_READY;
    up->reading = 1;
    up_read_start(up);
    vp_log(VP_LOG_DEBUG, "upstream %s: connected%s", up_addr(up), up->tls ? " (TLS)" : "");
    if (up->authing || up->setup_asks || !up->owner || !up->owner->ready) {
        /* A shared one writes at the end of the loop iteration. (A probe's
         * or fetch's requests, queued before, go now: nobody else would
         * write them.) */
        int rc = up->shared ? 0 : upstream_flush(up);
        if (rc < 0) up_fail(up, uv_strerror(rc));
        return;
    }
    if (!up->setting_up) up->owner->ready(up, up->owner_arg);
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
    if (up->node->port) net_tcp_keepalive(&up->h.tcp, up->srv->conf.tcp_keepalive);
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

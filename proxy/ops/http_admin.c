#include "proxy/ops/http_admin.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "proxy/buffer.h"
#include "proxy/log.h"
#include "proxy/ops/http_admin_request.h"
#include "proxy/ops/metrics_prom.h"
#include "proxy/ops/readiness.h"
#include "proxy/server.h"

#define ADMIN_READ_BUF 2048

/* One admin connection. Owns its handles and buffers; freed when the last
 * of its two handles (socket, deadline timer) is closed. */
typedef struct admin_conn {
    uv_tcp_t tcp;
    uv_timer_t deadline;
    uv_write_t wreq;
    uv_shutdown_t sreq;
    admin_req req;
    int responded; /* a whole head came (or was refused): no longer idle */
    int closing;
    int handles;
    char rbuf[ADMIN_READ_BUF];
    vp_buf out; /* the response */
    struct admin_conn *prev, *next;
} admin_conn;

#define ADMIN_EVICT_NOTE_MS (60 * 1000) /* one log line a minute while the port is full */

static struct {
    vp_server *srv;
    int running;
    uv_tcp_t listener;
    uv_timer_t tick;
    uv_prepare_t prepare;
    admin_conn *oldest, *newest; /* in the order they were accepted */
    int nconns;
    unsigned long long evicted; /* idle connections closed to admit another */
    uint64_t evict_noted_at;    /* uv_now of the last log line about it; 0: none yet */
} admin;

static void admin_list_append(admin_conn *a)
{
    a->prev = admin.newest;
    a->next = NULL;
    if (admin.newest)
        admin.newest->next = a;
    else
        admin.oldest = a;
    admin.newest = a;
    admin.nconns++;
    admin.srv->metrics.admin_connections = admin.nconns;
}

static void admin_list_remove(admin_conn *a)
{
    if (a->prev)
        a->prev->next = a->next;
    else
        admin.oldest = a->next;
    if (a->next)
        a->next->prev = a->prev;
    else
        admin.newest = a->prev;
    admin.nconns--;
    admin.srv->metrics.admin_connections = admin.nconns;
}

static void admin_conn_closed(uv_handle_t *h)
{
    admin_conn *a = h->data;
    if (--a->handles > 0) return;
    vp_buf_free(&a->out);
    free(a);
}

static void admin_conn_close(admin_conn *a)
{
    if (a->closing) return;
    a->closing = 1;
    admin_list_remove(a);
    uv_close((uv_handle_t *)&a->deadline, admin_conn_closed);
    uv_close((uv_handle_t *)&a->tcp, admin_conn_closed);
}

static void admin_on_shutdown(uv_shutdown_t *req, int status)
{
    (void)status;
    admin_conn_close(req->data);
}

static void admin_on_written(uv_write_t *req, int status)
{
    admin_conn *a = req->data;
    if (a->closing) return;
    /* FIN after the response; the close follows (a client that keeps
     * sending is cut by the deadline). */
    a->sreq.data = a;
    if (status < 0 || uv_shutdown(&a->sreq, (uv_stream_t *)&a->tcp, admin_on_shutdown) < 0)
        admin_conn_close(a);
}

/* The one response of this connection; reading stops. */
static void admin_respond(admin_conn *a, int code, const char *ctype, const char *extra, const char *body,
                          size_t blen)
{
    if (a->responded) return;
    a->responded = 1;
    uv_read_stop((uv_stream_t *)&a->tcp);
    admin_resp_format(&a->out, code, ctype, extra, body, blen, a->req.head_only);
    uv_buf_t b = uv_buf_init(a->out.data, (unsigned)a->out.len);
    a->wreq.data = a;
    if (uv_write(&a->wreq, (uv_stream_t *)&a->tcp, &b, 1, admin_on_written) < 0) admin_conn_close(a);
}

static void admin_text(admin_conn *a, int code, const char *text)
{
    admin_respond(a, code, ADMIN_TEXT_TYPE, "", text, strlen(text));
}

static void admin_answer_metrics(admin_conn *a)
{
    vp_buf body = {0};
    metrics_prom_write(admin.srv, &body);
    admin_respond(a, 200, ADMIN_METRICS_TYPE, "", body.data, body.len);
    vp_buf_free(&body);
}

static void admin_answer_readyz(admin_conn *a)
{
    const vp_server *srv = admin.srv;
    const ready_state *r = &srv->metrics.ready;
    char text[READY_REASON_MAX + 32];
    if (srv->draining) {
        admin_text(a, 503, "not ready: draining\n");
    } else if (!r->checked) {
        admin_text(a, 503, "not ready: the upstream is not checked yet\n");
    } else if (!r->ok) {
        snprintf(text, sizeof(text), "not ready: %s\n", r->reason);
        admin_text(a, 503, text);
    } else {
        admin_text(a, 200, "ready\n");
    }
}

static void admin_answer_request(admin_conn *a)
{
    admin_answer canned;
    switch (a->req.verdict) {
    case ADMIN_METRICS:
        admin_answer_metrics(a);
        return;
    case ADMIN_READYZ:
        admin_answer_readyz(a);
        return;
    default:
        break;
    }
    if (admin_req_canned(&a->req, &canned) == 0)
        admin_respond(a, canned.code, ADMIN_TEXT_TYPE, canned.extra_headers, canned.text,
                      strlen(canned.text));
}

static void admin_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    admin_conn *a = h->data;
    *buf = uv_buf_init(a->rbuf, sizeof(a->rbuf));
}

static void admin_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    admin_conn *a = s->data;
    if (nread == 0 || a->responded) return;
    if (nread < 0) {
        admin_conn_close(a);
        return;
    }
    if (admin_req_feed(&a->req, buf->base, (size_t)nread) != ADMIN_MORE) admin_answer_request(a);
}

static void admin_on_deadline(uv_timer_t *t)
{
    admin_conn_close(t->data);
}

/* Now and then a warning that the port was full: an operator should know
 * that something holds the admin connections (64 at once is no scraper's
 * or probe's doing), but not once per eviction. */
static void admin_note_eviction(uv_loop_t *loop)
{
    admin.evicted++;
    uint64_t now = uv_now(loop);
    if (admin.evict_noted_at && now - admin.evict_noted_at < ADMIN_EVICT_NOTE_MS) return;
    admin.evict_noted_at = now ? now : 1;
    vp_log(VP_LOG_WARNING,
           "admin endpoint: %d connections open, closed the oldest one that had sent no whole request to "
           "admit a new one (%llu so far; noted once a minute)",
           ADMIN_MAX_CONNS, admin.evicted);
}

/* Read what the connection has waiting in the kernel now, before the loop
 * gets to it: a probe whose request has arrived is answered, not taken for
 * idle because a burst of connections was accepted first. 1 if the
 * connection was closed (the peer left, or an error). */
static int admin_conn_read_waiting(admin_conn *a)
{
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&a->tcp, &fd) != 0) return 0;
    while (!a->responded) {
        ssize_t n = recv(fd, a->rbuf, sizeof(a->rbuf), MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (n <= 0) {
            admin_conn_close(a);
            return 1;
        }
        if (admin_req_feed(&a->req, a->rbuf, (size_t)n) != ADMIN_MORE) admin_answer_request(a);
    }
    return 0;
}

/* The port is full: close the oldest connection that has not sent a whole
 * request head (the newcomer aside) to make room, as HTTP servers do with
 * idle connections (nginx's reusable connections, closed oldest first when
 * worker_connections run out). A candidate's waiting bytes are read first
 * (admin_conn_read_waiting), so a probe whose request has arrived is
 * answered rather than evicted; only a probe whose request is still on its
 * way while ADMIN_MAX_CONNS newer connections are accepted can be. Those
 * with a whole head are being answered (a few loop iterations) and are
 * kept. 1 if a connection was closed. */
static int admin_evict_oldest_idle(admin_conn *newcomer)
{
    admin_conn *next;
    for (admin_conn *c = admin.oldest; c; c = next) {
        next = c->next; /* c may be closed (unlinked) below */
        if (c == newcomer || c->responded) continue;
        if (admin_conn_read_waiting(c)) return 1;
        if (c->responded) continue;
        admin_conn_close(c);
        admin_note_eviction(newcomer->tcp.loop);
        return 1;
    }
    return 0;
}

static admin_conn *admin_conn_new(uv_loop_t *loop)
{
    admin_conn *a = calloc(1, sizeof(*a));
    if (!a) abort();
    uv_tcp_init(loop, &a->tcp);
    uv_timer_init(loop, &a->deadline);
    a->tcp.data = a->deadline.data = a;
    a->handles = 2;
    admin_req_init(&a->req);
    admin_list_append(a);
    return a;
}

static void admin_on_connection(uv_stream_t *l, int status)
{
    if (status < 0) {
        vp_log(VP_LOG_WARNING, "admin endpoint: accept error: %s", uv_strerror(status));
        return;
    }
    admin_conn *a = admin_conn_new(l->loop);
    if (uv_accept(l, (uv_stream_t *)&a->tcp) < 0) {
        admin_conn_close(a);
        return;
    }
    if (admin.nconns > ADMIN_MAX_CONNS && !admin_evict_oldest_idle(a)) {
        /* Full of connections being answered: this one is closed without
         * a word (accepted only to take it off the backlog). */
        admin_conn_close(a);
        return;
    }
    /* The header deadline: a whole request head within it, and the answer
     * written, or the connection is closed. */
    uv_timer_start(&a->deadline, admin_on_deadline, ADMIN_DEADLINE_MS, 0);
    uv_read_start((uv_stream_t *)&a->tcp, admin_alloc, admin_on_read);
}

static void admin_on_tick(uv_timer_t *t)
{
    ready_tick(t->data);
}

/* Once per loop iteration, before it waits: a reply batch's clock is not
 * taken into the next iteration. */
static void admin_on_prepare(uv_prepare_t *p)
{
    metrics_clock_expire(&((vp_server *)p->data)->metrics);
}

int admin_http_start(vp_server *srv, char *err, size_t errlen)
{
    const vp_config *conf = &srv->conf;
    if (!conf->metrics_port) return 0;
    admin.srv = srv;
    struct sockaddr_storage ss;
    if (uv_ip4_addr(conf->metrics_bind, conf->metrics_port, (struct sockaddr_in *)&ss) != 0 &&
        uv_ip6_addr(conf->metrics_bind, conf->metrics_port, (struct sockaddr_in6 *)&ss) != 0) {
        snprintf(err, errlen, "metrics-bind '%s' is not an IPv4 or IPv6 address", conf->metrics_bind);
        return -1;
    }
    uv_tcp_init(srv->loop, &admin.listener);
    admin.running = 1;
    int rc;
    if ((rc = uv_tcp_bind(&admin.listener, (struct sockaddr *)&ss, 0)) < 0 ||
        (rc = uv_listen((uv_stream_t *)&admin.listener, 128, admin_on_connection)) < 0) {
        snprintf(err, errlen, "cannot listen on %s:%d (metrics-port): %s", conf->metrics_bind,
                 conf->metrics_port, uv_strerror(rc));
        uv_close((uv_handle_t *)&admin.listener, NULL);
        admin.running = 0;
        return -1;
    }
    vp_log(VP_LOG_NOTICE, "admin endpoint on http://%s:%d (/metrics, /healthz, /readyz)", conf->metrics_bind,
           conf->metrics_port);
    uv_timer_init(srv->loop, &admin.tick);
    admin.tick.data = srv;
    uv_timer_start(&admin.tick, admin_on_tick, 0, 1000); /* the first check at once */
    uv_prepare_init(srv->loop, &admin.prepare);
    admin.prepare.data = srv;
    uv_prepare_start(&admin.prepare, admin_on_prepare);
    return 0;
}

void admin_http_close(vp_server *srv)
{
    if (!admin.running) return;
    admin.running = 0;
    uv_close((uv_handle_t *)&admin.listener, NULL);
    uv_close((uv_handle_t *)&admin.tick, NULL);
    uv_close((uv_handle_t *)&admin.prepare, NULL);
    while (admin.oldest)
        admin_conn_close(admin.oldest);
    ready_stop(srv);
}

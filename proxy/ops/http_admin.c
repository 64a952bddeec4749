#include "proxy/ops/http_admin.h"

#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/buffer.h"
#include "proxy/log.h"
#include "proxy/ops/metrics_prom.h"
#include "proxy/ops/readiness.h"
#include "proxy/server.h"

#define ADMIN_MAX_URL 1024
#define ADMIN_READ_BUF 2048

/* One admin connection. Owns its handles and buffers; freed when the last
 * of its two handles (socket, deadline timer) is closed. */
typedef struct admin_conn {
    uv_tcp_t tcp;
    uv_timer_t deadline;
    uv_write_t wreq;
    uv_shutdown_t sreq;
    http_parser parser;
    char url[ADMIN_MAX_URL];
    size_t url_len;
    size_t head_bytes; /* read before the headers were complete */
    int url_too_long;
    size_t head_parsed; /* bytes of the request line and headers the parser gave us */
    int head_too_big;
    int headers_done;
    int responded;
    int closing;
    int handles;
    char rbuf[ADMIN_READ_BUF];
    vp_buf out; /* the response */
    struct admin_conn *prev, *next;
} admin_conn;

static struct {
    vp_server *srv;
    int running;
    uv_tcp_t listener;
    uv_timer_t tick;
    uv_prepare_t prepare;
    admin_conn *conns;
    int nconns;
} admin;

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
    if (a->prev)
        a->prev->next = a->next;
    else
        admin.conns = a->next;
    if (a->next) a->next->prev = a->prev;
    admin.nconns--;
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
    if (status < 0 || uv_shutdown(&a->sreq, (uv_stream_t *)&a->tcp, admin_on_shutdown) < 0) admin_conn_close(a);
}

static const char *admin_reason(int code)
{
    switch (code) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return "Error";
    }
}

/* The one response of this connection; reading stops. */
static void admin_respond(admin_conn *a, int code, const char *ctype, const char *extra, const char *body,
                          size_t blen, int head_only)
{
    if (a->responded) return;
    a->responded = 1;
    uv_read_stop((uv_stream_t *)&a->tcp);
    char head[512];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n%s\r\n",
                     code, admin_reason(code), ctype, blen, extra ? extra : "");
    a->out.len = 0;
    vp_buf_append(&a->out, head, (size_t)n);
    if (!head_only) vp_buf_append(&a->out, body, blen);
    uv_buf_t b = uv_buf_init(a->out.data, (unsigned)a->out.len);
    a->wreq.data = a;
    if (uv_write(&a->wreq, (uv_stream_t *)&a->tcp, &b, 1, admin_on_written) < 0) admin_conn_close(a);
}

static void admin_text(admin_conn *a, int code, const char *text, int head_only)
{
    admin_respond(a, code, "text/plain; charset=utf-8", NULL, text, strlen(text), head_only);
}

static int admin_path_is(const char *p, size_t n, const char *lit)
{
    return n == strlen(lit) && memcmp(p, lit, n) == 0;
}

static void admin_route(admin_conn *a)
{
    vp_server *srv = admin.srv;
    http_parser *hp = &a->parser;
    if (hp->method != HTTP_GET && hp->method != HTTP_HEAD) {
        admin_respond(a, 405, "text/plain; charset=utf-8", "Allow: GET, HEAD\r\n", "method not allowed\n", 19, 0);
        return;
    }
    int head_only = hp->method == HTTP_HEAD;
    if (hp->content_length > 0 && hp->content_length != ULLONG_MAX) {
        admin_text(a, 400, "no request body is taken\n", head_only);
        return;
    }
    if (hp->flags & F_CHUNKED) {
        admin_text(a, 400, "no request body is taken\n", head_only);
        return;
    }
    struct http_parser_url u;
    http_parser_url_init(&u);
    if (http_parser_parse_url(a->url, a->url_len, 0, &u) != 0 || !(u.field_set & (1 << UF_PATH))) {
        admin_text(a, 400, "bad request target\n", head_only);
        return;
    }
    const char *path = a->url + u.field_data[UF_PATH].off;
    size_t plen = u.field_data[UF_PATH].len;
    if (admin_path_is(path, plen, "/metrics")) {
        vp_buf body = {0};
        metrics_prom_write(srv, &body);
        admin_respond(a, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, body.data, body.len, head_only);
        vp_buf_free(&body);
    } else if (admin_path_is(path, plen, "/healthz")) {
        admin_text(a, 200, "ok\n", head_only);
    } else if (admin_path_is(path, plen, "/readyz")) {
        const ready_state *r = &srv->metrics.ready;
        char text[READY_REASON_MAX + 32];
        if (srv->draining) {
            admin_text(a, 503, "not ready: draining\n", head_only);
        } else if (!r->checked) {
            admin_text(a, 503, "not ready: the upstream is not checked yet\n", head_only);
        } else if (!r->ok) {
            snprintf(text, sizeof(text), "not ready: %s\n", r->reason);
            admin_text(a, 503, text, head_only);
        } else {
            admin_text(a, 200, "ready\n", head_only);
        }
    } else {
        admin_text(a, 404, "not found: /metrics, /healthz and /readyz are served\n", head_only);
    }
}

/* Request line and header bytes, counted as parsed: a head over
 * ADMIN_MAX_HEAD stops the parser (431), even when it came in one read. */
static int admin_count_head(http_parser *hp, const char *at, size_t len)
{
    (void)at;
    admin_conn *a = hp->data;
    a->head_parsed += len;
    if (a->head_parsed > ADMIN_MAX_HEAD) {
        a->head_too_big = 1;
        return 1;
    }
    return 0;
}

static int admin_on_url(http_parser *hp, const char *at, size_t len)
{
    admin_conn *a = hp->data;
    if (a->url_len + len >= sizeof(a->url)) {
        a->url_too_long = 1;
        return 1; /* stops the parser */
    }
    memcpy(a->url + a->url_len, at, len);
    a->url_len += len;
    return admin_count_head(hp, at, len);
}

static int admin_on_headers_complete(http_parser *hp)
{
    admin_conn *a = hp->data;
    a->headers_done = 1;
    admin_route(a);
    return 0;
}

static const http_parser_settings admin_settings = {
    .on_url = admin_on_url,
    .on_header_field = admin_count_head,
    .on_header_value = admin_count_head,
    .on_headers_complete = admin_on_headers_complete,
};

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
    a->head_bytes += (size_t)nread;
    size_t used = http_parser_execute(&a->parser, &admin_settings, buf->base, (size_t)nread);
    if (a->responded) return;
    if (a->head_too_big) {
        admin_text(a, 431, "request head over 8 KiB\n", 0);
    } else if (a->url_too_long) {
        admin_text(a, 414, "request target too long\n", 0);
    } else if (HTTP_PARSER_ERRNO(&a->parser) != HPE_OK || used != (size_t)nread) {
        char text[128];
        snprintf(text, sizeof(text), "bad request: %s\n", http_errno_name(HTTP_PARSER_ERRNO(&a->parser)));
        admin_text(a, 400, text, 0);
    } else if (!a->headers_done && a->head_bytes > ADMIN_MAX_HEAD) {
        admin_text(a, 431, "request head over 8 KiB\n", 0);
    }
}

static void admin_on_deadline(uv_timer_t *t)
{
    admin_conn_close(t->data);
}

static void admin_on_connection(uv_stream_t *l, int status)
{
    if (status < 0) {
        vp_log(VP_LOG_WARNING, "admin endpoint: accept error: %s", uv_strerror(status));
        return;
    }
    admin_conn *a = calloc(1, sizeof(*a));
    if (!a) abort();
    uv_tcp_init(l->loop, &a->tcp);
    uv_timer_init(l->loop, &a->deadline);
    a->tcp.data = a->deadline.data = a->parser.data = a;
    a->handles = 2;
    a->next = admin.conns;
    if (admin.conns) admin.conns->prev = a;
    admin.conns = a;
    admin.nconns++;
    if (uv_accept(l, (uv_stream_t *)&a->tcp) < 0 || admin.nconns > ADMIN_MAX_CONNS) {
        /* Over the limit: closed without a word, as the listener's backlog
         * would have to be drained anyway. */
        admin_conn_close(a);
        return;
    }
    http_parser_init(&a->parser, HTTP_REQUEST);
    a->parser.data = a;
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
        snprintf(err, errlen, "cannot listen on %s:%d (metrics-port): %s", conf->metrics_bind, conf->metrics_port,
                 uv_strerror(rc));
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
    while (admin.conns)
        admin_conn_close(admin.conns);
    ready_stop(srv);
}

int admin_http_connections(void)
{
    return admin.nconns;
}

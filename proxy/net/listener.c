#include "proxy/net/listener.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proxy/log.h"

static void listener_accept(uv_stream_t *s, int status, int is_unix, int tls)
{
    vp_listener *l = s->data;
    if (status < 0) {
        vp_log(VP_LOG_WARNING, "accept error: %s", uv_strerror(status));
        return;
    }
    l->on_accept(l->srv, s, is_unix, tls);
}

static void listener_on_tcp(uv_stream_t *s, int status)
{
    listener_accept(s, status, 0, 0);
}

static void listener_on_tls(uv_stream_t *s, int status)
{
    listener_accept(s, status, 0, 1);
}

static void listener_on_unix(uv_stream_t *s, int status)
{
    listener_accept(s, status, 1, 0);
}

/* Listen on bind:port. Returns 0, or -1 with the reason in err. */
static int listener_tcp(vp_listener *l, uv_tcp_t *tcp, int port, uv_connection_cb cb, char *err,
                        size_t errlen)
{
    const vp_config *conf = &l->srv->conf;
    struct sockaddr_storage ss;
    if (uv_ip4_addr(conf->bind, port, (struct sockaddr_in *)&ss) != 0 &&
        uv_ip6_addr(conf->bind, port, (struct sockaddr_in6 *)&ss) != 0) {
        snprintf(err, errlen, "bind address '%s' is not an IPv4 or IPv6 address", conf->bind);
        return -1;
    }
    uv_tcp_init(l->srv->loop, tcp);
    tcp->data = l;
    int rc;
    if ((rc = uv_tcp_bind(tcp, (struct sockaddr *)&ss, 0)) < 0 ||
        (rc = uv_listen((uv_stream_t *)tcp, conf->tcp_backlog, cb)) < 0) {
        snprintf(err, errlen, "cannot listen on %s:%d: %s", conf->bind, port, uv_strerror(rc));
        return -1;
    }
    return 0;
}

int listener_start(vp_listener *l, vp_server *srv, listener_accept_cb on_accept, char *err, size_t errlen)
{
    const vp_config *conf = &srv->conf;
    l->srv = srv;
    l->on_accept = on_accept;
    l->has_tcp = l->has_tls = l->has_unix = 0;
    int rc;
    if (conf->port) {
        l->has_tcp = 1;
        if (listener_tcp(l, &l->tcp, conf->port, listener_on_tcp, err, errlen) < 0) return -1;
        vp_log(VP_LOG_NOTICE, "listening on %s:%d", conf->bind, conf->port);
    }
    if (conf->tls_port) {
        l->has_tls = 1;
        if (listener_tcp(l, &l->tls, conf->tls_port, listener_on_tls, err, errlen) < 0) return -1;
        vp_log(VP_LOG_NOTICE, "listening on %s:%d (TLS)", conf->bind, conf->tls_port);
    }
    if (conf->unixsocket[0]) {
        unlink(conf->unixsocket); /* a stale socket from a previous run, as Redis does */
        uv_pipe_init(srv->loop, &l->pipe, 0);
        l->pipe.data = l;
        l->has_unix = 1;
        if ((rc = uv_pipe_bind(&l->pipe, conf->unixsocket)) < 0 ||
            (rc = uv_listen((uv_stream_t *)&l->pipe, conf->tcp_backlog, listener_on_unix)) < 0) {
            snprintf(err, errlen, "cannot listen on unix socket %s: %s", conf->unixsocket, uv_strerror(rc));
            return -1;
        }
        if (conf->unixsocketperm) chmod(conf->unixsocket, (mode_t)conf->unixsocketperm);
        vp_log(VP_LOG_NOTICE, "listening on unix socket %s", conf->unixsocket);
    }
    if (!l->has_tcp && !l->has_tls && !l->has_unix) {
        snprintf(err, errlen, "nothing to listen on: set 'port', 'tls-port' or 'unixsocket'");
        return -1;
    }
    return 0;
}

void listener_close(vp_listener *l)
{
    if (l->has_tcp && !uv_is_closing((uv_handle_t *)&l->tcp)) uv_close((uv_handle_t *)&l->tcp, NULL);
    if (l->has_tls && !uv_is_closing((uv_handle_t *)&l->tls)) uv_close((uv_handle_t *)&l->tls, NULL);
    if (l->has_unix && !uv_is_closing((uv_handle_t *)&l->pipe)) {
        uv_close((uv_handle_t *)&l->pipe, NULL);
        unlink(l->srv->conf.unixsocket);
    }
}

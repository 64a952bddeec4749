/* listener.h - the listening sockets (TCP, TLS on tls-port, and optionally
 * a unix socket) that hand each new connection to the callback main gives
 * them (the session layer's: client limits, then client_accept()). Owned
 * by main. */
#ifndef VP_LISTENER_H
#define VP_LISTENER_H

#include <uv.h>

#include "proxy/server.h"

/* A connection waits on `listener` (a unix socket, or the TLS port): the
 * callback accepts it or refuses it. */
typedef void (*listener_accept_cb)(vp_server *srv, uv_stream_t *listener, int is_unix, int tls);

typedef struct vp_listener {
    vp_server *srv;
    listener_accept_cb on_accept;
    uv_tcp_t tcp;
    uv_tcp_t tls; /* tls-port */
    uv_pipe_t pipe;
    int has_tcp, has_tls, has_unix;
} vp_listener;

/* Bind and listen per srv->conf. Returns 0, or -1 with the reason in err. */
int listener_start(vp_listener *l, vp_server *srv, listener_accept_cb on_accept, char *err, size_t errlen);
void listener_close(vp_listener *l);

#endif

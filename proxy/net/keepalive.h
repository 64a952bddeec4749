/* keepalive.h - Redis's tcp-keepalive, for client and upstream sockets
 * alike. */
#ifndef VP_KEEPALIVE_H
#define VP_KEEPALIVE_H

#include <uv.h>

/* Probes after `secs` idle, then every secs/3, closed after 3 unanswered
 * (anetKeepAlive). 0 leaves the socket as it is. */
void net_tcp_keepalive(uv_tcp_t *tcp, long long secs);

#endif

/* keepalive.c - Redis's tcp-keepalive on a socket (anetKeepAlive). */
#include "proxy/net/keepalive.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

void net_tcp_keepalive(uv_tcp_t *tcp, long long secs)
{
    if (secs <= 0) return;
    uv_tcp_keepalive(tcp, 1, (unsigned int)secs);
    /* libuv sets the idle time; the interval and count as Redis's. */
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)tcp, &fd) != 0) return;
    int intvl = secs / 3 > 0 ? (int)(secs / 3) : 1, cnt = 3;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

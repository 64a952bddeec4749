/* limits.h - how many clients the proxy takes: the `maxclients` directive
 * and the open-file limit, as Redis does (server.c adjustOpenFilesLimit,
 * networking.c acceptCommonHandler).
 *
 * At start the soft RLIMIT_NOFILE is raised towards what maxclients needs
 * (up to the hard limit), and maxclients is lowered to what the descriptors
 * obtained allow, keeping LIMITS_RESERVED_FDS for everything else. A client
 * takes one descriptor, and one more for a connection of its own upstream:
 * from the start with shared-upstreams 0 (so a client counts two there),
 * and only once it moves on a shared connection (so maxclients counts one
 * descriptor per client, and a move needs one left). A client that cannot
 * be taken, or cannot move, gets Redis's own error and the close. */
#ifndef VP_LIMITS_H
#define VP_LIMITS_H

#include <stddef.h>
#include <uv.h>

#include "proxy/server.h"

/* Redis's CONFIG_MIN_RESERVED_FDS: listeners, the log, the resolver,
 * libuv's own descriptors, a connection being refused. */
#define LIMITS_RESERVED_FDS 32
/* Redis's answer to a connection over maxclients (acceptCommonHandler). */
#define LIMITS_MAXCLIENTS_ERR "-ERR max number of clients reached\r\n"

/* Raise the soft open-file limit for srv->conf.maxclients, lower
 * maxclients to what it got (logged as Redis logs it) and set
 * srv->client_fds. Returns 0, or -1 with the reason in err when not even
 * one client fits. */
int limits_adjust_open_files(vp_server *srv, char *err, size_t errlen);
/* May the listener take one more client now? */
int limits_may_accept(const vp_server *srv);
/* Is there a descriptor for one more connection of a client's own? */
int limits_may_open_own(const vp_server *srv);
/* Take the connection waiting on `listener` only to answer it
 * LIMITS_MAXCLIENTS_ERR (without blocking, errors ignored) and close it.
 * On tls-port (`tls`) it is closed without a word, as Redis does: nothing
 * can be written before a handshake. */
void limits_refuse(vp_server *srv, uv_stream_t *listener, int is_unix, int tls);

#endif

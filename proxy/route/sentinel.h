/* sentinel.h - `upstream-mode sentinel`: which node is the primary.
 *
 * The proxy's own control connections to the sentinels (libuv TCP, the
 * replies judged by sentinel_parse.h: nothing a sentinel sends can stop the
 * proxy; the data path stays upstream.c's):
 *  - asking: `SENTINEL MASTER <sentinel-master>` of each sentinel in turn
 *    until one answers with an address and a config-epoch the proxy can
 *    take (never lower than the one it holds: sentinel.c), AUTH first with
 *    sentinel-user/sentinel-pass, at start, every SENTINEL_POLL_MS as a
 *    safety net, and soon (coalesced, at most every SENTINEL_RECHECK_MS)
 *    when upstream.c suspects the node it reached is no primary (ROLE says
 *    replica, -READONLY, a failed connect);
 *  - one connection SUBSCRIBEd to `+switch-master` on one sentinel (the
 *    next one after a loss): a message there is a hint that makes the
 *    proxy ask (coalesced, at most every SENTINEL_RECHECK_MS), never a
 *    move by itself, so a failover is followed one round trip after the
 *    sentinels announce it and a forged message moves nothing.
 * The answer is the upstream address (srv->conf.upstream*, a runtime value
 * in this mode): when it changes, srv->primary_moved (client_primary_moved) retires the
 * shared connections and closes clients' own connections (after their
 * owed replies), and the readiness probe follows.
 *
 * Sentinel connections are plain TCP, whatever upstream-tls says; the data
 * nodes get upstream-tls and the upstream credentials as a standalone
 * upstream does. */
#ifndef VP_SENTINEL_H
#define VP_SENTINEL_H

struct vp_server;

#define SENTINEL_POLL_MS 1000   /* ask even when nothing seems wrong */
#define SENTINEL_RECHECK_MS 100 /* at most this often when upstream.c asks */
#define SENTINEL_TICK_MS 100    /* deadlines and retries are checked this often */

/* Start discovery (upstream-mode sentinel only; no-op otherwise). */
void sentinel_start(struct vp_server *srv);
/* Close every control connection (shutdown). */
void sentinel_stop(struct vp_server *srv);
/* The node reached may not be the primary (why: for the debug log): ask
 * the sentinels again soon. No-op outside sentinel mode. */
void sentinel_recheck(struct vp_server *srv, const char *why);
/* Why no primary is known ("" once one is), for errors and /readyz. */
const char *sentinel_error(const struct vp_server *srv);
/* Primary changes seen since start (not counting the first discovery). */
unsigned long long sentinel_switches(const struct vp_server *srv);

#endif

/* readiness.h - is the upstream usable? Checked, not assumed: a probe on an
 * upstream connection of its own, opened by the same code as every other
 * (upstream.c: TLS, certificates and the upstream credentials apply, so a
 * wrong password fails it), sends PING and, on each new connection, SCRIPT
 * LOAD of every verb's script (the answer must be the pinned SHA-1). The
 * connection is kept and PINGed at each check, and opened again every
 * READY_REAUTH_MS, so a changed password shows within that time.
 *
 * A check starts at most once a second (ready_tick: the admin endpoint's
 * timer; the endpoint answers with the latest completed check), and fails
 * if it is not answered within connect-timeout plus a second. Runs only
 * while the admin endpoint does (metrics-port). Its verdict is /readyz and
 * verbproxy_up. */
#ifndef VP_READINESS_H
#define VP_READINESS_H

#include <stddef.h>
#include <stdint.h>

struct vp_server;
struct upstream_conn;

/* The checks' state and verdict (ready_state) are kept with the counters,
 * in vp_server.metrics (proxy/metrics.h). */

/* Start a check when one is due; fail one in flight for too long. */
void ready_tick(struct vp_server *srv);
/* Sentinel mode: the primary moved: the probe's connection (and a check
 * in flight on it) is dropped, the next check connects to the new one. */
void ready_upstream_moved(struct vp_server *srv);
/* Close the probe's connection (at shutdown). */
void ready_stop(struct vp_server *srv);

#endif

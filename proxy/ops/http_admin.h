/* http_admin.h - the admin HTTP endpoint on metrics-bind:metrics-port:
 * GET /metrics (Prometheus text 0.0.4, metrics_prom.h), GET /healthz (200
 * while the process serves), GET /readyz (200 only when the latest
 * readiness check passed and the proxy is not draining; 503 with the reason
 * otherwise). HEAD too; any other method 405 with Allow, any other path
 * 404.
 *
 * HTTP is parsed by Debian's libhttp-parser, in http_admin_request.c (no
 * socket there: the fuzz target runs it too). One request per connection
 * (every response says Connection: close), bounded: request line and
 * headers ADMIN_MAX_HEAD bytes (431 beyond), no body (400), and each
 * connection is closed ADMIN_DEADLINE_MS after it was accepted, whether or
 * not a request came (the header deadline: a slow or idle client). At most
 * ADMIN_MAX_CONNS connections at once: a new one past that closes the
 * oldest connection that has not sent a whole request head yet (idle ones
 * must not shut out a health probe), or, when every one has, is closed at
 * once. Everything runs on the proxy's loop without blocking: reads and
 * writes are libuv's, a response is built in memory and handed to one
 * uv_write.
 *
 * Also owns the readiness probe's timer (readiness.h) and the per-loop
 * expiry of the metrics clock. One per process. */
#ifndef VP_HTTP_ADMIN_H
#define VP_HTTP_ADMIN_H

#include <stddef.h>

struct vp_server;

#define ADMIN_MAX_CONNS 64
#define ADMIN_DEADLINE_MS 5000

/* Listen when metrics-port is set (nothing to do otherwise). 0, or -1 with
 * the reason in err. */
int admin_http_start(struct vp_server *srv, char *err, size_t errlen);
/* Close the listener, its connections, the probe and the timers. */
void admin_http_close(struct vp_server *srv);
/* (The connections open now are in srv->metrics.admin_connections, for
 * VERBPROXY INFO.) */

#endif

/* lifecycle.h - the process's signals, and SIGTERM's drain.
 *
 * SIGTERM or SIGINT: drain. srv->draining is set (readiness fails), the
 * listeners stay open and every client, old or new, is served as before.
 * The process exits 0 as soon as no client connection is left and
 * `shutdown-min-drain` seconds have passed since the signal (0, the
 * default: at once; a classic sidecar's application, signalled at the
 * same moment, may connect only during its own shutdown: Istio's
 * MINIMUM_DRAIN_DURATION with EXIT_ON_ZERO_ACTIVE_CONNECTIONS), or after
 * `shutdown-timeout` seconds (0: at once; it wins over a longer
 * shutdown-min-drain), when each remaining client
 * stops being read, gets every reply owed for what was already sent
 * upstream, and is closed; that last flush is bounded by
 * LIFECYCLE_FLUSH_MS (a client that does not read, a blocked BLPOP, a
 * streamed request never finished), then whatever is left is closed.
 * A second SIGTERM/SIGINT, or SIGQUIT at any time: everything is closed
 * at once and the process exits 0.
 *
 * SIGHUP: reload the settings (proxy/ops/reload.h).
 *
 * One per process, owned by main (static storage). */
#ifndef VP_LIFECYCLE_H
#define VP_LIFECYCLE_H

#include <uv.h>

#include "proxy/net/listener.h"
#include "proxy/ops/reload.h"
#include "proxy/server.h"

/* How long the last flush of a drain may take. */
#define LIFECYCLE_FLUSH_MS 2000
#define LIFECYCLE_MAX_OWNED 4

typedef enum lifecycle_phase {
    LIFECYCLE_SERVING,
    LIFECYCLE_DRAINING, /* SIGTERM: serving until the clients leave or shutdown-timeout */
    LIFECYCLE_FLUSHING, /* shutdown-timeout: owed replies written, then each client closed */
    LIFECYCLE_STOPPED   /* every handle closed: uv_run returns */
} lifecycle_phase;

typedef struct vp_lifecycle {
    vp_server *srv;
    vp_listener *listener;
    const vp_conf_source *source;
    uv_signal_t sigint, sigterm, sigquit, sighup;
    uv_timer_t timer;     /* shutdown-timeout, then LIFECYCLE_FLUSH_MS */
    uv_timer_t min_drain; /* shutdown-min-drain: no exit for want of clients before it */
    int min_drain_over;   /* it has passed (or there is none): no client left ends the drain */
    uv_check_t check;     /* while draining: after each loop turn, is any client left? */
    uv_handle_t *owned[LIFECYCLE_MAX_OWNED]; /* main's handles, closed at the stop */
    int nowned;
    lifecycle_phase phase;
} vp_lifecycle;

/* Install the signal handlers (before the listeners open: a supervisor
 * may send SIGTERM as soon as the port answers). */
void lifecycle_init(vp_lifecycle *lc, vp_server *srv, vp_listener *listener, const vp_conf_source *source);
/* A handle of main's (the cron timer, the flush prepare) to close at the stop. */
void lifecycle_own(vp_lifecycle *lc, uv_handle_t *h);

#endif

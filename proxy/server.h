/* server.h - the process's context: the loop, the settings, the counters,
 * the verb table, and the roots of what the layers above keep (client
 * sessions, upstream nodes and connections, TLS contexts, cluster and
 * Sentinel state). One per process, built by main.c.
 *
 * A base header (docs/architecture.md): it includes only what it holds by
 * value, all from the base and the layers below it, and names everything
 * else by a forward declaration. A file that uses a member's type from a
 * higher layer includes that layer's header itself. */
#ifndef VP_SERVER_H
#define VP_SERVER_H

#include <uv.h>

#include "proxy/verbs/verbs.h"
#include "protocol/resp_request.h"
#include "proxy/config.h"
#include "proxy/metrics.h"
#include "proxy/stats.h"

struct client_session;
struct upstream_conn;
struct vp_tls_ctx;
struct vp_sentinel;
struct cluster_state;
struct conveyor_scratch;
struct upstream_node;

typedef struct vp_server {
    uv_loop_t *loop;
    vp_config conf;
    resp_request_limits limits;
    vp_stats stats;
    vp_metrics metrics; /* per command, latency, readiness (metrics.h) */
    verb_table verbs;
    struct conveyor_scratch
        *conveyor; /* conveyor_plan's arguments (proxy/conveyor/conveyor.h); NULL until used */
    /* Blocking pops on conveyor keys waiting (proxy/session/client_block.c),
     * and the timer that tries them again while any waits. */
    struct client_session **pop_waiters;
    int npop_waiters, pop_waiters_cap;
    uv_timer_t pop_timer;
    /* TLS contexts built at start (proxy/net/tls.h): for upstream connections
     * (upstream-tls yes) and for clients on tls-port; NULL when off. */
    struct vp_tls_ctx *tls_upstream;
    struct vp_tls_ctx *tls_clients;
    struct client_session *clients; /* intrusive list, newest first */
    unsigned long long next_client_id;
    unsigned long clients_draining; /* clients that sent EOF with replies owed */
    unsigned long clients_paused;   /* clients not read for now (client_cron looks at their sockets) */
    uint64_t unavailable_logged_at; /* loop time of the last "upstream unavailable" line */
    /* Redis's answer to our AUTH while it refuses the upstream credentials
     * ("" while it takes them): logged when it changes, not per connection. */
    char upstream_auth_failure[160];
    /* Bumped by every SCRIPT FLUSH the proxy forwards, when it is sent and
     * when it is answered: an upstream connection whose scripts were loaded
     * at an older value loads them again before its next verb
     * (upstream_verbs.c). */
    unsigned scripts_epoch;
    /* MULTI or EXEC is unknown to the upstream (rename-command): the proxy wraps
     * no read in a transaction (upstream_forward_transaction) until it restarts. */
    int wrap_disabled;
    /* Descriptors for clients and their own upstream connections (limits.h),
     * and how many of those connections are open (not yet freed). */
    long long client_fds;
    unsigned long own_upstreams;

    /* The upstream nodes (proxy/route/route.h): one in standalone and
     * sentinel mode (the upstream, the sentinels' primary), one per known
     * node in cluster mode; each holds its shared connections
     * (upstream_node.h). Owned here, built by route_init, freed by
     * route_free. */
    struct cluster_state *cluster; /* upstream-mode cluster (proxy/route/cluster.h); NULL otherwise */
    struct upstream_node **nodes;  /* each allocated on its own: never moves (connections point at theirs) */
    int nnodes, nodes_cap;
    /* Requests for the shared connections are gathered during a loop
     * iteration and written once per iteration, just before the loop waits
     * for I/O again (`flush_prepare`). */
    uv_prepare_t flush_prepare;
    /* Shared and side connections a reload replaced, still owed replies
     * (upstream_retire_shared), linked through retired_next. */
    struct upstream_conn *retired;
    /* Clients given replies by a shared connection in the current read
     * round, flushed at its end (intrusive, through touched_next). */
    struct client_session *touched;
    /* Cluster mode: clients given replies in this poll phase while still
     * owed some by another node, written once in the check phase, with
     * whatever the other nodes' reads of the same phase added
     * (client_flush_deferred; intrusive, through deferred_next). */
    struct client_session *deferred;
    uv_check_t flush_check; /* (started by cluster_start) */
    /* Redis has a client-output-buffer-limit for normal clients: nobody
     * shares (see upstream_probe_output_limit). */
    int sharing_off;
    uint64_t output_probed_at; /* loop time of the last periodic probe */
    /* 1 from the first SIGTERM/SIGINT on (main.c): readiness fails, the
     * proxy serves its clients until they leave or shutdown-timeout. */
    int draining;
    /* upstream-mode sentinel: discovery of the primary (proxy/route/sentinel.c);
     * NULL otherwise. */
    struct vp_sentinel *sentinel;
    /* What the modules above watch on every upstream connection (Sentinel
     * or Cluster sets it, upstream.h's upstream_watch); NULL: nothing. */
    const struct upstream_watch *upstream_watch;
    /* Sentinel mode: the primary moved (route_node_moved): the session and
     * the probe follow (set by main.c). */
    void (*primary_moved)(struct vp_server *srv);
} vp_server;

#endif

/* stats.h - counters the proxy keeps about itself. Plain integers bumped on
 * the event loop thread; read by the shutdown log and, later, by the metrics
 * endpoint. */
#ifndef VP_STATS_H
#define VP_STATS_H

typedef struct vp_stats {
    unsigned long long connections_received;
    unsigned long long clients_connected;
    unsigned long long rejected_connections; /* refused at maxclients, as Redis's stat */
    unsigned long long commands_forwarded;
    /* Cluster mode (proxy/route/cluster.c): slot map fetches, failed ones, and the
     * redirects followed for clients; CLUSTER NODES asked to check a redirect, and the
     * redirects not followed (their error went to the client: redirect_check.h). */
    unsigned long long cluster_fetches, cluster_fetch_failures, cluster_moved, cluster_ask, cluster_tryagain;
    unsigned long long cluster_checks, cluster_refused;
    unsigned long long local_replies;
    unsigned long long protocol_errors;
    unsigned long long upstream_connects;
    unsigned long long upstream_connect_failures;
    unsigned long long upstream_lost;
    unsigned long long tls_handshake_failures;        /* upstream connections whose TLS handshake failed */
    unsigned long long tls_client_handshake_failures; /* clients on tls-port whose handshake failed */
    unsigned long long barriers_sent;
    unsigned long long shared_commands;      /* commands sent on a shared upstream connection */
    unsigned long long shared_batch_holds;   /* shared batches that waited for more (upstream_hold.c) */
    unsigned long long clients_pinned;       /* clients moved to their own connection */
    unsigned long long verb_calls;           /* verbs sent upstream */
    unsigned long long verb_argument_errors; /* verbs refused by the proxy's checks */
    unsigned long long conveyor_calls;       /* commands on conveyor keys translated (a script or a wrap) */
    unsigned long long conveyor_wrapped;     /* of those, reads sent in a transaction with the offset */
    unsigned long long conveyor_retried;     /* of those, sent again as the script (refused) */
    unsigned long long conveyor_checked; /* of the wrapped, score ranges written with the offset expected */
    unsigned long long conveyor_checked_stale; /* ... answered by their script: the offset had moved */
    unsigned long long polyfill_calls;       /* Redis commands run as the proxy's script (AGGREGATE COUNT) */
    unsigned long long script_loads;         /* SCRIPT LOADs sent (one per script a connection first calls) */
    unsigned long long noscript_recoveries;  /* verbs answered NOSCRIPT, reloaded and retried */
    unsigned long long script_load_failures; /* SCRIPT LOADs the server refused (the verb got its answer) */
    unsigned long long noscript_reordered;   /* ... where later commands had already run */
    unsigned long long upstream_auth_failures; /* our AUTH with the upstream credentials refused */
    unsigned long long auth_failures;     /* clients' AUTH / HELLO AUTH refused by the proxy's own users */
    unsigned long long clients_timed_out; /* clients closed after `timeout` seconds idle */
    unsigned long long sharing_off;       /* 1 while Redis's output limit keeps clients from sharing */
    unsigned long long reloads;           /* SIGHUP reloads that took effect (proxy/ops/reload.c) */
    unsigned long long reload_failures;   /* ... refused: a bad file, script or certificate changed nothing */
} vp_stats;

#include <stddef.h>

/* Every counter as "<name><sep><value><end>"; returns the length. */
size_t stats_format(const vp_stats *s, char *buf, size_t cap, const char *sep, const char *end);
/* One log line with every counter (at shutdown). */
void stats_log(const vp_stats *s);

#endif

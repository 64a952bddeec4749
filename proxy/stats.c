#include "proxy/stats.h"

#include <stdio.h>

#include "proxy/log.h"

/* One place lists the counters, for the log line and VERBPROXY STATS. */
#define STATS_FIELDS(X)                                                                                      \
    X(connections_received)                                                                                  \
    X(clients_connected)                                                                                     \
    X(rejected_connections)                                                                                  \
    X(commands_forwarded)                                                                                    \
    X(local_replies)                                                                                         \
    X(protocol_errors)                                                                                       \
    X(upstream_connects)                                                                                     \
    X(upstream_connect_failures)                                                                             \
    X(upstream_lost)                                                                                         \
    X(tls_handshake_failures)                                                                                \
    X(tls_client_handshake_failures)                                                                         \
    X(barriers_sent)                                                                                         \
    X(shared_commands)                                                                                       \
    X(shared_batch_holds)                                                                                    \
    X(clients_pinned)                                                                                        \
    X(verb_calls)                                                                                            \
    X(verb_argument_errors)                                                                                  \
    X(polyfill_calls)                                                                                        \
    X(conveyor_calls)                                                                                        \
    X(conveyor_wrapped)                                                                                      \
    X(conveyor_retried)                                                                                      \
    X(conveyor_checked)                                                                                      \
    X(conveyor_checked_stale)                                                                                \
    X(script_loads)                                                                                          \
    X(noscript_recoveries)                                                                                   \
    X(noscript_reordered)                                                                                    \
    X(upstream_auth_failures)                                                                                \
    X(auth_failures)                                                                                         \
    X(clients_timed_out)                                                                                     \
    X(sharing_off)                                                                                           \
    X(reloads)                                                                                               \
    X(reload_failures)                                                                                       \
    X(cluster_fetches)                                                                                       \
    X(cluster_fetch_failures)                                                                                \
    X(cluster_moved)                                                                                         \
    X(cluster_ask)                                                                                           \
    X(cluster_tryagain)                                                                                      \
    X(cluster_checks)                                                                                        \
    X(cluster_refused)

size_t stats_format(const vp_stats *s, char *buf, size_t cap, const char *sep, const char *end)
{
    size_t n = 0;
#define STATS_PRINT(f)                                                                                       \
    if (n < cap) n += (size_t)snprintf(buf + n, cap - n, "%s%s%llu%s", #f, sep, s->f, end);
    STATS_FIELDS(STATS_PRINT)
#undef STATS_PRINT
    return n < cap ? n : cap - 1;
}

void stats_log(const vp_stats *s)
{
    char line[2048];
    stats_format(s, line, sizeof(line), "=", " ");
    vp_log(VP_LOG_NOTICE, "stats: %s", line);
}

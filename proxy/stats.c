#include "proxy/stats.h"

#include "proxy/log.h"

void stats_log(const vp_stats *s)
{
    vp_log(VP_LOG_NOTICE,
           "stats: connections_received=%llu clients_connected=%llu commands_forwarded=%llu "
           "local_replies=%llu protocol_errors=%llu upstream_connects=%llu "
           "upstream_connect_failures=%llu upstream_lost=%llu barriers_sent=%llu",
           s->connections_received, s->clients_connected, s->commands_forwarded, s->local_replies,
           s->protocol_errors, s->upstream_connects, s->upstream_connect_failures, s->upstream_lost,
           s->barriers_sent);
}

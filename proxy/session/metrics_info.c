#include "proxy/session/metrics_info.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "proxy/route/sentinel.h"
#include "proxy/server.h"

static void info_server(const vp_server *srv, vp_buf *b)
{
    const vp_metrics *m = &srv->metrics;
    vp_buf_appendf(b, "# Server\r\nverbproxy_version:%s\r\nprocess_id:%d\r\n", VP_VERSION, (int)getpid());
    vp_buf_appendf(b, "uptime_in_seconds:%llu\r\n",
                   (unsigned long long)((uv_hrtime() - m->start_hr) / 1000000000ULL));
    vp_buf_appendf(b, "metrics_port:%d\r\nmetrics_bind:%s\r\nadmin_connections:%d\r\n",
                   srv->conf.metrics_port, srv->conf.metrics_bind, srv->metrics.admin_connections);
    vp_buf_appendf(b, "draining:%d\r\n", srv->draining != 0);
}

static void info_clients(const vp_server *srv, vp_buf *b)
{
    vp_buf_appendf(
        b, "# Clients\r\nconnected_clients:%llu\r\nmaxclients:%lld\r\nown_upstream_connections:%lu\r\n",
        srv->stats.clients_connected, srv->conf.maxclients, srv->own_upstreams);
}

static void info_stats(const vp_server *srv, vp_buf *b)
{
    const vp_metrics *m = &srv->metrics;
    char text[3072];
    size_t n = stats_format(&srv->stats, text, sizeof(text), ":", "\r\n");
    vp_buf_appendf(b, "# Stats\r\n");
    vp_buf_append(b, text, n);
    unsigned long long no_fd = m->rejected_no_descriptor, rej = srv->stats.rejected_connections;
    vp_buf_appendf(
        b, "rejected_maxclients:%llu\r\nrejected_no_descriptor:%llu\r\nrejected_protected_mode:%llu\r\n",
        rej >= no_fd ? rej - no_fd : 0, no_fd, m->rejected_protected_mode);
    vp_buf_appendf(b, "total_net_input_bytes:%llu\r\ntotal_net_output_bytes:%llu\r\n", m->net_input_bytes,
                   m->net_output_bytes);
}

static void info_upstream(const vp_server *srv, vp_buf *b)
{
    const vp_metrics *m = &srv->metrics;
    vp_buf_appendf(b, "# Upstream\r\nupstream:%s\r\nupstream_tls:%d\r\n", srv->conf.upstream,
                   srv->conf.upstream_tls);
    if (srv->conf.upstream_mode == CONF_MODE_SENTINEL)
        vp_buf_appendf(
            b,
            "upstream_mode:sentinel\r\nsentinel_master:%s\r\nsentinel_switches:%llu\r\nsentinel_error:%s\r\n",
            srv->conf.sentinel_master, sentinel_switches(srv), sentinel_error(srv));
    if (srv->conf.upstream_mode == CONF_MODE_CLUSTER)
        vp_buf_appendf(b, "upstream_mode:cluster\r\ncluster_nodes:%d\r\n", srv->nnodes);
    vp_buf_appendf(b, "upstream_connects:%llu\r\n", srv->stats.upstream_connects);
    for (int r = 0; r < METRICS_FAIL_N; r++)
        vp_buf_appendf(b, "upstream_connect_failures_%s:%llu\r\n", metrics_fail_names[r],
                       m->connect_failures[r]);
    if (srv->conf.metrics_port) {
        /* (Checked only while the admin endpoint runs.) */
        const ready_state *r = &m->ready;
        vp_buf_appendf(b, "upstream_ready:%s\r\n", !r->checked ? "unknown" : r->ok ? "yes" : "no");
        if (r->checked && !r->ok) vp_buf_appendf(b, "upstream_not_ready_reason:%s\r\n", r->reason);
        vp_buf_appendf(b, "readiness_checks:%llu\r\nreadiness_check_failures:%llu\r\n", r->checks,
                       r->failures);
    }
}

static void info_commandstats(const vp_server *srv, vp_buf *b)
{
    const vp_metrics *m = &srv->metrics;
    vp_buf_appendf(b, "# Commandstats\r\n");
    for (int i = 0; i < m->ids.count; i++) {
        if (!m->calls[i] && !m->failed[i]) continue;
        vp_buf_appendf(b, "cmdstat_%s:calls=%llu,failed_calls=%llu", m->ids.name[i], m->calls[i],
                       m->failed[i]);
        if (m->timing) {
            vp_buf_appendf(b, ",usec=%llu,usec_per_call=%.2f", m->ns[i] / 1000,
                           m->calls[i] ? (double)m->ns[i] / 1000.0 / (double)m->calls[i] : 0.0);
        }
        vp_buf_appendf(b, "\r\n");
    }
}

static void info_latencystats(const vp_server *srv, vp_buf *b)
{
    const vp_metrics *m = &srv->metrics;
    vp_buf_appendf(b, "# Latencystats\r\n");
    if (!m->timing) return;
    for (int f = 0; f < m->ids.nfamilies; f++) {
        const metrics_hist *h = &m->hist[f];
        if (!h->count) continue;
        vp_buf_appendf(b, "latency_%s%s:calls=%llu,usec=%llu,usec_per_call=%.2f\r\n",
                       m->ids.family_is_verb[f] ? "verb_" : "", m->ids.family_name[f], h->count,
                       h->sum_ns / 1000, (double)h->sum_ns / 1000.0 / (double)h->count);
    }
}

typedef struct info_section {
    const char *name;
    void (*write)(const vp_server *, vp_buf *);
    int in_default;
} info_section;

static const info_section sections[] = {
    {"server", info_server, 1},
    {"clients", info_clients, 1},
    {"stats", info_stats, 1},
    {"upstream", info_upstream, 1},
    {"commandstats", info_commandstats, 0},
    {"latencystats", info_latencystats, 0},
};

static int word_is(const char *s, size_t n, const char *w)
{
    return n == strlen(w) && strncasecmp(s, w, n) == 0;
}

void metrics_info_write(const vp_server *srv, const char *section, size_t len, vp_buf *out)
{
    int all = section && (word_is(section, len, "all") || word_is(section, len, "everything"));
    int dflt = !section || word_is(section, len, "default");
    int first = 1;
    for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++) {
        const info_section *s = &sections[i];
        if (!(all || (dflt && s->in_default) || (section && word_is(section, len, s->name)))) continue;
        if (!first) vp_buf_appendf(out, "\r\n");
        first = 0;
        s->write(srv, out);
    }
}

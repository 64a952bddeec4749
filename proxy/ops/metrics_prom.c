#include "proxy/ops/metrics_prom.h"

#include <stdio.h>
#include <string.h>

#include "proxy/route/sentinel.h"
#include "proxy/server.h"

static void family(vp_buf *b, const char *name, const char *type, const char *help)
{
    vp_buf_appendf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value as the format wants it: backslash, double quote and line
 * feed escaped. (The values here are command names and fixed words; a
 * custom verb's name is the only one a user chose.) */
static void put_label_value(vp_buf *b, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            vp_buf_append(b, "\\", 1);
        else if (*v == '\n') {
            vp_buf_append(b, "\\n", 2);
            continue;
        }
        vp_buf_append(b, v, 1);
    }
}

static void sample_labeled(vp_buf *b, const char *name, const char *label, const char *value,
                           unsigned long long v)
{
    vp_buf_appendf(b, "%s{%s=\"", name, label);
    put_label_value(b, value);
    vp_buf_appendf(b, "\"} %llu\n", v);
}

static void counter(vp_buf *b, const char *name, const char *help, unsigned long long v)
{
    family(b, name, "counter", help);
    vp_buf_appendf(b, "%s %llu\n", name, v);
}

static void gauge(vp_buf *b, const char *name, const char *help, long long v)
{
    family(b, name, "gauge", help);
    vp_buf_appendf(b, "%s %lld\n", name, v);
}

static void write_commands(const vp_server *srv, vp_buf *b)
{
    const vp_metrics *m = &srv->metrics;
    const cmdid_table *t = &m->ids;
    family(b, "verbproxy_commands_total", "counter",
           "Commands received, by name (Redis's command table, the verbs, or other).");
    for (int i = 0; i < t->count; i++)
        if (m->calls[i]) sample_labeled(b, "verbproxy_commands_total", "cmd", t->name[i], m->calls[i]);
    family(b, "verbproxy_command_errors_total", "counter",
           "Commands answered with an error reply, from Redis or from the proxy, by name.");
    for (int i = 0; i < t->count; i++)
        if (m->failed[i])
            sample_labeled(b, "verbproxy_command_errors_total", "cmd", t->name[i], m->failed[i]);
    if (!m->timing) return;
    static const char h[] = "verbproxy_command_duration_seconds";
    family(b, h, "histogram",
           "Time from reading a command to queueing its reply for the client, by command family (Redis's "
           "command group, or verb and the verb's name).");
    for (int f = 0; f < t->nfamilies; f++) {
        const metrics_hist *hs = &m->hist[f];
        if (!hs->count) continue;
        char labels[160];
        if (t->family_is_verb[f])
            snprintf(labels, sizeof(labels), "family=\"verb\",verb=\"%s\"", t->family_name[f]);
        else
            snprintf(labels, sizeof(labels), "family=\"%s\"", t->family_name[f]);
        unsigned long long cum = 0;
        for (int k = 0; k < METRICS_NBOUNDS; k++) {
            cum += hs->bucket[k];
            vp_buf_appendf(b, "%s_bucket{%s,le=\"%s\"} %llu\n", h, labels, metrics_bounds_text[k], cum);
        }
        cum += hs->bucket[METRICS_NBOUNDS];
        vp_buf_appendf(b, "%s_bucket{%s,le=\"+Inf\"} %llu\n", h, labels, cum);
        vp_buf_appendf(b, "%s_sum{%s} %.9f\n", h, labels, (double)hs->sum_ns / 1e9);
        vp_buf_appendf(b, "%s_count{%s} %llu\n", h, labels, hs->count);
    }
}

void metrics_prom_write(const vp_server *srv, vp_buf *b)
{
    const vp_stats *s = &srv->stats;
    const vp_metrics *m = &srv->metrics;

    family(b, "verbproxy_build_info", "gauge", "Always 1; the version as a label.");
    sample_labeled(b, "verbproxy_build_info", "version", VP_VERSION, 1);
    gauge(b, "verbproxy_up",
          "1 when the latest readiness check passed: the upstream answered, took the credentials and loaded "
          "the verbs' scripts.",
          m->ready.checked && m->ready.ok);
    gauge(b, "verbproxy_draining", "1 once a SIGTERM started the drain (readiness fails).",
          srv->draining != 0);
    if (srv->conf.upstream_mode == CONF_MODE_SENTINEL) {
        counter(b, "verbproxy_sentinel_switches_total",
                "Times the primary moved (+switch-master, or a poll of the sentinels) since start.",
                sentinel_switches(srv));
        family(b, "verbproxy_upstream_primary", "gauge",
               "Always 1; the primary the sentinels named as a label (\"\" while none is known).");
        sample_labeled(b, "verbproxy_upstream_primary", "address", srv->conf.upstream, 1);
    }
    if (srv->conf.upstream_mode == CONF_MODE_CLUSTER) {
        counter(b, "verbproxy_cluster_slot_map_fetches_total",
                "CLUSTER SLOTS asked of a node (proxy/route/cluster.c).", s->cluster_fetches);
        counter(b, "verbproxy_cluster_slot_map_fetch_failures_total",
                "Slot map fetches that failed (no connection, no answer, an unreadable one).",
                s->cluster_fetch_failures);
        family(b, "verbproxy_cluster_redirects_total", "counter",
               "Requests sent again: to the node a -MOVED or -ASK named, to the same one after a -TRYAGAIN "
               "(the client never sees those; a -TRYAGAIN once the tries are spent).");
        sample_labeled(b, "verbproxy_cluster_redirects_total", "kind", "moved", s->cluster_moved);
        sample_labeled(b, "verbproxy_cluster_redirects_total", "kind", "ask", s->cluster_ask);
        sample_labeled(b, "verbproxy_cluster_redirects_total", "kind", "tryagain", s->cluster_tryagain);
    }
    counter(b, "verbproxy_config_reloads_total", "SIGHUP reloads that took effect.", s->reloads);
    counter(b, "verbproxy_config_reload_failures_total",
            "SIGHUP reloads refused (a bad file, script or certificate): nothing changed.",
            s->reload_failures);

    gauge(b, "verbproxy_connected_clients", "Client connections open.", (long long)s->clients_connected);
    counter(b, "verbproxy_connections_received_total", "Client connections accepted.",
            s->connections_received);
    family(b, "verbproxy_rejected_connections_total", "counter",
           "Client connections refused: maxclients (as Redis's), no_descriptor (no descriptor left for a "
           "connection of its own), protected_mode, tls_handshake (on tls-port).");
    unsigned long long no_fd = m->rejected_no_descriptor;
    sample_labeled(b, "verbproxy_rejected_connections_total", "reason", "maxclients",
                   s->rejected_connections >= no_fd ? s->rejected_connections - no_fd : 0);
    sample_labeled(b, "verbproxy_rejected_connections_total", "reason", "no_descriptor", no_fd);
    sample_labeled(b, "verbproxy_rejected_connections_total", "reason", "protected_mode",
                   m->rejected_protected_mode);
    sample_labeled(b, "verbproxy_rejected_connections_total", "reason", "tls_handshake",
                   s->tls_client_handshake_failures);
    counter(b, "verbproxy_clients_timed_out_total", "Clients closed after `timeout` seconds idle.",
            s->clients_timed_out);
    counter(b, "verbproxy_protocol_errors_total", "Clients closed for a protocol error.", s->protocol_errors);
    counter(b, "verbproxy_auth_failures_total", "AUTH or HELLO AUTH refused by the proxy's own users.",
            s->auth_failures);
    counter(b, "verbproxy_clients_pinned_total",
            "Clients moved from a shared to an upstream connection of their own.", s->clients_pinned);
    gauge(b, "verbproxy_own_upstream_connections", "Upstream connections of a single client open.",
          (long long)srv->own_upstreams);
    gauge(b, "verbproxy_sharing_off",
          "1 while Redis's client-output-buffer-limit for normal clients keeps clients from sharing.",
          (long long)s->sharing_off);

    write_commands(srv, b);
    counter(b, "verbproxy_commands_forwarded_total", "Requests sent upstream.", s->commands_forwarded);
    counter(b, "verbproxy_shared_commands_total", "Requests sent on a shared upstream connection.",
            s->shared_commands);
    counter(b, "verbproxy_shared_batch_holds_total",
            "Shared batches that waited (shared-batch-hold) for more clients' requests.",
            s->shared_batch_holds);
    counter(b, "verbproxy_local_replies_total", "Replies made by the proxy itself.", s->local_replies);
    counter(b, "verbproxy_barriers_sent_total", "Barrier PINGs sent to place a reply of the proxy's own.",
            s->barriers_sent);
    counter(b, "verbproxy_verb_calls_total", "Verbs sent upstream as EVALSHA.", s->verb_calls);
    counter(b, "verbproxy_verb_argument_errors_total", "Verbs refused by the proxy's argument checks.",
            s->verb_argument_errors);
    counter(b, "verbproxy_conveyor_calls_total",
            "Commands on conveyor keys translated: a script, or a read wrapped with its offset.",
            s->conveyor_calls);
    counter(b, "verbproxy_conveyor_wrapped_total",
            "Reads on conveyor keys sent in a transaction with the offset, without a script.",
            s->conveyor_wrapped);
    counter(b, "verbproxy_conveyor_retried_total",
            "Reads on conveyor keys sent again as the script: Redis refused their transaction (out of "
            "memory, ...).",
            s->conveyor_retried);
    counter(
        b, "verbproxy_conveyor_checked_total",
        "Of the wrapped reads, score ranges with a finite end written with the offset the proxy expected.",
        s->conveyor_checked);
    counter(b, "verbproxy_conveyor_checked_stale_total",
            "Of those, reads the offset had moved under: answered by their script in the same transaction.",
            s->conveyor_checked_stale);
    counter(b, "verbproxy_polyfill_calls_total", "AGGREGATE COUNT calls run as the proxy's script.",
            s->polyfill_calls);
    counter(b, "verbproxy_script_loads_total", "SCRIPT LOADs sent for the verbs.", s->script_loads);
    counter(b, "verbproxy_script_load_failures_total",
            "SCRIPT LOADs the upstream refused; each verb call behind one was answered with the refusal.",
            s->script_load_failures);
    counter(b, "verbproxy_noscript_recoveries_total", "Verbs answered NOSCRIPT, reloaded and sent again.",
            s->noscript_recoveries);
    counter(b, "verbproxy_noscript_reordered_total",
            "NOSCRIPT recoveries where later commands of the client had already run.", s->noscript_reordered);

    counter(b, "verbproxy_upstream_connects_total",
            "Upstream connections opened (shared, own, side and the readiness probe's).",
            s->upstream_connects);
    family(b, "verbproxy_upstream_connect_failures_total", "counter",
           "Upstream connections that failed before serving, by reason.");
    for (int r = 0; r < METRICS_FAIL_N; r++)
        sample_labeled(b, "verbproxy_upstream_connect_failures_total", "reason", metrics_fail_names[r],
                       m->connect_failures[r]);
    counter(b, "verbproxy_upstream_lost_total", "Upstream connections lost after connecting.",
            s->upstream_lost);
    counter(b, "verbproxy_upstream_tls_handshake_failures_total", "Upstream TLS handshakes that failed.",
            s->tls_handshake_failures);
    counter(b, "verbproxy_upstream_auth_failures_total",
            "AUTH with the upstream credentials refused by Redis.", s->upstream_auth_failures);
    counter(b, "verbproxy_readiness_checks_total", "Readiness checks completed.", m->ready.checks);
    counter(b, "verbproxy_readiness_check_failures_total", "Readiness checks that failed.",
            m->ready.failures);

    counter(b, "verbproxy_net_input_bytes_total", "Bytes read from clients.", m->net_input_bytes);
    counter(b, "verbproxy_net_output_bytes_total", "Bytes of replies queued to clients.",
            m->net_output_bytes);

    metrics_process p;
    metrics_process_read(&p);
    family(b, "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.");
    vp_buf_appendf(b, "process_cpu_seconds_total %.6f\n", p.cpu_seconds);
    if (p.resident_bytes >= 0)
        gauge(b, "process_resident_memory_bytes", "Resident memory size in bytes.", p.resident_bytes);
    if (p.open_fds >= 0) gauge(b, "process_open_fds", "Number of open file descriptors.", p.open_fds);
    if (p.max_fds >= 0) gauge(b, "process_max_fds", "Maximum number of open file descriptors.", p.max_fds);
    family(b, "process_start_time_seconds", "gauge",
           "Start time of the process since unix epoch in seconds.");
    vp_buf_appendf(b, "process_start_time_seconds %.3f\n", m->start_time);
}

/* main.c - start-up: settings from the file, the environment and the flags
 * (reload.c), listeners, the loop. Signals, the drain and reloads are
 * proxy/ops/lifecycle.c's. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proxy/verbs/verb_scripts.h"
#include "proxy/session/client.h"
#include "proxy/route/cluster.h"
#include "proxy/config.h"
#include "proxy/ops/healthcheck.h"
#include "proxy/ops/http_admin.h"
#include "proxy/ops/lifecycle.h"
#include "proxy/ops/readiness.h"
#include "proxy/session/limits.h"
#include "proxy/net/listener.h"
#include "proxy/log.h"
#include "proxy/pool.h"
#include "proxy/route/route.h"
#include "proxy/route/sentinel.h"
#include "proxy/server.h"
#include "proxy/net/tls.h"
#include "proxy/upstream/upstream.h"

/* --help. Every directive is a flag, so this lists the ones a first run
 * needs; the example config explains them all. */
static void usage(FILE *out)
{
    fprintf(out, "Usage: verbproxy [--config FILE] [--DIRECTIVE VALUE ...]\n"
                 "       verbproxy --healthcheck [HOST:]PORT[/PATH] | --script NAME | --version\n"
                 "\n"
                 "A RESP proxy in front of Redis: one server, the primary its Sentinels name,\n"
                 "or a Redis Cluster. Every directive of the config file can be given as a\n"
                 "flag, or as an environment variable VERBPROXY_<DIRECTIVE> ('-' as '_'); the\n"
                 "environment overrides the file, flags override both. The example config\n"
                 "explains each directive (conf/verbproxy.conf in the source; installed,\n"
                 "share/doc/verbproxy/examples/verbproxy.conf).\n"
                 "\n"
                 "  --config FILE          read settings from FILE first\n"
                 "\n"
                 "Clients:\n"
                 "  --port N               TCP port to listen on (default 6380; 0 = none)\n"
                 "  --bind ADDR            IP address to listen on (default 127.0.0.1)\n"
                 "  --unixsocket PATH      also listen on a unix socket\n"
                 "  --tls-port N           also listen for TLS clients (tls-cert-file, ...)\n"
                 "  --requirepass PASS     the proxy's own password for its clients\n"
                 "  --maxclients N         client connections at once (default 10000; lowered\n"
                 "                         to what the open-file limit allows)\n"
                 "\n"
                 "Upstream:\n"
                 "  --upstream-mode MODE   standalone (default), sentinel or cluster\n"
                 "  --upstream ADDR        standalone: host:port or a unix socket path (default\n"
                 "                         127.0.0.1:6379); cluster: seed nodes, host:port,...\n"
                 "  --sentinel HOST:PORT   sentinel: a Sentinel to ask (repeat for each)\n"
                 "  --sentinel-master NAME sentinel: the primary's name the Sentinels watch\n"
                 "  --connect-timeout MS   upstream connect timeout (default 2000)\n"
                 "  --shared-upstreams N   upstream connections shared by clients without\n"
                 "                         connection state (default 1; 0 = one per client)\n"
                 "  --upstream-user NAME   authenticate upstream connections as NAME\n"
                 "  --upstream-pass-file PATH  their password: the file's first line (or\n"
                 "                         $VERBPROXY_UPSTREAM_PASS; --upstream-pass is seen\n"
                 "                         by ps until the proxy has read it)\n"
                 "  --upstream-tls yes     TLS to the upstream, its certificate verified\n"
                 "                         (upstream-tls-* in the example config)\n"
                 "\n"
                 "Operations:\n"
                 "  --metrics-port N       admin HTTP endpoint: /metrics, /healthz, /readyz\n"
                 "                         (default 0 = off; --metrics-bind ADDR, 127.0.0.1)\n"
                 "  --loglevel LEVEL       debug, verbose, notice (default) or warning\n"
                 "  --log-format FMT       redis (default) or json\n"
                 "  --shutdown-timeout S   SIGTERM: serve clients up to S seconds while they\n"
                 "                         leave (default 30); SIGHUP reloads the config\n"
                 "  --shutdown-min-drain S SIGTERM: do not exit for want of clients before S\n"
                 "                         seconds (default 0; a classic sidecar: e.g. 5)\n"
                 "\n"
                 "Instead of starting the proxy:\n"
                 "  --healthcheck [HOST:]PORT[/PATH]  GET http://HOST:PORT/PATH (default host\n"
                 "                         127.0.0.1, path /healthz) and exit 0 on a 2xx answer,\n"
                 "                         1 otherwise (for a container's HEALTHCHECK)\n"
                 "  --script NAME          print the script of built-in verb NAME as Redis runs\n"
                 "                         it (helpers put in), to SCRIPT LOAD it yourself\n"
                 "  --help, -h             this text\n"
                 "  --version, -v          the version\n");
}

/* --script NAME: the embedded text of a built-in script, byte for byte
 * (its SHA-1 is the one VERBPROXY VERBS shows). */
static int print_script(const char *name)
{
    for (int i = 0; name && i < verb_scripts_count; i++) {
        if (strcasecmp(verb_scripts[i].name, name) != 0) continue;
        return fwrite(verb_scripts[i].body, 1, verb_scripts[i].len, stdout) == verb_scripts[i].len ? 0 : 1;
    }
    fprintf(stderr, "verbproxy: --script needs the name of a built-in script:");
    for (int i = 0; i < verb_scripts_count; i++)
        fprintf(stderr, " %s", verb_scripts[i].name);
    fprintf(stderr, "\n");
    return 1;
}

/* The TLS contexts, from the settings: certificates and keys are read
 * now, so a bad one stops start-up instead of failing every connect.
 * Returns 0, or -1 with the reason in err. */
static int tls_setup(vp_server *srv, char *err, size_t errlen)
{
    vp_config *conf = &srv->conf;
    if (conf->upstream_tls) {
        if (conf->upstream_port == 0 && conf->upstream_mode != CONF_MODE_SENTINEL) {
            snprintf(err, errlen, "upstream-tls needs a host:port upstream, not a unix socket");
            return -1;
        }
        if (!(srv->tls_upstream = vp_tls_ctx_client(conf, err, errlen))) return -1;
        if (!conf->upstream_tls_conf.verify)
            vp_log(VP_LOG_WARNING,
                   "upstream-tls-verify no: the upstream's certificate is NOT checked; anyone "
                   "on the path to %s can read and change the traffic",
                   conf->upstream);
    }
    if (conf->tls_port && !(srv->tls_clients = vp_tls_ctx_server(conf, err, errlen))) return -1;
    return 0;
}

static vp_listener listener;
static vp_lifecycle lifecycle;
static vp_conf_source source;
static uv_timer_t cron;

/* Before the loop waits for I/O: the shared connections write what every
 * client gave them since, in one go (whichever phase queued it). */
/* Sentinel mode: the primary moved: the clients and the readiness probe
 * follow (route_node_moved calls it). */
static void on_primary_moved(vp_server *srv)
{
    client_primary_moved(srv);
    ready_upstream_moved(srv);
}

static void on_flush_prepare(uv_prepare_t *h)
{
    upstream_flush_shared(h->data);
}

/* A connection waits on a listening socket (listener.h): refused at
 * maxclients or without a descriptor to spare, else a new client. */
static void on_accept(vp_server *srv, uv_stream_t *listener, int is_unix, int tls)
{
    if (!limits_may_accept(srv)) {
        limits_refuse(srv, listener, is_unix, tls);
        return;
    }
    client_accept(srv, listener, is_unix, tls);
}

static void on_cron(uv_timer_t *t)
{
    client_cron(t->data);
    upstream_cron(t->data, route_primary(t->data));
}

/* A failed start: free what was built and say why (1). */
static int fail_start(vp_server *srv, const char *why)
{
    if (why) vp_log(VP_LOG_WARNING, "%s", why);
    metrics_free(&srv->metrics);
    vp_tls_ctx_free(srv->tls_upstream);
    vp_tls_ctx_free(srv->tls_clients);
    verbs_free(&srv->verbs);
    route_free(srv); /* (NULL before route_init) */
    conf_free(&srv->conf);
    reload_source_free(&source);
    return 1;
}

int main(int argc, char **argv)
{
    static vp_server srv;
    conf_defaults(&srv.conf);
    char err[1024];

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--version") || !strcmp(argv[i], "-v")) {
            printf("verbproxy %s\n", VP_VERSION);
            return 0;
        }
        if (!strcmp(argv[i], "--script")) return print_script(i + 1 < argc ? argv[i + 1] : NULL);
        if (!strcmp(argv[i], "--healthcheck")) return healthcheck_main(i + 1 < argc ? argv[i + 1] : NULL);
    }
    /* The file (wherever --config appears), then the VERBPROXY_* variables,
     * then the flags in order, then the environment's password:
     * reload.c builds them the same way at SIGHUP. */
    if (reload_source_init(&source, argc, argv, err, sizeof(err)) < 0 ||
        reload_read_config(&source, &srv.conf, err, sizeof(err)) < 0) {
        fprintf(stderr, "verbproxy: bad config: %s\n", err);
        reload_source_free(&source);
        return 1;
    }
    if (verbs_build(&srv.verbs, srv.conf.custom_verbs, srv.conf.ncustom_verbs, srv.conf.ztick_max_members,
                    err, sizeof(err)) < 0) {
        fprintf(stderr, "verbproxy: %s\n", err);
        conf_free(&srv.conf);
        reload_source_free(&source);
        return 1;
    }
    /* The table owns its custom verbs: it may outlive these settings. */
    verbs_adopt_custom(&srv.verbs, srv.conf.custom_verbs, srv.conf.ncustom_verbs);
    srv.conf.custom_verbs = NULL;
    srv.conf.ncustom_verbs = 0;
    vp_log_fmt = (vp_log_format)srv.conf.log_format;
    vp_log_threshold = srv.conf.loglevel;
    if (limits_adjust_open_files(&srv, err, sizeof(err)) < 0) {
        strncat(err, " Exiting.", sizeof(err) - strlen(err) - 1);
        return fail_start(&srv, err);
    }
    if (tls_setup(&srv, err, sizeof(err)) < 0) return fail_start(&srv, err);
    srv.limits.max_bulk_len = srv.conf.proto_max_bulk_len;
    srv.limits.max_multibulk_len = srv.conf.proto_max_multibulk_len;
    srv.loop = uv_default_loop();
    signal(SIGPIPE, SIG_IGN);
    client_register(); /* the session's callbacks: before any upstream connection */
    srv.primary_moved = on_primary_moved;
    route_init(&srv); /* the upstream node(s): before anything opens a connection */
    if (srv.conf.upstream_mode == CONF_MODE_CLUSTER && cluster_start(&srv) < 0) /* (its seeds are nodes) */
        return fail_start(&srv, "upstream-mode cluster: no usable seed node");

    /* Signals first: once the socket listens, a supervisor may already
     * send SIGTERM, and that must be a clean drain. */
    lifecycle_init(&lifecycle, &srv, &listener, &source);
    /* The admin endpoint before the clients' port: whoever sees that port
     * accept (a supervisor, a test) finds /metrics and the probes up. */
    if (metrics_init(&srv.metrics, &srv.verbs, srv.conf.metrics_port != 0, err, sizeof(err)) < 0 ||
        admin_http_start(&srv, err, sizeof(err)) < 0)
        return fail_start(&srv, err);
    if (listener_start(&listener, &srv, on_accept, err, sizeof(err)) < 0) return fail_start(&srv, err);
    if (srv.conf.upstream_mode == CONF_MODE_SENTINEL)
        vp_log(VP_LOG_NOTICE, "verbproxy %s ready, upstream: the primary of %s (sentinel)", VP_VERSION,
               srv.conf.sentinel_master);
    else if (srv.conf.upstream_mode == CONF_MODE_CLUSTER)
        vp_log(VP_LOG_NOTICE, "verbproxy %s ready, upstream: the cluster seeded by %s", VP_VERSION,
               srv.nodes[0]->addr);
    else
        vp_log(VP_LOG_NOTICE, "verbproxy %s ready, upstream %s", VP_VERSION, srv.conf.upstream);
    sentinel_start(&srv);
    if (srv.conf.upstream_auth)
        vp_log(VP_LOG_NOTICE, "upstream credentials: %s%s, password from %s",
               srv.conf.upstream_user[0] ? "user " : "the default user",
               srv.conf.upstream_user[0] ? srv.conf.upstream_user : "", srv.conf.upstream_pass_source);

    uv_prepare_init(srv.loop, &srv.flush_prepare);
    srv.flush_prepare.data = &srv;
    uv_prepare_start(&srv.flush_prepare, on_flush_prepare);
    lifecycle_own(&lifecycle, (uv_handle_t *)&srv.flush_prepare);

    client_block_init(&srv);
    lifecycle_own(&lifecycle, (uv_handle_t *)&srv.pop_timer);

    uv_timer_init(srv.loop, &cron);
    cron.data = &srv;
    uv_timer_start(&cron, on_cron, 1000, 1000);
    lifecycle_own(&lifecycle, (uv_handle_t *)&cron);

    uv_run(srv.loop, UV_RUN_DEFAULT);
    uv_loop_close(srv.loop);
    route_free(&srv); /* (every connection is freed: none points at a node) */
    vp_pool_drain();  /* every session is freed: its blocks are all back */
    vp_tls_ctx_free(srv.tls_upstream);
    vp_tls_ctx_free(srv.tls_clients);
    metrics_free(&srv.metrics);
    client_conveyor_free(&srv);
    free(srv.pop_waiters);
    verbs_free(&srv.verbs);
    conf_free(&srv.conf);
    reload_source_free(&source);
    return 0;
}

#include "proxy/ops/reload.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "proxy/verbs/verbs.h"
#include "proxy/buffer.h"
#include "proxy/session/client.h"
#include "proxy/config_env.h"
#include "proxy/session/limits.h"
#include "proxy/log.h"
#include "proxy/route/route.h"
#include "proxy/net/tls.h"
#include "proxy/upstream/upstream.h"

/* ---- the source ---- */

static char *reload_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = vp_malloc(n);
    memcpy(d, s, n);
    return d;
}

int reload_source_init(vp_conf_source *src, int argc, char **argv, char *err, size_t errlen)
{
    memset(src, 0, sizeof(*src));
    src->flags = vp_malloc((size_t)(argc > 1 ? argc : 1) * sizeof(char *));
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config")) {
            if (i + 1 >= argc) {
                snprintf(err, errlen, "--config needs a file");
                return -1;
            }
            free(src->config_path);
            src->config_path = reload_strdup(argv[++i]);
            continue;
        }
        if (strncmp(argv[i], "--", 2) != 0 || i + 1 >= argc) {
            snprintf(err, errlen, "unexpected argument '%s' (try --help)", argv[i]);
            return -1;
        }
        src->flags[2 * src->nflags] = reload_strdup(argv[i] + 2);
        src->flags[2 * src->nflags + 1] = reload_strdup(argv[i + 1]);
        src->nflags++;
        /* A secret given as a flag is wiped from argv (what `ps` and
         * /proc/<pid>/cmdline show) once read; it was visible until now,
         * which is why upstream-pass-file and the environment are the safe
         * ways (docs/upstreams.md#upstream-credentials). The copy stays
         * for reloads. */
        if (conf_is_secret(argv[i] + 2)) memset(argv[i + 1], '*', strlen(argv[i + 1]));
        i++;
    }
    src->env = conf_env_snapshot();
    /* The environment's password, wiped from /proc/<pid>/environ too. */
    char *env_pass = getenv(CONF_UPSTREAM_PASS_ENV);
    if (env_pass) {
        src->env_pass = reload_strdup(env_pass);
        memset(env_pass, 0, strlen(env_pass));
        unsetenv(CONF_UPSTREAM_PASS_ENV);
    }
    return 0;
}

static void reload_wipe_free(char *s)
{
    if (!s) return;
    OPENSSL_cleanse(s, strlen(s));
    free(s);
}

void reload_source_free(vp_conf_source *src)
{
    for (int i = 0; i < 2 * src->nflags; i++)
        reload_wipe_free(src->flags[i]);
    free(src->flags);
    for (char **e = src->env; e && *e; e++)
        reload_wipe_free(*e);
    free(src->env);
    free(src->config_path);
    reload_wipe_free(src->env_pass);
    memset(src, 0, sizeof(*src));
}

/* The saved VERBPROXY_* variables, on a scratch copy: conf_apply_env
 * wipes the secrets' values where it reads them. */
static int reload_apply_env(const vp_conf_source *src, vp_config *out, char *err, size_t errlen)
{
    size_t n = 0;
    while (src->env && src->env[n])
        n++;
    if (n == 0) return 0;
    char **scratch = vp_malloc((n + 1) * sizeof(char *));
    for (size_t i = 0; i < n; i++)
        scratch[i] = reload_strdup(src->env[i]);
    scratch[n] = NULL;
    char why[768];
    int rc = conf_apply_env(out, scratch, why, sizeof(why));
    if (rc < 0) snprintf(err, errlen, "environment %s", why);
    for (size_t i = 0; i < n; i++)
        reload_wipe_free(scratch[i]);
    free(scratch);
    return rc;
}

int reload_read_config(const vp_conf_source *src, vp_config *out, char *err, size_t errlen)
{
    conf_defaults(out);
    /* (conf_load_file's errors say "file:line: reason".) */
    if (src->config_path && conf_load_file(out, src->config_path, err, errlen) < 0) goto fail;
    if (reload_apply_env(src, out, err, errlen) < 0) goto fail;
    for (int i = 0; i < src->nflags; i++) {
        const char *name = src->flags[2 * i], *value = src->flags[2 * i + 1];
        char why[768];
        if (conf_set(out, name, value, why, sizeof(why)) < 0) {
            snprintf(err, errlen, "flag --%s: %s", name, why);
            goto fail;
        }
    }
    if (conf_finish(out, src->env_pass, err, errlen) < 0) goto fail;
    return 0;
fail:
    conf_free(out);
    return -1;
}

/* ---- what changed ---- */

typedef struct reload_note {
    char text[1024];
    size_t len;
} reload_note;

static void note_add(reload_note *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note_add(reload_note *n, const char *fmt, ...)
{
    if (n->len + 4 >= sizeof(n->text)) return;
    if (n->len) {
        memcpy(n->text + n->len, ", ", 2);
        n->len += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(n->text + n->len, sizeof(n->text) - n->len, fmt, ap);
    va_end(ap);
    if (k > 0) n->len += (size_t)k;
    if (n->len >= sizeof(n->text)) n->len = sizeof(n->text) - 1;
}

static int verb_same(const verb_def *a, const verb_def *b)
{
    return strcmp(a->sha, b->sha) == 0 && a->arity == b->arity && a->numkeys == b->numkeys &&
           a->readonly == b->readonly && strcmp(a->source, b->source) == 0;
}

/* Verbs added, removed or changed, into `n`; returns whether anything did
 * (ztick-max-members, which the table carries, too). */
static int verbs_diff(const verb_table *old, const verb_table *now, reload_note *n)
{
    int changed = strcmp(old->ztick_max, now->ztick_max) != 0;
    if (changed) note_add(n, "ztick-max-members %s -> %s", old->ztick_max, now->ztick_max);
    for (int i = 0; i < now->nnamed; i++) {
        const verb_def *v = now->verbs[i];
        const verb_def *o = verbs_find(old, v->name, strlen(v->name));
        if (!o) {
            note_add(n, "verb %s added", v->name);
            changed = 1;
        } else if (!verb_same(o, v)) {
            note_add(n, "verb %s changed (script %.12s -> %.12s)", v->name, o->sha, v->sha);
            changed = 1;
        }
    }
    for (int i = 0; i < old->nnamed; i++) {
        const verb_def *o = old->verbs[i];
        if (!verbs_find(now, o->name, strlen(o->name))) {
            note_add(n, "verb %s removed", o->name);
            changed = 1;
        }
    }
    return changed;
}

/* Settings that only a restart changes: kept as they are, and said. */
static void keep_restart_only(const vp_config *cur, vp_config *fresh, reload_note *restart)
{
#define KEEP_STR(f, name)                                                                                    \
    if (strcmp(cur->f, fresh->f) != 0) {                                                                     \
        note_add(restart, "%s", name);                                                                       \
        memcpy(fresh->f, cur->f, sizeof(fresh->f));                                                          \
    }
#define KEEP_NUM(f, name)                                                                                    \
    if (cur->f != fresh->f) {                                                                                \
        note_add(restart, "%s", name);                                                                       \
        fresh->f = cur->f;                                                                                   \
    }
    KEEP_STR(bind, "bind")
    KEEP_NUM(port, "port")
    KEEP_STR(unixsocket, "unixsocket")
    KEEP_NUM(unixsocketperm, "unixsocketperm")
    KEEP_NUM(tcp_backlog, "tcp-backlog")
    KEEP_NUM(tls_port, "tls-port")
    KEEP_NUM(shared_upstreams, "shared-upstreams")
    KEEP_NUM(upstream_tls, "upstream-tls")
    KEEP_NUM(metrics_port, "metrics-port")
    KEEP_STR(metrics_bind, "metrics-bind")
#undef KEEP_STR
#undef KEEP_NUM
}

/* Settings read where they are used (each accept, connect, command,
 * cron): in effect once srv->conf is replaced. Said when they differ. */
static void note_settings(const vp_config *cur, const vp_config *fresh, reload_note *n)
{
#define NOTE_NUM(f, name)                                                                                    \
    if (cur->f != fresh->f) note_add(n, "%s %lld -> %lld", name, (long long)cur->f, (long long)fresh->f);
    NOTE_NUM(connect_timeout_ms, "connect-timeout")
    NOTE_NUM(maxclients, "maxclients")
    NOTE_NUM(timeout, "timeout")
    NOTE_NUM(tcp_keepalive, "tcp-keepalive")
    NOTE_NUM(proto_max_bulk_len, "proto-max-bulk-len")
    NOTE_NUM(proto_max_multibulk_len, "proto-max-multibulk-len")
    NOTE_NUM(buffer_limit, "buffer-limit")
    NOTE_NUM(shared_batch_hold, "shared-batch-hold")
    NOTE_NUM(client_query_buffer_limit, "client-query-buffer-limit")
    NOTE_NUM(shutdown_timeout, "shutdown-timeout")
    NOTE_NUM(shutdown_min_drain, "shutdown-min-drain")
    NOTE_NUM(protected_mode, "protected-mode")
    NOTE_NUM(aggregate_count, "aggregate-count-polyfill")
#undef NOTE_NUM
    if (cur->loglevel != fresh->loglevel)
        note_add(n, "loglevel %s -> %s", vp_log_level_name(cur->loglevel),
                 vp_log_level_name(fresh->loglevel));
    if (cur->log_format != fresh->log_format)
        note_add(n, "log-format %s -> %s", cur->log_format ? "json" : "redis",
                 fresh->log_format ? "json" : "redis");
    if (strcmp(cur->upstream, fresh->upstream) != 0)
        note_add(n, "upstream %s -> %s", cur->upstream, fresh->upstream);
    if (cur->auth.configured || fresh->auth.configured)
        note_add(n, "the proxy's users (requirepass, user) re-read");
}

static int creds_differ(const vp_config *a, const vp_config *b)
{
    if (!a->upstream_auth || !b->upstream_auth) return a->upstream_auth != b->upstream_auth;
    return a->upstream_auth_len != b->upstream_auth_len ||
           CRYPTO_memcmp(a->upstream_auth, b->upstream_auth, a->upstream_auth_len) != 0;
}

/* ---- the reload ---- */

static void reload_failed(vp_server *srv, const char *why)
{
    srv->stats.reload_failures++;
    vp_log(VP_LOG_WARNING, "SIGHUP: config reload failed, nothing changed: %s", why);
}

void reload_apply(vp_server *srv, const vp_conf_source *src)
{
    char err[1024];
    vp_config fresh;
    vp_log(VP_LOG_NOTICE, "SIGHUP: reloading the config%s%s", src->config_path ? " from " : "",
           src->config_path ? src->config_path : " (flags only: no --config)");
    if (reload_read_config(src, &fresh, err, sizeof(err)) < 0) {
        reload_failed(srv, err);
        return;
    }
    vp_config *cur = &srv->conf;
    if (fresh.upstream_mode != cur->upstream_mode) {
        /* (Not kept as it was like the other restart-only settings: the
         * file's other lines, sentinel or upstream, belong to the new mode.) */
        conf_free(&fresh);
        reload_failed(srv, "upstream-mode changed: that needs a restart");
        return;
    }
    reload_note restart = {{0}, 0}, changed = {{0}, 0};
    keep_restart_only(cur, &fresh, &restart);
    if (cur->upstream_mode == CONF_MODE_SENTINEL) {
        /* The primary is the sentinels' answer, not the file's: it stays
         * (sentinel lines and sentinel-master changed by the reload are
         * used from the next question on, every SENTINEL_POLL_MS). */
        memcpy(fresh.upstream, cur->upstream, sizeof(fresh.upstream));
        memcpy(fresh.upstream_host, cur->upstream_host, sizeof(fresh.upstream_host));
        fresh.upstream_port = cur->upstream_port;
    }

    /* Everything that can fail, before anything changes. */
    verb_table nt;
    if (verbs_build(&nt, fresh.custom_verbs, fresh.ncustom_verbs, fresh.ztick_max_members, err, sizeof(err)) <
        0) {
        conf_free(&fresh);
        reload_failed(srv, err);
        return;
    }
    struct vp_tls_ctx *up_tls = NULL, *cl_tls = NULL;
    if (fresh.upstream_tls && fresh.upstream_port == 0 && fresh.upstream_mode != CONF_MODE_SENTINEL) {
        snprintf(err, sizeof(err), "upstream-tls needs a host:port upstream, not a unix socket");
        goto fail;
    }
    if (fresh.upstream_tls && !(up_tls = vp_tls_ctx_client(&fresh, err, sizeof(err)))) goto fail;
    if (fresh.tls_port && !(cl_tls = vp_tls_ctx_server(&fresh, err, sizeof(err)))) goto fail;

    /* From here on nothing fails. */
    note_settings(cur, &fresh, &changed);
    int verbs_changed = verbs_diff(&srv->verbs, &nt, &changed);
    int creds_changed = creds_differ(cur, &fresh);
    if (creds_changed)
        note_add(&changed, "upstream credentials (%s%s, password from %s)",
                 fresh.upstream_user[0] ? "user "
                 : fresh.upstream_auth  ? "the default user"
                                        : "none",
                 fresh.upstream_user, fresh.upstream_pass_source ? fresh.upstream_pass_source : "nowhere");
    int upstream_changed = strcmp(cur->upstream, fresh.upstream) != 0;
    int polyfill_changed = cur->aggregate_count != fresh.aggregate_count;
    if (up_tls) note_add(&changed, "upstream TLS context rebuilt (certificates re-read)");
    if (cl_tls) note_add(&changed, "client TLS context rebuilt (certificates re-read)");

    if (verbs_changed) {
        /* The old table stays while requests sent with it are unanswered:
         * the connections with verbs in flight hold it (their FIFO entries
         * index it); COMMAND replies owed name the new one's verbs. */
        verb_table *old = vp_malloc(sizeof(*old));
        *old = srv->verbs;
        old->refs = 0;
        int holders = upstream_keep_verbs(srv, old);
        srv->verbs = nt;
        verbs_adopt_custom(&srv->verbs, fresh.custom_verbs, fresh.ncustom_verbs);
        fresh.custom_verbs = NULL;
        fresh.ncustom_verbs = 0;
        client_verbs_replaced(srv, old);
        /* (while `old` lives: the command numbering names its verbs) */
        if (metrics_verbs_replaced(&srv->metrics, &srv->verbs, err, sizeof(err)) < 0)
            vp_log(VP_LOG_WARNING, "SIGHUP: the metrics keep the old verb numbering: %s", err);
        /* Load indexes changed: every connection loads afresh. */
        if (++srv->scripts_epoch == 0) srv->scripts_epoch = 1;
        if (old->refs == 0) {
            verbs_free(old);
            free(old);
        } else {
            vp_log(VP_LOG_VERBOSE,
                   "the old verb table stays until %d connection(s) have their verbs answered", holders);
        }
    } else {
        verbs_free(&nt); /* the same verbs: the live table stays (its SHA checks too) */
    }
    if (up_tls) {
        vp_tls_ctx_free(srv->tls_upstream); /* (sessions made from it keep it) */
        srv->tls_upstream = up_tls;
    }
    if (cl_tls) {
        vp_tls_ctx_free(srv->tls_clients);
        srv->tls_clients = cl_tls;
    }

    vp_config old_conf = *cur;
    *cur = fresh;
    conf_free(&old_conf); /* (nothing refers to it: AUTH bytes are copied when queued) */
    vp_log_threshold = cur->loglevel;
    vp_log_fmt = (vp_log_format)cur->log_format;
    srv->limits.max_bulk_len = cur->proto_max_bulk_len;
    srv->limits.max_multibulk_len = cur->proto_max_multibulk_len;
    if (limits_adjust_open_files(srv, err, sizeof(err)) < 0) vp_log(VP_LOG_WARNING, "%s", err);

    /* New upstream connections use the new credentials, certificates,
     * address and verbs: the shared ones are replaced once what they owe
     * is in; clients' own connections stay as they are (authenticated,
     * in their state) until the client leaves. */
    route_config_changed(srv);
    if (verbs_changed || creds_changed || upstream_changed || up_tls || polyfill_changed) {
        upstream_retire_shared(srv);
        if (srv->upstream_auth_failure[0] && creds_changed) srv->upstream_auth_failure[0] = '\0';
    }
    srv->stats.reloads++;
    if (restart.len)
        vp_log(VP_LOG_WARNING, "SIGHUP: changed, but needs a restart (left as it was): %.*s",
               (int)restart.len, restart.text);
    vp_log(VP_LOG_NOTICE, "SIGHUP: config reloaded: %.*s", changed.len ? (int)changed.len : 15,
           changed.len ? changed.text : "nothing changed");
    return;
fail:
    vp_tls_ctx_free(up_tls);
    vp_tls_ctx_free(cl_tls);
    verbs_free(&nt);
    conf_free(&fresh);
    reload_failed(srv, err);
}

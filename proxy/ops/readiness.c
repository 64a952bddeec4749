#include "proxy/ops/readiness.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "protocol/resp_write.h"
#include "proxy/log.h"
#include "proxy/route/route.h"
#include "proxy/server.h"
#include "proxy/upstream/upstream.h"

/* A connection older than this is replaced at the next check: AUTH is
 * then sent again, so changed credentials show. */
#define READY_REAUTH_MS 10000
/* Beyond connect-timeout (which covers the connect and our AUTH). */
#define READY_ANSWER_MS 1000

static const char ready_ping[] = RESP_LIT_ARRAY(1) RESP_LIT_BULK(4, "PING");

static void ready_verdict(vp_server *srv, int ok, const char *why)
{
    ready_state *r = &srv->metrics.ready;
    if (!ok && (r->ok || !r->checked || strcmp(r->reason, why) != 0))
        vp_log(VP_LOG_WARNING, "readiness: upstream %s not ready: %s",
               srv->conf.upstream[0] ? srv->conf.upstream : "(none yet)", why);
    else if (ok && r->checked && !r->ok)
        vp_log(VP_LOG_NOTICE, "readiness: upstream %s ready again", srv->conf.upstream);
    r->checked = 1;
    r->ok = ok;
    snprintf(r->reason, sizeof(r->reason), "%s", ok ? "" : why);
    for (char *c = r->reason; *c; c++)
        if (*c == '\r' || *c == '\n') *c = ' ';
    r->started = 0;
    r->checks++;
    if (!ok) r->failures++;
}

static void ready_drop_conn(vp_server *srv)
{
    ready_state *r = &srv->metrics.ready;
    if (r->conn) {
        upstream_close(r->conn);
        r->conn = NULL;
    }
}

static void ready_probe_answered(upstream_conn *up, void *arg, const char *p, size_t n);
static void ready_probe_failed(upstream_conn *up, void *arg, const char *why);

/* The probe's connection tells nobody but the probe. */
static const upstream_owner ready_owner = {.failed = ready_probe_failed, .lost = ready_probe_failed};

/* which: -1 the PING, else the index of the script loaded. */
static void ready_send(upstream_conn *up, const char *p, size_t n, int which)
{
    upstream_ask(up, p, n, ready_probe_answered, (void *)(intptr_t)which, 0);
}

void ready_tick(vp_server *srv)
{
    ready_state *r = &srv->metrics.ready;
    uint64_t now = uv_now(srv->loop);
    if (r->started) {
        if (now - r->started < (uint64_t)srv->conf.connect_timeout_ms + READY_ANSWER_MS) return;
        ready_drop_conn(srv);
        ready_verdict(srv, 0, "no answer from the upstream in time");
        return;
    }
    int fresh = 0;
    if (r->conn && now - r->conn_opened >= READY_REAUTH_MS) ready_drop_conn(srv);
    if (!r->conn) {
        r->conn = upstream_open(srv, route_primary(srv), NULL, &ready_owner, NULL);
        r->conn_opened = now;
        fresh = 1;
    }
    upstream_conn *up = r->conn;
    r->expected = 1;
    r->answered = 0;
    r->started = now ? now : 1;
    if (fresh) {
        /* Every script, as a connection loads it before its first verb,
         * proves the user may load scripts and that they load as pinned:
         * in the server's dialect, so the HELLO that says it goes first,
         * and the loads once the PING behind it is answered. */
        upstream_ask_server(up);
        r->loads_pending = 1;
    }
    ready_send(up, ready_ping, sizeof(ready_ping) - 1, -1);
    if (fresh) return; /* written once connected (up_transport_ready) */
    if (upstream_is_ready(up)) {
        int rc = upstream_flush(up);
        if (rc < 0) {
            char why[160];
            snprintf(why, sizeof(why), "write failed: %s", uv_strerror(rc));
            ready_drop_conn(srv);
            ready_verdict(srv, 0, why);
        }
    }
}

void ready_upstream_moved(vp_server *srv)
{
    ready_drop_conn(srv);
    srv->metrics.ready.started = 0;
}

void ready_stop(vp_server *srv)
{
    ready_drop_conn(srv);
}

/* An answer to the probe's PING or one of its SCRIPT LOADs. */
static void ready_probe_answered(upstream_conn *up, void *arg, const char *p, size_t n)
{
    int which = (int)(intptr_t)arg;
    vp_server *srv = up->srv;
    ready_state *r = &srv->metrics.ready;
    if (up != r->conn || !r->started) return; /* a check that already timed out */
    char why[READY_REASON_MAX];
    if (which < 0) {
        if (n == 7 && memcmp(p, "+PONG\r\n", 7) == 0) {
            r->answered++;
            if (r->loads_pending) {
                r->loads_pending = 0;
                const verb_table *t = &srv->verbs;
                verb_dialect d = (verb_dialect)up->dialect;
                for (int i = 0; i < t->nloads; i++)
                    ready_send(up, t->load_cmds[d] + t->load_off[d][i], t->load_size[d][i], i);
                r->expected += t->nloads;
                int rc = upstream_flush(up);
                if (rc < 0) {
                    snprintf(why, sizeof(why), "write failed: %s", uv_strerror(rc));
                    ready_drop_conn(srv);
                    ready_verdict(srv, 0, why);
                }
                return;
            }
        } else {
            snprintf(why, sizeof(why), "PING answered %.*s", (int)(n > 2 ? n - 2 : n), p);
            ready_drop_conn(srv);
            ready_verdict(srv, 0, why);
            return;
        }
    } else {
        const verb_table *t = &srv->verbs;
        const verb_def *v = which < t->nloads ? t->verbs[t->load_ids[which]] : NULL;
        if (v && n == 47 && memcmp(p, "$40\r\n", 5) == 0 &&
            memcmp(p + 5, verbs_sha(v, (verb_dialect)up->dialect), 40) == 0) {
            r->answered++;
        } else {
            snprintf(why, sizeof(why), "SCRIPT LOAD of %s's script answered %.*s", v ? v->name : "?",
                     (int)(n > 2 ? (n - 2 > 160 ? 160 : n - 2) : n), p);
            ready_drop_conn(srv);
            ready_verdict(srv, 0, why);
            return;
        }
    }
    if (r->answered == r->expected) ready_verdict(srv, 1, "");
}

/* Its connection failed or was lost. */
static void ready_probe_failed(upstream_conn *up, void *arg, const char *why)
{
    (void)arg;
    vp_server *srv = up->srv;
    ready_state *r = &srv->metrics.ready;
    if (up != r->conn) return;
    r->conn = NULL; /* closed by upstream.c */
    char text[READY_REASON_MAX];
    snprintf(text, sizeof(text), "%.80s: %.160s", srv->conf.upstream[0] ? srv->conf.upstream : "sentinel",
             why);
    ready_verdict(srv, 0, text);
}

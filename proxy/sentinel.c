/* sentinel.c - the primary's address from the sentinels (sentinel.h).
 *
 * Like redis-py's SentinelConnectionPool and hiredis-based proxies, the
 * sentinels are asked in turn and the first address given wins; a sentinel
 * that fails (refused, AUTH refused, no answer within connect-timeout, does
 * not know the master) is skipped for the next one. Unlike a client
 * library, which asks on each new connection, the proxy asks once and
 * shares the answer: at start, on `+switch-master`, every SENTINEL_POLL_MS,
 * and when a data connection finds a node that is not the primary.
 *
 * hiredis lifetimes: a context reports its end by calling every pending
 * callback with a NULL reply (then the disconnect callback) and frees
 * itself; the proxy then only forgets its pointer. It frees a context
 * itself (redisAsyncFree) only while the context is alive, after bumping
 * the generation its callbacks carry, so those late NULL replies are
 * recognised as stale. */
#include "proxy/sentinel.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "proxy/buffer.h"
#include "proxy/log.h"
#include "proxy/readiness.h"
#include "proxy/server.h"
#include "proxy/upstream.h"

/* One control connection to one sentinel. */
typedef struct sentinel_link {
    redisAsyncContext *ac; /* NULL: none */
    int index;             /* which `sentinel` line */
    unsigned gen;          /* bumped when the proxy drops ac: its callbacks' privdata */
    uint64_t started;      /* loop time the request in flight (or the connect) started */
    int busy;              /* a request in flight (asking) / subscribed (sub) */
    char auth_error[160];  /* the sentinel refused our AUTH */
} sentinel_link;

typedef struct vp_sentinel {
    vp_server *srv;
    uv_timer_t timer;
    sentinel_link ask; /* get-master-addr-by-name */
    sentinel_link sub; /* SUBSCRIBE +switch-master */
    int tries;         /* sentinels that failed in this asking round */
    uint64_t last_ask; /* loop time the last round started */
    uint64_t sub_retry_at;
    int recheck;       /* upstream.c asked for a round */
    int known;         /* a primary has been named */
    unsigned long long switches;
    char error[READY_REASON_MAX - 32]; /* why no primary is known ("" once one is) */
} vp_sentinel;

static vp_sentinel *sentinel_of(const vp_server *srv)
{
    return srv->sentinel;
}

const char *sentinel_error(const vp_server *srv)
{
    const vp_sentinel *s = sentinel_of(srv);
    return s ? s->error : "";
}

unsigned long long sentinel_switches(const vp_server *srv)
{
    const vp_sentinel *s = sentinel_of(srv);
    return s ? s->switches : 0;
}

static const char *link_name(const vp_sentinel *s, const sentinel_link *l)
{
    const vp_config *c = &s->srv->conf;
    return c->sentinels[l->index % c->nsentinels];
}

/* Forget the link's context; free it if it is still alive (not called
 * from its dying callbacks: those pass alive 0). */
static void link_drop(sentinel_link *l, int alive)
{
    redisAsyncContext *ac = l->ac;
    l->gen++;
    l->ac = NULL;
    l->busy = 0;
    if (ac && alive) redisAsyncFree(ac); /* (deferred by hiredis when inside a callback) */
}

static void ask_failed(vp_sentinel *s, const char *why, int alive);
static void sub_failed(vp_sentinel *s, const char *why, int alive);

/* A connected context was lost (its pending callbacks have run, with
 * NULL: a request in flight is already failed over to the next sentinel). */
static void on_disconnect(const redisAsyncContext *ac, int status)
{
    (void)status;
    vp_sentinel *s = ac->data;
    if (s->ask.ac == ac) link_drop(&s->ask, 0);
    if (s->sub.ac == ac) sub_failed(s, "connection lost", 0);
}

/* A connect that failed: hiredis frees the context after this returns. */
static void on_connect(const redisAsyncContext *ac, int status)
{
    if (status == REDIS_OK) return;
    vp_sentinel *s = ac->data;
    char why[160];
    snprintf(why, sizeof(why), "%s", ac->errstr ? ac->errstr : "connect failed");
    if (s->ask.ac == ac) {
        if (s->ask.busy)
            ask_failed(s, why, 0);
        else
            link_drop(&s->ask, 0);
    }
    if (s->sub.ac == ac) sub_failed(s, why, 0);
}

/* A new context to the link's sentinel, AUTH queued first when the
 * sentinels have credentials. NULL (why set) if it cannot even start. */
static redisAsyncContext *link_connect(vp_sentinel *s, sentinel_link *l, redisCallbackFn *auth_cb, char *why,
                                       size_t whylen)
{
    const vp_config *c = &s->srv->conf;
    int i = l->index % c->nsentinels;
    redisAsyncContext *ac = redisAsyncConnect(c->sentinel_hosts[i], c->sentinel_ports[i]);
    if (!ac || ac->err) {
        snprintf(why, whylen, "%s", ac ? ac->errstr : "out of memory");
        if (ac) redisAsyncFree(ac);
        return NULL;
    }
    ac->data = s;
    if (redisLibuvAttach(ac, s->srv->loop) != REDIS_OK) {
        snprintf(why, whylen, "cannot attach to the loop");
        redisAsyncFree(ac);
        return NULL;
    }
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    l->ac = ac;
    l->auth_error[0] = '\0';
    l->started = uv_now(s->srv->loop);
    if (c->sentinel_auth)
        redisAsyncFormattedCommand(ac, auth_cb, (void *)(uintptr_t)l->gen, c->sentinel_auth,
                                   c->sentinel_auth_len);
    return ac;
}

/* ---- the primary's address ---- */

static void sentinel_set_primary(vp_sentinel *s, const char *host, const char *port, const char *source)
{
    vp_server *srv = s->srv;
    vp_config *c = &srv->conf;
    char addr[CONF_ADDR_MAX];
    snprintf(addr, sizeof(addr), strchr(host, ':') ? "[%s]:%s" : "%s:%s", host, port);
    s->error[0] = '\0';
    if (s->known && strcmp(addr, c->upstream) == 0) return;
    char old[CONF_ADDR_MAX], err[160];
    snprintf(old, sizeof(old), "%s", c->upstream);
    if (conf_parse_upstream(c, addr, err, sizeof(err)) < 0) {
        snprintf(s->error, sizeof(s->error), "%.60s named %.80s: %.60s", source, addr, err);
        return;
    }
    if (!s->known) {
        s->known = 1;
        vp_log(VP_LOG_NOTICE, "sentinel: primary of %s is %s (%s)", c->sentinel_master, addr, source);
    } else {
        s->switches++;
        vp_log(VP_LOG_WARNING, "sentinel: primary of %s moved %s -> %s (%s): new requests go there", c->sentinel_master,
               old, addr, source);
    }
    upstream_primary_moved(srv);
}

/* ---- asking: SENTINEL get-master-addr-by-name ---- */

static void ask_next(vp_sentinel *s);

/* This sentinel could not tell: the next one (or, after all of them, the
 * round ends and `error` says why for whoever asks). */
static void ask_failed(vp_sentinel *s, const char *why, int alive)
{
    const vp_config *c = &s->srv->conf;
    char text[sizeof(s->error)];
    snprintf(text, sizeof(text), "sentinel %s: %s", link_name(s, &s->ask), why);
    vp_log(VP_LOG_VERBOSE, "sentinel: asking for %s: %s", c->sentinel_master, text);
    link_drop(&s->ask, alive);
    s->ask.index++;
    if (++s->tries < c->nsentinels) {
        ask_next(s);
        return;
    }
    s->tries = 0;
    /* Every sentinel failed: the last reason stands while no primary is
     * known (a known one is kept: the sentinels may be briefly away). */
    if (!s->known) snprintf(s->error, sizeof(s->error), "%s", text);
    vp_log(s->known ? VP_LOG_VERBOSE : VP_LOG_WARNING, "sentinel: no sentinel named the primary of %s: %s",
           c->sentinel_master, text);
}

static void on_ask_auth(redisAsyncContext *ac, void *r, void *priv)
{
    vp_sentinel *s = ac->data;
    redisReply *reply = r;
    if ((uintptr_t)priv != s->ask.gen || !reply || reply->type != REDIS_REPLY_ERROR) return;
    snprintf(s->ask.auth_error, sizeof(s->ask.auth_error), "AUTH: %s", reply->str);
}

static void on_ask_reply(redisAsyncContext *ac, void *r, void *priv)
{
    vp_sentinel *s = ac->data;
    redisReply *reply = r;
    if ((uintptr_t)priv != s->ask.gen) return; /* dropped already */
    char why[200];
    if (!reply) {
        snprintf(why, sizeof(why), "%s", ac->errstr[0] ? ac->errstr : "connection lost");
        ask_failed(s, why, 0);
        return;
    }
    s->ask.busy = 0;
    if (s->ask.auth_error[0]) {
        ask_failed(s, s->ask.auth_error, 1);
        return;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        snprintf(why, sizeof(why), "%s", reply->str);
        ask_failed(s, why, 1);
        return;
    }
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 || reply->element[0]->type != REDIS_REPLY_STRING ||
        reply->element[1]->type != REDIS_REPLY_STRING) {
        snprintf(why, sizeof(why), "does not know master %.150s", s->srv->conf.sentinel_master);
        ask_failed(s, why, 1);
        return;
    }
    s->tries = 0;
    char source[CONF_ADDR_MAX + 16];
    snprintf(source, sizeof(source), "sentinel %.200s", link_name(s, &s->ask));
    sentinel_set_primary(s, reply->element[0]->str, reply->element[1]->str, source);
}

static void ask_next(vp_sentinel *s)
{
    const vp_config *c = &s->srv->conf;
    if (!s->ask.ac) {
        char why[160];
        if (!link_connect(s, &s->ask, on_ask_auth, why, sizeof(why))) {
            ask_failed(s, why, 0);
            return;
        }
    }
    s->ask.busy = 1;
    s->ask.started = uv_now(s->srv->loop);
    redisAsyncCommand(s->ask.ac, on_ask_reply, (void *)(uintptr_t)s->ask.gen, "SENTINEL get-master-addr-by-name %s",
                      c->sentinel_master);
}

static void ask_round(vp_sentinel *s)
{
    if (s->ask.busy) return; /* one round at a time: coalesced */
    s->recheck = 0;
    s->tries = 0;
    s->last_ask = uv_now(s->srv->loop);
    ask_next(s);
}

/* ---- SUBSCRIBE +switch-master ---- */

static void sub_failed(vp_sentinel *s, const char *why, int alive)
{
    vp_log(VP_LOG_VERBOSE, "sentinel: +switch-master subscription on %s: %s; trying the next sentinel",
           link_name(s, &s->sub), why);
    link_drop(&s->sub, alive);
    s->sub.index++;
    /* Right away while other sentinels are left to try; after a whole turn
     * at the poll's pace (the poll keeps asking meanwhile). */
    s->sub_retry_at = uv_now(s->srv->loop) + (s->sub.index % s->srv->conf.nsentinels ? 0 : SENTINEL_POLL_MS);
}

static void on_sub_auth(redisAsyncContext *ac, void *r, void *priv)
{
    vp_sentinel *s = ac->data;
    redisReply *reply = r;
    if ((uintptr_t)priv != s->sub.gen || !reply || reply->type != REDIS_REPLY_ERROR) return;
    char why[200];
    snprintf(why, sizeof(why), "AUTH: %s", reply->str);
    sub_failed(s, why, 1);
}

/* "<master> <old-ip> <old-port> <new-ip> <new-port>" */
static void sub_switch(vp_sentinel *s, const char *msg)
{
    char name[CONF_ADDR_MAX], oh[CONF_ADDR_MAX], op[16], nh[CONF_ADDR_MAX], np[16];
    if (sscanf(msg, "%255s %255s %15s %255s %15s", name, oh, op, nh, np) != 5) {
        vp_log(VP_LOG_WARNING, "sentinel: unreadable +switch-master message: %.200s", msg);
        return;
    }
    if (strcmp(name, s->srv->conf.sentinel_master) != 0) return;
    char source[CONF_ADDR_MAX + 32];
    snprintf(source, sizeof(source), "+switch-master from %s", link_name(s, &s->sub));
    sentinel_set_primary(s, nh, np, source);
}

static void on_sub_message(redisAsyncContext *ac, void *r, void *priv)
{
    vp_sentinel *s = ac->data;
    redisReply *reply = r;
    if ((uintptr_t)priv != s->sub.gen) return;
    if (!reply) {
        sub_failed(s, ac->errstr[0] ? ac->errstr : "connection lost", 0);
        return;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        sub_failed(s, reply->str, 1);
        return;
    }
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 || reply->element[0]->type != REDIS_REPLY_STRING)
        return;
    const char *kind = reply->element[0]->str;
    if (!strcasecmp(kind, "subscribe")) {
        s->sub.busy = 1;
        vp_log(VP_LOG_VERBOSE, "sentinel: subscribed to +switch-master on %s", link_name(s, &s->sub));
        /* A switch may have happened while nobody listened. */
        s->recheck = 1;
    } else if (!strcasecmp(kind, "message") && reply->element[2]->type == REDIS_REPLY_STRING) {
        sub_switch(s, reply->element[2]->str);
    }
}

static void sub_start(vp_sentinel *s)
{
    char why[160];
    if (!link_connect(s, &s->sub, on_sub_auth, why, sizeof(why))) {
        sub_failed(s, why, 0);
        return;
    }
    redisAsyncCommand(s->sub.ac, on_sub_message, (void *)(uintptr_t)s->sub.gen, "SUBSCRIBE +switch-master");
}

/* ---- the clock ---- */

static void on_tick(uv_timer_t *t)
{
    vp_sentinel *s = t->data;
    uint64_t now = uv_now(s->srv->loop);
    uint64_t deadline = (uint64_t)s->srv->conf.connect_timeout_ms;
    if (s->ask.busy && now - s->ask.started > deadline) ask_failed(s, "no answer in time", 1);
    if (s->sub.ac && !s->sub.busy && now - s->sub.started > deadline) sub_failed(s, "no answer in time", 1);
    if (!s->ask.busy && (now - s->last_ask >= SENTINEL_POLL_MS || (s->recheck && now - s->last_ask >= SENTINEL_RECHECK_MS)))
        ask_round(s);
    if (!s->sub.ac && now >= s->sub_retry_at) sub_start(s);
}

void sentinel_start(vp_server *srv)
{
    if (srv->conf.upstream_mode != CONF_MODE_SENTINEL || srv->sentinel) return;
    vp_sentinel *s = vp_malloc(sizeof(*s));
    memset(s, 0, sizeof(*s));
    s->srv = srv;
    srv->sentinel = s;
    snprintf(s->error, sizeof(s->error), "no sentinel has answered yet");
    if (srv->conf.upstream_given)
        vp_log(VP_LOG_WARNING, "upstream-mode sentinel: the 'upstream' directive is ignored (the sentinels name the primary)");
    vp_log(VP_LOG_NOTICE, "sentinel: asking %d sentinel(s) for the primary of %s, every %d ms and on +switch-master",
           srv->conf.nsentinels, srv->conf.sentinel_master, SENTINEL_POLL_MS);
    uv_timer_init(srv->loop, &s->timer);
    s->timer.data = s;
    uv_timer_start(&s->timer, on_tick, SENTINEL_TICK_MS, SENTINEL_TICK_MS);
    ask_round(s);
    sub_start(s);
}

static void sentinel_free_cb(uv_handle_t *h)
{
    free(h->data);
}

void sentinel_stop(vp_server *srv)
{
    vp_sentinel *s = srv->sentinel;
    if (!s) return;
    srv->sentinel = NULL;
    link_drop(&s->ask, 1);
    link_drop(&s->sub, 1);
    uv_timer_stop(&s->timer);
    uv_close((uv_handle_t *)&s->timer, sentinel_free_cb);
}

void sentinel_recheck(vp_server *srv, const char *why)
{
    vp_sentinel *s = srv->sentinel;
    if (!s) return;
    if (!s->recheck) vp_log(VP_LOG_VERBOSE, "sentinel: asking again soon: %s", why);
    s->recheck = 1;
}

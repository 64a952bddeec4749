/* sentinel.c - the primary's address from the sentinels (sentinel.h).
 *
 * Like redis-py's SentinelConnectionPool and hiredis-based proxies, the
 * sentinels are asked in turn; a sentinel that fails (refused, AUTH
 * refused, no answer within connect-timeout, does not know the master) is
 * skipped for the next one. Unlike a client library, which asks on each new
 * connection, the proxy asks once and shares the answer: at start, on
 * `+switch-master`, every SENTINEL_POLL_MS, and when a data connection
 * finds a node that is not the primary.
 *
 * Answers are ordered by the master's config-epoch (`SENTINEL MASTER`):
 * Sentinel bumps it with every failover that promotes a replica, and a
 * sentinel that has not heard of a failover yet still names the old node
 * with the old epoch. So the proxy moves to a different address only with
 * an epoch strictly higher than the one it holds, and never back; a lower
 * one is a lagging sentinel's, and the next sentinel is asked instead. The
 * sentinel doing a failover names the old node with the new epoch until it
 * is over (`failover_in_progress`): that answer is skipped too. A
 * `+switch-master` is taken as it comes (only the sentinel that switched
 * sends it, and only forwards); it carries no epoch, so that sentinel is
 * asked for it at once, and until then the epoch held (the old primary's)
 * is the floor a different address must beat.
 *
 * Sentinels given by name are resolved with uv_getaddrinfo (the thread
 * pool), never by hiredis's blocking lookup: hiredis is handed the numeric
 * address.
 *
 * hiredis lifetimes: a context reports its end by calling every pending
 * callback with a NULL reply (then the disconnect callback) and frees
 * itself; the proxy then only forgets its pointer. It frees a context
 * itself (redisAsyncFree) only while the context is alive, after bumping
 * the generation its callbacks carry, so those late NULL replies are
 * recognised as stale. */
#include "proxy/route/sentinel.h"

#include <netdb.h>
#include <netinet/in.h>
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
#include "proxy/ops/readiness.h"
#include "proxy/route/route.h"
#include "proxy/server.h"
#include "proxy/upstream/upstream.h"

/* One control connection to one sentinel. */
typedef struct sentinel_link {
    redisAsyncContext *ac; /* NULL: none */
    int index;             /* which `sentinel` line */
    unsigned gen;          /* bumped when the proxy drops ac: its callbacks' privdata */
    uint64_t started;      /* loop time the request in flight (or the connect) started */
    int busy;              /* a request in flight (asking) / subscribed (sub) */
    int resolving;         /* its sentinel's name is being looked up (for this gen) */
    char auth_error[160];  /* the sentinel refused our AUTH */
} sentinel_link;

/* One uv_getaddrinfo of a sentinel's name. Owned by the vp_sentinel (on
 * its `resolves` list) from the call until its callback, which frees it;
 * a link that moved on meanwhile (gen bumped) makes the answer stale. */
typedef struct sentinel_resolve {
    uv_getaddrinfo_t req;
    struct vp_sentinel *s;
    sentinel_link *link;
    unsigned gen;
    int port;
    struct sentinel_resolve *next, *prev;
} sentinel_resolve;

typedef struct vp_sentinel {
    vp_server *srv;
    uv_timer_t timer;
    sentinel_link ask; /* SENTINEL MASTER */
    sentinel_link sub; /* SUBSCRIBE +switch-master */
    int tries;         /* sentinels that failed in this asking round */
    uint64_t last_ask; /* loop time the last round started */
    uint64_t sub_retry_at;
    int recheck;                        /* upstream.c asked for a round */
    int known;                          /* a primary has been named */
    long long epoch;                    /* the config-epoch the known primary was named with (-1: none yet) */
    char epoch_of[CONF_ADDR_MAX];       /* the sentinel-master that epoch is about (a reload may rename) */
    int epoch_from;                     /* >= 0: ask this sentinel next (it sent +switch-master) */
    char stale_seen[CONF_ADDR_MAX * 2]; /* the last lagging answer logged (once each) */
    unsigned long long switches;
    sentinel_resolve *resolves; /* lookups in flight (cancelled at stop) */
    int stopping;               /* freed once the timer is closed and no lookup is left */
    int timer_open;
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
    l->resolving = 0;                    /* (a lookup in flight is now stale) */
    if (ac && alive) redisAsyncFree(ac); /* (deferred by hiredis when inside a callback) */
}

static void ask_failed(vp_sentinel *s, const char *why, int alive);
static void sub_failed(vp_sentinel *s, const char *why, int alive);
static void ask_send(vp_sentinel *s);
static void sub_send(vp_sentinel *s);
static void on_ask_auth(redisAsyncContext *ac, void *r, void *priv);
static void on_sub_auth(redisAsyncContext *ac, void *r, void *priv);

static void link_failed(vp_sentinel *s, sentinel_link *l, const char *why, int alive)
{
    if (l == &s->ask)
        ask_failed(s, why, alive);
    else
        sub_failed(s, why, alive);
}

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

/* A context to `ip` (numeric: hiredis's own lookup then cannot block),
 * AUTH queued first when the sentinels have credentials, then the link's
 * request (asking: SENTINEL MASTER; sub: SUBSCRIBE). */
static void link_attach(vp_sentinel *s, sentinel_link *l, const char *ip, int port)
{
    const vp_config *c = &s->srv->conf;
    redisAsyncContext *ac = redisAsyncConnect(ip, port);
    if (!ac || ac->err) {
        char why[160];
        snprintf(why, sizeof(why), "%s", ac ? ac->errstr : "out of memory");
        if (ac) redisAsyncFree(ac);
        link_failed(s, l, why, 0);
        return;
    }
    ac->data = s;
    if (redisLibuvAttach(ac, s->srv->loop) != REDIS_OK) {
        redisAsyncFree(ac);
        link_failed(s, l, "cannot attach to the loop", 0);
        return;
    }
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    l->ac = ac;
    if (c->sentinel_auth)
        redisAsyncFormattedCommand(ac, l == &s->ask ? on_ask_auth : on_sub_auth, (void *)(uintptr_t)l->gen,
                                   c->sentinel_auth, c->sentinel_auth_len);
    if (l == &s->ask)
        ask_send(s);
    else
        sub_send(s);
}

static void sentinel_maybe_free(vp_sentinel *s)
{
    if (s->stopping && !s->timer_open && !s->resolves) free(s);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    sentinel_resolve *r = req->data;
    vp_sentinel *s = r->s;
    if (r->prev)
        r->prev->next = r->next;
    else
        s->resolves = r->next;
    if (r->next) r->next->prev = r->prev;
    sentinel_link *l = r->link;
    int current = !s->stopping && l->resolving && l->gen == r->gen;
    int port = r->port;
    free(r);
    if (!current) {
        if (res) uv_freeaddrinfo(res);
        sentinel_maybe_free(s);
        return;
    }
    l->resolving = 0;
    if (status < 0) {
        char why[160];
        snprintf(why, sizeof(why), "cannot resolve its name: %s", uv_strerror(status));
        link_failed(s, l, why, 0);
        return;
    }
    /* IPv4 first, as hiredis's own lookup prefers it (a name like
     * localhost may also have ::1 where the sentinel does not listen). */
    const struct addrinfo *pick = res;
    for (const struct addrinfo *a = res; a; a = a->ai_next)
        if (a->ai_family == AF_INET) {
            pick = a;
            break;
        }
    char ip[INET6_ADDRSTRLEN] = "";
    if (pick->ai_family == AF_INET)
        uv_ip4_name((const struct sockaddr_in *)pick->ai_addr, ip, sizeof(ip));
    else
        uv_ip6_name((const struct sockaddr_in6 *)pick->ai_addr, ip, sizeof(ip));
    uv_freeaddrinfo(res);
    link_attach(s, l, ip, port);
}

/* Connect the link to its sentinel: at once for an address, after an
 * asynchronous lookup for a name. Failures go to link_failed. */
static void link_open(vp_sentinel *s, sentinel_link *l)
{
    const vp_config *c = &s->srv->conf;
    int i = l->index % c->nsentinels;
    const char *host = c->sentinel_hosts[i];
    int port = c->sentinel_ports[i];
    l->auth_error[0] = '\0';
    l->started = uv_now(s->srv->loop);
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    if (uv_ip4_addr(host, port, &a4) == 0 || uv_ip6_addr(host, port, &a6) == 0) {
        link_attach(s, l, host, port);
        return;
    }
    sentinel_resolve *r = vp_malloc(sizeof(*r));
    memset(r, 0, sizeof(*r));
    r->s = s;
    r->link = l;
    r->gen = l->gen;
    r->port = port;
    r->req.data = r;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    int rc = uv_getaddrinfo(s->srv->loop, &r->req, on_resolved, host, NULL, &hints);
    if (rc < 0) {
        free(r);
        char why[160];
        snprintf(why, sizeof(why), "cannot resolve its name: %s", uv_strerror(rc));
        link_failed(s, l, why, 0);
        return;
    }
    r->next = s->resolves;
    if (r->next) r->next->prev = r;
    s->resolves = r;
    l->resolving = 1;
}

/* ---- the primary's address ---- */

static void sentinel_set_primary(vp_sentinel *s, const char *addr, const char *source)
{
    vp_server *srv = s->srv;
    vp_config *c = &srv->conf;
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
        vp_log(VP_LOG_NOTICE, "sentinel: primary of %s is %s (%s, config-epoch %lld)", c->sentinel_master,
               addr, source, s->epoch);
    } else {
        s->switches++;
        vp_log(VP_LOG_WARNING, "sentinel: primary of %s moved %s -> %s (%s): new requests go there",
               c->sentinel_master, old, addr, source);
    }
    route_node_moved(srv, route_primary(srv));
}

static void format_addr(char *out, size_t outlen, const char *host, const char *port)
{
    snprintf(out, outlen, strchr(host, ':') ? "[%s]:%s" : "%s:%s", host, port);
}

/* ---- asking: SENTINEL MASTER ---- */

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

/* The value of `field` in SENTINEL MASTER's flat field/value array (NULL
 * if absent). */
static const char *master_field(const redisReply *reply, const char *field)
{
    for (size_t i = 0; i + 1 < reply->elements; i += 2) {
        const redisReply *k = reply->element[i], *v = reply->element[i + 1];
        if (k->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING && !strcmp(k->str, field))
            return v->str;
    }
    return NULL;
}

/* Does the comma-separated flags list hold `flag`? */
static int has_flag(const char *flags, const char *flag)
{
    size_t n = strlen(flag);
    for (const char *p = flags; (p = strstr(p, flag)) != NULL; p += n)
        if ((p == flags || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return 1;
    return 0;
}

/* A sentinel named `addr` with `epoch` (the rule: sentinel.c's top
 * comment). 0: taken (or the same primary); -1: older than what the proxy
 * holds (why set: the caller asks the next sentinel). */
static int sentinel_consider(vp_sentinel *s, const char *addr, long long epoch, const char *source, char *why,
                             size_t whylen)
{
    const vp_config *c = &s->srv->conf;
    if (strcmp(s->epoch_of, c->sentinel_master) != 0) {
        /* Another master's epochs (a reload renamed it): no order. */
        snprintf(s->epoch_of, sizeof(s->epoch_of), "%s", c->sentinel_master);
        s->epoch = -1;
    }
    if (s->known && strcmp(addr, c->upstream) == 0) {
        if (epoch > s->epoch) s->epoch = epoch;
        s->error[0] = '\0';
        return 0;
    }
    if (s->known && epoch <= s->epoch) {
        snprintf(why, whylen,
                 "names %.120s with config-epoch %lld, not newer than %lld (%.120s): a lagging sentinel",
                 addr, epoch, s->epoch, c->upstream);
        char seen[sizeof(s->stale_seen)];
        snprintf(seen, sizeof(seen), "%.200s %.200s %lld", source, addr, epoch);
        if (strcmp(seen, s->stale_seen) != 0) { /* once per lagging answer, not every poll */
            snprintf(s->stale_seen, sizeof(s->stale_seen), "%s", seen);
            vp_log(VP_LOG_WARNING, "sentinel: %s %s; ignored, asking the next sentinel", source, why);
        }
        return -1;
    }
    s->epoch = epoch;
    sentinel_set_primary(s, addr, source);
    return 0;
}

static void on_ask_reply(redisAsyncContext *ac, void *r, void *priv)
{
    vp_sentinel *s = ac->data;
    redisReply *reply = r;
    if ((uintptr_t)priv != s->ask.gen) return; /* dropped already */
    char why[400];
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
    if (reply->type == REDIS_REPLY_ERROR) { /* e.g. "ERR No such master with that name" */
        snprintf(why, sizeof(why), "%s", reply->str);
        ask_failed(s, why, 1);
        return;
    }
    const char *ip = NULL, *port = NULL, *epoch = NULL, *flags = NULL;
    if (reply->type == REDIS_REPLY_ARRAY) {
        ip = master_field(reply, "ip");
        port = master_field(reply, "port");
        epoch = master_field(reply, "config-epoch");
        flags = master_field(reply, "flags");
    }
    if (!ip || !port || !epoch || !flags) {
        snprintf(why, sizeof(why), "SENTINEL MASTER %.150s: no ip, port, config-epoch and flags in the reply",
                 s->srv->conf.sentinel_master);
        ask_failed(s, why, 1);
        return;
    }
    if (has_flag(flags, "failover_in_progress")) {
        /* It names the old node with the new epoch until the failover is
         * over: another sentinel already knows better, or will soon. */
        ask_failed(s, "is failing the master over: asking the next one", 1);
        return;
    }
    char source[CONF_ADDR_MAX + 16], addr[CONF_ADDR_MAX];
    snprintf(source, sizeof(source), "sentinel %.200s", link_name(s, &s->ask));
    format_addr(addr, sizeof(addr), ip, port);
    if (sentinel_consider(s, addr, strtoll(epoch, NULL, 10), source, why, sizeof(why)) < 0) {
        ask_failed(s, why, 1);
        return;
    }
    s->tries = 0;
}

static void ask_send(vp_sentinel *s)
{
    if (!s->ask.busy || !s->ask.ac) return;
    s->ask.started = uv_now(s->srv->loop);
    redisAsyncCommand(s->ask.ac, on_ask_reply, (void *)(uintptr_t)s->ask.gen, "SENTINEL MASTER %s",
                      s->srv->conf.sentinel_master);
}

static void ask_next(vp_sentinel *s)
{
    s->ask.busy = 1;
    s->ask.started = uv_now(s->srv->loop);
    if (s->ask.ac)
        ask_send(s);
    else if (!s->ask.resolving)
        link_open(s, &s->ask); /* (sends once connected or resolved) */
}

static void ask_round(vp_sentinel *s)
{
    if (s->ask.busy) return; /* one round at a time: coalesced */
    s->recheck = 0;
    s->tries = 0;
    s->last_ask = uv_now(s->srv->loop);
    if (s->epoch_from >= 0) {
        /* After +switch-master: its sender first, for the epoch. */
        int n = s->srv->conf.nsentinels;
        if (s->ask.index % n != s->epoch_from % n) {
            link_drop(&s->ask, 1);
            s->ask.index = s->epoch_from;
        }
        s->epoch_from = -1;
    }
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
    char source[CONF_ADDR_MAX + 32], addr[CONF_ADDR_MAX];
    snprintf(source, sizeof(source), "+switch-master from %s", link_name(s, &s->sub));
    format_addr(addr, sizeof(addr), nh, np);
    /* Taken without an epoch (the epoch held stays the floor a different
     * address must beat); its sender is asked for the epoch right away. */
    sentinel_set_primary(s, addr, source);
    s->epoch_from = s->sub.index % s->srv->conf.nsentinels;
    /* A question in flight was asked before the switch (of a sentinel that
     * may be down or lagging): dropped for this one. */
    if (s->ask.busy) link_drop(&s->ask, 1);
    ask_round(s);
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
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 ||
        reply->element[0]->type != REDIS_REPLY_STRING)
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

static void sub_send(vp_sentinel *s)
{
    redisAsyncCommand(s->sub.ac, on_sub_message, (void *)(uintptr_t)s->sub.gen, "SUBSCRIBE +switch-master");
}

static void sub_start(vp_sentinel *s)
{
    link_open(s, &s->sub);
}

/* ---- the clock ---- */

static void on_tick(uv_timer_t *t)
{
    vp_sentinel *s = t->data;
    uint64_t now = uv_now(s->srv->loop);
    uint64_t deadline = (uint64_t)s->srv->conf.connect_timeout_ms;
    int sub_open = s->sub.ac || s->sub.resolving;
    if (s->ask.busy && now - s->ask.started > deadline) ask_failed(s, "no answer in time", 1);
    if (sub_open && !s->sub.busy && now - s->sub.started > deadline) sub_failed(s, "no answer in time", 1);
    if (!s->ask.busy &&
        (now - s->last_ask >= SENTINEL_POLL_MS || (s->recheck && now - s->last_ask >= SENTINEL_RECHECK_MS)))
        ask_round(s);
    if (!s->sub.ac && !s->sub.resolving && now >= s->sub_retry_at) sub_start(s);
}

void sentinel_start(vp_server *srv)
{
    if (srv->conf.upstream_mode != CONF_MODE_SENTINEL || srv->sentinel) return;
    vp_sentinel *s = vp_malloc(sizeof(*s));
    memset(s, 0, sizeof(*s));
    s->srv = srv;
    s->epoch = -1;
    s->epoch_from = -1;
    snprintf(s->epoch_of, sizeof(s->epoch_of), "%s", srv->conf.sentinel_master);
    srv->sentinel = s;
    snprintf(s->error, sizeof(s->error), "no sentinel has answered yet");
    if (srv->conf.upstream_given)
        vp_log(
            VP_LOG_WARNING,
            "upstream-mode sentinel: the 'upstream' directive is ignored (the sentinels name the primary)");
    vp_log(VP_LOG_NOTICE,
           "sentinel: asking %d sentinel(s) for the primary of %s, every %d ms and on +switch-master",
           srv->conf.nsentinels, srv->conf.sentinel_master, SENTINEL_POLL_MS);
    uv_timer_init(srv->loop, &s->timer);
    s->timer.data = s;
    s->timer_open = 1;
    uv_timer_start(&s->timer, on_tick, SENTINEL_TICK_MS, SENTINEL_TICK_MS);
    ask_round(s);
    sub_start(s);
}

static void sentinel_timer_closed(uv_handle_t *h)
{
    vp_sentinel *s = h->data;
    s->timer_open = 0;
    sentinel_maybe_free(s);
}

void sentinel_stop(vp_server *srv)
{
    vp_sentinel *s = srv->sentinel;
    if (!s) return;
    srv->sentinel = NULL;
    s->stopping = 1;
    link_drop(&s->ask, 1);
    link_drop(&s->sub, 1);
    /* Lookups not started yet end now (UV_ECANCELED); one under way ends
     * on its own, and its callback frees what is left. */
    for (sentinel_resolve *r = s->resolves; r; r = r->next)
        uv_cancel((uv_req_t *)&r->req);
    uv_timer_stop(&s->timer);
    uv_close((uv_handle_t *)&s->timer, sentinel_timer_closed);
}

void sentinel_recheck(vp_server *srv, const char *why)
{
    vp_sentinel *s = srv->sentinel;
    if (!s) return;
    if (!s->recheck) vp_log(VP_LOG_VERBOSE, "sentinel: asking again soon: %s", why);
    s->recheck = 1;
}

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
 * `+switch-master` is a hint only: it carries no epoch, and anyone who can
 * write on the plain-TCP link (or one misbehaving sentinel) can send one,
 * so it never moves the primary itself. It makes the proxy ask the
 * sentinels (its sender first), and the primary moves only on an answer
 * the epoch rule takes: a real failover raised the config-epoch, so it is
 * followed one round trip later; a forged message names nothing a sentinel
 * confirms. Hints are coalesced: a question in flight is never dropped for
 * one (it is asked again when it ends), and at most one round per
 * SENTINEL_RECHECK_MS starts from them, however many arrive.
 *
 * Sentinels given by name are resolved with uv_getaddrinfo (the thread
 * pool), never by a blocking lookup: the connect is to a numeric address.
 *
 * The connections are the proxy's own (libuv TCP, replies framed by
 * protocol/resp_frame.h and judged by sentinel_parse.c), not hiredis's
 * async client: hiredis 0.14 asserts, ending the process, on a pub/sub
 * reply it cannot place (a `message` of fewer than 2 elements, a non-string
 * channel) and on any reply nobody asked for, and a sentinel link is plain
 * TCP that anyone on the path can write to. Here every reply is taken only
 * in the exact shape a sentinel sends: a malformed pub/sub message is
 * logged (once per kind of fault) and ignored, and the sentinels are asked
 * again; a reply nobody asked for, bytes that are not RESP or a reply over
 * SENTINEL_REPLY_MAX fail the connection (the next sentinel is used).
 *
 * Lifetimes: a link's connection (sentinel_conn) is dropped by detaching
 * it (conn->link = NULL) and closing its handle; its callbacks then only
 * free. A name lookup keeps each waiting link's generation, bumped at
 * each drop, so an answer for a dropped connection is recognised as stale;
 * at most one lookup per sentinel name is in flight (sentinel_resolve). */
#include "proxy/route/sentinel.h"

#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "protocol/resp_frame.h"
#include "protocol/resp_write.h"
#include "proxy/buffer.h"
#include "proxy/log.h"
#include "proxy/route/route.h"
#include "proxy/route/sentinel_parse.h"
#include "proxy/server.h"
#include "proxy/upstream/upstream.h"

/* What a reply on a sentinel connection answers, oldest first. */
typedef enum sentinel_owed {
    OWED_AUTH,     /* our AUTH */
    OWED_MASTER,   /* SENTINEL MASTER */
    OWED_SUBSCRIBE /* SUBSCRIBE +switch-master (then messages, owed to nobody) */
} sentinel_owed;

#define SENTINEL_OWED_MAX 4
/* A reply longer than this is no sentinel's (SENTINEL MASTER is under 1 KiB). */
#define SENTINEL_REPLY_MAX (64 * 1024)
#define SENTINEL_READ_CHUNK 4096

struct sentinel_link;

/* One TCP connection to one sentinel. It outlives its link while its
 * handle closes: link NULL means dropped, and its callbacks only free. */
typedef struct sentinel_conn {
    uv_tcp_t tcp;
    uv_connect_t connect_req;
    struct sentinel_link *link; /* NULL once dropped */
    struct vp_sentinel *s;
    int connected;
    char *pending; /* requests queued before the connect completed */
    size_t pending_len;
    char *in; /* bytes read, not yet a whole reply */
    size_t in_len, in_cap;
    unsigned char owed[SENTINEL_OWED_MAX]; /* sentinel_owed, oldest first */
    int owed_len;
    int warned; /* a malformed message on it was logged as a warning */
} sentinel_conn;

/* One control connection to one sentinel. */
typedef struct sentinel_link {
    sentinel_conn *conn;  /* NULL: none */
    int index;            /* which `sentinel` line */
    unsigned gen;         /* bumped when the proxy drops conn: a lookup's answer for an older gen is stale */
    uint64_t started;     /* loop time the request in flight (or the connect) started */
    int busy;             /* a request in flight (asking) / subscribed (sub) */
    int resolving;        /* its sentinel's name is being looked up (for this gen) */
    char auth_error[160]; /* the sentinel refused our AUTH */
} sentinel_link;

/* One uv_getaddrinfo of a sentinel's name. Owned by the vp_sentinel (on
 * its `resolves` list) from the call until its callback, which frees it.
 * At most one per name and port is in flight: a link that needs the same
 * name meanwhile waits for it (a lookup left stale by a timeout is
 * adopted, not doubled), so a resolver that hangs holds at most one of
 * libuv's pool threads per sentinel, not one more per connect-timeout.
 * Its answer goes to each link still waiting with the gen it waited in (a
 * link that moved on meanwhile, gen bumped, is not told). */
typedef struct sentinel_resolve {
    uv_getaddrinfo_t req;
    struct vp_sentinel *s;
    char host[CONF_ADDR_MAX];
    int port;
    int waiting[2];  /* the ask link [0], the sub link [1] wait for it */
    unsigned gen[2]; /* each one's gen when it started waiting */
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
    int hinted;                         /* a +switch-master came: a round as soon as the pace allows */
    int hint_asked;                     /* a round has started from a hint (last_hint is set) */
    uint64_t last_hint;                 /* loop time the last round from a hint started */
    char stale_seen[CONF_ADDR_MAX * 2]; /* the last lagging answer logged (once each) */
    char unframed_seen[CONF_ADDR_MAX * 2]; /* the last "not RESP" logged (once each) */
    unsigned long long switches;
    unsigned long long malformed; /* malformed messages ignored */
    sentinel_resolve *resolves;   /* lookups in flight (cancelled at stop) */
    int stopping;                 /* freed once the timer is closed and no lookup is left */
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

/* ---- one connection: bytes out, whole replies in ---- */

static void conn_freed(uv_handle_t *h)
{
    sentinel_conn *conn = h->data;
    if (conn->pending) OPENSSL_cleanse(conn->pending, conn->pending_len); /* (may hold AUTH) */
    free(conn->pending);
    free(conn->in);
    free(conn);
}

/* Detach and close: from here on its callbacks only free. */
static void conn_close(sentinel_conn *conn)
{
    conn->link = NULL;
    uv_close((uv_handle_t *)&conn->tcp, conn_freed);
}

/* Forget the link's connection (closing it) and any lookup for it. */
static void link_drop(sentinel_link *l)
{
    sentinel_conn *conn = l->conn;
    l->gen++;
    l->conn = NULL;
    l->busy = 0;
    l->resolving = 0; /* (a lookup in flight is now stale) */
    if (conn) conn_close(conn);
}

static void ask_failed(vp_sentinel *s, const char *why);
static void sub_failed(vp_sentinel *s, const char *why);
static void ask_send(vp_sentinel *s);
static void sub_send(vp_sentinel *s);
static void on_ask_auth(vp_sentinel *s, const char *p, size_t n);
static void on_sub_auth(vp_sentinel *s, const char *p, size_t n);
static void on_ask_reply(vp_sentinel *s, const char *p, size_t n);
static void on_sub_reply(vp_sentinel *s, const char *p, size_t n, int owed);

static void link_failed(vp_sentinel *s, sentinel_link *l, const char *why)
{
    if (l == &s->ask)
        ask_failed(s, why);
    else
        sub_failed(s, why);
}

/* The connection is lost (or was never made): a question in flight goes
 * to the next sentinel, an idle asking connection is just forgotten. */
static void conn_lost(sentinel_conn *conn, const char *why)
{
    vp_sentinel *s = conn->s;
    sentinel_link *l = conn->link;
    if (l == &s->ask && !s->ask.busy)
        link_drop(l);
    else
        link_failed(s, l, why);
}

typedef struct sentinel_write {
    uv_write_t req;
    size_t len;
    char data[];
} sentinel_write;

static void on_written(uv_write_t *req, int status)
{
    (void)status; /* (a failed write shows as a failed read, or the deadline) */
    sentinel_write *w = req->data;
    OPENSSL_cleanse(w->data, w->len); /* (may hold AUTH) */
    free(w);
}

static void conn_write(sentinel_conn *conn, const char *p, size_t n)
{
    sentinel_write *w = vp_malloc(sizeof(*w) + n);
    w->req.data = w;
    w->len = n;
    memcpy(w->data, p, n);
    uv_buf_t b = uv_buf_init(w->data, (unsigned)n);
    if (uv_write(&w->req, (uv_stream_t *)&conn->tcp, &b, 1, on_written) < 0) {
        OPENSSL_cleanse(w->data, n);
        free(w); /* (the read side or the deadline fails the connection) */
    }
}

/* Send a request whose reply will answer `owed`: now if connected, else
 * once the connect completes. */
static void conn_send(sentinel_conn *conn, const char *p, size_t n, sentinel_owed owed)
{
    if (conn->owed_len == SENTINEL_OWED_MAX) return; /* (never: at most AUTH + one request) */
    conn->owed[conn->owed_len++] = (unsigned char)owed;
    if (conn->connected) {
        conn_write(conn, p, n);
        return;
    }
    /* (Not realloc: the old copy may hold AUTH, and is wiped before it
     * goes back to the allocator.) */
    char *more = vp_malloc(conn->pending_len + n);
    if (conn->pending_len) memcpy(more, conn->pending, conn->pending_len);
    memcpy(more + conn->pending_len, p, n);
    if (conn->pending) OPENSSL_cleanse(conn->pending, conn->pending_len);
    free(conn->pending);
    conn->pending = more;
    conn->pending_len += n;
}

/* The oldest reply owed (-1: none: a message, or a reply nobody asked for). */
static int conn_pop_owed(sentinel_conn *conn)
{
    if (!conn->owed_len) return -1;
    int owed = conn->owed[0];
    memmove(conn->owed, conn->owed + 1, (size_t)--conn->owed_len);
    return owed;
}

/* One whole reply (p..p+n): to whoever it answers. */
static void conn_reply(sentinel_conn *conn, const char *p, size_t n)
{
    vp_sentinel *s = conn->s;
    int owed = conn_pop_owed(conn);
    if (conn->link == &s->sub) {
        if (owed == OWED_AUTH)
            on_sub_auth(s, p, n);
        else
            on_sub_reply(s, p, n, owed);
        return;
    }
    if (owed == OWED_AUTH)
        on_ask_auth(s, p, n);
    else if (owed == OWED_MASTER)
        on_ask_reply(s, p, n);
    else
        link_failed(s, conn->link, "a reply nobody asked for");
}

/* Bytes that are not RESP: where a reply ends can no longer be known, so
 * the connection is dropped (the next sentinel is used). A warning once
 * per sentinel and fault, not at every reconnect. */
static void conn_unframed(sentinel_conn *conn, const char *error)
{
    vp_sentinel *s = conn->s;
    char why[128], seen[sizeof(s->unframed_seen)];
    snprintf(why, sizeof(why), "not RESP: %s", error);
    snprintf(seen, sizeof(seen), "%.200s %.120s", link_name(s, conn->link), why);
    if (strcmp(seen, s->unframed_seen) != 0) {
        snprintf(s->unframed_seen, sizeof(s->unframed_seen), "%s", seen);
        vp_log(VP_LOG_WARNING, "sentinel: %s sent bytes that are not RESP (%s): connection dropped",
               link_name(s, conn->link), error);
    }
    link_failed(s, conn->link, why);
}

/* Hand on every whole reply read; keep a partial one. */
static void conn_process(sentinel_conn *conn)
{
    size_t off = 0;
    while (conn->link && off < conn->in_len) {
        resp_framer f;
        size_t used = 0;
        resp_frame_reset(&f);
        resp_frame_status st = resp_frame_scan(&f, conn->in + off, conn->in_len - off, &used);
        if (st == RESP_FRAME_ERROR) {
            conn_unframed(conn, f.error);
            return;
        }
        if (st == RESP_FRAME_PARTIAL) {
            if (conn->in_len - off > SENTINEL_REPLY_MAX)
                link_failed(conn->s, conn->link, "a reply longer than any sentinel's");
            break;
        }
        conn_reply(conn, conn->in + off, used);
        off += used;
    }
    if (!conn->link) return; /* dropped (closing: its buffer goes with it) */
    memmove(conn->in, conn->in + off, conn->in_len - off);
    conn->in_len -= off;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    sentinel_conn *conn = h->data;
    if (conn->in_cap - conn->in_len < SENTINEL_READ_CHUNK) {
        conn->in_cap = conn->in_len + SENTINEL_READ_CHUNK;
        conn->in = vp_realloc(conn->in, conn->in_cap);
    }
    *buf = uv_buf_init(conn->in + conn->in_len, (unsigned)(conn->in_cap - conn->in_len));
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    sentinel_conn *conn = stream->data;
    if (!conn->link || nread == 0) return;
    if (nread < 0) {
        conn_lost(conn, nread == UV_EOF ? "connection lost" : uv_strerror((int)nread));
        return;
    }
    conn->in_len += (size_t)nread;
    conn_process(conn);
}

static void on_connected(uv_connect_t *req, int status)
{
    sentinel_conn *conn = req->data;
    if (!conn->link) return; /* dropped meanwhile */
    if (status < 0) {
        conn_lost(conn, uv_strerror(status));
        return;
    }
    conn->connected = 1;
    uv_tcp_nodelay(&conn->tcp, 1);
    int rc = uv_read_start((uv_stream_t *)&conn->tcp, on_alloc, on_read);
    if (rc < 0) {
        conn_lost(conn, uv_strerror(rc));
        return;
    }
    if (conn->pending_len) {
        conn_write(conn, conn->pending, conn->pending_len);
        OPENSSL_cleanse(conn->pending, conn->pending_len);
        conn->pending_len = 0;
    }
}

/* A connection to `ip` (numeric), AUTH queued first when the sentinels
 * have credentials, then the link's request (asking: SENTINEL MASTER; sub:
 * SUBSCRIBE). */
static void link_attach(vp_sentinel *s, sentinel_link *l, const char *ip, int port)
{
    const vp_config *c = &s->srv->conf;
    struct sockaddr_storage ss;
    if (uv_ip4_addr(ip, port, (struct sockaddr_in *)&ss) != 0 &&
        uv_ip6_addr(ip, port, (struct sockaddr_in6 *)&ss) != 0) {
        link_failed(s, l, "not an address");
        return;
    }
    sentinel_conn *conn = vp_malloc(sizeof(*conn));
    memset(conn, 0, sizeof(*conn));
    conn->s = s;
    conn->link = l;
    conn->connect_req.data = conn;
    int rc = uv_tcp_init(s->srv->loop, &conn->tcp);
    if (rc < 0) {
        free(conn);
        link_failed(s, l, uv_strerror(rc));
        return;
    }
    conn->tcp.data = conn;
    l->conn = conn;
    rc = uv_tcp_connect(&conn->connect_req, &conn->tcp, (const struct sockaddr *)&ss, on_connected);
    if (rc < 0) {
        link_failed(s, l, uv_strerror(rc)); /* (drops and closes conn) */
        return;
    }
    if (c->sentinel_auth) conn_send(conn, c->sentinel_auth, c->sentinel_auth_len, OWED_AUTH);
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
    sentinel_resolve done = *r; /* (the waiters, the port) */
    free(r);
    char ip[INET6_ADDRSTRLEN] = "";
    if (status >= 0 && res) {
        /* IPv4 first, as hiredis's lookup did (a name like localhost may
         * also have ::1 where the sentinel does not listen). */
        const struct addrinfo *pick = res;
        for (const struct addrinfo *a = res; a; a = a->ai_next)
            if (a->ai_family == AF_INET) {
                pick = a;
                break;
            }
        if (pick->ai_family == AF_INET)
            uv_ip4_name((const struct sockaddr_in *)pick->ai_addr, ip, sizeof(ip));
        else
            uv_ip6_name((const struct sockaddr_in6 *)pick->ai_addr, ip, sizeof(ip));
    }
    if (res) uv_freeaddrinfo(res);
    if (s->stopping) {
        sentinel_maybe_free(s);
        return;
    }
    for (int w = 0; w < 2; w++) {
        sentinel_link *l = w ? &s->sub : &s->ask;
        /* (Checked at each delivery: telling one link may move the other.) */
        if (s->stopping || !done.waiting[w] || !l->resolving || l->gen != done.gen[w]) continue;
        l->resolving = 0;
        if (status < 0) {
            char why[160];
            snprintf(why, sizeof(why), "cannot resolve its name: %s", uv_strerror(status));
            link_failed(s, l, why);
        } else {
            link_attach(s, l, ip, done.port);
        }
    }
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
    int w = l == &s->sub;
    sentinel_resolve *r = s->resolves;
    while (r && (r->port != port || strcmp(r->host, host) != 0))
        r = r->next;
    if (r) {
        /* That name's lookup is still under way (for the other link, or
         * this one's, left stale by a timeout): its answer will do. */
        vp_log(VP_LOG_VERBOSE, "sentinel: %s: waiting for the lookup of its name already under way",
               link_name(s, l));
    } else {
        r = vp_malloc(sizeof(*r));
        memset(r, 0, sizeof(*r));
        r->s = s;
        snprintf(r->host, sizeof(r->host), "%s", host);
        r->port = port;
        r->req.data = r;
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
        int rc = uv_getaddrinfo(s->srv->loop, &r->req, on_resolved, host, NULL, &hints);
        if (rc < 0) {
            free(r);
            char why[160];
            snprintf(why, sizeof(why), "cannot resolve its name: %s", uv_strerror(rc));
            link_failed(s, l, why);
            return;
        }
        r->next = s->resolves;
        if (r->next) r->next->prev = r;
        s->resolves = r;
    }
    r->waiting[w] = 1;
    r->gen[w] = l->gen;
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

static void format_addr(char *out, size_t outlen, const char *host, int port)
{
    snprintf(out, outlen, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
}

/* ---- asking: SENTINEL MASTER ---- */

static void ask_next(vp_sentinel *s);
static void hint_round(vp_sentinel *s);

/* This sentinel could not tell: the next one (or, after all of them, the
 * round ends and `error` says why for whoever asks). */
static void ask_failed(vp_sentinel *s, const char *why)
{
    const vp_config *c = &s->srv->conf;
    char text[sizeof(s->error)];
    snprintf(text, sizeof(text), "sentinel %s: %s", link_name(s, &s->ask), why);
    vp_log(VP_LOG_VERBOSE, "sentinel: asking for %s: %s", c->sentinel_master, text);
    link_drop(&s->ask);
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
    hint_round(s); /* a +switch-master came meanwhile */
}

/* Our AUTH's answer: a refusal fails the question that follows it. */
static void on_ask_auth(vp_sentinel *s, const char *p, size_t n)
{
    char why[128];
    if (sentinel_parse_auth(p, n, why, sizeof(why)) < 0)
        snprintf(s->ask.auth_error, sizeof(s->ask.auth_error), "AUTH: %s", why);
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

static void on_ask_reply(vp_sentinel *s, const char *p, size_t n)
{
    char why[400];
    s->ask.busy = 0;
    if (s->ask.auth_error[0]) {
        ask_failed(s, s->ask.auth_error);
        return;
    }
    sentinel_master_info m;
    char bad[160];
    if (sentinel_parse_master(p, n, &m, bad, sizeof(bad)) < 0) {
        /* An error ("ERR No such master with that name") or a reply of
         * the wrong shape: this sentinel cannot tell. */
        snprintf(why, sizeof(why), "SENTINEL MASTER %.150s: %s", s->srv->conf.sentinel_master, bad);
        ask_failed(s, why);
        return;
    }
    if (m.failover_in_progress) {
        /* It names the old node with the new epoch until the failover is
         * over: another sentinel already knows better, or will soon. */
        ask_failed(s, "is failing the master over: asking the next one");
        return;
    }
    char source[CONF_ADDR_MAX + 16], addr[CONF_ADDR_MAX];
    snprintf(source, sizeof(source), "sentinel %.200s", link_name(s, &s->ask));
    format_addr(addr, sizeof(addr), m.host, m.port);
    if (sentinel_consider(s, addr, m.epoch, source, why, sizeof(why)) < 0) {
        ask_failed(s, why);
        return;
    }
    s->tries = 0;
    hint_round(s); /* a +switch-master came meanwhile: ask again (paced) */
}

static void ask_send(vp_sentinel *s)
{
    if (!s->ask.busy || !s->ask.conn) return;
    const char *master = s->srv->conf.sentinel_master;
    const resp_arg argv[] = {{"SENTINEL", 8}, {"MASTER", 6}, {master, strlen(master)}};
    char cmd[CONF_ADDR_MAX + 64]; /* (0 bytes sent if it did not fit) */
    size_t n = resp_write_command_size(3, argv) <= sizeof(cmd) ? resp_write_command(cmd, 3, argv) : 0;
    s->ask.started = uv_now(s->srv->loop);
    conn_send(s->ask.conn, cmd, n, OWED_MASTER);
}

static void ask_next(vp_sentinel *s)
{
    s->ask.busy = 1;
    s->ask.started = uv_now(s->srv->loop);
    if (s->ask.conn)
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
            link_drop(&s->ask);
            s->ask.index = s->epoch_from;
        }
        s->epoch_from = -1;
    }
    ask_next(s);
}

/* The round a +switch-master asked for: now, unless a question is in
 * flight (this runs again when it ends) or a round from a hint started
 * less than SENTINEL_RECHECK_MS ago (on_tick starts it then). */
static void hint_round(vp_sentinel *s)
{
    if (!s->hinted || s->ask.busy || s->stopping) return;
    uint64_t now = uv_now(s->srv->loop);
    if (s->hint_asked && now - s->last_hint < SENTINEL_RECHECK_MS) return;
    s->hinted = 0;
    s->hint_asked = 1;
    s->last_hint = now;
    ask_round(s);
}

/* ---- SUBSCRIBE +switch-master ---- */

static void sub_failed(vp_sentinel *s, const char *why)
{
    vp_log(VP_LOG_VERBOSE, "sentinel: +switch-master subscription on %s: %s; trying the next sentinel",
           link_name(s, &s->sub), why);
    link_drop(&s->sub);
    s->sub.index++;
    /* Right away while other sentinels are left to try; after a whole turn
     * at the poll's pace (the poll keeps asking meanwhile). */
    s->sub_retry_at = uv_now(s->srv->loop) + (s->sub.index % s->srv->conf.nsentinels ? 0 : SENTINEL_POLL_MS);
}

static void on_sub_auth(vp_sentinel *s, const char *p, size_t n)
{
    char why[128], text[160];
    if (sentinel_parse_auth(p, n, why, sizeof(why)) == 0) return;
    snprintf(text, sizeof(text), "AUTH: %s", why);
    sub_failed(s, text);
}

/* A +switch-master naming a new primary of `sw->master`: a hint, never
 * a move (sentinel.c's top comment). The sentinels are asked, its sender
 * first; the primary moves only if one of them names the new address with
 * a higher config-epoch. Coalesced and paced by hint_round. */
static void sub_switch(vp_sentinel *s, const sentinel_switch *sw)
{
    const vp_config *c = &s->srv->conf;
    if (strcmp(sw->master, c->sentinel_master) != 0) return;
    if (!s->hinted) { /* (once per round it starts, not per message) */
        char addr[CONF_ADDR_MAX];
        format_addr(addr, sizeof(addr), sw->host, sw->port);
        vp_log(VP_LOG_VERBOSE, "sentinel: +switch-master from %s names %s: asking the sentinels",
               link_name(s, &s->sub), addr);
    }
    s->epoch_from = s->sub.index % c->nsentinels;
    s->hinted = 1;
    hint_round(s);
}

/* A message that is not a well-formed +switch-master: it moves nothing.
 * A switch may be behind it, so the sentinels are asked soon (the round
 * is coalesced and paced, whatever the sender sends). Logged as a warning
 * once per subscription, the rest at verbose with a count: a flood of
 * them costs no log space. */
static void sub_malformed(vp_sentinel *s, const char *p, size_t n, const char *why)
{
    char start[48];
    size_t i = 0;
    for (; i < n && i + 1 < sizeof(start); i++)
        start[i] = p[i] >= 0x20 && p[i] < 0x7f ? p[i] : '.';
    start[i] = '\0';
    s->malformed++;
    s->recheck = 1;
    int first = !s->sub.conn->warned;
    s->sub.conn->warned = 1;
    vp_log(first ? VP_LOG_WARNING : VP_LOG_VERBOSE,
           "sentinel: malformed message on the " SENTINEL_CHANNEL " subscription to %s (%s; it starts "
           "\"%s\"); ignored (%llu so far), asking the sentinels",
           link_name(s, &s->sub), why, start, s->malformed);
}

/* A reply on the subscribed connection: SUBSCRIBE's confirmation (owed),
 * then messages. */
static void on_sub_reply(vp_sentinel *s, const char *p, size_t n, int owed)
{
    sentinel_switch sw;
    char why[160];
    sentinel_pubsub_kind kind = sentinel_parse_pubsub(p, n, &sw, why, sizeof(why));
    if (owed == OWED_SUBSCRIBE) {
        if (kind != SENTINEL_PUBSUB_SUBSCRIBED) {
            char text[200];
            snprintf(text, sizeof(text), "SUBSCRIBE: %s", why);
            sub_failed(s, text);
            return;
        }
        s->sub.busy = 1;
        vp_log(VP_LOG_VERBOSE, "sentinel: subscribed to " SENTINEL_CHANNEL " on %s", link_name(s, &s->sub));
        /* A switch may have happened while nobody listened. */
        s->recheck = 1;
        return;
    }
    if (kind == SENTINEL_PUBSUB_SWITCH)
        sub_switch(s, &sw);
    else
        sub_malformed(s, p, n, kind == SENTINEL_PUBSUB_SUBSCRIBED ? "a confirmation nobody asked for" : why);
}

static void sub_send(vp_sentinel *s)
{
    static const char subscribe[] =
        RESP_LIT_ARRAY(2) RESP_LIT_BULK(9, "SUBSCRIBE") RESP_LIT_BULK(14, SENTINEL_CHANNEL);
    conn_send(s->sub.conn, subscribe, sizeof(subscribe) - 1, OWED_SUBSCRIBE);
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
    int sub_open = s->sub.conn || s->sub.resolving;
    if (s->ask.busy && now - s->ask.started > deadline) ask_failed(s, "no answer in time");
    if (sub_open && !s->sub.busy && now - s->sub.started > deadline) sub_failed(s, "no answer in time");
    hint_round(s);
    if (!s->ask.busy &&
        (now - s->last_ask >= SENTINEL_POLL_MS || (s->recheck && now - s->last_ask >= SENTINEL_RECHECK_MS)))
        ask_round(s);
    if (!s->sub.conn && !s->sub.resolving && now >= s->sub_retry_at) sub_start(s);
}

/* ---- the watch over upstream connections ---- */

/* Our ROLE's answer: an array starting with "master" makes the connection
 * the primary's, ready (once AUTH is answered too). Anything else
 * (another role, an error such as -NOAUTH or -NOPERM, +OK, an integer, an
 * empty array: whatever answers on the address a sentinel gave may be
 * anything) is no primary: failed like a connect, "not the primary", and
 * the sentinels are asked again (the failure's trouble). The judging is
 * sentinel_parse_role's (fuzzed). What Redis writes to a connection it
 * refuses is left to the loss that follows. */
static void role_answered(upstream_conn *up, void *arg, const char *p, size_t n)
{
    (void)arg;
    char said[64], why[160];
    if (upstream_is_refusal(p, n)) return;
    if (sentinel_parse_role(p, n, said, sizeof(said))) {
        upstream_setup_done(up);
        return;
    }
    snprintf(why, sizeof(why), "not the primary: ROLE says %.60s", said);
    upstream_setup_failed(up, why);
}

/* ROLE follows (our AUTH and) goes before anything else, and the
 * connection takes no client's request until it says "master": the
 * address the sentinels gave may already be a demoted node's. */
static void watch_opened(upstream_conn *up)
{
    static const char role[] = RESP_LIT_ARRAY(1) RESP_LIT_BULK(4, "ROLE");
    upstream_ask(up, role, sizeof(role) - 1, role_answered, NULL,
                 UP_ASK_SETUP | UP_ASK_REFUSAL | UP_ASK_LARGE);
}

static const char *watch_why_no_address(vp_server *srv)
{
    return sentinel_error(srv);
}

/* A demoted primary answers writes -READONLY: passed on, and the sentinels
 * asked again. */
static int watch_error_reply(upstream_conn *up, const up_entry *e, const char *p, size_t n)
{
    (void)e;
    if (n > 9 && memcmp(p, "-READONLY", 9) == 0) sentinel_recheck(up->srv, "a reply said -READONLY");
    return 0;
}

static const upstream_watch sentinel_watch = {.opened = watch_opened,
                                              .why_no_address = watch_why_no_address,
                                              .trouble = sentinel_recheck,
                                              .error_reply = watch_error_reply};

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
    srv->upstream_watch = &sentinel_watch;
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
    link_drop(&s->ask);
    link_drop(&s->sub);
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

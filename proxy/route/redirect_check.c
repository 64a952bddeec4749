/* redirect_check.c - redirects held until the replying node's CLUSTER
 * NODES confirms them (redirect_check.h). */
#include "proxy/route/redirect_check.h"

#include <stdlib.h>
#include <string.h>

#include "protocol/resp_write.h"
#include "proxy/buffer.h"
#include "proxy/log.h"
#include "proxy/route/nodesview.h"
#include "proxy/route/route.h"
#include "proxy/upstream/upstream.h"

typedef struct held {
    struct held *next;
    up_entry e; /* as kept (its client, its slot, its kind) */
    upstream_node *from;
    upstream_conn *asked; /* the check it waits for; NULL: the next one of `from` */
    redirect r;           /* r.host points into bytes */
    rcheck_want w;        /* w.probe points into bytes */
    int probe_index;      /* its EXISTS's place among the check's; -1: none */
    int keys_present;     /* the EXISTS found every key */
    size_t reqlen, errlen, size;
    char bytes[]; /* the request, the error, the host, the probe */
} held;

/* The checks of one node: the one in flight, when the last started. */
typedef struct check_node {
    struct check_node *next;
    upstream_node *node;
    upstream_conn *up;
    uint64_t started;
    int ever;
    int probes_sent, probes_got; /* the EXISTS of the check in flight, answered before CLUSTER NODES */
} check_node;

struct rcheck_q {
    vp_server *srv;
    rcheck_follow_fn follow;
    held *list; /* unordered: few at a time */
    check_node *nodes;
    int nheld;
    size_t held_bytes;
};

rcheck_q *rcheck_new(vp_server *srv, rcheck_follow_fn follow)
{
    rcheck_q *q = vp_malloc(sizeof(*q));
    memset(q, 0, sizeof(*q));
    q->srv = srv;
    q->follow = follow;
    return q;
}

void rcheck_free(rcheck_q *q)
{
    if (!q) return;
    held *hn;
    for (held *h = q->list; h; h = hn) {
        hn = h->next;
        free(h);
    }
    check_node *cn;
    for (check_node *n = q->nodes; n; n = cn) {
        cn = n->next;
        if (n->up) upstream_close(n->up);
        free(n);
    }
    free(q);
}

static check_node *node_of(rcheck_q *q, upstream_node *node)
{
    for (check_node *n = q->nodes; n; n = n->next)
        if (n->node == node) return n;
    check_node *n = vp_malloc(sizeof(*n));
    memset(n, 0, sizeof(*n));
    n->node = node;
    n->next = q->nodes;
    q->nodes = n;
    return n;
}

static int waiting(const rcheck_q *q, const upstream_node *node)
{
    for (const held *h = q->list; h; h = h->next)
        if (h->from == node && !h->asked) return 1;
    return 0;
}

/* Ask the node for its view, on a connection of the check's own: every
 * redirect from it held until now waits for this answer. */
/* A check's connection: its answers and its failure go to the queue. */
static void check_answered(upstream_conn *up, void *arg, const char *p, size_t n)
{
    rcheck_answered(arg, up, p, n);
}

static void check_failed(upstream_conn *up, void *arg, const char *why)
{
    rcheck_failed(arg, up, why);
}

static const upstream_owner check_owner = {.failed = check_failed, .lost = check_failed};

static void check_start(rcheck_q *q, check_node *n, uint64_t now)
{
    static const char nodes_cmd[] = RESP_LIT_ARRAY(2) RESP_LIT_BULK(7, "CLUSTER") RESP_LIT_BULK(5, "NODES");
    upstream_conn *up = upstream_open(q->srv, n->node, NULL, &check_owner, q);
    n->up = up;
    n->started = now;
    n->ever = 1;
    n->probes_sent = n->probes_got = 0;
    for (held *h = q->list; h; h = h->next) {
        if (h->from != n->node || h->asked) continue;
        h->asked = up;
        if (!h->w.probelen) continue;
        upstream_ask(up, h->w.probe, h->w.probelen, check_answered, q, UP_ASK_LARGE);
        h->probe_index = n->probes_sent++;
    }
    upstream_ask(up, nodes_cmd, sizeof(nodes_cmd) - 1, check_answered, q,
                 UP_ASK_LARGE); /* last: it decides */
    q->srv->stats.cluster_checks++;
    vp_log(VP_LOG_DEBUG, "cluster: asking %s for its view of a redirect", n->node->addr);
}

static int check_due(const check_node *n, uint64_t now)
{
    return !n->up && (!n->ever || now >= n->started + RCHECK_MIN_INTERVAL_MS);
}

/* Would holding `size` more bytes for client c pass its own share
 * (RCHECK_CLIENT_HELD, RCHECK_CLIENT_BYTES)? One client pipelining forged
 * redirects then fills its share, not the whole budget: the others' held
 * redirects still fit. A walk of the list: at most RCHECK_MAX_HELD. */
static int rcheck_client_over(const rcheck_q *q, const struct client_session *c, size_t size)
{
    int n = 0;
    size_t bytes = size;
    for (const held *h = q->list; h; h = h->next)
        if (h->e.client == c) {
            n++;
            bytes += h->size;
        }
    return n >= RCHECK_CLIENT_HELD || bytes > RCHECK_CLIENT_BYTES;
}

int rcheck_hold(rcheck_q *q, upstream_node *from, const up_entry *e, const char *req, size_t reqlen,
                const char *err, size_t errlen, const redirect *r, const rcheck_want *w)
{
    size_t size = sizeof(held) + reqlen + errlen + r->hostlen + w->probelen;
    if (!e->client || q->nheld >= RCHECK_MAX_HELD || q->held_bytes + size > RCHECK_MAX_BYTES) return 0;
    if (rcheck_client_over(q, e->client, size)) return 0;
    held *h = vp_malloc(size);
    memset(h, 0, sizeof(*h));
    h->e = *e;
    h->from = from;
    h->r = *r;
    h->w = *w;
    h->reqlen = reqlen;
    h->errlen = errlen;
    h->size = size;
    memcpy(h->bytes, req, reqlen);
    memcpy(h->bytes + reqlen, err, errlen);
    if (r->hostlen) memcpy(h->bytes + reqlen + errlen, r->host, r->hostlen);
    h->r.host = h->bytes + reqlen + errlen;
    if (w->probelen) memcpy(h->bytes + reqlen + errlen + r->hostlen, w->probe, w->probelen);
    h->w.probe = h->bytes + reqlen + errlen + r->hostlen;
    h->probe_index = -1;
    h->next = q->list;
    q->list = h;
    q->nheld++;
    q->held_bytes += size;
    uint64_t now = uv_now(q->srv->loop);
    check_node *n = node_of(q, from);
    if (check_due(n, now)) check_start(q, n, now);
    return 1;
}

/* Take the next redirect waiting for check `up` off the list. */
static held *take(rcheck_q *q, const upstream_conn *up)
{
    for (held **pp = &q->list; *pp; pp = &(*pp)->next) {
        held *h = *pp;
        if (h->asked != up) continue;
        *pp = h->next;
        q->nheld--;
        q->held_bytes -= h->size;
        return h;
    }
    return NULL;
}

/* Is the redirect the cluster's, as the replying node sees it now? The
 * view's part of the answer (nodesview.h), which walks the view. */
static int view_agrees(const nview *v, const held *h)
{
    const redirect *r = &h->r;
    if (r->kind == REDIRECT_TRYAGAIN) return h->w.script && nview_moving(v, h->w.slot);
    char id[NVIEW_ID_LEN + 1];
    if (!nview_find(v, r->host, r->hostlen, r->port, id)) return 0; /* no node of the cluster */
    if (!h->w.script) return 1;
    if (r->kind == REDIRECT_MOVED) return nview_serves(v, id, r->slot);
    return nview_migrating_to(v, r->slot, id);
}

/* The view's verdicts of one check, by (kind, script, slot, target): the
 * redirects held from one node are mostly alike (a migration's -ASKs, a
 * script's forgery pipelined), and each verdict walks the whole view
 * (thousands of slot ranges on a node whose slots are fragmented): asked
 * once per distinct question, not once per held redirect. */
#define VERDICTS 32
#define VERDICT_HOST 256
typedef struct verdict {
    redirect_kind kind;
    int script, slot, port, agrees;
    size_t hostlen;
    char host[VERDICT_HOST];
} verdict;

typedef struct verdicts {
    verdict v[VERDICTS];
    int n, next; /* past VERDICTS, the oldest are replaced */
} verdicts;

/* The question a held redirect asks of the view (TRYAGAIN: its slot). */
static verdict question_of(const held *h)
{
    verdict q;
    memset(&q, 0, sizeof(q));
    q.kind = h->r.kind;
    q.script = h->w.script;
    if (q.kind == REDIRECT_TRYAGAIN) {
        q.slot = h->w.slot;
        return q;
    }
    q.slot = h->r.slot;
    q.port = h->r.port;
    q.hostlen = h->r.hostlen;
    if (q.hostlen <= VERDICT_HOST) memcpy(q.host, h->r.host, q.hostlen);
    return q;
}

static int same_question(const verdict *a, const verdict *b)
{
    return a->kind == b->kind && a->script == b->script && a->slot == b->slot && a->port == b->port &&
           a->hostlen == b->hostlen && memcmp(a->host, b->host, a->hostlen) == 0;
}

static int agrees(const nview *v, const held *h, verdicts *memo)
{
    if (h->w.script && h->keys_present) return 0; /* it ran: Redis would not have redirected it */
    verdict q = question_of(h);
    if (q.hostlen > VERDICT_HOST) return view_agrees(v, h); /* no such host: not kept */
    for (int i = 0; i < memo->n; i++)
        if (same_question(&memo->v[i], &q)) return memo->v[i].agrees;
    q.agrees = view_agrees(v, h);
    int i = memo->n < VERDICTS ? memo->n++ : memo->next++ % VERDICTS;
    memo->v[i] = q;
    return q.agrees;
}

/* One held redirect decided: followed, or its error to its client. */
static void decide(rcheck_q *q, held *h, const nview *v, verdicts *memo)
{
    vp_server *srv = q->srv;
    struct client_session *c = h->e.client;
    if (!c) return; /* gone: nothing is sent for it */
    if (v && agrees(v, h, memo) && q->follow(srv, h->from, &h->e, h->bytes, h->reqlen, &h->r)) return;
    srv->stats.cluster_refused++;
    vp_log(VP_LOG_VERBOSE, "cluster: a reply from %s reading %.*s was not followed: %s", h->from->addr,
           (int)(h->errlen > 2 ? h->errlen - 2 : h->errlen), h->bytes + h->reqlen,
           v ? "the node's view does not agree" : "the node's view could not be read");
    upstream_clients()->reply(c, h->e.seq, h->bytes + h->reqlen, h->errlen, 1);
    upstream_clients()->touch(c);
    /* The client's output points at the error in h, freed next: written
     * (or copied) now. */
    route_session()->flush_touched(srv);
}

/* Every redirect waiting for check `up`, decided with view v (NULL: none).
 * One at a time off the list: a client a decision closes is detached from
 * the ones still there. */
static void decide_all(rcheck_q *q, const upstream_conn *up, const nview *v)
{
    held *h;
    verdicts *memo = v ? vp_malloc(sizeof(*memo)) : NULL; /* once per check: ~9 KiB */
    if (memo) memo->n = memo->next = 0;
    while ((h = take(q, up))) {
        decide(q, h, v, memo);
        free(h);
    }
    free(memo);
}

static check_node *node_checking(rcheck_q *q, const upstream_conn *up)
{
    for (check_node *n = q->nodes; n; n = n->next)
        if (n->up == up) return n;
    return NULL;
}

/* ":<n>\r\n": n; else -1 (an -ASK, a -MOVED: not every key is there). */
static long long integer_reply(const char *p, size_t n)
{
    if (n < 4 || p[0] != ':') return -1;
    long long v = 0;
    for (size_t i = 1; i < n - 2; i++) {
        if (p[i] < '0' || p[i] > '9' || v > 1000000000) return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

/* The answer to the EXISTS of the next held redirect that sent one. */
static void probe_answered(rcheck_q *q, check_node *cn, const char *p, size_t n)
{
    int index = cn->probes_got++;
    for (held *h = q->list; h; h = h->next)
        if (h->asked == cn->up && h->probe_index == index) {
            h->keys_present = integer_reply(p, n) == h->w.nkeys;
            return;
        }
}

int rcheck_answered(rcheck_q *q, upstream_conn *up, const char *p, size_t n)
{
    check_node *cn = q ? node_checking(q, up) : NULL;
    if (!cn) return 0;
    if (cn->probes_got < cn->probes_sent) {
        probe_answered(q, cn, p, n);
        return 1;
    }
    cn->up = NULL;
    nview v;
    int ok = nview_from_reply(&v, p, n) == 0;
    if (!ok)
        vp_log(VP_LOG_WARNING, "cluster: %s answered CLUSTER NODES with %.*s", cn->node->addr,
               (int)(n > 80 ? 80 : n), p);
    decide_all(q, up, ok ? &v : NULL);
    upstream_close(up);
    return 1;
}

int rcheck_failed(rcheck_q *q, upstream_conn *up, const char *why)
{
    check_node *cn = q ? node_checking(q, up) : NULL;
    if (!cn) return 0;
    cn->up = NULL;
    vp_log(VP_LOG_WARNING, "cluster: no CLUSTER NODES from %s to check a redirect: %s", cn->node->addr, why);
    decide_all(q, up, NULL);
    return 1;
}

void rcheck_tick(rcheck_q *q, uint64_t now)
{
    if (!q) return;
    uint64_t limit = (uint64_t)q->srv->conf.connect_timeout_ms + RCHECK_ANSWER_MS;
    for (check_node *n = q->nodes; n; n = n->next) {
        if (n->up && now - n->started > limit) {
            upstream_conn *up = n->up;
            n->up = NULL;
            vp_log(VP_LOG_WARNING, "cluster: no CLUSTER NODES from %s in time to check a redirect",
                   n->node->addr);
            decide_all(q, up, NULL);
            upstream_close(up);
        }
        if (check_due(n, now) && waiting(q, n->node)) check_start(q, n, now);
    }
}

void rcheck_detach_client(rcheck_q *q, struct client_session *c)
{
    if (!q) return;
    for (held *h = q->list; h; h = h->next)
        if (h->e.client == c) h->e.client = NULL;
}

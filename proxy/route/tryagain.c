/* tryagain.c - a request answered -TRYAGAIN, held and sent again to the
 * same node after a short, doubling wait (tryagain.h). */
#include "proxy/route/tryagain.h"

#include <stdlib.h>
#include <string.h>

#include "proxy/buffer.h"
#include "proxy/log.h"
#include "proxy/route/route.h"
#include "proxy/upstream/upstream.h"

typedef struct held {
    struct held *next;
    up_entry e; /* as kept (its client, its slot, its kind), tries already counted */
    upstream_node *node;
    uint64_t due; /* uv_now */
    size_t len;
    char req[]; /* the request, as the client sent it (or as the proxy rewrote it) */
} held;

struct tryagain_q {
    vp_server *srv;
    uv_timer_t timer;
    held *list; /* unordered: few at a time (a migration's split keys) */
};

tryagain_q *tryagain_new(vp_server *srv)
{
    tryagain_q *q = vp_malloc(sizeof(*q));
    memset(q, 0, sizeof(*q));
    q->srv = srv;
    uv_timer_init(srv->loop, &q->timer);
    q->timer.data = q;
    return q;
}

static void tryagain_closed(uv_handle_t *h)
{
    free(h->data);
}

void tryagain_free(tryagain_q *q)
{
    if (!q) return;
    held *next;
    for (held *h = q->list; h; h = next) {
        next = h->next;
        free(h);
    }
    q->list = NULL;
    uv_timer_stop(&q->timer);
    uv_close((uv_handle_t *)&q->timer, tryagain_closed);
}

static void tryagain_arm(tryagain_q *q);

/* Send the due ones again; the timer for the next. */
static void tryagain_due(uv_timer_t *t)
{
    tryagain_q *q = t->data;
    vp_server *srv = q->srv;
    uint64_t now = uv_now(srv->loop);
    held **pp = &q->list;
    while (*pp) {
        held *h = *pp;
        if (h->due > now) {
            pp = &h->next;
            continue;
        }
        *pp = h->next;
        struct client_session *c = h->e.client;
        if (c) {
            upstream_conn *to = upstream_shared(srv, h->node, upstream_clients()->id(c));
            if (h->e.kind == UP_VERB && h->e.verb >= upstream_verbs(to)->count) {
                /* A reload dropped the verb meanwhile: it cannot be sent. */
                static const char gone[] = "-TRYAGAIN Multiple keys request during rehashing of slot\r\n";
                upstream_clients()->reply(c, h->e.seq, gone, sizeof(gone) - 1, 1);
                upstream_clients()->touch(c);
            } else {
                upstream_resend(to, &h->e, h->req, h->len, h->e.asked);
            }
        }
        free(h);
    }
    route_session()->flush_touched(srv);
    tryagain_arm(q);
}

static void tryagain_arm(tryagain_q *q)
{
    if (!q->list) return;
    uint64_t first = q->list->due;
    for (held *h = q->list->next; h; h = h->next)
        if (h->due < first) first = h->due;
    uint64_t now = uv_now(q->srv->loop);
    uv_timer_start(&q->timer, tryagain_due, first > now ? first - now : 0, 0);
}

int tryagain_hold(tryagain_q *q, upstream_node *node, const up_entry *e, const char *req, size_t n)
{
    if (!q || !e->client || e->tries >= TRYAGAIN_TRIES) return 0;
    held *h = vp_malloc(sizeof(*h) + n);
    h->e = *e;
    h->e.tries = (unsigned char)(e->tries + 1);
    h->node = node;
    h->due = uv_now(q->srv->loop) + ((uint64_t)TRYAGAIN_FIRST_MS << e->tries);
    h->len = n;
    memcpy(h->req, req, n);
    h->next = q->list;
    q->list = h;
    q->srv->stats.cluster_tryagain++;
    vp_log(VP_LOG_DEBUG, "cluster: -TRYAGAIN from %s: sending again in %u ms (try %d of %d)", node->addr,
           (unsigned)(TRYAGAIN_FIRST_MS << e->tries), e->tries + 1, TRYAGAIN_TRIES);
    tryagain_arm(q);
    return 1;
}

void tryagain_detach_client(tryagain_q *q, struct client_session *c)
{
    if (!q) return;
    for (held *h = q->list; h; h = h->next)
        if (h->e.client == c) h->e.client = NULL;
}

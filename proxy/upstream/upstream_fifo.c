/* upstream_fifo.c - what an upstream connection owes: a ring of entries,
 * one per reply the node will send, in send order (upstream.h's up_entry).
 * Pushed as requests are queued (the counting in upstream_count.c), popped
 * as replies are handed on (upstream.c); other modules look through
 * upstream_owed/upstream_owed_at and never index the ring. The ring's first
 * size comes from a pool and goes back when nothing is owed. */
#include "proxy/upstream/upstream.h"

#include <stdlib.h>
#include <string.h>

#include "proxy/pool.h"
#include "proxy/upstream/upstream_internal.h"

/* ---- the FIFO of what the upstream owes ---- */

/* The first ring comes from a pool and goes back when nothing is owed, so
 * an idle connection holds none; one grown past it is kept, as before. */
#define UP_FIFO_FIRST 64

static vp_pool up_fifo_rings = VP_POOL_INIT("fifo_rings", UP_FIFO_FIRST * sizeof(up_entry));

static void up_fifo_ring_free(upstream_conn *up)
{
    if (up->fifo_cap == UP_FIFO_FIRST)
        vp_pool_put(&up_fifo_rings, up->fifo);
    else
        free(up->fifo);
    up->fifo = NULL;
    up->fifo_cap = up->fifo_head = 0;
}

void up_fifo_free(upstream_conn *up)
{
    if (up->fifo) up_fifo_ring_free(up);
}

/* The entry for the next request; its reply goes to the pending reply the client
 * is about to queue. */
up_entry *up_fifo_push(upstream_conn *up, struct client_session *c, up_entry_kind kind)
{
    if (up->fifo_len == up->fifo_cap) {
        size_t ncap = up->fifo_cap ? up->fifo_cap * 2 : UP_FIFO_FIRST;
        up_entry *n = up->fifo_cap ? vp_malloc(ncap * sizeof(*n)) : vp_pool_get(&up_fifo_rings);
        for (size_t i = 0; i < up->fifo_len; i++)
            n[i] = up->fifo[(up->fifo_head + i) % up->fifo_cap];
        if (up->fifo) up_fifo_ring_free(up);
        up->fifo = n;
        up->fifo_cap = ncap;
        up->fifo_head = 0;
    }
    up_entry *e = &up->fifo[(up->fifo_head + up->fifo_len) % up->fifo_cap];
    *e = (up_entry){.client = c,
                    .seq = c ? upstream_clients()->next_seq(c) : 0,
                    .kind = kind,
                    .verb = -1,
                    .sent = up->sent++};
    up->fifo_len++;
    if (kind == UP_VERB) up->verbs_in_flight++;
    return e;
}

up_entry *up_fifo_head(upstream_conn *up)
{
    return up->fifo_len ? &up->fifo[up->fifo_head] : NULL;
}

size_t upstream_owed(const upstream_conn *up)
{
    return up->fifo_len;
}

const up_entry *upstream_owed_at(const upstream_conn *up, size_t i)
{
    return &up->fifo[(up->fifo_head + i) % up->fifo_cap];
}

up_entry *up_fifo_at(upstream_conn *up, size_t i)
{
    return &up->fifo[(up->fifo_head + i) % up->fifo_cap];
}

/* Done with the oldest entry: the bytes it kept go too. */
void up_fifo_pop(upstream_conn *up)
{
    up_entry_kind kind = up->fifo[up->fifo_head].kind;
    if (kind == UP_VERB) up->verbs_in_flight--;
    if (kind == UP_HELLO || kind == UP_SERVER_PROBE) up_server_entry_done(up, &up->fifo[up->fifo_head]);
    up->kept_head += up->fifo[up->fifo_head].keep;
    if (up->kept_head >= up->kept.len) up->kept.len = up->kept_head = 0;
    unsigned long long done = up->fifo[up->fifo_head].sent + 1; /* entries answered */
    while (up->nbatches && done >= up->batch_end[0]) {
        up->nbatches--;
        memmove(up->batch_end, up->batch_end + 1, (size_t)up->nbatches * sizeof(up->batch_end[0]));
    }
    up->fifo_head = (up->fifo_head + 1) % up->fifo_cap;
    up->fifo_len--;
    if (up->fifo_len == 0 && up->fifo_cap == UP_FIFO_FIRST) up_fifo_ring_free(up);
}

void upstream_detach_client(upstream_conn *up, struct client_session *c)
{
    for (size_t i = 0; i < up->fifo_len; i++) {
        up_entry *e = up_fifo_at(up, i);
        if (e->client == c) e->client = NULL;
    }
}

void upstream_answer_as(upstream_conn *up, unsigned long long seq)
{
    if (up->fifo_len) up_fifo_last(up)->seq = seq;
}

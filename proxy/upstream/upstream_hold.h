/* upstream_hold.h - the batch hold of a shared upstream connection.
 *
 * Redis pays for every read it does (the wakeup, the read, the reply's
 * write) as well as for every command: behind a proxy that writes each loop
 * iteration's gathering at once, 50 clients at -P 1 reach Redis 3.4
 * commands per read, where twemproxy, slower, hands it 9.5; Redis then
 * spends up to twice the CPU per request (bench/RESULTS.md, "batch hold").
 *
 * So a small batch may wait a little for more, but only when much more is
 * due: when, in the last millisecond, at least UP_HOLD_MIN_CLIENTS clients
 * sent on this connection, and at least twice as many as the batch holds
 * so far. One client alone, or a few taking turns, is never held: their
 * requests go at once, as before. A held batch goes when `shared-batch-hold` microseconds have
 * passed since the prepare phase first saw it, or sooner once it reaches
 * the early-write size (8 KiB, upstream.c). `shared-batch-hold 0` turns it
 * off.
 *
 * Cost on the hot path: per command forwarded on a shared connection, three
 * comparisons and at most two increments (up_hold_note); per loop
 * iteration, one clock read while a batch is held. The wait itself is a
 * timerfd (libuv's timers count milliseconds), one per process. */
#ifndef VP_UPSTREAM_HOLD_H
#define VP_UPSTREAM_HOLD_H

#include <stdint.h>
#include <uv.h>

#include "proxy/session/client.h"
#include "proxy/upstream/upstream.h"

/* A batch waits only while at least this many clients sent on the
 * connection in the last millisecond, and at least twice as many as the
 * batch holds so far: a few clients taking turns gain little from waiting
 * for each other and would pay the wait on every request. */
#define UP_HOLD_MIN_CLIENTS 8

/* A client's request joins the shared connection's queue. */
static inline void up_hold_note(upstream_conn *up, client_session *c)
{
    uint64_t ms = uv_now(up->srv->loop); /* (cached per loop iteration) */
    if (ms != up->hold_window) {
        up->hold_prev = ms == up->hold_window + 1 ? up->hold_cur : 0;
        up->hold_cur = 0;
        up->hold_window = ms;
    }
    /* In cluster mode a client sends on several nodes' connections, whose
     * windows and batch numbers are their own: what it noted on another
     * one says nothing about this one (else a client that sent to node A
     * in this millisecond went uncounted at B, and B's batches, a third of
     * the traffic each, were held even less often than their rate asks). */
    int other = c->hold_up != up;
    c->hold_up = up;
    if (other || c->hold_window != ms) {
        c->hold_window = ms;
        up->hold_cur++;
    }
    if (other || c->hold_batch != up->hold_batch) {
        c->hold_batch = up->hold_batch;
        up->hold_batch_clients++;
    }
}

/* Should the queue wait instead of being written now? Arms the wake-up. */
int up_hold_wait(upstream_conn *up, size_t early_bytes);
/* The queue was written: a new batch starts gathering. */
static inline void up_hold_written(upstream_conn *up)
{
    up->hold_t0 = 0;
    up->hold_batch++;
    up->hold_batch_clients = 0;
}
/* At the stop: the timerfd's handle and descriptor. */
void up_hold_close(void);

#endif

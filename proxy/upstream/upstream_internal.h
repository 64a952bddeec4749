/* upstream_internal.h - what upstream.c and upstream_verbs.c share: the
 * FIFO of entries and the verb hooks reply routing calls. Not for clients. */
#ifndef VP_UPSTREAM_INTERNAL_H
#define VP_UPSTREAM_INTERNAL_H

#include <stdint.h>
#include <uv.h>

#include "proxy/upstream/upstream_node.h"
#include "proxy/upstream/upstream.h"

/* The address this connection goes to, for logs and errors (its node's;
 * the configured upstream for one made without a node, as unit tests do). */
static inline const char *up_addr(const upstream_conn *up)
{
    return up->node ? up->node->addr : up->srv->conf.upstream;
}
/* The entry for the next request; its reply goes to the pending reply the client is
 * about to queue. */
up_entry *up_fifo_push(upstream_conn *up, struct client_session *c, up_entry_kind kind);
/* The i-th entry owed (0: the oldest), and the newest; changeable. */
up_entry *up_fifo_at(upstream_conn *up, size_t i);
static inline up_entry *up_fifo_last(upstream_conn *up)
{
    return up_fifo_at(up, up->fifo_len - 1);
}
/* Done with the oldest entry: the bytes it kept go too. */
void up_fifo_pop(upstream_conn *up);

/* Its verbs sent with a table a reload replaced are all answered: drop
 * that table (upstream.h's vt) for the live one. */
void up_release_vt(upstream_conn *up);

/* Frees what up_check_script_load kept of refused SCRIPT LOADs. */
void up_forget_load_errors(upstream_conn *up);
/* The refusal of the SCRIPT LOAD of verb `verb`'s script, if its last
 * load was refused: the reply (an error line) to give in place of the
 * NOSCRIPT its call met, with its length; NULL if none. */
const char *up_load_error(const upstream_conn *up, int verb, size_t *len);
/* Our SCRIPT LOAD's answer (an ask's; arg: the verb's index times
 * VERB_DIALECTS plus the dialect it was sent in, as a pointer): checked
 * against that dialect's SHA-1; a refusal is kept for the calls behind it. */
void up_check_script_load(upstream_conn *up, void *arg, const char *p, size_t n);
/* The entry of an ask whose request the caller queues itself (a static
 * buffer, not copied): as upstream_ask otherwise. */
void up_push_ask(upstream_conn *up, upstream_answer_fn answer, void *arg, unsigned flags);
/* The oldest entry, a verb, was answered NOSCRIPT: reload and send it again
 * (1), or 0 when that is no longer possible and the reply must go on. */
int up_retry_verb(upstream_conn *up);
/* Queue a SCRIPT LOAD of v's script before the next request unless this
 * connection has it (upstream_verbs.c). */
struct verb_def;
void up_ensure_script(upstream_conn *up, const struct verb_def *v);
/* The oldest entry `e`, counted, is answered (with retries_in_flight set):
 * note that a command ran before the retries of its client's earlier
 * verbs, and count a retried verb's reordering once it is answered. */
void up_note_answered(upstream_conn *up, const up_entry *e);

/* The answer to our ACL GETUSER default (upstream_defauth.c). */
void up_check_default_user(upstream_conn *up, void *arg, const char *p, size_t n);

/* The answer to our server probe (its entry's `sent`), or to a client's
 * HELLO (the oldest entry), whole in p..p+n (upstream_server.c). */
void up_check_server(upstream_conn *up, unsigned long long sent, const char *p, size_t n);
void up_check_hello(upstream_conn *up, const up_entry *e, const char *p, size_t n);
/* The oldest entry, about to be popped, is a probe or HELLO: nothing
 * waits for it any more. */
void up_server_entry_done(upstream_conn *up, const up_entry *e);

/* The answer to a SCRIPT FLUSH forwarded through the proxy (its entry's
 * flush_epoch) has come: see upstream_scripts_flushed. */
void up_script_flush_answered(upstream_conn *up, unsigned epoch);
/* The shared connections' owner the session gave (upstream_set_session);
 * its client ops are upstream_clients(). */
const upstream_owner *up_shared_owner_of(void);

/* After Redis refused a wrapped transaction out of memory, the connection
 * wraps none for this long (upstream_forward_transaction). */
#define UP_WRAP_OOM_PAUSE_MS 1000

typedef enum up_route {
    ROUTE_REPLY,        /* the client's oldest pending reply */
    ROUTE_PUSH,         /* straight to the client, out of band / uncounted */
    ROUTE_SWALLOW,      /* our barrier's answer: releases the pending reply */
    ROUTE_SWALLOW_KEEP, /* the +RESET of a closing barrier: the PING's answer follows */
    ROUTE_RESET,        /* a +RESET that ends raw mode */
    ROUTE_ASK,          /* the answer to an ask of the proxy's own: to its callback */
    ROUTE_NOSCRIPT,     /* a verb's NOSCRIPT: reload and send it again */
    ROUTE_SERVER,       /* our HELLO's answer: read, dropped */
    ROUTE_REDIRECT,     /* taken back by the watch (a cluster redirect): sent again */
    ROUTE_WRAP_REFUSED, /* a wrapped transaction refused: its client's command goes again (wrap_refused) */
    ROUTE_WRAP_OPEN /* a wrapped EXEC Redis does not know: its transaction stays open, the connection goes */
} up_route;

/* ---- shared between upstream's own files ---- */
/* The oldest entry, NULL when nothing is owed; the ring freed with its
 * connection (upstream_fifo.c). */
void up_fifo_free(upstream_conn *up);
up_entry *up_fifo_head(upstream_conn *up);
/* Where the reply starting at p goes (`whole`: p..p+n is all of it), and
 * the closing barrier's token (upstream_count.c). */
up_route up_decide(upstream_conn *up, const char *p, size_t n, int whole);
void up_make_barrier(upstream_conn *up);
/* A connect that did not succeed / a loss mid-session: the connection
 * closes and its owner is told (upstream.c). */
void up_fail(upstream_conn *up, const char *reason);
void up_lost(upstream_conn *up, const char *reason);
/* The write and read callbacks' halves the setup starts (upstream.c). */
struct outq;
void up_on_written(struct outq *q, int status);
void up_read_start(upstream_conn *up);
/* Every connection open (upstream_setup.c), linked through all_next. */
upstream_conn *up_open_list(void);
/* The shared pool's (upstream_pool.c): write a shared connection's queue;
 * close a retired one that owes nothing; the RESET that lets a shared
 * connection in for good once Redis stopped requiring AUTH; off its
 * node's entry. */
void up_shared_flush(upstream_conn *up);
void up_retired_check(upstream_conn *up);
void up_reauth_after_read(upstream_conn *up);
void up_leave_node(upstream_conn *up);

/* ---- the batch hold of a shared connection (upstream_hold.c) ----
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
/* A batch waits only while at least this many clients sent on the
 * connection in the last millisecond, and at least twice as many as the
 * batch holds so far: a few clients taking turns gain little from waiting
 * for each other and would pay the wait on every request. */
#define UP_HOLD_MIN_CLIENTS 8

/* A client's request joins the shared connection's queue. */
static inline void up_hold_note(upstream_conn *up, struct client_session *c)
{
    upstream_hold_mark *m = upstream_clients()->hold_mark(c);
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
    int other = m->up != up;
    m->up = up;
    if (other || m->window != ms) {
        m->window = ms;
        up->hold_cur++;
    }
    if (other || m->batch != up->hold_batch) {
        m->batch = up->hold_batch;
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

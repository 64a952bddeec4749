/* upstream_internal.h - what upstream.c and upstream_verbs.c share: the
 * FIFO of entries and the verb hooks reply routing calls. Not for clients. */
#ifndef VP_UPSTREAM_INTERNAL_H
#define VP_UPSTREAM_INTERNAL_H

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

/* Our SCRIPT LOAD's answer (an ask's; arg: the verb's index, as a
 * pointer): checked, never shown. */
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
/* What the session gave (upstream_set_session), for upstream's own files. */
const upstream_client_ops *up_clients_of(void);
const upstream_owner *up_shared_owner_of(void);

typedef enum up_route {
    ROUTE_REPLY,        /* the client's oldest pending reply */
    ROUTE_PUSH,         /* straight to the client, out of band / uncounted */
    ROUTE_SWALLOW,      /* our barrier's answer: releases the pending reply */
    ROUTE_SWALLOW_KEEP, /* the +RESET of a closing barrier: the PING's answer follows */
    ROUTE_RESET,        /* a +RESET that ends raw mode */
    ROUTE_ASK,          /* the answer to an ask of the proxy's own: to its callback */
    ROUTE_NOSCRIPT,     /* a verb's NOSCRIPT: reload and send it again */
    ROUTE_SERVER,       /* our HELLO's answer: read, dropped */
    ROUTE_REDIRECT      /* taken back by the watch (a cluster redirect): sent again */
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

#endif

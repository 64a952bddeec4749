/* upstream_internal.h - what upstream.c and upstream_verbs.c share: the
 * FIFO of entries and the verb hooks reply routing calls. Not for clients. */
#ifndef VP_UPSTREAM_INTERNAL_H
#define VP_UPSTREAM_INTERNAL_H

#include "proxy/route/route.h"
#include "proxy/upstream/upstream.h"

/* The entry for the next request; its reply goes to the slot the client is
 * about to queue. */
/* The address this connection goes to, for logs and errors (its node's;
 * the configured upstream for one made without a node, as unit tests do). */
static inline const char *up_addr(const upstream_conn *up)
{
    return up->node ? up->node->addr : up->srv->conf.upstream;
}
up_entry *up_fifo_push(upstream_conn *up, struct client_session *c, up_entry_kind kind);
/* Done with the oldest entry: the bytes it kept go too. */
void up_fifo_pop(upstream_conn *up);

/* Its verbs sent with a table a reload replaced are all answered: drop
 * that table (upstream.h's vt) for the live one. */
void up_release_vt(upstream_conn *up);

/* Our SCRIPT LOAD's answer (the oldest entry, `e`) in p..p+n: check it. */
void up_check_script_load(upstream_conn *up, const up_entry *e, const char *p, size_t n);
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

/* The answer to our output-limit probe (the oldest entry) in p..p+n:
 * decide whether clients may share (upstream_outlimit.c). */
void up_check_output_limit(upstream_conn *up, const char *p, size_t n);
void up_check_default_user(upstream_conn *up, const char *p, size_t n);

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
/* The side connection failed to connect / was lost (upstream_side.c). */
void up_side_failed(upstream_conn *up, const char *why);
void up_side_lost(upstream_conn *up, const char *why);

#endif

/* client_internal.h - what the files of the client session share
 * (client.c, client_input.c, client_dispatch.c, client_reply.c,
 * client_upstream.c, client_route.c): one module, one prefix, split along
 * its seams. Not for other modules: they use client.h. */
#ifndef VP_CLIENT_INTERNAL_H
#define VP_CLIENT_INTERNAL_H

#include "proxy/session/client.h"

/* What the proxy holds for a client on a shared connection is bounded by
 * how many replies it may be owed there at once (client_share_window): a
 * shared connection cannot stop reading for one client, so every reply it
 * owes is read and held until that client takes it. A new client may be
 * owed CLIENT_SHARED_FIRST_WINDOW replies. A client is not read further
 * while it is owed its window, until half are in; if by then the kernel
 * took every reply it was given, the window doubles, up to
 * CLIENT_SHARED_MAX_OWED (client_round_end). */
#define CLIENT_SHARED_FIRST_WINDOW 16
#define CLIENT_SHARED_MAX_OWED 256

/* A reply this big on a shared connection holds up every reply behind it
 * (Redis would interleave it with other clients' writes): its client goes
 * one request at a time and moves to a connection of its own at its next
 * command. */
#define CLIENT_BIG_REPLY (64 * 1024)

/* How client_admit lets a request go. */
typedef enum client_admission {
    ADMIT_FORWARD,  /* it may go upstream (a streamed one: from its first bytes on) */
    ADMIT_ANSWERED, /* a whole request the proxy answered itself */
    ADMIT_WHOLE     /* the head of a large request: the proxy must read all of it first */
} client_admission;

/* client.c */
void client_check_paused(client_session *c);

/* client_dispatch.c */
client_admission client_admit(client_session *c, int argc, const resp_arg *argv, int whole);
void client_answer(client_session *c, const char *reply, size_t n, const char *err, int arity);
void client_answer_error_line(client_session *c, const char *line, size_t n);
int client_auth_gate(client_session *c, int argc, const resp_arg *argv);
void client_dispatch(client_session *c, const resp_arg *argv, int argc, const char *p, size_t n);
int client_not_admitted(client_session *c, const char *where);
int client_verb_must_wait(client_session *c, int argc, const resp_arg *argv);
int client_split_part(vp_server *srv, int argc, const resp_arg *argv, vp_buf *out);
int client_call_conveyor(client_session *c, int argc, const resp_arg *argv, const char *p, size_t n);
/* client_block.c: blocking pops on conveyor keys. */
void client_block_begin(client_session *c, int argc, const resp_arg *argv, const char *p, size_t n);
/* The pending reply s of a waiting pop is whole: 1 when it was the wait
 * marker and went (the pop goes again later), 0 when it is the answer. */
int client_block_answered(client_session *c, client_pending *s);
void client_block_forget(client_session *c);
/* Send what was forwarded for the client now (its own connection is
 * flushed; a shared one writes early). -1: the write failed (the client
 * was told). */
int client_send_upstream(client_session *c);
/* Read and parse again what waited behind a blocking pop. */
void client_resume(client_session *c);
void pending_drop_data(client_pending *s);

/* client_input.c */
void client_http_request(client_session *c);
int client_idle(client_session *c);
void client_input_ended(client_session *c);
void client_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
int client_parse_batch(client_session *c, size_t limit);
void client_process_input(client_session *c);
void client_protocol_error(client_session *c, const char *msg);
void client_start_reading(client_session *c);
void client_stop_reading(client_session *c);
void client_stream_partial(client_session *c, const char *p, size_t avail);
void client_unpause(client_session *c);

/* client_reply.c */
void client_add_error(client_session *c, const char *fmt, ...);
void client_close_gone(client_session *c);
void client_flush(client_session *c);
void client_learn_upstream_auth(client_session *c, const char *p, size_t n);
void client_maybe_finish(client_session *c);
void client_on_written(outq *q, int status);
void client_queue_local(client_session *c, const char *p, size_t n);
void client_release_ready(client_session *c);
void pending_append(client_pending *s, const char *p, size_t n);
/* A wrapped read's reply is in (client_pending's wrap; seq names it): the
 * command's reply, its scores made positions, replaces the key and EXEC's
 * reply (client_dispatch.c). 1 when the read went again instead (a
 * checked read whose script the server lacked): it is still waited for. */
int client_conveyor_unwrap(client_session *c, unsigned long long seq, client_pending *s);
/* Redis refused the transaction of a wrapped read (upstream_client_ops'
 * wrap_refused): the read goes again as its script, for the same pending
 * reply (client_dispatch.c). */
void client_conveyor_wrap_refused(client_session *c, unsigned long long seq, upstream_conn *up, const char *p,
                                  size_t n);
/* What the scratch a wrapped read's reply is rewritten in keeps between
 * replies. */
#define CLIENT_WRAP_SCRATCH_KEEP (64 * 1024)
client_pending *pending_at(client_session *c, size_t i);
void pending_pop(client_session *c);
client_pending *pending_push(client_session *c, client_pending_kind kind);
void pending_ring_release(client_session *c);

/* client_route.c */
int client_route(client_session *c, int argc, const resp_arg *argv);

/* client_upstream.c */
upstream_conn *client_connect(client_session *c);
void client_leave_retired(client_session *c);
void client_mark_upstream_noauth(client_session *c);
int client_may_share(client_session *c, int argc, const resp_arg *argv);
int client_owed_released(const client_session *c);
void client_refuse_no_descriptor(client_session *c);
void client_release_upstream(client_session *c);
size_t client_share_window(const client_session *c);
const char *client_upstream_name(const client_session *c);
void client_want_own(client_session *c);

/* ---- client_nodes.c: a client's own connections to several cluster
 * nodes (cluster mode) ----
 *
 * A client on a connection of its own holds state there. Some state
 * follows the client to every node: the protocol and user of HELLO and
 * AUTH, CLIENT TRACKING, CLIENT NO-EVICT / NO-TOUCH, CLIENT SETNAME and
 * SETINFO. It is kept here (the
 * requests, in order) and sent first on the client's own connection to
 * each node it goes to, so a RESP3 or tracking client reaches every slot
 * as it would one Redis: one own connection per (client, node), each kept
 * while the client lives (Redis's tracking invalidations and RESP3 pushes
 * still arrive on them). Other state cannot follow: subscriptions (a
 * cluster propagates PUBLISH, so subscribing on every node would deliver
 * each message as many times), MONITOR (one node's commands),
 * CLIENT REPLY OFF|SKIP, SCRIPT DEBUG, replication: it pins the client
 * to its node (client.c answers other nodes' keys with an error). A
 * transaction (MULTI, WATCH) pins it until EXEC, DISCARD or UNWATCH.
 * Other commands that need an own connection once (CONFIG SET, WAIT,
 * CLIENT LIST, ...) leave no state.
 *
 * Owns the kept requests and the parked connections; client.c calls it
 * from its routing (client_route) and at release. Allocates only when a
 * client sets state or goes to another node. */
struct client_session;
struct upstream_conn;
struct upstream_node;

/* At most this many state requests are kept; a client that sends more
 * is pinned to its node (cnodes_note says CNODES_PINNED). */
#define CNODES_MAX_STATE 16
#define CNODES_MAX_STATE_BYTES 4096

typedef enum cnodes_effect {
    CNODES_NONE,    /* leaves nothing on the connection */
    CNODES_FOLLOWS, /* state kept here, sent to every node the client goes to */
    CNODES_PINNED,  /* state that cannot follow: the client stays on this node */
    CNODES_TX,      /* a transaction or WATCH begins */
    CNODES_TX_END,  /* EXEC, DISCARD (UNWATCH outside MULTI) */
    CNODES_RESET    /* RESET: nothing left anywhere (the parked connections get one too) */
} cnodes_effect;

/* What a command sent on the client's own connection leaves there (in
 * MULTI nothing but its end: queued commands run at EXEC). */
cnodes_effect cnodes_effect_of(int argc, const resp_arg *argv, int in_multi);
/* Keep a CNODES_FOLLOWS request (argv as parsed). Returns 0, or -1 when
 * too much is kept already: then the client is pinned. */
int cnodes_keep(struct client_session *c, int argc, const resp_arg *argv);
/* Forget every kept request (RESET). */
void cnodes_forget(struct client_session *c);
/* Does the client have state to take to another node? */
int cnodes_has_state(const struct client_session *c);
/* Leave c->up (its own connection, owing nothing) parked for its node,
 * and take the client's own connection to `node`: a parked one, or a new
 * one with the kept state sent first. Returns it (c->up), or NULL when
 * no descriptor is left for a new one. */
struct upstream_conn *cnodes_switch(struct client_session *c, struct upstream_node *node);
/* Close every parked connection (the client leaves, or resets). */
void cnodes_close_parked(struct client_session *c);
/* The client is gone: everything goes. */
void cnodes_free(struct client_session *c);

#endif

/* client_nodes.h - a client's own connections to several cluster nodes
 * (cluster mode).
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
#ifndef VP_CLIENT_NODES_H
#define VP_CLIENT_NODES_H

#include "protocol/resp_request.h"

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

/* route.h - which upstream node, and which connection to it, a client uses.
 *
 * Routing sits between the client session and the upstream connections:
 * command -> slot -> node -> connection. Today only the last two steps
 * exist, and there is one node: the `upstream` (standalone) or the primary
 * the sentinels name (sentinel mode, whose address moves). A later cluster
 * mode has one node per primary (slotmap.h), and a command's plan
 * (route_plan.h) picks the node; standalone stays the one-node case of the
 * same table, not a second code path.
 *
 * Routing decides only when a client picks or changes its connection
 * (client_connect): the client then keeps its c->up pointer, and the
 * per-command path (parse, forward, frame) never looks here.
 *
 * Cluster mode (next): route_init builds one node per primary from the
 * slot map (slotmap.h); a refresh (topology.h) adds nodes and retires the
 * connections of the ones gone, which stay allocated until those close. A
 * client's command is planned (route_plan.h) before it is forwarded: a
 * SINGLE plan's slot names the node; while that node is the one c->up goes
 * to, nothing changes per command (the common case, and standalone's only
 * case). Another node: the client takes that node's shared connection (or
 * its own to it), its reply slots keeping the order across connections
 * (client_reply fills slots by seq, whichever connection answers). SPLIT
 * and FANOUT plans send sub-commands to several nodes and merge into one
 * slot. -MOVED/-ASK (redirect.h) are handled where replies are framed.
 *
 * Lifetime: the table is built once at start (route_init) and freed at
 * exit (route_free), after every connection is gone. A node is never freed
 * before: connections point at theirs (upstream_conn.node), retired ones
 * included. */
#ifndef VP_ROUTE_H
#define VP_ROUTE_H

#include "proxy/config.h"

struct vp_server;
struct client_session;
struct upstream_conn;

#include "proxy/upstream/upstream_node.h"

/* The node table: one node, built from the settings. */
void route_init(struct vp_server *srv);
void route_free(struct vp_server *srv);
/* The node at host:port (host not NUL-terminated), added when new (cluster
 * mode: a seed, a primary of the slot map, a node a redirect names).
 * NULL for a host too long. */
upstream_node *route_node_add(struct vp_server *srv, const char *host, size_t hostlen, int port);
/* The node that holds every key today: standalone's `upstream`, sentinel
 * mode's primary (its address "" until a sentinel names one). */
upstream_node *route_primary(struct vp_server *srv);
/* The node a client's connection goes to. */
upstream_node *route_node_for(struct vp_server *srv, struct client_session *c);
/* A shared connection for this client (upstream_shared on its node). */
struct upstream_conn *route_shared_for(struct vp_server *srv, struct client_session *c);
/* Sentinel mode: the primary moved (srv->conf.upstream* already name the
 * new one): the node takes that address and its connections are retired
 * (srv->primary_moved: client_primary_moved). */
void route_node_moved(struct vp_server *srv, upstream_node *n);
/* A reload replaced the settings: the node takes the address they name
 * (a standalone `upstream` may have changed; the caller retires the
 * connections). */
void route_config_changed(struct vp_server *srv);

#endif

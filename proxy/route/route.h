/* route.h - which upstream node, and which connection to it, a client uses.
 *
 * Routing sits between the client session and the upstream connections:
 * command -> hash slot -> node -> connection. The node table has one node
 * in standalone mode (the `upstream`) and in sentinel mode (the primary the
 * sentinels name, whose address moves: route_node_moved), and one node per
 * primary in cluster mode (cluster.h: the slot map, slotmap.h, and the
 * nodes redirects name); standalone is the one-node case of the same table,
 * not a second code path. The node itself, with the connections the pool
 * keeps to it, is upstream_node (proxy/upstream/upstream_node.h).
 *
 * Routing decides only when a client picks or changes its connection
 * (client_connect): the client then keeps its c->up pointer, and the
 * per-command path (parse, forward, frame) never looks here. In cluster
 * mode a client's command is planned (route_plan.h) before it is
 * forwarded: a SINGLE plan's hash slot names the node; while that node is
 * the one c->up goes to, nothing changes per command. Another node: the
 * client takes that node's shared connection (or its own to it), its
 * pending replies keeping the order across connections (client_reply fills
 * them by sequence number, whichever connection answers). SPLIT and FANOUT
 * plans send sub-commands to several nodes and merge into one reply.
 * -MOVED, -ASK and -TRYAGAIN are taken back through the upstream watch
 * (cluster.c, upstream.h's upstream_watch) as replies are framed.
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

#include "proxy/buffer.h"
#include "proxy/upstream/upstream_node.h"

/* The node table: one node, built from the settings. */
void route_init(struct vp_server *srv);
void route_free(struct vp_server *srv);
/* The node at host:port (host not NUL-terminated), added when new (cluster
 * mode: a seed, a primary of the slot map, a node a redirect names).
 * NULL for a host too long. */
upstream_node *route_node_add(struct vp_server *srv, const char *host, size_t hostlen, int port);
/* The first node: standalone's `upstream`, sentinel mode's primary (its
 * address "" until a sentinel names one), cluster mode's first seed. */
upstream_node *route_primary(struct vp_server *srv);
/* The node a client's connection goes to: cluster mode, `current` (the
 * node of its command at hand, c->route_node) or any primary before its
 * first; else the one node. */
upstream_node *route_node_for(struct vp_server *srv, upstream_node *current);
/* A shared connection for the client with this id (upstream_shared on its
 * node, route_node_for). */
struct upstream_conn *route_shared_for(struct vp_server *srv, upstream_node *current, unsigned long long id);

/* What the route layer asks of the client sessions, given once by the
 * session (client_register): write the clients given replies (now, or in
 * the loop's check phase for those still owed by other nodes), and tell
 * the clients waiting for the cluster's first slot map. A client's own
 * replies go through upstream_clients(). */
typedef struct route_session_ops {
    void (*flush_touched)(struct vp_server *srv);
    void (*flush_deferred)(struct vp_server *srv);
    void (*cluster_ready)(struct vp_server *srv);
    void (*cluster_failed)(struct vp_server *srv, const char *why);
    /* Cluster mode: one part of a command split by slot (DEL k1 k3, ...),
     * argv as the part's own arguments. Writes the request to send
     * instead to out and returns 1 (a DEL of conveyor keys, which must
     * delete their offset keys too: proxy/conveyor/conveyor.h), or returns
     * 0 to send the part as it is. NULL: every part as it is. */
    int (*split_part)(struct vp_server *srv, int argc, const resp_arg *argv, vp_buf *out);
} route_session_ops;
void route_set_session(const route_session_ops *ops);
/* Cluster mode: the node a client goes to before its first command is
 * routed (cluster_start gives cluster_any_node). */
void route_set_any_node(upstream_node *(*any)(struct vp_server *srv));
const route_session_ops *route_session(void);
/* Sentinel mode: the primary moved (srv->conf.upstream* already name the
 * new one): the node takes that address and its connections are retired
 * (srv->primary_moved: client_primary_moved). */
void route_node_moved(struct vp_server *srv, upstream_node *n);
/* A reload replaced the settings: the node takes the address they name
 * (a standalone `upstream` may have changed; the caller retires the
 * connections). */
void route_config_changed(struct vp_server *srv);

#endif

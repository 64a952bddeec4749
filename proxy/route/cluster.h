/* cluster.h - Redis Cluster as the upstream (upstream-mode cluster).
 *
 * The proxy presents one standalone Redis; behind it each primary of the
 * cluster is a node of the route table (route.h), with its own shared
 * connections. This module owns what cluster mode adds to standalone:
 *
 *   - the slot map (slotmap.h) and the slot -> node table the router
 *     reads per command;
 *   - fetching the map (CLUSTER SLOTS, on a connection of its own to one
 *     node at a time: the seeds, then the primaries it learned) under the
 *     refresh policy of topology.h: at start, every TOPO_PERIOD_MS, after a
 *     -MOVED, a -CLUSTERDOWN or a lost node connection; coalesced, at most
 *     one a second, and a smaller map only once a second fetch confirms it;
 *   - planning a client's command (route_plan.h): the node of its slot,
 *     an answer of the proxy's own (PING, CLUSTER KEYSLOT, CROSSSLOT, ...),
 *     or "wait for the map";
 *   - redirects (redirect.h): a -MOVED or -ASK answering a request on a
 *     shared connection is never shown to the client: the request (kept by
 *     the connection until its reply is in) goes again to the node named,
 *     its reply still for the same place in the client's queue, so the
 *     client's replies stay in its request order. At most
 *     CLUSTER_MAX_REDIRECTS per request; the last error then goes on. A
 *     -TRYAGAIN (a multi-key command while its slot migrates) sends it
 *     again to the same node after a short, doubling wait (tryagain.h).
 *     That at once only for Redis's own redirects (the reply of a command
 *     that runs no script: a script's error is any text it likes) naming a
 *     node the proxy learned from the cluster (a seed, a node of the map,
 *     one a check confirmed); a script's redirect Redis could have given,
 *     and Redis's naming another address, wait for the replying node's
 *     CLUSTER NODES (redirect_check.h); the rest go to the client.
 *
 * Lifetime: cluster_start at start (after route_init) when upstream-mode is
 * cluster; cluster_stop at exit, before the nodes are freed. Allocates when
 * a map is fetched or a node is first seen, never per command. */
#ifndef VP_CLUSTER_H
#define VP_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "protocol/resp_request.h"

struct vp_server;
struct upstream_node;
struct upstream_conn;
struct up_entry;
struct verb_def;

#define CLUSTER_MAX_REDIRECTS 5

typedef struct cluster_state cluster_state; /* cluster.c's */

typedef enum cluster_route {
    CLUSTER_GO,     /* send it to `node` */
    CLUSTER_ANSWER, /* answer `reply` (len bytes, static or in the decision) in order */
    CLUSTER_WAIT,   /* no slot map yet: hold the command (cluster_map_ready resumes) */
    CLUSTER_SPLIT   /* nparts requests to several nodes (cluster_part), one reply made of theirs
                       (cluster_part_merge): a split or fanned-out command */
} cluster_route;

typedef struct cluster_decision {
    cluster_route kind;
    struct upstream_node *node; /* GO: NULL for "any node will do" */
    int slot;                   /* GO: the command's slot, -1 when it has no key */
    int error;                  /* ANSWER: the reply is an error (metrics) */
    int nparts;                 /* SPLIT */
    int fanout;                 /* SPLIT: every primary (not keys split by slot) */
    const char *reply;
    size_t len;
    char buf[128]; /* for a reply made here (an integer, an echoed argument's header) */
} cluster_decision;

/* Start: the seeds become nodes, the first fetch starts. 0, or -1 with a
 * line logged. */
int cluster_start(struct vp_server *srv);
void cluster_stop(struct vp_server *srv);
/* Has a slot map been accepted (clients can be routed)? */
int cluster_ready(const struct vp_server *srv);
/* What to do with one command of a client (argv as parsed; v: the verb it
 * names, NULL for a Redis command). Pure but for the map's lookups. */
void cluster_plan(struct vp_server *srv, int argc, const resp_arg *argv, const struct verb_def *v,
                  cluster_decision *d);
/* After a CLUSTER_SPLIT decision: part i's node and request (a RESP
 * multibulk in the plan's scratch: valid until the next cluster_plan). */
void cluster_part(struct vp_server *srv, int i, struct upstream_node **node, const char **req, size_t *len);
/* After a CLUSTER_SPLIT decision: a new merge for its parts' replies (the
 * caller's, cmerge_free). */
struct cmerge *cluster_part_merge(struct vp_server *srv);
/* The node serving the first covered slot: where keyless commands go. */
struct upstream_node *cluster_any_node(struct vp_server *srv);

/* ---- the watch over upstream connections (cluster_start sets it) ---- */
/* `e` (the oldest entry of `up`, a request it kept: req..req+reqlen) was
 * answered with the error p..p+n, a -MOVED, -ASK or -TRYAGAIN: send it
 * where it says, now or once checked. 1: sent or held (the caller drops
 * the entry and the error); 0: the error goes to the client. */
int cluster_redirect(struct upstream_conn *up, const struct up_entry *e, const char *req, size_t reqlen,
                     const char *p, size_t n);
/* A -MOVED the proxy does not follow (a client's own connection passes
 * it on): the map is fetched again soon (never changed on the word of a
 * reply that may be a script's). */
void cluster_note_redirect(struct upstream_conn *up, const char *p, size_t n);
/* A reply that says the map may be stale (-CLUSTERDOWN), or a node
 * connection that failed: refresh soon. */
void cluster_suspect(struct vp_server *srv, const char *why);
/* Is this reply a redirect the proxy follows (MOVED, ASK, TRYAGAIN)? */
int cluster_is_redirect(const char *p, size_t n);
/* The client is gone: nothing held for it is sent (tryagain.h). */
struct client_session;
void cluster_detach_client(struct vp_server *srv, struct client_session *c);

#endif

/* cluster.h - a real Redis Cluster for tests: 3 primaries + 3 replicas.
 *
 * Six redis-servers (servers.h: free ports, temp dirs, killed with the
 * test) with --cluster-enabled yes, each with its nodes.conf in its own dir,
 * a cluster bus port of its own (--cluster-port: port + 10000 may be taken
 * or out of range; Redis 6.2, which lacks it, gets port + 10000, claimed)
 * and a low cluster-node-timeout; then `redis-cli --cluster
 * create ... --cluster-replicas 1 --cluster-yes`, and a wait (deadline,
 * polling) until every node says cluster_state:ok, 16384 slots assigned,
 * the same owner for every slot, and every replica attached. Creation
 * takes a few seconds.
 *
 * Helpers look at the cluster with hiredis straight on the nodes' plain
 * ports (no TLS). Errors are returned (false / -1 / NULL) with a line on
 * stderr; the test decides. */
#ifndef VT_CLUSTER_H
#define VT_CLUSTER_H

#include <hiredis/hiredis.h>
#include <stdbool.h>

#include "tests/support/servers.h"

#define VT_CLUSTER_NODES 6
/* No story waits for a node to be judged failed (failovers are CLUSTER
 * FAILOVER), so the timeout only has to outlast a starved node: at 2000 ms a
 * node held off the CPU for two seconds on a loaded 2-core CI machine woke up
 * believing itself in the minority and answered -CLUSTERDOWN. */
#define VT_CLUSTER_NODE_TIMEOUT_MS 15000
#define VT_CLUSTER_DEADLINE_MS 20000 /* creation, a failover, a slot's move to be seen by all */

typedef struct vt_cluster {
    vt_redis *node[VT_CLUSTER_NODES];
    int bus_port[VT_CLUSTER_NODES];
    char id[VT_CLUSTER_NODES][41]; /* CLUSTER MYID */
    char cli_log[160];             /* redis-cli --cluster create's output (in node 0's dir) */
} vt_cluster;

/* Start six nodes and create the cluster; NULL on failure. */
vt_cluster *vt_cluster_start(void);
/* The same with a TLS port beside each plain one (node[i]->tls_port, the
 * test certificates), the cluster bus and replication over TLS: a client
 * on a TLS port is told the TLS ports (CLUSTER SLOTS, -MOVED), the helpers
 * below still use the plain ones. */
vt_cluster *vt_cluster_start_tls(void);
/* With another cluster-node-timeout: a story about a node's death (not a
 * CLUSTER FAILOVER) needs it judged failed within its deadline. (Lowered
 * by CONFIG SET after the start instead, the killed primary's replica was
 * not promoted in our one try, reason not found.) */
vt_cluster *vt_cluster_start_node_timeout(int ms);
void vt_cluster_free(vt_cluster *c);
/* One node as the cluster's are started (cluster-enabled, its bus port in
 * *bus), belonging to no cluster yet: for a story that adds one (CLUSTER
 * MEET). NULL if none would start. */
vt_redis *vt_cluster_node_start(int *bus, bool tls, int node_timeout_ms);

/* Every node: cluster_state:ok, all slots assigned, and every node's
 * CLUSTER SLOTS agrees with node 0's and names all six nodes (each
 * replica attached). */
bool vt_cluster_wait_ok(vt_cluster *c, int timeout_ms);
/* One command on node i, on a connection of its own (closed after);
 * the reply (the caller frees it), or NULL. */
redisReply *vt_cluster_node_cmd(vt_cluster *c, int i, const char *fmt, ...);
/* The index of the node on `port`, or -1. */
int vt_cluster_index_of_port(const vt_cluster *c, int port);
/* Is node i a primary now (ROLE)? */
bool vt_cluster_is_primary(vt_cluster *c, int i);
/* The node (index) serving a slot, as node `asked` sees it (CLUSTER
 * SLOTS); -1 when none does. */
int vt_cluster_slot_owner(vt_cluster *c, int asked, int slot);
/* CLUSTER KEYSLOT of a key (asked of node 0). */
int vt_cluster_keyslot(vt_cluster *c, const char *key);
/* The node serving a key's slot (as node 0 sees it). */
int vt_cluster_key_node(vt_cluster *c, const char *key);

/* Moving a slot as redis-cli --cluster reshard does, in steps a test can
 * stop between: begin (the target IMPORTING, the source MIGRATING: keys
 * not yet moved are served by the source, moved ones answer -ASK), migrate
 * the keys (MIGRATE ... KEYS, in batches), finish (SETSLOT NODE on both,
 * then on every primary; waits until every node sees the new owner). */
bool vt_cluster_move_begin(vt_cluster *c, int slot, int to);
bool vt_cluster_move_keys(vt_cluster *c, int slot, int to);
bool vt_cluster_move_finish(vt_cluster *c, int slot, int to);
/* All three. */
bool vt_cluster_move_slot(vt_cluster *c, int slot, int to);

/* Fragment the slot map: nslots of the first primary's slots (1, 3, 5,
 * ..., empty ones) given to another primary (DELSLOTS, ADDSLOTS and
 * BUMPEPOCH there), so CLUSTER SLOTS lists about 2 * nslots ranges. Waits
 * until every node agrees; *to (if not NULL) is the new owner. */
bool vt_cluster_fragment(vt_cluster *c, int nslots, int *to);

/* CLUSTER FAILOVER on replica i; waits until it is a primary and every
 * node agrees on the slots again. */
bool vt_cluster_failover(vt_cluster *c, int replica);

#endif

/* sentinel.h - a Sentinel-managed Redis for integration tests: a primary, a
 * replica (`replicaof`) and 3 sentinels (`redis-server sentinel.conf
 * --sentinel`), real processes on free ports in temp dirs (servers.h),
 * with failover timings small enough for a test: down-after-milliseconds
 * VT_SENTINEL_DOWN_AFTER_MS, failover-timeout VT_SENTINEL_FAILOVER_TIMEOUT_MS,
 * quorum 2. Everything is plaintext (the suite has no TLS variant).
 *
 * Ownership: the set is the test's; vt_sentinel_free() stops everything.
 * Errors are returned (NULL / false / -1) with a line on stderr. */
#ifndef VT_SENTINEL_H
#define VT_SENTINEL_H

#include <stdbool.h>

#include "tests/support/servers.h"

#define VT_SENTINEL_MASTER "vtmaster"
#define VT_SENTINEL_DOWN_AFTER_MS 1000
#define VT_SENTINEL_FAILOVER_TIMEOUT_MS 4000
#define VT_SENTINELS 3

typedef struct vt_sentinel_set {
    vt_redis *nodes[2]; /* [0] starts as the primary, [1] as its replica */
    vt_redis *sentinels[VT_SENTINELS];
    char pass[64]; /* the sentinels' requirepass ("" none) */
} vt_sentinel_set;

/* Start the nodes and the sentinels and wait until every sentinel knows
 * the replica and the other sentinels (a failover can then succeed).
 * sentinel_pass: the sentinels' own password (NULL: none). */
vt_sentinel_set *vt_sentinel_start(const char *sentinel_pass);
/* The primary's port as sentinel `i` says (-1 if it cannot tell). */
int vt_sentinel_primary_port(vt_sentinel_set *s, int i);
/* SENTINEL MASTER of the sentinel on sentinel_port (one of the set's or
 * another): the primary's port and its config-epoch. false if it cannot
 * tell. */
bool vt_sentinel_master_at(vt_sentinel_set *s, int sentinel_port, int *port, long long *epoch);
/* A 4th sentinel, allocated (vt_redis_new) but not started: `sentinel
 * monitor` of the master at primary_port, alone (no other sentinel is told
 * of it, quorum 2: it can never fail anything over). Launched after that
 * node has died (vt_redis_launch), it has nobody to hear a failover from
 * and names that node with config-epoch 0 for good: a lagging sentinel.
 * The test frees it (vt_redis_free). */
vt_redis *vt_sentinel_new_lagging(vt_sentinel_set *s, int primary_port);
/* The node on that port (NULL if none). */
vt_redis *vt_sentinel_node(vt_sentinel_set *s, int port);
/* Does the node on `port` say ROLE master? */
bool vt_sentinel_is_master(int port);
/* SENTINEL FAILOVER, sent until a sentinel takes it (it refuses while no
 * replica is fit yet) within timeout_ms. */
bool vt_sentinel_failover(vt_sentinel_set *s, int timeout_ms);
/* Until every sentinel names a primary other than old_port, and that node
 * says ROLE master. Returns its port, or -1 at the timeout. */
int vt_sentinel_wait_switch(vt_sentinel_set *s, int old_port, int timeout_ms);
/* "--sentinel HOST:P" x3, "--sentinel-master NAME" as proxy flags
 * (NULL-terminated, into args, which has room for 16); host "127.0.0.1" or
 * a name ("localhost"). */
void vt_sentinel_proxy_args(const vt_sentinel_set *s, const char *host, const char **args,
                            char ports[VT_SENTINELS][32]);
void vt_sentinel_free(vt_sentinel_set *s);

#endif

/* slotmap.h - Redis Cluster's slot map: 16384 slots -> the primary serving
 * each, and the nodes (host:port, node id, replicas' primary).
 *
 * Built from a CLUSTER SLOTS reply (the raw RESP bytes, RESP2 or RESP3, as
 * the upstream connection framed them: parsed here with no other library),
 * and updated one slot at a time by -MOVED (redirect.h). The refresh policy
 * (when to fetch CLUSTER SLOTS again, and whether to accept what came) is
 * topology.h's. Node indexes are stable for a map's life: the router keeps
 * one connection per node index and a new map is mapped onto the
 * connections by host:port.
 *
 * Allocates (the node array), but only when a map is built or a MOVED names
 * a node not seen before: never per command. No libuv. */
#ifndef VP_SLOTMAP_H
#define VP_SLOTMAP_H

#include <stddef.h>
#include <stdint.h>

#include "proxy/route/hashslot.h"

#define SLOTMAP_NONE 0xFFFF  /* a slot no node serves */
#define SLOTMAP_HOST_MAX 256 /* a DNS name's 253 bytes, NUL included */
#define SLOTMAP_ID_LEN 40

typedef struct slotmap_node {
    char host[SLOTMAP_HOST_MAX];
    int port;
    char id[SLOTMAP_ID_LEN + 1]; /* "" when unknown (a node first named by a MOVED) */
    int primary;                 /* -1: a primary; else the index of the primary it replicates */
} slotmap_node;

/* Owned by its user; slotmap_free releases the nodes. */
typedef struct slotmap {
    uint16_t slot[HASHSLOT_COUNT]; /* node index, or SLOTMAP_NONE */
    slotmap_node *nodes;
    int nnodes, cap;
    int covered; /* slots with a node */
} slotmap;

void slotmap_init(slotmap *m);
void slotmap_free(slotmap *m);
/* Hand over b's contents to a (a's old ones freed); b is left empty. */
void slotmap_replace(slotmap *a, slotmap *b);

/* Fill an empty map from the bytes of one whole CLUSTER SLOTS reply.
 * `from_host` is the host the reply came from: a node whose endpoint is
 * NULL or "" is reached there (Redis's "unknown endpoint"); a node whose
 * endpoint is "?" cannot be reached and its slots stay uncovered. 0, or -1
 * with err filled (an error reply, not the reply's shape, overlapping
 * ranges, out of memory); the map is then left empty. */
int slotmap_parse_slots(slotmap *m, const char *reply, size_t len, const char *from_host, char *err,
                        size_t errlen);

/* The node at host:port, or -1. */
int slotmap_find(const slotmap *m, const char *host, size_t hostlen, int port);
/* The node at host:port, added (as a primary) when new. -1: out of memory
 * or a host too long. */
int slotmap_add(slotmap *m, const char *host, size_t hostlen, int port);
/* The node serving a slot, or -1. */
static inline int slotmap_owner(const slotmap *m, int slot)
{
    return m->slot[slot] == SLOTMAP_NONE ? -1 : m->slot[slot];
}
/* -MOVED slot host:port: that slot is that node's now, and that node is a
 * primary. The node's index, or -1 (the map unchanged). */
int slotmap_moved(slotmap *m, int slot, const char *host, size_t hostlen, int port);

#endif

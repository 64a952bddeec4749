/* cluster_merge.h - one reply made of the replies of a split or fanned-out
 * command (cluster mode).
 *
 * A command route_plan.h splits by slot (MGET, DEL, ... over several slots)
 * or fans out over every primary (DBSIZE, KEYS, SCRIPT LOAD, ...) goes to
 * the nodes as several parts; each part's reply is collected here, whole,
 * as it comes (in any order: each part is on its node's connection), and
 * once every part is in, the client's one reply is made by the plan's merge
 * rule (rplan_merge): MGET's values back in key order, integers summed,
 * arrays concatenated, ... A SCAN goes to one node at a time: its one part's
 * reply gets the cursor that carries the node (rplan_scan_encode).
 *
 * The replies merged are RESP2 (parts go on shared connections, which
 * speak RESP2). An error in a part: MGET puts it in each of that part's
 * keys' places; the other rules answer the first error in part order
 * (ONE_OK and ANY only when no part succeeded).
 *
 * Pure: no libuv, no I/O. Allocates the state once per command and each
 * part's reply as it grows (a split command is not the hot path). */
#ifndef VP_CLUSTER_MERGE_H
#define VP_CLUSTER_MERGE_H

#include <stddef.h>

#include "proxy/buffer.h"
#include "proxy/route/route_plan.h"

typedef struct cmerge cmerge;

/* A merge of nparts (>= 1) parts by `rule`. For RPLAN_MERGE_MGET, nkeys
 * and, per key in the command's order, its part (key_part) and its place
 * among that part's keys (key_pos); copied. */
cmerge *cmerge_new(rplan_merge rule, int nparts, int nkeys, const int *key_part, const int *key_pos);
/* RPLAN_MERGE_SCAN: the part went to node ordinal `node` of `nnodes`. */
void cmerge_set_scan(cmerge *m, unsigned node, unsigned nnodes);
/* n bytes of part `part`'s reply (done: its last piece). Returns 1 once
 * every part is whole. A part already whole ignores more. */
int cmerge_add(cmerge *m, int part, const char *p, size_t n, int done);
/* The client's reply, appended to out (every part whole). */
void cmerge_result(const cmerge *m, vp_buf *out);
/* How many parts are still owed. */
int cmerge_owed(const cmerge *m);
void cmerge_free(cmerge *m);

#endif

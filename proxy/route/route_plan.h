/* route_plan.h - what the proxy does with one command in cluster mode.
 *
 * The second stage of cluster routing (command -> keys -> slot -> node):
 * from a command's arguments and its command table entry (cmd_table_lookup), one
 * plan:
 *   SINGLE  every key in one slot: send it as it is to that slot's node;
 *   ANY     no key (or arguments Redis refuses: a node answers the error):
 *           any node will do;
 *   ERROR   keys in several slots for a command that cannot be split
 *           (MSETNX, RENAME, SUNIONSTORE, EVAL, ...): answer Redis's own
 *           CROSSSLOT error before anything is sent;
 *   SPLIT   MGET, DEL, UNLINK, EXISTS, TOUCH (and MSET with split_writes)
 *           over several slots: one sub-command per slot group, the keys
 *           in their original order, and a merge rule for the replies;
 *   FANOUT  keyless commands every primary must run (DBSIZE, KEYS,
 *           FLUSHALL, SCRIPT LOAD, SCAN, ...), with the merge rule;
 *   LOCAL   answered by the proxy itself (PING, ECHO, CLUSTER KEYSLOT,
 *           SELECT, READONLY, READWRITE, other CLUSTER subcommands).
 *
 * Pure: no libuv, no I/O, no allocation. The key arrays are the caller's
 * (rplan_space: a small one inline for the common case; for a command with
 * more keys than it holds the plan says RPLAN_NEED_SPACE with the count,
 * and the caller makes room for that many (never more than argc) and asks
 * again). Grouping keys by slot is O(keys) with a slot -> group table the
 * caller keeps once (rplan_scratch, 32 KiB, one per event loop). */
#ifndef VP_ROUTE_PLAN_H
#define VP_ROUTE_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "proxy/route/hashslot.h"
#include "proxy/route/route_keys.h"

/* Redis's error texts (cluster.c, server.c), with the RESP '-' and no CRLF. */
#define RPLAN_ERR_CROSSSLOT "-CROSSSLOT Keys in request don't hash to the same slot"
#define RPLAN_ERR_CLUSTER_DISABLED "-ERR This instance has cluster support disabled"
#define RPLAN_ERR_SELECT "-ERR SELECT is not allowed in cluster mode"
/* SELECT's index as Redis 7.0 parses it (getIntFromObjectOrReply) */
#define RPLAN_ERR_NOT_INTEGER "-ERR value is not an integer or out of range"
#define RPLAN_ERR_INT_RANGE "-ERR value is out of range, value must between -2147483648 and 2147483647"
#define RPLAN_ERR_CURSOR "-ERR invalid cursor"

typedef enum rplan_kind {
    RPLAN_SINGLE,
    RPLAN_ANY,
    RPLAN_ERROR,
    RPLAN_SPLIT,
    RPLAN_FANOUT,
    RPLAN_LOCAL,
    RPLAN_NEED_SPACE /* more keys than the rplan_space holds: plan.nkeys of them */
} rplan_kind;

/* How the replies of a SPLIT or FANOUT are made into the client's one. An
 * error reply from any part wins, except where said. */
typedef enum rplan_merge {
    RPLAN_MERGE_NONE,
    RPLAN_MERGE_MGET,   /* an array in key order: key k's reply is element pos[k] of group group[k]'s
                           array (an error for a whole group: that error in each of its keys' places) */
    RPLAN_MERGE_SUM,    /* integers summed (DEL, UNLINK, EXISTS, TOUCH, DBSIZE) */
    RPLAN_MERGE_ALL_OK, /* every part succeeded: the first part's reply (they agree: +OK, SCRIPT
                           LOAD's sha1); else the first error in part order (MSET, FLUSHALL, ...) */
    RPLAN_MERGE_CONCAT, /* arrays concatenated in node order (KEYS) */
    RPLAN_MERGE_AND,    /* arrays of 0/1 of one length: 1 at i where every node said 1 (SCRIPT EXISTS) */
    RPLAN_MERGE_OR,     /* ... where any node said 1 */
    RPLAN_MERGE_MIN,    /* the smallest integer */
    RPLAN_MERGE_MAX,    /* the largest integer */
    RPLAN_MERGE_ONE_OK, /* the first success; the first error when none succeeded (SCRIPT KILL) */
    RPLAN_MERGE_ANY,    /* the first non-nil reply in node order, nil when all are (RANDOMKEY) */
    RPLAN_MERGE_SCAN    /* not merged: one node at a time, the cursor carries it (rplan_scan_*) */
} rplan_merge;

/* What a LOCAL plan answers. */
typedef enum rplan_local {
    RPLAN_LOCAL_PONG,    /* PING: +PONG */
    RPLAN_LOCAL_ARG1,    /* PING msg, ECHO msg: argv[1] as a bulk string */
    RPLAN_LOCAL_OK,      /* SELECT 0, READONLY, READWRITE: +OK */
    RPLAN_LOCAL_INTEGER, /* CLUSTER KEYSLOT: plan.integer */
    RPLAN_LOCAL_ERROR    /* plan.error */
} rplan_local;

/* One SPLIT sub-command: the keys member[first .. first+count) (indices
 * into the key arrays, in their original order), all in `slot`. */
typedef struct rplan_group {
    int slot;
    int first;
    int count;
} rplan_group;

/* The caller's arrays for a command's keys, `cap` entries each (key k is
 * the k-th key in Redis's order). Owned by the caller; the plan points
 * into it and lives no longer than it. */
typedef struct rplan_space {
    int cap;
    int *argi;   /* key k's index into argv */
    int *slot;   /* key k's slot */
    int *group;  /* key k's group (SPLIT) */
    int *pos;    /* key k's place among its group's keys (SPLIT) */
    int *member; /* keys by group: groups[g] spans member[first .. first+count) */
    rplan_group *groups;
} rplan_space;

/* The bytes rplan_space_init needs for cap keys. */
size_t rplan_space_bytes(int cap);
/* Lay the arrays out in mem (rplan_space_bytes(cap) bytes, aligned for int). */
void rplan_space_init(rplan_space *s, int cap, void *mem);

/* Slot -> group while one command is grouped; every entry -1 between
 * commands (rplan_make puts back what it changed). */
typedef struct rplan_scratch {
    int16_t slot_group[HASHSLOT_COUNT];
} rplan_scratch;
void rplan_scratch_init(rplan_scratch *s);

/* rplan_make's options. */
#define RPLAN_SPLIT_WRITES 1u /* cluster-split-writes yes: MSET over several slots is split */

typedef struct rplan {
    rplan_kind kind;
    int slot;          /* SINGLE */
    const char *error; /* ERROR, LOCAL_ERROR: one of the RPLAN_ERR_* texts */
    rplan_local local; /* LOCAL */
    long long integer; /* LOCAL_INTEGER */
    rplan_merge merge; /* SPLIT, FANOUT */
    int step;          /* SPLIT: arguments per key (1; MSET's key value: 2) */
    int nkeys;         /* the command's keys (also for NEED_SPACE) */
    int ngroups;       /* SPLIT */
    const rplan_space *space;
} rplan;

/* The plan for argv (argc >= 1) whose command table entry is cmd (NULL: not
 * a Redis 7.0 command: ANY). Returns p->kind. */
rplan_kind rplan_make(rplan *p, const cmd_info *cmd, int argc, const char *const *argv, const size_t *lens,
                      unsigned opts, const rplan_space *space, rplan_scratch *scratch);

/* A SPLIT group's sub-command as argv indices: 0 (the command's name),
 * then each of its keys' `step` arguments in order. Writes at most cap;
 * returns the sub-command's argc. */
int rplan_group_args(const rplan *p, int g, int *idx, int cap);

/* SCAN over every primary. The client sees one cursor that carries the
 * node: the top RPLAN_SCAN_NODE_BITS bits are the node's ordinal (its place
 * in the caller's stable order of primaries, e.g. by lowest slot), the
 * rest the node's own cursor. A fresh scan ("0") starts at node 0 with
 * cursor 0; when node n answers cursor 0 the scan goes on at node n+1 with
 * cursor 0, and after the last node the client gets 0. Redis's cursors are
 * positions in a hash table far below 2^54, so they fit; a node answering
 * one that does not is an error, not a wrong scan. A topology change during
 * a scan may repeat or miss keys, as a resize does on one Redis. */
#define RPLAN_SCAN_NODE_BITS 10 /* up to 1024 primaries (Redis Cluster's advised maximum is 1000 nodes) */
#define RPLAN_SCAN_CURSOR_BITS (64 - RPLAN_SCAN_NODE_BITS)

/* Parse a client's cursor (decimal digits, as Redis's strtoul with its
 * checks, but no sign): 0 and (node, node_cursor), or -1 (RPLAN_ERR_CURSOR). */
int rplan_scan_decode(const char *s, size_t len, unsigned *node, uint64_t *node_cursor);
/* The client's cursor after node `node` of `nnodes` answered node_cursor:
 * 0 and *out, or -1 when node_cursor is too big to carry. */
int rplan_scan_encode(unsigned node, uint64_t node_cursor, unsigned nnodes, uint64_t *out);

#endif

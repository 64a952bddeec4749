/* route_keys.h - where a Redis command's keys are, and how it may be routed.
 *
 * The first stage of cluster routing (command -> keys -> slot -> node): for
 * a command's arguments, the positions of its keys, found exactly as Redis
 * 7.0 finds them (db.c getKeysFromCommandWithSpecs, which cluster.c's
 * getNodeByQuery uses to route and to answer CROSSSLOT): the command's key
 * specs first, and the command's own key-finding procedure when a spec
 * cannot say (SORT ... STORE, MIGRATE ... KEYS, SET's variable flags, an
 * unparsable numkeys). The data is proxy/route/route_table.c, generated from a
 * real redis-server's COMMAND INFO (scripts/gen_route_table.py); the
 * command flags and request/response policy tips there say which commands
 * write, block, are pub/sub, admin, or fan out over every node.
 *
 * Pure: no libuv, no allocation, no I/O. Arguments are (pointer, length)
 * pairs as the request parser hands them over, not NUL-terminated. */
#ifndef VP_ROUTE_KEYS_H
#define VP_ROUTE_KEYS_H

#include <stddef.h>
#include <stdint.h>

/* Command flags (COMMAND INFO's flags), one bit each. */
#define RKEYS_CMD_WRITE (1ULL << 0)
#define RKEYS_CMD_READONLY (1ULL << 1)
#define RKEYS_CMD_DENYOOM (1ULL << 2)
#define RKEYS_CMD_MODULE (1ULL << 3)
#define RKEYS_CMD_ADMIN (1ULL << 4)
#define RKEYS_CMD_PUBSUB (1ULL << 5)
#define RKEYS_CMD_NOSCRIPT (1ULL << 6)
#define RKEYS_CMD_BLOCKING (1ULL << 7)
#define RKEYS_CMD_LOADING (1ULL << 8)
#define RKEYS_CMD_STALE (1ULL << 9)
#define RKEYS_CMD_SKIP_MONITOR (1ULL << 10)
#define RKEYS_CMD_SKIP_SLOWLOG (1ULL << 11)
#define RKEYS_CMD_ASKING (1ULL << 12)
#define RKEYS_CMD_FAST (1ULL << 13)
#define RKEYS_CMD_NO_AUTH (1ULL << 14)
#define RKEYS_CMD_MAY_REPLICATE (1ULL << 15)
#define RKEYS_CMD_NO_MANDATORY_KEYS (1ULL << 16)
#define RKEYS_CMD_NO_MULTI (1ULL << 17)
#define RKEYS_CMD_MOVABLEKEYS (1ULL << 18)
#define RKEYS_CMD_ALLOW_BUSY (1ULL << 19)
#define RKEYS_CMD_NO_ASYNC_LOADING (1ULL << 20)
/* COMMAND INFO's tips: how a cluster client sends a keyless command
 * (request_policy) and merges the replies (response_policy). */
#define RKEYS_TIP_NONDETERMINISTIC (1ULL << 32)
#define RKEYS_TIP_NONDETERMINISTIC_ORDER (1ULL << 33)
#define RKEYS_REQ_ALL_NODES (1ULL << 34)
#define RKEYS_REQ_ALL_SHARDS (1ULL << 35)
#define RKEYS_REQ_MULTI_SHARD (1ULL << 36)
#define RKEYS_REQ_SPECIAL (1ULL << 37)
#define RKEYS_RESP_ONE_SUCCEEDED (1ULL << 38)
#define RKEYS_RESP_ALL_SUCCEEDED (1ULL << 39)
#define RKEYS_RESP_AGG_LOGICAL_AND (1ULL << 40)
#define RKEYS_RESP_AGG_LOGICAL_OR (1ULL << 41)
#define RKEYS_RESP_AGG_MIN (1ULL << 42)
#define RKEYS_RESP_AGG_MAX (1ULL << 43)
#define RKEYS_RESP_AGG_SUM (1ULL << 44)
#define RKEYS_RESP_SPECIAL (1ULL << 45)

/* Key spec flags (how the command uses the keys one spec finds). */
#define RKEYS_KEY_RO (1u << 0)
#define RKEYS_KEY_RW (1u << 1)
#define RKEYS_KEY_OW (1u << 2)
#define RKEYS_KEY_RM (1u << 3)
#define RKEYS_KEY_ACCESS (1u << 4)
#define RKEYS_KEY_UPDATE (1u << 5)
#define RKEYS_KEY_INSERT (1u << 6)
#define RKEYS_KEY_DELETE (1u << 7)
#define RKEYS_KEY_NOT_KEY (1u << 8)
#define RKEYS_KEY_INCOMPLETE (1u << 9)
#define RKEYS_KEY_VARIABLE_FLAGS (1u << 10)

typedef enum rkeys_bs_type { RKEYS_BS_UNKNOWN, RKEYS_BS_INDEX, RKEYS_BS_KEYWORD } rkeys_bs_type;
typedef enum rkeys_fk_type { RKEYS_FK_UNKNOWN, RKEYS_FK_RANGE, RKEYS_FK_KEYNUM } rkeys_fk_type;

/* One key spec, as COMMAND INFO describes it. begin_search: the key
 * arguments start at `bs_arg` (INDEX) or after `keyword` searched from
 * argument `bs_arg` (KEYWORD; negative: from the end, backwards).
 * find_keys: RANGE {lastkey, keystep, limit}; KEYNUM {keynumidx, firstkey,
 * keystep}, relative to where the search began. */
typedef struct rkeys_spec {
    unsigned flags; /* RKEYS_KEY_* */
    rkeys_bs_type bs;
    int bs_arg;
    const char *keyword;
    rkeys_fk_type fk;
    int fk_arg[3];
} rkeys_spec;

/* Redis's own key-finding procedures (db.c), used where the specs fail or
 * have variable flags. */
typedef enum rkeys_proc {
    RKEYS_PROC_NONE,
    RKEYS_PROC_FIRST_ONLY,   /* argument 1 (SET, BITFIELD, SORT_RO) */
    RKEYS_PROC_NUMKEYS_AT_1, /* numkeys at 1, keys from 2 (ZUNION, LMPOP, SINTERCARD, ...) */
    RKEYS_PROC_NUMKEYS_AT_2, /* numkeys at 2, keys from 3 (EVAL, FCALL, BLMPOP, ...) */
    RKEYS_PROC_ZUNIONSTORE,  /* as NUMKEYS_AT_2, then the destination (argument 1) last */
    RKEYS_PROC_SORT,         /* argument 1, and the last STORE's key */
    RKEYS_PROC_MIGRATE,      /* argument 3, or those after KEYS when it is "" */
    RKEYS_PROC_GEORADIUS,    /* argument 1, and the last STORE/STOREDIST key */
    RKEYS_PROC_XREAD         /* the first half of what follows STREAMS */
} rkeys_proc;

/* One command (or one subcommand: "object|encoding"). Static data. */
typedef struct rkeys_cmd {
    const char *name;      /* lower case, as COMMAND INFO */
    int arity;             /* Redis's: > 0 exactly, < 0 at least -arity arguments (name included) */
    uint64_t flags;        /* RKEYS_CMD_*, RKEYS_TIP_*, RKEYS_REQ_*, RKEYS_RESP_* */
    int first, last, step; /* COMMAND INFO's legacy key range */
    rkeys_proc proc;
    int nspecs;
    const rkeys_spec *specs;
    int nsubs; /* a container (OBJECT, XINFO, CLIENT, ...): its subcommands, sorted */
    const struct rkeys_cmd *subs;
} rkeys_cmd;

/* route_table.c (generated). Sorted by name. */
extern const rkeys_cmd rkeys_table[];
extern const int rkeys_table_len;
extern const char rkeys_table_redis_version[];

/* The command argv names (any case), or its subcommand when it is a
 * container and argc >= 2 (as Redis's lookupCommand). NULL: not a Redis
 * 7.0 command (a verb, a newer command, a typo), or an unknown subcommand. */
const rkeys_cmd *rkeys_lookup(int argc, const char *const *argv, const size_t *lens);

/* The positions (into argv) of cmd's keys, in Redis's order: the number of
 * keys, of which the first `cap` are written to pos. 0 for a command
 * without keys and for arguments Redis would refuse (a wrong arity, a
 * numkeys that is no number or too big): Redis answers those with an error
 * whichever node gets them. */
int rkeys_find(const rkeys_cmd *cmd, int argc, const char *const *argv, const size_t *lens, int *pos,
               int cap);

#endif

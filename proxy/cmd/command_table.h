/* command_table.h - the one command table: every Redis command the proxy knows.
 *
 * Generated (proxy/cmd/command_table.c, by scripts/gen_command_table.py) from
 * a real redis-server's COMMAND INFO and COMMAND DOCS: each command's name,
 * group, arity, flags, request/response policy tips and key specs, and a
 * container's subcommands ("object|encoding"). It also carries what the
 * proxy decides about a command by its name: its kind (how replies are
 * counted) and classes (blocking, connection state, needs a connection of
 * its own, allowed while a script is busy, ...). Those are hand-kept in the
 * generator (CLASSES, with the reason for each), as are the commands of
 * newer Redis versions (NEWER: known by name and group only).
 *
 * Who reads what: proxy/cmd/command.c answers the classification queries,
 * proxy/route/route_keys.c finds keys from the specs, proxy/cmdid.c
 * numbers commands for the metrics (a command's id is its index here), and
 * proxy/verbs/verbs.c refuses a verb that would shadow a command.
 *
 * Static data; lookups are pure and allocation-free. Names are looked up
 * in any case, as Redis does; arguments are (pointer, length) pairs as the
 * request parser hands them over, not NUL-terminated. */
#ifndef VP_CMD_COMMAND_TABLE_H
#define VP_CMD_COMMAND_TABLE_H

#include <stddef.h>
#include <stdint.h>

/* Command flags (COMMAND INFO's flags), one bit each. */
#define CMD_F_WRITE (1ULL << 0)
#define CMD_F_READONLY (1ULL << 1)
#define CMD_F_DENYOOM (1ULL << 2)
#define CMD_F_MODULE (1ULL << 3)
#define CMD_F_ADMIN (1ULL << 4)
#define CMD_F_PUBSUB (1ULL << 5)
#define CMD_F_NOSCRIPT (1ULL << 6)
#define CMD_F_BLOCKING (1ULL << 7)
#define CMD_F_LOADING (1ULL << 8)
#define CMD_F_STALE (1ULL << 9)
#define CMD_F_SKIP_MONITOR (1ULL << 10)
#define CMD_F_SKIP_SLOWLOG (1ULL << 11)
#define CMD_F_ASKING (1ULL << 12)
#define CMD_F_FAST (1ULL << 13)
#define CMD_F_NO_AUTH (1ULL << 14)
#define CMD_F_MAY_REPLICATE (1ULL << 15)
#define CMD_F_NO_MANDATORY_KEYS (1ULL << 16)
#define CMD_F_NO_MULTI (1ULL << 17)
#define CMD_F_MOVABLEKEYS (1ULL << 18)
#define CMD_F_ALLOW_BUSY (1ULL << 19)
#define CMD_F_NO_ASYNC_LOADING (1ULL << 20)
/* COMMAND INFO's tips: how a cluster client sends a keyless command
 * (request_policy) and merges the replies (response_policy). */
#define CMD_TIP_NONDETERMINISTIC (1ULL << 32)
#define CMD_TIP_NONDETERMINISTIC_ORDER (1ULL << 33)
#define CMD_REQ_ALL_NODES (1ULL << 34)
#define CMD_REQ_ALL_SHARDS (1ULL << 35)
#define CMD_REQ_MULTI_SHARD (1ULL << 36)
#define CMD_REQ_SPECIAL (1ULL << 37)
#define CMD_RESP_ONE_SUCCEEDED (1ULL << 38)
#define CMD_RESP_ALL_SUCCEEDED (1ULL << 39)
#define CMD_RESP_AGG_LOGICAL_AND (1ULL << 40)
#define CMD_RESP_AGG_LOGICAL_OR (1ULL << 41)
#define CMD_RESP_AGG_MIN (1ULL << 42)
#define CMD_RESP_AGG_MAX (1ULL << 43)
#define CMD_RESP_AGG_SUM (1ULL << 44)
#define CMD_RESP_SPECIAL (1ULL << 45)

/* Key spec flags (how the command uses the keys one spec finds). */
#define CMD_KEY_RO (1u << 0)
#define CMD_KEY_RW (1u << 1)
#define CMD_KEY_OW (1u << 2)
#define CMD_KEY_RM (1u << 3)
#define CMD_KEY_ACCESS (1u << 4)
#define CMD_KEY_UPDATE (1u << 5)
#define CMD_KEY_INSERT (1u << 6)
#define CMD_KEY_DELETE (1u << 7)
#define CMD_KEY_NOT_KEY (1u << 8)
#define CMD_KEY_INCOMPLETE (1u << 9)
#define CMD_KEY_VARIABLE_FLAGS (1u << 10)

/* The proxy's classes (the generator's CLASSES says why each command has
 * its own; proxy/cmd/command.h asks them). */
#define CMD_P_BLOCKING (1u << 0)     /* may block the connection while it waits */
#define CMD_P_BLOCK_OPTION (1u << 1) /* ... only with a BLOCK option before STREAMS */
#define CMD_P_SESSION (1u << 2)      /* changes what an earlier command would see, or blocks */
#define CMD_P_OWN (1u << 3)          /* needs a connection of its own, whatever its arguments */
#define CMD_P_READ_WHOLE (1u << 4)   /* the proxy reads its arguments: never streamed */
#define CMD_P_OUT_OF_BAND (1u << 5)  /* answered at once while a script is busy */
#define CMD_P_REPLY_MODE (1u << 6)   /* CLIENT: CLIENT REPLY ON|OFF|SKIP */
#define CMD_P_UNSUBSCRIBE (1u << 7)  /* a CMD_SUBSCRIBE that does not subscribe */
#define CMD_P_FANOUT (1u << 8)       /* cluster mode: keyless, every primary runs it */
#define CMD_P_SUBS (1u << 9)         /* one of its subcommands has a class */
#define CMD_P_NEWER (1u << 10)       /* in none of its servers (Redis 8's, STRALGO): by name */

/* How the replies to a command are counted. Almost every command is
 * answered by exactly one reply; the others change how many come back, or
 * turn the connection into a stream the proxy cannot count. */
typedef enum cmd_kind {
    CMD_PLAIN = 0, /* one reply */
    CMD_SUBSCRIBE, /* (P|S)(UN)SUBSCRIBE: replies per channel, then pushes */
    CMD_MONITOR,   /* +OK, then a stream of every command */
    CMD_RESET,     /* +RESET; leaves subscribe/monitor/multi/reply-off state */
    CMD_MULTI,
    CMD_EXEC,
    CMD_DISCARD,
    CMD_CLIENT_REPLY_ON, /* CLIENT REPLY ON|OFF|SKIP: whether later commands answer */
    CMD_CLIENT_REPLY_OFF,
    CMD_CLIENT_REPLY_SKIP,
    CMD_UNCOUNTABLE, /* REPLCONF: answered or not depending on options (ACK pairs are not) */
    CMD_REPLICATION  /* SYNC/PSYNC: the connection becomes a replication stream */
} cmd_kind;

typedef enum cmd_bs_type { CMD_BS_UNKNOWN, CMD_BS_INDEX, CMD_BS_KEYWORD } cmd_bs_type;
typedef enum cmd_fk_type { CMD_FK_UNKNOWN, CMD_FK_RANGE, CMD_FK_KEYNUM } cmd_fk_type;

/* One key spec, as COMMAND INFO describes it. begin_search: the key
 * arguments start at `bs_arg` (INDEX) or after `keyword` searched from
 * argument `bs_arg` (KEYWORD; negative: from the end, backwards).
 * find_keys: RANGE {lastkey, keystep, limit}; KEYNUM {keynumidx, firstkey,
 * keystep}, relative to where the search began. */
typedef struct cmd_keyspec {
    unsigned flags; /* CMD_KEY_* */
    cmd_bs_type bs;
    int bs_arg;
    const char *keyword;
    cmd_fk_type fk;
    int fk_arg[3];
} cmd_keyspec;

/* Redis's own key-finding procedures (db.c), used where the specs fail or
 * have variable flags (proxy/route/route_keys.c). */
typedef enum cmd_keyproc {
    CMD_KEYPROC_NONE,
    CMD_KEYPROC_FIRST_ONLY,   /* argument 1 (SET, BITFIELD, SORT_RO) */
    CMD_KEYPROC_NUMKEYS_AT_1, /* numkeys at 1, keys from 2 (ZUNION, LMPOP, SINTERCARD, ...) */
    CMD_KEYPROC_NUMKEYS_AT_2, /* numkeys at 2, keys from 3 (EVAL, FCALL, BLMPOP, ...) */
    CMD_KEYPROC_ZUNIONSTORE,  /* as NUMKEYS_AT_2, then the destination (argument 1) last */
    CMD_KEYPROC_SORT,         /* argument 1, and the last STORE's key */
    CMD_KEYPROC_MIGRATE,      /* argument 3, or those after KEYS when it is "" */
    CMD_KEYPROC_GEORADIUS,    /* argument 1, and the last STORE/STOREDIST key */
    CMD_KEYPROC_XREAD         /* the first half of what follows STREAMS */
} cmd_keyproc;

/* One command (or one subcommand: "object|encoding"). Static data. */
typedef struct cmd_info {
    const char *name;      /* lower case, as COMMAND INFO */
    const char *group;     /* COMMAND DOCS's group ("string", "sorted-set", ...) */
    int arity;             /* Redis's: > 0 exactly, < 0 at least -arity arguments (name included); 0: NEWER */
    uint64_t flags;        /* CMD_F_*, CMD_TIP_*, CMD_REQ_*, CMD_RESP_* */
    int first, last, step; /* COMMAND INFO's legacy key range */
    cmd_keyproc proc;
    int nspecs;
    const cmd_keyspec *specs;
    int nsubs; /* a container (OBJECT, XINFO, CLIENT, ...): its subcommands, sorted */
    const struct cmd_info *subs;
    cmd_kind kind; /* the proxy's: applies to a call with Redis's arity */
    unsigned cls;  /* the proxy's: CMD_P_* */
} cmd_info;

/* command_table.c (generated). Sorted by name; an index is a command's id. */
extern const cmd_info cmd_table[];
extern const int cmd_table_len;
extern const char cmd_table_servers[]; /* the servers it was made from, newest first */

#define CMD_TABLE_SLOTS 1024
#define CMD_CLASS_LEN_MAX 16
extern const short cmd_table_slots[CMD_TABLE_SLOTS];
extern const uint32_t cmd_table_class_first[CMD_CLASS_LEN_MAX];
extern const uint32_t cmd_table_class_last[CMD_CLASS_LEN_MAX];

/* A letter's bit in the class masks (any case; other bytes share bits,
 * which only lets a name through to the lookup). */
#define CMD_CLASS_BIT(c) (1u << (((unsigned char)(c) | 0x20) & 31))

/* The command called name (any case), NEWER ones included; NULL: none
 * (a verb, a typo, "get\0x"). One hash and, mostly, one comparison. */
const cmd_info *cmd_table_find(const char *name, size_t len);

/* Could a command of this name have a kind or a class? 0 means surely
 * not, from two bit tests (by length, first and last letter): the common
 * commands (GET, SET, HSET, ...) go no further. */
static inline int cmd_table_may_classify(const char *name, size_t len)
{
    return len > 0 && len < CMD_CLASS_LEN_MAX && (cmd_table_class_first[len] & CMD_CLASS_BIT(name[0])) &&
           (cmd_table_class_last[len] & CMD_CLASS_BIT(name[len - 1]));
}

/* cmd's subcommand called name (any case), or NULL. */
const cmd_info *cmd_table_find_sub(const cmd_info *cmd, const char *name, size_t len);

/* The command argv names, or its subcommand when it is a container and
 * argc >= 2 (as Redis's lookupCommand). NULL: not a command of the
 * server the table was made from (a verb, a NEWER command, a typo), or an
 * unknown subcommand. What routing by keys uses. */
const cmd_info *cmd_table_lookup(int argc, const char *const *argv, const size_t *lens);

/* Does a call of argc arguments (the name included) have cmd's arity, as
 * Redis's processCommand checks it? (A NEWER command's unknown arity, 0,
 * takes any.) Redis answers a wrong count with one arity error, runs
 * nothing and changes nothing. */
static inline int cmd_arity_ok(const cmd_info *cmd, int argc)
{
    return cmd->arity > 0 ? argc == cmd->arity : argc >= -cmd->arity;
}

/* A command's id: its index in cmd_table. */
static inline int cmd_table_index(const cmd_info *cmd)
{
    return (int)(cmd - cmd_table);
}

#endif

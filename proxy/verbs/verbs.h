/* verbs.h - the verb table: which command names are virtual verbs, how their
 * arguments are checked, and how each maps onto its script's KEYS and ARGV.
 *
 * A verb call `NAME a1 a2 ...` becomes
 *     EVALSHA <sha> <nkeys> <keys...> <hidden args...> <a_first_arg ...>
 * where the keys are the verb's leading key arguments plus any key found in
 * an option (QPOP's LEASE) or listed after a numkeys argument (ZSNAPSHOT's
 * sources), and every argument after the leading keys goes to ARGV verbatim
 * (see docs/verbs.md#each-verb for each verb's contract, and
 * docs/verbs.md#the-contract-between-proxy-and-script for KEYS and ARGV).
 *
 * Built-in verbs come from lua/<name>.lua (embedded, SHA pinned at build
 * time); custom verbs from `verb` lines in the config, read at start-up.
 * A table is read-only once built, except for the `broken` mark set when an
 * upstream disagrees about a script's SHA. A config reload (SIGHUP,
 * proxy/ops/reload.c) builds a new one; the old one lives on (`refs`) while
 * requests sent with it are unanswered. */
#ifndef VP_VERBS_H
#define VP_VERBS_H

#include <stddef.h>

#include "protocol/resp_request.h"

#define VERB_NAME_MAX 32
#define VERB_MAX_KEYS 4
#define VERB_ERR_MAX 192

/* What one call sends: the argv indexes of its keys, in KEYS order: first
 * keys[0..nkeys), then the run argv[range_first .. range_first+range_count)
 * (a numkeys list, as ZSNAPSHOT's); and where ARGV continues after the
 * leading keys. */
typedef struct verb_call {
    int nkeys;
    int keys[VERB_MAX_KEYS];
    int range_first, range_count;
    int first_arg;
} verb_call;

typedef struct verb_def verb_def;

/* What a translation script returns (a status reply) where Redis's own
 * command replies a nil array, which a script cannot return: the
 * connection puts the nil array in its place (upstream.c). */
#define VERB_NIL_ARRAY_MARKER "VERBPROXY-NIL-ARRAY"

/* The scripts a command on a conveyor key becomes (proxy/conveyor/
 * conveyor.h, lua/conveyor_*.lua): entries of the table found by what they
 * translate, never by name. */
typedef enum verb_translation {
    VERB_TR_NONE,
    VERB_TR_READ,      /* ZSCORE, ZRANGE, ZCOUNT, ...: read-only */
    VERB_TR_WRITE,     /* ZADD, ZINCRBY, ZPOPMIN, the STORE forms, ... */
    VERB_TR_KEY,       /* DEL, EXPIRE, RENAME, COPY, MOVE, RESTORE, ...: the offset key follows */
    VERB_TR_TICK,      /* ZTICK */
    VERB_TR_AGGREGATE, /* ZUNION, ZINTER and their STORE forms */
    VERB_TR_STORE,     /* ZDIFFSTORE, ZRANGESTORE */
    VERB_TR_ADMIN,     /* VERBPROXY CONVEYOR INFO|REBASE key */
    /* The verbs whose keys are sorted sets: each its own body with scores
     * as positions (lua/conveyor_<verb>.lua). */
    VERB_TR_QPOP,
    VERB_TR_QRECLAIM,
    VERB_TR_QEXTEND,
    VERB_TR_ZWINDOW,
    VERB_TR_ZPAGE,
    VERB_TR_ZSNAPSHOT,
    VERB_TRANSLATIONS
} verb_translation;

/* Which text of a script a server runs, and with which commands. Redis 7.0
 * brought the `#!lua flags=...` line and EVALSHA_RO / EVAL_RO; Redis 6.2
 * refuses the first (a compile error) and lacks the second. Chosen per
 * upstream connection from the server's HELLO (upstream_server.c). */
typedef enum verb_dialect {
    VERB_DIALECT_7,    /* Redis 7.0 and later, Valkey: the script as written; read-only verbs as *_RO */
    VERB_DIALECT_PRE7, /* Redis 6.2: the shebang line a comment (script_text_pre7), EVALSHA and EVAL for all
                        */
    VERB_DIALECTS
} verb_dialect;

/* Check a call whose arity is already right. 0, or -1 with the error text
 * (without the leading '-', e.g. "ERR syntax error") in err. */
typedef int (*verb_check_fn)(const verb_def *v, int argc, const resp_arg *argv, verb_call *call, char *err,
                             size_t errlen);

struct verb_def {
    char name[VERB_NAME_MAX]; /* lower case */
    const char *syntax;       /* "ZTICK key delta threshold [WITHSCORES]" */
    const char *summary;
    const char *group;      /* Redis's COMMAND DOCS group: "sorted-set", ... */
    int arity;              /* Redis's convention: name included, negative = minimum */
    int numkeys;            /* leading key arguments */
    int readonly;           /* sent as EVALSHA_RO / EVAL_RO */
    int hidden_max_members; /* ZTICK: ztick-max-members goes first in ARGV */
    int hidden_protocol;    /* the client's RESP version ("2" or "3") goes first in ARGV */
    int polyfill;           /* not a verb: runs one of Redis's commands where the upstream lacks a part of it
                               (verbs_find_polyfill); never found by name */
    verb_translation translation; /* a conveyor key's translation (conveyor.h); never found by name */
    const char *script;           /* built-in: the script's name in lua/ (NULL: the verb's name) */
    verb_check_fn check;          /* NULL: arity and keys only */
    const char *body;             /* the script, as written (VERB_DIALECT_7) */
    size_t body_len;
    char sha[41];
    const char *body_pre7; /* VERB_DIALECT_PRE7's text, as long as body (verbs_body) */
    char sha_pre7[41];
    const char *source; /* "builtin" or the script's path */
    int owned;          /* custom: syntax, summary, body, body_pre7, source are malloc'd */
    int id;             /* index in the table */
};

typedef struct verb_table {
    verb_def **verbs; /* built-ins first, then custom verbs in config order, then the polyfills */
    int count;        /* all of them: what is loaded, ids */
    int nnamed;       /* verbs[0..nnamed): the verbs, which are commands (lookup, COMMAND listings) */
    int *slots;       /* open-addressing hash of names -> index, -1 = empty */
    int nslots;
    unsigned char *broken; /* [count] an upstream's SCRIPT LOAD gave another SHA */
    char ztick_max[24];    /* the hidden argument, as text */
    /* "SCRIPT LOAD <body>" for every script, in table order (a script two
     * entries share once), as one RESP buffer per dialect: sent whole after
     * a NOSCRIPT. load_ids[i]: the entry whose SHA the i-th answer is
     * checked against. */
    char *load_cmds[VERB_DIALECTS];
    size_t load_len[VERB_DIALECTS];
    int *load_ids;
    int nloads;
    /* Each script's own SCRIPT LOAD in load_cmds (load index i), and the
     * load index of each entry's script (script_of[verb id]): a connection
     * loads a script just before its first call of it. */
    size_t *load_off[VERB_DIALECTS], *load_size[VERB_DIALECTS];
    int *script_of;
    /* Owned: the table's copies of the built-ins and polyfills (ids are
     * per table), and the custom verbs once adopted (verbs_adopt_custom). */
    verb_def *fixed;
    verb_def **custom;
    int ncustom;
    /* A table replaced by a reload: upstream connections still using it
     * (proxy/ops/reload.c frees it at 0). Unused for the live table. */
    int refs;
} verb_table;

/* The built-in verbs (static). */
const verb_def *verbs_builtin(int *count);
const verb_def *verbs_find_builtin(const char *lower);

/* Parse a `verb` directive's value, "NAME path numkeys N [arity A]
 * [readonly]", reading the script (a relative path is taken from basedir,
 * NULL = the working directory). 0 with *out set (free with verbs_free_def),
 * or -1 with a reason in err. Refuses names of Redis commands, of built-in
 * verbs and "verbproxy", and a script Redis 7.0 would not load (its
 * shebang or its Lua: proxy/verbs/script_check.h), with Redis's error. */
int verbs_parse_custom(const char *value, const char *basedir, verb_def **out, char *err, size_t errlen);
void verbs_free_def(verb_def *v);

/* Build the table from the built-ins and the custom verbs (which stay the
 * caller's: the config owns them). -1 with a reason if two verbs share a
 * name. */
int verbs_build(verb_table *t, verb_def **custom, int ncustom, long long ztick_max_members, char *err,
                size_t errlen);
void verbs_free(verb_table *t);
/* The table owns these custom verbs from now on (verbs_free frees them and
 * the array): a table may outlive the settings that defined them. */
void verbs_adopt_custom(verb_table *t, verb_def **custom, int ncustom);

/* The verb called `name` (any case), or NULL. The hot path: every command
 * is looked up. */
const verb_def *verbs_find(const verb_table *t, const char *name, size_t len);

/* AGGREGATE COUNT (Redis 8.8) for ZUNION, ZINTER, ZUNIONSTORE and
 * ZINTERSTORE on any Redis: the polyfill entry for this call if it is one
 * of those with COUNT as an AGGREGATE value (read as Redis reads the
 * options: the last AGGREGATE wins, but a Redis without COUNT refuses the
 * first COUNT it meets, so any COUNT read before the options go wrong
 * counts), with *call filled (KEYS: the destination, then the numkeys
 * sources; ARGV: the command word and everything after it). NULL for every
 * other command, and when numkeys itself is wrong (Redis's own error then,
 * the same on every version): those are never touched. */
const verb_def *verbs_find_polyfill(const verb_table *t, int argc, const resp_arg *argv, verb_call *call);
/* The entry that runs a conveyor translation, or NULL. */
const verb_def *verbs_translation(const verb_table *t, verb_translation which);
/* May a command of this name be one of those (then it is read whole
 * before it is sent: its options decide)? */
int verbs_may_polyfill(const verb_table *t, const resp_arg *name);

/* Check a call: arity, then the verb's own checks. 0 with *call filled, or
 * VERB_ERR_ARITY / VERB_ERR_VALUE with the error text (no leading '-') in
 * err. The difference matters inside MULTI: Redis refuses a command with the
 * wrong number of arguments at once (and EXEC aborts), while a bad value is
 * an error the command itself returns at EXEC. */
#define VERB_ERR_ARITY (-2)
#define VERB_ERR_VALUE (-1)
int verbs_check(const verb_def *v, int argc, const resp_arg *argv, verb_call *call, char *err, size_t errlen);

/* A verb's script text and SHA-1 in a dialect (the text is v->body_len
 * bytes in both). */
const char *verbs_body(const verb_def *v, verb_dialect d);
const char *verbs_sha(const verb_def *v, verb_dialect d);

/* SHA-1 of a buffer as 40 lower-case hex digits (OpenSSL's libcrypto). */
void verbs_sha1_hex(const char *p, size_t n, char out[41]);

#endif

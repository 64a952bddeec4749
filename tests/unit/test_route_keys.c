/* proxy/route/route_keys.c against the oracle: a real redis-server's COMMAND
 * GETKEYS, which runs the very code Redis Cluster routes with
 * (getKeysFromCommandWithSpecs). A corpus of hand-picked commands (every
 * movable-keys command, keywords in odd places, numkeys that are no number,
 * too big, "3x", " 2"), then every command and subcommand of the table with
 * seeded random arguments drawn from the words that steer key finding. A
 * case agrees when the keys are the same names in the same order, or when
 * Redis finds none (an error, an empty array) and route_keys none either. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "proxy/route/route_keys.h"
#include "tests/support/client.h"
#include "tests/support/rng.h"
#include "tests/support/servers.h"

#define MAX_ARGS 24

static vt_redis *redis;
static redisContext *rc;

typedef struct one_case {
    int argc;
    const char *argv[MAX_ARGS];
    size_t lens[MAX_ARGS];
} one_case;

/* The commands (and subcommands, "client|capa") of the server under test:
 * the table has every supported server's, an older server lacks some. */
static redisReply *theirs;
static bool theirs_has_subs; /* (Redis 6.2's COMMAND has no subcommands) */

static void setup(void)
{
    vt_redis_opts o = {.tls = VT_REDIS_TLS_NONE};
    redis = vt_redis_start(&o);
    cr_assert_not_null(redis, "redis-server did not start");
    rc = vt_connect(redis->port);
    cr_assert_not_null(rc);
    theirs = redisCommand(rc, "COMMAND");
    cr_assert(theirs && theirs->type == REDIS_REPLY_ARRAY && theirs->elements > 100, "COMMAND: %s",
              theirs ? theirs->str : "no reply");
    for (size_t i = 0; i < theirs->elements; i++)
        if (theirs->element[i]->elements > 9 && theirs->element[i]->element[9]->elements)
            theirs_has_subs = true;
}

static void teardown(void)
{
    if (theirs) freeReplyObject(theirs);
    theirs = NULL;
    if (rc) redisFree(rc);
    vt_redis_free(redis);
}

static bool named(const redisReply *info, const char *name, size_t len)
{
    const redisReply *n = info->element[0];
    return n->len == len && strncasecmp(n->str, name, len) == 0;
}

/* The server under test's COMMAND entry for cmd (a command, or a
 * subcommand); NULL if it has none. On 6.2, a subcommand's container's. */
static const redisReply *server_info(const cmd_info *cmd)
{
    const char *bar = strchr(cmd->name, '|');
    size_t base = bar ? (size_t)(bar - cmd->name) : strlen(cmd->name);
    for (size_t i = 0; i < theirs->elements; i++) {
        const redisReply *c = theirs->element[i];
        if (!named(c, cmd->name, base)) continue;
        if (!bar || !theirs_has_subs) return c;
        for (size_t j = 0; c->elements > 9 && j < c->element[9]->elements; j++)
            if (named(c->element[9]->element[j], cmd->name, strlen(cmd->name)))
                return c->element[9]->element[j];
        return NULL;
    }
    return NULL;
}

/* Redis's arity error, where this server's arity is not the table's (taken
 * from a newer server: 7.2 let ZRANK take WITHSCORE). Every node gives it,
 * so where the proxy sends the call does not matter. */
static bool arity_differs(const cmd_info *cmd, const redisReply *r)
{
    const redisReply *info = server_info(cmd);
    return info && info->element[1]->integer != cmd->arity && strstr(r->str, "number of arguments");
}

static int by_name(const void *a, const void *b)
{
    const char *const *x = a, *const *y = b;
    return strcmp(*x, *y);
}

/* The same keys in another order (some servers list a few odd calls'
 * keys otherwise), the proxy's in argument order, which is what
 * routing keeps: as good as the same. */
static bool same_keys_reordered(const one_case *c, const redisReply *r, const int *pos, int n)
{
    const char *ours[MAX_ARGS], *redis_keys[MAX_ARGS];
    for (int i = 0; i < n; i++) {
        if (i > 0 && pos[i] <= pos[i - 1]) return false;
        if (strlen(c->argv[pos[i]]) != c->lens[pos[i]] || strlen(r->element[i]->str) != r->element[i]->len)
            return false; /* (NUL bytes: compared in order only) */
        ours[i] = c->argv[pos[i]];
        redis_keys[i] = r->element[i]->str;
    }
    qsort(ours, (size_t)n, sizeof(ours[0]), by_name);
    qsort(redis_keys, (size_t)n, sizeof(redis_keys[0]), by_name);
    for (int i = 0; i < n; i++)
        if (strcmp(ours[i], redis_keys[i]) != 0) return false;
    return true;
}

TestSuite(route_keys, .init = setup, .fini = teardown, .timeout = 120);

static void describe(const one_case *c, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = 0;
    for (int i = 0; i < c->argc && o < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s'%s'", i ? " " : "", vt_escape(c->argv[i], c->lens[i]));
}

/* Send COMMAND GETKEYS for a case (pipelined: the reply is read later). */
static void send_getkeys(const one_case *c)
{
    const char *argv[MAX_ARGS + 2] = {"COMMAND", "GETKEYS"};
    size_t lens[MAX_ARGS + 2] = {7, 7};
    for (int i = 0; i < c->argc; i++) {
        argv[i + 2] = c->argv[i];
        lens[i + 2] = c->lens[i];
    }
    cr_assert_eq(redisAppendCommandArgv(rc, c->argc + 2, argv, lens), REDIS_OK);
}

/* Compare route_keys with Redis's reply for one case; 1 if keys were found. */
static int check_reply(const one_case *c, redisReply *r)
{
    char what[2048];
    describe(c, what, sizeof(what));
    cr_assert_not_null(r, "no reply for %s", what);
    int pos[MAX_ARGS];
    const cmd_info *cmd = cmd_table_lookup(c->argc, c->argv, c->lens);
    if (cmd && !server_info(cmd)) { /* a newer server's: this one says it does not know it */
        cr_assert(r->type == REDIS_REPLY_ERROR, "%s: not in this server's COMMAND, yet it finds keys", what);
        freeReplyObject(r);
        return 0;
    }
    int n = cmd ? rkeys_find(cmd, c->argc, c->argv, c->lens, pos, MAX_ARGS) : 0;
    if (r->type == REDIS_REPLY_ERROR) {
        if (cmd && n > 0 && arity_differs(cmd, r)) {
            freeReplyObject(r);
            return 0;
        }
        cr_assert_eq(n, 0, "%s: Redis says %s, route_keys found %d keys", what, r->str, n);
        if (!cmd)
            cr_assert(strstr(r->str, "Invalid command") != NULL, "%s: unknown to route_keys, Redis says %s",
                      what, r->str);
        freeReplyObject(r);
        return 0;
    }
    cr_assert_not_null(cmd, "%s: Redis knows it, route_keys does not", what);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: %s", what, vt_reply_describe(r, what, sizeof(what)));
    cr_assert_eq((int)r->elements, n, "%s: Redis finds %zu keys, route_keys %d", what, r->elements, n);
    for (int i = 0; i < n && !same_keys_reordered(c, r, pos, n); i++) {
        const redisReply *k = r->element[i];
        cr_assert(k->len == c->lens[pos[i]] && memcmp(k->str, c->argv[pos[i]], k->len) == 0,
                  "%s: key %d is '%s' for Redis, argument %d for route_keys", what, i, k->str, pos[i]);
    }
    freeReplyObject(r);
    return n > 0;
}

static void split(one_case *c, const char *line, char *store)
{
    c->argc = 0;
    strcpy(store, line);
    for (char *t = strtok(store, " "); t; t = strtok(NULL, " ")) {
        if (strcmp(t, "''") == 0) *t = 0; /* the empty argument */
        for (char *p = t; *p; p++)
            if (*p == '_' && p[1] == '_') *p = ' '; /* "__2" is " 2" */
        c->argv[c->argc] = t;
        c->lens[c->argc] = strlen(t);
        c->argc++;
    }
}

/* Every command whose keys are not a plain range, and the neighbours of
 * each quirk. '' is an empty argument, "__" a space. */
static const char *corpus[] = {
    "GET k",
    "SET k v",
    "SET k v GET",
    "SET k v EX 10 get",
    "MSET a 1 b 2 c 3",
    "MSET a 1 b",
    "MGET a b c",
    "DEL a b c",
    "EXISTS a",
    "RENAME a b",
    "SMOVE a b m",
    "BITOP AND d s1 s2 s3",
    "BITFIELD k GET u8 0",
    "BITFIELD k SET u8 0 1",
    "BITFIELD k",
    "BITFIELD_RO k GET u8 0",
    "COPY a b",
    "COPY a b DB 0 REPLACE",
    "EVAL s 0",
    "EVAL s 2 a b c",
    "EVAL s 3 a b",
    "EVAL s -1 a",
    "EVAL s x a",
    "EVAL s 1x a b",
    "EVAL s __2 a b",
    "EVAL s +1 a",
    "EVAL s 01 a",
    "EVAL s 2147483647 a",
    "EVAL s 2147483648 a",
    "EVAL s 99999999999999999999 a",
    "EVAL s 9223372036854775807 a",
    "ZUNIONSTORE d 4294967297 a",
    "EVALSHA h 1 a",
    "EVAL_RO s 2 a b",
    "EVALSHA_RO h 1 a",
    "FCALL f 2 a b x",
    "FCALL_RO f 1 a",
    "FCALL f 0",
    "ZUNIONSTORE d 2 a b",
    "ZUNIONSTORE d 2 a b WEIGHTS 1 2",
    "ZUNIONSTORE d 3 a b",
    "ZUNIONSTORE d 2x a b",
    "ZUNIONSTORE d 0 a",
    "ZINTERSTORE d 1 a",
    "ZDIFFSTORE d 2 a b",
    "ZUNION 2 a b",
    "ZUNION 2x a b WITHSCORES",
    "ZINTER 1 a",
    "ZDIFF 3 a b c",
    "ZDIFF 4 a b c",
    "SINTERCARD 2 a b",
    "SINTERCARD 2 a b LIMIT 1",
    "ZINTERCARD 1 a",
    "LMPOP 2 a b LEFT",
    "LMPOP 1 a RIGHT COUNT 2",
    "ZMPOP 2 a b MIN",
    "BLMPOP 0 2 a b LEFT",
    "BZMPOP 1.5 1 a MAX",
    "BLMPOP 0 9 a b LEFT",
    "XREAD STREAMS a b 0 0",
    "XREAD COUNT 2 STREAMS a 0",
    "XREAD BLOCK 0 STREAMS a b 0",
    "XREAD STREAMS a",
    "XREAD STREAMS streams 0",
    "XREAD COUNT streams STREAMS a 0",
    "XREADGROUP GROUP g c STREAMS a b 0 0",
    "XREADGROUP GROUP g c COUNT 1 NOACK STREAMS a >",
    "XREADGROUP GROUP streams c STREAMS a >",
    "SORT k",
    "SORT k STORE d",
    "SORT k BY w GET g STORE d",
    "SORT k LIMIT 0 10 STORE d",
    "SORT k GET store STORE d",
    "SORT k STORE d1 STORE d2",
    "SORT k STORE",
    "SORT k LIMIT store 1 STORE d",
    "SORT_RO k BY w",
    "MIGRATE h 1 k 0 100",
    "MIGRATE h 1 '' 0 100 KEYS a b",
    "MIGRATE h 1 k 0 100 KEYS a b",
    "MIGRATE h 1 '' 0 100 COPY REPLACE KEYS a",
    "MIGRATE h 1 '' 0 100 AUTH keys KEYS a b",
    "MIGRATE h 1 '' 0 100 AUTH2 u keys KEYS a",
    "MIGRATE h 1 '' 0 100 AUTH2 keys p KEYS a",
    "GEORADIUS k 0 0 1 km",
    "GEORADIUS k 0 0 1 km STORE d",
    "GEORADIUS k 0 0 1 km STOREDIST d",
    "GEORADIUS k 0 0 1 km STORE d STOREDIST e",
    "GEORADIUS k 0 0 1 km STORE",
    "GEORADIUSBYMEMBER k m 1 km STORE d",
    "GEORADIUS_RO k 0 0 1 km",
    "GEOSEARCHSTORE d s FROMMEMBER m BYRADIUS 1 km",
    "OBJECT ENCODING k",
    "OBJECT FREQ k",
    "OBJECT HELP",
    "object encoding k",
    "MEMORY USAGE k",
    "MEMORY USAGE k SAMPLES 5",
    "MEMORY STATS",
    "XINFO STREAM k",
    "XINFO GROUPS k",
    "XINFO CONSUMERS k g",
    "XGROUP CREATE k g $",
    "XGROUP CREATECONSUMER k g c",
    "CLIENT LIST",
    "CONFIG GET x",
    "PUBLISH ch m",
    "SUBSCRIBE a b",
    "SPUBLISH ch m",
    "PING",
    "DBSIZE",
    "KEYS *",
    "SCAN 0",
    "FLUSHALL",
    "WATCH a b",
    "UNLINK a b",
    "TOUCH a",
    "LCS a b",
    "BLPOP a b 0",
    "BRPOPLPUSH a b 0",
    "BLMOVE a b LEFT RIGHT 0",
    "RPOPLPUSH a b",
    "PFCOUNT a b",
    "PFMERGE d a b",
    "SUNIONSTORE d a b",
    "SDIFF a b",
    "SMISMEMBER k a b",
    "ZRANGESTORE d s 0 -1",
    "RESTORE k 0 x",
    "DUMP k",
    "EXPIRE k 10",
    "GETEX k PERSIST",
    "XADD k * f v",
    "XAUTOCLAIM k g c 0 0",
    "XCLAIM k g c 0 1-1",
    "WAIT 0 0",
    "NOSUCHCOMMAND a",
    "OBJECT NOSUCH k",
    "GET",
    "GET a b",
    "MSET a",
    "EVAL s",
    "ZUNIONSTORE d",
    "COMMAND GETKEYS GET k",
};

Test(route_keys, corpus_agrees_with_command_getkeys)
{
    static one_case cases[sizeof(corpus) / sizeof(corpus[0])];
    static char store[sizeof(corpus) / sizeof(corpus[0])][256];
    size_t n = sizeof(corpus) / sizeof(corpus[0]);
    for (size_t i = 0; i < n; i++) {
        split(&cases[i], corpus[i], store[i]);
        send_getkeys(&cases[i]);
    }
    static const char streams_nul[] = "STREAMS\0x";
    int with_keys = 0;
    for (size_t i = 0; i < n; i++) {
        redisReply *r = vt_get_reply(rc);
        with_keys += check_reply(&cases[i], r);
    }
    cr_assert_gt(with_keys, 100, "too few cases with keys: %d", with_keys);

    /* An argument with a NUL byte: Redis's strcasecmp stops there */
    one_case c = {.argc = 4, .argv = {"XREAD", streams_nul, "a", "0"}, .lens = {5, 9, 1, 1}};
    send_getkeys(&c);
    cr_assert_eq(check_reply(&c, vt_get_reply(rc)), 1);
    one_case s = {.argc = 4, .argv = {"SORT", "k", "store\0z", "d"}, .lens = {4, 1, 7, 1}};
    send_getkeys(&s);
    check_reply(&s, vt_get_reply(rc));
}

/* Words that steer key finding, and a few plain ones. */
static const char *words[] = {"STREAMS", "streams", "KEYS",  "STORE",     "STOREDIST", "BY",      "GET",
                              "LIMIT",   "COUNT",   "BLOCK", "GROUP",     "NOACK",     "AUTH",    "AUTH2",
                              "COPY",    "REPLACE", "SET",   "INCRBY",    "OVERFLOW",  "WEIGHTS", "0",
                              "1",       "2",       "3",     "4",         "-1",        "2x",      " 1",
                              "",        "k1",      "k2",    "k3",        "{t}a",      "x",       "LEFT",
                              "MIN",     "SAMPLES", "5",     "4294967297"};

static void random_case(vt_rng *g, const cmd_info *cmd, one_case *c, int sub)
{
    int min = cmd->arity > 0 ? cmd->arity : -cmd->arity;
    int argc = cmd->arity > 0 ? cmd->arity : min + vt_rng_pick(g, 7);
    if (vt_rng_pick(g, 10) == 0) argc += vt_rng_pick(g, 3) - 1; /* a wrong arity now and then */
    if (argc < 1 + sub) argc = 1 + sub;
    if (argc > MAX_ARGS) argc = MAX_ARGS;
    c->argc = argc;
    const char *bar = strchr(cmd->name, '|');
    c->argv[0] = cmd->name;
    c->lens[0] = bar ? (size_t)(bar - cmd->name) : strlen(cmd->name);
    if (sub) {
        c->argv[1] = bar + 1;
        c->lens[1] = strlen(bar + 1);
    }
    for (int i = 1 + sub; i < argc; i++) {
        c->argv[i] = words[vt_rng_pick(g, (int)(sizeof(words) / sizeof(words[0])))];
        c->lens[i] = strlen(c->argv[i]);
    }
}

Test(route_keys, every_command_with_random_arguments_agrees_with_command_getkeys)
{
    uint64_t seed =
        getenv("VP_TEST_SEED") ? strtoull(getenv("VP_TEST_SEED"), NULL, 10) : (uint64_t)time(NULL);
    fprintf(stderr, "route_keys random cases: VP_TEST_SEED=%llu\n", (unsigned long long)seed);
    vt_rng g = vt_rng_seeded(seed);
    enum { PER_COMMAND = 40, BATCH = 512 };
    static one_case batch[BATCH];
    int pending = 0, total = 0, with_keys = 0;
    for (int t = 0; t < cmd_table_len; t++) {
        const cmd_info *base = &cmd_table[t];
        int nvariants = base->nsubs ? base->nsubs : 1;
        for (int v = 0; v < nvariants; v++) {
            const cmd_info *cmd = base->nsubs ? &base->subs[v] : base;
            /* COMMAND GETKEYS COMMAND ...: not a routing case; a NEWER command
             * is not in this server (nor routed by keys) */
            if (strcmp(base->name, "command") == 0 || (base->cls & CMD_P_NEWER)) continue;
            for (int k = 0; k < PER_COMMAND; k++) {
                random_case(&g, cmd, &batch[pending], base->nsubs != 0);
                send_getkeys(&batch[pending++]);
                if (pending == BATCH) {
                    for (int i = 0; i < pending; i++)
                        with_keys += check_reply(&batch[i], vt_get_reply(rc));
                    total += pending;
                    pending = 0;
                }
            }
        }
    }
    for (int i = 0; i < pending; i++)
        with_keys += check_reply(&batch[i], vt_get_reply(rc));
    total += pending;
    fprintf(stderr, "route_keys: %d random cases, %d with keys\n", total, with_keys);
    cr_assert_gt(with_keys, total / 3, "too few random cases found keys (%d of %d)", with_keys, total);
}

Test(route_keys, lookup_by_any_case_and_subcommands)
{
    const char *a[] = {"oBjEcT", "EnCoDiNg", "k"};
    size_t l[] = {6, 8, 1};
    const cmd_info *c = cmd_table_lookup(3, a, l);
    cr_assert_not_null(c);
    cr_assert_str_eq(c->name, "object|encoding");
    cr_assert_null(cmd_table_lookup(2, (const char *[]){"object", "nosuch"}, (size_t[]){6, 6}));
    cr_assert_str_eq(cmd_table_lookup(1, (const char *[]){"object"}, (size_t[]){6})->name, "object");
    cr_assert_null(cmd_table_lookup(1, (const char *[]){"ge"}, (size_t[]){2}));
    cr_assert_null(cmd_table_lookup(1, (const char *[]){"gett"}, (size_t[]){4}));
    cr_assert_null(cmd_table_lookup(1, (const char *[]){"get\0"}, (size_t[]){4}));
    cr_assert_str_eq(cmd_table_lookup(1, (const char *[]){"GET"}, (size_t[]){3})->name, "get");
    const cmd_info *set = cmd_table_lookup(1, (const char *[]){"set"}, (size_t[]){3});
    cr_assert(set->flags & CMD_F_WRITE);
    const cmd_info *blpop = cmd_table_lookup(1, (const char *[]){"blpop"}, (size_t[]){5});
    cr_assert(blpop->flags & CMD_F_BLOCKING);
    const cmd_info *dbsize = cmd_table_lookup(1, (const char *[]){"dbsize"}, (size_t[]){6});
    cr_assert(dbsize->flags & CMD_REQ_ALL_SHARDS && dbsize->flags & CMD_RESP_AGG_SUM);
    /* the table is sorted (subcommands: binary search) */
    for (int i = 1; i < cmd_table_len; i++)
        cr_assert_lt(strcmp(cmd_table[i - 1].name, cmd_table[i].name), 0, "%s", cmd_table[i].name);
}

Test(route_keys, cap_counts_every_key_and_writes_only_cap)
{
    const char *a[] = {"mget", "a", "b", "c", "d"};
    size_t l[] = {4, 1, 1, 1, 1};
    int pos[2] = {-1, -1};
    cr_assert_eq(rkeys_find(cmd_table_lookup(5, a, l), 5, a, l, pos, 2), 4);
    cr_assert_eq(pos[0], 1);
    cr_assert_eq(pos[1], 2);
}

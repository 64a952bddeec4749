/* proxy/route/route_plan.c: each plan class on hand-picked commands; SPLIT's
 * groups and merge map checked as properties over seeded random key sets;
 * the CROSSSLOT decision against a real Redis Cluster node's own answer (a
 * node refuses keys in two slots even when it owns both, so keys in one
 * node's slots make it an oracle for "can this go as it is"); and the
 * proxy's local error texts against what Redis itself answers. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proxy/route/route_plan.h"
#include "tests/support/client.h"
#include "tests/support/cluster.h"
#include "tests/support/rng.h"
#include "tests/support/servers.h"

#define MAX_ARGS 64
#define INLINE_KEYS 8

static rplan_scratch scratch;
static int space_mem[INLINE_KEYS * 8];
static rplan_space space;

static void init_plan(void)
{
    rplan_scratch_init(&scratch);
    cr_assert(rplan_space_bytes(INLINE_KEYS) <= sizeof(space_mem));
    rplan_space_init(&space, INLINE_KEYS, space_mem);
}

typedef struct one_cmd {
    int argc;
    const char *argv[MAX_ARGS];
    size_t lens[MAX_ARGS];
} one_cmd;

/* Split a space-separated literal (no quoting needed in these cases). */
static one_cmd words(const char *line)
{
    static char store[16][512];
    static int next;
    char *buf = store[next++ % 16];
    one_cmd c = {0};
    snprintf(buf, 512, "%s", line);
    for (char *t = strtok(buf, " "); t && c.argc < MAX_ARGS; t = strtok(NULL, " ")) {
        c.argv[c.argc] = t;
        c.lens[c.argc++] = strlen(t);
    }
    return c;
}

static rplan plan_of(const one_cmd *c, unsigned opts)
{
    rplan p;
    rplan_make(&p, cmd_table_lookup(c->argc, c->argv, c->lens), c->argc, c->argv, c->lens, opts, &space,
               &scratch);
    return p;
}

static rplan plan_line(const char *line, unsigned opts)
{
    one_cmd c = words(line);
    return plan_of(&c, opts);
}

TestSuite(route_plan, .init = init_plan, .timeout = 60);

Test(route_plan, local_commands)
{
    rplan p = plan_line("PING", 0);
    cr_assert(p.kind == RPLAN_LOCAL && p.local == RPLAN_LOCAL_PONG);
    p = plan_line("ping hello", 0);
    cr_assert(p.kind == RPLAN_LOCAL && p.local == RPLAN_LOCAL_ARG1);
    p = plan_line("ping a b", 0); /* Redis's arity error, from any node */
    cr_assert_eq(p.kind, RPLAN_ANY);
    p = plan_line("Echo x", 0);
    cr_assert(p.kind == RPLAN_LOCAL && p.local == RPLAN_LOCAL_ARG1);
    p = plan_line("echo", 0);
    cr_assert_eq(p.kind, RPLAN_ANY);
    p = plan_line("READONLY", 0);
    cr_assert(p.kind == RPLAN_LOCAL && p.local == RPLAN_LOCAL_OK);
    p = plan_line("readwrite", 0);
    cr_assert(p.kind == RPLAN_LOCAL && p.local == RPLAN_LOCAL_OK);
    p = plan_line("select 0", 0);
    cr_assert(p.kind == RPLAN_LOCAL && p.local == RPLAN_LOCAL_OK);
    const char *bad_select[] = {"select 1", "select -1", "select 15", "select 2147483647",
                                "select -2147483648"};
    for (size_t i = 0; i < sizeof(bad_select) / sizeof(bad_select[0]); i++) {
        p = plan_line(bad_select[i], 0);
        cr_assert(p.kind == RPLAN_LOCAL && p.local == RPLAN_LOCAL_ERROR, "%s", bad_select[i]);
        cr_assert_str_eq(p.error, RPLAN_ERR_SELECT, "%s", bad_select[i]);
    }
    const char *bad_index[] = {"select x", "select 00", "select -0", "select +1",
                               "select 9223372036854775808"};
    for (size_t i = 0; i < sizeof(bad_index) / sizeof(bad_index[0]); i++) {
        p = plan_line(bad_index[i], 0);
        cr_assert(p.kind == RPLAN_LOCAL && p.local == RPLAN_LOCAL_ERROR, "%s", bad_index[i]);
        cr_assert_str_eq(p.error, RPLAN_ERR_NOT_INTEGER, "%s", bad_index[i]);
    }
    const char *big_index[] = {"select 2147483648", "select -2147483649", "select 9223372036854775807"};
    for (size_t i = 0; i < sizeof(big_index) / sizeof(big_index[0]); i++) {
        p = plan_line(big_index[i], 0);
        cr_assert(p.kind == RPLAN_LOCAL && p.local == RPLAN_LOCAL_ERROR, "%s", big_index[i]);
        cr_assert_str_eq(p.error, RPLAN_ERR_INT_RANGE, "%s", big_index[i]);
    }
    p = plan_line("cluster keyslot {user1000}.following", 0);
    cr_assert(p.kind == RPLAN_LOCAL && p.local == RPLAN_LOCAL_INTEGER);
    cr_assert_eq(p.integer, hashslot_of("user1000", 8));
    p = plan_line("CLUSTER KEYSLOT 123456789", 0);
    cr_assert_eq(p.integer, 12739); /* CRC16/XMODEM check value 0x31C3 % 16384 */
    const char *disabled[] = {"cluster info",   "cluster slots", "cluster nodes",
                              "CLUSTER SHARDS", "cluster myid",  "cluster countkeysinslot 1",
                              "cluster help"};
    for (size_t i = 0; i < sizeof(disabled) / sizeof(disabled[0]); i++) {
        p = plan_line(disabled[i], 0);
        cr_assert(p.kind == RPLAN_LOCAL && p.local == RPLAN_LOCAL_ERROR, "%s", disabled[i]);
        cr_assert_str_eq(p.error, RPLAN_ERR_CLUSTER_DISABLED, "%s", disabled[i]);
    }
}

Test(route_plan, fanout_commands_and_their_merge)
{
    struct {
        const char *line;
        rplan_merge merge;
    } cases[] = {
        {"dbsize", RPLAN_MERGE_SUM},
        {"keys *", RPLAN_MERGE_CONCAT},
        {"FLUSHALL", RPLAN_MERGE_ALL_OK},
        {"flushall async", RPLAN_MERGE_ALL_OK},
        {"flushdb", RPLAN_MERGE_ALL_OK},
        {"randomkey", RPLAN_MERGE_ANY},
        {"scan 0", RPLAN_MERGE_SCAN},
        {"scan 0 match a* count 10", RPLAN_MERGE_SCAN},
        {"script load return", RPLAN_MERGE_ALL_OK},
        {"script flush", RPLAN_MERGE_ALL_OK},
        {"script exists a b c", RPLAN_MERGE_AND},
        {"script kill", RPLAN_MERGE_ONE_OK},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        rplan p = plan_line(cases[i].line, 0);
        cr_assert_eq(p.kind, RPLAN_FANOUT, "%s: kind %d", cases[i].line, p.kind);
        cr_assert_eq(p.merge, cases[i].merge, "%s: merge %d", cases[i].line, p.merge);
    }
    /* wrong arity: any node's error */
    cr_assert_eq(plan_line("dbsize x", 0).kind, RPLAN_ANY);
    cr_assert_eq(plan_line("keys", 0).kind, RPLAN_ANY);
}

Test(route_plan, single_and_any)
{
    rplan p = plan_line("get foo", 0);
    cr_assert_eq(p.kind, RPLAN_SINGLE);
    cr_assert_eq(p.slot, hashslot_of("foo", 3));
    p = plan_line("mget {u}a {u}b u", 0);
    cr_assert_eq(p.kind, RPLAN_SINGLE);
    cr_assert_eq(p.slot, hashslot_of("u", 1));
    p = plan_line("mset {u}a 1 {u}b 2", 0);
    cr_assert_eq(p.kind, RPLAN_SINGLE);
    p = plan_line("eval return 2 {t}x {t}y arg", 0);
    cr_assert_eq(p.kind, RPLAN_SINGLE);
    cr_assert_eq(p.slot, hashslot_of("t", 1));
    p = plan_line("zunionstore {z}d 2 {z}a {z}b weights 1 2", 0);
    cr_assert_eq(p.kind, RPLAN_SINGLE);
    cr_assert_eq(plan_line("eval return 0", 0).kind, RPLAN_ANY);
    cr_assert_eq(plan_line("info", 0).kind, RPLAN_ANY);
    cr_assert_eq(plan_line("notacommand a b", 0).kind, RPLAN_ANY);
    cr_assert_eq(plan_line("get", 0).kind, RPLAN_ANY);
    cr_assert_eq(plan_line("mset a", 0).kind, RPLAN_ANY);
}

Test(route_plan, crossslot_for_commands_that_cannot_split)
{
    const char *lines[] = {"msetnx a 1 b 2",
                           "rename a b",
                           "renamenx a b",
                           "sunionstore d a b",
                           "zunionstore d 2 a b",
                           "eval return 2 a b",
                           "evalsha abc 2 a b",
                           "fcall f 2 a b",
                           "mset a 1 b 2",
                           "smove a b m",
                           "lmove a b left right",
                           "sinter a b",
                           "pfmerge d a",
                           "copy a b",
                           "sort a by nosort store b"};
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        rplan p = plan_line(lines[i], 0);
        cr_assert_eq(p.kind, RPLAN_ERROR, "%s: kind %d", lines[i], p.kind);
        cr_assert_str_eq(p.error, "-CROSSSLOT Keys in request don't hash to the same slot");
    }
    /* split only when asked */
    rplan p = plan_line("mset a 1 b 2", RPLAN_SPLIT_WRITES);
    cr_assert_eq(p.kind, RPLAN_SPLIT);
    cr_assert_eq(p.merge, RPLAN_MERGE_ALL_OK);
    cr_assert_eq(p.step, 2);
    cr_assert_eq(plan_line("msetnx a 1 b 2", RPLAN_SPLIT_WRITES).kind, RPLAN_ERROR);
}

Test(route_plan, split_groups_by_slot_in_key_order)
{
    /* a, c share slot 15495 with {a}...: build a known layout */
    rplan p = plan_line("MGET {a}1 {b}1 {a}2 {c}1 {b}2", 0);
    cr_assert_eq(p.kind, RPLAN_SPLIT);
    cr_assert_eq(p.merge, RPLAN_MERGE_MGET);
    cr_assert_eq(p.ngroups, 3);
    int idx[16];
    cr_assert_eq(rplan_group_args(&p, 0, idx, 16), 3);
    cr_assert(idx[0] == 0 && idx[1] == 1 && idx[2] == 3);
    cr_assert_eq(rplan_group_args(&p, 1, idx, 16), 3);
    cr_assert(idx[0] == 0 && idx[1] == 2 && idx[2] == 5);
    cr_assert_eq(rplan_group_args(&p, 2, idx, 16), 2);
    cr_assert(idx[0] == 0 && idx[1] == 4);
    /* merge map: key 3 ({c}1) is element 0 of group 2; key 4 ({b}2) element 1 of group 1 */
    cr_assert(space.group[3] == 2 && space.pos[3] == 0);
    cr_assert(space.group[4] == 1 && space.pos[4] == 1);
    const char *sums[] = {"del a b", "unlink a b", "exists a b a", "touch a b"};
    for (size_t i = 0; i < 4; i++) {
        p = plan_line(sums[i], 0);
        cr_assert(p.kind == RPLAN_SPLIT && p.merge == RPLAN_MERGE_SUM, "%s", sums[i]);
    }
    p = plan_line("mset {a}1 x {b}1 y {a}2 z", RPLAN_SPLIT_WRITES);
    cr_assert_eq(rplan_group_args(&p, 0, idx, 16), 5);
    cr_assert(idx[1] == 1 && idx[2] == 2 && idx[3] == 5 && idx[4] == 6);
    /* the scratch table is back to empty */
    for (int s = 0; s < HASHSLOT_COUNT; s++)
        cr_assert_eq(scratch.slot_group[s], -1);
}

Test(route_plan, more_keys_than_the_inline_space)
{
    rplan p = plan_line("del a b c d e f g h i j", 0);
    cr_assert_eq(p.kind, RPLAN_NEED_SPACE);
    cr_assert_eq(p.nkeys, 10);
    static int big[10 * 8];
    rplan_space s2;
    rplan_space_init(&s2, 10, big);
    one_cmd c = words("del a b c d e f g h i j");
    rplan_make(&p, cmd_table_lookup(c.argc, c.argv, c.lens), c.argc, c.argv, c.lens, 0, &s2, &scratch);
    cr_assert_eq(p.kind, RPLAN_SPLIT);
    cr_assert_eq(p.nkeys, 10);
}

/* Property check over seeded random key sets: every key in exactly one
 * group, each group one slot and slots distinct, keys in a group in their
 * original order, the merge map (group, pos) naming each key's place. */
Test(route_plan, split_properties_over_random_keys)
{
    uint64_t seed =
        getenv("VP_TEST_SEED") ? strtoull(getenv("VP_TEST_SEED"), NULL, 10) : (uint64_t)time(NULL);
    fprintf(stderr, "route_plan random key sets: VP_TEST_SEED=%llu\n", (unsigned long long)seed);
    vt_rng g = vt_rng_seeded(seed);
    static int mem[MAX_ARGS * 8];
    rplan_space s;
    rplan_space_init(&s, MAX_ARGS, mem);
    static char keybuf[MAX_ARGS][16];
    const char *cmds[] = {"mget", "del", "unlink", "exists", "touch", "mset"};
    for (int iter = 0; iter < 3000; iter++) {
        const char *name = cmds[vt_rng_pick(&g, 6)];
        int step = strcmp(name, "mset") == 0 ? 2 : 1;
        int nkeys = 1 + vt_rng_pick(&g, (MAX_ARGS - 1) / step);
        one_cmd c = {0};
        c.argv[0] = name;
        c.lens[0] = strlen(name);
        c.argc = 1;
        for (int k = 0; k < nkeys; k++) {
            /* few tags so that slots repeat; sometimes an untagged key */
            int tag = vt_rng_pick(&g, 6);
            if (vt_rng_pick(&g, 4) == 0)
                snprintf(keybuf[k], 16, "k%d", vt_rng_pick(&g, 1000));
            else
                snprintf(keybuf[k], 16, "{t%d}%d", tag, k);
            c.argv[c.argc] = keybuf[k];
            c.lens[c.argc++] = strlen(keybuf[k]);
            if (step == 2) {
                c.argv[c.argc] = "v";
                c.lens[c.argc++] = 1;
            }
        }
        rplan p;
        rplan_make(&p, cmd_table_lookup(c.argc, c.argv, c.lens), c.argc, c.argv, c.lens, RPLAN_SPLIT_WRITES,
                   &s, &scratch);
        int first_slot = hashslot_of(c.argv[1], c.lens[1]);
        int one_slot = 1;
        for (int k = 0; k < nkeys; k++)
            one_slot &= hashslot_of(c.argv[1 + k * step], c.lens[1 + k * step]) == first_slot;
        if (one_slot) {
            cr_assert_eq(p.kind, RPLAN_SINGLE);
            cr_assert_eq(p.slot, first_slot);
            continue;
        }
        cr_assert_eq(p.kind, RPLAN_SPLIT, "%s with %d keys", name, nkeys);
        cr_assert_eq(p.nkeys, nkeys);
        int seen[MAX_ARGS] = {0};
        int total = 0;
        for (int gi = 0; gi < p.ngroups; gi++) {
            const rplan_group *gr = &s.groups[gi];
            cr_assert_gt(gr->count, 0);
            for (int gj = 0; gj < gi; gj++)
                cr_assert_neq(s.groups[gj].slot, gr->slot, "two groups for slot %d", gr->slot);
            int idx[MAX_ARGS + 1];
            int n = rplan_group_args(&p, gi, idx, MAX_ARGS + 1);
            cr_assert_eq(n, 1 + gr->count * step);
            cr_assert_eq(idx[0], 0);
            int prev = 0;
            for (int i = 0; i < gr->count; i++) {
                int k = s.member[gr->first + i];
                int a = idx[1 + i * step];
                cr_assert_eq(a, 1 + k * step, "argv index of key %d", k);
                cr_assert_gt(a, prev, "keys out of order in group %d", gi);
                prev = a;
                if (step == 2) cr_assert_eq(idx[2 + i * step], a + 1);
                cr_assert_eq(hashslot_of(c.argv[a], c.lens[a]), gr->slot);
                cr_assert_eq(s.group[k], gi);
                cr_assert_eq(s.pos[k], i);
                seen[k]++;
                total++;
            }
        }
        cr_assert_eq(total, nkeys);
        for (int k = 0; k < nkeys; k++)
            cr_assert_eq(seen[k], 1, "key %d in %d groups", k, seen[k]);
        /* the merge map restores the order: key k's reply from its group's pos */
        for (int k = 0; k < nkeys; k++) {
            const rplan_group *gr = &s.groups[s.group[k]];
            cr_assert_eq(s.member[gr->first + s.pos[k]], k);
        }
    }
    for (int sl = 0; sl < HASHSLOT_COUNT; sl++)
        cr_assert_eq(scratch.slot_group[sl], -1);
}

Test(route_plan, scan_cursor_carries_the_node)
{
    unsigned node;
    uint64_t cur, out;
    cr_assert_eq(rplan_scan_decode("0", 1, &node, &cur), 0);
    cr_assert(node == 0 && cur == 0);
    /* node 0 goes on */
    cr_assert_eq(rplan_scan_encode(0, 1234, 3, &out), 0);
    cr_assert_eq(out, 1234);
    /* node 0 done: node 1 from the start */
    cr_assert_eq(rplan_scan_encode(0, 0, 3, &out), 0);
    cr_assert_eq(out, 1ULL << RPLAN_SCAN_CURSOR_BITS);
    char buf[32];
    int len = snprintf(buf, sizeof(buf), "%llu", (unsigned long long)out);
    cr_assert_eq(rplan_scan_decode(buf, (size_t)len, &node, &cur), 0);
    cr_assert(node == 1 && cur == 0);
    cr_assert_eq(rplan_scan_encode(1, 77, 3, &out), 0);
    len = snprintf(buf, sizeof(buf), "%llu", (unsigned long long)out);
    cr_assert_eq(rplan_scan_decode(buf, (size_t)len, &node, &cur), 0);
    cr_assert(node == 1 && cur == 77);
    /* the last node done: the client's scan is complete */
    cr_assert_eq(rplan_scan_encode(2, 0, 3, &out), 0);
    cr_assert_eq(out, 0);
    /* a node cursor too big to carry; bad client cursors */
    cr_assert_eq(rplan_scan_encode(0, 1ULL << RPLAN_SCAN_CURSOR_BITS, 3, &out), -1);
    const char *bad[] = {"", "-1", " 1", "1 ", "x", "18446744073709551616", "+1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_assert_eq(rplan_scan_decode(bad[i], strlen(bad[i]), &node, &cur), -1, "'%s'", bad[i]);
    cr_assert_eq(rplan_scan_decode("18446744073709551615", 20, &node, &cur), 0);
    cr_assert_eq(node, (1u << RPLAN_SCAN_NODE_BITS) - 1);
}

/* --- against real servers ---------------------------------------------- */

static vt_cluster *cluster;
static int owner_cache[HASHSLOT_COUNT];

static void cluster_setup(void)
{
    init_plan();
    cluster = vt_cluster_start();
    cr_assert_not_null(cluster, "the 3+3 cluster did not start");
    for (int i = 0; i < HASHSLOT_COUNT; i++)
        owner_cache[i] = -2;
}

static void cluster_teardown(void)
{
    vt_cluster_free(cluster);
}

static int owner_of(int asked, const char *key)
{
    int s = hashslot_of(key, strlen(key));
    if (owner_cache[s] == -2) owner_cache[s] = vt_cluster_slot_owner(cluster, asked, s);
    return owner_cache[s];
}

/* A key (into buf) whose slot node `node` owns: with the hash tag `tag`
 * when it is given (so that keys of one tag share a slot), else plain. */
static const char *key_on(int node, vt_rng *g, const char *tag, char *buf, size_t cap)
{
    for (;;) {
        if (tag)
            snprintf(buf, cap, "{%s}k%d", tag, vt_rng_pick(g, 100000));
        else
            snprintf(buf, cap, "k%d", vt_rng_pick(g, 100000));
        if (owner_of(node, buf) == node) return buf;
        if (tag) return NULL; /* the tag's slot is elsewhere: the caller picks another tag */
    }
}

TestSuite(route_plan_oracle, .init = cluster_setup, .fini = cluster_teardown, .timeout = 180);

/* Templates: K is a key, anything else is as it is. */
static const char *const templates[] = {
    "MGET K K",
    "MGET K K K K",
    "MGET A B A K B A",
    "DEL A B B A",
    "EXISTS A A B",
    "MSET A v B v A v",
    "DEL K K K",
    "UNLINK K K",
    "EXISTS K K K",
    "TOUCH K K",
    "MSET K v K v",
    "MSETNX K v K v K v",
    "RENAME K K",
    "RENAMENX K K",
    "SUNIONSTORE K K K",
    "SINTERSTORE K K K",
    "SDIFF K K",
    "SINTERCARD 2 K K",
    "ZUNIONSTORE K 2 K K",
    "ZINTERSTORE K 2 K K WEIGHTS 1 2",
    "ZUNION 2 K K",
    "ZDIFFSTORE K 2 K K",
    "EVAL return 2 K K",
    "EVAL return 3 K K K x y",
    "SMOVE K K m",
    "LMOVE K K LEFT RIGHT",
    "RPOPLPUSH K K",
    "LMPOP 2 K K LEFT",
    "ZMPOP 2 K K MIN",
    "PFCOUNT K K",
    "PFMERGE K K K",
    "COPY K K",
    "BITOP AND K K K",
    "SORT K BY nosort STORE K",
    "XREAD STREAMS K K 0 0",
    "GEOSEARCHSTORE K K FROMLONLAT 0 0 BYRADIUS 1 km",
    "OBJECT ENCODING K",
    "GET K",
};

/* A hash tag whose slot node `node` owns. */
static void tag_on(int node, vt_rng *g, char *tag, size_t cap)
{
    for (;;) {
        snprintf(tag, cap, "t%d", vt_rng_pick(g, 100000));
        char probe[48];
        if (key_on(node, g, tag, probe, sizeof(probe))) return;
    }
}

/* K: a key of the node (all under one tag when same_slot); A, B: keys
 * under two tags of the node (so that SPLIT groups hold several keys). */
static void build_case(vt_rng *g, const char *tmpl, int node, int same_slot, one_cmd *c, char keys[][48])
{
    char tag[16], tag_a[16], tag_b[16];
    tag_on(node, g, tag, sizeof(tag));
    tag_on(node, g, tag_a, sizeof(tag_a));
    tag_on(node, g, tag_b, sizeof(tag_b));
    *c = words(tmpl);
    int nk = 0;
    for (int i = 0; i < c->argc; i++) {
        const char *a = c->argv[i];
        if (strcmp(a, "K") != 0 && strcmp(a, "A") != 0 && strcmp(a, "B") != 0) continue;
        const char *t = a[0] == 'A' ? tag_a : a[0] == 'B' ? tag_b : same_slot ? tag : NULL;
        key_on(node, g, t, keys[nk], 48);
        c->argv[i] = keys[nk];
        c->lens[i] = strlen(keys[nk]);
        nk++;
    }
}

/* A SPLIT plan's sub-commands on the node: none is refused; for MGET,
 * with every key set to its own name first, the merge map puts each
 * group's reply elements back in the original key order. */
static void split_on_node(redisContext *rc, const rplan *p, const one_cmd *c, const char *what)
{
    const rplan_space *s = p->space;
    int is_mget = p->merge == RPLAN_MERGE_MGET;
    if (is_mget)
        for (int k = 0; k < p->nkeys; k++) {
            const char *name = c->argv[s->argi[k]];
            redisReply *r = vt_cmd(rc, "SET %s %s", name, name);
            cr_assert(r && r->type == REDIS_REPLY_STATUS);
            freeReplyObject(r);
        }
    redisReply *parts[MAX_ARGS];
    for (int g = 0; g < p->ngroups; g++) {
        int idx[MAX_ARGS + 1];
        const char *argv[MAX_ARGS + 1];
        size_t lens[MAX_ARGS + 1];
        int n = rplan_group_args(p, g, idx, MAX_ARGS + 1);
        cr_assert_leq(n, MAX_ARGS + 1);
        for (int i = 0; i < n; i++) {
            argv[i] = c->argv[idx[i]];
            lens[i] = c->lens[idx[i]];
        }
        parts[g] = vt_cmd_argv(rc, n, argv, lens);
        cr_assert_not_null(parts[g]);
        cr_assert(parts[g]->type != REDIS_REPLY_ERROR, "%s, group %d: %s", what, g, parts[g]->str);
    }
    if (is_mget)
        for (int k = 0; k < p->nkeys; k++) {
            redisReply *part = parts[s->group[k]];
            cr_assert_eq(part->type, REDIS_REPLY_ARRAY);
            redisReply *e = part->element[s->pos[k]];
            cr_assert(e->type == REDIS_REPLY_STRING, "%s: key %d", what, k);
            cr_assert_str_eq(e->str, c->argv[s->argi[k]], "%s: key %d's reply out of place", what, k);
        }
    for (int g = 0; g < p->ngroups; g++)
        freeReplyObject(parts[g]);
}

Test(route_plan_oracle, crossslot_decision_agrees_with_a_cluster_node)
{
    int node = -1;
    for (int i = 0; i < VT_CLUSTER_NODES && node < 0; i++)
        if (vt_cluster_is_primary(cluster, i)) node = i;
    cr_assert_geq(node, 0);
    redisContext *rc = vt_connect(cluster->node[node]->port);
    cr_assert_not_null(rc);
    uint64_t seed =
        getenv("VP_TEST_SEED") ? strtoull(getenv("VP_TEST_SEED"), NULL, 10) : (uint64_t)time(NULL);
    fprintf(stderr, "route_plan oracle: VP_TEST_SEED=%llu\n", (unsigned long long)seed);
    vt_rng g = vt_rng_seeded(seed);
    static char keys[MAX_ARGS][48];
    static int mem[MAX_ARGS * 8];
    rplan_space s;
    rplan_space_init(&s, MAX_ARGS, mem);
    int crossslot = 0, single = 0;
    for (int round = 0; round < 6; round++) {
        for (size_t t = 0; t < sizeof(templates) / sizeof(templates[0]); t++) {
            one_cmd c;
            build_case(&g, templates[t], node, round % 3 == 0, &c, keys);
            rplan p;
            rplan_make(&p, cmd_table_lookup(c.argc, c.argv, c.lens), c.argc, c.argv, c.lens, 0, &s, &scratch);
            redisReply *r = vt_cmd_argv(rc, c.argc, c.argv, c.lens);
            cr_assert_not_null(r);
            char what[512];
            size_t o = 0;
            for (int i = 0; i < c.argc && o < sizeof(what); i++)
                o += (size_t)snprintf(what + o, sizeof(what) - o, "%s%s", i ? " " : "", c.argv[i]);
            int node_says_crossslot = r->type == REDIS_REPLY_ERROR && strncmp(r->str, "CROSSSLOT", 9) == 0;
            if (node_says_crossslot) {
                crossslot++;
                cr_assert_str_eq(r->str, RPLAN_ERR_CROSSSLOT + 1, "%s", what);
                /* the node refuses it as it is: the proxy must not send it as it is */
                cr_assert(p.kind == RPLAN_ERROR || p.kind == RPLAN_SPLIT, "%s: node says %s, plan %d", what,
                          r->str, p.kind);
                if (p.kind == RPLAN_ERROR) cr_assert_str_eq(p.error, RPLAN_ERR_CROSSSLOT);
            } else {
                single++;
                cr_assert(p.kind == RPLAN_SINGLE, "%s: node answers %s, plan %d", what,
                          r->type == REDIS_REPLY_ERROR ? r->str : "(not an error)", p.kind);
                cr_assert(r->type != REDIS_REPLY_ERROR || strncmp(r->str, "MOVED", 5) != 0, "%s: %s", what,
                          r->str);
            }
            freeReplyObject(r);
            if (p.kind == RPLAN_SPLIT) split_on_node(rc, &p, &c, what);
        }
    }
    fprintf(stderr, "route_plan oracle: %d CROSSSLOT, %d one slot\n", crossslot, single);
    cr_assert_gt(crossslot, 50);
    cr_assert_gt(single, 50);
    redisFree(rc);
}

/* The proxy's local error texts are Redis's: SELECT's from a cluster node,
 * CLUSTER's from a redis-server without cluster support. */
Test(route_plan_oracle, local_error_texts_are_redis_texts)
{
    redisContext *rc = vt_connect(cluster->node[0]->port);
    cr_assert_not_null(rc);
    const char *selects[] = {"select 1",          "select -1",          "select x",
                             "select 00",         "select -0",          "select 9223372036854775808",
                             "select 2147483648", "select -2147483649", "select 9223372036854775807",
                             "select 2147483647"};
    for (size_t i = 0; i < sizeof(selects) / sizeof(selects[0]); i++) {
        one_cmd c = words(selects[i]);
        rplan p = plan_of(&c, 0);
        redisReply *r = vt_cmd_argv(rc, c.argc, c.argv, c.lens);
        cr_assert(r && r->type == REDIS_REPLY_ERROR, "%s", selects[i]);
        cr_assert_str_eq(p.error + 1, r->str, "%s", selects[i]);
        freeReplyObject(r);
    }
    redisReply *r = vt_cmd(rc, "SELECT 0");
    cr_assert(r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0);
    freeReplyObject(r);
    r = vt_cmd(rc, "CLUSTER KEYSLOT {user1000}.following");
    cr_assert(r && r->type == REDIS_REPLY_INTEGER);
    cr_assert_eq(plan_line("CLUSTER KEYSLOT {user1000}.following", 0).integer, r->integer);
    freeReplyObject(r);
    redisFree(rc);

    vt_redis_opts o = {.tls = VT_REDIS_TLS_NONE};
    vt_redis *plain = vt_redis_start(&o);
    cr_assert_not_null(plain);
    rc = vt_connect(plain->port);
    cr_assert_not_null(rc);
    const char *clusters[] = {"cluster info",
                              "cluster slots",
                              "cluster nodes",
                              "cluster shards",
                              "cluster myid",
                              "cluster keyslot x",
                              "cluster countkeysinslot 1",
                              "cluster help"};
    for (size_t i = 0; i < sizeof(clusters) / sizeof(clusters[0]); i++) {
        one_cmd c = words(clusters[i]);
        r = vt_cmd_argv(rc, c.argc, c.argv, c.lens);
        cr_assert(r && r->type == REDIS_REPLY_ERROR, "%s", clusters[i]);
        cr_assert_str_eq(r->str, RPLAN_ERR_CLUSTER_DISABLED + 1, "%s", clusters[i]);
        if (strcmp(clusters[i], "cluster keyslot x") != 0 && strcmp(clusters[i], "cluster help") != 0)
            cr_assert_str_eq(plan_of(&c, 0).error, RPLAN_ERR_CLUSTER_DISABLED, "%s", clusters[i]);
        freeReplyObject(r);
    }
    redisFree(rc);
    vt_redis_free(plain);
}

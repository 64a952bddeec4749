/* route_plan.c - one command's plan in cluster mode (route_plan.h). */
#include "proxy/route/route_plan.h"

#include <limits.h>
#include <string.h>

size_t rplan_space_bytes(int cap)
{
    size_t n = cap > 0 ? (size_t)cap : 0;
    return n * (5 * sizeof(int) + sizeof(rplan_group));
}

void rplan_space_init(rplan_space *s, int cap, void *mem)
{
    size_t n = cap > 0 ? (size_t)cap : 0;
    int *ints = mem;
    s->cap = (int)n;
    s->argi = ints;
    s->slot = ints + n;
    s->group = ints + 2 * n;
    s->pos = ints + 3 * n;
    s->member = ints + 4 * n;
    /* rplan_group is three ints: int alignment is enough */
    s->groups = (rplan_group *)(void *)(ints + 5 * n);
}

void rplan_scratch_init(rplan_scratch *s)
{
    for (int i = 0; i < HASHSLOT_COUNT; i++)
        s->slot_group[i] = -1;
}

static int is(const cmd_info *cmd, const char *name)
{
    return strcmp(cmd->name, name) == 0;
}

/* Redis's string2ll (util.c): optional '-', no '+', no spaces, no leading
 * zero (but "0"), within long long. SELECT parses its index with it. */
static int parse_ll(const char *s, size_t len, long long *out)
{
    size_t i = 0;
    int neg = 0;
    unsigned long long v = 0;
    if (len == 0 || len > 20) return -1;
    if (len == 1 && s[0] == '0') {
        *out = 0;
        return 0;
    }
    if (s[0] == '-') {
        neg = 1;
        i = 1;
        if (len == 1) return -1;
    }
    if (s[i] < '1' || s[i] > '9') return -1;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (~0ULL - d) / 10) return -1;
        v = v * 10 + d;
    }
    if (neg) {
        if (v > (unsigned long long)LLONG_MAX + 1) return -1;
        *out = v == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)v;
    } else {
        if (v > (unsigned long long)LLONG_MAX) return -1;
        *out = (long long)v;
    }
    return 0;
}

static rplan_kind local_reply(rplan *p, rplan_local what, const char *error)
{
    p->kind = RPLAN_LOCAL;
    p->local = what;
    p->error = error;
    return p->kind;
}

/* The commands the proxy answers itself: it presents one standalone Redis
 * (a cluster-aware client must not be led around it), so CLUSTER is
 * "disabled" but for KEYSLOT, which needs no topology. -1: not one. (None
 * has a key spec: rplan_make asks only for commands without.) */
static int plan_local(rplan *p, const cmd_info *cmd, int argc, const char *const *argv, const size_t *lens)
{
    if (is(cmd, "ping")) {
        if (argc > 2) return -1;
        return local_reply(p, argc == 1 ? RPLAN_LOCAL_PONG : RPLAN_LOCAL_ARG1, NULL);
    }
    if (is(cmd, "echo")) return local_reply(p, RPLAN_LOCAL_ARG1, NULL);
    if (is(cmd, "readonly") || is(cmd, "readwrite")) return local_reply(p, RPLAN_LOCAL_OK, NULL);
    if (is(cmd, "select")) {
        long long db;
        if (parse_ll(argv[1], lens[1], &db) < 0)
            return local_reply(p, RPLAN_LOCAL_ERROR, RPLAN_ERR_NOT_INTEGER);
        if (db < INT_MIN || db > INT_MAX) return local_reply(p, RPLAN_LOCAL_ERROR, RPLAN_ERR_INT_RANGE);
        if (db != 0) return local_reply(p, RPLAN_LOCAL_ERROR, RPLAN_ERR_SELECT);
        return local_reply(p, RPLAN_LOCAL_OK, NULL);
    }
    if (strncmp(cmd->name, "cluster|", 8) == 0) {
        if (is(cmd, "cluster|keyslot")) {
            p->integer = hashslot_of(argv[2], lens[2]);
            return local_reply(p, RPLAN_LOCAL_INTEGER, NULL);
        }
        return local_reply(p, RPLAN_LOCAL_ERROR, RPLAN_ERR_CLUSTER_DISABLED);
    }
    return -1;
}

/* How the replies of a keyless command every primary runs (CMD_P_FANOUT)
 * merge: the table's response_policy tip where it has one, else the rule
 * the command's meaning asks for (KEYS, RANDOMKEY, SCAN have no tip). */
static rplan_merge merge_from_tips(const cmd_info *cmd)
{
    uint64_t f = cmd->flags;
    if (f & CMD_RESP_AGG_SUM) return RPLAN_MERGE_SUM;
    if (f & CMD_RESP_ALL_SUCCEEDED) return RPLAN_MERGE_ALL_OK;
    if (f & CMD_RESP_AGG_LOGICAL_AND) return RPLAN_MERGE_AND;
    if (f & CMD_RESP_AGG_LOGICAL_OR) return RPLAN_MERGE_OR;
    if (f & CMD_RESP_AGG_MIN) return RPLAN_MERGE_MIN;
    if (f & CMD_RESP_AGG_MAX) return RPLAN_MERGE_MAX;
    if (f & CMD_RESP_ONE_SUCCEEDED) return RPLAN_MERGE_ONE_OK;
    if (is(cmd, "keys")) return RPLAN_MERGE_CONCAT;
    if (is(cmd, "randomkey")) return RPLAN_MERGE_ANY;
    if (is(cmd, "scan")) return RPLAN_MERGE_SCAN;
    return RPLAN_MERGE_NONE;
}

/* The keyless commands every primary runs (none has a key spec: rplan_make
 * asks only those without; the generator refuses a FANOUT with one). */
static int plan_fanout(rplan *p, const cmd_info *cmd)
{
    if (!(cmd->cls & CMD_P_FANOUT)) return -1;
    p->kind = RPLAN_FANOUT;
    p->merge = merge_from_tips(cmd);
    return 0;
}

/* Multi-key commands whose parts are independent: split by slot. MSET
 * only when asked (not atomic across slots). */
static rplan_merge split_merge(const cmd_info *cmd, unsigned opts, int *step)
{
    *step = 1;
    if (is(cmd, "mget")) return RPLAN_MERGE_MGET;
    if (is(cmd, "del") || is(cmd, "unlink") || is(cmd, "exists") || is(cmd, "touch")) return RPLAN_MERGE_SUM;
    if (is(cmd, "mset") && (opts & RPLAN_SPLIT_WRITES)) {
        *step = 2;
        return RPLAN_MERGE_ALL_OK;
    }
    return RPLAN_MERGE_NONE;
}

/* Keys grouped by slot, groups in the order their slot first appears, keys
 * in their original order within a group: a counting sort over the
 * scratch's slot -> group table, which is put back to -1 afterwards. */
static void group_keys(rplan *p, const rplan_space *s, int n, rplan_scratch *scratch)
{
    int ng = 0;
    for (int k = 0; k < n; k++) {
        int g = scratch->slot_group[s->slot[k]];
        if (g < 0) {
            g = ng++;
            scratch->slot_group[s->slot[k]] = (int16_t)g;
            s->groups[g].slot = s->slot[k];
            s->groups[g].count = 0;
        }
        s->group[k] = g;
        s->pos[k] = s->groups[g].count++;
    }
    int first = 0;
    for (int g = 0; g < ng; g++) {
        s->groups[g].first = first;
        first += s->groups[g].count;
        scratch->slot_group[s->groups[g].slot] = -1;
    }
    for (int k = 0; k < n; k++)
        s->member[s->groups[s->group[k]].first + s->pos[k]] = k;
    p->ngroups = ng;
}

/* Shard channels are not keys (their key specs say NOT_KEY, and COMMAND
 * GETKEYS leaves them out) but Redis Cluster routes SSUBSCRIBE,
 * SUNSUBSCRIBE and SPUBLISH by their slot all the same, CROSSSLOT for
 * several: they are planned as keys. */
static int shard_channels(const cmd_info *cmd, int argc, const rplan_space *space)
{
    if (!(cmd->flags & CMD_F_PUBSUB) || argc < 2) return 0;
    int last;
    if (is(cmd, "spublish"))
        last = 1;
    else if (is(cmd, "ssubscribe") || is(cmd, "sunsubscribe"))
        last = argc - 1;
    else
        return 0;
    for (int i = 1; i <= last && i - 1 < space->cap; i++)
        space->argi[i - 1] = i;
    return last;
}

rplan_kind rplan_make(rplan *p, const cmd_info *cmd, int argc, const char *const *argv, const size_t *lens,
                      unsigned opts, const rplan_space *space, rplan_scratch *scratch)
{
    memset(p, 0, sizeof(*p));
    p->space = space;
    p->slot = -1;
    p->kind = RPLAN_ANY;
    /* not Redis's (a verb is planned by its own keys), or arguments Redis
     * refuses with the same error on every node */
    if (!cmd || !cmd_arity_ok(cmd, argc)) return p->kind; /* (any node says the arity error as well) */
    /* Every command answered here or run on every primary has no key
     * spec: a command with keys skips their ~16 name comparisons. */
    if (cmd->nspecs == 0) {
        if (plan_local(p, cmd, argc, argv, lens) == 0) return p->kind;
        if (plan_fanout(p, cmd) == 0) return p->kind;
    }

    int n = rkeys_find(cmd, argc, argv, lens, space->argi, space->cap);
    if (n == 0) n = shard_channels(cmd, argc, space);
    p->nkeys = n;
    if (n == 0) return p->kind;
    if (n > space->cap) return p->kind = RPLAN_NEED_SPACE;
    int same = 1;
    for (int k = 0; k < n; k++) {
        space->slot[k] = hashslot_of(argv[space->argi[k]], lens[space->argi[k]]);
        same &= space->slot[k] == space->slot[0];
    }
    if (same) {
        p->slot = space->slot[0];
        return p->kind = RPLAN_SINGLE;
    }
    p->merge = split_merge(cmd, opts, &p->step);
    if (p->merge == RPLAN_MERGE_NONE) {
        p->error = RPLAN_ERR_CROSSSLOT;
        return p->kind = RPLAN_ERROR;
    }
    group_keys(p, space, n, scratch);
    return p->kind = RPLAN_SPLIT;
}

int rplan_group_args(const rplan *p, int g, int *idx, int cap)
{
    const rplan_space *s = p->space;
    const rplan_group *gr = &s->groups[g];
    int n = 0;
    if (n < cap) idx[n] = 0;
    n++;
    for (int i = 0; i < gr->count; i++) {
        int a = s->argi[s->member[gr->first + i]];
        for (int j = 0; j < p->step; j++, n++)
            if (n < cap) idx[n] = a + j;
    }
    return n;
}

int rplan_scan_decode(const char *s, size_t len, unsigned *node, uint64_t *node_cursor)
{
    uint64_t v = 0;
    if (len == 0 || len > 20) return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *node = (unsigned)(v >> RPLAN_SCAN_CURSOR_BITS);
    *node_cursor = v & ((1ULL << RPLAN_SCAN_CURSOR_BITS) - 1);
    return 0;
}

int rplan_scan_encode(unsigned node, uint64_t node_cursor, unsigned nnodes, uint64_t *out)
{
    if (node_cursor >> RPLAN_SCAN_CURSOR_BITS) return -1;
    if (node >= (1u << RPLAN_SCAN_NODE_BITS) || nnodes > (1u << RPLAN_SCAN_NODE_BITS)) return -1;
    if (node_cursor == 0) {
        /* this node is done: the next one from its start, or the end */
        node++;
        if (node >= nnodes) {
            *out = 0;
            return 0;
        }
    }
    *out = ((uint64_t)node << RPLAN_SCAN_CURSOR_BITS) | node_cursor;
    return 0;
}

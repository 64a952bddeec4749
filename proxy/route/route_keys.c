/* route_keys.c - a command's key positions, as Redis 7.0 finds them.
 *
 * Mirrors db.c: getKeysFromCommandWithSpecs (key specs first unless one has
 * variable flags; on a spec that fails, the command's procedure), then
 * getKeysUsingKeySpecs and the *GetKeys procedures, quirks included (a
 * keyword search never looks at the last argument; ZUNIONSTORE's procedure
 * puts the destination last; a numkeys the specs refuse, "3x", may still
 * be read by the procedure's atoi). The test compares every case with a
 * real redis-server's COMMAND GETKEYS (tests/unit/test_route_keys.c), so a
 * quirk kept here is one Redis has: the router must agree with the node
 * about which keys a command touches, or it answers CROSSSLOT where Redis
 * would not (or sends a command to a node that then says MOVED). */
#include "proxy/route/route_keys.h"

#include <limits.h>
#include <string.h>

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* strcasecmp(arg, word) == 0 as Redis does it on an sds: the comparison
 * stops at a NUL byte, so "streams\0junk" is STREAMS. */
static int arg_is(const char *arg, size_t len, const char *word)
{
    size_t k = 0;
    for (; word[k]; k++)
        if (k >= len || lower((unsigned char)arg[k]) != lower((unsigned char)word[k])) return 0;
    return k == len || arg[k] == '\0';
}

/* Redis's string2ll: a strict decimal long long (no sign but '-', no
 * leading zero, no space). */
static int strict_ll(const char *s, size_t len, long long *out)
{
    if (len == 0 || len >= 21) return 0;
    if (len == 1 && s[0] == '0') {
        *out = 0;
        return 1;
    }
    size_t i = 0;
    int neg = 0;
    if (s[0] == '-') {
        neg = 1;
        if (++i == len) return 0;
    }
    if (s[i] < '1' || s[i] > '9') return 0;
    unsigned long long v = 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        if (v > (ULLONG_MAX - 9) / 10) return 0;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (neg) {
        if (v > (unsigned long long)LLONG_MAX + 1) return 0;
        *out = v == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)v;
    } else {
        if (v > LLONG_MAX) return 0;
        *out = (long long)v;
    }
    return 1;
}

/* C's atoi as Redis's genericGetKeys calls it on a NUL-terminated
 * argument: leading space, a sign, digits up to the first non-digit; glibc
 * reads it with strtol and truncates to int. */
static int c_atoi(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')))
        i++;
    int neg = 0;
    if (i < len && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    unsigned long v = 0;
    int over = 0;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        if (v > ((unsigned long)LONG_MAX + 1 - (unsigned)(s[i] - '0')) / 10) over = 1;
        if (!over) v = v * 10 + (unsigned)(s[i] - '0');
    }
    long l;
    if (neg)
        l = over || v > (unsigned long)LONG_MAX + 1 ? LONG_MIN : (long)(0 - v);
    else
        l = over || v > (unsigned long)LONG_MAX ? LONG_MAX : (long)v;
    return (int)l;
}

/* Sink for found positions: the first `cap` are kept, all are counted. */
typedef struct sink {
    int *pos;
    int cap;
    int n;
} sink;

static void emit(sink *s, int p)
{
    if (s->n < s->cap) s->pos[s->n] = p;
    s->n++;
}

/* getKeysUsingKeySpecs with GET_KEYSPEC_DEFAULT: -1 when a spec fails. */
static int from_specs(const cmd_info *cmd, int argc, const char *const *argv, const size_t *lens, sink *out)
{
    for (int j = 0; j < cmd->nspecs; j++) {
        const cmd_keyspec *sp = &cmd->specs[j];
        if (sp->flags & CMD_KEY_NOT_KEY) continue;
        int first = 0, last, step;
        if (sp->bs == CMD_BS_INDEX) {
            first = sp->bs_arg;
        } else if (sp->bs == CMD_BS_KEYWORD) {
            int start = sp->bs_arg > 0 ? sp->bs_arg : argc + sp->bs_arg;
            int end = sp->bs_arg > 0 ? argc - 1 : 1;
            for (int i = start; i != end; i = start <= end ? i + 1 : i - 1) {
                if (i >= argc || i < 1) break;
                if (arg_is(argv[i], lens[i], sp->keyword)) {
                    first = i + 1;
                    break;
                }
            }
            if (!first) continue; /* keyword absent: this spec has no keys */
        } else {
            return -1;
        }
        if (sp->fk == CMD_FK_RANGE) {
            int lastkey = sp->fk_arg[0], limit = sp->fk_arg[2];
            step = sp->fk_arg[1];
            if (lastkey >= 0)
                last = first + lastkey;
            else if (!limit)
                last = argc + lastkey;
            else
                last = first + ((argc - first) / limit + lastkey);
        } else if (sp->fk == CMD_FK_KEYNUM) {
            long long numkeys;
            step = sp->fk_arg[2];
            int at = first + sp->fk_arg[0];
            /* Redis checks keynumidx alone (its arity check covers the rest) */
            if (sp->fk_arg[0] >= argc || at >= argc) return -1;
            if (!strict_ll(argv[at], lens[at], &numkeys) || numkeys < 0) return -1;
            first += sp->fk_arg[1];
            /* Redis adds (int)numkeys: 4294967297 counts as 1 key there,
             * so here too (the sum in long long, where Redis's int may
             * overflow into a negative `last`: invalid either way) */
            long long end = (long long)first + (int)(uint32_t)(uint64_t)numkeys - 1;
            if (end >= argc || end < first) return -1;
            last = (int)end;
        } else {
            return -1;
        }
        if (last >= argc || last < first || first >= argc) return -1;
        for (int i = first; i <= last; i += step) {
            if (i >= argc || i < first) continue; /* only commands of negative arity get here */
            emit(out, i);
        }
        if (sp->flags & CMD_KEY_INCOMPLETE) return -1;
    }
    return out->n;
}

/* genericGetKeys: numkeys at `count_at`, keys from `first_at`, the
 * destination (if any) after them. */
static void numkeys_proc(int store_at, int count_at, int first_at, int argc, const char *const *argv,
                         const size_t *lens, sink *out)
{
    if (count_at >= argc) return;
    int num = c_atoi(argv[count_at], lens[count_at]);
    if (num < 1 || num > argc - first_at) return;
    for (int i = 0; i < num; i++)
        emit(out, first_at + i);
    if (store_at) emit(out, store_at);
}

static void sort_proc(int argc, const char *const *argv, const size_t *lens, sink *out)
{
    static const struct {
        const char *name;
        int skip;
    } skiplist[] = {{"limit", 2}, {"get", 1}, {"by", 1}};
    int store = 0;
    emit(out, 1);
    for (int i = 2; i < argc; i++) {
        /* Redis's loop tests STORE inside the skip-list loop, once per
         * entry before the match: the same as testing it first. */
        for (size_t j = 0; j < sizeof(skiplist) / sizeof(skiplist[0]); j++) {
            if (arg_is(argv[i], lens[i], skiplist[j].name)) {
                i += skiplist[j].skip;
                break;
            } else if (arg_is(argv[i], lens[i], "store") && i + 1 < argc) {
                store = i + 1; /* the last STORE wins, as in SORT */
                break;
            }
        }
    }
    if (store) emit(out, store);
}

static void migrate_proc(int argc, const char *const *argv, const size_t *lens, sink *out)
{
    static const struct {
        const char *name;
        int skip;
    } skips[] = {{"copy", 0}, {"replace", 0}, {"auth", 1}, {"auth2", 2}};
    int first = 3, num = 1;
    for (int i = 6; i < argc; i++) {
        if (arg_is(argv[i], lens[i], "keys")) {
            /* MIGRATE host port "" db timeout ... KEYS k1 k2; a key at 3
             * too is a syntax error: no keys, the node says why */
            if (lens[3] > 0) {
                num = 0;
            } else {
                first = i + 1;
                num = argc - first;
            }
            break;
        }
        for (size_t j = 0; j < sizeof(skips) / sizeof(skips[0]); j++)
            if (arg_is(argv[i], lens[i], skips[j].name)) {
                i += skips[j].skip;
                break;
            }
    }
    for (int i = 0; i < num && first + i < argc; i++)
        emit(out, first + i);
}

static void georadius_proc(int argc, const char *const *argv, const size_t *lens, sink *out)
{
    int stored = -1;
    for (int i = 5; i < argc; i++)
        if ((arg_is(argv[i], lens[i], "store") || arg_is(argv[i], lens[i], "storedist")) && i + 1 < argc) {
            stored = i + 1;
            i++;
        }
    emit(out, 1);
    if (stored != -1) emit(out, stored);
}

static void xread_proc(int argc, const char *const *argv, const size_t *lens, sink *out)
{
    int streams = -1;
    for (int i = 1; i < argc; i++) {
        if (arg_is(argv[i], lens[i], "block") || arg_is(argv[i], lens[i], "count")) {
            i++;
        } else if (arg_is(argv[i], lens[i], "group")) {
            i += 2;
        } else if (arg_is(argv[i], lens[i], "noack")) {
            /* no argument */
        } else if (arg_is(argv[i], lens[i], "streams")) {
            streams = i;
            break;
        } else {
            break;
        }
    }
    if (streams == -1) return;
    int num = argc - streams - 1;
    if (num == 0 || num % 2 != 0) return;
    for (int i = streams + 1; i < argc - num / 2; i++)
        emit(out, i);
}

static void from_proc(const cmd_info *cmd, int argc, const char *const *argv, const size_t *lens, sink *out)
{
    out->n = 0;
    switch (cmd->proc) {
    case CMD_KEYPROC_NONE:
        break;
    case CMD_KEYPROC_FIRST_ONLY:
        emit(out, 1);
        break;
    case CMD_KEYPROC_NUMKEYS_AT_1:
        numkeys_proc(0, 1, 2, argc, argv, lens, out);
        break;
    case CMD_KEYPROC_NUMKEYS_AT_2:
        numkeys_proc(0, 2, 3, argc, argv, lens, out);
        break;
    case CMD_KEYPROC_ZUNIONSTORE:
        numkeys_proc(1, 2, 3, argc, argv, lens, out);
        break;
    case CMD_KEYPROC_SORT:
        sort_proc(argc, argv, lens, out);
        break;
    case CMD_KEYPROC_MIGRATE:
        migrate_proc(argc, argv, lens, out);
        break;
    case CMD_KEYPROC_GEORADIUS:
        georadius_proc(argc, argv, lens, out);
        break;
    case CMD_KEYPROC_XREAD:
        xread_proc(argc, argv, lens, out);
        break;
    }
}

int rkeys_find(const cmd_info *cmd, int argc, const char *const *argv, const size_t *lens, int *pos, int cap)
{
    sink out = {pos, cap, 0};
    /* Redis never runs (nor asks keys of) a command of the wrong arity */
    if (!cmd_arity_ok(cmd, argc)) return 0;
    int has_key = 0, has_varflags = 0;
    for (int j = 0; j < cmd->nspecs; j++) {
        if (!(cmd->specs[j].flags & CMD_KEY_NOT_KEY)) has_key = 1;
        if (cmd->specs[j].flags & CMD_KEY_VARIABLE_FLAGS) has_varflags = 1;
    }
    if (has_key && !has_varflags) {
        if (from_specs(cmd, argc, argv, lens, &out) >= 0) return out.n;
    }
    from_proc(cmd, argc, argv, lens, &out);
    return out.n;
}

/* conveyor.c - which commands on conveyor keys are translated, and the
 * script call each becomes (conveyor.h). */
#include "proxy/conveyor/conveyor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/cmd/command.h"
#include "proxy/cmd/command_table.h"
#include "proxy/config.h"
#include "proxy/conveyor/glob.h"
#include "proxy/conveyor/offset_key.h"
#include "proxy/route/route_keys.h"

/* When a command is translated, beyond having a conveyor key. */
typedef enum conveyor_when {
    WHEN_ALWAYS,
    WHEN_WITHSCORE,       /* ZRANK, ZREVRANK: only with WITHSCORE (Redis 7.2) */
    WHEN_WITHSCORES,      /* ZREVRANGE, ZRANDMEMBER: only with WITHSCORES */
    WHEN_SCORE_OPTION,    /* ZRANGE: with WITHSCORES, or BYSCORE and a finite bound */
    WHEN_WITHSCORES_LAST, /* ZDIFF: WITHSCORES, its only option, last */
    WHEN_FINITE_OR_SCORES /* ZRANGEBYSCORE, ZCOUNT: a finite bound, or WITHSCORES */
} conveyor_when;

typedef struct conveyor_command {
    const char *name;
    verb_translation script;
    conveyor_when when;
    /* The oldest server that has it, as major * 10000 + minor * 100 (0:
     * every one we support); for EXPIRE and the like, with options only. An
     * older server is sent the command as it is: it refuses it itself, in
     * its own words and at its own time (inside MULTI: at once). */
    unsigned since;
} conveyor_command;

/* Every command that reads or writes scores of a sorted set, and every
 * command that moves, copies, deletes or expires a key (the offset key
 * follows the key). docs/conveyor.md lists them with what each does. */
static const conveyor_command conveyor_commands[] = {
    {"zscore", VERB_TR_READ, WHEN_ALWAYS, 0},
    {"zmscore", VERB_TR_READ, WHEN_ALWAYS, 0},
    {"zrank", VERB_TR_READ, WHEN_WITHSCORE, 70200},
    {"zrevrank", VERB_TR_READ, WHEN_WITHSCORE, 70200},
    {"zrange", VERB_TR_READ, WHEN_SCORE_OPTION, 0},
    {"zrevrange", VERB_TR_READ, WHEN_WITHSCORES, 0},
    {"zrangebyscore", VERB_TR_READ, WHEN_FINITE_OR_SCORES, 0},
    {"zrevrangebyscore", VERB_TR_READ, WHEN_FINITE_OR_SCORES, 0},
    {"zcount", VERB_TR_READ, WHEN_FINITE_OR_SCORES, 0},
    {"zrandmember", VERB_TR_READ, WHEN_WITHSCORES, 0},
    {"zunion", VERB_TR_AGGREGATE, WHEN_ALWAYS, 0},
    {"zinter", VERB_TR_AGGREGATE, WHEN_ALWAYS, 0},
    {"zdiff", VERB_TR_READ, WHEN_WITHSCORES_LAST, 0},
    {"zscan", VERB_TR_READ, WHEN_ALWAYS, 0},
    {"zadd", VERB_TR_WRITE, WHEN_ALWAYS, 0},
    {"zincrby", VERB_TR_WRITE, WHEN_ALWAYS, 0},
    {"zremrangebyscore", VERB_TR_WRITE, WHEN_ALWAYS, 0},
    {"zpopmin", VERB_TR_WRITE, WHEN_ALWAYS, 0},
    {"zpopmax", VERB_TR_WRITE, WHEN_ALWAYS, 0},
    {"zmpop", VERB_TR_WRITE, WHEN_ALWAYS, 70000},
    {"zrangestore", VERB_TR_STORE, WHEN_ALWAYS, 0},
    {"zunionstore", VERB_TR_AGGREGATE, WHEN_ALWAYS, 0},
    {"zinterstore", VERB_TR_AGGREGATE, WHEN_ALWAYS, 0},
    {"zdiffstore", VERB_TR_STORE, WHEN_ALWAYS, 0},
    {"del", VERB_TR_KEY, WHEN_ALWAYS, 0},
    {"unlink", VERB_TR_KEY, WHEN_ALWAYS, 0},
    {"expire", VERB_TR_KEY, WHEN_ALWAYS, 70000},
    {"pexpire", VERB_TR_KEY, WHEN_ALWAYS, 70000},
    {"expireat", VERB_TR_KEY, WHEN_ALWAYS, 70000},
    {"pexpireat", VERB_TR_KEY, WHEN_ALWAYS, 70000},
    {"persist", VERB_TR_KEY, WHEN_ALWAYS, 0},
    {"rename", VERB_TR_KEY, WHEN_ALWAYS, 0},
    {"renamenx", VERB_TR_KEY, WHEN_ALWAYS, 0},
    {"copy", VERB_TR_KEY, WHEN_ALWAYS, 0},
    {"move", VERB_TR_KEY, WHEN_ALWAYS, 0},
    {"restore", VERB_TR_KEY, WHEN_ALWAYS, 0},
    {"dump", VERB_TR_KEY, WHEN_ALWAYS, 0},
    /* The built-in verbs whose keys are sorted sets (QACK only removes). */
    {"ztick", VERB_TR_TICK, WHEN_ALWAYS, 0},
    {"qpop", VERB_TR_QPOP, WHEN_ALWAYS, 0},
    {"qreclaim", VERB_TR_QRECLAIM, WHEN_ALWAYS, 0},
    {"qextend", VERB_TR_QEXTEND, WHEN_ALWAYS, 0},
    {"zwindow", VERB_TR_ZWINDOW, WHEN_ALWAYS, 0},
    {"zpage", VERB_TR_ZPAGE, WHEN_ALWAYS, 0},
    {"zsnapshot", VERB_TR_ZSNAPSHOT, WHEN_ALWAYS, 0},
    {"verbproxy", VERB_TR_ADMIN, WHEN_ALWAYS, 0},
    /* Blocking: one try each (the session waits: client_block.c). */
    {"bzpopmin", VERB_TR_WRITE, WHEN_ALWAYS, 0},
    {"bzpopmax", VERB_TR_WRITE, WHEN_ALWAYS, 0},
    {"bzmpop", VERB_TR_WRITE, WHEN_ALWAYS, 70000},
};
#define CONVEYOR_COMMANDS ((int)(sizeof(conveyor_commands) / sizeof(conveyor_commands[0])))

static const conveyor_command *conveyor_command_of(const resp_arg *name)
{
    if (name->len < 3 || name->len > 16) return NULL;
    for (int i = 0; i < CONVEYOR_COMMANDS; i++)
        if (strlen(conveyor_commands[i].name) == name->len && cmd_arg_is(name, conveyor_commands[i].name))
            return &conveyor_commands[i];
    return NULL;
}

void conveyor_scratch_free(conveyor_scratch *s)
{
    free(s->argv);
    free(s->keypos);
    free(s->argp);
    free(s->lens);
    vp_buf_free(&s->names);
    vp_buf_free(&s->wrap);
    offset_cache_free(&s->offsets);
    memset(s, 0, sizeof(*s));
}

int conveyor_blocks(int argc, const resp_arg *argv)
{
    return argc > 0 && (cmd_arg_is(&argv[0], "bzpopmin") || cmd_arg_is(&argv[0], "bzpopmax") ||
                        cmd_arg_is(&argv[0], "bzmpop"));
}

int conveyor_watch_request(const vp_config *conf, int argc, const resp_arg *argv, vp_buf *out)
{
    int extra = 0;
    for (int i = 1; i < argc; i++)
        extra += conveyor_key_is(conf, argv[i].ptr, argv[i].len);
    if (argc < 2 || extra == 0) return 0;
    out->len = 0;
    vp_buf_resp_array(out, argc + extra);
    vp_buf_resp_bulk(out, argv[0].ptr, argv[0].len);
    for (int i = 1; i < argc; i++) {
        vp_buf_resp_bulk(out, argv[i].ptr, argv[i].len);
        if (!conveyor_key_is(conf, argv[i].ptr, argv[i].len)) continue;
        char head[OFFSET_KEY_EXTRA];
        size_t hl = offset_key_head(argv[i].ptr, argv[i].len, head);
        vp_buf_resp_header(out, RESP_BULK, (long long)(hl + argv[i].len));
        vp_buf_append(out, head, hl);
        vp_buf_append(out, argv[i].ptr, argv[i].len);
        vp_buf_append(out, "\r\n", 2);
    }
    return 1;
}

int conveyor_key_is(const vp_config *conf, const char *key, size_t len)
{
    for (int i = 0; i < conf->nconveyor_patterns; i++)
        if (glob_match(conf->conveyor_patterns[i], key, len)) return 1;
    return 0;
}

int conveyor_may_translate(const vp_config *conf, const resp_arg *name)
{
    return conf->nconveyor_patterns > 0 && conveyor_command_of(name) != NULL;
}

/* Does any argument from argv[from] on equal one of the words (lower case)? */
static int conveyor_has_option(int argc, const resp_arg *argv, int from, const char *a, const char *b)
{
    for (int i = from; i < argc; i++)
        if (cmd_arg_is(&argv[i], a) || (b && cmd_arg_is(&argv[i], b))) return 1;
    return 0;
}

int conveyor_bound_infinite(const resp_arg *a)
{
    resp_arg v = *a;
    if (v.len > 0 && v.ptr[0] == '(') {
        v.ptr++;
        v.len--;
    }
    if (v.len > 0 && (v.ptr[0] == '+' || v.ptr[0] == '-')) {
        v.ptr++;
        v.len--;
    }
    return cmd_arg_is(&v, "inf") || cmd_arg_is(&v, "infinity");
}

/* Both ends of the score range (argv[2], argv[3]) infinite: the same in
 * positions and in stored scores, whatever the offset. */
static int conveyor_range_infinite(int argc, const resp_arg *argv)
{
    return argc >= 4 && conveyor_bound_infinite(&argv[2]) && conveyor_bound_infinite(&argv[3]);
}

static int conveyor_wanted(const conveyor_command *cc, int argc, const resp_arg *argv)
{
    switch (cc->when) {
    case WHEN_ALWAYS:
        return 1;
    case WHEN_WITHSCORE:
        return conveyor_has_option(argc, argv, 3, "withscore", NULL);
    case WHEN_WITHSCORES:
        return conveyor_has_option(argc, argv, 3, "withscores", NULL);
    case WHEN_SCORE_OPTION:
        return conveyor_has_option(argc, argv, 4, "withscores", NULL) ||
               (conveyor_has_option(argc, argv, 4, "byscore", NULL) && !conveyor_range_infinite(argc, argv));
    case WHEN_WITHSCORES_LAST:
        return cmd_arg_is(&argv[argc - 1], "withscores");
    case WHEN_FINITE_OR_SCORES:
        return !conveyor_range_infinite(argc, argv) || conveyor_has_option(argc, argv, 4, "withscores", NULL);
    }
    return 1;
}

static void conveyor_grow(conveyor_scratch *s, int argc, int need)
{
    if (need > s->cap) {
        s->cap = need + 16;
        s->argv = vp_realloc(s->argv, (size_t)s->cap * sizeof(*s->argv));
    }
    if (argc > s->argcap) {
        s->argcap = argc + 16;
        s->keypos = vp_realloc(s->keypos, (size_t)s->argcap * sizeof(*s->keypos));
        s->argp = vp_realloc(s->argp, (size_t)s->argcap * sizeof(*s->argp));
        s->lens = vp_realloc(s->lens, (size_t)s->argcap * sizeof(*s->lens));
    }
}

/* The command's keys into s->keypos, in Redis's order: their count (0:
 * none, or arguments Redis refuses, a wrong arity above all). */
static int conveyor_keys(const verb_table *t, const conveyor_command *cc, int argc, const resp_arg *argv,
                         conveyor_scratch *s)
{
    conveyor_grow(s, argc, 0);
    const verb_def *verb = verbs_find(t, argv[0].ptr, argv[0].len);
    if (verb) {
        /* A built-in verb (ZTICK, QPOP, ...): its keys as the verb finds
         * them (none when it refuses its arguments: then the verb itself
         * answers, in its words). */
        verb_call vc;
        char err[VERB_ERR_MAX];
        if (verbs_check(verb, argc, argv, &vc, err, sizeof(err)) < 0) return 0;
        int n = 0;
        for (int i = 0; i < vc.nkeys; i++)
            s->keypos[n++] = vc.keys[i];
        for (int i = vc.range_first; i < vc.range_first + vc.range_count; i++)
            s->keypos[n++] = i;
        return n;
    }
    if (cc->script == VERB_TR_ADMIN) {
        /* VERBPROXY CONVEYOR INFO|REBASE key: the rest of VERBPROXY is the
         * proxy's own (introspect.c). */
        s->keypos[0] = 3;
        return argc == 4 && cmd_arg_is(&argv[1], "conveyor") ? 1 : 0;
    }
    for (int i = 0; i < argc; i++) {
        s->argp[i] = argv[i].ptr;
        s->lens[i] = argv[i].len;
    }
    const cmd_info *cmd = cmd_table_lookup(argc, s->argp, s->lens);
    if (!cmd || !cmd_arity_ok(cmd, argc)) return 0;
    int n = rkeys_find(cmd, argc, s->argp, s->lens, s->keypos, s->argcap);
    return n <= s->argcap ? n : 0;
}

/* Does a server of this version have the command in this form? */
static int conveyor_server_has(const conveyor_command *cc, int argc, unsigned version)
{
    if (!cc->since || !version || version >= cc->since) return 1;
    int expire = cc->script == VERB_TR_KEY; /* (EXPIRE and the like: their options are newer) */
    return expire && argc <= 3;
}

unsigned conveyor_version(const char *text)
{
    unsigned major = 0, minor = 0;
    if (!text || sscanf(text, "%u.%u", &major, &minor) < 1) return 0;
    return major * 10000 + minor * 100;
}

int conveyor_plan(const vp_config *conf, const verb_table *t, unsigned server_version, int argc,
                  const resp_arg *argv, conveyor_scratch *s, const verb_def **v, verb_call *call,
                  const resp_arg **out_argv, int *out_argc)
{
    if (argc < 1) return 0;
    const conveyor_command *cc = conveyor_command_of(&argv[0]);
    if (!cc || !conveyor_wanted(cc, argc, argv) || !conveyor_server_has(cc, argc, server_version)) return 0;
    if (conf->nconveyor_patterns == 0 && cc->script != VERB_TR_ADMIN) return 0;
    int nkeys = conveyor_keys(t, cc, argc, argv, s);
    if (nkeys == 0) return 0;
    int any = cc->script == VERB_TR_ADMIN; /* (a key that no longer matches may still have an offset) */
    for (int k = 0; k < nkeys && !any; k++)
        any = conveyor_key_is(conf, argv[s->keypos[k]].ptr, argv[s->keypos[k]].len);
    if (!any) return 0;
    const verb_def *entry = verbs_translation(t, cc->script);
    if (!entry) return 0;

    /* The call's arguments: the keys and their offset keys in pairs, the
     * mask, then the command. The names go into one buffer, sized first
     * so the pointers into it stay put. */
    int count = 2 * nkeys + 1 + argc;
    conveyor_grow(s, argc, count);
    size_t bytes = (size_t)nkeys + 1;
    for (int k = 0; k < nkeys; k++)
        bytes += OFFSET_KEY_EXTRA + argv[s->keypos[k]].len;
    s->names.len = 0;
    vp_buf_reserve(&s->names, bytes);
    char *mask = s->names.data;
    s->names.len = (size_t)nkeys + 1;
    for (int k = 0; k < nkeys; k++) {
        const resp_arg *key = &argv[s->keypos[k]];
        mask[k] = conveyor_key_is(conf, key->ptr, key->len) ? '1' : '0';
        char *name = s->names.data + s->names.len;
        size_t head = offset_key_head(key->ptr, key->len, name);
        memcpy(name + head, key->ptr, key->len);
        s->names.len += head + key->len;
        s->argv[2 * k] = *key;
        s->argv[2 * k + 1] = (resp_arg){name, head + key->len};
    }
    mask[nkeys] = '\0';
    s->argv[2 * nkeys] = (resp_arg){mask, (size_t)nkeys};
    memcpy(s->argv + 2 * nkeys + 1, argv, (size_t)argc * sizeof(*argv));

    call->nkeys = 0;
    call->range_first = 0;
    call->range_count = 2 * nkeys;
    call->first_arg = 2 * nkeys;
    *v = entry;
    *out_argv = s->argv;
    *out_argc = count;
    return 1;
}

/* The one command table (proxy/cmd/command_table.h): every command is found
 * by its name in any case, and the proxy's classification read from it
 * (proxy/cmd/command.c) is what the hand-typed lists it replaced said. The
 * lists below are those lists, as command.c, cmdid.c and
 * lua/redis_commands.c had them before the table carried them; each test
 * walks the whole table, so a command the table classifies that the old
 * lists did not (or the other way round) fails here. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "proxy/cmd/command.h"
#include "proxy/cmd/command_table.h"

static int in(const char *name, const char *const *list)
{
    for (size_t i = 0; list[i]; i++)
        if (strcmp(list[i], name) == 0) return 1;
    return 0;
}

static void upper(const char *s, char *out, size_t cap)
{
    size_t i = 0;
    for (; s[i] && i + 1 < cap; i++)
        out[i] = (char)(s[i] >= 'a' && s[i] <= 'z' ? s[i] - 32 : s[i]);
    out[i] = '\0';
}

/* The part of "container|sub" after the bar. */
static const char *sub_name(const char *name)
{
    const char *bar = strchr(name, '|');
    return bar ? bar + 1 : name;
}

Test(command_table, every_command_and_subcommand_is_found_in_any_case)
{
    char up[64];
    for (int i = 0; i < cmd_table_len; i++) {
        const cmd_info *c = &cmd_table[i];
        cr_assert_eq(cmd_table_find(c->name, strlen(c->name)), c, "%s", c->name);
        upper(c->name, up, sizeof(up));
        cr_assert_eq(cmd_table_find(up, strlen(up)), c, "%s", up);
        cr_assert_eq(cmd_table_index(c), i);
        cr_assert(c->group && c->group[0], "%s has no group", c->name);
        for (int j = 0; j < c->nsubs; j++) {
            const cmd_info *s = &c->subs[j];
            upper(sub_name(s->name), up, sizeof(up));
            cr_assert_eq(cmd_table_find_sub(c, up, strlen(up)), s, "%s", s->name);
            const char *argv[] = {c->name, up};
            size_t lens[] = {strlen(c->name), strlen(up)};
            cr_assert_eq(cmd_table_lookup(2, argv, lens), s, "%s", s->name);
        }
    }
}

Test(command_table, anything_else_is_not_found)
{
    const char *none[] = {"",     "ge",    "gett",  "verbproxy",
                          "post", "host:", "ztick", "getgetgetgetgetgetgetgetgetgetget"};
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
        cr_assert_null(cmd_table_find(none[i], strlen(none[i])), "%s", none[i]);
    cr_assert_null(cmd_table_find("get\0x", 5));
    cr_assert_null(cmd_table_find("get\0", 4));
    const cmd_info *object = cmd_table_find("object", 6);
    cr_assert_null(cmd_table_find_sub(object, "encodin", 7));
    cr_assert_null(cmd_table_find_sub(object, "encoding\0", 9));
}

/* The commands none of the table's servers has (Redis 8's, 6.2's STRALGO)
 * are known by name and group, and routing does not see them. Redis 7.4's
 * hash-field expiry and 7.2's WAITAOF, NEWER before the table was made from
 * 7.4 and Valkey 8 too, are whole rows now. */
Test(command_table, newer_commands_by_name_and_group_only)
{
    static const char *const newer[] = {"hgetdel",     "hgetex", "hsetex",   "stralgo", "vadd",      "vcard",
                                        "vdim",        "vemb",   "vgetattr", "vinfo",   "vismember", "vlinks",
                                        "vrandmember", "vrem",   "vsetattr", "vsim",    NULL};
    int n = 0;
    for (int i = 0; i < cmd_table_len; i++) {
        const cmd_info *c = &cmd_table[i];
        cr_assert_eq(!!(c->cls & CMD_P_NEWER), in(c->name, newer), "%s", c->name);
        const char *argv[] = {c->name};
        size_t lens[] = {strlen(c->name)};
        if (c->cls & CMD_P_NEWER) {
            n++;
            cr_assert_null(cmd_table_lookup(1, argv, lens), "%s", c->name);
            cr_assert_eq(c->arity, 0);
        } else {
            cr_assert_eq(cmd_table_lookup(1, argv, lens), c, "%s", c->name);
        }
    }
    cr_assert_eq(n, 16);
    cr_assert_eq(cmd_table_len, 266); /* 250 of Redis 7.4, Valkey 8.0 and 7.0, and 16 NEWER */
    cr_assert_str_eq(cmd_table_find("hexpire", 7)->group, "hash");
    cr_assert(cmd_table_find_sub(cmd_table_find("client", 6), "capa", 4), "Valkey 8's CLIENT CAPA");
    cr_assert(cmd_table_find_sub(cmd_table_find("client", 6), "no-touch", 8), "7.2's CLIENT NO-TOUCH");
    cr_assert_str_eq(cmd_table_find("vsim", 4)->group, "vectorset");
    cr_assert_str_eq(cmd_table_find("zadd", 4)->group, "sorted-set");
}

/* The class masks only ever save a lookup: no classified name is refused. */
Test(command_table, the_masks_let_every_classified_name_through)
{
    char up[64];
    for (int i = 0; i < cmd_table_len; i++) {
        const cmd_info *c = &cmd_table[i];
        if (c->kind == CMD_PLAIN && !(c->cls & ~CMD_P_NEWER)) continue;
        cr_assert(cmd_table_may_classify(c->name, strlen(c->name)), "%s", c->name);
        upper(c->name, up, sizeof(up));
        cr_assert(cmd_table_may_classify(up, strlen(up)), "%s", up);
    }
    cr_assert(!cmd_table_may_classify("get", 3));
    cr_assert(!cmd_table_may_classify("", 0));
}

static int call(int (*q)(int, const resp_arg *), int argc, const char *const *words)
{
    resp_arg argv[8];
    for (int i = 0; i < argc; i++) {
        argv[i].ptr = words[i];
        argv[i].len = strlen(words[i]);
    }
    return q(argc, argv);
}

static int name_query(int (*q)(const resp_arg *), const char *name)
{
    resp_arg a = {name, strlen(name)};
    return q(&a);
}

/* command.c's lists, by name. */
static const char *const blocking[] = {"blpop",    "brpop",    "brpoplpush", "blmove", "blmpop",
                                       "bzpopmin", "bzpopmax", "bzmpop",     NULL};
static const char *const changes_session[] = {"select",   "hello",      "auth",       "reset",     "swapdb",
                                              "blpop",    "brpop",      "brpoplpush", "blmove",    "blmpop",
                                              "bzpopmin", "bzpopmax",   "bzmpop",     "wait",      "waitaof",
                                              "xread",    "xreadgroup", "readonly",   "readwrite", NULL};
static const char *const may_be_special[] = {
    "client", "discard",  "exec",      "multi",      "monitor",      "psubscribe", "punsubscribe", "psync",
    "reset",  "replconf", "subscribe", "ssubscribe", "sunsubscribe", "sync",       "unsubscribe",  NULL};
static const char *const read_whole[] = {"auth", "hello", "config", "acl", NULL};
static const char *const unsubscribes[] = {"unsubscribe", "punsubscribe", "sunsubscribe", NULL};
/* cmd_needs_own_connection's names (any arguments), and what else needs
 * one with one argument or with two (the kinds at their arity). */
static const char *const own[] = {"auth",     "asking",  "hello",  "psync",    "readonly", "readwrite",
                                  "replconf", "select",  "sync",   "shutdown", "unwatch",  "watch",
                                  "wait",     "waitaof", "client", NULL};
static const char *const own_alone[] = {"discard", "exec",        "multi",        "monitor",      "reset",
                                        "sync",    "unsubscribe", "punsubscribe", "sunsubscribe", NULL};
static const char *const own_with_one[] = {"subscribe",    "psubscribe",   "ssubscribe", "unsubscribe",
                                           "punsubscribe", "sunsubscribe", NULL};

Test(command_table, every_command_is_classified_as_the_hand_lists_said)
{
    char up[64];
    for (int i = 0; i < cmd_table_len; i++) {
        const char *n = cmd_table[i].name;
        upper(n, up, sizeof(up));
        cr_expect_eq(name_query(cmd_changes_session, up), in(n, changes_session), "changes session: %s", n);
        cr_expect_eq(name_query(cmd_name_may_be_special, up), in(n, may_be_special), "may be special: %s", n);
        cr_expect_eq(name_query(cmd_name_read_whole, up), in(n, read_whole), "read whole: %s", n);
        cr_expect_eq(name_query(cmd_name_unsubscribes, up), in(n, unsubscribes), "unsubscribes: %s", n);
        const char *alone[] = {up};
        const char *one[] = {up, "x"};
        cr_expect_eq(call(cmd_is_blocking, 1, alone), in(n, blocking), "blocking: %s", n);
        cr_expect_eq(call(cmd_is_blocking, 2, one), in(n, blocking), "blocking: %s x", n);
        cr_expect_eq(call(cmd_needs_own_connection, 1, alone),
                     in(n, own) || in(n, blocking) || in(n, own_alone), "own: %s", n);
        cr_expect_eq(call(cmd_needs_own_connection, 2, one),
                     in(n, own) || in(n, blocking) || in(n, own_with_one), "own: %s x", n);
        cr_expect(!call(cmd_is_out_of_band, 2, one), "out of band: %s x", n);
    }
}

/* route_plan.c's list of the keyless commands every primary runs. */
Test(command_table, fanout_commands_as_route_plan_listed_them)
{
    static const char *const fanout[] = {"dbsize",        "keys",        "flushall",      "flushdb",
                                         "randomkey",     "scan",        "script|load",   "script|flush",
                                         "script|exists", "script|kill", "function|kill", NULL};
    for (int i = 0; i < cmd_table_len; i++) {
        const cmd_info *c = &cmd_table[i];
        cr_expect_eq(!!(c->cls & CMD_P_FANOUT), in(c->name, fanout), "%s", c->name);
        for (int j = 0; j < c->nsubs; j++)
            cr_expect_eq(!!(c->subs[j].cls & CMD_P_FANOUT), in(c->subs[j].name, fanout), "%s",
                         c->subs[j].name);
    }
}

/* By subcommand: CONFIG SET and SCRIPT DEBUG need a connection of their own,
 * SCRIPT KILL, FUNCTION KILL and FUNCTION STATS go out of band, CLIENT's
 * setters share; XREAD blocks only with BLOCK. */
Test(command_table, subcommands_and_arguments)
{
    static const char *const out_of_band[] = {"script|kill", "function|kill", "function|stats", NULL};
    static const char *const own_subs[] = {"config|set", "script|debug", NULL};
    for (int i = 0; i < cmd_table_len; i++) {
        const cmd_info *c = &cmd_table[i];
        for (int j = 0; j < c->nsubs; j++) {
            const char *s = c->subs[j].name;
            const char *words[] = {c->name, sub_name(s), "a", "b"};
            cr_expect_eq(call(cmd_is_out_of_band, 2, words), in(s, out_of_band), "out of band: %s", s);
            if (strcmp(c->name, "client") == 0) continue; /* all of CLIENT but its setters: below */
            cr_expect_eq(call(cmd_needs_own_connection, 4, words), in(s, own_subs), "own: %s", s);
        }
    }
    const char *setname[] = {"CLIENT", "SETNAME", "x"}, *setinfo[] = {"client", "setinfo", "lib-name", "x"};
    const char *list[] = {"client", "list"}, *setname_bad[] = {"client", "setname"};
    cr_expect(!call(cmd_needs_own_connection, 3, setname));
    cr_expect(!call(cmd_needs_own_connection, 4, setinfo));
    cr_expect(call(cmd_needs_own_connection, 2, list));
    cr_expect(call(cmd_needs_own_connection, 2, setname_bad));
    const char *xread[] = {"XREAD", "STREAMS", "k", "0"},
               *xblock[] = {"xread", "BLOCK", "0", "STREAMS", "k", "0"};
    const char *xgroup[] = {"xreadgroup", "GROUP", "block", "c", "streams", "k", ">"};
    cr_expect(!call(cmd_is_blocking, 4, xread));
    cr_expect(!call(cmd_needs_own_connection, 4, xread));
    cr_expect(call(cmd_is_blocking, 6, xblock));
    cr_expect(call(cmd_needs_own_connection, 6, xblock));
    cr_expect(!call(cmd_is_blocking, 7, xgroup));
}

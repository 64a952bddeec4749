/* The command ids behind the per-command metrics (proxy/cmdid.c): every
 * Redis command and verb has one, any case; anything else is `other`,
 * including names with a NUL byte, too long or empty; families group
 * Redis's commands by COMMAND DOCS group and give each verb its own. */
#include <criterion/criterion.h>
#include <string.h>

#include "proxy/cmd/command_table.h"
#include "proxy/cmdid.h"

static verb_table table;
static cmdid_table ids;

static void setup(void)
{
    char err[256];
    cr_assert_eq(verbs_build(&table, NULL, 0, 100000, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(cmdid_build(&ids, &table, err, sizeof(err)), 0, "%s", err);
}

static void teardown(void)
{
    cmdid_free(&ids);
    verbs_free(&table);
}

TestSuite(cmdid, .init = setup, .fini = teardown);

static int id_of(const char *name)
{
    return cmdid_lookup(&ids, name, strlen(name));
}

Test(cmdid, every_redis_command_and_verb_is_found_in_any_case)
{
    for (int i = 0; i < cmd_table_len; i++) {
        const char *n = cmd_table[i].name;
        cr_assert_eq(id_of(n), i, "%s", n);
        char upper[64];
        size_t l = strlen(n);
        for (size_t k = 0; k <= l; k++)
            upper[k] = (char)(n[k] >= 'a' && n[k] <= 'z' ? n[k] - 32 : n[k]);
        cr_assert_eq(id_of(upper), i, "%s", upper);
        cr_assert_null(cmdid_verb(&ids, i));
    }
    for (int v = 0; v < table.nnamed; v++) {
        int id = id_of(table.verbs[v]->name);
        cr_assert_eq(id, ids.nredis + v);
        cr_assert_eq(cmdid_verb(&ids, id), table.verbs[v]);
        cr_assert_str_eq(ids.name[id], table.verbs[v]->name);
    }
}

Test(cmdid, anything_else_is_other)
{
    cr_assert_eq(id_of("nosuchcommand"), ids.other);
    cr_assert_eq(id_of(""), ids.other);
    cr_assert_eq(id_of("verbproxy"), ids.other);
    cr_assert_eq(cmdid_lookup(&ids, "get\0x", 5), ids.other);
    cr_assert_eq(cmdid_lookup(&ids, "ge", 2), ids.other);
    cr_assert_eq(id_of("getgetgetgetgetgetgetgetgetgetgetget"), ids.other);
    cr_assert_null(cmdid_verb(&ids, ids.other));
    cr_assert_str_eq(ids.name[ids.other], "other");
}

Test(cmdid, families)
{
    cr_assert_str_eq(ids.family_name[ids.family[id_of("get")]], "string");
    cr_assert_eq(ids.family[id_of("get")], ids.family[id_of("set")]);
    cr_assert_str_eq(ids.family_name[ids.family[id_of("zadd")]], "sorted-set");
    cr_assert_str_eq(ids.family_name[ids.family[id_of("hexpire")]], "hash");
    int zt = id_of("ztick"), lr = id_of("lockrelease");
    cr_assert(ids.family_is_verb[ids.family[zt]]);
    cr_assert_neq(ids.family[zt], ids.family[lr]);
    cr_assert_str_eq(ids.family_name[ids.family[zt]], "ztick");
    cr_assert_str_eq(ids.family_name[ids.family[ids.other]], "other");
    cr_assert(!ids.family_is_verb[ids.family[ids.other]]);
}

/* command_lookup.c - finding a command in the generated table
 * (command_table.c) by name, any case: the hot path's one name lookup. */
#include <string.h>

#include "proxy/cmd/command_table.h"

static inline unsigned char lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

/* A table name (lower case) equals an argument of any case. */
static int name_is(const char *lname, const char *arg, size_t len)
{
    for (size_t k = 0; k < len; k++)
        if (lname[k] == '\0' || (unsigned char)lname[k] != lower((unsigned char)arg[k])) return 0;
    return lname[len] == '\0';
}

const cmd_info *cmd_table_find(const char *name, size_t len)
{
    if (len == 0) return NULL;
    unsigned h = 2166136261u; /* FNV-1a, as the generator's */
    for (size_t i = 0; i < len; i++)
        h = (h ^ lower((unsigned char)name[i])) * 16777619u;
    for (unsigned s = h & (CMD_TABLE_SLOTS - 1); cmd_table_slots[s] >= 0;
         s = (s + 1) & (CMD_TABLE_SLOTS - 1)) {
        const cmd_info *c = &cmd_table[cmd_table_slots[s]];
        if (name_is(c->name, name, len)) return c;
    }
    return NULL;
}

/* Compare a table name (lower case, from `skip` on) with an argument of any
 * case: <0, 0, >0 as strcmp. */
static int name_cmp(const char *name, const char *arg, size_t len)
{
    size_t k = 0;
    for (; k < len && name[k]; k++) {
        int a = (unsigned char)name[k], b = lower((unsigned char)arg[k]);
        if (a != b) return a - b;
    }
    if (k < len) return -1; /* name is a prefix of arg */
    return name[k] ? 1 : 0;
}

const cmd_info *cmd_table_find_sub(const cmd_info *cmd, const char *name, size_t len)
{
    size_t skip = strlen(cmd->name) + 1; /* "object|" */
    int lo = 0, hi = cmd->nsubs - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = name_cmp(cmd->subs[mid].name + skip, name, len);
        if (c == 0) return &cmd->subs[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

const cmd_info *cmd_table_lookup(int argc, const char *const *argv, const size_t *lens)
{
    if (argc < 1) return NULL;
    const cmd_info *c = cmd_table_find(argv[0], lens[0]);
    if (!c || (c->cls & CMD_P_NEWER)) return NULL;
    if (!c->nsubs || argc < 2) return c;
    return cmd_table_find_sub(c, argv[1], lens[1]);
}

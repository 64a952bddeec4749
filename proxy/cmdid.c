#include "proxy/cmdid.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/buffer.h"
#include "proxy/cmd/command_table.h"

/* The family called `name` (a Redis group), added if new. */
static int cmdid_family(cmdid_table *t, const char *name, int is_verb)
{
    if (!is_verb)
        for (int f = 0; f < t->nfamilies; f++)
            if (!t->family_is_verb[f] && strcmp(t->family_name[f], name) == 0) return f;
    t->family_name[t->nfamilies] = name;
    t->family_is_verb[t->nfamilies] = (unsigned char)is_verb;
    return t->nfamilies++;
}

int cmdid_build(cmdid_table *t, const verb_table *verbs, char *err, size_t errlen)
{
    memset(t, 0, sizeof(*t));
    t->verbs = verbs;
    t->nredis = cmd_table_len;
    t->nverbs = verbs->nnamed;
    t->other = t->nredis + t->nverbs;
    t->count = t->other + 1;
    if (t->count >= CMDID_NONE) {
        snprintf(err, errlen, "too many verbs (%d)", t->nverbs);
        return -1;
    }
    t->name = vp_malloc((size_t)t->count * sizeof(*t->name));
    t->family = vp_malloc((size_t)t->count * sizeof(*t->family));
    t->family_name = vp_malloc((size_t)t->count * sizeof(*t->family_name));
    t->family_is_verb = vp_malloc((size_t)t->count);
    for (int i = 0; i < t->nredis; i++) {
        t->name[i] = cmd_table[i].name;
        t->family[i] = cmdid_family(t, cmd_table[i].group, 0);
    }
    for (int i = 0; i < t->nverbs; i++) {
        int id = t->nredis + i;
        t->name[id] = verbs->verbs[i]->name;
        t->family[id] = cmdid_family(t, t->name[id], 1);
    }
    t->name[t->other] = "other";
    t->family[t->other] = cmdid_family(t, "other", 0);
    return 0;
}

void cmdid_free(cmdid_table *t)
{
    free(t->name);
    free(t->family);
    free(t->family_name);
    free(t->family_is_verb);
    memset(t, 0, sizeof(*t));
}

int cmdid_lookup(const cmdid_table *t, const char *name, size_t len)
{
    /* Redis's commands first: a verb cannot shadow one (verbs_parse_custom). */
    const cmd_info *c = cmd_table_find(name, len);
    if (c) return cmd_table_index(c);
    const verb_def *v = verbs_find(t->verbs, name, len);
    if (v && v->id < t->nverbs) return t->nredis + v->id;
    return t->other;
}

#include "proxy/session/cmdid.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/buffer.h"

/* Longer names are no command of ours: "other" without hashing them. */
#define CMDID_NAME_MAX 32

static unsigned cmdid_hash(const char *lower, size_t len)
{
    unsigned h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)lower[i]) * 16777619u;
    return h;
}

static void cmdid_insert(cmdid_table *t, int id)
{
    unsigned s = cmdid_hash(t->name[id], strlen(t->name[id])) & t->mask;
    while (t->slots[s] >= 0)
        s = (s + 1) & t->mask;
    t->slots[s] = id;
}

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
    t->nredis = verbs_redis_command_count();
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
    unsigned nslots = 1024;
    while (nslots < 4u * (unsigned)t->count)
        nslots *= 2;
    t->mask = nslots - 1;
    t->slots = vp_malloc(nslots * sizeof(*t->slots));
    memset(t->slots, 0xff, nslots * sizeof(*t->slots));
    for (int i = 0; i < t->nredis; i++) {
        t->name[i] = verbs_redis_command_name(i);
        t->family[i] = cmdid_family(t, verbs_redis_command_group(i), 0);
        cmdid_insert(t, i);
    }
    for (int i = 0; i < t->nverbs; i++) {
        int id = t->nredis + i;
        t->name[id] = verbs->verbs[i]->name;
        t->family[id] = cmdid_family(t, t->name[id], 1);
        cmdid_insert(t, id);
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
    free(t->slots);
    memset(t, 0, sizeof(*t));
}

int cmdid_lookup(const cmdid_table *t, const char *name, size_t len)
{
    if (len == 0 || len >= CMDID_NAME_MAX) return t->other;
    char lower[CMDID_NAME_MAX];
    for (size_t i = 0; i < len; i++) {
        char ch = name[i];
        lower[i] = ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
    }
    for (unsigned s = cmdid_hash(lower, len) & t->mask; t->slots[s] >= 0; s = (s + 1) & t->mask) {
        const char *n = t->name[t->slots[s]];
        if (strnlen(n, len + 1) == len && memcmp(n, lower, len) == 0) return t->slots[s];
    }
    return t->other;
}

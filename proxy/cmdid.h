/* cmdid.h - one number per command name the proxy counts (metrics.h):
 * Redis's own commands (their index in the command table,
 * proxy/cmd/command_table.h), then the verbs (proxy/verbs/verbs.h, custom ones
 * too), then "other" for every other name. The labels of the
 * per-command metrics are these names and nothing else, so a client sending
 * random command names cannot grow them.
 *
 * The lookup is the hot path's one name lookup: client.c finds a command's
 * id once (the command table's hash, then the verb table's), and takes its
 * verb from it (cmdid_verb) instead of asking the verb table again.
 *
 * Each id also belongs to a family, what the latency histogram is kept
 * per: Redis's command group ("string", "sorted-set", ...: COMMAND DOCS's)
 * for Redis's commands, a family of its own for each verb, and "other".
 *
 * Built once at start-up from the verb table (which must outlive it);
 * read-only afterwards. */
#ifndef VP_CMDID_H
#define VP_CMDID_H

#include <stddef.h>

#include "proxy/verbs/verbs.h"

/* No command: a pending reply that answers none (a barrier, a protocol
 * error). */
#define CMDID_NONE 0xFFFF

typedef struct cmdid_table {
    const verb_table *verbs;
    int nredis;        /* ids [0, nredis): Redis's commands, in the command table's order */
    int nverbs;        /* ids [nredis, nredis + nverbs): verbs, in the verb table's order */
    int other;         /* the last id: any other name */
    int count;         /* other + 1 */
    const char **name; /* [count] lower case */
    int *family;       /* [count] family index */
    int nfamilies;
    const char **family_name; /* [nfamilies]: a Redis group, a verb's name, or "other" */
    unsigned char *family_is_verb;
} cmdid_table;

/* 0, or -1 with a reason in err (too many verbs to number). */
int cmdid_build(cmdid_table *t, const verb_table *verbs, char *err, size_t errlen);
void cmdid_free(cmdid_table *t);

/* The id of a command name (any case): always one (`other` when unknown). */
int cmdid_lookup(const cmdid_table *t, const char *name, size_t len);

/* The verb an id names, or NULL. */
static inline const verb_def *cmdid_verb(const cmdid_table *t, int id)
{
    unsigned v = (unsigned)(id - t->nredis);
    return v < (unsigned)t->nverbs ? t->verbs->verbs[v] : NULL;
}

#endif

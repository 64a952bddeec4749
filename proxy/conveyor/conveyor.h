/* conveyor.h - conveyor keys (docs/conveyor.md): sorted sets declared by
 * `conveyor PATTERN` lines whose scores are stored relative to a per-key
 * offset, so that ZTICK moves the offset instead of every member. Here:
 * which commands on such keys the proxy translates, and the script call
 * each becomes.
 *
 * A translated command is sent as EVALSHA of one of the translation
 * scripts (lua/conveyor_*.lua; the verb table's `translation` entries)
 * with
 *     KEYS  each of the command's keys followed by its offset key
 *           (offset_key.h), in Redis's order of the keys;
 *     ARGV  the client's RESP version ("2" or "3", the hidden argument),
 *           a mask with '1' for each key that is a conveyor key and '0'
 *           for each that is not, then the command exactly as the client
 *           sent it, its name first.
 * A command with a wrong number of arguments is never translated: Redis
 * answers it, and changes nothing. Nor is one whose keys are all plain, or
 * one that reads no score (ZCARD, ZREM, ZRANGE by rank without WITHSCORES,
 * a score range whose ends are both infinite without WITHSCORES, ...):
 * those go to Redis as they are.
 *
 * Pure: no libuv, no I/O. The call's arguments are built in a scratch the
 * caller keeps (one per event loop: conveyor_scratch), valid until the
 * next plan. */
#ifndef VP_CONVEYOR_H
#define VP_CONVEYOR_H

#include <stddef.h>

#include "protocol/resp_request.h"
#include "proxy/buffer.h"
#include "proxy/conveyor/offset_cache.h"
#include "proxy/verbs/verbs.h"

struct vp_config;

typedef struct conveyor_scratch {
    resp_arg *argv; /* the call's arguments */
    int cap;
    int *keypos;       /* the command's keys (argv indexes) */
    const char **argp; /* for route_keys */
    size_t *lens;
    int argcap;
    vp_buf names;         /* the offset keys' names, back to back */
    vp_buf wrap;          /* a wrapped read's transaction, then its client's reply (conveyor_wrap.h) */
    offset_cache offsets; /* not scratch: the offsets last seen, kept across commands */
} conveyor_scratch;

void conveyor_scratch_free(conveyor_scratch *s);

/* Is `key` a conveyor key: does it match a `conveyor` pattern? */
int conveyor_key_is(const struct vp_config *conf, const char *key, size_t len);

/* Is this score range end ("-inf", "(+inf", "inf", ...) infinite, as
 * Redis's zslParseRange reads it? Such an end selects the same members in
 * positions as in stored scores: a read whose ends are both infinite
 * needs no offset (ZRANGEBYSCORE key -inf +inf LIMIT 0 10 without
 * WITHSCORES goes to Redis as it is). */
int conveyor_bound_infinite(const resp_arg *a);

/* Is it a blocking pop (BZPOPMIN, BZPOPMAX, BZMPOP)? Its translation
 * pops or says "wait" (the session waits and tries again). */
int conveyor_blocks(int argc, const resp_arg *argv);

/* WATCH naming conveyor keys: the request with each one's offset key
 * watched after it (a tick changes only that), written to out; 0 (out
 * untouched) when it names none. */
int conveyor_watch_request(const struct vp_config *conf, int argc, const resp_arg *argv, vp_buf *out);

/* Could a command of this name be translated (then it is read whole
 * before it is sent: its keys decide)? 0 whenever no pattern is set. */
int conveyor_may_translate(const struct vp_config *conf, const resp_arg *name);

/* The translation of this command, if it is one, for a server of
 * server_version (conveyor_version; a form the server lacks is left to
 * it): 1 with *v (a translation entry of t), *call and the arguments to
 * send in *out_argv / *out_argc (the scratch's), else 0. A built-in verb
 * whose keys are sorted sets has its keys found by the verb (verbs_check),
 * and is not translated when the verb refuses its arguments. */
int conveyor_plan(const struct vp_config *conf, const verb_table *t, unsigned server_version, int argc,
                  const resp_arg *argv, conveyor_scratch *s, const verb_def **v, verb_call *call,
                  const resp_arg **out_argv, int *out_argc);
/* A server's version ("7.2.4") as conveyor_plan takes it; 0: unknown (then
 * every command is taken to be there). */
unsigned conveyor_version(const char *text);

#endif

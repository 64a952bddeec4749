/* conveyor_wrap.h - the reads on a conveyor key answered without a
 * script (docs/conveyor.md, "How reads are sent").
 *
 * A read whose arguments hold no score but whose reply does (ZSCORE,
 * ZMSCORE, ZRANK and ZREVRANK WITHSCORE, ZRANGE by rank and ZREVRANGE
 * WITHSCORES, ZRANDMEMBER WITHSCORES) needs only the key's offset added to
 * each score of the reply. So instead of a script it is sent as it is, in
 * a transaction with the read of its offset:
 *
 *     MULTI, HGET <offset key> offset, <the command>, EXEC
 *
 * (upstream_forward_transaction) and the proxy adds the offset to the scores of EXEC's reply, formatting each
 * as the server formats a double (protocol/resp_double.h). Redis spends on that about what it spends on the
 * command alone; a script costs it two to five times as much (bench/RESULTS.md).
 *
 * Only for a reply of bounded length (at most CONVEYOR_WRAP_MAX elements
 * asked), read whole before it is rewritten. Pure: no I/O. */
#ifndef VP_CONVEYOR_WRAP_H
#define VP_CONVEYOR_WRAP_H

#include <stddef.h>

#include "protocol/resp_request.h"
#include "proxy/buffer.h"

struct vp_config;

/* Which elements of the reply are scores. */
typedef enum conveyor_wrap_shape {
    CONVEYOR_WRAP_NONE,   /* not a read sent this way */
    CONVEYOR_WRAP_SCALAR, /* the reply itself (ZSCORE) */
    CONVEYOR_WRAP_ALL,    /* every element (ZMSCORE) */
    CONVEYOR_WRAP_ODD,    /* every second one: member, score pairs; rank, score */
    CONVEYOR_WRAP_ASIS    /* none (a checked read without WITHSCORES, ZCOUNT) */
} conveyor_wrap_shape;

/* The most elements a wrapped read may ask for (ZRANGE 0 999, ZRANDMEMBER
 * 1000): a longer one goes as a script, whose reply is streamed. */
#define CONVEYOR_WRAP_MAX 1000

/* May this command (one conveyor_plan translates) be wrapped: its shape,
 * or NONE. The key is argv[1]. The connection is the caller's to judge. */
conveyor_wrap_shape conveyor_wrap_shape_of(const struct vp_config *conf, int argc, const resp_arg *argv);

/* The transaction for the command (its key argv[1]), into out (cleared
 * first); where in it the command is, as RESP: *cmd_at, *cmd_len. */
void conveyor_wrap_request(int argc, const resp_arg *argv, vp_buf *out, size_t *cmd_at, size_t *cmd_len);
/* The arguments of a command conveyor_wrap_request wrote (p..p+n): the
 * first `max` into argv (pointing into p), and how many there are; -1 if
 * p is not such a command. */
int conveyor_wrap_args(const char *p, size_t n, resp_arg *argv, int max);
#define CONVEYOR_WRAP_QUEUED 2 /* commands it queues (upstream_forward_transaction) */

/* A score range read with a finite end (ZRANGEBYSCORE, ZREVRANGEBYSCORE,
 * ZRANGE ... BYSCORE with LIMIT of at most CONVEYOR_WRAP_MAX, ZCOUNT) is
 * checked instead: its bounds need the offset before the command can be
 * written, so it is written with the offset the proxy expects
 * (offset_cache.h) and sent as
 *
 *     MULTI, HGET <offset key> offset, <the command, bounds in stored
 *     scores>, EVALSHA <its script> with 'expect' <that offset>, EXEC
 *
 * where the script (lua/conveyor_read.lua) replies false when the offset
 * is the expected one, and the read's whole reply otherwise. One
 * transaction: no retry, nothing reordered. */
typedef struct conveyor_checked {
    conveyor_wrap_shape shape; /* ODD (WITHSCORES) or ASIS */
    int finite[2];             /* argv[2], argv[3]: a finite end (else infinite, sent as it is) */
    int exclusive[2], lower[2];
    double value[2];
} conveyor_checked;
#define CONVEYOR_CHECKED_QUEUED 3 /* commands it queues: HGET, the command, the script */

/* Is it such a read (its key argv[1])? 1 with *ck. */
int conveyor_wrap_checked_of(const struct vp_config *conf, int argc, const resp_arg *argv,
                             conveyor_checked *ck);
/* MULTI, HGET and the command written with `offset`, into out (cleared
 * first); the caller sends the script and EXEC. */
void conveyor_wrap_checked_request(int argc, const resp_arg *argv, const conveyor_checked *ck, double offset,
                                   vp_buf *out);

/* An offset's text as the scripts read it (Lua's tonumber): 1 with its
 * value when it is a finite number. */
int conveyor_wrap_offset_text(const char *text, size_t len, double *out);

/* What EXEC's reply said the offset key held: for offset_cache_put. */
typedef struct conveyor_wrap_seen {
    enum { CONVEYOR_SEEN_NOTHING, CONVEYOR_SEEN_NONE, CONVEYOR_SEEN_TEXT } state;
    const char *text; /* TEXT: into the reply */
    size_t len;
    int stale; /* a checked read's offset had moved: its script answered */
} conveyor_wrap_seen;

/* The client's reply from p..p+n, EXEC's reply or what came instead (an
 * error): 1 with it in out (cleared first), 0 when it is p..p+n as it is,
 * -1 when a checked read must go again as its script (the server lacked
 * the script: NOSCRIPT). key: the conveyor key's name, for the error a bad
 * offset gets; fpconv: the server's double format (resp_double_format);
 * checked: a checked read's (its shape ck->shape). */
int conveyor_wrap_reply(conveyor_wrap_shape shape, int checked, int fpconv, const char *key, size_t klen,
                        const char *p, size_t n, vp_buf *out, conveyor_wrap_seen *seen);

#endif

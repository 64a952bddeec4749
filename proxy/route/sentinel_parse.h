/* sentinel_parse.h - what a sentinel or a data node said, judged from its
 * bytes alone (no sockets, no state: tests/fuzz/fuzz_sentinel.c feeds it
 * anything).
 *
 * Sentinel connections are plain TCP, and a node named by a sentinel is
 * whatever answers on that address: every byte judged here may be a hostile
 * peer's. Each function takes one reply as the peer sent it (the caller
 * framed it with protocol/resp_frame.h, but nothing here relies on that),
 * never reads past `len`, and answers only "this is exactly the shape a
 * real server sends" or "it is not" (with why, printable, for the log).
 * What is not understood is never taken: a malformed +switch-master moves
 * nothing, a ROLE reply that does not start with "master" is not a primary. */
#ifndef VP_SENTINEL_PARSE_H
#define VP_SENTINEL_PARSE_H

#include <stddef.h>

#define SENTINEL_HOST_MAX 200 /* longest host taken from a sentinel */
#define SENTINEL_NAME_MAX 255 /* longest master name in a +switch-master */
#define SENTINEL_CHANNEL "+switch-master"

/* SENTINEL MASTER's answer: where the primary is, and how sure. */
typedef struct sentinel_master_info {
    char host[SENTINEL_HOST_MAX + 1];
    int port;
    long long epoch;          /* config-epoch, >= 0 */
    int failover_in_progress; /* in its flags */
} sentinel_master_info;

/* SENTINEL MASTER <name>: a flat field/value array with ip, port,
 * config-epoch and flags, each well formed. 0 with `out` filled, or -1
 * (why says what was wrong; an error reply's text for an error). */
int sentinel_parse_master(const char *reply, size_t len, sentinel_master_info *out, char *why, size_t whylen);

/* AUTH's answer: 0 for +OK; -1 for anything else (why: the error's text,
 * or what came instead). */
int sentinel_parse_auth(const char *reply, size_t len, char *why, size_t whylen);

typedef enum sentinel_pubsub_kind {
    SENTINEL_PUBSUB_MALFORMED = 0, /* anything but the two below: ignored (and the sentinel asked) */
    SENTINEL_PUBSUB_SUBSCRIBED,    /* ["subscribe", "+switch-master", :n] */
    SENTINEL_PUBSUB_SWITCH         /* ["message", "+switch-master", "<name> <old> <port> <new> <port>"] */
} sentinel_pubsub_kind;

/* A +switch-master message's content. */
typedef struct sentinel_switch {
    char master[SENTINEL_NAME_MAX + 1];
    char host[SENTINEL_HOST_MAX + 1]; /* the new primary */
    int port;
} sentinel_switch;

/* One reply on the subscribed connection. For SENTINEL_PUBSUB_SWITCH `out`
 * is filled; for SENTINEL_PUBSUB_MALFORMED why says what was wrong. */
sentinel_pubsub_kind sentinel_parse_pubsub(const char *reply, size_t len, sentinel_switch *out, char *why,
                                           size_t whylen);

/* ROLE's answer from a data node, or the first piece of it (at least the
 * array's header and its first element when it is "master"): 1 if it is
 * an array whose first element is the string "master" (bulk or simple),
 * else 0. `said` (if not NULL) gets what the node said instead, printable:
 * the role it named ("slave", "sentinel"), or the reply's start. */
int sentinel_parse_role(const char *reply, size_t len, char *said, size_t saidlen);

#endif

/* tryagain.h - cluster mode: a request answered -TRYAGAIN, sent again.
 *
 * Redis Cluster answers -TRYAGAIN to a command over several keys of one
 * slot while that slot migrates and its keys are split between the source
 * and the target (the source holds some, or the target, asked, lacks
 * some). Once MIGRATE has moved the rest the same request succeeds, so
 * the proxy holds it (a copy: the connection that kept it moves on) and
 * sends it again to the same node, the same way (after ASKING when -ASK
 * had brought it there), after TRYAGAIN_FIRST_MS, doubling, at most
 * TRYAGAIN_TRIES times (10+20+40+80+160 ms: 310 ms in all); the next
 * -TRYAGAIN then goes to the client. Its reply keeps its place in the client's
 * reply queue: replies stay in request order, later ones wait for it.
 *
 * One uv timer for every held request, set for the earliest; a held
 * request of a client that left is dropped when due (it never ran).
 * Allocates per -TRYAGAIN (rare: a migration), never per command. */
#ifndef VP_TRYAGAIN_H
#define VP_TRYAGAIN_H

#include <stddef.h>

#include "proxy/server.h"

typedef struct upstream_node upstream_node; /* route.h */

struct up_entry;
struct client_session;

#define TRYAGAIN_TRIES 5
#define TRYAGAIN_FIRST_MS 10

typedef struct tryagain_q tryagain_q;

tryagain_q *tryagain_new(vp_server *srv);
/* Drops what is held (their clients are going too: shutdown) and frees q
 * once its timer is closed. */
void tryagain_free(tryagain_q *q);
/* The request e (req..req+n, kept by a connection to `node`, sent after
 * ASKING when `asked`) was answered -TRYAGAIN: hold it and send it again
 * later. 0: its tries are spent, the error goes to the client. */
int tryagain_hold(tryagain_q *q, upstream_node *node, const struct up_entry *e, const char *req, size_t n);
/* The client is gone: its held requests are not sent. */
void tryagain_detach_client(tryagain_q *q, struct client_session *c);

#endif

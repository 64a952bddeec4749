/* redirect_check.h - cluster mode: a redirect the proxy does not take on
 * trust, held until the replying node's own CLUSTER NODES says whether it
 * is the cluster's.
 *
 * An error reply that reads -MOVED, -ASK or -TRYAGAIN is Redis's own for
 * every command but those that run a script (EVAL, EVALSHA, FCALL and
 * their _RO forms, and custom verbs: the operator's Lua, sent as
 * EVALSHA; the built-in verbs' scripts return no redirect): a script
 * returns any error text it likes
 * (redis.error_reply), after its writes ran. And a redirect naming an
 * address the proxy has not learned from the cluster would send client
 * traffic, and the upstream credentials, there. cluster.c follows a
 * redirect at once only when it is Redis's own (not a script's) and names
 * a node the proxy already knows (its seeds, the nodes of the CLUSTER SLOTS
 * map, nodes a check confirmed). Any other one it can still believe comes
 * here: the request (a copy) and the error are held, and the node that
 * replied is asked CLUSTER NODES on a connection of the check's own, sent
 * after the reply came, so its answer is the node's view after the
 * command ran. The redirect is followed (the callback given to
 * rcheck_new) only when that view agrees:
 *
 *   - the address it names is a node of that view (by ip or hostname);
 *   - from a script, moreover: -MOVED only when that node serves the slot
 *     (so the replying node did not, and the script never ran there);
 *     -ASK only when the replying node migrates the slot to that node
 *     ([slot->-id]); -TRYAGAIN only when it migrates or imports the slot;
 *     and never when an EXISTS of the script's keys, sent on the check's
 *     connection before CLUSTER NODES, finds them all there: Redis answers
 *     a script -ASK or -TRYAGAIN only when a key is missing, and a key
 *     cannot appear on a node that migrates its slot, so keys all present
 *     after the reply were present when the script ran (it ran).
 *
 * Otherwise, and when the check fails or takes longer than the connect
 * timeout + 2 s, the client gets the error as Redis sent it. A check
 * answers every redirect that came from its node before it was sent; at
 * most one is in flight per node, started at most every
 * RCHECK_MIN_INTERVAL_MS (a client returning forged redirects in a loop
 * costs a node one CLUSTER NODES per interval). At most RCHECK_MAX_HELD
 * requests (RCHECK_MAX_BYTES) are held, and at most 1/16 of either for
 * one client (RCHECK_CLIENT_HELD, RCHECK_CLIENT_BYTES): past that the
 * error goes to its client at once. One client's pipelined forgeries fill
 * its own share, not the budget the other clients' redirects need (16
 * clients forging together still can). A redirect followed after a check changes no slot of
 * the map: a refresh (topology.h) is asked for.
 *
 * Allocates per held redirect (rare: a migration, or a script's forgery),
 * never per command. */
#ifndef VP_REDIRECT_CHECK_H
#define VP_REDIRECT_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "proxy/route/redirect.h"
#include "proxy/server.h"

typedef struct upstream_node upstream_node; /* route.h */

struct up_entry;
struct upstream_conn;
struct client_session;

#define RCHECK_MIN_INTERVAL_MS 100
#define RCHECK_MAX_HELD 1024
#define RCHECK_MAX_BYTES (8u << 20)
/* One client's share of those (past it, its own redirects go to it at
 * once; the other clients' are still held) */
#define RCHECK_CLIENT_HELD (RCHECK_MAX_HELD / 16)
#define RCHECK_CLIENT_BYTES (RCHECK_MAX_BYTES / 16)
#define RCHECK_ANSWER_MS 2000

/* What the view must say besides naming the redirect's node. */
typedef struct rcheck_want {
    int script;        /* the reply of a script: it must say the redirect is Redis's */
    int slot;          /* script: the slot of its keys */
    int multiple_keys; /* script: a key other than the first (Redis's -TRYAGAIN needs one) */
    int nkeys;         /* script: its key arguments */
    const char *probe; /* script: EXISTS of its keys (a RESP request, copied) */
    size_t probelen;
} rcheck_want;

/* Send the request on as the redirect r says (r's host resolved: never
 * empty), from the node that replied. 1: sent (or held to be sent);
 * 0: not, the error goes to the client. */
typedef int (*rcheck_follow_fn)(vp_server *srv, upstream_node *from, const struct up_entry *e,
                                const char *req, size_t reqlen, const redirect *r);

typedef struct rcheck_q rcheck_q;

rcheck_q *rcheck_new(vp_server *srv, rcheck_follow_fn follow);
/* Closes the checks in flight, drops what is held (shutdown). */
void rcheck_free(rcheck_q *q);
/* Hold request e (req..req+reqlen), answered by `from` with the error
 * err..err+errlen that reads as r (host resolved: it may point anywhere,
 * it is copied), until a check of `from` says whether to follow it.
 * 1: held; 0: too much is held, the error goes to the client now. */
int rcheck_hold(rcheck_q *q, upstream_node *from, const struct up_entry *e, const char *req, size_t reqlen,
                const char *err, size_t errlen, const redirect *r, const rcheck_want *w);
/* Start the checks that are due, give up on those too slow (the cluster
 * module's timer). */
void rcheck_tick(rcheck_q *q, uint64_t now_ms);
/* A check's connection got its answer (whole, p..p+n). 1 if it was one of
 * ours (it is then closed); 0: not a check's connection. */
int rcheck_answered(rcheck_q *q, struct upstream_conn *up, const char *p, size_t n);
/* A check's connection failed or was lost (closed by its caller). 1 if it
 * was one of ours. */
int rcheck_failed(rcheck_q *q, struct upstream_conn *up, const char *why);
/* The client is gone: its held requests are dropped when decided. */
void rcheck_detach_client(rcheck_q *q, struct client_session *c);

#endif

/* nodesview.h - one node's own view of the cluster, read from its
 * CLUSTER NODES reply: the question a held redirect asks (rcheck.h).
 *
 * One line per node the replying node knows:
 *   <id> <ip:port@cport[,hostname[,aux=...]]> <flags> <primary> <ping> <pong>
 *   <epoch> <link> <slot|from-to|[slot->-id]|[slot-<-id]> ...
 * `myself` in the flags marks the replying node's own line; its bracketed
 * entries are the slots it migrates to another node (->-) or imports
 * (-<-). The bytes come from a node of the cluster, but they are parsed as
 * untrusted: any input gives an answer, never a read past `len`
 * (tests/fuzz/fuzz_cluster.c). Pure: no allocation, no I/O; a view points
 * into the caller's bytes. */
#ifndef VP_NODESVIEW_H
#define VP_NODESVIEW_H

#include <stddef.h>

#define NVIEW_ID_LEN 40

typedef struct nview {
    const char *text;
    size_t len;
} nview;

/* The view in a whole RESP reply: a bulk string (RESP2) or a verbatim
 * string (RESP3, "txt:"). 0, or -1 for anything else (an error reply). */
int nview_from_reply(nview *v, const char *reply, size_t len);
/* The node whose address is host:port (its ip or its hostname), unless
 * it has no address yet (noaddr, handshake). 1 with its id (NUL-terminated)
 * in id, or 0. */
int nview_find(const nview *v, const char *host, size_t hostlen, int port, char id[NVIEW_ID_LEN + 1]);
/* Does the node with this id serve the slot (one of its slot ranges)? */
int nview_serves(const nview *v, const char *id, int slot);
/* Does the replying node (myself) migrate the slot to the node with this
 * id ([slot->-id])? */
int nview_migrating_to(const nview *v, int slot, const char *id);
/* Does the replying node migrate or import the slot? */
int nview_moving(const nview *v, int slot);

#endif

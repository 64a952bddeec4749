/* upstream_side.c - the side connection: one more upstream connection of
 * the server's, for the commands Redis answers while a script or function
 * is busy (SCRIPT KILL, FUNCTION KILL, FUNCTION STATS: cmd_is_out_of_band)
 * when a client on a shared connection sends them.
 *
 * Why: a busy script holds up the connection that runs it, and on a shared
 * connection every request behind it, a SCRIPT KILL too: it would reach
 * Redis only once the script is over, and be answered -NOTBUSY. Redis reads
 * other connections meanwhile, so the kill goes on a connection that never
 * carries anything else. It is a shared connection in every other respect:
 * requests are copied and written with the shared ones once per loop
 * iteration (upstream_flush_shared), each FIFO entry names its client, and
 * the reply goes to that client's pending reply, held there until the ones before it
 * (still owed by the busy shared connection) are answered, so the client
 * sees its replies in request order.
 *
 * One per node, opened on first use and kept (upstream_node.side); if it
 * fails to connect, each request on it is answered "upstream unavailable";
 * if it is lost, a client owed a reply there is closed after what arrived,
 * as on a shared one. */
#include <stdio.h>
#include <string.h>

#include "protocol/resp_write.h"
#include "proxy/log.h"
#include "proxy/upstream/upstream_node.h"
#include "proxy/upstream/upstream.h"
#include "proxy/upstream/upstream_internal.h"

static void up_side_failed(upstream_conn *up, void *arg, const char *why);
static void up_side_lost(upstream_conn *up, void *arg, const char *why);

/* What its clients were given goes out as for any shared connection's. */
static void up_side_read_done(upstream_conn *up, void *arg)
{
    (void)arg;
    const upstream_owner *shared = up_shared_owner_of();
    if (shared && shared->read_done) shared->read_done(up, up->srv);
}

static const upstream_owner up_side_owner = {
    .failed = up_side_failed, .lost = up_side_lost, .read_done = up_side_read_done};

static upstream_conn *up_side_get(vp_server *srv, upstream_node *node)
{
    if (!node->side) {
        upstream_conn *up = upstream_open(srv, node, NULL, &up_side_owner, NULL);
        up->shared = 1; /* entries name many clients; written with the shared ones */
        up->side = 1;
        up->shared_index = -1;
        node->side = up;
    }
    return node->side;
}

int upstream_side_forward(vp_server *srv, upstream_node *node, struct client_session *c, const char *p,
                          size_t n)
{
    upstream_conn *up = up_side_get(srv, node);
    srv->stats.commands_forwarded++;
    outq_add_copy(&up->out, p, n); /* the client's buffer moves on before the write */
    up_fifo_push(up, c, UP_REPLY);
    return 1;
}

int upstream_side_forward_part(vp_server *srv, upstream_node *node, struct client_session *c,
                               unsigned long long seq, const char *p, size_t n)
{
    upstream_conn *up = up_side_get(srv, node);
    srv->stats.commands_forwarded++;
    outq_add_copy(&up->out, p, n);
    up_fifo_push(up, c, UP_REPLY)->seq = seq;
    return 1;
}

void upstream_side_detach(vp_server *srv, struct client_session *c)
{
    for (int i = 0; i < srv->nnodes; i++)
        if (srv->nodes[i]->side) upstream_detach_client(srv->nodes[i]->side, c);
}

static void up_side_failed(upstream_conn *up, void *arg, const char *why)
{
    (void)arg;
    /* Each request waiting for the connect gets the error the client would
     * get for any other (client.c's wording), in its place. */
    char msg[384];
    size_t n = resp_write_errorf(msg, sizeof(msg), "ERR upstream unavailable: %s: %s", up_addr(up), why);
    /* A reply only queues, so no client closes during the walk. */
    const upstream_client_ops *clients = upstream_clients();
    for (size_t i = 0; i < upstream_owed(up); i++) {
        const up_entry *e = upstream_owed_at(up, i);
        if (!e->client) continue;
        clients->reply(e->client, e->seq, msg, n, 1);
        clients->touch(e->client);
    }
    up_side_read_done(up, NULL);
}

static void up_side_lost(upstream_conn *up, void *arg, const char *why)
{
    (void)arg;
    for (size_t i = 0; i < upstream_owed(up); i++) {
        struct client_session *c = upstream_owed_at(up, i)->client;
        if (!c) continue;
        /* Its other entries here are done with too (it may close now). */
        upstream_detach_client(up, c);
        upstream_clients()->lost(c, why);
    }
}

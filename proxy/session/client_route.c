/* client_route.c - cluster mode: which node each command of a client goes
 * to (client_route), a command split over several nodes or fanned out to
 * every primary (client_route_split), a MULTI answered before its first
 * command's node is known, and the state that keeps a client on one node.
 * See route.h and cluster.h. */
#include "proxy/session/client.h"

#include <stdio.h>

#include "proxy/route/cluster.h"
#include "proxy/route/route_plan.h"
#include "proxy/upstream/upstream_node.h"
#include "proxy/session/client_internal.h"

/* Cluster mode: a MULTI from a client on a shared connection, or on one of
 * its own that nothing holds to its node, is answered +OK by the proxy and
 * held back (multi_deferred): the transaction belongs on the node of its
 * keys, known from the command after it, which a client may send only once
 * it has the +OK. That command then moves the client to a connection of its
 * own on that node (client_route_move_own first, from another node), where
 * the MULTI goes first (its +OK dropped). An empty transaction never
 * reaches Redis. Returns 0 when the command was answered here, 1 to route
 * it (the MULTI sent first), -1 to hold it until the client is on its own
 * connection. */
static int client_route_deferred_multi(client_session *c, int argc, const resp_arg *argv,
                                       const cluster_decision *d)
{
    cmd_kind kind = cmd_classify(argc, argv);
    if (kind == CMD_EXEC || kind == CMD_DISCARD) {
        c->multi_deferred = 0;
        metrics_count(&c->srv->metrics, c->cur_cmd);
        if (kind == CMD_EXEC)
            client_queue_local(c, RESP_LIT_ARRAY(0), sizeof(RESP_LIT_ARRAY(0)) - 1);
        else
            client_queue_local(c, "+OK\r\n", 5);
        return 0;
    }
    if (c->up->shared) {
        c->route_node = d->kind == CLUSTER_GO && d->node ? d->node : c->up->node;
        client_want_own(c); /* now, or once its replies are in (settling) */
        return -1;
    }
    static const char multi[] = RESP_LIT_ARRAY(1) RESP_LIT_BULK(5, "MULTI");
    c->multi_deferred = 0;
    c->own_tx = 1;
    if (upstream_forward(c->up, c, multi, sizeof(multi) - 1, CMD_MULTI)) {
        client_pending *s = pending_push(c, PENDING_WAITING);
        s->replace = 1; /* answered +OK already */
        s->cmd = CMDID_NONE;
    }
    return 1;
}

/* Cluster mode: what a command sent on the client's own connection leaves
 * there (client_nodes.c). A transaction (MULTI, WATCH) until EXEC, DISCARD
 * or UNWATCH; state that follows the client to other nodes (HELLO, AUTH,
 * CLIENT TRACKING, ...), kept to be sent there first; state that cannot
 * (subscriptions, MONITOR, CLIENT REPLY OFF) pins it to this node until
 * RESET. */
static void client_note_own_state(client_session *c, int argc, const resp_arg *argv)
{
    switch (cnodes_effect_of(argc, argv, upstream_local_mode(c->up) == UP_LOCAL_IN_MULTI)) {
    case CNODES_TX:
        c->own_tx = 1;
        break;
    case CNODES_TX_END:
        c->own_tx = 0;
        break;
    case CNODES_PINNED:
        c->own_state = 1;
        break;
    case CNODES_FOLLOWS:
        if (cnodes_keep(c, argc, argv) < 0) c->own_state = 1; /* too much to take along */
        break;
    case CNODES_RESET:
        c->own_tx = c->own_state = 0;
        cnodes_forget(c);
        cnodes_close_parked(c);
        break;
    case CNODES_NONE:
        break;
    }
}

/* Cluster mode: a client on a connection of its own where nothing of the
 * session lives (it moved for a transaction now over, a blocking command,
 * or its output; or it holds only state that follows it, HELLO, AUTH, ...)
 * and whose command is for another node: once what it is owed is in, it
 * leaves that connection and goes on as a new client would, on the
 * command's node (moved to its own connection again if it still needs
 * one). The command (argv; NULL: a MULTI held back goes first) is noted
 * as sent there. 1: on that node, ready; 0: answered; -1: held (routed
 * again). */
static int client_route_move_own(client_session *c, upstream_node *node, int argc, const resp_arg *argv)
{
    if (c->pending_len) {
        c->settling = 1;
        return -1;
    }
    if (cnodes_has_state(c)) {
        /* Its protocol, user, tracking go along: its own connection
         * to that node, with them sent first. */
        if (!cnodes_switch(c, node)) {
            client_refuse_no_descriptor(c);
            return 0;
        }
        if (!upstream_is_ready(c->up)) return -1; /* routed again once it is */
        if (argv) client_note_own_state(c, argc, argv);
        return 1;
    }
    c->route_node = node;
    upstream_close(c->up);
    c->up = NULL;
    c->own_upstream = 0;
    c->up = client_connect(c);
    return c->up && upstream_is_ready(c->up) ? 1 : -1;
}

/* Cluster mode: a command split by hash slot or fanned out over every primary
 * (CLUSTER_SPLIT): its parts go on the nodes' shared connections, their
 * replies to one pending reply, merged there (cluster_merge.h). A client on a
 * connection of its own goes back to the shared ones for it, once its
 * replies are in, unless that connection holds state (a transaction: there
 * Redis's CROSSSLOT, which aborts it). Returns 0 (sent or answered) or -1
 * (held, as client_route). */
static int client_route_split(client_session *c, const cluster_decision *d, int argc, const resp_arg *argv)
{
    vp_server *srv = c->srv;
    if (c->up && !c->up->shared) {
        if (c->own_tx || c->own_state) {
            metrics_count(&srv->metrics, c->cur_cmd);
            char line[320];
            int n;
            if (upstream_local_mode(c->up) == UP_LOCAL_IN_MULTI && !d->fanout)
                n = snprintf(line, sizeof(line), "%s\r\n", RPLAN_ERR_CROSSSLOT);
            else
                n = snprintf(line, sizeof(line),
                             "-ERR verbproxy: '%.*s' %s is not supported on a connection holding state (on "
                             "cluster node %s)\r\n",
                             (int)(argv[0].len > 32 ? 32 : argv[0].len), argv[0].ptr,
                             d->fanout ? "over every primary" : "with keys in several slots",
                             c->up->node->addr);
            client_answer_error_line(c, line, (size_t)n);
            return 0;
        }
        if (c->pending_len) {
            c->settling = 1;
            return -1;
        }
        upstream_close(c->up);
        c->up = NULL;
        c->own_upstream = 0;
    }
    upstream_node *node;
    const char *req;
    size_t len;
    /* SCRIPT KILL, FUNCTION KILL: never behind the busy script (the nodes'
     * side connections, upstream_side.c) */
    int side = cmd_is_out_of_band(argc, argv);
    for (int i = 0; i < d->nparts && !side; i++) {
        cluster_part(srv, i, &node, &req, &len);
        upstream_conn *up = upstream_shared(srv, node, c->id);
        if (!upstream_is_ready(up)) { /* client_shared_ready resumes it */
            c->route_node = node;
            c->up = up;
            return -1;
        }
    }
    if (c->up && c->up->retired) {
        c->settling = 1; /* as client_may_share */
        return -1;
    }
    if (c->pending_len >= client_share_window(c)) {
        c->owed_wait = 1;
        client_stop_reading(c);
        return -1;
    }
    metrics_count(&srv->metrics, c->cur_cmd);
    unsigned long long seq = client_next_seq(c);
    client_pending *s = pending_push(c, PENDING_WAITING);
    s->merge = cluster_part_merge(srv);
    for (int i = 0; i < d->nparts; i++) {
        cluster_part(srv, i, &node, &req, &len);
        unsigned long long part_seq = CLIENT_PART_SEQ(seq, (unsigned long long)i);
        if (side) {
            upstream_side_forward_part(srv, node, c, part_seq, req, len);
            continue;
        }
        c->up = upstream_shared(srv, node, c->id);
        upstream_forward_part(c->up, c, part_seq, req, len);
    }
    if (!c->up) c->up = upstream_shared(srv, node, c->id); /* (it left its own: side parts only) */
    c->route_node = node;
    c->used_shared = 1;
    return 0;
}

/* Cluster mode: where the command at hand goes (cluster.h). 1: on with it,
 * c->up being its node's connection; 0: answered here; -1: held, left in
 * the buffer until the slot map or the node's connection is ready
 * (client_cluster_ready, client_shared_ready resume it), or until the
 * replies it is owed are in (settling). */
int client_route(client_session *c, int argc, const resp_arg *argv)
{
    vp_server *srv = c->srv;
    if (c->answering_unavailable) return 1;
    cluster_decision d;
    cluster_plan(srv, argc, argv, cmdid_verb(&srv->metrics.ids, c->cur_cmd), &d);
    if (d.kind == CLUSTER_WAIT) {
        c->cluster_wait = 1;
        return -1;
    }
    if (c->multi_deferred && c->up) {
        if (!c->up->shared && d.kind == CLUSTER_GO && d.node && d.node != c->up->node) {
            /* On its own connection, on another node than its keys': it
             * moves there first, then the MULTI goes. */
            int rc = client_route_move_own(c, d.node, 0, NULL);
            if (rc <= 0) return rc;
        }
        int rc = client_route_deferred_multi(c, argc, argv, &d);
        if (rc <= 0) return rc;
    } else if (c->up && (c->up->shared || (!c->own_tx && !c->own_state)) &&
               cmd_classify(argc, argv) == CMD_MULTI) {
        /* (on a connection of its own too, unless something of the session
         * holds it to its node: a WATCH, subscriptions, ... Its HELLO or
         * AUTH follows it to the node of the transaction's keys.) */
        metrics_count(&srv->metrics, c->cur_cmd);
        client_queue_local(c, "+OK\r\n", 5);
        c->multi_deferred = 1;
        return 0;
    }
    int own = c->up && !c->up->shared;
    if (d.kind == CLUSTER_ANSWER) {
        /* On its own connection Redis answers what is no error (a PING in
         * subscribe mode, a transaction's +QUEUED). */
        if (own && !d.error) return 1;
        metrics_count(&srv->metrics, c->cur_cmd);
        if (!c->up) {
            client_queue_local(c, d.reply, d.len);
            return 0;
        }
        if (d.error)
            client_answer_error_line(c, d.reply, d.len);
        else
            client_answer(c, d.reply, d.len, NULL, 1);
        return 0;
    }
    if (d.kind == CLUSTER_SPLIT) return client_route_split(c, &d, argc, argv);
    upstream_node *node = d.node ? d.node : c->up ? c->up->node : cluster_any_node(srv);
    if (!c->up || c->up->node == node) {
        c->route_node = node;
        if (own) client_note_own_state(c, argc, argv);
        return 1;
    }
    if (own && !c->own_state && !c->own_tx) {
        return client_route_move_own(c, node, argc, argv);
    }
    if (own) {
        /* Its connection's state (a transaction, WATCH, subscriptions,
         * MONITOR, CLIENT REPLY OFF) lives on one node. In a transaction
         * this is Redis's -MOVED while queueing, which aborts it at EXEC:
         * here CROSSSLOT. */
        metrics_count(&srv->metrics, c->cur_cmd);
        char line[320];
        int n = upstream_local_mode(c->up) == UP_LOCAL_IN_MULTI
                    ? snprintf(line, sizeof(line), "%s\r\n", RPLAN_ERR_CROSSSLOT)
                    : snprintf(line, sizeof(line),
                               "-ERR verbproxy: this connection holds state on cluster node %s; slot %d is "
                               "served by %s\r\n",
                               c->up->node->addr, d.slot, node->addr);
        client_answer_error_line(c, line, (size_t)n);
        return 0;
    }
    /* Another node's shared connection: what it was sent elsewhere stays
     * owed there, and its pending replies keep the order. */
    c->route_node = node;
    c->up = upstream_shared(srv, node, c->id);
    return upstream_is_ready(c->up) ? 1 : -1;
}

void client_cluster_ready(vp_server *srv)
{
    client_session *next;
    for (client_session *c = srv->clients; c; c = next) {
        next = c->next;
        if (!c->cluster_wait) continue;
        c->cluster_wait = 0;
        client_start_reading(c);
        client_process_input(c);
        client_maybe_finish(c);
    }
}

void client_cluster_failed(vp_server *srv, const char *reason)
{
    client_session *next;
    for (client_session *c = srv->clients; c; c = next) {
        next = c->next;
        if (!c->cluster_wait) continue;
        c->cluster_wait = 0;
        client_upstream_failed(c, reason);
    }
}

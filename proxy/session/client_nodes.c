/* client_nodes.c - a client's own connections to several cluster nodes
 * (client_internal.h, "client_nodes.c"). */
#include "proxy/session/client_internal.h"

#include <stdlib.h>
#include <string.h>

#include "proxy/buffer.h"
#include "proxy/session/client.h"
#include "proxy/cmd/command.h"
#include "proxy/session/limits.h"
#include "proxy/log.h"
#include "proxy/route/route.h"
#include "proxy/server.h"
#include "proxy/upstream/upstream.h"

typedef enum kept_kind { KEPT_OTHER, KEPT_HELLO, KEPT_AUTH } kept_kind;

/* Owned by the client (c->nodes), made at its first state or node move. */
struct cnodes {
    vp_buf state; /* the kept requests, one after the other (RESP) */
    size_t end[CNODES_MAX_STATE];
    unsigned char kind[CNODES_MAX_STATE];
    int nstate;
    upstream_conn **parked; /* its own connections to other nodes, owing nothing */
    int nparked, parked_cap;
};

static struct cnodes *cnodes_of(client_session *c)
{
    if (!c->nodes) {
        c->nodes = vp_malloc(sizeof(*c->nodes));
        memset(c->nodes, 0, sizeof(*c->nodes));
    }
    return c->nodes;
}

static int is_client_sub(int argc, const resp_arg *argv, const char *sub)
{
    return argc >= 2 && cmd_arg_is(&argv[0], "client") && cmd_arg_is(&argv[1], sub);
}

cnodes_effect cnodes_effect_of(int argc, const resp_arg *argv, int in_multi)
{
    cmd_kind kind = cmd_classify(argc, argv);
    if (kind == CMD_RESET) return CNODES_RESET;
    if (kind == CMD_EXEC || kind == CMD_DISCARD) return CNODES_TX_END;
    if (in_multi) return CNODES_NONE; /* queued: what it does happens at EXEC */
    switch (kind) {
    case CMD_MULTI:
        return CNODES_TX;
    case CMD_SUBSCRIBE:
        return cmd_name_unsubscribes(&argv[0]) ? CNODES_NONE : CNODES_PINNED;
    case CMD_MONITOR:
    case CMD_CLIENT_REPLY_OFF:
    case CMD_CLIENT_REPLY_SKIP:
    case CMD_UNCOUNTABLE:
    case CMD_REPLICATION:
        return CNODES_PINNED;
    default:
        break;
    }
    if (cmd_arg_is(&argv[0], "watch")) return CNODES_TX;
    if (cmd_arg_is(&argv[0], "unwatch")) return CNODES_TX_END;
    if (cmd_arg_is(&argv[0], "hello") || cmd_arg_is(&argv[0], "auth")) return CNODES_FOLLOWS;
    if (is_client_sub(argc, argv, "tracking") || is_client_sub(argc, argv, "no-evict") ||
        is_client_sub(argc, argv, "no-touch") || cmd_is_client_setter(argc, argv))
        return CNODES_FOLLOWS;
    if (argc >= 2 && cmd_arg_is(&argv[0], "script") && cmd_arg_is(&argv[1], "debug")) return CNODES_PINNED;
    return CNODES_NONE;
}

/* Kept request i (from byte start) on up, its reply dropped. */
static void send_kept(struct cnodes *n, int i, size_t start, upstream_conn *up)
{
    upstream_forward_silent(up, n->state.data + start, n->end[i] - start);
    if (n->kind[i] == KEPT_HELLO) upstream_note_hello(up);
    if (n->kind[i] != KEPT_OTHER) upstream_note_auth(up);
}

int cnodes_keep(client_session *c, int argc, const resp_arg *argv)
{
    struct cnodes *n = cnodes_of(c);
    size_t bytes = 16;
    for (int i = 0; i < argc; i++)
        bytes += argv[i].len + 24;
    if (n->nstate == CNODES_MAX_STATE || n->state.len + bytes > CNODES_MAX_STATE_BYTES) return -1;
    vp_buf_resp_command(&n->state, argc, argv);
    n->kind[n->nstate] = cmd_arg_is(&argv[0], "hello")  ? KEPT_HELLO
                         : cmd_arg_is(&argv[0], "auth") ? KEPT_AUTH
                                                        : KEPT_OTHER;
    size_t start = n->nstate ? n->end[n->nstate - 1] : 0;
    n->end[n->nstate++] = n->state.len;
    /* The connections it has to other nodes get it now too. */
    for (int i = 0; i < n->nparked; i++) {
        send_kept(n, n->nstate - 1, start, n->parked[i]);
        upstream_flush(n->parked[i]);
    }
    return 0;
}

void cnodes_forget(client_session *c)
{
    if (!c->nodes) return;
    c->nodes->state.len = 0;
    c->nodes->nstate = 0;
}

int cnodes_has_state(const client_session *c)
{
    return c->nodes && c->nodes->nstate > 0;
}

static void park(struct cnodes *n, upstream_conn *up)
{
    if (n->nparked == n->parked_cap) {
        n->parked_cap = n->parked_cap ? n->parked_cap * 2 : 4;
        n->parked = vp_realloc(n->parked, (size_t)n->parked_cap * sizeof(*n->parked));
    }
    n->parked[n->nparked++] = up;
}

static upstream_conn *unpark(struct cnodes *n, upstream_node *node)
{
    for (int i = 0; i < n->nparked; i++) {
        upstream_conn *up = n->parked[i];
        if (up->node != node) continue;
        n->parked[i] = n->parked[--n->nparked];
        return up;
    }
    return NULL;
}

/* The kept state first on a new connection, in the order it was sent;
 * the replies are dropped (the client had them when it sent it). */
static void replay(client_session *c, struct cnodes *n, upstream_conn *up)
{
    /* its name and library info from its time on shared connections */
    for (int i = 0; i < 3; i++)
        if (c->setters[i].len) upstream_forward_silent(up, c->setters[i].data, c->setters[i].len);
    size_t start = 0;
    for (int i = 0; i < n->nstate; i++) {
        send_kept(n, i, start, up);
        start = n->end[i];
    }
}

upstream_conn *cnodes_switch(client_session *c, upstream_node *node)
{
    struct cnodes *n = cnodes_of(c);
    if (c->up) park(n, c->up);
    c->up = NULL;
    c->route_node = node;
    upstream_conn *up = unpark(n, node);
    if (!up) {
        if (!limits_may_open_own(c->srv)) return NULL;
        up = upstream_open(c->srv, node, c, &client_own_owner, c);
        replay(c, n, up);
        vp_log(VP_LOG_DEBUG,
               "client %llu %s: its own connection to cluster node %s, with %d state request(s)", c->id,
               c->addr, node->addr, n->nstate);
    }
    c->up = up;
    return up;
}

void cnodes_close_parked(client_session *c)
{
    if (!c->nodes) return;
    /* (upstream_close may report back to the client: taken off first.) */
    while (c->nodes->nparked) {
        upstream_conn *up = c->nodes->parked[--c->nodes->nparked];
        upstream_close(up);
    }
}

void cnodes_free(client_session *c)
{
    if (!c->nodes) return;
    cnodes_close_parked(c);
    vp_buf_free(&c->nodes->state);
    free(c->nodes->parked);
    free(c->nodes);
    c->nodes = NULL;
}

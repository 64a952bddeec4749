/* route.c - the node table and the choice of a client's connection (see
 * route.h). One node today; the table is where cluster mode adds the rest. */
#include "proxy/route.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/buffer.h"
#include "proxy/client.h"
#include "proxy/server.h"
#include "proxy/upstream.h"

/* The node takes the address the settings name (conf_parse_upstream wrote
 * all three fields; "" in sentinel mode before a sentinel answered). */
static void route_node_from_conf(route_node *n, const vp_config *conf)
{
    snprintf(n->addr, sizeof(n->addr), "%s", conf->upstream);
    snprintf(n->host, sizeof(n->host), "%s", conf->upstream_host);
    n->port = conf->upstream_port;
}

void route_init(vp_server *srv)
{
    srv->nodes = vp_malloc(sizeof(route_node));
    memset(srv->nodes, 0, sizeof(route_node));
    srv->nnodes = 1;
    route_node_from_conf(&srv->nodes[0], &srv->conf);
}

void route_free(vp_server *srv)
{
    free(srv->nodes);
    srv->nodes = NULL;
    srv->nnodes = 0;
}

route_node *route_primary(vp_server *srv)
{
    return &srv->nodes[0];
}

route_node *route_node_for(vp_server *srv, client_session *c)
{
    (void)c; /* (cluster mode: the node of the slot its next command plans for) */
    return route_primary(srv);
}

upstream_conn *route_shared_for(vp_server *srv, client_session *c)
{
    return upstream_shared(srv, route_node_for(srv, c), c->id);
}

void route_node_moved(vp_server *srv, route_node *n)
{
    route_node_from_conf(n, &srv->conf);
    upstream_primary_moved(srv);
}

void route_config_changed(vp_server *srv)
{
    /* Standalone: the `upstream` line may have changed. Sentinel mode: the
     * reload kept the sentinels' primary, so this changes nothing. */
    route_node_from_conf(route_primary(srv), &srv->conf);
}

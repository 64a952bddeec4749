/* route.c - the node table and the choice of a client's node (see
 * route.h): one node in standalone and sentinel mode, one per known node
 * in cluster mode (cluster.c adds them). */
#include "proxy/route/route.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/buffer.h"
#include "proxy/server.h"
#include "proxy/upstream/upstream.h"

/* The node takes the address the settings name (conf_parse_upstream wrote
 * all three fields; "" in sentinel mode before a sentinel answered). */
/* A new, empty node at the end of the table (which only grows: a node
 * lives as long as the table, connections point at theirs). */
static upstream_node *route_node_new(vp_server *srv)
{
    if (srv->nnodes == srv->nodes_cap) {
        int cap = srv->nodes_cap ? srv->nodes_cap * 2 : 4;
        upstream_node **grown = vp_malloc((size_t)cap * sizeof(*grown));
        if (srv->nnodes) memcpy(grown, srv->nodes, (size_t)srv->nnodes * sizeof(*grown));
        free(srv->nodes);
        srv->nodes = grown;
        srv->nodes_cap = cap;
    }
    upstream_node *n = vp_malloc(sizeof(*n));
    memset(n, 0, sizeof(*n));
    srv->nodes[srv->nnodes++] = n;
    return n;
}

static void route_node_from_conf(upstream_node *n, const vp_config *conf)
{
    snprintf(n->addr, sizeof(n->addr), "%s", conf->upstream);
    snprintf(n->host, sizeof(n->host), "%s", conf->upstream_host);
    n->port = conf->upstream_port;
}

void route_init(vp_server *srv)
{
    srv->nodes = NULL;
    srv->nnodes = srv->nodes_cap = 0;
    if (srv->conf.upstream_mode == CONF_MODE_CLUSTER) return; /* the seeds come in cluster_start */
    upstream_node *n = route_node_new(srv);
    route_node_from_conf(n, &srv->conf);
}

void route_free(vp_server *srv)
{
    for (int i = 0; i < srv->nnodes; i++)
        free(srv->nodes[i]);
    free(srv->nodes);
    srv->nodes = NULL;
    srv->nnodes = srv->nodes_cap = 0;
}

upstream_node *route_primary(vp_server *srv)
{
    return srv->nodes[0];
}

upstream_node *route_node_add(vp_server *srv, const char *host, size_t hostlen, int port)
{
    if (hostlen >= CONF_ADDR_MAX - 8) return NULL;
    for (int i = 0; i < srv->nnodes; i++) {
        upstream_node *n = srv->nodes[i];
        if (n->port == port && strlen(n->host) == hostlen && memcmp(n->host, host, hostlen) == 0) return n;
    }
    upstream_node *n = route_node_new(srv);
    memcpy(n->host, host, hostlen);
    n->host[hostlen] = '\0';
    n->port = port;
    /* (An IPv6 literal is written as Redis writes it: no brackets.) */
    snprintf(n->addr, sizeof(n->addr), "%.*s:%d", (int)hostlen, host, port & 0xFFFF);
    return n;
}

static const route_session_ops *route_session_given;
/* Cluster mode: where a client goes before its first command
 * (cluster_any_node, given by cluster_start). */
static upstream_node *(*route_any_node)(vp_server *srv);

void route_set_any_node(upstream_node *(*any)(vp_server *srv))
{
    route_any_node = any;
}

void route_set_session(const route_session_ops *ops)
{
    route_session_given = ops;
}

const route_session_ops *route_session(void)
{
    return route_session_given;
}

upstream_node *route_node_for(vp_server *srv, upstream_node *current)
{
    /* Cluster mode: the node of the command at hand (client_route), or
     * any primary before its first. */
    if (srv->cluster) return current ? current : route_any_node(srv);
    return route_primary(srv);
}

upstream_conn *route_shared_for(vp_server *srv, upstream_node *current, unsigned long long id)
{
    return upstream_shared(srv, route_node_for(srv, current), id);
}

void route_node_moved(vp_server *srv, upstream_node *n)
{
    route_node_from_conf(n, &srv->conf);
    if (srv->primary_moved) srv->primary_moved(srv);
}

void route_config_changed(vp_server *srv)
{
    /* Standalone: the `upstream` line may have changed. Sentinel mode: the
     * reload kept the sentinels' primary, so this changes nothing. Cluster
     * mode: the nodes are the cluster's (seeds need a restart). */
    if (srv->conf.upstream_mode == CONF_MODE_CLUSTER) return;
    route_node_from_conf(route_primary(srv), &srv->conf);
}

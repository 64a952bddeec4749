/* upstream_node.h - one upstream Redis the proxy opens connections to: its
 * address and the connections the pool keeps to it (its shared ones and
 * its side one). The node table (which nodes there are, which one a client
 * uses) is the route layer's (proxy/route/route.h); the node itself is
 * here, below it, because every upstream connection points at its node
 * and the pool (upstream_pool.c) keeps its connections there.
 *
 * Lifetime: nodes are made by the route layer (route_init,
 * route_node_add) and freed at exit after every connection is gone. */
#ifndef VP_UPSTREAM_NODE_H
#define VP_UPSTREAM_NODE_H

#include "proxy/config.h"

struct upstream_conn;

#define VP_MAX_SHARED_UPSTREAMS 64

/* One upstream Redis the proxy opens connections to. */
typedef struct upstream_node {
    /* Its address, as upstream.c connects to it: host and port, or a unix
     * socket path with port 0; `addr` as written (host:port or the path). */
    char addr[CONF_ADDR_MAX];
    char host[CONF_ADDR_MAX];
    int port;
    /* Shared connections to it (conf.shared_upstreams of them, opened on
     * demand by upstream_shared; NULL when not open). A connection clears
     * its own entry when it goes (upstream.c). */
    struct upstream_conn *shared[VP_MAX_SHARED_UPSTREAMS];
    /* The side connection to it (upstream_side.c): SCRIPT KILL and the
     * like from clients on a shared connection. NULL when not open. */
    struct upstream_conn *side;
    /* Learned from `ACL GETUSER default` (upstream_defauth.c): the default
     * user needs a password now, so clients with an id above
     * default_auth_from (those that connected after it was learned) must
     * not use a shared connection made before, which Redis keeps in. */
    int default_needs_auth;
    unsigned long long default_auth_from;
    int default_probe_refused; /* ACL GETUSER was refused: logged once */
} upstream_node;

#endif

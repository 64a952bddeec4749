/* cluster_env.c - the integration-cluster/ variant's shared cluster (cluster_env.h). */
#include "tests/support/cluster_env.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/client.h"

#define MAX_NODES 16

bool vt_cluster_mode(void)
{
    const char *m = getenv("VP_TEST_UPSTREAM_MODE");
    return m && strcmp(m, "cluster") == 0 && getenv("VP_TEST_CLUSTER_NODES");
}

/* The ports of VP_TEST_CLUSTER_NODES ("127.0.0.1:p,..."), in order. */
static int node_ports(int *ports)
{
    const char *s = getenv("VP_TEST_CLUSTER_NODES");
    int n = 0;
    while (s && *s && n < MAX_NODES) {
        const char *colon = strchr(s, ':');
        if (!colon) break;
        ports[n++] = atoi(colon + 1);
        s = strchr(colon, ',');
        if (s) s++;
    }
    return n;
}

static redisReply *ask(int port, const char *cmd)
{
    redisContext *c = vt_connect(port);
    if (!c) return NULL;
    redisReply *r = redisCommand(c, cmd);
    redisFree(c);
    return r;
}

/* Is the node on `port` a primary now (ROLE)? */
static bool is_primary(int port)
{
    redisReply *role = ask(port, "ROLE");
    bool primary = role && role->type == REDIS_REPLY_ARRAY && role->elements > 0 &&
                   role->element[0]->type == REDIS_REPLY_STRING &&
                   strcmp(role->element[0]->str, "master") == 0;
    if (role) freeReplyObject(role);
    return primary;
}

vt_redis *vt_cluster_env_borrow(void)
{
    int ports[MAX_NODES];
    int n = node_ports(ports);
    if (n == 0) {
        fprintf(stderr, "vt cluster env: VP_TEST_CLUSTER_NODES names no node\n");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (!is_primary(ports[i])) continue;
        /* SYNC: the next test must not see a key of this one */
        redisReply *r = ask(ports[i], "FLUSHALL SYNC");
        bool ok = r && r->type == REDIS_REPLY_STATUS;
        if (!ok)
            fprintf(stderr, "vt cluster env: FLUSHALL on port %d: %s\n", ports[i],
                    r && r->str ? r->str : "no reply");
        if (r) freeReplyObject(r);
        if (!ok) return NULL;
    }
    vt_redis *b = calloc(1, sizeof(*b));
    if (!b) abort();
    b->port = ports[0];
    b->borrowed = true;
    return b;
}

int vt_cluster_env_key_port(const char *key, int fallback)
{
    if (!vt_cluster_mode()) return fallback;
    int ports[MAX_NODES];
    if (node_ports(ports) == 0) return fallback;
    redisContext *c = vt_connect(ports[0]);
    if (!c) return fallback;
    int port = fallback;
    redisReply *ks = redisCommand(c, "CLUSTER KEYSLOT %s", key);
    redisReply *slots = redisCommand(c, "CLUSTER SLOTS");
    if (ks && ks->type == REDIS_REPLY_INTEGER && slots && slots->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < slots->elements; i++) {
            redisReply *e = slots->element[i];
            if (e->type != REDIS_REPLY_ARRAY || e->elements < 3) continue;
            if (ks->integer >= e->element[0]->integer && ks->integer <= e->element[1]->integer &&
                e->element[2]->type == REDIS_REPLY_ARRAY && e->element[2]->elements >= 2)
                port = (int)e->element[2]->element[1]->integer;
        }
    }
    if (ks) freeReplyObject(ks);
    if (slots) freeReplyObject(slots);
    redisFree(c);
    return port;
}

long long vt_cluster_env_dbsize(void)
{
    int ports[MAX_NODES];
    int n = node_ports(ports);
    long long sum = 0;
    for (int i = 0; i < n; i++) {
        if (!is_primary(ports[i])) continue;
        redisReply *r = ask(ports[i], "DBSIZE");
        if (!r || r->type != REDIS_REPLY_INTEGER)
            sum = -1;
        else if (sum >= 0)
            sum += r->integer;
        if (r) freeReplyObject(r);
    }
    return n ? sum : -1;
}

/* Is `port` one of the suite cluster's nodes? */
static bool is_node_port(int port)
{
    int ports[MAX_NODES];
    int n = node_ports(ports);
    for (int i = 0; i < n; i++)
        if (ports[i] == port) return true;
    return false;
}

redisReply *vt_cluster_env_follow(redisContext *c, redisReply *r, const char *cmd, size_t len)
{
    if (!r || r->type != REDIS_REPLY_ERROR || strncmp(r->str, "MOVED ", 6) != 0 || !vt_cluster_mode() ||
        c->connection_type != REDIS_CONN_TCP || !is_node_port(c->tcp.port))
        return r;
    const char *colon = strrchr(r->str, ':');
    int port = colon ? atoi(colon + 1) : 0;
    redisContext *owner = port > 0 ? vt_connect(port) : NULL;
    if (!owner) return r;
    void *again = NULL;
    if (redisAppendFormattedCommand(owner, cmd, len) != REDIS_OK || redisGetReply(owner, &again) != REDIS_OK)
        again = NULL;
    redisFree(owner);
    if (!again) return r;
    freeReplyObject(r);
    return again;
}

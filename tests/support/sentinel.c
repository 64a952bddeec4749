#include "tests/support/sentinel.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static redisContext *vt_sentinel_connect(vt_sentinel_set *s, int port)
{
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (!c || c->err) {
        if (c) redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    if (s && s->pass[0]) {
        redisReply *r = redisCommand(c, "AUTH %s", s->pass);
        if (r) freeReplyObject(r);
    }
    return c;
}

/* The length of a sentinel's array reply to `cmd`, -1 on error. */
static long long vt_sentinel_count(vt_sentinel_set *s, int i, const char *cmd)
{
    redisContext *c = vt_sentinel_connect(s, s->sentinels[i]->port);
    if (!c) return -1;
    redisReply *r = redisCommand(c, cmd);
    long long n = r && r->type == REDIS_REPLY_ARRAY ? (long long)r->elements : -1;
    if (r) freeReplyObject(r);
    redisFree(c);
    return n;
}

static bool vt_sentinels_ready(void *arg)
{
    vt_sentinel_set *s = arg;
    for (int i = 0; i < VT_SENTINELS; i++) {
        if (vt_sentinel_count(s, i, "SENTINEL replicas " VT_SENTINEL_MASTER) < 1) return false;
        if (vt_sentinel_count(s, i, "SENTINEL sentinels " VT_SENTINEL_MASTER) < VT_SENTINELS - 1) return false;
    }
    return true;
}

static bool vt_replica_synced(void *arg)
{
    vt_redis *r = arg;
    redisContext *c = vt_sentinel_connect(NULL, r->port);
    if (!c) return false;
    redisReply *rep = redisCommand(c, "INFO replication");
    bool ok = rep && rep->type == REDIS_REPLY_STRING && strstr(rep->str, "master_link_status:up");
    if (rep) freeReplyObject(rep);
    redisFree(c);
    return ok;
}

vt_sentinel_set *vt_sentinel_start(const char *sentinel_pass)
{
    vt_sentinel_set *s = calloc(1, sizeof(*s));
    if (!s) abort();
    if (sentinel_pass) snprintf(s->pass, sizeof(s->pass), "%s", sentinel_pass);
    vt_redis_opts plain = {.tls = VT_REDIS_TLS_NONE};
    s->nodes[0] = vt_redis_start(&plain);
    if (!s->nodes[0]) goto fail;
    char port[16];
    snprintf(port, sizeof(port), "%d", s->nodes[0]->port);
    const char *replica_args[] = {"--replicaof", "127.0.0.1", port, NULL};
    vt_redis_opts ropts = {.tls = VT_REDIS_TLS_NONE, .extra_args = replica_args};
    s->nodes[1] = vt_redis_start(&ropts);
    if (!s->nodes[1]) goto fail;
    if (!vt_wait_until(vt_replica_synced, s->nodes[1], VT_START_DEADLINE_MS)) {
        fprintf(stderr, "vt: the replica did not sync\n");
        goto fail;
    }
    char conf[1024];
    int n = snprintf(conf, sizeof(conf),
                     "sentinel monitor %s 127.0.0.1 %d 2\n"
                     "sentinel down-after-milliseconds %s %d\n"
                     "sentinel failover-timeout %s %d\n"
                     "sentinel parallel-syncs %s 1\n",
                     VT_SENTINEL_MASTER, s->nodes[0]->port, VT_SENTINEL_MASTER, VT_SENTINEL_DOWN_AFTER_MS,
                     VT_SENTINEL_MASTER, VT_SENTINEL_FAILOVER_TIMEOUT_MS, VT_SENTINEL_MASTER);
    if (s->pass[0]) /* clients and the other sentinels alike */
        snprintf(conf + n, sizeof(conf) - (size_t)n, "requirepass \"%s\"\nsentinel sentinel-pass \"%s\"\n", s->pass,
                 s->pass);
    vt_redis_opts sopts = {.tls = VT_REDIS_TLS_NONE, .config_text = conf, .sentinel = true};
    for (int i = 0; i < VT_SENTINELS; i++)
        if (!(s->sentinels[i] = vt_redis_start(&sopts))) goto fail;
    if (!vt_wait_until(vt_sentinels_ready, s, 20000)) {
        fprintf(stderr, "vt: the sentinels did not find the replica and each other\n");
        goto fail;
    }
    return s;
fail:
    vt_sentinel_free(s);
    return NULL;
}

int vt_sentinel_primary_port(vt_sentinel_set *s, int i)
{
    redisContext *c = vt_sentinel_connect(s, s->sentinels[i]->port);
    if (!c) return -1;
    redisReply *r = redisCommand(c, "SENTINEL get-master-addr-by-name " VT_SENTINEL_MASTER);
    int port = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? atoi(r->element[1]->str) : -1;
    if (r) freeReplyObject(r);
    redisFree(c);
    return port;
}

bool vt_sentinel_master_at(vt_sentinel_set *s, int sentinel_port, int *port, long long *epoch)
{
    redisContext *c = vt_sentinel_connect(s, sentinel_port);
    if (!c) return false;
    redisReply *r = redisCommand(c, "SENTINEL MASTER " VT_SENTINEL_MASTER);
    bool got_port = false, got_epoch = false;
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2) {
        const char *k = r->element[i]->str, *v = r->element[i + 1]->str;
        if (!k || !v) continue;
        if (!strcmp(k, "port")) {
            *port = atoi(v);
            got_port = true;
        } else if (!strcmp(k, "config-epoch")) {
            *epoch = atoll(v);
            got_epoch = true;
        }
    }
    if (r) freeReplyObject(r);
    redisFree(c);
    return got_port && got_epoch;
}

vt_redis *vt_sentinel_new_lagging(vt_sentinel_set *s, int primary_port)
{
    char conf[512];
    snprintf(conf, sizeof(conf),
             "sentinel monitor %s 127.0.0.1 %d 2\n"
             "sentinel down-after-milliseconds %s %d\n"
             "%s%s%s",
             VT_SENTINEL_MASTER, primary_port, VT_SENTINEL_MASTER, VT_SENTINEL_DOWN_AFTER_MS,
             s->pass[0] ? "requirepass \"" : "", s->pass, s->pass[0] ? "\"\n" : "");
    vt_redis_opts o = {.tls = VT_REDIS_TLS_NONE, .config_text = conf, .sentinel = true};
    return vt_redis_new(&o);
}

vt_redis *vt_sentinel_node(vt_sentinel_set *s, int port)
{
    for (int i = 0; i < 2; i++)
        if (s->nodes[i] && s->nodes[i]->port == port) return s->nodes[i];
    return NULL;
}

bool vt_sentinel_is_master(int port)
{
    redisContext *c = vt_sentinel_connect(NULL, port);
    if (!c) return false;
    redisReply *r = redisCommand(c, "ROLE");
    bool ok = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 && !strcmp(r->element[0]->str, "master");
    if (r) freeReplyObject(r);
    redisFree(c);
    return ok;
}

typedef struct vt_failover_try {
    vt_sentinel_set *s;
} vt_failover_try;

static bool vt_failover_taken(void *arg)
{
    vt_sentinel_set *s = arg;
    redisContext *c = vt_sentinel_connect(s, s->sentinels[0]->port);
    if (!c) return false;
    redisReply *r = redisCommand(c, "SENTINEL FAILOVER " VT_SENTINEL_MASTER);
    bool ok = r && r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "OK");
    if (r) freeReplyObject(r);
    redisFree(c);
    return ok;
}

bool vt_sentinel_failover(vt_sentinel_set *s, int timeout_ms)
{
    return vt_wait_until(vt_failover_taken, s, timeout_ms);
}

typedef struct vt_switch_wait {
    vt_sentinel_set *s;
    int old_port, new_port;
} vt_switch_wait;

static bool vt_switched(void *arg)
{
    vt_switch_wait *w = arg;
    int port = -1;
    for (int i = 0; i < VT_SENTINELS; i++) {
        int p = vt_sentinel_primary_port(w->s, i);
        if (p < 0 || p == w->old_port || (port >= 0 && p != port)) return false;
        port = p;
    }
    if (!vt_sentinel_is_master(port)) return false;
    w->new_port = port;
    return true;
}

int vt_sentinel_wait_switch(vt_sentinel_set *s, int old_port, int timeout_ms)
{
    vt_switch_wait w = {s, old_port, -1};
    return vt_wait_until(vt_switched, &w, timeout_ms) ? w.new_port : -1;
}

void vt_sentinel_proxy_args(const vt_sentinel_set *s, const char *host, const char **args,
                            char ports[VT_SENTINELS][32])
{
    int n = 0;
    args[n++] = "--upstream-mode";
    args[n++] = "sentinel";
    for (int i = 0; i < VT_SENTINELS; i++) {
        snprintf(ports[i], 32, "%s:%d", host, s->sentinels[i]->port);
        args[n++] = "--sentinel";
        args[n++] = ports[i];
    }
    args[n++] = "--sentinel-master";
    args[n++] = VT_SENTINEL_MASTER;
    args[n] = NULL;
}

void vt_sentinel_free(vt_sentinel_set *s)
{
    if (!s) return;
    for (int i = 0; i < VT_SENTINELS; i++)
        vt_redis_free(s->sentinels[i]);
    for (int i = 0; i < 2; i++)
        vt_redis_free(s->nodes[i]);
    free(s);
}

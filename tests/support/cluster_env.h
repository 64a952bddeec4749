/* cluster_env.h - the integration-cluster/ variant: stories through a proxy
 * in front of a Redis Cluster that tests/support/cluster_run.py started
 * for the whole suite binary.
 *
 * VP_TEST_UPSTREAM_MODE=cluster and VP_TEST_CLUSTER_NODES=host:port,...
 * (the primaries first) are set by cluster_run.py. Then vt_redis_start()
 * with plain options (no password, TLS, unix socket, extra arguments,
 * config or sentinel) starts nothing: it FLUSHALLs every primary (each
 * test starts from an empty database, as with a new redis-server) and hands
 * back a borrowed vt_redis naming the first primary, and vt_proxy_start()
 * in front of it adds `--upstream-mode cluster`. Stories that need another
 * kind of Redis still get their own redis-server. The tests of a suite
 * share the cluster, so CTest runs the variant with --jobs 1. */
#ifndef VT_CLUSTER_ENV_H
#define VT_CLUSTER_ENV_H

#include <hiredis/hiredis.h>
#include <stdbool.h>

#include "tests/support/servers.h"

/* VP_TEST_UPSTREAM_MODE=cluster (with VP_TEST_CLUSTER_NODES). */
bool vt_cluster_mode(void);
/* FLUSHALL every primary, then a borrowed vt_redis (r->borrowed) for the
 * first; NULL (why on stderr) when the cluster does not answer. */
vt_redis *vt_cluster_env_borrow(void);
/* The plain port of the primary serving `key` now (CLUSTER KEYSLOT and
 * CLUSTER SLOTS asked of the first node); outside cluster mode, or when
 * the cluster cannot say, `fallback` (a story's own redis port). */
int vt_cluster_env_key_port(const char *key, int fallback);
/* The keys of every primary together; -1 when a node does not answer. */
long long vt_cluster_env_dbsize(void);
/* A story's look straight at "the redis" (client.h's vt_cmd on the port of
 * the borrowed node) answered -MOVED: the same command (`cmd`, formatted)
 * on the node named, and that reply instead. Replies on other ports (the
 * proxy's: it must never show a -MOVED) are returned untouched. */
redisReply *vt_cluster_env_follow(redisContext *c, redisReply *r, const char *cmd, size_t len);

#endif

/* test_concurrency.c - many clients at once, each with its own conversation.
 *
 * A thousand clients connect and all keep their connections open; every one
 * sends SET and GET of its own key before any of them reads a reply, so the
 * proxy has a thousand conversations in flight. Each must get its own answers.
 * By default they all share one upstream connection (shared-upstreams 1),
 * which stays when they have gone; with shared-upstreams 0 Redis must see
 * one connection per client, and none once they have all gone. */
#include <pthread.h>

#include "tests/support/checks.h"
#include "tests/support/cluster_env.h"

#define CLIENTS 1000
#define FD_LIMIT 8192 /* this process, verbproxy and redis-server each need > 1000 */
#define THREADS 8
#define INCRS_PER_THREAD 2000

static vt_env env;

static void setup(void)
{
    vt_raise_fd_limit(FD_LIMIT, CLIENTS); /* before the servers start: they inherit it */
    vt_env_start(&env, NULL, NULL);
}

static void setup_own(void)
{
    static const char *const own[] = {"--shared-upstreams", "0", NULL};
    if (vt_cluster_mode()) return; /* the test skips itself */
    vt_raise_fd_limit(FD_LIMIT, CLIENTS);
    /* A thousand upstream connections opened at once: in the TLS variant
     * Redis makes a thousand handshakes in its one thread, which under ASan
     * beside other suites once took one past the 10 s the harness gives a
     * TLS upstream. What this suite checks is who gets which reply, not how
     * fast Redis shakes hands. */
    vt_env_start(&env, NULL, &(vt_proxy_opts){.extra_args = own, .connect_timeout_ms = 30000});
}

static void teardown(void)
{
    vt_env_stop(&env);
}

TestSuite(concurrency, .init = setup, .fini = teardown, .timeout = 120);
TestSuite(concurrency_own, .init = setup_own, .fini = teardown, .timeout = 120);

/* `upstreams`: the connections Redis must see for the clients (besides the
 * admin's and the probe's), while they talk and after they have gone. */
static void thousand_clients(long long upstreams_during, long long upstreams_after)
{
    static redisContext *clients[CLIENTS];
    redisContext *admin = vt_must_connect(env.redis->port);

    for (int i = 0; i < CLIENTS; i++) {
        clients[i] = vt_connect(env.proxy->port);
        cr_assert(clients[i] != NULL, "client %d could not connect", i);
    }

    /* everyone talks before anyone listens */
    for (int i = 0; i < CLIENTS; i++) {
        redisAppendCommand(clients[i], "SET conc:%d value-%d", i, i);
        redisAppendCommand(clients[i], "GET conc:%d", i);
        int done = 0;
        while (!done)
            cr_assert_eq(redisBufferWrite(clients[i], &done), REDIS_OK, "client %d: %s", i,
                         clients[i]->errstr);
    }
    for (int i = 0; i < CLIENTS; i++) {
        char want[32];
        snprintf(want, sizeof(want), "value-%d", i);
        redisReply *r = vt_get_reply(clients[i]);
        cr_assert(r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0, "client %d SET: %s", i,
                  VT_DESCRIBE(r));
        freeReplyObject(r);
        r = vt_get_reply(clients[i]);
        cr_assert(r && r->type == REDIS_REPLY_STRING && strcmp(r->str, want) == 0, "client %d GET: %s", i,
                  VT_DESCRIBE(r));
        freeReplyObject(r);
    }

    /* (a cluster's nodes each see the proxy's connections to them: the
     * counts below are one Redis's) */
    long long connected = vt_info_int(admin, "clients", "connected_clients");
    cr_assert(vt_cluster_mode() || connected == upstreams_during + 1,
              "Redis sees %lld connections for %d clients and the admin", connected, CLIENTS);
    if (vt_cluster_mode()) {
        cr_assert_eq(vt_cluster_env_dbsize(), CLIENTS, "the primaries hold %lld keys", vt_cluster_env_dbsize());
    } else {
        redisReply *r = vt_cmd(admin, "DBSIZE");
        vt_assert_int(r, CLIENTS);
        freeReplyObject(r);
    }
    redisFree(admin);

    for (int i = 0; i < CLIENTS; i++)
        redisFree(clients[i]);

    /* and when they leave, their own upstream connections go too (the
     * probe connection vt_wait_info uses is counted) */
    long long last;
    if (vt_cluster_mode()) return;
    cr_assert(vt_wait_info(env.redis->port, "clients", "connected_clients", upstreams_after + 1,
                           VT_READ_DEADLINE_MS, &last),
              "Redis has %lld connections after all clients left", last);
}

Test(concurrency, a_thousand_clients_each_get_their_own_answers)
{
    /* directly or with shared-upstreams 0, each client is a connection */
    if (vt_proxy_shared_upstreams(env.proxy) == 0)
        thousand_clients(CLIENTS, 0);
    else
        thousand_clients(1, 1); /* one shared connection, kept */
}

Test(concurrency_own, a_thousand_clients_each_get_their_own_answers_and_their_own_upstream)
{
    VT_SKIP_IN_CLUSTER("cluster mode needs shared-upstreams of at least 1");
    thousand_clients(CLIENTS, 0);
}

typedef struct counter_job {
    int port;
    int errors;
    char error[256];
} counter_job;

static void *increment(void *arg)
{
    counter_job *job = arg;
    redisContext *c = vt_connect(job->port);
    if (!c) {
        job->errors++;
        snprintf(job->error, sizeof(job->error), "connect failed");
        return NULL;
    }
    for (int i = 0; i < INCRS_PER_THREAD; i++) {
        redisReply *r = redisCommand(c, "INCR conc:counter");
        if (!r || r->type != REDIS_REPLY_INTEGER) {
            if (!job->errors++) vt_reply_describe(r, job->error, sizeof(job->error));
            if (!r) break;
        }
        freeReplyObject(r);
    }
    redisFree(c);
    return NULL;
}

Test(concurrency, clients_on_many_threads_increment_one_counter_without_losing_a_step)
{
    pthread_t threads[THREADS];
    counter_job jobs[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (counter_job){.port = env.proxy->port};
        pthread_create(&threads[i], NULL, increment, &jobs[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        cr_expect_eq(jobs[i].errors, 0, "thread %d: %d errors, first: %s", i, jobs[i].errors, jobs[i].error);
    }
    redisContext *c = vt_must_connect(env.redis->port);
    redisReply *r = vt_cmd(c, "GET conc:counter");
    char want[32];
    snprintf(want, sizeof(want), "%d", THREADS * INCRS_PER_THREAD);
    vt_assert_str(r, want);
    freeReplyObject(r);
    redisFree(c);
}

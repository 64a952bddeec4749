/* test_replication.c - a replica can replicate through the proxy: after
 * PSYNC the connection is a byte pipe both ways (RDB transfer, command
 * stream, REPLCONF ACKs), and the proxy neither frames nor counts it. */
#include <stdio.h>

#include "tests/support/checks.h"

static vt_env env;
static vt_redis *replica;

static void setup(void)
{
    vt_env_start(&env, NULL, NULL);
    replica = NULL;
}

static void teardown(void)
{
    vt_redis_free(replica);
    vt_env_stop(&env);
}

TestSuite(replication, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

typedef struct {
    int port;
    const char *key, *want;
} key_probe;

static bool replica_has(void *arg)
{
    key_probe *k = arg;
    redisContext *c = vt_connect(k->port);
    if (!c) return false;
    redisReply *r = vt_cmd(c, "GET %s", k->key);
    bool ok = r && r->type == REDIS_REPLY_STRING && strcmp(r->str, k->want) == 0;
    if (r) freeReplyObject(r);
    redisFree(c);
    return ok;
}

Test(replication, a_replica_syncs_and_follows_the_master_through_the_proxy)
{
    /* data from before the sync travels in the RDB */
    redisContext *m = vt_must_connect(env.redis->port);
    redisReply *r = vt_cmd(m, "SET rp:before 1");
    vt_assert_status(r, "OK");
    freeReplyObject(r);

    char port[16];
    snprintf(port, sizeof(port), "%d", env.proxy->port);
    const char *args[] = {"--replicaof", "127.0.0.1", port, NULL};
    vt_redis_opts ro = {.extra_args = args};
    replica = vt_redis_start(&ro);
    cr_assert(replica != NULL, "the replica did not start");

    key_probe before = {replica->port, "rp:before", "1"};
    cr_assert(vt_wait_until(replica_has, &before, VT_READ_DEADLINE_MS), "the initial sync never arrived");

    /* and later writes travel in the command stream */
    r = vt_cmd(m, "SET rp:after 2");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    key_probe after = {replica->port, "rp:after", "2"};
    cr_assert(vt_wait_until(replica_has, &after, VT_READ_DEADLINE_MS), "the command stream never arrived");
    redisFree(m);
}

/* PSYNC's arity is -3: Redis ignores arguments after the offset and makes
 * the connection a replica link all the same. On a shared connection that
 * would take every other client's replies with it (a replica is sent no
 * replies); it goes on a connection of its own, whatever its arguments. */
Test(replication, a_psync_with_extra_arguments_takes_a_connection_of_its_own)
{
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, 4, 50);

    int fd = vt_must_sock(env.proxy->port);
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(fd, "PSYNC ? -1 extra arguments\r\n"));
    cr_assert(vt_sock_read_contains(fd, &got, "\r\n", VT_READ_DEADLINE_MS), "no answer to PSYNC");
    cr_assert(strncmp(got.data, "+FULLRESYNC ", 12) == 0, "expected +FULLRESYNC, got \"%s\"",
              vt_buf_escaped(&got));

    /* The replica link stays up while the others go on. */
    cr_assert(vt_bystanders_wait(b, 100, VT_READ_DEADLINE_MS), "the bystanders stopped being served");
    vt_assert_bystanders_ok(b);
    close(fd);
    vt_buf_free(&got);

    /* An arity error changes nothing: answered as Redis does. */
    fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    vt_buf_append_str(&req, "PSYNC ?\r\nSYNC now\r\nPING\r\n");
    vt_exchange(fd, &req,
                "-ERR wrong number of arguments for 'psync' command\r\n"
                "-ERR wrong number of arguments for 'sync' command\r\n+PONG\r\n");
    vt_buf_free(&req);
    close(fd);
}

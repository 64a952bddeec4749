/* test_shared.c - clients on a shared upstream connection (shared-upstreams 1).
 *
 * Clients without connection state share one upstream connection; the first
 * command that needs state moves a client to a connection of its own, after
 * everything it sent on the shared one has run. Told against a real
 * redis-server: who shares, who moves (and when), what each client sees, and
 * that one client's trouble (leaving mid-pipeline, not reading, QUIT) never
 * reaches another. The proxy is started with --shared-upstreams 1 whatever
 * VP_TEST_SHARED_UPSTREAMS says. */
#include <pthread.h>

#include "tests/support/checks.h"

static vt_env env;

static void setup(void)
{
    static const char *const shared[] = {"--shared-upstreams", "1", NULL};
    vt_env_start(&env, NULL, &(vt_proxy_opts){.extra_args = shared});
}

static void teardown(void)
{
    vt_env_stop(&env);
}

TestSuite(shared, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

/* Connections Redis has, counting the probe vt_wait_info opens. */
static void expect_connections(long long want, const char *what)
{
    long long seen;
    cr_assert(vt_wait_info(env.redis->port, "clients", "connected_clients", want, VT_READ_DEADLINE_MS, &seen),
              "Redis sees %lld connections, expected %lld (%s)", seen, want, what);
}

static void must(redisContext *c, const char *cmd, const char *status)
{
    redisReply *r = vt_cmd(c, cmd);
    vt_assert_status(r, status);
    freeReplyObject(r);
}

#define CLIENTS 20
#define ROUNDS 50

Test(shared, many_clients_share_one_upstream_connection_and_each_gets_its_own_replies)
{
    redisContext *c[CLIENTS];
    long long before = vt_proxy_stat(env.proxy->port, "shared_commands");
    for (int i = 0; i < CLIENTS; i++)
        c[i] = vt_must_connect(env.proxy->port);
    /* everyone pipelines, interleaved, before anyone reads */
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < CLIENTS; i++) {
            redisAppendCommand(c[i], "SET sh:%d:%d v%d-%d", i, round, i, round);
            redisAppendCommand(c[i], "INCR sh:n:%d", i);
            redisAppendCommand(c[i], "GET sh:%d:%d", i, round);
        }
    }
    for (int i = 0; i < CLIENTS; i++) {
        for (int round = 0; round < ROUNDS; round++) {
            char want[32];
            redisReply *r = vt_get_reply(c[i]);
            vt_assert_status(r, "OK");
            freeReplyObject(r);
            r = vt_get_reply(c[i]);
            vt_assert_int(r, round + 1);
            freeReplyObject(r);
            r = vt_get_reply(c[i]);
            snprintf(want, sizeof(want), "v%d-%d", i, round);
            vt_assert_str(r, want);
            freeReplyObject(r);
        }
    }
    /* one shared connection and the probe: not one per client */
    expect_connections(2, "the shared connection and the probe");
    long long after = vt_proxy_stat(env.proxy->port, "shared_commands");
    cr_assert_geq(after - before, CLIENTS * ROUNDS * 3, "only %lld commands went on the shared connection",
                  after - before);
    cr_assert_eq(vt_proxy_stat(env.proxy->port, "clients_pinned"), 0, "a client moved to its own connection");
    for (int i = 0; i < CLIENTS; i++)
        redisFree(c[i]);
}

Test(shared, a_command_that_needs_state_runs_after_everything_the_client_sent_before_it)
{
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, want = {0};
    vt_buf_cmd(&req, "SET", "st:k", "0", NULL);
    vt_buf_append_str(&want, "+OK\r\n");
    for (int i = 1; i <= 200; i++) {
        char n[32];
        vt_buf_cmd(&req, "INCR", "st:k", NULL);
        snprintf(n, sizeof(n), ":%d\r\n", i);
        vt_buf_append_str(&want, n);
    }
    /* all in one write: the SELECT must wait for the 201 commands before
     * it, then go on the client's own connection with what follows it */
    vt_buf_cmd(&req, "SELECT", "1", NULL);
    vt_buf_cmd(&req, "SET", "st:k", "db1", NULL);
    vt_buf_cmd(&req, "SELECT", "0", NULL);
    vt_buf_cmd(&req, "GET", "st:k", NULL);
    vt_buf_append_str(&want, "+OK\r\n+OK\r\n+OK\r\n$3\r\n200\r\n");
    vt_buf_append(&want, "", 1); /* a C string for vt_expect_bytes */
    vt_exchange(fd, &req, want.data);

    cr_assert_eq(vt_proxy_stat(env.proxy->port, "clients_pinned"), 1,
                 "the client did not move to its own connection");
    /* the shared one, the client's own and the probe */
    expect_connections(3, "shared + the client's own + probe");
    redisContext *admin = vt_must_connect(env.redis->port);
    must(admin, "SELECT 1", "OK");
    redisReply *r = vt_cmd(admin, "GET st:k");
    vt_assert_str(r, "db1");
    freeReplyObject(r);
    redisFree(admin);

    /* it stays on its own connection: its SELECT holds */
    vt_buf_cmd(&req, "SELECT", "1", NULL);
    vt_buf_cmd(&req, "GET", "st:k", NULL);
    vt_exchange(fd, &req, "+OK\r\n$3\r\ndb1\r\n");
    close(fd);
    expect_connections(2, "the client's own connection went with it");
    vt_buf_free(&req);
    vt_buf_free(&want);
}

/* Commands that must move a client (connection state, counting, blocking)
 * and some that must not. Each is sent by a fresh client after a PING. */
typedef struct move_case {
    const char *argv[6];
    int moves;
} move_case;

static const move_case move_cases[] = {
    {{"SELECT", "0"}, 1},
    {{"AUTH", "nopass"}, 1},
    {{"HELLO", "2"}, 1},
    {{"CLIENT", "GETNAME"}, 1},
    {{"CLIENT", "SETNAME", "x"}, 0},
    {{"CLIENT", "SETINFO", "LIB-NAME", "x"}, 0},
    {{"CLIENT", "ID"}, 1},
    {{"CLIENT", "TRACKING", "off"}, 1},
    {{"WATCH", "mv:k"}, 1},
    {{"UNWATCH"}, 1},
    {{"MULTI"}, 1},
    {{"RESET"}, 1},
    {{"READONLY"}, 1},
    {{"BLPOP", "mv:list", "0.01"}, 1},
    {{"BZPOPMIN", "mv:z", "0.01"}, 1},
    {{"WAIT", "0", "10"}, 1},
    {{"XREAD", "BLOCK", "10", "STREAMS", "mv:s", "$"}, 1},
    {{"SCRIPT", "DEBUG", "no"}, 1},
    {{"CLIENT", "REPLY", "ON"}, 1},
    {{"GET", "mv:k"}, 0},
    {{"XREAD", "STREAMS", "mv:s", "0"}, 0},
    {{"PUBLISH", "mv:ch", "x"}, 0},
    {{"EVAL", "return 1", "0"}, 0},
    {{"SCRIPT", "EXISTS", "abc"}, 0},
    {{"INFO", "server"}, 0},
    {{"QPOP", "mv:q"}, 0},
    {{"LOCKRELEASE", "mv:lock", "t"}, 0},
};

Test(shared, commands_with_connection_state_move_the_client_and_the_others_do_not)
{
    long long pinned = vt_proxy_stat(env.proxy->port, "clients_pinned");
    for (size_t i = 0; i < sizeof(move_cases) / sizeof(move_cases[0]); i++) {
        const move_case *mc = &move_cases[i];
        int argc = 0;
        while (argc < 6 && mc->argv[argc])
            argc++;
        redisContext *c = vt_must_connect(env.proxy->port);
        redisReply *r = vt_cmd(c, "PING");
        vt_assert_status(r, "PONG");
        freeReplyObject(r);
        r = vt_cmd_argv(c, argc, (const char **)mc->argv, NULL);
        vt_assert_reply(r, c); /* answered, whatever the answer */
        freeReplyObject(r);
        /* still a working connection afterwards */
        r = vt_cmd(c, "ECHO still");
        if (!strcmp(mc->argv[0], "MULTI")) {
            cr_assert(r && r->type == REDIS_REPLY_STATUS, "ECHO in MULTI: %s", VT_DESCRIBE(r));
        } else {
            vt_assert_str(r, "still");
        }
        freeReplyObject(r);
        redisFree(c);
        long long now = vt_proxy_stat(env.proxy->port, "clients_pinned");
        cr_assert_eq(now - pinned, mc->moves, "%s %s: moved %lld clients, expected %d", mc->argv[0],
                     mc->argv[1] ? mc->argv[1] : "", now - pinned, mc->moves);
        pinned = now;
    }
}

/* Clients name themselves as they connect (ioredis, redis-py 5, node-redis):
 * that keeps them on the shared connection, answered by Redis itself, and a
 * client that moves later takes its name along. */
Test(shared, a_client_that_names_itself_stays_shared_and_takes_its_name_when_it_moves)
{
    redisContext *direct = vt_must_connect(env.redis->port);
    redisContext *c = vt_must_connect(env.proxy->port);
    must(c, "CLIENT SETNAME app-1", "OK");
    /* whatever this Redis says to SETINFO (7.0: unknown subcommand), the
     * client hears the same through the proxy */
    redisReply *want = vt_cmd(direct, "CLIENT SETINFO LIB-NAME vt-lib");
    redisReply *got = vt_cmd(c, "CLIENT SETINFO LIB-NAME vt-lib");
    char why[256];
    cr_assert(vt_reply_equal(want, got, why, sizeof(why)), "CLIENT SETINFO: %s", why);
    freeReplyObject(want);
    freeReplyObject(got);
    must(c, "CLIENT SETNAME app-2", "OK");                         /* the last one counts */
    redisReply *bad = vt_cmd(c, "CLIENT SETNAME %s", "has space"); /* refused: app-2 stays */
    vt_assert_error(bad, "ERR");
    freeReplyObject(bad);
    cr_assert_eq(vt_proxy_stat(env.proxy->port, "clients_pinned"), 0, "naming moved the client");

    /* asking for it needs the client's own connection, which has it */
    redisReply *r = vt_cmd(c, "CLIENT GETNAME");
    vt_assert_str(r, "app-2");
    freeReplyObject(r);
    cr_assert_eq(vt_proxy_stat(env.proxy->port, "clients_pinned"), 1,
                 "CLIENT GETNAME did not move the client");
    r = vt_cmd(direct, "CLIENT LIST");
    cr_assert(r && r->type == REDIS_REPLY_STRING && strstr(r->str, " name=app-2 "), "no app-2 in %s",
              VT_DESCRIBE(r));
    freeReplyObject(r);
    redisFree(c);
    redisFree(direct);
}

Test(shared, subscribe_and_multi_pipelined_behind_shared_commands_work_as_direct)
{
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    vt_buf_cmd(&req, "INCR", "pm:c", NULL);
    vt_buf_cmd(&req, "MULTI", NULL);
    vt_buf_cmd(&req, "INCR", "pm:c", NULL);
    vt_buf_cmd(&req, "EXEC", NULL);
    vt_buf_cmd(&req, "SUBSCRIBE", "pm:ch", NULL);
    vt_exchange(fd, &req,
                ":1\r\n+OK\r\n+QUEUED\r\n*1\r\n:2\r\n*3\r\n$9\r\nsubscribe\r\n$5\r\npm:ch\r\n:1\r\n");
    redisContext *admin = vt_must_connect(env.redis->port);
    redisReply *r = vt_cmd(admin, "PUBLISH pm:ch hello");
    vt_assert_int(r, 1);
    freeReplyObject(r);
    redisFree(admin);
    vt_buf got = {0};
    vt_expect_bytes(fd, &got, "*3\r\n$7\r\nmessage\r\n$5\r\npm:ch\r\n$5\r\nhello\r\n");
    vt_buf_free(&got);
    vt_buf_cmd(&req, "RESET", NULL);
    vt_buf_cmd(&req, "GET", "pm:c", NULL);
    vt_exchange(fd, &req, "+RESET\r\n$1\r\n2\r\n");
    close(fd);
    vt_buf_free(&req);
}

Test(shared, quit_answers_ok_and_closes_only_that_client)
{
    redisContext *other = vt_must_connect(env.proxy->port);
    must(other, "SET q:other 1", "OK");

    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, got = {0};
    vt_buf_cmd(&req, "SET", "q:a", "1", NULL);
    vt_buf_cmd(&req, "QUIT", NULL);
    vt_buf_cmd(&req, "SET", "q:b", "1", NULL); /* after QUIT: never run */
    cr_assert(vt_sock_send_buf(fd, &req));
    cr_assert(vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS), "QUIT did not close the client");
    vt_assert_bytes(&got, "+OK\r\n+OK\r\n");
    close(fd);

    redisReply *r = vt_cmd(other, "EXISTS q:a q:b");
    vt_assert_int(r, 1);
    freeReplyObject(r);
    expect_connections(2, "the shared connection is still there");
    cr_assert_eq(vt_proxy_stat(env.proxy->port, "upstream_lost"), 0, "QUIT closed the shared connection");
    redisFree(other);
    vt_buf_free(&req);
    vt_buf_free(&got);
}

#define BIG (100 * 1000)
#define BIG_GETS 200

static void store_big(void)
{
    redisContext *admin = vt_must_connect(env.redis->port);
    char *v = malloc(BIG);
    memset(v, 'b', BIG);
    redisReply *r = redisCommand(admin, "SET sh:big %b", v, (size_t)BIG);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    free(v);
    redisFree(admin);
}

typedef struct incr_job {
    int port, n, errors;
} incr_job;

static void *incr_loop(void *arg)
{
    incr_job *job = arg;
    redisContext *c = vt_connect(job->port);
    if (!c) {
        job->errors = job->n;
        return NULL;
    }
    for (int i = 1; i <= job->n; i++) {
        redisReply *r = redisCommand(c, "INCR sh:ticks");
        if (!r || r->type != REDIS_REPLY_INTEGER) job->errors++;
        if (r) freeReplyObject(r);
    }
    redisFree(c);
    return NULL;
}

Test(shared, a_client_that_does_not_read_does_not_stall_the_others)
{
    store_big();
    /* 20 MB of replies asked for and not read */
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, got = {0};
    for (int i = 0; i < BIG_GETS; i++)
        vt_buf_cmd(&req, "GET", "sh:big", NULL);
    vt_buf_cmd(&req, "PING", NULL);
    cr_assert(vt_sock_send_buf(fd, &req));

    /* meanwhile another client on the same shared connection goes on */
    incr_job job = {.port = env.proxy->port, .n = 2000};
    incr_loop(&job);
    cr_assert_eq(job.errors, 0, "%d INCRs failed while a client was not reading", job.errors);

    /* and the slow one gets every byte, in order */
    size_t one = strlen("$100000\r\n") + BIG + 2;
    cr_assert(vt_sock_read_len(fd, &got, one * BIG_GETS + 7, VT_READ_DEADLINE_MS), "got %zu of %zu bytes",
              got.len, one * BIG_GETS + 7);
    cr_assert_eq(vt_resp_count_replies(got.data, got.len), BIG_GETS + 1);
    cr_assert(memcmp(got.data + one * BIG_GETS, "+PONG\r\n", 7) == 0, "the PING's reply is not last");
    close(fd);
    vt_buf_free(&req);
    vt_buf_free(&got);
}

Test(shared, a_client_that_leaves_mid_pipeline_leaves_the_shared_connection_to_the_others)
{
    store_big();
    incr_job job = {.port = env.proxy->port, .n = 3000};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, incr_loop, &job), 0);
    for (int k = 0; k < 20; k++) {
        int fd = vt_must_sock(env.proxy->port);
        vt_buf req = {0};
        for (int i = 0; i < 50; i++)
            vt_buf_cmd(&req, "GET", "sh:big", NULL);
        cr_assert(vt_sock_send_buf(fd, &req));
        close(fd); /* gone with 5 MB of replies owed */
        vt_buf_free(&req);
    }
    pthread_join(t, NULL);
    cr_assert_eq(job.errors, 0, "%d INCRs failed while other clients left mid-pipeline", job.errors);
    cr_assert(vt_proxy_alive(env.proxy), "verbproxy died");
    redisContext *c = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(c, "GET sh:ticks");
    vt_assert_str(r, "3000");
    freeReplyObject(r);
    redisFree(c);
    expect_connections(2, "still one shared connection");
    cr_assert_eq(vt_proxy_stat(env.proxy->port, "upstream_lost"), 0, "the shared connection was lost");
}

Test(shared, a_big_request_moves_the_client_to_its_own_connection)
{
    size_t n = 1024 * 1024;
    char *v = malloc(n);
    memset(v, 'q', n);
    redisContext *c = vt_must_connect(env.proxy->port);
    must(c, "SET sh:small x", "OK");
    redisReply *r = redisCommand(c, "SET sh:big1 %b", v, n);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(c, "STRLEN sh:big1");
    vt_assert_int(r, (long long)n);
    freeReplyObject(r);
    cr_assert_eq(vt_proxy_stat(env.proxy->port, "clients_pinned"), 1,
                 "the big request was not sent on a connection of its own");
    redisFree(c);
    free(v);
}

Test(shared, losing_the_shared_connection_closes_only_the_clients_owed_replies)
{
    VT_SKIP_IF_DIRECT();
    store_big();
    redisContext *idle = vt_must_connect(env.proxy->port);
    must(idle, "PING", "PONG");

    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, got = {0};
    for (int i = 0; i < BIG_GETS; i++)
        vt_buf_cmd(&req, "GET", "sh:big", NULL);
    cr_assert(vt_sock_send_buf(fd, &req));
    cr_assert(vt_sock_read_len(fd, &got, 1, VT_READ_DEADLINE_MS), "no reply at all");
    vt_redis_kill(env.redis);
    /* owed replies: what arrived, then closed */
    cr_assert(vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS), "the client owed replies was left hanging");
    close(fd);

    /* owed nothing: it never notices, and goes on once Redis is back */
    cr_assert(vt_redis_launch(env.redis), "redis-server did not start again");
    must(idle, "SET sh:after 1", "OK");
    redisReply *r = vt_cmd(idle, "GET sh:after");
    vt_assert_str(r, "1");
    freeReplyObject(r);
    redisFree(idle);
    vt_buf_free(&req);
    vt_buf_free(&got);
}

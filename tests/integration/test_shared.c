/* test_shared.c - clients on a shared upstream connection (shared-upstreams 1).
 *
 * Clients without connection state share one upstream connection; the first
 * command that needs state moves a client to a connection of its own, after
 * everything it sent on the shared one has run. Told against a real
 * redis-server: who shares, who moves (and when), what each client sees, and
 * that one client's trouble (leaving mid-pipeline, not reading, QUIT) never
 * reaches another. The proxy is started with --shared-upstreams 1 whatever
 * VP_TEST_SHARED_UPSTREAMS says. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>

#include "tests/support/checks.h"

static vt_env env;
static vt_redis *replica; /* started by the test that needs one */

static void setup(void)
{
    static const char *const shared[] = {"--shared-upstreams", "1", NULL};
    vt_env_start(&env, NULL, &(vt_proxy_opts){.extra_args = shared});
}

static void teardown(void)
{
    if (replica && replica->pid) kill(replica->pid, SIGCONT);
    vt_redis_free(replica);
    replica = NULL;
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
    {{"SELECT", "1"}, 1},
    {{"SELECT", "0"}, 0}, /* database 0 is where a shared connection is */
    {{"XREADGROUP", "GROUP", "streams", "c", "BLOCK", "10"}, 1}, /* (refused: too few arguments) */
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

/* Moving needs a new connection. When Redis takes none then (here: it
 * listens on another port for a while, keeping the shared connection), the
 * command gets the proxy's error, and the client's name is still sent on
 * the connection it makes next. */
Test(shared, a_named_client_that_cannot_move_at_once_keeps_its_name_for_later)
{
    VT_SKIP_IF_DIRECT();
    redisContext *admin = vt_must_connect(env.redis->port);
    redisContext *c = vt_must_connect(env.proxy->port);
    must(c, "CLIENT SETNAME app-3", "OK");
    /* (The port the proxy uses: the TLS one in the integration-tls/ variant.) */
    const char *which = env.proxy->upstream_tls ? "tls-port" : "port";
    int port = env.proxy->upstream_tls ? env.redis->tls_port : env.redis->port;
    redisReply *r = vt_cmd(admin, "CONFIG SET %s %d", which, vt_free_port());
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(c, "SELECT 1");
    vt_assert_error(r, "ERR upstream unavailable");
    freeReplyObject(r);
    r = vt_cmd(admin, "CONFIG SET %s %d", which, port);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(c, "CLIENT GETNAME");
    vt_assert_str(r, "app-3");
    freeReplyObject(r);
    redisFree(c);
    redisFree(admin);
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

typedef struct key_probe {
    int port;
    const char *key;
} key_probe;

static bool replica_has(void *arg)
{
    key_probe *k = arg;
    redisContext *c = vt_connect(k->port);
    if (!c) return false;
    redisReply *r = vt_cmd(c, "EXISTS %s", k->key);
    bool ok = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    if (r) freeReplyObject(r);
    redisFree(c);
    return ok;
}

/* WAIT counts the replicas that have a connection's last write. A client
 * that wrote on the shared connection and then waits (which moves it) must
 * not be told a replica has writes it does not. */
Test(shared, wait_after_moving_counts_the_writes_made_on_the_shared_connection)
{
    redisContext *admin = vt_must_connect(env.redis->port);
    must(admin, "CONFIG SET repl-diskless-sync-delay 0", "OK"); /* sync at once, not after 5 s */
    must(admin, "SET w:synced 1", "OK");
    char port[16];
    snprintf(port, sizeof(port), "%d", env.redis->port);
    const char *args[] = {"--replicaof", "127.0.0.1", port, NULL};
    replica = vt_redis_start(&(vt_redis_opts){.extra_args = args});
    cr_assert(replica != NULL, "the replica did not start");
    key_probe synced = {replica->port, "w:synced"};
    cr_assert(vt_wait_until(replica_has, &synced, VT_READ_DEADLINE_MS), "the replica never synced");
    redisFree(admin);

    /* a replica that takes nothing more */
    cr_assert_eq(kill(replica->pid, SIGSTOP), 0);
    redisContext *c = vt_must_connect(env.proxy->port);
    must(c, "SET w:k 1", "OK");
    long long start = vt_now_ms();
    redisReply *r = vt_cmd(c, "WAIT 1 300");
    long long took = vt_now_ms() - start;
    vt_assert_int(r, 0);
    freeReplyObject(r);
    cr_assert_geq(took, 250, "WAIT answered after %lld ms, before its timeout", took);
    cr_assert_eq(kill(replica->pid, SIGCONT), 0);

    /* and once the replica has it, WAIT says so */
    r = vt_cmd(c, "WAIT 1 5000");
    vt_assert_int(r, 1);
    freeReplyObject(r);
    redisFree(c);
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
    vt_store_filled(env.redis->port, "sh:big", BIG, 'b');
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

/* Redis's count of GET calls so far. */
static long long redis_gets(void)
{
    redisContext *c = vt_must_connect(env.redis->port);
    redisReply *r = vt_cmd(c, "INFO commandstats");
    cr_assert(r && r->type == REDIS_REPLY_STRING, "INFO commandstats: %s", VT_DESCRIBE(r));
    const char *p = strstr(r->str, "cmdstat_get:calls=");
    long long calls = p ? atoll(p + strlen("cmdstat_get:calls=")) : 0;
    freeReplyObject(r);
    redisFree(c);
    return calls;
}

typedef struct gets_wait {
    long long want;
} gets_wait;

static bool gets_reached(void *arg)
{
    return redis_gets() >= ((gets_wait *)arg)->want;
}

#define MANY_GETS 3000

/* A shared connection cannot stop reading for one client, so the proxy
 * bounds what that client may have in flight there, and moves a client
 * that does not read to a connection of its own (where Redis holds what it
 * does not read, as it would without the proxy). What it sent still runs. */
Test(shared, a_client_that_does_not_read_moves_and_the_proxy_holds_no_more_than_a_window)
{
    store_big();
    long long base = redis_gets();
    /* 300 MB of replies asked for in one go, none read */
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, got = {0};
    for (int i = 0; i < MANY_GETS; i++)
        vt_buf_cmd(&req, "GET", "sh:big", NULL);
    vt_buf_cmd(&req, "PING", NULL);
    cr_assert(vt_sock_send_buf(fd, &req));
    /* all of them run, without the client reading a byte */
    gets_wait all_run = {.want = base + MANY_GETS};
    cr_assert(vt_wait_until(gets_reached, &all_run, 4 * VT_READ_DEADLINE_MS),
              "only %lld of the GETs of a client that reads nothing ran", redis_gets() - base);
    redisContext *other = vt_must_connect(env.proxy->port);
    must(other, "PING", "PONG"); /* the shared connection is not held up */

    /* then every reply, in order, the rest through its own connection */
    size_t one = strlen("$100000\r\n") + BIG + 2;
    size_t all = one * MANY_GETS + 7;
    cr_assert(vt_sock_read_len(fd, &got, all, 4 * VT_READ_DEADLINE_MS), "got %zu of %zu bytes", got.len, all);
    cr_assert_eq(got.len, all);
    cr_assert_eq(vt_resp_count_replies(got.data, got.len), MANY_GETS + 1);
    cr_assert(memcmp(got.data + one * (MANY_GETS - 1), "$100000\r\nbbbb", 13) == 0,
              "the last GET's reply: %s", vt_escape(got.data + one * (MANY_GETS - 1), 20));
    cr_assert(memcmp(got.data + one * MANY_GETS, "+PONG\r\n", 7) == 0, "the PING's reply is not last");
    cr_assert_eq(vt_proxy_stat(env.proxy->port, "clients_pinned"), 1, "the slow reader did not move");
#ifndef VP_SANITIZED
    long long peak_kb = vt_peak_rss_kb(env.proxy->pid);
    cr_assert(peak_kb > 0, "cannot read the proxy's VmHWM");
    cr_assert_lt(peak_kb, 96 * 1024, "the proxy's peak RSS was %lld KiB for %d x 100 kB replies not read",
                 peak_kb, MANY_GETS);
#endif
    close(fd);
    redisFree(other);
    vt_buf_free(&req);
    vt_buf_free(&got);
}

#define SLOW_VALUE_LEN (512 * 1024)
#define SLOW_GETS 200
#define SLOW_READERS 4

/* Issue 9, item 4: four clients each pipeline 200 GETs of 512 kB and read
 * nothing. On a shared connection every reply a client is owed is read and
 * held by the proxy, so what one client may be owed there is bounded: a
 * window of 16 replies at first, and one at a time once its replies are big
 * or wait unwritten; then it moves to its own connection, where Redis holds
 * what it does not read. Before the window, all 800 replies (400 MB) sat in
 * the proxy. Honest clients on the same shared connection are served
 * throughout, and the slow ones get every reply in order once they read. */
Test(shared, clients_that_do_not_read_big_replies_cost_the_proxy_a_bounded_window_each)
{
    vt_store_filled(env.redis->port, "sh:huge", SLOW_VALUE_LEN, 'h');
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, 4, 24);
    long long base = redis_gets();
    int fd[SLOW_READERS];
    vt_buf req = {0};
    for (int i = 0; i < SLOW_GETS; i++)
        vt_buf_cmd(&req, "GET", "sh:huge", NULL);
    vt_buf_cmd(&req, "PING", NULL);
    for (int k = 0; k < SLOW_READERS; k++) {
        fd[k] = vt_must_sock(env.proxy->port);
        cr_assert(vt_sock_send_buf(fd[k], &req));
    }
    /* every GET runs, though nobody reads */
    gets_wait all_run = {.want = base + (long long)SLOW_READERS * SLOW_GETS};
    cr_assert(vt_wait_until(gets_reached, &all_run, 4 * VT_READ_DEADLINE_MS),
              "only %lld of the GETs of clients that read nothing ran", redis_gets() - base);
    /* (Each bystander fails by itself on a batch late by its deadline;
     * this is their progress, given as long as the GETs, which load the
     * server, were given: the matrix runs two servers' suites side by
     * side on two cores.) */
    cr_assert(vt_bystanders_wait(b, 240, 4 * VT_READ_DEADLINE_MS), "the bystanders were held up");
#ifndef VP_SANITIZED
    long long peak_kb = vt_peak_rss_kb(env.proxy->pid);
    cr_assert(peak_kb > 0, "cannot read the proxy's VmHWM");
    /* 4 x (16 replies + buffer-limit) is 36 MB; all of them would be 400 MB */
    cr_assert_lt(peak_kb, 96 * 1024,
                 "the proxy's peak RSS was %lld KiB for %d clients not reading %d x 512 kB", peak_kb,
                 SLOW_READERS, SLOW_GETS);
#endif
    /* then each gets every reply, in order */
    size_t one = strlen("$524288\r\n") + SLOW_VALUE_LEN + 2;
    size_t all = one * SLOW_GETS + 7;
    for (int k = 0; k < SLOW_READERS; k++) {
        vt_buf got = {0};
        cr_assert(vt_sock_read_len(fd[k], &got, all, 4 * VT_READ_DEADLINE_MS),
                  "client %d got %zu of %zu bytes", k, got.len, all);
        cr_assert_eq(got.len, all);
        cr_assert_eq(vt_resp_count_replies(got.data, got.len), SLOW_GETS + 1);
        cr_assert(memcmp(got.data + one * SLOW_GETS, "+PONG\r\n", 7) == 0, "the PING's reply is not last");
        vt_buf_free(&got);
        close(fd[k]);
    }
    vt_assert_bystanders_ok(b);
    cr_assert_eq(vt_proxy_stat(env.proxy->port, "upstream_lost"), 0, "the shared connection was lost");
    vt_buf_free(&req);
}

#define WARM_SMALL_GETS 256
#define WARM_ROUNDS 8
#define BURST_VALUE_LEN (256 * 1024)
#define BURST_GETS 512 /* two deepest windows */

/* The bound the window gives, at its worst
 * (docs/shared-connections.md#a-client-that-does-not-read): a client first
 * earns the deepest window, 256 replies, by pipelining small GETs and
 * reading every reply, then pipelines 512 GETs of 256 kB (128 MB) and reads
 * nothing. Nobody can know a reply's size before Redis sends it, so the 256
 * it was allowed in flight all run and the proxy holds them (64 MB); the
 * rest wait unread in the client's socket, not in the proxy, until it reads. The proxy holds at most
 * buffer-limit plus that window; without the window it would hold all 128 MB. The bystanders on the same
 * shared connection are served throughout, and the client gets every reply in order once it reads. */
Test(shared, a_client_that_earned_the_deepest_window_then_reads_nothing_costs_the_proxy_that_window_only)
{
    vt_store_filled(env.redis->port, "sh:burst", BURST_VALUE_LEN, 'w');
    vt_store_filled(env.redis->port, "sh:tiny", 1, 't');
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, 4, 24);
    int fd = vt_must_sock(env.proxy->port);
    vt_buf small = {0}, burst = {0}, got = {0};
    for (int i = 0; i < WARM_SMALL_GETS; i++)
        vt_buf_cmd(&small, "GET", "sh:tiny", NULL);
    for (int r = 0; r < WARM_ROUNDS; r++) { /* each deep pipeline read whole: the window doubles to 256 */
        cr_assert(vt_sock_send_buf(fd, &small));
        got.len = 0;
        cr_assert(vt_sock_read_len(fd, &got, WARM_SMALL_GETS * strlen("$1\r\nt\r\n"), VT_READ_DEADLINE_MS),
                  "warm-up round %d: got %zu bytes", r, got.len);
    }
    long long before_kb = vt_peak_rss_kb(env.proxy->pid);
    long long base = redis_gets();
    for (int i = 0; i < BURST_GETS; i++)
        vt_buf_cmd(&burst, "GET", "sh:burst", NULL);
    vt_buf_cmd(&burst, "PING", NULL);
    /* (the kernel takes what the proxy does not read; no need to wait) */
    size_t sent = 0;
    while (sent < burst.len) {
        ssize_t n = send(fd, burst.data + sent, burst.len - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            sent += (size_t)n;
            continue;
        }
        cr_assert(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK), "send: %s", strerror(errno));
        break; /* the rest follows once the client reads */
    }
    /* the window it earned runs at once, though it reads nothing */
    gets_wait window_run = {.want = base + 256};
    cr_assert(vt_wait_until(gets_reached, &window_run, 4 * VT_READ_DEADLINE_MS),
              "only %lld GETs ran: the deepest window was not earned", redis_gets() - base);
    cr_assert(vt_bystanders_wait(b, 240, VT_READ_DEADLINE_MS), "the bystanders were held up");

    /* then it reads: every reply, in order */
    size_t one = strlen("$262144\r\n") + BURST_VALUE_LEN + 2;
    size_t all = one * BURST_GETS + 7;
    got.len = 0;
    long long deadline = vt_now_ms() + 4 * VT_READ_DEADLINE_MS;
    char chunk[64 * 1024];
    while (got.len < all && vt_now_ms() < deadline) {
        if (sent < burst.len) {
            ssize_t n = send(fd, burst.data + sent, burst.len - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n > 0) sent += (size_t)n;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 100) <= 0) continue;
        ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
        cr_assert(n > 0, "the client was closed after %zu of %zu bytes", got.len, all);
        vt_buf_append(&got, chunk, (size_t)n);
    }
    cr_assert_eq(got.len, all, "got %zu of %zu bytes", got.len, all);
    cr_assert_eq(vt_resp_count_replies(got.data, got.len), BURST_GETS + 1);
    cr_assert(memcmp(got.data + one * (BURST_GETS - 1), "$262144\r\nwwww", 13) == 0,
              "the last GET's reply: %s", vt_escape(got.data + one * (BURST_GETS - 1), 20));
    cr_assert(memcmp(got.data + one * BURST_GETS, "+PONG\r\n", 7) == 0, "the PING's reply is not last");
    vt_assert_bystanders_ok(b);
    cr_assert_eq(vt_proxy_stat(env.proxy->port, "upstream_lost"), 0, "the shared connection was lost");
#ifndef VP_SANITIZED
    long long peak_kb = vt_peak_rss_kb(env.proxy->pid);
    cr_assert(peak_kb > 0 && before_kb > 0, "cannot read the proxy's VmHWM");
    /* the window, 64 MB, and buffer-limit (1 MB); all of it would be 128 MB */
    long long grew_kb = peak_kb - before_kb;
    cr_assert_lt(grew_kb, 96 * 1024, "the proxy's peak RSS grew by %lld KiB for %d x 256 kB not read",
                 grew_kb, BURST_GETS);
    if (getenv("VP_TEST_VERBOSE")) fprintf(stderr, "peak RSS grew by %lld KiB\n", grew_kb);
#else
    (void)before_kb;
#endif
    close(fd);
    vt_buf_free(&small);
    vt_buf_free(&burst);
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

static void buf_busy_script(vt_buf *req, long micros);

typedef struct shared_commands_wait {
    long long want;
} shared_commands_wait;

static bool shared_commands_reached(void *arg)
{
    return vt_proxy_stat(env.proxy->port, "shared_commands") >= ((shared_commands_wait *)arg)->want;
}

Test(shared, losing_the_shared_connection_closes_only_the_clients_owed_replies)
{
    VT_SKIP_IF_DIRECT();
    store_big();
    redisContext *idle = vt_must_connect(env.proxy->port);
    must(idle, "PING", "PONG");

    /* Owed the reply of a script Redis is running when it dies (known to be
     * on its way once the proxy has forwarded it). */
    long long sent = vt_proxy_stat(env.proxy->port, "shared_commands");
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, got = {0};
    buf_busy_script(&req, 5 * 1000 * 1000);
    for (int i = 0; i < 10; i++)
        vt_buf_cmd(&req, "GET", "sh:big", NULL);
    cr_assert(vt_sock_send_buf(fd, &req));
    shared_commands_wait forwarded = {.want = sent + 1};
    cr_assert(vt_wait_until(shared_commands_reached, &forwarded, VT_READ_DEADLINE_MS),
              "the script was not forwarded");
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

/* Appends an EVAL of a script that keeps Redis busy for `micros` (it
 * replies :1), holding up everything queued behind it. */
static void buf_busy_script(vt_buf *req, long micros)
{
    char busy[256];
    snprintf(busy, sizeof(busy),
             "local t = redis.call('TIME') local s = t[1] * 1000000 + t[2] "
             "repeat local n = redis.call('TIME') until n[1] * 1000000 + n[2] - s > %ld return 1",
             micros);
    vt_buf_cmd(req, "EVAL", busy, "0", NULL);
}

/* ---- clients that end while held back ---- */

#define HALF_CLIENTS 4
#define HALF_SETS 200
#define HALF_VALUE 20000

typedef struct half_job {
    int port, id;
    size_t got_len;
    bool connected, eof, same;
} half_job;

/* Sends HALF_SETS SETs of 20 kB in one go (each over the suite's 16 kB
 * buffer-limit, so a client is held back after each one) and ends: an
 * even-numbered client with QUIT, an odd-numbered one by closing its
 * writing side (printf ... | nc -N) after a SWAPDB near the end (which
 * holds it until its replies are in, while its EOF is read). Then reads
 * until the proxy closes. */
static void *ending_client(void *arg)
{
    half_job *job = arg;
    int fd = vt_sock_tcp(job->port);
    if (fd < 0) return NULL;
    job->connected = true;
    vt_buf req = {0}, got = {0}, want = {0};
    char value[HALF_VALUE + 1];
    memset(value, 'h', HALF_VALUE);
    value[HALF_VALUE] = '\0';
    bool quits = job->id % 2 == 0;
    for (int i = 0; i < HALF_SETS; i++) {
        char key[32];
        snprintf(key, sizeof(key), "half:%d:%d", job->id, i);
        if (!quits && i == HALF_SETS - 5) {
            vt_buf_cmd(&req, "SWAPDB", "1", "2", NULL);
            vt_buf_append_str(&want, "+OK\r\n");
        }
        vt_buf_cmd(&req, "SET", key, value, NULL);
        vt_buf_append_str(&want, "+OK\r\n");
    }
    if (quits) {
        vt_buf_cmd(&req, "QUIT", NULL);
        vt_buf_append_str(&want, "+OK\r\n");
    }
    if (vt_sock_send_buf(fd, &req) && (quits || shutdown(fd, SHUT_WR) == 0)) {
        job->eof = vt_sock_read_eof(fd, &got, 4 * VT_READ_DEADLINE_MS);
        job->got_len = got.len;
        job->same = got.len == want.len && memcmp(got.data, want.data, want.len) == 0;
    }
    close(fd);
    vt_buf_free(&req);
    vt_buf_free(&got);
    vt_buf_free(&want);
    return NULL;
}

static void setup_verbose(void)
{
    static const char *const args[] = {"--shared-upstreams", "1",    "--loglevel", "verbose",
                                       "--buffer-limit",     "16kb", NULL};
    vt_env_start(&env, NULL, &(vt_proxy_opts){.extra_args = args});
}

TestSuite(shared_verbose, .init = setup_verbose, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

/* Clients held back while the shared connection's backlog drains may
 * have read requests not parsed yet, or be done and waiting to close: each
 * gets every reply, as from Redis, and is closed as soon as it has them
 * (not let go later as a client gone with replies owed). */
Test(shared_verbose, clients_that_end_after_a_big_pipeline_get_every_reply_and_are_closed)
{
    half_job jobs[HALF_CLIENTS];
    pthread_t t[HALF_CLIENTS];
    for (int i = 0; i < HALF_CLIENTS; i++) {
        jobs[i] = (half_job){.port = env.proxy->port, .id = i};
        cr_assert_eq(pthread_create(&t[i], NULL, ending_client, &jobs[i]), 0);
    }
    for (int i = 0; i < HALF_CLIENTS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < HALF_CLIENTS; i++) {
        cr_expect(jobs[i].connected, "client %d could not connect", i);
        cr_expect(jobs[i].eof, "client %d: the proxy did not close after the replies", i);
        cr_expect(jobs[i].same, "client %d: %zu bytes of replies, expected %d x +OK", i, jobs[i].got_len,
                  HALF_SETS + 1);
    }
    redisContext *r = vt_must_connect(env.redis->port);
    redisReply *n = vt_cmd(r, "DBSIZE");
    vt_assert_int(n, HALF_CLIENTS * HALF_SETS);
    freeReplyObject(n);
    redisFree(r);
    char *log = vt_proxy_log(env.proxy);
    cr_assert(log, "cannot read the proxy's log");
    cr_expect(!strstr(log, "with replies owed; closing"),
              "a client was let go as gone, not closed when done");
    free(log);
}

/* ---- a big request waiting to move ---- */

/* An error reply is text a script chooses: a client's "-NOAUTH" does not
 * make the proxy think Redis wants a password (and apply Redis's pre-auth
 * limits to everyone on the shared connection). */
Test(shared, a_script_that_returns_noauth_changes_nothing_for_the_others)
{
    redisContext *c = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(c, "EVAL %s 0", "return redis.error_reply('NOAUTH Authentication required.')");
    vt_assert_error(r, "NOAUTH");
    freeReplyObject(r);
    redisContext *victim = vt_must_connect(env.proxy->port);
    r = vt_cmd(victim, "MSET a 1 b 2 c 3 d 4 e 5");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(victim, "GET e");
    vt_assert_str(r, "5");
    freeReplyObject(r);
    redisFree(victim);
    redisFree(c);
}

#define HUGE_VALUE (96 * 1024 * 1024)

/* A request too big to hold whole arrives behind a slow script: it moves
 * the client, which waits for the script's reply first, and meanwhile the
 * proxy reads no more than buffer-limit of it. */
Test(shared, a_big_request_waiting_to_move_is_not_read_ahead)
{
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, got = {0};
    buf_busy_script(&req, 500000);
    char *value = malloc(HUGE_VALUE);
    cr_assert(value);
    memset(value, 'u', HUGE_VALUE);
    const char *set[] = {"SET", "sh:huge", value};
    const size_t lens[] = {3, 7, HUGE_VALUE};
    vt_buf_cmd_argv(&req, 3, set, lens);
    free(value);
    vt_buf_cmd(&req, "STRLEN", "sh:huge", NULL);
    cr_assert(vt_sock_send_buf(fd, &req));
    char want[64];
    snprintf(want, sizeof(want), ":1\r\n+OK\r\n:%d\r\n", HUGE_VALUE);
    vt_expect_bytes(fd, &got, want);
    cr_assert_eq(vt_proxy_stat(env.proxy->port, "clients_pinned"), 1,
                 "the big request did not move the client");
#ifndef VP_SANITIZED
    long long peak_kb = vt_peak_rss_kb(env.proxy->pid);
    cr_assert(peak_kb > 0, "cannot read the proxy's VmHWM");
    cr_assert_lt(peak_kb, 48 * 1024, "the proxy's peak RSS was %lld KiB for a %d MiB request it streamed",
                 peak_kb, HUGE_VALUE >> 20);
#endif
    close(fd);
    vt_buf_free(&req);
    vt_buf_free(&got);
}

/* ---- a client waiting to move keeps within its limits ---- */

static void setup_small_query_buffer(void)
{
    static const char *const args[] = {"--shared-upstreams", "1", "--client-query-buffer-limit", "1mb", NULL};
    vt_env_start(&env, NULL, &(vt_proxy_opts){.extra_args = args});
}

TestSuite(shared_small, .init = setup_small_query_buffer, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

#define BURST_SETS 2000
#define BURST_VALUE 1000

/* The client's SELECT waits for a slow script before it on the shared
 * connection while 2 MB of requests pour in behind it: the proxy stops
 * reading at buffer-limit instead of taking them for an oversized query. */
Test(shared_small, a_client_waiting_to_move_is_not_taken_for_an_oversized_query)
{
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, got = {0}, want = {0};
    buf_busy_script(&req, 300000);
    vt_buf_cmd(&req, "SELECT", "1", NULL);
    vt_buf_append_str(&want, ":1\r\n+OK\r\n");
    char *value = malloc(BURST_VALUE + 1);
    memset(value, 'v', BURST_VALUE);
    value[BURST_VALUE] = '\0';
    for (int i = 0; i < BURST_SETS; i++) {
        char key[32];
        snprintf(key, sizeof(key), "burst:%d", i);
        vt_buf_cmd(&req, "SET", key, value, NULL);
        vt_buf_append_str(&want, "+OK\r\n");
    }
    vt_buf_cmd(&req, "DBSIZE", NULL);
    vt_buf_append_str(&want, ":2000\r\n");
    vt_buf_append(&want, "", 1);
    cr_assert(vt_sock_send_buf(fd, &req));
    vt_expect_bytes(fd, &got, want.data);
    close(fd);
    free(value);
    vt_buf_free(&req);
    vt_buf_free(&got);
    vt_buf_free(&want);
}

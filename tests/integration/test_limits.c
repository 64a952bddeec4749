/* test_limits.c - connection limits: a Redis that refuses connections
 * (maxclients), and the proxy's own maxclients and open-file limit.
 *
 * Redis at maxclients writes "-ERR max number of clients reached" to a new
 * connection as it accepts it, then closes it. Through the proxy a client
 * must see the same: that error as the reply to its command, then the
 * close, also when the connection Redis refused is one the proxy opened for
 * it (a move to its own connection, a new shared connection) and its first
 * request was one of the proxy's own. Clients whose connections were there
 * before the limit was reached go on (bystanders); a shared connection
 * counts as one Redis client. */
#include <sys/resource.h>

#include "tests/support/bystander.h"
#include "tests/support/checks.h"

#define MAXCLIENTS_ERR "-ERR max number of clients reached\r\n"
/* Redis's maxclients in these stories: room for the bystanders, the
 * proxies' connections and a few more, then filled up directly. */
#define REDIS_MAXCLIENTS "12"
#define FILL_MAX 32

static vt_env env;
static const char *const redis_args[] = {"--maxclients", REDIS_MAXCLIENTS, NULL};

static void setup(void)
{
    vt_redis_opts ro = {.extra_args = redis_args};
    vt_env_start(&env, &ro, NULL);
}

static void teardown(void)
{
    vt_env_stop(&env);
}

TestSuite(limits, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

/* Direct connections to Redis until it refuses one: then it is full. */
typedef struct redis_fill {
    redisContext *c[FILL_MAX];
    int n;
} redis_fill;

static void fill_redis(redis_fill *f, int port)
{
    f->n = 0;
    for (;;) {
        cr_assert(f->n < FILL_MAX, "Redis took %d more connections without refusing one", FILL_MAX);
        redisContext *c = vt_must_connect(port);
        redisReply *r = vt_cmd(c, "PING");
        if (r && r->type == REDIS_REPLY_ERROR) {
            cr_assert(strcmp(r->str, "ERR max number of clients reached") == 0, "unexpected refusal: %s",
                      VT_DESCRIBE(r));
            freeReplyObject(r);
            redisFree(c);
            return;
        }
        vt_assert_status(r, "PONG");
        freeReplyObject(r);
        f->c[f->n++] = c;
    }
}

static void unfill_redis(redis_fill *f)
{
    for (int i = 0; i < f->n; i++)
        redisFree(f->c[i]);
    f->n = 0;
}

/* Send `request` on fd and expect Redis's refusal as the only reply, then
 * the close (a reset after the reply is what Redis's own close may give a
 * client that sent more). */
static void expect_refused(int fd, const char *request)
{
    vt_buf got = {0};
    /* The send may fail: the other side may have closed already. */
    (void)vt_sock_send_str(fd, request);
    bool closed = vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS);
    vt_assert_bytes(&got, MAXCLIENTS_ERR);
    cr_assert(closed, "the connection stayed open after the refusal");
    vt_buf_free(&got);
}

/* Poll: does a new client's SELECT (a move, on a shared connection) get
 * +OK? (Redis notices the connections that left in its own time.) */
static bool moves_again(void *arg)
{
    int fd = vt_must_sock(*(int *)arg);
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(fd, "*2\r\n$6\r\nSELECT\r\n$1\r\n1\r\n"));
    vt_sock_read_replies(fd, &got, 1, VT_READ_DEADLINE_MS);
    bool ok = got.len == 5 && memcmp(got.data, "+OK\r\n", 5) == 0;
    if (!ok) vt_assert_bytes(&got, MAXCLIENTS_ERR); /* still refused: try again */
    vt_buf_free(&got);
    close(fd);
    return ok;
}

Test(limits, a_client_that_moves_when_redis_is_full_gets_redis_refusal_then_the_close)
{
    VT_SKIP_IF_UPSTREAM_TLS();
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, 3, 30);

    /* A client named, served, before the limit. */
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    vt_buf_cmd(&req, "CLIENT", "SETNAME", "mover", NULL);
    vt_buf_cmd(&req, "SET", "limits:k", "v", NULL);
    vt_exchange(fd, &req, "+OK\r\n+OK\r\n");

    redis_fill fill;
    fill_redis(&fill, env.redis->port);

    /* SELECT needs a connection of its own: on a shared one the proxy opens
     * it now (its first requests are the proxy's silent PUBLISH and the
     * SETNAME replay) and Redis refuses it. With a connection of its own
     * already (shared-upstreams 0, or Redis directly) the client goes on. */
    if (vt_proxy_shared_upstreams(env.proxy) > 0) {
        expect_refused(fd, "*2\r\n$6\r\nSELECT\r\n$1\r\n1\r\n*2\r\n$3\r\nGET\r\n$8\r\nlimits:k\r\n");
    } else {
        vt_buf_cmd(&req, "SELECT", "1", NULL);
        vt_buf_cmd(&req, "GET", "limits:k", NULL);
        vt_exchange(fd, &req, "+OK\r\n$-1\r\n");
    }

    /* A client arriving now (the one before still holds its connection):
     * on the shared connection it is served (the shared connection is one
     * Redis client, there before the limit); a connection of its own Redis
     * refuses. */
    int late = vt_must_sock(env.proxy->port);
    if (vt_proxy_shared_upstreams(env.proxy) > 0) {
        vt_buf_cmd(&req, "PING", NULL);
        vt_exchange(late, &req, "+PONG\r\n");
    } else {
        expect_refused(late, "*1\r\n$4\r\nPING\r\n");
    }
    close(late);
    close(fd);

    cr_assert(vt_bystanders_wait(b, 30, VT_READ_DEADLINE_MS), "the bystanders stopped being served");
    vt_assert_bystanders_ok(b);

    /* Once Redis has room again, a client moves as before. */
    unfill_redis(&fill);
    int port = env.proxy->port;
    cr_assert(vt_wait_until(moves_again, &port, VT_READ_DEADLINE_MS),
              "no client could move after Redis had room");
    vt_buf_free(&req);
}

Test(limits, every_client_waiting_on_a_connection_redis_refuses_gets_the_refusal)
{
    VT_SKIP_IF_UPSTREAM_TLS();
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, 3, 30);
    redis_fill fill;
    fill_redis(&fill, env.redis->port);

    /* A second proxy in front of the full Redis: its shared connection (or
     * each client's own) is refused, and every client that sent commands
     * on it gets the refusal as its first reply. */
    vt_proxy *late = vt_proxy_start(env.redis, NULL);
    cr_assert(late != NULL);
    enum { NCLIENTS = 6 };
    int fds[NCLIENTS];
    for (int i = 0; i < NCLIENTS; i++)
        fds[i] = vt_must_sock(late->port);
    const char *pipeline = "*1\r\n$4\r\nPING\r\n*3\r\n$3\r\nSET\r\n$8\r\nlimits:a\r\n$1\r\nb\r\n"
                           "*2\r\n$3\r\nGET\r\n$8\r\nlimits:a\r\n";
    /* A verb first: the proxy's silent SCRIPT LOADs go ahead of it. */
    const char *verb = "*3\r\n$11\r\nLOCKRELEASE\r\n$8\r\nlimits:l\r\n$1\r\nt\r\n*1\r\n$4\r\nPING\r\n";
    for (int i = 0; i < NCLIENTS; i++)
        cr_assert(vt_sock_send_str(fds[i], i == 0 ? verb : pipeline));
    for (int i = 0; i < NCLIENTS; i++) {
        expect_refused(fds[i], "");
        close(fds[i]);
    }
    cr_assert(vt_proxy_alive(late), "the second proxy died");
    cr_assert(vt_proxy_stop(late));
    vt_proxy_free(late);

    cr_assert(vt_bystanders_wait(b, 30, VT_READ_DEADLINE_MS), "the bystanders stopped being served");
    vt_assert_bystanders_ok(b);
    unfill_redis(&fill);
}

/* ---- the proxy's own limit: maxclients and the open-file limit ---- */

#define LOW_NOFILE 64
#define RESERVED_FDS 32 /* as Redis's CONFIG_MIN_RESERVED_FDS */
#define NBYSTANDERS 3

static vt_env files_env;

static void files_teardown(void)
{
    vt_env_stop(&files_env);
}

TestSuite(open_files, .fini = files_teardown, .timeout = VT_TEST_TIMEOUT_S);

/* The clients the proxy must take under ulimit -n LOW_NOFILE, worked out
 * from the rule docs/compatibility.md#clients-past-maxclients states: the
 * limit less the reserve (less a descriptor per shared connection), one
 * descriptor per client on shared connections, two with shared-upstreams 0. */
static int expected_maxclients(const vt_proxy *p)
{
    int shared = vt_proxy_shared_upstreams(p);
    return shared > 0 ? LOW_NOFILE - RESERVED_FDS - shared : (LOW_NOFILE - RESERVED_FDS) / 2;
}

/* How many clients the proxy (or Redis, in direct mode) has, asked on c. */
static long long clients_now(redisContext *c)
{
    if (vt_direct_mode()) return vt_info_int(c, "clients", "connected_clients");
    redisReply *r = vt_cmd(c, "VERBPROXY STATS");
    cr_assert(r && r->type == REDIS_REPLY_STRING, "VERBPROXY STATS: %s", VT_DESCRIBE(r));
    const char *line = strstr(r->str, "clients_connected:");
    long long n = line ? strtoll(line + strlen("clients_connected:"), NULL, 10) : -1;
    freeReplyObject(r);
    return n;
}

static bool alone(void *arg)
{
    return clients_now(arg) == 1;
}

/* A connection that waits until it is the only client: the ones before it
 * (the start-up probe) have been noticed gone, so the clients counted from
 * here are exactly those the test opens. It stays open (one client). */
static redisContext *connect_alone(int port)
{
    redisContext *c = vt_must_connect(port);
    cr_assert(vt_wait_until(alone, c, VT_READ_DEADLINE_MS), "clients left before were not noticed gone");
    return c;
}

/* A new client's PING: 1 served (+PONG, left open in *fd), 0 refused with
 * exactly Redis's error then the close. */
static int ping_or_refused(int port, int *fd)
{
    *fd = vt_must_sock(port);
    cr_assert(vt_sock_send_str(*fd, "*1\r\n$4\r\nPING\r\n"), "send failed");
    vt_buf got = {0};
    vt_sock_read_len(*fd, &got, 7, VT_READ_DEADLINE_MS);
    if (got.len == 7 && memcmp(got.data, "+PONG\r\n", 7) == 0) {
        vt_buf_free(&got);
        return 1;
    }
    bool closed = vt_sock_read_eof(*fd, &got, VT_READ_DEADLINE_MS);
    vt_assert_bytes(&got, MAXCLIENTS_ERR);
    cr_assert(closed, "a refused client's connection stayed open");
    vt_buf_free(&got);
    close(*fd);
    *fd = -1;
    return 0;
}

/* Poll: does a new client get served again? (The proxy notices the
 * clients that left in its own time; each refusal meanwhile is counted.) */
typedef struct retry {
    int port;
    int refused;
} retry;

static bool served_again(void *arg)
{
    retry *r = arg;
    int fd;
    if (!ping_or_refused(r->port, &fd)) {
        r->refused++;
        return false;
    }
    close(fd);
    return true;
}

Test(open_files, under_a_low_ulimit_the_clients_past_what_fits_get_redis_error_and_the_others_go_on)
{
    VT_SKIP_IF_DIRECT();
    files_env.redis = vt_redis_start(NULL);
    cr_assert(files_env.redis != NULL);
    vt_proxy_opts po = {.nofile = LOW_NOFILE};
    files_env.proxy = vt_proxy_start(files_env.redis, &po);
    cr_assert(files_env.proxy != NULL);
    int port = files_env.proxy->port;
    int maxclients = expected_maxclients(files_env.proxy);
    char *log = vt_proxy_log(files_env.proxy);
    char want[96];
    snprintf(want, sizeof(want), "maxclients has been reduced to %d", maxclients);
    cr_assert(strstr(log, want) != NULL, "no \"%s\" in the proxy's log:\n%s", want, log);
    free(log);

    redisContext *counted = connect_alone(port);
    vt_bystanders *b = vt_must_start_bystanders(port, NBYSTANDERS, 30);

    /* More clients than fit: each one is served or refused, never closed
     * in silence, and exactly maxclients are in at once. */
    enum { NCLIENTS = LOW_NOFILE };
    int fds[NCLIENTS];
    int served = 0, refused = 0;
    for (int i = 0; i < NCLIENTS; i++) {
        if (ping_or_refused(port, &fds[served]))
            served++;
        else
            refused++;
    }
    cr_assert_eq(served + NBYSTANDERS + 1, maxclients,
                 "%d served besides %d bystanders and one more, want %d in all", served, NBYSTANDERS,
                 maxclients);
    cr_assert(vt_bystanders_wait(b, 30, VT_READ_DEADLINE_MS), "the bystanders stopped being served");

    /* A served client that moves needs one more descriptor: with none left
     * its command gets the same error. With shared-upstreams 0 it has its
     * connection already. */
    vt_buf req = {0};
    if (vt_proxy_shared_upstreams(files_env.proxy) > 0) {
        expect_refused(fds[0], "*2\r\n$6\r\nSELECT\r\n$1\r\n1\r\n");
        refused++;
    } else {
        vt_buf_cmd(&req, "SELECT", "1", NULL);
        vt_exchange(fds[0], &req, "+OK\r\n");
    }
    close(fds[0]);
    for (int i = 1; i < served; i++)
        close(fds[i]);

    /* Room again once they left. */
    retry again = {.port = port};
    cr_assert(vt_wait_until(served_again, &again, VT_READ_DEADLINE_MS),
              "no client served after the others left");
    cr_assert_eq(vt_proxy_stat(port, "rejected_connections"), refused + again.refused);
    cr_assert(vt_bystanders_wait(b, 30, VT_READ_DEADLINE_MS), "the bystanders stopped being served");
    vt_assert_bystanders_ok(b);
    redisFree(counted);
    vt_buf_free(&req);
}

Test(open_files, maxclients_caps_the_clients_and_the_next_gets_redis_error)
{
    files_env.redis = vt_redis_start(NULL);
    cr_assert(files_env.redis != NULL);
    /* In direct mode Redis itself is told maxclients 4. */
    const char *const args[] = {"--maxclients", "4", NULL};
    vt_proxy_opts po = {.extra_args = args};
    if (vt_direct_mode()) {
        redisContext *c = vt_must_connect(files_env.redis->port);
        redisReply *r = vt_cmd(c, "CONFIG SET maxclients 4");
        vt_assert_status(r, "OK");
        freeReplyObject(r);
        redisFree(c);
    }
    files_env.proxy = vt_proxy_start(files_env.redis, &po);
    cr_assert(files_env.proxy != NULL);
    int port = files_env.proxy->port;

    redisContext *counted = connect_alone(port);
    int fds[6], served = 0;
    for (int i = 0; i < 6; i++)
        served += ping_or_refused(port, &fds[served]);
    cr_assert_eq(served, 3, "%d served besides the one counting, want 3", served);
    redisFree(counted);
    for (int i = 0; i < served; i++)
        close(fds[i]);
    retry again = {.port = port};
    cr_assert(vt_wait_until(served_again, &again, VT_READ_DEADLINE_MS),
              "no client served after the others left");
}

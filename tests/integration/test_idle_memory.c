/* test_idle_memory.c - an idle client holds no buffers (issue 9, item 3).
 *
 * A client that is not sending or receiving needs no read buffer, write
 * buffer, pending replies or output pieces: the proxy takes them from pools
 * (proxy/pool.h) for each burst of work and gives them back when it is done.
 * Two hundred clients each do a little of everything (a name, a reply the
 * proxy makes itself, a 20 kB value, a verb's argument error, a pipeline),
 * read every reply, then stay connected doing nothing while bystanders
 * pipeline beside them. Once the bystanders have gone, VERBPROXY STATS shows
 * every buffer and block back in its pool but the read buffer holding the
 * STATS request itself, and the idle clients still work. And a thousand idle
 * clients cost the proxy little resident memory each (bench/idle_memory.sh
 * measures 5,000 beside twemproxy and redis-server). */

#include "tests/support/checks.h"

#define IDLE_CLIENTS 200
#define RSS_CLIENTS 1000
#define FD_LIMIT 8192 /* this process, verbproxy and redis-server each need > RSS_CLIENTS */
#define VALUE_LEN (20 * 1000)
/* Resident memory per idle client at most (KiB): the target on the
 * shared connection (7.8 before the pools, 1.1 now); with a connection
 * each, the upstream connection's struct counts too (17 before, 2.6 now). */
#define SHARED_MAX_KIB_PER_CLIENT 2.5
#define OWN_MAX_KIB_PER_CLIENT 4.0

static vt_env env;

static void setup(void)
{
    vt_raise_fd_limit(FD_LIMIT, RSS_CLIENTS); /* before the servers start: they inherit it */
    vt_env_start(&env, NULL, NULL);
}

static void teardown(void)
{
    vt_env_stop(&env);
}

TestSuite(idle_memory, .init = setup, .fini = teardown, .timeout = 120);

/* What the pools have handed out, from one VERBPROXY STATS: buffers held
 * (a pool block or their own allocation), and blocks of every pool
 * (pool_<name>_in_use). */
typedef struct pool_use {
    long long buffers_held, blocks;
    char text[1024];
} pool_use;

static void pools_in_use(pool_use *u)
{
    redisContext *c = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(c, "VERBPROXY STATS");
    cr_assert(r && r->type == REDIS_REPLY_STRING, "VERBPROXY STATS: %s", VT_DESCRIBE(r));
    u->buffers_held = u->blocks = -1;
    u->text[0] = '\0';
    for (const char *line = r->str; line && *line;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char *colon = strchr(line, ':');
        if (!colon) continue;
        size_t n = (size_t)(colon - line);
        if (n == strlen("buffers_held") && strncmp(line, "buffers_held", n) == 0) {
            u->buffers_held = atoll(colon + 1);
        } else if (strncmp(line, "pool_", 5) == 0 && n > 7 && strncmp(colon - 7, "_in_use", 7) == 0) {
            u->blocks = (u->blocks < 0 ? 0 : u->blocks) + atoll(colon + 1);
        } else {
            continue;
        }
        size_t have = strlen(u->text), len = strcspn(line, "\r\n");
        if (have + len + 2 < sizeof(u->text))
            snprintf(u->text + have, sizeof(u->text) - have, "%.*s ", (int)len, line);
    }
    freeReplyObject(r);
    redisFree(c);
}

/* Nothing in use but the read buffer (a pool block) of the STATS request
 * being answered. */
static bool only_the_askers_buffer(void *arg)
{
    pool_use *last = arg;
    pools_in_use(last);
    return last->buffers_held == 1 && last->blocks == 1;
}

/* What client i sends once: its replies are `expected_replies`. */
static void busy_requests(vt_buf *req, int i, const char *value)
{
    char name[32], key[32];
    snprintf(name, sizeof(name), "idle-%d", i);
    snprintf(key, sizeof(key), "idle:%d", i);
    vt_buf_cmd(req, "CLIENT", "SETNAME", name, NULL);
    vt_buf_cmd(req, "SELECT", "0", NULL);
    vt_buf_cmd(req, "SET", key, value, NULL);
    vt_buf_cmd(req, "GET", key, NULL);
    vt_buf_cmd(req, "ZTICK", key, NULL);
    vt_buf_cmd(req, "INCR", "idle:count", NULL);
    vt_buf_cmd(req, "PING", NULL);
}

static void expected_replies(vt_buf *want, const char *value)
{
    char head[32];
    vt_buf_append_str(want, "+OK\r\n+OK\r\n+OK\r\n");
    snprintf(head, sizeof(head), "$%zu\r\n", strlen(value));
    vt_buf_append_str(want, head);
    vt_buf_append_str(want, value);
    vt_buf_append_str(want, "\r\n-ERR wrong number of arguments for 'ztick' command\r\n");
}

Test(idle_memory, clients_that_went_idle_hold_no_buffers_and_still_work)
{
    VT_SKIP_IF_DIRECT();
    char *value = malloc(VALUE_LEN + 1);
    memset(value, 'v', VALUE_LEN);
    value[VALUE_LEN] = '\0';
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, 4, 24);

    static int fd[IDLE_CLIENTS];
    vt_buf req = {0}, want = {0};
    expected_replies(&want, value);
    for (int i = 0; i < IDLE_CLIENTS; i++) {
        fd[i] = vt_must_sock(env.proxy->port);
        busy_requests(&req, i, value);
        cr_assert(vt_sock_send_buf(fd[i], &req));
        vt_buf_reset(&req);
    }
    for (int i = 0; i < IDLE_CLIENTS; i++) {
        vt_buf got = {0};
        cr_assert(vt_sock_read_replies(fd[i], &got, 7, VT_READ_DEADLINE_MS), "client %d got \"%s\"", i,
                  vt_buf_escaped(&got));
        /* the INCR's value depends on the order: everything before it, and the PING after */
        cr_assert(got.len > want.len && memcmp(got.data, want.data, want.len) == 0, "client %d got \"%s\"", i,
                  vt_buf_escaped(&got));
        cr_assert(got.data[want.len] == ':', "client %d: no INCR reply: \"%s\"", i, vt_buf_escaped(&got));
        cr_assert(memcmp(got.data + got.len - 7, "+PONG\r\n", 7) == 0, "client %d got \"%s\"", i,
                  vt_buf_escaped(&got));
        vt_buf_free(&got);
    }
    /* The last words before going idle are small: they fit in one pool
     * block (the 20 kB value above outgrew it). */
    for (int i = 0; i < IDLE_CLIENTS; i++) {
        vt_buf got = {0};
        cr_assert(vt_sock_send_str(fd[i], "*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$7\r\nidle:no\r\n"));
        vt_expect_bytes(fd[i], &got, "+PONG\r\n$-1\r\n");
        vt_buf_free(&got);
    }
    cr_assert(vt_bystanders_wait(b, 240, VT_READ_DEADLINE_MS), "the bystanders were held up");
    vt_assert_bystanders_ok(b);

    /* Two hundred idle clients: every block is back in its pool. */
    static pool_use last;
    cr_assert(
        vt_wait_until(only_the_askers_buffer, &last, VT_READ_DEADLINE_MS),
        "with %d idle clients the pools still have out (1 buffer, 1 block expected: the STATS request's): %s",
        IDLE_CLIENTS, last.text);

    /* And they take blocks again when they talk again. */
    for (int i = 0; i < IDLE_CLIENTS; i++) {
        vt_buf got = {0};
        cr_assert(vt_sock_send_str(fd[i], "*1\r\n$4\r\nPING\r\n"));
        vt_expect_bytes(fd[i], &got, "+PONG\r\n");
        vt_buf_free(&got);
        close(fd[i]);
    }
    vt_buf_free(&req);
    vt_buf_free(&want);
    free(value);
}

static long long rss_kb(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    char *s = vt_read_file(path);
    char *line = strstr(s, "\nVmRSS:");
    long long kb = line ? atoll(line + strlen("\nVmRSS:")) : -1;
    free(s);
    return kb;
}

static int ping_client(void)
{
    int fd = vt_must_sock(env.proxy->port);
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(fd, "*1\r\n$4\r\nPING\r\n"));
    vt_expect_bytes(fd, &got, "+PONG\r\n");
    vt_buf_free(&got);
    return fd;
}

Test(idle_memory, a_thousand_idle_clients_cost_the_proxy_little_memory_each)
{
    VT_SKIP_IF_DIRECT();
#ifdef VP_SANITIZED
    cr_skip_test("resident memory says nothing under ASan");
#endif
    static int fd[RSS_CLIENTS];
    int warm = ping_client(); /* the shared upstream connection is open */
    long long before = rss_kb(env.proxy->pid);
    cr_assert(before > 0, "cannot read the proxy's VmRSS");
    for (int i = 0; i < RSS_CLIENTS; i++)
        fd[i] = ping_client();
    long long after = rss_kb(env.proxy->pid);
    double per_client = (double)(after - before) / RSS_CLIENTS;
    int own = vt_proxy_shared_upstreams(env.proxy) == 0;
    double max = own ? OWN_MAX_KIB_PER_CLIENT : SHARED_MAX_KIB_PER_CLIENT;
    cr_log_info("%d idle clients: %.2f KiB of the proxy's RSS each", RSS_CLIENTS, per_client);
    cr_assert(per_client <= max,
              "%d idle clients (%s) cost the proxy %.2f KiB of RSS each (%lld -> %lld KiB)", RSS_CLIENTS,
              own ? "own connections" : "shared connection", per_client, before, after);
    for (int i = 0; i < RSS_CLIENTS; i++)
        close(fd[i]);
    close(warm);
}

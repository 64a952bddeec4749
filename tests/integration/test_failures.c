/* test_failures.c - when one side of the proxy dies.
 *
 * Redis dies under a client: the client gets every reply Redis had sent, then
 * sees its connection close (not a hang); once Redis is back, new clients
 * work. A client dies under its pipeline: the proxy drops that client's
 * upstream connection, Redis sees it go, and the proxy serves on. Redis is
 * not there when a client arrives: the client gets
 * "-ERR upstream unavailable: <address>: <reason>" within the connect timeout
 * and the same connection works as soon as Redis is. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>

#include "tests/support/checks.h"

#define CONNECT_TIMEOUT_MS 500
#define SLACK_MS 2000      /* scheduling, a loaded 2-core CI box */
#define SMALL_PIPELINE 100 /* replies that fit in the socket buffers */
#define BIG_VALUE (1024 * 1024)
#define BIG_GETS 40

static vt_env env;

static void setup(void)
{
    vt_env_start(&env, NULL, &(vt_proxy_opts){.connect_timeout_ms = CONNECT_TIMEOUT_MS});
}

static void teardown(void)
{
    vt_env_stop(&env);
}

TestSuite(failures, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

/* Upstream connections Redis sees besides the clients' own: the proxy's
 * shared one (shared-upstreams 1, the default), opened by the first client
 * and kept. A client that blocks or pipelines a blocking command has moved
 * to a connection of its own, which is the one these tests watch. */
static int shared_conns(void)
{
    return vt_proxy_shared_upstreams(env.proxy) > 0 ? 1 : 0;
}

static void must_status(int port, const char *cmd, const char *status)
{
    redisContext *c = vt_must_connect(port);
    redisReply *r = vt_cmd(c, cmd);
    vt_assert_reply(r, c);
    cr_assert(r->type == REDIS_REPLY_STATUS && strcmp(r->str, status) == 0, "%s: expected +%s, got %s", cmd,
              status, VT_DESCRIBE(r));
    freeReplyObject(r);
    redisFree(c);
}

Test(failures, redis_killed_mid_pipeline_delivers_the_replies_sent_then_closes_the_client)
{
    must_status(env.redis->port, "SET f:v 0123456789", "OK");

    /* 100 GETs, then a BLPOP that never returns, then one more GET */
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, got = {0}, want = {0};
    for (int i = 0; i < SMALL_PIPELINE; i++) {
        vt_buf_cmd(&req, "GET", "f:v", NULL);
        vt_buf_append_str(&want, "$10\r\n0123456789\r\n");
    }
    vt_buf_cmd(&req, "BLPOP", "f:never", "0", NULL);
    vt_buf_cmd(&req, "GET", "f:v", NULL);
    cr_assert(vt_sock_send_buf(fd, &req));

    /* Redis has run the GETs and sits in BLPOP: it has written their
     * replies. Now it dies, without a chance to say anything more. */
    cr_assert(vt_wait_until_blocked(env.redis->port, 1, VT_READ_DEADLINE_MS), "BLPOP never blocked");
    /* Redis writes replies at the end of an event loop iteration, maybe
     * after answering the INFO that saw the block: one more round trip
     * makes sure that iteration is over. */
    must_status(env.redis->port, "PING", "PONG");
    vt_redis_kill(env.redis);

    long long t0 = vt_now_ms();
    bool closed = vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS);
    cr_assert(closed, "the client connection was not closed %d ms after Redis died; got %zu bytes",
              VT_READ_DEADLINE_MS, got.len);
    cr_assert(got.len == want.len && memcmp(got.data, want.data, want.len) == 0,
              "expected the %d GET replies and nothing else, got %zu bytes (%s): \"%s\"", SMALL_PIPELINE,
              got.len, got.err ? strerror(got.err) : "EOF", vt_buf_escaped(&got));
    cr_assert_lt(vt_now_ms() - t0, SLACK_MS, "closing took %lld ms", vt_now_ms() - t0);
    close(fd);

    /* Redis comes back on the same port: new clients work */
    cr_assert(vt_redis_launch(env.redis), "redis-server did not restart");
    redisContext *c = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(c, "SET f:after-restart yes");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(c, "GET f:after-restart");
    vt_assert_str(r, "yes");
    freeReplyObject(r);
    redisFree(c);
    vt_buf_free(&req);
    vt_buf_free(&got);
    vt_buf_free(&want);
}

/* f:big := BIG_VALUE bytes of `fill`, written straight to Redis. */
static void store_big_value(char fill)
{
    char *value = malloc(BIG_VALUE);
    memset(value, fill, BIG_VALUE);
    redisContext *admin = vt_must_connect(env.redis->port);
    redisReply *r = vt_cmd(admin, "SET f:big %b", value, (size_t)BIG_VALUE);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    redisFree(admin);
    free(value);
}

Test(failures, redis_killed_while_big_replies_stream_never_leaves_the_client_hanging)
{
    store_big_value('v');

    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, got = {0};
    for (int i = 0; i < BIG_GETS; i++)
        vt_buf_cmd(&req, "GET", "f:big", NULL);
    vt_buf_cmd(&req, "BLPOP", "f:never", "0", NULL);
    cr_assert(vt_sock_send_buf(fd, &req));
    cr_assert(vt_sock_read_len(fd, &got, 1, VT_READ_DEADLINE_MS), "no reply at all");
    vt_redis_kill(env.redis);

    /* whatever had made it through arrives, then the connection closes */
    cr_assert(vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS), "client left hanging after %zu bytes",
              got.len);
    size_t one = strlen("$1048576\r\n") + BIG_VALUE + 2;
    cr_assert(got.len <= one * BIG_GETS, "more bytes than the replies: %zu", got.len);
    cr_assert(memcmp(got.data, "$1048576\r\nvvvv", 14) == 0, "got \"%s\"", vt_escape(got.data, 40));
    close(fd);
    vt_buf_free(&req);
    vt_buf_free(&got);

    cr_assert(vt_proxy_alive(env.proxy), "verbproxy died with its upstream");
}

Test(failures, a_client_killed_mid_pipeline_frees_its_upstream_connection)
{
    store_big_value('x');

    /* a client asks for 40 MiB of replies plus a blocking command and dies
     * without reading any of it */
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, got = {0};
    for (int i = 0; i < BIG_GETS; i++)
        vt_buf_cmd(&req, "GET", "f:big", NULL);
    vt_buf_cmd(&req, "BLPOP", "f:never", "0", NULL);
    bool sent = vt_sock_send_buf(fd, &req);
    bool answered = sent && vt_sock_read_len(fd, &got, 1, VT_READ_DEADLINE_MS);
    vt_buf_free(&req); /* (before the asserts that can fail: no leak reports then) */
    vt_buf_free(&got);
    cr_assert(sent);
    cr_assert(answered, "no reply at all");
    /* Redis counts the probe connection, the shared one and the client's
     * own (the BLPOP is sent there once the GETs are answered) */
    long long seen;
    cr_assert(vt_wait_info(env.redis->port, "clients", "connected_clients", 2 + shared_conns(),
                           VT_READ_DEADLINE_MS, &seen),
              "Redis sees %lld connections, expected the client's, the probe's and %d shared", seen,
              shared_conns());
    cr_assert(vt_wait_info(env.redis->port, "clients", "blocked_clients", 1, VT_READ_DEADLINE_MS, &seen),
              "the BLPOP is not blocked (%lld blocked clients)", seen);
    close(fd); /* unread data: the kernel resets the connection */

    cr_assert(vt_wait_info(env.redis->port, "clients", "connected_clients", 1 + shared_conns(),
                           VT_READ_DEADLINE_MS, &seen),
              "the dead client's upstream connection is still open (%lld connections)", seen);
    cr_assert(vt_wait_info(env.redis->port, "clients", "blocked_clients", 0, VT_READ_DEADLINE_MS, &seen),
              "Redis still has %lld blocked clients", seen);

    must_status(env.proxy->port, "PING", "PONG");
}

/* Close fd with a reset, as a killed process's socket goes. */
static void reset_close(int fd)
{
    struct linger l = {.l_onoff = 1, .l_linger = 0};
    cr_assert(setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l)) == 0);
    close(fd);
}

/* A client the proxy has stopped reading, with nothing to write to it,
 * learns of no reset from the socket: the proxy must look. Here it is held
 * for good: a BLPOP that never returns, a verb stuck behind it, then MULTI,
 * which waits for the verb's reply (upstream_must_settle_verbs), and more
 * than buffer-limit after it, so reading stops. Then the client dies. */
Test(failures, a_dead_client_the_proxy_stopped_reading_frees_its_upstream_connection)
{
    static const char *const tight[] = {"--buffer-limit", "16kb", NULL};
    vt_proxy *proxy = vt_proxy_start(
        env.redis, &(vt_proxy_opts){.connect_timeout_ms = CONNECT_TIMEOUT_MS, .extra_args = tight});
    cr_assert(proxy, "verbproxy did not start");
    int fd = vt_must_sock(proxy->port);
    vt_buf req = {0};
    vt_buf_cmd(&req, "BLPOP", "f:never", "0", NULL);
    vt_buf_cmd(&req, "LOCKRELEASE", "f:lock", "tok", NULL);
    vt_buf_cmd(&req, "MULTI", NULL);
    char *pad = malloc(64 * 1024);
    memset(pad, 'p', 64 * 1024);
    const char *set[] = {"SET", "f:pad", pad};
    const size_t lens[] = {3, 5, 64 * 1024};
    vt_buf_cmd_argv(&req, 3, set, lens);
    free(pad);
    bool sent = vt_sock_send_buf(fd, &req);
    vt_buf_free(&req);
    cr_assert(sent);
    long long seen;
    cr_assert(vt_wait_info(env.redis->port, "clients", "blocked_clients", 1, VT_READ_DEADLINE_MS, &seen),
              "the BLPOP is not blocked (%lld blocked clients)", seen);
    /* (The proxy sent the BLPOP and stopped reading in one callback: the
     * verb and MULTI came with it, the rest in at most a read or two.) */
    redisContext *probe = vt_must_connect(env.redis->port);
    long long before = vt_info_int(probe, "clients", "connected_clients");
    redisFree(probe);
    reset_close(fd);

    /* (one fewer: the probe's is gone too, and the client's own goes) */
    cr_assert(
        vt_wait_info(env.redis->port, "clients", "connected_clients", before - 1, VT_READ_DEADLINE_MS, &seen),
        "the dead client's upstream connection is still open (%lld connections, %lld before)", seen, before);
    cr_assert(vt_wait_info(env.redis->port, "clients", "blocked_clients", 0, VT_READ_DEADLINE_MS, &seen),
              "Redis still has %lld blocked clients", seen);
    must_status(proxy->port, "PING", "PONG");
    cr_expect(vt_proxy_stop(proxy), "verbproxy did not stop cleanly");
    vt_proxy_free(proxy);
}

Test(failures, a_client_that_disconnects_while_blocked_frees_its_upstream_connection)
{
    int fd = vt_must_sock(env.proxy->port);
    cr_assert(vt_sock_send_str(fd, "BLPOP f:never 0\r\n"));
    cr_assert(vt_wait_until_blocked(env.redis->port, 1, VT_READ_DEADLINE_MS), "BLPOP never blocked");
    close(fd);

    long long seen;
    cr_assert(vt_wait_info(env.redis->port, "clients", "connected_clients", 1 + shared_conns(),
                           VT_READ_DEADLINE_MS, &seen),
              "the client's upstream connection is still open (%lld connections)", seen);
    /* nobody is left to pop the element: it stays in the list */
    redisContext *c = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(c, "RPUSH f:never x");
    vt_assert_int(r, 1);
    freeReplyObject(r);
    r = vt_cmd(c, "LLEN f:never");
    vt_assert_int(r, 1);
    freeReplyObject(r);
    redisFree(c);
}

/* ---- upstream not there ---- */

/* Read one reply line, check it is "-ERR upstream unavailable: <addr>: <reason>"
 * and that it came within the connect timeout (plus slack). */
static void expect_unavailable(int fd, const char *addr, long long sent_at)
{
    vt_buf got = {0};
    char prefix[256];
    snprintf(prefix, sizeof(prefix), "-ERR upstream unavailable: %s: ", addr);
    bool line = vt_sock_read_contains(fd, &got, "\r\n", CONNECT_TIMEOUT_MS + SLACK_MS);
    long long took = vt_now_ms() - sent_at;
    cr_assert(line, "no reply within %d ms; got \"%s\"%s", CONNECT_TIMEOUT_MS + SLACK_MS,
              vt_buf_escaped(&got), got.eof ? " then EOF" : "");
    cr_assert(strncmp(got.data, prefix, strlen(prefix)) == 0, "expected \"%s<reason>\\r\\n\", got \"%s\"",
              prefix, vt_buf_escaped(&got));
    cr_assert(got.len > strlen(prefix) + 2, "no reason given: \"%s\"", vt_buf_escaped(&got));
    cr_assert(memchr(got.data, '\n', got.len) == got.data + got.len - 1, "more than one line: \"%s\"",
              vt_buf_escaped(&got));
    cr_assert_leq(took, CONNECT_TIMEOUT_MS + SLACK_MS, "the error took %lld ms", took);
    vt_buf_free(&got);
}

Test(failures, redis_down_at_start_gives_an_error_then_the_same_connection_works_once_it_is_up)
{
    VT_SKIP_IF_DIRECT();
    /* a proxy whose upstream is not running yet */
    vt_redis *later = vt_redis_new(NULL);
    cr_assert(later);
    vt_proxy *proxy = vt_proxy_start(later, &(vt_proxy_opts){.connect_timeout_ms = CONNECT_TIMEOUT_MS});
    cr_assert(proxy, "verbproxy did not start");
    const char *addr = proxy->upstream; /* (the TLS port in the integration-tls/ variant) */

    int fd = vt_must_sock(proxy->port);
    long long t0 = vt_now_ms();
    cr_assert(vt_sock_send_str(fd, "PING\r\n"));
    expect_unavailable(fd, addr, t0);

    /* still down: still an error, still no hang */
    t0 = vt_now_ms();
    cr_assert(vt_sock_send_str(fd, "GET f:k\r\n"));
    expect_unavailable(fd, addr, t0);

    /* Redis starts; the very same client connection now reaches it */
    cr_assert(vt_redis_launch(later), "redis-server did not start");
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(fd, "SET f:k v\r\nGET f:k\r\n"));
    vt_expect_bytes(fd, &got, "+OK\r\n$1\r\nv\r\n");
    vt_buf_free(&got);
    close(fd);

    /* and so do new ones */
    must_status(proxy->port, "PING", "PONG");

    cr_expect(vt_proxy_stop(proxy), "verbproxy did not stop cleanly");
    vt_proxy_free(proxy);
    vt_redis_free(later);
}

Test(failures, a_pipeline_sent_while_redis_is_down_gets_one_error_per_command)
{
    VT_SKIP_IF_DIRECT();
    vt_redis *later = vt_redis_new(NULL);
    cr_assert(later);
    vt_proxy *proxy = vt_proxy_start(later, &(vt_proxy_opts){.connect_timeout_ms = CONNECT_TIMEOUT_MS});
    cr_assert(proxy, "verbproxy did not start");

    int fd = vt_must_sock(proxy->port);
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(fd, "PING\r\nPING\r\nPING\r\n"));
    cr_assert(vt_sock_read_replies(fd, &got, 3, CONNECT_TIMEOUT_MS * 3 + SLACK_MS),
              "expected three error replies, got \"%s\"", vt_buf_escaped(&got));
    cr_assert_eq(vt_resp_count_replies(got.data, got.len), 3u, "got \"%s\"", vt_buf_escaped(&got));
    for (const char *line = got.data; line < got.data + got.len; line = strchr(line, '\n') + 1)
        cr_assert(strncmp(line, "-ERR upstream unavailable: ", 27) == 0, "got \"%s\"", vt_buf_escaped(&got));
    vt_buf_free(&got);
    close(fd);

    vt_proxy_free(proxy);
    vt_redis_free(later);
}

Test(failures, an_upstream_that_never_answers_connects_gives_an_error_after_the_connect_timeout)
{
    VT_SKIP_IF_DIRECT();
    vt_blackhole hole;
    cr_assert(vt_blackhole_open(&hole), "could not set up a black hole port (see stderr)");
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", hole.port);
    vt_proxy *proxy =
        vt_proxy_start_upstream(addr, &(vt_proxy_opts){.connect_timeout_ms = CONNECT_TIMEOUT_MS});
    cr_assert(proxy, "verbproxy did not start");

    int fd = vt_must_sock(proxy->port);
    long long t0 = vt_now_ms();
    cr_assert(vt_sock_send_str(fd, "PING\r\n"));
    expect_unavailable(fd, addr, t0);
    long long took = vt_now_ms() - t0;
    cr_assert_geq(took, CONNECT_TIMEOUT_MS - 100,
                  "the error came after %lld ms, before the %d ms connect timeout", took, CONNECT_TIMEOUT_MS);
    close(fd);

    vt_proxy_free(proxy);
    vt_blackhole_close(&hole);
}

/* ---- an upstream that accepts and closes at once ---- */

/* A listener that accepts connections and closes them without a byte (a
 * load balancer with no backend, a port-forward to nothing), counting them. */
typedef struct closing_listener {
    int fd, port;
    atomic_int accepted;
    atomic_int stop;
    pthread_t thread;
} closing_listener;

static void *closing_listener_run(void *arg)
{
    closing_listener *l = arg;
    while (!atomic_load(&l->stop)) {
        struct pollfd p = {.fd = l->fd, .events = POLLIN};
        if (poll(&p, 1, 20) <= 0) continue;
        int c = accept(l->fd, NULL, NULL);
        if (c < 0) continue;
        atomic_fetch_add(&l->accepted, 1);
        close(c);
    }
    return NULL;
}

static void closing_listener_open(closing_listener *l)
{
    l->port = vt_free_port();
    l->fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)l->port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(bind(l->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(l->fd, 64) == 0,
              "cannot listen on port %d", l->port);
    cr_assert(pthread_create(&l->thread, NULL, closing_listener_run, l) == 0);
}

static void closing_listener_close(closing_listener *l)
{
    atomic_store(&l->stop, 1);
    pthread_join(l->thread, NULL);
    close(l->fd);
}

/* A reply line or a close: what a client may see when its upstream goes. */
static void expect_unavailable_or_closed(int port)
{
    int fd = vt_must_sock(port);
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(fd, "PING\r\n"));
    bool line = vt_sock_read_contains(fd, &got, "\r\n", CONNECT_TIMEOUT_MS + SLACK_MS);
    cr_assert(line || got.eof || got.err, "neither an answer nor a close: \"%s\"", vt_buf_escaped(&got));
    if (line)
        cr_assert(strncmp(got.data, "-ERR upstream unavailable: ", 27) == 0, "got \"%s\"",
                  vt_buf_escaped(&got));
    close(fd);
    vt_buf_free(&got);
}

/* The connection is lost before the proxy's setup on it is answered: its
 * clients get "upstream unavailable" (or, on a connection of their own that
 * carried their request, the close), and the proxy tries again only with
 * their next request, never in a loop. */
Test(failures, an_upstream_that_accepts_and_closes_is_not_reconnected_to_in_a_loop)
{
    VT_SKIP_IF_DIRECT();
    closing_listener l = {0};
    closing_listener_open(&l);
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", l.port);
    vt_proxy *proxy =
        vt_proxy_start_upstream(addr, &(vt_proxy_opts){.connect_timeout_ms = CONNECT_TIMEOUT_MS});
    cr_assert(proxy, "verbproxy did not start");
    expect_unavailable_or_closed(proxy->port);
    expect_unavailable_or_closed(proxy->port);
    int accepted = atomic_load(&l.accepted);
    /* two clients, each connecting at accept and maybe again for its request */
    cr_assert_leq(accepted, 6, "the proxy connected %d times for two clients", accepted);
    cr_assert(vt_proxy_alive(proxy), "verbproxy died");
    vt_proxy_free(proxy);
    closing_listener_close(&l);
}

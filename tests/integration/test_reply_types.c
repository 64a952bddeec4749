/* test_reply_types.c - every kind of reply Redis sends reaches the client
 * byte for byte, and bytes that are not RESP cost nobody else a reply.
 *
 * The first story sends each DEBUG PROTOCOL variant and Lua values of every
 * type (odd big numbers, NaN doubles, verbatim strings with odd formats,
 * status and error tables with CR, LF and NUL in them), in RESP2 and RESP3,
 * once straight to redis-server and once through the proxy, and the bytes
 * must be the same, while bystanders pipeline on the shared connection.
 *
 * Redis itself never sends bytes that are not RESP, so the other stories put
 * a relay between the proxy and Redis that turns the status line
 * "+CORRUPT-ME" (a Lua {ok='CORRUPT-ME'}) into "@CORRUPT-ME": a type byte
 * nobody knows (those 13 bytes, wherever they are; the stories send them
 * nowhere else). Everything else passes unchanged. On a connection of the
 * client's own the rest of its session must become a byte pipe (the client
 * gets what it would get through the relay without the proxy); on a shared
 * connection the connection is lost, and no other client may get a wrong
 * reply. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/support/checks.h"

static vt_env env;

static void setup(void)
{
    static const char *const args[] = {"--enable-debug-command", "yes", NULL};
    /* (Redis 6.2 always takes DEBUG, and knows no such setting) */
    vt_redis_opts ro = {.extra_args = vt_redis_version() >= 700 ? args : NULL};
    vt_env_start(&env, &ro, NULL);
}

static void teardown(void)
{
    vt_env_stop(&env);
}

TestSuite(reply_types, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

/* Each case is followed by this PING, whose answer marks its end. */
#define END_MARK "vt-end-of-case"
#define END_REPLY "$14\r\n" END_MARK "\r\n"

static const char *const debug_types[] = {"string", "integer", "double", "bignum",   "null", "array", "set",
                                          "map",    "attrib",  "push",   "verbatim", "true", "false"};

/* Lua values of every type, with the odd content Redis lets through. */
static const char *const lua_values[] = {
    "return {big_number='123\\r\\n123'}",
    "return {big_number=''}",
    "return {big_number='ab\\0c'}",
    "return {big_number='  -x\\r'}",
    "return {big_number=string.rep('9', 100000)}",
    "return {double=0/0}",
    "return {double=1/0}",
    "return {double=-1/0}",
    "return {double=1.5e-300}",
    "return {verbatim_string={format='txt', string='a\\r\\nb'}}",
    "return {verbatim_string={format='', string=''}}",
    "return {verbatim_string={format='toolong', string='x'}}",
    "return {verbatim_string={format='t\\r\\n', string='a'}}",
    "return {map={a=1}}",
    "return {map={a={set={b=true}}}}",
    "return {set={a=true}}",
    "return {false, true, 1e20, {double=2.5}}",
    "return nil",
    "return {ok='a\\r\\nb'}",
    "return {ok=''}",
    "return {ok='a\\0b'}",
    "return {err='x\\r\\ny'}",
    "return {err=''}",
    "return {err='-'}",
    "return redis.error_reply('')",
    "return {1, {err='e\\n'}, {ok='o\\r'}}",
    "return {err=string.rep('x', 70000)}",
};

/* Read until the end marker's reply has come (or the deadline, or EOF). */
static void read_case(int fd, vt_buf *got)
{
    vt_sock_read_contains(fd, got, END_REPLY, VT_READ_DEADLINE_MS);
}

/* Send `req` and the end marker to both connections; the bytes that come
 * back must be the same. */
static void same_bytes(int direct, int proxied, const vt_buf *req, const char *what)
{
    vt_buf want = {0}, got = {0}, all = {0};
    vt_buf_append(&all, req->data, req->len);
    vt_buf_cmd(&all, "PING", END_MARK, NULL);
    cr_assert(vt_sock_send_buf(direct, &all) && vt_sock_send_buf(proxied, &all), "%s: send failed", what);
    read_case(direct, &want);
    cr_assert(vt_buf_contains(&want, END_REPLY), "%s: redis-server itself did not answer: \"%s\"", what,
              vt_buf_escaped(&want));
    read_case(proxied, &got);
    cr_assert(got.len == want.len && memcmp(got.data, want.data, want.len) == 0,
              "%s: through the proxy \"%s\"%s", what, vt_buf_escaped(&got), got.eof ? " then EOF" : "");
    vt_buf_free(&want);
    vt_buf_free(&got);
    vt_buf_free(&all);
}

static int connect_with_protocol(int port, int proto)
{
    int fd = vt_must_sock(port);
    if (proto == 3) {
        vt_buf got = {0};
        cr_assert(vt_sock_send_str(fd, "HELLO 3\r\n"));
        cr_assert(vt_sock_read_replies(fd, &got, 1, VT_READ_DEADLINE_MS), "no HELLO reply: \"%s\"",
                  vt_buf_escaped(&got));
        vt_buf_free(&got);
    }
    return fd;
}

static void every_reply_type(int proto)
{
    int direct = connect_with_protocol(env.redis->port, proto);
    int proxied = connect_with_protocol(env.proxy->port, proto);
    vt_buf req = {0};
    char what[160];
    for (size_t i = 0; i < sizeof(debug_types) / sizeof(debug_types[0]); i++) {
        vt_buf_cmd(&req, "DEBUG", "PROTOCOL", debug_types[i], NULL);
        snprintf(what, sizeof(what), "RESP%d DEBUG PROTOCOL %s", proto, debug_types[i]);
        same_bytes(direct, proxied, &req, what);
        vt_buf_reset(&req);
    }
    for (size_t i = 0; i < sizeof(lua_values) / sizeof(lua_values[0]); i++) {
        vt_buf_cmd(&req, "EVAL", lua_values[i], "0", NULL);
        snprintf(what, sizeof(what), "RESP%d EVAL \"%.60s\" 0", proto, lua_values[i]);
        same_bytes(direct, proxied, &req, what);
        vt_buf_reset(&req);
    }
    /* All of them pipelined at once. */
    for (size_t i = 0; i < sizeof(debug_types) / sizeof(debug_types[0]); i++)
        vt_buf_cmd(&req, "DEBUG", "PROTOCOL", debug_types[i], NULL);
    for (size_t i = 0; i < sizeof(lua_values) / sizeof(lua_values[0]); i++)
        vt_buf_cmd(&req, "EVAL", lua_values[i], "0", NULL);
    snprintf(what, sizeof(what), "RESP%d, every case pipelined", proto);
    same_bytes(direct, proxied, &req, what);
    vt_buf_free(&req);
    close(direct);
    close(proxied);
}

Test(reply_types, every_reply_redis_sends_arrives_byte_for_byte_in_resp2_and_resp3)
{
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, 4, 24);
    every_reply_type(2);
    every_reply_type(3);
    cr_assert(vt_bystanders_wait(b, 24, VT_READ_DEADLINE_MS), "the bystanders stopped being served");
    vt_assert_bystanders_ok(b);
}

/* A MONITOR line is one simple line however large the command it shows:
 * it must stream through like a large bulk reply, not sit whole in the
 * proxy. */
#define MONITORED_VALUE (16u << 20) /* shown as \x01 four bytes each: a 64 MiB line */

Test(reply_types, a_monitor_line_of_a_large_value_streams_through)
{
    int watcher = vt_must_sock(env.proxy->port);
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(watcher, "MONITOR\r\n"));
    vt_expect_bytes(watcher, &got, "+OK\r\n");
    vt_buf_reset(&got);

    char *value = malloc(MONITORED_VALUE);
    cr_assert_not_null(value);
    memset(value, 1, MONITORED_VALUE);
    const char *argv[] = {"SET", "rt:big", value};
    size_t lens[] = {3, 6, MONITORED_VALUE};
    redisContext *writer = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd_argv(writer, 3, argv, lens);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    free(value);

    /* +<time> [0 <addr>] "SET" "rt:big" "\x01\x01..."\r\n */
    size_t at_least = 4 * (size_t)MONITORED_VALUE + 30;
    cr_assert(vt_sock_read_len(watcher, &got, at_least, VT_READ_DEADLINE_MS), "only %zu bytes of the line",
              got.len);
    while (got.len < at_least + 100 && !(got.data[got.len - 1] == '\n' && got.data[got.len - 3] == '"') &&
           vt_sock_read_len(watcher, &got, got.len + 1, VT_READ_DEADLINE_MS))
        ;
    cr_assert(got.data[0] == '+' && memcmp(got.data + got.len - 3, "\"\r\n", 3) == 0,
              "not one MONITOR line: %zu bytes", got.len);
    cr_assert(memmem(got.data, 120, "\"SET\" \"rt:big\" \"\\x01\\x01", 24) != NULL);
    cr_assert_eq(vt_resp_count_replies(got.data, got.len), 1);
#ifndef VP_SANITIZED
    if (!env.proxy->direct) {
        long long peak_kb = vt_peak_rss_kb(env.proxy->pid);
        cr_assert(peak_kb > 0, "cannot read the proxy's VmHWM");
        cr_assert_lt(peak_kb, (long long)got.len / 1024 / 4,
                     "the proxy's peak RSS was %lld KiB for a MONITOR line of %zu MiB", peak_kb,
                     got.len >> 20);
    }
#endif
    vt_buf_free(&got);
    redisFree(writer);
    close(watcher);
}

/* ---- a relay that breaks one kind of reply ---- */

#define CORRUPT_FROM "+CORRUPT-ME\r\n"
#define CORRUPT_TO "@CORRUPT-ME\r\n"
#define CORRUPT_SCRIPT "return {ok='CORRUPT-ME'}"
#define RELAY_MAX_CONNS 64

typedef struct relay_conn {
    int down; /* accepted: the proxy (or a test client) */
    int up;   /* to redis-server */
    char carry[sizeof(CORRUPT_FROM)];
    size_t ncarry; /* bytes from up held back: they may start CORRUPT_FROM */
} relay_conn;

typedef struct relay {
    int listen_fd, port, target_port;
    int wake[2];
    atomic_bool stop;
    pthread_t thread;
    relay_conn conn[RELAY_MAX_CONNS];
    int nconn;
} relay;

static bool send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* Bytes from redis to the proxy: CORRUPT_FROM becomes CORRUPT_TO, wherever
 * the stream is cut. A tail that may be the start of CORRUPT_FROM waits for
 * the next read. */
static bool relay_down(relay_conn *c, const char *p, size_t n)
{
    const size_t mlen = sizeof(CORRUPT_FROM) - 1;
    char *buf = malloc(c->ncarry + n);
    cr_assert_not_null(buf);
    memcpy(buf, c->carry, c->ncarry);
    memcpy(buf + c->ncarry, p, n);
    size_t len = c->ncarry + n;
    for (size_t i = 0; i + mlen <= len; i++)
        if (memcmp(buf + i, CORRUPT_FROM, mlen) == 0) memcpy(buf + i, CORRUPT_TO, mlen);
    size_t hold = 0;
    for (size_t k = mlen - 1; k > 0 && !hold; k--)
        if (k <= len && memcmp(buf + len - k, CORRUPT_FROM, k) == 0) hold = k;
    bool ok = send_all(c->down, buf, len - hold);
    memcpy(c->carry, buf + len - hold, hold);
    c->ncarry = hold;
    free(buf);
    return ok;
}

static void relay_drop(relay *r, int i)
{
    close(r->conn[i].down);
    close(r->conn[i].up);
    r->conn[i] = r->conn[--r->nconn];
}

static void relay_accept(relay *r)
{
    int down = accept4(r->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (down < 0) return;
    int up = vt_sock_tcp(r->target_port);
    if (up < 0 || r->nconn == RELAY_MAX_CONNS) {
        close(down);
        if (up >= 0) close(up);
        return;
    }
    r->conn[r->nconn++] = (relay_conn){.down = down, .up = up};
}

static void *relay_run(void *arg)
{
    relay *r = arg;
    char buf[65536];
    while (!atomic_load(&r->stop)) {
        struct pollfd pfd[2 + 2 * RELAY_MAX_CONNS];
        int n = 0;
        pfd[n++] = (struct pollfd){.fd = r->listen_fd, .events = POLLIN};
        pfd[n++] = (struct pollfd){.fd = r->wake[0], .events = POLLIN};
        for (int i = 0; i < r->nconn; i++) {
            pfd[n++] = (struct pollfd){.fd = r->conn[i].down, .events = POLLIN};
            pfd[n++] = (struct pollfd){.fd = r->conn[i].up, .events = POLLIN};
        }
        if (poll(pfd, (nfds_t)n, -1) < 0) continue;
        if (pfd[1].revents) break;
        int nconn = r->nconn;
        for (int i = nconn - 1; i >= 0; i--) {
            short from_down = pfd[2 + 2 * i].revents, from_up = pfd[3 + 2 * i].revents;
            bool ok = true;
            if (from_down) {
                ssize_t got = recv(r->conn[i].down, buf, sizeof(buf), 0);
                ok = got > 0 && send_all(r->conn[i].up, buf, (size_t)got);
            }
            if (ok && from_up) {
                ssize_t got = recv(r->conn[i].up, buf, sizeof(buf), 0);
                ok = got > 0 && relay_down(&r->conn[i], buf, (size_t)got);
            }
            if (!ok) relay_drop(r, i);
        }
        if (pfd[0].revents) relay_accept(r);
    }
    while (r->nconn)
        relay_drop(r, 0);
    return NULL;
}

static void relay_start(relay *r, int target_port)
{
    memset(r, 0, sizeof(*r));
    r->target_port = target_port;
    r->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    cr_assert(r->listen_fd >= 0 && bind(r->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
              listen(r->listen_fd, 64) == 0 && getsockname(r->listen_fd, (struct sockaddr *)&sa, &sl) == 0);
    r->port = ntohs(sa.sin_port);
    cr_assert(pipe2(r->wake, O_CLOEXEC) == 0);
    cr_assert(pthread_create(&r->thread, NULL, relay_run, r) == 0);
}

static void relay_stop(relay *r)
{
    atomic_store(&r->stop, true);
    cr_assert(write(r->wake[1], "x", 1) == 1);
    pthread_join(r->thread, NULL);
    close(r->listen_fd);
    close(r->wake[0]);
    close(r->wake[1]);
}

/* A proxy whose upstream is the relay in front of env.redis. */
static vt_proxy *proxy_behind(const relay *r)
{
    char upstream[32];
    snprintf(upstream, sizeof(upstream), "127.0.0.1:%d", r->port);
    vt_proxy *p = vt_proxy_start_upstream(upstream, NULL);
    cr_assert(p != NULL, "verbproxy did not start");
    return p;
}

static bool log_contains(const vt_proxy *p, const char *needle)
{
    char *log = vt_proxy_log(p);
    bool found = strstr(log, needle) != NULL;
    free(log);
    return found;
}

static void stop_proxy(vt_proxy *p)
{
    cr_assert(vt_proxy_alive(p), "verbproxy died");
    vt_proxy_free(p);
}

Test(reply_types, the_relay_breaks_exactly_the_marked_reply)
{
    /* The other stories lean on it: through the relay, without the proxy,
     * the marked status comes with an unknown type byte, all else as is. */
    relay r;
    relay_start(&r, env.redis->port);
    int fd = vt_must_sock(r.port);
    vt_buf req = {0}, got = {0};
    vt_buf_cmd(&req, "SET", "rt:k", "CORRUPT-ME", NULL);
    vt_buf_cmd(&req, "EVAL", CORRUPT_SCRIPT, "0", NULL);
    vt_buf_cmd(&req, "GET", "rt:k", NULL);
    vt_buf_cmd(&req, "PING", END_MARK, NULL);
    cr_assert(vt_sock_send_buf(fd, &req));
    read_case(fd, &got);
    vt_assert_bytes(&got, "+OK\r\n" CORRUPT_TO "$10\r\nCORRUPT-ME\r\n" END_REPLY);
    vt_buf_free(&req);
    vt_buf_free(&got);
    close(fd);
    relay_stop(&r);
}

Test(reply_types, a_reply_that_is_not_resp_makes_an_own_connection_a_byte_pipe)
{
    VT_SKIP_IF_DIRECT();
    relay r;
    relay_start(&r, env.redis->port);
    vt_proxy *p = proxy_behind(&r);
    vt_bystanders *b = vt_must_start_bystanders(p->port, 4, 24);

    /* What a client gets through the relay alone is what it must get
     * through the proxy. SELECT 1 gives it a connection of its own. */
    int direct = vt_must_sock(r.port), proxied = vt_must_sock(p->port);
    vt_buf req = {0};
    vt_buf_cmd(&req, "SELECT", "1", NULL);
    vt_buf_cmd(&req, "SET", "rt:k", "v", NULL);
    vt_buf_cmd(&req, "EVAL", CORRUPT_SCRIPT, "0", NULL);
    vt_buf_cmd(&req, "GET", "rt:k", NULL);
    same_bytes(direct, proxied, &req, "a broken reply, then more pipelined");
    vt_buf_reset(&req);
    /* From here on the proxy only passes bytes: a virtual verb and VERBPROXY
     * reach Redis as they are, as without the proxy. */
    vt_buf_cmd(&req, "ZTICK", "rt:z", "1", "2", NULL);
    vt_buf_cmd(&req, "VERBPROXY", "STATS", NULL);
    vt_buf_cmd(&req, "EVAL", CORRUPT_SCRIPT, "0", NULL);
    vt_buf_cmd(&req, "GET", "rt:k", NULL);
    same_bytes(direct, proxied, &req, "the rest of the session");
    vt_buf_free(&req);
    close(direct);
    close(proxied);
    cr_assert(log_contains(p, "the rest of the session is a byte pipe"), "no warning in the proxy's log");

    cr_assert(vt_bystanders_wait(b, 24, VT_READ_DEADLINE_MS), "the bystanders stopped being served");
    vt_assert_bystanders_ok(b);
    stop_proxy(p);
    relay_stop(&r);
}

Test(reply_types, a_reply_that_is_not_resp_gives_nobody_else_a_wrong_reply)
{
    VT_SKIP_IF_DIRECT();
    relay r;
    relay_start(&r, env.redis->port);
    vt_proxy *p = proxy_behind(&r);
    bool shared = vt_proxy_shared_upstreams(p) > 0;
    vt_bystanders *b = vt_must_start_bystanders(p->port, 8, 24);

    /* A client without connection state: on the shared connection, unless
     * every client has its own. */
    int fd = vt_must_sock(p->port);
    vt_buf req = {0}, got = {0};
    vt_buf_cmd(&req, "EVAL", CORRUPT_SCRIPT, "0", NULL);
    vt_buf_cmd(&req, "PING", END_MARK, NULL);
    cr_assert(vt_sock_send_buf(fd, &req));
    if (shared) {
        /* The shared connection is lost: this client is closed without a
         * reply, and so is every client owed one on it; none gets a wrong
         * reply. */
        cr_assert(vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS), "not closed");
        vt_assert_bytes(&got, "");
        cr_assert(log_contains(p, "closing the shared connection"), "no warning in the proxy's log");
        char why[512] = "";
        vt_bystanders_stop(b, NULL, why, sizeof(why));
        cr_assert(strstr(why, "wrong") == NULL && strstr(why, "more replies") == NULL,
                  "a bystander got a wrong reply: %s", why);
        /* Clients after it are served on a new shared connection. */
        b = vt_bystanders_start(p->port, 4);
        cr_assert(b != NULL);
    } else {
        read_case(fd, &got);
        vt_assert_bytes(&got, CORRUPT_TO END_REPLY);
    }
    cr_assert(vt_bystanders_wait(b, 24, VT_READ_DEADLINE_MS), "the bystanders are not served");
    vt_assert_bystanders_ok(b);
    vt_buf_free(&req);
    vt_buf_free(&got);
    close(fd);
    stop_proxy(p);
    relay_stop(&r);
}

Test(reply_types, a_proxy_reply_behind_one_that_is_not_resp_closes_the_client)
{
    /* A reply the proxy makes itself (a verb's argument error) waiting
     * behind Redis's could not be placed in a byte pipe: the client gets
     * the replies framed before, then a close, never a misplaced reply. */
    VT_SKIP_IF_DIRECT();
    relay r;
    relay_start(&r, env.redis->port);
    vt_proxy *p = proxy_behind(&r);
    int fd = vt_must_sock(p->port);
    vt_buf req = {0}, got = {0};
    vt_buf_cmd(&req, "SELECT", "1", NULL);
    vt_buf_cmd(&req, "PING", END_MARK, NULL);
    vt_exchange(fd, &req, "+OK\r\n" END_REPLY);
    /* The broken reply comes only once BLPOP is released, when the proxy
     * has long read the verb behind it. */
    vt_buf_cmd(&req, "BLPOP", "rt:q", "0", NULL);
    vt_buf_cmd(&req, "EVAL", CORRUPT_SCRIPT, "0", NULL);
    vt_buf_cmd(&req, "ZTICK", "rt:z", NULL);
    cr_assert(vt_sock_send_buf(fd, &req));
    cr_assert(vt_wait_until_blocked(env.redis->port, 1, VT_READ_DEADLINE_MS), "BLPOP never blocked");
    redisContext *pusher = vt_must_connect(env.redis->port);
    redisReply *rep = vt_cmd(pusher, "SELECT 1");
    vt_assert_status(rep, "OK");
    freeReplyObject(rep);
    rep = vt_cmd(pusher, "RPUSH rt:q job");
    vt_assert_int(rep, 1);
    freeReplyObject(rep);
    redisFree(pusher);
    cr_assert(vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS), "not closed: \"%s\"", vt_buf_escaped(&got));
    vt_assert_bytes(&got, "*2\r\n$4\r\nrt:q\r\n$3\r\njob\r\n");
    cr_assert(log_contains(p, "closing the client's connection"), "no warning in the proxy's log");
    vt_buf_free(&req);
    vt_buf_free(&got);
    close(fd);
    stop_proxy(p);
    relay_stop(&r);
}

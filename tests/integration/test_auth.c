/* test_auth.c - a password-protected Redis behind the proxy.
 *
 * The proxy does not authenticate on its own: each client authenticates its
 * own upstream connection with AUTH or HELLO ... AUTH, exactly as it would
 * talking to Redis, and one client's AUTH does not open the door for another.
 *
 * Redis applies limits of its own to a connection that has not
 * authenticated: 10 arguments, 16384-byte bulks, and (Redis 7.0.15 as
 * Debian ships it, 7.2.8, 7.4.3: the CVE-2025-21605 fix) about 1 KiB of
 * replies not yet written. A shared upstream connection without
 * credentials would meet them for everyone on it: a client that has not
 * authenticated leaves it for a connection of its own at its first command,
 * where those limits are its alone, and the proxy applies the request
 * limits itself too. Those stories run with "strangers", clients that
 * never authenticate and check every -NOAUTH they are owed, since the
 * usual bystanders cannot work without the password. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#include "tests/support/checks.h"

#define PASSWORD "s3cret-pass"

static vt_env env;

static void setup(void)
{
    vt_redis_opts ro = {.requirepass = PASSWORD};
    vt_env_start(&env, &ro, NULL);
}

static void teardown(void)
{
    vt_env_stop(&env);
}

TestSuite(auth, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

Test(auth, noauth_before_auth_then_ok_after)
{
    redisContext *c = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(c, "GET au:k");
    vt_assert_error(r, "NOAUTH Authentication required.");
    freeReplyObject(r);

    r = vt_cmd(c, "AUTH wrong-pass");
    vt_assert_error(r, "WRONGPASS invalid username-password pair or user is disabled.");
    freeReplyObject(r);

    r = vt_cmd(c, "AUTH %s", PASSWORD);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(c, "SET au:k v");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(c, "GET au:k");
    vt_assert_str(r, "v");
    freeReplyObject(r);

    /* another client is still a stranger */
    redisContext *other = vt_must_connect(env.proxy->port);
    r = vt_cmd(other, "GET au:k");
    vt_assert_error(r, "NOAUTH");
    freeReplyObject(r);
    r = vt_cmd(other, "AUTH default %s", PASSWORD);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(other, "GET au:k");
    vt_assert_str(r, "v");
    freeReplyObject(r);

    redisFree(other);
    redisFree(c);
}

Test(auth, hello_3_with_auth_authenticates_and_switches_protocol)
{
    int fd = vt_must_sock(env.proxy->port);
    vt_buf got = {0};

    cr_assert(vt_sock_send_str(fd, "HELLO 3 AUTH default not-it\r\n"));
    vt_expect_bytes(fd, &got, "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
    vt_buf_reset(&got);

    cr_assert(vt_sock_send_str(fd, "HELLO 3 AUTH default " PASSWORD "\r\n"));
    cr_assert(vt_sock_read_replies(fd, &got, 1, VT_READ_DEADLINE_MS), "no HELLO reply; got \"%s\"",
              vt_buf_escaped(&got));
    cr_assert(got.data[0] == '%' && vt_buf_contains(&got, "$5\r\nproto\r\n:3\r\n"),
              "HELLO 3 should answer a RESP3 map, got \"%s\"", vt_buf_escaped(&got));
    vt_buf_reset(&got);

    cr_assert(vt_sock_send_str(fd, "PING\r\nGET au:none\r\n"));
    vt_expect_bytes(fd, &got, "+PONG\r\n_\r\n");
    vt_buf_free(&got);
    close(fd);
}

/* ---- strangers: unauthenticated bystanders on the shared connection ---- */

/* Each keeps at most 16 -NOAUTH answers (560 bytes) in flight: under the
 * 1 KiB Redis allows a connection that has not authenticated. */
#define STRANGERS 4
#define STRANGER_BATCH 16
#define NOAUTH_LINE "-NOAUTH Authentication required.\r\n"

typedef struct stranger {
    pthread_t thread;
    int fd;
    atomic_llong checked;
    atomic_int failed;
    char why[256];
} stranger;

static stranger strangers[STRANGERS];
static atomic_int strangers_stop;

/* Pipelines batches of PING and GET, each answered -NOAUTH, until told to
 * stop; the first wrong, missing or late reply, or a close, ends it. */
static void *stranger_run(void *arg)
{
    stranger *s = arg;
    vt_buf req = {0}, want = {0}, got = {0};
    for (int i = 0; i < STRANGER_BATCH; i++) {
        vt_buf_cmd(&req, i % 2 ? "GET" : "PING", i % 2 ? "sa:k" : NULL, NULL);
        vt_buf_append_str(&want, NOAUTH_LINE);
    }
    while (!atomic_load(&strangers_stop)) {
        vt_buf_reset(&got);
        if (!vt_sock_send_buf(s->fd, &req)) {
            snprintf(s->why, sizeof(s->why), "send failed");
            break;
        }
        vt_sock_read_len(s->fd, &got, want.len, VT_READ_DEADLINE_MS);
        if (got.len != want.len || memcmp(got.data, want.data, want.len) != 0) {
            snprintf(s->why, sizeof(s->why), "after %lld replies got %zu bytes%s%s",
                     (long long)atomic_load(&s->checked), got.len, got.eof ? ", then EOF" : "",
                     got.len == want.len ? " (wrong)" : "");
            break;
        }
        atomic_fetch_add(&s->checked, STRANGER_BATCH);
    }
    if (s->why[0]) atomic_store(&s->failed, 1);
    vt_buf_free(&req);
    vt_buf_free(&want);
    vt_buf_free(&got);
    return NULL;
}

static void strangers_start(void)
{
    atomic_store(&strangers_stop, 0);
    for (int i = 0; i < STRANGERS; i++) {
        stranger *s = &strangers[i];
        memset(s, 0, sizeof(*s));
        s->fd = vt_must_sock(env.proxy->port);
        cr_assert(pthread_create(&s->thread, NULL, stranger_run, s) == 0);
    }
}

typedef struct {
    long long more;
    long long from[STRANGERS];
} strangers_goal;

static bool strangers_went_on(void *arg)
{
    strangers_goal *g = arg;
    for (int i = 0; i < STRANGERS; i++)
        if (atomic_load(&strangers[i].failed)) return true; /* no use waiting */
    for (int i = 0; i < STRANGERS; i++)
        if (atomic_load(&strangers[i].checked) < g->from[i] + g->more) return false;
    return true;
}

/* Every stranger had `more` replies checked from now on (false once one
 * failed). */
static bool strangers_wait(long long more)
{
    strangers_goal g = {.more = more};
    for (int i = 0; i < STRANGERS; i++)
        g.from[i] = atomic_load(&strangers[i].checked);
    if (!vt_wait_until(strangers_went_on, &g, VT_READ_DEADLINE_MS)) return false;
    for (int i = 0; i < STRANGERS; i++)
        if (atomic_load(&strangers[i].failed)) {
            fprintf(stderr, "stranger %d: %s\n", i, strangers[i].why);
            return false;
        }
    return true;
}

static void strangers_assert_ok(void)
{
    atomic_store(&strangers_stop, 1);
    for (int i = 0; i < STRANGERS; i++) {
        pthread_join(strangers[i].thread, NULL);
        close(strangers[i].fd);
    }
    for (int i = 0; i < STRANGERS; i++)
        cr_assert(!strangers[i].failed && strangers[i].checked > 0, "stranger %d suffered: %s", i,
                  strangers[i].why);
}

/* Proxy only, on a shared connection: Redis never closed it (on own
 * connections Redis closes the sender's, which is right). */
static void expect_shared_connection_kept(void)
{
    if (vt_direct_mode() || vt_proxy_shared_upstreams(env.proxy) == 0) return;
    long long lost = vt_proxy_stat(env.proxy->port, "upstream_lost");
    cr_assert_eq(lost, 0, "Redis closed %lld upstream connection(s): the shared one went", lost);
}

static void expect_error_then_close(const char *req, size_t len, const char *want)
{
    vt_expect_error_then_close(env.proxy->port, req, len, want);
}

Test(auth, an_unauthenticated_request_of_11_arguments_closes_only_its_sender)
{
    strangers_start();
    cr_assert(strangers_wait(64), "the strangers did not get going");
    vt_buf req = {0};
    vt_buf_cmd(&req, "PING", NULL);
    vt_buf_cmd(&req, "RPUSH", "sa:l", "1", "2", "3", "4", "5", "6", "7", "8", "9", NULL);
    expect_error_then_close(req.data, req.len,
                            NOAUTH_LINE "-ERR Protocol error: unauthenticated multibulk length\r\n");
    /* Ten are fine: Redis's NOAUTH, and the connection goes on. */
    int fd = vt_must_sock(env.proxy->port);
    vt_buf_reset(&req);
    vt_buf_cmd(&req, "RPUSH", "sa:l", "1", "2", "3", "4", "5", "6", "7", "8", NULL);
    vt_buf_cmd(&req, "PING", NULL);
    vt_exchange(fd, &req, NOAUTH_LINE NOAUTH_LINE);
    close(fd);
    cr_assert(strangers_wait(64), "the strangers stopped being served");
    strangers_assert_ok();
    expect_shared_connection_kept();
    vt_buf_free(&req);
}

/* A client of Redis's, authenticated with the password. */
static redisContext *redis_admin(void)
{
    redisContext *admin = vt_must_connect(env.redis->port);
    redisReply *r = vt_cmd(admin, "AUTH %s", PASSWORD);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    return admin;
}

/* No EVALSHA and no SCRIPT LOAD reached Redis (INFO commandstats). */
static void expect_no_verb_reached_redis(void)
{
    redisContext *admin = redis_admin();
    redisReply *r = vt_cmd(admin, "INFO commandstats");
    cr_assert(r->type == REDIS_REPLY_STRING);
    cr_assert(!strstr(r->str, "cmdstat_evalsha") && !strstr(r->str, "cmdstat_script"),
              "a verb reached Redis:\n%s", r->str);
    freeReplyObject(r);
    redisFree(admin);
}

/* A verb becomes EVALSHA sha numkeys ...: two elements longer than what the
 * client sent, so a 9-element QACK would meet Redis's pre-auth limit as an
 * 11-element request, and Redis would close the connection. Redis answers
 * an EVALSHA -NOAUTH (after an arity error, before a bad value): so does
 * the proxy, and nothing goes upstream. */
Test(auth, an_unauthenticated_verb_gets_noauth_and_never_reaches_redis)
{
    /* (It is learned from the shared connection that Redis requires AUTH:
     * with shared-upstreams 0 the EVALSHA goes to Redis, which judges it,
     * see docs/shared-connections.md#before-auth.) */
    VT_SKIP_IF_DIRECT();
    if (vt_proxy_shared_upstreams(env.proxy) == 0) cr_skip_test("a shared connection's story");
    strangers_start();
    cr_assert(strangers_wait(64), "the strangers did not get going");
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    vt_buf_cmd(&req, "QACK", "sa:lease", "m1", "m2", "m3", "m4", "m5", "m6", "m7", NULL);
    vt_buf_cmd(&req, "LOCKRENEW", "sa:lock", "tok", "not-a-number", NULL);
    vt_buf_cmd(&req, "LOCKRENEW", "sa:lock", NULL);
    vt_buf_cmd(&req, "PING", NULL);
    vt_exchange(fd, &req,
                NOAUTH_LINE NOAUTH_LINE
                "-ERR wrong number of arguments for 'lockrenew' command\r\n" NOAUTH_LINE);
    close(fd);
    cr_assert(strangers_wait(64), "the strangers stopped being served");
    strangers_assert_ok();
    expect_shared_connection_kept();
    vt_buf_free(&req);
    expect_no_verb_reached_redis();
}

Test(auth, an_unauthenticated_bulk_of_16385_bytes_closes_only_its_sender)
{
    strangers_start();
    cr_assert(strangers_wait(64), "the strangers did not get going");
    /* Redis judges the header; the payload is sent all the same, as a
     * client would (Redis closes with it unread: the reply still arrives). */
    vt_buf big = {0};
    char *value = malloc(16385);
    memset(value, 'v', 16385);
    vt_buf_cmd(&big, "PING", NULL);
    const char *bargv[] = {"ECHO", value};
    const size_t blens[] = {4, 16385};
    vt_buf_cmd_argv(&big, 2, bargv, blens);
    expect_error_then_close(big.data, big.len,
                            NOAUTH_LINE "-ERR Protocol error: unauthenticated bulk length\r\n");
    vt_buf_free(&big);
    /* 16384 bytes are fine. */
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    const char *argv[] = {"ECHO", value};
    const size_t lens[] = {4, 16384};
    vt_buf_cmd_argv(&req, 2, argv, lens);
    vt_buf_cmd(&req, "PING", NULL);
    vt_exchange(fd, &req, NOAUTH_LINE NOAUTH_LINE);
    free(value);
    close(fd);
    cr_assert(strangers_wait(64), "the strangers stopped being served");
    strangers_assert_ok();
    expect_shared_connection_kept();
    vt_buf_free(&req);
}

/* ---- Redis's output limit before AUTH ---- */

/* Redis with the CVE-2025-21605 fix closes a connection that has not
 * authenticated once replies past its reply buffer wait unwritten, and
 * writes none of them (checked with redis-server alone). Replies are
 * written once per event loop, so a burst of requests read at once is what
 * meets it; the buffer is 1 KiB (CLIENT LIST's rbs) once Redis's cron has
 * shrunk it, a second or so into a connection whose replies are small. */
static bool reply_buffers_shrunk(void *arg)
{
    redisContext *admin = arg;
    redisReply *r = redisCommand(admin, "CLIENT LIST");
    bool shrunk = r && r->type == REDIS_REPLY_STRING;
    /* (Redis 6.2 neither shrinks them nor shows them: nothing to wait for) */
    if (shrunk && !strstr(r->str, " rbs=")) {
        freeReplyObject(r);
        return true;
    }
    for (char *line = shrunk ? r->str : NULL; line && *line && shrunk;) {
        char *end = strchr(line, '\n');
        if (end) *end = '\0';
        /* (the admin's own connection, which asks, is not one of them) */
        /* 1 KiB, as the allocator rounds it: 1024 with jemalloc, 1032
         * with a libc-malloc build (not the 16 KiB it starts with) */
        const char *rbs = strstr(line, " rbs=");
        if (!strstr(line, "cmd=client|list") && (!rbs || atol(rbs + 5) > 2048)) shrunk = false;
        line = end ? end + 1 : NULL;
    }
    freeReplyObject(r);
    return shrunk;
}

static void wait_for_small_reply_buffers(void)
{
    redisContext *admin = redis_admin();
    cr_assert(vt_wait_until(reply_buffers_shrunk, admin, 15000),
              "Redis did not shrink the connections' reply buffers to 1 KiB");
    redisFree(admin);
}

#define BURSTERS 4

/* Several clients that have not authenticated, each sending 16 requests at
 * once (560 bytes of -NOAUTH, under the limit), arrive at the proxy
 * together: SIGSTOP holds it while they send. On one shared connection
 * their 64 requests would reach Redis in one read, and 2,240 bytes of
 * -NOAUTH would get it closed, and every one of them with it. Each is
 * answered as Redis alone answers it. */
Test(auth, unauthenticated_clients_answered_together_keep_their_connections)
{
    int fd[BURSTERS];
    vt_buf req = {0};
    for (int i = 0; i < BURSTERS; i++) {
        fd[i] = vt_must_sock(env.proxy->port);
        vt_buf_append_str(&req, "PING\r\n");
        vt_exchange(fd[i], &req, NOAUTH_LINE);
    }
    wait_for_small_reply_buffers();
    if (!vt_direct_mode()) cr_assert_eq(kill(env.proxy->pid, SIGSTOP), 0);
    vt_buf want = {0};
    for (int i = 0; i < STRANGER_BATCH; i++) {
        vt_buf_cmd(&req, i % 2 ? "GET" : "PING", i % 2 ? "sa:k" : NULL, NULL);
        vt_buf_append_str(&want, NOAUTH_LINE);
    }
    for (int i = 0; i < BURSTERS; i++)
        cr_assert(vt_sock_send_buf(fd[i], &req), "send failed");
    if (!vt_direct_mode()) cr_assert_eq(kill(env.proxy->pid, SIGCONT), 0);
    vt_buf_reset(&req);
    for (int i = 0; i < BURSTERS; i++) {
        vt_buf got = {0};
        vt_sock_read_len(fd[i], &got, want.len, VT_READ_DEADLINE_MS);
        cr_assert(got.len == want.len && memcmp(got.data, want.data, want.len) == 0,
                  "client %d: %zu bytes of %zu%s", i, got.len, want.len, got.eof ? ", then EOF" : "");
        vt_buf_free(&got);
        vt_buf_append_str(&req, "PING\r\n");
        vt_exchange(fd[i], &req, NOAUTH_LINE);
        close(fd[i]);
    }
    if (!vt_direct_mode())
        cr_assert_eq(vt_proxy_stat(env.proxy->port, "upstream_lost"), 0,
                     "Redis closed an upstream connection");
    vt_buf_free(&req);
    vt_buf_free(&want);
}

/* A burst of 200 PINGs (7,000 bytes of -NOAUTH) from the client on `fd`,
 * which has not authenticated: true if the connection was closed with
 * nothing written (the CVE-2025-21605 fix); else the 200 replies must all
 * come, and it stays open. */
static bool burst_closes(int fd)
{
    vt_buf req = {0}, got = {0}, want = {0};
    for (int i = 0; i < 200; i++) {
        vt_buf_append_str(&req, "PING\r\n");
        vt_buf_append_str(&want, NOAUTH_LINE);
    }
    cr_assert(vt_sock_send_buf(fd, &req));
    vt_sock_read_len(fd, &got, want.len, VT_READ_DEADLINE_MS);
    bool closed = got.eof && got.len == 0;
    cr_assert(closed || (got.len == want.len && memcmp(got.data, want.data, want.len) == 0),
              "neither closed with nothing written nor every -NOAUTH: %zu bytes of %zu%s", got.len, want.len,
              got.eof ? ", then EOF" : "");
    vt_buf_free(&req);
    vt_buf_free(&got);
    vt_buf_free(&want);
    return closed;
}

/* One client sending 200 requests at once (7,000 bytes of -NOAUTH) is
 * answered as Redis alone answers the same from a client of its own: with
 * the CVE-2025-21605 fix (Redis 7.0.15 as Debian ships it, 7.2.8, 7.4.3)
 * closed, with none of them answered; before it, every one answered. The
 * strangers, who never have more than 560 bytes owed, are served
 * throughout. */
Test(auth, an_unauthenticated_burst_over_the_output_limit_closes_only_its_sender)
{
    strangers_start();
    cr_assert(strangers_wait(64), "the strangers did not get going");
    int alone = vt_must_sock(env.redis->port);
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    vt_buf_append_str(&req, "PING\r\n");
    vt_exchange(alone, &req, NOAUTH_LINE);
    vt_buf_append_str(&req, "PING\r\n");
    vt_exchange(fd, &req, NOAUTH_LINE);
    wait_for_small_reply_buffers();
    bool redis_closes = burst_closes(alone);
    close(alone);
    cr_assert_eq(burst_closes(fd), redis_closes, "Redis alone %s the sender; through the proxy it was%s",
                 redis_closes ? "closes" : "answers", redis_closes ? " not closed" : " closed");
    close(fd);
    cr_assert(strangers_wait(64), "the strangers stopped being served");
    strangers_assert_ok();
    if (!vt_direct_mode())
        cr_assert_eq(vt_proxy_stat(env.proxy->port, "upstream_lost"), redis_closes ? 1 : 0,
                     "Redis should have closed the sender's connection, and only that");
    vt_buf_free(&req);
}

/* QUIT is answered as Redis answers it, without a connection of its own
 * (every other command of a client that has not authenticated takes one,
 * but the proxy's own VERBPROXY STATS, which asks here). */
Test(auth, quit_before_auth_needs_no_connection_of_its_own)
{
    vt_expect_error_then_close(env.proxy->port, "QUIT\r\n", 6, "+OK\r\n");
    vt_expect_error_then_close(env.proxy->port, "PING\r\nQUIT\r\n", 12, NOAUTH_LINE "+OK\r\n");
    if (vt_direct_mode() || vt_proxy_shared_upstreams(env.proxy) == 0) return;
    cr_assert_eq(vt_proxy_stat(env.proxy->port, "clients_pinned"), 1,
                 "only the client that sent PING moved (%lld)",
                 vt_proxy_stat(env.proxy->port, "clients_pinned"));
}

Test(auth, select_0_before_auth_is_refused_as_by_redis)
{
    strangers_start();
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    vt_buf_append_str(&req, "SELECT 0\r\nPING\r\n");
    vt_exchange(fd, &req, NOAUTH_LINE NOAUTH_LINE);
    vt_buf_append_str(&req, "AUTH " PASSWORD "\r\nSELECT 0\r\nPING\r\n");
    vt_exchange(fd, &req, "+OK\r\n+OK\r\n+PONG\r\n");
    close(fd);
    cr_assert(strangers_wait(64), "the strangers stopped being served");
    strangers_assert_ok();
    expect_shared_connection_kept();
    vt_buf_free(&req);
}

/* Once Redis stops asking for a password, the limits go too: the first
 * reply that is not -NOAUTH tells the proxy. */
Test(auth, after_the_password_is_removed_the_limits_go)
{
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    vt_buf_append_str(&req, "PING\r\n");
    vt_exchange(fd, &req, NOAUTH_LINE);

    redisContext *admin = redis_admin();
    redisReply *r = vt_cmd(admin, "CONFIG SET requirepass %s", "");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    redisFree(admin);

    vt_buf_append_str(&req, "PING\r\n");
    vt_exchange(fd, &req, "+PONG\r\n");
    vt_buf_cmd(&req, "RPUSH", "sa:free", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", NULL);
    vt_buf_cmd(&req, "SELECT", "0", NULL);
    vt_exchange(fd, &req, ":10\r\n+OK\r\n");
    vt_buf_free(&req);
    close(fd);
}

static bool proxy_moved_one(void *arg)
{
    (void)arg;
    return vt_proxy_stat(env.proxy->port, "clients_pinned") >= 1;
}

/* A first request over 64 KiB that arrives in pieces moves its client for
 * streaming (client_stream_partial), not at client_may_share: it has not
 * authenticated all the same. Its verbs are answered -NOAUTH as every
 * unauthenticated client's are; before, a 9-element QACK went to Redis as
 * an 11-element EVALSHA, which Redis closed the connection for. */
Test(auth, an_unauthenticated_client_moved_by_a_streamed_request_still_gets_noauth_for_verbs)
{
    VT_SKIP_IF_DIRECT(); /* (Redis alone has no QACK) */
    if (vt_proxy_shared_upstreams(env.proxy) == 0) cr_skip_test("a shared connection's story");
    vt_buf big = {0};
    char *value = malloc(16000);
    memset(value, 'v', 16000);
    const char *argv[] = {"RPUSH", "sa:big", value, value, value, value, value, value, value, value};
    size_t lens[10] = {5, 6};
    for (int i = 2; i < 10; i++)
        lens[i] = 16000;
    vt_buf_cmd_argv(&big, 10, argv, lens);
    free(value);
    const size_t first = 70000; /* past the 64 KiB at which a request streams */
    cr_assert(big.len > first);

    int fd = vt_must_sock(env.proxy->port);
    cr_assert(vt_sock_send(fd, big.data, first), "send failed");
    cr_assert(vt_wait_until(proxy_moved_one, NULL, 10000), "the streamed request did not move its client");
    vt_buf req = {0};
    vt_buf_append(&req, big.data + first, big.len - first);
    vt_buf_cmd(&req, "QACK", "sa:lease", "m1", "m2", "m3", "m4", "m5", "m6", "m7", NULL);
    vt_buf_cmd(&req, "PING", NULL);
    vt_exchange(fd, &req, NOAUTH_LINE NOAUTH_LINE NOAUTH_LINE);
    close(fd);
    vt_buf_free(&req);
    vt_buf_free(&big);

    expect_no_verb_reached_redis();
}

/* RESET makes Redis take the connection for the default user again, which
 * needs the password: the client is back before AUTH, and its verbs get
 * -NOAUTH from the proxy again (before, a 9-element QACK went to Redis as
 * an 11-element EVALSHA and Redis closed the connection). A reply to what
 * it sent before the RESET ($-1 to the GET here, answered after the RESET
 * was sent) says nothing about whether Redis still requires AUTH. */
Test(auth, after_auth_and_reset_verbs_get_noauth_again)
{
    VT_SKIP_IF_DIRECT(); /* (Redis alone has no QACK) */
    if (vt_proxy_shared_upstreams(env.proxy) == 0) cr_skip_test("learned from a shared connection");
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    vt_buf_cmd(&req, "AUTH", PASSWORD, NULL);
    vt_buf_cmd(&req, "GET", "sa:none", NULL);
    vt_buf_cmd(&req, "RESET", NULL);
    vt_exchange(fd, &req, "+OK\r\n$-1\r\n+RESET\r\n");
    vt_buf_cmd(&req, "QACK", "sa:lease", "m1", "m2", "m3", "m4", "m5", "m6", "m7", NULL);
    vt_buf_cmd(&req, "PING", NULL);
    vt_exchange(fd, &req, NOAUTH_LINE NOAUTH_LINE);
    /* And AUTH again lets it through. */
    vt_buf_cmd(&req, "AUTH", PASSWORD, NULL);
    vt_buf_cmd(&req, "QACK", "sa:lease", "m1", "m2", "m3", "m4", "m5", "m6", "m7", NULL);
    vt_exchange(fd, &req, "+OK\r\n:0\r\n");
    close(fd);
    vt_buf_free(&req);
}

/* ---- a password set while clients are connected ---- */

/* A new client's GET: answered -NOAUTH? */
static bool a_new_client_gets_noauth(void *arg)
{
    bool want = *(bool *)arg;
    int fd = vt_must_sock(env.proxy->port);
    vt_buf got = {0};
    bool noauth = vt_sock_send_str(fd, "GET au:later\r\n") &&
                  vt_sock_read_replies(fd, &got, 1, VT_READ_DEADLINE_MS) && vt_buf_contains(&got, "-NOAUTH");
    vt_buf_free(&got);
    close(fd);
    return noauth == want;
}

/* A new client is let in (its GET answered), and on the shared connection:
 * it did not move (clients_pinned did not grow meanwhile). */
static bool a_new_client_is_let_in_and_shares(void *arg)
{
    (void)arg;
    long long pinned = vt_direct_mode() ? 0 : vt_proxy_stat(env.proxy->port, "clients_pinned");
    bool noauth = false;
    if (!a_new_client_gets_noauth(&noauth)) return false;
    return vt_direct_mode() || vt_proxy_stat(env.proxy->port, "clients_pinned") == pinned;
}

static void admin_set_password(redisContext *admin, const char *pass)
{
    redisReply *r = vt_cmd(admin, "CONFIG SET requirepass %s", pass);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
}

/* Redis keeps a connection made while the default user needed no password
 * in when one is set later, and asks every connection made after for it.
 * The proxy's shared connection is one made before: a client that
 * connects after must still be asked, as Redis would ask it, and a client
 * connected before stays in. Set behind the proxy's back, that is known
 * within the proxy's 5 s probe; set through the proxy, before the reply to
 * the command after it. */
Test(auth, a_password_set_later_is_asked_of_the_clients_that_come_after)
{
    redisContext *admin = redis_admin();
    admin_set_password(admin, "");
    /* The shared connection is in (made now, or let in and RESET) */
    cr_assert(vt_wait_until(a_new_client_is_let_in_and_shares, NULL, 15000),
              "new clients were not let in on the shared connection after the password was removed");
    int before = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    vt_buf_append_str(&req, "SET au:later v\r\nPING\r\n");
    vt_exchange(before, &req, "+OK\r\n+PONG\r\n");

    admin_set_password(admin, PASSWORD); /* behind the proxy's back */
    bool noauth = true;
    cr_assert(vt_wait_until(a_new_client_gets_noauth, &noauth, 15000),
              "clients connecting after the password was set are let in without it");
    vt_buf_append_str(&req, "GET au:later\r\n");
    vt_exchange(before, &req, "$1\r\nv\r\n"); /* in, as on Redis */

    admin_set_password(admin, "");
    noauth = false;
    cr_assert(vt_wait_until(a_new_client_gets_noauth, &noauth, 15000),
              "new clients are still asked for a password after it was removed");

    /* Through the proxy: known by the time the next reply arrives. */
    int setter = vt_must_sock(env.proxy->port);
    vt_buf_cmd(&req, "CONFIG", "SET", "requirepass", PASSWORD, NULL);
    vt_buf_cmd(&req, "PING", NULL);
    vt_exchange(setter, &req, "+OK\r\n+PONG\r\n");
    int after = vt_must_sock(env.proxy->port);
    vt_buf_append_str(&req, "GET au:later\r\n");
    vt_exchange(after, &req, NOAUTH_LINE);
    vt_buf_cmd(&req, "AUTH", PASSWORD, NULL);
    vt_buf_append_str(&req, "GET au:later\r\n");
    vt_exchange(after, &req, "+OK\r\n$1\r\nv\r\n");
    vt_buf_append_str(&req, "GET au:later\r\n");
    vt_exchange(before, &req, "$1\r\nv\r\n");
    close(after);
    close(setter);
    close(before);
    redisFree(admin);
    vt_buf_free(&req);
}

/* A shared connection made while Redis asked for a password never
 * authenticated: Redis lets it in while the password is gone, and would
 * shut it out again the moment one is set, with the clients that came
 * meanwhile, whose own connections Redis alone keeps in. The proxy RESETs
 * it once it sees Redis let it in (as a connection made now, it is in for
 * good): those clients stay in. */
Test(auth, clients_let_in_while_the_password_was_gone_stay_in_when_it_comes_back)
{
    redisContext *admin = redis_admin();
    int stranger = vt_must_sock(env.proxy->port); /* the shared connection, made now, before AUTH */
    vt_buf req = {0};
    vt_buf_append_str(&req, "PING\r\n");
    vt_exchange(stranger, &req, NOAUTH_LINE);
    admin_set_password(admin, "");
    cr_assert(vt_wait_until(a_new_client_is_let_in_and_shares, NULL, 15000),
              "new clients were not let in on the shared connection after the password was removed");
    int meanwhile = vt_must_sock(env.proxy->port);
    /* (PING: on the shared connection after what the proxy sent on it) */
    vt_buf_append_str(&req, "SET au:meanwhile v\r\nPING\r\n");
    vt_exchange(meanwhile, &req, "+OK\r\n+PONG\r\n");
    admin_set_password(admin, PASSWORD);
    vt_buf_append_str(&req, "GET au:meanwhile\r\n");
    vt_exchange(meanwhile, &req, "$1\r\nv\r\n"); /* in, as on Redis */
    vt_buf_append_str(&req, "PING\r\n");
    vt_exchange(stranger, &req, NOAUTH_LINE); /* out, as on Redis */
    if (!vt_direct_mode())
        cr_assert_eq(vt_proxy_stat(env.proxy->port, "upstream_lost"), 0, "an upstream connection was lost");
    close(meanwhile);
    close(stranger);
    redisFree(admin);
    vt_buf_free(&req);
}

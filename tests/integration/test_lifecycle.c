/* test_lifecycle.c - SIGTERM's drain, SIGQUIT and a second signal.
 *
 * A sidecar gets SIGTERM while its application may still be talking to it
 * (a classic sidecar: at the same time as the application) or after the
 * application stopped (a native sidecar). Either way no reply may be lost:
 * four clients pipeline 25,000 INCR/SET/GET each through the proxy, SIGTERM
 * comes in the middle, and every reply comes back in order while a new
 * client is still served; the proxy exits 0 once they leave. When clients
 * are still pipelining at shutdown-timeout, each gets exactly the replies
 * to what Redis ran: its counter in Redis equals the last INCR reply it
 * read. An idle client is closed at shutdown-timeout, not before. A second
 * SIGTERM, or SIGQUIT, ends it at once.
 *
 * With shutdown-min-drain (a classic sidecar whose application holds no
 * connection when both get SIGTERM, and opens one during its own shutdown
 * to flush its writes): a client that connects after the signal is served,
 * the proxy stays while it is connected, and exits 0 once it left and the
 * minimum passed; with no client at all it exits 0 after the minimum, and
 * shutdown-timeout wins over a longer minimum. A reload sets it. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "tests/support/checks.h"
#include "tests/support/http.h"
#include "tests/support/prom.h"

#define PIPE_CLIENTS 4
#define PIPE_COMMANDS 25000
#define PIPE_CHUNK 300 /* commands generated per refill of the send buffer */
#define PIPE_DEADLINE_MS 60000

static vt_env env;
static int mport;         /* start_min_drain's admin endpoint */
static char conf_dir[64]; /* min_drain_set_by_a_reload's --config file's */
static char conf_path[128];

static void start(const char *shutdown_timeout)
{
    VT_SKIP_IF_DIRECT();
    const char *args[] = {"--shutdown-timeout", shutdown_timeout, "--loglevel", "notice", NULL};
    vt_proxy_opts po = {.extra_args = args};
    vt_env_start(&env, NULL, &po);
}

/* With shutdown-min-drain and the admin endpoint (for /readyz). */
static void start_min_drain(const char *shutdown_timeout, const char *min_drain)
{
    VT_SKIP_IF_DIRECT();
    /* (The proxy keeps pointing at its arguments: static.) */
    static char mport_arg[16];
    static const char *args[] = {
        "--metrics-port",       mport_arg, "--loglevel", "notice", "--shutdown-timeout", NULL,
        "--shutdown-min-drain", NULL,      NULL};
    mport = vt_free_port();
    snprintf(mport_arg, sizeof(mport_arg), "%d", mport);
    args[5] = shutdown_timeout;
    args[7] = min_drain;
    vt_proxy_opts po = {.extra_args = args};
    vt_env_start(&env, NULL, &po);
}

static void teardown(void)
{
    /* A proxy that exited as the story wanted has pid 0: stop is a no-op. */
    vt_env_stop(&env);
    if (conf_dir[0]) {
        unlink(conf_path);
        rmdir(conf_dir);
        conf_dir[0] = '\0';
    }
}

TestSuite(lifecycle, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

/* ---- a pipelining client: INCR, SET, GET, each reply checked ---- */

typedef struct pipe_client {
    int idx;
    int port;
    long long total; /* commands to send; 0: until the proxy stops taking them */
    long long sent;  /* commands whose bytes were all written */
    long long got;   /* replies read and checked, in order */
    long long incrs; /* INCR replies (the counter's value in Redis, if nothing is lost) */
    bool closed;     /* the proxy closed the connection */
    bool failed;
    char why[512];
    pthread_t th;
} pipe_client;

static char run_tag[32];

static void pipe_fail(pipe_client *pc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pipe_fail(pipe_client *pc, const char *fmt, ...)
{
    if (pc->failed) return;
    pc->failed = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pc->why, sizeof(pc->why), fmt, ap);
    va_end(ap);
}

static void pipe_command(pipe_client *pc, long long n, vt_buf *out)
{
    char key[96], val[32];
    snprintf(val, sizeof(val), "v%lld", n);
    if (n % 3 == 0) {
        snprintf(key, sizeof(key), "lc:%s:%d:ctr", run_tag, pc->idx);
        vt_buf_cmd(out, "INCR", key, NULL);
    } else if (n % 3 == 1) {
        snprintf(key, sizeof(key), "lc:%s:%d:k%lld", run_tag, pc->idx, (n / 3) % 512);
        vt_buf_cmd(out, "SET", key, val, NULL);
    } else {
        snprintf(key, sizeof(key), "lc:%s:%d:k%lld", run_tag, pc->idx, (n / 3) % 512);
        vt_buf_cmd(out, "GET", key, NULL);
    }
}

/* Reply n, whole, at p: what Redis answers to command n. */
static void pipe_check(pipe_client *pc, long long n, const char *p, size_t len)
{
    char want[64];
    if (n % 3 == 0)
        snprintf(want, sizeof(want), ":%lld\r\n", pc->incrs + 1);
    else if (n % 3 == 1)
        snprintf(want, sizeof(want), "+OK\r\n");
    else {
        char v[32];
        int vl = snprintf(v, sizeof(v), "v%lld", n - 1);
        snprintf(want, sizeof(want), "$%d\r\n%s\r\n", vl, v);
    }
    if (len != strlen(want) || memcmp(p, want, len) != 0) {
        pipe_fail(pc, "client %d reply %lld: expected \"%s\", got \"%s\"", pc->idx, n,
                  vt_escape(want, strlen(want)), vt_escape(p, len));
        return;
    }
    if (n % 3 == 0) pc->incrs++;
}

static void *pipe_run(void *arg)
{
    pipe_client *pc = arg;
    int fd = vt_sock_tcp(pc->port);
    if (fd < 0) {
        pipe_fail(pc, "client %d could not connect", pc->idx);
        return NULL;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    vt_buf out = {0}, in = {0};
    size_t out_pos = 0;
    long long generated = 0;
    bool writing = true;
    long long deadline = vt_now_ms() + PIPE_DEADLINE_MS;
    /* `sent` counts commands fully written: the end of each command in
     * `out` is remembered by how many were generated before a refill. */
    long long out_first = 0; /* number of the first command in `out` */
    size_t ends[PIPE_CHUNK];
    int nends = 0;
    while (!pc->failed && vt_now_ms() < deadline) {
        if (writing && out_pos == out.len && (pc->total == 0 || generated < pc->total)) {
            vt_buf_reset(&out);
            out_pos = 0;
            out_first = generated;
            nends = 0;
            for (int i = 0; i < PIPE_CHUNK && (pc->total == 0 || generated < pc->total); i++) {
                pipe_command(pc, generated++, &out);
                ends[nends++] = out.len;
            }
        }
        struct pollfd p = {.fd = fd, .events = POLLIN | (writing && out_pos < out.len ? POLLOUT : 0)};
        if (poll(&p, 1, 100) < 0 && errno != EINTR) break;
        if (p.revents & POLLOUT) {
            ssize_t w = write(fd, out.data + out_pos, out.len - out_pos);
            if (w > 0) {
                out_pos += (size_t)w;
                while (pc->sent - out_first < nends && ends[pc->sent - out_first] <= out_pos)
                    pc->sent++;
            } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
                writing = false; /* closed under us: read what is left */
            }
        }
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            char buf[65536];
            ssize_t r = read(fd, buf, sizeof(buf));
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
                pc->closed = true;
                if (r < 0)
                    pipe_fail(pc, "client %d: read error %s (a reset: replies may be lost)", pc->idx,
                              strerror(errno));
                break;
            }
            if (r > 0) vt_buf_append(&in, buf, (size_t)r);
            size_t pos = 0;
            for (;;) {
                long long l = vt_resp_reply_len(in.data + pos, in.len - pos);
                if (l <= 0) break;
                pipe_check(pc, pc->got++, in.data + pos, (size_t)l);
                pos += (size_t)l;
            }
            vt_buf_consume(&in, pos);
        }
        if (pc->total && pc->got == pc->total) break; /* all answered: it leaves */
    }
    if (!pc->failed && in.len)
        pipe_fail(pc, "client %d: %zu bytes of an unfinished reply at the close", pc->idx, in.len);
    if (!pc->failed && !pc->closed && !(pc->total && pc->got == pc->total))
        pipe_fail(pc, "client %d: deadline with %lld replies of %lld sent", pc->idx, pc->got, pc->sent);
    close(fd);
    vt_buf_free(&out);
    vt_buf_free(&in);
    return NULL;
}

static void pipes_start(pipe_client *pcs, long long total)
{
    snprintf(run_tag, sizeof(run_tag), "%d-%lld", (int)getpid(), vt_now_ms());
    for (int i = 0; i < PIPE_CLIENTS; i++) {
        pcs[i] = (pipe_client){.idx = i, .port = env.proxy->port, .total = total};
        cr_assert_eq(pthread_create(&pcs[i].th, NULL, pipe_run, &pcs[i]), 0);
    }
}

typedef struct {
    pipe_client *pcs;
    long long want;
} progress;

static bool pipes_progressed(void *arg)
{
    progress *p = arg;
    for (int i = 0; i < PIPE_CLIENTS; i++)
        if (p->pcs[i].got < p->want) return false;
    return true;
}

static long long redis_counter(int idx)
{
    redisContext *admin = vt_must_connect(env.redis->port);
    char key[96];
    snprintf(key, sizeof(key), "lc:%s:%d:ctr", run_tag, idx);
    redisReply *r = vt_cmd(admin, "GET %s", key);
    long long v = r && r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
    freeReplyObject(r);
    redisFree(admin);
    return v;
}

/* A new client during the drain is accepted and served. */
static void expect_new_client_served(void)
{
    redisContext *c = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(c, "SET lc:newcomer %s", run_tag);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(c, "GET lc:newcomer");
    vt_assert_str(r, run_tag);
    freeReplyObject(r);
    redisFree(c);
}

static bool proxy_says(void *arg)
{
    char *log = vt_proxy_log(env.proxy);
    bool found = strstr(log, (const char *)arg) != NULL;
    free(log);
    return found;
}

/* SIGTERM in the middle of 4 x 25,000 pipelined commands: the clients go
 * on, every reply arrives in order, a newcomer is served, and once they
 * all left the proxy exits 0. */
Test(lifecycle, sigterm_during_pipelines_loses_no_reply)
{
    start("30");
    pipe_client pcs[PIPE_CLIENTS];
    pipes_start(pcs, PIPE_COMMANDS);
    progress pr = {pcs, 2000};
    cr_assert(vt_wait_until(pipes_progressed, &pr, 20000), "the pipelines did not get going");
    /* A client that stays until the newcomer was served: on a fast run the
     * pipelines may all be over before the SIGTERM is handled, and the
     * drain would rightly end with them. */
    redisContext *holder = vt_must_connect(env.proxy->port);
    redisReply *hr = vt_cmd(holder, "PING"); /* (answered: the proxy has it) */
    vt_assert_status(hr, "PONG");
    freeReplyObject(hr);
    cr_assert(vt_proxy_signal(env.proxy, SIGTERM));
    cr_assert(vt_wait_until(proxy_says, "draining", 5000), "no drain in the log");
    expect_new_client_served();
    for (int i = 0; i < PIPE_CLIENTS; i++)
        pthread_join(pcs[i].th, NULL);
    hr = vt_cmd(holder, "PING");
    vt_assert_status(hr, "PONG");
    freeReplyObject(hr);
    redisFree(holder);
    long long replies = 0;
    for (int i = 0; i < PIPE_CLIENTS; i++) {
        cr_assert(!pcs[i].failed, "%s", pcs[i].why);
        cr_assert_eq(pcs[i].got, PIPE_COMMANDS, "client %d got %lld replies of %d", i, pcs[i].got,
                     PIPE_COMMANDS);
        cr_assert_eq(redis_counter(i), pcs[i].incrs,
                     "client %d: Redis counted %lld INCRs, the client saw %lld", i, redis_counter(i),
                     pcs[i].incrs);
        replies += pcs[i].got;
    }
    cr_assert_eq(replies, PIPE_CLIENTS * PIPE_COMMANDS);
    int st;
    cr_assert(vt_proxy_wait_exit(env.proxy, 5000, &st), "the proxy did not exit once every client left");
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status 0x%x", st);
}

/* Clients that keep pipelining past shutdown-timeout: the proxy stops
 * reading them, writes every reply to what it sent Redis, and closes. No
 * reply Redis produced is lost: each client's counter in Redis is the last
 * INCR reply it read; the replies before the close are all right. */
Test(lifecycle, clients_still_pipelining_at_shutdown_timeout_get_every_reply_redis_made)
{
    start("1");
    pipe_client pcs[PIPE_CLIENTS];
    pipes_start(pcs, 0);
    progress pr = {pcs, 2000};
    cr_assert(vt_wait_until(pipes_progressed, &pr, 20000), "the pipelines did not get going");
    long long t0 = vt_now_ms();
    cr_assert(vt_proxy_signal(env.proxy, SIGTERM));
    for (int i = 0; i < PIPE_CLIENTS; i++)
        pthread_join(pcs[i].th, NULL);
    int st;
    cr_assert(vt_proxy_wait_exit(env.proxy, 10000, &st), "the proxy did not exit");
    long long took = vt_now_ms() - t0;
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status 0x%x", st);
    cr_assert(took >= 900, "exited after %lld ms, before shutdown-timeout 1 s", took);
    for (int i = 0; i < PIPE_CLIENTS; i++) {
        cr_assert(!pcs[i].failed, "%s", pcs[i].why);
        cr_assert(pcs[i].closed, "client %d was not closed", i);
        cr_assert(pcs[i].got > 2000 && pcs[i].got <= pcs[i].sent, "client %d: %lld replies for %lld sent", i,
                  pcs[i].got, pcs[i].sent);
        long long in_redis = redis_counter(i);
        cr_assert_eq(in_redis, pcs[i].incrs, "client %d: Redis ran %lld INCRs, the client got %lld replies",
                     i, in_redis, pcs[i].incrs);
    }
}

/* An idle client and no traffic: exit 0 at shutdown-timeout (2 s), not
 * before; the idle client sees the close. */
Test(lifecycle, idle_client_keeps_it_until_shutdown_timeout)
{
    start("2");
    int idle = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, got = {0};
    vt_buf_cmd(&req, "PING", NULL);
    vt_exchange(idle, &req, "+PONG\r\n");
    long long t0 = vt_now_ms();
    cr_assert(vt_proxy_signal(env.proxy, SIGTERM));
    int st = 0;
    /* Still serving for the next 1.5 s (it must not exit early). */
    cr_assert(!vt_proxy_wait_exit(env.proxy, 1500, &st), "exited after %lld ms, before shutdown-timeout",
              vt_now_ms() - t0);
    vt_buf_cmd(&req, "PING", NULL);
    vt_exchange(idle, &req, "+PONG\r\n");
    cr_assert(vt_proxy_wait_exit(env.proxy, 5000, &st), "no exit within shutdown-timeout + 3.5 s");
    long long took = vt_now_ms() - t0;
    cr_assert(took >= 1900, "exited after %lld ms", took);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status 0x%x", st);
    cr_assert(vt_sock_read_eof(idle, &got, 2000), "the idle client did not see the close");
    cr_assert_eq(got.len, 0, "got \"%s\"", vt_buf_escaped(&got));
    close(idle);
    vt_buf_free(&req);
    vt_buf_free(&got);
}

/* Stateful clients at shutdown-timeout: one blocked in BLPOP (Redis never
 * pops for it: the element stays), one subscribed, one inside MULTI (never
 * run), one on a connection of its own: each is closed within the flush
 * bound, and the proxy exits 0. */
Test(lifecycle, blocked_subscribed_and_transaction_clients_at_shutdown_timeout)
{
    start("1");
    char key[64];
    snprintf(key, sizeof(key), "lc:list:%d", (int)getpid());
    int blocked = vt_must_sock(env.proxy->port), sub = vt_must_sock(env.proxy->port),
        multi = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, got = {0};
    vt_buf_cmd(&req, "BLPOP", key, "0", NULL);
    cr_assert(vt_sock_send_buf(blocked, &req));
    vt_buf_reset(&req);
    cr_assert(vt_wait_until_blocked(env.redis->port, 1, 5000), "BLPOP never blocked");
    vt_buf_cmd(&req, "SUBSCRIBE", "lc:chan", NULL);
    cr_assert(vt_sock_send_buf(sub, &req));
    vt_buf_reset(&req);
    cr_assert(vt_sock_read_replies(sub, &got, 1, 5000));
    vt_buf_reset(&got);
    vt_buf_cmd(&req, "MULTI", NULL);
    vt_buf_cmd(&req, "SET", key, "from-multi", NULL);
    vt_exchange(multi, &req, "+OK\r\n+QUEUED\r\n");
    long long t0 = vt_now_ms();
    cr_assert(vt_proxy_signal(env.proxy, SIGTERM));
    int st;
    cr_assert(vt_proxy_wait_exit(env.proxy, 1000 + 2000 + 3000, &st), "no exit within timeout + flush bound");
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status 0x%x", st);
    cr_assert(vt_now_ms() - t0 >= 900);
    int fds[] = {blocked, sub, multi};
    for (int i = 0; i < 3; i++) {
        cr_assert(vt_sock_read_eof(fds[i], &got, 3000), "client %d not closed", i);
        vt_buf_reset(&got);
        close(fds[i]);
    }
    /* Nothing ran for them: the list gets its element and keeps it. */
    redisContext *admin = vt_must_connect(env.redis->port);
    redisReply *r = vt_cmd(admin, "RPUSH %s x", key);
    vt_assert_int(r, 1);
    freeReplyObject(r);
    r = vt_cmd(admin, "LLEN %s", key);
    vt_assert_int(r, 1);
    freeReplyObject(r);
    redisFree(admin);
    vt_buf_free(&req);
    vt_buf_free(&got);
}

static void expect_quick_exit(int sig_first, int sig_second)
{
    start("30");
    int idle = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, got = {0};
    vt_buf_cmd(&req, "PING", NULL);
    vt_exchange(idle, &req, "+PONG\r\n");
    int st;
    if (sig_first) {
        cr_assert(vt_proxy_signal(env.proxy, sig_first));
        cr_assert(vt_wait_until(proxy_says, "draining", 5000), "no drain in the log");
        vt_buf_cmd(&req, "PING", NULL);
        vt_exchange(idle, &req, "+PONG\r\n"); /* still serving */
    }
    long long t0 = vt_now_ms();
    cr_assert(vt_proxy_signal(env.proxy, sig_second));
    cr_assert(vt_proxy_wait_exit(env.proxy, 2000, &st), "did not exit at once");
    cr_assert(vt_now_ms() - t0 < 2000);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status 0x%x", st);
    cr_assert(vt_sock_read_eof(idle, &got, 2000), "the client did not see the close");
    close(idle);
    vt_buf_free(&req);
    vt_buf_free(&got);
}

Test(lifecycle, second_sigterm_exits_at_once)
{
    expect_quick_exit(SIGTERM, SIGTERM);
}

Test(lifecycle, sigint_then_sigterm_exits_at_once)
{
    expect_quick_exit(SIGINT, SIGTERM);
}

Test(lifecycle, sigquit_exits_at_once)
{
    expect_quick_exit(0, SIGQUIT);
}

Test(lifecycle, sigquit_during_drain_exits_at_once)
{
    expect_quick_exit(SIGTERM, SIGQUIT);
}

/* No client at all: SIGTERM exits at once, 0. */
Test(lifecycle, sigterm_without_clients_exits_at_once)
{
    start("30");
    cr_assert(vt_proxy_signal(env.proxy, SIGTERM));
    int st;
    cr_assert(vt_proxy_wait_exit(env.proxy, 2000, &st), "did not exit");
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status 0x%x", st);
}

/* ---- shutdown-min-drain ---- */

static bool readyz_draining(void *arg)
{
    (void)arg;
    vt_http_resp r = vt_http_get(mport, "/readyz");
    bool ok = r.status == 503 && r.body && strstr(r.body, "draining");
    vt_http_free(&r);
    return ok;
}

/* The proxy holds no client connection: the start-up check's connection
 * (tests/support: connect, close) may still be open on its side, and a
 * SIGTERM then would find a client to drain for. */
static bool no_client_connected(void *arg)
{
    (void)arg;
    vt_http_resp r = vt_http_get(mport, "/metrics");
    vt_prom p;
    char why[256];
    bool ok = r.status == 200 && vt_prom_parse(r.body, r.body_len, &p, why, sizeof(why));
    if (ok) {
        ok = vt_prom_get(&p, "verbproxy_connected_clients", "", -1) == 0;
        vt_prom_free(&p);
    }
    vt_http_free(&r);
    return ok;
}

/* With no client connected, SIGTERM, then wait until the proxy logged it
 * and /readyz fails: the drain has begun. Returns the time just before
 * the signal. */
static long long sigterm_and_wait_for_the_drain(void)
{
    cr_assert(vt_wait_until(no_client_connected, NULL, 5000), "a client connection is still open");
    long long t0 = vt_now_ms();
    cr_assert(vt_proxy_signal(env.proxy, SIGTERM));
    cr_assert(vt_wait_until(proxy_says, "draining", 5000), "no drain in the log (exited at once?)");
    cr_assert(vt_wait_until(readyz_draining, NULL, 5000), "/readyz does not fail with \"draining\"");
    return t0;
}

static void expect_served(redisContext *c, const char *val)
{
    redisReply *r = vt_cmd(c, "SET lc:late %s", val);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(c, "GET lc:late");
    vt_assert_str(r, val);
    freeReplyObject(r);
}

/* The classic sidecar's story: no client when SIGTERM comes; the
 * application connects during its own shutdown and is served; the proxy
 * stays while it is connected, past the 2 s, and exits 0 promptly once it
 * leaves. */
Test(lifecycle, min_drain_serves_a_client_that_connects_after_sigterm_while_it_stays)
{
    start_min_drain("30", "2");
    long long t0 = sigterm_and_wait_for_the_drain();
    redisContext *late = vt_must_connect(env.proxy->port);
    expect_served(late, "first");
    int st = 0;
    /* Connected until 2.5 s after the signal: no exit meanwhile. */
    long long hold = t0 + 2500 - vt_now_ms();
    cr_assert(hold > 0, "the first commands took past 2.5 s");
    cr_assert(!vt_proxy_wait_exit(env.proxy, (int)hold, &st), "exited after %lld ms with a client connected",
              vt_now_ms() - t0);
    expect_served(late, "second"); /* after the minimum too */
    redisFree(late);
    cr_assert(vt_proxy_wait_exit(env.proxy, 3000, &st), "no exit within 3 s of the last client leaving");
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status 0x%x", st);
}

/* Exit 0 within [min_ms, max_ms] of t0 (the time before the SIGTERM).
 * (The proxy's timer starts when it handles the signal, after t0: an exit
 * before min_ms is an exit before the minimum.) */
static void expect_exit_between(long long t0, long long min_ms, long long max_ms)
{
    int st = 0;
    long long wait = t0 + max_ms - vt_now_ms();
    cr_assert(vt_proxy_wait_exit(env.proxy, wait > 0 ? (int)wait : 0, &st), "no exit within %lld ms", max_ms);
    long long took = vt_now_ms() - t0;
    cr_assert(took >= min_ms, "exited after %lld ms, before %lld ms", took, min_ms);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status 0x%x", st);
}

/* The application connects after SIGTERM, flushes and leaves well before
 * the 2 s are over: the proxy still waits for the minimum (another
 * connection may come), then exits 0 at once. */
Test(lifecycle, min_drain_holds_the_exit_after_a_client_came_and_left)
{
    start_min_drain("30", "2");
    long long t0 = sigterm_and_wait_for_the_drain();
    redisContext *late = vt_must_connect(env.proxy->port);
    expect_served(late, "flushed");
    redisFree(late);
    cr_assert(vt_now_ms() - t0 < 1800, "the client took until %lld ms (the story needs it gone before 2 s)",
              vt_now_ms() - t0);
    expect_exit_between(t0, 2000, 2000 + 2000);
}

/* Nobody comes at all: exit 0 after about the minimum, not at once, and
 * long before shutdown-timeout. */
Test(lifecycle, min_drain_without_any_client_exits_after_it)
{
    start_min_drain("30", "2");
    long long t0 = sigterm_and_wait_for_the_drain();
    expect_exit_between(t0, 2000, 2000 + 2000);
}

/* A minimum no shorter than shutdown-timeout: shutdown-timeout (1 s) ends
 * the drain. */
Test(lifecycle, shutdown_timeout_wins_over_a_longer_min_drain)
{
    start_min_drain("1", "10");
    long long t0 = sigterm_and_wait_for_the_drain();
    cr_assert(vt_wait_until(proxy_says, "no shorter than shutdown-timeout", 2000), "the log does not say so");
    expect_exit_between(t0, 1000, 1000 + 2000);
}

/* shutdown-min-drain set by a reload counts at the next SIGTERM. */
Test(lifecycle, min_drain_set_by_a_reload)
{
    VT_SKIP_IF_DIRECT();
    snprintf(conf_dir, sizeof(conf_dir), "/tmp/vt-lifecycle-XXXXXX");
    cr_assert(mkdtemp(conf_dir) != NULL);
    snprintf(conf_path, sizeof(conf_path), "%s/proxy.conf", conf_dir);
    FILE *f = fopen(conf_path, "w");
    cr_assert(f != NULL);
    fputs("shutdown-timeout 30\nshutdown-min-drain 0\n", f);
    fclose(f);
    static char mport_arg[16];
    static const char *args[] = {"--config",       conf_path, "--loglevel", "notice",
                                 "--metrics-port", mport_arg, NULL};
    mport = vt_free_port();
    snprintf(mport_arg, sizeof(mport_arg), "%d", mport);
    vt_proxy_opts po = {.extra_args = args};
    vt_env_start(&env, NULL, &po);
    f = fopen(conf_path, "w");
    cr_assert(f != NULL);
    fputs("shutdown-timeout 30\nshutdown-min-drain 1\n", f);
    fclose(f);
    cr_assert(vt_proxy_signal(env.proxy, SIGHUP));
    cr_assert(vt_wait_until(proxy_says, "shutdown-min-drain 0 -> 1", 5000), "the reload does not say it");
    long long t0 = sigterm_and_wait_for_the_drain();
    expect_exit_between(t0, 1000, 1000 + 2000);
}

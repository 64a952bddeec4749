/* test_client_timeout.c - `timeout` and `tcp-keepalive`, as Redis's.
 *
 * With `timeout 1` a client that does nothing is closed after a second or
 * two, without a reply, while a client blocked in BLPOP, a subscriber and
 * a MONITOR stay (Redis's clientsCronHandleTimeout exempts them) and still
 * get what they wait for afterwards; a client that keeps talking stays.
 * In VP_TEST_DIRECT=1 mode Redis itself runs with `timeout 1` and the same
 * story holds. `tcp-keepalive` is read back from the proxy's own sockets,
 * client and upstream side (pidfd_getfd). */
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "tests/support/checks.h"

static vt_env env;

static void setup(void)
{
    static const char *const redis_direct[] = {"--timeout", "1", NULL};
    static const char *const proxy_args[] = {"--timeout", "1", "--tcp-keepalive", "60", NULL};
    vt_redis_opts ro = {.extra_args = vt_direct_mode() ? redis_direct : NULL};
    vt_proxy_opts po = {.extra_args = proxy_args};
    vt_env_start(&env, &ro, &po);
}

static void teardown(void)
{
    vt_env_stop(&env);
}

TestSuite(client_timeout, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

static int must_send(int fd, const char *req)
{
    cr_assert(vt_sock_send_str(fd, req), "send failed");
    return fd;
}

/* An idle client: closed within a few seconds, with nothing written. */
static void expect_closed_idle(int fd)
{
    vt_buf got = {0};
    cr_assert(vt_sock_read_eof(fd, &got, 5000), "an idle client was not closed within 5 s");
    cr_assert_eq(got.len, 0, "closed with \"%s\": Redis closes idle clients without a reply", vt_buf_escaped(&got));
    vt_buf_free(&got);
    close(fd);
}

Test(client_timeout, idle_clients_are_closed_but_not_blocked_subscribed_or_monitoring_ones)
{
    /* Bystanders keep talking meanwhile: never idle, never closed. */
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, 2, 20);
    int idle = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, got = {0};
    vt_buf_cmd(&req, "PING", NULL);
    vt_exchange(idle, &req, "+PONG\r\n");
    int blocked = must_send(vt_must_sock(env.proxy->port), "BLPOP tm:q 0\r\n");
    int subscriber = vt_must_sock(env.proxy->port);
    vt_buf_cmd(&req, "SUBSCRIBE", "tm:ch", NULL);
    vt_exchange(subscriber, &req, "*3\r\n$9\r\nsubscribe\r\n$5\r\ntm:ch\r\n:1\r\n");
    cr_assert(vt_wait_until_blocked(env.redis->port, 1, VT_READ_DEADLINE_MS), "BLPOP did not block");

    expect_closed_idle(idle);
    /* A second idle client, connected after the first was closed: once it
     * is closed too, the exempt ones have been idle past the timeout for
     * at least one more check. */
    expect_closed_idle(vt_must_sock(env.proxy->port));

    /* They are still there, and get what they wait for. */
    redisContext *c = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(c, "PUBLISH tm:ch hello");
    vt_assert_int(r, 1);
    freeReplyObject(r);
    r = vt_cmd(c, "RPUSH tm:q job");
    vt_assert_int(r, 1);
    freeReplyObject(r);
    vt_expect_bytes(subscriber, &got, "*3\r\n$7\r\nmessage\r\n$5\r\ntm:ch\r\n$5\r\nhello\r\n");
    vt_buf_reset(&got);
    vt_expect_bytes(blocked, &got, "*2\r\n$4\r\ntm:q\r\n$3\r\njob\r\n");
    vt_buf_reset(&got);
    redisFree(c);
    close(blocked);
    close(subscriber);
    cr_assert(vt_bystanders_wait(b, 20, VT_READ_DEADLINE_MS), "the bystanders stopped being served");
    vt_assert_bystanders_ok(b);

    /* A MONITOR that sees nothing (the bystanders are gone) stays too. */
    int monitor = vt_must_sock(env.proxy->port);
    vt_buf_cmd(&req, "MONITOR", NULL);
    vt_exchange(monitor, &req, "+OK\r\n");
    expect_closed_idle(vt_must_sock(env.proxy->port));
    expect_closed_idle(vt_must_sock(env.proxy->port));
    c = vt_must_connect(env.proxy->port); /* (the last one was idle too) */
    r = vt_cmd(c, "SET tm:m seen");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    redisFree(c);
    cr_assert(vt_sock_read_contains(monitor, &got, "\"SET\" \"tm:m\" \"seen\"", VT_READ_DEADLINE_MS),
              "MONITOR saw nothing: \"%s\"", vt_buf_escaped(&got));
    close(monitor);
    vt_buf_free(&req);
    vt_buf_free(&got);
    if (!vt_direct_mode()) cr_assert_geq(vt_proxy_stat(env.proxy->port, "clients_timed_out"), 4);
}

/* ---- tcp-keepalive, read back from the proxy's sockets ---- */

typedef struct keepalive {
    int on, idle, intvl, cnt;
} keepalive;

/* The keepalive settings of the proxy's TCP socket whose peer is on
 * 127.0.0.1:peer_port. False if there is none. */
static bool proxy_socket_keepalive(pid_t pid, int peer_port, keepalive *k)
{
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) cr_skip_test("pidfd_open: %s", strerror(errno));
    char dir[64];
    snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    cr_assert(d != NULL);
    bool found = false;
    for (struct dirent *e; !found && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        int fd = (int)syscall(SYS_pidfd_getfd, pidfd, atoi(e->d_name), 0);
        if (fd < 0 && (errno == EPERM || errno == ENOSYS)) {
            closedir(d);
            cr_skip_test("pidfd_getfd: %s (cannot read the proxy's socket options here)", strerror(errno));
        }
        if (fd < 0) continue;
        struct sockaddr_in peer;
        socklen_t pl = sizeof(peer);
        if (getpeername(fd, (struct sockaddr *)&peer, &pl) == 0 && peer.sin_family == AF_INET &&
            ntohs(peer.sin_port) == peer_port) {
            socklen_t l = sizeof(int);
            getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &k->on, &l);
            getsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &k->idle, &l);
            getsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &k->intvl, &l);
            getsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &k->cnt, &l);
            found = true;
        }
        close(fd);
    }
    closedir(d);
    close(pidfd);
    return found;
}

static void assert_keepalive(const char *side, const keepalive *k)
{
    cr_assert(k->on && k->idle == 60 && k->intvl == 20 && k->cnt == 3,
              "%s socket: SO_KEEPALIVE %d, idle %d s, interval %d s, count %d; want 1, 60, 20, 3 (Redis's "
              "anetKeepAlive for tcp-keepalive 60)",
              side, k->on, k->idle, k->intvl, k->cnt);
}

Test(client_timeout, tcp_keepalive_is_set_on_both_sides)
{
    VT_SKIP_IF_DIRECT();
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    vt_buf_cmd(&req, "PING", NULL);
    vt_exchange(fd, &req, "+PONG\r\n");
    vt_buf_free(&req);
    struct sockaddr_in me;
    socklen_t ml = sizeof(me);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&me, &ml), 0);
    keepalive client = {0}, upstream = {0};
    cr_assert(proxy_socket_keepalive(env.proxy->pid, ntohs(me.sin_port), &client), "no client socket found");
    assert_keepalive("client", &client);
    /* (In the integration-tls/ variant the proxy talks to Redis's TLS port.) */
    int upstream_port = env.proxy->upstream_tls ? env.redis->tls_port : env.redis->port;
    cr_assert(proxy_socket_keepalive(env.proxy->pid, upstream_port, &upstream), "no upstream socket found");
    assert_keepalive("upstream", &upstream);
    close(fd);
}

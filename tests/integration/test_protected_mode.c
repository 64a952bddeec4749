/* test_protected_mode.c - `protected-mode yes` (the default), as Redis 7.0.
 *
 * The proxy listens on every address (`bind 0.0.0.0`) with no password of
 * its own: a client connecting through this machine's own non-loopback
 * address gets Redis's -DENIED text and the close, byte for byte what a
 * redis-server with the same settings sends; loopback clients are served
 * meanwhile (bystanders). With `requirepass` or `protected-mode no` such a
 * client is served (after AUTH). Skipped where this machine has no
 * non-loopback IPv4 address. The reference is always Redis 7.0.15, whose
 * words the proxy uses, whatever server is upstream. */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "tests/support/checks.h"

static vt_redis *upstream, *reference;
static vt_proxy *proxy;
static char outside_ip[INET_ADDRSTRLEN];

/* An IPv4 address of this machine that is not loopback: "" if none. */
static void find_outside_ip(void)
{
    outside_ip[0] = '\0';
    struct ifaddrs *all;
    if (getifaddrs(&all) != 0) return;
    for (struct ifaddrs *i = all; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK)) continue;
        inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, outside_ip, sizeof(outside_ip));
        break;
    }
    freeifaddrs(all);
}

static void setup(void)
{
    find_outside_ip();
}

static void teardown(void)
{
    vt_env e = {.redis = upstream, .proxy = proxy};
    if (upstream) vt_env_stop(&e);
    vt_redis_free(reference);
    upstream = reference = NULL;
    proxy = NULL;
}

TestSuite(protected_mode, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

static void start_all(const char *const *redis_args, const char *const *proxy_args)
{
    VT_SKIP_IF_DIRECT();
    if (!outside_ip[0]) cr_skip_test("this machine has no non-loopback IPv4 address to connect from");
    upstream = vt_redis_start(NULL);
    cr_assert(upstream != NULL);
    /* The proxy answers an outside client by itself, in 7.0.15's words
     * (7.2 and later say "Set up" for "Setup a"): that release is the
     * reference, whatever server is upstream (docs/servers.md). */
    vt_redis_opts ro = {.extra_args = redis_args, .binary = VT_REDIS_OWN_WORDS_BINARY};
    reference = vt_redis_start(&ro);
    cr_assert(reference != NULL);
    vt_proxy_opts po = {.extra_args = proxy_args};
    proxy = vt_proxy_start(upstream, &po);
    cr_assert(proxy != NULL, "verbproxy did not start (see stderr)");
}

/* Connect through the outside address, send `req`, read `replies` replies
 * (or to EOF when 0). */
static void ask_from_outside(int port, const char *req, size_t replies, vt_buf *got)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, outside_ip, &sa.sin_addr);
    cr_assert(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "cannot connect to %s:%d: %s", outside_ip,
              port, strerror(errno));
    cr_assert(vt_sock_send_str(fd, req));
    if (replies)
        cr_assert(vt_sock_read_replies(fd, got, replies, VT_READ_DEADLINE_MS), "no reply: \"%s\"",
                  vt_buf_escaped(got));
    else
        cr_assert(vt_sock_read_eof(fd, got, VT_READ_DEADLINE_MS), "not closed: \"%s\"", vt_buf_escaped(got));
    close(fd);
}

static void same_from_outside(const char *req, size_t replies)
{
    vt_buf want = {0}, got = {0};
    ask_from_outside(reference->port, req, replies, &want);
    ask_from_outside(proxy->port, req, replies, &got);
    cr_assert(want.len == got.len && memcmp(want.data, got.data, want.len) == 0,
              "from %s\n  redis: \"%s\"\n  proxy: \"%s\"", outside_ip, vt_buf_escaped(&want),
              vt_buf_escaped(&got));
    vt_buf_free(&want);
    vt_buf_free(&got);
}

Test(protected_mode, a_client_from_outside_is_denied_as_by_redis)
{
    static const char *const redis_args[] = {"--bind", "0.0.0.0", NULL};
    static const char *const proxy_args[] = {"--bind", "0.0.0.0", NULL};
    start_all(redis_args, proxy_args);
    vt_bystanders *b = vt_must_start_bystanders(proxy->port, 3, 20);
    same_from_outside("PING\r\n", 0);
    vt_buf got = {0};
    ask_from_outside(proxy->port, "PING\r\n", 0, &got);
    cr_assert(got.len > 8 && memcmp(got.data, "-DENIED ", 8) == 0, "got \"%s\"", vt_buf_escaped(&got));
    vt_buf_free(&got);
    cr_assert(vt_bystanders_wait(b, 20, VT_READ_DEADLINE_MS), "the loopback bystanders stopped being served");
    vt_assert_bystanders_ok(b);
}

Test(protected_mode, a_password_lets_outside_clients_authenticate)
{
    static const char *const redis_args[] = {"--bind", "0.0.0.0", "--requirepass", "pm-pass", NULL};
    static const char *const proxy_args[] = {"--bind", "0.0.0.0", "--requirepass", "pm-pass", NULL};
    start_all(redis_args, proxy_args);
    same_from_outside("PING\r\nAUTH pm-pass\r\nPING\r\n", 3);
}

Test(protected_mode, protected_mode_no_serves_outside_clients)
{
    static const char *const redis_args[] = {"--bind", "0.0.0.0", "--protected-mode", "no", NULL};
    static const char *const proxy_args[] = {"--bind", "0.0.0.0", "--protected-mode", "no", NULL};
    start_all(redis_args, proxy_args);
    same_from_outside("PING\r\nECHO outside\r\n", 2);
}

/* checks.h - criterion assertions for replies, raw bytes and fixtures.
 *
 * Header only, so the support library itself does not link criterion. Each
 * check says what was expected and what came, with bytes escaped. */
#ifndef VT_CHECKS_H
#define VT_CHECKS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <criterion/criterion.h>

#include "tests/support/bystander.h"
#include "tests/support/client.h"
#include "tests/support/cluster_env.h"
#include "tests/support/servers.h"

/* Deadline for a single criterion test: a hung proxy fails, it never hangs CI. */
#define VT_TEST_TIMEOUT_S 60

/* Proxy-only behaviour cannot be checked against Redis directly. */
#define VT_SKIP_IF_DIRECT()                                                                                  \
    do {                                                                                                     \
        if (vt_direct_mode()) cr_skip_test("proxy-only behaviour (VP_TEST_DIRECT=1)");                       \
    } while (0)

/* A story about what a server before `version` (major * 100 + minor) does
 * not have (COMMAND DOCS before Redis 7.0, ...): skipped there, saying
 * why. docs/compatibility.md lists them. */
#define VT_SKIP_BEFORE(version, why)                                                                         \
    do {                                                                                                     \
        if (vt_redis_version() < (version))                                                                  \
            cr_skip_test("the server is older than %d.%d: %s", (version) / 100, (version) % 100, (why));     \
    } while (0)

/* Redis's reply to an unknown command `name` with arguments `args`
 * (NULL-terminated), without the "-": 7.0 quotes with ' , 6.2 with ` and
 * a comma after each argument. (One buffer: use before the next call.) */
static inline const char *vt_unknown_command(const char *name, const char *const *args)
{
    static char text[512];
    bool old = vt_redis_version() < 700;
    size_t o = (size_t)snprintf(text, sizeof(text), old ? "ERR unknown command `%s`, with args beginning with: "
                                                        : "ERR unknown command '%s', with args beginning with: ",
                                name);
    for (int i = 0; args && args[i] && o < sizeof(text); i++)
        o += (size_t)snprintf(text + o, sizeof(text) - o, old ? "`%s`, " : "'%s' ", args[i]);
    return text;
}

/* Redis's refusals at maxclients exist only in plaintext: over TLS it
 * closes a client past the limit before the handshake, without a word
 * (test_tls.c tells that story). */
#define VT_SKIP_IF_UPSTREAM_TLS()                                                                            \
    do {                                                                                                     \
        if (vt_upstream_tls_mode()) cr_skip_test("Redis's plaintext refusal text (VP_TEST_UPSTREAM_TLS=1)"); \
    } while (0)

/* A story that cannot be told through a proxy in front of a Redis Cluster
 * (the integration-cluster/ variant, cluster_env.h): skipped there, with
 * the reason (tests/integration/README.md lists them). */
#define VT_SKIP_IN_CLUSTER(why)                                                                              \
    do {                                                                                                     \
        if (vt_cluster_mode()) cr_skip_test("not in the cluster variant: %s", (why));                        \
    } while (0)

#define VT_DESCRIBE(r) vt_reply_describe((r), (char[512]){0}, 512)

/* A reply arrived at all (NULL means an I/O error or timeout). */
#define vt_assert_reply(r, ctx)                                                                              \
    cr_assert((r) != NULL, "no reply: %s", (ctx) && (ctx)->errstr[0] ? (ctx)->errstr : "connection error")

#define vt_assert_status(r, want)                                                                            \
    cr_assert((r) && (r)->type == REDIS_REPLY_STATUS && strcmp((r)->str, (want)) == 0,                       \
              "expected +%s, got %s", (want), VT_DESCRIBE(r))

#define vt_assert_int(r, want)                                                                               \
    cr_assert((r) && (r)->type == REDIS_REPLY_INTEGER && (r)->integer == (long long)(want),                  \
              "expected :%lld, got %s", (long long)(want), VT_DESCRIBE(r))

#define vt_assert_str(r, want)                                                                               \
    cr_assert((r) && (r)->type == REDIS_REPLY_STRING && (r)->len == strlen(want) &&                          \
                  memcmp((r)->str, (want), (r)->len) == 0,                                                   \
              "expected \"%s\", got %s", (want), VT_DESCRIBE(r))

#define vt_assert_nil(r)                                                                                     \
    cr_assert((r) && (r)->type == REDIS_REPLY_NIL, "expected nil, got %s", VT_DESCRIBE(r))

/* An error reply starting with `prefix` ("NOAUTH", "WRONGTYPE ..."). */
#define vt_assert_error(r, prefix)                                                                           \
    cr_assert((r) && (r)->type == REDIS_REPLY_ERROR && strncmp((r)->str, (prefix), strlen(prefix)) == 0,     \
              "expected -%s..., got %s", (prefix), VT_DESCRIBE(r))

#define vt_assert_array(r, n)                                                                                \
    cr_assert((r) && (r)->type == REDIS_REPLY_ARRAY && (r)->elements == (size_t)(n),                         \
              "expected an array of %zu, got %s", (size_t)(n), VT_DESCRIBE(r))

/* The raw bytes received so far are exactly `want`. */
#define vt_assert_bytes(buf, want)                                                                           \
    do {                                                                                                     \
        const char *vt_want_ = (want);                                                                       \
        size_t vt_wl_ = strlen(vt_want_);                                                                    \
        cr_assert((buf)->len == vt_wl_ && memcmp((buf)->data, vt_want_, vt_wl_) == 0,                        \
                  "expected bytes \"%s\"\n             got \"%s\"%s", vt_escape(vt_want_, vt_wl_),           \
                  vt_buf_escaped(buf), (buf)->eof ? " then EOF" : "");                                       \
    } while (0)

/* Read exactly strlen(want) bytes (deadline) and compare. */
#define vt_expect_bytes(fd, buf, want)                                                                       \
    do {                                                                                                     \
        vt_sock_read_len((fd), (buf), strlen(want), VT_READ_DEADLINE_MS);                                    \
        vt_assert_bytes((buf), (want));                                                                      \
    } while (0)

/* Start n bystanders (bystander.h) and wait until each has had `first`
 * replies checked, so the story begins with them under way. */
static inline vt_bystanders *vt_must_start_bystanders(int port, int n, long long first)
{
    vt_bystanders *b = vt_bystanders_start(port, n);
    cr_assert(b != NULL, "the bystanders could not connect to port %d", port);
    cr_assert(vt_bystanders_wait(b, first, VT_READ_DEADLINE_MS), "the bystanders did not get going");
    return b;
}

/* Stop a group of bystanders (bystander.h) and fail the test unless every
 * reply each of them got was right, in order and in time. */
#define vt_assert_bystanders_ok(b)                                                                           \
    do {                                                                                                     \
        char vt_why_[512];                                                                                   \
        long long vt_checked_ = 0;                                                                           \
        bool vt_ok_ = vt_bystanders_stop((b), &vt_checked_, vt_why_, sizeof(vt_why_));                       \
        cr_assert(vt_ok_, "a bystander suffered: %s", vt_why_);                                              \
        cr_assert(vt_checked_ > 0, "the bystanders checked no reply");                                       \
    } while (0)

/* Raise this process's soft RLIMIT_NOFILE to `limit` (or the hard limit,
 * if lower) before the servers start, so they inherit it; fail the test
 * unless that leaves room for `clients` connections through the proxy
 * (three descriptors each: here, the proxy's and Redis's). */
static inline void vt_raise_fd_limit(rlim_t limit, int clients)
{
    struct rlimit rl;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > limit ? limit : rl.rlim_max;
    cr_assert(want >= 3 * (rlim_t)clients + 100, "hard RLIMIT_NOFILE %lu is too low for %d clients",
              (unsigned long)rl.rlim_max, clients);
    if (rl.rlim_cur < want) {
        rl.rlim_cur = want;
        cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    }
}

/* The usual fixture: one redis-server, one verbproxy in front of it. Call
 * vt_env_start from .init and vt_env_stop from .fini. */
typedef struct vt_env {
    vt_redis *redis;
    vt_proxy *proxy;
} vt_env;

static inline void vt_env_start(vt_env *e, const vt_redis_opts *ro, const vt_proxy_opts *po)
{
    e->redis = vt_redis_start(ro);
    cr_assert(e->redis != NULL, "redis-server did not start (see stderr)");
    e->proxy = vt_proxy_start(e->redis, po);
    cr_assert(e->proxy != NULL, "verbproxy did not start (see stderr)");
}

/* Stops everything; a proxy that died during the test, or does not stop
 * cleanly, fails it (as a crash in teardown). */
static inline void vt_env_stop(vt_env *e)
{
    bool alive = !e->proxy || vt_proxy_alive(e->proxy);
    bool clean = !e->proxy || vt_proxy_stop(e->proxy);
    vt_proxy_free(e->proxy);
    vt_redis_free(e->redis);
    e->proxy = NULL;
    e->redis = NULL;
    /* criterion has already judged the test when .fini runs, and ignores
     * assertions here; only a crash of the worker still fails the test. */
    if (!alive || !clean) {
        fprintf(stderr, "vt: FAIL %s::%s: %s (its log is above)\n", criterion_current_suite->name,
                criterion_current_test->name,
                !alive ? "verbproxy died during the test" : "verbproxy did not exit cleanly on SIGTERM");
        abort();
    }
}

/* A hiredis connection that must work: through the proxy, or straight to redis. */
static inline redisContext *vt_must_connect(int port)
{
    redisContext *c = vt_connect(port);
    cr_assert(c != NULL, "could not connect to port %d", port);
    return c;
}

static inline int vt_must_sock(int port)
{
    int fd = vt_sock_tcp(port);
    cr_assert(fd >= 0, "could not connect to port %d", port);
    return fd;
}

/* SET `key` to `len` bytes of `fill`, straight on the redis-server at
 * redis_port (a big value for a story to read through the proxy). */
static inline void vt_store_filled(int redis_port, const char *key, size_t len, char fill)
{
    redisContext *admin = vt_must_connect(redis_port);
    char *v = malloc(len);
    memset(v, fill, len);
    redisReply *r = redisCommand(admin, "SET %s %b", key, v, len);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    free(v);
    redisFree(admin);
}

/* Send what `req` holds (then empty it) and expect exactly `want` back. */
static inline void vt_exchange(int fd, vt_buf *req, const char *want)
{
    vt_buf got = {0};
    cr_assert(vt_sock_send_buf(fd, req), "send failed");
    vt_expect_bytes(fd, &got, want);
    vt_buf_free(&got);
    vt_buf_reset(req);
}

/* A hostile client sends `req` on a new connection to port and gets
 * exactly `want`, then the close. */
static inline void vt_expect_error_then_close(int port, const char *req, size_t len, const char *want)
{
    int fd = vt_must_sock(port);
    vt_buf got = {0};
    cr_assert(vt_sock_send(fd, req, len), "send failed");
    cr_assert(vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS), "the connection stayed open; got \"%s\"",
              vt_buf_escaped(&got));
    vt_assert_bytes(&got, want);
    vt_buf_free(&got);
    close(fd);
}

/* Does the Redis on `port` answer a new connection -BUSY: a script or a
 * function has run past busy-reply-threshold? */
static inline bool vt_redis_busy(int port)
{
    redisContext *c = vt_connect(port);
    if (!c) return false;
    redisReply *r = vt_cmd(c, "PING");
    bool busy = r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "BUSY", 4) == 0;
    freeReplyObject(r);
    redisFree(c);
    return busy;
}

/* A counter of the proxy's `VERBPROXY STATS` (a bulk string of name:value
 * lines), asked on a new connection. */
static inline long long vt_proxy_stat_auth(int port, const char *password, const char *name);
static inline long long vt_proxy_stat(int port, const char *name)
{
    return vt_proxy_stat_auth(port, NULL, name);
}

/* The same from a proxy with a password of its own. */
static inline long long vt_proxy_stat_auth(int port, const char *password, const char *name)
{
    redisContext *c = vt_must_connect(port);
    if (password) {
        redisReply *a = vt_cmd(c, "AUTH %s", password);
        vt_assert_status(a, "OK");
        freeReplyObject(a);
    }
    redisReply *r = vt_cmd(c, "VERBPROXY STATS");
    cr_assert(r && r->type == REDIS_REPLY_STRING, "VERBPROXY STATS: expected a bulk string, got %s",
              VT_DESCRIBE(r));
    size_t nlen = strlen(name);
    long long value = -1;
    for (const char *line = r->str; line && *line;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, name, nlen) == 0 && line[nlen] == ':') {
            char *end;
            value = strtoll(line + nlen + 1, &end, 10);
            cr_assert(end > line + nlen + 1 && (*end == '\r' || *end == '\n' || *end == '\0'),
                      "%s is not an integer in \"%s\"", name, vt_escape(r->str, r->len));
            break;
        }
    }
    cr_assert(value >= 0, "no \"%s:<n>\" line in VERBPROXY STATS: \"%s\"", name, vt_escape(r->str, r->len));
    freeReplyObject(r);
    redisFree(c);
    return value;
}

/* Send `request` on a new connection, expect exactly `reply` and then the
 * connection closed by the other side (a protocol error's story). */
static inline void vt_expect_closed_after(int port, const char *request, size_t len, const char *reply)
{
    int fd = vt_must_sock(port);
    vt_buf got = {0};
    cr_assert(vt_sock_send(fd, request, len), "send failed");
    bool closed = vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS);
    vt_assert_bytes(&got, reply);
    cr_assert(closed, "the connection stayed open after \"%s\"", vt_escape(reply, strlen(reply)));
    cr_assert(got.err == 0, "closed by a reset (%s), not a clean close", strerror(got.err));
    vt_buf_free(&got);
    close(fd);
}

#endif

/* test_credentials.c - the proxy authenticates to a password-protected
 * Redis itself, so unmodified clients without a password reach it.
 *
 * Redis requires a password (requirepass) and has an ACL user, alice. The
 * proxy is given the credentials by directive, by a file (a mounted
 * Kubernetes Secret) or by the environment, sends AUTH first on every
 * upstream connection, and clients never see a -NOAUTH. A wrong credential
 * answers every waiting request with the proxy's "upstream unavailable"
 * error carrying Redis's text, logged once. A client's RESET on its own
 * connection (which logs Redis's connection out) is followed by the
 * proxy's AUTH. A client's own AUTH still goes to Redis (per-user ACLs).
 * The password is never in the proxy's command line, environment, log or
 * VERBPROXY STATS. */


#include "tests/support/checks.h"

#define UPSTREAM_PASS "up-s3cret-Pw"
#define ALICE_PASS "alice-s3cret-Pw"
#define WRONGPASS_TEXT "WRONGPASS invalid username-password pair or user is disabled."

static vt_redis *redis;
static vt_proxy *proxy;

static void setup(void)
{
    static const char *const args[] = {"--user", "alice", "on", ">" ALICE_PASS, "~*", "&*", "+@all", NULL};
    vt_redis_opts ro = {.requirepass = UPSTREAM_PASS, .extra_args = args};
    redis = vt_redis_start(&ro);
    cr_assert(redis != NULL, "redis-server did not start (see stderr)");
}

static void teardown(void)
{
    vt_env e = {.redis = redis, .proxy = proxy};
    vt_env_stop(&e);
    redis = NULL;
    proxy = NULL;
}

TestSuite(credentials, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

static void start_proxy(const char *const *args)
{
    vt_proxy_opts po = {.extra_args = args};
    proxy = vt_proxy_start(redis, &po);
    cr_assert(proxy != NULL, "verbproxy did not start (see stderr)");
}

/* Does a /proc file of the proxy (NULs and all) hold `secret`? */
static bool proc_file_holds(const char *what, const char *secret)
{
    int held = vt_proc_file_holds(proxy->pid, what, secret);
    cr_assert(held >= 0, "cannot read /proc/%d/%s", (int)proxy->pid, what);
    return held;
}

/* The secret is nowhere an operator (or another user) looks. */
static void assert_secret_hidden(const char *secret)
{
    cr_assert(!proc_file_holds("cmdline", secret), "the password is in /proc/<pid>/cmdline (ps)");
    cr_assert(!proc_file_holds("environ", secret), "the password is in /proc/<pid>/environ");
    redisContext *c = vt_must_connect(proxy->port);
    redisReply *r = vt_cmd(c, "VERBPROXY STATS");
    cr_assert(r && r->type == REDIS_REPLY_STRING && !strstr(r->str, secret), "the password is in VERBPROXY STATS");
    freeReplyObject(r);
    redisFree(c);
    char *log = vt_proxy_log(proxy);
    cr_assert(!strstr(log, secret), "the password is in the proxy's log:\n%s", log);
    free(log);
}

/* A client that never authenticates: plain commands, a verb (its script
 * loads after the proxy's AUTH), 11 arguments (no pre-auth limit: the
 * shared connection is authenticated), MULTI on a connection of its own,
 * and who Redis thinks it is. */
static void assert_client_served_as(const char *user)
{
    int fd = vt_must_sock(proxy->port);
    vt_buf req = {0};
    vt_buf_cmd(&req, "SET", "cr:k", "v", NULL);
    vt_buf_cmd(&req, "GET", "cr:k", NULL);
    vt_buf_cmd(&req, "LOCKRELEASE", "cr:lock", "tok", NULL);
    vt_buf_cmd(&req, "DEL", "cr:l", NULL);
    vt_buf_cmd(&req, "RPUSH", "cr:l", "1", "2", "3", "4", "5", "6", "7", "8", "9", NULL);
    vt_buf_cmd(&req, "ACL", "WHOAMI", NULL);
    char want[128];
    snprintf(want, sizeof(want), "+OK\r\n$1\r\nv\r\n:0\r\n:0\r\n:9\r\n$%zu\r\n%s\r\n", strlen(user), user);
    vt_exchange(fd, &req, want);
    close(fd);
    fd = vt_must_sock(proxy->port);
    vt_buf_cmd(&req, "ACL", "WHOAMI", NULL);
    vt_buf_cmd(&req, "MULTI", NULL);
    vt_buf_cmd(&req, "INCR", "cr:n", NULL);
    vt_buf_cmd(&req, "EXEC", NULL);
    snprintf(want, sizeof(want), "$%zu\r\n%s\r\n+OK\r\n+QUEUED\r\n*1\r\n:1\r\n", strlen(user), user);
    vt_exchange(fd, &req, want);
    vt_buf_free(&req);
    close(fd);
}

Test(credentials, the_upstream_pass_directive_authenticates_every_connection)
{
    VT_SKIP_IF_DIRECT();
    static const char *const args[] = {"--upstream-pass", UPSTREAM_PASS, NULL};
    start_proxy(args);
    assert_client_served_as("default");
    /* Given as a flag, it is wiped from argv once read. */
    assert_secret_hidden(UPSTREAM_PASS);
}

Test(credentials, an_acl_user_from_a_mounted_secret_file)
{
    VT_SKIP_IF_DIRECT();
    /* What a Kubernetes Secret mount looks like: the value, a newline. */
    char path[] = "/tmp/vt-secret-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert(write(fd, ALICE_PASS "\n", strlen(ALICE_PASS) + 1) == (ssize_t)strlen(ALICE_PASS) + 1);
    close(fd);
    const char *const args[] = {"--upstream-user", "alice", "--upstream-pass-file", path, NULL};
    start_proxy(args);
    unlink(path);
    assert_client_served_as("alice");
    assert_secret_hidden(ALICE_PASS);
}

Test(credentials, the_environment_wins_over_the_directive)
{
    VT_SKIP_IF_DIRECT();
    setenv("VERBPROXY_UPSTREAM_PASS", UPSTREAM_PASS, 1);
    static const char *const args[] = {"--upstream-pass", "not-this-one", NULL};
    start_proxy(args);
    unsetenv("VERBPROXY_UPSTREAM_PASS");
    assert_client_served_as("default");
    assert_secret_hidden(UPSTREAM_PASS);
}

Test(credentials, a_user_without_a_password_is_refused_at_start)
{
    VT_SKIP_IF_DIRECT();
    static const char *const args[] = {"--upstream-user", "alice", NULL};
    vt_proxy_opts po = {.extra_args = args};
    vt_proxy *p = vt_proxy_start(redis, &po);
    cr_assert(p == NULL, "verbproxy started with upstream-user and no password");
}

static bool log_has_accepted_again(void *arg)
{
    (void)arg;
    char *log = vt_proxy_log(proxy);
    bool yes = strstr(log, "AUTH accepted again") != NULL;
    free(log);
    return yes;
}

static int count_in_log(const char *needle)
{
    char *log = vt_proxy_log(proxy);
    int n = 0;
    for (const char *p = log; (p = strstr(p, needle)); p++)
        n++;
    free(log);
    return n;
}

Test(credentials, a_wrong_password_answers_every_waiting_request_and_is_logged_once)
{
    VT_SKIP_IF_DIRECT();
    static const char *const args[] = {"--upstream-pass", "wrong-pass", NULL};
    start_proxy(args);
    char want1[256], want[1024];
    snprintf(want1, sizeof(want1), "-ERR upstream unavailable: %s: " WRONGPASS_TEXT "\r\n", proxy->upstream);
    snprintf(want, sizeof(want), "%s%s%s", want1, want1, want1);
    /* Clients arriving one after another, each pipelining three requests,
     * every one of them waiting for a connection that is refused. */
    for (int i = 0; i < 6; i++) {
        int fd = vt_must_sock(proxy->port);
        vt_buf req = {0};
        vt_buf_cmd(&req, "GET", "cr:k", NULL);
        vt_buf_cmd(&req, i % 2 ? "BLPOP" : "PING", i % 2 ? "cr:q" : NULL, i % 2 ? "0" : NULL, NULL);
        vt_buf_cmd(&req, "LOCKRELEASE", "cr:lock", "tok", NULL);
        vt_exchange(fd, &req, want);
        vt_buf_free(&req);
        close(fd);
    }
    cr_assert_eq(count_in_log(WRONGPASS_TEXT), 1, "the refusal should be logged once");

    /* Redis takes that password now: the next request works, said once. */
    redisContext *admin = vt_must_connect(redis->port);
    redisReply *r = vt_cmd(admin, "AUTH %s", UPSTREAM_PASS);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(admin, "CONFIG SET requirepass wrong-pass");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    redisFree(admin);
    int fd = vt_must_sock(proxy->port);
    vt_buf req = {0};
    vt_buf_cmd(&req, "PING", NULL);
    vt_exchange(fd, &req, "+PONG\r\n");
    vt_buf_free(&req);
    close(fd);
    cr_assert(vt_wait_until(log_has_accepted_again, NULL, VT_READ_DEADLINE_MS), "no 'AUTH accepted again' line");
    cr_assert_geq(vt_proxy_stat(proxy->port, "upstream_auth_failures"), 6);
    cr_assert_eq(count_in_log(WRONGPASS_TEXT), 1, "the refusal should be logged once");
}

/* A proxy with the upstream password; one client sends `req` and gets
 * exactly `want` while bystanders on the shared connection go on. */
static void exchange_beside_bystanders(vt_buf *req, const char *want)
{
    static const char *const args[] = {"--upstream-pass", UPSTREAM_PASS, NULL};
    start_proxy(args);
    vt_bystanders *b = vt_must_start_bystanders(proxy->port, 3, 20);
    int fd = vt_must_sock(proxy->port);
    vt_exchange(fd, req, want);
    vt_buf_free(req);
    close(fd);
    cr_assert(vt_bystanders_wait(b, 20, VT_READ_DEADLINE_MS), "the bystanders stopped being served");
    vt_assert_bystanders_ok(b);
}

/* RESET logs Redis's connection out (the default user, which has a
 * password); the proxy's AUTH follows at once, so the next command works,
 * also when the RESET's own reply was skipped. */
Test(credentials, reset_on_an_own_connection_is_followed_by_the_proxys_auth)
{
    VT_SKIP_IF_DIRECT();
    vt_buf req = {0};
    vt_buf_cmd(&req, "SET", "cr:r", "1", NULL);
    vt_buf_cmd(&req, "RESET", NULL);
    vt_buf_cmd(&req, "GET", "cr:r", NULL);
    vt_buf_cmd(&req, "SUBSCRIBE", "cr:ch", NULL);
    vt_buf_cmd(&req, "RESET", NULL);
    vt_buf_cmd(&req, "INCR", "cr:r", NULL);
    vt_buf_cmd(&req, "CLIENT", "REPLY", "SKIP", NULL);
    vt_buf_cmd(&req, "RESET", NULL);
    vt_buf_cmd(&req, "INCR", "cr:r", NULL);
    vt_buf_cmd(&req, "ACL", "WHOAMI", NULL);
    exchange_beside_bystanders(&req, "+OK\r\n+RESET\r\n$1\r\n1\r\n*3\r\n$9\r\nsubscribe\r\n$5\r\ncr:ch\r\n:1\r\n"
                                     "+RESET\r\n:2\r\n:3\r\n$7\r\ndefault\r\n");
}

/* The proxy has no password of its own: a client's AUTH goes to Redis and
 * makes its own connection that user (per-user ACLs keep working); a wrong
 * one leaves it as it was, as Redis does. Bystanders on the shared
 * connection never notice. */
Test(credentials, a_clients_own_auth_still_reaches_redis)
{
    VT_SKIP_IF_DIRECT();
    vt_buf req = {0};
    vt_buf_cmd(&req, "AUTH", "alice", "not-it", NULL);
    vt_buf_cmd(&req, "ACL", "WHOAMI", NULL);
    vt_buf_cmd(&req, "AUTH", "alice", ALICE_PASS, NULL);
    vt_buf_cmd(&req, "ACL", "WHOAMI", NULL);
    exchange_beside_bystanders(&req, "-" WRONGPASS_TEXT "\r\n$7\r\ndefault\r\n+OK\r\n$5\r\nalice\r\n");
}

/* test_proxy_auth.c - the proxy's own password and users.
 *
 * The proxy runs with `requirepass` and `user` lines in front of a Redis
 * without a password; a second redis-server, the reference, runs with the
 * same password and users (always Redis 7.0.15, whose words the proxy
 * uses, whatever server is upstream). Every situation (AUTH right, wrong, malformed;
 * HELLO in each of its forms; commands before AUTH; RESET; QUIT; Redis's
 * pre-auth limits; inline and multibulk) is sent on a new connection to
 * both, and the proxy must answer byte for byte what the reference
 * answers (a HELLO reply's client id, server and version aside: the
 * upstream's). AUTH never
 * reaches the upstream. Hostile clients (pre-auth limits) run beside
 * bystanders that authenticated. */
#include "tests/support/checks.h"

#define PROXY_PASS "pr0xy-pass"
#define DAVE_HASH "bc83b16ebf1230a0d7fb9258f402eae6458b671dc84b8616b895e0a1caaf93dc" /* sha256("davepw") */

static vt_redis *upstream, *reference;
static vt_proxy *proxy;

static void start_all(const char *const *redis_args, const char *const *proxy_args)
{
    upstream = vt_redis_start(NULL);
    cr_assert(upstream != NULL, "redis-server did not start (see stderr)");
    /* (the proxy answers these in Redis 7.0.15's words, whatever server is
     * upstream: that release is the reference) */
    vt_redis_opts ro = {.extra_args = redis_args, .binary = VT_REDIS_OWN_WORDS_BINARY};
    reference = vt_redis_start(&ro);
    cr_assert(reference != NULL, "the reference redis-server did not start (see stderr)");
    vt_proxy_opts po = {.extra_args = proxy_args};
    proxy = vt_proxy_start(upstream, &po);
    cr_assert(proxy != NULL, "verbproxy did not start (see stderr)");
}

static void setup_users(void)
{
    static const char *const redis_args[] = {"--requirepass",
                                             PROXY_PASS,
                                             "--user",
                                             "alice",
                                             "on",
                                             ">apw",
                                             "~*",
                                             "&*",
                                             "+@all",
                                             "--user",
                                             "bob",
                                             "off",
                                             ">bobpw",
                                             "--user",
                                             "carol",
                                             "on",
                                             "nopass",
                                             "~*",
                                             "&*",
                                             "+@all",
                                             "--user",
                                             "dave",
                                             "on",
                                             "#" DAVE_HASH,
                                             "~*",
                                             "&*",
                                             "+@all",
                                             NULL};
    static const char *const proxy_args[] = {
        "--requirepass", PROXY_PASS,        "--user", "alice on >apw ~* &* +@all", "--user", "bob off >bobpw",
        "--user",        "carol on nopass", "--user", "dave on #" DAVE_HASH,       NULL};
    start_all(redis_args, proxy_args);
}

static void setup_users_only(void)
{
    static const char *const redis_args[] = {"--user", "alice", "on", ">apw", "~*", "&*", "+@all", NULL};
    static const char *const proxy_args[] = {"--user", "alice on >apw", NULL};
    start_all(redis_args, proxy_args);
}

/* `user default off` (Redis's way to turn the default user off) and a
 * `user default` line without a password: in Redis no client is then
 * authenticated on connecting (clientSetDefaultAuth: nopass and not
 * disabled), and a config file's `user default` line starts from `reset`
 * (ACLLoadConfiguredUsers), which ends nopass. */
static void setup_default_off(void)
{
    static const char *const redis_args[] = {"--user", "default", "off", "--user", "alice", "on",
                                             ">apw",   "~*",      "&*",  "+@all",  NULL};
    static const char *const proxy_args[] = {"--user", "default off", "--user", "alice on >apw", NULL};
    start_all(redis_args, proxy_args);
}

static void setup_default_on(void)
{
    static const char *const redis_args[] = {"--user", "default", "on", "--user", "alice", "on",
                                             ">apw",   "~*",      "&*", "+@all",  NULL};
    static const char *const proxy_args[] = {"--user", "default on", "--user", "alice on >apw", NULL};
    start_all(redis_args, proxy_args);
}

static void teardown(void)
{
    vt_env e = {.redis = upstream, .proxy = proxy};
    vt_env_stop(&e);
    vt_redis_free(reference);
    upstream = reference = NULL;
    proxy = NULL;
}

TestSuite(proxy_auth, .init = setup_users, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);
TestSuite(proxy_auth_default_off, .init = setup_default_off, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);
TestSuite(proxy_auth_default_on, .init = setup_default_on, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);
TestSuite(proxy_auth_users_only, .init = setup_users_only, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

/* A HELLO reply names the client's id on its server: made the same. */
static void mask_client_id(vt_buf *b)
{
    static const char key[] = "$2\r\nid\r\n:";
    char *p = b->len ? memmem(b->data, b->len, key, sizeof(key) - 1) : NULL;
    if (!p) return;
    p += sizeof(key) - 1;
    char *end = p;
    while (end < b->data + b->len && *end >= '0' && *end <= '9')
        end++;
    if (end == p) return;
    *p = '0'; /* one digit left */
    memmove(p + 1, end, (size_t)(b->data + b->len - end));
    b->len -= (size_t)(end - p - 1);
}

/* A HELLO reply's server and version are the upstream's (the reference is
 * always 7.0.15): the bulk after `key` becomes "*". */
static void mask_bulk_after(vt_buf *b, const char *key)
{
    size_t klen = strlen(key);
    char *p = b->len ? memmem(b->data, b->len, key, klen) : NULL;
    if (!p || p[klen] != '$') return;
    char *v = p + klen;
    long n = strtol(v + 1, NULL, 10);
    char *start = strstr(v, "\r\n");
    if (!start || n < 0 || start + 2 + n + 2 > b->data + b->len) return;
    char *end = start + 2 + n + 2;
    static const char star[] = "$1\r\n*\r\n";
    size_t tail = (size_t)(b->data + b->len - end);
    memmove(v + sizeof(star) - 1, end, tail); /* (never longer than what it replaces) */
    memcpy(v, star, sizeof(star) - 1);
    b->len = (size_t)(v + sizeof(star) - 1 - b->data) + tail;
}

/* Send `req` on a new connection to port; read `replies` replies, or up to
 * EOF when `closes`. */
static void ask(int port, const char *req, size_t len, size_t replies, bool closes, vt_buf *got)
{
    int fd = vt_must_sock(port);
    cr_assert(vt_sock_send(fd, req, len), "send failed");
    if (closes)
        cr_assert(vt_sock_read_eof(fd, got, VT_READ_DEADLINE_MS), "port %d kept the connection open: \"%s\"",
                  port, vt_buf_escaped(got));
    else
        cr_assert(vt_sock_read_replies(fd, got, replies, VT_READ_DEADLINE_MS),
                  "port %d: %zu replies wanted, got \"%s\"", port, replies, vt_buf_escaped(got));
    close(fd);
    mask_client_id(got);
    mask_bulk_after(got, "$6\r\nserver\r\n");
    mask_bulk_after(got, "$7\r\nversion\r\n");
}

/* The proxy answers what the reference answers, byte for byte. */
static void same_as_redis(const char *req, size_t len, size_t replies, bool closes)
{
    vt_buf want = {0}, got = {0};
    ask(reference->port, req, len, replies, closes, &want);
    ask(proxy->port, req, len, replies, closes, &got);
    cr_assert(want.len == got.len && memcmp(want.data, got.data, want.len) == 0,
              "for \"%s\"\n  redis: \"%s\"\n  proxy: \"%s\"", vt_escape(req, len), vt_buf_escaped(&want),
              vt_buf_escaped(&got));
    vt_buf_free(&want);
    vt_buf_free(&got);
}

#define SAME(req, replies) same_as_redis((req), strlen(req), (replies), false)

Test(proxy_auth, every_auth_answer_is_redis_own)
{
    VT_SKIP_IF_DIRECT();
    SAME("GET pa:k\r\n", 1);
    SAME("MULTI\r\n", 1);
    SAME("SELECT 0\r\nPING\r\n", 2);
    SAME("AUTH not-it\r\n", 1);
    SAME("*2\r\n$4\r\nAUTH\r\n$6\r\nnot-it\r\n", 1);
    SAME("AUTH\r\n", 1);
    SAME("AUTH a b c\r\n", 1);
    SAME("AUTH alice wrong\r\nGET pa:k\r\n", 2);
    SAME("AUTH alice apw\r\nGET pa:k\r\n", 2);
    SAME("auth " PROXY_PASS "\r\nAUTH wrong\r\nGET pa:k\r\n", 3);    /* a failed AUTH keeps the last one */
    SAME("AUTH default " PROXY_PASS "\r\nRESET\r\nGET pa:k\r\n", 3); /* RESET logs out */
    SAME("AUTH bob bobpw\r\n", 1);                                   /* off */
    SAME("AUTH carol anything\r\n", 1);                              /* nopass */
    SAME("AUTH dave davepw\r\nAUTH dave davepW\r\n", 2);             /* #hash */
    SAME("AUTH nobody x\r\n", 1);
    SAME("HELLO\r\n", 1);
    SAME("HELLO 3\r\n", 1);
    SAME("HELLO 3 AUTH alice wrong\r\n", 1);
    SAME("HELLO 4 AUTH alice apw\r\n", 1);
    SAME("HELLO x\r\n", 1);
    SAME("HELLO 3 FOO\r\n", 1);
    SAME("HELLO 2 AUTH alice\r\n", 1);
    SAME("HELLO 2 SETNAME a\x01z AUTH alice apw\r\n", 1);
    SAME("HELLO 2 AUTH alice apw AUTH bob bobpw\r\n", 1);
    SAME("HELLO 2 AUTH alice apw SETNAME pa-name\r\nCLIENT GETNAME\r\nGET pa:k\r\n", 3);
    SAME("HELLO 3 AUTH dave davepw\r\nGET pa:k\r\n", 2);
    SAME("AUTH " PROXY_PASS "\r\nHELLO 2\r\n", 2);
    /* Issue 22, finding 9: HELLO's options act in order, an AUTH there and
     * then, and the first error ends it (the PING after says whether the
     * client is authenticated); EXEC before AUTH is an aborted
     * transaction. */
    SAME("HELLO 2 AUTH default wrong AUTH default " PROXY_PASS "\r\nPING\r\n", 2);
    SAME("HELLO 2 AUTH default " PROXY_PASS " AUTH default wrong\r\nPING\r\n", 2);
    SAME("HELLO 3 AUTH default " PROXY_PASS " SETNAME \"a b\"\r\nPING\r\n", 2);
    SAME("HELLO 2 SETNAME \"a b\" AUTH default " PROXY_PASS "\r\nPING\r\n", 2);
    SAME("HELLO 2 AUTH alice apw FOO\r\nPING\r\n", 2);
    SAME("HELLO 2 AUTH alice wrong AUTH carol x\r\nCLIENT GETNAME\r\n", 2);
    SAME("MULTI\r\nPING\r\nEXEC\r\nPING\r\n", 4);
    SAME("EXEC\r\n", 1);
    SAME("RESET\r\nRESET x\r\nGET pa:k\r\nRESET\r\n", 4);
    same_as_redis("QUIT\r\n", 6, 0, true);
    /* Pre-auth limits: 11 arguments, a 16385-byte bulk; and gone after AUTH. */
    SAME("AUTH " PROXY_PASS "\r\nDEL pa:l\r\nRPUSH pa:l 1 2 3 4 5 6 7 8 9 10\r\n", 3);
    const char *more = "PING\r\n*11\r\n$5\r\nRPUSH\r\n$4\r\npa:m\r\n";
    same_as_redis(more, strlen(more), 0, true);
    vt_buf big = {0};
    vt_buf_append_str(&big, "PING\r\n*2\r\n$4\r\nECHO\r\n$16385\r\n");
    same_as_redis(big.data, big.len, 0, true);
    vt_buf_free(&big);
    /* None of it reached the upstream as AUTH. */
    redisContext *up = vt_must_connect(upstream->port);
    redisReply *r = vt_cmd(up, "INFO commandstats");
    cr_assert(r && r->type == REDIS_REPLY_STRING && !strstr(r->str, "cmdstat_auth:"),
              "AUTH reached the upstream:\n%s", r ? r->str : "");
    freeReplyObject(r);
    redisFree(up);
    cr_assert_geq(vt_proxy_stat_auth(proxy->port, PROXY_PASS, "auth_failures"), 5);
}

Test(proxy_auth_users_only, without_requirepass_the_default_user_needs_none)
{
    VT_SKIP_IF_DIRECT();
    SAME("AUTH anything\r\n", 1);
    SAME("GET pa:k\r\nHELLO 2\r\n", 2);
    SAME("AUTH alice wrong\r\nAUTH alice apw\r\nGET pa:k\r\n", 3);
    SAME("HELLO 3 AUTH alice apw\r\nPING\r\n", 2);
    SAME("RESET\r\nGET pa:k\r\n", 2);
    /* No limit: nobody is unauthenticated. */
    SAME("DEL pa:l\r\nRPUSH pa:l 1 2 3 4 5 6 7 8 9 10\r\n", 2);
}

/* A client that has not authenticated, where the default user is off or
 * has no password: Redis answers -NOAUTH, and so must the proxy; nothing
 * of it reaches the upstream. (The proxy used to take every client for
 * the default user, authenticated, unless that user had a password: SET
 * ran on Redis with no password given.) Authenticated bystanders go on. */
static void default_user_is_closed(void)
{
    redisContext *up = vt_must_connect(upstream->port);
    freeReplyObject(vt_cmd(up, "DEL pa:pwn"));
    vt_bystanders *b = vt_bystanders_start_auth_user(proxy->port, 4, "alice", "apw");
    cr_assert(b && vt_bystanders_wait(b, 40, VT_READ_DEADLINE_MS), "the bystanders did not get going");
    SAME("SET pa:pwn 1\r\n", 1);
    SAME("GET pa:k\r\nPING\r\n", 2);
    SAME("AUTH x\r\n", 1);
    SAME("AUTH default x\r\n", 1);
    SAME("HELLO 3 AUTH default x\r\n", 1);
    SAME("HELLO 2\r\n", 1);
    SAME("EXEC\r\n", 1);
    SAME("RESET\r\nRESET x\r\nGET pa:k\r\nRESET\r\n", 4);
    SAME("AUTH alice apw\r\nGET pa:k\r\n", 2);
    SAME("AUTH alice apw\r\nRESET\r\nSET pa:pwn 1\r\n", 3); /* RESET: the default user again */
    redisReply *r = vt_cmd(up, "EXISTS pa:pwn");
    cr_assert(r && r->type == REDIS_REPLY_INTEGER && r->integer == 0,
              "a client that never authenticated wrote pa:pwn on the upstream");
    freeReplyObject(r);
    redisFree(up);
    cr_assert(vt_bystanders_wait(b, 40, VT_READ_DEADLINE_MS), "the bystanders stopped being served");
    vt_assert_bystanders_ok(b);
}

Test(proxy_auth_default_off, a_disabled_default_user_authenticates_nobody)
{
    VT_SKIP_IF_DIRECT();
    default_user_is_closed();
}

Test(proxy_auth_default_on, a_default_user_line_without_password_authenticates_nobody)
{
    VT_SKIP_IF_DIRECT();
    default_user_is_closed();
}

/* Redis 7.0.15 as Debian ships it (the CVE-2025-21605 fix, as 7.2.8,
 * 7.4.3) closes a client that has not authenticated once its replies
 * overflow the 16 KiB reply buffer before they are written: 600 pipelined
 * GETs (600 -NOAUTH, 20,400 bytes) in one write are answered with the
 * close and nothing else. The proxy's own users must do the same (it
 * answered all 600 and kept the connection); authenticated bystanders go
 * on, and 400 (13,600 bytes) are answered as by Redis. */
Test(proxy_auth, unauthenticated_replies_over_the_reply_buffer_close_as_in_redis)
{
    VT_SKIP_IF_DIRECT();
    vt_bystanders *b = vt_bystanders_start_auth(proxy->port, 4, PROXY_PASS);
    cr_assert(b && vt_bystanders_wait(b, 40, VT_READ_DEADLINE_MS), "the bystanders did not get going");
    vt_buf req = {0};
    for (int i = 0; i < 400; i++)
        vt_buf_append_str(&req, "GET pa:k\r\n");
    same_as_redis(req.data, req.len, 400, false);
    for (int i = 0; i < 200; i++)
        vt_buf_append_str(&req, "GET pa:k\r\n");
    same_as_redis(req.data, req.len, 0, true);
    vt_buf_free(&req);
    cr_assert(vt_bystanders_wait(b, 40, VT_READ_DEADLINE_MS), "the bystanders stopped being served");
    vt_assert_bystanders_ok(b);
}

static void expect_error_then_close(const char *req, size_t len, const char *want)
{
    vt_expect_error_then_close(proxy->port, req, len, want);
}

/* Clients that never authenticate share the upstream connection with those
 * that did: their oversized requests close only themselves. */
Test(proxy_auth, pre_auth_limits_cost_only_the_sender)
{
    VT_SKIP_IF_DIRECT();
    vt_bystanders *b = vt_bystanders_start_auth(proxy->port, 4, PROXY_PASS);
    cr_assert(b && vt_bystanders_wait(b, 40, VT_READ_DEADLINE_MS), "the bystanders did not get going");
    vt_buf req = {0};
    vt_buf_cmd(&req, "PING", NULL);
    vt_buf_cmd(&req, "RPUSH", "pa:l", "1", "2", "3", "4", "5", "6", "7", "8", "9", NULL);
    expect_error_then_close(req.data, req.len,
                            "-NOAUTH Authentication required.\r\n"
                            "-ERR Protocol error: unauthenticated multibulk length\r\n");
    vt_buf_reset(&req);
    char *value = malloc(16385);
    memset(value, 'v', 16385);
    const char *argv[] = {"AUTH", value};
    const size_t lens[] = {4, 16385};
    vt_buf_cmd_argv(&req, 2, argv, lens);
    expect_error_then_close(req.data, req.len, "-ERR Protocol error: unauthenticated bulk length\r\n");
    free(value);
    vt_buf_free(&req);
    cr_assert(vt_bystanders_wait(b, 40, VT_READ_DEADLINE_MS), "the bystanders stopped being served");
    vt_assert_bystanders_ok(b);
}

/* What only grants everything is taken; what restricts is refused at
 * start, since the proxy cannot enforce it. */
Test(proxy_auth, a_restricting_acl_rule_is_refused_at_start)
{
    VT_SKIP_IF_DIRECT();
    static const char *const args[] = {"--user", "eve on >x ~cache:* +@all", NULL};
    vt_proxy_opts po = {.extra_args = args};
    vt_proxy *p = vt_proxy_start(upstream, &po);
    cr_assert(p == NULL, "verbproxy started with a rule it cannot enforce");
}

/* Does the proxy's /proc/<pid>/<what> (NULs and all) hold `secret`? */
static bool proc_file_holds(const char *what, const char *secret)
{
    int held = vt_proc_file_holds(proxy->pid, what, secret);
    cr_assert(held >= 0, "cannot read /proc/%d/%s", (int)proxy->pid, what);
    return held;
}

/* The proxy's own passwords (requirepass, the user lines' >password) are
 * wiped from its command line once read, and never in its log or
 * VERBPROXY STATS, as the upstream password is (test_credentials). */
Test(proxy_auth, its_own_passwords_are_not_in_ps_the_log_or_stats)
{
    VT_SKIP_IF_DIRECT();
    const char *const secrets[] = {PROXY_PASS, ">apw", ">bobpw", DAVE_HASH};
    redisContext *c = vt_must_connect(proxy->port);
    redisReply *r = vt_cmd(c, "AUTH alice apw");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(c, "AUTH wrong-one");
    vt_assert_error(r, "WRONGPASS");
    freeReplyObject(r);
    r = vt_cmd(c, "VERBPROXY STATS");
    cr_assert(r && r->type == REDIS_REPLY_STRING, "%s", VT_DESCRIBE(r));
    char *log = vt_proxy_log(proxy);
    for (size_t i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++) {
        cr_assert(!proc_file_holds("cmdline", secrets[i]), "%s is in /proc/<pid>/cmdline (ps)", secrets[i]);
        cr_assert(!strstr(r->str, secrets[i]), "%s is in VERBPROXY STATS", secrets[i]);
        cr_assert(!strstr(log, secrets[i]), "%s is in the proxy's log:\n%s", secrets[i], log);
    }
    cr_assert(proc_file_holds("cmdline", "--requirepass"), "the check reads the wrong file");
    free(log);
    freeReplyObject(r);
    redisFree(c);
}

/* How many HELLOs the redis-server behind c has run (INFO commandstats). */
static long long hello_calls(redisContext *c)
{
    redisReply *r = vt_cmd(c, "INFO commandstats");
    cr_assert(r && r->type == REDIS_REPLY_STRING, "%s", VT_DESCRIBE(r));
    const char *at = strstr(r->str, "cmdstat_hello:calls=");
    long long n = at ? strtoll(at + strlen("cmdstat_hello:calls="), NULL, 10) : 0;
    freeReplyObject(r);
    return n;
}

/* Send req to fd in two writes, the first `first` bytes read by the other
 * end before the rest is sent (a large request arriving in pieces), and
 * read one reply. */
static void send_in_two_reads(int fd, const vt_buf *req, size_t first, vt_buf *got)
{
    cr_assert(vt_sock_send(fd, req->data, first), "send failed");
    cr_assert(vt_sock_wait_taken(fd, VT_READ_DEADLINE_MS), "the first %zu bytes were not read", first);
    cr_assert(vt_sock_send(fd, req->data + first, req->len - first), "send failed");
    cr_assert(vt_sock_read_replies(fd, got, 1, VT_READ_DEADLINE_MS), "no reply: \"%s\"", vt_buf_escaped(got));
}

/* Issue 22, finding 1: a large request sent in pieces before AUTH used to
 * be streamed to Redis as it arrived, past the proxy's own password (the
 * gate looked only at whole requests), and the script ran: the client read
 * the secret. Every request now passes the one gate (client_admit) before
 * any byte of it goes upstream, whole or streamed: this one is held whole
 * and answered -NOAUTH, as by a Redis with the same password. Once the
 * client has authenticated, the same request is streamed and runs. */
Test(proxy_auth, a_large_request_in_pieces_before_auth_is_refused)
{
    VT_SKIP_IF_DIRECT();
    redisContext *up = vt_must_connect(upstream->port);
    freeReplyObject(vt_cmd(up, "SET pa:secret the-secret"));
    redisContext *ref = vt_must_connect(reference->port);
    freeReplyObject(vt_cmd(ref, "AUTH %s", PROXY_PASS));
    freeReplyObject(vt_cmd(ref, "SET pa:secret the-secret"));
    redisFree(ref);
    vt_bystanders *b = vt_bystanders_start_auth(proxy->port, 4, PROXY_PASS);
    cr_assert(b && vt_bystanders_wait(b, 40, VT_READ_DEADLINE_MS), "the bystanders did not get going");

    vt_buf req = {0}, want = {0}, got = {0};
    /* A script counting its runs in pa:ran and reading pa:secret. */
    vt_buf_big_preauth_eval(&req, "redis.call('incr','pa:ran') return redis.call('get','pa:secret')");
    cr_assert_gt(req.len, 70000);
    int rfd = vt_must_sock(reference->port);
    send_in_two_reads(rfd, &req, 70000, &want);
    close(rfd);
    cr_assert_str_eq(vt_buf_escaped(&want), "-NOAUTH Authentication required.\\r\\n");

    int fd = vt_must_sock(proxy->port);
    send_in_two_reads(fd, &req, 70000, &got);
    cr_assert(got.len == want.len && memcmp(got.data, want.data, want.len) == 0,
              "before AUTH, a request in pieces got \"%s\" (Redis: \"%s\")", vt_buf_escaped(&got),
              vt_buf_escaped(&want));
    redisReply *r = vt_cmd(up, "EXISTS pa:ran");
    cr_assert(r && r->type == REDIS_REPLY_INTEGER && r->integer == 0, "the script ran on Redis");
    freeReplyObject(r);

    /* Pipelined behind a command, and inside MULTI (which Redis refuses
     * before AUTH too): the same. */
    vt_buf piped = {0};
    vt_buf_append_str(&piped, "MULTI\r\nPING\r\n");
    size_t head = piped.len;
    vt_buf_append(&piped, req.data, req.len);
    vt_buf_reset(&want);
    vt_buf_reset(&got);
    rfd = vt_must_sock(reference->port);
    cr_assert(vt_sock_send(rfd, piped.data, head + 70000) && vt_sock_wait_taken(rfd, VT_READ_DEADLINE_MS));
    cr_assert(vt_sock_send(rfd, piped.data + head + 70000, piped.len - head - 70000));
    cr_assert(vt_sock_read_replies(rfd, &want, 3, VT_READ_DEADLINE_MS));
    close(rfd);
    cr_assert(vt_sock_send(fd, piped.data, head + 70000) && vt_sock_wait_taken(fd, VT_READ_DEADLINE_MS));
    cr_assert(vt_sock_send(fd, piped.data + head + 70000, piped.len - head - 70000));
    cr_assert(vt_sock_read_replies(fd, &got, 3, VT_READ_DEADLINE_MS), "got \"%s\"", vt_buf_escaped(&got));
    cr_assert(got.len == want.len && memcmp(got.data, want.data, want.len) == 0,
              "pipelined before AUTH: \"%s\" (Redis: \"%s\")", vt_buf_escaped(&got), vt_buf_escaped(&want));
    vt_buf_free(&piped);
    r = vt_cmd(up, "EXISTS pa:ran");
    cr_assert(r && r->type == REDIS_REPLY_INTEGER && r->integer == 0, "the script ran on Redis");
    freeReplyObject(r);

    /* The same client, authenticated: the same request is served. */
    vt_buf_reset(&got);
    const char auth[] = "AUTH " PROXY_PASS "\r\n";
    cr_assert(vt_sock_send(fd, auth, sizeof(auth) - 1));
    cr_assert(vt_sock_read_replies(fd, &got, 1, VT_READ_DEADLINE_MS) && vt_buf_contains(&got, "+OK\r\n"),
              "AUTH: \"%s\"", vt_buf_escaped(&got));
    vt_buf_reset(&got);
    send_in_two_reads(fd, &req, 70000, &got);
    cr_assert_str_eq(vt_buf_escaped(&got), "$10\\r\\nthe-secret\\r\\n");

    /* A HELLO with AUTH over 64 KiB is the proxy's to judge: read whole,
     * answered WRONGPASS, never streamed to Redis with its password. */
    static char pass[70000];
    memset(pass, 'p', sizeof(pass));
    const char *hargv[] = {"HELLO", "2", "AUTH", "alice", pass};
    const size_t hlens[] = {5, 1, 4, 5, sizeof(pass)};
    vt_buf hello = {0};
    vt_buf_cmd_argv(&hello, 5, hargv, hlens);
    vt_buf_reset(&got);
    long long hellos = hello_calls(up); /* the proxy's own, setting up its connections */
    send_in_two_reads(fd, &hello, 66000, &got);
    cr_assert_str_eq(vt_buf_escaped(&got),
                     "-WRONGPASS invalid username-password pair or user is disabled.\\r\\n");
    vt_buf_free(&hello);
    cr_assert_eq(hello_calls(up), hellos, "the HELLO reached the upstream");
    close(fd);

    cr_assert(vt_bystanders_wait(b, 40, VT_READ_DEADLINE_MS), "the bystanders stopped being served");
    vt_assert_bystanders_ok(b);
    vt_buf_free(&req);
    vt_buf_free(&want);
    vt_buf_free(&got);
    redisFree(up);
}

/* Twenty clients that never authenticate send RESET and stay: the proxy
 * answers +RESET itself (nothing of theirs reached Redis), so they cost
 * Redis no connection. Forwarded, each RESET took a connection of its own
 * (RESET changes connection state): clients without the password could
 * hold Redis's maxclients. (Found by the hostile probe of the gate.) */
Test(proxy_auth, reset_before_auth_costs_redis_no_connection)
{
    VT_SKIP_IF_DIRECT();
    /* (With shared-upstreams 0 every client has its connection from the
     * start, as without the proxy.) */
    if (vt_proxy_shared_upstreams(proxy) == 0) cr_skip_test("a shared connection's story");
    vt_bystanders *b = vt_bystanders_start_auth(proxy->port, 4, PROXY_PASS);
    cr_assert(b && vt_bystanders_wait(b, 40, VT_READ_DEADLINE_MS), "the bystanders did not get going");
    redisContext *up = vt_must_connect(upstream->port);
    long long before = vt_info_int(up, "clients", "connected_clients");
    int fds[20];
    for (int i = 0; i < 20; i++) {
        fds[i] = vt_must_sock(proxy->port);
        vt_buf got = {0};
        cr_assert(vt_sock_send_str(fds[i], "RESET\r\n") &&
                  vt_sock_read_replies(fds[i], &got, 1, VT_READ_DEADLINE_MS));
        cr_assert_str_eq(vt_buf_escaped(&got), "+RESET\\r\\n");
        vt_buf_free(&got);
    }
    cr_assert_leq(vt_info_int(up, "clients", "connected_clients"), before,
                  "RESET before AUTH opened connections on Redis");
    for (int i = 0; i < 20; i++)
        close(fds[i]);
    redisFree(up);
    cr_assert(vt_bystanders_wait(b, 40, VT_READ_DEADLINE_MS), "the bystanders stopped being served");
    vt_assert_bystanders_ok(b);
}

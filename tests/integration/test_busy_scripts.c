/* test_busy_scripts.c - an operator stops a runaway script through the proxy.
 *
 * A client runs a script (or function) that never ends. Redis, past
 * busy-reply-threshold, answers every other connection -BUSY except for the
 * few commands that exist for this moment: SCRIPT KILL, FUNCTION KILL,
 * FUNCTION STATS, SHUTDOWN NOSAVE. Through the proxy the script may run on
 * the shared upstream connection, which Redis does not read while it runs,
 * so those commands must reach Redis some other way (the proxy's side
 * connection; SHUTDOWN moves the client to a connection of its own). Each
 * story checks what the operator and the script's client see against what
 * Redis itself answers (the suite passes with VP_TEST_DIRECT=1), and that
 * the bystanders on the shared connection get every reply, right and in
 * order, once the script is gone.
 *
 * Bystanders run during the script only where their replies are the
 * proxy's to keep: on a shared connection they wait behind the script; on
 * connections of their own (integration-own/, direct) Redis itself answers
 * them -BUSY meanwhile, so there they start once the script is over. */
#include <sys/socket.h>

#include "tests/support/bystander.h"
#include "tests/support/checks.h"

#define BUSY_SCRIPT "while true do end"
/* SHA-1 of BUSY_SCRIPT, as Redis names it in the kill error. */
#define BUSY_SCRIPT_SHA "694a5fe1ddb97a4c6a1bf299d9537c7d3d0f84e7"
#define BUSY_LIBRARY                                                                                         \
    "#!lua name=vtbusy\n"                                                                                    \
    "redis.register_function{function_name='spin', callback=function() while true do end end, "              \
    "flags={'no-writes'}}"
#define BYSTANDERS 4

static vt_env env;

static void setup(void)
{
    /* (busy-reply-threshold's old name: Redis 6.2 knows only that one) */
    static const char *const args[] = {"--lua-time-limit", "100", NULL};
    vt_env_start(&env, &(vt_redis_opts){.extra_args = args}, NULL);
}

static void teardown(void)
{
    vt_env_stop(&env);
}

TestSuite(busy_scripts, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

/* ---- helpers ---- */

/* Redis's -BUSY text (without the "-"), naming the kill that would work;
 * Valkey 8 says "Valkey is busy". (One buffer: use before the next call.) */
static const char *busy_text(const char *kill)
{
    static char text[128];
    snprintf(text, sizeof(text), "BUSY %s is busy running a script. You can only call %s or SHUTDOWN NOSAVE.",
             vt_server_says(), kill);
    return text;
}

/* What the client running BUSY_SCRIPT gets once it is killed: Redis's
 * words, which changed in 7.0. (One buffer.) */
static const char *killed_reply(void)
{
    static char text[192];
    if (vt_redis_version() >= 700)
        snprintf(text, sizeof(text),
                 "-ERR Script killed by user with SCRIPT KILL... script: %s, on @user_script:1.\r\n",
                 BUSY_SCRIPT_SHA);
    else
        snprintf(
            text, sizeof(text),
            "-ERR Error running script (call to f_%s): @user_script:1: Script killed by user with SCRIPT "
            "KILL...\r\n",
            BUSY_SCRIPT_SHA);
    return text;
}

/* Redis answers a new direct connection -BUSY: a script has run past
 * busy-reply-threshold. */
static bool redis_is_busy(void *arg)
{
    (void)arg;
    return vt_redis_busy(env.redis->port);
}

static void wait_busy(void)
{
    cr_assert(vt_wait_until(redis_is_busy, NULL, VT_READ_DEADLINE_MS),
              "Redis never became busy with the script");
}

/* Bystanders that may run while the script does (see the top), or NULL. */
static vt_bystanders *bystanders_during_script(void)
{
    if (vt_proxy_shared_upstreams(env.proxy) == 0) return NULL;
    vt_bystanders *b = vt_bystanders_start(env.proxy->port, BYSTANDERS);
    cr_assert(b, "bystanders did not start");
    cr_assert(vt_bystanders_wait(b, 50, VT_READ_DEADLINE_MS), "bystanders were not served before the script");
    return b;
}

/* Once the script is over every bystander is served again, and every reply
 * each one got was right, in order, in time. */
static void bystanders_served_after(vt_bystanders *b)
{
    if (!b) b = vt_bystanders_start(env.proxy->port, BYSTANDERS);
    cr_assert(b, "bystanders did not start");
    cr_assert(vt_bystanders_wait(b, 50, VT_READ_DEADLINE_MS), "bystanders were not served after the script");
    vt_assert_bystanders_ok(b);
}

/* A raw connection that sends `req` (the script) and does not wait. */
static int start_script(const char *cmd, const char *arg1, const char *arg2)
{
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0};
    vt_buf_cmd(&req, cmd, arg1, arg2, NULL);
    cr_assert(vt_sock_send_buf(fd, &req), "send failed");
    vt_buf_free(&req);
    return fd;
}

static void expect_reply_then_open(int fd, const char *want)
{
    vt_buf got = {0};
    vt_expect_bytes(fd, &got, want);
    vt_buf_free(&got);
    /* and the connection goes on */
    vt_buf req = {0};
    vt_buf_cmd(&req, "PING", NULL);
    vt_exchange(fd, &req, "+PONG\r\n");
    vt_buf_free(&req);
}

/* ---- stories ---- */

Test(busy_scripts, script_kill_through_the_proxy_stops_a_busy_script_run_through_it)
{
    vt_bystanders *b = bystanders_during_script();
    int runner = start_script("EVAL", BUSY_SCRIPT, "0");
    wait_busy();

    redisContext *op = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(op, "SCRIPT KILL");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    expect_reply_then_open(runner, killed_reply());
    /* nothing is running now: Redis's own answer */
    r = vt_cmd(op, "SCRIPT KILL");
    vt_assert_error(r, "NOTBUSY No scripts in execution right now.");
    freeReplyObject(r);
    bystanders_served_after(b);
    redisFree(op);
    close(runner);
}

/* SHUTDOWN ABORT is answered by Redis while a script runs (issue 9 item 3
 * names it beside SCRIPT KILL): through the proxy it reaches Redis at
 * once, and gets Redis's own answer while the script is still running. */
Test(busy_scripts, shutdown_abort_through_the_proxy_is_answered_during_a_busy_script)
{
    VT_SKIP_BEFORE(700, "SHUTDOWN ABORT came with Redis 7.0");
    vt_bystanders *b = bystanders_during_script();
    int runner = start_script("EVAL", BUSY_SCRIPT, "0");
    wait_busy();
    redisContext *op = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(op, "SHUTDOWN ABORT");
    vt_assert_error(r, "ERR No shutdown in progress.");
    freeReplyObject(r);
    cr_assert(redis_is_busy(NULL), "the script was over before SHUTDOWN ABORT was answered");
    r = vt_cmd(op, "SCRIPT KILL");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    expect_reply_then_open(runner, killed_reply());
    bystanders_served_after(b);
    redisFree(op);
    close(runner);
}

Test(busy_scripts, function_kill_through_the_proxy_stops_a_busy_function)
{
    VT_SKIP_BEFORE(700, "functions came with Redis 7.0");
    redisContext *op = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(op, "FUNCTION LOAD %s", BUSY_LIBRARY);
    vt_assert_str(r, "vtbusy");
    freeReplyObject(r);
    vt_bystanders *b = bystanders_during_script();
    int runner = start_script("FCALL", "spin", "0");
    wait_busy();

    /* the operator sees what runs, then stops it */
    r = vt_cmd(op, "FUNCTION STATS");
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements >= 2, "FUNCTION STATS: %s", VT_DESCRIBE(r));
    vt_assert_str(r->element[0], "running_script");
    cr_assert(r->element[1]->type == REDIS_REPLY_ARRAY && r->element[1]->elements >= 2,
              "no script running: %s", VT_DESCRIBE(r));
    vt_assert_str(r->element[1]->element[1], "spin");
    freeReplyObject(r);
    r = vt_cmd(op, "SCRIPT KILL"); /* the wrong one for a function: Redis says so */
    vt_assert_error(r, busy_text("FUNCTION KILL"));
    freeReplyObject(r);
    r = vt_cmd(op, "FUNCTION KILL");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    expect_reply_then_open(runner, "-ERR Script killed by user with SCRIPT KILL... script: spin, on "
                                   "@user_function:2.\r\n");
    r = vt_cmd(op, "FUNCTION KILL");
    vt_assert_error(r, "NOTBUSY No scripts in execution right now.");
    freeReplyObject(r);
    bystanders_served_after(b);
    redisFree(op);
    close(runner);
}

Test(busy_scripts, a_kill_pipelined_behind_a_waiting_command_is_answered_in_request_order)
{
    vt_bystanders *b = bystanders_during_script();
    int runner = start_script("EVAL", BUSY_SCRIPT, "0");
    wait_busy();
    /* The operator's GET waits behind the script on a shared connection
     * (the proxy cannot answer for Redis) and is answered -BUSY by Redis
     * on a connection of its own; either way its reply comes first, then
     * the kill's. */
    int op = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, got = {0};
    vt_buf_cmd(&req, "GET", "bs:k", NULL);
    vt_buf_cmd(&req, "SCRIPT", "KILL", NULL);
    cr_assert(vt_sock_send_buf(op, &req));
    cr_assert(vt_sock_read_replies(op, &got, 2, VT_READ_DEADLINE_MS), "expected two replies, got \"%s\"",
              vt_buf_escaped(&got));
    char busy[160];
    snprintf(busy, sizeof(busy), "-%s\r\n+OK\r\n", busy_text("SCRIPT KILL"));
    bool waited = got.len == strlen("$-1\r\n+OK\r\n") && memcmp(got.data, "$-1\r\n+OK\r\n", got.len) == 0;
    bool refused = got.len == strlen(busy) && memcmp(got.data, busy, got.len) == 0;
    cr_assert(waited || refused, "expected the GET's reply then +OK, got \"%s\"", vt_buf_escaped(&got));
    cr_assert(!waited || vt_proxy_shared_upstreams(env.proxy) > 0,
              "a GET on a connection of its own was not answered -BUSY: \"%s\"", vt_buf_escaped(&got));
    vt_buf_reset(&got);
    vt_expect_bytes(runner, &got, killed_reply());
    bystanders_served_after(b);
    vt_buf_free(&got);
    vt_buf_free(&req);
    close(op);
    close(runner);
}

Test(busy_scripts, operators_who_leave_before_the_kill_is_answered_hurt_nobody)
{
    vt_bystanders *b = bystanders_during_script();
    int runner = start_script("EVAL", BUSY_SCRIPT, "0");
    wait_busy();
    /* each sends SCRIPT KILL and is gone before (or while) it is answered:
     * the proxy drops the replies owed to them */
    vt_buf req = {0};
    vt_buf_cmd(&req, "SCRIPT", "KILL", NULL);
    vt_buf_cmd(&req, "SCRIPT", "KILL", NULL);
    for (int i = 0; i < 20; i++) {
        int fd = vt_must_sock(env.proxy->port);
        cr_assert(vt_sock_send_buf(fd, &req));
        if (i % 2) shutdown(fd, SHUT_RDWR);
        close(fd);
    }
    /* one of them killed the script, or this does */
    redisContext *op = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(op, "SCRIPT KILL");
    cr_assert(r && (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR), "%s", VT_DESCRIBE(r));
    cr_assert(r->type == REDIS_REPLY_STATUS
                  ? strcmp(r->str, "OK") == 0
                  : strcmp(r->str, "NOTBUSY No scripts in execution right now.") == 0,
              "SCRIPT KILL: %s", VT_DESCRIBE(r));
    freeReplyObject(r);
    expect_reply_then_open(runner, killed_reply());
    /* and the side of the proxy they used still serves */
    r = vt_cmd(op, "SCRIPT KILL");
    vt_assert_error(r, "NOTBUSY No scripts in execution right now.");
    freeReplyObject(r);
    bystanders_served_after(b);
    vt_buf_free(&req);
    redisFree(op);
    close(runner);
}

/* The id of the connection Redis shows with this last command, or -1. */
static long long client_id_with_cmd(redisContext *admin, const char *cmd)
{
    redisReply *r = vt_cmd(admin, "CLIENT LIST");
    cr_assert(r && r->type == REDIS_REPLY_STRING, "CLIENT LIST: %s", VT_DESCRIBE(r));
    char needle[64];
    snprintf(needle, sizeof(needle), " cmd=%s ", cmd);
    long long id = -1;
    for (const char *line = r->str; line && *line;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char *end = strchr(line, '\n');
        char one[1024];
        snprintf(one, sizeof(one), "%.*s ", (int)(end ? end - line : (long)strlen(line)), line);
        if (strstr(one, needle) && strncmp(one, "id=", 3) == 0) id = strtoll(one + 3, NULL, 10);
    }
    freeReplyObject(r);
    return id;
}

typedef struct lost_wait {
    long long base;
} lost_wait;

static bool an_upstream_was_lost(void *arg)
{
    lost_wait *w = arg;
    return vt_proxy_stat(env.proxy->port, "upstream_lost") > w->base;
}

Test(busy_scripts, a_side_connection_redis_closed_is_opened_again_for_the_next_kill)
{
    VT_SKIP_IF_DIRECT();
    if (vt_proxy_shared_upstreams(env.proxy) == 0)
        cr_skip_test("no shared connection, so no side connection");
    vt_bystanders *b = vt_bystanders_start(env.proxy->port, BYSTANDERS);
    cr_assert(b, "bystanders did not start");
    redisContext *op = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(op, "SCRIPT KILL");
    vt_assert_error(r, "NOTBUSY");
    freeReplyObject(r);

    /* Redis closes the side connection (the one whose last command was
     * the kill); the operator and the bystanders are on the shared one */
    redisContext *admin = vt_must_connect(env.redis->port);
    const char *kill_cmd = vt_redis_version() >= 700 ? "script|kill" : "script"; /* (CLIENT LIST's cmd=) */
    long long side = client_id_with_cmd(admin, kill_cmd);
    cr_assert(side > 0, "Redis shows no connection that sent SCRIPT KILL");
    lost_wait w = {.base = vt_proxy_stat(env.proxy->port, "upstream_lost")};
    r = vt_cmd(admin, "CLIENT KILL ID %lld", side);
    vt_assert_int(r, 1);
    freeReplyObject(r);
    cr_assert(vt_wait_until(an_upstream_was_lost, &w, VT_READ_DEADLINE_MS), "the proxy never saw it go");

    /* the next kill opens another one; nobody else noticed */
    r = vt_cmd(op, "SCRIPT KILL");
    vt_assert_error(r, "NOTBUSY");
    freeReplyObject(r);
    cr_assert(client_id_with_cmd(admin, kill_cmd) > side, "the kill did not go on a new side connection");
    cr_assert(vt_bystanders_wait(b, 50, VT_READ_DEADLINE_MS), "bystanders were not served after it");
    vt_assert_bystanders_ok(b);
    redisFree(admin);
    redisFree(op);
}

/* Redis's port refuses connections: it has exited. */
static bool redis_gone(void *arg)
{
    (void)arg;
    int fd = vt_sock_tcp(env.redis->port);
    if (fd < 0) return true;
    close(fd);
    return false;
}

Test(busy_scripts, shutdown_nosave_through_the_proxy_stops_a_busy_redis)
{
    /* the operator's client has used the shared connection before (a move
     * then sends something of the proxy's ahead of its command) */
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, got = {0};
    vt_buf_cmd(&req, "PING", NULL);
    vt_exchange(fd, &req, "+PONG\r\n");
    int runner = start_script("EVAL", BUSY_SCRIPT, "0");
    wait_busy();
    redisContext *op = vt_must_connect(env.proxy->port);
    /* without NOSAVE Redis refuses while busy */
    redisReply *r = vt_cmd(op, "SHUTDOWN");
    vt_assert_error(r, busy_text("SCRIPT KILL"));
    freeReplyObject(r);
    redisFree(op);

    vt_buf_cmd(&req, "SHUTDOWN", "NOSAVE", NULL);
    cr_assert(vt_sock_send_buf(fd, &req));
    /* as from Redis: no reply, the connection closes, for the script's client too */
    cr_assert(vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS),
              "the connection stayed open after SHUTDOWN NOSAVE");
    cr_assert_eq(got.len, 0, "expected no reply to SHUTDOWN NOSAVE, got \"%s\"", vt_buf_escaped(&got));
    vt_buf_reset(&got);
    cr_assert(vt_sock_read_eof(runner, &got, VT_READ_DEADLINE_MS), "the script's client was not closed");
    cr_assert_eq(got.len, 0, "expected no reply to the script, got \"%s\"", vt_buf_escaped(&got));
    cr_assert(vt_wait_until(redis_gone, NULL, VT_READ_DEADLINE_MS), "Redis is still there");
    close(fd);
    close(runner);

    if (!vt_direct_mode()) {
        /* the proxy goes on, and says Redis is not there */
        redisContext *c = vt_must_connect(env.proxy->port);
        r = vt_cmd(c, "PING");
        vt_assert_error(r, "ERR upstream unavailable: ");
        freeReplyObject(r);
        redisFree(c);
    }
    vt_buf_free(&req);
    vt_buf_free(&got);
}

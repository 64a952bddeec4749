/* test_monitor.c - MONITOR through the proxy, and RESET back out of it.
 *
 * A monitoring connection receives one line per command any client runs, with
 * no request of its own pending: the proxy must stream them as they come. */
#include "tests/support/checks.h"

static vt_env env;

static void setup(void)
{
    vt_env_start(&env, NULL, NULL);
}

static void teardown(void)
{
    vt_env_stop(&env);
}

TestSuite(monitor, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

Test(monitor, monitor_sees_another_clients_commands_and_reset_ends_it)
{
    int watcher = vt_must_sock(env.proxy->port);
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(watcher, "MONITOR\r\n"));
    vt_expect_bytes(watcher, &got, "+OK\r\n");
    vt_buf_reset(&got);

    redisContext *app = vt_must_connect(env.proxy->port);
    for (int i = 0; i < 3; i++) {
        redisReply *r = vt_cmd(app, "SET mon:key value-%d", i);
        vt_assert_status(r, "OK");
        freeReplyObject(r);
    }

    /* one status line per command, in order: +<time> [0 <addr>] "SET" ... */
    cr_assert(
        vt_sock_read_contains(watcher, &got, "\"SET\" \"mon:key\" \"value-2\"\r\n", VT_READ_DEADLINE_MS),
        "MONITOR did not show the SETs; got \"%s\"", vt_buf_escaped(&got));
    const char *l0 = strstr(got.data, "\"SET\" \"mon:key\" \"value-0\"\r\n");
    const char *l1 = strstr(got.data, "\"SET\" \"mon:key\" \"value-1\"\r\n");
    const char *l2 = strstr(got.data, "\"SET\" \"mon:key\" \"value-2\"\r\n");
    cr_assert(l0 && l1 && l2 && l0 < l1 && l1 < l2, "lines missing or out of order: \"%s\"",
              vt_buf_escaped(&got));
    cr_assert(got.data[0] == '+', "a MONITOR line is a status reply, got \"%s\"", vt_buf_escaped(&got));
    cr_assert_eq(vt_resp_count_replies(got.data, got.len), 3u, "expected exactly three lines, got \"%s\"",
                 vt_buf_escaped(&got));
    vt_buf_reset(&got);

    /* RESET: the connection stops monitoring and answers normally again */
    cr_assert(vt_sock_send_str(watcher, "RESET\r\n"));
    cr_assert(vt_sock_read_contains(watcher, &got, "+RESET\r\n", VT_READ_DEADLINE_MS),
              "no +RESET; got \"%s\"", vt_buf_escaped(&got));
    cr_assert(got.len >= 8 && memcmp(got.data + got.len - 8, "+RESET\r\n", 8) == 0,
              "bytes after +RESET: \"%s\"", vt_buf_escaped(&got));
    vt_buf_reset(&got);

    redisReply *r = vt_cmd(app, "SET mon:key after-reset");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    cr_assert(vt_sock_send_str(watcher, "PING\r\nGET mon:key\r\n"));
    vt_expect_bytes(watcher, &got, "+PONG\r\n$11\r\nafter-reset\r\n");

    vt_buf_free(&got);
    redisFree(app);
    close(watcher);
}

Test(monitor, a_monitor_that_disconnects_does_not_disturb_others)
{
    int watcher = vt_must_sock(env.proxy->port);
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(watcher, "MONITOR\r\n"));
    vt_expect_bytes(watcher, &got, "+OK\r\n");
    close(watcher);

    redisContext *app = vt_must_connect(env.proxy->port);
    for (int i = 0; i < 100; i++) {
        redisReply *r = vt_cmd(app, "INCR mon:n");
        vt_assert_int(r, i + 1);
        freeReplyObject(r);
    }
    vt_buf_free(&got);
    redisFree(app);
}

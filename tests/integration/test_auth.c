/* test_auth.c - a password-protected Redis behind the proxy.
 *
 * The proxy does not authenticate on its own: each client authenticates its
 * own upstream connection with AUTH or HELLO ... AUTH, exactly as it would
 * talking to Redis, and one client's AUTH does not open the door for another. */
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

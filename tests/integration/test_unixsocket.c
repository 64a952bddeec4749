/* test_unixsocket.c - unix sockets on either side of the proxy.
 *
 * Clients may reach the proxy on its --unixsocket as well as on TCP, and the
 * proxy may reach Redis on Redis's unix socket (--upstream /path/redis.sock). */
#include "tests/support/checks.h"

TestSuite(unixsocket, .timeout = VT_TEST_TIMEOUT_S);

static vt_env env;

static void teardown(void)
{
    vt_env_stop(&env);
}

/* the proxy listens on a unix socket too; Redis is reached over TCP */
static void setup_listener(void)
{
    vt_env_start(&env, &(vt_redis_opts){.unixsocket = true}, &(vt_proxy_opts){.unixsocket = true});
}

/* Redis is reached on its unix socket */
static void setup_upstream(void)
{
    vt_env_start(&env, &(vt_redis_opts){.unixsocket = true}, &(vt_proxy_opts){.upstream_unix = true});
}

static void set_and_get(redisContext *c, const char *key, const char *value)
{
    redisReply *r = vt_cmd(c, "SET %s %s", key, value);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(c, "GET %s", key);
    vt_assert_str(r, value);
    freeReplyObject(r);
}

Test(unixsocket, a_client_on_the_proxys_unix_socket, .init = setup_listener, .fini = teardown)
{
    redisContext *over_unix = vt_connect_unix(env.proxy->unixsocket);
    cr_assert(over_unix, "could not connect to %s", env.proxy->unixsocket);
    set_and_get(over_unix, "us:unix", "from-unix");

    /* TCP clients share the same Redis */
    redisContext *over_tcp = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(over_tcp, "GET us:unix");
    vt_assert_str(r, "from-unix");
    freeReplyObject(r);

    /* raw bytes too: a pipeline over the unix socket */
    int fd = vt_sock_unix(env.proxy->unixsocket);
    cr_assert(fd >= 0);
    vt_buf got = {0};
    cr_assert(vt_sock_send_str(fd, "PING\r\nINCR us:n\r\nINCR us:n\r\n"));
    vt_expect_bytes(fd, &got, "+PONG\r\n:1\r\n:2\r\n");
    vt_buf_free(&got);
    close(fd);

    redisFree(over_tcp);
    redisFree(over_unix);
}

Test(unixsocket, the_proxy_reaches_redis_over_its_unix_socket, .init = setup_upstream, .fini = teardown)
{
    redisContext *c = vt_must_connect(env.proxy->port);
    set_and_get(c, "us:upstream", "via-unix");
    redisReply *r = vt_cmd(c, "CLIENT SETNAME unix-upstream-client");
    vt_assert_status(r, "OK");
    freeReplyObject(r);

    /* Redis itself says the connection came over its unix socket */
    if (!vt_direct_mode()) {
        redisContext *admin = vt_must_connect(env.redis->port);
        r = vt_cmd(admin, "CLIENT LIST");
        cr_assert(r && r->type == REDIS_REPLY_STRING, "CLIENT LIST: %s", VT_DESCRIBE(r));
        const char *line = strstr(r->str, "name=unix-upstream-client");
        cr_assert(line, "no client named unix-upstream-client in %s", r->str);
        while (line > r->str && line[-1] != '\n')
            line--;
        const char *end = strchr(line, '\n');
        cr_assert(strstr(line, "flags=U") && strstr(line, "flags=U") < end, "not a unix socket client: %.*s",
                  (int)(end - line), line);
        freeReplyObject(r);
        redisFree(admin);
    }
    redisFree(c);
}

Test(unixsocket, both_sides_on_unix_sockets, .init = setup_upstream, .fini = teardown)
{
    /* setup_upstream does not listen on a unix socket: add a second proxy
     * that does both */
    vt_proxy *both = vt_proxy_start(env.redis, &(vt_proxy_opts){.unixsocket = true, .upstream_unix = true});
    cr_assert(both, "verbproxy did not start");
    redisContext *c = vt_connect_unix(both->unixsocket);
    cr_assert(c, "could not connect to %s", both->unixsocket);
    set_and_get(c, "us:both", "unix-unix");
    redisFree(c);
    cr_expect(vt_proxy_alive(both), "the second verbproxy died");
    vt_proxy_free(both);
}

Test(unixsocket, a_missing_unix_upstream_is_reported_with_its_path, .init = setup_upstream, .fini = teardown)
{
    VT_SKIP_IF_DIRECT();
    char path[256];
    snprintf(path, sizeof(path), "%s.missing", env.redis->unixsocket);
    vt_proxy *lost = vt_proxy_start_upstream(path, &(vt_proxy_opts){.connect_timeout_ms = 500});
    cr_assert(lost, "verbproxy did not start");

    int fd = vt_must_sock(lost->port);
    vt_buf got = {0};
    char want[300];
    snprintf(want, sizeof(want), "-ERR upstream unavailable: %s: ", path);
    cr_assert(vt_sock_send_str(fd, "PING\r\n"));
    cr_assert(vt_sock_read_contains(fd, &got, "\r\n", 2500), "no reply; got \"%s\"", vt_buf_escaped(&got));
    cr_assert(strncmp(got.data, want, strlen(want)) == 0, "expected \"%s<reason>\\r\\n\", got \"%s\"", want,
              vt_buf_escaped(&got));
    vt_buf_free(&got);
    close(fd);
    vt_proxy_free(lost);
}

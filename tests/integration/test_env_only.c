/* A container's way of configuring verbproxy: no flags, no file, only
 * VERBPROXY_* environment variables (what a Kubernetes `env:` list or
 * `docker run -e` gives). The proxy serves with them alone; the file, the
 * environment and the flags stack in that order; a typo in a variable's
 * name stops start-up naming it; a secret from the environment does not
 * stay in /proc/<pid>/environ.
 *
 * Registered once (CMakeLists.txt): nothing here depends on the upstream
 * mode, and the proxies are started by hand, with exactly the environment
 * each story gives them. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/checks.h"
#include "tests/support/client.h"
#include "tests/support/servers.h"

static vt_redis *redis;
static pid_t proxy_pid;
static char proxy_log[64];

static void setup(void)
{
    vt_ignore_sigpipe();
    redis = vt_redis_start(&(vt_redis_opts){.tls = VT_REDIS_TLS_NONE});
    cr_assert(redis != NULL, "redis-server did not start");
    snprintf(proxy_log, sizeof(proxy_log), "/tmp/vt-env-log-XXXXXX");
    int fd = mkstemp(proxy_log);
    cr_assert(fd >= 0);
    close(fd);
}

/* SIGTERM, then SIGKILL at a deadline; the exit status (-1: killed). */
static int stop_proxy(void)
{
    if (!proxy_pid) return 0;
    kill(proxy_pid, SIGTERM);
    int st = 0;
    long long deadline = vt_now_ms() + VT_STOP_DEADLINE_MS;
    while (waitpid(proxy_pid, &st, WNOHANG) == 0) {
        if (vt_now_ms() > deadline) {
            kill(proxy_pid, SIGKILL);
            waitpid(proxy_pid, &st, 0);
            break;
        }
        usleep(5000); /* polling the child's state, not waiting for an event */
    }
    proxy_pid = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void teardown(void)
{
    stop_proxy();
    vt_redis_free(redis);
    if (getenv("VP_TEST_VERBOSE")) {
        char *log = vt_read_file(proxy_log);
        fprintf(stderr, "---- verbproxy log ----\n%s", log);
        free(log);
    }
    unlink(proxy_log);
}

TestSuite(env_only, .init = setup, .fini = teardown, .timeout = 60);

/* Start VP_BINARY with exactly `env` and the arguments `args` (may be
 * NULL), output to proxy_log. Dies with the test's worker. */
static pid_t spawn(char *const *env, const char *const *args)
{
    const char *argv[16] = {"verbproxy"};
    int n = 1;
    for (; args && *args && n < 15; args++)
        argv[n++] = *args;
    argv[n] = NULL;
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(proxy_log, O_WRONLY | O_APPEND);
        dup2(fd, 1);
        dup2(fd, 2);
        execve(VP_BINARY, (char *const *)argv, env);
        _exit(127);
    }
    return pid;
}

typedef struct wait_port {
    int port;
    pid_t pid;
    bool exited;
} wait_port;

/* A quiet connect (vt_sock_tcp says every refusal on stderr). */
static bool port_listens(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

static bool port_accepts_or_exited(void *arg)
{
    wait_port *w = arg;
    if (waitpid(w->pid, NULL, WNOHANG) == w->pid) return w->exited = true;
    return port_listens(w->port);
}

static void start_proxy(char *const *env, const char *const *args, int port)
{
    proxy_pid = spawn(env, args);
    wait_port w = {.port = port, .pid = proxy_pid};
    bool up = vt_wait_until(port_accepts_or_exited, &w, VT_START_DEADLINE_MS);
    char *log = vt_read_file(proxy_log);
    cr_assert(up && !w.exited, "verbproxy is not listening on %d: %s", port, log);
    free(log);
    if (w.exited) proxy_pid = 0;
}

/* Run to the end (start-up refused): the exit status and its output. */
static int run_to_exit(char *const *env, const char *const *args, char **out)
{
    pid_t pid = spawn(env, args);
    int st;
    long long deadline = vt_now_ms() + VT_START_DEADLINE_MS;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (vt_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            cr_assert_fail("verbproxy kept running with a bad environment");
        }
        usleep(5000); /* polling the child's state */
    }
    *out = vt_read_file(proxy_log);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void assert_serves(int port)
{
    redisContext *c = vt_must_connect(port);
    redisReply *r = vt_cmd(c, "SET env:k from-env");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(c, "GET env:k");
    vt_assert_str(r, "from-env");
    freeReplyObject(r);
    redisFree(c);
}

Test(env_only, a_proxy_configured_by_environment_variables_alone_serves)
{
    int port = vt_free_port();
    char vport[64], vupstream[96], vverb[512];
    snprintf(vport, sizeof(vport), "VERBPROXY_PORT=%d", port);
    snprintf(vupstream, sizeof(vupstream), "VERBPROXY_UPSTREAM=127.0.0.1:%d", redis->port);
    /* Two custom verbs in one variable, one a line (a YAML block scalar's shape). */
    snprintf(
        vverb, sizeof(vverb),
        "VERBPROXY_VERB=ENVTICK %s/lua/ztick.lua numkeys 1\nENVTICK2 %s/lua/zpage.lua numkeys 1 readonly\n",
        SOURCE_DIR, SOURCE_DIR);
    char *env[] = {vport,
                   vupstream,
                   "VERBPROXY_BIND=127.0.0.1",
                   "VERBPROXY_LOGLEVEL=warning",
                   "VERBPROXY_SHARED_UPSTREAMS=2",
                   vverb,
                   "PATH=/usr/bin:/bin",
                   NULL};
    start_proxy(env, NULL, port);
    assert_serves(port);

    /* The custom verbs from the variable are there. */
    redisContext *c = vt_must_connect(port);
    redisReply *r = vt_cmd(c, "COMMAND INFO envtick envtick2");
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2, "COMMAND INFO of the env's verbs");
    for (size_t i = 0; i < 2; i++)
        cr_assert_eq(r->element[i]->type, REDIS_REPLY_ARRAY, "verb %zu from VERBPROXY_VERB is unknown", i);
    freeReplyObject(r);
    redisFree(c);

    /* VERBPROXY_LOGLEVEL=warning took effect: no notice line ("ready"). */
    char *log = vt_read_file(proxy_log);
    cr_assert(strstr(log, "ready") == NULL, "a notice was logged at loglevel warning: %s", log);
    free(log);
    cr_assert_eq(stop_proxy(), 0);
}

Test(env_only, the_file_then_the_environment_then_the_flags)
{
    int file_port = vt_free_port(), env_port = vt_free_port(), flag_port = vt_free_port();
    char path[] = "/tmp/vt-env-conf-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    char conf[256];
    /* The file points at nothing and listens where nobody will look. */
    int n = snprintf(conf, sizeof(conf), "port %d\nupstream 127.0.0.1:1\nconnect-timeout 500\n", file_port);
    cr_assert_eq(write(fd, conf, (size_t)n), n);
    close(fd);
    char vport[64], vupstream[96];
    snprintf(vport, sizeof(vport), "VERBPROXY_PORT=%d", env_port);
    snprintf(vupstream, sizeof(vupstream), "VERBPROXY_UPSTREAM=127.0.0.1:%d", redis->port);
    char *env[] = {vport, vupstream, NULL};
    char fport[16];
    snprintf(fport, sizeof(fport), "%d", flag_port);
    const char *const args[] = {"--config", path, "--port", fport, NULL};
    start_proxy(env, args, flag_port);
    unlink(path);
    /* The environment's upstream beat the file's; the flag's port beat both. */
    assert_serves(flag_port);
    cr_assert(!port_listens(env_port), "something listens on the environment's port, overridden by --port");
    cr_assert(!port_listens(file_port), "something listens on the file's port");
    cr_assert_eq(stop_proxy(), 0);
}

Test(env_only, a_variable_that_names_no_directive_stops_start_up)
{
    char vupstream[96];
    snprintf(vupstream, sizeof(vupstream), "VERBPROXY_UPSTREAM=127.0.0.1:%d", redis->port);
    char *env[] = {vupstream, "VERBPROXY_MAX_CLIENTS=100", NULL};
    char *out;
    int rc = run_to_exit(env, NULL, &out);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, out);
    cr_assert(strstr(out, "VERBPROXY_MAX_CLIENTS: unknown directive 'max-clients'"), "%s", out);
    free(out);

    /* A bad value: the variable, and the directive's own reason. */
    cr_assert_eq(truncate(proxy_log, 0), 0);
    char *env2[] = {"VERBPROXY_UPSTREAM_TLS=maybe", NULL};
    rc = run_to_exit(env2, NULL, &out);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, out);
    cr_assert(strstr(out, "VERBPROXY_UPSTREAM_TLS: 'upstream-tls' must be no or yes, got 'maybe'"), "%s",
              out);
    free(out);
}

/* Is `needle` anywhere in the process's environ block (NUL-separated)? */
static bool environ_has(pid_t pid, const char *needle)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    FILE *f = fopen(path, "r");
    cr_assert(f != NULL);
    char buf[65536];
    size_t n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    size_t nl = strlen(needle);
    for (size_t i = 0; i + nl <= n; i++)
        if (memcmp(buf + i, needle, nl) == 0) return true;
    return false;
}

Test(env_only, a_secret_from_the_environment_leaves_proc_environ)
{
    int port = vt_free_port();
    char vport[64], vupstream[96];
    snprintf(vport, sizeof(vport), "VERBPROXY_PORT=%d", port);
    snprintf(vupstream, sizeof(vupstream), "VERBPROXY_UPSTREAM=127.0.0.1:%d", redis->port);
    char *env[] = {vport, vupstream, "VERBPROXY_REQUIREPASS=env-proxy-secret", NULL};
    start_proxy(env, NULL, port);
    /* The password works... */
    redisContext *c = vt_must_connect(port);
    redisReply *r = vt_cmd(c, "GET env:k");
    cr_assert(r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOAUTH", 6) == 0,
              "no NOAUTH before AUTH");
    freeReplyObject(r);
    r = vt_cmd(c, "AUTH env-proxy-secret");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    redisFree(c);
    /* ... and is not in what /proc shows; the other variables are. */
    cr_assert(!environ_has(proxy_pid, "env-proxy-secret"), "the secret is still in /proc/%d/environ",
              proxy_pid);
    cr_assert(environ_has(proxy_pid, vport), "the check reads the wrong file");
    cr_assert_eq(stop_proxy(), 0);
}

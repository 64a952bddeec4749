/* test_reload.c - SIGHUP reloads the --config file, clients stay connected.
 *
 * The operator's story: a custom verb is added, one removed, one's script
 * changed, the log level raised and lowered again, and Redis's password
 * rotated (CONFIG SET requirepass, then the new upstream-pass and SIGHUP),
 * while a client stays connected the whole time and bystanders check every
 * reply. Then a file with a bad line changes nothing and the log names the
 * file and the line. And `log-format json`, switched on by a reload: every
 * line after it is one JSON object (a strict little parser here). And TLS
 * files: a tls-port certificate rotated (new clients get the new one, a
 * session made before goes on) and the upstream's CA (refused, then
 * verified after the reload). */
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>

#include "tests/support/checks.h"
#include "tests/support/http.h"
#include "tests/support/prom.h"
#include "tests/support/tls_certs.h"
#include "tests/support/tls_client.h"

static vt_env env;
static vt_redis *other; /* upstream_moved_by_a_reload: the Redis the reload names */
static char dir[64];
static char conf_path[128];

static void write_file(const char *name, const char *text)
{
    char path[192];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert(f != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

static void teardown(void)
{
    vt_env_stop(&env);
    vt_redis_free(other);
    other = NULL;
    if (!dir[0]) return;
    const char *names[] = {"proxy.conf", "echo.lua", "gone.lua", "new.lua", "bad.lua"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char path[192];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(conf_path); /* (a story replaces the file with a directory) */
    rmdir(dir);
    dir[0] = '\0';
}

TestSuite(reload, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

/* A temp dir for the story's files (teardown removes them) and its
 * --config path. */
static void make_conf_dir(void)
{
    snprintf(dir, sizeof(dir), "/tmp/vt-reload-XXXXXX");
    cr_assert(mkdtemp(dir) != NULL);
    snprintf(conf_path, sizeof(conf_path), "%s/proxy.conf", dir);
}

static int count_in_log(const char *needle)
{
    char *log = vt_proxy_log(env.proxy);
    int n = 0;
    for (const char *p = log; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    free(log);
    return n;
}

typedef struct {
    const char *needle;
    int count;
} log_wait;

static bool log_has(void *arg)
{
    log_wait *w = arg;
    return count_in_log(w->needle) >= w->count;
}

/* SIGHUP, and wait for the reload's n-th outcome line. */
static void reload(const char *outcome, int nth)
{
    cr_assert(vt_proxy_signal(env.proxy, SIGHUP));
    log_wait w = {outcome, nth};
    cr_assert(vt_wait_until(log_has, &w, 5000), "no \"%s\" (#%d) in the log", outcome, nth);
}

static void expect_str(redisContext *c, const char *want, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    vt_assert_reply(r, c);
    vt_assert_str(r, want);
    freeReplyObject(r);
}

static long long proxy_stat(redisContext *c, const char *name)
{
    redisReply *r = vt_cmd(c, "VERBPROXY STATS");
    vt_assert_reply(r, c);
    cr_assert(r->type == REDIS_REPLY_STRING, "%s", VT_DESCRIBE(r));
    char key[64];
    snprintf(key, sizeof(key), "%s:", name);
    const char *p = strstr(r->str, key);
    cr_assert(p != NULL, "no %s in VERBPROXY STATS", name);
    long long v = atoll(p + strlen(key));
    freeReplyObject(r);
    return v;
}

/* The log after byte `from` has a debug line (redis format: the '.' mark). */
static bool debug_line_since(size_t from)
{
    char *log = vt_proxy_log(env.proxy);
    bool found = strlen(log) > from && strstr(log + from, " . ") != NULL;
    free(log);
    return found;
}

static size_t log_len(void)
{
    char *log = vt_proxy_log(env.proxy);
    size_t n = strlen(log);
    free(log);
    return n;
}

/* Redis with requirepass pw1, the proxy with a --config file, two custom
 * verbs and their scripts (read at start). */
static int mport; /* the admin endpoint's */

/* One sample of /metrics (-1: no such series). */
static double metric(const char *name, const char *labels)
{
    vt_http_resp h = vt_http_get(mport, "/metrics");
    cr_assert_eq(h.status, 200, "GET /metrics: %s", vt_buf_escaped(&h.raw));
    vt_prom p;
    char why[256];
    cr_assert(vt_prom_parse(h.body, h.body_len, &p, why, sizeof(why)), "not Prometheus text: %s", why);
    double v = vt_prom_get(&p, name, labels, -1);
    vt_prom_free(&p);
    vt_http_free(&h);
    return v;
}

static void start_with_scripts(void)
{
    VT_SKIP_IF_DIRECT();
    make_conf_dir();
    write_file("echo.lua", "return 'v1:' .. ARGV[1]\n");
    write_file("gone.lua", "return 'gone'\n");
    write_file("proxy.conf", "loglevel notice\n"
                             "upstream-pass pw1\n"
                             "verb myecho echo.lua numkeys 0\n"
                             "verb mygone gone.lua numkeys 0\n");
    static char mport_arg[16];
    mport = vt_free_port();
    snprintf(mport_arg, sizeof(mport_arg), "%d", mport);
    const char *args[] = {"--config", conf_path, "--metrics-port", mport_arg, NULL};
    vt_redis_opts ro = {.requirepass = "pw1"};
    vt_proxy_opts po = {.extra_args = args, .no_loglevel = true};
    vt_env_start(&env, &ro, &po);
}

Test(reload, verbs_loglevel_password_and_a_broken_file)
{
    start_with_scripts();
    redisContext *c1 = vt_must_connect(env.proxy->port);
    expect_str(c1, "v1:a", "MYECHO a");
    expect_str(c1, "gone", "MYGONE");
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, 2, 20);
    cr_assert(!debug_line_since(0), "a debug line at loglevel notice");

    /* Redis's password changes; the proxy is told with a reload. */
    redisContext *admin = vt_must_connect(env.redis->port);
    redisReply *r = vt_cmd(admin, "AUTH pw1");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(admin, "CONFIG SET requirepass pw2");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    write_file("echo.lua", "return 'v2:' .. ARGV[1]\n");
    write_file("new.lua", "return redis.call('SET', KEYS[1], ARGV[1])\n");
    write_file("proxy.conf", "loglevel debug\n"
                             "upstream-pass pw2\n"
                             "verb myecho echo.lua numkeys 0\n"
                             "verb mynew new.lua numkeys 1\n");
    size_t before = log_len();
    reload("config reloaded", 1);
    cr_assert_eq(count_in_log("verb mynew added"), 1);
    cr_assert_eq(count_in_log("verb mygone removed"), 1);
    cr_assert_eq(count_in_log("verb myecho changed"), 1);

    /* The same client, never reconnected: the new verbs. */
    expect_str(c1, "v2:a", "MYECHO a");
    r = vt_cmd(c1, "MYNEW reload:k %s", "fresh");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    expect_str(c1, "fresh", "GET reload:k");
    r = vt_cmd(c1, "MYGONE");
    vt_assert_error(r, "ERR unknown command");
    freeReplyObject(r);
    /* The metrics follow the verb table: the new verb has its series, the
     * gone one none, a kept one carries its count over. */
    cr_assert_eq(metric("verbproxy_commands_total", "cmd=\"mynew\""), 1);
    cr_assert_eq(metric("verbproxy_commands_total", "cmd=\"myecho\""), 2);
    cr_assert_eq(metric("verbproxy_commands_total", "cmd=\"mygone\""), -1);
    cr_assert_eq(metric("verbproxy_config_reloads_total", ""), 1);
    /* A new client: a new upstream connection, with the new password. */
    redisContext *c2 = vt_must_connect(env.proxy->port);
    expect_str(c2, "v2:b", "MYECHO b");
    expect_str(c2, "fresh", "GET reload:k");
    cr_assert(debug_line_since(before), "no debug line at loglevel debug");

    /* Back to notice: the debug lines stop. */
    write_file("proxy.conf", "loglevel notice\n"
                             "upstream-pass pw2\n"
                             "verb myecho echo.lua numkeys 0\n"
                             "verb mynew new.lua numkeys 1\n");
    reload("config reloaded", 2);
    before = log_len();
    redisContext *c3 = vt_must_connect(env.proxy->port);
    expect_str(c3, "v2:c", "MYECHO c");
    redisFree(c3);
    reload("config reloaded", 3); /* (a line after the client's, to wait for) */
    cr_assert(!debug_line_since(before), "a debug line after loglevel notice");

    /* A bad line 3: nothing changes, the log says where. */
    write_file("proxy.conf", "loglevel debug\n"
                             "upstream-pass nope\n"
                             "bogus-directive 1\n"
                             "verb myecho gone.lua numkeys 0\n");
    reload("config reload failed", 1);
    char where[192];
    snprintf(where, sizeof(where), "%s:3: unknown directive 'bogus-directive'", conf_path);
    cr_assert_eq(count_in_log(where), 1, "no \"%s\" in the log", where);
    before = log_len();
    expect_str(c1, "v2:a", "MYECHO a");
    redisContext *c4 = vt_must_connect(env.proxy->port);
    expect_str(c4, "v2:d", "MYECHO d"); /* still pw2 */
    cr_assert_eq(proxy_stat(c4, "reloads"), 3);
    cr_assert_eq(proxy_stat(c4, "reload_failures"), 1);
    cr_assert_eq(metric("verbproxy_config_reloads_total", ""), 3);
    cr_assert_eq(metric("verbproxy_config_reload_failures_total", ""), 1);
    redisFree(c4);
    reload("config reload failed", 2);
    cr_assert(!debug_line_since(before), "the broken file's loglevel took effect");

    vt_assert_bystanders_ok(b);
    redisFree(c1);
    redisFree(c2);
    redisFree(admin);
}

/* The verbs start_with_scripts defined, and the upstream password, still
 * in use on connection c. */
static void expect_the_first_config(redisContext *c)
{
    expect_str(c, "v1:a", "MYECHO a");
    expect_str(c, "gone", "MYGONE");
    redisReply *r = vt_cmd(c, "PING"); /* (Redis says -NOAUTH to a connection without pw1) */
    vt_assert_status(r, "PONG");
    freeReplyObject(r);
}

/* The config file replaced by a directory (a ConfigMap mount gone wrong),
 * then SIGHUP: the read error refuses the reload, with the reason, and the
 * settings stay: the upstream password and every custom verb, for the
 * client connected before and for a new one. Before, the read error looked
 * like an empty file: the reload applied the defaults, dropped the
 * password (a new connection's PING met Redis's -NOAUTH) and every custom
 * verb. */
Test(reload, a_config_replaced_by_a_directory_is_refused_and_changes_nothing)
{
    start_with_scripts();
    redisContext *c1 = vt_must_connect(env.proxy->port);
    expect_the_first_config(c1);
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, 2, 20);

    cr_assert_eq(unlink(conf_path), 0);
    cr_assert_eq(mkdir(conf_path, 0700), 0);
    reload("config reload failed", 1);
    char why[192];
    snprintf(why, sizeof(why), "%s: cannot read: Is a directory", conf_path);
    cr_assert_eq(count_in_log(why), 1, "no \"%s\" in the log", why);
    cr_assert_eq(count_in_log("config reloaded"), 0, "a reload was applied");

    expect_the_first_config(c1);
    redisContext *c2 = vt_must_connect(env.proxy->port);
    expect_the_first_config(c2);
    cr_assert_eq(proxy_stat(c2, "reloads"), 0);
    cr_assert_eq(proxy_stat(c2, "reload_failures"), 1);
    vt_assert_bystanders_ok(b);
    redisFree(c1);
    redisFree(c2);
}

/* A verb's script replaced by a FIFO (nobody writing), then SIGHUP: the
 * reload is refused at once with the reason, and the event loop never
 * waits on the FIFO: the bystanders and the client are served throughout,
 * the old verbs answer. Before, the reload's fopen waited for a writer,
 * inside the event loop: every client of the proxy with it. */
Test(reload, a_script_replaced_by_a_fifo_is_refused_without_stopping_the_loop)
{
    start_with_scripts();
    redisContext *c1 = vt_must_connect(env.proxy->port);
    expect_the_first_config(c1);
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, 2, 20);

    char fifo[192];
    snprintf(fifo, sizeof(fifo), "%s/gone.lua", dir);
    cr_assert_eq(unlink(fifo), 0);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    reload("config reload failed", 1);
    char why[256];
    snprintf(why, sizeof(why), "cannot read script %s: a FIFO, not a file", fifo);
    cr_assert_eq(count_in_log(why), 1, "no \"%s\" in the log", why);

    expect_the_first_config(c1);
    redisContext *c2 = vt_must_connect(env.proxy->port);
    expect_the_first_config(c2);
    vt_assert_bystanders_ok(b);
    redisFree(c1);
    redisFree(c2);
}

/* What SCRIPT LOAD of `body` answers straight from the story's Redis (its
 * password is pw1): the error text, malloc'd. */
static char *redis_refusal_of(const char *body)
{
    redisContext *admin = vt_must_connect(env.redis->port);
    redisReply *r = vt_cmd(admin, "AUTH pw1");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(admin, "SCRIPT LOAD %s", body);
    cr_assert(r && r->type == REDIS_REPLY_ERROR, "Redis loaded \"%s\": %s", body, VT_DESCRIBE(r));
    char *text = strdup(r->str);
    freeReplyObject(r);
    redisFree(admin);
    return text;
}

/* A reload that adds a verb whose script does not compile is refused, the
 * log saying the line, the verb and Redis's own compile error; the old
 * verbs stay and answer (one's script changed on disk meanwhile: still the
 * old one); the fixed script is taken by the next reload. Before, the verb
 * was taken: its callers got -NOSCRIPT, and /readyz failed soon after. */
Test(reload, a_verb_whose_script_does_not_compile_is_refused_and_the_old_verbs_kept)
{
    start_with_scripts();
    redisContext *c1 = vt_must_connect(env.proxy->port);
    expect_the_first_config(c1);
    vt_bystanders *b = vt_must_start_bystanders(env.proxy->port, 2, 20);

    const char *broken = "local n = redis.call('GET', KEYS[1])\nreturn +\n";
    char *redis_says = redis_refusal_of(broken);
    write_file("bad.lua", broken);
    write_file("echo.lua", "return 'v2:' .. ARGV[1]\n");
    write_file("proxy.conf", "loglevel notice\n"
                             "upstream-pass pw1\n"
                             "verb myecho echo.lua numkeys 0\n"
                             "verb mygone gone.lua numkeys 0\n"
                             "verb mybad bad.lua numkeys 0\n");
    reload("config reload failed", 1);
    char where[256];
    snprintf(where, sizeof(where), "%s:5: verb 'mybad'", conf_path);
    cr_assert_eq(count_in_log(where), 1, "no \"%s\" in the log", where);
    cr_assert_eq(count_in_log(redis_says), 1, "Redis says \"%s\"; not in the log", redis_says);
    free(redis_says);

    expect_the_first_config(c1);
    redisContext *c2 = vt_must_connect(env.proxy->port);
    expect_the_first_config(c2);
    redisReply *r = vt_cmd(c2, "MYBAD");
    vt_assert_error(r, "ERR unknown command");
    freeReplyObject(r);

    /* Fixed: the next reload takes it, and echo.lua's change with it. */
    write_file("bad.lua", "return 'fixed'\n");
    reload("config reloaded", 1);
    expect_str(c2, "fixed", "MYBAD");
    expect_str(c1, "v2:a", "MYECHO a");
    vt_assert_bystanders_ok(b);
    redisFree(c1);
    redisFree(c2);
}

/* ---- the upstream address ---- */

/* Where the proxy reaches r (its TLS port in the integration-tls variant). */
static void upstream_of(const vt_redis *r, char *out, size_t n)
{
    snprintf(out, n, "127.0.0.1:%d", vt_upstream_tls_mode() && r->tls_port ? r->tls_port : r->port);
}

static void expect_nil(redisContext *c, const char *cmd)
{
    redisReply *r = vt_cmd(c, cmd);
    vt_assert_reply(r, c);
    cr_assert_eq(r->type, REDIS_REPLY_NIL, "%s: %s", cmd, VT_DESCRIBE(r));
    freeReplyObject(r);
}

/* The `upstream` line changed by a reload (standalone): new connections go
 * to the new Redis (route.c's node takes the new address). A client on a
 * shared connection owing it nothing moves with it; a client's own
 * connection stays on the old Redis, with its state, until it leaves. */
Test(reload, upstream_moved_by_a_reload)
{
    VT_SKIP_IF_DIRECT();
    make_conf_dir();
    env.redis = vt_redis_start(NULL);
    other = vt_redis_start(NULL);
    cr_assert(env.redis && other, "redis-server did not start");
    char addr[64], text[128];
    upstream_of(env.redis, addr, sizeof(addr));
    snprintf(text, sizeof(text), "upstream %s\n", addr);
    write_file("proxy.conf", text);
    const char *args[] = {"--config", conf_path, NULL};
    vt_proxy_opts po = {.extra_args = args, .upstream_in_config = true, .no_loglevel = true};
    env.proxy = vt_proxy_start(env.redis, &po);
    cr_assert(env.proxy != NULL, "verbproxy did not start");

    redisContext *c1 = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(c1, "SET where first");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    expect_str(c1, "first", "GET where");

    upstream_of(other, addr, sizeof(addr));
    snprintf(text, sizeof(text), "upstream %s\n", addr);
    write_file("proxy.conf", text);
    reload("config reloaded", 1);

    /* A new client: the other Redis, which has no such key. */
    redisContext *c2 = vt_must_connect(env.proxy->port);
    expect_nil(c2, "GET where");
    r = vt_cmd(c2, "SET where second");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    /* The client from before: moved with the shared connections, or on
     * its own connection to the first Redis still. */
    expect_str(c1, vt_proxy_shared_upstreams(env.proxy) > 0 ? "second" : "first", "GET where");

    /* Each Redis, asked directly. */
    redisContext *d1 = vt_must_connect(env.redis->port), *d2 = vt_must_connect(other->port);
    expect_str(d1, "first", "GET where");
    expect_str(d2, "second", "GET where");
    redisFree(d1);
    redisFree(d2);
    redisFree(c1);
    redisFree(c2);
}

/* ---- log-format json ---- */

/* A JSON string at *p (after its opening quote): decoded into out. */
static bool json_string(const char **p, char *out, size_t cap)
{
    size_t n = 0;
    const char *s = *p;
    for (;;) {
        unsigned char ch = (unsigned char)*s++;
        if (ch == '"') break;
        if (ch < 0x20) return false; /* (NUL too: the end of the line) */
        if (ch == '\\') {
            char e = *s++;
            const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
            const char *k = e ? strchr(from, e) : NULL;
            if (k) {
                ch = (unsigned char)to[k - from];
            } else if (e == 'u') {
                unsigned v = 0;
                for (int i = 0; i < 4; i++) {
                    char h = *s++;
                    if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F')))
                        return false;
                    v = v * 16 + (unsigned)(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
                }
                if (v > 0x7f) return false; /* (the proxy escapes only control bytes) */
                ch = (unsigned char)v;
            } else {
                return false;
            }
        }
        if (n + 1 < cap) out[n++] = (char)ch;
    }
    out[n] = '\0';
    *p = s;
    return true;
}

typedef struct json_line {
    char time[64], role[32], level[32], msg[2048];
    long long pid;
    int fields;
} json_line;

/* One object of string and integer members, nothing else on the line. */
static bool json_parse_line(const char *s, json_line *out)
{
    memset(out, 0, sizeof(*out));
    if (*s++ != '{') return false;
    for (;;) {
        if (*s++ != '"') return false;
        char key[64], val[2048];
        if (!json_string(&s, key, sizeof(key))) return false;
        if (*s++ != ':') return false;
        bool is_str = *s == '"';
        long long num = 0;
        if (is_str) {
            s++;
            if (!json_string(&s, val, sizeof(val))) return false;
        } else {
            const char *start = s;
            if (*s == '-') s++;
            if (*s < '0' || *s > '9') return false;
            while (*s >= '0' && *s <= '9')
                s++;
            num = atoll(start);
        }
        out->fields++;
        if (!strcmp(key, "time") && is_str)
            snprintf(out->time, sizeof(out->time), "%.63s", val);
        else if (!strcmp(key, "role") && is_str)
            snprintf(out->role, sizeof(out->role), "%.31s", val);
        else if (!strcmp(key, "level") && is_str)
            snprintf(out->level, sizeof(out->level), "%.31s", val);
        else if (!strcmp(key, "msg") && is_str)
            memcpy(out->msg, val, sizeof(out->msg));
        else if (!strcmp(key, "pid") && !is_str)
            out->pid = num;
        else
            return false; /* an unknown or mistyped member */
        if (*s == ',') {
            s++;
            continue;
        }
        return *s == '}' && s[1] == '\0';
    }
}

/* "2026-12-02T13:45:00.123Z" */
static bool iso_time_ms(const char *t)
{
    const char *shape = "dddd-dd-ddTdd:dd:dd.dddZ";
    if (strlen(t) != strlen(shape)) return false;
    for (size_t i = 0; shape[i]; i++)
        if (shape[i] == 'd' ? (t[i] < '0' || t[i] > '9') : t[i] != shape[i]) return false;
    return true;
}

Test(reload, log_format_json_by_reload)
{
    VT_SKIP_IF_DIRECT();
    make_conf_dir();
    write_file("proxy.conf", "loglevel verbose\n");
    const char *args[] = {"--config", conf_path, NULL};
    vt_proxy_opts po = {.extra_args = args, .no_loglevel = true};
    vt_env_start(&env, NULL, &po);

    write_file("proxy.conf", "loglevel verbose\nlog-format json\n");
    reload("config reloaded", 1);
    /* A message with a quote and a backslash to escape. */
    write_file("proxy.conf", "log-format json\nloglevel we\\\"ird\n");
    reload("config reload failed", 1);
    redisContext *c = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(c, "PING");
    vt_assert_status(r, "PONG");
    freeReplyObject(r);
    redisFree(c);

    char *log = vt_proxy_log(env.proxy);
    int redis_lines = 0, json_lines = 0;
    bool seen_json = false, seen_weird = false;
    pid_t pid = env.proxy->pid;
    for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] != '{') {
            cr_assert(!seen_json, "a line that is not JSON after the switch: %s", line);
            char want[32];
            snprintf(want, sizeof(want), "%d:P ", (int)pid);
            cr_assert(!strncmp(line, want, strlen(want)), "not a redis-format line: %s", line);
            redis_lines++;
            continue;
        }
        seen_json = true;
        json_line j;
        cr_assert(json_parse_line(line, &j), "not one strict JSON object: %s", line);
        cr_assert_eq(j.fields, 5, "%s", line);
        cr_assert(iso_time_ms(j.time), "time \"%s\"", j.time);
        cr_assert_eq(j.pid, (long long)pid);
        cr_assert_str_eq(j.role, "proxy");
        cr_assert(!strcmp(j.level, "debug") || !strcmp(j.level, "verbose") || !strcmp(j.level, "notice") ||
                      !strcmp(j.level, "warning"),
                  "level \"%s\"", j.level);
        if (strstr(j.msg, "got 'we\\\"ird'")) seen_weird = true;
        json_lines++;
    }
    free(log);
    cr_assert(redis_lines >= 2, "%d redis-format lines before the switch", redis_lines);
    cr_assert(json_lines >= 3, "%d JSON lines", json_lines);
    cr_assert(seen_weird, "the refused value was not in a JSON message, unescaped back");
}

/* A TLS client's PING answered. */
static void expect_tls_pong(vt_tls_client *t)
{
    vt_buf got = {0};
    cr_assert(vt_tls_send_str(t, "PING\r\n") && vt_tls_read_replies(t, &got, 1, VT_READ_DEADLINE_MS),
              "a TLS client's PING was not answered");
    cr_assert(got.len == 7 && memcmp(got.data, "+PONG\r\n", 7) == 0, "got %s", vt_buf_escaped(&got));
    vt_buf_free(&got);
}

/* Certificate rotation: SIGHUP re-reads tls-cert-file and tls-key-file.
 * New TLS clients get the new certificate (here one that names
 * wrong.example, which a client checking "localhost" refuses, so the
 * change shows); a TLS client connected before keeps its session and is
 * served; a reload back serves new clients again. */
Test(reload, tls_certificates_by_reload)
{
    VT_SKIP_IF_DIRECT();
    cr_assert(vt_certs_get(), "cannot make the test certificates");
    make_conf_dir();
    int tls_port = vt_free_port();
    char conf[1024];
    const char *certs[] = {"server", "wrong-name", "server"};
    snprintf(conf, sizeof(conf),
             "loglevel notice\ntls-port %d\ntls-cert-file %s\ntls-key-file %s\ntls-auth-clients no\n",
             tls_port, vt_cert_path("server.crt"), vt_cert_path("server.key"));
    write_file("proxy.conf", conf);
    const char *args[] = {"--config", conf_path, NULL};
    vt_env_start(&env, NULL, &(vt_proxy_opts){.extra_args = args, .no_loglevel = true});

    char why[256];
    vt_tls_client *before = vt_tls_connect(tls_port, NULL, NULL, why, sizeof(why));
    cr_assert(before, "TLS connect: %s", why);
    expect_tls_pong(before);
    for (int i = 1; i < 3; i++) {
        char crt[64], key[64];
        snprintf(crt, sizeof(crt), "%s.crt", certs[i]);
        snprintf(key, sizeof(key), "%s.key", certs[i]);
        snprintf(conf, sizeof(conf),
                 "loglevel notice\ntls-port %d\ntls-cert-file %s\ntls-key-file %s\ntls-auth-clients no\n",
                 tls_port, vt_cert_path(crt), vt_cert_path(key));
        write_file("proxy.conf", conf);
        reload("config reloaded", i);
        vt_tls_client *t = vt_tls_connect(tls_port, NULL, NULL, why, sizeof(why));
        if (i == 1) {
            cr_assert_null(t, "a new client was given the old certificate after the reload");
            cr_assert(strstr(why, "certificate verify failed"), "refused for another reason: %s", why);
        } else {
            cr_assert(t, "the certificate reloaded back is refused: %s", why);
            expect_tls_pong(t);
            vt_tls_free(t);
        }
        expect_tls_pong(before); /* the session made before goes on */
    }
    vt_tls_free(before);
}

typedef struct get_wait {
    redisContext *c;
    char last[256];
} get_wait;

/* A SET through the proxy answered +OK (the last answer kept). */
static bool set_works(void *arg)
{
    get_wait *w = arg;
    redisReply *r = vt_cmd(w->c, "SET rl:tls v");
    snprintf(w->last, sizeof(w->last), "%s", VT_DESCRIBE(r));
    bool ok = r && r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "OK");
    freeReplyObject(r);
    return ok;
}

/* The upstream's CA rotated: the proxy trusts another CA at first (every
 * request gets the failed handshake's reason), then SIGHUP re-reads
 * upstream-tls-ca-cert-file and the next connection verifies; the client
 * stays connected throughout. */
Test(reload, upstream_tls_ca_by_reload)
{
    VT_SKIP_IF_DIRECT();
    cr_assert(vt_certs_get(), "cannot make the test certificates");
    make_conf_dir();
    other = vt_redis_start(&(vt_redis_opts){.tls = VT_REDIS_TLS_ALSO});
    cr_assert(other, "redis-server with TLS did not start");
    char conf[512], up[64];
    snprintf(conf, sizeof(conf), "loglevel notice\nupstream-tls yes\nupstream-tls-ca-cert-file %s\n",
             vt_cert_path("other-ca.crt"));
    write_file("proxy.conf", conf);
    snprintf(up, sizeof(up), "127.0.0.1:%d", other->tls_port);
    const char *args[] = {"--config", conf_path, NULL};
    env.proxy = vt_proxy_start_upstream(up, &(vt_proxy_opts){.extra_args = args, .no_loglevel = true});
    cr_assert(env.proxy, "verbproxy did not start");

    get_wait w = {.c = vt_must_connect(env.proxy->port)};
    cr_assert(!set_works(&w), "served through an upstream of a CA it does not trust");
    cr_assert(strstr(w.last, "upstream unavailable") && strstr(w.last, "TLS: ") &&
                  strstr(w.last, "certificate"),
              "refused for another reason: %s", w.last);
    snprintf(conf, sizeof(conf), "loglevel notice\nupstream-tls yes\nupstream-tls-ca-cert-file %s\n",
             vt_cert_path("ca.crt"));
    write_file("proxy.conf", conf);
    reload("config reloaded", 1);
    cr_assert(vt_wait_until(set_works, &w, 10000), "not served after the CA's reload: %s", w.last);
    redisFree(w.c);
}

/* A limit by SIGHUP: maxclients lowered below the clients already
 * connected closes none of them, and the next one is refused with Redis's
 * text; raised again, the next one is served. */
Test(reload, maxclients_by_reload)
{
    VT_SKIP_IF_DIRECT();
    make_conf_dir();
    write_file("proxy.conf", "loglevel notice\nmaxclients 100\n");
    const char *args[] = {"--config", conf_path, NULL};
    vt_env_start(&env, NULL, &(vt_proxy_opts){.extra_args = args, .no_loglevel = true});
    redisContext *a = vt_must_connect(env.proxy->port), *b = vt_must_connect(env.proxy->port);
    expect_str(a, "a", "ECHO a"); /* (both taken by the proxy before the reload) */
    expect_str(b, "b", "ECHO b");
    write_file("proxy.conf", "loglevel notice\nmaxclients 1\n");
    reload("config reloaded", 1);
    int fd = vt_must_sock(env.proxy->port);
    vt_buf got = {0};
    cr_assert(vt_sock_read_eof(fd, &got, VT_READ_DEADLINE_MS), "the client over maxclients was not closed");
    vt_assert_bytes(&got, "-ERR max number of clients reached\r\n");
    vt_buf_free(&got);
    close(fd);
    expect_str(a, "x", "ECHO x"); /* the clients already there stay */
    expect_str(b, "y", "ECHO y");
    write_file("proxy.conf", "loglevel notice\nmaxclients 100\n");
    reload("config reloaded", 2);
    redisContext *c = vt_must_connect(env.proxy->port);
    expect_str(c, "z", "ECHO z");
    redisFree(a);
    redisFree(b);
    redisFree(c);
}

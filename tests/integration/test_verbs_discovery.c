/* test_verbs_discovery.c - finding out what verbs a proxy has, and adding
 * your own.
 *
 * A client asks `VERBPROXY VERBS` for the verb table (name, syntax, the
 * script's SHA, arity, number of keys, write or readonly, where the script
 * came from); client libraries and redis-cli ask `COMMAND INFO` and
 * `COMMAND DOCS`, and get Redis-7-shaped entries for verbs, mixed with
 * Redis's own for real commands. An operator adds a verb with
 * `--verb "name path numkeys N"` or a `verb` line in the config file; a verb
 * that would shadow a Redis command or a built-in verb stops start-up.
 * `--ztick-max-members` caps the sets ZTICK walks.
 *
 * Verbs are proxy-only: the suite is skipped under VP_TEST_DIRECT=1. */
#include <ctype.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proxy/verbs/script_text.h"

#include "tests/support/checks.h"

#ifndef SOURCE_DIR
#error "SOURCE_DIR (the source tree, for lua/*.lua) must be defined by the build"
#endif

#define REFUSAL_TIMEOUT_S 10 /* a refused start-up ends long before this */
#define RUNS_FOR_S 3         /* an accepted one is stopped after this */

static vt_env env;

static void setup(void)
{
    vt_env_start(&env, NULL, NULL);
}

static void teardown(void)
{
    vt_env_stop(&env);
}

TestSuite(verbs_discovery, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

/* The built-in verbs, as docs/verbs.md#the-verbs lists them. */
typedef struct verb_row {
    const char *name;
    const char *syntax; /* how the syntax starts: the name and the mandatory arguments */
    int arity;
    int numkeys; /* fixed keys; QPOP's lease key comes from an option, ZSNAPSHOT's sources from numkeys */
    const char *access;
} verb_row;

static const verb_row builtins[] = {
    {"ztick", "ZTICK key delta threshold", -4, 1, "write"},
    {"qpop", "QPOP key", -2, 1, "write"},
    {"qack", "QACK leasekey member", -3, 1, "write"},
    {"qextend", "QEXTEND leasekey member ms", 4, 1, "write"},
    {"qreclaim", "QRECLAIM leasekey key score|NOW", -4, 2, "write"},
    {"lockrelease", "LOCKRELEASE key token", 3, 1, "write"},
    {"lockrenew", "LOCKRENEW key token ms", 4, 1, "write"},
    {"lockhandover", "LOCKHANDOVER key oldtoken newtoken ms", 5, 1, "write"},
    {"hsetver", "HSETVER key version field value", -5, 1, "write"},
    {"zwindow", "ZWINDOW key window-ms member", -4, 1, "write"},
    {"zpage", "ZPAGE key cursor count", -4, 1, "readonly"},
    {"zsnapshot", "ZSNAPSHOT dest ttl-ms numkeys key", -5, 1, "write"},
};
#define BUILTINS (sizeof(builtins) / sizeof(builtins[0]))

/* The polyfills (AGGREGATE COUNT on a Redis without it), listed after the
 * verbs with source "polyfill": Redis's commands, not verbs, so never in
 * COMMAND's listings. name: the command; script: lua/<script>.lua. */
typedef struct polyfill_row {
    const char *name, *script, *syntax;
    int arity, numkeys;
    const char *access;
} polyfill_row;

static const polyfill_row polyfills[] = {
    {"zunion", "zcount", "ZUNION numkeys key", -3, 0, "readonly"},
    {"zinter", "zcount", "ZINTER numkeys key", -3, 0, "readonly"},
    {"zunionstore", "zcountstore", "ZUNIONSTORE destination numkeys key", -4, 1, "write"},
    {"zinterstore", "zcountstore", "ZINTERSTORE destination numkeys key", -4, 1, "write"},
};
/* The conveyor keys' translations (docs/conveyor.md), listed after them
 * with source "conveyor": never found by name either. */
static const polyfill_row conveyors[] = {
    {"conveyor-read", "conveyor_read", "conveyor-read (a command on a conveyor key)", -2, 0, "readonly"},
    {"conveyor-write", "conveyor_write", "conveyor-write (a command on a conveyor key)", -2, 0, "write"},
    {"conveyor-key", "conveyor_key", "conveyor-key (a command on a conveyor key)", -2, 0, "write"},
    {"conveyor-tick", "conveyor_tick", "conveyor-tick (a command on a conveyor key)", -2, 0, "write"},
    {"conveyor-aggregate", "conveyor_aggregate", "conveyor-aggregate (a command on a conveyor key)", -2, 0,
     "write"},
    {"conveyor-store", "conveyor_store", "conveyor-store (a command on a conveyor key)", -2, 0, "write"},
    {"conveyor-admin", "conveyor_admin", "conveyor-admin (a command on a conveyor key)", -2, 0, "write"},
    {"conveyor-qpop", "conveyor_qpop", "conveyor-qpop (a command on a conveyor key)", -2, 0, "write"},
    {"conveyor-qreclaim", "conveyor_qreclaim", "conveyor-qreclaim (a command on a conveyor key)", -2, 0,
     "write"},
    {"conveyor-qextend", "conveyor_qextend", "conveyor-qextend (a command on a conveyor key)", -2, 0,
     "write"},
    {"conveyor-zwindow", "conveyor_zwindow", "conveyor-zwindow (a command on a conveyor key)", -2, 0,
     "write"},
    {"conveyor-zpage", "conveyor_zpage", "conveyor-zpage (a command on a conveyor key)", -2, 0, "readonly"},
    {"conveyor-zsnapshot", "conveyor_zsnapshot", "conveyor-zsnapshot (a command on a conveyor key)", -2, 0,
     "write"},
};
/* (counted with the polyfills below: the entries after the verbs) */
#define POLYFILLS (sizeof(polyfills) / sizeof(polyfills[0]) + sizeof(conveyors) / sizeof(conveyors[0]))

/* ---- helpers ---- */

#define expect_error_text(r, text)                                                                           \
    cr_assert((r) && (r)->type == REDIS_REPLY_ERROR && strcmp((r)->str, (text)) == 0,                        \
              "expected -%s, got %s", (text), VT_DESCRIBE(r))

static bool is_str(const redisReply *r, const char *want)
{
    return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) && r->len == strlen(want) &&
           memcmp(r->str, want, r->len) == 0;
}

/* What SCRIPT LOAD of this file answers, asked straight from Redis. Redis
 * 6.2 refuses the `#!lua` line: there the text it runs instead (the shebang
 * a comment) must load, and the SHA-1 the proxy lists, the script's as
 * written, is computed here. */
static char *sha_of_file(const char *path)
{
    /* What Redis runs: the file with the helpers it includes put in. */
    char err[256];
    size_t len;
    char *body = script_assemble(path, &len, err, sizeof(err));
    cr_assert(body && len > 0, "could not read %s (or it is empty): %s", path, body ? "" : err);
    redisContext *admin = vt_must_connect(env.redis->port);
    redisReply *r = vt_cmd(admin, "SCRIPT LOAD %b", body, len);
    char *sha;
    if (r && r->type == REDIS_REPLY_ERROR && strstr(r->str, "unexpected symbol near '#'")) {
        freeReplyObject(r);
        char *pre7 = script_text_pre7(body, len);
        r = vt_cmd(admin, "SCRIPT LOAD %b", pre7, len);
        cr_assert(r && r->type == REDIS_REPLY_STRING && r->len == 40,
                  "SCRIPT LOAD %s as Redis 6.2 runs it: %s", path, VT_DESCRIBE(r));
        free(pre7);
        unsigned char md[SHA_DIGEST_LENGTH];
        SHA1((const unsigned char *)body, len, md);
        sha = malloc(41);
        cr_assert_not_null(sha);
        for (int i = 0; i < SHA_DIGEST_LENGTH; i++)
            snprintf(sha + 2 * i, 3, "%02x", md[i]);
    } else {
        cr_assert(r && r->type == REDIS_REPLY_STRING && r->len == 40, "SCRIPT LOAD %s: %s", path,
                  VT_DESCRIBE(r));
        sha = strdup(r->str);
    }
    freeReplyObject(r);
    redisFree(admin);
    free(body);
    return sha;
}

/* The entry named `name` in a VERBPROXY VERBS reply (asserted unique). */
static const redisReply *find_verb(const redisReply *verbs, const char *name)
{
    const redisReply *found = NULL;
    for (size_t i = 0; i < verbs->elements; i++) {
        const redisReply *e = verbs->element[i];
        cr_assert(e->type == REDIS_REPLY_ARRAY && e->elements == 7,
                  "a VERBPROXY VERBS entry should be [name, syntax, sha, arity, numkeys, write|readonly, "
                  "source], got %s",
                  VT_DESCRIBE(e));
        if (is_str(e->element[0], name)) {
            cr_assert(found == NULL, "\"%s\" is listed twice", name);
            found = e;
        }
    }
    cr_assert(found != NULL, "\"%s\" is not in VERBPROXY VERBS: %s", name, VT_DESCRIBE(verbs));
    return found;
}

/* Check one VERBPROXY VERBS entry field by field. syntax: how it starts, as
 * docs/verbs.md#the-verbs writes it (the optional parts' placeholder names
 * are the proxy's to choose); for custom verbs, whose syntax the proxy makes
 * up, just the upper-case name. */
static void check_verb_entry(const redisReply *e, const char *name, const char *syntax, const char *sha,
                             int arity, int numkeys, const char *access, const char *source)
{
    vt_assert_str(e->element[0], name);
    cr_assert(e->element[1]->type == REDIS_REPLY_STRING &&
                  strncmp(e->element[1]->str, syntax, strlen(syntax)) == 0,
              "%s: syntax should start \"%s\", got %s", name, syntax, VT_DESCRIBE(e->element[1]));
    cr_assert(is_str(e->element[2], sha), "%s: sha %s, but SCRIPT LOAD of its file gives %s", name,
              VT_DESCRIBE(e->element[2]), sha);
    cr_assert(e->element[3]->type == REDIS_REPLY_INTEGER && e->element[3]->integer == arity,
              "%s: arity %s, expected %d", name, VT_DESCRIBE(e->element[3]), arity);
    cr_assert(e->element[4]->type == REDIS_REPLY_INTEGER && e->element[4]->integer == numkeys,
              "%s: numkeys %s, expected %d", name, VT_DESCRIBE(e->element[4]), numkeys);
    cr_assert(is_str(e->element[5], access), "%s: expected \"%s\", got %s", name, access,
              VT_DESCRIBE(e->element[5]));
    cr_assert(is_str(e->element[6], source), "%s: source %s, expected \"%s\"", name,
              VT_DESCRIBE(e->element[6]), source);
}

static redisReply *verbs_of(int port)
{
    redisContext *c = vt_must_connect(port);
    redisReply *r = vt_cmd(c, "VERBPROXY VERBS");
    cr_assert(r && r->type == REDIS_REPLY_ARRAY, "VERBPROXY VERBS: expected an array, got %s",
              VT_DESCRIBE(r));
    redisFree(c);
    return r;
}

/* Is flag among the elements of the array r? */
static bool has_flag(const redisReply *r, const char *flag)
{
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++)
        if (is_str(r->element[i], flag)) return true;
    return false;
}

/* A Redis 7 COMMAND INFO entry: [name, arity, flags, first key, last key,
 * step, acl categories, tips, key specs, subcommands]. */
static void check_command_entry(const redisReply *e, const char *name, int arity, const char *flag, int first,
                                int last, int step)
{
    cr_assert(e->type == REDIS_REPLY_ARRAY && e->elements == 10,
              "a Redis 7 COMMAND INFO entry has 10 elements, got %s", VT_DESCRIBE(e));
    vt_assert_str(e->element[0], name);
    vt_assert_int(e->element[1], arity);
    cr_assert(e->element[2]->type == REDIS_REPLY_ARRAY && has_flag(e->element[2], flag),
              "%s: flags %s should contain \"%s\"", name, VT_DESCRIBE(e->element[2]), flag);
    vt_assert_int(e->element[3], first);
    vt_assert_int(e->element[4], last);
    vt_assert_int(e->element[5], step);
    for (int i = 6; i < 10; i++)
        cr_assert(e->element[i]->type == REDIS_REPLY_ARRAY, "%s: element %d should be an array, got %s", name,
                  i, VT_DESCRIBE(e->element[i]));
}

/* Write `text` to <redis dir>/<name> (the redis dir is the test's temp dir:
 * removed with it). Returns the path (static per call site via buf). */
static const char *write_file(char *buf, size_t len, const char *name, const char *text)
{
    snprintf(buf, len, "%s/%s", env.redis->dir, name);
    FILE *f = fopen(buf, "w");
    cr_assert(f != NULL, "cannot write %s", buf);
    cr_assert_eq(fputs(text, f) >= 0, true);
    fclose(f);
    return buf;
}

/* A custom verb's script: adds ARGV[1] (default 1) to KEYS[1] and says what
 * it saw, so a test can tell keys from arguments. */
#define COUNTER_SCRIPT                                                                                       \
    "-- a custom verb for the tests\n"                                                                       \
    "local n = redis.call('INCRBY', KEYS[1], ARGV[1] or '1')\n"                                              \
    "return {KEYS[1], n, #ARGV}\n"
#define READER_SCRIPT "return redis.call('GET', KEYS[1])\n"

/* Run verbproxy with `args` (a shell command line suffix), both streams
 * captured; returns the exit status (-1 if it did not exit). A proxy that
 * does not stop by itself is stopped by `timeout` (status 124). */
static int run_proxy(const char *args, int timeout_s, char *out, size_t outlen)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "timeout %d %s --bind 127.0.0.1 --port %d --upstream 127.0.0.1:%d %s",
             timeout_s, VP_BINARY, vt_free_port(), env.redis->port, args);
    return vt_run_capture(cmd, out, outlen);
}

/* Does text mention word as a word of its own (any case)? */
static bool mentions(const char *text, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = text; *p; p++) {
        if (strncasecmp(p, word, n) != 0) continue;
        bool before = p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '-');
        bool after = !(isalnum((unsigned char)p[n]) || p[n] == '_' || p[n] == '-');
        if (before && after) return true;
    }
    return false;
}

/* ---- VERBPROXY VERBS ---- */

Test(verbs_discovery, verbproxy_verbs_lists_every_builtin_with_the_sha_redis_gives_its_script)
{
    VT_SKIP_IF_DIRECT();
    redisReply *verbs = verbs_of(env.proxy->port);
    cr_assert_eq(verbs->elements, BUILTINS + POLYFILLS, "expected %zu verbs and %zu polyfills, got %s",
                 BUILTINS, POLYFILLS, VT_DESCRIBE(verbs));
    for (size_t i = 0; i < POLYFILLS; i++) {
        size_t np = sizeof(polyfills) / sizeof(polyfills[0]);
        const polyfill_row *p = i < np ? &polyfills[i] : &conveyors[i - np];
        char path[512];
        snprintf(path, sizeof(path), "%s/lua/%s.lua", SOURCE_DIR, p->script);
        char *sha = sha_of_file(path);
        check_verb_entry(find_verb(verbs, p->name), p->name, p->syntax, sha, p->arity, p->numkeys, p->access,
                         i < np ? "polyfill" : "conveyor");
        free(sha);
    }
    for (size_t i = 0; i < BUILTINS; i++) {
        const verb_row *v = &builtins[i];
        char path[512];
        snprintf(path, sizeof(path), "%s/lua/%s.lua", SOURCE_DIR, v->name);
        char *sha = sha_of_file(path);
        for (int j = 0; j < 40; j++)
            cr_assert(isxdigit((unsigned char)sha[j]) && !isupper((unsigned char)sha[j]));
        check_verb_entry(find_verb(verbs, v->name), v->name, v->syntax, sha, v->arity, v->numkeys, v->access,
                         "builtin");
        free(sha);
    }
    freeReplyObject(verbs);
}

/* ---- COMMAND INFO / COMMAND DOCS ---- */

Test(verbs_discovery, command_info_describes_a_verb_as_redis_7_describes_a_command)
{
    VT_SKIP_IF_DIRECT();
    redisContext *c = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(c, "COMMAND INFO ztick");
    vt_assert_array(r, 1);
    check_command_entry(r->element[0], "ztick", -4, "write", 1, 1, 1);
    freeReplyObject(r);

    /* verb names are case-insensitive, as command names are */
    r = vt_cmd(c, "COMMAND INFO QRECLAIM");
    vt_assert_array(r, 1);
    check_command_entry(r->element[0], "qreclaim", -4, "write", 1, 2, 1);
    freeReplyObject(r);
    redisFree(c);
}

Test(verbs_discovery, command_info_mixes_real_commands_verbs_and_unknown_names_in_order)
{
    VT_SKIP_IF_DIRECT();
    redisContext *admin = vt_must_connect(env.redis->port);
    redisReply *real = vt_cmd(admin, "COMMAND INFO get");
    vt_assert_array(real, 1);
    redisContext *c = vt_must_connect(env.proxy->port);
    redisReply *lone = vt_cmd(c, "COMMAND INFO ztick");
    vt_assert_array(lone, 1);

    redisReply *r = vt_cmd(c, "COMMAND INFO get ztick nosuchcmd");
    vt_assert_array(r, 3);
    char why[512];
    cr_assert(vt_reply_equal(real->element[0], r->element[0], why, sizeof(why)),
              "get's entry differs from Redis's own: %s", why);
    cr_assert(vt_reply_equal(lone->element[0], r->element[1], why, sizeof(why)),
              "ztick's entry differs from COMMAND INFO ztick alone: %s", why);
    vt_assert_nil(r->element[2]);
    freeReplyObject(r);

    /* a real command alone is Redis's answer, untouched */
    r = vt_cmd(c, "COMMAND INFO get");
    cr_assert(vt_reply_equal(real, r, why, sizeof(why)), "COMMAND INFO get differs from Redis's: %s", why);
    freeReplyObject(r);
    freeReplyObject(real);
    freeReplyObject(lone);
    redisFree(c);
    redisFree(admin);
}

Test(verbs_discovery, command_docs_gives_a_verbs_summary_and_group)
{
    VT_SKIP_BEFORE(700, "COMMAND DOCS came with Redis 7.0");
    VT_SKIP_IF_DIRECT();
    redisContext *c = vt_must_connect(env.proxy->port);
    redisReply *r = vt_cmd(c, "COMMAND DOCS ztick");
    vt_assert_array(r, 2);
    vt_assert_str(r->element[0], "ztick");
    const redisReply *doc = r->element[1];
    cr_assert(doc->type == REDIS_REPLY_ARRAY && doc->elements % 2 == 0 && doc->elements >= 4,
              "the doc should be a flat field, value array, got %s", VT_DESCRIBE(doc));
    bool summary = false, group = false;
    for (size_t i = 0; i < doc->elements; i += 2) {
        const redisReply *v = doc->element[i + 1];
        if (is_str(doc->element[i], "summary")) {
            cr_assert(v->type == REDIS_REPLY_STRING && v->len > 0, "summary: %s", VT_DESCRIBE(v));
            summary = true;
        }
        if (is_str(doc->element[i], "group")) {
            cr_assert(v->type == REDIS_REPLY_STRING && v->len > 0, "group: %s", VT_DESCRIBE(v));
            group = true;
        }
    }
    cr_assert(summary && group, "no summary or no group in %s", VT_DESCRIBE(doc));
    freeReplyObject(r);
    redisFree(c);
}

/* The full listings: Redis's commands, then the verbs. */
static long long int_reply(redisContext *c, const char *cmd)
{
    redisReply *r = vt_cmd(c, cmd);
    vt_assert_reply(r, c);
    cr_assert(r->type == REDIS_REPLY_INTEGER, "%s: %s", cmd, VT_DESCRIBE(r));
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

/* The top-level count of a raw reply (the full COMMAND and COMMAND DOCS
 * replies nest deeper than hiredis 0.14 reads), and whether its last bytes
 * are `tail`. */
static long long raw_listing(int port, const char *cmd, const char *tail, bool *tail_ok)
{
    int fd = vt_sock_tcp(port);
    cr_assert(fd >= 0);
    cr_assert(vt_sock_send_str(fd, cmd));
    vt_buf b = {0};
    cr_assert(vt_sock_read_replies(fd, &b, 1, VT_READ_DEADLINE_MS), "%s: no whole reply", cmd);
    cr_assert(b.len > 4 && b.data[0] == '*', "%s: %.40s", cmd, vt_buf_escaped(&b));
    long long n = strtoll(b.data + 1, NULL, 10);
    size_t tl = strlen(tail);
    *tail_ok = b.len >= tl && memcmp(b.data + b.len - tl, tail, tl) == 0;
    vt_buf_free(&b);
    close(fd);
    return n;
}

Test(verbs_discovery, the_full_command_listings_include_the_verbs)
{
    VT_SKIP_BEFORE(700, "COMMAND LIST came with Redis 7.0");
    VT_SKIP_IF_DIRECT();
    redisContext *admin = vt_must_connect(env.redis->port);
    redisContext *c = vt_must_connect(env.proxy->port);
    long long redis_count = int_reply(admin, "COMMAND COUNT");
    cr_assert_eq(int_reply(c, "COMMAND COUNT"), redis_count + (long long)BUILTINS);

    /* COMMAND LIST names subcommands too ("acl|cat") */
    redisReply *redis_list = vt_cmd(admin, "COMMAND LIST");
    vt_assert_reply(redis_list, admin);
    redisReply *list = vt_cmd(c, "COMMAND LIST");
    vt_assert_reply(list, c);
    cr_assert(list->type == REDIS_REPLY_ARRAY && list->elements == redis_list->elements + BUILTINS,
              "Redis lists %zu, the proxy %zu", redis_list->elements, list->elements);
    freeReplyObject(redis_list);
    for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++) {
        bool found = false;
        for (size_t j = 0; j < list->elements; j++)
            found |= is_str(list->element[j], builtins[i].name);
        cr_assert(found, "COMMAND LIST lacks %s", builtins[i].name);
    }
    freeReplyObject(list);
    /* a filtered list is Redis's alone */
    redisReply *filtered = vt_cmd(c, "COMMAND LIST FILTERBY PATTERN zti*");
    vt_assert_array(filtered, 0);
    freeReplyObject(filtered);

    bool tail_ok;
    /* the last verb in the table is zwindow: its entry closes the listing */
    long long n = raw_listing(env.proxy->port, "*1\r\n$7\r\nCOMMAND\r\n",
                              "*1\r\n+@scripting\r\n*0\r\n*0\r\n*0\r\n", &tail_ok);
    cr_assert_eq(n, redis_count + (long long)BUILTINS);
    cr_assert(tail_ok, "COMMAND does not end with a verb's entry");
    long long redis_docs =
        raw_listing(env.redis->port, "*2\r\n$7\r\nCOMMAND\r\n$4\r\nDOCS\r\n", "", &tail_ok);
    n = raw_listing(env.proxy->port, "*2\r\n$7\r\nCOMMAND\r\n$4\r\nDOCS\r\n",
                    "$10\r\ncomplexity\r\n$65\r\nO(N) where N is the number of members the script reads or "
                    "writes.\r\n",
                    &tail_ok);
    cr_assert_eq(n, redis_docs + 2 * (long long)BUILTINS,
                 "COMMAND DOCS: Redis's name, doc pairs and one per verb");
    cr_assert(tail_ok, "COMMAND DOCS does not end with a verb's doc");
    redisFree(c);
    redisFree(admin);
}

/* ---- custom verbs ---- */

Test(verbs_discovery, a_verb_from_the_command_line_works_and_is_listed)
{
    VT_SKIP_IF_DIRECT();
    char path[256], spec[512];
    write_file(path, sizeof(path), "myverb.lua", COUNTER_SCRIPT);
    snprintf(spec, sizeof(spec), "myverb %s numkeys 1", path);
    vt_proxy *proxy =
        vt_proxy_start(env.redis, &(vt_proxy_opts){.extra_args = (const char *[]){"--verb", spec, NULL}});
    cr_assert(proxy != NULL, "verbproxy did not start with --verb \"%s\"", spec);

    redisContext *c = vt_must_connect(proxy->port);
    redisReply *r = vt_cmd(c, "MYVERB cv:n 5");
    vt_assert_array(r, 3);
    vt_assert_str(r->element[0], "cv:n"); /* the key went in KEYS */
    vt_assert_int(r->element[1], 5);
    vt_assert_int(r->element[2], 1); /* and only the argument in ARGV */
    freeReplyObject(r);
    r = vt_cmd(c, "myverb cv:n");
    vt_assert_array(r, 3);
    vt_assert_int(r->element[1], 6);
    vt_assert_int(r->element[2], 0);
    freeReplyObject(r);
    r = vt_cmd(c, "MYVERB");
    expect_error_text(r, "ERR wrong number of arguments for 'myverb' command");
    freeReplyObject(r);

    /* inside MULTI, and after Redis forgot the script, too */
    r = vt_cmd(c, "MULTI");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(c, "MYVERB cv:n 10");
    vt_assert_status(r, "QUEUED");
    freeReplyObject(r);
    r = vt_cmd(c, "EXEC");
    vt_assert_array(r, 1);
    vt_assert_array(r->element[0], 3);
    vt_assert_int(r->element[0]->element[1], 16);
    freeReplyObject(r);
    redisContext *admin = vt_must_connect(env.redis->port);
    r = vt_cmd(admin, "SCRIPT FLUSH");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(c, "MYVERB cv:n 4");
    vt_assert_array(r, 3);
    vt_assert_int(r->element[1], 20);
    freeReplyObject(r);
    r = vt_cmd(admin, "GET cv:n");
    vt_assert_str(r, "20");
    freeReplyObject(r);
    redisFree(admin);
    redisFree(c);

    char *sha = sha_of_file(path);
    redisReply *verbs = verbs_of(proxy->port);
    cr_assert_eq(verbs->elements, BUILTINS + POLYFILLS + 1,
                 "expected the %zu built-ins, the polyfills and myverb, got %s", BUILTINS,
                 VT_DESCRIBE(verbs));
    check_verb_entry(find_verb(verbs, "myverb"), "myverb", "MYVERB ", sha, -2, 1, "write", path);
    find_verb(verbs, "ztick");
    freeReplyObject(verbs);
    free(sha);

    cr_expect(vt_proxy_stop(proxy), "verbproxy did not stop cleanly");
    vt_proxy_free(proxy);
}

Test(verbs_discovery, verbs_from_the_config_file_have_their_arity_and_access)
{
    VT_SKIP_IF_DIRECT();
    char counter[256], reader[256], conf_path[256], conf[1024];
    write_file(counter, sizeof(counter), "mycount.lua", COUNTER_SCRIPT);
    write_file(reader, sizeof(reader), "myread.lua", READER_SCRIPT);
    snprintf(conf, sizeof(conf),
             "# custom verbs\n"
             "verb mycount %s numkeys 1 arity 3\n"
             "verb myread %s numkeys 1 arity 2 readonly\n",
             counter, reader);
    write_file(conf_path, sizeof(conf_path), "verbs.conf", conf);
    vt_proxy *proxy = vt_proxy_start(
        env.redis, &(vt_proxy_opts){.extra_args = (const char *[]){"--config", conf_path, NULL}});
    cr_assert(proxy != NULL, "verbproxy did not start with:\n%s", conf);

    redisContext *c = vt_must_connect(proxy->port);
    redisReply *r = vt_cmd(c, "MYCOUNT cf:n 2");
    vt_assert_array(r, 3);
    vt_assert_str(r->element[0], "cf:n");
    vt_assert_int(r->element[1], 2);
    vt_assert_int(r->element[2], 1);
    freeReplyObject(r);
    r = vt_cmd(c, "MYCOUNT cf:n");
    expect_error_text(r, "ERR wrong number of arguments for 'mycount' command");
    freeReplyObject(r);
    r = vt_cmd(c, "MYCOUNT cf:n 1 2");
    expect_error_text(r, "ERR wrong number of arguments for 'mycount' command");
    freeReplyObject(r);
    r = vt_cmd(c, "MYREAD cf:n");
    vt_assert_str(r, "2");
    freeReplyObject(r);
    r = vt_cmd(c, "MYREAD cf:n extra");
    expect_error_text(r, "ERR wrong number of arguments for 'myread' command");
    freeReplyObject(r);
    /* the refused calls changed nothing */
    r = vt_cmd(c, "GET cf:n");
    vt_assert_str(r, "2");
    freeReplyObject(r);

    r = vt_cmd(c, "COMMAND INFO mycount myread");
    vt_assert_array(r, 2);
    check_command_entry(r->element[0], "mycount", 3, "write", 1, 1, 1);
    check_command_entry(r->element[1], "myread", 2, "readonly", 1, 1, 1);
    freeReplyObject(r);
    redisFree(c);

    char *counter_sha = sha_of_file(counter), *reader_sha = sha_of_file(reader);
    redisReply *verbs = verbs_of(proxy->port);
    cr_assert_eq(verbs->elements, BUILTINS + POLYFILLS + 2,
                 "expected the %zu built-ins, the polyfills, mycount and myread, got %s", BUILTINS,
                 VT_DESCRIBE(verbs));
    check_verb_entry(find_verb(verbs, "mycount"), "mycount", "MYCOUNT ", counter_sha, 3, 1, "write", counter);
    check_verb_entry(find_verb(verbs, "myread"), "myread", "MYREAD ", reader_sha, 2, 1, "readonly", reader);
    freeReplyObject(verbs);
    free(counter_sha);
    free(reader_sha);

    cr_expect(vt_proxy_stop(proxy), "verbproxy did not stop cleanly");
    vt_proxy_free(proxy);
}

Test(verbs_discovery, a_verb_named_like_a_command_or_a_builtin_stops_start_up)
{
    VT_SKIP_IF_DIRECT();
    char path[256], conf_path[256], conf[512], args[1024], out[4096];
    write_file(path, sizeof(path), "shadow.lua", COUNTER_SCRIPT);

    static const char *const names[] = {"get", "ztick", "GET"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(args, sizeof(args), "--verb \"%s %s numkeys 1\"", names[i], path);
        int rc = run_proxy(args, REFUSAL_TIMEOUT_S, out, sizeof(out));
        cr_assert_eq(rc, 1, "%s: exit status %d, expected 1; output: %s", args, rc, out);
        cr_assert(mentions(out, names[i]), "%s: the message does not name '%s': %s", args, names[i], out);
    }

    snprintf(conf, sizeof(conf), "verb ztick %s numkeys 1\n", path);
    write_file(conf_path, sizeof(conf_path), "shadow.conf", conf);
    snprintf(args, sizeof(args), "--config %s", conf_path);
    int rc = run_proxy(args, REFUSAL_TIMEOUT_S, out, sizeof(out));
    cr_assert_eq(rc, 1, "config \"%s\": exit status %d, expected 1; output: %s", conf, rc, out);
    char where[300];
    snprintf(where, sizeof(where), "%s:1:", conf_path);
    cr_assert(strstr(out, where) != NULL && mentions(out, "ztick"), "expected \"%s ...ztick...\", got: %s",
              where, out);

    /* the same file with a fresh name starts (and is stopped by timeout) */
    snprintf(conf, sizeof(conf), "verb zfresh %s numkeys 1\n", path);
    write_file(conf_path, sizeof(conf_path), "fresh.conf", conf);
    snprintf(args, sizeof(args), "--config %s", conf_path);
    rc = run_proxy(args, RUNS_FOR_S, out, sizeof(out));
    cr_assert_eq(rc, 124, "a harmless verb: exit status %d, expected to run until timeout (124); output: %s",
                 rc, out);
}

/* What SCRIPT LOAD of `body` answers, asked straight from Redis: its
 * error text (without the '-'), malloc'd; the test fails if it loads. */
static char *redis_refusal_of(const char *body)
{
    redisContext *admin = vt_must_connect(env.redis->port);
    redisReply *r = vt_cmd(admin, "SCRIPT LOAD %s", body);
    cr_assert(r && r->type == REDIS_REPLY_ERROR, "Redis loaded \"%s\": %s", body, VT_DESCRIBE(r));
    char *text = strdup(r->str);
    freeReplyObject(r);
    redisFree(admin);
    return text;
}

/* A custom verb whose script Redis would not load (a syntax error, a bad
 * shebang, bytecode) stops start-up, from the file and from a flag: the
 * message names the file's line, the verb, and says what SCRIPT LOAD of the
 * same body says, word for word (Redis 7.0 is the oracle). Before, such a
 * verb was taken, and every call of it answered -NOSCRIPT. A script that
 * Redis loads, shebang and all, still starts. */
Test(verbs_discovery, a_verb_whose_script_redis_would_refuse_stops_start_up_with_redis_words)
{
    /* The proxy checks a custom script as Redis 7.0 loads it, whatever the
     * server: 6.2 refuses every shebang, where the proxy makes it a comment. */
    VT_SKIP_BEFORE(700, "Redis 7.0 is the oracle of the shebang's words");
    VT_SKIP_IF_DIRECT();
    static const char *const bodies[] = {
        "return +\n",
        "local n = redis.call('GET', KEYS[1])\nif n then return n\n",
        "return 'unfinished\n",
        "#!lua flags=no-writes,bogus\nreturn 1\n",
        "#!python\nreturn 1\n",
        "#!lua name=mylib\nreturn 1\n",
        "#!lua flags=no-writes",
        "\033Lua\x51\n",
    };
    char path[256], conf_path[256], conf[512], args[1024], out[4096], where[300];
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        char *redis_says = redis_refusal_of(bodies[i]);
        write_file(path, sizeof(path), "broken.lua", bodies[i]);
        snprintf(conf, sizeof(conf), "port 0\nverb mybroken %s numkeys 1\n", path);
        write_file(conf_path, sizeof(conf_path), "broken.conf", conf);
        snprintf(args, sizeof(args), "--config %s", conf_path);
        int rc = run_proxy(args, REFUSAL_TIMEOUT_S, out, sizeof(out));
        cr_assert_eq(rc, 1, "script #%zu: exit status %d, expected 1; output: %s", i, rc, out);
        snprintf(where, sizeof(where), "%s:2:", conf_path);
        cr_assert(strstr(out, where) && mentions(out, "mybroken"),
                  "script #%zu: no \"%s ...mybroken\" in: %s", i, where, out);
        cr_assert(strstr(out, redis_says) != NULL, "script #%zu: Redis says \"%s\", the proxy: %s", i,
                  redis_says, out);
        /* The same verb as a flag. */
        snprintf(args, sizeof(args), "--verb \"mybroken %s numkeys 1\"", path);
        rc = run_proxy(args, REFUSAL_TIMEOUT_S, out, sizeof(out));
        cr_assert_eq(rc, 1, "script #%zu as a flag: exit status %d, expected 1; output: %s", i, rc, out);
        cr_assert(strstr(out, redis_says) != NULL, "script #%zu as a flag: Redis says \"%s\", the proxy: %s",
                  i, redis_says, out);
        free(redis_says);
    }

    /* A shebang Redis takes, and a body it compiles: start-up goes on. */
    write_file(path, sizeof(path), "fine.lua", "#!lua flags=no-writes,allow-stale\nreturn KEYS[1]\n");
    snprintf(conf, sizeof(conf), "verb myfine %s numkeys 1\n", path);
    write_file(conf_path, sizeof(conf_path), "fine.conf", conf);
    snprintf(args, sizeof(args), "--config %s", conf_path);
    int rc = run_proxy(args, RUNS_FOR_S, out, sizeof(out));
    cr_assert_eq(rc, 124,
                 "a script Redis loads: exit status %d, expected to run until timeout (124); output: %s", rc,
                 out);
}

/* A `readonly` verb (sent as EVALSHA_RO) whose script has a shebang
 * without flags=no-writes: Redis loads the script but refuses every call
 * of it. Start-up stops, quoting what Redis answers such a call (asked of
 * the real redis-server). With flags=no-writes, or with no shebang, it
 * starts. Before, the verb was taken and every call failed. */
Test(verbs_discovery, a_readonly_verb_whose_script_may_write_stops_start_up)
{
    VT_SKIP_BEFORE(700, "script flags and EVALSHA_RO came with Redis 7.0");
    VT_SKIP_IF_DIRECT();
    const char *body = "#!lua\nreturn redis.call('GET', KEYS[1])\n";
    redisContext *admin = vt_must_connect(env.redis->port);
    redisReply *r = vt_cmd(admin, "SCRIPT LOAD %s", body);
    cr_assert(r && r->type == REDIS_REPLY_STRING, "SCRIPT LOAD: %s", VT_DESCRIBE(r));
    char sha[41];
    snprintf(sha, sizeof(sha), "%s", r->str);
    freeReplyObject(r);
    r = vt_cmd(admin, "EVALSHA_RO %s 1 k", sha);
    cr_assert(r && r->type == REDIS_REPLY_ERROR, "EVALSHA_RO: %s", VT_DESCRIBE(r));
    char *redis_says = strdup(r->str);
    freeReplyObject(r);
    redisFree(admin);

    char path[256], args[1024], out[4096];
    write_file(path, sizeof(path), "writes.lua", body);
    snprintf(args, sizeof(args), "--verb \"myro %s numkeys 1 readonly\"", path);
    int rc = run_proxy(args, REFUSAL_TIMEOUT_S, out, sizeof(out));
    cr_assert_eq(rc, 1, "exit status %d, expected 1; output: %s", rc, out);
    cr_assert(mentions(out, "myro") && strstr(out, redis_says) != NULL,
              "no \"myro\" and Redis's \"%s\" in: %s", redis_says, out);
    free(redis_says);

    /* Not readonly, the same script is fine (EVALSHA); readonly with
     * flags=no-writes or with no shebang too. */
    char nw[256], plain[256];
    write_file(nw, sizeof(nw), "nowrites.lua", "#!lua flags=no-writes\nreturn redis.call('GET', KEYS[1])\n");
    write_file(plain, sizeof(plain), "plain.lua", READER_SCRIPT);
    snprintf(args, sizeof(args),
             "--verb \"myrw %s numkeys 1\" --verb \"myro1 %s numkeys 1 readonly\" --verb \"myro2 %s numkeys "
             "1 readonly\"",
             path, nw, plain);
    rc = run_proxy(args, RUNS_FOR_S, out, sizeof(out));
    cr_assert_eq(rc, 124, "exit status %d, expected to run until timeout (124); output: %s", rc, out);
}

/* A verb whose script path is a FIFO stops start-up at once: opening it
 * would wait for a writer (and at a SIGHUP, the whole event loop with it).
 * Before, start-up hung there until `timeout` stopped it. */
Test(verbs_discovery, a_verb_whose_script_is_a_fifo_stops_start_up_at_once)
{
    VT_SKIP_IF_DIRECT();
    char fifo[256], args[1024], out[4096], want[300];
    snprintf(fifo, sizeof(fifo), "%s/fifo.lua", env.redis->dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    snprintf(args, sizeof(args), "--verb \"myfifo %s numkeys 1\"", fifo);
    int rc = run_proxy(args, REFUSAL_TIMEOUT_S, out, sizeof(out));
    unlink(fifo);
    cr_assert_eq(rc, 1, "exit status %d, expected 1; output: %s", rc, out);
    snprintf(want, sizeof(want), "cannot read script %s: a FIFO, not a file", fifo);
    cr_assert(strstr(out, want) != NULL, "\"%s\" not in: %s", want, out);
}

/* ---- ztick-max-members ---- */

Test(verbs_discovery, ztick_refuses_a_set_larger_than_ztick_max_members)
{
    VT_SKIP_IF_DIRECT();
    redisContext *admin = vt_must_connect(env.redis->port);
    redisReply *r = vt_cmd(admin, "ZADD zm:six 1 a 2 b 3 c 4 d 5 e 6 f");
    vt_assert_int(r, 6);
    freeReplyObject(r);
    r = vt_cmd(admin, "ZADD zm:five 0 m0 1 m1 2 m2 3 m3 4 m4");
    vt_assert_int(r, 5);
    freeReplyObject(r);

    vt_proxy *proxy = vt_proxy_start(
        env.redis, &(vt_proxy_opts){.extra_args = (const char *[]){"--ztick-max-members", "5", NULL}});
    cr_assert(proxy != NULL, "verbproxy did not start with --ztick-max-members 5");
    redisContext *c = vt_must_connect(proxy->port);
    const char *refused = "ERR ZTICK refused: the sorted set has 6 members, over ztick-max-members (5)";
    r = vt_cmd(c, "ZTICK zm:six 1 100");
    expect_error_text(r, refused);
    freeReplyObject(r);
    /* refused inside a transaction too (there the script travels as EVAL) */
    r = vt_cmd(c, "MULTI");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(c, "ZTICK zm:six 1 100");
    vt_assert_status(r, "QUEUED");
    freeReplyObject(r);
    r = vt_cmd(c, "EXEC");
    vt_assert_array(r, 1);
    expect_error_text(r->element[0], refused);
    freeReplyObject(r);
    /* nothing was written */
    r = vt_cmd(admin, "ZSCORE zm:six f");
    vt_assert_str(r, "6");
    freeReplyObject(r);

    r = vt_cmd(c, "ZTICK zm:five 97 100");
    vt_assert_array(r, 2);
    vt_assert_str(r->element[0], "m3");
    vt_assert_str(r->element[1], "m4");
    freeReplyObject(r);
    r = vt_cmd(admin, "ZRANGE zm:five 0 -1 WITHSCORES");
    vt_assert_array(r, 6);
    vt_assert_str(r->element[0], "m0");
    vt_assert_str(r->element[1], "97");
    vt_assert_str(r->element[5], "99");
    freeReplyObject(r);
    redisFree(c);
    cr_expect(vt_proxy_stop(proxy), "verbproxy did not stop cleanly");
    vt_proxy_free(proxy);

    /* the suite's proxy has no such limit set: the six-member set ticks */
    c = vt_must_connect(env.proxy->port);
    r = vt_cmd(c, "ZTICK zm:six 1 7 WITHSCORES");
    vt_assert_array(r, 2);
    vt_assert_str(r->element[0], "f");
    vt_assert_str(r->element[1], "7");
    freeReplyObject(r);
    redisFree(c);
    redisFree(admin);
}

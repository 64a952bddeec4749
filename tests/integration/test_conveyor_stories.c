/* test_conveyor_stories.c - conveyor keys (docs/conveyor.md): stories around the
 * model test (test_conveyor_model.py, which checks every translated
 * command's replies against a plain key's).
 *
 * redis-cli tells the seed's conveyor story on a conveyor key; RENAME,
 * COPY and MOVE keep positions whether the destination is a conveyor key or
 * a plain one; the offset key expires with its key; MULTI; a pattern added
 * by SIGHUP over a line already in Redis; REBASE and INFO; and a tick
 * racing readers on other connections, none of which may ever see half a
 * tick. Every check of a stored form goes straight to Redis.
 *
 * Conveyor keys are the proxy's: skipped under VP_TEST_DIRECT=1. */
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/checks.h"

static vt_env env;
static redisContext *c;         /* through the proxy */
static redisContext *direct;    /* straight to Redis (the borrowed node, in the cluster variant) */
static redisContext *owners[8]; /* straight to a cluster node, by port */
static int owner_ports[8];
static char dir[64], conf_path[128];

static const char *const conveyor_args[] = {"--conveyor", "cv:*", NULL};

/* A Redis with redis_args (NULL: none) behind a proxy with proxy_args. */
static void start_redis_with(const char *const *redis_args, const char *const *proxy_args)
{
    vt_env_start(&env, redis_args ? &(vt_redis_opts){.extra_args = redis_args} : NULL,
                 &(vt_proxy_opts){.extra_args = proxy_args});
    c = vt_must_connect(env.proxy->port);
    direct = vt_must_connect(env.redis->port);
}

static void start_with(const char *const *args)
{
    start_redis_with(NULL, args);
}

static void setup(void)
{
    VT_SKIP_IF_DIRECT();
    start_with(conveyor_args);
}

static void teardown(void)
{
    if (c) redisFree(c);
    if (direct) redisFree(direct);
    c = direct = NULL;
    for (int i = 0; i < 8; i++) {
        if (owners[i]) redisFree(owners[i]);
        owners[i] = NULL;
    }
    vt_env_stop(&env);
    if (dir[0]) {
        unlink(conf_path);
        rmdir(dir);
        dir[0] = '\0';
    }
}

TestSuite(conveyor, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

/* Straight to the Redis that holds `key` (in the cluster variant, the
 * primary serving its slot). */
static redisContext *at(const char *key)
{
    int port = vt_cluster_env_key_port(key, env.redis->port);
    if (port == env.redis->port) return direct;
    for (int i = 0; i < 8; i++) {
        if (owners[i] && owner_ports[i] == port) return owners[i];
        if (!owners[i]) {
            owners[i] = vt_must_connect(port);
            owner_ports[i] = port;
            return owners[i];
        }
    }
    cr_assert_fail("more than 8 nodes");
    return NULL;
}

/* The reply of a command (through `ctx`), asserted to have come. */
static redisReply *run(redisContext *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    vt_assert_reply(r, ctx);
    return r;
}

/* The reply, as one line of its elements (an array's, joined by spaces). */
static const char *flat(redisReply *r)
{
    static char line[2048];
    size_t n = 0;
    line[0] = '\0';
    if (r->type != REDIS_REPLY_ARRAY) {
        snprintf(line, sizeof(line), "%s", VT_DESCRIBE(r));
        return line;
    }
    for (size_t i = 0; i < r->elements && n < sizeof(line) - 64; i++) {
        redisReply *e = r->element[i];
        if (e->type == REDIS_REPLY_INTEGER)
            n += (size_t)snprintf(line + n, sizeof(line) - n, "%s%lld", i ? " " : "", e->integer);
        else if (e->type == REDIS_REPLY_NIL)
            n += (size_t)snprintf(line + n, sizeof(line) - n, "%snil", i ? " " : "");
        else
            n += (size_t)snprintf(line + n, sizeof(line) - n, "%s%.*s", i ? " " : "", (int)e->len, e->str);
    }
    return line;
}

static void expect_flat(redisContext *ctx, const char *want, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    vt_assert_reply(r, ctx);
    const char *got = flat(r);
    cr_assert_str_eq(got, want, "%s: got \"%s\", want \"%s\"", fmt, got, want);
    freeReplyObject(r);
}

static void expect_status(redisContext *ctx, const char *want, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    vt_assert_reply(r, ctx);
    vt_assert_status(r, want);
    freeReplyObject(r);
}

static void expect_int(redisContext *ctx, long long want, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    vt_assert_reply(r, ctx);
    vt_assert_int(r, want);
    freeReplyObject(r);
}

/* A field of VERBPROXY CONVEYOR INFO key (RESP2: names and values). */
static const char *info_field(const char *key, const char *field)
{
    static char value[128];
    redisReply *r = run(c, "VERBPROXY CONVEYOR INFO %s", key);
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements % 2 == 0, "%s", VT_DESCRIBE(r));
    value[0] = '\0';
    for (size_t i = 0; i < r->elements; i += 2) {
        if (strcmp(r->element[i]->str, field) != 0) continue;
        redisReply *v = r->element[i + 1];
        if (v->type == REDIS_REPLY_INTEGER)
            snprintf(value, sizeof(value), "%lld", v->integer);
        else if (v->type == REDIS_REPLY_NIL)
            snprintf(value, sizeof(value), "nil");
        else
            snprintf(value, sizeof(value), "%.*s", (int)v->len, v->str);
    }
    freeReplyObject(r);
    return value;
}

Test(conveyor, the_seed_story_through_redis_cli)
{
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof(cmd),
             "P='redis-cli -p %d'; $P ZADD cv:positions 0 crate-1 10 crate-2 90 crate-3 >/dev/null; "
             "$P ZTICK cv:positions 15 100; echo --; $P ZRANGE cv:positions 0 -1 WITHSCORES; echo --; "
             "$P ZTICK cv:positions 80 100 WITHSCORES; echo --; $P ZSCORE cv:positions crate-1",
             env.proxy->port);
    cr_assert_eq(vt_run_capture(cmd, out, sizeof(out)), 0, "%s", out);
    cr_expect_str_eq(out, "crate-3\n--\ncrate-1\n15\ncrate-2\n25\n--\ncrate-2\n105\n--\n95\n");
    /* The members were not rewritten: the stored scores are where ZADD put them. */
    expect_flat(at("cv:positions"), "crate-1 0", "ZRANGE cv:positions 0 -1 WITHSCORES");
    cr_expect_str_eq(info_field("cv:positions", "offset"), "95");
}

Test(conveyor, rename_copy_and_move_keep_positions)
{
    VT_SKIP_IN_CLUSTER("COPY ... DB and MOVE need databases, and the keys are in several slots");
    expect_int(c, 3, "ZADD cv:a 1 x 2 y 3 z");
    freeReplyObject(run(c, "ZTICK cv:a 10 100"));
    /* to a conveyor name: the offset goes along, the members are not touched */
    freeReplyObject(run(c, "RENAME cv:a cv:b"));
    expect_flat(c, "x 11 y 12 z 13", "ZRANGE cv:b 0 -1 WITHSCORES");
    expect_flat(at("cv:b"), "x 1 y 2 z 3", "ZRANGE cv:b 0 -1 WITHSCORES");
    cr_expect_str_eq(info_field("cv:a", "type"), "none");
    /* to a plain name: the line is rebased first, so Redis holds positions */
    expect_int(c, 1, "COPY cv:b plain:b");
    expect_flat(at("plain:b"), "x 11 y 12 z 13", "ZRANGE plain:b 0 -1 WITHSCORES");
    expect_flat(c, "x 11 y 12 z 13", "ZRANGE cv:b 0 -1 WITHSCORES");
    /* COPY to a conveyor name, then tick the copy alone */
    freeReplyObject(run(c, "ZTICK cv:b 1 100"));
    expect_int(c, 1, "COPY cv:b cv:c");
    freeReplyObject(run(c, "ZTICK cv:c 5 100"));
    expect_flat(c, "x 12 y 13 z 14", "ZRANGE cv:b 0 -1 WITHSCORES");
    expect_flat(c, "x 17 y 18 z 19", "ZRANGE cv:c 0 -1 WITHSCORES");
    /* RENAME over an existing conveyor line: its old offset goes */
    expect_int(c, 1, "ZADD cv:d 0 old");
    freeReplyObject(run(c, "ZTICK cv:d 1000 5000"));
    freeReplyObject(run(c, "RENAME cv:b cv:d"));
    expect_flat(c, "x 12 y 13 z 14", "ZRANGE cv:d 0 -1 WITHSCORES");
    /* RENAME to a plain name */
    freeReplyObject(run(c, "RENAME cv:d plain:d"));
    expect_flat(at("plain:d"), "x 12 y 13 z 14", "ZRANGE plain:d 0 -1 WITHSCORES");
    /* MOVE and COPY to another database keep positions there */
    expect_int(c, 1, "MOVE cv:c 1");
    freeReplyObject(run(c, "SELECT 1"));
    expect_flat(c, "x 17 y 18 z 19", "ZRANGE cv:c 0 -1 WITHSCORES");
    freeReplyObject(run(c, "ZTICK cv:c 1 100"));
    expect_int(c, 1, "COPY cv:c cv:e DB 0");
    freeReplyObject(run(c, "SELECT 0"));
    expect_flat(c, "x 18 y 19 z 20", "ZRANGE cv:e 0 -1 WITHSCORES");
    /* DUMP gives the positions: RESTORE to any name holds them */
    redisReply *dump = run(c, "DUMP cv:e");
    cr_assert_eq(dump->type, REDIS_REPLY_STRING);
    redisReply *r = run(c, "RESTORE plain:r 0 %b", dump->str, dump->len);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = run(c, "RESTORE cv:r 0 %b", dump->str, dump->len);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    freeReplyObject(dump);
    expect_flat(at("plain:r"), "x 18 y 19 z 20", "ZRANGE plain:r 0 -1 WITHSCORES");
    expect_flat(c, "x 18 y 19 z 20", "ZRANGE cv:r 0 -1 WITHSCORES");
}

static bool key_gone(void *arg)
{
    redisReply *r = redisCommand(at(arg), "EXISTS %s", (const char *)arg);
    bool gone = r && r->type == REDIS_REPLY_INTEGER && r->integer == 0;
    freeReplyObject(r);
    return gone;
}

Test(conveyor, the_offset_key_expires_with_its_key)
{
    expect_int(c, 2, "ZADD cv:{e}:line 1 a 2 b");
    freeReplyObject(run(c, "ZTICK cv:{e}:line 3 100"));
    char okey[128];
    snprintf(okey, sizeof(okey), "%s", info_field("cv:{e}:line", "offset-key"));
    expect_int(at(okey), 1, "EXISTS %s", okey);
    expect_int(c, 1, "PEXPIRE cv:{e}:line 100000");
    redisReply *t = run(at(okey), "PTTL %s", okey);
    cr_expect(t->type == REDIS_REPLY_INTEGER && t->integer > 99000 && t->integer <= 100000, "%s",
              VT_DESCRIBE(t));
    freeReplyObject(t);
    expect_int(c, 1, "PERSIST cv:{e}:line");
    expect_int(at(okey), -1, "PTTL %s", okey);
    expect_int(c, 1, "PEXPIRE cv:{e}:line 150");
    cr_assert(vt_wait_until(key_gone, okey, 5000), "the offset key outlived its key by seconds");
    expect_int(at("cv:{e}:line"), 0, "EXISTS cv:{e}:line");
    /* A new line of that name starts at offset 0. */
    expect_int(c, 1, "ZADD cv:{e}:line 7 c");
    expect_flat(at("cv:{e}:line"), "c 7", "ZRANGE cv:{e}:line 0 -1 WITHSCORES");
    /* DEL takes the offset key too. */
    freeReplyObject(run(c, "ZTICK cv:{e}:line 1 100"));
    expect_int(at(okey), 1, "EXISTS %s", okey);
    expect_int(c, 1, "DEL cv:{e}:line");
    expect_int(at(okey), 0, "EXISTS %s", okey);
}

Test(conveyor, multi_exec_sees_positions)
{
    expect_int(c, 3, "ZADD cv:m 1 a 2 b 30 c");
    expect_status(c, "OK", "MULTI");
    expect_status(c, "QUEUED", "ZTICK cv:m 10 40 WITHSCORES");
    expect_status(c, "QUEUED", "ZADD cv:m 0 d");
    expect_status(c, "QUEUED", "ZRANGE cv:m 0 -1 WITHSCORES");
    expect_status(c, "QUEUED", "ZRANGEBYSCORE cv:m 11 12");
    redisReply *r = run(c, "EXEC");
    vt_assert_array(r, 4);
    cr_expect_str_eq(flat(r->element[0]), "c 40");
    vt_assert_int(r->element[1], 1);
    cr_expect_str_eq(flat(r->element[2]), "d 0 a 11 b 12");
    cr_expect_str_eq(flat(r->element[3]), "a b");
    freeReplyObject(r);
}

/* The server's clock in ms (what QPOP ... LEASE and ZWINDOW write). */
static long long server_ms(void)
{
    redisReply *t = run(direct, "TIME");
    cr_assert(t->type == REDIS_REPLY_ARRAY && t->elements == 2, "%s", VT_DESCRIBE(t));
    long long ms = atoll(t->element[0]->str) * 1000 + atoll(t->element[1]->str) / 1000;
    freeReplyObject(t);
    return ms;
}

/* A score within [lo, hi] (positions near the server's clock). */
static void expect_score_between(const char *key, const char *member, long long lo, long long hi)
{
    redisReply *r = run(c, "ZSCORE %s %s", key, member);
    cr_assert(r->type == REDIS_REPLY_STRING, "ZSCORE %s %s: %s", key, member, VT_DESCRIBE(r));
    double x = atof(r->str);
    cr_expect(x >= (double)lo && x <= (double)hi, "ZSCORE %s %s = %s, not in [%lld, %lld]", key, member,
              r->str, lo, hi);
    freeReplyObject(r);
}

Test(conveyor, the_queue_verbs_see_positions_in_the_queue_and_in_its_lease_set)
{
    expect_int(c, 3, "ZADD cv:{v}:q 1 a 2 b 3 c");
    freeReplyObject(run(c, "ZTICK cv:{v}:q 100 1000"));
    /* MAXSCORE is a position; the popped members go into a lease set that
     * is a conveyor key too, with deadlines as positions. */
    long long t0 = server_ms();
    expect_flat(c, "a 101", "QPOP cv:{v}:q COUNT 5 MAXSCORE 101.5 LEASE cv:{v}:lease 60000");
    expect_score_between("cv:{v}:lease", "a", t0 + 60000, server_ms() + 60000);
    expect_flat(c, "b 102", "QPOP cv:{v}:q LEASE cv:{v}:lease 60000");
    /* The lease set's line moves back 1000 s: both leases are past due. */
    freeReplyObject(run(c, "ZTICK cv:{v}:lease -1000000 1e300"));
    t0 = server_ms();
    expect_int(c, 1, "QEXTEND cv:{v}:lease b 5000");
    expect_score_between("cv:{v}:lease", "b", t0 + 5000, server_ms() + 5000);
    /* a alone is due; it goes back into the queue at the position given. */
    expect_flat(c, "a", "QRECLAIM cv:{v}:lease cv:{v}:q 150");
    expect_flat(c, "c 103 a 150", "ZRANGE cv:{v}:q 0 -1 WITHSCORES");
    expect_flat(at("cv:{v}:q"), "c 3 a 50", "ZRANGE cv:{v}:q 0 -1 WITHSCORES"); /* (stored) */
}

Test(conveyor, a_window_on_a_conveyor_key_keeps_its_entries_as_positions_and_its_ttl)
{
    long long t0 = server_ms();
    expect_flat(c, "1 1", "ZWINDOW cv:{w}:win 60000 m1");
    /* The line moves back 30 s: m1 is still in the window; then 40 s more:
     * it is out, m2 (added between) is in. */
    freeReplyObject(run(c, "ZTICK cv:{w}:win -30000 1e300"));
    expect_score_between("cv:{w}:win", "m1", t0 - 30000, server_ms() - 30000);
    expect_flat(c, "1 2", "ZWINDOW cv:{w}:win 60000 m2");
    freeReplyObject(run(c, "ZTICK cv:{w}:win -40000 1e300"));
    t0 = server_ms();
    expect_flat(c, "1 2", "ZWINDOW cv:{w}:win 60000 m3 LIMIT 5");
    expect_flat(c, "m2 m3", "ZRANGE cv:{w}:win 0 -1");
    expect_score_between("cv:{w}:win", "m3", t0, server_ms());
    char okey[128];
    snprintf(okey, sizeof(okey), "%s", info_field("cv:{w}:win", "offset-key"));
    redisReply *t = run(at(okey), "PTTL %s", okey);
    cr_expect(t->type == REDIS_REPLY_INTEGER && t->integer > 55000 && t->integer <= 60000, "%s",
              VT_DESCRIBE(t));
    freeReplyObject(t);
    /* Inside MULTI, as EVAL: the same. */
    expect_status(c, "OK", "MULTI");
    expect_status(c, "QUEUED", "ZWINDOW cv:{w}:win 60000 m4 LIMIT 1");
    expect_status(c, "QUEUED", "QPOP cv:{w}:win MAXSCORE +inf");
    redisReply *r = run(c, "EXEC");
    vt_assert_array(r, 2);
    cr_expect_str_eq(flat(r->element[0]), "0 2");
    cr_expect(strncmp(flat(r->element[1]), "m2 ", 3) == 0, "%s", flat(r->element[1]));
    freeReplyObject(r);
}

TestSuite(conveyor_reload, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

Test(conveyor_reload, a_pattern_added_by_sighup_over_a_line_already_there)
{
    VT_SKIP_IF_DIRECT();
    snprintf(dir, sizeof(dir), "/tmp/vt-conveyor-XXXXXX");
    cr_assert(mkdtemp(dir) != NULL);
    snprintf(conf_path, sizeof(conf_path), "%s/proxy.conf", dir);
    FILE *f = fopen(conf_path, "w");
    cr_assert(f);
    fputs("# no conveyor yet\n", f);
    fclose(f);
    static const char *args[3];
    args[0] = "--config";
    args[1] = conf_path;
    args[2] = NULL;
    start_with(args);
    expect_int(c, 3, "ZADD line:old 1 a 2 b 3 c");
    freeReplyObject(run(c, "ZTICK line:old 1 100")); /* the plain way: every member rewritten */
    expect_flat(at("line:old"), "a 2 b 3 c 4", "ZRANGE line:old 0 -1 WITHSCORES");
    f = fopen(conf_path, "w");
    cr_assert(f);
    fputs("conveyor line:*\n", f);
    fclose(f);
    long long reloads = vt_proxy_stat(env.proxy->port, "reloads");
    cr_assert(vt_proxy_signal(env.proxy, SIGHUP));
    long long deadline = vt_now_ms() + 5000;
    while (vt_proxy_stat(env.proxy->port, "reloads") == reloads && vt_now_ms() < deadline)
        usleep(2000);
    cr_assert_eq(vt_proxy_stat(env.proxy->port, "reloads"), reloads + 1, "the reload did not happen");
    /* Offset 0: the stored scores are the positions; now the offset moves. */
    expect_flat(c, "c 5", "ZTICK line:old 1 5 WITHSCORES");
    expect_flat(c, "a 3 b 4", "ZRANGE line:old 0 -1 WITHSCORES");
    expect_flat(at("line:old"), "a 2 b 3", "ZRANGE line:old 0 -1 WITHSCORES");
    cr_expect_str_eq(info_field("line:old", "conveyor"), "1");
    cr_expect_str_eq(info_field("line:old", "offset"), "1");
}

Test(conveyor, rebase_folds_the_offset_and_info_says_so)
{
    expect_int(c, 2, "ZADD cv:r 1 a 2 b");
    freeReplyObject(run(c, "ZTICK cv:r 5 100"));
    freeReplyObject(run(c, "ZTICK cv:r 0.5 100"));
    cr_expect_str_eq(info_field("cv:r", "offset"), "5.5");
    cr_expect_str_eq(info_field("cv:r", "rebased-ms"), "nil");
    cr_expect_str_eq(info_field("cv:r", "members"), "2");
    redisReply *r = run(c, "VERBPROXY CONVEYOR REBASE cv:r");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    expect_flat(at("cv:r"), "a 6.5 b 7.5", "ZRANGE cv:r 0 -1 WITHSCORES");
    expect_flat(c, "a 6.5 b 7.5", "ZRANGE cv:r 0 -1 WITHSCORES");
    cr_expect_str_eq(info_field("cv:r", "offset"), "0");
    cr_expect_str_eq(info_field("cv:r", "rebases"), "1");
    cr_expect_str_neq(info_field("cv:r", "rebased-ms"), "nil");
    /* a plain key: nothing to fold, and INFO says it is none of ours */
    expect_int(c, 1, "ZADD plain:r 1 a");
    cr_expect_str_eq(info_field("plain:r", "conveyor"), "0");
    r = run(c, "VERBPROXY CONVEYOR INFO");
    vt_assert_error(r, "ERR wrong number of arguments for 'verbproxy|conveyor' command");
    freeReplyObject(r);
}

/* ---- a tick racing readers ---- */

enum { RACE_MEMBERS = 200, RACE_READERS = 2, RACE_TICKS = 400, RACE_MIN_READS = 20 };

typedef struct race_reader {
    int port;
    volatile int *stop;
    long long reads, torn;
    char why[256];
} race_reader;

/* Every member of the line sits at its index plus the ticks so far: a
 * reader that sees positions not exactly one apart saw half a tick. */
static void *race_read(void *arg)
{
    race_reader *rr = arg;
    redisContext *ctx = vt_connect(rr->port);
    if (!ctx) {
        snprintf(rr->why, sizeof(rr->why), "cannot connect");
        rr->torn++;
        return NULL;
    }
    while (!*rr->stop) {
        redisReply *r = redisCommand(ctx, "ZRANGE cv:race 0 -1 WITHSCORES");
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 * RACE_MEMBERS) {
            snprintf(rr->why, sizeof(rr->why), "ZRANGE: %s", r ? VT_DESCRIBE(r) : ctx->errstr);
            rr->torn++;
            freeReplyObject(r);
            break;
        }
        double first = strtod(r->element[1]->str, NULL);
        for (int i = 1; i < RACE_MEMBERS; i++) {
            double p = strtod(r->element[2 * i + 1]->str, NULL);
            if (p != first + i) {
                snprintf(rr->why, sizeof(rr->why), "member %d at %g, the first at %g", i, p, first);
                rr->torn++;
                break;
            }
        }
        freeReplyObject(r);
        __atomic_add_fetch(&rr->reads, 1, __ATOMIC_RELAXED);
    }
    redisFree(ctx);
    return NULL;
}

/* Has every reader read at least RACE_MIN_READS times? */
static bool race_all_read(race_reader *readers)
{
    for (int i = 0; i < RACE_READERS; i++)
        if (__atomic_load_n(&readers[i].reads, __ATOMIC_RELAXED) < RACE_MIN_READS) return false;
    return true;
}

Test(conveyor, no_reader_ever_sees_half_a_tick)
{
    redisReply *r =
        run(at("cv:race"), "EVAL %s 1 cv:race %d",
            "for i = 0, tonumber(ARGV[1]) - 1 do redis.call('ZADD', KEYS[1], i, string.format('m%03d', i)) "
            "end return 1",
            RACE_MEMBERS);
    freeReplyObject(r);
    volatile int stop = 0;
    race_reader readers[RACE_READERS];
    pthread_t threads[RACE_READERS];
    for (int i = 0; i < RACE_READERS; i++) {
        readers[i] = (race_reader){.port = env.proxy->port, .stop = &stop};
        cr_assert_eq(pthread_create(&threads[i], NULL, race_read, &readers[i]), 0);
    }
    /* At least RACE_TICKS ticks, and on until every reader has read a few
     * times among them (on a busy machine the readers can start late). */
    long long deadline = vt_now_ms() + 20000;
    int ticks = 0;
    for (; ticks < RACE_TICKS || !race_all_read(readers); ticks++) {
        cr_assert(vt_now_ms() < deadline, "the readers read only %lld and %lld times in %d ticks",
                  __atomic_load_n(&readers[0].reads, __ATOMIC_RELAXED),
                  __atomic_load_n(&readers[1].reads, __ATOMIC_RELAXED), ticks);
        r = run(c, "ZTICK cv:race 1 1e300");
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", VT_DESCRIBE(r));
        freeReplyObject(r);
    }
    stop = 1;
    for (int i = 0; i < RACE_READERS; i++) {
        pthread_join(threads[i], NULL);
        cr_expect_eq(readers[i].torn, 0, "reader %d: %s", i, readers[i].why);
        cr_expect_geq(readers[i].reads, RACE_MIN_READS, "reader %d read %lld times", i, readers[i].reads);
    }
    char want[16];
    snprintf(want, sizeof(want), "%d", ticks);
    cr_expect_str_eq(info_field("cv:race", "offset"), want);
}

/* ---- blocking pops ---- */

typedef struct evalsha_wait {
    int port;
    long long calls;
} evalsha_wait;

/* Redis has run more EVALSHAs than `calls`: the proxy's tries of a
 * waiting pop are under way. */
static bool evalsha_calls_past(void *arg)
{
    evalsha_wait *w = arg;
    redisContext *r = vt_connect(w->port);
    if (!r) return false;
    redisReply *info = redisCommand(r, "INFO commandstats");
    long long calls = 0;
    const char *at =
        info && info->type == REDIS_REPLY_STRING ? strstr(info->str, "cmdstat_evalsha:calls=") : NULL;
    if (at) calls = atoll(at + strlen("cmdstat_evalsha:calls="));
    freeReplyObject(info);
    redisFree(r);
    return calls > w->calls;
}

Test(conveyor, a_blocking_pop_waits_for_a_member_and_its_pipeline_waits_with_it)
{
    int fd = vt_must_sock(env.proxy->port);
    vt_buf got = {0};
    redisReply *r = run(at("cv:{q}"), "CONFIG RESETSTAT");
    freeReplyObject(r);
    /* Nothing to pop: the client waits, and the ZADD it pipelined behind
     * the pop waits with it, as Redis holds a blocked client's pipeline. */
    cr_assert(vt_sock_send_str(fd, "BZPOPMIN cv:{q}:line 0\r\nZADD cv:{q}:line 100 late\r\n"));
    evalsha_wait w = {vt_cluster_env_key_port("cv:{q}:line", env.redis->port), 3};
    cr_assert(vt_wait_until(evalsha_calls_past, &w, 5000), "the proxy did not try the pop again");
    expect_int(c, 0, "ZCARD cv:{q}:line");
    /* A member comes, on a line whose offset moves in the same
     * transaction: the pop, retried on a timer, must not fall between the
     * two (it would rightly answer m at 5). */
    expect_status(c, "OK", "MULTI");
    expect_status(c, "QUEUED", "ZADD cv:{q}:line 5 m");
    expect_status(c, "QUEUED", "ZTICK cv:{q}:line 10 1000");
    freeReplyObject(run(c, "EXEC"));
    cr_assert(vt_sock_read_replies(fd, &got, 2, 5000), "the pop was not answered: \"%s\"",
              vt_buf_escaped(&got));
    vt_assert_bytes(&got, "*3\r\n$11\r\ncv:{q}:line\r\n$1\r\nm\r\n$2\r\n15\r\n:1\r\n");
    expect_flat(c, "late 100", "ZRANGE cv:{q}:line 0 -1 WITHSCORES");
    vt_buf_free(&got);
    close(fd);
}

Test(conveyor, a_blocking_pop_times_out_with_redis_nil_array_and_errors_as_redis)
{
    int fd = vt_must_sock(env.proxy->port);
    vt_buf got = {0};
    long long t0 = vt_now_ms();
    cr_assert(vt_sock_send_str(fd, "BZPOPMAX cv:{t}:a cv:{t}:b 0.2\r\nPING\r\n"));
    cr_assert(vt_sock_read_replies(fd, &got, 2, 5000), "got \"%s\"", vt_buf_escaped(&got));
    long long waited = vt_now_ms() - t0;
    vt_assert_bytes(&got, "*-1\r\n+PONG\r\n");
    cr_expect(waited >= 195 && waited < 2000, "the timeout of 0.2 s took %lld ms", waited);
    vt_buf_reset(&got);
    /* Redis's own words, the timeout checked first; a key of another type. */
    expect_int(c, 1, "ZADD cv:{t}:b 1 x");
    freeReplyObject(run(c, "SET cv:{t}:s x"));
    cr_assert(vt_sock_send_str(
        fd, "BZPOPMIN cv:{t}:b -1\r\nBZPOPMIN cv:{t}:b soon\r\nBZPOPMIN cv:{t}:s cv:{t}:b 1\r\n"));
    cr_assert(vt_sock_read_replies(fd, &got, 3, 5000), "got \"%s\"", vt_buf_escaped(&got));
    vt_assert_bytes(&got, "-ERR timeout is negative\r\n-ERR timeout is not a float or out of range\r\n"
                          "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
    vt_buf_reset(&got);
    if (vt_redis_version() >= 700) { /* (BZMPOP came with Redis 7.0) */
        cr_assert(vt_sock_send_str(fd, "BZMPOP 1 2 cv:{t}:a cv:{t}:b MAX COUNT 5\r\n"));
        cr_assert(vt_sock_read_replies(fd, &got, 1, 5000), "got \"%s\"", vt_buf_escaped(&got));
        vt_assert_bytes(&got, "*2\r\n$8\r\ncv:{t}:b\r\n*1\r\n*2\r\n$1\r\nx\r\n$1\r\n1\r\n");
    }
    vt_buf_free(&got);
    close(fd);
}

/* ---- reads sent without a script (proxy/conveyor/conveyor_wrap.h) ---- */

/* A read whose arguments hold no score goes, on a shared connection, as
 * MULTI, HGET of the offset, the command, EXEC: Redis runs no script for
 * it. (On a connection of the client's own, as the script.) */
Test(conveyor, a_read_by_rank_runs_no_script_on_a_shared_connection)
{
    expect_int(c, 3, "ZADD cv:w 1 a 2 b 3.5 c");
    freeReplyObject(run(c, "ZTICK cv:w 0.25 100"));
    long long wrapped = vt_proxy_stat(env.proxy->port, "conveyor_wrapped");
    freeReplyObject(run(at("cv:w"), "CONFIG RESETSTAT"));
    expect_flat(c, "a 1.25 b 2.25 c 3.75", "ZRANGE cv:w 0 9 WITHSCORES");
    expect_flat(c, "c 3.75 b 2.25", "ZREVRANGE cv:w 0 1 WITHSCORES");
    redisReply *score = run(c, "ZSCORE cv:w c");
    cr_expect(score->type == REDIS_REPLY_STRING && strcmp(score->str, "3.75") == 0, "%s", VT_DESCRIBE(score));
    freeReplyObject(score);
    expect_flat(c, "1.25 nil 3.75", "ZMSCORE cv:w a x c");
    redisReply *r = run(at("cv:w"), "INFO commandstats");
    int scripts = strstr(r->str, "cmdstat_evalsha") != NULL;
    int execs = strstr(r->str, "cmdstat_exec:calls=4,") != NULL;
    freeReplyObject(r);
    long long now = vt_proxy_stat(env.proxy->port, "conveyor_wrapped");
    if (vt_proxy_shared_upstreams(env.proxy) > 0 && !vt_cluster_mode()) {
        cr_expect(!scripts && execs, "Redis ran a script, or not 4 EXECs");
        cr_expect_eq(now, wrapped + 4);
    } else {
        cr_expect(scripts && !execs, "Redis ran no script");
        cr_expect_eq(now, wrapped);
    }
}

/* The proxy's reply to `cmd` (a score range, its key written as %s) on
 * conveyor key cv and Redis's own to the same on plain key pl holding the
 * same positions: equal, element for element. */
static void expect_same_range(const char *cv, const char *pl, const char *cmd)
{
    char a[256], b[256];
    snprintf(a, sizeof(a), cmd, cv);
    snprintf(b, sizeof(b), cmd, pl);
    redisReply *got = run(c, a), *want = run(c, b);
    char want_flat[2048];
    snprintf(want_flat, sizeof(want_flat), "%s", flat(want));
    cr_expect_str_eq(flat(got), want_flat, "%s", a);
    cr_expect_eq(got->type, want->type, "%s", a);
    freeReplyObject(got);
    freeReplyObject(want);
}

/* A score range with a finite end goes, on a shared connection, written
 * with the offset the proxy expects (the one it last read for the key)
 * and checked by the script in the same transaction, which answers
 * itself when a tick moved the offset since. Either way the members are
 * those whose positions the bounds take, fractions and exclusive ends
 * too: compared with a plain key holding the positions. A script the
 * server lost (SCRIPT FLUSH) sends the read again. */
Test(conveyor, a_score_range_is_checked_against_the_offset_it_expected)
{
    /* Positions 0.1 apart, stored against an offset of 0.3 (fractions a
     * double sum rounds), and a plain key holding the same positions. */
    for (int i = 0; i < 60; i++)
        freeReplyObject(run(c, "ZADD cv:{r}:k %.17g m%02d", i * 0.1, i));
    freeReplyObject(run(c, "ZTICK cv:{r}:k 0.3 1000"));
    redisReply *all = run(c, "ZRANGE cv:{r}:k 0 -1 WITHSCORES");
    cr_assert(all->type == REDIS_REPLY_ARRAY && all->elements == 120, "%s", VT_DESCRIBE(all));
    for (size_t i = 0; i < all->elements; i += 2)
        freeReplyObject(run(c, "ZADD pl:{r}:k %s %s", all->element[i + 1]->str, all->element[i]->str));
    freeReplyObject(all);
    long long checked = vt_proxy_stat(env.proxy->port, "conveyor_checked");
    long long stale = vt_proxy_stat(env.proxy->port, "conveyor_checked_stale");
    static const char *const ranges[] = {
        "ZRANGEBYSCORE %s 1.5 3.3 WITHSCORES LIMIT 0 100",
        "ZRANGEBYSCORE %s (1.5 (3.3 LIMIT 0 100",
        "ZRANGEBYSCORE %s 0.6000000000000001 +inf LIMIT 2 5 WITHSCORES",
        "ZREVRANGEBYSCORE %s (5.2 -inf WITHSCORES LIMIT 0 7",
        "ZRANGE %s 2 (4.4 BYSCORE LIMIT 1 4 WITHSCORES",
        "ZRANGE %s (4.4 2 BYSCORE REV LIMIT 0 1000",
        "ZCOUNT %s 0.9 (2.1",
        "ZCOUNT %s -inf 0.5",
    };
    int n = (int)(sizeof(ranges) / sizeof(ranges[0]));
    for (int i = 0; i < n; i++) /* the offset first read, then as expected */
        expect_same_range("cv:{r}:k", "pl:{r}:k", ranges[i]);
    /* A tick moves the offset: the next read is answered by its script,
     * and teaches the proxy the new offset. */
    freeReplyObject(run(c, "ZTICK cv:{r}:k 0.7 1000"));
    redisReply *moved = run(c, "ZRANGE cv:{r}:k 0 -1 WITHSCORES");
    freeReplyObject(run(c, "DEL pl:{r}:k"));
    for (size_t i = 0; i < moved->elements; i += 2)
        freeReplyObject(run(c, "ZADD pl:{r}:k %s %s", moved->element[i + 1]->str, moved->element[i]->str));
    freeReplyObject(moved);
    for (int i = 0; i < n; i++)
        expect_same_range("cv:{r}:k", "pl:{r}:k", ranges[i]);
    long long now_checked = vt_proxy_stat(env.proxy->port, "conveyor_checked");
    long long now_stale = vt_proxy_stat(env.proxy->port, "conveyor_checked_stale");
    int wraps = vt_proxy_shared_upstreams(env.proxy) > 0 && !vt_cluster_mode();
    if (wraps) {
        cr_expect_eq(now_checked, checked + 2 * n);
        /* (the first read of all, with no offset known, and the first after
         * the tick) */
        cr_expect_eq(now_stale, stale + 2, "answered by the script: %lld", now_stale - stale);
    } else {
        cr_expect_eq(now_checked, checked);
    }
    /* The server lost the script: the read goes again, as the script. */
    long long retried = vt_proxy_stat(env.proxy->port, "conveyor_retried");
    freeReplyObject(run(at("cv:{r}:k"), "SCRIPT FLUSH"));
    expect_same_range("cv:{r}:k", "pl:{r}:k", ranges[0]);
    cr_expect_eq(vt_proxy_stat(env.proxy->port, "conveyor_retried"), retried + (wraps ? 1 : 0));
}

/* An offset key that holds no number (written straight into Redis) gets
 * the same error on a read sent without a script as on one with. */
Test(conveyor, a_bad_offset_is_refused_alike_with_a_script_or_without)
{
    expect_int(c, 2, "ZADD cv:bad 1 a 2 b");
    freeReplyObject(run(c, "ZTICK cv:bad 1 100"));
    char okey[64];
    snprintf(okey, sizeof(okey), "%s", info_field("cv:bad", "offset-key"));
    freeReplyObject(run(at("cv:bad"), "HSET %s offset nope", okey));
    char want[160];
    snprintf(want, sizeof(want),
             "ERR verbproxy: the offset key '%s' of conveyor key 'cv:bad' holds no offset", okey);
    static const char *const reads[] = {"ZSCORE cv:bad a", "ZRANGE cv:bad 0 9 WITHSCORES",
                                        "ZRANGE cv:bad 0 -1 WITHSCORES", "ZRANGEBYSCORE cv:bad 0 9"};
    for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++) {
        redisReply *r = run(c, reads[i]);
        vt_assert_error(r, want);
        freeReplyObject(r);
    }
}

/* Out of memory (maxmemory reached, noeviction) Redis 6.2 to 7.2 refuse
 * every command queued in MULTI, reads too, where they run the read alone
 * or in a script that writes nothing: a read sent in a transaction meets -OOM, goes
 * again as its script, and the connection sends the next reads as scripts
 * for a while. The client sees its positions either way. */
Test(conveyor, out_of_memory_a_read_still_answers)
{
    expect_int(c, 2, "ZADD cv:{o}:oom 1 a 2 b");
    freeReplyObject(run(c, "ZTICK cv:{o}:oom 1 100"));
    long long retries = vt_proxy_stat(env.proxy->port, "conveyor_retried");
    redisContext *owner = at("cv:{o}:oom");
    freeReplyObject(run(owner, "CONFIG SET maxmemory 1"));
    redisReply *r = run(c, "SET cv:{o}:other x");
    cr_expect(r->type == REDIS_REPLY_ERROR && strncmp(r->str, "OOM ", 4) == 0, "not out of memory: %s",
              VT_DESCRIBE(r));
    freeReplyObject(r);
    /* Does this server refuse a read queued in MULTI out of memory? (Redis
     * 6.2 to 7.2 and Valkey 7.2 do; Redis 7.4 and Valkey 8 refuse only
     * what may grow memory.) Asked straight, on the key's node. */
    freeReplyObject(run(owner, "MULTI"));
    r = run(owner, "ZSCORE cv:{o}:oom b");
    int refuses = r->type == REDIS_REPLY_ERROR && strncmp(r->str, "OOM ", 4) == 0;
    freeReplyObject(r);
    freeReplyObject(run(owner, "DISCARD"));
    r = run(c, "ZSCORE cv:{o}:oom b");
    cr_expect(r->type == REDIS_REPLY_STRING && strcmp(r->str, "3") == 0, "%s", VT_DESCRIBE(r));
    freeReplyObject(r);
    expect_flat(c, "a 2 b 3", "ZRANGE cv:{o}:oom 0 9 WITHSCORES");
    freeReplyObject(run(owner, "CONFIG SET maxmemory 0"));
    long long now = vt_proxy_stat(env.proxy->port, "conveyor_retried");
    int wraps = vt_proxy_shared_upstreams(env.proxy) > 0 && !vt_cluster_mode();
    cr_expect_eq(now, retries + (wraps && refuses ? 1 : 0), "sent again: %lld (Redis refuses: %d)",
                 now - retries, refuses);
}

/* A script running past busy-reply-threshold on another connection: Redis
 * answers a read sent in a transaction +OK to its MULTI, -BUSY to its HGET
 * (the client's reply, as Redis would answer the command or a script) and
 * to the command, and -EXECABORT to its EXEC, which ends the transaction.
 * Once the script is killed the shared connection serves every bystander,
 * and the reader reads positions again. */
static void busy_setup(void)
{
    VT_SKIP_IF_DIRECT();
    /* (busy-reply-threshold's old name: Redis 6.2 knows only that one) */
    static const char *const redis_args[] = {"--lua-time-limit", "100", NULL};
    static const char *const proxy_args[] = {"--conveyor", "cv:*", "--shared-upstreams", "1", NULL};
    start_redis_with(redis_args, proxy_args);
}

TestSuite(conveyor_busy, .init = busy_setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

static bool redis_is_busy(void *arg)
{
    (void)arg;
    return vt_redis_busy(env.redis->port);
}

static bool redis_is_free(void *arg)
{
    return !redis_is_busy(arg);
}

Test(conveyor_busy, a_read_that_meets_a_busy_script_leaves_no_transaction_open)
{
    expect_int(c, 2, "ZADD cv:line 1 a 2 b");
    freeReplyObject(run(c, "ZTICK cv:line 1 100"));
    int script = vt_must_sock(env.redis->port);
    vt_buf req = {0};
    vt_buf_cmd(&req, "EVAL", "while true do end", "0", NULL);
    cr_assert(vt_sock_send_buf(script, &req));
    cr_assert(vt_wait_until(redis_is_busy, NULL, VT_READ_DEADLINE_MS), "Redis never became busy");

    int reader = vt_must_sock(env.proxy->port);
    req.len = 0;
    vt_buf_cmd(&req, "ZRANGE", "cv:line", "0", "9", "WITHSCORES", NULL);
    char busy[160];
    snprintf(busy, sizeof(busy),
             "-BUSY %s is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n",
             vt_server_says());
    vt_exchange(reader, &req, busy);

    redisReply *r = run(direct, "SCRIPT KILL");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    close(script);
    cr_assert(vt_wait_until(redis_is_free, NULL, VT_READ_DEADLINE_MS), "the script did not stop");
    vt_bystanders *b = vt_bystanders_start(env.proxy->port, 4);
    cr_assert(b, "bystanders did not start");
    cr_assert(vt_bystanders_wait(b, 50, VT_READ_DEADLINE_MS), "bystanders were not served after the script");
    vt_assert_bystanders_ok(b);
    vt_buf_cmd(&req, "ZRANGE", "cv:line", "0", "9", "WITHSCORES", NULL);
    vt_exchange(reader, &req, "*4\r\n$1\r\na\r\n$1\r\n2\r\n$1\r\nb\r\n$1\r\n3\r\n");
    vt_buf_free(&req);
    close(reader);
}

/* An operator who renamed MULTI and EXEC away (rename-command): the first
 * read sent in a transaction meets an unknown MULTI and goes again as its
 * script; the proxy wraps nothing from then on, loses no connection, and
 * the bystanders on the shared connection see nothing of it. */
static void renamed_setup(void)
{
    VT_SKIP_IF_DIRECT();
    static const char *const redis_args[] = {
        "--rename-command", "MULTI", "vt-multi", "--rename-command", "EXEC", "vt-exec", NULL};
    static const char *const proxy_args[] = {"--conveyor", "cv:*", "--shared-upstreams", "1", NULL};
    start_redis_with(redis_args, proxy_args);
}

TestSuite(conveyor_renamed, .init = renamed_setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

Test(conveyor_renamed, reads_go_as_scripts_when_multi_and_exec_are_renamed)
{
    expect_int(c, 2, "ZADD cv:line 1 a 2 b");
    freeReplyObject(run(c, "ZTICK cv:line 1 100"));
    vt_bystanders *b = vt_bystanders_start(env.proxy->port, 4);
    cr_assert(b, "bystanders did not start");
    long long lost = vt_proxy_stat(env.proxy->port, "upstream_lost");
    for (int i = 0; i < 3; i++)
        expect_flat(c, "a 2 b 3", "ZRANGE cv:line 0 9 WITHSCORES");
    cr_assert(vt_bystanders_wait(b, 50, VT_READ_DEADLINE_MS), "bystanders were not served");
    vt_assert_bystanders_ok(b);
    cr_expect_eq(vt_proxy_stat(env.proxy->port, "upstream_lost"), lost, "a connection was lost");
    if (vt_proxy_shared_upstreams(env.proxy) > 0)
        cr_expect_eq(vt_proxy_stat(env.proxy->port, "conveyor_retried"), 1);
}

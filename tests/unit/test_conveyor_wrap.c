/* The reads on a conveyor key sent in a transaction with their offset
 * (proxy/conveyor/conveyor_wrap.h): which commands go that way, and the
 * rewrite of EXEC's reply; and a double as Redis writes it in a reply
 * (protocol/resp_double.h), against its oracle, a real redis-server's
 * ZSCORE (the server matrix runs this on every supported server: the
 * format changed in Redis 7.2). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/resp_double.h"
#include "proxy/config.h"
#include "proxy/conveyor/conveyor_wrap.h"
#include "tests/support/client.h"
#include "tests/support/rng.h"
#include "tests/support/servers.h"

/* ---- the double format, against Redis ---- */

static vt_redis *redis;
static redisContext *rc;

static void redis_setup(void)
{
    vt_redis_opts o = {.tls = VT_REDIS_TLS_NONE};
    redis = vt_redis_start(&o);
    cr_assert_not_null(redis, "redis-server did not start");
    rc = vt_connect(redis->port);
    cr_assert_not_null(rc);
}

static void redis_teardown(void)
{
    if (rc) redisFree(rc);
    vt_redis_free(redis);
}

/* A double of every kind a line holds: integers small and huge, halves,
 * random fractions, random bit patterns (finite), tiny ones. */
static double random_double(vt_rng *g)
{
    switch (vt_rng_pick(g, 7)) {
    case 0:
        return (double)((long long)(vt_rng_next(g) % 2000001) - 1000000);
    case 1:
        return (double)((long long)(vt_rng_next(g) % 2000001) - 1000000) + 0.5;
    case 2:
        return ldexp((double)(vt_rng_next(g) >> 11), vt_rng_pick(g, 80)) * (vt_rng_pick(g, 2) ? 1 : -1);
    case 3:
        return (double)(vt_rng_next(g) >> 11) / (double)(1 + (vt_rng_next(g) >> 40));
    case 4: {
        uint64_t bits = vt_rng_next(g);
        double d;
        memcpy(&d, &bits, sizeof(d));
        return isfinite(d) ? d : 1.0 / 3;
    }
    case 5:
        return ldexp((double)(vt_rng_next(g) >> 11), -(60 + vt_rng_pick(g, 200)));
    default: {
        static const double picked[] = {0.1,
                                        0.2,
                                        0.30000000000000004,
                                        1e15,
                                        1e16,
                                        1e17,
                                        1e21,
                                        1e22,
                                        4611686018427387904.0,
                                        4611686018427387903.5,
                                        123456789012345678.0,
                                        -0.0,
                                        0.0,
                                        5e-324,
                                        1.7976931348623157e308,
                                        1e-7,
                                        1e-6,
                                        0.000123};
        return picked[vt_rng_pick(g, (int)(sizeof(picked) / sizeof(picked[0])))];
    }
    }
}

Test(resp_double, formats_a_score_as_this_server_writes_it, .init = redis_setup, .fini = redis_teardown)
{
    int fpconv = vt_redis_version() >= 702;
    vt_rng g = vt_rng_seeded(20261206);
    for (int i = 0; i < 3000; i++) {
        double d = random_double(&g);
        if (d == 0 && signbit(d)) continue; /* (a set keeps no -0: docs/conveyor.md, Known differences) */
        char in[64];
        snprintf(in, sizeof(in), "%.17g", d);
        redisReply *r = redisCommand(rc, "ZADD z %s m", in);
        cr_assert(r && r->type == REDIS_REPLY_INTEGER, "ZADD %s", in);
        freeReplyObject(r);
        r = redisCommand(rc, "ZSCORE z m");
        cr_assert(r && r->type == REDIS_REPLY_STRING);
        char out[RESP_DOUBLE_MAX];
        size_t n = resp_double_format(out, d, fpconv);
        cr_assert(n == r->len && memcmp(out, r->str, n) == 0, "%s: Redis wrote %s, the proxy %.*s", in,
                  r->str, (int)n, out);
        freeReplyObject(r);
    }
    for (int inf = -1; inf <= 1; inf += 2) {
        char out[RESP_DOUBLE_MAX];
        size_t n = resp_double_format(out, inf * INFINITY, fpconv);
        cr_assert(n == (inf > 0 ? 3u : 4u) && memcmp(out, inf > 0 ? "inf" : "-inf", n) == 0);
    }
}

/* fpconv (Grisu2: nearly always the shortest digits) reads back the same
 * double. */
Test(resp_double, fpconv_reads_back_the_same_double)
{
    vt_rng g = vt_rng_seeded(7);
    for (int i = 0; i < 20000; i++) {
        double d = random_double(&g);
        char out[RESP_DOUBLE_MAX + 1];
        size_t n = resp_double_format(out, d, 1);
        out[n] = '\0';
        cr_assert(strtod(out, NULL) == d, "%.17g wrote %s", d, out);
    }
}

/* ---- which reads are wrapped ---- */

static vp_config conf;

static void conf_setup(void)
{
    conf_defaults(&conf);
    char err[256];
    cr_assert(conf_set(&conf, "conveyor", "cv:*", err, sizeof(err)) == 0, "%s", err);
}

static void conf_teardown(void)
{
    conf_free(&conf);
}

/* A command line's words into argv (pointing into a static copy). */
static int words(const char *line, resp_arg argv[16])
{
    static char buf[512];
    int argc = 0;
    snprintf(buf, sizeof(buf), "%s", line);
    for (char *t = strtok(buf, " "); t && argc < 16; t = strtok(NULL, " "))
        argv[argc++] = (resp_arg){t, strlen(t)};
    return argc;
}

static conveyor_wrap_shape shape_of(const char *line)
{
    resp_arg argv[16];
    int argc = words(line, argv);
    return conveyor_wrap_shape_of(&conf, argc, argv);
}

Test(conveyor_wrap, the_reads_whose_arguments_hold_no_score, .init = conf_setup, .fini = conf_teardown)
{
    cr_expect_eq(shape_of("ZSCORE cv:a m"), CONVEYOR_WRAP_SCALAR);
    cr_expect_eq(shape_of("zmscore cv:a m n o"), CONVEYOR_WRAP_ALL);
    cr_expect_eq(shape_of("ZRANK cv:a m WITHSCORE"), CONVEYOR_WRAP_ODD);
    cr_expect_eq(shape_of("ZREVRANK cv:a m withscore"), CONVEYOR_WRAP_ODD);
    cr_expect_eq(shape_of("ZRANGE cv:a 0 99 WITHSCORES"), CONVEYOR_WRAP_ODD);
    cr_expect_eq(shape_of("ZRANGE cv:a -100 -1 REV WITHSCORES"), CONVEYOR_WRAP_ODD);
    cr_expect_eq(shape_of("ZRANGE cv:a 5 2 WITHSCORES"), CONVEYOR_WRAP_ODD); /* (empty) */
    cr_expect_eq(shape_of("ZREVRANGE cv:a 0 999 WITHSCORES"), CONVEYOR_WRAP_ODD);
    cr_expect_eq(shape_of("ZRANDMEMBER cv:a -1000 WITHSCORES"), CONVEYOR_WRAP_ODD);
    /* a score range whose ends are both infinite reads no offset */
    cr_expect_eq(shape_of("ZRANGEBYSCORE cv:a -inf +inf LIMIT 0 100 WITHSCORES"), CONVEYOR_WRAP_ODD);
    cr_expect_eq(shape_of("ZREVRANGEBYSCORE cv:a +inf (-inf WITHSCORES LIMIT 5 1000"), CONVEYOR_WRAP_ODD);
    cr_expect_eq(shape_of("ZRANGE cv:a -inf inf BYSCORE REV LIMIT 0 10 WITHSCORES"), CONVEYOR_WRAP_ODD);
}

Test(conveyor_wrap, what_stays_a_script, .init = conf_setup, .fini = conf_teardown)
{
    cr_expect_eq(shape_of("ZSCORE plain m"), CONVEYOR_WRAP_NONE);              /* not a conveyor key */
    cr_expect_eq(shape_of("ZSCORE cv:a m extra"), CONVEYOR_WRAP_NONE);         /* Redis's arity error */
    cr_expect_eq(shape_of("ZRANK cv:a m"), CONVEYOR_WRAP_NONE);                /* no score */
    cr_expect_eq(shape_of("ZRANGE cv:a 0 -1 WITHSCORES"), CONVEYOR_WRAP_NONE); /* unbounded */
    cr_expect_eq(shape_of("ZRANGE cv:a 0 1000 WITHSCORES"), CONVEYOR_WRAP_NONE);
    cr_expect_eq(shape_of("ZRANGE cv:a 0 10 BYSCORE WITHSCORES"), CONVEYOR_WRAP_NONE); /* score bounds */
    cr_expect_eq(shape_of("ZRANGE cv:a 0 10 WITHSCORES LIMIT 0 1"), CONVEYOR_WRAP_NONE);
    cr_expect_eq(shape_of("ZRANGE cv:a 00 10 WITHSCORES"), CONVEYOR_WRAP_NONE); /* Redis's own parse */
    cr_expect_eq(shape_of("ZRANGEBYSCORE cv:a 0 10 WITHSCORES"), CONVEYOR_WRAP_NONE);
    cr_expect_eq(shape_of("ZREVRANGE cv:a 0 10"), CONVEYOR_WRAP_NONE);
    cr_expect_eq(shape_of("ZRANDMEMBER cv:a 1001 WITHSCORES"), CONVEYOR_WRAP_NONE);
    cr_expect_eq(shape_of("ZADD cv:a 1 m"), CONVEYOR_WRAP_NONE);
    cr_expect_eq(shape_of("ZRANGEBYSCORE cv:a -inf 5 LIMIT 0 100 WITHSCORES"),
                 CONVEYOR_WRAP_NONE);                                                      /* finite */
    cr_expect_eq(shape_of("ZRANGEBYSCORE cv:a -inf +inf WITHSCORES"), CONVEYOR_WRAP_NONE); /* no LIMIT */
    cr_expect_eq(shape_of("ZRANGEBYSCORE cv:a -inf +inf LIMIT 0 -1 WITHSCORES"), CONVEYOR_WRAP_NONE);
    cr_expect_eq(shape_of("ZRANGEBYSCORE cv:a -inf +inf LIMIT 0 1001 WITHSCORES"), CONVEYOR_WRAP_NONE);
    cr_expect_eq(shape_of("ZRANGEBYSCORE cv:a -inf +inf REV LIMIT 0 1 WITHSCORES"), CONVEYOR_WRAP_NONE);
    cr_expect_eq(shape_of("ZRANGE cv:a 0 9 LIMIT 0 1 WITHSCORES"), CONVEYOR_WRAP_NONE); /* Redis's error */
    cr_expect_eq(shape_of("ZRANGE cv:a -inf +inf BYLEX LIMIT 0 1 WITHSCORES"), CONVEYOR_WRAP_NONE);
}

/* ---- the reply ---- */

static conveyor_wrap_seen seen;

static const char *unwrap_as(conveyor_wrap_shape shape, int checked, int fpconv, const char *exec)
{
    static vp_buf out;
    static char text[1024];
    int r = conveyor_wrap_reply(shape, checked, fpconv, "cv:a", 4, exec, strlen(exec), &out, &seen);
    if (r == 0)
        snprintf(text, sizeof(text), "(as it is)");
    else if (r < 0)
        snprintf(text, sizeof(text), "(again)");
    else
        snprintf(text, sizeof(text), "%.*s", (int)out.len, out.data);
    return text;
}

static const char *unwrap(conveyor_wrap_shape shape, int fpconv, const char *exec)
{
    return unwrap_as(shape, 0, fpconv, exec);
}

#define OFFSET(s) "*2\r\n$" #s "\r\n"
Test(conveyor_wrap, the_offset_is_added_to_every_score)
{
    /* ZSCORE, nil, an error */
    cr_expect_str_eq(unwrap(CONVEYOR_WRAP_SCALAR, 1, "*2\r\n$3\r\n1.5\r\n$1\r\n2\r\n"), "$3\r\n3.5\r\n");
    cr_expect_str_eq(unwrap(CONVEYOR_WRAP_SCALAR, 1, "*2\r\n$3\r\n1.5\r\n$-1\r\n"), "$-1\r\n");
    cr_expect_str_eq(unwrap(CONVEYOR_WRAP_SCALAR, 1, "*2\r\n$3\r\n1.5\r\n-WRONGTYPE x\r\n"),
                     "-WRONGTYPE x\r\n");
    /* no offset: the command's reply as Redis wrote it */
    cr_expect_str_eq(unwrap(CONVEYOR_WRAP_ODD, 1, "*2\r\n$-1\r\n*2\r\n$1\r\na\r\n$3\r\n0.1\r\n"),
                     "*2\r\n$1\r\na\r\n$3\r\n0.1\r\n");
    /* pairs; a rank and its score; every element, with a nil kept */
    cr_expect_str_eq(unwrap(CONVEYOR_WRAP_ODD, 1,
                            "*2\r\n$2\r\n10\r\n*4\r\n$1\r\na\r\n$1\r\n1\r\n$2\r\nbb\r\n$3\r\n2.5\r\n"),
                     "*4\r\n$1\r\na\r\n$2\r\n11\r\n$2\r\nbb\r\n$4\r\n12.5\r\n");
    cr_expect_str_eq(unwrap(CONVEYOR_WRAP_ODD, 1, "*2\r\n$2\r\n-3\r\n*2\r\n:4\r\n$1\r\n1\r\n"),
                     "*2\r\n:4\r\n$2\r\n-2\r\n");
    cr_expect_str_eq(unwrap(CONVEYOR_WRAP_ODD, 1, "*2\r\n$1\r\n1\r\n*-1\r\n"), "*-1\r\n");
    cr_expect_str_eq(
        unwrap(CONVEYOR_WRAP_ALL, 0, "*2\r\n$3\r\n0.1\r\n*3\r\n$3\r\n0.2\r\n$-1\r\n$3\r\ninf\r\n"),
        "*3\r\n$19\r\n0.30000000000000004\r\n$-1\r\n$3\r\ninf\r\n");
    cr_expect_str_eq(unwrap(CONVEYOR_WRAP_ALL, 1, "*2\r\n$3\r\n0.1\r\n*1\r\n$3\r\n0.2\r\n"),
                     "*1\r\n$19\r\n0.30000000000000004\r\n");
    cr_expect_str_eq(unwrap(CONVEYOR_WRAP_ALL, 0, "*2\r\n$3\r\n0.5\r\n*1\r\n$3\r\n0.1\r\n"),
                     "*1\r\n$19\r\n0.59999999999999998\r\n");
    cr_expect_str_eq(unwrap(CONVEYOR_WRAP_ALL, 1, "*2\r\n$3\r\n0.5\r\n*1\r\n$3\r\n0.1\r\n"),
                     "*1\r\n$3\r\n0.6\r\n");
}

Test(conveyor_wrap, what_is_not_an_exec_reply_goes_as_it_is)
{
    cr_expect_str_eq(unwrap(CONVEYOR_WRAP_ODD, 1, "-BUSY Redis is busy running a script.\r\n"), "(as it is)");
    cr_expect_str_eq(unwrap(CONVEYOR_WRAP_ODD, 1, "-EXECABORT Transaction discarded\r\n"), "(as it is)");
    /* an EXEC Redis refused itself: the refusal, as the command would have met it */
    cr_expect_str_eq(
        unwrap(CONVEYOR_WRAP_ODD, 1,
               "-EXECABORT Transaction discarded because of: BUSY Redis is busy running a script.\r\n"),
        "-BUSY Redis is busy running a script.\r\n");
}

Test(conveyor_wrap, the_transaction_holds_the_command_and_reads_back)
{
    vp_buf out = {0};
    resp_arg argv[5] = {{"ZRANGE", 6}, {"cv:a", 4}, {"0", 1}, {"9", 1}, {"WITHSCORES", 10}};
    size_t at, len;
    conveyor_wrap_request(5, argv, &out, &at, &len);
    static const char want[] =
        "*1\r\n$5\r\nMULTI\r\n*3\r\n$4\r\nHGET\r\n$26\r\nverbproxy-offset:{zI}:cv:a\r\n"
        "$6\r\noffset\r\n*5\r\n$6\r\nZRANGE\r\n$4\r\ncv:a\r\n$1\r\n0\r\n$1\r\n9\r\n"
        "$10\r\nWITHSCORES\r\n*1\r\n$4\r\nEXEC\r\n";
    cr_assert_eq(out.len, sizeof(want) - 1);
    cr_assert(memcmp(out.data, want, out.len) == 0, "%.*s", (int)out.len, out.data);
    resp_arg back[5];
    cr_assert_eq(conveyor_wrap_args(out.data + at, len, back, 5), 5);
    for (int i = 0; i < 5; i++)
        cr_expect(back[i].len == argv[i].len && memcmp(back[i].ptr, argv[i].ptr, argv[i].len) == 0);
    cr_expect_eq(conveyor_wrap_args(out.data + at, len, back, 2), 5, "the count, whatever max");
    vp_buf_free(&out);
}

Test(conveyor_wrap, an_offset_that_is_no_number_gets_the_scripts_error)
{
    static const char want[] = "-ERR verbproxy: the offset key 'verbproxy-offset:{zI}:cv:a' of conveyor key "
                               "'cv:a' holds no offset\r\n";
    cr_expect_str_eq(unwrap(CONVEYOR_WRAP_SCALAR, 1, "*2\r\n$3\r\nabc\r\n$1\r\n1\r\n"), want);
    cr_expect_str_eq(unwrap(CONVEYOR_WRAP_SCALAR, 1, "*2\r\n$3\r\ninf\r\n$1\r\n1\r\n"), want);
    cr_expect_str_eq(unwrap(CONVEYOR_WRAP_SCALAR, 1, "*2\r\n-WRONGTYPE Operation\r\n$1\r\n1\r\n"), want);
    /* as Lua's tonumber reads it: spaces after, hexadecimal */
    cr_expect_str_eq(unwrap(CONVEYOR_WRAP_SCALAR, 1, "*2\r\n$3\r\n2  \r\n$1\r\n1\r\n"), "$1\r\n3\r\n");
    cr_expect_str_eq(unwrap(CONVEYOR_WRAP_SCALAR, 1, "*2\r\n$4\r\n0x10\r\n$1\r\n1\r\n"), "$2\r\n17\r\n");
}

/* ---- checked reads: a finite score bound, written with the offset expected ---- */

static int checked_of(const char *line, conveyor_checked *ck)
{
    resp_arg argv[16];
    int argc = words(line, argv);
    return conveyor_wrap_checked_of(&conf, argc, argv, ck);
}

Test(conveyor_wrap, the_score_ranges_sent_checked, .init = conf_setup, .fini = conf_teardown)
{
    conveyor_checked ck;
    cr_assert(checked_of("ZRANGEBYSCORE cv:a 500 +inf LIMIT 0 100", &ck));
    cr_expect_eq(ck.shape, CONVEYOR_WRAP_ASIS);
    cr_expect(ck.finite[0] && !ck.finite[1] && ck.lower[0] && ck.value[0] == 500 && !ck.exclusive[0]);
    cr_assert(checked_of("ZREVRANGEBYSCORE cv:a (10 -5.5 WITHSCORES LIMIT 0 1000", &ck));
    cr_expect_eq(ck.shape, CONVEYOR_WRAP_ODD);
    cr_expect(ck.finite[0] && ck.finite[1] && !ck.lower[0] && ck.lower[1] && ck.exclusive[0] &&
              !ck.exclusive[1]);
    cr_expect(ck.value[0] == 10 && ck.value[1] == -5.5);
    cr_assert(checked_of("ZRANGE cv:a (1 5 BYSCORE REV LIMIT 2 3", &ck));
    cr_expect(!ck.lower[0] && ck.lower[1]);
    cr_assert(checked_of("zcount cv:a -inf 1e3", &ck));
    cr_expect(!ck.finite[0] && ck.finite[1] && !ck.lower[1] && ck.value[1] == 1000);
    /* not: both ends infinite, a reply of unbounded length, what Redis
     * parses in ways of its own (the script's path), a plain key */
    cr_expect(!checked_of("ZCOUNT cv:a -inf +inf", &ck));
    cr_expect(!checked_of("ZRANGEBYSCORE cv:a 5 10", &ck));
    cr_expect(!checked_of("ZRANGEBYSCORE cv:a 5 10 LIMIT 0 -1", &ck));
    cr_expect(!checked_of("ZRANGEBYSCORE cv:a 5 10 LIMIT 0 1001", &ck));
    cr_expect(!checked_of("ZRANGEBYSCORE cv:a 0x10 20 LIMIT 0 1", &ck));
    cr_expect(!checked_of("ZRANGEBYSCORE cv:a ( 20 LIMIT 0 1", &ck));
    cr_expect(!checked_of("ZRANGEBYSCORE cv:a nan 20 LIMIT 0 1", &ck));
    cr_expect(!checked_of("ZRANGEBYSCORE cv:a 1e999 20 LIMIT 0 1", &ck));
    cr_expect(!checked_of("ZRANGEBYSCORE cv:a 1 20 REV LIMIT 0 1", &ck));
    cr_expect(!checked_of("ZRANGE cv:a 1 20 LIMIT 0 1", &ck)); /* by rank */
    cr_expect(!checked_of("ZCOUNT cv:a 1 2 3", &ck));
    cr_expect(!checked_of("ZRANGEBYSCORE plain 1 2 LIMIT 0 1", &ck));
}

Test(conveyor_wrap, a_checked_read_is_written_in_stored_scores, .init = conf_setup, .fini = conf_teardown)
{
    conveyor_checked ck;
    resp_arg argv[7] = {{"ZRANGEBYSCORE", 13}, {"cv:a", 4}, {"15", 2}, {"(20", 3},
                        {"LIMIT", 5},          {"0", 1},    {"5", 1}};
    cr_assert(conveyor_wrap_checked_of(&conf, 7, argv, &ck));
    vp_buf out = {0};
    conveyor_wrap_checked_request(7, argv, &ck, 10, &out);
    /* the first stored score whose position (its sum with 10) is 15 or
     * more, and the last whose position is below 20: a few doubles off 5
     * and 10 (lib/conveyor_bound.lua finds the same members) */
    static const char want[] =
        "*1\r\n$5\r\nMULTI\r\n*3\r\n$4\r\nHGET\r\n$26\r\nverbproxy-offset:{zI}:cv:a\r\n"
        "$6\r\noffset\r\n*7\r\n$13\r\nZRANGEBYSCORE\r\n$4\r\ncv:a\r\n$18\r\n4.9999999999999991\r\n"
        "$18\r\n9.9999999999999964\r\n"
        "$5\r\nLIMIT\r\n$1\r\n0\r\n$1\r\n5\r\n";
    cr_expect(out.len == sizeof(want) - 1 && memcmp(out.data, want, out.len) == 0, "%.*s", (int)out.len,
              out.data);
    vp_buf_free(&out);
}

Test(conveyor_wrap, a_checked_reply_is_the_commands_or_the_scripts)
{
    /* the offset was the one expected (the script's false): the command's
     * reply, its scores made positions; the offset seen, for the cache */
    cr_expect_str_eq(
        unwrap_as(CONVEYOR_WRAP_ODD, 1, 1, "*3\r\n$2\r\n10\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n$-1\r\n"),
        "*2\r\n$1\r\na\r\n$2\r\n11\r\n");
    cr_expect(seen.state == CONVEYOR_SEEN_TEXT && seen.len == 2 && memcmp(seen.text, "10", 2) == 0);
    cr_expect_str_eq(unwrap_as(CONVEYOR_WRAP_ASIS, 1, 1, "*3\r\n$2\r\n10\r\n*1\r\n$1\r\na\r\n$-1\r\n"),
                     "*1\r\n$1\r\na\r\n");
    cr_expect_str_eq(unwrap_as(CONVEYOR_WRAP_ASIS, 1, 1, "*3\r\n$-1\r\n:7\r\n$-1\r\n"), ":7\r\n");
    cr_expect(seen.state == CONVEYOR_SEEN_NONE);
    /* it was not: the script's reply, as it is */
    cr_expect_str_eq(unwrap_as(CONVEYOR_WRAP_ODD, 1, 1,
                               "*3\r\n$2\r\n12\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$1\r\nb\r\n$1\r\n7\r\n"),
                     "*2\r\n$1\r\nb\r\n$1\r\n7\r\n");
    cr_expect(seen.state == CONVEYOR_SEEN_TEXT && seen.len == 2 && memcmp(seen.text, "12", 2) == 0);
    cr_expect_str_eq(unwrap_as(CONVEYOR_WRAP_ASIS, 1, 1, "*3\r\n$1\r\n3\r\n-WRONGTYPE x\r\n-ERR y\r\n"),
                     "-ERR y\r\n");
    /* the server lost the script: the read goes again */
    cr_expect_str_eq(unwrap_as(CONVEYOR_WRAP_ASIS, 1, 1,
                               "*3\r\n$1\r\n3\r\n:1\r\n-NOSCRIPT No matching script. Please use EVAL.\r\n"),
                     "(again)");
    /* a bad offset the script agreed with: its error */
    cr_expect_str_eq(
        unwrap_as(CONVEYOR_WRAP_ASIS, 1, 1, "*3\r\n$3\r\nabc\r\n:1\r\n$-1\r\n"),
        "-ERR verbproxy: the offset key 'verbproxy-offset:{zI}:cv:a' of conveyor key 'cv:a' holds "
        "no offset\r\n");
    cr_expect_str_eq(unwrap_as(CONVEYOR_WRAP_ASIS, 1, 1, "*2\r\n$1\r\n3\r\n:1\r\n"), "(as it is)");
}

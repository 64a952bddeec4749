/* test_verbs.c - the virtual verbs, verb by verb, as a user sees them.
 *
 * ZTICK, QPOP, QACK, QEXTEND, QRECLAIM, LOCKRELEASE, LOCKRENEW, LOCKHANDOVER,
 * HSETVER and ZWINDOW are not Redis commands: the proxy turns each into a
 * call of an embedded Lua script. docs/verbs.md is the contract told here
 * (docs/verbs.md#each-verb, docs/verbs.md#errors-every-verb-shares): the
 * replies, the error texts, the argument rules.
 *
 * Every check compares with a concrete reply, written the way the harness
 * describes replies in its failure messages: "string", :integer, -error,
 * +status, (nil), [a, b]. Times come from the server's clock: TIME is read
 * just before and just after a verb, so a deadline the verb computed from its
 * own TIME must lie between the two plus its milliseconds, exactly.
 *
 * A boundary at the server's "now" (a deadline due exactly now, an entry
 * exactly window-ms old) is judged in rounds where TIME read the same
 * millisecond before and after the verb.
 *
 * Argument errors are the proxy's own: each is pipelined with an ECHO whose
 * reply must come right after it (the connection goes on, in order), and
 * Redis must never have been asked to run a script for them. Inside MULTI
 * and under CLIENT REPLY OFF/SKIP they behave as Redis's own errors do.
 *
 * VP_TEST_DIRECT=1: Redis itself has no such commands; the suite skips. */
#include <errno.h>

#include "tests/support/checks.h"
#include "tests/support/expect.h"

static vt_env env;

static void setup(void)
{
    vt_env_start(&env, NULL, NULL);
}

static void teardown(void)
{
    vt_env_stop(&env);
}

TestSuite(verbs, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

#define WRONGTYPE "-WRONGTYPE Operation against a key holding the wrong kind of value"
#define ERR_SYNTAX "ERR syntax error"
#define ERR_FLOAT "ERR value is not a valid float"
#define ERR_INT "ERR value is not an integer or out of range"
#define ERR_NEGATIVE "ERR value is out of range, must be positive"

/* ---- helpers ---- */

/* A connection through the proxy (the suite has nothing to say to Redis
 * alone about verbs). */
static redisContext *client(void)
{
    VT_SKIP_IF_DIRECT();
    return vt_must_connect(env.proxy->port);
}

static long long parse_ll(const char *what, const char *s)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    cr_assert(s[0] && *end == '\0' && errno == 0, "%s: \"%s\" is not a whole number", what, s);
    return v;
}

/* A member's score, which the verbs make a whole number of ms. */
static long long zscore_ms(redisContext *c, const char *key, const char *member)
{
    redisReply *r = vt_cmd(c, "ZSCORE %s %s", key, member);
    cr_assert(r && r->type == REDIS_REPLY_STRING, "ZSCORE %s %s: got %s", key, member, VT_DESCRIBE(r));
    long long v = parse_ll("ZSCORE", r->str);
    freeReplyObject(r);
    return v;
}

/* ---- ZTICK key delta threshold [WITHSCORES] ---- */

/* The conveyor of README.md ("The verbs") and docs/verbs.md#ztick. */
Test(verbs, ztick_the_readme_conveyor)
{
    redisContext *c = client();
    EXPECT(c, ":3", "ZADD conveyor:positions 0 crate-1 10 crate-2 90 crate-3");
    EXPECT(c, "[\"crate-3\"]", "ZTICK conveyor:positions 15 100");
    EXPECT(c, "[\"crate-1\", \"15\", \"crate-2\", \"25\"]", "ZRANGE conveyor:positions 0 -1 WITHSCORES");
    redisFree(c);
}

Test(verbs, ztick_withscores_returns_pairs_by_new_score_and_the_threshold_itself_is_reached)
{
    redisContext *c = client();
    EXPECT(c, ":4", "ZADD zt:w 95 d 90 c 0 a 10 b");
    EXPECT(c, "[\"c\", \"100\", \"d\", \"105\"]", "ZTICK zt:w 10 100 WITHSCORES");
    EXPECT(c, "[\"a\", \"10\", \"b\", \"20\"]", "ZRANGE zt:w 0 -1 WITHSCORES");
    /* below the threshold nothing goes, but every score moves */
    EXPECT(c, "[]", "ZTICK zt:w 79.5 100 WITHSCORES");
    EXPECT(c, "[\"a\", \"89.5\", \"b\", \"99.5\"]", "ZRANGE zt:w 0 -1 WITHSCORES");
    EXPECT(c, "[\"b\"]", "ZTICK zt:w 0.5 100");
    EXPECT(c, "[\"a\", \"90\"]", "ZRANGE zt:w 0 -1 WITHSCORES");
    redisFree(c);
}

Test(verbs, ztick_ties_come_back_in_member_order_and_an_emptied_set_is_gone)
{
    redisContext *c = client();
    EXPECT(c, ":3", "ZADD zt:t 5 b 5 c 5 a");
    EXPECT(c, "[\"a\", \"b\", \"c\"]", "ZTICK zt:t 0 5");
    EXPECT(c, ":0", "EXISTS zt:t");
    EXPECT(c, ":4", "ZADD zt:t2 1 y 1 x 2 a 1 z");
    EXPECT(c, "[\"x\", \"1\", \"y\", \"1\", \"z\", \"1\", \"a\", \"2\"]", "ZTICK zt:t2 0 0 WITHSCORES");
    EXPECT(c, ":0", "EXISTS zt:t2");
    redisFree(c);
}

Test(verbs, ztick_a_negative_delta_moves_members_down)
{
    redisContext *c = client();
    EXPECT(c, ":2", "ZADD zt:n 10 a 20 b");
    EXPECT(c, "[\"b\", \"5\"]", "ZTICK zt:n -15 0 WITHSCORES");
    EXPECT(c, "[\"a\", \"-5\"]", "ZRANGE zt:n 0 -1 WITHSCORES");
    EXPECT(c, "[]", "ZTICK zt:n -1.25 -6");
    EXPECT(c, "[\"a\", \"-6.25\"]", "ZRANGE zt:n 0 -1 WITHSCORES");
    redisFree(c);
}

Test(verbs, ztick_on_a_missing_key_is_an_empty_array_and_creates_nothing)
{
    redisContext *c = client();
    EXPECT(c, "[]", "ZTICK zt:none 1 0");
    EXPECT(c, "[]", "ZTICK zt:none 1 0 WITHSCORES");
    EXPECT(c, ":0", "EXISTS zt:none");
    redisFree(c);
}

Test(verbs, ztick_scores_are_formatted_as_redis_formats_them)
{
    redisContext *c = client();
    EXPECT(c, ":2", "ZADD zt:f 0 a 1000000 b");
    EXPECT(c, "[\"a\", \"0.10000000000000001\", \"b\", \"1000000.1\"]", "ZTICK zt:f 0.1 0.1 WITHSCORES");
    EXPECT(c, ":1", "ZADD zt:f2 12345678901234567 big");
    EXPECT(c, "[\"big\", \"12345678901234568\"]", "ZTICK zt:f2 0 0 WITHSCORES");
    EXPECT(c, ":1", "ZADD zt:f3 1 e");
    EXPECT(c, "[\"e\", \"1e+20\"]", "ZTICK zt:f3 1e20 1e20 WITHSCORES");
    redisFree(c);
}

Test(verbs, ztick_with_infinities)
{
    redisContext *c = client();
    EXPECT(c, ":2", "ZADD zt:i 1 a 2 b");
    /* nothing reaches an infinite threshold but infinity */
    EXPECT(c, "[]", "ZTICK zt:i 1 inf WITHSCORES");
    EXPECT(c, "[\"a\", \"2\", \"b\", \"3\"]", "ZRANGE zt:i 0 -1 WITHSCORES");
    EXPECT(c, "[\"a\", \"inf\", \"b\", \"inf\"]", "ZTICK zt:i +inf inf WITHSCORES");
    EXPECT(c, ":0", "EXISTS zt:i");
    /* -inf as delta and as threshold */
    EXPECT(c, ":1", "ZADD zt:i2 1 a");
    EXPECT(c, "[]", "ZTICK zt:i2 -inf 0");
    EXPECT(c, "[\"a\", \"-inf\"]", "ZRANGE zt:i2 0 -1 WITHSCORES");
    EXPECT(c, "[\"a\", \"-inf\"]", "ZTICK zt:i2 0 -inf WITHSCORES");
    redisFree(c);
}

Test(verbs, ztick_a_nan_result_is_refused_before_anything_is_written)
{
    redisContext *c = client();
    /* a comes first and would be fine; b (inf) turns NaN */
    EXPECT(c, ":2", "ZADD zt:nan 1 a inf b");
    EXPECT(c, "-ERR resulting score is not a number (NaN)", "ZTICK zt:nan -inf 0");
    EXPECT(c, "[\"a\", \"1\", \"b\", \"inf\"]", "ZRANGE zt:nan 0 -1 WITHSCORES");
    EXPECT(c, ":1", "ZADD zt:nan2 -inf x");
    EXPECT(c, "-ERR resulting score is not a number (NaN)", "ZTICK zt:nan2 inf 0 WITHSCORES");
    EXPECT(c, "[\"x\", \"-inf\"]", "ZRANGE zt:nan2 0 -1 WITHSCORES");
    /* and the connection goes on */
    EXPECT(c, "[\"x\", \"-inf\"]", "ZTICK zt:nan2 0 -inf WITHSCORES");
    redisFree(c);
}

Test(verbs, ztick_on_a_key_of_another_type)
{
    redisContext *c = client();
    EXPECT(c, "+OK", "SET zt:s text");
    EXPECT(c, WRONGTYPE, "ZTICK zt:s 1 2");
    EXPECT(c, WRONGTYPE, "ZTICK zt:s 1 2 WITHSCORES");
    EXPECT(c, "\"text\"", "GET zt:s");
    redisFree(c);
}

Test(verbs, ztick_argument_errors)
{
    redisContext *c = client();
    EXPECT(c, "+OK", "SET zt:s text");
    EXPECT_ERR(c, "ERR wrong number of arguments for 'ztick' command", "ZTICK");
    EXPECT_ERR(c, "ERR wrong number of arguments for 'ztick' command", "ZTICK zt:a");
    EXPECT_ERR(c, "ERR wrong number of arguments for 'ztick' command", "ZTICK zt:a 1");
    EXPECT_ERR(c, ERR_FLOAT, "ZTICK zt:a abc 1");
    EXPECT_ERR(c, ERR_FLOAT, "ZTICK zt:a 1 abc");
    EXPECT_ERR(c, ERR_FLOAT, "ZTICK zt:a nan 1");
    EXPECT_ERR(c, ERR_FLOAT, "ZTICK zt:a 1 nan");
    EXPECT_ERR(c, ERR_FLOAT, "ZTICK zt:a 1x 1");
    EXPECT_ERR(c, ERR_FLOAT, "ZTICK zt:a %s 1", "");
    EXPECT_ERR(c, ERR_SYNTAX, "ZTICK zt:a 1 2 FOO");
    EXPECT_ERR(c, ERR_SYNTAX, "ZTICK zt:a 1 2 WITHSCORES extra");
    /* an argument error is found before the key is looked at */
    EXPECT_ERR(c, ERR_FLOAT, "ZTICK zt:s abc 1");
    vt_expect_no_script_ran(env.redis->port);
    EXPECT(c, ":1", "ZADD zt:a 1 m");
    EXPECT(c, "[\"m\", \"2\"]", "ZTICK zt:a 1 2 WITHSCORES");
    redisFree(c);
}

/* ztick-max-members: a set bigger than the proxy's limit is refused whole. */
Test(verbs, ztick_refuses_a_set_over_ztick_max_members)
{
    VT_SKIP_IF_DIRECT();
    const char *const args[] = {"--ztick-max-members", "3", NULL};
    vt_proxy_opts po = {.extra_args = args};
    vt_proxy *limited = vt_proxy_start(env.redis, &po);
    cr_assert(limited != NULL, "verbproxy --ztick-max-members 3 did not start");
    redisContext *c = vt_must_connect(limited->port);

    EXPECT(c, ":3", "ZADD zt:m 1 a 2 b 3 c");
    EXPECT(c, "[\"c\"]", "ZTICK zt:m 1 4");
    EXPECT(c, ":2", "ZADD zt:m 9 d 10 e");
    EXPECT(c, "-ERR ZTICK refused: the sorted set has 4 members, over ztick-max-members (3)",
           "ZTICK zt:m 100 0");
    EXPECT(c, "[\"a\", \"2\", \"b\", \"3\", \"d\", \"9\", \"e\", \"10\"]", "ZRANGE zt:m 0 -1 WITHSCORES");
    EXPECT(c, "+PONG", "PING");
    redisFree(c);
    vt_proxy_free(limited);

    /* 0: no limit */
    const char *const unlimited_args[] = {"--ztick-max-members", "0", NULL};
    po.extra_args = unlimited_args;
    vt_proxy *unlimited = vt_proxy_start(env.redis, &po);
    cr_assert(unlimited != NULL, "verbproxy --ztick-max-members 0 did not start");
    c = vt_must_connect(unlimited->port);
    EXPECT(c, "[\"a\", \"b\", \"d\", \"e\"]", "ZTICK zt:m 100 0");
    redisFree(c);
    vt_proxy_free(unlimited);
}

/* ---- QPOP key [COUNT n] [MAXSCORE max|NOW] [LEASE leasekey ms] ---- */

Test(verbs, qpop_pops_the_lowest_scores_first)
{
    redisContext *c = client();
    EXPECT(c, ":4", "ZADD qp:jobs 3 c 1 z 2 b 1 a");
    EXPECT(c, "[\"a\", \"1\"]", "QPOP qp:jobs");
    EXPECT(c, "[\"z\", \"1\", \"b\", \"2\"]", "QPOP qp:jobs COUNT 2");
    EXPECT(c, "[\"c\", \"3\"]", "QPOP qp:jobs");
    EXPECT(c, "(nil)", "QPOP qp:jobs");
    EXPECT(c, "[]", "QPOP qp:jobs COUNT 1");
    EXPECT(c, ":0", "EXISTS qp:jobs");
    redisFree(c);
}

Test(verbs, qpop_on_a_missing_key)
{
    redisContext *c = client();
    EXPECT(c, "(nil)", "QPOP qp:none");
    EXPECT(c, "[]", "QPOP qp:none COUNT 5");
    EXPECT(c, "(nil)", "QPOP qp:none MAXSCORE NOW");
    EXPECT(c, "[]", "QPOP qp:none COUNT 5 LEASE qp:none:lease 1000");
    EXPECT(c, ":0", "EXISTS qp:none qp:none:lease");
    redisFree(c);
}

Test(verbs, qpop_count_zero_and_count_larger_than_the_set)
{
    redisContext *c = client();
    EXPECT(c, ":3", "ZADD qp:c 1 a 2 b 3 c");
    EXPECT(c, "[]", "QPOP qp:c COUNT 0");
    EXPECT(c, "[]", "QPOP qp:c COUNT 0 LEASE qp:c:lease 1000");
    EXPECT(c, ":3", "ZCARD qp:c");
    EXPECT(c, ":0", "EXISTS qp:c:lease");
    EXPECT(c, "[\"a\", \"1\", \"b\", \"2\", \"c\", \"3\"]", "QPOP qp:c COUNT 10");
    EXPECT(c, ":0", "EXISTS qp:c");
    EXPECT(c, ":2", "ZADD qp:c 1 a 2 b");
    EXPECT(c, "[\"a\", \"1\", \"b\", \"2\"]", "QPOP qp:c COUNT 9223372036854775807");
    redisFree(c);
}

/* The very text ZRANGE WITHSCORES gives on this server: Redis 7.0 prints
 * 0.1 as 0.10000000000000001, Redis 7.2 and Valkey as 0.1. */
Test(verbs, qpop_scores_are_the_strings_redis_returns)
{
    redisContext *c = client();
    EXPECT(c, ":4", "ZADD qp:s 0.1 tenth -inf first 1e20 big 2.5 half");
    redisReply *r = vt_cmd(c, "ZRANGE qp:s 0 -1 WITHSCORES");
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 8, "ZRANGE: %s", VT_DESCRIBE(r));
    char want[256];
    int n = snprintf(want, sizeof(want), "[");
    for (size_t i = 0; i < r->elements; i++)
        n += snprintf(want + n, sizeof(want) - (size_t)n, "%s\"%s\"", i ? ", " : "", r->element[i]->str);
    snprintf(want + n, sizeof(want) - (size_t)n, "]");
    freeReplyObject(r);
    cr_assert(strstr(want, "\"tenth\", \"0.1") && strstr(want, "\"big\", \"1e+20\""), "%s", want);
    EXPECT(c, want, "QPOP qp:s COUNT 4");
    redisFree(c);
}

Test(verbs, qpop_maxscore_takes_only_members_at_or_below_it)
{
    redisContext *c = client();
    EXPECT(c, ":3", "ZADD qp:m 5 a 10 b 15 c");
    EXPECT(c, "[\"a\", \"5\", \"b\", \"10\"]", "QPOP qp:m COUNT 10 MAXSCORE 10");
    EXPECT(c, "(nil)", "QPOP qp:m MAXSCORE 10");
    EXPECT(c, "[]", "QPOP qp:m COUNT 3 MAXSCORE 14.5");
    EXPECT(c, "(nil)", "QPOP qp:m MAXSCORE -inf");
    EXPECT(c, "[\"c\", \"15\"]", "QPOP qp:m MAXSCORE inf");
    redisFree(c);
}

Test(verbs, qpop_maxscore_now_takes_only_jobs_that_are_due)
{
    redisContext *c = client();
    long long t = vt_server_ms(c);
    EXPECT(c, ":3", "ZADD qp:d %lld due %lld later %lld overdue", t - 1000, t + 600000, t - 2000);
    char want[256];
    snprintf(want, sizeof(want), "[\"overdue\", \"%lld\", \"due\", \"%lld\"]", t - 2000, t - 1000);
    EXPECT(c, want, "QPOP qp:d COUNT 5 MAXSCORE NOW");
    EXPECT(c, "(nil)", "QPOP qp:d MAXSCORE NOW");
    EXPECT(c, "[]", "QPOP qp:d COUNT 5 MAXSCORE NOW");
    snprintf(want, sizeof(want), "[\"later\", \"%lld\"]", t + 600000);
    EXPECT(c, want, "QPOP qp:d");
    redisFree(c);
}

/* The example of docs/verbs.md#the-contract-between-proxy-and-script (the
 * README's until issue 23 moved the verbs to docs/verbs.md). */
Test(verbs, qpop_lease_the_readme_example)
{
    redisContext *c = client();
    EXPECT(c, ":3", "ZADD jobs 1 a 2 b 3 c");
    long long t0 = vt_server_ms(c);
    EXPECT(c, "[\"a\", \"1\", \"b\", \"2\"]", "QPOP jobs COUNT 2 LEASE jobs:lease 30000");
    long long t1 = vt_server_ms(c);
    EXPECT(c, "[\"c\"]", "ZRANGE jobs 0 -1");
    EXPECT(c, "[\"a\", \"b\"]", "ZRANGE jobs:lease 0 -1");
    long long a = zscore_ms(c, "jobs:lease", "a"), b = zscore_ms(c, "jobs:lease", "b");
    vt_assert_within(a, t0 + 30000, t1 + 30000, "a's deadline");
    cr_assert(a == b, "one QPOP, one deadline: a %lld, b %lld", a, b);
    redisFree(c);
}

Test(verbs, qpop_lease_without_count_and_with_maxscore_now)
{
    redisContext *c = client();
    long long t0 = vt_server_ms(c);
    EXPECT(c, ":2", "ZADD qp:l 1 one %lld future", t0 + 600000);
    EXPECT(c, "[\"one\", \"1\"]", "QPOP qp:l LEASE qp:l:lease 5000");
    long long t1 = vt_server_ms(c);
    vt_assert_within(zscore_ms(c, "qp:l:lease", "one"), t0 + 5000, t1 + 5000, "one's deadline");
    /* nothing due: nothing leased */
    EXPECT(c, "(nil)", "QPOP qp:l MAXSCORE NOW LEASE qp:l:lease 5000");
    EXPECT(c, "[\"one\"]", "ZRANGE qp:l:lease 0 -1");
    EXPECT(c, "[\"future\"]", "ZRANGE qp:l 0 -1");
    redisFree(c);
}

Test(verbs, qpop_options_in_any_order_and_any_case_and_the_last_value_wins)
{
    redisContext *c = client();
    EXPECT(c, ":4", "ZADD qp:o 1 a 2 b 3 c 4 d");
    long long t0 = vt_server_ms(c);
    EXPECT(c, "[\"a\", \"1\", \"b\", \"2\"]",
           "QPOP qp:o lease qp:o:first 1000 maxscore 3 count 5 Count 2 "
           "MAXSCORE 2.5 LEASE qp:o:second 2000");
    long long t1 = vt_server_ms(c);
    EXPECT(c, ":0", "EXISTS qp:o:first");
    EXPECT(c, "[\"a\", \"b\"]", "ZRANGE qp:o:second 0 -1");
    vt_assert_within(zscore_ms(c, "qp:o:second", "a"), t0 + 2000, t1 + 2000, "a's deadline");
    EXPECT(c, "[\"c\", \"3\"]", "QPOP qp:o COUNT 1 COUNT 3 MAXSCORE 3");
    EXPECT(c, "[\"d\"]", "ZRANGE qp:o 0 -1");
    redisFree(c);
}

Test(verbs, qpop_on_keys_of_another_type_loses_no_job)
{
    redisContext *c = client();
    EXPECT(c, "+OK", "SET qp:s text");
    EXPECT(c, WRONGTYPE, "QPOP qp:s");
    EXPECT(c, WRONGTYPE, "QPOP qp:s COUNT 2");
    EXPECT(c, "\"text\"", "GET qp:s");
    /* the lease key is the wrong type: the job stays queued */
    EXPECT(c, ":1", "ZADD qp:j 1 job");
    EXPECT(c, WRONGTYPE, "QPOP qp:j LEASE qp:s 1000");
    EXPECT(c, WRONGTYPE, "QPOP qp:j COUNT 1 LEASE qp:s 1000");
    EXPECT(c, "[\"job\", \"1\"]", "ZRANGE qp:j 0 -1 WITHSCORES");
    EXPECT(c, "\"text\"", "GET qp:s");
    redisFree(c);
}

Test(verbs, qpop_argument_errors)
{
    redisContext *c = client();
    EXPECT_ERR(c, "ERR wrong number of arguments for 'qpop' command", "QPOP");
    EXPECT_ERR(c, ERR_SYNTAX, "QPOP qp:a COUNT");
    EXPECT_ERR(c, ERR_NEGATIVE, "QPOP qp:a COUNT -1");
    EXPECT_ERR(c, ERR_INT, "QPOP qp:a COUNT abc");
    EXPECT_ERR(c, ERR_INT, "QPOP qp:a COUNT 1.5");
    EXPECT_ERR(c, ERR_SYNTAX, "QPOP qp:a MAXSCORE");
    EXPECT_ERR(c, ERR_FLOAT, "QPOP qp:a MAXSCORE abc");
    EXPECT_ERR(c, ERR_FLOAT, "QPOP qp:a MAXSCORE nan");
    EXPECT_ERR(c, ERR_SYNTAX, "QPOP qp:a LEASE");
    EXPECT_ERR(c, ERR_SYNTAX, "QPOP qp:a LEASE qp:a:lease");
    EXPECT_ERR(c, ERR_SYNTAX, "QPOP qp:a COUNT 1 LEASE qp:a:lease");
    EXPECT_ERR(c, "ERR invalid expire time in 'qpop' command", "QPOP qp:a LEASE qp:a:lease 0");
    EXPECT_ERR(c, "ERR invalid expire time in 'qpop' command", "QPOP qp:a LEASE qp:a:lease -100");
    EXPECT_ERR(c, ERR_INT, "QPOP qp:a LEASE qp:a:lease abc");
    EXPECT_ERR(c, ERR_INT, "QPOP qp:a LEASE qp:a:lease 1.5");
    EXPECT_ERR(c, ERR_SYNTAX, "QPOP qp:a FOO");
    EXPECT_ERR(c, ERR_SYNTAX, "QPOP qp:a FOO 1");
    EXPECT_ERR(c, ERR_SYNTAX, "QPOP qp:a COUNT 1 FOO");
    vt_expect_no_script_ran(env.redis->port);
    EXPECT(c, ":1", "ZADD qp:a 1 m");
    EXPECT(c, "[\"m\", \"1\"]", "QPOP qp:a");
    redisFree(c);
}

/* ---- QACK leasekey member [member ...] ---- */

Test(verbs, qack_removes_finished_members_and_counts_them)
{
    redisContext *c = client();
    EXPECT(c, ":3", "ZADD qa:l 1 a 2 b 3 c");
    EXPECT(c, ":2", "QACK qa:l a c x");
    EXPECT(c, "[\"b\"]", "ZRANGE qa:l 0 -1");
    EXPECT(c, ":0", "QACK qa:l a");
    EXPECT(c, ":1", "QACK qa:l b b");
    EXPECT(c, ":0", "EXISTS qa:l");
    EXPECT(c, ":0", "QACK qa:none a b");
    EXPECT(c, ":0", "EXISTS qa:none");
    redisFree(c);
}

Test(verbs, qack_on_a_key_of_another_type)
{
    redisContext *c = client();
    EXPECT(c, "+OK", "SET qa:s text");
    EXPECT(c, WRONGTYPE, "QACK qa:s a");
    EXPECT(c, "\"text\"", "GET qa:s");
    redisFree(c);
}

Test(verbs, qack_argument_errors)
{
    redisContext *c = client();
    EXPECT_ERR(c, "ERR wrong number of arguments for 'qack' command", "QACK");
    EXPECT_ERR(c, "ERR wrong number of arguments for 'qack' command", "QACK qa:l");
    vt_expect_no_script_ran(env.redis->port);
    EXPECT(c, ":1", "ZADD qa:l 1 a");
    EXPECT(c, ":1", "QACK qa:l a");
    redisFree(c);
}

/* ---- QEXTEND leasekey member ms ---- */

Test(verbs, qextend_moves_a_held_deadline_and_ignores_what_is_not_held)
{
    redisContext *c = client();
    long long t = vt_server_ms(c);
    EXPECT(c, ":2", "ZADD qe:l %lld live 1 expired", t + 600000);
    long long t0 = vt_server_ms(c);
    EXPECT(c, ":1", "QEXTEND qe:l live 5000");
    long long t1 = vt_server_ms(c);
    vt_assert_within(zscore_ms(c, "qe:l", "live"), t0 + 5000, t1 + 5000, "live's deadline");
    /* past its deadline but not reclaimed: still held */
    t0 = vt_server_ms(c);
    EXPECT(c, ":1", "QEXTEND qe:l expired 7000");
    t1 = vt_server_ms(c);
    vt_assert_within(zscore_ms(c, "qe:l", "expired"), t0 + 7000, t1 + 7000, "expired's deadline");
    /* not in the lease set, or no lease set at all */
    EXPECT(c, ":0", "QEXTEND qe:l other 5000");
    EXPECT(c, "(nil)", "ZSCORE qe:l other");
    EXPECT(c, ":0", "QEXTEND qe:none m 5000");
    EXPECT(c, ":0", "EXISTS qe:none");
    redisFree(c);
}

Test(verbs, qextend_after_qreclaim_took_the_member_back)
{
    redisContext *c = client();
    EXPECT(c, ":1", "ZADD qe:r:lease 1 m");
    EXPECT(c, "[\"m\"]", "QRECLAIM qe:r:lease qe:r 0");
    EXPECT(c, ":0", "QEXTEND qe:r:lease m 5000");
    EXPECT(c, ":0", "EXISTS qe:r:lease");
    EXPECT(c, "[\"m\", \"0\"]", "ZRANGE qe:r 0 -1 WITHSCORES");
    redisFree(c);
}

Test(verbs, qextend_on_a_key_of_another_type)
{
    redisContext *c = client();
    EXPECT(c, ":1", "RPUSH qe:s a");
    EXPECT(c, WRONGTYPE, "QEXTEND qe:s a 1000");
    EXPECT(c, "[\"a\"]", "LRANGE qe:s 0 -1");
    redisFree(c);
}

Test(verbs, qextend_argument_errors)
{
    redisContext *c = client();
    EXPECT_ERR(c, "ERR wrong number of arguments for 'qextend' command", "QEXTEND");
    EXPECT_ERR(c, "ERR wrong number of arguments for 'qextend' command", "QEXTEND qe:l m");
    EXPECT_ERR(c, "ERR wrong number of arguments for 'qextend' command", "QEXTEND qe:l m 1000 extra");
    EXPECT_ERR(c, "ERR invalid expire time in 'qextend' command", "QEXTEND qe:l m 0");
    EXPECT_ERR(c, "ERR invalid expire time in 'qextend' command", "QEXTEND qe:l m -1");
    EXPECT_ERR(c, ERR_INT, "QEXTEND qe:l m abc");
    EXPECT_ERR(c, ERR_INT, "QEXTEND qe:l m 10.5");
    vt_expect_no_script_ran(env.redis->port);
    EXPECT(c, ":1", "ZADD qe:l 1 m");
    EXPECT(c, ":1", "QEXTEND qe:l m 1000");
    redisFree(c);
}

/* ---- QRECLAIM leasekey key score|NOW [COUNT n] ---- */

Test(verbs, qreclaim_moves_expired_leases_back_oldest_first_and_leaves_live_ones)
{
    redisContext *c = client();
    long long t = vt_server_ms(c);
    EXPECT(c, ":4", "ZADD qr:lease %lld young %lld oldest %lld live %lld middle", t - 1000, t - 3000,
           t + 600000, t - 2000);
    EXPECT(c, ":1", "ZADD qr:jobs 5 queued");
    EXPECT(c, "[\"oldest\", \"middle\", \"young\"]", "QRECLAIM qr:lease qr:jobs 7");
    EXPECT(c, "[\"queued\", \"5\", \"middle\", \"7\", \"oldest\", \"7\", \"young\", \"7\"]",
           "ZRANGE qr:jobs 0 -1 WITHSCORES");
    EXPECT(c, "[\"live\"]", "ZRANGE qr:lease 0 -1");
    EXPECT(c, "[]", "QRECLAIM qr:lease qr:jobs 7");
    redisFree(c);
}

Test(verbs, qreclaim_count_limits_how_many_come_back)
{
    redisContext *c = client();
    long long t = vt_server_ms(c);
    EXPECT(c, ":3", "ZADD qr:c:lease %lld c %lld a %lld b", t - 1000, t - 3000, t - 2000);
    EXPECT(c, "[]", "QRECLAIM qr:c:lease qr:c 1 COUNT 0");
    EXPECT(c, ":3", "ZCARD qr:c:lease");
    EXPECT(c, ":0", "EXISTS qr:c");
    EXPECT(c, "[\"a\", \"b\"]", "QRECLAIM qr:c:lease qr:c 2.5 COUNT 2");
    EXPECT(c, "[\"a\", \"2.5\", \"b\", \"2.5\"]", "ZRANGE qr:c 0 -1 WITHSCORES");
    EXPECT(c, "[\"c\"]", "QRECLAIM qr:c:lease qr:c -1 count 100");
    EXPECT(c, ":0", "EXISTS qr:c:lease");
    EXPECT(c, "[\"c\", \"-1\", \"a\", \"2.5\", \"b\", \"2.5\"]", "ZRANGE qr:c 0 -1 WITHSCORES");
    redisFree(c);
}

Test(verbs, qreclaim_at_now_requeues_at_the_server_time)
{
    redisContext *c = client();
    long long t0 = vt_server_ms(c);
    EXPECT(c, ":1", "ZADD qr:n:lease %lld m", t0 - 1);
    EXPECT(c, "[\"m\"]", "QRECLAIM qr:n:lease qr:n NOW");
    long long t1 = vt_server_ms(c);
    vt_assert_within(zscore_ms(c, "qr:n", "m"), t0, t1, "m's new score");
    /* a deadline exactly at the clock reading before the call has passed */
    long long t = vt_server_ms(c);
    EXPECT(c, ":1", "ZADD qr:n:lease %lld edge", t);
    EXPECT(c, "[\"edge\"]", "QRECLAIM qr:n:lease qr:n 0");
    redisFree(c);
}

Test(verbs, qreclaim_with_nothing_to_reclaim)
{
    redisContext *c = client();
    EXPECT(c, "[]", "QRECLAIM qr:none qr:none:jobs 0");
    EXPECT(c, "[]", "QRECLAIM qr:none qr:none:jobs NOW COUNT 5");
    EXPECT(c, ":0", "EXISTS qr:none qr:none:jobs");
    redisFree(c);
}

Test(verbs, qreclaim_on_keys_of_another_type_loses_no_lease)
{
    redisContext *c = client();
    EXPECT(c, "+OK", "SET qr:s text");
    EXPECT(c, WRONGTYPE, "QRECLAIM qr:s qr:j 0");
    EXPECT(c, "\"text\"", "GET qr:s");
    /* the queue is the wrong type: the expired lease stays where it is */
    EXPECT(c, ":1", "ZADD qr:l 1 m");
    EXPECT(c, WRONGTYPE, "QRECLAIM qr:l qr:s 0");
    EXPECT(c, "[\"m\", \"1\"]", "ZRANGE qr:l 0 -1 WITHSCORES");
    EXPECT(c, "\"text\"", "GET qr:s");
    redisFree(c);
}

Test(verbs, qreclaim_argument_errors)
{
    redisContext *c = client();
    EXPECT_ERR(c, "ERR wrong number of arguments for 'qreclaim' command", "QRECLAIM");
    EXPECT_ERR(c, "ERR wrong number of arguments for 'qreclaim' command", "QRECLAIM qr:l");
    EXPECT_ERR(c, "ERR wrong number of arguments for 'qreclaim' command", "QRECLAIM qr:l qr:j");
    EXPECT_ERR(c, ERR_FLOAT, "QRECLAIM qr:l qr:j abc");
    EXPECT_ERR(c, ERR_FLOAT, "QRECLAIM qr:l qr:j nan");
    EXPECT_ERR(c, ERR_SYNTAX, "QRECLAIM qr:l qr:j 0 COUNT");
    EXPECT_ERR(c, ERR_NEGATIVE, "QRECLAIM qr:l qr:j 0 COUNT -1");
    EXPECT_ERR(c, ERR_INT, "QRECLAIM qr:l qr:j 0 COUNT x");
    EXPECT_ERR(c, ERR_SYNTAX, "QRECLAIM qr:l qr:j 0 FOO");
    EXPECT_ERR(c, ERR_SYNTAX, "QRECLAIM qr:l qr:j 0 FOO 1");
    EXPECT_ERR(c, ERR_SYNTAX, "QRECLAIM qr:l qr:j 0 COUNT 1 extra");
    vt_expect_no_script_ran(env.redis->port);
    EXPECT(c, ":1", "ZADD qr:l 1 m");
    EXPECT(c, "[\"m\"]", "QRECLAIM qr:l qr:j 0 COUNT 1");
    redisFree(c);
}

/* ---- LOCKRELEASE / LOCKRENEW / LOCKHANDOVER ---- */

Test(verbs, lockrelease_by_the_owner_only)
{
    redisContext *c = client();
    EXPECT(c, "+OK", "SET lk:r owner NX PX 60000");
    EXPECT(c, ":0", "LOCKRELEASE lk:r intruder");
    EXPECT(c, ":0", "LOCKRELEASE lk:r OWNER");
    EXPECT(c, ":0", "LOCKRELEASE lk:r owne");
    EXPECT(c, "\"owner\"", "GET lk:r");
    EXPECT(c, ":1", "LOCKRELEASE lk:r owner");
    EXPECT(c, ":0", "EXISTS lk:r");
    EXPECT(c, ":0", "LOCKRELEASE lk:r owner");
    EXPECT(c, ":0", "LOCKRELEASE lk:none owner");
    EXPECT(c, ":-2", "PTTL lk:none");
    /* a token is compared byte for byte, whatever it holds */
    const char token[] = "tok en\r\n\0x";
    EXPECT(c, "+OK", "SET lk:b %b", token, sizeof(token) - 1);
    EXPECT(c, ":0", "LOCKRELEASE lk:b %b", token, sizeof(token) - 2);
    EXPECT(c, ":1", "LOCKRELEASE lk:b %b", token, sizeof(token) - 1);
    redisFree(c);
}

Test(verbs, lockrenew_by_the_owner_sets_the_ttl)
{
    redisContext *c = client();
    EXPECT(c, "+OK", "SET lk:n owner NX PX 60000");
    long long before = vt_pexpiretime(c, "lk:n");
    EXPECT(c, ":0", "LOCKRENEW lk:n intruder 500000");
    cr_assert(vt_pexpiretime(c, "lk:n") == before, "the intruder changed the TTL");
    long long t0 = vt_server_ms(c);
    EXPECT(c, ":1", "LOCKRENEW lk:n owner 500000");
    long long t1 = vt_server_ms(c);
    vt_assert_within(vt_pexpiretime(c, "lk:n"), t0 + 500000, t1 + 500000, "the renewed expiry");
    redisReply *r = vt_cmd(c, "PTTL lk:n");
    cr_assert(r && r->type == REDIS_REPLY_INTEGER, "PTTL: %s", VT_DESCRIBE(r));
    long long t2 = vt_server_ms(c);
    vt_assert_within(r->integer, 500000 - (t2 - t0), 500000, "PTTL after the renewal");
    freeReplyObject(r);
    EXPECT(c, "\"owner\"", "GET lk:n");
    /* a lock without a TTL gets one */
    EXPECT(c, "+OK", "SET lk:p owner");
    EXPECT(c, ":1", "LOCKRENEW lk:p owner 300000");
    cr_assert(vt_pexpiretime(c, "lk:p") > 0, "no TTL after LOCKRENEW");
    /* a missing lock is not created */
    EXPECT(c, ":0", "LOCKRENEW lk:none owner 1000");
    EXPECT(c, ":-2", "PTTL lk:none");
    redisFree(c);
}

Test(verbs, lockhandover_by_the_owner_passes_the_lock_on)
{
    redisContext *c = client();
    EXPECT(c, "+OK", "SET lk:h alice NX PX 60000");
    long long before = vt_pexpiretime(c, "lk:h");
    EXPECT(c, ":0", "LOCKHANDOVER lk:h mallory bob 500000");
    EXPECT(c, "\"alice\"", "GET lk:h");
    cr_assert(vt_pexpiretime(c, "lk:h") == before, "the intruder changed the TTL");
    long long t0 = vt_server_ms(c);
    EXPECT(c, ":1", "LOCKHANDOVER lk:h alice bob 500000");
    long long t1 = vt_server_ms(c);
    EXPECT(c, "\"bob\"", "GET lk:h");
    vt_assert_within(vt_pexpiretime(c, "lk:h"), t0 + 500000, t1 + 500000, "the handed-over expiry");
    /* the old owner has nothing left to hand over or release */
    EXPECT(c, ":0", "LOCKHANDOVER lk:h alice carol 1000");
    EXPECT(c, ":0", "LOCKRELEASE lk:h alice");
    EXPECT(c, ":1", "LOCKRENEW lk:h bob 400000");
    EXPECT(c, ":1", "LOCKRELEASE lk:h bob");
    EXPECT(c, ":0", "LOCKHANDOVER lk:none alice bob 1000");
    EXPECT(c, ":-2", "PTTL lk:none");
    redisFree(c);
}

Test(verbs, lock_verbs_on_a_key_of_another_type)
{
    redisContext *c = client();
    EXPECT(c, ":1", "HSET lk:s f v");
    EXPECT(c, WRONGTYPE, "LOCKRELEASE lk:s v");
    EXPECT(c, WRONGTYPE, "LOCKRENEW lk:s v 1000");
    EXPECT(c, WRONGTYPE, "LOCKHANDOVER lk:s v w 1000");
    EXPECT(c, "[\"f\", \"v\"]", "HGETALL lk:s");
    EXPECT(c, ":-1", "PTTL lk:s");
    redisFree(c);
}

Test(verbs, lock_verbs_argument_errors)
{
    redisContext *c = client();
    EXPECT_ERR(c, "ERR wrong number of arguments for 'lockrelease' command", "LOCKRELEASE");
    EXPECT_ERR(c, "ERR wrong number of arguments for 'lockrelease' command", "LOCKRELEASE lk:a");
    EXPECT_ERR(c, "ERR wrong number of arguments for 'lockrelease' command", "LOCKRELEASE lk:a t extra");
    EXPECT_ERR(c, "ERR wrong number of arguments for 'lockrenew' command", "LOCKRENEW lk:a t");
    EXPECT_ERR(c, "ERR wrong number of arguments for 'lockrenew' command", "LOCKRENEW lk:a t 1000 extra");
    EXPECT_ERR(c, "ERR invalid expire time in 'lockrenew' command", "LOCKRENEW lk:a t 0");
    EXPECT_ERR(c, "ERR invalid expire time in 'lockrenew' command", "LOCKRENEW lk:a t -1000");
    EXPECT_ERR(c, ERR_INT, "LOCKRENEW lk:a t abc");
    EXPECT_ERR(c, ERR_INT, "LOCKRENEW lk:a t 1.5");
    EXPECT_ERR(c, "ERR wrong number of arguments for 'lockhandover' command", "LOCKHANDOVER lk:a t u");
    EXPECT_ERR(c, "ERR wrong number of arguments for 'lockhandover' command", "LOCKHANDOVER lk:a t u 1 x");
    EXPECT_ERR(c, "ERR invalid expire time in 'lockhandover' command", "LOCKHANDOVER lk:a t u 0");
    EXPECT_ERR(c, "ERR invalid expire time in 'lockhandover' command", "LOCKHANDOVER lk:a t u -5");
    EXPECT_ERR(c, ERR_INT, "LOCKHANDOVER lk:a t u abc");
    vt_expect_no_script_ran(env.redis->port);
    EXPECT(c, "+OK", "SET lk:a t");
    EXPECT(c, ":1", "LOCKHANDOVER lk:a t u 1000");
    redisFree(c);
}

/* ---- HSETVER key version field value [field value ...] ---- */

Test(verbs, hsetver_applies_newer_and_equal_versions_and_rejects_older_ones)
{
    redisContext *c = client();
    EXPECT(c, ":1", "HSETVER hv:u 5 name alice city paris");
    /* the version field is written last */
    EXPECT(c, "[\"name\", \"alice\", \"city\", \"paris\", \"version\", \"5\"]", "HGETALL hv:u");
    EXPECT(c, ":1", "HSETVER hv:u 5 name bob");
    EXPECT(c, ":0", "HSETVER hv:u 4 name carol city rome");
    EXPECT(c, "[\"name\", \"bob\", \"city\", \"paris\", \"version\", \"5\"]", "HGETALL hv:u");
    EXPECT(c, ":1", "HSETVER hv:u 6 city rome");
    EXPECT(c, "[\"name\", \"bob\", \"city\", \"rome\", \"version\", \"6\"]", "HGETALL hv:u");
    /* a field pair named version cannot override it */
    EXPECT(c, ":1", "HSETVER hv:u 7 version 100 name dave");
    EXPECT(c, "\"7\"", "HGET hv:u version");
    EXPECT(c, ":0", "HSETVER hv:u 6 version 100 name eve");
    EXPECT(c, ":0", "HSETVER hv:u -1 name eve");
    EXPECT(c, "\"dave\"", "HGET hv:u name");
    redisFree(c);
}

Test(verbs, hsetver_on_a_hash_without_a_version_field)
{
    redisContext *c = client();
    EXPECT(c, ":1", "HSET hv:n other x");
    EXPECT(c, ":1", "HSETVER hv:n -9223372036854775808 a 1");
    EXPECT(c, "[\"other\", \"x\", \"a\", \"1\", \"version\", \"-9223372036854775808\"]", "HGETALL hv:n");
    redisFree(c);
}

/* Versions are compared as 64-bit integers, exactly: Lua's doubles cannot
 * tell 2^53 from 2^53 + 1, or INT64_MAX from INT64_MAX - 1. */
Test(verbs, hsetver_compares_versions_exactly_near_the_int64_limits)
{
    redisContext *c = client();
    EXPECT(c, ":1", "HSET hv:max version 9223372036854775807");
    EXPECT(c, ":0", "HSETVER hv:max 9223372036854775806 f older");
    EXPECT(c, ":1", "HSETVER hv:max 9223372036854775807 f same");
    EXPECT(c, "[\"version\", \"9223372036854775807\", \"f\", \"same\"]", "HGETALL hv:max");

    EXPECT(c, ":1", "HSETVER hv:53 9007199254740993 f a");
    EXPECT(c, ":0", "HSETVER hv:53 9007199254740992 f b");
    EXPECT(c, ":1", "HSETVER hv:53 9007199254740994 f c");
    EXPECT(c, "\"9007199254740994\"", "HGET hv:53 version");
    EXPECT(c, "\"c\"", "HGET hv:53 f");

    EXPECT(c, ":1", "HSET hv:min version -9223372036854775807");
    EXPECT(c, ":0", "HSETVER hv:min -9223372036854775808 f older");
    EXPECT(c, ":1", "HSETVER hv:min -9223372036854775806 f newer");
    EXPECT(c, "\"-9223372036854775806\"", "HGET hv:min version");
    EXPECT(c, ":1", "HSETVER hv:min 9223372036854775807 f newest");
    EXPECT(c, "\"9223372036854775807\"", "HGET hv:min version");
    redisFree(c);
}

Test(verbs, hsetver_with_a_stored_version_that_is_not_an_integer)
{
    redisContext *c = client();
    const char *stored[] = {"abc", "1.5", "9223372036854775808", "01", ""};
    for (size_t i = 0; i < sizeof(stored) / sizeof(stored[0]); i++) {
        EXPECT(c, ":1", "HSET hv:bad version %s", stored[i]);
        EXPECT(c, "-ERR hash value is not an integer", "HSETVER hv:bad 1 f v");
        EXPECT(c, ":0", "HEXISTS hv:bad f");
        EXPECT(c, ":1", "DEL hv:bad");
    }
    redisFree(c);
}

Test(verbs, hsetver_keeps_values_byte_for_byte)
{
    redisContext *c = client();
    const char value[] = "a b\r\n\0c";
    EXPECT(c, ":1", "HSETVER hv:bin 1 %s %b", "field with spaces", value, sizeof(value) - 1);
    EXPECT(c, "\"a b\\r\\n\\x00c\"", "HGET hv:bin %s", "field with spaces");
    redisFree(c);
}

Test(verbs, hsetver_on_a_key_of_another_type)
{
    redisContext *c = client();
    EXPECT(c, "+OK", "SET hv:s text");
    EXPECT(c, WRONGTYPE, "HSETVER hv:s 1 f v");
    EXPECT(c, "\"text\"", "GET hv:s");
    redisFree(c);
}

Test(verbs, hsetver_argument_errors)
{
    redisContext *c = client();
    EXPECT_ERR(c, "ERR wrong number of arguments for 'hsetver' command", "HSETVER");
    EXPECT_ERR(c, "ERR wrong number of arguments for 'hsetver' command", "HSETVER hv:a 1");
    EXPECT_ERR(c, "ERR wrong number of arguments for 'hsetver' command", "HSETVER hv:a 1 f");
    EXPECT_ERR(c, "ERR wrong number of arguments for 'hsetver' command", "HSETVER hv:a 1 f v g");
    EXPECT_ERR(c, ERR_INT, "HSETVER hv:a abc f v");
    EXPECT_ERR(c, ERR_INT, "HSETVER hv:a 1.0 f v");
    EXPECT_ERR(c, ERR_INT, "HSETVER hv:a 9223372036854775808 f v");
    EXPECT_ERR(c, ERR_INT, "HSETVER hv:a -9223372036854775809 f v");
    vt_expect_no_script_ran(env.redis->port);
    EXPECT(c, ":1", "HSETVER hv:a 1 f v");
    redisFree(c);
}

/* ---- ZWINDOW key window-ms member [LIMIT max] ---- */

Test(verbs, zwindow_adds_at_the_server_time_and_sets_the_ttl)
{
    redisContext *c = client();
    long long t0 = vt_server_ms(c);
    EXPECT(c, "[:1, :1]", "ZWINDOW zw:a 600000 req-1");
    long long t1 = vt_server_ms(c);
    vt_assert_within(zscore_ms(c, "zw:a", "req-1"), t0, t1, "req-1's time");
    vt_assert_within(vt_pexpiretime(c, "zw:a"), t0 + 600000, t1 + 600000, "the window's expiry");
    EXPECT(c, "[:1, :2]", "ZWINDOW zw:a 600000 req-2");
    redisFree(c);
}

Test(verbs, zwindow_drops_entries_that_left_the_window)
{
    redisContext *c = client();
    long long t = vt_server_ms(c);
    /* old is exactly window-ms before the clock read above: out */
    EXPECT(c, ":3", "ZADD zw:d %lld old %lld older %lld recent", t - 600000, t - 900000, t - 1000);
    EXPECT(c, "[:1, :2]", "ZWINDOW zw:d 600000 new");
    EXPECT(c, "[\"recent\", \"new\"]", "ZRANGE zw:d 0 -1");
    redisFree(c);
}

Test(verbs, zwindow_limit_caps_the_window)
{
    redisContext *c = client();
    long long t = vt_server_ms(c);
    EXPECT(c, ":3", "ZADD zw:l %lld a %lld b %lld gone", t - 2000, t - 1000, t - 900000);
    EXPECT(c, "[:0, :2]", "ZWINDOW zw:l 600000 m LIMIT 2");
    EXPECT(c, "[\"a\", \"b\"]", "ZRANGE zw:l 0 -1");
    EXPECT(c, "[:0, :2]", "ZWINDOW zw:l 600000 m LIMIT 0");
    EXPECT(c, "[:1, :3]", "ZWINDOW zw:l 600000 m limit 3");
    EXPECT(c, "[\"a\", \"b\", \"m\"]", "ZRANGE zw:l 0 -1");
    EXPECT(c, "[:0, :3]", "ZWINDOW zw:l 600000 n LIMIT 3");
    EXPECT(c, "[:1, :1]", "ZWINDOW zw:l:fresh 600000 m LIMIT 1");
    EXPECT(c, "[:0, :1]", "ZWINDOW zw:l:fresh 600000 n LIMIT 1");
    redisFree(c);
}

Test(verbs, zwindow_refreshes_a_member_already_in_the_window)
{
    redisContext *c = client();
    long long t = vt_server_ms(c);
    EXPECT(c, ":2", "ZADD zw:r %lld m %lld other", t - 5000, t - 4000);
    long long t0 = vt_server_ms(c);
    EXPECT(c, "[:1, :2]", "ZWINDOW zw:r 600000 m");
    long long t1 = vt_server_ms(c);
    vt_assert_within(zscore_ms(c, "zw:r", "m"), t0, t1, "m's refreshed time");
    EXPECT(c, "[\"other\", \"m\"]", "ZRANGE zw:r 0 -1");
    EXPECT(c, "[:1, :2]", "ZWINDOW zw:r 600000 other LIMIT 3");
    redisFree(c);
}

Test(verbs, zwindow_on_a_key_of_another_type)
{
    redisContext *c = client();
    EXPECT(c, "+OK", "SET zw:s text");
    EXPECT(c, WRONGTYPE, "ZWINDOW zw:s 1000 m");
    EXPECT(c, WRONGTYPE, "ZWINDOW zw:s 1000 m LIMIT 5");
    EXPECT(c, "\"text\"", "GET zw:s");
    EXPECT(c, ":-1", "PTTL zw:s");
    redisFree(c);
}

Test(verbs, zwindow_argument_errors)
{
    redisContext *c = client();
    EXPECT_ERR(c, "ERR wrong number of arguments for 'zwindow' command", "ZWINDOW");
    EXPECT_ERR(c, "ERR wrong number of arguments for 'zwindow' command", "ZWINDOW zw:a 1000");
    EXPECT_ERR(c, "ERR invalid expire time in 'zwindow' command", "ZWINDOW zw:a 0 m");
    EXPECT_ERR(c, "ERR invalid expire time in 'zwindow' command", "ZWINDOW zw:a -1000 m");
    EXPECT_ERR(c, ERR_INT, "ZWINDOW zw:a abc m");
    EXPECT_ERR(c, ERR_INT, "ZWINDOW zw:a 1.5 m");
    EXPECT_ERR(c, ERR_SYNTAX, "ZWINDOW zw:a 1000 m LIMIT");
    EXPECT_ERR(c, ERR_INT, "ZWINDOW zw:a 1000 m LIMIT x");
    /* LIMIT is a non-negative integer; below 0 it is refused as COUNT is */
    EXPECT_ERR(c, ERR_NEGATIVE, "ZWINDOW zw:a 1000 m LIMIT -1");
    EXPECT_ERR(c, ERR_SYNTAX, "ZWINDOW zw:a 1000 m FOO");
    EXPECT_ERR(c, ERR_SYNTAX, "ZWINDOW zw:a 1000 m FOO 1");
    EXPECT_ERR(c, ERR_SYNTAX, "ZWINDOW zw:a 1000 m LIMIT 1 extra");
    vt_expect_no_script_ran(env.redis->port);
    EXPECT(c, "[:1, :1]", "ZWINDOW zw:a 1000 m LIMIT 1");
    redisFree(c);
}

/* ---- many members at once ---- */

/* Lua's C stack holds about 8,000 values, so a script that hands a whole set
 * to one redis.call at once fails on big sets; each verb must cope. */
#define MANY 20000

/* head, then MANY items of per_item words each, made by item(i, a, b). */
static redisReply *cmd_many(redisContext *c, int nhead, const char *const *head, int per_item,
                            void (*item)(int i, char *a, char *b))
{
    int argc = nhead + MANY * per_item;
    const char **argv = malloc(sizeof(*argv) * (size_t)argc);
    char(*words)[2][24] = malloc(sizeof(*words) * MANY);
    cr_assert(argv && words);
    for (int i = 0; i < nhead; i++)
        argv[i] = head[i];
    for (int i = 0; i < MANY; i++) {
        item(i, words[i][0], words[i][1]);
        for (int k = 0; k < per_item; k++)
            argv[nhead + i * per_item + k] = words[i][k];
    }
    redisReply *r = vt_cmd_argv(c, argc, argv, NULL);
    free(argv);
    free(words);
    return r;
}

static void score_and_member(int i, char *a, char *b)
{
    snprintf(a, 24, "%d", i);
    snprintf(b, 24, "m%d", i);
}

static void member(int i, char *a, char *b)
{
    (void)b;
    snprintf(a, 24, "m%d", i);
}

static void field_and_value(int i, char *a, char *b)
{
    snprintf(a, 24, "f%d", i);
    snprintf(b, 24, "v%d", i);
}

static void zadd_many(redisContext *c, const char *key)
{
    const char *head[] = {"ZADD", key};
    redisReply *r = cmd_many(c, 2, head, 2, score_and_member);
    vt_assert_int(r, MANY);
    freeReplyObject(r);
}

/* An array of n members m<first>, m<first + 1>... each followed by its score
 * when stride is 2 (the scores are checked elsewhere). */
static void expect_members(redisReply *r, int n, int first, int stride)
{
    vt_assert_array(r, (size_t)n * (size_t)stride);
    char want[24];
    for (int i = 0; i < n; i++) {
        snprintf(want, sizeof(want), "m%d", first + i);
        vt_assert_str(r->element[(size_t)i * (size_t)stride], want);
    }
    freeReplyObject(r);
}

Test(verbs, verbs_on_twenty_thousand_members_at_once)
{
    redisContext *c = client();

    zadd_many(c, "mm:z");
    expect_members(vt_cmd(c, "ZTICK mm:z 1 10001 WITHSCORES"), MANY - 10000, 10000, 2);
    EXPECT(c, "[\"m0\", \"1\"]", "ZRANGE mm:z 0 0 WITHSCORES");
    EXPECT(c, "[\"m9999\", \"10000\"]", "ZRANGE mm:z -1 -1 WITHSCORES");
    EXPECT(c, ":10000", "ZCARD mm:z");

    zadd_many(c, "mm:q");
    expect_members(vt_cmd(c, "QPOP mm:q COUNT %d LEASE mm:l 600000", MANY), MANY, 0, 2);
    EXPECT(c, ":20000", "ZCARD mm:l");
    const char *ack[] = {"QACK", "mm:l"};
    redisReply *r = cmd_many(c, 2, ack, 1, member);
    vt_assert_int(r, MANY);
    freeReplyObject(r);
    EXPECT(c, ":0", "EXISTS mm:l");

    zadd_many(c, "mm:expired");
    expect_members(vt_cmd(c, "QRECLAIM mm:expired mm:back 0"), MANY, 0, 1);
    EXPECT(c, ":20000", "ZCARD mm:back");

    const char *hset[] = {"HSETVER", "mm:h", "1"};
    r = cmd_many(c, 3, hset, 2, field_and_value);
    vt_assert_int(r, 1);
    freeReplyObject(r);
    EXPECT(c, ":20001", "HLEN mm:h");
    EXPECT(c, "[\"v19999\", \"1\"]", "HMGET mm:h f19999 version");
    redisFree(c);
}

/* ---- time boundaries, exactly ---- */

/* A verb compares scores with its own TIME, which a test cannot know in
 * advance. But when TIME reads the same millisecond just before the setup and
 * just after the verb, the verb read that millisecond too, and a score placed
 * at t sits exactly on its boundary. So a round reads TIME (t), then sends
 * `del`, `setup` (scores t + off1, t + off2), the verb and TIME in one write;
 * only rounds where the clock held still are judged. A local round trip is
 * far below a millisecond, so most rounds qualify; a few are wanted. */
#define EXACT_ROUNDS 3
#define EXACT_DEADLINE_MS 10000

/* One round: the verb's reply (caller frees) if the clock held still, else
 * NULL. *t is the millisecond. */
static redisReply *exact_round(redisContext *c, const char *del, const char *setup, long long off1,
                               long long off2, const char *verb, long long *t)
{
    *t = vt_server_ms(c);
    int rc = redisAppendCommand(c, del);
    rc |= redisAppendCommand(c, setup, *t + off1, *t + off2);
    rc |= redisAppendCommand(c, verb);
    rc |= redisAppendCommand(c, "TIME");
    cr_assert(rc == REDIS_OK, "append failed");
    redisReply *r = vt_get_reply(c);
    cr_assert(r && r->type == REDIS_REPLY_INTEGER, "%s: got %s", del, VT_DESCRIBE(r));
    freeReplyObject(r);
    vt_check_reply(__LINE__, setup, c, vt_get_reply(c), ":2");
    redisReply *reply = vt_get_reply(c);
    cr_assert(reply != NULL, "%s: no reply", verb);
    r = vt_get_reply(c);
    vt_assert_array(r, 2);
    long long after = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
    freeReplyObject(r);
    if (after == *t) return reply;
    freeReplyObject(reply);
    return NULL;
}

static void expect_enough_exact_rounds(int exact, int tried)
{
    cr_assert(exact == EXACT_ROUNDS,
              "only %d of %d rounds ran within one server millisecond in %d ms: the boundary was not tested",
              exact, tried, EXACT_DEADLINE_MS);
}

Test(verbs, zwindow_an_entry_exactly_window_ms_old_is_out_and_one_ms_younger_is_in)
{
    redisContext *c = client();
    int exact = 0, tried = 0;
    for (long long end = vt_now_ms() + EXACT_DEADLINE_MS; exact < EXACT_ROUNDS && vt_now_ms() < end;
         tried++) {
        long long t;
        redisReply *r = exact_round(c, "DEL zw:b", "ZADD zw:b %lld out %lld in", -10000, -9999,
                                    "ZWINDOW zw:b 10000 m", &t);
        if (!r) continue;
        exact++;
        vt_check_reply(__LINE__, "ZWINDOW zw:b 10000 m", c, r, "[:1, :2]");
        EXPECT(c, "[\"in\", \"m\"]", "ZRANGE zw:b 0 -1");
    }
    expect_enough_exact_rounds(exact, tried);
    redisFree(c);
}

Test(verbs, qreclaim_a_deadline_exactly_now_has_passed_and_one_ms_later_has_not)
{
    redisContext *c = client();
    int exact = 0, tried = 0;
    for (long long end = vt_now_ms() + EXACT_DEADLINE_MS; exact < EXACT_ROUNDS && vt_now_ms() < end;
         tried++) {
        long long t;
        redisReply *r = exact_round(c, "DEL qr:b qr:b:q", "ZADD qr:b %lld due %lld not-yet", 0, 1,
                                    "QRECLAIM qr:b qr:b:q 0", &t);
        if (!r) continue;
        exact++;
        vt_check_reply(__LINE__, "QRECLAIM qr:b qr:b:q 0", c, r, "[\"due\"]");
        EXPECT(c, "[\"not-yet\"]", "ZRANGE qr:b 0 -1");
    }
    expect_enough_exact_rounds(exact, tried);
    redisFree(c);
}

Test(verbs, qpop_maxscore_now_takes_a_job_due_exactly_now_but_not_one_ms_later)
{
    redisContext *c = client();
    int exact = 0, tried = 0;
    for (long long end = vt_now_ms() + EXACT_DEADLINE_MS; exact < EXACT_ROUNDS && vt_now_ms() < end;
         tried++) {
        long long t;
        redisReply *r = exact_round(c, "DEL qp:b", "ZADD qp:b %lld due %lld not-yet", 0, 1,
                                    "QPOP qp:b COUNT 5 MAXSCORE NOW", &t);
        if (!r) continue;
        exact++;
        char want[128];
        snprintf(want, sizeof(want), "[\"due\", \"%lld\"]", t);
        vt_check_reply(__LINE__, "QPOP qp:b COUNT 5 MAXSCORE NOW", c, r, want);
        EXPECT(c, "[\"not-yet\"]", "ZRANGE qp:b 0 -1");
    }
    expect_enough_exact_rounds(exact, tried);
    redisFree(c);
}

/* ---- rules shared by every verb ---- */

/* Integers follow Redis's string2ll: optional '-', no '+', no leading
 * zeros, no spaces, within int64. */
Test(verbs, integers_are_parsed_as_redis_parses_them)
{
    redisContext *c = client();
    const char *bad[] = {"+1",
                         "01",
                         "00",
                         " 1",
                         "1 ",
                         "0x10",
                         "1e3",
                         "",
                         "-",
                         "9223372036854775808",
                         "-9223372036854775809",
                         "18446744073709551616"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        EXPECT_ERR(c, ERR_INT, "QPOP in:q COUNT %s", bad[i]);
        EXPECT_ERR(c, ERR_INT, "LOCKRENEW in:l t %s", bad[i]);
        EXPECT_ERR(c, ERR_INT, "HSETVER in:h %s f v", bad[i]);
        EXPECT_ERR(c, ERR_INT, "ZWINDOW in:w %s m", bad[i]);
    }
    vt_expect_no_script_ran(env.redis->port);
    EXPECT(c, ":2", "ZADD in:q 1 a 2 b");
    EXPECT(c, "[]", "QPOP in:q COUNT 0");
    EXPECT(c, "[\"a\", \"1\"]", "QPOP in:q COUNT 1");
    EXPECT(c, ":1", "HSETVER in:h 0 f v");
    EXPECT(c, ":1", "HSETVER in:h 9223372036854775807 f v");
    EXPECT(c, "[:1, :1]", "ZWINDOW in:w 9223372036 m");
    redisFree(c);
}

/* Floats: what Redis's ZADD takes, with inf, +inf and -inf; never nan. */
Test(verbs, floats_are_parsed_as_redis_parses_them)
{
    redisContext *c = client();
    const char *bad[] = {"nan", "NaN", "-nan", "abc", "1x", "", " 1", "1 ", "--1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        EXPECT_ERR(c, ERR_FLOAT, "ZTICK fl:z %s 0", bad[i]);
        EXPECT_ERR(c, ERR_FLOAT, "QPOP fl:q MAXSCORE %s", bad[i]);
        EXPECT_ERR(c, ERR_FLOAT, "QRECLAIM fl:l fl:q %s", bad[i]);
    }
    vt_expect_no_script_ran(env.redis->port);
    EXPECT(c, ":1", "ZADD fl:z 0 a");
    EXPECT(c, "[]", "ZTICK fl:z 1.5e2 +inf");
    EXPECT(c, "[]", "ZTICK fl:z -0.5 1e300");
    EXPECT(c, "[\"a\", \"149.5\"]", "ZRANGE fl:z 0 -1 WITHSCORES");
    EXPECT(c, ":1", "ZADD fl:l 1 m");
    EXPECT(c, "[\"m\"]", "QRECLAIM fl:l fl:q -inf");
    EXPECT(c, "[\"m\", \"-inf\"]", "QPOP fl:q MAXSCORE -inf");
    redisFree(c);
}

Test(verbs, verb_names_are_case_insensitive)
{
    redisContext *c = client();
    EXPECT(c, ":2", "ZADD ci:z 0 a 90 b");
    EXPECT(c, "[\"b\"]", "ztick ci:z 10 100");
    EXPECT(c, "[\"a\", \"100\"]", "ZTick ci:z 90 100 withscores");
    EXPECT(c, ":2", "ZADD ci:q 1 a 2 b");
    EXPECT(c, "[\"a\", \"1\"]", "qpop ci:q");
    EXPECT(c, "[\"b\", \"2\"]", "QPop ci:q count 1 lease ci:l 60000");
    EXPECT(c, ":1", "qextend ci:l b 60000");
    EXPECT(c, ":1", "qAck ci:l b");
    EXPECT(c, ":1", "ZADD ci:l 1 c");
    EXPECT(c, "[\"c\"]", "qreclaim ci:l ci:q 3");
    EXPECT(c, "+OK", "SET ci:k t");
    EXPECT(c, ":1", "lockrenew ci:k t 60000");
    EXPECT(c, ":1", "LockHandover ci:k t u 60000");
    EXPECT(c, ":1", "lockRelease ci:k u");
    EXPECT(c, ":1", "hsetver ci:h 1 f v");
    EXPECT(c, "[:1, :1]", "zwindow ci:w 60000 m");
    /* the arity error names the verb in lower case, however it was sent */
    EXPECT_ERR(c, "ERR wrong number of arguments for 'ztick' command", "ZTick ci:z 1");
    EXPECT_ERR(c, "ERR wrong number of arguments for 'lockhandover' command", "lockHANDOVER ci:k");
    redisFree(c);
}

/* The classic pipeline: every reply in order, whatever produced it (a
 * script, the proxy's own argument check, Redis). */
Test(verbs, a_pipeline_mixing_verbs_errors_and_plain_commands_gets_every_reply_in_order)
{
    redisContext *c = client();
    static const struct {
        const char *cmd, *want;
    } steps[] = {
        {"SET pl:k t", "+OK"},
        {"ZADD pl:z 0 a 10 b 90 c", ":3"},
        {"ZTICK pl:z 15 100", "[\"c\"]"},
        {"ZTICK pl:z abc 100", "-" ERR_FLOAT},
        {"GET pl:k", "\"t\""},
        {"QPOP pl:z COUNT -1", "-" ERR_NEGATIVE},
        {"QPOP pl:z", "[\"a\", \"15\"]"},
        {"QPOP", "-ERR wrong number of arguments for 'qpop' command"},
        {"INCR pl:n", ":1"},
        {"LOCKRELEASE pl:k nope", ":0"},
        {"LOCKRENEW pl:k t 0", "-ERR invalid expire time in 'lockrenew' command"},
        {"NOSUCHCOMMAND x", NULL}, /* Redis's own words (6.2 quotes with `, 7.0 with ') */
        {"LOCKRELEASE pl:k t", ":1"},
        {"HSETVER pl:h 2 f v", ":1"},
        {"HSETVER pl:h 1 f w", ":0"},
        {"HSETVER pl:h x f w", "-" ERR_INT},
        {"ZWINDOW pl:w 60000 m LIMIT", "-" ERR_SYNTAX},
        {"ZWINDOW pl:w 60000 m LIMIT 1", "[:1, :1]"},
        {"ZWINDOW pl:n 60000 m", WRONGTYPE},
        {"QACK pl:z b", ":1"},
        {"EXISTS pl:z", ":0"},
        {"INCR pl:n", ":2"},
    };
    const size_t n = sizeof(steps) / sizeof(steps[0]);
    redisContext *direct = vt_must_connect(env.redis->port);
    redisReply *r = vt_cmd(direct, "NOSUCHCOMMAND x");
    cr_assert(r && r->type == REDIS_REPLY_ERROR);
    char redis_says[256];
    snprintf(redis_says, sizeof(redis_says), "-%s", r->str);
    freeReplyObject(r);
    redisFree(direct);
    for (size_t i = 0; i < n; i++)
        cr_assert(redisAppendCommand(c, steps[i].cmd) == REDIS_OK);
    for (size_t i = 0; i < n; i++) {
        char what[128];
        snprintf(what, sizeof(what), "reply %zu of the pipeline (%s)", i, steps[i].cmd);
        vt_check_reply(__LINE__, what, c, vt_get_reply(c), steps[i].want ? steps[i].want : redis_says);
    }
    redisFree(c);
}

/* Many rounds in one write: a reply lost, doubled or reordered anywhere
 * shows up as a mismatch. */
Test(verbs, a_long_pipeline_of_verbs_and_errors_stays_in_order)
{
    redisContext *c = client();
    enum { ROUNDS = 500 };
    for (int i = 0; i < ROUNDS; i++) {
        int rc = redisAppendCommand(c, "ZADD lp:q %d m%d", i, i);
        rc |= redisAppendCommand(c, "QPOP lp:q COUNT %s", i % 2 ? "-1" : "x");
        rc |= redisAppendCommand(c, "QPOP lp:q LEASE lp:l 60000");
        rc |= redisAppendCommand(c, "INCR lp:n");
        rc |= redisAppendCommand(c, "QACK lp:l m%d", i);
        rc |= redisAppendCommand(c, "LOCKRENEW lp:k t %d", i % 3 ? 60000 : 0);
        cr_assert(rc == REDIS_OK, "append failed");
    }
    for (int i = 0; i < ROUNDS; i++) {
        char want[128], what[6][64];
        static const char *const names[6] = {"ZADD", "QPOP (bad COUNT)", "QPOP LEASE", "INCR",
                                             "QACK", "LOCKRENEW"};
        for (int k = 0; k < 6; k++)
            snprintf(what[k], sizeof(what[k]), "round %d, %s", i, names[k]);
        vt_check_reply(__LINE__, what[0], c, vt_get_reply(c), ":1");
        vt_check_reply(__LINE__, what[1], c, vt_get_reply(c), i % 2 ? "-" ERR_NEGATIVE : "-" ERR_INT);
        snprintf(want, sizeof(want), "[\"m%d\", \"%d\"]", i, i);
        vt_check_reply(__LINE__, what[2], c, vt_get_reply(c), want);
        snprintf(want, sizeof(want), ":%d", i + 1);
        vt_check_reply(__LINE__, what[3], c, vt_get_reply(c), want);
        vt_check_reply(__LINE__, what[4], c, vt_get_reply(c), ":1");
        vt_check_reply(__LINE__, what[5], c, vt_get_reply(c),
                       i % 3 ? ":0" : "-ERR invalid expire time in 'lockrenew' command");
    }
    EXPECT(c, ":0", "EXISTS lp:q lp:l");
    redisFree(c);
}

/* Inside MULTI a verb is queued like any command and runs in EXEC. */
Test(verbs, verbs_inside_a_transaction)
{
    redisContext *c = client();
    EXPECT(c, ":3", "ZADD tx:z 0 a 10 b 90 c");
    EXPECT(c, "+OK", "MULTI");
    EXPECT(c, "+QUEUED", "ZTICK tx:z 15 100");
    EXPECT(c, "+QUEUED", "QPOP tx:z COUNT 1");
    EXPECT(c, "+QUEUED", "HSETVER tx:h 1 f v");
    EXPECT(c, "[[\"c\"], [\"a\", \"15\"], :1]", "EXEC");
    EXPECT(c, "[\"b\", \"25\"]", "ZRANGE tx:z 0 -1 WITHSCORES");
    redisFree(c);
}

/* Inside MULTI a verb's argument errors are like Redis's own: a wrong
 * number of arguments is refused at once and EXEC aborts the transaction; a
 * bad value is queued and comes back as that command's error in EXEC's reply
 * while the rest runs (as `ZADD k abc m` does). */
Test(verbs, a_wrong_argument_count_inside_a_transaction_aborts_exec)
{
    redisContext *c = client();
    EXPECT(c, "+OK", "SET tx:e untouched");
    EXPECT(c, "+OK", "MULTI");
    EXPECT(c, "+QUEUED", "SET tx:e touched");
    EXPECT(c, "-ERR wrong number of arguments for 'ztick' command", "ZTICK tx:z 1");
    EXPECT(c, "+QUEUED", "HSETVER tx:h 1 f v");
    EXPECT(c, "-EXECABORT Transaction discarded because of previous errors.", "EXEC");
    EXPECT(c, "\"untouched\"", "GET tx:e");
    EXPECT(c, ":0", "EXISTS tx:h");
    redisFree(c);
}

Test(verbs, a_bad_value_inside_a_transaction_is_that_commands_error_in_exec)
{
    redisContext *c = client();
    EXPECT(c, ":2", "ZADD tx:q 1 a 2 b");
    EXPECT(c, "+OK", "MULTI");
    EXPECT(c, "+QUEUED", "SET tx:e touched");
    EXPECT(c, "+QUEUED", "QPOP tx:q COUNT -1");
    EXPECT(c, "+QUEUED", "ZTICK tx:q abc 1");
    EXPECT(c, "+QUEUED", "LOCKRENEW tx:e touched 0");
    EXPECT(c, "+QUEUED", "ZWINDOW tx:w 1000 m FOO");
    EXPECT(c, "+QUEUED", "QPOP tx:q");
    EXPECT(c,
           "[+OK, -" ERR_NEGATIVE ", -" ERR_FLOAT
           ", -ERR invalid expire time in 'lockrenew' command, -" ERR_SYNTAX ", [\"a\", \"1\"]]",
           "EXEC");
    EXPECT(c, "\"touched\"", "GET tx:e");
    EXPECT(c, ":-1", "PTTL tx:e");
    EXPECT(c, ":0", "EXISTS tx:w");
    EXPECT(c, "[\"b\"]", "ZRANGE tx:q 0 -1");
    redisFree(c);
}

/* The proxy's own error replies obey CLIENT REPLY like Redis's: none while
 * OFF, the next one dropped after SKIP. */
Test(verbs, argument_errors_obey_client_reply_off_and_skip)
{
    VT_SKIP_IF_DIRECT();
    int fd = vt_must_sock(env.proxy->port);
    vt_buf req = {0}, got = {0};
    vt_buf_cmd(&req, "CLIENT", "REPLY", "OFF", NULL);
    vt_buf_cmd(&req, "QPOP", "cr:q", "COUNT", "-1", NULL);
    vt_buf_cmd(&req, "ZTICK", "cr:z", NULL);
    vt_buf_cmd(&req, "CLIENT", "REPLY", "ON", NULL);
    vt_buf_cmd(&req, "CLIENT", "REPLY", "SKIP", NULL);
    vt_buf_cmd(&req, "LOCKRENEW", "cr:l", "t", "0", NULL);
    vt_buf_cmd(&req, "HSETVER", "cr:h", "x", "f", "v", NULL);
    vt_buf_cmd(&req, "ECHO", "end", NULL);
    cr_assert(vt_sock_send_buf(fd, &req));
    vt_expect_bytes(fd, &got, "+OK\r\n-" ERR_INT "\r\n$3\r\nend\r\n");
    vt_buf_free(&req);
    vt_buf_free(&got);
    close(fd);
}

/* Someone flushes Redis's script cache: the verbs go on working. */
Test(verbs, verbs_survive_a_script_flush)
{
    redisContext *c = client();
    EXPECT(c, ":2", "ZADD sf:z 0 a 90 b");
    EXPECT(c, "[\"b\"]", "ZTICK sf:z 10 100");
    redisContext *direct = vt_must_connect(env.redis->port);
    EXPECT(direct, "+OK", "SCRIPT FLUSH");
    redisFree(direct);
    EXPECT(c, "[\"a\"]", "ZTICK sf:z 90 100");
    EXPECT(c, ":1", "HSETVER sf:h 1 f v");
    redisFree(c);
}

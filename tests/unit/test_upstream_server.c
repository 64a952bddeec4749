/* What the proxy learns of the server behind a connection from a HELLO
 * (proxy/upstream/upstream_server.c), and which calls are AGGREGATE COUNT calls
 * (proxy/verbs/verbs.c verbs_find_polyfill).
 *
 * The integration tests run against Debian's Redis 7.0, which lacks COUNT;
 * no Redis 8.8 or Valkey can be started here. So the decision is tested on
 * the HELLO replies those servers send: Redis 7.0's bytes as read from the
 * real server, the others built the same way with the name and version
 * their sources put there (redis: "redis" and its version; Valkey 7.2:
 * "redis" and the Valkey version; Valkey 8 and later: "valkey"; Valkey in
 * extended-redis-compatibility mode: "redis" "7.2.4"). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "proxy/verbs/verbs.h"
#include "proxy/config.h"
#include "proxy/server.h"
#include "proxy/upstream/upstream_internal.h"

/* A HELLO reply as Redis 7.0 sends it (RESP2 array or RESP3 map). */
static size_t hello_reply(char *out, size_t cap, int resp3, const char *server, const char *version)
{
    return (size_t)snprintf(
        out, cap,
        "%s\r\n$6\r\nserver\r\n$%zu\r\n%s\r\n$7\r\nversion\r\n$%zu\r\n%s\r\n$5\r\nproto\r\n:%d\r\n"
        "$2\r\nid\r\n:7\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n"
        "$7\r\nmodules\r\n*0\r\n",
        resp3 ? "%7" : "*14", strlen(server), server, strlen(version), version, resp3 ? 3 : 2);
}

static vp_server srv;

static void setup(void)
{
    conf_defaults(&srv.conf);
}

TestSuite(upstream_server, .init = setup);

static int has_count(const char *server, const char *version)
{
    upstream_conn up = {.srv = &srv, .server = UP_SERVER_ASKED};
    char r[512];
    size_t n = hello_reply(r, sizeof(r), 0, server, version);
    up_check_server(&up, 0, r, n);
    cr_assert_eq(up.server, UP_SERVER_KNOWN, "%s %s: not read", server, version);
    cr_assert_str_eq(up.server_name, server);
    cr_assert_str_eq(up.server_version, version);
    return up.has_aggregate_count && !upstream_polyfill_wanted(&up);
}

Test(upstream_server, redis_8_8_and_later_has_count_nothing_else_does)
{
    cr_expect(has_count("redis", "8.8.0"));
    cr_expect(has_count("redis", "8.10.2"));
    cr_expect(has_count("redis", "9.0.0"));
    cr_expect_not(has_count("redis", "8.7.225"), "8.8's milestones are 8.7.x");
    cr_expect_not(has_count("redis", "8.2.1"));
    cr_expect_not(has_count("redis", "7.0.15"));
    cr_expect_not(has_count("redis", "7.2.4"), "Valkey 8 in extended-redis-compatibility mode");
    cr_expect_not(has_count("redis", "7.2.7"), "Valkey 7.2");
    cr_expect_not(has_count("valkey", "8.1.1"));
    cr_expect_not(has_count("valkey", "9.0.5"), "Valkey by its own version: none has COUNT");
    cr_expect_not(has_count("valkey", "10.0.0"));
}

Test(upstream_server, the_probe_reply_says_the_protocol_a_refusal_says_nothing)
{
    /* (a HELLO queued in a transaction before the probe: unsure until it
     * is answered) */
    upstream_conn up = {.srv = &srv, .server = UP_SERVER_ASKED, .resp_unsure = 1};
    char r[512];
    size_t n = hello_reply(r, sizeof(r), 1, "redis", "7.0.15");
    up_check_server(&up, 1, r, n);
    cr_assert(up.resp3, "a map: the connection speaks RESP3");
    cr_assert_not(up.resp_unsure);
    n = hello_reply(r, sizeof(r), 0, "redis", "7.0.15");
    up_check_server(&up, 0, r, n);
    cr_assert_not(up.resp3);

    up.resp3 = 1;
    up.resp_unsure = 1;
    const char *noauth = "-NOAUTH HELLO must be called with the client already authenticated, otherwise the "
                         "HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and "
                         "select the RESP protocol version at the same time\r\n";
    up_check_server(&up, 1, noauth, strlen(noauth));
    cr_assert_eq(up.server, UP_SERVER_UNREADABLE);
    cr_assert_not(upstream_polyfill_wanted(&up),
                  "not authenticated: the call goes as it is, for Redis's -NOAUTH");
    cr_assert(up.resp3, "the protocol stays as last known");
    cr_assert_not(up.resp_unsure, "nothing more to wait for");

    /* the client's AUTH: asked again before the next call; a refusal of a
     * probe sent before the AUTH is stale */
    up.sent = 10;
    upstream_note_auth(&up);
    cr_assert_eq(up.server, UP_SERVER_UNKNOWN);
    cr_assert(upstream_polyfill_wanted(&up));
    up.server = UP_SERVER_ASKED;
    up_check_server(&up, 9, noauth, strlen(noauth));
    cr_assert_eq(up.server, UP_SERVER_UNKNOWN, "a probe sent before the AUTH: its -NOAUTH says nothing now");
    up_check_server(&up, 11, noauth, strlen(noauth));
    cr_assert_eq(up.server, UP_SERVER_UNREADABLE, "one sent after it: the AUTH was refused");
    cr_assert_not(upstream_polyfill_wanted(&up));

    /* refused otherwise (HELLO renamed away, a server before 6.2): the
     * script, which answers the same */
    const char *unknown = "-ERR unknown command 'HELLO', with args beginning with: \r\n";
    up_check_server(&up, 12, unknown, strlen(unknown));
    cr_assert_eq(up.server, UP_SERVER_UNREADABLE);
    cr_assert(upstream_polyfill_wanted(&up));
}

Test(upstream_server, the_directive_overrides_the_version)
{
    upstream_conn up = {.srv = &srv, .server = UP_SERVER_KNOWN, .has_aggregate_count = 1};
    cr_assert_not(upstream_polyfill_wanted(&up));
    srv.conf.aggregate_count = CONF_POLYFILL_YES;
    cr_assert(upstream_polyfill_wanted(&up));
    srv.conf.aggregate_count = CONF_POLYFILL_NO;
    up.has_aggregate_count = 0;
    cr_assert_not(upstream_polyfill_wanted(&up));
    char err[128];
    cr_assert_eq(conf_set(&srv.conf, "aggregate-count-polyfill", "auto", err, sizeof(err)), 0);
    cr_assert_eq(srv.conf.aggregate_count, CONF_POLYFILL_AUTO);
    cr_assert_eq(conf_set(&srv.conf, "aggregate-count-polyfill", "maybe", err, sizeof(err)), -1);
    cr_assert(strstr(err, "auto, yes or no"), "%s", err);
}

/* ---- which calls are AGGREGATE COUNT calls ---- */

static int split(char *line, resp_arg *argv, int max)
{
    int n = 0;
    for (char *save = NULL, *w = strtok_r(line, " ", &save); w && n < max; w = strtok_r(NULL, " ", &save))
        argv[n++] = (resp_arg){w, strlen(w)};
    return n;
}

/* The polyfill entry for the call, or NULL; *call filled. */
static const verb_def *polyfill_of(const char *cmd, verb_call *call)
{
    static verb_table t;
    static int built;
    char err[128];
    if (!built) {
        cr_assert_eq(verbs_build(&t, NULL, 0, 0, err, sizeof(err)), 0, "%s", err);
        built = 1;
    }
    char line[512];
    snprintf(line, sizeof(line), "%s", cmd);
    resp_arg argv[32];
    int argc = split(line, argv, 32);
    return verbs_find_polyfill(&t, argc, argv, call);
}

#define IS_COUNT(cmd, want)                                                                                  \
    do {                                                                                                     \
        verb_call c_;                                                                                        \
        const verb_def *v_ = polyfill_of(cmd, &c_);                                                          \
        cr_expect(v_ &&strcmp(v_->name, want) == 0, "%s: should run as the %s polyfill", cmd, want);         \
    } while (0)
#define UNTOUCHED(cmd)                                                                                       \
    do {                                                                                                     \
        verb_call c_;                                                                                        \
        cr_expect_null(polyfill_of(cmd, &c_), "%s: must go to Redis untouched", cmd);                        \
    } while (0)

Test(polyfill_calls, count_as_an_aggregate_value_read_as_redis_reads_the_options)
{
    IS_COUNT("ZUNION 2 a b AGGREGATE COUNT", "zunion");
    IS_COUNT("zinter 2 a b aggregate count withscores", "zinter");
    IS_COUNT("ZUNIONSTORE d 2 a b WEIGHTS 1 2 AGGREGATE Count", "zunionstore");
    IS_COUNT("ZINTERSTORE d 1 a AGGREGATE COUNT", "zinterstore");
    /* Redis 7.0 refuses the first COUNT it meets, whatever follows */
    IS_COUNT("ZUNION 2 a b AGGREGATE COUNT AGGREGATE SUM", "zunion");
    IS_COUNT("ZUNION 2 a b AGGREGATE COUNT WEIGHTS 1 x", "zunion");
    IS_COUNT("ZUNION 2 a b AGGREGATE COUNT bogus", "zunion");
    IS_COUNT("ZUNIONSTORE d 1 a AGGREGATE COUNT WITHSCORES", "zunionstore");

    UNTOUCHED("ZUNION 2 a b AGGREGATE SUM");
    UNTOUCHED("ZUNION 2 a b");
    UNTOUCHED("ZUNION 2 AGGREGATE COUNT"); /* the keys are named AGGREGATE and COUNT */
    UNTOUCHED("ZUNION 1 COUNT WEIGHTS 2");
    UNTOUCHED("ZUNION 2 a b WEIGHTS 1 AGGREGATE COUNT"); /* WEIGHTS takes AGGREGATE: not a float */
    UNTOUCHED("ZUNION 2 a b bogus AGGREGATE COUNT");     /* refused before COUNT is read */
    UNTOUCHED("ZUNIONSTORE d 2 a b WITHSCORES AGGREGATE COUNT");
    UNTOUCHED("ZUNION 0 a AGGREGATE COUNT"); /* numkeys: Redis's own error on every version */
    UNTOUCHED("ZUNION x a AGGREGATE COUNT");
    UNTOUCHED("ZUNION 5 a AGGREGATE COUNT");
    UNTOUCHED("ZUNION 2");
    UNTOUCHED("ZDIFF 2 a b AGGREGATE COUNT"); /* no AGGREGATE in ZDIFF */
    UNTOUCHED("ZUNIONX 2 a b AGGREGATE COUNT");
    UNTOUCHED("GET AGGREGATE");
}

Test(polyfill_calls, keys_are_the_destination_then_the_numkeys_sources)
{
    verb_call c;
    cr_assert(polyfill_of("ZUNIONSTORE dest 3 a b c AGGREGATE COUNT", &c));
    cr_assert_eq(c.nkeys, 1);
    cr_assert_eq(c.keys[0], 1);
    cr_assert_eq(c.range_first, 3);
    cr_assert_eq(c.range_count, 3);
    cr_assert_eq(c.first_arg, 0, "ARGV: the command word and everything after it");
    cr_assert(polyfill_of("ZINTER 2 a b AGGREGATE COUNT", &c));
    cr_assert_eq(c.nkeys, 0);
    cr_assert_eq(c.range_first, 2);
    cr_assert_eq(c.range_count, 2);
    cr_assert_eq(c.first_arg, 0);
}

/* A probe sent ahead of MULTI (an own connection asks there, for the
 * dialect of a verb queued in it) can be answered after the client's HELLO
 * 3 was queued behind it: it says the server, not the protocol after EXEC. */
Test(upstream_server, a_probe_sent_before_a_hello_queued_in_multi_leaves_the_protocol_unsure)
{
    upstream_conn up = {.srv = &srv, .server = UP_SERVER_ASKED, .sent = 1};
    up.in_multi = 1;
    up.sent = 3; /* the probe was entry 1, MULTI 2, HELLO 3 is 3 */
    upstream_note_hello(&up);
    cr_assert(up.resp_unsure);
    up.in_multi = 0;
    char r[512];
    size_t n = hello_reply(r, sizeof(r), 0, "redis", "6.2.16");
    up_check_server(&up, 1, r, n);
    cr_assert_eq(up.server, UP_SERVER_KNOWN);
    cr_assert(up.resp_unsure, "a probe older than the HELLO does not settle the protocol");
    cr_assert_eq(up.dialect, VERB_DIALECT_PRE7);
    n = hello_reply(r, sizeof(r), 1, "redis", "6.2.16");
    up_check_server(&up, 4, r, n);
    cr_assert_not(up.resp_unsure);
    cr_assert(up.resp3);
}

/* The scripts' dialect: Redis before 7.0 lacks the shebang and EVALSHA_RO;
 * Valkey (7.2 says "redis" 7.2.x, 8 and later "valkey") has both. */
static verb_dialect dialect_of(const char *server, const char *version)
{
    upstream_conn up = {.srv = &srv, .server = UP_SERVER_ASKED};
    char r[512];
    size_t n = hello_reply(r, sizeof(r), 0, server, version);
    up_check_server(&up, 0, r, n);
    return (verb_dialect)up.dialect;
}

Test(upstream_server, redis_6_2_gets_its_own_dialect_everything_newer_the_scripts_as_written)
{
    cr_expect_eq(dialect_of("redis", "6.2.16"), VERB_DIALECT_PRE7);
    cr_expect_eq(dialect_of("redis", "6.0.20"), VERB_DIALECT_PRE7);
    cr_expect_eq(dialect_of("redis", "7.0.15"), VERB_DIALECT_7);
    cr_expect_eq(dialect_of("redis", "7.2.7"), VERB_DIALECT_7, "Valkey 7.2");
    cr_expect_eq(dialect_of("redis", "7.4.1"), VERB_DIALECT_7);
    cr_expect_eq(dialect_of("valkey", "8.0.1"), VERB_DIALECT_7);
    cr_expect_eq(dialect_of("redis", "10.0.0"), VERB_DIALECT_7);
}

/* proxy/route/redirect.c: -MOVED / -ASK / -TRYAGAIN / -CLUSTERDOWN as Redis
 * writes them (cluster.c clusterRedirectClient), with and without the '-'
 * and CRLF; IPv6 and unknown-endpoint addresses; malformed ones are
 * ordinary errors (passed on as they are). The integration test
 * (test_cluster_harness.c) parses the ones a real cluster sends. */
#include <criterion/criterion.h>
#include <string.h>

#include "proxy/route/redirect.h"

static redirect parse(const char *s, redirect_kind want)
{
    redirect r;
    cr_assert_eq(redirect_parse(s, strlen(s), &r), want, "'%s'", s);
    cr_assert_eq(r.kind, want);
    return r;
}

static void host_is(const redirect *r, const char *host)
{
    cr_assert(r->hostlen == strlen(host) && memcmp(r->host, host, r->hostlen) == 0, "host '%.*s', want '%s'",
              (int)r->hostlen, r->host, host);
}

Test(redirect, moved_and_ask)
{
    redirect r = parse("MOVED 3999 127.0.0.1:6381", REDIRECT_MOVED);
    cr_assert_eq(r.slot, 3999);
    cr_assert_eq(r.port, 6381);
    host_is(&r, "127.0.0.1");
    r = parse("-ASK 0 10.0.0.5:7000\r\n", REDIRECT_ASK);
    cr_assert_eq(r.slot, 0);
    cr_assert_eq(r.port, 7000);
    host_is(&r, "10.0.0.5");
    r = parse("-MOVED 16383 redis-2.redis.svc.cluster.local:6379", REDIRECT_MOVED);
    cr_assert_eq(r.slot, 16383);
    host_is(&r, "redis-2.redis.svc.cluster.local");
}

Test(redirect, ipv6_and_unknown_endpoint)
{
    redirect r = parse("MOVED 12 ::1:6381", REDIRECT_MOVED);
    host_is(&r, "::1");
    cr_assert_eq(r.port, 6381);
    r = parse("MOVED 12 fe80::1:2:30001", REDIRECT_MOVED);
    host_is(&r, "fe80::1:2");
    cr_assert_eq(r.port, 30001);
    r = parse("ASK 12 :6381", REDIRECT_ASK); /* endpoint unknown: the same host */
    cr_assert_eq(r.hostlen, 0);
    cr_assert_eq(r.port, 6381);
}

Test(redirect, other_cluster_errors)
{
    parse("-TRYAGAIN Multiple keys request during rehashing of slot\r\n", REDIRECT_TRYAGAIN);
    parse("CLUSTERDOWN The cluster is down", REDIRECT_CLUSTERDOWN);
    parse("CLUSTERDOWN Hash slot not served", REDIRECT_CLUSTERDOWN);
    parse("-CLUSTERDOWN The cluster is down and only accepts read commands", REDIRECT_CLUSTERDOWN);
    parse("TRYAGAIN", REDIRECT_TRYAGAIN);
}

Test(redirect, anything_else_is_none)
{
    static const char *bad[] = {"ERR unknown command",
                                "MOVED",
                                "MOVED ",
                                "MOVED 3999",
                                "MOVED 3999 ",
                                "MOVED 16384 h:1",
                                "MOVED -1 h:1",
                                "MOVED 01 h:1",
                                "MOVED x h:1",
                                "MOVED 1 h",
                                "MOVED 1 h:",
                                "MOVED 1 h:0",
                                "MOVED 1 h:65536",
                                "MOVED 1 h:6x",
                                "MOVED 1 h :1",
                                "MOVED 1 h:1 extra",
                                "MOVEDX 1 h:1",
                                "moved 1 h:1",
                                "ASK 1",
                                "ASKING",
                                "TRYAGAINX",
                                "CLUSTERDOWNX",
                                "",
                                "-",
                                "CROSSSLOT Keys"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        redirect r;
        cr_assert_eq(redirect_parse(bad[i], strlen(bad[i]), &r), REDIRECT_NONE, "'%s'", bad[i]);
        cr_assert_null(r.host);
    }
}

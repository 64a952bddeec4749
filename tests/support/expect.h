/* expect.h - stories told in commands: each command's whole reply compared
 * with the one line the harness describes replies as ("string", :integer,
 * -error, +status, (nil), [a, b]; bytes escaped as \x00), the test's line in
 * every failure. Used by the verb stories (test_verbs.c,
 * test_verbs_leaderboard.c).
 *
 * Header only, like checks.h: the support library does not link criterion. */
#ifndef VT_EXPECT_H
#define VT_EXPECT_H

#include <stdarg.h>
#include <sys/time.h>

#include "tests/support/checks.h"

#define VT_DESCRIBE_MAX 4096

/* r (freed here) must be described exactly as want. */
static inline void vt_check_reply(int line, const char *what, redisContext *c, redisReply *r,
                                  const char *want)
{
    cr_assert(r != NULL, "line %d: %s: no reply (%s)", line, what, c->errstr[0] ? c->errstr : "closed");
    char got[VT_DESCRIBE_MAX];
    vt_reply_describe(r, got, sizeof(got));
    freeReplyObject(r);
    cr_assert(strcmp(got, want) == 0, "line %d: %s\n  want %s\n  got  %s", line, what, want, got);
}

/* Run one command (hiredis format) and compare its whole reply with want. */
#define EXPECT(c, want, ...) vt_expect_at(__LINE__, (c), (want), __VA_ARGS__)

static inline void vt_expect_at(int line, redisContext *c, const char *want, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    vt_check_reply(line, fmt, c, r, want);
}

/* The command already appended must be answered with the error `err`
 * (without its '-'), and an ECHO appended here, in the same write, must be
 * answered right after it: the connection goes on, in order. */
static inline void vt_expect_err_then_echo(int line, redisContext *c, const char *what, const char *err)
{
    char tag[32];
    snprintf(tag, sizeof(tag), "after-line-%d", line);
    cr_assert(redisAppendCommand(c, "ECHO %s", tag) == REDIS_OK, "line %d: append failed", line);
    char want[512];
    snprintf(want, sizeof(want), "-%s", err);
    vt_check_reply(line, what, c, vt_get_reply(c), want);
    snprintf(want, sizeof(want), "\"%s\"", tag);
    vt_check_reply(line, "the ECHO after the error", c, vt_get_reply(c), want);
}

/* Send the command (hiredis format) and an ECHO in one write: the error,
 * then the ECHO's reply. */
#define EXPECT_ERR(c, err, ...) vt_expect_err_at(__LINE__, (c), (err), __VA_ARGS__)

static inline void vt_expect_err_at(int line, redisContext *c, const char *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = redisvAppendCommand(c, fmt, ap);
    va_end(ap);
    cr_assert(rc == REDIS_OK, "line %d: append failed", line);
    vt_expect_err_then_echo(line, c, fmt, err);
}

/* The redis-server at redis_port was never asked to run a script: the
 * argument errors so far were answered by the proxy alone. */
static inline void vt_expect_no_script_ran(int redis_port)
{
    redisContext *direct = vt_must_connect(redis_port);
    redisReply *r = vt_cmd(direct, "INFO commandstats");
    cr_assert(r && r->type == REDIS_REPLY_STRING, "INFO: got %s", VT_DESCRIBE(r));
    cr_assert(strstr(r->str, "cmdstat_eval") == NULL, "Redis ran scripts for argument errors:\n%s", r->str);
    freeReplyObject(r);
    redisFree(direct);
}

/* Redis's clock in ms, read with TIME as the verbs read it. */
static inline long long vt_server_ms(redisContext *c)
{
    redisReply *r = vt_cmd(c, "TIME");
    vt_assert_array(r, 2);
    long long ms = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
    freeReplyObject(r);
    return ms;
}

/* The wall clock in ms, as Redis reads it (gettimeofday). */
static inline long long vt_wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* The key's absolute expiry in ms (PEXPIRETIME), -1 none, -2 no key.
 * Redis 6.2 has no PEXPIRETIME: there PTTL is the expiry less Redis's
 * clock at the call, which is this machine's clock, so a PTTL whose round
 * trip began and ended in the same millisecond gives the expiry exactly
 * (asked again until one does: a loopback round trip is ~0.1 ms). */
static inline long long vt_pexpiretime(redisContext *c, const char *key)
{
    static int lacks; /* the server answered PEXPIRETIME as an unknown command */
    redisReply *r;
    if (!lacks) {
        r = vt_cmd(c, "PEXPIRETIME %s", key);
        cr_assert(r && (r->type == REDIS_REPLY_INTEGER ||
                        (r->type == REDIS_REPLY_ERROR && strstr(r->str, "unknown command"))),
                  "PEXPIRETIME %s: got %s", key, VT_DESCRIBE(r));
        if (r->type == REDIS_REPLY_INTEGER) {
            long long v = r->integer;
            freeReplyObject(r);
            return v;
        }
        freeReplyObject(r);
        lacks = 1;
    }
    for (int tries = 0; tries < 1000; tries++) {
        long long before = vt_wall_ms();
        r = vt_cmd(c, "PTTL %s", key);
        long long after = vt_wall_ms();
        cr_assert(r && r->type == REDIS_REPLY_INTEGER, "PTTL %s: got %s", key, VT_DESCRIBE(r));
        long long ttl = r->integer;
        freeReplyObject(r);
        if (ttl < 0) return ttl;
        if (before == after) return before + ttl;
    }
    cr_assert_fail("PTTL %s: no round trip within one millisecond in 1000 tries", key);
    return 0;
}

/* lo <= v <= hi, or the test fails saying what v was. */
#define vt_assert_within(v, lo, hi, what) vt_within_at(__LINE__, (v), (lo), (hi), (what))

static inline void vt_within_at(int line, long long v, long long lo, long long hi, const char *what)
{
    cr_assert(lo <= v && v <= hi, "line %d: %s: %lld is not within [%lld, %lld]", line, what, v, lo, hi);
}

#endif

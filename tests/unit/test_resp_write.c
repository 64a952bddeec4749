/* test_resp_write.c - the RESP writer (protocol/resp_write.h), byte for byte.
 *
 * Every writer is checked against the exact bytes Redis would send, and
 * what it writes is read back by hiredis's reader (the RESP2 forms: this
 * hiredis knows no RESP3) and framed by our framer (every form) as one
 * whole reply. */
#include <criterion/criterion.h>
#include <hiredis/hiredis.h>

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "protocol/resp_frame.h"
#include "protocol/resp_write.h"

#define S(lit) lit, sizeof(lit) - 1

static void expect_bytes(const char *got, size_t n, const char *want, size_t wn)
{
    cr_assert_eq(n, wn, "wrote %zu bytes, want %zu (%.*s)", n, wn, (int)n, got);
    cr_assert(memcmp(got, want, n) == 0, "wrote %.*s, want %.*s", (int)n, got, (int)wn, want);
}

/* Exactly one whole reply for the framer. */
static void expect_framed(const char *p, size_t n)
{
    resp_framer f;
    resp_frame_reset(&f);
    size_t used = 0;
    cr_assert_eq(resp_frame_scan(&f, p, n, &used), RESP_FRAME_DONE, "%.*s", (int)n, p);
    cr_assert_eq(used, n);
}

/* hiredis's reading of p (exactly one reply), for the caller to inspect. */
static redisReply *hiredis_read(const char *p, size_t n)
{
    redisReader *r = redisReaderCreate();
    cr_assert_eq(redisReaderFeed(r, p, n), REDIS_OK);
    void *reply = NULL;
    cr_assert_eq(redisReaderGetReply(r, &reply), REDIS_OK);
    cr_assert_not_null(reply, "hiredis found no whole reply in %.*s", (int)n, p);
    void *more = NULL;
    cr_assert_eq(redisReaderGetReply(r, &more), REDIS_OK);
    cr_assert_null(more, "more than one reply in %.*s", (int)n, p);
    redisReaderFree(r);
    return reply;
}

Test(resp_write, integers_every_width)
{
    static const long long vals[] = {0, 1, -1, 9, 10, 99, 100, 12345, -987654321, LLONG_MAX, LLONG_MIN};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        char out[RESP_HEADER_MAX], want[64];
        size_t n = resp_write_integer(out, vals[i]);
        int wn = snprintf(want, sizeof(want), ":%lld\r\n", vals[i]);
        expect_bytes(out, n, want, (size_t)wn);
        cr_assert_leq(n, RESP_HEADER_MAX);
        expect_framed(out, n);
        redisReply *r = hiredis_read(out, n);
        cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
        cr_assert_eq(r->integer, vals[i]);
        freeReplyObject(r);
    }
}

Test(resp_write, aggregate_headers)
{
    char out[RESP_HEADER_MAX];
    expect_bytes(out, resp_write_array_len(out, 0), S("*0\r\n"));
    expect_bytes(out, resp_write_array_len(out, 12), S("*12\r\n"));
    expect_bytes(out, resp_write_array_len(out, -1), S("*-1\r\n"));
    expect_bytes(out, resp_write_header(out, RESP_MAP, 4), S("%4\r\n"));
    expect_bytes(out, resp_write_header(out, RESP_SET, 3), S("~3\r\n"));
    expect_bytes(out, resp_write_header(out, RESP_PUSH, 2), S(">2\r\n"));
    expect_bytes(out, resp_write_header(out, RESP_BULK, 40), S("$40\r\n"));
    expect_bytes(out, resp_write_header(out, RESP_ARRAY, LLONG_MAX), S("*9223372036854775807\r\n"));
}

Test(resp_write, bulk_strings)
{
    static const char *const vals[] = {"", "x", "hello world", "with\r\nCRLF inside", "0123456789"};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        size_t len = strlen(vals[i]);
        char out[RESP_BULK_SIZE(64)], want[128];
        size_t n = resp_write_bulk(out, vals[i], len);
        int wn = snprintf(want, sizeof(want), "$%zu\r\n%s\r\n", len, vals[i]);
        expect_bytes(out, n, want, (size_t)wn);
        cr_assert_leq(n, RESP_BULK_SIZE(len));
        expect_framed(out, n);
        redisReply *r = hiredis_read(out, n);
        cr_assert_eq(r->type, REDIS_REPLY_STRING);
        cr_assert_eq(r->len, len);
        cr_assert(memcmp(r->str, vals[i], len) == 0);
        freeReplyObject(r);
    }
    /* binary: every byte value */
    char bin[256], out[RESP_BULK_SIZE(256)];
    for (int i = 0; i < 256; i++)
        bin[i] = (char)i;
    size_t n = resp_write_bulk(out, bin, sizeof(bin));
    cr_assert_eq(n, 6 + 256 + 2);
    redisReply *r = hiredis_read(out, n);
    cr_assert_eq(r->len, 256);
    cr_assert(memcmp(r->str, bin, 256) == 0);
    freeReplyObject(r);
}

Test(resp_write, null_both_protocols)
{
    char out[8];
    size_t n = resp_write_null(out, 0);
    expect_bytes(out, n, S("$-1\r\n"));
    expect_framed(out, n);
    redisReply *r = hiredis_read(out, n);
    cr_assert_eq(r->type, REDIS_REPLY_NIL);
    freeReplyObject(r);
    n = resp_write_null(out, 1);
    expect_bytes(out, n, S("_\r\n"));
    expect_framed(out, n);
}

Test(resp_write, simple_and_error_lines)
{
    char out[RESP_LINE_SIZE(64)];
    size_t n = resp_write_simple(out, S("OK"));
    expect_bytes(out, n, S("+OK\r\n"));
    redisReply *r = hiredis_read(out, n);
    cr_assert_eq(r->type, REDIS_REPLY_STATUS);
    cr_assert_str_eq(r->str, "OK");
    freeReplyObject(r);

    n = resp_write_error(out, S("ERR bad\r\nthing"));
    expect_bytes(out, n, S("-ERR bad  thing\r\n"));
    expect_framed(out, n);
    r = hiredis_read(out, n);
    cr_assert_eq(r->type, REDIS_REPLY_ERROR);
    cr_assert_str_eq(r->str, "ERR bad  thing");
    freeReplyObject(r);
}

Test(resp_write, formatted_errors_cut_to_fit)
{
    char out[64];
    size_t n = resp_write_errorf(out, sizeof(out), "ERR upstream unavailable: %s: %s", "h:1", "a\nb");
    expect_bytes(out, n, S("-ERR upstream unavailable: h:1: a b\r\n"));
    /* too long: cut with one byte to spare, still one whole line */
    char small[16];
    n = resp_write_errorf(small, sizeof(small), "ERR %s", "0123456789abcdef");
    cr_assert_eq(n, sizeof(small) - 1);
    expect_bytes(small, n, S("-ERR 01234567\r\n"));
    redisReply *r = hiredis_read(small, n);
    cr_assert_eq(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
}

Test(resp_write, commands_from_argv)
{
    resp_arg argv[] = {{S("SET")}, {S("key")}, {S("")}, {S("a\r\nb")}};
    size_t size = resp_write_command_size(4, argv);
    char out[128];
    size_t n = resp_write_command(out, 4, argv);
    expect_bytes(out, n, S("*4\r\n$3\r\nSET\r\n$3\r\nkey\r\n$0\r\n\r\n$4\r\na\r\nb\r\n"));
    cr_assert_eq(n, size);
    redisReply *r = hiredis_read(out, n);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 4);
    cr_assert_str_eq(r->element[0]->str, "SET");
    cr_assert_eq(r->element[3]->len, 4);
    freeReplyObject(r);
    /* the size is exact at every width of the counts */
    char big[2000];
    memset(big, 'v', sizeof(big));
    resp_arg many[12];
    for (int i = 0; i < 12; i++)
        many[i] = (resp_arg){big, (size_t)(i * 150)};
    static char wide[12 * (2000 + 32)];
    cr_assert_eq(resp_write_command(wide, 12, many), resp_write_command_size(12, many));
    cr_assert_eq(resp_write_command_size(0, NULL), 4);
}

Test(resp_write, compile_time_literals)
{
    static const char cmd[] = RESP_LIT_ARRAY(2) RESP_LIT_BULK(7, "CLUSTER") RESP_LIT_BULK(5, "SLOTS");
    resp_arg argv[] = {{S("CLUSTER")}, {S("SLOTS")}};
    char out[64];
    expect_bytes(out, resp_write_command(out, 2, argv), cmd, sizeof(cmd) - 1);
    static const char empty[] = RESP_LIT_BULK(0, "");
    expect_bytes(empty, sizeof(empty) - 1, S("$0\r\n\r\n"));
}

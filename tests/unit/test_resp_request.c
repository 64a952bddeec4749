/* test_resp_request.c - unit tests for protocol/resp_request.c.
 *
 * Every case is a byte stream and the exact list of results the parser must
 * give for it (status, bytes used, argument bytes, error text). check() runs
 * the stream through the parser in several ways and demands the same list
 * from each:
 *   whole      - all bytes at once;
 *   grow       - the same buffer offered 1, 2, 3... bytes: every byte boundary;
 *   grow-copy  - the same, but each call gets a fresh malloc'd copy of exactly
 *                the offered bytes, freed right after, so a pointer kept across
 *                calls is a use-after-free ASan reports;
 *   split at i - the first i bytes, then the rest, for every i.
 * The expected results are written out by hand from Redis's behaviour; each
 * test can fail on a wrong byte count or a wrong argument byte. */
#include <criterion/criterion.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/resp_request.h"

/* ------------------------------------------------------------------------
 * Expected results.
 * --------------------------------------------------------------------- */

typedef struct arg {
    const char *p;
    size_t n;
} arg;

#define MAX_WANT_ARGS 12
typedef struct want {
    resp_req_status st;
    size_t used; /* for PENDING: bytes of the unfinished command at the end */
    const char *err;
    int argc;
    arg argv[MAX_WANT_ARGS];
} want;

/* The macros below stay one line each: clang-format would spread them out. */
// clang-format off
/* A(s): argument bytes of a string literal, embedded '\0' included. */
#define A(s) {s, sizeof(s) - 1}
#define NARGS(...) ((int)(sizeof((arg[]){__VA_ARGS__}) / sizeof(arg)))
#define CMD(used, ...) {RESP_REQ_COMMAND, used, NULL, NARGS(__VA_ARGS__), {__VA_ARGS__}}
#define EMPTY(used) {RESP_REQ_EMPTY, used, NULL, 0, {{0}}}
#define ERR(text) {RESP_REQ_ERROR, 0, text, 0, {{0}}}
/* The stream ends inside a command of which n bytes are there. */
#define PENDING(n) {RESP_REQ_INCOMPLETE, n, NULL, 0, {{0}}}
// clang-format on

/* Length of a string literal, embedded '\0' included. */
#define L(s) (sizeof(s) - 1)

static const resp_request_limits low_limits = {.max_bulk_len = 10, .max_multibulk_len = 3};

/* ------------------------------------------------------------------------
 * Results as the parser gave them, copied out of its buffers.
 * --------------------------------------------------------------------- */

typedef struct got {
    resp_req_status st;
    size_t used;
    char *err;
    int argc;
    char **argv;
    size_t *argl;
} got;

typedef struct got_log {
    got *r;
    size_t n, cap;
} got_log;

static got *log_add(got_log *log, resp_req_status st, size_t used)
{
    if (log->n == log->cap) {
        log->cap = log->cap ? log->cap * 2 : 8;
        log->r = realloc(log->r, log->cap * sizeof(*log->r));
        cr_assert(log->r);
    }
    got *g = &log->r[log->n++];
    memset(g, 0, sizeof(*g));
    g->st = st;
    g->used = used;
    return g;
}

static void log_free(got_log *log)
{
    for (size_t i = 0; i < log->n; i++) {
        for (int j = 0; j < log->r[i].argc; j++)
            free(log->r[i].argv[j]);
        free(log->r[i].argv);
        free(log->r[i].argl);
        free(log->r[i].err);
    }
    free(log->r);
    memset(log, 0, sizeof(*log));
}

static void copy_command(got *g, const resp_request_parser *p, const char *buf, size_t used)
{
    g->argc = p->argc;
    g->argv = calloc((size_t)p->argc + 1, sizeof(char *));
    g->argl = calloc((size_t)p->argc + 1, sizeof(size_t));
    for (int j = 0; j < p->argc; j++) {
        const resp_arg *a = &p->argv[j];
        /* Zero copy for multibulk: arguments lie inside the command's bytes. */
        if (buf[0] == '*')
            cr_assert(a->ptr >= buf && a->ptr + a->len <= buf + used, "argv[%d] outside the command", j);
        g->argv[j] = malloc(a->len + 1);
        memcpy(g->argv[j], a->ptr, a->len);
        g->argl[j] = a->len;
    }
}

/* Parse as for a client that has not authenticated (Redis's pre-auth
 * limits); set around a check by check_unauth. */
static int run_unauthenticated;

/* Feed `in` to a fresh parser, offering first `first` bytes, then `step` more
 * at a time. With `copy`, each call sees a private copy of the offered bytes. */
static void run(const char *in, size_t len, const resp_request_limits *lim, size_t first, size_t step,
                int copy, got_log *log)
{
    resp_request_parser p;
    size_t start = 0;
    size_t avail = first < len ? first : len;

    resp_request_init(&p, lim);
    p.unauthenticated = run_unauthenticated;
    for (;;) {
        size_t n = avail - start;
        const char *b = in + start;
        char *priv = NULL;
        if (copy) {
            priv = malloc(n ? n : 1);
            memcpy(priv, in + start, n);
            b = priv;
        }

        size_t used = (size_t)-1;
        resp_req_status st = resp_request_parse(&p, b, n, &used);
        cr_assert(used <= n, "used %zu > len %zu", used, n);

        if (st == RESP_REQ_COMMAND) {
            cr_assert(used > 0);
            cr_assert_null(resp_request_error(&p));
            copy_command(log_add(log, st, used), &p, b, used);
            start += used;
        } else if (st == RESP_REQ_EMPTY) {
            cr_assert(used > 0);
            log_add(log, st, used);
            start += used;
        } else if (st == RESP_REQ_ERROR) {
            cr_assert_eq(used, 0);
            const char *e = resp_request_error(&p);
            cr_assert_not_null(e);
            log_add(log, st, 0)->err = strdup(e);
            /* Errors are sticky: the stream is unusable. */
            cr_assert_eq(resp_request_parse(&p, b, n, &used), RESP_REQ_ERROR);
            cr_assert_eq(used, 0);
            cr_assert_str_eq(resp_request_error(&p), e);
            free(priv);
            break;
        } else {
            cr_assert_eq(st, RESP_REQ_INCOMPLETE);
            cr_assert_eq(used, 0, "INCOMPLETE must use 0 bytes");
            if (avail == len) {
                if (start < len) log_add(log, st, len - start);
                free(priv);
                break;
            }
            avail = len - avail > step ? avail + step : len;
        }
        free(priv);
    }
    resp_request_free(&p);
}

static void expect(const got_log *log, const want *w, size_t nw, const char *mode, size_t at)
{
    cr_assert_eq(log->n, nw, "[%s %zu] %zu results, want %zu", mode, at, log->n, nw);
    for (size_t i = 0; i < nw; i++) {
        const got *g = &log->r[i];
        cr_assert_eq(g->st, w[i].st, "[%s %zu] result %zu: status %d, want %d", mode, at, i, g->st, w[i].st);
        cr_assert_eq(g->used, w[i].used, "[%s %zu] result %zu: used %zu, want %zu", mode, at, i, g->used,
                     w[i].used);
        if (w[i].st == RESP_REQ_ERROR)
            cr_assert_str_eq(g->err, w[i].err, "[%s %zu] result %zu: error \"%s\"", mode, at, i, g->err);
        cr_assert_eq(g->argc, w[i].argc, "[%s %zu] result %zu: argc %d, want %d", mode, at, i, g->argc,
                     w[i].argc);
        for (int j = 0; j < w[i].argc; j++) {
            cr_assert_eq(g->argl[j], w[i].argv[j].n, "[%s %zu] result %zu argv[%d]: len %zu, want %zu", mode,
                         at, i, j, g->argl[j], w[i].argv[j].n);
            cr_assert(memcmp(g->argv[j], w[i].argv[j].p, w[i].argv[j].n) == 0,
                      "[%s %zu] result %zu argv[%d]: \"%.*s\", want \"%.*s\"", mode, at, i, j,
                      (int)g->argl[j], g->argv[j], (int)w[i].argv[j].n, w[i].argv[j].p);
        }
    }
}

static void run_expect(const char *in, size_t len, const resp_request_limits *lim, size_t first, size_t step,
                       int copy, const want *w, size_t nw, const char *mode, size_t at)
{
    got_log log = {0};
    run(in, len, lim, first, step, copy, &log);
    expect(&log, w, nw, mode, at);
    log_free(&log);
}

/* Every way of cutting the stream; for small inputs. */
static void check_lim(const char *in, size_t len, const resp_request_limits *lim, const want *w, size_t nw)
{
    run_expect(in, len, lim, len, len, 0, w, nw, "whole", 0);
    run_expect(in, len, lim, 1, 1, 0, w, nw, "grow", 0);
    run_expect(in, len, lim, 1, 1, 1, w, nw, "grow-copy", 0);
    for (size_t i = 1; i < len; i++)
        run_expect(in, len, lim, i, len, 0, w, nw, "split at", i);
}

/* Inputs of 64 KiB and more: every boundary in one pass over the same buffer,
 * the copying pass and the two-part splits at a sample of points. */
static void check_big(const char *in, size_t len, const resp_request_limits *lim, const want *w, size_t nw)
{
    run_expect(in, len, lim, len, len, 0, w, nw, "whole", 0);
    run_expect(in, len, lim, 1, 1, 0, w, nw, "grow", 0);
    run_expect(in, len, lim, 1, 4093, 1, w, nw, "grow-copy", 4093);
    for (size_t i = 1; i < len; i += 7919)
        run_expect(in, len, lim, i, len, 0, w, nw, "split at", i);
}

#define WANTS(...) ((const want[]){__VA_ARGS__}), (sizeof((want[]){__VA_ARGS__}) / sizeof(want))
#define check(in, ...) check_lim(in, L(in), NULL, WANTS(__VA_ARGS__))
#define check_low(in, ...) check_lim(in, L(in), &low_limits, WANTS(__VA_ARGS__))

/* ------------------------------------------------------------------------
 * Multibulk.
 * --------------------------------------------------------------------- */

Test(multibulk, one_command)
{
    check("*1\r\n$4\r\nPING\r\n", CMD(14, A("PING")));
    check("*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n", CMD(33, A("SET"), A("key"), A("value")));
}

Test(multibulk, pipelined)
{
    check("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
          "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nvv\r\n"
          "*1\r\n$4\r\nPING\r\n",
          CMD(20, A("GET"), A("k")), CMD(28, A("SET"), A("k"), A("vv")), CMD(14, A("PING")));
}

Test(multibulk, binary_safe_arguments)
{
    /* '\0', "\r\n" and '*' / '$' inside payloads are just bytes. */
    check("*3\r\n$3\r\na\0b\r\n$6\r\n\r\n\r\n\r\n\r\n$4\r\n*1\r\n\r\n",
          CMD(35, A("a\0b"), A("\r\n\r\n\r\n"), A("*1\r\n")));
    check("*2\r\n$0\r\n\r\n$1\r\n\0\r\n", CMD(17, A(""), A("\0")));
}

Test(multibulk, zero_and_negative_counts_are_empty)
{
    check("*0\r\n*-1\r\n*-100\r\n*1\r\n$1\r\na\r\n", EMPTY(4), EMPTY(5), EMPTY(7), CMD(11, A("a")));
    /* LLONG_MIN is a valid long long, so it is an empty request too. */
    check("*-9223372036854775808\r\n", EMPTY(23));
}

Test(multibulk, crlf_is_not_checked_like_redis)
{
    /* Redis ends a header line at its '\r' and skips the next byte whatever it
     * is; after a payload it skips two bytes whatever they are. */
    check("*1\rX$3\rYfooZZ*1\r\n$1\r\na\r\n", CMD(13, A("foo")), CMD(11, A("a")));
    check("*1\r\0$1\r\na\0\0", CMD(11, A("a")));
    /* ...but the byte after the '\r' has to be there. */
    check("*1\r", PENDING(3));
    check("*1\r\n$3\r", PENDING(7));
    check("*1\r\n$3\r\nfoo\r", PENDING(12));
}

Test(multibulk, incomplete_at_the_end)
{
    check("*2\r\n$3\r\nGET\r\n$3\r\nke", PENDING(19));
    check("*1\r\n$1\r\na\r\n*2\r\n$1", CMD(11, A("a")), PENDING(6));
    check("*", PENDING(1));
}

Test(multibulk, invalid_multibulk_length)
{
    static const char *bad[] = {
        "*abc\r\n",
        "*\r\n",
        "*+1\r\n",
        "*01\r\n",
        "* 1\r\n",
        "*1 \r\n",
        "*-0\r\n",
        "*-\r\n",
        "*1a\r\n",
        "*99999999999999999999\r\n",  /* overflows a long long */
        "*-9223372036854775809\r\n",  /* overflows a long long */
        "*000000000000000000001\r\n", /* 21 characters */
        "*2147483648\r\n",            /* INT_MAX + 1 */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const want w[] = {ERR("Protocol error: invalid multibulk length")};
        check_lim(bad[i], strlen(bad[i]), NULL, w, 1);
    }
    /* INT_MAX itself is accepted, and nothing is allocated for it. */
    check("*2147483647\r\n", PENDING(13));
}

Test(multibulk, multibulk_limit)
{
    check_low("*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n", CMD(25, A("a"), A("b"), A("c")));
    check_low("*4\r\n$1\r\na\r\n", ERR("Protocol error: invalid multibulk length"));
    /* The error comes as soon as the count line is complete. */
    check_low("*4\r\n", ERR("Protocol error: invalid multibulk length"));
    check_low("*4\r", PENDING(3));
}

Test(multibulk, expected_dollar)
{
    check("*1\r\nx3\r\nfoo\r\n", ERR("Protocol error: expected '$', got 'x'"));
    check("*2\r\n$1\r\na\r\n*1\r\n", ERR("Protocol error: expected '$', got '*'"));
    /* Redis replaces \r and \n in the message with spaces. */
    check("*1\r\n\r\n", ERR("Protocol error: expected '$', got ' '"));
    check("*1\r\n\n\r\n", ERR("Protocol error: expected '$', got ' '"));
    /* The line must be complete before its first byte is judged. */
    check("*1\r\nx3", PENDING(6));
    check("*1\r\nx3\r", PENDING(7));
    check("*1\r\n\xff\r\n", ERR("Protocol error: expected '$', got '\xff'"));
}

Test(multibulk, invalid_bulk_length)
{
    static const char *bad[] = {
        "*1\r\n$-1\r\n",        "*1\r\n$abc\r\n", "*1\r\n$\r\n",
        "*1\r\n$+1\r\n",        "*1\r\n$01\r\n",  "*1\r\n$-0\r\n",
        "*1\r\n$ 1\r\n",        "*1\r\n$1 \r\n",  "*1\r\n$9223372036854775808\r\n", /* overflows */
        "*1\r\n$536870913\r\n", /* 512 MiB + 1, over the default limit */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const want w[] = {ERR("Protocol error: invalid bulk length")};
        check_lim(bad[i], strlen(bad[i]), NULL, w, 1);
    }
    /* Exactly 512 MiB is allowed: waiting for the payload. */
    check("*1\r\n$536870912\r\n", PENDING(16));
}

Test(multibulk, bulk_limit)
{
    /* Exactly at the limit is fine, one more is an error. */
    check_low("*1\r\n$10\r\n0123456789\r\n", CMD(21, A("0123456789")));
    check_low("*1\r\n$11\r\n0123456789X\r\n", ERR("Protocol error: invalid bulk length"));
    /* Judged on the header, without waiting for the payload. */
    check_low("*1\r\n$11\r\n", ERR("Protocol error: invalid bulk length"));
}

#define check_unauth(in, ...)                                                                                \
    do {                                                                                                     \
        run_unauthenticated = 1;                                                                             \
        check(in, __VA_ARGS__);                                                                              \
        run_unauthenticated = 0;                                                                             \
    } while (0)

/* Before AUTH, Redis allows at most 10 arguments and bulks of 16384 bytes
 * (processMultibulkBuffer); its own invalid-length checks come first, and
 * inline requests are not limited. */
Test(multibulk, unauthenticated_limits)
{
    check_unauth("*10\r\n", PENDING(5));
    check_unauth("*11\r\n", ERR("Protocol error: unauthenticated multibulk length"));
    check_unauth("*11\r", PENDING(4));
    check_unauth("*99999999999\r\n", ERR("Protocol error: invalid multibulk length"));
    check_unauth("*0\r\n*-1\r\n", EMPTY(4), EMPTY(5));
    check_unauth("*1\r\n$16384\r\n", PENDING(12));
    check_unauth("*2\r\n$3\r\nSET\r\n$16385\r\n", ERR("Protocol error: unauthenticated bulk length"));
    check_unauth("*1\r\n$-1\r\n", ERR("Protocol error: invalid bulk length"));
    check_unauth("*1\r\n$536870913\r\n", ERR("Protocol error: invalid bulk length"));
    check_unauth("PING a b c d e f g h i j k\r\n", CMD(28, A("PING"), A("a"), A("b"), A("c"), A("d"), A("e"),
                                                       A("f"), A("g"), A("h"), A("i"), A("j"), A("k")));
    /* The same requests once authenticated. */
    check("*11\r\n", PENDING(5));
    check("*1\r\n$16385\r\n", PENDING(12));
}

Test(multibulk, huge_bulk_limit_does_not_overflow)
{
    const resp_request_limits lim = {.max_bulk_len = LLONG_MAX, .max_multibulk_len = 3};
    const char in[] = "*1\r\n$9223372036854775807\r\nabc";
    const want w[] = {PENDING(L(in))};
    check_lim(in, L(in), &lim, w, 1);
}

Test(multibulk, too_big_mbulk_count_string)
{
    /* More than RESP_INLINE_MAX_SIZE bytes and still no '\r'. */
    size_t n = RESP_INLINE_MAX_SIZE + 1;
    char *in = malloc(n);
    in[0] = '*';
    memset(in + 1, '1', n - 1);
    const want ok[] = {PENDING(RESP_INLINE_MAX_SIZE)};
    check_big(in, n - 1, NULL, ok, 1);
    const want bad[] = {ERR("Protocol error: too big mbulk count string")};
    check_big(in, n, NULL, bad, 1);
    free(in);
}

Test(multibulk, too_big_bulk_count_string)
{
    /* Counted from the start of the "$" line, not of the command. */
    const char head[] = "*2\r\n$3\r\nfoo\r\n";
    size_t n = L(head) + RESP_INLINE_MAX_SIZE + 1;
    char *in = malloc(n);
    memcpy(in, head, L(head));
    in[L(head)] = '$';
    memset(in + L(head) + 1, '1', n - L(head) - 1);
    const want ok[] = {PENDING(n - 1)};
    check_big(in, n - 1, NULL, ok, 1);
    const want bad[] = {ERR("Protocol error: too big bulk count string")};
    check_big(in, n, NULL, bad, 1);
    free(in);
}

Test(multibulk, header_line_limit_boundary)
{
    /* A '\r' within the first 64 KiB + 1 bytes of the line is seen. */
    size_t n = RESP_INLINE_MAX_SIZE + 3;
    char *in = malloc(n);
    in[0] = '*';
    memset(in + 1, '1', n - 1);
    in[n - 3] = '\r';
    in[n - 2] = '\n';
    const want seen[] = {ERR("Protocol error: invalid multibulk length")};
    check_big(in, n - 1, NULL, seen, 1);
    /* One byte further, it is not. */
    in[n - 3] = '1';
    in[n - 2] = '\r';
    in[n - 1] = '\n';
    const want unseen[] = {ERR("Protocol error: too big mbulk count string")};
    check_big(in, n, NULL, unseen, 1);

    /* The same for a "$" line, counted from where it starts. */
    const char head[] = "*1\r\n";
    size_t m = L(head) + RESP_INLINE_MAX_SIZE + 2;
    char *in2 = malloc(m);
    memcpy(in2, head, L(head));
    memset(in2 + L(head), 'x', m - L(head));
    in2[m - 2] = '\r';
    const want got_x[] = {ERR("Protocol error: expected '$', got 'x'")};
    check_big(in2, m, NULL, got_x, 1);
    in2[m - 2] = 'x';
    in2[m - 1] = '\r';
    const want too_big[] = {ERR("Protocol error: too big bulk count string")};
    check_big(in2, m, NULL, too_big, 1);
    free(in);
    free(in2);
}

Test(multibulk, huge_count_is_not_allocated_up_front)
{
    resp_request_parser p;
    size_t used;
    const char in[] = "*2000000000\r\n$3\r\nfoo\r\n$3\r\nbar\r\n";

    resp_request_init(&p, NULL);
    cr_assert_eq(resp_request_parse(&p, in, L(in), &used), RESP_REQ_INCOMPLETE);
    cr_assert_eq(p.argc, 2);
    cr_assert(p.argv_cap >= 2 && p.argv_cap <= 16, "argv_cap %d", p.argv_cap);
    cr_assert_eq(p.multibulk_len, 2000000000LL - 2);
    resp_request_free(&p);
}

Test(multibulk, many_arguments)
{
    /* 3000 arguments: the arrays grow as they arrive, and are given back
     * when the next command starts (Redis also drops an argv over 1024). */
    enum { N = 3000 };
    size_t cap = 16 + N * 16, len = 0;
    char *in = malloc(cap);
    len += (size_t)sprintf(in + len, "*%d\r\n", N);
    for (int i = 0; i < N; i++)
        len += (size_t)sprintf(in + len, "$%d\r\n%d\r\n", i < 10 ? 1 : i < 100 ? 2 : i < 1000 ? 3 : 4, i);
    len += (size_t)sprintf(in + len, "*1\r\n$4\r\nPING\r\n");

    resp_request_parser p;
    size_t used, start = 0;
    resp_request_init(&p, NULL);
    /* Byte by byte, to go through every growth step while incomplete. */
    size_t avail = 1;
    resp_req_status st;
    while ((st = resp_request_parse(&p, in, avail, &used)) == RESP_REQ_INCOMPLETE)
        avail++;
    cr_assert_eq(st, RESP_REQ_COMMAND);
    cr_assert_eq(used, len - 14);
    cr_assert_eq(p.argc, N);
    for (int i = 0; i < N; i++) {
        char digits[8];
        int n = sprintf(digits, "%d", i);
        cr_assert_eq(p.argv[i].len, (size_t)n);
        cr_assert(memcmp(p.argv[i].ptr, digits, (size_t)n) == 0, "argv[%d]", i);
        cr_assert(p.argv[i].ptr >= in && p.argv[i].ptr < in + used);
    }
    cr_assert(p.argv_cap >= N && p.argv_cap <= 2 * N, "argv_cap %d", p.argv_cap);
    start += used;
    cr_assert_eq(resp_request_parse(&p, in + start, len - start, &used), RESP_REQ_COMMAND);
    cr_assert_eq(used, 14);
    cr_assert_eq(p.argc, 1);
    cr_assert(p.argv_cap < N, "a huge argv is kept: %d", p.argv_cap);
    resp_request_free(&p);
    free(in);
}

Test(multibulk, arguments_point_into_the_buffer)
{
    resp_request_parser p;
    size_t used;
    const char in[] = "*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n";

    resp_request_init(&p, NULL);
    cr_assert_eq(resp_request_parse(&p, in, L(in), &used), RESP_REQ_COMMAND);
    cr_assert_eq(p.argv[0].ptr, in + 8);
    cr_assert_eq(p.argv[1].ptr, in + 17);
    resp_request_free(&p);
}

Test(multibulk, nothing_is_rescanned)
{
    /* p->pos tells how far the parser has looked; it never goes back. */
    resp_request_parser p;
    size_t used;
    const char in[] = "*2\r\n$3\r\nGET\r\n$12345";

    resp_request_init(&p, NULL);
    size_t last = 0;
    for (size_t n = 1; n <= L(in); n++) {
        cr_assert_eq(resp_request_parse(&p, in, n, &used), RESP_REQ_INCOMPLETE);
        cr_assert(p.pos >= last, "pos went back from %zu to %zu", last, p.pos);
        last = p.pos;
    }
    cr_assert_eq(p.pos, L(in), "a header line is scanned to the end of the data");
    cr_assert_eq(p.line_start, 13);
    resp_request_free(&p);
}

/* ------------------------------------------------------------------------
 * A '\0' before a line end: Redis's strchr() stops there and never sees the
 * line end, so Redis waits for more data until the "too big" limit.
 * --------------------------------------------------------------------- */

Test(nul, hides_the_line_end)
{
    check("GET a\0b\r\n", PENDING(9));
    check("\0PING\r\n", PENDING(7));
    check("*1\0\r\n$1\r\na\r\n", PENDING(12));
    check("*1\r\n$1\0\r\na\r\n", PENDING(12));
    check("*1\r\n\0$1\r\na\r\n", PENDING(12));
    /* After the line end it does not matter. */
    check("PING\r\n\0", CMD(6, A("PING")), PENDING(1));
}

Test(nul, then_too_big)
{
    const size_t max = RESP_INLINE_MAX_SIZE;
    char *in = malloc(max + 5);
    memset(in, 'a', max + 5);

    in[3] = '\0';
    in[10] = '\n';
    const want inl_ok[] = {PENDING(max)};
    check_big(in, max, NULL, inl_ok, 1);
    const want inl_bad[] = {ERR("Protocol error: too big inline request")};
    check_big(in, max + 1, NULL, inl_bad, 1);

    memcpy(in, "*1\0\r\n", 5);
    const want mbulk_ok[] = {PENDING(max)};
    check_big(in, max, NULL, mbulk_ok, 1);
    const want mbulk_bad[] = {ERR("Protocol error: too big mbulk count string")};
    check_big(in, max + 1, NULL, mbulk_bad, 1);

    /* Counted from the start of the "$" line, 4 bytes in. */
    memcpy(in, "*1\r\n$\0\r\n", 8);
    const want bulk_ok[] = {PENDING(max + 4)};
    check_big(in, max + 4, NULL, bulk_ok, 1);
    const want bulk_bad[] = {ERR("Protocol error: too big bulk count string")};
    check_big(in, max + 5, NULL, bulk_bad, 1);
    free(in);
}

/* ------------------------------------------------------------------------
 * Inline.
 * --------------------------------------------------------------------- */

Test(inline_cmd, simple)
{
    check("PING\r\n", CMD(6, A("PING")));
    check("PING\n", CMD(5, A("PING")));
    check("  SET  a \t b  \r\n", CMD(16, A("SET"), A("a"), A("b")));
    check("PING\r\nECHO x\n", CMD(6, A("PING")), CMD(7, A("ECHO"), A("x")));
    /* Only a '\r' right before the '\n' belongs to the line end. */
    check("a\r\r\n", CMD(4, A("a")));
    check("a\rb\n", CMD(4, A("a"), A("b")));
    /* Not starting with '*' is all it takes to be inline. */
    check("$3\r\n", CMD(4, A("$3")));
    check(" *1\r\n", CMD(5, A("*1")));
}

Test(inline_cmd, empty_lines)
{
    check("\r\n", EMPTY(2));
    check("\n", EMPTY(1));
    check("   \t\v\f\r\n", EMPTY(8));
    check("\n\r\n  \nPING\n", EMPTY(1), EMPTY(2), EMPTY(3), CMD(5, A("PING")));
    check("\r", PENDING(1));
}

Test(inline_cmd, mixed_with_multibulk)
{
    check("PING\r\n*1\r\n$4\r\nPING\r\nECHO x\n\r\n*0\r\n", CMD(6, A("PING")), CMD(14, A("PING")),
          CMD(7, A("ECHO"), A("x")), EMPTY(2), EMPTY(4));
}

Test(inline_cmd, double_quotes)
{
    check("SET k \"a\\x41\\n\\\"b\"\r\n", CMD(20, A("SET"), A("k"), A("aA\n\"b")));
    check("SET k \"\"\r\n", CMD(10, A("SET"), A("k"), A("")));
    check("\"\\t\\r\\b\\a\\q\\\\\"\n", CMD(15, A("\t\r\b\aq\\")));
    check("\"\\xff\\x00\\xAb\"\n", CMD(15, A("\xff\0\xab")));
    /* Spaces inside quotes are kept. */
    check("\"a b\"  \" \"\n", CMD(11, A("a b"), A(" ")));
    /* An invalid \x is an escaped 'x'. */
    check("\"\\x4\"\n", CMD(6, A("x4")));
    check("\"\\xZZ\"\n", CMD(7, A("xZZ")));
    /* A quote may open in the middle of an argument. */
    check("ab\"c d\"\n", CMD(8, A("abc d")));
    /* Any space may follow the closing quote. */
    check("\"abc\"\t\"def\"\v\n", CMD(13, A("abc"), A("def")));
}

Test(inline_cmd, single_quotes)
{
    check("SET k 'it\\'s'\r\n", CMD(15, A("SET"), A("k"), A("it's")));
    /* No other escape in single quotes. */
    check("'a\\nb\\x41'\n", CMD(11, A("a\\nb\\x41")));
    check("'a \"b\"'\n", CMD(8, A("a \"b\"")));
    check("''\n", CMD(3, A("")));
}

Test(inline_cmd, vertical_tab_and_form_feed)
{
    /* Skipped between arguments, but they do not end an unquoted one. */
    check("a\vb\n", CMD(4, A("a\vb")));
    check("\va\f\n", CMD(4, A("a\f")));
}

Test(inline_cmd, unbalanced_quotes)
{
    static const char *bad[] = {
        "SET \"foo\r\n", "\"a\"b\n", "'a'b\n", "\"a\\\"\n", "'a\n", "\"a\" \"b\n", "'a\\'\n", "\"a\\\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const want w[] = {ERR("Protocol error: unbalanced quotes in request")};
        check_lim(bad[i], strlen(bad[i]), NULL, w, 1);
    }
    /* Judged only once the line is complete, and after earlier commands. */
    check("PING\r\n\"x", CMD(6, A("PING")), PENDING(2));
    check("PING\r\n\"x\r\n", CMD(6, A("PING")), ERR("Protocol error: unbalanced quotes in request"));
}

Test(inline_cmd, too_big_inline_request)
{
    size_t n = RESP_INLINE_MAX_SIZE + 1;
    char *in = malloc(n);
    memset(in, 'a', n);
    const want ok[] = {PENDING(RESP_INLINE_MAX_SIZE)};
    check_big(in, n - 1, NULL, ok, 1);
    const want bad[] = {ERR("Protocol error: too big inline request")};
    check_big(in, n, NULL, bad, 1);
    /* A 64 KiB line with its newline is fine however it arrives. */
    in[n - 1] = '\n';
    const want line[] = {CMD(n, {in, n - 1})};
    check_big(in, n, NULL, line, 1);
    free(in);
}

Test(inline_cmd, longer_line_refused_however_it_arrives)
{
    /* Redis checks "too big" after each read of at most 16 KiB, so it may or
     * may not accept a line of 64..80 KiB. We answer as Redis fed byte by
     * byte does, also when the whole line is handed over at once. */
    size_t n = RESP_INLINE_MAX_SIZE + 2;
    char *in = malloc(n);
    memset(in, 'a', n);
    in[n - 1] = '\n';
    const want bad[] = {ERR("Protocol error: too big inline request")};
    check_big(in, n, NULL, bad, 1);
    /* The '\r' of a "\r\n" counts: Redis has not seen the '\n' yet. */
    in[n - 2] = '\r';
    check_big(in, n, NULL, bad, 1);
    free(in);
}

Test(inline_cmd, nothing_is_rescanned)
{
    resp_request_parser p;
    size_t used;
    const char in[] = "SET key \"some value";

    resp_request_init(&p, NULL);
    for (size_t n = 1; n <= L(in); n++) {
        cr_assert_eq(resp_request_parse(&p, in, n, &used), RESP_REQ_INCOMPLETE);
        cr_assert_eq(p.pos, n);
    }
    resp_request_free(&p);
}

/* ------------------------------------------------------------------------
 * Lifecycle.
 * --------------------------------------------------------------------- */

Test(lifecycle, defaults_and_error_text)
{
    resp_request_parser p;
    size_t used = 99;

    resp_request_init(&p, NULL);
    cr_assert_eq(p.limits.max_bulk_len, RESP_DEFAULT_MAX_BULK_LEN);
    cr_assert_eq(p.limits.max_multibulk_len, RESP_DEFAULT_MAX_MULTIBULK_LEN);
    cr_assert_null(resp_request_error(&p));
    cr_assert_eq(resp_request_parse(&p, "", 0, &used), RESP_REQ_INCOMPLETE);
    cr_assert_eq(used, 0);
    resp_request_free(&p);
    resp_request_free(&p); /* twice is harmless */
}

Test(lifecycle, reset_forgets_a_partial_command_and_an_error)
{
    resp_request_parser p;
    size_t used;

    resp_request_init(&p, &low_limits);
    cr_assert_eq(resp_request_parse(&p, "*2\r\n$3\r\nfoo\r\n$", 14, &used), RESP_REQ_INCOMPLETE);
    resp_request_reset(&p);
    cr_assert_eq(resp_request_parse(&p, "PING\n", 5, &used), RESP_REQ_COMMAND);
    cr_assert_eq(used, 5);

    cr_assert_eq(resp_request_parse(&p, "*9\r\n", 4, &used), RESP_REQ_ERROR);
    cr_assert_str_eq(resp_request_error(&p), "Protocol error: invalid multibulk length");
    resp_request_reset(&p);
    cr_assert_null(resp_request_error(&p));
    cr_assert_eq(resp_request_parse(&p, "*1\r\n$1\r\nx\r\n", 11, &used), RESP_REQ_COMMAND);
    cr_assert_eq(used, 11);
    cr_assert_eq(p.argc, 1);
    cr_assert_eq(p.argv[0].len, 1);
    cr_assert_eq(p.argv[0].ptr[0], 'x');
    resp_request_free(&p);
}

Test(lifecycle, argv_survives_until_the_next_call)
{
    resp_request_parser p;
    size_t used;
    const char in[] = "ECHO \"hi there\"\r\n*1\r\n$4\r\nPING\r\n";

    resp_request_init(&p, NULL);
    cr_assert_eq(resp_request_parse(&p, in, L(in), &used), RESP_REQ_COMMAND);
    cr_assert_eq(used, 17);
    cr_assert_eq(p.argc, 2);
    cr_assert_eq(p.argv[1].len, 8);
    cr_assert(memcmp(p.argv[1].ptr, "hi there", 8) == 0);
    /* An inline command's arguments live in the parser's scratch buffer. */
    cr_assert(p.argv[1].ptr >= p.scratch && p.argv[1].ptr < p.scratch + p.scratch_cap);
    cr_assert_eq(resp_request_parse(&p, in + used, L(in) - used, &used), RESP_REQ_COMMAND);
    cr_assert_eq(p.argc, 1);
    cr_assert_eq(used, 14);
    resp_request_free(&p);
}

Test(lifecycle, fewer_bytes_than_before_is_not_read_past)
{
    /* A caller bug, but it must not make the parser read past len. */
    resp_request_parser p;
    size_t used;
    const char in[] = "*1\r\n$5\r\nhello\r\n";

    resp_request_init(&p, NULL);
    cr_assert_eq(resp_request_parse(&p, in, 12, &used), RESP_REQ_INCOMPLETE);
    cr_assert_eq(resp_request_parse(&p, in, 3, &used), RESP_REQ_INCOMPLETE);
    cr_assert_eq(used, 0);
    cr_assert_eq(resp_request_parse(&p, in, L(in), &used), RESP_REQ_COMMAND);
    cr_assert_eq(used, L(in));
    resp_request_free(&p);
}

/* ------------------------------------------------------------------------
 * Streaming: releasing the settled bytes of an incomplete command.
 * --------------------------------------------------------------------- */

/* Feed `stream` in chunks of `chunk` bytes the way the proxy streams a large
 * request: after each INCOMPLETE, release what is settled and drop it from
 * the front. The released bytes, then the final command's bytes, must add
 * up to the stream exactly, in order, and the command must end where it
 * ends. */
static void stream_through(const char *stream, size_t len, size_t chunk, size_t *released_total)
{
    resp_request_parser p;
    resp_request_init(&p, NULL);
    char *out = malloc(len);
    size_t out_len = 0, start = 0, have = 0;
    int done = 0;
    *released_total = 0;
    while (!done) {
        if (have < len) have = have + chunk > len ? len : have + chunk;
        /* a fresh copy of the unconsumed bytes: no pointer may survive */
        size_t n = have - start;
        char *buf = malloc(n ? n : 1);
        memcpy(buf, stream + start, n);
        size_t used = 0;
        resp_req_status st = resp_request_parse(&p, buf, n, &used);
        if (st == RESP_REQ_COMMAND) {
            memcpy(out + out_len, buf, used);
            out_len += used;
            start += used;
            done = 1;
        } else {
            cr_assert_eq(st, RESP_REQ_INCOMPLETE);
            size_t r = resp_request_release(&p, n);
            cr_assert_leq(r, n);
            memcpy(out + out_len, buf, r);
            out_len += r;
            start += r;
            *released_total += r;
            cr_assert(have < len || r == 0, "stuck with the whole stream in hand");
        }
        free(buf);
    }
    cr_assert_eq(out_len, len, "released+final %zu bytes of %zu", out_len, len);
    cr_assert(memcmp(out, stream, len) == 0, "bytes reordered or changed");
    free(out);
    resp_request_free(&p);
}

Test(resp_request, a_large_request_is_released_in_pieces_and_ends_where_it_ends)
{
    /* SET key <100000 bytes> with CR/LF inside the payload */
    size_t vlen = 100000;
    char head[64];
    int hl = snprintf(head, sizeof(head), "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$%zu\r\n", vlen);
    size_t len = (size_t)hl + vlen + 2;
    char *stream = malloc(len);
    memcpy(stream, head, (size_t)hl);
    for (size_t i = 0; i < vlen; i++)
        stream[hl + i] = (char)("ab\r\n"[i % 4]);
    memcpy(stream + hl + vlen, "\r\n", 2);

    size_t chunks[] = {1, 7, 4096, 16384, 65536, len};
    for (size_t i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
        size_t released;
        stream_through(stream, len, chunks[i], &released);
        if (chunks[i] < len)
            cr_assert_gt(released, vlen / 2, "chunk %zu: only %zu released", chunks[i], released);
    }
    free(stream);
}

Test(resp_request, partial_args_name_the_command_before_it_is_complete)
{
    resp_request_parser p;
    resp_request_init(&p, NULL);
    const char *s = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\nabc";
    size_t used;
    cr_assert_eq(resp_request_parse(&p, s, strlen(s), &used), RESP_REQ_INCOMPLETE);
    const resp_arg *argv;
    int argc = resp_request_partial_args(&p, s, &argv);
    cr_assert_eq(argc, 2);
    cr_assert(argv[0].len == 3 && memcmp(argv[0].ptr, "SET", 3) == 0);
    cr_assert(argv[1].len == 1 && argv[1].ptr[0] == 'k');
    /* everything up to the payload's missing bytes is settled */
    cr_assert_eq(resp_request_release(&p, strlen(s)), strlen(s));
    const char *rest = "defghij\r\nPING\r\n";
    cr_assert_eq(resp_request_parse(&p, rest, strlen(rest), &used), RESP_REQ_COMMAND);
    cr_assert_eq(used, 9);
    cr_assert_eq(resp_request_parse(&p, rest + 9, strlen(rest) - 9, &used), RESP_REQ_COMMAND);
    cr_assert_eq(p.argc, 1);
    resp_request_free(&p);
}

Test(resp_request, nothing_is_released_from_inline_or_count_lines)
{
    resp_request_parser p;
    resp_request_init(&p, NULL);
    size_t used;
    cr_assert_eq(resp_request_parse(&p, "SET k v", 7, &used), RESP_REQ_INCOMPLETE);
    cr_assert_eq(resp_request_release(&p, 7), 0);
    resp_request_reset(&p);
    cr_assert_eq(resp_request_parse(&p, "*100", 4, &used), RESP_REQ_INCOMPLETE);
    cr_assert_eq(resp_request_release(&p, 4), 0);
    resp_request_free(&p);
}

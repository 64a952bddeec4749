/* test_resp_frame.c - the reply framer, cut every way a socket can cut it.
 *
 * Every case is framed three ways and must come out the same: whole, in two
 * pieces at every split point, and one byte at a time. The feeding loop does
 * what the proxy does: after RESP_FRAME_PARTIAL it keeps buf[used..] and
 * appends the next bytes behind it. The last suite checks the framer against
 * hiredis's reader on random RESP2 streams. */
#include <criterion/criterion.h>
#include <hiredis/hiredis.h>

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/resp_frame.h"

#define S(lit) lit, sizeof(lit) - 1

/* ---- growable byte string for building inputs ---- */

typedef struct sbuf {
    char *p;
    size_t len, cap;
} sbuf;

static void sb_add(sbuf *b, const void *data, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        cr_assert_not_null(b->p);
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void sb_str(sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

static void sb_fmt(sbuf *b, const char *fmt, long long v)
{
    char tmp[64];
    int n = snprintf(tmp, sizeof(tmp), fmt, v);
    sb_add(b, tmp, (size_t)n);
}

static void sb_free(sbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* ---- feeding the framer like a caller does ---- */

#define MAX_REPLIES 4096

/* What framing a stream produced. */
typedef struct outcome {
    size_t n;                /* replies found */
    size_t end[MAX_REPLIES]; /* stream offset just past each reply */
    char type[MAX_REPLIES];  /* f->type after each DONE */
    resp_frame_status last;  /* PARTIAL (input ran out) or ERROR */
    const char *error;       /* f->error when last is ERROR */
    size_t stop;             /* stream offset of the first byte not consumed */
    long long pending;       /* state at the end, so partial results compare too */
    long long bulk_left;
} outcome;

/* Frames `in` delivered in pieces: piece i ends at stream offset cuts[i]
 * (ascending, the last one is len). Bytes not consumed are carried over and
 * the next piece is appended behind them. Checks the calling convention on
 * every call. */
static void frame_pieces(const char *in, size_t len, const size_t *cuts, size_t ncuts, outcome *o)
{
    char *acc = malloc(len + 1);
    size_t alen = 0, base = 0, prev = 0, reply_start = 0;
    resp_framer f;

    cr_assert_not_null(acc);
    resp_frame_reset(&f);
    o->n = 0;
    o->last = RESP_FRAME_PARTIAL;
    o->error = NULL;
    o->pending = o->bulk_left = 0;
    for (size_t i = 0; i < ncuts; i++) {
        size_t off = 0;
        cr_assert(cuts[i] >= prev && cuts[i] <= len);
        memcpy(acc + alen, in + prev, cuts[i] - prev);
        alen += cuts[i] - prev;
        prev = cuts[i];
        for (;;) {
            size_t used = (size_t)-1;
            resp_frame_status st = resp_frame_scan(&f, acc + off, alen - off, &used);
            cr_assert(used <= alen - off, "used %zu of %zu", used, alen - off);
            off += used;
            if (st == RESP_FRAME_DONE) {
                size_t end = base + off;
                cr_assert(used > 0, "DONE without consuming");
                cr_assert_eq(f.pending, 0);
                cr_assert_eq(f.bulk_left, 0);
                cr_assert_eq(f.consumed, end - reply_start, "consumed %zu, reply is %zu bytes", f.consumed,
                             end - reply_start);
                cr_assert_eq(f.type, in[reply_start]);
                cr_assert(o->n < MAX_REPLIES);
                o->end[o->n] = end;
                o->type[o->n] = f.type;
                o->n++;
                reply_start = end;
                continue;
            }
            if (st == RESP_FRAME_ERROR) {
                size_t again = 99;
                cr_assert_not_null(f.error);
                o->last = RESP_FRAME_ERROR;
                o->error = f.error;
                o->stop = base + off;
                /* The stream is unusable: the framer keeps saying so. */
                cr_assert_eq(resp_frame_scan(&f, acc + off, alen - off, &again), RESP_FRAME_ERROR);
                cr_assert_eq(again, 0);
                free(acc);
                return;
            }
            cr_assert_eq(st, RESP_FRAME_PARTIAL);
            cr_assert_null(f.error);
            cr_assert_eq(f.consumed, base + off - reply_start);
            if (f.consumed == 0)
                cr_assert_eq(f.pending, 0, "between replies, nothing may be owed");
            else
                cr_assert(f.pending > 0 || f.bulk_left > 0, "mid-reply, something must be owed");
            break;
        }
        memmove(acc, acc + off, alen - off);
        alen -= off;
        base += off;
    }
    o->stop = base;
    o->pending = f.pending;
    o->bulk_left = f.bulk_left;
    free(acc);
}

static void frame_whole(const char *in, size_t len, outcome *o)
{
    frame_pieces(in, len, &len, 1, o);
}

static void assert_same(const outcome *a, const outcome *b, const char *how, size_t at)
{
    cr_assert_eq(a->n, b->n, "%s %zu: %zu replies vs %zu", how, at, a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        cr_assert_eq(a->end[i], b->end[i], "%s %zu: reply %zu ends at %zu vs %zu", how, at, i, a->end[i],
                     b->end[i]);
        cr_assert_eq(a->type[i], b->type[i], "%s %zu: reply %zu type", how, at, i);
    }
    cr_assert_eq(a->last, b->last, "%s %zu: last status %d vs %d", how, at, a->last, b->last);
    cr_assert_eq(a->stop, b->stop, "%s %zu: stopped at %zu vs %zu", how, at, a->stop, b->stop);
    if (a->last == RESP_FRAME_ERROR)
        cr_assert_str_eq(a->error, b->error, "%s %zu", how, at);
    else
        cr_assert(a->pending == b->pending && a->bulk_left == b->bulk_left, "%s %zu: end state", how, at);
}

static outcome o_whole, o_cut;

/* Frames `in` whole, in two pieces at every split point and byte by byte;
 * all must agree. Leaves the whole result in o_whole. */
static const outcome *frame_every_way(const char *in, size_t len)
{
    frame_whole(in, len, &o_whole);
    for (size_t k = 0; k <= len; k++) {
        size_t cuts[2] = {k, len};
        frame_pieces(in, len, cuts, 2, &o_cut);
        assert_same(&o_whole, &o_cut, "split at", k);
    }
    if (len > 0) {
        size_t *cuts = malloc(len * sizeof(*cuts));
        cr_assert_not_null(cuts);
        for (size_t k = 0; k < len; k++)
            cuts[k] = k + 1;
        frame_pieces(in, len, cuts, len, &o_cut);
        free(cuts);
        assert_same(&o_whole, &o_cut, "byte by byte, length", len);
    }
    return &o_whole;
}

/* `in` is exactly one reply whose first byte is its type. */
static void expect_reply(const char *in, size_t len)
{
    const outcome *o = frame_every_way(in, len);
    cr_assert_eq(o->last, RESP_FRAME_PARTIAL, "%.*s: error %s", (int)len, in, o->error ? o->error : "");
    cr_assert_eq(o->n, 1, "%.*s: %zu replies", (int)len, in, o->n);
    cr_assert_eq(o->end[0], len, "%.*s: ends at %zu of %zu", (int)len, in, o->end[0], len);
    cr_assert_eq(o->type[0], in[0]);
}

/* `in` is malformed: the framer reports `error` with the offending line (or
 * bulk terminator byte) at stream offset `at`, however it is cut. */
static void expect_error_at(const char *in, size_t len, const char *error, size_t at)
{
    const outcome *o = frame_every_way(in, len);
    cr_assert_eq(o->last, RESP_FRAME_ERROR, "%.*s: not rejected", (int)len, in);
    cr_assert_str_eq(o->error, error, "%.*s", (int)len, in);
    cr_assert_eq(o->stop, at, "%.*s: error at %zu, expected %zu", (int)len, in, o->stop, at);
}

#define expect_error(lit, error) expect_error_at(S(lit), error, 0)

/* ---- every type ---- */

Test(resp_frame, resp2_types)
{
    expect_reply(S("+OK\r\n"));
    expect_reply(S("+\r\n"));
    expect_reply(S("-ERR unknown command 'foo'\r\n"));
    expect_reply(S("-\r\n"));
    expect_reply(S(":0\r\n"));
    expect_reply(S(":42\r\n"));
    expect_reply(S(":-7\r\n"));
    expect_reply(S(":9223372036854775807\r\n"));
    expect_reply(S(":-9223372036854775808\r\n"));
    expect_reply(S("$5\r\nhello\r\n"));
    expect_reply(S("$0\r\n\r\n"));
    expect_reply(S("$4\r\n\r\n\r\n\r\n"));
    expect_reply(S("$3\r\n\0\0\0\r\n"));
    expect_reply(S("$-1\r\n"));
    expect_reply(S("*-1\r\n"));
    expect_reply(S("*0\r\n"));
    expect_reply(S("*2\r\n$3\r\nfoo\r\n$3\r\nbar\r\n"));
    expect_reply(S("*5\r\n:1\r\n$-1\r\n*-1\r\n+s\r\n-e\r\n"));
    expect_reply(S("*2\r\n*0\r\n*1\r\n*0\r\n"));
}

Test(resp_frame, resp3_types)
{
    expect_reply(S("_\r\n"));
    expect_reply(S(",3.14\r\n"));
    expect_reply(S(",-inf\r\n"));
    expect_reply(S(",nan\r\n"));
    expect_reply(S("#t\r\n"));
    expect_reply(S("#f\r\n"));
    expect_reply(S("(3492890328409238509324850943850943825024385\r\n"));
    expect_reply(S("(-1\r\n"));
    expect_reply(S("!21\r\nSYNTAX invalid syntax\r\n"));
    expect_reply(S("!0\r\n\r\n"));
    expect_reply(S("=15\r\ntxt:Some string\r\n"));
    expect_reply(S("%2\r\n+first\r\n:1\r\n+second\r\n:2\r\n"));
    expect_reply(S("%0\r\n"));
    expect_reply(S("%1\r\n$1\r\nk\r\n%1\r\n_\r\n#t\r\n"));
    expect_reply(S("~3\r\n+a\r\n+b\r\n+c\r\n"));
    expect_reply(S("~0\r\n"));
    expect_reply(S(">3\r\n$7\r\nmessage\r\n$4\r\nchan\r\n$5\r\nhello\r\n"));
    expect_reply(S(">0\r\n"));
}

Test(resp_frame, attributes_belong_to_the_value_they_annotate)
{
    /* The example from the RESP3 spec: the attribute and the array are one reply. */
    expect_reply(S("|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n"
                   "*2\r\n:2039123\r\n:9543892\r\n"));
    expect_reply(S("|0\r\n+OK\r\n"));
    expect_reply(S("|1\r\n+a\r\n+b\r\n|1\r\n+c\r\n+d\r\n:1\r\n"));
    /* Inside an aggregate: the attribute does not take an element's place. */
    expect_reply(S("*2\r\n|1\r\n+ttl\r\n:3600\r\n$1\r\nx\r\n:1\r\n"));
    /* An attribute on a bulk: the reply ends after the payload. */
    expect_reply(S("|1\r\n+a\r\n+b\r\n$3\r\nabc\r\n"));

    const outcome *o = frame_every_way(S("|1\r\n+a\r\n+b\r\n"));
    cr_assert_eq(o->n, 0, "an attribute alone is not a reply");
    cr_assert_eq(o->pending, 1);
}

Test(resp_frame, push_reports_its_type)
{
    const outcome *o = frame_every_way(S("+OK\r\n>2\r\n+invalidate\r\n*1\r\n$3\r\nkey\r\n:1\r\n"));
    cr_assert_eq(o->n, 3);
    cr_assert_eq(o->type[0], '+');
    cr_assert_eq(o->type[1], '>');
    cr_assert_eq(o->type[2], ':');
    cr_assert_eq(o->end[0], 5);
    cr_assert_eq(o->end[1], 5 + 30);
}

Test(resp_frame, lone_cr_or_lf_in_a_line_is_text)
{
    /* Only CRLF ends a line; hiredis frames these the same way. */
    expect_reply(S("+a\rb\r\n"));
    expect_reply(S("-\r\r\n"));
    expect_reply(S("+a\nb\r\n"));
    expect_reply(S("-ERR a\nb\r\n"));
    expect_reply(S(",1\n\r\n"));
    expect_reply(S("+\n\r\r\n"));
    /* A lone LF does not end a line, so what follows it is still text. */
    const outcome *o = frame_every_way(S("+OK\n+PONG\r\n:1\r\n"));
    cr_assert_eq(o->n, 2);
    cr_assert_eq(o->end[0], 11);
    o = frame_every_way(S("+OK\n"));
    cr_assert_eq(o->n, 0);
    cr_assert_eq(o->last, RESP_FRAME_PARTIAL);
    cr_assert_eq(o->pending, 1, "still inside the line");
}

/* What Redis 7.0.15 sent for these (tests/integration/test_reply_types.c
 * checks the same through the proxy). Lua's status, error and big_number
 * texts have CR and LF made spaces, and a big_number is any text. */
Test(resp_frame, every_line_redis_sends)
{
    /* EVAL "return {big_number=...}" 0 after HELLO 3 */
    expect_reply(S("(123  123\r\n"));
    expect_reply(S("(\r\n"));
    expect_reply(S("(ab\0c\r\n"));
    expect_reply(S("(  -x \r\n"));
    expect_reply(S("(a b\r\n"));
    expect_reply(S("(1234567999999999999999999999999999999\r\n")); /* DEBUG PROTOCOL bignum */
    /* {double=...}: 0/0, 1/0, -1/0, tiny and huge */
    expect_reply(S(",-nan\r\n"));
    expect_reply(S(",nan\r\n"));
    expect_reply(S(",inf\r\n"));
    expect_reply(S(",-inf\r\n"));
    expect_reply(S(",1.5000000000000001e-300\r\n"));
    expect_reply(S(",1.2345678901234568e+29\r\n"));
    /* {ok=...}, {err=...}, redis.error_reply */
    expect_reply(S("+a  b\r\n"));
    expect_reply(S("+a b c\r\n"));
    expect_reply(S("+o \r\n"));
    expect_reply(S("-x  y\r\n"));
    expect_reply(S("--x y\r\n"));
    expect_reply(S("--\r\n"));
    expect_reply(S("-ERR \r\n"));
    expect_reply(S("-ERR a  b\r\n"));
    expect_reply(S("*3\r\n:1\r\n-e\r\n+o \r\n"));
    /* {verbatim_string=...}: the format is padded or cut to 3 bytes, any bytes */
    expect_reply(S("=4\r\n   :\r\n"));
    expect_reply(S("=5\r\ntoo:x\r\n"));
    expect_reply(S("=8\r\nt\r\n:a\r\nb\r\n"));
    expect_reply(S("=4\r\n\r\nx:\r\n"));
    /* {map=...}, {set=...}, false, nil */
    expect_reply(S("%1\r\n$3\r\na\r\n\r\n:1\r\n"));
    expect_reply(S("~1\r\n$1\r\na\r\n"));
    expect_reply(S(":-9223372036854775808\r\n")); /* return 1e20 */
    /* DEBUG PROTOCOL <type> in RESP3 (attrib and push come with a real reply
     * behind them) */
    expect_reply(S("$11\r\nHello World\r\n"));
    expect_reply(S(":12345\r\n"));
    expect_reply(S(",3.141\r\n"));
    expect_reply(S("_\r\n"));
    expect_reply(S("*3\r\n:0\r\n:1\r\n:2\r\n"));
    expect_reply(S("~3\r\n:0\r\n:1\r\n:2\r\n"));
    expect_reply(S("%3\r\n:0\r\n#f\r\n:1\r\n#t\r\n:2\r\n#f\r\n"));
    expect_reply(S("|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n"
                   "$39\r\nSome real reply following the attribute\r\n"));
    expect_reply(S("=29\r\ntxt:This is a verbatim\nstring\r\n"));
    expect_reply(S("#t\r\n"));
    expect_reply(S("#f\r\n"));
    const outcome *o = frame_every_way(S(">2\r\n$16\r\nserver-cpu-usage\r\n:42\r\n"
                                         "$40\r\nSome real reply following the push reply\r\n"));
    cr_assert_eq(o->n, 2);
    cr_assert_eq(o->type[0], '>');
    cr_assert_eq(o->type[1], '$');
    /* ... and in RESP2 */
    expect_reply(S("$5\r\n3.141\r\n"));
    expect_reply(S("$37\r\n1234567999999999999999999999999999999\r\n"));
    expect_reply(S("*6\r\n:0\r\n:0\r\n:1\r\n:1\r\n:2\r\n:0\r\n"));
    expect_reply(S("$25\r\nThis is a verbatim\nstring\r\n"));
    expect_reply(S("-ERR RESP2 is not supported by this command\r\n"));
    expect_reply(S("$4\r\n-nan\r\n"));
}

Test(resp_frame, a_simple_line_longer_than_any_buffer)
{
    /* EVAL "return {err=string.rep('x', 70000)}" 0: one 70003-byte line. */
    sbuf b = {0};
    sb_str(&b, "-");
    for (int i = 0; i < 70000; i++)
        sb_add(&b, i % 1000 == 999 ? "\r" : "x", 1);
    sb_str(&b, "\r\n+next\r\n");
    frame_whole(b.p, b.len, &o_whole);
    cr_assert_eq(o_whole.n, 2);
    cr_assert_eq(o_whole.end[0], 70003);
    size_t cuts[4] = {1, 35000, 70002, b.len};
    frame_pieces(b.p, b.len, cuts, 4, &o_cut);
    assert_same(&o_whole, &o_cut, "cut in 4, length", b.len);
    sb_free(&b);
}

Test(resp_frame, the_text_of_a_simple_line_is_not_judged)
{
    /* The framer only decides where a reply ends; whatever is between the
     * type byte and CRLF is forwarded as it is, so a server's odd line is
     * the client's business, not a reason to drop the connection. */
    static const struct {
        const char *p;
        size_t len;
    } lines[] = {{S(":abc\r\n")},
                 {S(":\r\n")},
                 {S(":01\r\n")},
                 {S(":-0\r\n")},
                 {S(":1.5\r\n")},
                 {S(":+1\r\n")},
                 {S(":9223372036854775808\r\n")},
                 {S(":-9223372036854775809\r\n")},
                 {S("#x\r\n")},
                 {S("#tt\r\n")},
                 {S("#\r\n")},
                 {S("#T\r\n")},
                 {S("_x\r\n")},
                 {S("_ \r\n")},
                 {S(",\r\n")},
                 {S(",x\r\n")},
                 {S("(\r\n")},
                 {S("(-\r\n")},
                 {S("(12a\r\n")},
                 {S("(\0\r\n")},
                 {S("+\0\r\n")},
                 {S("-\xff\r\n")},
                 {S("+$3\r\n")},
                 {S("-*1\r\n")}};
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        expect_reply(lines[i].p, lines[i].len);
    /* Inside aggregates too. */
    expect_reply(S("*3\r\n(x\r\n#?\r\n_!\r\n"));
    expect_reply(S("%1\r\n,\r\n:\r\n"));
}

/* ---- nesting ---- */

static void check_nested(const char *open, const char *leaf, int depth)
{
    sbuf b = {0};
    for (int i = 0; i < depth; i++)
        sb_str(&b, open);
    sb_str(&b, leaf);
    expect_reply(b.p, b.len);
    /* One line short is never a reply. */
    const outcome *o = frame_every_way(b.p, b.len - 1);
    cr_assert_eq(o->n, 0);
    cr_assert_eq(o->last, RESP_FRAME_PARTIAL);
    sb_free(&b);
}

Test(resp_frame, nested_depth_100)
{
    check_nested("*1\r\n", ":1\r\n", 100);
    check_nested("*1\r\n", "$2\r\nhi\r\n", 100);
    check_nested("%1\r\n+k\r\n", "_\r\n", 100);
    check_nested("~1\r\n", "#t\r\n", 100);
    check_nested(">1\r\n", "*0\r\n", 100);
    check_nested("|1\r\n+k\r\n+v\r\n*1\r\n", ":1\r\n", 100);
    check_nested("*2\r\n:1\r\n", "$-1\r\n", 100);
    check_nested("*2\r\n|1\r\n+a\r\n+b\r\n:1\r\n%1\r\n+k\r\n", "$1\r\nz\r\n", 100);
}

Test(resp_frame, nested_depth_100_closing_late)
{
    /* Each level opens a second element that comes after the whole inner
     * tree: the count has to remember all 100 levels. */
    sbuf b = {0};
    for (int i = 0; i < 100; i++)
        sb_str(&b, i % 3 == 0 ? "*2\r\n" : i % 3 == 1 ? "%1\r\n" : "|1\r\n+a\r\n+b\r\n~2\r\n");
    sb_str(&b, ":0\r\n");
    for (int i = 99; i >= 0; i--)
        sb_str(&b, i % 3 == 0 ? "+x\r\n" : i % 3 == 1 ? "$3\r\nmap\r\n" : "#f\r\n");
    expect_reply(b.p, b.len);
    const outcome *o = frame_every_way(b.p, b.len - 4);
    cr_assert_eq(o->n, 0);
    cr_assert_eq(o->pending, 1);
    sb_free(&b);
}

Test(resp_frame, nesting_deeper_than_memory_would_allow_a_stack)
{
    resp_framer f;
    size_t used;
    resp_frame_reset(&f);
    for (int i = 0; i < 1000000; i++) {
        cr_assert_eq(resp_frame_scan(&f, S("*1\r\n"), &used), RESP_FRAME_PARTIAL);
        cr_assert_eq(used, 4);
    }
    cr_assert_eq(resp_frame_scan(&f, S(":1\r\n"), &used), RESP_FRAME_DONE);
    cr_assert_eq(f.consumed, 4000004);
}

/* ---- back to back ---- */

Test(resp_frame, stops_at_the_end_of_each_reply)
{
    static const char in[] = "+OK\r\n:1\r\n$3\r\nfoo\r\n*2\r\n$1\r\na\r\n*0\r\n$-1\r\n*-1\r\n_\r\n"
                             "%1\r\n+k\r\n+v\r\n-ERR x\r\n>1\r\n+p\r\n$0\r\n\r\n";
    static const size_t ends[] = {5, 9, 18, 33, 38, 43, 46, 58, 66, 74, 80};
    static const char types[] = "+:$*$*_%->$";
    const outcome *o = frame_every_way(S(in));
    cr_assert_eq(o->n, sizeof(ends) / sizeof(ends[0]));
    for (size_t i = 0; i < o->n; i++) {
        cr_assert_eq(o->end[i], ends[i], "reply %zu ends at %zu", i, o->end[i]);
        cr_assert_eq(o->type[i], types[i]);
    }
    cr_assert_eq(o->stop, sizeof(in) - 1);

    /* One call never runs past a reply, whatever follows it. */
    resp_framer f;
    size_t used;
    resp_frame_reset(&f);
    cr_assert_eq(resp_frame_scan(&f, S("$3\r\nfoo\r\n@garbage"), &used), RESP_FRAME_DONE);
    cr_assert_eq(used, 9);
    cr_assert_eq(resp_frame_scan(&f, S("*1\r\n$1\r\na\r\n+X"), &used), RESP_FRAME_DONE);
    cr_assert_eq(used, 11);
    cr_assert_eq(f.consumed, 11);
}

Test(resp_frame, type_stays_until_the_next_reply_starts)
{
    resp_framer f;
    size_t used;
    resp_frame_reset(&f);
    cr_assert_eq(f.type, 0);
    cr_assert_eq(resp_frame_scan(&f, S(""), &used), RESP_FRAME_PARTIAL);
    cr_assert_eq(used, 0);
    cr_assert_eq(resp_frame_scan(&f, NULL, 0, &used), RESP_FRAME_PARTIAL);
    cr_assert_eq(used, 0);
    cr_assert_eq(resp_frame_scan(&f, S("$1"), &used), RESP_FRAME_PARTIAL);
    cr_assert_eq(used, 0);
    cr_assert_eq(f.type, 0);
    cr_assert_eq(f.pending, 0);
    cr_assert_eq(resp_frame_scan(&f, S("$1\r\nx\r\n"), &used), RESP_FRAME_DONE);
    cr_assert_eq(f.type, '$');
    cr_assert_eq(f.consumed, 7);
    /* The next reply's first line is not complete: still the old type. */
    cr_assert_eq(resp_frame_scan(&f, S("*12"), &used), RESP_FRAME_PARTIAL);
    cr_assert_eq(used, 0);
    cr_assert_eq(f.type, '$');
    cr_assert_eq(f.pending, 0);
    cr_assert_eq(f.consumed, 0);
    cr_assert_eq(resp_frame_scan(&f, S("*2\r\n$1"), &used), RESP_FRAME_PARTIAL);
    cr_assert_eq(used, 4);
    cr_assert_eq(f.type, '*');
    cr_assert_eq(f.pending, 2);
    cr_assert_eq(resp_frame_scan(&f, S("$1\r\na\r\n:2\r\n"), &used), RESP_FRAME_DONE);
    cr_assert_eq(f.consumed, 15);
    cr_assert_eq(f.type, '*');
}

Test(resp_frame, a_simple_line_is_consumed_as_it_comes)
{
    resp_framer f;
    size_t used;
    resp_frame_reset(&f);
    cr_assert_eq(resp_frame_scan(&f, S("+O"), &used), RESP_FRAME_PARTIAL);
    cr_assert_eq(used, 2);
    cr_assert_eq(f.type, '+');
    cr_assert_eq(f.pending, 1);
    /* A last CR is kept: its LF may come next. */
    cr_assert_eq(resp_frame_scan(&f, S("K\r"), &used), RESP_FRAME_PARTIAL);
    cr_assert_eq(used, 1);
    cr_assert_eq(resp_frame_scan(&f, S("\r\r"), &used), RESP_FRAME_PARTIAL);
    cr_assert_eq(used, 1, "a CR followed by a CR is text");
    cr_assert_eq(resp_frame_scan(&f, S("\r\n:1\r\n"), &used), RESP_FRAME_DONE);
    cr_assert_eq(used, 2);
    cr_assert_eq(f.consumed, 6);
    cr_assert_eq(f.type, '+');
    /* The type byte alone. */
    cr_assert_eq(resp_frame_scan(&f, S("-"), &used), RESP_FRAME_PARTIAL);
    cr_assert_eq(used, 1);
    cr_assert_eq(f.type, '-');
    cr_assert_eq(resp_frame_scan(&f, S("\r\n"), &used), RESP_FRAME_DONE);
    cr_assert_eq(f.consumed, 3);
    /* Inside an aggregate. */
    cr_assert_eq(resp_frame_scan(&f, S("*2\r\n(12"), &used), RESP_FRAME_PARTIAL);
    cr_assert_eq(used, 7);
    cr_assert_eq(resp_frame_scan(&f, S("3\r\n,x"), &used), RESP_FRAME_PARTIAL);
    cr_assert_eq(used, 5);
    cr_assert_eq(resp_frame_scan(&f, S("\r\n"), &used), RESP_FRAME_DONE);
    cr_assert_eq(f.consumed, 14);
}

Test(resp_frame, a_monitor_line_of_a_large_value_streams)
{
    /* MONITOR shows a 1 MiB SET as one line of about 4 MiB: it goes by in
     * pieces, each consumed as it comes and never searched again. */
    const size_t text = 4u << 20, piece = 4096;
    sbuf b = {0};
    sb_str(&b, "+1700000000.123456 [0 127.0.0.1:5000] \"SET\" \"k\" \"");
    while (b.len < text)
        sb_str(&b, b.len % 3 ? "\\x01" : "\r");
    sb_str(&b, "\"\r\n");
    resp_framer f;
    size_t used, off = 0;
    resp_frame_reset(&f);
    while (b.len - off > piece) {
        cr_assert_eq(resp_frame_scan(&f, b.p + off, piece, &used), RESP_FRAME_PARTIAL);
        cr_assert(used == piece || (used == piece - 1 && b.p[off + piece - 1] == '\r'), "used %zu", used);
        off += used;
    }
    cr_assert_eq(resp_frame_scan(&f, b.p + off, b.len - off, &used), RESP_FRAME_DONE);
    cr_assert_eq(off + used, b.len);
    cr_assert_eq(f.consumed, b.len);
    sb_free(&b);
}

Test(resp_frame, reset_rescans_from_the_reply_start)
{
    static const char in[] = "*2\r\n$5\r\nhello\r\n:7\r\n";
    resp_framer f;
    size_t used;
    resp_frame_reset(&f);
    cr_assert_eq(resp_frame_scan(&f, in, 12, &used), RESP_FRAME_PARTIAL);
    cr_assert_eq(used, 12);
    resp_frame_reset(&f);
    cr_assert_eq(f.pending, 0);
    cr_assert_eq(f.bulk_left, 0);
    cr_assert_eq(f.consumed, 0);
    cr_assert_eq(f.type, 0);
    cr_assert_null(f.error);
    cr_assert_eq(resp_frame_scan(&f, S(in), &used), RESP_FRAME_DONE);
    cr_assert_eq(used, sizeof(in) - 1);
    /* reset also clears an error. */
    cr_assert_eq(resp_frame_scan(&f, S("@"), &used), RESP_FRAME_ERROR);
    resp_frame_reset(&f);
    cr_assert_eq(resp_frame_scan(&f, S("+OK\r\n"), &used), RESP_FRAME_DONE);
}

/* ---- bulk payloads stream ---- */

Test(resp_frame, large_bulk_streams_in_pieces)
{
    const size_t size = 8u << 20, piece = 4096;
    sbuf b = {0};
    sb_fmt(&b, "$%lld\r\n", (long long)size);
    size_t hdr = b.len;
    char *payload = malloc(size);
    cr_assert_not_null(payload);
    for (size_t i = 0; i < size; i++)
        payload[i] = (char)("\r\n\0$*+x"[i % 7]);
    sb_add(&b, payload, size);
    sb_str(&b, "\r\n+next\r\n");
    free(payload);

    resp_framer f;
    size_t used, off = 0;
    resp_frame_reset(&f);
    /* The header arrives with a first slice of payload. */
    cr_assert_eq(resp_frame_scan(&f, b.p, hdr + 100, &used), RESP_FRAME_PARTIAL);
    cr_assert_eq(used, hdr + 100, "payload bytes are consumed as they come");
    cr_assert_eq(f.bulk_left, (long long)size - 100 + 2);
    off = used;
    while (f.bulk_left > (long long)piece) {
        cr_assert_eq(resp_frame_scan(&f, b.p + off, piece, &used), RESP_FRAME_PARTIAL);
        cr_assert_eq(used, piece);
        off += used;
        cr_assert_eq(f.consumed, off);
    }
    /* Payload ends, CR arrives alone, then LF with the next reply behind it. */
    size_t rest = (size_t)f.bulk_left - 2;
    cr_assert_eq(resp_frame_scan(&f, b.p + off, rest + 1, &used), RESP_FRAME_PARTIAL);
    cr_assert_eq(used, rest + 1);
    cr_assert_eq(f.bulk_left, 1);
    off += used;
    cr_assert_eq(resp_frame_scan(&f, b.p + off, b.len - off, &used), RESP_FRAME_DONE);
    cr_assert_eq(used, 1);
    cr_assert_eq(f.consumed, hdr + size + 2);
    cr_assert_eq(f.type, '$');
    off += used;
    cr_assert_eq(resp_frame_scan(&f, b.p + off, b.len - off, &used), RESP_FRAME_DONE);
    cr_assert_eq(f.type, '+');
    cr_assert_eq(off + used, b.len);
    sb_free(&b);
}

Test(resp_frame, large_bulk_in_an_array_split_everywhere_near_the_edges)
{
    sbuf b = {0};
    sb_str(&b, "*3\r\n$100000\r\n");
    for (int i = 0; i < 100000; i++)
        sb_add(&b, i % 2 ? "\r" : "\n", 1);
    sb_str(&b, "\r\n!3\r\nerr\r\n=5\r\ntxt:x\r\n");
    outcome *o = malloc(sizeof(*o));
    cr_assert_not_null(o);
    frame_whole(b.p, b.len, &o_whole);
    cr_assert_eq(o_whole.n, 1);
    cr_assert_eq(o_whole.end[0], b.len);
    /* Splits in the first and last 64 bytes and a few in the middle. */
    for (size_t k = 0; k <= b.len; k = (k == 64 ? b.len / 2 : k == b.len / 2 + 3 ? b.len - 64 : k + 1)) {
        size_t cuts[2] = {k, b.len};
        frame_pieces(b.p, b.len, cuts, 2, o);
        assert_same(&o_whole, o, "split at", k);
    }
    free(o);
    sb_free(&b);
}

/* ---- errors ---- */

Test(resp_frame, every_unknown_type_byte_is_an_error)
{
    static const char known[] = "+-:$*_,#(!=%~>|";
    for (int c = 0; c < 256; c++) {
        char in[4] = {(char)c, '\r', '\n', 0};
        resp_framer f;
        size_t used = 99;
        resp_frame_reset(&f);
        resp_frame_status st = resp_frame_scan(&f, in, 3, &used);
        if (c != 0 && strchr(known, c)) {
            cr_assert(f.error == NULL || strcmp(f.error, "unknown reply type byte") != 0, "byte %d", c);
            continue;
        }
        cr_assert_eq(st, RESP_FRAME_ERROR, "byte %d", c);
        cr_assert_str_eq(f.error, "unknown reply type byte");
        cr_assert_eq(used, 0);
        /* Known at once, without waiting for the line. */
        resp_frame_reset(&f);
        cr_assert_eq(resp_frame_scan(&f, in, 1, &used), RESP_FRAME_ERROR, "byte %d", c);
    }
}

Test(resp_frame, streamed_types_are_refused)
{
    expect_error("$?\r\n;4\r\nHell\r\n;0\r\n", "streamed RESP3 types are not supported");
    expect_error("*?\r\n:1\r\n.\r\n", "streamed RESP3 types are not supported");
    expect_error("%?\r\n", "streamed RESP3 types are not supported");
    expect_error("~?\r\n", "streamed RESP3 types are not supported");
    expect_error("!?\r\n", "streamed RESP3 types are not supported");
    expect_error(";4\r\nHell\r\n", "unknown reply type byte");
    expect_error(".\r\n", "unknown reply type byte");
}

Test(resp_frame, bad_lengths)
{
    static const char *bulk[] = {"$-2\r\n",
                                 "$-0\r\n",
                                 "$01\r\n",
                                 "$+1\r\n",
                                 "$ 1\r\n",
                                 "$1 \r\n",
                                 "$\r\n",
                                 "$abc\r\n",
                                 "$-\r\n",
                                 "$1\n",
                                 "$1\r\r\n",
                                 "$9223372036854775806\r\n",
                                 "$9223372036854775808\r\n",
                                 "$99999999999999999999999\r\n",
                                 "!-1\r\n",
                                 "=-1\r\n",
                                 "$0x10\r\n"};
    static const char *aggr[] = {"*-2\r\n",
                                 "*-0\r\n",
                                 "*01\r\n",
                                 "*\r\n",
                                 "*x\r\n",
                                 "*1x\r\n",
                                 "%-1\r\n",
                                 "~-1\r\n",
                                 ">-1\r\n",
                                 "|-1\r\n",
                                 "*9223372036854775808\r\n",
                                 "*1 \r\n"};
    for (size_t i = 0; i < sizeof(bulk) / sizeof(bulk[0]); i++)
        expect_error_at(bulk[i], strlen(bulk[i]), "invalid bulk length", 0);
    for (size_t i = 0; i < sizeof(aggr) / sizeof(aggr[0]); i++)
        expect_error_at(aggr[i], strlen(aggr[i]), "invalid multibulk length", 0);
    /* The largest lengths that still fit are fine: the reply is just long. */
    const outcome *o = frame_every_way(S("$9223372036854775805\r\nabc"));
    cr_assert_eq(o->last, RESP_FRAME_PARTIAL);
    cr_assert_eq(o->stop, 25);
    cr_assert_eq(o->bulk_left, LLONG_MAX - 3);
}

Test(resp_frame, counts_that_would_overflow_are_refused)
{
    expect_error_at(S("*9223372036854775807\r\n*2\r\n"), "invalid multibulk length", 22);
    expect_error_at(S("%4611686018427387904\r\n"), "invalid multibulk length", 0);
    expect_error_at(S("|4611686018427387904\r\n"), "invalid multibulk length", 0);
    const outcome *o = frame_every_way(S("%4611686018427387903\r\n"));
    cr_assert_eq(o->pending, LLONG_MAX - 1);
    o = frame_every_way(S("*9223372036854775807\r\n*1\r\n"));
    cr_assert_eq(o->last, RESP_FRAME_PARTIAL);
    cr_assert_eq(o->pending, LLONG_MAX);
}

Test(resp_frame, bulk_must_end_in_crlf)
{
    expect_error_at(S("$3\r\nfooXY"), "bulk payload not followed by CRLF", 7);
    expect_error_at(S("$3\r\nfoo\rX"), "bulk payload not followed by CRLF", 8);
    expect_error_at(S("$3\r\nfoo\n\r"), "bulk payload not followed by CRLF", 7);
    expect_error_at(S("$0\r\n\n"), "bulk payload not followed by CRLF", 4);
    expect_error_at(S("*2\r\n!1\r\nxx\r\n"), "bulk payload not followed by CRLF", 9);
    expect_error_at(S("=1\r\nx\r\r"), "bulk payload not followed by CRLF", 6);
}

Test(resp_frame, errors_deep_inside_a_reply)
{
    expect_error_at(S("*2\r\n:1\r\n@\r\n"), "unknown reply type byte", 8);
    expect_error_at(S("+OK\r\n*1\r\n%1\r\n+k\r\n$?\r\n"), "streamed RESP3 types are not supported", 17);
    expect_error_at(S("*1\r\n$1\r\nx\r\n$?\r\n"), "streamed RESP3 types are not supported", 11);
    const outcome *o = frame_every_way(S("+OK\r\n:1\r\n*3\r\n$2\r\nab\r\n$x\r\n"));
    cr_assert_eq(o->n, 2, "replies before the error are still framed");
    cr_assert_eq(o->stop, 21);
}

/* ---- against hiredis ---- */

/* hiredis 0.14 refuses a ninth level of nested aggregates. */
#define HIREDIS_MAX_DEPTH 8

static uint64_t rng_state;
static int gen_deepest; /* most aggregate levels generated in one reply */

static uint64_t rnd(void)
{
    /* splitmix64: small, and the same stream on every platform */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static unsigned rnd_below(unsigned n)
{
    return (unsigned)(rnd() % n);
}

static void gen_text(sbuf *b)
{
    unsigned n = rnd_below(4) ? rnd_below(12) : rnd_below(200);
    for (unsigned i = 0; i < n; i++) {
        /* Any text, lone CRs and LFs too, but never a CRLF inside. */
        char c = rnd_below(16) ? (char)(' ' + rnd_below(95)) : rnd_below(2) ? '\r' : '\n';
        if (c == '\n' && b->len && b->p[b->len - 1] == '\r') c = 'x';
        sb_add(b, &c, 1);
    }
    sb_str(b, "\r\n");
}

static void gen_bulk(sbuf *b)
{
    static const char nasty[] = "\r\n\0$*+-:";
    unsigned n = rnd_below(8) ? rnd_below(40) : rnd_below(3000);
    sb_fmt(b, "$%lld\r\n", (long long)n);
    for (unsigned i = 0; i < n; i++) {
        char c = rnd_below(3) ? (char)rnd() : nasty[rnd_below(sizeof(nasty) - 1)];
        sb_add(b, &c, 1);
    }
    sb_str(b, "\r\n");
}

/* One random RESP2 value at nesting level `depth` (0 = top). */
static void gen_value(sbuf *b, int depth)
{
    static const long long edge[] = {0, 1, -1, 10, LLONG_MAX, LLONG_MIN, 1000000007};
    unsigned r = rnd_below(100);
    if (r < 30 && depth < HIREDIS_MAX_DEPTH) {
        /* About 0.8 aggregates per aggregate below the top: trees stay
         * small, and some still reach hiredis's depth limit. */
        unsigned n = rnd_below(5) ? rnd_below(4) : rnd_below(depth ? 12 : 60);
        if (depth + 1 > gen_deepest) gen_deepest = depth + 1;
        sb_fmt(b, "*%lld\r\n", (long long)n);
        for (unsigned i = 0; i < n; i++)
            gen_value(b, depth + 1);
    } else if (r < 33 && depth < HIREDIS_MAX_DEPTH) {
        /* hiredis counts even a null array as a level */
        sb_str(b, "*-1\r\n");
    } else if (r < 37) {
        sb_str(b, "$-1\r\n");
    } else if (r < 50) {
        sb_str(b, "+");
        gen_text(b);
    } else if (r < 57) {
        sb_str(b, "-");
        gen_text(b);
    } else if (r < 70) {
        long long v = rnd_below(2) ? edge[rnd_below(sizeof(edge) / sizeof(edge[0]))] : (long long)rnd();
        sb_fmt(b, ":%lld\r\n", v);
    } else {
        gen_bulk(b);
    }
}

/* Reads `in` with hiredis, fed in random pieces. Records where each reply
 * ends: the bytes fed so far minus what hiredis has not read yet. Returns 0
 * if hiredis read everything without error, -1 if it stopped at an error. */
static char hiredis_error[128];

static int hiredis_frame(const char *in, size_t len, outcome *o)
{
    redisReader *r = redisReaderCreate();
    size_t fed = 0;
    int rc = 0;

    cr_assert_not_null(r);
    o->n = 0;
    while (fed < len && rc == 0) {
        size_t n = 1 + rnd_below(rnd_below(4) ? 64 : 4096);
        if (n > len - fed) n = len - fed;
        cr_assert_eq(redisReaderFeed(r, in + fed, n), REDIS_OK);
        fed += n;
        for (;;) {
            void *reply = NULL;
            if (redisReaderGetReply(r, &reply) != REDIS_OK) {
                snprintf(hiredis_error, sizeof(hiredis_error), "%s", r->errstr);
                rc = -1;
                break;
            }
            if (reply == NULL) break;
            static const char type_byte[] = {
                [REDIS_REPLY_STRING] = '$', [REDIS_REPLY_ARRAY] = '*',  [REDIS_REPLY_INTEGER] = ':',
                [REDIS_REPLY_NIL] = '_',    [REDIS_REPLY_STATUS] = '+', [REDIS_REPLY_ERROR] = '-'};
            cr_assert(o->n < MAX_REPLIES);
            o->end[o->n] = fed - (r->len - r->pos);
            o->type[o->n] = type_byte[((redisReply *)reply)->type];
            o->n++;
            freeReplyObject(reply);
        }
    }
    redisReaderFree(r);
    return rc;
}

static outcome o_hiredis;

Test(resp_frame_oracle, agrees_with_hiredis_on_random_resp2, .timeout = 300)
{
    size_t total_replies = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        sbuf b = {0};
        size_t want[400];
        size_t nwant = 0;
        rng_state = seed;
        for (; nwant < 400; nwant++) {
            gen_value(&b, 0);
            want[nwant] = b.len;
        }

        cr_assert_eq(hiredis_frame(b.p, b.len, &o_hiredis), 0, "seed %llu: hiredis refused the stream: %s",
                     (unsigned long long)seed, hiredis_error);
        cr_assert_eq(o_hiredis.n, nwant);
        frame_whole(b.p, b.len, &o_whole);
        cr_assert_eq(o_whole.last, RESP_FRAME_PARTIAL, "seed %llu: %s", (unsigned long long)seed,
                     o_whole.error);
        cr_assert_eq(o_whole.n, nwant);
        cr_assert_eq(o_whole.stop, b.len);
        for (size_t i = 0; i < nwant; i++) {
            cr_assert_eq(o_whole.end[i], want[i], "seed %llu reply %zu", (unsigned long long)seed, i);
            cr_assert_eq(o_hiredis.end[i], want[i], "seed %llu reply %zu", (unsigned long long)seed, i);
            char t = o_whole.type[i];
            if (o_hiredis.type[i] == '_') /* hiredis's nil is "$-1" or "*-1" */
                cr_assert(t == '$' || t == '*');
            else
                cr_assert_eq(t, o_hiredis.type[i], "seed %llu reply %zu", (unsigned long long)seed, i);
        }

        /* The same stream in random pieces, as a socket would deliver it. */
        size_t cuts[2048], ncuts = 0, at = 0;
        while (at < b.len && ncuts < 2047) {
            at += rnd_below(8) ? rnd_below(32) : rnd_below(8192);
            cuts[ncuts++] = at < b.len ? at : b.len;
        }
        cuts[ncuts++] = b.len;
        frame_pieces(b.p, b.len, cuts, ncuts, &o_cut);
        assert_same(&o_whole, &o_cut, "random pieces, seed", (size_t)seed);
        total_replies += nwant;
        sb_free(&b);
    }
    cr_assert_eq(total_replies, 60 * 400);
    cr_assert_eq(gen_deepest, HIREDIS_MAX_DEPTH, "the generator never reached hiredis's depth limit");
}

Test(resp_frame_oracle, hiredis_depth_limit_is_exercised)
{
    /* The generator goes exactly as deep as hiredis can: one level deeper is
     * refused by hiredis but framed by us (we have no depth limit). */
    sbuf b = {0};
    for (int i = 0; i < HIREDIS_MAX_DEPTH; i++)
        sb_str(&b, "*1\r\n");
    sb_str(&b, ":1\r\n");
    cr_assert_eq(hiredis_frame(b.p, b.len, &o_hiredis), 0);
    cr_assert_eq(o_hiredis.n, 1);
    expect_reply(b.p, b.len);
    sb_free(&b);
    for (int i = 0; i <= HIREDIS_MAX_DEPTH; i++)
        sb_str(&b, "*1\r\n");
    sb_str(&b, ":1\r\n");
    cr_assert_eq(hiredis_frame(b.p, b.len, &o_hiredis), -1);
    expect_reply(b.p, b.len);
    sb_free(&b);
}

Test(resp_frame_oracle, both_reject_malformed_input)
{
    static const char *bad[] = {"@foo\r\n",
                                "x\r\n",
                                " \r\n",
                                "?\r\n",
                                ";\r\n",
                                ".\r\n",
                                "$?\r\n",
                                "*?\r\n",
                                "$abc\r\n",
                                "$01\r\na\r\n",
                                "$-5\r\n",
                                "$-0\r\n",
                                "$+1\r\na\r\n",
                                "$ 1\r\na\r\n",
                                "$1 \r\na\r\n",
                                "*-5\r\n",
                                "*x\r\n",
                                "*01\r\n:1\r\n",
                                "*-\r\n",
                                "*2\r\n:1\r\n@\r\n",
                                "+OK\r\n*1\r\n*1\r\n$x\r\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t len = strlen(bad[i]);
        rng_state = i;
        cr_assert_eq(hiredis_frame(bad[i], len, &o_hiredis), -1, "hiredis accepts %s", bad[i]);
        frame_whole(bad[i], len, &o_whole);
        cr_assert_eq(o_whole.last, RESP_FRAME_ERROR, "framer accepts %s", bad[i]);
        cr_assert_eq(o_whole.n, o_hiredis.n, "%s: replies before the error", bad[i]);
        for (size_t k = 0; k < o_whole.n; k++)
            cr_assert_eq(o_whole.end[k], o_hiredis.end[k]);
        /* ... and the framer says the same however the input is cut. */
        expect_error_at(bad[i], len, o_whole.error, o_whole.stop);
    }
    /* "\0": a string literal cannot hold it. */
    rng_state = 99;
    cr_assert_eq(hiredis_frame("\0\r\n", 3, &o_hiredis), -1);
    frame_whole("\0\r\n", 3, &o_whole);
    cr_assert_eq(o_whole.last, RESP_FRAME_ERROR);
}

Test(resp_frame_oracle, framer_is_stricter_than_hiredis_where_framing_is_ambiguous)
{
    /* hiredis 0.14 skips the two bytes after a payload unchecked; if they
     * are not CRLF the stream is out of step, so the framer refuses it. */
    rng_state = 7;
    cr_assert_eq(hiredis_frame(S("$3\r\nfooXY"), &o_hiredis), 0);
    cr_assert_eq(o_hiredis.n, 1);
    expect_error_at(S("$3\r\nfooXY"), "bulk payload not followed by CRLF", 7);
}

Test(resp_frame_oracle, lines_end_where_hiredis_ends_them)
{
    /* A lone LF or CR is text to both. */
    static const char *in[] = {"+a\nb\r\n", "-\n\r\n", "+\r\r\n", "+a\rb\nc\r\n"};
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
        size_t len = strlen(in[i]);
        rng_state = i;
        cr_assert_eq(hiredis_frame(in[i], len, &o_hiredis), 0, "%s", in[i]);
        cr_assert_eq(o_hiredis.n, 1);
        cr_assert_eq(o_hiredis.end[0], len);
        expect_reply(in[i], len);
    }
}

Test(resp_frame_oracle, hiredis_judges_an_integer_line_the_framer_does_not)
{
    /* hiredis refuses these as integers; Redis never sends them, and where
     * the reply ends does not depend on them, so the framer forwards the
     * line (and the client's own reader says what it thinks). */
    static const char *in[] = {":abc\r\n", ":01\r\n", ":9223372036854775808\r\n", ":-0\r\n", ":\r\n"};
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
        size_t len = strlen(in[i]);
        rng_state = i;
        cr_assert_eq(hiredis_frame(in[i], len, &o_hiredis), -1, "hiredis accepts %s", in[i]);
        expect_reply(in[i], len);
    }
}

Test(resp_frame_oracle, agrees_with_hiredis_on_mutated_streams, .timeout = 300)
{
    /* Damage valid streams at random. Wherever both still read a reply, the
     * replies must end at the same byte. */
    static const char poison[] = "\r\n*$:+-0123456789-?@%_#";
    size_t compared = 0, rounds = 3000;
    for (uint64_t seed = 1; seed <= rounds; seed++) {
        sbuf b = {0};
        rng_state = seed * 7919;
        for (int i = 0; i < 12; i++)
            gen_value(&b, 0);
        unsigned edits = 1 + rnd_below(3);
        for (unsigned e = 0; e < edits && b.len > 1; e++) {
            size_t at = rnd_below((unsigned)b.len);
            char c = rnd_below(2) ? poison[rnd_below(sizeof(poison) - 1)] : (char)rnd();
            switch (rnd_below(3)) {
            case 0:
                b.p[at] = c;
                break;
            case 1:
                memmove(b.p + at, b.p + at + 1, b.len - at - 1);
                b.len--;
                break;
            default:
                sb_add(&b, "", 1);
                memmove(b.p + at + 1, b.p + at, b.len - at - 1);
                b.p[at] = c;
                break;
            }
        }
        hiredis_frame(b.p, b.len, &o_hiredis);
        frame_whole(b.p, b.len, &o_whole);
        size_t common = o_whole.n < o_hiredis.n ? o_whole.n : o_hiredis.n;
        for (size_t i = 0; i < common; i++)
            cr_assert_eq(o_whole.end[i], o_hiredis.end[i], "seed %llu reply %zu", (unsigned long long)seed,
                         i);
        compared += common;
        /* And the damaged stream frames the same in pieces. */
        size_t cuts[3] = {rnd_below((unsigned)b.len + 1), 0, b.len};
        cuts[1] = cuts[0] + rnd_below((unsigned)(b.len - cuts[0]) + 1);
        frame_pieces(b.p, b.len, cuts, 3, &o_cut);
        assert_same(&o_whole, &o_cut, "mutated, seed", (size_t)seed);
        sb_free(&b);
    }
    cr_assert_gt(compared, rounds * 3, "too few replies survived to compare: %zu", compared);
}

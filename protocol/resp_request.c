/* resp_request.c - the incremental RESP request parser (see resp_request.h).
 *
 * This is Redis 7.0's processMultibulkBuffer / processInlineBuffer (and
 * sdssplitargs / string2ll) turned into a pure function over the caller's
 * buffer. The proxy must cut the client's byte stream into commands exactly
 * where Redis would, including on malformed input: if the two disagreed, the
 * bytes the proxy forwards could be read by Redis as a different sequence of
 * commands than the one the proxy checked and routed.
 *
 * Where Redis rescans its query buffer from the command start on every read,
 * we keep how far we scanned (p->pos), so a client trickling a 64 KiB line one
 * byte at a time costs O(n), not O(n^2). Between calls we keep only offsets
 * from the command start, never pointers: the caller may move its buffer. */
#include "protocol/resp_request.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Redis's LONG_STR_SIZE: no valid long long needs 21 characters or more. */
#define RESP_LONG_STR_SIZE 21
/* The argument arrays start at this many entries and double from there. */
#define RESP_ARGV_MIN_CAP 16
/* Arrays bigger than this (a 100k-argument MSET went through) are freed when
 * the next command starts, as Redis drops an argv of more than 1024 entries:
 * one huge command must not pin memory on an idle connection forever. */
#define RESP_ARGV_KEEP_CAP 1024
/* The inline scratch buffer starts here; it never needs more than
 * RESP_INLINE_MAX_SIZE bytes, so it is simply kept. */
#define RESP_SCRATCH_MIN_CAP 64

/* ------------------------------------------------------------------------
 * Memory. Like Redis's zmalloc, running out of memory aborts: the parser has
 * no sensible way to go on, and a half-handled OOM is worse than a restart.
 * --------------------------------------------------------------------- */

static void *resp_realloc(void *ptr, size_t n)
{
    void *q = realloc(ptr, n);
    if (!q && n) {
        fprintf(stderr, "verbproxy: out of memory allocating %zu bytes\n", n);
        abort();
    }
    return q;
}

/* Make room for at least `need` arguments. The capacity doubles, so a command
 * of n arguments costs O(log n) reallocations the first time and none after,
 * but never goes past `max` (the arguments the command can still have): we
 * grow as arguments arrive instead of trusting a count the client sent. */
static void resp_reserve_args(resp_request_parser *p, long long need, long long max)
{
    if (need <= p->argv_cap) return;
    long long cap = p->argv_cap ? (long long)p->argv_cap * 2 : RESP_ARGV_MIN_CAP;
    if (cap > max) cap = max;
    if (cap > INT_MAX) cap = INT_MAX;
    if (cap < need) {
        /* Cannot happen: argc is an int as in Redis, the multibulk count
         * is capped at INT_MAX and an inline line is at most 64 KiB. */
        fprintf(stderr, "verbproxy: request has more than INT_MAX arguments\n");
        abort();
    }
    p->arg_off = resp_realloc(p->arg_off, (size_t)cap * sizeof(*p->arg_off));
    p->arg_len = resp_realloc(p->arg_len, (size_t)cap * sizeof(*p->arg_len));
    p->argv = resp_realloc(p->argv, (size_t)cap * sizeof(*p->argv));
    p->argv_cap = (int)cap;
}

static void resp_free_args(resp_request_parser *p)
{
    free(p->arg_off);
    free(p->arg_len);
    free(p->argv);
    p->arg_off = NULL;
    p->arg_len = NULL;
    p->argv = NULL;
    p->argv_cap = 0;
}

static void resp_reserve_scratch(resp_request_parser *p, size_t need)
{
    if (need <= p->scratch_cap) return;
    size_t cap = p->scratch_cap ? p->scratch_cap * 2 : RESP_SCRATCH_MIN_CAP;
    if (cap < need) cap = need;
    p->scratch = resp_realloc(p->scratch, cap);
    p->scratch_cap = cap;
}

/* ------------------------------------------------------------------------
 * Lifecycle.
 * --------------------------------------------------------------------- */

void resp_request_init(resp_request_parser *p, const resp_request_limits *limits)
{
    memset(p, 0, sizeof(*p));
    if (limits) {
        p->limits = *limits;
    } else {
        p->limits.max_bulk_len = RESP_DEFAULT_MAX_BULK_LEN;
        p->limits.max_multibulk_len = RESP_DEFAULT_MAX_MULTIBULK_LEN;
    }
    p->bulk_len = -1;
}

void resp_request_free(resp_request_parser *p)
{
    resp_free_args(p);
    free(p->scratch);
    p->scratch = NULL;
    p->scratch_cap = 0;
    resp_request_reset(p);
}

/* Also clears a protocol error, so a parser can be reused for a new stream. */
void resp_request_reset(resp_request_parser *p)
{
    p->kind = 0;
    p->pos = 0;
    p->multibulk_len = 0;
    p->bulk_len = -1;
    p->line_start = 0;
    p->argc = 0;
    p->error = NULL;
    p->error_buf[0] = '\0';
}

const char *resp_request_error(const resp_request_parser *p)
{
    return p->error;
}

/* ------------------------------------------------------------------------
 * Helpers copied from Redis, with their exact semantics.
 * --------------------------------------------------------------------- */

/* Redis's string2ll() (util.c): strict, because the protocol is. Rejects the
 * empty string, 21+ characters, a leading '+', spaces, leading zeros ("01"),
 * "-0", a lone "-", and anything that overflows a long long. Accepting more
 * than Redis here would let a request mean something else to us than to it. */
static int resp_string2ll(const char *s, size_t slen, long long *value)
{
    const char *p = s;
    size_t plen = 0;
    int negative = 0;
    unsigned long long v;

    if (slen == 0 || slen >= RESP_LONG_STR_SIZE) return 0;

    /* Special case: first and only digit is 0. */
    if (slen == 1 && p[0] == '0') {
        *value = 0;
        return 1;
    }

    if (p[0] == '-') {
        negative = 1;
        p++;
        plen++;
        if (plen == slen) return 0;
    }

    /* First digit should be 1-9, otherwise the string should just be 0. */
    if (p[0] >= '1' && p[0] <= '9') {
        v = (unsigned long long)(p[0] - '0');
        p++;
        plen++;
    } else {
        return 0;
    }

    while (plen < slen && p[0] >= '0' && p[0] <= '9') {
        if (v > (ULLONG_MAX / 10)) return 0; /* overflow */
        v *= 10;
        if (v > (ULLONG_MAX - (unsigned long long)(p[0] - '0'))) return 0; /* overflow */
        v += (unsigned long long)(p[0] - '0');
        p++;
        plen++;
    }

    /* Trailing garbage. */
    if (plen < slen) return 0;

    if (negative) {
        if (v > ((unsigned long long)(-(LLONG_MIN + 1)) + 1)) return 0; /* overflow */
        /* -v computed in unsigned arithmetic: fine for LLONG_MIN too. */
        *value = (long long)(0ULL - v);
    } else {
        if (v > LLONG_MAX) return 0; /* overflow */
        *value = (long long)v;
    }
    return 1;
}

/* isspace() in the C locale, which is what sdssplitargs runs under (Redis
 * only sets LC_COLLATE). Written out so a byte >= 0x80 is never passed to
 * isspace() as a negative int. */
static int resp_is_space(int c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static int resp_is_hex_digit(int c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int resp_hex_digit_to_int(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return c - 'A' + 10;
}

/* Look for the terminator `term` of the line starting at `line`, resuming at
 * *scan where the previous call stopped. Returns 1 with *scan on the
 * terminator, or 0 with *scan at the end of what was scanned.
 *
 * Redis finds line ends with strchr() on its query buffer, which it keeps
 * NUL-terminated. Our buffer is not terminated, so we must use memchr(), which
 * unlike strchr() does not stop at a '\0'. To cut exactly where Redis does we
 * emulate that stop: a '\0' before the terminator hides the terminator, and
 * since those bytes never change, it hides it for good. Redis then waits
 * until more than RESP_INLINE_MAX_SIZE bytes are pending and fails with "too
 * big ..."; so do we. We park *scan on that '\0' so later calls see it again
 * in O(1) instead of rescanning.
 *
 * Only the first RESP_INLINE_MAX_SIZE + 1 bytes of a line are searched: a
 * terminator further away is one Redis may never see. Redis checks for "too
 * big" after every read, and reads at most 16 KiB at a time, so whether it
 * accepts a longer line depends on how the bytes reached it (a line of 80 KiB
 * or more it always refuses). We answer as Redis answers when the bytes come
 * one at a time, whatever amount the caller hands us: the result is then a
 * function of the byte stream alone, and we never accept a line that the
 * Redis behind us, reading what we forward, could refuse. */
static int resp_scan_line(const char *buf, size_t len, size_t line, size_t *scan, char term)
{
    size_t from = *scan;
    size_t end = len - line > RESP_INLINE_MAX_SIZE + 1 ? line + RESP_INLINE_MAX_SIZE + 1 : len;

    if (from >= end) return 0;
    if (buf[from] == '\0') return 0; /* parked on a '\0': the line never ends */

    const char *t = memchr(buf + from, term, end - from);
    size_t stop = t ? (size_t)(t - buf) : end;
    const char *nul = memchr(buf + from, '\0', stop - from);
    if (nul) {
        *scan = (size_t)(nul - buf);
        return 0;
    }
    *scan = stop;
    return t != NULL;
}

static resp_req_status resp_fail(resp_request_parser *p, const char *err)
{
    p->error = err;
    return RESP_REQ_ERROR;
}

/* ------------------------------------------------------------------------
 * Inline requests: "SET key "a value"\r\n", as typed in telnet.
 * --------------------------------------------------------------------- */

/* Redis's sdssplitargs() over line[0, n), writing the unescaped arguments to
 * p->scratch and their offsets to p->arg_off / p->arg_len. Returns -1 on
 * unbalanced quotes (which includes a closing quote followed by anything but
 * a space), 0 otherwise.
 *
 * sdssplitargs walks a NUL-terminated copy of the line, peeking up to three
 * bytes ahead; AT() gives the same '\0' past the end. The line itself holds no
 * '\0' (resp_scan_line never lets one through), so '\0' means end of line.
 *
 * Quirks kept on purpose, because they are Redis's:
 *  - blanks between arguments are isspace() (with \v and \f), but an
 *    unquoted argument only ends at ' ', \t, \r, \n: "a\vb" is one argument;
 *  - a quote may open in the middle of an argument: ab"c d" is "abc d";
 *  - in double quotes \xHH, \n, \r, \t, \b, \a are escapes and any other
 *    escaped byte stands for itself; an invalid \x (like "\xZZ") is an
 *    escaped 'x'; in single quotes only \' is an escape. */
#define AT(i) ((i) < n ? (unsigned char)line[i] : 0)
static int resp_split_inline(resp_request_parser *p, const char *line, size_t n)
{
    size_t i = 0, o = 0;

    /* Every output byte consumes at least one input byte, so the unescaped
     * line is never longer than the line: one reservation up front. */
    resp_reserve_scratch(p, n);
    char *out = p->scratch;
    p->argc = 0;

    for (;;) {
        while (i < n && resp_is_space((unsigned char)line[i]))
            i++;
        if (i == n) return 0;

        size_t start = o;
        int inq = 0;  /* in "double quotes" */
        int insq = 0; /* in 'single quotes' */
        int done = 0;
        while (!done) {
            int c = AT(i);
            if (inq) {
                if (c == '\\' && AT(i + 1) == 'x' && resp_is_hex_digit(AT(i + 2)) &&
                    resp_is_hex_digit(AT(i + 3))) {
                    out[o++] =
                        (char)(resp_hex_digit_to_int(AT(i + 2)) * 16 + resp_hex_digit_to_int(AT(i + 3)));
                    i += 3;
                } else if (c == '\\' && AT(i + 1)) {
                    i++;
                    switch (AT(i)) {
                    case 'n':
                        out[o++] = '\n';
                        break;
                    case 'r':
                        out[o++] = '\r';
                        break;
                    case 't':
                        out[o++] = '\t';
                        break;
                    case 'b':
                        out[o++] = '\b';
                        break;
                    case 'a':
                        out[o++] = '\a';
                        break;
                    default:
                        out[o++] = line[i];
                        break;
                    }
                } else if (c == '"') {
                    /* The closing quote must be followed by a space or nothing. */
                    if (AT(i + 1) && !resp_is_space(AT(i + 1))) return -1;
                    done = 1;
                } else if (c == 0) {
                    return -1; /* unterminated quotes */
                } else {
                    out[o++] = (char)c;
                }
            } else if (insq) {
                if (c == '\\' && AT(i + 1) == '\'') {
                    i++;
                    out[o++] = '\'';
                } else if (c == '\'') {
                    if (AT(i + 1) && !resp_is_space(AT(i + 1))) return -1;
                    done = 1;
                } else if (c == 0) {
                    return -1;
                } else {
                    out[o++] = (char)c;
                }
            } else {
                switch (c) {
                case ' ':
                case '\n':
                case '\r':
                case '\t':
                case '\0':
                    done = 1;
                    break;
                case '"':
                    inq = 1;
                    break;
                case '\'':
                    insq = 1;
                    break;
                default:
                    out[o++] = (char)c;
                    break;
                }
            }
            if (AT(i)) i++;
        }

        resp_reserve_args(p, (long long)p->argc + 1, LLONG_MAX);
        p->arg_off[p->argc] = start;
        p->arg_len[p->argc] = o - start;
        p->argc++;
    }
}
#undef AT

/* Redis's processInlineBuffer(): the request is one line ending at '\n', with
 * an optional '\r' before it, and at most RESP_INLINE_MAX_SIZE bytes before
 * the '\n' (see resp_scan_line). */
static resp_req_status resp_parse_inline(resp_request_parser *p, const char *buf, size_t len, size_t *used)
{
    if (!resp_scan_line(buf, len, 0, &p->pos, '\n')) {
        if (len > RESP_INLINE_MAX_SIZE) return resp_fail(p, "Protocol error: too big inline request");
        return RESP_REQ_INCOMPLETE;
    }

    size_t newline = p->pos;
    size_t querylen = newline;
    if (querylen > 0 && buf[querylen - 1] == '\r') querylen--;

    if (resp_split_inline(p, buf, querylen) != 0)
        return resp_fail(p, "Protocol error: unbalanced quotes in request");

    *used = newline + 1;
    if (p->argc == 0) return RESP_REQ_EMPTY;
    for (int j = 0; j < p->argc; j++) {
        p->argv[j].ptr = p->scratch + p->arg_off[j];
        p->argv[j].len = p->arg_len[j];
    }
    return RESP_REQ_COMMAND;
}

/* ------------------------------------------------------------------------
 * Multibulk requests: "*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n", what clients send.
 * --------------------------------------------------------------------- */

static resp_req_status resp_fail_expected_dollar(resp_request_parser *p, char got)
{
    snprintf(p->error_buf, sizeof(p->error_buf), "Protocol error: expected '$', got '%c'", got);
    /* Redis's addReplyErrorFormat turns \r and \n into spaces so the error
     * stays one protocol line; the byte can be a '\r' (an empty line). */
    for (char *c = p->error_buf; *c; c++)
        if (*c == '\r' || *c == '\n') *c = ' ';
    return resp_fail(p, p->error_buf);
}

/* Redis's processMultibulkBuffer(). Header lines ("*<count>", "$<len>") end at
 * the first '\r', and are only parsed once the byte after the '\r' is in the
 * buffer too; that byte is skipped without checking it is '\n'. After a bulk
 * payload the two bytes that should be "\r\n" are skipped unchecked too. Both
 * are lax, and both are copied, because where Redis ends an argument is where
 * the next command starts. */
static resp_req_status resp_parse_multibulk(resp_request_parser *p, const char *buf, size_t len, size_t *used)
{
    long long ll;

    if (p->multibulk_len == 0) {
        /* The count line; buf[0] is the '*'. */
        if (!resp_scan_line(buf, len, 0, &p->pos, '\r')) {
            if (len > RESP_INLINE_MAX_SIZE) return resp_fail(p, "Protocol error: too big mbulk count string");
            return RESP_REQ_INCOMPLETE;
        }
        if (p->pos + 1 >= len) return RESP_REQ_INCOMPLETE; /* the buffer should also hold the '\n' */

        /* Redis caps the count at INT_MAX whatever the configuration: argc is an int. */
        if (!resp_string2ll(buf + 1, p->pos - 1, &ll) || ll > p->limits.max_multibulk_len || ll > INT_MAX)
            return resp_fail(p, "Protocol error: invalid multibulk length");
        if (ll > RESP_UNAUTH_MAX_MULTIBULK_LEN && p->unauthenticated)
            return resp_fail(p, "Protocol error: unauthenticated multibulk length");

        p->pos += 2;
        if (ll <= 0) {
            /* "*0\r\n", "*-1\r\n": Redis resets the client and moves on. */
            *used = p->pos;
            return RESP_REQ_EMPTY;
        }
        p->multibulk_len = ll;
        p->bulk_len = -1;
        p->line_start = p->pos;
    }

    while (p->multibulk_len) {
        if (p->bulk_len == -1) {
            /* The "$<len>" line; p->pos is how far it was scanned. */
            if (!resp_scan_line(buf, len, p->line_start, &p->pos, '\r')) {
                if (len - p->line_start > RESP_INLINE_MAX_SIZE)
                    return resp_fail(p, "Protocol error: too big bulk count string");
                return RESP_REQ_INCOMPLETE;
            }
            if (p->pos + 1 >= len) return RESP_REQ_INCOMPLETE;

            if (buf[p->line_start] != '$') return resp_fail_expected_dollar(p, buf[p->line_start]);
            if (!resp_string2ll(buf + p->line_start + 1, p->pos - p->line_start - 1, &ll) || ll < 0 ||
                ll > p->limits.max_bulk_len)
                return resp_fail(p, "Protocol error: invalid bulk length");
            if (ll > RESP_UNAUTH_MAX_BULK_LEN && p->unauthenticated)
                return resp_fail(p, "Protocol error: unauthenticated bulk length");

            p->pos += 2;
            p->bulk_len = ll;
        }

        /* The payload and its two trailing bytes. Compared in unsigned long
         * long so a huge configured max_bulk_len cannot overflow. */
        if ((unsigned long long)(len - p->pos) < (unsigned long long)p->bulk_len + 2)
            return RESP_REQ_INCOMPLETE;

        resp_reserve_args(p, (long long)p->argc + 1, (long long)p->argc + p->multibulk_len);
        p->arg_off[p->argc] = p->pos;
        p->arg_len[p->argc] = (size_t)p->bulk_len;
        p->argc++;
        p->pos += (size_t)p->bulk_len + 2;
        p->bulk_len = -1;
        p->multibulk_len--;
        p->line_start = p->pos;
    }

    *used = p->pos;
    for (int j = 0; j < p->argc; j++) {
        p->argv[j].ptr = buf + p->arg_off[j];
        p->argv[j].len = p->arg_len[j];
    }
    return RESP_REQ_COMMAND;
}

/* ------------------------------------------------------------------------
 * The entry point.
 * --------------------------------------------------------------------- */

/* Start parsing a new command: forget the previous one (whose argv was valid
 * only until this call) and give back arrays a huge command left behind. */
static void resp_begin_command(resp_request_parser *p)
{
    p->pos = 0;
    p->multibulk_len = 0;
    p->bulk_len = -1;
    p->line_start = 0;
    p->argc = 0;
    if (p->argv_cap > RESP_ARGV_KEEP_CAP) resp_free_args(p);
}

resp_req_status resp_request_parse(resp_request_parser *p, const char *buf, size_t len, size_t *used)
{
    resp_req_status st;

    *used = 0;
    /* After a protocol error the stream cannot be resynchronised: Redis
     * closes the connection. Keep saying so until resp_request_reset(). */
    if (p->error) return RESP_REQ_ERROR;

    if (p->kind == 0) {
        resp_begin_command(p);
        if (len == 0) return RESP_REQ_INCOMPLETE;
        /* Like Redis: '*' starts a multibulk request, anything else is inline. */
        p->kind = buf[0] == '*' ? '*' : 'i';
    } else if (len < p->pos) {
        /* Fewer bytes than already scanned breaks the calling convention:
         * say "incomplete" rather than read past len. */
        return RESP_REQ_INCOMPLETE;
    }

    if (p->kind == '*')
        st = resp_parse_multibulk(p, buf, len, used);
    else
        st = resp_parse_inline(p, buf, len, used);

    /* A command is done: the next call starts the next one. argc/argv stay
     * as they are until then, for the caller to read. */
    if (st == RESP_REQ_COMMAND || st == RESP_REQ_EMPTY) p->kind = 0;
    return st;
}

/* ------------------------------------------------------------------------
 * Streaming a large multibulk request (see resp_request.h).
 * --------------------------------------------------------------------- */

int resp_request_partial_args(resp_request_parser *p, const char *buf, const resp_arg **argv)
{
    if (p->kind != '*' || p->error) return 0;
    for (int j = 0; j < p->argc; j++) {
        p->argv[j].ptr = buf + p->arg_off[j];
        p->argv[j].len = p->arg_len[j];
    }
    *argv = p->argv;
    return p->argc;
}

size_t resp_request_release(resp_request_parser *p, size_t len)
{
    if (p->kind != '*' || p->error || p->multibulk_len == 0 || len < p->pos) return 0;
    size_t n;
    if (p->bulk_len >= 0) {
        /* Inside a payload: everything up to the bytes still missing goes,
         * the two trailing bytes stay (they are skipped once all is here). */
        size_t have = len - p->pos;
        size_t take = (unsigned long long)have < (unsigned long long)p->bulk_len ? have : (size_t)p->bulk_len;
        n = p->pos + take;
        p->bulk_len -= (long long)take;
        p->pos = 0;
        p->line_start = 0;
    } else {
        /* Between arguments: the header line being scanned stays. */
        n = p->line_start;
        p->pos -= n;
        p->line_start = 0;
    }
    p->argc = 0; /* the released arguments are the caller's now */
    return n;
}

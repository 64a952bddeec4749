/* conveyor_wrap.c - the reads on a conveyor key sent in a transaction
 * with their offset, and their replies rewritten (conveyor_wrap.h). */
#include "proxy/conveyor/conveyor_wrap.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/resp_double.h"
#include "protocol/resp_write.h"
#include "proxy/cmd/command.h"
#include "proxy/config.h"
#include "proxy/conveyor/conveyor.h"
#include "proxy/conveyor/offset_key.h"
#include "proxy/conveyor/position_bound.h"

/* Does ZRANGE start stop ask for at most CONVEYOR_WRAP_MAX elements
 * whatever the set's length? Both ends counted from the same side. */
static int wrap_range_bounded(const resp_arg *start, const resp_arg *stop)
{
    long long a, b;
    if (!cmd_arg_ll(start, &a) || !cmd_arg_ll(stop, &b)) return 0; /* (Redis's error: the script's path) */
    if ((a < 0) != (b < 0)) return 0;
    return b < a || b - a < CONVEYOR_WRAP_MAX;
}

/* The options of ZRANGE and ZRANGEBYSCORE after the range (argv[4..]). */
typedef struct wrap_range {
    int withscores, rev, byscore, limit;
    long long count; /* LIMIT's */
} wrap_range;

/* 0 for an option that is none of these (BYLEX, a typo: Redis's error,
 * which the script's path gives). */
static int wrap_range_read(int argc, const resp_arg *argv, wrap_range *r)
{
    memset(r, 0, sizeof(*r));
    for (int i = 4; i < argc; i++) {
        long long offset;
        if (cmd_arg_is(&argv[i], "withscores")) {
            r->withscores = 1;
        } else if (cmd_arg_is(&argv[i], "rev")) {
            r->rev = 1;
        } else if (cmd_arg_is(&argv[i], "byscore")) {
            r->byscore = 1;
        } else if (cmd_arg_is(&argv[i], "limit") && i + 2 < argc && cmd_arg_ll(&argv[i + 1], &offset) &&
                   cmd_arg_ll(&argv[i + 2], &r->count)) {
            r->limit = 1;
            i += 2;
        } else {
            return 0;
        }
    }
    return 1;
}

/* A score range both of whose ends are infinite (the same in positions as
 * stored), for at most CONVEYOR_WRAP_MAX members with their scores. */
static int wrap_score_range(const resp_arg *argv, const wrap_range *r)
{
    return conveyor_bound_infinite(&argv[2]) && conveyor_bound_infinite(&argv[3]) && r->withscores &&
           r->limit && r->count >= 0 && r->count <= CONVEYOR_WRAP_MAX;
}

conveyor_wrap_shape conveyor_wrap_shape_of(const vp_config *conf, int argc, const resp_arg *argv)
{
    if (argc < 3 || !conveyor_key_is(conf, argv[1].ptr, argv[1].len)) return CONVEYOR_WRAP_NONE;
    const resp_arg *name = &argv[0];
    if (cmd_arg_is(name, "zscore")) return argc == 3 ? CONVEYOR_WRAP_SCALAR : CONVEYOR_WRAP_NONE;
    if (cmd_arg_is(name, "zmscore"))
        return argc <= 2 + CONVEYOR_WRAP_MAX ? CONVEYOR_WRAP_ALL : CONVEYOR_WRAP_NONE;
    if (cmd_arg_is(name, "zrank") || cmd_arg_is(name, "zrevrank"))
        return argc == 4 && cmd_arg_is(&argv[3], "withscore") ? CONVEYOR_WRAP_ODD : CONVEYOR_WRAP_NONE;
    if (cmd_arg_is(name, "zrevrange"))
        return argc == 5 && cmd_arg_is(&argv[4], "withscores") && wrap_range_bounded(&argv[2], &argv[3])
                   ? CONVEYOR_WRAP_ODD
                   : CONVEYOR_WRAP_NONE;
    wrap_range range;
    if (cmd_arg_is(name, "zrangebyscore") || cmd_arg_is(name, "zrevrangebyscore"))
        return argc >= 4 && wrap_range_read(argc, argv, &range) && !range.rev && !range.byscore &&
                       wrap_score_range(argv, &range)
                   ? CONVEYOR_WRAP_ODD
                   : CONVEYOR_WRAP_NONE;
    if (cmd_arg_is(name, "zrange")) {
        /* By rank, or by score between infinite ends (a finite end would
         * need the offset before the command could be written). */
        if (argc < 4 || !wrap_range_read(argc, argv, &range)) return CONVEYOR_WRAP_NONE;
        int ok = range.byscore ? wrap_score_range(argv, &range)
                               : range.withscores && !range.limit && wrap_range_bounded(&argv[2], &argv[3]);
        return ok ? CONVEYOR_WRAP_ODD : CONVEYOR_WRAP_NONE;
    }
    if (cmd_arg_is(name, "zrandmember")) {
        long long count;
        if (argc != 4 || !cmd_arg_is(&argv[3], "withscores") || !cmd_arg_ll(&argv[2], &count))
            return CONVEYOR_WRAP_NONE;
        return count >= -CONVEYOR_WRAP_MAX && count <= CONVEYOR_WRAP_MAX ? CONVEYOR_WRAP_ODD
                                                                         : CONVEYOR_WRAP_NONE;
    }
    return CONVEYOR_WRAP_NONE;
}

int conveyor_wrap_checked_of(const vp_config *conf, int argc, const resp_arg *argv, conveyor_checked *ck)
{
    if (argc < 4 || !conveyor_key_is(conf, argv[1].ptr, argv[1].len)) return 0;
    const resp_arg *name = &argv[0];
    int rev, zcount = 0;
    wrap_range range;
    if (cmd_arg_is(name, "zcount")) {
        if (argc != 4) return 0;
        rev = 0;
        zcount = 1;
        memset(&range, 0, sizeof(range));
    } else if (cmd_arg_is(name, "zrangebyscore") || cmd_arg_is(name, "zrevrangebyscore")) {
        if (!wrap_range_read(argc, argv, &range) || range.rev || range.byscore) return 0;
        rev = cmd_arg_is(name, "zrevrangebyscore");
    } else if (cmd_arg_is(name, "zrange")) {
        if (!wrap_range_read(argc, argv, &range) || !range.byscore) return 0;
        rev = range.rev;
    } else {
        return 0;
    }
    /* A range's reply is held whole: a bounded one only. */
    if (!zcount && !(range.limit && range.count >= 0 && range.count <= CONVEYOR_WRAP_MAX)) return 0;
    /* Each end finite and plainly written, or infinite (as it is). */
    int finite = 0;
    for (int i = 0; i < 2; i++) {
        const resp_arg *a = &argv[2 + i];
        ck->lower[i] = rev ? i == 1 : i == 0;
        ck->finite[i] = position_bound_parse(a, &ck->value[i], &ck->exclusive[i]);
        if (!ck->finite[i] && !conveyor_bound_infinite(a)) return 0;
        finite += ck->finite[i];
    }
    if (!finite) return 0; /* (both infinite: conveyor_wrap_shape_of's, or none at all) */
    ck->shape = range.withscores ? CONVEYOR_WRAP_ODD : CONVEYOR_WRAP_ASIS;
    return 1;
}

/* MULTI and HGET of the key's offset into out (cleared first). */
static void wrap_head(const resp_arg *key, vp_buf *out)
{
    static const char multi[] = RESP_LIT_ARRAY(1) RESP_LIT_BULK(5, "MULTI");
    char head[OFFSET_KEY_EXTRA];
    size_t hl = offset_key_head(key->ptr, key->len, head);
    out->len = 0;
    vp_buf_append(out, multi, sizeof(multi) - 1);
    vp_buf_resp_array(out, 3);
    vp_buf_resp_bulk(out, "HGET", 4);
    vp_buf_resp_header(out, RESP_BULK, (long long)(hl + key->len));
    vp_buf_append(out, head, hl);
    vp_buf_append(out, key->ptr, key->len);
    vp_buf_append(out, "\r\n", 2);
    vp_buf_resp_bulk(out, "offset", 6);
}

void conveyor_wrap_checked_request(int argc, const resp_arg *argv, const conveyor_checked *ck, double offset,
                                   vp_buf *out)
{
    wrap_head(&argv[1], out);
    vp_buf_resp_array(out, argc);
    for (int i = 0; i < argc; i++) {
        if (i == 2 || i == 3) {
            int b = i - 2;
            if (ck->finite[b]) {
                char text[POSITION_BOUND_MAX];
                double st = position_bound_stored(ck->value[b], ck->exclusive[b], ck->lower[b], offset);
                vp_buf_resp_bulk(out, text, position_bound_format(text, st));
                continue;
            }
        }
        vp_buf_resp_bulk(out, argv[i].ptr, argv[i].len);
    }
}

void conveyor_wrap_request(int argc, const resp_arg *argv, vp_buf *out, size_t *cmd_at, size_t *cmd_len)
{
    static const char exec[] = RESP_LIT_ARRAY(1) RESP_LIT_BULK(4, "EXEC");
    wrap_head(&argv[1], out);
    *cmd_at = out->len;
    vp_buf_resp_command(out, argc, argv); /* (as RESP, whether the client sent it so or inline) */
    *cmd_len = out->len - *cmd_at;
    vp_buf_append(out, exec, sizeof(exec) - 1);
}

/* The decimal number at *q up to CR, *q moved past its CRLF. */
static size_t wrap_number(const char **q, const char *end)
{
    size_t v = 0;
    while (*q < end && **q >= '0' && **q <= '9')
        v = v * 10 + (size_t)(*(*q)++ - '0');
    *q += 2;
    return v;
}

int conveyor_wrap_args(const char *p, size_t n, resp_arg *argv, int max)
{
    const char *q = p + 1, *end = p + n;
    if (n < 4 || p[0] != '*') return -1;
    size_t argc = wrap_number(&q, end);
    for (size_t i = 0; i < argc; i++) {
        if (q >= end || *q != '$') return -1;
        q++;
        size_t len = wrap_number(&q, end);
        if (q > end || (size_t)(end - q) < len + 2) return -1;
        if (i < (size_t)max) argv[i] = (resp_arg){q, len};
        q += len + 2;
    }
    return (int)argc;
}

/* ---- the reply ---- */

/* The length of the RESP2 element at p: a bulk string (or nil), an
 * integer, a status or an error; 0 for anything else (an array). The
 * reply was framed whole already: it is well formed. */
static size_t wrap_elem(const char *p, size_t n)
{
    const char *nl = n > 0 ? memchr(p, '\n', n) : NULL;
    if (!nl) return 0;
    size_t line = (size_t)(nl - p) + 1;
    switch (p[0]) {
    case ':':
    case '+':
    case '-':
        return line;
    case '$': {
        if (p[1] == '-') return line; /* nil */
        size_t len = 0;
        for (const char *d = p + 1; *d >= '0' && *d <= '9'; d++)
            len = len * 10 + (size_t)(*d - '0');
        size_t all = line + len + 2;
        return all <= n ? all : 0;
    }
    default:
        return 0;
    }
}

/* A bulk string element's payload (its header skipped); NULL for nil or
 * another type. */
static const char *wrap_bulk(const char *p, size_t elem, size_t *len)
{
    if (p[0] != '$' || p[1] == '-') return NULL;
    const char *nl = memchr(p, '\n', elem);
    *len = elem - (size_t)(nl + 1 - p) - 2;
    return nl + 1;
}

int conveyor_wrap_offset_text(const char *text, size_t len, double *out)
{
    *out = 0;
    if (len == 0) return 0;
    char small[128];
    char *buf = len < sizeof(small) ? small : vp_malloc(len + 1); /* (only an offset written by hand) */
    memcpy(buf, text, len);
    buf[len] = '\0';
    char *end;
    double d = strtod(buf, &end);
    int ok = end != buf;
    if (ok && (*end == 'x' || *end == 'X')) d = (double)strtoul(buf, &end, 16); /* (Lua 5.1's luaO_str2d) */
    while (ok && isspace((unsigned char)*end))
        end++;
    ok = ok && *end == '\0' && isfinite(d);
    if (buf != small) free(buf);
    if (ok) *out = d;
    return ok;
}

/* The offset in HGET's reply, as the scripts read it (lib/conveyor.lua's
 * conveyor_read_offset, Lua's tonumber): none is 0; anything but a finite
 * number is refused (0). What it held goes to *seen. */
static int wrap_offset(const char *p, size_t elem, double *out, conveyor_wrap_seen *seen)
{
    *out = 0;
    if (elem == 5 && memcmp(p, "$-1\r\n", 5) == 0) {
        seen->state = CONVEYOR_SEEN_NONE;
        return 1;
    }
    size_t len;
    const char *text = wrap_bulk(p, elem, &len);
    if (!text) return 0;
    seen->state = CONVEYOR_SEEN_TEXT;
    seen->text = text;
    seen->len = len;
    return conveyor_wrap_offset_text(text, len, out);
}

/* A score Redis wrote as an integer of up to 15 digits (exact in a
 * double): its value without strtod. */
static int wrap_integer(const char *text, size_t len, double *out)
{
    size_t i = text[0] == '-';
    if (len <= i || len - i > 15) return 0;
    long long v = 0;
    for (; i < len; i++) {
        if (text[i] < '0' || text[i] > '9') return 0;
        v = v * 10 + (text[i] - '0');
    }
    *out = text[0] == '-' ? -(double)v : (double)v;
    return 1;
}

/* The score element at p (elem bytes), as a position. */
static void wrap_score(const char *p, size_t elem, double offset, int fpconv, vp_buf *out)
{
    size_t len;
    const char *text = wrap_bulk(p, elem, &len);
    char buf[RESP_DOUBLE_MAX + 8];
    if (!text || len >= sizeof(buf)) {
        vp_buf_append(out, p, elem); /* (not a score Redis wrote) */
        return;
    }
    double x;
    if (!wrap_integer(text, len, &x)) {
        memcpy(buf, text, len);
        buf[len] = '\0';
        x = strtod(buf, NULL);
    }
    x += offset;
    char digits[RESP_DOUBLE_MAX];
    vp_buf_resp_bulk(out, digits, resp_double_format(digits, x, fpconv));
}

static void wrap_bad_offset(const char *key, size_t klen, vp_buf *out)
{
    char head[OFFSET_KEY_EXTRA];
    size_t hl = offset_key_head(key, klen, head);
    vp_buf text = {0};
    static const char a[] = "ERR verbproxy: the offset key '", b[] = "' of conveyor key '",
                      c[] = "' holds no offset";
    vp_buf_append(&text, a, sizeof(a) - 1);
    vp_buf_append(&text, head, hl);
    vp_buf_append(&text, key, klen);
    vp_buf_append(&text, b, sizeof(b) - 1);
    vp_buf_append(&text, key, klen);
    vp_buf_append(&text, c, sizeof(c) - 1);
    /* (Redis writes a script's error as a C string: up to a NUL in a name) */
    vp_buf_resp_error(out, text.data, strnlen(text.data, text.len));
    vp_buf_free(&text);
}

/* The length of the reply at p: an element wrap_elem takes, or an array
 * of them (*-1 too); 0 for anything else. */
static size_t wrap_skip(const char *p, size_t n)
{
    if (n == 0 || p[0] != '*') return wrap_elem(p, n);
    const char *nl = memchr(p, '\n', n);
    if (!nl) return 0;
    size_t at = (size_t)(nl - p) + 1;
    long long count = strtoll(p + 1, NULL, 10);
    for (long long i = 0; i < count; i++) {
        size_t elem = wrap_elem(p + at, n - at);
        if (!elem) return 0;
        at += elem;
    }
    return at;
}

/* The command's reply r..r+rn as the client's, its scores made positions. */
static void wrap_positions(conveyor_wrap_shape shape, int fpconv, double offset, const char *r, size_t rn,
                           vp_buf *out)
{
    const char *end = r + rn;
    if (offset == 0 || rn == 0 || shape == CONVEYOR_WRAP_ASIS) {
        vp_buf_append(out, r, rn); /* (no offset, no score: Redis's own reply) */
        return;
    }
    if (shape == CONVEYOR_WRAP_SCALAR || r[0] != '*') {
        size_t elem = wrap_elem(r, rn);
        if (shape == CONVEYOR_WRAP_SCALAR && elem == rn && r[0] == '$' && r[1] != '-')
            wrap_score(r, elem, offset, fpconv, out);
        else
            vp_buf_append(out, r, rn); /* an error, a nil */
        return;
    }
    /* An array of scores, or of pairs (or nil: *-1). */
    size_t line = (size_t)((const char *)memchr(r, '\n', rn) + 1 - r);
    long long count = strtoll(r + 1, NULL, 10);
    vp_buf_append(out, r, line);
    const char *e = r + line;
    for (long long i = 0; i < count && e < end; i++) {
        size_t elem = wrap_elem(e, (size_t)(end - e));
        if (!elem) { /* (not flat: cannot be a reply of these commands) */
            vp_buf_append(out, e, (size_t)(end - e));
            return;
        }
        if (shape == CONVEYOR_WRAP_ALL || (i & 1))
            wrap_score(e, elem, offset, fpconv, out);
        else
            vp_buf_append(out, e, elem);
        e += elem;
    }
    vp_buf_append(out, e, (size_t)(end - e));
}

int conveyor_wrap_reply(conveyor_wrap_shape shape, int checked, int fpconv, const char *key, size_t klen,
                        const char *p, size_t n, vp_buf *out, conveyor_wrap_seen *seen)
{
    seen->state = CONVEYOR_SEEN_NOTHING;
    seen->stale = 0;
    /* EXEC's reply: HGET's, then the command's (then, checked, the
     * script's). Anything else (an error in its place) is the client's as
     * it is, but for an EXEC Redis refused itself (-BUSY: a script of
     * someone else's began between the command and the EXEC), which Redis
     * words "-EXECABORT Transaction discarded because of: <the refusal>":
     * the refusal, as the command would have met it. */
    static const char refused[] = "-EXECABORT Transaction discarded because of: ";
    if (n > sizeof(refused) - 1 && memcmp(p, refused, sizeof(refused) - 1) == 0) {
        out->len = 0;
        vp_buf_append(out, "-", 1);
        vp_buf_append(out, p + sizeof(refused) - 1, n - (sizeof(refused) - 1));
        return 1;
    }
    if (n < 4 || memcmp(p, checked ? "*3\r\n" : "*2\r\n", 4) != 0) return 0;
    const char *end = p + n, *q = p + 4;
    size_t hl = wrap_elem(q, (size_t)(end - q));
    if (!hl) return 0;
    double offset;
    int ok = wrap_offset(q, hl, &offset, seen);
    const char *r = q + hl;
    size_t rn = (size_t)(end - r);
    out->len = 0;
    if (checked) {
        /* The script's reply: false when the offset was the one the
         * command was written with, else the client's. */
        size_t cl = wrap_skip(r, rn);
        if (!cl) return 0;
        const char *t = r + cl;
        size_t tn = (size_t)(end - t);
        if (tn != 5 || memcmp(t, "$-1\r\n", 5) != 0) {
            static const char noscript[] = "-NOSCRIPT";
            if (tn >= sizeof(noscript) - 1 && memcmp(t, noscript, sizeof(noscript) - 1) == 0)
                return -1; /* (the server lost the script: the command goes again) */
            vp_buf_append(out, t, tn);
            seen->stale = 1;
            return 1;
        }
        rn = cl;
    }
    if (!ok) {
        wrap_bad_offset(key, klen, out);
        return 1;
    }
    wrap_positions(shape, fpconv, offset, r, rn, out);
    return 1;
}

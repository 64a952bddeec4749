/* resp_frame.c - the reply framer: where does each reply end?
 *
 * A reply is a tree of values, but to find its end we only need to know how
 * many values are still owed: a scalar pays one, an aggregate of n pays one
 * and owes n more (2n for a map), an attribute owes 2n and pays nothing (it
 * belongs to the value after it). The reply ends when nothing is owed. So one
 * counter replaces the stack a parser would keep, and nesting depth costs
 * nothing.
 *
 * The scan is resumable the way Redis's processMultibulkBuffer is: between
 * calls it keeps `pending` and `bulk_left`, and never rescans bytes it has
 * consumed. Header lines are consumed only whole, so the caller keeps the
 * unconsumed tail of a line and appends to it; bulk payloads and the text of
 * simple lines are skipped in any amount (`in_line` remembers being inside
 * one), so a 64 MiB value or a MONITOR line as long never has to sit in one
 * buffer, nor be searched again for its end.
 *
 * What is checked is only what decides where a reply ends: the type byte,
 * the lengths and counts (Redis's string2ll rules: no sign but '-', no
 * leading zeros, no spaces) and the CRLF after each bulk payload. The text of
 * a simple line ('+' '-' ':' ',' '(' '_' '#') is forwarded, not judged: it
 * ends at its first CRLF, as in hiredis (a lone CR or LF is text), whatever
 * comes before. Redis puts more there than the RESP3 spec allows (a Lua
 * big_number is any text with CR and LF made spaces: "(123  123", "(", "(a b";
 * a double is "-nan"), and a newer server may put more still. Every check
 * depends only on bytes already present, so a stream gives the same
 * boundaries and the same error however it is cut.
 */
#include "protocol/resp_frame.h"

#include <limits.h>
#include <string.h>

/* The bytes after a bulk payload. */
#define RESP_CRLF_LEN 2

static const char err_type[] = "unknown reply type byte";
static const char err_bulklen[] = "invalid bulk length";
static const char err_bulkend[] = "bulk payload not followed by CRLF";
static const char err_aggrlen[] = "invalid multibulk length";
static const char err_streamed[] = "streamed RESP3 types are not supported";

void resp_frame_reset(resp_framer *f)
{
    f->pending = 0;
    f->bulk_left = 0;
    f->in_line = 0;
    f->consumed = 0;
    f->type = 0;
    f->error = NULL;
}

enum { NUM_MORE = 0, NUM_OK = 1, NUM_BAD = -1 };

/* Reads a strict decimal integer and its CRLF from s (just after the type
 * byte): optional '-', then "0" or a digit 1-9 followed by digits. Sets *neg,
 * *mag (the magnitude, at most 2^63) and *next (just past the CRLF).
 * NUM_MORE: the line may still become valid once more bytes arrive.
 * NUM_BAD: no continuation can make it valid. */
static inline int scan_number(const char *s, const char *end, int *neg, unsigned long long *mag,
                              const char **next)
{
    const unsigned long long limit = (unsigned long long)LLONG_MAX + 1;
    unsigned long long v;

    *neg = 0;
    if (s == end) return NUM_MORE;
    if (*s == '-') {
        *neg = 1;
        if (++s == end) return NUM_MORE;
    }
    if (*s == '0') {
        if (*neg) return NUM_BAD; /* "-0" */
        v = 0;
        s++;
    } else if (*s >= '1' && *s <= '9') {
        v = (unsigned long long)(*s++ - '0');
        while (s != end && *s >= '0' && *s <= '9') {
            unsigned d = (unsigned)(*s++ - '0');
            if (v > (limit - d) / 10) return NUM_BAD;
            v = v * 10 + d;
        }
    } else {
        return NUM_BAD;
    }
    if (s == end) return NUM_MORE;
    if (*s != '\r') return NUM_BAD;
    if (++s == end) return NUM_MORE;
    if (*s != '\n') return NUM_BAD;
    *mag = v;
    *next = s + 1;
    return NUM_OK;
}

/* Finds the end of a simple line whose text (or the rest of it) starts at s:
 * a pointer just past its first CRLF, or NULL if that has not arrived yet.
 * The text itself is not looked at. */
static inline const char *scan_line(const char *s, const char *end)
{
    while (s != end) {
        const char *cr = memchr(s, '\r', (size_t)(end - s));
        if (cr == NULL || cr + 1 == end) return NULL;
        if (cr[1] == '\n') return cr + 2;
        s = cr + 1;
    }
    return NULL;
}

/* How much of a line's text that has no CRLF yet may be consumed: all of
 * it but a last CR, whose LF may be the next byte. */
static inline const char *line_text_end(const char *s, const char *end)
{
    return s != end && end[-1] == '\r' ? end - 1 : end;
}

resp_frame_status resp_frame_scan(resp_framer *f, const char *buf, size_t len, size_t *used)
{
    const char *p = buf, *end, *next = NULL, *err = NULL;
    long long pending = f->pending, bulk_left = f->bulk_left;
    int in_line = f->in_line;
    resp_frame_status status;
    int fresh = 0;

    if (f->error != NULL) {
        *used = 0;
        return RESP_FRAME_ERROR;
    }
    if (pending == 0 && bulk_left == 0 && !in_line) {
        /* A new reply. f->type keeps the last one's byte until we consume
         * this one's first line. */
        f->consumed = 0;
        fresh = 1;
        pending = 1;
    }
    if (len == 0) { /* buf may be NULL: no pointer arithmetic on it */
        *used = 0;
        return RESP_FRAME_PARTIAL;
    }
    end = buf + len;

    for (;;) {
        if (bulk_left > 0) {
            size_t avail = (size_t)(end - p);
            if (bulk_left > RESP_CRLF_LEN) {
                size_t take = (unsigned long long)(bulk_left - RESP_CRLF_LEN) < avail
                                  ? (size_t)(bulk_left - RESP_CRLF_LEN)
                                  : avail;
                p += take;
                bulk_left -= (long long)take;
            }
            if (bulk_left == 2 && p != end) {
                if (*p != '\r') {
                    err = err_bulkend;
                    goto error;
                }
                p++;
                bulk_left = 1;
            }
            if (bulk_left == 1 && p != end) {
                if (*p != '\n') {
                    err = err_bulkend;
                    goto error;
                }
                p++;
                bulk_left = 0;
            }
            if (bulk_left > 0) goto partial;
            if (pending == 0) goto done;
        }

        if (p == end) goto partial;

        if (in_line) { /* the rest of a simple line's text */
            next = scan_line(p, end);
            if (next == NULL) {
                p = line_text_end(p, end);
                goto partial;
            }
            in_line = 0;
            p = next;
            if (--pending == 0) goto done;
            continue;
        }

        int rc, neg;
        unsigned long long n;
        switch (*p) {
        case '+':
        case '-':
        case ':':
        case ',':
        case '(':
        case '_':
        case '#':
            /* Text up to CRLF: nothing in it changes where the reply ends.
             * What has come of it is consumed, the rest is awaited. */
            next = scan_line(p + 1, end);
            if (next == NULL) {
                in_line = 1;
                p = line_text_end(p + 1, end);
                goto partial;
            }
            break;
        case '$':
        case '!':
        case '=':
            if (p + 1 != end && p[1] == '?') {
                err = err_streamed;
                goto error;
            }
            rc = scan_number(p + 1, end, &neg, &n, &next);
            if (rc == NUM_OK) {
                if (neg && (n != 1 || *p != '$'))
                    rc = NUM_BAD; /* only "$-1", the RESP2 null, is negative */
                else if (!neg && n > (unsigned long long)(LLONG_MAX - RESP_CRLF_LEN))
                    rc = NUM_BAD;
            }
            if (rc != NUM_OK) {
                err = err_bulklen;
                goto incomplete;
            }
            if (!neg) bulk_left = (long long)n + RESP_CRLF_LEN;
            break;
        case '*':
        case '~':
        case '>':
        case '%':
        case '|': {
            char t = *p;
            if (p + 1 != end && p[1] == '?') {
                err = err_streamed;
                goto error;
            }
            rc = scan_number(p + 1, end, &neg, &n, &next);
            if (rc != NUM_OK) {
                err = err_aggrlen;
                goto incomplete;
            }
            if (neg) {
                if (n != 1 || t != '*') { /* only "*-1", the RESP2 null */
                    err = err_aggrlen;
                    goto error;
                }
                break;
            }
            /* This header pays for itself (an attribute pays nothing: the
             * value it annotates is still owed) and owes its elements. */
            long long owed = t == '|' ? pending : pending - 1;
            unsigned long long per = (t == '%' || t == '|') ? 2 : 1;
            if (n > (unsigned long long)(LLONG_MAX - owed) / per) {
                err = err_aggrlen;
                goto error;
            }
            pending = owed + (long long)(n * per);
            p = next;
            if (pending == 0) goto done;
            continue;
        }
        case '?':
        case ';':
        case '.':
        default:
            /* ';' and '.' only occur inside streamed types; '?' never starts
             * a value. */
            err = err_type;
            goto error;
        }

        /* One value paid for (a bulk header pays when its payload is still to
         * come: bulk_left holds the rest of the reply then). */
        p = next;
        if (--pending == 0 && bulk_left == 0) goto done;
        continue;

    incomplete:
        /* A length or count was cut short or is malformed. */
        if (rc == NUM_MORE) goto partial;
        goto error;
    }

done:
    status = RESP_FRAME_DONE;
    goto out;
partial:
    status = RESP_FRAME_PARTIAL;
    goto out;
error:
    f->error = err;
    status = RESP_FRAME_ERROR;
out:
    if (fresh) {
        if (p != buf)
            f->type = buf[0];
        else
            pending = 0; /* nothing of the new reply consumed: still between replies */
    }
    f->pending = pending;
    f->bulk_left = bulk_left;
    f->in_line = in_line;
    *used = (size_t)(p - buf);
    f->consumed += *used;
    return status;
}

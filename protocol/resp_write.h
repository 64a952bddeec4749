/* resp_write.h - the RESP writer: every reply, command and merged reply the
 * proxy composes is written by these functions, as every reply Redis sends
 * goes through addReplyLongLong, addReplyBulkCBuffer, addReplyArrayLen...
 * (networking.c). Nothing outside protocol/ formats a RESP header by hand
 * (scripts/check_resp_writes.py keeps it so).
 *
 * Pure, like the rest of protocol/: no I/O, no allocation, no buffer type.
 * Each function writes into the caller's memory at `out` and returns the
 * number of bytes written; the caller makes room first, with the size the
 * function names (RESP_HEADER_MAX, RESP_BULK_SIZE, RESP_LINE_SIZE,
 * resp_write_command_size). proxy/buffer.h wraps them for a vp_buf
 * (vp_buf_resp_*): reserve, write in place, no copy and no snprintf. */
#ifndef VP_RESP_WRITE_H
#define VP_RESP_WRITE_H

#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include "protocol/resp_request.h"

/* The longest header line: type byte, sign, 19 digits, CRLF (23), rounded. */
#define RESP_HEADER_MAX 24
/* Room for a bulk string of n bytes: header, payload, CRLF. */
#define RESP_BULK_SIZE(n) ((size_t)(n) + RESP_HEADER_MAX + 2)
/* Room for a simple string or error line of n bytes of text. */
#define RESP_LINE_SIZE(n) ((size_t)(n) + 3)

/* The type bytes of the lines resp_write_header writes. */
enum resp_write_type {
    RESP_ARRAY = '*',
    RESP_MAP = '%',  /* RESP3: n key/value pairs */
    RESP_SET = '~',  /* RESP3 */
    RESP_PUSH = '>', /* RESP3: out of band */
    RESP_BULK = '$', /* a bulk string's header alone, for a payload sent apart */
    RESP_INTEGER = ':'
};

/* "<type><n>\r\n": an aggregate's or a bulk string's header, or an integer
 * reply. Inline, digits by hand: snprintf was most of the cost of
 * rewriting a small command (a verb's EVALSHA). */
static inline size_t resp_write_header(char out[RESP_HEADER_MAX], char type, long long n)
{
    unsigned long long u = n < 0 ? 0ULL - (unsigned long long)n : (unsigned long long)n;
    char digits[20];
    int k = 0;
    do {
        digits[k++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    size_t len = 0;
    out[len++] = type;
    if (n < 0) out[len++] = '-';
    while (k)
        out[len++] = digits[--k];
    out[len++] = '\r';
    out[len++] = '\n';
    return len;
}

static inline size_t resp_write_array_len(char out[RESP_HEADER_MAX], long long n)
{
    return resp_write_header(out, RESP_ARRAY, n);
}

static inline size_t resp_write_integer(char out[RESP_HEADER_MAX], long long v)
{
    return resp_write_header(out, RESP_INTEGER, v);
}

/* "$<n>\r\n<p>\r\n" into out (RESP_BULK_SIZE(n) bytes of room). */
static inline size_t resp_write_bulk(char *out, const void *p, size_t n)
{
    size_t len = resp_write_header(out, RESP_BULK, (long long)n);
    memcpy(out + len, p, n);
    memcpy(out + len + n, "\r\n", 2);
    return len + n + 2;
}

/* A bulk string's exact size (RESP_BULK_SIZE is a bound). */
size_t resp_write_bulk_size(size_t n);

/* The null bulk string: "$-1\r\n" in RESP2, "_\r\n" in RESP3 (at most 5 bytes). */
size_t resp_write_null(char *out, int resp3);

/* The null array: "*-1\r\n" in RESP2, "_\r\n" in RESP3 (at most 5 bytes). */
size_t resp_write_null_array(char *out, int resp3);

/* "+<s>\r\n" (RESP_LINE_SIZE(n) bytes of room). The text must hold no CR or
 * LF: simple strings the proxy writes are its own constants. */
size_t resp_write_simple(char *out, const char *s, size_t n);

/* "-<s>\r\n" (RESP_LINE_SIZE(n) bytes of room); a CR or LF in the text
 * becomes a space, as Redis's addReplyError does. */
size_t resp_write_error(char *out, const char *s, size_t n);

/* An error line from a printf format, cut to fit cap bytes with one to
 * spare (cap >= 4); CR and LF become spaces. */
size_t resp_write_errorf(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
size_t resp_write_verrorf(char *out, size_t cap, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* A command (a multibulk request) of argc arguments: the exact size, and
 * the command itself into out (that many bytes of room). */
size_t resp_write_command_size(int argc, const resp_arg *argv);
size_t resp_write_command(char *out, int argc, const resp_arg *argv);

/* Constant RESP text composed at compile time, for commands and replies
 * the proxy sends as they are:
 *   static const char slots_cmd[] =
 *       RESP_LIT_ARRAY(2) RESP_LIT_BULK(7, "CLUSTER") RESP_LIT_BULK(5, "SLOTS");
 * The preprocessor cannot count, so a bulk's length is written beside its
 * text; scripts/check_resp_writes.py fails the build's tests when the two
 * disagree. */
#define RESP_LIT_ARRAY(n) "*" #n "\r\n"
#define RESP_LIT_BULK(n, s) "$" #n "\r\n" s "\r\n"

#endif

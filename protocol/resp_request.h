/* resp_request.h - the incremental RESP request parser.
 *
 * Turns the bytes a client sends into commands, exactly where Redis itself
 * would cut them (networking.c: processMultibulkBuffer, processInlineBuffer),
 * with Redis's limits and error texts. Pure: no I/O, no event loop, so it can
 * be fed one byte at a time in tests and fuzzed on its own.
 *
 * Zero copy: for multibulk commands every argument points into the caller's
 * buffer. Inline commands are unescaped (quotes, \x41 ...) into a scratch
 * buffer the parser owns, as Redis's sdssplitargs does.
 *
 * Calling convention: `buf` always points at the first byte of the command
 * being parsed (the first unconsumed byte). After RESP_REQ_INCOMPLETE call
 * again with the same logical start and more bytes (the bytes may have moved
 * in memory: the parser keeps offsets, never pointers, between calls). After
 * RESP_REQ_COMMAND or RESP_REQ_EMPTY the caller skips *used bytes and calls
 * again for the next command. After RESP_REQ_ERROR the connection is done: the
 * caller replies "-ERR <resp_request_error()>" and closes, as Redis does.
 *
 * Ownership: the parser owns argv and the inline scratch buffer; both stay
 * valid until the next call of resp_request_parse or resp_request_free.
 * The argument bytes of a multibulk command belong to the caller's buffer. */
#ifndef VP_RESP_REQUEST_H
#define VP_RESP_REQUEST_H

#include <stddef.h>

/* Redis's PROTO_INLINE_MAX_SIZE: an inline request, a multibulk count line or
 * a bulk length line longer than this without its newline is an error. */
#define RESP_INLINE_MAX_SIZE (1024 * 64)
/* Redis's defaults: proto-max-bulk-len 512mb; multibulk count up to INT_MAX. */
#define RESP_DEFAULT_MAX_BULK_LEN (512LL * 1024 * 1024)
#define RESP_DEFAULT_MAX_MULTIBULK_LEN 2147483647LL

/* Redis's limits for a client that has not authenticated while the server
 * requires it (processMultibulkBuffer, authRequired): a multibulk request of
 * more arguments, or a bulk longer than this, is a protocol error. Inline
 * requests have no such limit. */
#define RESP_UNAUTH_MAX_MULTIBULK_LEN 10
#define RESP_UNAUTH_MAX_BULK_LEN 16384

typedef struct resp_arg {
    const char *ptr;
    size_t len;
} resp_arg;

typedef struct resp_request_limits {
    long long max_bulk_len;      /* proto-max-bulk-len */
    long long max_multibulk_len; /* proto-max-multibulk-len */
} resp_request_limits;

typedef enum resp_req_status {
    RESP_REQ_INCOMPLETE = 0, /* need more bytes; *used is 0 */
    RESP_REQ_COMMAND,        /* argc/argv hold one command of *used bytes */
    RESP_REQ_EMPTY,          /* empty inline line, "*0" or "*-1": no command, no reply; skip *used */
    RESP_REQ_ERROR           /* protocol error, see resp_request_error() */
} resp_req_status;

typedef struct resp_request_parser {
    resp_request_limits limits;
    /* Apply Redis's limits before AUTH (RESP_UNAUTH_*). The caller sets it
     * before each call; like Redis, it counts when a header line is read. */
    int unauthenticated;

    /* Resumable state; every offset is relative to the command's first byte. */
    char kind;               /* 0 = not started, '*' = multibulk, 'i' = inline */
    size_t pos;              /* bytes of the command already scanned */
    long long multibulk_len; /* arguments still to read */
    long long bulk_len;      /* length of the bulk being read, -1 while reading its header */
    size_t line_start;       /* multibulk: where the "$<len>" line being scanned starts */

    /* Arguments: offsets while incomplete, then pointers in argv. */
    size_t *arg_off;
    size_t *arg_len;
    resp_arg *argv;
    int argc;
    int argv_cap;

    char *scratch; /* unescaped inline arguments */
    size_t scratch_cap;

    const char *error; /* static text, without the "ERR " prefix */
    char error_buf[64];
} resp_request_parser;

/* limits may be NULL: Redis's defaults. */
void resp_request_init(resp_request_parser *p, const resp_request_limits *limits);
void resp_request_free(resp_request_parser *p);
/* Forget any partly parsed command (the connection's input was discarded). */
void resp_request_reset(resp_request_parser *p);
resp_req_status resp_request_parse(resp_request_parser *p, const char *buf, size_t len, size_t *used);
/* Streaming a large request. While a multibulk command is incomplete,
 * resp_request_partial_args() gives the arguments complete so far (pointers
 * into buf, the command's first byte) and resp_request_release() hands back
 * the leading bytes the parser will never look at again (complete arguments,
 * the current bulk header, and whatever of the current bulk payload is in
 * buf), forgetting them: the caller forwards those n bytes, and from then on
 * passes buf + n as the command's start. Once anything was released, the
 * command's argv is incomplete; RESP_REQ_COMMAND then counts only the bytes
 * after the last release. This is how a 64 MiB SET goes through the proxy in
 * pieces instead of being held whole. */
int resp_request_partial_args(resp_request_parser *p, const char *buf, const resp_arg **argv);
size_t resp_request_release(resp_request_parser *p, size_t len);
/* "Protocol error: invalid bulk length" etc.: the text Redis sends after "-ERR ".
 * NULL unless the last call returned RESP_REQ_ERROR. */
const char *resp_request_error(const resp_request_parser *p);

#endif

/* http_admin_request.h - the admin endpoint's request parsing and response
 * framing with no socket and no server: bytes in, a verdict out; a status,
 * headers and a body in, the response's bytes out. http_admin.c runs it on
 * each connection, and tests/fuzz/fuzz_admin_http.c runs the same code on
 * arbitrary bytes.
 *
 * HTTP is parsed by Debian's libhttp-parser. The request line and headers
 * (CRLFs included) may take ADMIN_MAX_HEAD bytes: a head not complete by
 * then is refused (431), and the parser is never given more, so the verdict
 * depends on the bytes alone, not on how the reads cut them. */
#ifndef VP_HTTP_ADMIN_REQUEST_H
#define VP_HTTP_ADMIN_REQUEST_H

#include <http_parser.h>
#include <stddef.h>

#include "proxy/buffer.h"

#define ADMIN_MAX_HEAD 8192
#define ADMIN_MAX_URL 1024

/* What a connection's bytes ask for. */
typedef enum admin_verdict {
    ADMIN_MORE = 0,     /* the head is not complete yet: read on */
    ADMIN_METRICS,      /* GET/HEAD /metrics: the server answers */
    ADMIN_HEALTHZ,      /* GET/HEAD /healthz */
    ADMIN_READYZ,       /* GET/HEAD /readyz: the server answers */
    ADMIN_NOT_FOUND,    /* 404 */
    ADMIN_BAD_METHOD,   /* 405 with Allow */
    ADMIN_HAS_BODY,     /* 400: a Content-Length or chunked body */
    ADMIN_BAD_TARGET,   /* 400: a request target that is no URL path */
    ADMIN_NOT_HTTP,     /* 400: the parser's error */
    ADMIN_URI_TOO_LONG, /* 414 */
    ADMIN_HEAD_TOO_BIG, /* 431 */
} admin_verdict;

/* One request being read. Owned by its connection; no allocation. */
typedef struct admin_req {
    http_parser parser;
    char url[ADMIN_MAX_URL];
    size_t url_len;
    size_t fed; /* bytes given to the parser, at most ADMIN_MAX_HEAD */
    int url_too_long;
    int head_only; /* a HEAD request: the answer has no body */
    admin_verdict verdict;
    enum http_errno error; /* ADMIN_NOT_HTTP's reason */
} admin_req;

/* A canned answer (every verdict but ADMIN_METRICS and ADMIN_READYZ). */
typedef struct admin_answer {
    int code;
    const char *extra_headers; /* "" or whole header lines */
    char text[128];            /* the body */
} admin_answer;

void admin_req_init(admin_req *r);
/* Give the connection's next bytes. Returns the verdict: ADMIN_MORE until
 * the head is complete or refused; once decided, later bytes are ignored
 * and the same verdict returned. */
admin_verdict admin_req_feed(admin_req *r, const char *data, size_t len);
/* The answer for a verdict that needs nothing of the server's state; 0, or
 * -1 for ADMIN_MORE, ADMIN_METRICS and ADMIN_READYZ. */
int admin_req_canned(const admin_req *r, admin_answer *a);
/* The reason phrase of a status code the endpoint sends. */
const char *admin_reason(int code);
/* The whole response into out (emptied first): status line, Content-Type,
 * Content-Length (blen, also for HEAD), Connection: close, extra_headers,
 * then the body unless head_only. */
void admin_resp_format(vp_buf *out, int code, const char *ctype, const char *extra_headers, const char *body,
                       size_t blen, int head_only);

#define ADMIN_TEXT_TYPE "text/plain; charset=utf-8"
#define ADMIN_METRICS_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif

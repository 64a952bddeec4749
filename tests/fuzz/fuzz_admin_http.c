/* fuzz_admin_http.c - libFuzzer target for the admin endpoint's request
 * parsing and response framing (proxy/ops/http_admin_request.c): the code
 * every admin connection runs, without its socket.
 *
 * Input: one control byte, then the bytes a client sends. The control
 * byte's low two bits stretch the stream (repeated) to 8191, 8192 or 8193
 * bytes, so the 8 KiB head limit is reached under -max_len=4096; the rest
 * seeds how the stream is cut.
 *
 * The stream is fed three ways: whole, one byte per call, and in
 * pseudo-random chunks each in a fresh malloc'd copy of exactly its bytes
 * (a pointer kept across calls is a use-after-free ASan reports). The three
 * must agree on the verdict, the request target, HEAD or not and the parser
 * error: what a request asks cannot depend on how the reads cut it (one
 * exception, target_refused_either_way: 414 or 400 for a long target with
 * a bad byte in it). Then:
 *   - no verdict (read on) only while fewer than 8192 bytes came, and
 *     never after 8192;
 *   - a request answered by its path had its whole head in the first 8192
 *     bytes (a blank line ends there), used GET or HEAD, and its target
 *     names the path;
 *   - the answer (canned, or the input itself as a /metrics body) is
 *     framed into a response that http-parser reads back as one complete
 *     HTTP/1.1 response with the same status, Content-Length equal to the
 *     body, Connection: close, the body byte for byte (none for HEAD) and
 *     nothing after it.
 * Built by CMake with VP_FUZZ=ON (this file, http_admin_request.c,
 * buffer.c, Debian's libhttp-parser, which is not instrumented: coverage
 * guides through our side of it only). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/buffer.h"
#include "proxy/ops/http_admin_request.h"

#define CHECK(cond)                                                                                          \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                         \
            abort();                                                                                         \
        }                                                                                                    \
    } while (0)

typedef enum feed_way { FEED_WHOLE, FEED_BYTES, FEED_CHUNKS } feed_way;

static uint32_t next_rand(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* Feed the stream one way until a verdict or its end. */
static admin_verdict feed(admin_req *r, const char *d, size_t n, feed_way way, uint32_t seed)
{
    admin_req_init(r);
    admin_verdict v = ADMIN_MORE;
    if (way == FEED_WHOLE) return n ? admin_req_feed(r, d, n) : ADMIN_MORE;
    uint32_t s = seed | 1;
    for (size_t off = 0; off < n && v == ADMIN_MORE;) {
        size_t k = way == FEED_BYTES ? 1 : 1 + next_rand(&s) % 97;
        if (k > n - off) k = n - off;
        char *copy = malloc(k);
        CHECK(copy != NULL);
        memcpy(copy, d + off, k);
        v = admin_req_feed(r, copy, k);
        free(copy);
        off += k;
    }
    /* Decided stays decided, whatever else comes. */
    if (v != ADMIN_MORE) CHECK(admin_req_feed(r, "GET / HTTP/1.1\r\n\r\n", 18) == v);
    return v;
}

/* A target too long and a byte http-parser refuses in it: which is seen
 * first depends on the reads (http-parser hands the target over when a
 * read ends, or the target does), so it is 414 or 400. Both refuse it. */
static int target_refused_either_way(const admin_req *a, const admin_req *b)
{
    return (a->verdict == ADMIN_URI_TOO_LONG && b->verdict == ADMIN_NOT_HTTP &&
            b->error == HPE_INVALID_URL) ||
           (b->verdict == ADMIN_URI_TOO_LONG && a->verdict == ADMIN_NOT_HTTP && a->error == HPE_INVALID_URL);
}

static void check_same(const admin_req *a, const admin_req *b, size_t n)
{
    if (target_refused_either_way(a, b)) {
        CHECK(n > ADMIN_MAX_URL);
        CHECK(a->url_len == 0 && b->url_len == 0);
        return;
    }
    CHECK(a->verdict == b->verdict);
    CHECK(a->head_only == b->head_only);
    CHECK(a->url_len == b->url_len && memcmp(a->url, b->url, a->url_len) == 0);
    if (a->verdict == ADMIN_NOT_HTTP) CHECK(a->error == b->error);
}

static int routed(admin_verdict v)
{
    return v == ADMIN_METRICS || v == ADMIN_HEALTHZ || v == ADMIN_READYZ || v == ADMIN_NOT_FOUND ||
           v == ADMIN_BAD_METHOD || v == ADMIN_HAS_BODY || v == ADMIN_BAD_TARGET;
}

/* The head ended within the first ADMIN_MAX_HEAD bytes: they hold the
 * request line's end and the blank line's, at least two CR or LF. (No
 * closer: Debian's http-parser is built without HTTP_PARSER_STRICT and
 * ends a head on "\n\r" and any byte, or on "\r\r\n" after a header;
 * the fuzzer found both. The endpoint reads one request and closes, so
 * such leniency smuggles nothing.) */
static int head_ends_within_limit(const char *d, size_t n)
{
    size_t lim = n < ADMIN_MAX_HEAD ? n : ADMIN_MAX_HEAD, ends = 0;
    for (size_t i = 0; i < lim; i++)
        ends += d[i] == '\r' || d[i] == '\n';
    return ends >= 2;
}

static void check_verdict(const admin_req *r, const char *d, size_t n)
{
    admin_verdict v = r->verdict;
    CHECK(r->url_len < ADMIN_MAX_URL);
    if (n >= ADMIN_MAX_HEAD) CHECK(v != ADMIN_MORE);
    if (v == ADMIN_HEAD_TOO_BIG) CHECK(n >= ADMIN_MAX_HEAD);
    if (routed(v)) CHECK(head_ends_within_limit(d, n));
    if (v == ADMIN_METRICS || v == ADMIN_HEALTHZ || v == ADMIN_READYZ || v == ADMIN_NOT_FOUND)
        CHECK(r->parser.method == HTTP_GET || r->parser.method == HTTP_HEAD);
    if (r->head_only) CHECK(r->parser.method == HTTP_HEAD);
    const char *path = v == ADMIN_METRICS   ? "/metrics"
                       : v == ADMIN_HEALTHZ ? "/healthz"
                       : v == ADMIN_READYZ  ? "/readyz"
                                            : NULL;
    if (path) CHECK(memmem(r->url, r->url_len, path, strlen(path)) != NULL);
}

/* What http-parser reads back from a response. */
typedef struct readback {
    int headers_done, complete, head_only;
    vp_buf body;
} readback;

static int rb_on_headers_complete(http_parser *p)
{
    readback *rb = p->data;
    rb->headers_done = 1;
    return rb->head_only; /* 1: a response to HEAD has no body */
}

static int rb_on_body(http_parser *p, const char *at, size_t len)
{
    vp_buf_append(&((readback *)p->data)->body, at, len);
    return 0;
}

static int rb_on_message_complete(http_parser *p)
{
    ((readback *)p->data)->complete = 1;
    http_parser_pause(p, 1);
    return 0;
}

/* Frame the answer and read it back. */
static void check_response(int code, const char *extra, const char *body, size_t blen, int head_only)
{
    vp_buf out = {0};
    admin_resp_format(&out, code, ADMIN_TEXT_TYPE, extra, body, blen, head_only);
    http_parser p;
    http_parser_settings s;
    http_parser_settings_init(&s);
    s.on_headers_complete = rb_on_headers_complete;
    s.on_body = rb_on_body;
    s.on_message_complete = rb_on_message_complete;
    readback rb = {.head_only = head_only};
    http_parser_init(&p, HTTP_RESPONSE);
    p.data = &rb;
    size_t used = http_parser_execute(&p, &s, out.data, out.len);
    CHECK(HTTP_PARSER_ERRNO(&p) == HPE_PAUSED);
    CHECK(rb.complete && used == out.len); /* one response, nothing after it */
    CHECK(p.status_code == code && p.http_major == 1 && p.http_minor == 1);
    CHECK(p.flags & F_CONNECTION_CLOSE);
    CHECK(memmem(out.data, out.len, "\r\nContent-Length: ", 18) != NULL);
    if (!head_only) {
        CHECK(p.content_length == 0); /* all of it read */
        CHECK(rb.body.len == blen && (blen == 0 || memcmp(rb.body.data, body, blen) == 0));
    } else {
        CHECK(rb.body.len == 0);
    }
    vp_buf_free(&rb.body);
    vp_buf_free(&out);
}

static void check_answer(const admin_req *r, const char *d, size_t n)
{
    admin_answer a;
    int canned = admin_req_canned(r, &a);
    if (r->verdict == ADMIN_MORE || r->verdict == ADMIN_METRICS || r->verdict == ADMIN_READYZ) {
        CHECK(canned == -1);
        if (r->verdict != ADMIN_MORE) check_response(200, "", d, n, r->head_only); /* any bytes as a body */
        return;
    }
    CHECK(canned == 0);
    CHECK(strchr(a.text, '\n') == a.text + strlen(a.text) - 1); /* one line */
    if (r->verdict == ADMIN_NOT_HTTP) CHECK(strstr(a.text, http_errno_name(r->error)) != NULL);
    check_response(a.code, a.extra_headers, a.text, strlen(a.text), r->head_only);
}

/* The stream: the input, or the input repeated to 8191..8193 bytes. */
static char *make_stream(const uint8_t *data, size_t size, size_t *n)
{
    int stretch = data[0] & 3;
    const char *in = (const char *)data + 1;
    size_t inlen = size - 1;
    *n = stretch && inlen ? ADMIN_MAX_HEAD - 2 + (size_t)stretch : inlen;
    char *s = malloc(*n ? *n : 1);
    CHECK(s != NULL);
    for (size_t i = 0; i < *n; i++)
        s[i] = in[i % inlen];
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    size_t n;
    char *d = make_stream(data, size, &n);
    uint32_t seed = (uint32_t)data[0] << 24 ^ (uint32_t)size * 2654435761u;
    static admin_req whole, bytes, chunks;
    feed(&whole, d, n, FEED_WHOLE, seed);
    feed(&bytes, d, n, FEED_BYTES, seed);
    feed(&chunks, d, n, FEED_CHUNKS, seed);
    check_same(&whole, &bytes, n);
    check_same(&whole, &chunks, n);
    check_verdict(&whole, d, n);
    check_answer(&whole, d, n);
    free(d);
    return 0;
}

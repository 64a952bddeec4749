/* http_admin_request.c - the admin endpoint's request parsing and response
 * framing, pure (http_admin_request.h). */
#include "proxy/ops/http_admin_request.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static int admin_path_is(const char *p, size_t n, const char *lit)
{
    return n == strlen(lit) && memcmp(p, lit, n) == 0;
}

/* A complete head: what does it ask for? */
static admin_verdict admin_req_route(admin_req *r)
{
    const http_parser *hp = &r->parser;
    if (hp->method != HTTP_GET && hp->method != HTTP_HEAD) return ADMIN_BAD_METHOD;
    r->head_only = hp->method == HTTP_HEAD;
    if (hp->content_length > 0 && hp->content_length != ULLONG_MAX) return ADMIN_HAS_BODY;
    if (hp->flags & F_CHUNKED) return ADMIN_HAS_BODY;
    struct http_parser_url u;
    http_parser_url_init(&u);
    if (http_parser_parse_url(r->url, r->url_len, 0, &u) != 0 || !(u.field_set & (1 << UF_PATH)))
        return ADMIN_BAD_TARGET;
    const char *path = r->url + u.field_data[UF_PATH].off;
    size_t plen = u.field_data[UF_PATH].len;
    if (admin_path_is(path, plen, "/metrics")) return ADMIN_METRICS;
    if (admin_path_is(path, plen, "/healthz")) return ADMIN_HEALTHZ;
    if (admin_path_is(path, plen, "/readyz")) return ADMIN_READYZ;
    return ADMIN_NOT_FOUND;
}

static int admin_req_on_url(http_parser *hp, const char *at, size_t len)
{
    admin_req *r = hp->data;
    if (r->url_len + len >= sizeof(r->url)) {
        r->url_too_long = 1;
        return 1; /* stops the parser */
    }
    memcpy(r->url + r->url_len, at, len);
    r->url_len += len;
    return 0;
}

static int admin_req_on_headers_complete(http_parser *hp)
{
    admin_req *r = hp->data;
    r->verdict = admin_req_route(r);
    /* One request per connection: whatever follows the head (a body, a
     * pipelined request) is never parsed. */
    http_parser_pause(hp, 1);
    return 0;
}

static const http_parser_settings admin_req_settings = {
    .on_url = admin_req_on_url,
    .on_headers_complete = admin_req_on_headers_complete,
};

void admin_req_init(admin_req *r)
{
    memset(r, 0, sizeof(*r));
    http_parser_init(&r->parser, HTTP_REQUEST);
    r->parser.data = r;
}

/* A head refused before it was complete. The target read so far is
 * dropped: how much of it the parser had handed over depends on where the
 * reads cut it, and nothing is answered by it. */
static admin_verdict admin_req_refuse(admin_req *r, admin_verdict v)
{
    r->url_len = 0;
    return r->verdict = v;
}

admin_verdict admin_req_feed(admin_req *r, const char *data, size_t len)
{
    if (r->verdict != ADMIN_MORE) return r->verdict;
    size_t n = len < ADMIN_MAX_HEAD - r->fed ? len : ADMIN_MAX_HEAD - r->fed;
    if (n == 0) return r->verdict; /* a length of 0 would tell the parser EOF */
    r->fed += n;
    size_t used = http_parser_execute(&r->parser, &admin_req_settings, data, n);
    if (r->verdict != ADMIN_MORE) return r->verdict;
    if (r->url_too_long) return admin_req_refuse(r, ADMIN_URI_TOO_LONG);
    enum http_errno e = HTTP_PARSER_ERRNO(&r->parser);
    if (e != HPE_OK || used != n) {
        r->error = e;
        return admin_req_refuse(r, ADMIN_NOT_HTTP);
    }
    if (r->fed == ADMIN_MAX_HEAD) return admin_req_refuse(r, ADMIN_HEAD_TOO_BIG);
    return ADMIN_MORE;
}

static void admin_answer_set(admin_answer *a, int code, const char *text)
{
    a->code = code;
    snprintf(a->text, sizeof(a->text), "%s", text);
}

int admin_req_canned(const admin_req *r, admin_answer *a)
{
    a->extra_headers = "";
    switch (r->verdict) {
    case ADMIN_HEALTHZ:
        admin_answer_set(a, 200, "ok\n");
        return 0;
    case ADMIN_NOT_FOUND:
        admin_answer_set(a, 404, "not found: /metrics, /healthz and /readyz are served\n");
        return 0;
    case ADMIN_BAD_METHOD:
        admin_answer_set(a, 405, "method not allowed\n");
        a->extra_headers = "Allow: GET, HEAD\r\n";
        return 0;
    case ADMIN_HAS_BODY:
        admin_answer_set(a, 400, "no request body is taken\n");
        return 0;
    case ADMIN_BAD_TARGET:
        admin_answer_set(a, 400, "bad request target\n");
        return 0;
    case ADMIN_NOT_HTTP:
        a->code = 400;
        snprintf(a->text, sizeof(a->text), "bad request: %s\n", http_errno_name(r->error));
        return 0;
    case ADMIN_URI_TOO_LONG:
        admin_answer_set(a, 414, "request target too long\n");
        return 0;
    case ADMIN_HEAD_TOO_BIG:
        admin_answer_set(a, 431, "request head over 8 KiB\n");
        return 0;
    case ADMIN_MORE:
    case ADMIN_METRICS:
    case ADMIN_READYZ:
        break;
    }
    return -1;
}

const char *admin_reason(int code)
{
    switch (code) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 414:
        return "URI Too Long";
    case 431:
        return "Request Header Fields Too Large";
    case 503:
        return "Service Unavailable";
    default:
        return "Error";
    }
}

void admin_resp_format(vp_buf *out, int code, const char *ctype, const char *extra_headers, const char *body,
                       size_t blen, int head_only)
{
    out->len = 0;
    vp_buf_appendf(out, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n",
                   code, admin_reason(code), ctype, blen);
    vp_buf_append(out, extra_headers, strlen(extra_headers));
    vp_buf_append(out, "\r\n", 2);
    if (!head_only) vp_buf_append(out, body, blen);
}

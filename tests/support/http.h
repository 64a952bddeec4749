/* http.h - a minimal HTTP/1.1 client for the proxy's admin endpoint: one
 * request per connection (the endpoint closes after each response), read
 * until the close. Header only; uses client.h's sockets. */
#ifndef VT_HTTP_H
#define VT_HTTP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/client.h"

typedef struct vt_http_resp {
    int status;       /* 0: no response (closed, timed out) */
    vt_buf raw;       /* the whole response */
    const char *body; /* into raw */
    size_t body_len;
} vt_http_resp;

/* Send `request` as is; read until the server closes (timeout_ms). */
static inline vt_http_resp vt_http_raw(int port, const char *request, size_t len, int timeout_ms)
{
    vt_http_resp r = {0};
    int fd = vt_sock_tcp(port);
    if (fd < 0) return r;
    vt_sock_send(fd, request, len);
    vt_sock_read_eof(fd, &r.raw, timeout_ms);
    close(fd);
    vt_buf_append(&r.raw, "", 1); /* NUL-terminated (not counted below) */
    r.raw.len--;
    if (r.raw.len > 12 && !strncmp(r.raw.data, "HTTP/1.1 ", 9)) r.status = atoi(r.raw.data + 9);
    char *sep = r.raw.data ? strstr(r.raw.data, "\r\n\r\n") : NULL;
    if (sep) {
        r.body = sep + 4;
        r.body_len = r.raw.len - (size_t)(r.body - r.raw.data);
    }
    return r;
}

static inline vt_http_resp vt_http_get(int port, const char *path)
{
    char req[512];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: vt\r\n\r\n", path);
    return vt_http_raw(port, req, (size_t)n, 10000);
}

static inline void vt_http_free(vt_http_resp *r)
{
    vt_buf_free(&r->raw);
}

#endif

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

/* Connect and send `request` as is: the socket, or -1. */
static inline int vt_http_send(int port, const char *request, size_t len)
{
    int fd = vt_sock_tcp(port);
    if (fd >= 0) vt_sock_send(fd, request, len);
    return fd;
}

/* Read the response on `fd` (from vt_http_send) until the server closes
 * (timeout_ms); closes fd. */
static inline vt_http_resp vt_http_read(int fd, int timeout_ms)
{
    vt_http_resp r = {0};
    if (fd < 0) return r;
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

/* Send `request` as is; read until the server closes (timeout_ms). */
static inline vt_http_resp vt_http_raw(int port, const char *request, size_t len, int timeout_ms)
{
    return vt_http_read(vt_http_send(port, request, len), timeout_ms);
}

/* A GET request head for `path` into req: its length. */
static inline size_t vt_http_get_request(char *req, size_t cap, const char *path)
{
    int n = snprintf(req, cap, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: vt\r\n\r\n", path);
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

static inline vt_http_resp vt_http_get(int port, const char *path)
{
    char req[512];
    return vt_http_raw(port, req, vt_http_get_request(req, sizeof(req), path), 10000);
}

static inline void vt_http_free(vt_http_resp *r)
{
    vt_buf_free(&r->raw);
}

#endif

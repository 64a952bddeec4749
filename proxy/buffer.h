/* buffer.h - a growable byte buffer (vp_buf). The owner of the struct owns
 * `data`; nothing else may keep a pointer into it across a call that can
 * grow or compact it (vp_buf_reserve, vp_buf_append, vp_buf_consume). */
#ifndef VP_BUFFER_H
#define VP_BUFFER_H

#include <stddef.h>
#include <string.h>

#include "protocol/resp_write.h"

typedef struct vp_buf {
    char *data;
    size_t len;
    size_t cap;
} vp_buf;

/* Make room for at least `extra` more bytes. Aborts on out of memory, as
 * Redis does: a proxy that half-handles OOM is worse than one that restarts. */
void vp_buf_reserve(vp_buf *b, size_t extra);
void vp_buf_append(vp_buf *b, const void *p, size_t n);
/* Append printf-formatted text, cut at 511 bytes (report lines: INFO, Prometheus). */
void vp_buf_appendf(vp_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Drop the first n bytes, moving the rest to the front. */
void vp_buf_consume(vp_buf *b, size_t n);
/* Give memory back after a large value went through, keeping `keep` bytes
 * of capacity so the common case never reallocates. Only when empty. */
void vp_buf_shrink(vp_buf *b, size_t keep);
void vp_buf_free(vp_buf *b);

/* ---- RESP into a vp_buf: the writer of protocol/resp_write.h, in place ---- */

/* Each reserves the room its writer names and writes at the end: no copy,
 * and no allocation once the buffer has grown to its working size. */
static inline void vp_buf_resp_header(vp_buf *b, char type, long long n)
{
    vp_buf_reserve(b, RESP_HEADER_MAX);
    b->len += resp_write_header(b->data + b->len, type, n);
}

static inline void vp_buf_resp_array(vp_buf *b, long long n)
{
    vp_buf_resp_header(b, RESP_ARRAY, n);
}

static inline void vp_buf_resp_integer(vp_buf *b, long long v)
{
    vp_buf_resp_header(b, RESP_INTEGER, v);
}

static inline void vp_buf_resp_bulk(vp_buf *b, const void *p, size_t n)
{
    vp_buf_reserve(b, RESP_BULK_SIZE(n));
    b->len += resp_write_bulk(b->data + b->len, p, n);
}

static inline void vp_buf_resp_bulk_str(vp_buf *b, const char *s)
{
    vp_buf_resp_bulk(b, s, strlen(s));
}

static inline void vp_buf_resp_simple(vp_buf *b, const char *s, size_t n)
{
    vp_buf_reserve(b, RESP_LINE_SIZE(n));
    b->len += resp_write_simple(b->data + b->len, s, n);
}

static inline void vp_buf_resp_error(vp_buf *b, const char *s, size_t n)
{
    vp_buf_reserve(b, RESP_LINE_SIZE(n));
    b->len += resp_write_error(b->data + b->len, s, n);
}

static inline void vp_buf_resp_command(vp_buf *b, int argc, const resp_arg *argv)
{
    vp_buf_reserve(b, resp_write_command_size(argc, argv));
    b->len += resp_write_command(b->data + b->len, argc, argv);
}

void *vp_malloc(size_t n);
void *vp_realloc(void *p, size_t n);

#endif

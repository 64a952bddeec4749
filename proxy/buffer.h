/* buffer.h - a growable byte buffer (vp_buf). The owner of the struct owns
 * `data`; nothing else may keep a pointer into it across a call that can
 * grow or compact it (vp_buf_reserve, vp_buf_append, vp_buf_consume). */
#ifndef VP_BUFFER_H
#define VP_BUFFER_H

#include <stddef.h>

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

void *vp_malloc(size_t n);
void *vp_realloc(void *p, size_t n);

#endif

#include "proxy/buffer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void oom(size_t n)
{
    fprintf(stderr, "verbproxy: out of memory allocating %zu bytes\n", n);
    abort();
}

void *vp_malloc(size_t n)
{
    void *p = malloc(n);
    if (!p && n) oom(n);
    return p;
}

void *vp_realloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q && n) oom(n);
    return q;
}

void vp_buf_reserve(vp_buf *b, size_t extra)
{
    if (b->cap - b->len >= extra) return;
    size_t want = b->len + extra;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < want)
        cap *= 2;
    b->data = vp_realloc(b->data, cap);
    b->cap = cap;
}

void vp_buf_append(vp_buf *b, const void *p, size_t n)
{
    if (!n) return;
    vp_buf_reserve(b, n);
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void vp_buf_consume(vp_buf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
}

void vp_buf_shrink(vp_buf *b, size_t keep)
{
    if (b->len != 0 || b->cap <= keep) return;
    free(b->data);
    b->data = NULL;
    b->cap = 0;
}

void vp_buf_free(vp_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void vp_buf_appendf(vp_buf *b, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof(line)) n = (int)sizeof(line) - 1;
    vp_buf_append(b, line, (size_t)n);
}

#include "proxy/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Under AddressSanitizer a free block is poisoned, so whoever still uses a
 * block after putting it back is caught as after a free(). */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POOL_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define POOL_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POOL_POISON(p, n) ((void)(p), (void)(n))
#define POOL_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* Every pool used so far, for VERBPROXY STATS and vp_pool_drain. */
static vp_pool *pools;

/* Pooled buffers: blocks of a read's worth, and bigger ones for a buffer
 * that outgrew that (a 20-60 kB value), so medium values do not cost an
 * allocation per request either. */
static vp_pool buf_pool = VP_POOL_INIT("bufs", VP_POOL_BUF_SIZE);
static vp_pool big_buf_pool = VP_POOL_INIT("big_bufs", VP_POOL_BIG_BUF_SIZE);
static unsigned long long bufs_held;

static void pool_register(vp_pool *p)
{
    p->registered = 1;
    p->next_pool = pools;
    pools = p;
}

void *vp_pool_get(vp_pool *p)
{
    if (!p->registered) pool_register(p);
    p->in_use++;
    void *block = p->free_list;
    if (!block) return vp_malloc(p->size);
    POOL_UNPOISON(block, p->size);
    memcpy(&p->free_list, block, sizeof(void *));
    p->nfree--;
    return block;
}

void vp_pool_put(vp_pool *p, void *block)
{
    p->in_use--;
    if ((p->nfree + 1) * p->size > VP_POOL_MAX_FREE_BYTES) {
        free(block); /* the free list is full */
        return;
    }
    memcpy(block, &p->free_list, sizeof(void *));
    POOL_POISON(block, p->size);
    p->free_list = block;
    p->nfree++;
}

/* The pool a buffer's block came from; NULL for nothing or its own
 * allocation (which is never a block's size: see vp_pool_buf_reserve). */
static vp_pool *buf_pool_of(size_t cap)
{
    if (cap == VP_POOL_BUF_SIZE) return &buf_pool;
    if (cap == VP_POOL_BIG_BUF_SIZE) return &big_buf_pool;
    return NULL;
}

void vp_pool_buf_reserve(vp_buf *b, size_t extra)
{
    if (b->cap - b->len >= extra) return;
    if (b->cap == 0) bufs_held++;
    size_t want = b->len + extra;
    vp_pool *from = buf_pool_of(b->cap);
    vp_pool *to = want <= VP_POOL_BUF_SIZE ? &buf_pool : want <= VP_POOL_BIG_BUF_SIZE ? &big_buf_pool : NULL;
    if (to) {
        /* Into a (bigger) block; the smaller one, if any, goes back. An own
         * allocation is never smaller than a big block, so it is not here. */
        char *data = vp_pool_get(to);
        if (b->len) memcpy(data, b->data, b->len);
        if (from) vp_pool_put(from, b->data);
        b->data = data;
        b->cap = to->size;
        return;
    }
    if (from) {
        /* Outgrew the big block: its own allocation, at least twice that
         * size, so never a block's size. */
        vp_buf grown = {0};
        vp_buf_reserve(&grown, want > 2 * VP_POOL_BIG_BUF_SIZE ? want : 2 * VP_POOL_BIG_BUF_SIZE);
        memcpy(grown.data, b->data, b->len);
        grown.len = b->len;
        vp_pool_put(from, b->data);
        *b = grown;
        return;
    }
    /* Its own allocation already, or more than a big block from nothing
     * (doubling from 4 KiB past VP_POOL_BIG_BUF_SIZE): either way over
     * twice a big block, never a block's size. */
    vp_buf_reserve(b, extra);
}

void vp_pool_buf_append(vp_buf *b, const void *p, size_t n)
{
    if (!n) return;
    vp_pool_buf_reserve(b, n);
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void vp_pool_buf_release(vp_buf *b)
{
    if (b->cap == 0) return;
    bufs_held--;
    vp_pool *from = buf_pool_of(b->cap);
    if (from)
        vp_pool_put(from, b->data);
    else
        free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void vp_pool_buf_release_idle(vp_buf *b)
{
    if (b->len == 0) vp_pool_buf_release(b);
}

unsigned long long vp_pool_bufs_held(void)
{
    return bufs_held;
}
size_t vp_pool_format(char *buf, size_t cap, const char *sep, const char *end)
{
    size_t n = (size_t)snprintf(buf, cap, "buffers_held%s%llu%s", sep, bufs_held, end);
    for (vp_pool *p = pools; p && n < cap; p = p->next_pool) {
        n += (size_t)snprintf(buf + n, cap - n, "pool_%s_in_use%s%llu%spool_%s_free%s%zu%s", p->name, sep,
                              p->in_use, end, p->name, sep, p->nfree, end);
    }
    return n < cap ? n : cap - 1;
}

void vp_pool_drain(void)
{
    for (vp_pool *p = pools; p; p = p->next_pool) {
        while (p->free_list) {
            void *block = p->free_list;
            POOL_UNPOISON(block, p->size);
            memcpy(&p->free_list, block, sizeof(void *));
            free(block);
        }
        p->nfree = 0;
    }
}

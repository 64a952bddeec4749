#include "proxy/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every pool used so far, for VERBPROXY STATS and vp_pool_drain. */
static vp_pool *pools;

static vp_pool buf_pool = VP_POOL_INIT("bufs", VP_POOL_BUF_SIZE);

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
    memcpy(&p->free_list, block, sizeof(void *));
    p->nfree--;
    return block;
}

/* Onto the free list, or freed if it is full. */
static void pool_keep_free(vp_pool *p, void *block)
{
    if ((p->nfree + 1) * p->size > VP_POOL_MAX_FREE_BYTES) {
        free(block);
        return;
    }
    memcpy(block, &p->free_list, sizeof(void *));
    p->free_list = block;
    p->nfree++;
}

void vp_pool_put(vp_pool *p, void *block)
{
    p->in_use--;
    pool_keep_free(p, block);
}

/* The buffer pool's in_use counts buffers holding memory, a block or their
 * own allocation after they outgrew one: what VERBPROXY STATS shows as
 * read and write buffers held. */

void vp_pool_buf_reserve(vp_buf *b, size_t extra)
{
    if (b->cap - b->len >= extra) return;
    if (b->cap == 0 && extra <= VP_POOL_BUF_SIZE) {
        b->data = vp_pool_get(&buf_pool);
        b->cap = VP_POOL_BUF_SIZE;
        return;
    }
    if (b->cap != VP_POOL_BUF_SIZE) {
        /* More than a block from nothing, or its own allocation already:
         * either way it ends over VP_POOL_BUF_SIZE, never a block's size. */
        if (b->cap == 0) buf_pool.in_use++;
        vp_buf_reserve(b, extra);
        return;
    }
    /* A pool block outgrown: copy into its own allocation (at least twice
     * the size, so never a pool block's size) and put the block back. */
    vp_buf grown = {0};
    size_t want = b->len + extra;
    vp_buf_reserve(&grown, want > 2 * VP_POOL_BUF_SIZE ? want : 2 * VP_POOL_BUF_SIZE);
    memcpy(grown.data, b->data, b->len);
    grown.len = b->len;
    pool_keep_free(&buf_pool, b->data); /* the buffer is still held: in_use stays */
    *b = grown;
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
    if (b->cap == VP_POOL_BUF_SIZE) {
        vp_pool_put(&buf_pool, b->data);
    } else {
        buf_pool.in_use--;
        free(b->data);
    }
    b->data = NULL;
    b->len = b->cap = 0;
}

void vp_pool_buf_release_idle(vp_buf *b, size_t keep)
{
    if (b->len != 0 || b->cap == 0) return;
    if (b->cap != VP_POOL_BUF_SIZE && b->cap <= keep) return;
    vp_pool_buf_release(b);
}

unsigned long long vp_pool_bufs_in_use(void)
{
    return buf_pool.in_use;
}

size_t vp_pool_format(char *buf, size_t cap, const char *sep, const char *end)
{
    size_t n = 0;
    if (!buf_pool.registered) pool_register(&buf_pool); /* listed from the start */
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
            memcpy(&p->free_list, block, sizeof(void *));
            free(block);
        }
        p->nfree = 0;
    }
}

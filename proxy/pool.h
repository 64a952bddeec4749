/* pool.h - free lists of the blocks a connection needs only while it has
 * work in hand, so that an idle client holds none of them.
 *
 * A client that is not sending or receiving needs no read buffer, no write
 * buffer, no pending replies and no list of output pieces; it needs them again
 * for every burst of traffic. Taking them from malloc at each burst would
 * put an allocation on the hot path; keeping them ties up several KiB per
 * idle client (20 KiB of address space, 8 KiB of RSS per idle client before
 * these pools). So each kind of block has a pool (vp_pool): a connection
 * takes a block when work arrives and puts it back as soon as the work is
 * done (its input all parsed, its output all written, no reply owed). A
 * block taken from the free list is not an allocation; the list keeps at
 * most VP_POOL_MAX_FREE_BYTES of each kind, so a burst of a thousand busy
 * clients leaves at most that much behind.
 *
 * A pool is a static object of the module whose blocks it holds (outq.c's
 * pieces, client.c's pending replies); the buffer pools (vp_pool_buf_*) are
 * here. Each registers itself on first use, so VERBPROXY STATS can list
 * them all (vp_pool_format).
 *
 * Buffers from the pools: a vp_buf managed by vp_pool_buf_reserve and
 * vp_pool_buf_release* holds nothing (capacity 0), a block of
 * VP_POOL_BUF_SIZE or, once it outgrew that, of VP_POOL_BIG_BUF_SIZE, or
 * past that its own allocation (at least twice a big block; freed, not
 * pooled, when released). Only these functions may grow or free such a
 * buffer (vp_buf_consume is fine).
 *
 * One event loop thread: no locking. Ownership: a block belongs to whoever
 * took it until it is put back; the pool owns the free ones. */
#ifndef VP_POOL_H
#define VP_POOL_H

#include <stddef.h>

#include "proxy/buffer.h"

/* A read or write buffer: Redis's PROTO_IOBUF_LEN, one read's worth. */
#define VP_POOL_BUF_SIZE (16 * 1024)
/* A buffer that outgrew one (a medium value, a shared connection's batch). */
#define VP_POOL_BIG_BUF_SIZE (64 * 1024)
/* Free blocks kept per pool, in bytes. */
#define VP_POOL_MAX_FREE_BYTES (4 * 1024 * 1024)

typedef struct vp_pool {
    const char *name; /* VERBPROXY STATS: pool_<name>_in_use, pool_<name>_free */
    size_t size;      /* of each block, at least a pointer */
    void *free_list;  /* linked through each free block's first word */
    size_t nfree;
    unsigned long long in_use; /* taken and not put back */
    int registered;
    struct vp_pool *next_pool;
} vp_pool;

#define VP_POOL_INIT(name, size)                                                                             \
    {                                                                                                        \
        (name), (size), NULL, 0, 0, 0, NULL                                                                  \
    }

/* A block of p->size bytes, uninitialised. */
void *vp_pool_get(vp_pool *p);
void vp_pool_put(vp_pool *p, void *block);

/* Make room for `extra` more bytes in a pooled buffer. */
void vp_pool_buf_reserve(vp_buf *b, size_t extra);
void vp_pool_buf_append(vp_buf *b, const void *p, size_t n);
/* Give its memory back (a block to its pool), whatever it holds. */
void vp_pool_buf_release(vp_buf *b);
/* The same, if it is empty. */
void vp_pool_buf_release_idle(vp_buf *b);

/* Pooled buffers holding memory, a block or their own allocation
 * (buffers_held in VERBPROXY STATS). */
unsigned long long vp_pool_bufs_held(void);
/* buffers_held and every pool's counts as "<name><sep><value><end>" lines;
 * returns the length written (at most cap - 1). */
size_t vp_pool_format(char *buf, size_t cap, const char *sep, const char *end);
/* Free every free block of every pool (at shutdown, for leak checkers). */
void vp_pool_drain(void);

#endif

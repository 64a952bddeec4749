/* The pools of proxy/pool.c: a block put back is the next one handed out
 * (no allocation), a full free list frees instead of growing, and a pooled
 * buffer moves from a block to a big block to its own allocation as it
 * grows, keeping its bytes, counted as held from its first byte of capacity
 * until it is released. */
#include <criterion/criterion.h>
#include <string.h>

#include "proxy/pool.h"

Test(pool, a_block_put_back_is_the_next_one_handed_out)
{
    static vp_pool p = VP_POOL_INIT("test_reuse", 256);
    void *a = vp_pool_get(&p);
    cr_assert_eq(p.in_use, 1);
    vp_pool_put(&p, a);
    cr_assert_eq(p.in_use, 0);
    cr_assert_eq(p.nfree, 1);
    void *b = vp_pool_get(&p);
    cr_assert_eq(a, b, "a free block was not reused");
    cr_assert_eq(p.nfree, 0);
    vp_pool_put(&p, b);
}

Test(pool, the_free_list_keeps_at_most_its_bytes)
{
    enum { SIZE = 64 * 1024, MANY = VP_POOL_MAX_FREE_BYTES / SIZE + 10 };
    static vp_pool p = VP_POOL_INIT("test_cap", SIZE);
    static void *blocks[MANY];
    for (int i = 0; i < MANY; i++)
        blocks[i] = vp_pool_get(&p);
    cr_assert_eq(p.in_use, MANY);
    for (int i = 0; i < MANY; i++)
        vp_pool_put(&p, blocks[i]);
    cr_assert_eq(p.in_use, 0);
    cr_assert_eq(p.nfree, VP_POOL_MAX_FREE_BYTES / SIZE);
}

Test(pool, a_buffer_is_held_from_its_first_byte_until_released)
{
    unsigned long long base = vp_pool_bufs_held();
    vp_buf b = {0};
    vp_pool_buf_append(&b, "PING\r\n", 6);
    cr_assert_eq(b.cap, VP_POOL_BUF_SIZE, "a small buffer is a block");
    cr_assert_eq(vp_pool_bufs_held(), base + 1);

    /* A medium value: a big block, bytes kept, still one buffer held. */
    static char big[5 * VP_POOL_BIG_BUF_SIZE];
    memset(big, 'x', sizeof(big));
    vp_pool_buf_append(&b, big, 20000);
    cr_assert_eq(b.cap, VP_POOL_BIG_BUF_SIZE);
    cr_assert_eq(b.len, 6 + 20000);
    cr_assert(memcmp(b.data, "PING\r\nxxx", 9) == 0);
    cr_assert_eq(vp_pool_bufs_held(), base + 1);

    /* Past that: its own allocation, never a block's size. */
    vp_pool_buf_append(&b, big, sizeof(big) - 20000);
    cr_assert_geq(b.cap, 2 * VP_POOL_BIG_BUF_SIZE);
    cr_assert_eq(b.len, 6 + sizeof(big));
    cr_assert(memcmp(b.data, "PING\r\nxxx", 9) == 0);
    cr_assert_eq(b.data[b.len - 1], 'x');
    cr_assert_eq(vp_pool_bufs_held(), base + 1);

    /* Not empty: nothing given back; empty: given back. */
    vp_pool_buf_release_idle(&b);
    cr_assert_gt(b.cap, 0);
    b.len = 0;
    vp_pool_buf_release_idle(&b);
    cr_assert_eq(b.cap, 0);
    cr_assert_null(b.data);
    cr_assert_eq(vp_pool_bufs_held(), base);
}

Test(pool, an_empty_block_is_reused_by_the_next_buffer)
{
    unsigned long long base = vp_pool_bufs_held();
    vp_buf b = {0};
    vp_pool_buf_reserve(&b, 100);
    char *block = b.data;
    vp_pool_buf_release_idle(&b);
    cr_assert_eq(b.cap, 0);
    cr_assert_eq(vp_pool_bufs_held(), base);
    vp_buf other = {0};
    vp_pool_buf_reserve(&other, 100);
    cr_assert_eq(other.data, block, "the block was not reused");
    vp_pool_buf_release(&other);
    vp_pool_buf_release(&other); /* twice is harmless */
    cr_assert_eq(vp_pool_bufs_held(), base);
}

Test(pool, sizes_from_nothing)
{
    vp_buf b = {0};
    vp_pool_buf_reserve(&b, VP_POOL_BUF_SIZE + 1);
    cr_assert_eq(b.cap, VP_POOL_BIG_BUF_SIZE);
    vp_pool_buf_release(&b);
    vp_pool_buf_reserve(&b, VP_POOL_BIG_BUF_SIZE + 1);
    cr_assert_geq(b.cap, 2 * VP_POOL_BIG_BUF_SIZE, "an own allocation must not look like a block");
    cr_assert_eq(vp_pool_bufs_held(), 1);
    vp_pool_buf_release(&b);
    cr_assert_eq(vp_pool_bufs_held(), 0);
}

Test(pool, stats_list_every_pool_used)
{
    static vp_pool p = VP_POOL_INIT("test_stats", 128);
    vp_pool_put(&p, vp_pool_get(&p));
    char text[1024];
    size_t n = vp_pool_format(text, sizeof(text), ":", "\r\n");
    cr_assert_eq(n, strlen(text));
    cr_assert(strstr(text, "pool_test_stats_in_use:0\r\npool_test_stats_free:1\r\n"), "%s", text);
    cr_assert(strncmp(text, "buffers_held:", 13) == 0, "%s", text);
    vp_pool_drain();
    cr_assert_eq(p.nfree, 0);
}

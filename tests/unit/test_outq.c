/* The output queue (proxy/net/outq.c) over a real socket pair: what is queued
 * arrives whole and in order, whether the kernel takes it at once or pushes
 * back, and afterwards the queue holds nothing: its pieces and write
 * request (outq_block) and its buffers are back in their pools. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "proxy/net/outq.h"
#include "proxy/pool.h"

typedef struct pair {
    uv_loop_t loop;
    uv_pipe_t pipe;
    int peer; /* the other end, read by the test */
    outq q;
    int written, last_status;
} pair;

static void on_written(outq *q, int status)
{
    pair *p = q->owner;
    p->written++;
    p->last_status = status;
}

static void pair_open(pair *p, int sndbuf)
{
    memset(p, 0, sizeof(*p));
    int fds[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    if (sndbuf) setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    p->peer = fds[1];
    fcntl(p->peer, F_SETFL, O_NONBLOCK);
    cr_assert_eq(uv_loop_init(&p->loop), 0);
    cr_assert_eq(uv_pipe_init(&p->loop, &p->pipe, 0), 0);
    cr_assert_eq(uv_pipe_open(&p->pipe, fds[0]), 0);
    outq_init(&p->q, (uv_stream_t *)&p->pipe, p, on_written);
}

static void pair_close(pair *p)
{
    uv_close((uv_handle_t *)&p->pipe, NULL);
    uv_run(&p->loop, UV_RUN_DEFAULT);
    outq_free(&p->q);
    uv_loop_close(&p->loop);
    close(p->peer);
}

/* Read what the peer has now into got. */
static void drain_peer(pair *p, vp_buf *got)
{
    char chunk[65536];
    ssize_t n;
    while ((n = read(p->peer, chunk, sizeof(chunk))) > 0)
        vp_buf_append(got, chunk, (size_t)n);
    cr_assert(n == 0 || errno == EAGAIN, "read: %s", strerror(errno));
}

static void assert_holds_nothing(const outq *q)
{
    cr_assert_null(q->blk, "the queue still holds its block");
    cr_assert_eq(q->pending.cap, 0, "the queue still holds a pending buffer");
    cr_assert_eq(q->inflight.cap, 0, "the queue still holds an in-flight buffer");
    cr_assert_eq(outq_size(q), 0);
}

Test(outq, pieces_taken_at_once_leave_nothing_behind)
{
    pair p;
    pair_open(&p, 0);
    unsigned long long held = vp_pool_bufs_held();
    outq_add(&p.q, "+OK\r\n", 5);
    outq_add_copy(&p.q, ":1\r\n", 4);
    outq_add(&p.q, "$1\r\nx\r\n", 7);
    cr_assert_not_null(p.q.blk);
    cr_assert_eq(outq_flush(&p.q), 0);
    assert_holds_nothing(&p.q);
    cr_assert_eq(vp_pool_bufs_held(), held);
    vp_buf got = {0};
    drain_peer(&p, &got);
    cr_assert_eq(got.len, 16);
    cr_assert(memcmp(got.data, "+OK\r\n:1\r\n$1\r\nx\r\n", 16) == 0);
    vp_buf_free(&got);
    pair_close(&p);
}

Test(outq, what_the_kernel_pushes_back_goes_later_in_order_and_then_everything_is_given_back)
{
    enum { PIECE = 8192, PIECES = 128 }; /* 1 MiB through a small socket buffer */
    pair p;
    pair_open(&p, 16384);
    unsigned long long held = vp_pool_bufs_held();
    static char data[PIECE * PIECES];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (char)('a' + (i / 7) % 26);
    /* Rounds as the proxy makes them: pieces, then a flush. */
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < PIECES / 4; i++) {
            size_t off = ((size_t)round * (PIECES / 4) + (size_t)i) * PIECE;
            outq_add(&p.q, data + off, PIECE);
        }
        cr_assert_eq(outq_flush(&p.q), 0);
    }
    cr_assert(outq_backed_up(&p.q), "a 16 KiB socket buffer took 1 MiB at once");
    cr_assert_not_null(p.q.blk, "the write request lives in the block while writing");
    vp_buf got = {0};
    for (int spins = 0; outq_size(&p.q) && spins < 100000; spins++) {
        drain_peer(&p, &got);
        uv_run(&p.loop, UV_RUN_NOWAIT);
    }
    drain_peer(&p, &got);
    cr_assert_eq(outq_size(&p.q), 0, "the queue did not drain");
    cr_assert_gt(p.written, 0);
    cr_assert_eq(p.last_status, 0);
    assert_holds_nothing(&p.q);
    cr_assert_eq(vp_pool_bufs_held(), held);
    cr_assert_eq(got.len, sizeof(data));
    cr_assert(memcmp(got.data, data, sizeof(data)) == 0, "the bytes came out of order");
    vp_buf_free(&got);
    pair_close(&p);
}

Test(outq, a_piece_in_a_buffer_that_moves_is_resolved_at_the_flush)
{
    pair p;
    pair_open(&p, 0);
    vp_buf b = {0};
    vp_buf_append(&b, "*1\r\n$4\r\nPING\r\n", 14);
    outq_add_ref(&p.q, &b, 0, 14);
    /* The buffer grows (and moves) before the flush. */
    static char more[1 << 20];
    vp_buf_append(&b, more, sizeof(more));
    cr_assert_eq(outq_flush(&p.q), 0);
    assert_holds_nothing(&p.q);
    vp_buf got = {0};
    drain_peer(&p, &got);
    cr_assert_eq(got.len, 14);
    cr_assert(memcmp(got.data, "*1\r\n$4\r\nPING\r\n", 14) == 0);
    vp_buf_free(&got);
    vp_buf_free(&b);
    pair_close(&p);
}

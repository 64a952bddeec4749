#include "proxy/outq.h"

#include <stdint.h>
#include <string.h>

#include "proxy/pool.h"

static vp_pool outq_blocks = VP_POOL_INIT("outq_blocks", sizeof(outq_block));

void outq_init(outq *q, uv_stream_t *stream, void *owner, outq_written_cb cb)
{
    memset(q, 0, sizeof(*q));
    q->stream = stream;
    q->owner = owner;
    q->on_written = cb;
}

/* The block, taken from the pool when a piece or a write first needs it. */
static outq_block *outq_block_of(outq *q)
{
    if (!q->blk) {
        q->blk = vp_pool_get(&outq_blocks);
        q->blk->req.data = q;
    }
    return q->blk;
}

/* Nothing queued as pieces and no write in flight: the block goes back. */
static void outq_put_block(outq *q)
{
    if (q->blk && q->npieces == 0 && !q->writing) {
        vp_pool_put(&outq_blocks, q->blk);
        q->blk = NULL;
    }
}

static void outq_append(outq *q, const char *p, size_t n)
{
    vp_pool_buf_append(&q->pending, p, n);
}

/* Turn buffer offsets into pointers: the buffers are done growing. */
static void outq_resolve(outq *q)
{
    for (int i = 0; i < q->npieces; i++) {
        if (q->blk->ref[i]) {
            q->blk->pieces[i].base = q->blk->ref[i]->data + (size_t)(uintptr_t)q->blk->pieces[i].base;
            q->blk->ref[i] = NULL;
        }
    }
}

/* Copy the zero-copy pieces into `pending`, keeping their order. */
static void outq_copy_pieces(outq *q)
{
    outq_resolve(q);
    for (int i = 0; i < q->npieces; i++)
        outq_append(q, q->blk->pieces[i].base, q->blk->pieces[i].len);
    q->npieces = 0;
    q->piece_bytes = 0;
}

void outq_add(outq *q, const char *p, size_t n)
{
    if (n == 0) return;
    /* Bytes already copied must go first: once anything is pending, copy. */
    if (q->writing || q->pending.len) {
        outq_append(q, p, n);
        return;
    }
    outq_block *b = outq_block_of(q);
    if (q->npieces && !b->ref[q->npieces - 1]) {
        uv_buf_t *last = &b->pieces[q->npieces - 1];
        if (last->base + last->len == p) { /* consecutive replies in one read buffer */
            last->len += n;
            q->piece_bytes += n;
            return;
        }
    }
    if (q->npieces == OUTQ_MAX_PIECES) outq_copy_pieces(q);
    if (q->pending.len) {
        outq_append(q, p, n);
        return;
    }
    b->ref[q->npieces] = NULL;
    b->pieces[q->npieces++] = uv_buf_init((char *)p, (unsigned int)n);
    q->piece_bytes += n;
}

void outq_add_ref(outq *q, const vp_buf *buf, size_t off, size_t n)
{
    if (n == 0) return;
    if (q->writing || q->pending.len) {
        outq_append(q, buf->data + off, n);
        return;
    }
    outq_block *b = outq_block_of(q);
    if (q->npieces && b->ref[q->npieces - 1] == buf) {
        uv_buf_t *last = &b->pieces[q->npieces - 1];
        if ((size_t)(uintptr_t)last->base + last->len == off) { /* the next bytes of the same buffer */
            last->len += n;
            q->piece_bytes += n;
            return;
        }
    }
    if (q->npieces == OUTQ_MAX_PIECES) {
        outq_copy_pieces(q);
        outq_append(q, buf->data + off, n);
        return;
    }
    b->ref[q->npieces] = buf;
    b->pieces[q->npieces++] = uv_buf_init((char *)(uintptr_t)off, (unsigned int)n);
    q->piece_bytes += n;
}

void outq_add_copy(outq *q, const char *p, size_t n)
{
    if (n == 0) return;
    outq_copy_pieces(q);
    outq_append(q, p, n);
}

static void outq_after_write(uv_write_t *req, int status);

/* `pending` goes out by uv_write as `inflight` (empty and given back by
 * the last write's completion), and new bytes gather in a new `pending`. */
static int outq_start_write(outq *q)
{
    vp_buf t = q->inflight;
    q->inflight = q->pending;
    q->pending = t;
    q->pending.len = 0;
    outq_block *blk = outq_block_of(q);
    uv_buf_t b = uv_buf_init(q->inflight.data, (unsigned int)q->inflight.len);
    int rc = uv_write(&blk->req, q->stream, &b, 1, outq_after_write);
    if (rc == 0) q->writing = 1;
    return rc;
}

static void outq_after_write(uv_write_t *req, int status)
{
    outq *q = req->data;
    q->writing = 0;
    q->inflight.len = 0;
    vp_pool_buf_release_idle(&q->inflight);
    if (status == 0 && q->pending.len) {
        int rc = outq_start_write(q);
        if (rc < 0) status = rc;
    }
    outq_put_block(q);
    if (status == UV_ECANCELED) return; /* handle is closing; owner already knows */
    q->on_written(q, status);
}

/* Offer the pieces to the kernel in one try; what it does not take is
 * copied into `pending`. Returns 0 or a libuv error. */
static int outq_try_pieces(outq *q)
{
    int n = uv_try_write(q->stream, q->blk->pieces, (unsigned int)q->npieces);
    if (n < 0 && n != UV_EAGAIN) {
        q->npieces = 0;
        q->piece_bytes = 0;
        return n;
    }
    size_t done = n > 0 ? (size_t)n : 0;
    for (int i = 0; i < q->npieces; i++) {
        uv_buf_t *b = &q->blk->pieces[i];
        if (done >= b->len) {
            done -= b->len;
            continue;
        }
        outq_append(q, b->base + done, b->len - done);
        done = 0;
    }
    q->npieces = 0;
    q->piece_bytes = 0;
    return 0;
}

static int outq_flush_round(outq *q)
{
    outq_resolve(q);
    int tried = 0; /* the kernel was just offered the pieces */
    if (q->npieces) {
        if (!q->writing && !q->pending.len) {
            tried = 1;
            int rc = outq_try_pieces(q);
            if (rc < 0) return rc;
        } else {
            outq_copy_pieces(q);
        }
    }
    if (!q->writing && q->pending.len && !tried) {
        /* Copied bytes (a shared connection's requests) also go in one try
         * first: uv_write would call back only in the next loop iteration.
         * (Not right after the kernel took only part of the pieces: it
         * would take nothing more now.) */
        uv_buf_t b = uv_buf_init(q->pending.data, (unsigned int)q->pending.len);
        int n = uv_try_write(q->stream, &b, 1);
        if (n < 0 && n != UV_EAGAIN) return n;
        if (n > 0) vp_buf_consume(&q->pending, (size_t)n);
    }
    vp_pool_buf_release_idle(&q->pending);
    if (!q->writing && q->pending.len) return outq_start_write(q);
    return 0;
}

int outq_flush(outq *q)
{
    if (!q->blk && !q->pending.len) return 0; /* nothing queued */
    int rc = outq_flush_round(q);
    outq_put_block(q);
    return rc;
}

int outq_backed_up(const outq *q)
{
    return q->writing;
}

size_t outq_size(const outq *q)
{
    return q->piece_bytes + q->pending.len + q->inflight.len;
}

void outq_free(outq *q)
{
    vp_pool_buf_release(&q->pending);
    vp_pool_buf_release(&q->inflight);
    q->npieces = 0;
    q->piece_bytes = 0;
    q->writing = 0;
    outq_put_block(q);
}

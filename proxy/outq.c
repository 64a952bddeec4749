#include "proxy/outq.h"

#include <stdint.h>
#include <string.h>

/* Past this much idle capacity a buffer is given back after a big value. */
#define OUTQ_KEEP_BYTES (64 * 1024)

void outq_init(outq *q, uv_stream_t *stream, void *owner, outq_written_cb cb)
{
    memset(q, 0, sizeof(*q));
    q->stream = stream;
    q->owner = owner;
    q->on_written = cb;
    q->req.data = q;
}

/* Turn buffer offsets into pointers: the buffers are done growing. */
static void outq_resolve(outq *q)
{
    for (int i = 0; i < q->npieces; i++) {
        if (q->ref[i]) {
            q->pieces[i].base = q->ref[i]->data + (size_t)(uintptr_t)q->pieces[i].base;
            q->ref[i] = NULL;
        }
    }
}

/* Copy the zero-copy pieces into `pending`, keeping their order. */
static void outq_copy_pieces(outq *q)
{
    outq_resolve(q);
    for (int i = 0; i < q->npieces; i++)
        vp_buf_append(&q->pending, q->pieces[i].base, q->pieces[i].len);
    q->npieces = 0;
    q->piece_bytes = 0;
}

void outq_add(outq *q, const char *p, size_t n)
{
    if (n == 0) return;
    /* Bytes already copied must go first: once anything is pending, copy. */
    if (q->writing || q->pending.len) {
        vp_buf_append(&q->pending, p, n);
        return;
    }
    if (q->npieces && !q->ref[q->npieces - 1]) {
        uv_buf_t *last = &q->pieces[q->npieces - 1];
        if (last->base + last->len == p) { /* consecutive replies in one read buffer */
            last->len += n;
            q->piece_bytes += n;
            return;
        }
    }
    if (q->npieces == OUTQ_MAX_PIECES) outq_copy_pieces(q);
    if (q->pending.len) {
        vp_buf_append(&q->pending, p, n);
        return;
    }
    q->ref[q->npieces] = NULL;
    q->pieces[q->npieces++] = uv_buf_init((char *)p, (unsigned int)n);
    q->piece_bytes += n;
}

void outq_add_ref(outq *q, const vp_buf *b, size_t off, size_t n)
{
    if (n == 0) return;
    if (q->writing || q->pending.len) {
        vp_buf_append(&q->pending, b->data + off, n);
        return;
    }
    if (q->npieces && q->ref[q->npieces - 1] == b) {
        uv_buf_t *last = &q->pieces[q->npieces - 1];
        if ((size_t)(uintptr_t)last->base + last->len == off) { /* the next bytes of the same buffer */
            last->len += n;
            q->piece_bytes += n;
            return;
        }
    }
    if (q->npieces == OUTQ_MAX_PIECES) {
        outq_copy_pieces(q);
        vp_buf_append(&q->pending, b->data + off, n);
        return;
    }
    q->ref[q->npieces] = b;
    q->pieces[q->npieces++] = uv_buf_init((char *)(uintptr_t)off, (unsigned int)n);
    q->piece_bytes += n;
}

void outq_add_copy(outq *q, const char *p, size_t n)
{
    if (n == 0) return;
    outq_copy_pieces(q);
    vp_buf_append(&q->pending, p, n);
}

static void outq_after_write(uv_write_t *req, int status);

static int outq_start_write(outq *q)
{
    vp_buf t = q->inflight;
    q->inflight = q->pending;
    q->pending = t;
    q->pending.len = 0;
    uv_buf_t b = uv_buf_init(q->inflight.data, (unsigned int)q->inflight.len);
    int rc = uv_write(&q->req, q->stream, &b, 1, outq_after_write);
    if (rc == 0) q->writing = 1;
    return rc;
}

static void outq_after_write(uv_write_t *req, int status)
{
    outq *q = req->data;
    q->writing = 0;
    q->inflight.len = 0;
    vp_buf_shrink(&q->inflight, OUTQ_KEEP_BYTES);
    if (status == 0 && q->pending.len) {
        int rc = outq_start_write(q);
        if (rc < 0) status = rc;
    }
    if (status == UV_ECANCELED) return; /* handle is closing; owner already knows */
    q->on_written(q, status);
}

int outq_flush(outq *q)
{
    outq_resolve(q);
    int tried = 0; /* the kernel was just offered the pieces */
    if (q->npieces) {
        if (!q->writing && !q->pending.len) {
            tried = 1;
            int n = uv_try_write(q->stream, q->pieces, (unsigned int)q->npieces);
            if (n < 0 && n != UV_EAGAIN) {
                q->npieces = 0;
                q->piece_bytes = 0;
                return n;
            }
            size_t done = n > 0 ? (size_t)n : 0;
            for (int i = 0; i < q->npieces; i++) {
                uv_buf_t *b = &q->pieces[i];
                if (done >= b->len) {
                    done -= b->len;
                    continue;
                }
                vp_buf_append(&q->pending, b->base + done, b->len - done);
                done = 0;
            }
            q->npieces = 0;
            q->piece_bytes = 0;
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
        if (!q->pending.len) vp_buf_shrink(&q->pending, OUTQ_KEEP_BYTES);
    }
    if (!q->writing && q->pending.len) return outq_start_write(q);
    return 0;
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
    vp_buf_free(&q->pending);
    vp_buf_free(&q->inflight);
    q->npieces = 0;
    q->piece_bytes = 0;
}

#include "proxy/net/outq.h"

#include <stdint.h>
#include <string.h>

#include "proxy/pool.h"
#include "proxy/net/tls.h"

/* With TLS: pieces smaller than this are copied together into one
 * SSL_write of up to a record (TLS's largest, 16 KiB of plaintext);
 * bigger ones are encrypted where they lie. */
#define OUTQ_TLS_RECORD 16384
#define OUTQ_TLS_DIRECT 4096
/* A record's header, padding and tag, at most (TLS 1.2 CBC; 1.3 adds 22). */
#define OUTQ_TLS_OVERHEAD 256

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

/* Copied bytes: written as they are, or with TLS encrypted at the flush. */
static void outq_append(outq *q, const char *p, size_t n)
{
    vp_pool_buf_append(q->tls ? &q->plain : &q->pending, p, n);
}

/* Bytes were copied (or a write is in flight): what is added now must be
 * copied after them. (With TLS, only plaintext waiting counts: pieces are
 * encrypted at the flush whatever is being written.) */
static int outq_must_copy(const outq *q)
{
    return q->tls ? q->plain.len != 0 : (q->writing || q->pending.len);
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
    if (outq_must_copy(q)) {
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
    if (outq_must_copy(q)) {
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
    if (outq_must_copy(q)) {
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

void outq_copy_now(outq *q)
{
    if (!q->blk) return;
    outq_copy_pieces(q);
    outq_put_block(q);
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

/* `pending` (copied bytes, or ciphertext) goes to the kernel: in one try
 * unless the kernel was just offered pieces (`tried`), then by uv_write
 * for what it did not take. */
static int outq_write_pending(outq *q, int tried)
{
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
    return outq_write_pending(q, tried);
}

/* ---- TLS ---- */

/* Move the session's ciphertext into `pending`. */
static void outq_take_ciphertext(outq *q)
{
    size_t n;
    while ((n = vp_tls_output_pending(q->tls)) > 0) {
        vp_pool_buf_reserve(&q->pending, n);
        q->pending.len +=
            vp_tls_take_output(q->tls, q->pending.data + q->pending.len, q->pending.cap - q->pending.len);
    }
}

/* Encrypt n bytes a record at a time and move each record's ciphertext
 * into `pending` at once: the session's write BIO (a memory BIO, which
 * keeps the largest size it ever held until the session ends) then holds
 * one record, never a whole round. Once `pending` fills a big pool block
 * and no write is in flight, the kernel is offered it, as the pieces are
 * offered to it without TLS: a round of a megabyte is then not held twice
 * (plaintext the caller still has, and all of its ciphertext), and
 * `pending` stays in pool blocks while the kernel keeps up. Returns 0 or a
 * libuv error (UV_EPROTO: the session says why). */
static int outq_seal(outq *q, const char *p, size_t n)
{
    while (n) {
        size_t chunk = n < OUTQ_TLS_RECORD ? n : OUTQ_TLS_RECORD;
        if (vp_tls_encrypt(q->tls, p, chunk) < 0) return UV_EPROTO;
        outq_take_ciphertext(q);
        p += chunk;
        n -= chunk;
        if (n && !q->writing && q->pending.len + OUTQ_TLS_RECORD + OUTQ_TLS_OVERHEAD > VP_POOL_BIG_BUF_SIZE) {
            int rc = outq_write_pending(q, 0);
            if (rc < 0) return rc;
        }
    }
    return 0;
}

/* Encrypt the round's plaintext: what was copied (then there are no
 * pieces: see outq_must_copy), else the pieces, small ones coalesced.
 * Returns 0 or a libuv error. */
static int outq_encrypt(outq *q)
{
    if (q->plain.len) {
        int rc = outq_seal(q, q->plain.data, q->plain.len);
        q->plain.len = 0;
        vp_pool_buf_release_idle(&q->plain);
        return rc;
    }
    static char record[OUTQ_TLS_RECORD];
    size_t used = 0;
    int rc = 0;
    for (int i = 0; i < q->npieces && rc == 0; i++) {
        const uv_buf_t *b = &q->blk->pieces[i];
        if (b->len >= OUTQ_TLS_DIRECT) {
            if (used) rc = outq_seal(q, record, used);
            used = 0;
            if (rc == 0) rc = outq_seal(q, b->base, b->len);
            continue;
        }
        if (used + b->len > sizeof(record)) {
            rc = outq_seal(q, record, used);
            used = 0;
        }
        memcpy(record + used, b->base, b->len);
        used += b->len;
    }
    q->npieces = 0;
    q->piece_bytes = 0;
    return rc == 0 && used ? outq_seal(q, record, used) : rc;
}

static int outq_flush_tls(outq *q)
{
    if (q->blk) outq_resolve(q);
    int rc = 0;
    if (!vp_tls_established(q->tls))
        outq_copy_pieces(q); /* (plaintext waits for the handshake) */
    else
        rc = outq_encrypt(q);
    q->npieces = 0;
    q->piece_bytes = 0;
    outq_take_ciphertext(q);
    vp_tls_release_buffers(q->tls);
    if (rc == 0) rc = outq_write_pending(q, 0);
    outq_put_block(q);
    return rc;
}

int outq_flush_tls_output(outq *q)
{
    outq_take_ciphertext(q);
    return outq_write_pending(q, 0);
}

int outq_close_notify(outq *q)
{
    if (!q->tls || q->writing || outq_size(q) || !vp_tls_close_notify(q->tls)) return 0;
    /* (With anything OpenSSL wrote on its own before it.) */
    return outq_flush_tls_output(q) == 0 && outq_size(q) == 0;
}

static int outq_tls_output(void *arg)
{
    return outq_flush_tls_output(arg);
}

struct vp_tls *outq_tls_new(outq *q, struct vp_tls_ctx *ctx, const char *host, uv_read_cb raw_read)
{
    /* Bytes copied before the stream became TLS (requests queued while
     * connecting) are plaintext to encrypt, not bytes to write. */
    vp_buf b = q->plain;
    q->plain = q->pending;
    q->pending = b;
    q->tls = vp_tls_new(ctx, q->stream, host, raw_read, outq_tls_output, q);
    return q->tls;
}

int outq_flush(outq *q)
{
    if (q->tls) return outq_flush_tls(q);
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
    return q->piece_bytes + q->pending.len + q->inflight.len + q->plain.len;
}

void outq_free(outq *q)
{
    vp_pool_buf_release(&q->pending);
    vp_pool_buf_release(&q->inflight);
    vp_pool_buf_release(&q->plain);
    q->npieces = 0;
    q->piece_bytes = 0;
    q->writing = 0;
    outq_put_block(q);
}

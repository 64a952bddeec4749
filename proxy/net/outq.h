/* outq.h - the output queue of one stream (a client or an upstream socket).
 *
 * A processing round (one read callback) adds pieces with outq_add(); they are
 * NOT copied: they point at bytes the caller still holds (its input buffer, a
 * reply in the upstream's read buffer). outq_flush() at the end of the round
 * hands them to the kernel in one uv_try_write() (one syscall per batch) and
 * copies only what the kernel did not take, so the common case never copies
 * forwarded bytes. Whatever is copied goes out by uv_write from `inflight`
 * while new bytes gather in `pending`; the two swap when a write completes.
 *
 * Memory: an idle queue holds nothing but this struct. Its pieces and its
 * write request (outq_block) come from a pool when a round adds the first
 * piece or a write starts, and go back once the round is flushed and no
 * write is in flight; `pending` and `inflight` are pooled buffers
 * (pool.h), given back as soon as they are empty.
 *
 * Ownership: the outq owns `pending`, `inflight` and its block. Pieces
 * belong to the caller and must stay unchanged until outq_flush() returns.
 * The owner calls outq_free() only after the stream's handle is closed
 * (libuv has then cancelled and called back any write in flight).
 *
 * TLS (tls.h). A queue with a session (outq_tls_new) still gathers
 * plaintext pieces without copying them; bytes it must copy go to `plain`
 * instead of `pending`. outq_flush() encrypts them (small pieces coalesced
 * into one SSL_write of up to a record, big ones written directly, so
 * records are large), and `pending`/`inflight` then hold ciphertext,
 * written as above. Without a session the only cost is one pointer test. */
#ifndef VP_OUTQ_H
#define VP_OUTQ_H

#include <uv.h>

#include "proxy/buffer.h"

#define OUTQ_MAX_PIECES 32

typedef struct outq outq;
/* Called when a uv_write completes: status < 0 is a write error, otherwise the
 * queue may have drained (outq_size() tells). */
typedef void (*outq_written_cb)(outq *q, int status);

/* What only a busy queue needs (pooled). */
typedef struct outq_block {
    uv_buf_t pieces[OUTQ_MAX_PIECES];
    /* A piece in a growable buffer is kept as an offset (in base) and the
     * buffer, and resolved to a pointer when the round is flushed. */
    const vp_buf *ref[OUTQ_MAX_PIECES];
    uv_write_t req;
} outq_block;

struct vp_tls;

struct outq {
    uv_stream_t *stream;
    struct vp_tls *tls; /* NULL: plaintext */
    void *owner;        /* passed back through q->owner in the callback */
    outq_written_cb on_written;

    outq_block *blk; /* while pieces are queued or a write is in flight */
    int npieces;
    size_t piece_bytes;

    vp_buf pending;  /* copied bytes waiting for the write in flight */
    vp_buf inflight; /* bytes handed to uv_write */
    vp_buf plain;    /* with TLS: copied plaintext, encrypted at the next flush */
    int writing;
};

void outq_init(outq *q, uv_stream_t *stream, void *owner, outq_written_cb cb);
/* Queue bytes without copying them; they must outlive the next outq_flush(). */
void outq_add(outq *q, const char *p, size_t n);
/* Queue bytes n bytes at `off` in `b` without copying: `b` may grow (move)
 * before the flush, but those bytes must stay at that offset until then. */
void outq_add_ref(outq *q, const vp_buf *b, size_t off, size_t n);
/* Queue bytes by copying them now (for bytes about to disappear). */
void outq_add_copy(outq *q, const char *p, size_t n);
/* Copy the pieces queued so far (the bytes they point at are about to go):
 * the next outq_flush() writes the copy, with what is added meanwhile. */
void outq_copy_now(outq *q);
/* Send what the round gathered; returns 0 or a libuv error (stream broken). */
int outq_flush(outq *q);
/* Bytes accepted but not yet written to the kernel. */
size_t outq_size(const outq *q);
/* Did the kernel push back (a write is in flight, bytes wait for it)? */
int outq_backed_up(const outq *q);
void outq_free(outq *q);
struct vp_tls_ctx;
/* From now on the stream carries TLS: a session from `ctx` (vp_tls_new,
 * see there for `host` and `raw_read`) encrypts what the queue writes.
 * Made once, after connect/accept, before anything is queued that must be
 * encrypted; the owner frees it (vp_tls_free). */
struct vp_tls *outq_tls_new(outq *q, struct vp_tls_ctx *ctx, const char *host, uv_read_cb raw_read);
/* Write the ciphertext the session produced on its own (handshake, alerts,
 * tickets), leaving queued plaintext for the owner's flush. Returns 0 or a
 * libuv error. */
int outq_flush_tls_output(outq *q);
/* The owner ends the stream: with TLS, the close_notify alert
 * (vp_tls_close_notify), the last bytes on the connection, written as any
 * output (one try, then uv_write for what the kernel did not take). Only
 * when everything queued went to the kernel (after a record cut short the
 * alert would not end whole records). An owner that closes the handle
 * right after makes it a best effort, as Redis's SSL_shutdown on its
 * non-blocking socket: the close cancels what is left; one that shuts the
 * stream down (uv_shutdown) has libuv write it first. Returns 1 when the
 * kernel took the whole alert, else 0. */
int outq_close_notify(outq *q);

#endif

/* tls.h - TLS over a libuv stream, for upstream connections and client
 * sessions alike (OpenSSL through memory BIOs, the shape of uvtls and h2o).
 *
 * The code above a session sees plaintext and keeps its own callbacks:
 *
 * Reading. vp_tls_read_start() takes the owner's own alloc and read
 * callbacks (up_alloc/up_on_read, client_alloc/client_on_read). The session
 * reads ciphertext from the stream into one per-process buffer (consumed in
 * the callback), feeds it to OpenSSL's read BIO, drives the handshake, then
 * decrypts into buffers it gets from the owner's alloc callback and hands
 * them to the owner's read callback, exactly as libuv would: nread > 0 with
 * plaintext, 0 for "nothing now" (the buffer goes back), UV_EOF at the
 * peer's close_notify or TCP end, a negative libuv error (UV_EPROTO for a
 * TLS error; vp_tls_error() says which) otherwise. vp_tls_read_stop()
 * pauses; plaintext OpenSSL already holds is delivered when reading
 * resumes, from the loop (an idle handle), never from inside
 * vp_tls_read_start().
 *
 * Writing lives in the output queue (outq.h): a queue makes its session
 * with outq_tls_new() and encrypts what a round gathered at outq_flush(), and writes
 * the ciphertext with its usual logic. What OpenSSL writes on its own
 * (handshake messages, alerts, session tickets, KeyUpdate answers) is
 * written by the session through the same queue (outq_flush_tls_output,
 * the callback the queue gives vp_tls_new): the session never includes
 * the queue's header, the queue includes this one.
 *
 * Owners cannot be found from the stream (its data pointer is theirs), so
 * each owner passes its stream's raw read callback through a one-line shim
 * that calls vp_tls_on_raw_read() with its session.
 *
 * Lifetime: created by the owner after connect/accept, freed with
 * vp_tls_free() once the stream's handle is closed (libuv calls nothing of
 * ours after that). Contexts (vp_tls_ctx) are built once at start from the
 * settings and live as long as the process. */
#ifndef VP_TLS_H
#define VP_TLS_H

#include <uv.h>

struct vp_config;
typedef struct vp_tls_ctx vp_tls_ctx;
typedef struct vp_tls vp_tls;

/* The handshake is over: status 0, or < 0 with the reason in vp_tls_error(). */
typedef void (*vp_tls_handshake_cb)(vp_tls *t, int status);

/* The context for upstream connections (upstream-tls-*), or for clients on
 * tls-port (tls-*). NULL with the reason in err when a file or a value is
 * refused. */
vp_tls_ctx *vp_tls_ctx_client(const struct vp_config *conf, char *err, size_t errlen);
vp_tls_ctx *vp_tls_ctx_server(const struct vp_config *conf, char *err, size_t errlen);
/* Drop the owner's reference. Each session holds one too (vp_tls_new to
 * vp_tls_free), so a context a reload replaced lives until its last
 * connection is gone. */
void vp_tls_ctx_free(vp_tls_ctx *ctx);

/* How a session writes what OpenSSL produced on its own (handshake
 * messages, alerts, tickets): its output queue's, outq_flush_tls_output
 * with the queue as `arg` (outq_tls_new gives it). Returns 0 or a libuv
 * error. */
typedef int (*vp_tls_output_cb)(void *arg);

/* A session on a connected stream, made by its output queue
 * (outq_tls_new), which then encrypts for it. Client side: `host` is the name (or IP literal) checked
 * against the certificate and sent as SNI when it is a name (unless
 * upstream-tls-server-name says otherwise). `raw_read` is the owner's shim
 * that calls vp_tls_on_raw_read(). */
vp_tls *vp_tls_new(vp_tls_ctx *ctx, uv_stream_t *stream, const char *host, uv_read_cb raw_read,
                   vp_tls_output_cb write_output, void *arg);
/* Start the handshake: reading starts, the client's hello goes out; `cb`
 * is called once, from a read callback (or a write error). */
int vp_tls_handshake(vp_tls *t, vp_tls_handshake_cb cb);
/* The owner's data pointer, as given with vp_tls_set_data(). */
void vp_tls_set_data(vp_tls *t, void *data);
void *vp_tls_data(const vp_tls *t);
/* Plaintext to the owner's callbacks from now on (see the top). */
int vp_tls_read_start(vp_tls *t, uv_alloc_cb alloc, uv_read_cb read);
void vp_tls_read_stop(vp_tls *t);
/* The owner's shim for the stream's raw reads (see the top). */
void vp_tls_on_raw_read(vp_tls *t, ssize_t nread, const uv_buf_t *buf);
void vp_tls_raw_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
/* Is the handshake over? */
int vp_tls_established(const vp_tls *t);
/* Why the handshake or the session failed ("" if it did not). */
const char *vp_tls_error(const vp_tls *t);
/* The connection broke (a write failed, or a reset) before the owner read
 * what the peer sent ahead of its close: read what the kernel still holds
 * through the session (an alert: a TLS 1.3 server refusing our certificate
 * says so after our side of the handshake is over, and a request that
 * crossed the alert makes the server's close a reset). Returns 1 when that
 * gives a TLS reason (vp_tls_error), else 0; application data is left
 * unread. */
int vp_tls_read_late_alert(vp_tls *t);
/* The close_notify alert, the last record before the owner closes the
 * stream: SSL_shutdown once, which puts it into the session's output (the
 * queue writes it: outq_close_notify). Only once the handshake is over and
 * while the session is sound (no TLS error); the peer's own close_notify
 * is never waited for, as Redis 7.0's connTLSClose does not wait for it.
 * Returns 1 when the alert is in the output, 0 when none is due (before
 * the handshake, after an error, already sent). */
int vp_tls_close_notify(vp_tls *t);
/* Encrypt n plaintext bytes into the session's output (the queue then
 * takes it with vp_tls_take_output). Returns 0, or -1 (vp_tls_error). */
int vp_tls_encrypt(vp_tls *t, const char *p, size_t n);
/* Ciphertext waiting to be written, and taking it into the buffer `dst`
 * (appended; at most `room` bytes). Returns bytes taken. */
size_t vp_tls_output_pending(const vp_tls *t);
size_t vp_tls_take_output(vp_tls *t, char *dst, size_t room);
/* Give back what the session's memory BIOs grew to, once they are empty:
 * a memory BIO keeps the largest size it ever held (a 64 KiB read, a
 * record) for the session's life. Called after each round by the queue
 * (outq_flush) and after each delivery here. */
void vp_tls_release_buffers(vp_tls *t);
/* After the handle is closed. */
void vp_tls_free(vp_tls *t);

#endif

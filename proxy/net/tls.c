/* tls.c - TLS over a libuv stream (see tls.h). */
#include "proxy/net/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "proxy/buffer.h"
#include "proxy/config.h"
#include "proxy/config_tls.h"
#include "proxy/log.h"

/* Ciphertext read from a stream: one buffer for the process, since it is
 * consumed (copied into the session's read BIO) in the read callback. */
#define TLS_RAW_READ 65536
/* Plaintext asked of the owner's alloc callback per SSL_read. */
#define TLS_PLAIN_READ 65536
/* An empty memory BIO that grew past this is replaced by a new one
 * (vp_tls_release_buffers): an idle client that once sent 200 kB kept
 * 97 kB over TLS, 4 kB without. */
#define TLS_BIO_KEEP 4096

struct vp_tls_ctx {
    SSL_CTX *ssl;
    int refs; /* the owner's (1 until vp_tls_ctx_free) and each session's: a reload replaces a context
                 while sessions made from it go on */
    int server;
    int verify;                      /* client side: check the chain and the name */
    char server_name[CONF_ADDR_MAX]; /* client side: upstream-tls-server-name, "" = the host */
};

struct vp_tls {
    vp_tls_ctx *ctx;
    SSL *ssl;
    BIO *rbio, *wbio; /* memory BIOs, owned by ssl */
    uv_stream_t *stream;
    vp_tls_output_cb write_output; /* the queue's (outq_tls_new) */
    void *output_arg;
    void *data;
    uv_read_cb raw_read; /* the owner's shim (tls.h) */
    uv_alloc_cb alloc;   /* the owner's own callbacks */
    uv_read_cb read;
    vp_tls_handshake_cb on_handshake;
    unsigned established : 1;
    unsigned failed : 1;      /* the handshake or the session failed: nothing more is read */
    unsigned want_read : 1;   /* the owner reads (vp_tls_read_start) */
    unsigned raw_reading : 1; /* uv_read_start is on */
    unsigned scheduled : 1;   /* in the list delivered from the loop */
    unsigned delivering : 1;
    unsigned notified : 1; /* our close_notify is in the output (vp_tls_close_notify) */
    ssize_t end;           /* the stream ended (UV_EOF or an error): told after the plaintext */
    vp_tls *sched_next, *sched_prev;
    char error[160];
};

/* ---- contexts ---- */

static int tls_key_pass_cb(char *buf, int size, int rwflag, void *u)
{
    (void)rwflag;
    const char *pass = u;
    int n = (int)strlen(pass);
    if (n > size) n = size;
    memcpy(buf, pass, (size_t)n);
    return n;
}

/* What both sides share: protocols, ciphers, the certificate and key,
 * the CA. `what` names the side's directives in errors. */
static SSL_CTX *tls_ctx_common(const conf_tls *t, int server, const char *what, char *err, size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (!ctx) abort();
    char why[160];
    /* As Redis: no compression, no client-initiated renegotiation. */
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                                 (unsigned long)conf_tls_protocols(t->protocols));
    /* Records are written whole through a memory BIO; the queue's buffer may move between tries. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
    if (t->ciphers[0] && !SSL_CTX_set_cipher_list(ctx, t->ciphers)) goto openssl_error;
    if (t->ciphersuites[0] && !SSL_CTX_set_ciphersuites(ctx, t->ciphersuites)) goto openssl_error;
    if (t->cert_file[0] || t->key_file[0]) {
        if (!t->cert_file[0] || !t->key_file[0]) {
            snprintf(err, errlen, "%s-cert-file and %s-key-file must be given together", what, what);
            goto fail;
        }
        if (t->key_file_pass[0]) {
            SSL_CTX_set_default_passwd_cb(ctx, tls_key_pass_cb);
            SSL_CTX_set_default_passwd_cb_userdata(ctx, (void *)t->key_file_pass);
        }
        if (SSL_CTX_use_certificate_chain_file(ctx, t->cert_file) <= 0) {
            conf_tls_reason(why, sizeof(why), "unreadable");
            snprintf(err, errlen, "%s-cert-file %s: %s", what, t->cert_file, why);
            goto fail;
        }
        if (SSL_CTX_use_PrivateKey_file(ctx, t->key_file, SSL_FILETYPE_PEM) <= 0) {
            conf_tls_reason(why, sizeof(why), "unreadable");
            snprintf(err, errlen, "%s-key-file %s: %s", what, t->key_file, why);
            goto fail;
        }
        if (!SSL_CTX_check_private_key(ctx)) {
            conf_tls_reason(why, sizeof(why), "does not match");
            snprintf(err, errlen, "%s-key-file %s: %s", what, t->key_file, why);
            goto fail;
        }
    }
    if (t->ca_cert_file[0] || t->ca_cert_dir[0]) {
        if (!SSL_CTX_load_verify_locations(ctx, t->ca_cert_file[0] ? t->ca_cert_file : NULL,
                                           t->ca_cert_dir[0] ? t->ca_cert_dir : NULL)) {
            conf_tls_reason(why, sizeof(why), "unreadable");
            snprintf(err, errlen, "%s-ca-cert-file/dir: %s", what, why);
            goto fail;
        }
    }
    return ctx;
openssl_error:
    conf_tls_reason(why, sizeof(why), "refused");
    snprintf(err, errlen, "%s: %s", what, why);
fail:
    SSL_CTX_free(ctx);
    return NULL;
}

vp_tls_ctx *vp_tls_ctx_client(const vp_config *conf, char *err, size_t errlen)
{
    const conf_tls *t = &conf->upstream_tls_conf;
    SSL_CTX *ssl = tls_ctx_common(t, 0, "upstream-tls", err, errlen);
    if (!ssl) return NULL;
    if (!t->ca_cert_file[0] && !t->ca_cert_dir[0] && !SSL_CTX_set_default_verify_paths(ssl)) {
        char why[128];
        conf_tls_reason(why, sizeof(why), "unreadable");
        snprintf(err, errlen, "upstream-tls: the system's trust store: %s", why);
        SSL_CTX_free(ssl);
        return NULL;
    }
    SSL_CTX_set_verify(ssl, t->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    vp_tls_ctx *ctx = vp_malloc(sizeof(*ctx));
    memset(ctx, 0, sizeof(*ctx));
    ctx->ssl = ssl;
    ctx->refs = 1;
    ctx->verify = t->verify;
    snprintf(ctx->server_name, sizeof(ctx->server_name), "%s", t->server_name);
    return ctx;
}

vp_tls_ctx *vp_tls_ctx_server(const vp_config *conf, char *err, size_t errlen)
{
    const conf_tls *t = &conf->tls;
    if (!t->cert_file[0] || !t->key_file[0]) {
        snprintf(err, errlen, "tls-port needs tls-cert-file and tls-key-file");
        return NULL;
    }
    /* As Redis 7.0: a CA is needed to check clients' certificates. */
    if (t->auth_clients != CONF_TLS_AUTH_NO && !t->ca_cert_file[0] && !t->ca_cert_dir[0]) {
        snprintf(err, errlen,
                 "Either tls-ca-cert-file or tls-ca-cert-dir must be specified when "
                 "tls-auth-clients is enabled (yes or optional)");
        return NULL;
    }
    SSL_CTX *ssl = tls_ctx_common(t, 1, "tls", err, errlen);
    if (!ssl) return NULL;
    int mode = SSL_VERIFY_NONE;
    if (t->auth_clients == CONF_TLS_AUTH_YES)
        mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    else if (t->auth_clients == CONF_TLS_AUTH_OPTIONAL)
        mode = SSL_VERIFY_PEER;
    SSL_CTX_set_verify(ssl, mode, NULL);
    SSL_CTX_set_options(ssl, SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_session_cache_mode(ssl, SSL_SESS_CACHE_SERVER);
    static const unsigned char sid[] = "verbproxy";
    SSL_CTX_set_session_id_context(ssl, sid, sizeof(sid) - 1);
    vp_tls_ctx *ctx = vp_malloc(sizeof(*ctx));
    memset(ctx, 0, sizeof(*ctx));
    ctx->ssl = ssl;
    ctx->refs = 1;
    ctx->server = 1;
    return ctx;
}

void vp_tls_ctx_free(vp_tls_ctx *ctx)
{
    if (!ctx || --ctx->refs > 0) return;
    SSL_CTX_free(ctx->ssl);
    free(ctx);
}

/* ---- delivery from the loop ---- */

/* Sessions whose reading resumed with plaintext (or an end) already inside
 * OpenSSL: delivered by one idle handle, before the loop waits for I/O. */
static uv_idle_t tls_idle;
static int tls_idle_inited;
static vp_tls *tls_scheduled;

static void tls_deliver(vp_tls *t);

static void tls_unschedule(vp_tls *t)
{
    if (!t->scheduled) return;
    t->scheduled = 0;
    if (t->sched_prev)
        t->sched_prev->sched_next = t->sched_next;
    else
        tls_scheduled = t->sched_next;
    if (t->sched_next) t->sched_next->sched_prev = t->sched_prev;
    t->sched_next = t->sched_prev = NULL;
    if (!tls_scheduled && tls_idle_inited) uv_idle_stop(&tls_idle);
}

static void tls_on_idle(uv_idle_t *h)
{
    (void)h;
    while (tls_scheduled) {
        vp_tls *t = tls_scheduled;
        tls_unschedule(t);
        tls_deliver(t);
    }
}

static void tls_schedule(vp_tls *t)
{
    if (t->scheduled) return;
    if (!tls_idle_inited) {
        uv_idle_init(t->stream->loop, &tls_idle);
        uv_unref((uv_handle_t *)&tls_idle); /* it never keeps the loop alive on its own */
        tls_idle_inited = 1;
    }
    t->scheduled = 1;
    t->sched_prev = NULL;
    t->sched_next = tls_scheduled;
    if (tls_scheduled) tls_scheduled->sched_prev = t;
    tls_scheduled = t;
    uv_idle_start(&tls_idle, tls_on_idle);
}

/* ---- sessions ---- */

static int tls_is_ip(const char *host)
{
    unsigned char b[16];
    return uv_inet_pton(AF_INET, host, b) == 0 || uv_inet_pton(AF_INET6, host, b) == 0;
}

static BIO *tls_mem_bio(int for_reading)
{
    BIO *b = BIO_new(BIO_s_mem());
    if (!b) abort();
    if (for_reading) BIO_set_mem_eof_return(b, -1); /* empty: "retry", the end is told by the stream */
    return b;
}

/* Is b empty, and grown past TLS_BIO_KEEP? */
static int tls_bio_oversized(BIO *b)
{
    BUF_MEM *m = NULL;
    if (BIO_ctrl_pending(b)) return 0;
    BIO_get_mem_ptr(b, &m);
    return m && m->max > TLS_BIO_KEEP;
}

void vp_tls_release_buffers(vp_tls *t)
{
    if (!t->established) return;
    if (tls_bio_oversized(t->rbio)) {
        t->rbio = tls_mem_bio(1);
        SSL_set0_rbio(t->ssl, t->rbio); /* frees the old one */
    }
    if (tls_bio_oversized(t->wbio)) {
        t->wbio = tls_mem_bio(0);
        SSL_set0_wbio(t->ssl, t->wbio);
    }
}

vp_tls *vp_tls_new(vp_tls_ctx *ctx, uv_stream_t *stream, const char *host, uv_read_cb raw_read,
                   vp_tls_output_cb write_output, void *arg)
{
    vp_tls *t = vp_malloc(sizeof(*t));
    memset(t, 0, sizeof(*t));
    t->ctx = ctx;
    ctx->refs++;
    t->stream = stream;
    t->write_output = write_output;
    t->output_arg = arg;
    t->raw_read = raw_read;
    t->ssl = SSL_new(ctx->ssl);
    if (!t->ssl) abort();
    t->rbio = tls_mem_bio(1);
    t->wbio = tls_mem_bio(0);
    SSL_set_bio(t->ssl, t->rbio, t->wbio);
    if (ctx->server) {
        SSL_set_accept_state(t->ssl);
    } else {
        SSL_set_connect_state(t->ssl);
        const char *name = ctx->server_name[0] ? ctx->server_name : host;
        int ip = tls_is_ip(name);
        if (!ip) SSL_set_tlsext_host_name(t->ssl, name); /* SNI: names only (RFC 6066) */
        if (ctx->verify) {
            X509_VERIFY_PARAM *param = SSL_get0_param(t->ssl);
            if (ip)
                X509_VERIFY_PARAM_set1_ip_asc(param, name);
            else
                SSL_set1_host(t->ssl, name);
        }
    }
    return t;
}

void vp_tls_set_data(vp_tls *t, void *data)
{
    t->data = data;
}

void *vp_tls_data(const vp_tls *t)
{
    return t->data;
}

int vp_tls_established(const vp_tls *t)
{
    return t->established;
}

const char *vp_tls_error(const vp_tls *t)
{
    return t->error;
}

void vp_tls_raw_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    static char raw[TLS_RAW_READ];
    *buf = uv_buf_init(raw, sizeof(raw));
}

static int tls_raw_start(vp_tls *t)
{
    if (t->raw_reading) return 0;
    int rc = uv_read_start(t->stream, vp_tls_raw_alloc, t->raw_read);
    if (rc == 0) t->raw_reading = 1;
    return rc;
}

static void tls_raw_stop(vp_tls *t)
{
    if (!t->raw_reading) return;
    uv_read_stop(t->stream);
    t->raw_reading = 0;
}

/* Write what OpenSSL produced on its own (handshake, alerts, tickets). */
static int tls_flush_output(vp_tls *t)
{
    if (!BIO_ctrl_pending(t->wbio)) return 0;
    return t->write_output(t->output_arg);
}

/* Why a handshake failed: the certificate check that failed, else
 * OpenSSL's reason (an alert from the peer, a protocol mismatch). */
static void tls_handshake_reason(vp_tls *t, int ssl_error)
{
    long v = SSL_get_verify_result(t->ssl);
    if (v != X509_V_OK && !t->ctx->server) {
        snprintf(t->error, sizeof(t->error), "%s", X509_verify_cert_error_string(v));
        ERR_clear_error();
    } else if (ERR_peek_last_error()) {
        conf_tls_reason(t->error, sizeof(t->error), "handshake failed");
    } else if (t->end || ssl_error == SSL_ERROR_SYSCALL || ssl_error == SSL_ERROR_ZERO_RETURN) {
        snprintf(t->error, sizeof(t->error), "connection closed during the handshake");
    } else {
        snprintf(t->error, sizeof(t->error), "handshake failed");
    }
}

static void tls_handshake_failed(vp_tls *t)
{
    t->failed = 1;
    tls_raw_stop(t);
    (void)tls_flush_output(t); /* the alert, best effort */
    t->on_handshake(t, -1);
}

/* Drive the handshake with what was read. */
static void tls_step_handshake(vp_tls *t)
{
    ERR_clear_error();
    int r = SSL_do_handshake(t->ssl);
    if (r == 1) {
        t->established = 1;
        if (tls_flush_output(t) < 0) {
            snprintf(t->error, sizeof(t->error), "cannot write: connection lost during the handshake");
            tls_handshake_failed(t);
            return;
        }
        if (!t->want_read) tls_raw_stop(t); /* reading waits for the owner from now on */
        t->on_handshake(t, 0);
        return;
    }
    int e = SSL_get_error(t->ssl, r);
    if (e == SSL_ERROR_WANT_READ && !t->end) {
        if (tls_flush_output(t) < 0) {
            snprintf(t->error, sizeof(t->error), "cannot write: connection lost during the handshake");
            tls_handshake_failed(t);
        }
        return;
    }
    tls_handshake_reason(t, e);
    tls_handshake_failed(t);
}

int vp_tls_handshake(vp_tls *t, vp_tls_handshake_cb cb)
{
    t->on_handshake = cb;
    int rc = tls_raw_start(t);
    if (rc < 0) return rc;
    if (!t->ctx->server) {
        ERR_clear_error();
        int r = SSL_do_handshake(t->ssl); /* the ClientHello, into the write BIO */
        if (r != 1 && SSL_get_error(t->ssl, r) != SSL_ERROR_WANT_READ) {
            tls_handshake_reason(t, SSL_get_error(t->ssl, r));
            return UV_EPROTO;
        }
        rc = tls_flush_output(t);
        if (rc < 0) return rc;
    }
    return 0;
}

/* Hand the owner what OpenSSL can decrypt now, while it reads; then the
 * stream's end if it came. */
static void tls_deliver(vp_tls *t)
{
    if (t->delivering) return;
    t->delivering = 1;
    while (t->want_read && !t->failed && !uv_is_closing((uv_handle_t *)t->stream)) {
        uv_buf_t b = uv_buf_init(NULL, 0);
        t->alloc((uv_handle_t *)t->stream, TLS_PLAIN_READ, &b);
        if (b.len == 0) {
            t->read(t->stream, UV_ENOBUFS, &b);
            break;
        }
        ERR_clear_error();
        int n = SSL_read(t->ssl, b.base, (int)b.len);
        if (n > 0) {
            t->read(t->stream, n, &b);
            continue;
        }
        int e = SSL_get_error(t->ssl, n);
        if (e == SSL_ERROR_WANT_READ && !t->end) {
            t->read(t->stream, 0, &b); /* nothing now: the owner's buffer goes back */
            break;
        }
        t->failed = 1;
        tls_raw_stop(t);
        ssize_t status;
        if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_WANT_READ && t->end == UV_EOF)) {
            status = UV_EOF;
        } else if (e == SSL_ERROR_WANT_READ) {
            status = t->end;
        } else {
            conf_tls_reason(t->error, sizeof(t->error), "TLS error");
            status = UV_EPROTO;
        }
        t->read(t->stream, status, &b);
        break;
    }
    t->delivering = 0;
    if (!t->failed) vp_tls_release_buffers(t);
    /* A KeyUpdate's answer, a TLS 1.3 ticket. */
    if (!t->failed && !uv_is_closing((uv_handle_t *)t->stream) && tls_flush_output(t) < 0 && t->want_read) {
        t->failed = 1;
        tls_raw_stop(t);
        uv_buf_t b = uv_buf_init(NULL, 0);
        t->read(t->stream, UV_EPIPE, &b);
    }
}

void vp_tls_on_raw_read(vp_tls *t, ssize_t nread, const uv_buf_t *buf)
{
    if (nread == 0 || t->failed) return;
    if (nread < 0) {
        t->end = nread;
        tls_raw_stop(t);
    } else if (BIO_write(t->rbio, buf->base, (int)nread) != (int)nread) {
        abort(); /* a memory BIO only fails without memory */
    }
    if (!t->established) {
        tls_step_handshake(t);
        if (!t->established) return;
    }
    tls_deliver(t);
}

int vp_tls_read_start(vp_tls *t, uv_alloc_cb alloc, uv_read_cb read)
{
    t->alloc = alloc;
    t->read = read;
    t->want_read = 1;
    if (!t->established || t->failed) return 0; /* the handshake reads; the owner is told then */
    if (SSL_pending(t->ssl) || BIO_ctrl_pending(t->rbio) || t->end) tls_schedule(t);
    if (t->end) return 0;
    return tls_raw_start(t);
}

void vp_tls_read_stop(vp_tls *t)
{
    t->want_read = 0;
    tls_unschedule(t);
    if (t->established) tls_raw_stop(t);
}

/* At most this much ciphertext is read for an alert (it is a few bytes
 * behind at most a session ticket or two). */
#define TLS_LATE_READ_MAX (4 * TLS_RAW_READ)

int vp_tls_read_late_alert(vp_tls *t)
{
    if (t->error[0]) return 1;
    uv_os_fd_t fd;
    if (!t->established || uv_fileno((uv_handle_t *)t->stream, &fd) != 0) return 0;
    static char raw[TLS_RAW_READ];
    ssize_t got;
    for (size_t total = 0; total < TLS_LATE_READ_MAX; total += (size_t)got) {
        got = recv(fd, raw, sizeof(raw), MSG_DONTWAIT);
        if (got <= 0) break;
        if (BIO_write(t->rbio, raw, (int)got) != (int)got) abort(); /* only without memory */
    }
    char peek;
    ERR_clear_error();
    int n = SSL_peek(t->ssl, &peek, 1); /* processes records up to data or an alert */
    if (n > 0 || SSL_get_error(t->ssl, n) != SSL_ERROR_SSL) {
        ERR_clear_error();
        return 0;
    }
    conf_tls_reason(t->error, sizeof(t->error), "TLS error");
    return 1;
}

int vp_tls_encrypt(vp_tls *t, const char *p, size_t n)
{
    while (n) {
        int chunk = n > (1u << 30) ? 1 << 30 : (int)n;
        ERR_clear_error();
        int w = SSL_write(t->ssl, p, chunk);
        if (w <= 0) {
            conf_tls_reason(t->error, sizeof(t->error), "TLS write failed");
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int vp_tls_close_notify(vp_tls *t)
{
    /* (error: a TLS error, after which OpenSSL refuses to shut down and
     * the peer expects nothing more; a clean end from the peer leaves it
     * empty, and the alert then answers the peer's, as TLS asks.) */
    if (!t->established || t->notified || t->error[0]) return 0;
    ERR_clear_error();
    int r = SSL_shutdown(t->ssl); /* 0: ours sent, the peer's not seen; 1: both */
    ERR_clear_error();
    if (r < 0) return 0;
    t->notified = 1;
    return 1;
}

size_t vp_tls_output_pending(const vp_tls *t)
{
    return BIO_ctrl_pending(t->wbio);
}

size_t vp_tls_take_output(vp_tls *t, char *dst, size_t room)
{
    if (room > INT32_MAX) room = INT32_MAX;
    int n = BIO_read(t->wbio, dst, (int)room);
    return n > 0 ? (size_t)n : 0;
}

void vp_tls_free(vp_tls *t)
{
    if (!t) return;
    tls_unschedule(t);
    SSL_free(t->ssl);
    vp_tls_ctx_free(t->ctx); /* its reference */
    free(t);
}

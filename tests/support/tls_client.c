#include "tests/support/tls_client.h"

#include <errno.h>
#include <openssl/err.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/servers.h"
#include "tests/support/tls_certs.h"

vt_tls_client *vt_tls_connect(int port, const char *cert, const char *key, char *why, size_t whylen)
{
    vt_tls_client *t = calloc(1, sizeof(*t));
    t->ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(t->ctx, vt_cert_path("ca.crt"), NULL);
    SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
    if (cert) {
        SSL_CTX_use_certificate_file(t->ctx, vt_cert_path(cert), SSL_FILETYPE_PEM);
        SSL_CTX_use_PrivateKey_file(t->ctx, vt_cert_path(key), SSL_FILETYPE_PEM);
    }
    t->fd = vt_sock_tcp(port);
    if (t->fd < 0) {
        snprintf(why, whylen, "cannot connect to port %d", port);
        SSL_CTX_free(t->ctx);
        free(t);
        return NULL;
    }
    t->ssl = SSL_new(t->ctx);
    SSL_set_fd(t->ssl, t->fd);
    SSL_set1_host(t->ssl, "localhost");
    ERR_clear_error();
    if (SSL_connect(t->ssl) != 1) {
        unsigned long e = ERR_peek_last_error();
        snprintf(why, whylen, "%s", e ? ERR_reason_error_string(e) : "closed");
        vt_tls_free(t);
        return NULL;
    }
    return t;
}

bool vt_tls_send(vt_tls_client *t, const void *p, size_t n)
{
    ERR_clear_error();
    return SSL_write(t->ssl, p, (int)n) == (int)n;
}

bool vt_tls_send_str(vt_tls_client *t, const char *s)
{
    return vt_tls_send(t, s, strlen(s));
}

bool vt_tls_read_replies(vt_tls_client *t, vt_buf *b, size_t count, int timeout_ms)
{
    long long end = vt_now_ms() + timeout_ms;
    char chunk[16384];
    while (vt_resp_count_replies(b->data, b->len) < count) {
        if (vt_now_ms() >= end) return false;
        if (!SSL_pending(t->ssl)) {
            struct pollfd pfd = {.fd = t->fd, .events = POLLIN};
            if (poll(&pfd, 1, 50) <= 0) continue;
        }
        ERR_clear_error();
        int n = SSL_read(t->ssl, chunk, sizeof(chunk));
        if (n > 0)
            vt_buf_append(b, chunk, (size_t)n);
        else if (SSL_get_error(t->ssl, n) != SSL_ERROR_WANT_READ)
            return false;
    }
    return true;
}

vt_tls_end vt_tls_read_to_end(vt_tls_client *t, vt_buf *b, int timeout_ms)
{
    long long end = vt_now_ms() + timeout_ms;
    char chunk[16384];
    while (vt_now_ms() < end) {
        if (!SSL_pending(t->ssl)) {
            struct pollfd pfd = {.fd = t->fd, .events = POLLIN};
            if (poll(&pfd, 1, 50) <= 0) continue;
        }
        ERR_clear_error();
        errno = 0;
        int n = SSL_read(t->ssl, chunk, sizeof(chunk));
        if (n > 0) {
            vt_buf_append(b, chunk, (size_t)n);
            continue;
        }
        int e = SSL_get_error(t->ssl, n);
        if (e == SSL_ERROR_WANT_READ) continue;
        if (e == SSL_ERROR_ZERO_RETURN) return VT_TLS_END_CLOSE_NOTIFY;
        /* OpenSSL 3: "unexpected eof while reading"; 1.1: SYSCALL, errno 0. */
        unsigned long err = ERR_peek_last_error();
        if ((e == SSL_ERROR_SSL && ERR_GET_REASON(err) == SSL_R_UNEXPECTED_EOF_WHILE_READING) ||
            (e == SSL_ERROR_SYSCALL && errno == 0 && !err))
            return VT_TLS_END_TRUNCATED;
        return VT_TLS_END_ERROR;
    }
    return VT_TLS_END_OPEN;
}

const char *vt_tls_end_name(vt_tls_end e)
{
    switch (e) {
    case VT_TLS_END_OPEN:
        return "still open";
    case VT_TLS_END_CLOSE_NOTIFY:
        return "close_notify (a clean close)";
    case VT_TLS_END_TRUNCATED:
        return "truncated (unexpected eof, no close_notify)";
    case VT_TLS_END_ERROR:
        return "a TLS error or a reset";
    }
    return "?";
}

void vt_tls_free(vt_tls_client *t)
{
    if (!t) return;
    if (t->ssl) {
        SSL_shutdown(t->ssl);
        SSL_free(t->ssl);
    }
    if (t->fd >= 0) close(t->fd);
    SSL_CTX_free(t->ctx);
    free(t);
}

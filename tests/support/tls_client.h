/* tls_client.h - a small blocking TLS client for the stories that talk to
 * a tls-port (hiredis 0.14 has no TLS), strict about how a connection
 * ends: reading to the end tells a clean close (the peer's close_notify)
 * from a truncation (the TCP connection closed without it), as OpenSSL 3
 * and Python's ssl with suppress_ragged_eofs=False do.
 *
 * Certificates: tls_certs.h (the client trusts vt-ca and checks the name
 * "localhost"). */
#ifndef VT_TLS_CLIENT_H
#define VT_TLS_CLIENT_H

#include <openssl/ssl.h>
#include <stdbool.h>

#include "tests/support/client.h"

typedef struct vt_tls_client {
    SSL_CTX *ctx;
    SSL *ssl;
    int fd;
} vt_tls_client;

/* How a connection ended (vt_tls_read_to_end). */
typedef enum vt_tls_end {
    VT_TLS_END_OPEN,         /* not within the deadline */
    VT_TLS_END_CLOSE_NOTIFY, /* SSL_read returned 0, SSL_ERROR_ZERO_RETURN: a clean close */
    VT_TLS_END_TRUNCATED,    /* the TCP connection ended without close_notify ("unexpected eof") */
    VT_TLS_END_ERROR,        /* another TLS error (an alert), or a reset */
} vt_tls_end;

/* Connect to 127.0.0.1:port and do the handshake (cert/key: a client
 * certificate of the set, or NULL). NULL with OpenSSL's reason in why. */
vt_tls_client *vt_tls_connect(int port, const char *cert, const char *key, char *why, size_t whylen);
/* Write all of p (false if the connection refused it). */
bool vt_tls_send(vt_tls_client *t, const void *p, size_t n);
bool vt_tls_send_str(vt_tls_client *t, const char *s);
/* Read until `count` whole replies are in b: false at the deadline or
 * the connection's end. */
bool vt_tls_read_replies(vt_tls_client *t, vt_buf *b, size_t count, int timeout_ms);
/* Read everything until the connection ends or timeout_ms passes,
 * appending the plaintext to b; says how it ended. */
vt_tls_end vt_tls_read_to_end(vt_tls_client *t, vt_buf *b, int timeout_ms);
const char *vt_tls_end_name(vt_tls_end e);
/* Close (our close_notify, best effort) and free. */
void vt_tls_free(vt_tls_client *t);

#endif

/* tls_certs.h - certificates for the TLS stories, made with the openssl CLI.
 *
 * One CA ("vt-ca") signs: `server` (SAN IP:127.0.0.1, DNS:localhost),
 * `expired` (valid in January 2020 only, same SAN), `wrong-name` (SAN
 * DNS:wrong.example, IP:10.9.9.9), `named` (SAN DNS:redis.example only,
 * for upstream-tls-server-name), `client` (a client certificate). Another
 * CA ("vt-other-ca") signs `unknown` (a server certificate, same SAN as
 * `server`) and `other-client`. EC P-256 keys, valid ten years (but
 * `expired`).
 *
 * They are made once, into /tmp/vt-certs-<uid>-v1 (built in a temp dir and
 * renamed into place, so parallel test processes never see half of it),
 * and reused by every later test process: making them costs half a second,
 * and every test of the integration-tls/ variant needs them. */
#ifndef VT_TLS_CERTS_H
#define VT_TLS_CERTS_H

typedef struct vt_certs {
    char dir[96];
} vt_certs;

/* The certificates (made on first use); NULL, with why on stderr, if
 * openssl failed. */
const vt_certs *vt_certs_get(void);
/* "<dir>/<name>" for a file of the set, e.g. vt_cert_path("server.crt")
 * (a static buffer per call slot: up to 8 results are valid at once). */
const char *vt_cert_path(const char *file);

#endif

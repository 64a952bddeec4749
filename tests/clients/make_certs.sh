#!/usr/bin/env bash
# make_certs.sh DIR - certificates for the client tests' TLS leg, made with the
# openssl CLI as tests/support/tls_certs.c does: a CA (ca.crt), the proxy's
# certificate from it for 127.0.0.1 (server.crt, server.key), and another CA
# (other-ca.crt) that a client trusts instead. DIR must exist.
set -euo pipefail
cd "$1"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1"; }
ca() {
    key "$1.key"
    openssl req -x509 -new -key "$1.key" -out "$1.crt" -days 3650 -subj "/CN=$2" -sha256
}
ca ca "verbproxy test CA"
ca other-ca "another CA"
printf '[srv]\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n' >ext.cnf
key server.key
openssl req -new -key server.key -out server.csr -subj "/CN=verbproxy"
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 3650 \
    -sha256 -extfile ext.cnf -extensions srv

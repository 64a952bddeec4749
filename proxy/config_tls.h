/* config_tls.h - the values of the TLS directives (tls-*, upstream-tls-*):
 * checked when the config is read (config.c), so a bad one stops start-up
 * with file:line, and read again when the contexts are built (tls.c).
 *
 * Settings-level, below the TLS sessions (proxy/net/tls.c) that use them:
 * nothing here knows a stream or a connection. */
#ifndef VP_CONFIG_TLS_H
#define VP_CONFIG_TLS_H

#include <stddef.h>

/* Check one tls directive's value when it is set: readable files and
 * directories, known protocol names, cipher lists OpenSSL takes. `name`
 * is the directive (its ending says what the value is). Returns 0, or -1
 * with err. */
int conf_tls_check(const char *name, const char *value, char *err, size_t errlen);

/* Redis's tls-protocols: words TLSv1 TLSv1.1 TLSv1.2 TLSv1.3 (any case;
 * "" is "TLSv1.2 TLSv1.3"). Returns the SSL_OP_NO_* of those not named, or
 * -1. */
long conf_tls_protocols(const char *words);

/* The reason OpenSSL gives for the last failure (`fallback` when it gives
 * none) into dst, and its error queue emptied (it is per thread: a stale
 * entry would be blamed on the next session). */
void conf_tls_reason(char *dst, size_t cap, const char *fallback);

#endif

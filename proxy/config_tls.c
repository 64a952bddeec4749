/* config_tls.c - the values of the TLS directives (see config_tls.h). */
#include "proxy/config_tls.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

void conf_tls_reason(char *dst, size_t cap, const char *fallback)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    snprintf(dst, cap, "%s", r ? r : fallback);
    ERR_clear_error();
}

long conf_tls_protocols(const char *s)
{
    static const struct {
        const char *name;
        long op;
    } known[] = {{"tlsv1", SSL_OP_NO_TLSv1},
                 {"tlsv1.1", SSL_OP_NO_TLSv1_1},
                 {"tlsv1.2", SSL_OP_NO_TLSv1_2},
                 {"tlsv1.3", SSL_OP_NO_TLSv1_3}};
    const size_t nknown = sizeof(known) / sizeof(known[0]);
    if (!*s) s = "TLSv1.2 TLSv1.3";
    long keep = 0;
    for (;;) {
        s += strspn(s, " \t");
        size_t n = strcspn(s, " \t");
        if (!n) break;
        size_t i = 0;
        while (i < nknown && !(strlen(known[i].name) == n && !strncasecmp(s, known[i].name, n)))
            i++;
        if (i == nknown) return -1;
        keep |= known[i].op;
        s += n;
    }
    if (!keep) return -1;
    return (SSL_OP_NO_TLSv1 | SSL_OP_NO_TLSv1_1 | SSL_OP_NO_TLSv1_2 | SSL_OP_NO_TLSv1_3) & ~keep;
}

static int conf_tls_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

int conf_tls_check(const char *name, const char *value, char *err, size_t errlen)
{
    if (!*value) return 0; /* unset */
    if (conf_tls_ends_with(name, "-file")) {
        FILE *f = fopen(value, "r");
        if (!f) {
            snprintf(err, errlen, "'%s': cannot read %s: %s", name, value, strerror(errno));
            return -1;
        }
        fclose(f);
    } else if (conf_tls_ends_with(name, "-dir")) {
        struct stat st;
        if (stat(value, &st) != 0 || !S_ISDIR(st.st_mode)) {
            snprintf(err, errlen, "'%s': %s is not a directory", name, value);
            return -1;
        }
    } else if (conf_tls_ends_with(name, "-protocols")) {
        if (conf_tls_protocols(value) < 0) {
            snprintf(err, errlen, "'%s' must list TLSv1, TLSv1.1, TLSv1.2 or TLSv1.3, got '%s'", name, value);
            return -1;
        }
    } else if (conf_tls_ends_with(name, "-ciphers") || conf_tls_ends_with(name, "-ciphersuites")) {
        SSL_CTX *ctx = SSL_CTX_new(TLS_method());
        if (!ctx) abort();
        int ok = conf_tls_ends_with(name, "-ciphers") ? SSL_CTX_set_cipher_list(ctx, value)
                                                      : SSL_CTX_set_ciphersuites(ctx, value);
        SSL_CTX_free(ctx);
        if (!ok) {
            char why[128];
            conf_tls_reason(why, sizeof(why), "refused");
            snprintf(err, errlen, "'%s' %s: %s", name, value, why);
            return -1;
        }
    }
    return 0;
}

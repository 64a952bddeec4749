/* redirect.c - -MOVED / -ASK / -TRYAGAIN / -CLUSTERDOWN (redirect.h). */
#include "proxy/route/redirect.h"

#include <string.h>

#include "proxy/route/hashslot.h"

/* The error's first word is `word`, followed by a space or nothing. */
static int first_word(const char *s, size_t len, const char *word)
{
    size_t wl = strlen(word);
    return len >= wl && memcmp(s, word, wl) == 0 && (len == wl || s[wl] == ' ');
}

/* A decimal in [0, max], no sign, no leading zero but "0". */
static int number(const char *s, size_t len, int max, int *out)
{
    if (len == 0 || len > 5 || (len > 1 && s[0] == '0')) return 0;
    int v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (s[i] - '0');
    }
    if (v > max) return 0;
    *out = v;
    return 1;
}

/* "<slot> <host>:<port>" after MOVED/ASK. */
static int target(const char *s, size_t len, redirect *out)
{
    const char *sp = memchr(s, ' ', len);
    if (!sp || !number(s, (size_t)(sp - s), HASHSLOT_COUNT - 1, &out->slot)) return 0;
    const char *addr = sp + 1;
    size_t alen = len - (size_t)(addr - s);
    const char *colon = NULL;
    for (size_t i = alen; i > 0; i--)
        if (addr[i - 1] == ':') {
            colon = addr + i - 1;
            break;
        }
    if (!colon || memchr(addr, ' ', alen)) return 0;
    if (!number(colon + 1, alen - (size_t)(colon + 1 - addr), 65535, &out->port) || out->port == 0) return 0;
    out->host = addr;
    out->hostlen = (size_t)(colon - addr);
    return 1;
}

redirect_kind redirect_parse(const char *err, size_t len, redirect *out)
{
    memset(out, 0, sizeof(*out));
    if (len && err[0] == '-') err++, len--;
    if (len >= 2 && err[len - 2] == '\r' && err[len - 1] == '\n') len -= 2;
    if (first_word(err, len, "MOVED")) {
        if (len > 6 && target(err + 6, len - 6, out)) out->kind = REDIRECT_MOVED;
    } else if (first_word(err, len, "ASK")) {
        if (len > 4 && target(err + 4, len - 4, out)) out->kind = REDIRECT_ASK;
    } else if (first_word(err, len, "TRYAGAIN")) {
        out->kind = REDIRECT_TRYAGAIN;
    } else if (first_word(err, len, "CLUSTERDOWN")) {
        out->kind = REDIRECT_CLUSTERDOWN;
    }
    if (out->kind == REDIRECT_NONE) memset(out, 0, sizeof(*out));
    return out->kind;
}

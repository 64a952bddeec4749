/* auth_users.c - the proxy's own users: the table `requirepass` and `user`
 * lines build, and the check of a password against it (see auth_users.h).
 * The gate that answers AUTH and HELLO with it is session/auth.c. */
#include "proxy/auth_users.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "proxy/buffer.h"

static void auth_hash(const char *p, size_t n, unsigned char out[AUTH_HASH_LEN])
{
    unsigned int len = AUTH_HASH_LEN;
    if (!EVP_Digest(p, n, out, &len, EVP_sha256(), NULL)) abort();
}

/* ---- the table ---- */

static auth_user *auth_find(const auth_table *t, const char *name, size_t n)
{
    for (int i = 0; i < t->nusers; i++)
        if (strlen(t->users[i].name) == n && memcmp(t->users[i].name, name, n) == 0) return &t->users[i];
    return NULL;
}

static auth_user *auth_add(auth_table *t, const char *name, size_t n)
{
    auth_user *u = vp_realloc(t->users, (size_t)(t->nusers + 1) * sizeof(*u));
    t->users = u;
    u = &t->users[t->nusers++];
    memset(u, 0, sizeof(*u));
    u->name = vp_malloc(n + 1);
    memcpy(u->name, name, n);
    u->name[n] = '\0';
    return u;
}

/* The first line creates the table with Redis's default user: on, nopass. */
static void auth_init(auth_table *t)
{
    if (t->configured) return;
    t->configured = 1;
    auth_user *d = auth_add(t, "default", 7);
    d->on = 1;
    d->nopass = 1;
}

static void auth_reset_passwords(auth_user *u)
{
    free(u->hashes);
    u->hashes = NULL;
    u->nhashes = 0;
    u->nopass = 0;
}

static int auth_find_hash(const auth_user *u, const unsigned char h[AUTH_HASH_LEN])
{
    for (int i = 0; i < u->nhashes; i++)
        if (memcmp(u->hashes[i], h, AUTH_HASH_LEN) == 0) return i;
    return -1;
}

static void auth_add_hash(auth_user *u, const unsigned char h[AUTH_HASH_LEN])
{
    u->nopass = 0; /* as Redis: a password ends nopass */
    if (auth_find_hash(u, h) >= 0) return;
    u->hashes = vp_realloc(u->hashes, (size_t)(u->nhashes + 1) * sizeof(*u->hashes));
    memcpy(u->hashes[u->nhashes++], h, AUTH_HASH_LEN);
}

static void auth_del_hash(auth_user *u, int i)
{
    memmove(u->hashes[i], u->hashes[i + 1], (size_t)(u->nhashes - i - 1) * AUTH_HASH_LEN);
    u->nhashes--;
}

int auth_requirepass(auth_table *t, const char *pass)
{
    auth_init(t);
    auth_user *d = &t->users[0];
    auth_reset_passwords(d);
    if (!*pass) {
        d->nopass = 1; /* requirepass "": no password, as Redis */
        return 0;
    }
    unsigned char h[AUTH_HASH_LEN];
    auth_hash(pass, strlen(pass), h);
    auth_add_hash(d, h);
    return 0;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1; /* Redis takes lowercase only */
}

/* `#<64 lowercase hex>` / `!<...>`: the hash itself. */
static int auth_parse_hash(const char *hex, unsigned char h[AUTH_HASH_LEN])
{
    if (strlen(hex) != 2 * AUTH_HASH_LEN) return -1;
    for (int i = 0; i < AUTH_HASH_LEN; i++) {
        int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return -1;
        h[i] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}

/* Rules that grant everything: the proxy enforces no permission, so these
 * change nothing it must check. (`reset` also clears the passwords and
 * turns the user off, below.) */
static int auth_rule_grants_all(const char *r)
{
    static const char *const all[] = {"~*",
                                      "%RW~*",
                                      "allkeys",
                                      "&*",
                                      "allchannels",
                                      "+@all",
                                      "allcommands",
                                      "sanitize-payload",
                                      "skip-sanitize-payload",
                                      "clearselectors"};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        if (!strcasecmp(r, all[i])) return 1;
    return 0;
}

static int auth_rule(auth_user *u, const char *r, char *err, size_t errlen)
{
    unsigned char h[AUTH_HASH_LEN];
    if (!strcasecmp(r, "on")) {
        u->on = 1;
    } else if (!strcasecmp(r, "off")) {
        u->on = 0;
    } else if (!strcasecmp(r, "nopass")) {
        auth_reset_passwords(u);
        u->nopass = 1;
    } else if (!strcasecmp(r, "resetpass")) {
        auth_reset_passwords(u);
    } else if (!strcasecmp(r, "reset")) {
        auth_reset_passwords(u);
        u->on = 0;
    } else if (r[0] == '>') {
        auth_hash(r + 1, strlen(r + 1), h);
        auth_add_hash(u, h);
    } else if (r[0] == '<' || r[0] == '!') {
        if (r[0] == '<')
            auth_hash(r + 1, strlen(r + 1), h);
        else if (auth_parse_hash(r + 1, h) < 0)
            goto bad_hash;
        int i = auth_find_hash(u, h);
        if (i < 0) {
            snprintf(err, errlen, "user '%s': '%c' removes a password the user does not have", u->name, r[0]);
            return -1;
        }
        auth_del_hash(u, i);
    } else if (r[0] == '#') {
        if (auth_parse_hash(r + 1, h) < 0) goto bad_hash;
        auth_add_hash(u, h);
    } else if (!auth_rule_grants_all(r)) {
        snprintf(
            err, errlen,
            "user '%s': ACL rule '%s' is not supported: verbproxy checks passwords only and cannot enforce "
            "a rule that restricts commands, keys or channels (leave that to Redis's own users)",
            u->name, r);
        return -1;
    }
    return 0;
bad_hash:
    snprintf(
        err, errlen,
        "user '%s': the password hash must be exactly 64 characters and contain only lowercase hexadecimal "
        "characters",
        u->name);
    return -1;
}

int auth_user_line(auth_table *t, const char *line, char *err, size_t errlen)
{
    auth_init(t);
    char *copy = vp_malloc(strlen(line) + 1);
    strcpy(copy, line);
    int rc = 0;
    char *save = NULL;
    char *name = strtok_r(copy, " \t", &save);
    if (!name) {
        snprintf(err, errlen, "'user' needs a name and rules: user NAME on >password");
        rc = -1;
    } else {
        auth_user *u = auth_find(t, name, strlen(name));
        if (!u) {
            u = auth_add(t, name, strlen(name)); /* new: off, no password, as Redis */
        } else if (u == &t->users[0]) {
            /* The default user, as Redis's ACLLoadConfiguredUsers: from
             * `reset` (`user default on` alone leaves it no password, not
             * nopass: nobody authenticates as it). */
            auth_reset_passwords(u);
            u->on = 0;
        }
        for (char *r = strtok_r(NULL, " \t", &save); r && rc == 0; r = strtok_r(NULL, " \t", &save))
            rc = auth_rule(u, r, err, errlen);
    }
    /* The password is in the line: leave no copy of it behind. */
    OPENSSL_cleanse(copy, strlen(line));
    free(copy);
    return rc;
}

void auth_free(auth_table *t)
{
    for (int i = 0; i < t->nusers; i++) {
        free(t->users[i].name);
        if (t->users[i].hashes)
            OPENSSL_cleanse(t->users[i].hashes, (size_t)t->users[i].nhashes * AUTH_HASH_LEN);
        free(t->users[i].hashes);
    }
    free(t->users);
    memset(t, 0, sizeof(*t));
}

int auth_default_nopass(const auth_table *t)
{
    return !t->configured || t->users[0].nopass;
}

int auth_default_authenticated(const auth_table *t)
{
    return !t->configured || (t->users[0].on && t->users[0].nopass);
}

int auth_check(const auth_table *t, const char *user, size_t ulen, const char *pass, size_t plen)
{
    const auth_user *u = t->configured ? auth_find(t, user, ulen) : NULL;
    if (!u || !u->on) return 0;
    if (u->nopass) return 1;
    unsigned char h[AUTH_HASH_LEN];
    auth_hash(pass, plen, h);
    /* Every hash is compared, in constant time each. */
    int ok = 0;
    for (int i = 0; i < u->nhashes; i++)
        ok |= CRYPTO_memcmp(u->hashes[i], h, AUTH_HASH_LEN) == 0;
    OPENSSL_cleanse(h, sizeof(h));
    return ok;
}

/* ---- judging a client's command ---- */

/* auth_users.h - the proxy's own users: who may talk to it (`requirepass`,
 * `user` lines), kept with the settings (vp_config.auth) and read by the
 * AUTH gate (session/auth.h).
 *
 * The subset of Redis's ACL kept is what decides a password: a user is on
 * or off, holds SHA-256 hashes of its passwords (as Redis stores them), or
 * takes any password (nopass). Permissions are not enforced by the proxy:
 * rules that only grant everything are accepted, rules that restrict are
 * refused at start (auth_user_line). The default user, always there, has
 * no password (nopass) unless `requirepass` or a `user default` line gives
 * it one, as in Redis.
 *
 * Checking a password hashes it and compares the hashes with
 * CRYPTO_memcmp, so the time taken says nothing of how much matched.
 *
 * Ownership: the table belongs to the settings (vp_config.auth) and is
 * freed by auth_free. */
#ifndef VP_AUTH_USERS_H
#define VP_AUTH_USERS_H

#include <stddef.h>

#define AUTH_HASH_LEN 32 /* SHA-256 */

typedef struct auth_user {
    char *name; /* owned */
    unsigned on : 1;
    unsigned nopass : 1;
    unsigned char (*hashes)[AUTH_HASH_LEN]; /* owned */
    int nhashes;
} auth_user;

typedef struct auth_table {
    auth_user *users; /* users[0] is "default" once any line created the table */
    int nusers;
    int configured; /* a `requirepass` or `user` line was given: the proxy answers AUTH itself */
} auth_table;

/* `requirepass PASS`: the default user's only password ("" = nopass, as
 * Redis). Returns 0. */
int auth_requirepass(auth_table *t, const char *pass);
/* `user NAME rule [rule ...]` (the rest of the line). A `user default` line
 * starts from `reset` (off, no password), as Redis's ACLLoadConfiguredUsers
 * does with a config file's. Returns 0, or -1 with a reason in err. */
int auth_user_line(auth_table *t, const char *line, char *err, size_t errlen);
void auth_free(auth_table *t);

/* Is the default user flagged nopass (Redis's test for AUTH <password>'s
 * "called without any password" and for protected mode)? True for a table
 * with no lines. */
int auth_default_nopass(const auth_table *t);
/* Is a client authenticated on connecting and after RESET (Redis's
 * clientSetDefaultAuth: the default user is nopass and not off)? True for
 * a table with no lines. */
int auth_default_authenticated(const auth_table *t);
/* Redis's ACLCheckUserCredentials: 1 if `user` exists, is on and takes
 * `pass`. */
int auth_check(const auth_table *t, const char *user, size_t ulen, const char *pass, size_t plen);

#endif

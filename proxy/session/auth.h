/* auth.h - the proxy's own users: who may talk to it, and how a client's
 * AUTH and HELLO ... AUTH are answered when the proxy has passwords of its
 * own (`requirepass`, `user` lines).
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
 * auth_judge is pure: the command's arguments in, a verdict and the exact
 * reply Redis 7.0 would give out (no I/O; client.c queues it).
 *
 * Ownership: the table belongs to the settings (vp_config.auth) and is
 * freed by auth_free. */
#ifndef VP_AUTH_H
#define VP_AUTH_H

#include <stddef.h>

#include "protocol/resp_request.h"

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

/* What to do with a command from a client of a proxy with its own users. */
typedef enum auth_verdict {
    AUTH_FORWARD,      /* as any command (the client may send it) */
    AUTH_ANSWER,       /* answer `reply` (never forwarded) */
    AUTH_FORWARD_HELLO /* authenticated: forward the HELLO without its AUTH option (auth_hello_strip) */
} auth_verdict;

#define AUTH_REPLY_MAX 320

/* Judge one command: AUTH, HELLO (checked in Redis 7.0's order: protocol
 * version, then each option as it is read), and anything else before
 * authentication: -NOAUTH (EXEC: -EXECABORT ... NOAUTH ...), but QUIT and
 * an HTTP request line, which go on as without a password, and RESET,
 * answered +RESET here (nothing of the client's reached Redis). *authed is
 * the client's state, set by a good AUTH and never cleared by a bad one
 * (as Redis). For AUTH_ANSWER, reply/len get the whole RESP line. */
auth_verdict auth_judge(const auth_table *t, int argc, const resp_arg *argv, int *authed, char *reply,
                        size_t *len);

/* The HELLO in argv without its AUTH user pass options, as a RESP request
 * into buf (cap bytes; HELLO with SETNAME fits in AUTH_HELLO_MAX). Returns
 * its length, 0 if it does not fit. */
#define AUTH_HELLO_MAX 1024
size_t auth_hello_strip(int argc, const resp_arg *argv, char *buf, size_t cap);

#endif

/* auth.h - the AUTH gate of a proxy with users of its own (auth_users.h):
 * how a client's AUTH and HELLO ... AUTH are answered, and what may pass
 * before them.
 *
 * auth_judge is pure: the command's arguments in, a verdict and the exact
 * reply Redis 7.0 would give out (no I/O; the session queues it). */
#ifndef VP_AUTH_H
#define VP_AUTH_H

#include <stddef.h>

#include "protocol/resp_request.h"
#include "proxy/auth_users.h"

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

/* upstream_defauth.c - learning that Redis's default user got a password.
 *
 * Redis authenticates a new connection at once when its default user needs
 * no password (`nopass`, and `on`), and keeps it authenticated when a
 * password is set later (CONFIG SET requirepass, ACL SETUSER default): only
 * connections made after that must AUTH. A shared connection opened before
 * the password would so let in every client that comes after, where Redis
 * alone would answer them -NOAUTH; its own -NOAUTH (up_learn_auth) never
 * comes.
 *
 * So, where the proxy has no upstream credentials (with them, it
 * authenticates for everyone by design), it asks `ACL GETUSER default`
 * silently with the output-limit probe (every UP_OUTPUT_PROBE_MS on each
 * shared connection), and right after a CONFIG SET or ACL command a client
 * sends through it. Once the default user needs a password, the clients
 * that connected after that was learned are taken for clients that have not
 * authenticated (upstream_client_needs_auth): they leave the shared
 * connection at their first command for one of their own, where Redis asks
 * them for the password. Clients connected before stay, as Redis keeps
 * their connections in. A password set behind the proxy's back lets new
 * clients in until the next probe (at most UP_OUTPUT_PROBE_MS).
 *
 * An answer that is an error (ACL denied to the default user, or renamed)
 * says nothing: logged once, and the proxy cannot tell
 * (docs/shared-connections.md#a-password-set-later says so). */
#include <stdlib.h>
#include <string.h>

#include "protocol/resp_write.h"
#include "proxy/log.h"
#include "proxy/upstream/upstream_node.h"
#include "proxy/upstream/upstream_internal.h"

static const char getuser_cmd[] =
    RESP_LIT_ARRAY(3) RESP_LIT_BULK(3, "ACL") RESP_LIT_BULK(7, "GETUSER") RESP_LIT_BULK(7, "default");

void upstream_probe_default_user(upstream_conn *up)
{
    /* (Without shared connections every client is on its own, as with
     * Redis; with credentials the proxy authenticates them all; once Redis
     * answers -NOAUTH there, up_learn_auth knows.) */
    if (up->srv->conf.shared_upstreams == 0 || up->srv->conf.upstream_auth || up->state == UPSTREAM_CLOSED ||
        !upstream_is_counting(up) || up->in_multi || (up->shared && upstream_requires_auth(up)))
        return;
    upstream_ask(up, getuser_cmd, sizeof(getuser_cmd) - 1, up_check_default_user, NULL, 0);
}

int upstream_client_needs_auth(const upstream_conn *up, unsigned long long client_id)
{
    if (!up->shared) return 0;
    if (upstream_requires_auth(up)) return 1;
    return up->node->default_needs_auth && client_id > up->node->default_auth_from;
}

/* One bulk string at *p (RESP2 `$len\r\n...\r\n`): its text, and *p past it. */
static int defauth_bulk(const char **p, const char *end, const char **s, size_t *len)
{
    if (*p >= end || **p != '$') return -1;
    char *q;
    long n = strtol(*p + 1, &q, 10);
    if (n < 0 || q + 2 > end || q[0] != '\r' || q + 2 + n + 2 > end) return -1;
    *s = q + 2;
    *len = (size_t)n;
    *p = q + 2 + n + 2;
    return 0;
}

/* Does a new connection need AUTH: the "flags" of ACL GETUSER default lack
 * "nopass" or hold "off" (Redis's clientSetDefaultAuth)? -1: unreadable. */
static int defauth_needs_auth(const char *p, size_t n)
{
    static const char key[] = RESP_LIT_BULK(5, "flags");
    const char *end = p + n;
    const char *at = memmem(p, n, key, sizeof(key) - 1);
    if (!at) return -1;
    at += sizeof(key) - 1;
    if (at >= end || (*at != '*' && *at != '~')) return -1; /* an array (a set in RESP3) */
    char *q;
    long count = strtol(at + 1, &q, 10);
    if (count < 0 || q + 2 > end || q[0] != '\r') return -1;
    at = q + 2;
    int nopass = 0, off = 0;
    for (long i = 0; i < count; i++) {
        const char *s;
        size_t len;
        if (defauth_bulk(&at, end, &s, &len) < 0) return -1;
        if (len == 6 && memcmp(s, "nopass", 6) == 0) nopass = 1;
        if (len == 3 && memcmp(s, "off", 3) == 0) off = 1;
    }
    return !nopass || off;
}

void up_check_default_user(upstream_conn *up, void *arg, const char *p, size_t n)
{
    (void)arg;
    upstream_node *node = up->node;
    if (n && p[0] == '-') {
        /* -NOAUTH on a client's own connection, or NOPERM, or no ACL: Redis
         * does not say here. */
        if (!node->default_probe_refused && up->shared)
            vp_log(VP_LOG_VERBOSE,
                   "upstream %s: cannot read ACL GETUSER default (%.*s): a password set on the default user "
                   "later is only noticed when a shared connection is opened again",
                   node->addr, (int)(n > 2 ? n - 2 : n), p);
        node->default_probe_refused |= up->shared;
        return;
    }
    int needs = defauth_needs_auth(p, n);
    if (needs < 0) {
        vp_log(VP_LOG_WARNING, "upstream %s: unexpected answer to ACL GETUSER default", node->addr);
        return;
    }
    if (needs && !node->default_needs_auth) {
        /* Every client connected so far stays in, as on Redis. */
        node->default_auth_from = up->srv->next_client_id;
        vp_log(VP_LOG_NOTICE,
               "upstream %s: the default user needs a password now: clients that connect from now on must "
               "AUTH (they get connections of their own); clients connected before stay in, as on Redis",
               node->addr);
    } else if (!needs && node->default_needs_auth) {
        vp_log(VP_LOG_NOTICE, "upstream %s: the default user needs no password again: new clients share",
               node->addr);
    }
    node->default_needs_auth = needs;
}

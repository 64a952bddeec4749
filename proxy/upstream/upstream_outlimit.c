/* upstream_outlimit.c - learning Redis's output limit for normal clients.
 *
 * `client-output-buffer-limit normal <hard> <soft> <seconds>` makes Redis
 * close a client whose unsent replies pass the limit. A shared connection is
 * one client to Redis: a single big reply to one of the clients on it would
 * cut every other one. The default (0 0 0) has no limit, and the proxy reads
 * a shared connection as fast as replies come, so sharing is safe there;
 * with a limit it is not, whatever the proxy does, since one reply alone may
 * pass it. So while the normal class has a limit nobody shares: every client
 * gets a connection of its own (existing shared clients move at their next
 * command), on which Redis applies the limit to that client alone, as
 * without the proxy. A log line says so, and `sharing_off` in VERBPROXY
 * STATS.
 *
 * The proxy asks with a silent `CONFIG GET client-output-buffer-limit`: on a
 * new shared connection before any client uses it, every
 * UP_OUTPUT_PROBE_MS on the open ones, and right after a CONFIG SET sent
 * through the proxy, on the same connection. An answer that is an error
 * (-NOAUTH before a client authenticates, CONFIG renamed or denied by an
 * ACL) changes nothing: clients that have not authenticated get nothing but
 * -NOAUTH from Redis, and where CONFIG is hidden the proxy cannot know
 * (docs/shared-connections.md#rediss-client-output-buffer-limit-normal
 * says so). */
#include <stdlib.h>
#include <string.h>

#include "protocol/resp_write.h"
#include "proxy/log.h"
#include "proxy/upstream/upstream_node.h"
#include "proxy/upstream/upstream_internal.h"

static void up_check_output_limit(upstream_conn *up, void *arg, const char *p, size_t n);

static const char probe_cmd[] = RESP_LIT_ARRAY(3) RESP_LIT_BULK(6, "CONFIG") RESP_LIT_BULK(3, "GET")
    RESP_LIT_BULK(26, "client-output-buffer-limit");

void upstream_probe_output_limit(upstream_conn *up)
{
    /* (Without shared connections nobody shares anyway.) */
    if (up->srv->conf.shared_upstreams == 0 || up->state == UPSTREAM_CLOSED || !upstream_is_counting(up) ||
        up->in_multi)
        return;
    upstream_ask(up, probe_cmd, sizeof(probe_cmd) - 1, up_check_output_limit, NULL, 0);
}

static void up_probe_each(upstream_conn *up, void *any)
{
    if (up->state != UPSTREAM_READY || up->setting_up) return;
    upstream_probe_output_limit(up); /* written with the next shared flush */
    upstream_probe_default_user(up); /* (upstream_defauth.c) */
    *(int *)any = 1;
}

void upstream_cron(vp_server *srv, upstream_node *primary)
{
    uint64_t now = uv_now(srv->loop);
    if (now - srv->output_probed_at < UP_OUTPUT_PROBE_MS) return;
    srv->output_probed_at = now;
    int any = 0;
    upstream_each_shared(srv, UP_EACH_SHARED, up_probe_each, &any);
    /* While nobody shares, a shared connection is kept (or opened again)
     * only to ask, so the proxy notices when the limit is lifted. */
    if (!any && srv->sharing_off && srv->conf.shared_upstreams > 0) upstream_shared(srv, primary, 0);
}

/* The numbers after "normal" in the value: hard and soft limit (bytes). */
static int outlimit_parse_normal(const char *v, size_t n, long long *hard, long long *soft)
{
    const char *end = v + n;
    for (const char *p = v; p + 6 <= end; p++) {
        if ((p == v || p[-1] == ' ') && strncasecmp(p, "normal", 6) == 0 && p + 6 < end && p[6] == ' ') {
            char tmp[128];
            size_t len = (size_t)(end - (p + 7));
            if (len >= sizeof(tmp)) len = sizeof(tmp) - 1;
            memcpy(tmp, p + 7, len);
            tmp[len] = '\0';
            char *q;
            *hard = strtoll(tmp, &q, 10);
            *soft = strtoll(q, &q, 10);
            return 0;
        }
    }
    return -1;
}

/* The value in `*2 $26 client-output-buffer-limit $N <value>` (RESP2; a
 * RESP3 map has the same bytes after its header). */
static int outlimit_value(const char *p, size_t n, const char **v, size_t *vlen)
{
    const char *name = memmem(p, n, "client-output-buffer-limit\r\n$", 29);
    if (!name) return -1;
    const char *len_at = name + 29, *end = p + n;
    char *q;
    long len = strtol(len_at, &q, 10);
    if (q + 2 > end || q[0] != '\r' || len < 0 || q + 2 + len > end) return -1;
    *v = q + 2;
    *vlen = (size_t)len;
    return 0;
}

/* The answer to our output-limit probe: decide whether clients may share. */
static void up_check_output_limit(upstream_conn *up, void *arg, const char *p, size_t n)
{
    (void)arg;
    vp_server *srv = up->srv;
    const char *v;
    size_t vlen;
    long long hard = 0, soft = 0;
    if (n && p[0] == '-') {
        /* Redis would not say: nothing changes (see the top of the file). */
        vp_log(VP_LOG_DEBUG, "upstream %s: cannot read client-output-buffer-limit: %.*s", srv->conf.upstream,
               (int)(n > 2 ? n - 2 : n), p);
    } else if (outlimit_value(p, n, &v, &vlen) < 0 || outlimit_parse_normal(v, vlen, &hard, &soft) < 0) {
        vp_log(VP_LOG_WARNING, "upstream %s: unexpected answer to CONFIG GET client-output-buffer-limit",
               srv->conf.upstream);
    } else {
        int off = hard > 0 || soft > 0;
        if (off && !srv->sharing_off)
            vp_log(VP_LOG_WARNING,
                   "upstream %s has client-output-buffer-limit normal %lld %lld: one client's reply over it "
                   "would close a shared connection under every client on it, so every client gets a "
                   "connection of its own until the limit is 0 0 0",
                   srv->conf.upstream, hard, soft);
        else if (!off && srv->sharing_off)
            vp_log(VP_LOG_NOTICE,
                   "upstream %s: client-output-buffer-limit normal is 0 0 0 again: clients share",
                   srv->conf.upstream);
        srv->sharing_off = off;
        srv->stats.sharing_off = (unsigned long long)off;
    }
    if (up->setting_up) {
        /* The answer was all a new shared connection waited for: its
         * clients go on after this read (up_on_read). */
        up->setting_up = 0;
        up->announce_ready = 1;
    }
}

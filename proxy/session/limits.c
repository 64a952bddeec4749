#include "proxy/session/limits.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "proxy/buffer.h"
#include "proxy/log.h"

/* Redis lowers the limit it asks for by this much per refused try. */
#define LIMITS_DECR_STEP 16

/* Descriptors a client takes when it is accepted: its socket, and with
 * shared-upstreams 0 its upstream connection too. */
static long long limits_fds_per_client(const vp_config *conf)
{
    return conf->shared_upstreams == 0 ? 2 : 1;
}

/* The highest soft limit at most `want` (and the hard limit) the kernel
 * takes, trying lower by LIMITS_DECR_STEP as Redis does (the hard limit
 * may be over what the kernel allows: fs.nr_open). Returns the limit now in
 * force; *why gets the last refusal's errno. */
static rlim_t limits_raise_soft(struct rlimit *lim, rlim_t want, int *why)
{
    rlim_t old = lim->rlim_cur;
    rlim_t best = want;
    if (lim->rlim_max != RLIM_INFINITY && best > lim->rlim_max) best = lim->rlim_max;
    while (best > old) {
        struct rlimit l = {.rlim_cur = best, .rlim_max = lim->rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &l) == 0) return best;
        *why = errno;
        if (best < LIMITS_DECR_STEP) break;
        best -= LIMITS_DECR_STEP;
    }
    return old;
}

int limits_adjust_open_files(vp_server *srv, char *err, size_t errlen)
{
    vp_config *conf = &srv->conf;
    long long per = limits_fds_per_client(conf);
    /* Enough for every client to have a connection of its own. */
    rlim_t maxfiles = (rlim_t)(conf->maxclients * 2 + conf->shared_upstreams + LIMITS_RESERVED_FDS);
    struct rlimit lim;
    rlim_t got;
    int why = 0;
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0) {
        vp_log(VP_LOG_WARNING, "Unable to obtain the current NOFILE limit (%s), assuming 1024",
               strerror(errno));
        got = 1024;
    } else if (lim.rlim_cur >= maxfiles) {
        got = lim.rlim_cur;
    } else {
        got = limits_raise_soft(&lim, maxfiles, &why);
        if (got > lim.rlim_cur)
            vp_log(VP_LOG_NOTICE,
                   "Increased maximum number of open files to %llu (it was originally set to %llu).",
                   (unsigned long long)got, (unsigned long long)lim.rlim_cur);
    }
    long long fds = (long long)got - LIMITS_RESERVED_FDS - conf->shared_upstreams;
    srv->client_fds = fds;
    if (fds < per) {
        snprintf(
            err, errlen,
            "Your current 'ulimit -n' of %llu is not enough for the proxy to start. Please increase your "
            "open file limit to at least %llu.",
            (unsigned long long)got, (unsigned long long)maxfiles);
        return -1;
    }
    if (fds / per < conf->maxclients) {
        long long old = conf->maxclients;
        conf->maxclients = fds / per;
        vp_log(VP_LOG_WARNING,
               "You requested maxclients of %lld requiring at least %llu max file descriptors.", old,
               (unsigned long long)maxfiles);
        if (why)
            vp_log(VP_LOG_WARNING, "Proxy can't set maximum open files to %llu because of OS error: %s.",
                   (unsigned long long)maxfiles, strerror(why));
        vp_log(
            VP_LOG_WARNING,
            "Current maximum open files is %llu. maxclients has been reduced to %lld to compensate for low "
            "ulimit (%s). If you need higher maxclients increase 'ulimit -n'.",
            (unsigned long long)got, conf->maxclients,
            per == 2 ? "two descriptors per client with shared-upstreams 0" : "one descriptor per client");
    }
    return 0;
}

/* Descriptors clients use: their sockets and their own upstream
 * connections (the shared ones are set aside in client_fds). */
static long long limits_fds_in_use(const vp_server *srv)
{
    return (long long)srv->stats.clients_connected + (long long)srv->own_upstreams;
}

int limits_may_accept(const vp_server *srv)
{
    return (long long)srv->stats.clients_connected < srv->conf.maxclients &&
           limits_fds_in_use(srv) + limits_fds_per_client(&srv->conf) <= srv->client_fds;
}

int limits_may_open_own(const vp_server *srv)
{
    return limits_fds_in_use(srv) + 1 <= srv->client_fds;
}

typedef union limits_refused {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
} limits_refused;

static void limits_refused_closed(uv_handle_t *h)
{
    free(h);
}

void limits_refuse(vp_server *srv, uv_stream_t *listener, int is_unix, int tls)
{
    limits_refused *r = vp_malloc(sizeof(*r));
    int rc = is_unix ? uv_pipe_init(srv->loop, &r->pipe, 0) : uv_tcp_init(srv->loop, &r->tcp);
    if (rc < 0) {
        free(r);
        return; /* libuv keeps the connection queued; the next accept tries again */
    }
    srv->stats.rejected_connections++;
    if (uv_accept(listener, &r->stream) == 0 && !tls) {
        /* A best effort, as Redis's: never wait for a client we refuse. */
        uv_buf_t b = uv_buf_init((char *)LIMITS_MAXCLIENTS_ERR, sizeof(LIMITS_MAXCLIENTS_ERR) - 1);
        (void)uv_try_write(&r->stream, &b, 1);
    }
    uv_close(&r->handle, limits_refused_closed);
}

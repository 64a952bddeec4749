#include "proxy/ops/lifecycle.h"

#include <signal.h>

#include "proxy/session/client.h"
#include "proxy/route/cluster.h"
#include "proxy/ops/http_admin.h"
#include "proxy/log.h"
#include "proxy/route/sentinel.h"
#include "proxy/upstream/upstream.h"

static const char *signal_name(int signum)
{
    switch (signum) {
    case SIGINT:
        return "SIGINT";
    case SIGTERM:
        return "SIGTERM";
    case SIGQUIT:
        return "SIGQUIT";
    default:
        return "SIGHUP";
    }
}

static unsigned long count_clients(const vp_server *srv)
{
    unsigned long n = 0;
    for (const struct client_session *c = srv->clients; c; c = c->next)
        n++;
    return n;
}

static void close_if_open(uv_handle_t *h)
{
    if (h->type != UV_UNKNOWN_HANDLE && !uv_is_closing(h)) uv_close(h, NULL);
}

/* Close every handle: uv_run returns once the last close callback ran,
 * so every session and upstream connection is freed. */
static void lifecycle_stop(vp_lifecycle *lc, const char *why)
{
    if (lc->phase == LIFECYCLE_STOPPED) return;
    vp_server *srv = lc->srv;
    lc->phase = LIFECYCLE_STOPPED;
    vp_log(VP_LOG_NOTICE, "%s: exiting", why);
    listener_close(lc->listener);
    admin_http_close(srv); /* (open through the drain: /readyz says "draining") */
    while (srv->clients)
        client_close(srv->clients);
    upstream_close_shared(srv);
    sentinel_stop(srv);
    cluster_stop(srv);
    for (int i = 0; i < lc->nowned; i++)
        close_if_open(lc->owned[i]);
    stats_log(&srv->stats);
    close_if_open((uv_handle_t *)&lc->sigint);
    close_if_open((uv_handle_t *)&lc->sigterm);
    close_if_open((uv_handle_t *)&lc->sigquit);
    close_if_open((uv_handle_t *)&lc->sighup);
    close_if_open((uv_handle_t *)&lc->timer);
    close_if_open((uv_handle_t *)&lc->check);
}

static void on_flush_bound(uv_timer_t *t)
{
    vp_lifecycle *lc = t->data;
    vp_log(VP_LOG_WARNING, "drain: %lu client(s) still owed replies after %d ms; closing them",
           count_clients(lc->srv), LIFECYCLE_FLUSH_MS);
    lifecycle_stop(lc, "drain over");
}

/* The end of the wait: nobody new comes in, each client gets what it is
 * owed for what it sent, then is closed (client_drain_close). */
static void lifecycle_flush(vp_lifecycle *lc)
{
    vp_server *srv = lc->srv;
    lc->phase = LIFECYCLE_FLUSHING;
    listener_close(lc->listener);
    vp_log(VP_LOG_NOTICE,
           "drain: shutdown-timeout (%llds) reached: %lu client(s) get the replies they are owed, "
           "then are closed",
           (long long)srv->conf.shutdown_timeout, count_clients(srv));
    struct client_session *next;
    for (struct client_session *c = srv->clients; c; c = next) {
        next = c->next;
        client_drain_close(c); /* (may close c, never another one) */
    }
    uv_timer_stop(&lc->timer);
    uv_timer_start(&lc->timer, on_flush_bound, LIFECYCLE_FLUSH_MS, 0);
}

static void on_shutdown_timeout(uv_timer_t *t)
{
    lifecycle_flush(t->data);
}

/* After every loop turn while draining: the last client gone ends it. */
static void on_check(uv_check_t *h)
{
    vp_lifecycle *lc = h->data;
    if (lc->srv->clients == NULL)
        lifecycle_stop(lc, lc->phase == LIFECYCLE_FLUSHING ? "drain: every owed reply written"
                                                           : "drain: no client left");
}

static void lifecycle_drain(vp_lifecycle *lc, const char *signame)
{
    vp_server *srv = lc->srv;
    lc->phase = LIFECYCLE_DRAINING;
    srv->draining = 1;
    vp_log(VP_LOG_NOTICE,
           "received %s: draining: not ready any more, still serving %lu client(s) (and new ones) until they "
           "leave, or for shutdown-timeout %llds; send it again or SIGQUIT to exit at once",
           signame, count_clients(srv), (long long)srv->conf.shutdown_timeout);
    if (!srv->clients) {
        lifecycle_stop(lc, "drain: no client left");
        return;
    }
    uv_check_start(&lc->check, on_check);
    if (srv->conf.shutdown_timeout == 0)
        lifecycle_flush(lc);
    else
        uv_timer_start(&lc->timer, on_shutdown_timeout, (uint64_t)srv->conf.shutdown_timeout * 1000, 0);
}

static void on_signal(uv_signal_t *h, int signum)
{
    vp_lifecycle *lc = h->data;
    if (lc->phase == LIFECYCLE_STOPPED) return;
    if (signum == SIGHUP) {
        reload_apply(lc->srv, lc->source);
        return;
    }
    if (signum == SIGQUIT || lc->phase != LIFECYCLE_SERVING) {
        char why[64];
        snprintf(why, sizeof(why), "received %s%s", signal_name(signum), signum != SIGQUIT ? " again" : "");
        lifecycle_stop(lc, why);
        return;
    }
    lifecycle_drain(lc, signal_name(signum));
}

static void signal_start(vp_lifecycle *lc, uv_signal_t *h, int signum)
{
    uv_signal_init(lc->srv->loop, h);
    h->data = lc;
    uv_signal_start(h, on_signal, signum);
}

void lifecycle_init(vp_lifecycle *lc, vp_server *srv, vp_listener *listener, const vp_conf_source *source)
{
    lc->srv = srv;
    lc->listener = listener;
    lc->source = source;
    lc->phase = LIFECYCLE_SERVING;
    signal_start(lc, &lc->sigint, SIGINT);
    signal_start(lc, &lc->sigterm, SIGTERM);
    signal_start(lc, &lc->sigquit, SIGQUIT);
    signal_start(lc, &lc->sighup, SIGHUP);
    uv_timer_init(srv->loop, &lc->timer);
    lc->timer.data = lc;
    uv_check_init(srv->loop, &lc->check);
    lc->check.data = lc;
    /* (The check handle keeps nothing alive; the timer runs only while
     * draining.) */
}

void lifecycle_own(vp_lifecycle *lc, uv_handle_t *h)
{
    if (lc->nowned < LIFECYCLE_MAX_OWNED) lc->owned[lc->nowned++] = h;
}

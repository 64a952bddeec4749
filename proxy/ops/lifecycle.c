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
    close_if_open((uv_handle_t *)&lc->min_drain);
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
    uv_timer_stop(&lc->min_drain);
    uv_timer_stop(&lc->timer);
    uv_timer_start(&lc->timer, on_flush_bound, LIFECYCLE_FLUSH_MS, 0);
}

static void on_shutdown_timeout(uv_timer_t *t)
{
    lifecycle_flush(t->data);
}

/* After every loop turn while draining: the last client gone ends it,
 * once shutdown-min-drain has passed (the flush ends it regardless). */
static void on_check(uv_check_t *h)
{
    vp_lifecycle *lc = h->data;
    if (lc->srv->clients != NULL) return;
    if (lc->phase == LIFECYCLE_FLUSHING)
        lifecycle_stop(lc, "drain: every owed reply written");
    else if (lc->min_drain_over)
        lifecycle_stop(lc, "drain: no client left");
}

/* shutdown-min-drain has passed: from now on the last client leaving ends
 * the drain, and if none is left it ends here (the check handle would run
 * only after the loop's next wait for I/O, which with no client may last
 * until shutdown-timeout). */
static void on_min_drain(uv_timer_t *t)
{
    vp_lifecycle *lc = t->data;
    lc->min_drain_over = 1;
    if (lc->phase == LIFECYCLE_DRAINING && lc->srv->clients == NULL)
        lifecycle_stop(lc, "drain: shutdown-min-drain over, no client left");
}

static void lifecycle_drain(vp_lifecycle *lc, const char *signame)
{
    vp_server *srv = lc->srv;
    long long timeout = srv->conf.shutdown_timeout, min_drain = srv->conf.shutdown_min_drain;
    lc->phase = LIFECYCLE_DRAINING;
    srv->draining = 1;
    /* A minimum drain at or above shutdown-timeout is cut to it: the
     * timeout's flush ends the drain whatever the minimum said. */
    lc->min_drain_over = min_drain == 0;
    char min_note[160] = "";
    if (min_drain > 0 && min_drain < timeout)
        snprintf(min_note, sizeof(min_note), " (and for shutdown-min-drain %llds at least, clients or not)",
                 min_drain);
    else if (min_drain > 0)
        snprintf(min_note, sizeof(min_note),
                 " (and, shutdown-min-drain %llds being no shorter than shutdown-timeout, until the timeout)",
                 min_drain);
    vp_log(VP_LOG_NOTICE,
           "received %s: draining: not ready any more, still serving %lu client(s) (and new ones) until they "
           "leave%s, or for shutdown-timeout %llds; send it again or SIGQUIT to exit at once",
           signame, count_clients(srv), min_note, timeout);
    if (!srv->clients && lc->min_drain_over) {
        lifecycle_stop(lc, "drain: no client left");
        return;
    }
    uv_check_start(&lc->check, on_check);
    if (timeout == 0) {
        lifecycle_flush(lc);
        return;
    }
    uv_timer_start(&lc->timer, on_shutdown_timeout, (uint64_t)timeout * 1000, 0);
    if (min_drain > 0 && min_drain < timeout)
        uv_timer_start(&lc->min_drain, on_min_drain, (uint64_t)min_drain * 1000, 0);
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
    uv_timer_init(srv->loop, &lc->min_drain);
    lc->min_drain.data = lc;
    uv_check_init(srv->loop, &lc->check);
    lc->check.data = lc;
    /* (The check handle keeps nothing alive; the timer runs only while
     * draining.) */
}

void lifecycle_own(vp_lifecycle *lc, uv_handle_t *h)
{
    if (lc->nowned < LIFECYCLE_MAX_OWNED) lc->owned[lc->nowned++] = h;
}

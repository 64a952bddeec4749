/* client_upstream.c - a client and its upstream connections: a shared
 * one while it holds no connection state, its own once it needs some
 * (client_move_to_own, after every reply owed on the shared one is in),
 * and the events of either (ready, failed, lost, drained) as the
 * callbacks upstream.h's owner and client ops receive (client_register).
 * Also: clients leaving a retired shared connection, and a sentinel
 * primary's move. */
#include "proxy/session/client.h"

#include <stdio.h>
#include <string.h>

#include "proxy/session/introspect.h"
#include "proxy/route/cluster.h"
#include "proxy/session/limits.h"
#include "proxy/log.h"
#include "proxy/route/route.h"
#include "proxy/session/client_internal.h"

static void client_move_to_own(client_session *c);

/* ---- which upstream ---- */

/* The address its requests go to, for the errors and logs that name it:
 * cluster mode's node of the command at hand, else `upstream`. */
const char *client_upstream_name(const client_session *c)
{
    return c->srv->cluster && c->route_node ? c->route_node->addr : c->srv->conf.upstream;
}

/* How many replies a client on a shared connection may be owed now. One
 * while its replies wait unwritten (the kernel pushed back) or may be big:
 * then the proxy holds at most buffer-limit (client_flush stops reading it
 * there) plus one reply for it. */
size_t client_share_window(const client_session *c)
{
    if (c->big_replies || outq_backed_up(&c->out)) return 1;
    return c->share_window;
}

/* A client held for its window (owed_wait) goes on once half of it is in. */
int client_owed_released(const client_session *c)
{
    return c->pending_len <= client_share_window(c) / 2;
}

/* May this command go on the client's shared connection now? If not, the
 * client is set to wait (its replies owed, its move to a connection of its
 * own) and the command is parsed again when that is over. */
int client_may_share(client_session *c, int argc, const resp_arg *argv)
{
    if (c->up->retired) {
        /* A reload replaced its shared connection: what it sends next goes
         * on the new one once what it sent here is answered (not before:
         * it could run first). client_round_end resumes it. */
        c->settling = 1;
        return 0;
    }
    if (c->pending_len >= client_share_window(c)) {
        c->owed_wait = 1; /* client_round_end and client_on_written resume */
        client_stop_reading(c);
        return 0;
    }
    if (upstream_client_needs_auth(c->up, c->id) && !cmd_is_quit(argc, argv) &&
        !introspect_is_own_command(&argv[0])) {
        /* Redis requires AUTH and the shared connection has none (no
         * upstream-pass): Redis applies its limits for connections that
         * have not authenticated to the shared one as a whole. Since the
         * CVE-2025-21605 fix (Redis 7.0.15 in Debian, 7.2.8, 7.4.3) that
         * includes closing it once more than 1 KiB of its replies wait
         * unwritten, which a burst of about thirty -NOAUTH answers to
         * several clients reaches. On a connection of its own each client
         * meets those limits alone, as without the proxy. (QUIT and the
         * proxy's own VERBPROXY commands are answered here.) The same for
         * a client that connected after the default user got a password:
         * the shared connection, made before, is in, and Redis would ask
         * this client for the password (upstream_defauth.c). */
        client_want_own(c); /* (client_move_to_own marks it upstream_noauth) */
        return 0;
    }
    if (cmd_is_select_zero(argc, argv)) return 1; /* answered by client_dispatch */
    if (c->slow_reader || c->big_replies || c->srv->sharing_off || cmd_needs_own_connection(argc, argv)) {
        client_want_own(c);
        return 0;
    }
    /* SWAPDB: a NOSCRIPT retry of a verb before it must not run after it. */
    if (c->pending_len && cmd_arg_is(&argv[0], "swapdb")) {
        c->settling = 1;
        return 0;
    }
    return 1;
}

static void client_detach_each(upstream_conn *up, void *arg)
{
    client_session *c = arg;
    if (up != c->up) upstream_detach_client(up, c);
}

/* Cluster mode: a client may be owed replies on any node's shared
 * connections (client_route): it leaves them all. */
static void client_detach_cluster(client_session *c)
{
    vp_server *srv = c->srv;
    if (!srv->cluster || !c->used_shared) return;
    cluster_detach_client(srv, c); /* (a request waiting to go again after -TRYAGAIN) */
    upstream_each_shared(srv, UP_EACH_SHARED | UP_EACH_RETIRED, client_detach_each, c);
}

/* Leave its upstream connection: close its own, or just stop being owed
 * anything on a shared one. */
void client_release_upstream(client_session *c)
{
    upstream_side_detach(c->srv, c);
    client_detach_cluster(c);
    cnodes_close_parked(c);
    if (!c->up) return;
    if (c->up->shared) {
        upstream_detach_client(c->up, c);
        if (c->shared_wait) c->up->waiters--;
    } else {
        upstream_close(c->up);
    }
    c->up = NULL;
    c->shared_wait = c->output_held = c->owed_wait = 0;
}

/* A connection of its own for a client that was on a shared one first:
 * what the shared one stood for goes ahead of its commands, on every such
 * connection it opens (a failed connect is retried with its next command). */
static upstream_conn *client_open_own(client_session *c)
{
    upstream_conn *up = upstream_open(c->srv, route_node_for(c->srv, c->route_node), c, &client_own_owner, c);
    /* WAIT counts replicas that have the connection's last write: make
     * that at least everything it wrote on the shared one (a PUBLISH is
     * replicated and changes nothing). */
    static const char sync_write[] = RESP_LIT_ARRAY(3) RESP_LIT_BULK(7, "PUBLISH")
        RESP_LIT_BULK(19, "__verbproxy__:moved") RESP_LIT_BULK(0, "");
    if (c->used_shared) upstream_forward_silent(up, sync_write, sizeof(sync_write) - 1);
    /* Its name and library info, kept from the shared connection. */
    for (int i = 0; i < 3; i++)
        if (c->setters[i].len) upstream_forward_silent(up, c->setters[i].data, c->setters[i].len);
    return up;
}

/* No descriptor left for a connection of its own: the waiting command gets
 * what Redis says to a connection it cannot take, then the close. */
void client_refuse_no_descriptor(client_session *c)
{
    vp_log(VP_LOG_VERBOSE, "client %llu %s: no descriptor left for its own upstream connection; closing",
           c->id, c->addr);
    c->srv->stats.rejected_connections++;
    c->srv->metrics.rejected_no_descriptor++;
    client_queue_local(c, LIMITS_MAXCLIENTS_ERR, sizeof(LIMITS_MAXCLIENTS_ERR) - 1);
    c->settling = 0;
    c->input_done = 1;
    c->close_when_done = 1;
}

/* Its own connection, or a shared one while it needs no state. NULL when
 * it was refused for want of a descriptor. */
upstream_conn *client_connect(client_session *c)
{
    if (c->own_upstream) return client_open_own(c);
    if (c->srv->conf.shared_upstreams == 0)
        return upstream_open(c->srv, route_node_for(c->srv, c->route_node), c, &client_own_owner, c);
    if (c->srv->sharing_off) {
        /* Redis limits a client's output (upstream_outlimit.c). */
        if (!limits_may_open_own(c->srv)) {
            client_refuse_no_descriptor(c);
            return NULL;
        }
        c->own_upstream = 1;
        return client_open_own(c);
    }
    return route_shared_for(c->srv, c->route_node, c->id);
}

/* Redis takes it for a connection that has not authenticated (see
 * upstream_noauth). Replies to what it sent before say nothing about that
 * (client_learn_upstream_auth). */
void client_mark_upstream_noauth(client_session *c)
{
    c->upstream_noauth = 1;
    c->noauth_seq = client_next_seq(c);
}

/* Leave the shared connection for one of its own. Only once nothing is
 * owed on the shared one: what the client sent there has then run. */
static void client_move_to_own(client_session *c)
{
    /* Leaving a shared connection Redis has not authenticated, it has not
     * authenticated either (an AUTH would have moved it first), whatever
     * moved it: its first command, or a first request streamed in pieces
     * (client_stream_partial). Nor has it where the default user got a
     * password since the shared connection was made: on Redis the client
     * would be in, but its new connection is not (upstream_defauth.c). */
    if (c->up && c->up->shared && upstream_node_requires_auth(c->up)) client_mark_upstream_noauth(c);
    client_release_upstream(c);
    if (!limits_may_open_own(c->srv)) {
        client_refuse_no_descriptor(c);
        return;
    }
    c->own_upstream = 1;
    c->settling = 0;
    c->up = client_open_own(c);
    c->srv->stats.clients_pinned++;
    vp_log(VP_LOG_DEBUG, "client %llu %s: moved to its own upstream connection", c->id, c->addr);
}

/* The command at hand needs a connection of its own (it stays in the
 * buffer and is parsed again there). Returns after moving, or after
 * marking the client to move once its replies are in (client_round_end). */
void client_want_own(client_session *c)
{
    if (c->pending_len) {
        c->settling = 1;
        return;
    }
    client_move_to_own(c);
}

/* Off a shared connection a reload retired, owing nothing there: its next
 * command takes the new one (client_connect). Replies it is owed on the
 * side connection stay owed. */
void client_leave_retired(client_session *c)
{
    if (c->shared_wait) c->up->waiters--;
    c->up = NULL;
    c->shared_wait = c->owed_wait = c->settling = 0;
}

/* ---- upstream events ---- */

void client_upstream_ready(client_session *c)
{
    client_start_reading(c);
    client_process_input(c);
    client_maybe_finish(c); /* a client that left while we connected */
}

void client_upstream_failed(client_session *c, const char *reason)
{
    c->up = NULL;
    /* Cluster mode: its retry must not go back to the node that failed
     * (a killed primary) for good: the next command's own node, from the
     * map as it is then (client_route), once a fetch followed the failure. */
    if (c->srv->cluster) c->route_node = NULL;
    c->shared_wait = c->output_held = c->owed_wait = 0; /* nothing of that connection's holds it now */
    snprintf(c->up_error, sizeof(c->up_error), "%s", reason);
    /* One line per second at most: in an outage every client hits this.
     * (None for a refused AUTH: up_auth_answered logs each change once.) */
    uint64_t now = uv_now(c->srv->loop);
    int auth_refused = c->srv->upstream_auth_failure[0] && strcmp(reason, c->srv->upstream_auth_failure) == 0;
    if (!auth_refused &&
        (c->srv->unavailable_logged_at == 0 || now - c->srv->unavailable_logged_at >= 1000)) {
        c->srv->unavailable_logged_at = now;
        vp_log(VP_LOG_WARNING, "upstream %s unavailable: %s", client_upstream_name(c), reason);
    }
    /* Every request already here gets the error now; later ones retry. */
    c->answering_unavailable = 1;
    client_process_input(c);
    c->answering_unavailable = 0;
    client_start_reading(c);
    client_maybe_finish(c);
}

/* Redis refused the connection (upstream_refusal): the client's oldest
 * command still waiting gets that error as its reply, as it would from
 * Redis directly. */
static void client_take_refusal(client_session *c)
{
    size_t n;
    const char *err = c->up ? upstream_refusal(c->up, &n) : NULL;
    if (!err) return;
    for (size_t i = 0; i < c->pending_len; i++) {
        if (pending_at(c, i)->kind == PENDING_WAITING) {
            client_reply(c, c->pending_seq + i, err, n, 1);
            return;
        }
    }
    if (c->pending_len == 0) outq_add_copy(&c->out, err, n); /* none waiting: as Redis, before the close */
}

void client_upstream_lost(client_session *c, const char *reason)
{
    client_take_refusal(c);
    client_release_upstream(c);
    vp_log(VP_LOG_VERBOSE,
           "client %llu %s: upstream connection lost (%s); closing after delivering what arrived", c->id,
           c->addr, reason);
    /* What the upstream never answered will not be answered: drop those
     * pending replies (and the local replies queued behind them), deliver the rest. */
    while (c->pending_len)
        pending_pop(c);
    c->input_done = 1;
    c->close_when_done = 1;
    c->settling = 0; /* a held command will not be sent now */
    client_flush(c);
}

int client_can_become_pipe(const client_session *c)
{
    if (c->closing) return 0;
    for (size_t i = 0; i < c->pending_len; i++) {
        const client_pending *s = &c->pending[(c->pending_head + i) % c->pending_cap];
        if (s->kind != PENDING_WAITING || s->replace) return 0;
        if (i > 0 && s->len) return 0; /* held behind an unanswered one */
    }
    return 1;
}

void client_become_pipe(client_session *c, const char *why)
{
    vp_log(VP_LOG_WARNING,
           "client %llu %s: its upstream sent a reply that is not RESP (%s); the rest of the session is a "
           "byte pipe, as after SYNC",
           c->id, c->addr, why);
    if (c->pending_len && pending_at(c, 0)->len) {
        client_pending *s = pending_at(c, 0); /* a reply held to be patched: as Redis sent it */
        outq_add_copy(&c->out, s->data, s->len);
    }
    while (c->pending_len)
        pending_pop(c);
    c->opaque = 1;
    c->settling = 0; /* a command held back goes now, as bytes */
    client_start_reading(c);
    client_process_input(c);
}

void client_upstream_drained(client_session *c)
{
    if (c->closing) return;
    if (!c->input_done) {
        client_start_reading(c);
        client_process_input(c);
    }
    client_maybe_finish(c); /* a half-closed client held back may be done now */
}

/* (Each walks every client: these are rare events. A call may close the
 * client at hand, never another one.) */

void client_shared_ready(vp_server *srv, upstream_conn *up)
{
    client_session *next;
    for (client_session *c = srv->clients; c; c = next) {
        next = c->next;
        if (c->up == up) client_upstream_ready(c);
    }
}

/* Cluster mode: a client may be owed replies on a shared connection it is
 * not on (c->up went on to another node's). */
static int client_elsewhere(const upstream_conn *up, const up_entry *e)
{
    return up->srv->cluster && e->client && e->client->up != up;
}

/* A shared connection that failed to connect: requests of clients now on
 * another node's connection were never sent; each gets the error a failed
 * connect gives, in its pending reply. */
static void client_fail_elsewhere(upstream_conn *up, const char *why)
{
    char msg[384];
    size_t n = resp_write_errorf(msg, sizeof(msg), "ERR upstream unavailable: %s: %s", up->node->addr, why);
    for (size_t i = 0; i < upstream_owed(up); i++) {
        const up_entry *e = upstream_owed_at(up, i);
        if (!client_elsewhere(up, e)) continue;
        client_reply(e->client, e->seq, msg, n, 1); /* (only queues) */
        client_touch(e->client);
    }
}

void client_shared_failed(vp_server *srv, upstream_conn *up, const char *reason)
{
    if (srv->cluster) cluster_suspect(srv, reason);
    client_fail_elsewhere(up, reason);
    client_session *next;
    for (client_session *c = srv->clients; c; c = next) {
        next = c->next;
        if (c->up == up) client_upstream_failed(c, reason);
    }
}

/* A client owed replies is closed after what arrived, as on a connection of
 * its own; one owed nothing never notices and takes a new connection with
 * its next command. */
void client_shared_lost(vp_server *srv, upstream_conn *up, const char *reason)
{
    /* Redis refused the connection (maxclients): the clients waiting for it
     * to be set up get its error and the close, as Redis would give them. */
    size_t refusal_len;
    int refused = upstream_refusal(up, &refusal_len) != NULL;
    /* Lost before its setup was answered (the upstream accepts and closes:
     * a load balancer without a backend, a TLS-only port): for its clients,
     * whose requests were held, a failed connect; their next request tries
     * again, so they never make the proxy reconnect in a loop. */
    int set_up = upstream_was_set_up(up);
    if (srv->cluster) {
        cluster_suspect(srv, reason);
        if (!set_up) client_fail_elsewhere(up, reason);
        /* A client owed a reply here but now on another node's connection
         * is closed after what arrived, as one on this connection. */
        for (size_t i = 0; set_up && i < upstream_owed(up); i++) {
            const up_entry *e = upstream_owed_at(up, i);
            if (client_elsewhere(up, e)) e->client->on_lost = 1;
        }
    }
    client_session *next;
    for (client_session *c = srv->clients; c; c = next) {
        next = c->next;
        if (c->on_lost) {
            c->on_lost = 0;
            client_upstream_lost(c, reason);
            continue;
        }
        if (c->up != up) continue;
        if (!set_up && !refused) {
            client_upstream_failed(c, reason);
        } else if (c->pending_len || refused) {
            client_upstream_lost(c, reason);
        } else {
            /* Its next command (maybe one already read) takes a new one. */
            client_release_upstream(c);
            client_start_reading(c);
            client_process_input(c);
            client_maybe_finish(c);
        }
    }
}

void client_shared_retired(vp_server *srv, upstream_conn *up, int all)
{
    client_session *next;
    for (client_session *c = srv->clients; c; c = next) {
        next = c->next;
        if (c->up != up || (!all && (c->pending_len || c->shared_wait))) continue;
        client_leave_retired(c);
        client_start_reading(c);
        client_process_input(c);
        client_maybe_finish(c);
    }
}

void client_shared_drained(vp_server *srv, upstream_conn *up)
{
    client_session *next;
    for (client_session *c = srv->clients; c && up->waiters; c = next) {
        next = c->next;
        if (c->up != up || !c->shared_wait) continue;
        c->shared_wait = 0;
        up->waiters--;
        client_upstream_drained(c);
    }
}

/* Sentinel mode: the primary moved (srv->conf.upstream* names the new one).
 * Every client that sent commands through the old primary is closed once
 * it has its replies, as Sentinel's CLIENT KILL TYPE normal on the
 * demoted node closes a direct client: writes the old primary took after
 * the promotion are lost, and a client moved on silently would see its
 * own writes vanish (an INCR going back). One that never sent anything
 * moves on. The shared connections are retired (upstream_retire_shared). */
void client_primary_moved(vp_server *srv)
{
    client_session *next;
    for (client_session *c = srv->clients; c; c = next) {
        next = c->next; /* (client_drain_close may close c, never another) */
        if (c->up && c->up->shared && client_used_shared(c)) client_drain_close(c);
    }
    /* Clients owing the retired connections nothing move now; the ones
     * left on them have requests in flight on the old primary. */
    upstream_retire_shared(srv);
    srv->upstream_auth_failure[0] = '\0';
    for (client_session *c = srv->clients; c; c = next) {
        next = c->next; /* (client_drain_close may close c, never another) */
        if (c->up && (!c->up->shared || c->up->retired)) client_drain_close(c);
    }
}

/* ---- what upstream connections call (upstream.h's callbacks) ---- */

/* A client's own connection tells the client. */
static void own_ready(upstream_conn *up, void *arg)
{
    (void)up;
    client_upstream_ready(arg);
}

static void own_failed(upstream_conn *up, void *arg, const char *why)
{
    (void)up;
    client_upstream_failed(arg, why);
}

static void own_lost(upstream_conn *up, void *arg, const char *why)
{
    (void)up;
    client_upstream_lost(arg, why);
}

static void own_drained(upstream_conn *up, void *arg)
{
    (void)up;
    client_upstream_drained(arg);
}

static void own_read_done(upstream_conn *up, void *arg)
{
    (void)up;
    client_round_end(arg);
}

const upstream_owner client_own_owner = {.ready = own_ready,
                                         .failed = own_failed,
                                         .lost = own_lost,
                                         .drained = own_drained,
                                         .read_done = own_read_done};

/* A shared connection tells every client on it (arg: the server). */
static void shared_ready(upstream_conn *up, void *arg)
{
    client_shared_ready(arg, up);
}

static void shared_failed(upstream_conn *up, void *arg, const char *why)
{
    client_shared_failed(arg, up, why);
}

static void shared_lost(upstream_conn *up, void *arg, const char *why)
{
    client_shared_lost(arg, up, why);
}

static void shared_drained(upstream_conn *up, void *arg)
{
    client_shared_drained(arg, up);
}

static void shared_read_done(upstream_conn *up, void *arg)
{
    (void)up;
    client_flush_touched(arg);
}

static void shared_retired(upstream_conn *up, void *arg, int closing)
{
    client_shared_retired(arg, up, closing);
}

static const upstream_owner client_shared_owner = {.ready = shared_ready,
                                                   .failed = shared_failed,
                                                   .lost = shared_lost,
                                                   .drained = shared_drained,
                                                   .read_done = shared_read_done,
                                                   .retired = shared_retired};

static upstream_hold_mark *client_hold_mark(client_session *c)
{
    return &c->hold;
}

static unsigned long long client_id_of(const client_session *c)
{
    return c->id;
}

static const upstream_client_ops client_upstream_ops = {.next_seq = client_next_seq,
                                                        .reply = client_reply,
                                                        .push = client_push,
                                                        .touch = client_touch,
                                                        .can_become_pipe = client_can_become_pipe,
                                                        .become_pipe = client_become_pipe,
                                                        .lost = client_upstream_lost,
                                                        .hold_mark = client_hold_mark,
                                                        .id = client_id_of,
                                                        .wrap_refused = client_conveyor_wrap_refused};

static const route_session_ops client_route_ops = {.flush_touched = client_flush_touched,
                                                   .flush_deferred = client_flush_deferred,
                                                   .cluster_ready = client_cluster_ready,
                                                   .cluster_failed = client_cluster_failed,
                                                   .split_part = client_split_part};

void client_register(void)
{
    upstream_set_session(&client_upstream_ops, &client_shared_owner);
    route_set_session(&client_route_ops);
}

/* upstream_pool.c - each node's shared connections: opened on demand
 * (upstream_shared), written once per loop iteration or sooner
 * (upstream_flush_shared, upstream_flush_early, the batch hold of
 * upstream_hold.c), retired by a reload or a primary's move and closed
 * once they owe nothing, and the one walk over them all
 * (upstream_each_shared). See upstream.h, "Own and shared connections". */
#include "proxy/upstream/upstream.h"

#include <string.h>

#include "proxy/verbs/verbs.h"
#include "proxy/log.h"
#include "proxy/upstream/upstream_node.h"
#include "proxy/upstream/upstream_internal.h"

static void up_keep_verbs(upstream_conn *up, verb_table *old, int *kept)
{
    if (!up || up->state == UPSTREAM_CLOSED || up->vt || up->verbs_in_flight == 0) return;
    up->vt = old;
    old->refs++;
    (*kept)++;
}

int upstream_keep_verbs(vp_server *srv, verb_table *old)
{
    int kept = 0;
    for (upstream_conn *up = up_open_list(); up; up = up->all_next)
        if (up->srv == srv) up_keep_verbs(up, old, &kept);
    return kept;
}

/* A retired connection that owes nothing more closes; its clients take a
 * new shared connection with their next command. */
void up_retired_check(upstream_conn *up)
{
    if (!up->retired || up->state == UPSTREAM_CLOSED || up->fifo_len) return;
    vp_log(VP_LOG_DEBUG, "upstream %s: a connection replaced by the reload owes nothing more: closed",
           up_addr(up));
    if (up->owner && up->owner->retired) up->owner->retired(up, up->owner_arg, 1);
    upstream_close(up);
}

static void up_retire(upstream_conn *up)
{
    vp_server *srv = up->srv;
    up->retired = 1;
    up->retired_next = srv->retired;
    srv->retired = up;
    if (up->owner && up->owner->retired) up->owner->retired(up, up->owner_arg, 0);
    up_retired_check(up);
}

/* Off its node: new requests go to a new connection. */
void up_leave_node(upstream_conn *up)
{
    if (up->side && up->node->side == up)
        up->node->side = NULL;
    else if (up->shared && !up->side && up->node->shared[up->shared_index] == up)
        up->node->shared[up->shared_index] = NULL;
}

static void up_retire_each(upstream_conn *up, void *arg)
{
    (void)arg;
    up_leave_node(up);
    up_retire(up);
}

void upstream_retire_shared(vp_server *srv)
{
    upstream_each_shared(srv, UP_EACH_SHARED | UP_EACH_SIDE, up_retire_each, NULL);
}

void upstream_each_on_node(upstream_node *node, unsigned which, upstream_each_fn fn, void *arg)
{
    for (int i = 0; (which & UP_EACH_SHARED) && i < VP_MAX_SHARED_UPSTREAMS; i++)
        if (node->shared[i]) fn(node->shared[i], arg);
    if ((which & UP_EACH_SIDE) && node->side) fn(node->side, arg);
}

void upstream_each_shared(vp_server *srv, unsigned which, upstream_each_fn fn, void *arg)
{
    for (int n = 0; n < srv->nnodes; n++)
        upstream_each_on_node(srv->nodes[n], which, fn, arg);
    upstream_conn *next;
    for (upstream_conn *up = (which & UP_EACH_RETIRED) ? srv->retired : NULL; up; up = next) {
        next = up->retired_next; /* (a close unlinks it) */
        fn(up, arg);
    }
}

static void up_note_requires_auth(upstream_conn *up, void *any)
{
    if (upstream_requires_auth(up)) *(int *)any = 1;
}

int upstream_node_requires_auth(const upstream_conn *up)
{
    if (up->node->default_needs_auth) return 1; /* (upstream_defauth.c) */
    int any = 0;
    upstream_each_on_node(up->node, UP_EACH_SHARED, up_note_requires_auth, &any);
    return any;
}

static void up_note_ready(upstream_conn *up, void *any)
{
    if (upstream_is_ready(up)) *(int *)any = 1;
}

int upstream_node_is_ready(upstream_node *node)
{
    int any = 0;
    upstream_each_on_node(node, UP_EACH_SHARED, up_note_ready, &any);
    return any;
}

/* ---- shared connections ---- */

static const char no_evict[] =
    RESP_LIT_ARRAY(3) RESP_LIT_BULK(6, "CLIENT") RESP_LIT_BULK(8, "NO-EVICT") RESP_LIT_BULK(2, "on");

upstream_conn *upstream_shared(vp_server *srv, upstream_node *node, unsigned long long client_id)
{
    int i = (int)(client_id % (unsigned long long)srv->conf.shared_upstreams);
    if (!node->shared[i]) {
        upstream_conn *up = upstream_open(srv, node, NULL, up_shared_owner_of(), srv);
        up->shared = 1;
        up->shared_index = i;
        node->shared[i] = up;
        /* Many clients' replies queue on it: under maxmemory-clients Redis
         * must not take it for one big client and evict it. (Refused by a
         * Redis before 7.0 or an ACL: then nothing changes.) */
        upstream_forward_silent(up, no_evict, sizeof(no_evict) - 1);
        /* The scripts' dialect, and whether Redis has AGGREGATE COUNT
         * (upstream_server.c), known before any client's command. */
        upstream_ask_server(up);
        /* Clients use it once Redis said whether they may share
         * (upstream_outlimit.c). */
        up->setting_up = 1;
        upstream_probe_output_limit(up);
    }
    return node->shared[i];
}

/* A shared connection's queue is written before the loop iteration ends
 * once this much has gathered, so that Redis works on the first part while
 * the proxy still reads the rest from clients (with one write per iteration
 * the proxy, Redis and the clients took turns; on 2 cores, 8 KiB gave 8-15%
 * more throughput at -P 16 for the same proxy CPU, and changes nothing at
 * -P 1, where an iteration gathers less). */
#define UP_FLUSH_EARLY_BYTES 8192

/* Writes a shared connection's queue, unless UP_SHARED_BATCHES earlier
 * writes are still being answered: then what gathers goes when the oldest
 * is (up_on_read). While Redis works through one write the next one grows,
 * so the writes stay large however the loop iterations fall; without the
 * limit, each iteration that found a client or two ready wrote them alone,
 * and at -P 16 such rounds cost the proxy and Redis twice the CPU per
 * request. */
static int up_shared_write(upstream_conn *up)
{
    if (up->flush_error) return up->flush_error;
    if (up->nbatches == UP_SHARED_BATCHES) return 0;
    int rc = upstream_flush(up);
    if (rc == 0 && up->sent != up->marked) {
        up->batch_end[up->nbatches++] = up->sent;
        up->marked = up->sent;
        up_hold_written(up);
    }
    return rc;
}

void upstream_flush_early(upstream_conn *up)
{
    if (up->state != UPSTREAM_READY || outq_size(&up->out) < UP_FLUSH_EARLY_BYTES) return;
    int rc = up_shared_write(up);
    if (rc < 0) up->flush_error = rc;
}

/* Write a shared connection's queue and let the clients held back for its
 * backlog go on. */
void up_shared_flush(upstream_conn *up)
{
    size_t resume_below = (size_t)up->srv->conf.buffer_limit / 2;
    if (up_hold_wait(up, UP_FLUSH_EARLY_BYTES)) return; /* more is due: the timerfd wakes the loop */
    int rc = up_shared_write(up);
    /* What the clients held back send goes now too, before the loop waits,
     * and again while the kernel takes it all, for a few rounds (then the
     * replies to what went wake the loop again, and reading them has its
     * turn). */
    for (int round = 0; round < 4 && rc == 0 && up->waiters && up->owner && up->owner->drained &&
                        outq_size(&up->out) <= resume_below;
         round++) {
        up->owner->drained(up, up->owner_arg);
        if (up->state != UPSTREAM_READY) return;
        rc = up_shared_write(up);
    }
    if (rc < 0) up_lost(up, uv_strerror(rc));
}

/* (A retired one may hold requests queued before the reload retired it,
 * in this very iteration: they go too.) */
static void up_flush_each(upstream_conn *up, void *arg)
{
    (void)arg;
    if (up->state == UPSTREAM_READY && (!up->retired || outq_size(&up->out))) up_shared_flush(up);
}

void upstream_flush_shared(vp_server *srv)
{
    upstream_each_shared(srv, UP_EACH_ALL, up_flush_each, NULL);
}

static void up_close_each(upstream_conn *up, void *arg)
{
    (void)arg;
    upstream_close(up);
}

void upstream_close_shared(vp_server *srv)
{
    upstream_each_shared(srv, UP_EACH_ALL, up_close_each, NULL);
    up_hold_close();
}

/* A shared connection made while Redis required AUTH never authenticated:
 * Redis let it in while the password was gone, and would shut it out again
 * the moment one is set, with the clients that came meanwhile, which Redis
 * alone keeps in (their connections, made without a password, are). RESET
 * makes Redis take it for the default user now, which needs no password:
 * in for good, as a connection made now (upstream_defauth.c then asks the
 * clients that come after a new password for it). RESET also ends
 * CLIENT NO-EVICT and clears the name: NO-EVICT goes again, and a name on
 * the shared connection is only ever for the moment. Sent after the read,
 * not from inside it: the replies' queue must not change under it. */
void up_reauth_after_read(upstream_conn *up)
{
    static const char reset[] = RESP_LIT_ARRAY(1) RESP_LIT_BULK(5, "RESET");
    up->reauth_pending = 0;
    if (up->state != UPSTREAM_READY || !upstream_is_counting(up)) return;
    upstream_forward_silent(up, reset, sizeof(reset) - 1);
    upstream_forward_silent(up, no_evict, sizeof(no_evict) - 1);
}

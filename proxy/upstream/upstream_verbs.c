/* upstream_verbs.c - the verbs' side of an upstream connection: loading
 * the scripts ahead of a connection's first verb, sending a checked verb
 * call as EVALSHA (EVAL inside MULTI or uncounted), retrying a NOSCRIPT in
 * place, and the replies the proxy has Redis make for it (argument errors
 * inside MULTI or in an uncounted stream). The FIFO and reply routing are
 * upstream.c's; see upstream.h for the model. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/verbs/verbs.h"
#include "proxy/cmd/command.h"
#include "proxy/log.h"
#include "proxy/upstream/upstream.h"
#include "proxy/upstream/upstream_internal.h"

/* ---- loading scripts, NOSCRIPT ---- */

/* The entry of the SCRIPT LOAD of verb `verb`, just queued in the
 * connection's dialect (checked against that dialect's SHA-1 even if a
 * HELLO answered since changes the connection's). */
static void up_script_load_sent(upstream_conn *up, int verb)
{
    intptr_t arg = (intptr_t)verb * VERB_DIALECTS + (intptr_t)up->dialect;
    up_push_ask(up, up_check_script_load, (void *)arg, UP_ASK_REFUSAL);
}

/* Every script's SCRIPT LOAD (one static buffer: no copy), after a
 * NOSCRIPT: Redis runs them before the retried EVALSHAs behind them. */
static void up_send_loads(upstream_conn *up)
{
    const verb_table *t = upstream_verbs(up);
    outq_add(&up->out, t->load_cmds[up->dialect], t->load_len[up->dialect]);
    for (int i = 0; i < t->nloads; i++)
        up_script_load_sent(up, t->load_ids[i]);
    up->scripts_loaded = UP_SCRIPTS_ALL;
    up->scripts_epoch = up->srv->scripts_epoch;
    up->srv->stats.script_loads += (unsigned long long)t->nloads;
}

/* The bit of a script in scripts_loaded. */
static unsigned long long up_script_bit(int load_index)
{
    return load_index < 63 ? 1ULL << load_index : 1ULL << 63;
}

/* The script of verb `v` is loaded on this connection, since the last
 * flush: else its SCRIPT LOAD goes just ahead of the EVALSHA that needs it
 * (one static buffer: no copy), so Redis runs it first. A connection
 * loads only the scripts it calls, each once: a new connection's first
 * verb costs Redis one script to compile, not all of them. */
void up_ensure_script(upstream_conn *up, const verb_def *v)
{
    const verb_table *t = upstream_verbs(up);
    if (up->scripts_epoch != up->srv->scripts_epoch) {
        up->scripts_loaded = 0;    /* flushed since, or a reload renumbered the scripts: */
        up_forget_load_errors(up); /* (kept by load index) */
        up->scripts_epoch = up->srv->scripts_epoch;
    }
    int i = t->script_of[v->id];
    unsigned long long bit = up_script_bit(i);
    if (up->scripts_loaded & bit) return;
    if (i >= 63) {
        up_send_loads(up); /* past the 63rd: all at once */
        return;
    }
    outq_add(&up->out, t->load_cmds[up->dialect] + t->load_off[up->dialect][i], t->load_size[up->dialect][i]);
    up_script_load_sent(up, t->load_ids[i]);
    up->scripts_loaded |= bit;
    up->srv->stats.script_loads++;
}

void up_forget_load_errors(upstream_conn *up)
{
    for (int i = 0; i < up->nload_errors; i++)
        free(up->load_errors[i]);
    free(up->load_errors);
    up->load_errors = NULL;
    up->nload_errors = 0;
}

const char *up_load_error(const upstream_conn *up, int verb, size_t *len)
{
    if (!up->load_errors) return NULL;
    int i = upstream_verbs(up)->script_of[verb];
    const char *e = i < up->nload_errors ? up->load_errors[i] : NULL;
    if (e && len) *len = strlen(e);
    return e;
}

/* Keep the server's refusal of script `i`'s SCRIPT LOAD (NULL: it loaded):
 * the calls of it behind the load meet NOSCRIPT, and get this instead. */
static void up_keep_load_error(upstream_conn *up, int i, const char *p, size_t n)
{
    if (!p && (!up->load_errors || i >= up->nload_errors || !up->load_errors[i])) return;
    if (i >= up->nload_errors) {
        int count = upstream_verbs(up)->nloads;
        if (i >= count) return;
        char **grown = realloc(up->load_errors, (size_t)count * sizeof(*grown));
        if (!grown) abort();
        memset(grown + up->nload_errors, 0, (size_t)(count - up->nload_errors) * sizeof(*grown));
        up->load_errors = grown;
        up->nload_errors = count;
    }
    free(up->load_errors[i]);
    up->load_errors[i] = NULL;
    if (!p) return;
    char *copy = malloc(n + 1);
    if (!copy) abort();
    memcpy(copy, p, n);
    copy[n] = '\0';
    up->load_errors[i] = copy;
}

void up_check_script_load(upstream_conn *up, void *arg, const char *p, size_t n)
{
    int verb = (int)((intptr_t)arg / VERB_DIALECTS);
    verb_dialect dialect = (verb_dialect)((intptr_t)arg % VERB_DIALECTS);
    verb_table *t = up->vt ? up->vt : &up->srv->verbs; /* (marks `broken`) */
    const verb_def *v = t->verbs[verb];
    const char *sha = verbs_sha(v, dialect);
    if (n == 47 && memcmp(p, "$40\r\n", 5) == 0 && memcmp(p + 5, sha, 40) == 0) {
        up_keep_load_error(up, t->script_of[verb], NULL, 0);
        return;
    }
    if (n > 0 && p[0] == '-') {
        /* Not loaded: the next call of it loads again. */
        up->scripts_loaded &= ~up_script_bit(t->script_of[verb]);
        if (n >= 7 && memcmp(p, "-NOAUTH", 7) == 0) {
            /* The client has not authenticated: its EVALSHA meets the same. */
            vp_log(VP_LOG_VERBOSE, "upstream %s: SCRIPT LOAD %s refused: %.*s", up_addr(up), v->name,
                   (int)(n > 2 ? n - 2 : n), p);
            return;
        }
        /* A script the server cannot load (its Lua, an ACL, OOM): the
         * calls behind it answer the server's refusal, not NOSCRIPT. */
        up->srv->stats.script_load_failures++;
        up_keep_load_error(up, t->script_of[verb], p, n);
        if (!up->load_error_logged)
            vp_log(VP_LOG_WARNING,
                   "upstream %s (%s %s): SCRIPT LOAD of verb %s refused, and the verb answered with it: %.*s "
                   "(logged once per connection; counted in verbproxy_script_load_failures_total)",
                   up_addr(up), up->server_name[0] ? up->server_name : "server",
                   up->server_version[0] ? up->server_version : "of unknown version", v->name,
                   (int)(n > 2 ? n - 2 : n), p);
        up->load_error_logged = 1;
        return;
    }
    int is_sha = n == 47 && memcmp(p, "$40\r\n", 5) == 0 && p[45] == '\r' && p[46] == '\n';
    if (!is_sha) {
        /* Not an answer to SCRIPT LOAD at all: something is off on this
         * connection, not in the script. Load again before the next verb. */
        up->scripts_loaded = 0;
        vp_log(VP_LOG_WARNING, "upstream %s: unexpected answer to SCRIPT LOAD %s: %.*s", up_addr(up), v->name,
               (int)(n > 64 ? 64 : n), p);
        return;
    }
    if (!t->broken[verb])
        vp_log(VP_LOG_WARNING,
               "upstream %s: SCRIPT LOAD of verb %s answered %.*s, not the pinned SHA-1 %s: "
               "verb %s is disabled",
               up_addr(up), v->name, 40, p + 5, sha, v->name);
    for (int i = 0; i < t->count; i++) /* every entry that runs this script */
        if (strcmp(t->verbs[i]->sha, v->sha) == 0) t->broken[i] = 1;
}

/* A SCRIPT FLUSH forwarded through the proxy: every upstream connection
 * (own and shared) must load the scripts again before its next verb. Each
 * connection notes the epoch its loads were sent at, so a flush marks them
 * all by bumping one number (0 is never an epoch). Nothing is loaded now: a
 * connection that never runs a verb again costs Redis no script. */
static unsigned up_bump_scripts_epoch(vp_server *srv)
{
    if (++srv->scripts_epoch == 0) srv->scripts_epoch = 1;
    return srv->scripts_epoch;
}

/* The counted entry of the request just forwarded (a RAW_START may follow it:
 * an EXEC that ends counting). */
static up_entry *up_last_answered(upstream_conn *up)
{
    for (size_t i = up->fifo_len; i > 0; i--) {
        up_entry *e = up_fifo_at(up, i - 1);
        if (e->kind != UP_RAW_START) return e;
    }
    return NULL;
}

void upstream_scripts_flushed(upstream_conn *up, cmd_kind kind, int answered)
{
    if (kind == CMD_PLAIN && up->in_multi) {
        up->multi_flush = 1; /* it runs at EXEC */
        return;
    }
    int flushes = kind == CMD_PLAIN || (kind == CMD_EXEC && up->multi_flush);
    up->multi_flush = 0;
    if (!flushes) return;
    unsigned epoch = up_bump_scripts_epoch(up->srv);
    up_entry *e = answered ? up_last_answered(up) : NULL;
    if (e) e->flush_epoch = epoch; /* up_script_flush_answered */
}

void up_script_flush_answered(upstream_conn *up, unsigned epoch)
{
    /* Redis has run the flush. Another connection may have sent its loads
     * after the flush was sent here but had them run before it: bump again,
     * so every connection loads once more. Not this one, if its loads went
     * behind the flush on this very connection and no flush came since. */
    vp_server *srv = up->srv;
    int loaded_behind = up->scripts_loaded && up->scripts_epoch == epoch && srv->scripts_epoch == epoch;
    up_bump_scripts_epoch(srv);
    if (loaded_behind) up->scripts_epoch = srv->scripts_epoch;
}

/* The oldest entry, a verb, was answered NOSCRIPT (the script cache was
 * flushed, or Redis restarted or failed over under us): load the scripts
 * and send the same EVALSHA again. Its pending reply keeps its place in the client's
 * queue, so replies to later commands wait behind it. A later command that
 * runs before the retry is a reordering, counted when the retry is
 * answered (up_note_answered); a later verb answered NOSCRIPT too did not
 * run, so a pipeline of verbs after a flush is not one. The retry would be
 * queued in a transaction or go uncounted if a MULTI (or an uncounted mode)
 * had been sent after the verb; upstream_must_settle_verbs holds those back
 * until the verbs are answered, so this is only a safety net: the client
 * then gets the NOSCRIPT. */
int up_retry_verb(upstream_conn *up)
{
    up_entry old = *up_fifo_at(up, 0);
    if (up->in_multi || up->raw_tx) {
        vp_log(VP_LOG_VERBOSE, "upstream %s: NOSCRIPT for %s inside a later MULTI: passed on", up_addr(up),
               upstream_verbs(up)->verbs[old.verb]->name);
        return 0;
    }
    up->srv->stats.noscript_recoveries++;
    vp_log(VP_LOG_VERBOSE, "upstream %s: NOSCRIPT for %s: reloading and retrying", up_addr(up),
           upstream_verbs(up)->verbs[old.verb]->name);
    /* Its request is the oldest kept one: copy it to the tail, then let the
     * old entry go. */
    vp_buf_reserve(&up->kept, old.keep);
    size_t off = up->kept.len;
    memcpy(up->kept.data + off, up->kept.data + up->kept_head, old.keep);
    up->kept.len += old.keep;
    up_fifo_pop(up);
    /* One reload serves every verb sent before it: after a flush a whole
     * pipeline of verbs comes back NOSCRIPT, and their retries all go
     * behind the same loads. */
    if (old.sent >= up->reloaded_from) {
        up->reloaded_from = up->sent;
        up_send_loads(up);
    }
    /* Cluster mode: a verb -ASKed here needs its ASKING again, right
     * before it (after the loads: any other command clears the flag). */
    if (old.asked) {
        static const char asking_cmd[] = RESP_LIT_ARRAY(1) RESP_LIT_BULK(6, "ASKING");
        upstream_forward_silent(up, asking_cmd, sizeof(asking_cmd) - 1);
    }
    outq_add_ref(&up->out, &up->kept, off, old.keep);
    up_entry *e = up_fifo_push(up, old.client, UP_VERB);
    e->seq = old.seq;
    e->keep = old.keep;
    e->verb = old.verb;
    e->retries = (short)(old.retries + 1);
    e->later_ran = old.later_ran;
    e->redirects = old.redirects;
    e->tries = old.tries;
    e->asked = old.asked;
    if (old.retries == 0) up->retries_in_flight++;
    return 1;
}

void up_note_answered(upstream_conn *up, const up_entry *e)
{
    if (e->kind == UP_VERB && e->retries > 0) {
        up->retries_in_flight--;
        if (e->later_ran) up->srv->stats.noscript_reordered++;
        return;
    }
    if (!e->client) return; /* ours, or a client that left */
    /* Its client's verbs retried behind it came before it in the client's
     * order: it ran ahead of them. (Rare: only while retries are out.) */
    for (size_t i = 1; i < up->fifo_len; i++) {
        up_entry *r = up_fifo_at(up, i);
        if (r->kind == UP_VERB && r->retries > 0 && r->client == e->client && r->seq < e->seq)
            r->later_ran = 1;
    }
}

/* ---- sending verbs ---- */

/* "*<count>\r\n" and the command name of a verb's EVALSHA / EVAL: the
 * read-only forms where the server has them (Redis 7.0 and later). */
static void up_call_head(vp_buf *b, const upstream_conn *up, const verb_def *v, const verb_call *call,
                         int argc, int eval)
{
    int hidden = (v->hidden_max_members ? 1 : 0) + (v->hidden_protocol ? 1 : 0);
    int count = 3 + call->nkeys + call->range_count + hidden + (argc - call->first_arg);
    int ro = v->readonly && up->dialect == VERB_DIALECT_7;
    vp_buf_resp_array(b, count);
    if (eval)
        vp_buf_resp_bulk(b, ro ? "EVAL_RO" : "EVAL", ro ? 7 : 4);
    else
        vp_buf_resp_bulk(b, ro ? "EVALSHA_RO" : "EVALSHA", ro ? 10 : 7);
}

/* numkeys, the keys, the hidden arguments, the rest of the arguments. */
static void up_call_tail(vp_buf *b, const upstream_conn *up, const verb_def *v, const verb_call *call,
                         int argc, const resp_arg *argv, int eval)
{
    char nk[RESP_HEADER_MAX];
    size_t nkl = resp_write_integer(nk, call->nkeys + call->range_count);
    vp_buf_resp_bulk(b, nk + 1, nkl - 3); /* the digits */
    for (int i = 0; i < call->nkeys; i++)
        vp_buf_resp_bulk(b, argv[call->keys[i]].ptr, argv[call->keys[i]].len);
    for (int i = call->range_first; i < call->range_first + call->range_count; i++)
        vp_buf_resp_bulk(b, argv[i].ptr, argv[i].len);
    if (v->hidden_max_members) {
        const char *m = upstream_verbs(up)->ztick_max;
        vp_buf_resp_bulk(b, m, strlen(m));
    }
    if (v->hidden_protocol && v->translation && !eval)
        vp_buf_resp_bulk(b, up->resp3 ? "3n" : "2n", 2); /* n: a nil array may be asked (up_nil_array) */
    else if (v->hidden_protocol)
        vp_buf_resp_bulk(b, up->resp3 ? "3" : "2", 1);
    for (int i = call->first_arg; i < argc; i++)
        vp_buf_resp_bulk(b, argv[i].ptr, argv[i].len);
}

/* Bookkeeping shared by every one-reply request: a CLIENT REPLY SKIP in
 * force is used up, and a counted connection owes a reply. */
static up_entry *up_account_plain(upstream_conn *up, struct client_session *c, up_entry_kind kind)
{
    up->skip_next = 0;
    up->srv->stats.commands_forwarded++;
    return up->raw_tx ? NULL : up_fifo_push(up, c, kind);
}

int upstream_forward_verb(upstream_conn *up, struct client_session *c, const verb_def *v,
                          const verb_call *call, int argc, const resp_arg *argv)
{
    /* `v` is the live table's: a connection still on a table a reload
     * replaced has nothing of it in flight by now (its client waited,
     * upstream_must_settle_verbs; a retired shared one takes nothing). */
    if (up->vt && up->verbs_in_flight == 0) up_release_vt(up);
    if (!v->polyfill) up->srv->stats.verb_calls++;
    if (up->shared) up->srv->stats.shared_commands++;
    if (up->raw_tx) {
        /* Nothing can be retried here (replies are not counted): EVAL with
         * the body never meets NOSCRIPT. Rare: built and copied at once. */
        up->scratch.len = 0;
        up_call_head(&up->scratch, up, v, call, argc, 1);
        vp_buf_resp_bulk(&up->scratch, verbs_body(v, up->dialect), v->body_len);
        up_call_tail(&up->scratch, up, v, call, argc, argv, 1);
        outq_add_copy(&up->out, up->scratch.data, up->scratch.len);
        up_account_plain(up, c, UP_REPLY);
        return 0;
    }
    size_t start = up->kept.len;
    if (up->in_multi) {
        /* Queued in a transaction: EXEC must answer with the verb's real
         * reply, and a NOSCRIPT there could not be retried. EVAL carries the
         * body (sent from the table, not copied). */
        up_call_head(&up->kept, up, v, call, argc, 1);
        vp_buf_resp_header(&up->kept, RESP_BULK, (long long)v->body_len);
        size_t mid = up->kept.len;
        vp_buf_append(&up->kept, "\r\n", 2);
        up_call_tail(&up->kept, up, v, call, argc, argv, 1);
        outq_add_ref(&up->out, &up->kept, start, mid - start);
        outq_add(&up->out, verbs_body(v, up->dialect), v->body_len);
        outq_add_ref(&up->out, &up->kept, mid, up->kept.len - mid);
        up_account_plain(up, c, UP_REPLY)->keep = (unsigned)(up->kept.len - start);
        return 1;
    }
    up_ensure_script(up, v); /* (static bytes: `start` stays) */
    up_call_head(&up->kept, up, v, call, argc, 0);
    vp_buf_resp_bulk(&up->kept, verbs_sha(v, up->dialect), 40);
    up_call_tail(&up->kept, up, v, call, argc, argv, 0);
    outq_add_ref(&up->out, &up->kept, start, up->kept.len - start);
    up_entry *e = up_account_plain(up, c, UP_VERB);
    e->keep = (unsigned)(up->kept.len - start);
    e->verb = (short)v->id;
    return 1;
}

up_local_mode upstream_local_mode(const upstream_conn *up)
{
    if (up->raw_tx) return UP_LOCAL_IN_STREAM;
    return up->in_multi ? UP_LOCAL_IN_MULTI : UP_LOCAL_IN_ORDER;
}

int upstream_flag_multi(upstream_conn *up, struct client_session *c)
{
    /* EVALSHA without arguments fails Redis's own arity check, which flags
     * the transaction: EXEC then answers -EXECABORT, as after any command
     * with wrong arguments. Its error is replaced by the proxy's. */
    static const char flag_cmd[] = RESP_LIT_ARRAY(1) RESP_LIT_BULK(7, "EVALSHA");
    outq_add(&up->out, flag_cmd, sizeof(flag_cmd) - 1);
    up_account_plain(up, c, UP_REPLY);
    return 1;
}

int upstream_error_in_stream(upstream_conn *up, struct client_session *c, const char *err)
{
    /* Redis answers it in its stream: in order, and dropped under CLIENT
     * REPLY OFF/SKIP exactly as its own errors are. */
    static const char script[] = "return redis.error_reply(ARGV[1])";
    up->scratch.len = 0;
    vp_buf_resp_array(&up->scratch, 4);
    vp_buf_resp_bulk(&up->scratch, "EVAL", 4);
    vp_buf_resp_bulk(&up->scratch, script, sizeof(script) - 1);
    vp_buf_resp_bulk(&up->scratch, "0", 1);
    vp_buf_resp_bulk(&up->scratch, err, strlen(err));
    outq_add_copy(&up->out, up->scratch.data, up->scratch.len);
    return up_account_plain(up, c, UP_REPLY) != NULL;
}

int upstream_must_settle_verbs(const upstream_conn *up, int argc, const resp_arg *argv)
{
    if (up->verbs_in_flight == 0) return 0;
    if (up->vt) return 1; /* sent with a table a reload replaced: settle before anything new */
    if (up->in_multi || up->raw_tx) return 0;
    switch (cmd_classify(argc, argv)) {
    case CMD_MULTI:
    case CMD_SUBSCRIBE:
    case CMD_MONITOR:
    case CMD_RESET:
    case CMD_CLIENT_REPLY_OFF:
    case CMD_CLIENT_REPLY_SKIP:
    case CMD_UNCOUNTABLE:
    case CMD_REPLICATION:
        return 1;
    default:
        return cmd_changes_session(&argv[0]);
    }
}

/* ---- across a reload (proxy/ops/reload.c) ---- */

const verb_table *upstream_verbs(const upstream_conn *up)
{
    return up->vt ? up->vt : &up->srv->verbs;
}

/* Its verbs sent with a replaced table are all answered (or it closes):
 * from now on it uses the live one, loading its scripts afresh (the load
 * indexes are the new table's). */
void up_release_vt(upstream_conn *up)
{
    verb_table *t = up->vt;
    if (!t) return;
    up->vt = NULL;
    up->scripts_loaded = 0;
    up_forget_load_errors(up); /* (by the old table's load indexes) */
    if (--t->refs == 0) {
        verbs_free(t);
        free(t);
    }
}

/* client_dispatch.c - what happens to one request: the gate (the
 * proxy's own users, protected limits before AUTH: client_admit), the
 * replies the proxy makes itself (VERBPROXY, errors), the verbs rewritten
 * to EVALSHA and the polyfills, and forwarding to the client's upstream
 * connection (cluster mode: through client_route, client_route.c). */
#include "proxy/session/client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>

#include "proxy/conveyor/conveyor.h"
#include "proxy/conveyor/conveyor_wrap.h"
#include "proxy/conveyor/offset_cache.h"
#include "proxy/session/introspect.h"
#include "proxy/session/auth.h"
#include "proxy/log.h"
#include "proxy/route/route.h"
#include "proxy/session/client_internal.h"

/* A reply the proxy makes on a connection that goes on (a verb's argument
 * error, VERBPROXY): `reply` is the whole RESP reply; `err` the same as
 * error text (no '-', no CRLF) if it is an error, and `arity` says whether
 * it is one Redis would find before queueing the command in MULTI (a wrong
 * argument count, an unknown command) rather than one the command itself
 * returns at EXEC. Where Redis's replies are not being counted only an error
 * can be delivered, by Redis itself. */
void client_answer(client_session *c, const char *reply, size_t n, const char *err, int arity)
{
    switch (upstream_local_mode(c->up)) {
    case UP_LOCAL_IN_ORDER:
        client_queue_local(c, reply, n);
        return;
    case UP_LOCAL_IN_MULTI:
        if (err && !arity) {
            /* Queued: +QUEUED now, the error in its place in EXEC's reply. */
            if (upstream_error_in_stream(c->up, c, err)) pending_push(c, PENDING_WAITING);
            return;
        }
        /* As Redis answers a command it cannot queue: the error now, and
         * EXEC aborts. A proxy reply that is not an error cannot be part of
         * a transaction. */
        if (!err) {
            reply = "-ERR VERBPROXY is not allowed inside MULTI\r\n";
            n = strlen(reply);
        }
        if (upstream_flag_multi(c->up, c)) {
            client_pending *s = pending_push(c, PENDING_WAITING);
            s->replace = 1;
            pending_append(s, reply, n);
            c->srv->stats.local_replies++;
        }
        return;
    case UP_LOCAL_IN_STREAM:
        if (!err)
            err = "ERR VERBPROXY cannot answer while replies are not counted (subscribe mode, MONITOR, "
                  "CLIENT REPLY OFF|SKIP)";
        upstream_error_in_stream(c->up, c, err);
        return;
    }
}

static void client_verb_error(client_session *c, const char *err, int arity)
{
    char line[VERB_ERR_MAX + 8];
    int n = snprintf(line, sizeof(line), "-%s\r\n", err);
    c->srv->stats.verb_argument_errors++;
    client_answer(c, line, (size_t)n, err, arity);
}

static void client_call_verb(client_session *c, const verb_def *v, const resp_arg *argv, int argc)
{
    verb_call call;
    char err[VERB_ERR_MAX];
    if (c->srv->verbs.broken[v->id]) {
        snprintf(err, sizeof(err),
                 "ERR verb %s is disabled: the upstream's SHA-1 for its script is not the pinned %s (see the "
                 "proxy's log)",
                 v->name, v->sha);
        client_verb_error(c, err, 0);
        return;
    }
    int rc = verbs_check(v, argc, argv, &call, err, sizeof(err));
    if (rc < 0 && rc == VERB_ERR_ARITY) {
        client_verb_error(c, err, 1);
        return;
    }
    if ((c->up->shared && upstream_requires_auth(c->up)) || c->upstream_noauth) {
        /* What Redis says to the EVALSHA (after an arity error, before any
         * other): and the rewritten request, two or three elements longer
         * than the verb, must not meet Redis's pre-auth limit of 10, which
         * would close the connection where Redis would answer the verb. */
        static const char noauth[] = "-NOAUTH Authentication required.\r\n";
        client_queue_local(c, noauth, sizeof(noauth) - 1);
        return;
    }
    if (rc < 0) {
        client_verb_error(c, err, 0);
        return;
    }
    if (c->up->shared) c->used_shared = 1;
    if (upstream_forward_verb(c->up, c, v, &call, argc, argv)) pending_push(c, PENDING_WAITING);
}

/* ZUNION & co. with AGGREGATE COUNT where the upstream lacks it
 * (upstream_server.c): the proxy's script, with Redis 8.8's reply. Its
 * errors are the script's (Redis checks key types before options), so
 * nothing is refused here; a script the upstream loaded under another SHA
 * leaves the command to Redis, which refuses COUNT as it would without the
 * proxy. */
static void client_call_polyfill(client_session *c, const verb_def *v, const verb_call *call,
                                 const resp_arg *argv, int argc)
{
    if (c->up->shared) c->used_shared = 1;
    c->srv->stats.polyfill_calls++;
    if (upstream_forward_verb(c->up, c, v, call, argc, argv)) pending_push(c, PENDING_WAITING);
}

/* The scratch conveyor_plan builds calls in: one per process (the loop's). */
static conveyor_scratch *client_conveyor_scratch(vp_server *srv)
{
    if (!srv->conveyor) {
        srv->conveyor = calloc(1, sizeof(*srv->conveyor));
        if (!srv->conveyor) abort();
    }
    return srv->conveyor;
}

void client_conveyor_free(vp_server *srv)
{
    if (!srv->conveyor) return;
    conveyor_scratch_free(srv->conveyor);
    free(srv->conveyor);
    srv->conveyor = NULL;
}

/* Cluster mode: a part of a DEL or UNLINK split by slot that holds a
 * conveyor key (route_session_ops.split_part) goes as EVAL of its
 * translation, which deletes the offset keys too and replies the same
 * count. EVAL with the body: a part is sent as it is made and never
 * retried after a NOSCRIPT; the text without its shebang runs on every
 * server (a script with no flags may write). */
int client_split_part(vp_server *srv, int argc, const resp_arg *argv, vp_buf *out)
{
    const verb_def *v;
    verb_call call;
    const resp_arg *xargv;
    int xargc;
    if (!srv->conf.nconveyor_patterns ||
        !conveyor_plan(&srv->conf, &srv->verbs, 0, argc, argv, client_conveyor_scratch(srv), &v, &call,
                       &xargv, &xargc))
        return 0;
    char nk[24];
    int nkl = snprintf(nk, sizeof(nk), "%d", call.range_count);
    vp_buf_resp_array(out, 3 + call.range_count + 1 + (xargc - call.first_arg));
    vp_buf_resp_bulk(out, "EVAL", 4);
    vp_buf_resp_bulk(out, verbs_body(v, VERB_DIALECT_PRE7), v->body_len);
    vp_buf_resp_bulk(out, nk, (size_t)nkl);
    for (int i = call.range_first; i < call.range_first + call.range_count; i++)
        vp_buf_resp_bulk(out, xargv[i].ptr, xargv[i].len);
    vp_buf_resp_bulk(out, "2", 1); /* (the client's RESP version: an integer reply either way) */
    for (int i = call.first_arg; i < xargc; i++)
        vp_buf_resp_bulk(out, xargv[i].ptr, xargv[i].len);
    srv->stats.conveyor_calls++;
    return 1;
}

/* A score range read with a finite end, checked (conveyor_wrap.h): sent
 * with the offset last seen for its key (none when none is known) and the
 * translation script (xargv: the script's arguments as conveyor_plan made
 * them), which answers in the same transaction if that offset is stale. 1
 * when it was sent. */
static int client_send_checked(client_session *c, int argc, const resp_arg *argv, const conveyor_checked *ck,
                               int xargc, const resp_arg *xargv)
{
    vp_server *srv = c->srv;
    conveyor_scratch *cs = client_conveyor_scratch(srv);
    const verb_def *v = verbs_translation(&srv->verbs, VERB_TR_READ);
    resp_arg sargv[24];
    if (!v || srv->verbs.broken[v->id] || upstream_verbs(c->up) != &srv->verbs ||
        xargc + 3 > (int)(sizeof(sargv) / sizeof(sargv[0])))
        return 0;
    const char *text = NULL;
    size_t tl = 0;
    double offset = 0;
    if (!offset_cache_get(&cs->offsets, argv[1].ptr, argv[1].len, &text, &tl) ||
        (text && !conveyor_wrap_offset_text(text, tl, &offset))) {
        text = NULL; /* (unknown, or no number: expect none, and learn) */
        offset = 0;
    }
    conveyor_wrap_checked_request(argc, argv, ck, offset, &cs->wrap);
    /* The keys (the key, its offset key), 'expect' and the offset, the
     * protocol, then the mask and the command (lua/conveyor_read.lua). */
    sargv[0] = xargv[0];
    sargv[1] = xargv[1];
    sargv[2] = text ? (resp_arg){"expect", 6} : (resp_arg){"expect-none", 11};
    sargv[3] = text ? (resp_arg){text, tl} : (resp_arg){"", 0};
    sargv[4] = (resp_arg){"2", 1}; /* (a shared connection: RESP2) */
    memcpy(sargv + 5, xargv + 2, (size_t)(xargc - 2) * sizeof(*xargv));
    upstream_forward_transaction_script(c->up, c, cs->wrap.data, cs->wrap.len, CONVEYOR_CHECKED_QUEUED - 1, v,
                                        2, xargc + 3, sargv);
    return 1;
}

/* A read on a conveyor key that needs only its offset added to the scores
 * of its reply goes in a transaction with the read of the offset
 * (conveyor_wrap.h), where a connection may carry one and its server's
 * double format is known; so does a score range read with a finite end,
 * checked. 1 when it was sent. The pending reply keeps the command, for
 * the key's name in an error and for a refused transaction. */
static int client_call_wrapped(client_session *c, unsigned version, int argc, const resp_arg *argv, int xargc,
                               const resp_arg *xargv)
{
    vp_server *srv = c->srv;
    if (!version || !upstream_can_wrap(c->up)) return 0;
    conveyor_wrap_shape shape = conveyor_wrap_shape_of(&srv->conf, argc, argv);
    vp_buf *req = &client_conveyor_scratch(srv)->wrap;
    conveyor_checked ck;
    int checked = 0;
    if (shape != CONVEYOR_WRAP_NONE) {
        size_t at, len;
        conveyor_wrap_request(argc, argv, req, &at, &len);
        upstream_forward_transaction(c->up, c, req->data, req->len, CONVEYOR_WRAP_QUEUED);
    } else if (conveyor_wrap_checked_of(&srv->conf, argc, argv, &ck) &&
               client_send_checked(c, argc, argv, &ck, xargc, xargv)) {
        shape = ck.shape;
        checked = 1;
        srv->stats.conveyor_checked++;
    } else {
        return 0;
    }
    req->len = 0;
    vp_buf_resp_command(req, argc, argv); /* (as RESP, whether the client sent it so or inline) */
    client_pending *s = pending_push(c, PENDING_WAITING);
    s->wrap = shape;
    s->wrap_checked = checked;
    s->wrap_fpconv = version >= 70200; /* (Redis 7.2 and Valkey: fpconv) */
    s->wrap_cmd = (unsigned)req->len;
    pending_append(s, req->data, req->len);
    srv->stats.conveyor_wrapped++;
    return 1;
}

/* Send a wrapped read (s, its pending reply seq) again, as its script: 1
 * when it was. */
static int client_wrap_resend(client_session *c, unsigned long long seq, upstream_conn *up, client_pending *s)
{
    vp_server *srv = c->srv;
    if (upstream_verbs(up) != &srv->verbs)
        return 0; /* (a connection still on the verb table a reload
                     replaced cannot be sent a script of the new one) */
    int argc = conveyor_wrap_args(s->data, s->wrap_cmd, NULL, 0);
    resp_arg *argv = argc > 0 ? vp_malloc((size_t)argc * sizeof(*argv)) : NULL;
    const verb_def *v;
    verb_call call;
    const resp_arg *xargv;
    int xargc;
    int planned = argv && conveyor_wrap_args(s->data, s->wrap_cmd, argv, argc) == argc &&
                  conveyor_plan(&srv->conf, &srv->verbs, conveyor_version(up->server_version), argc, argv,
                                client_conveyor_scratch(srv), &v, &call, &xargv, &xargc) &&
                  !srv->verbs.broken[v->id];
    int sent = planned && upstream_forward_verb(up, c, v, &call, xargc, xargv);
    if (sent) {
        upstream_answer_as(up, seq);
        s->wrap = CONVEYOR_WRAP_NONE;
        s->wrap_checked = 0;
        s->len = 0;
        srv->stats.conveyor_retried++;
    }
    free(argv);
    return sent;
}

int client_conveyor_unwrap(client_session *c, unsigned long long seq, client_pending *s)
{
    conveyor_scratch *cs = client_conveyor_scratch(c->srv);
    vp_buf *out = &cs->wrap;
    const char *reply = s->data + s->wrap_cmd;
    size_t n = s->len - s->wrap_cmd;
    resp_arg key[2] = {{"", 0}, {"", 0}};
    conveyor_wrap_args(s->data, s->wrap_cmd, key, 2);
    conveyor_wrap_seen seen;
    int r = conveyor_wrap_reply((conveyor_wrap_shape)s->wrap, s->wrap_checked, s->wrap_fpconv, key[1].ptr,
                                key[1].len, reply, n, out, &seen);
    if (seen.state != CONVEYOR_SEEN_NOTHING)
        offset_cache_put(&cs->offsets, key[1].ptr, key[1].len,
                         seen.state == CONVEYOR_SEEN_TEXT ? seen.text : NULL, seen.len);
    if (seen.stale) c->srv->stats.conveyor_checked_stale++;
    if (r < 0 && c->up && !c->closing && client_wrap_resend(c, seq, c->up, s)) {
        out->len = 0;
        return 1; /* (the server lost the script since it was loaded: a NOSCRIPT retry) */
    }
    if (r != 0) {
        s->len = 0;
        pending_append(s, out->data, out->len);
    } else {
        memmove(s->data, reply, n);
        s->len = n;
    }
    s->wrap = CONVEYOR_WRAP_NONE;
    s->wrap_checked = 0;
    out->len = 0;
    vp_buf_shrink(out, CLIENT_WRAP_SCRATCH_KEEP); /* (after a long reply) */
    return 0;
}

void client_conveyor_wrap_refused(client_session *c, unsigned long long seq, upstream_conn *up, const char *p,
                                  size_t n)
{
    unsigned long long idx = seq - c->pending_seq;
    if (c->closing || seq < c->pending_seq || idx >= c->pending_len) return;
    client_pending *s = pending_at(c, idx);
    /* The command again, as its script: behind whatever the client
     * pipelined after it (counted, as a NOSCRIPT retry is). */
    if (s->kind != PENDING_WAITING || !s->wrap || !client_wrap_resend(c, seq, up, s))
        client_reply(c, seq, p, n, 1); /* (the refusal, as it is) */
}

/* A command on a conveyor key (proxy/conveyor/conveyor.h) runs as its
 * translation script. 1 when it was (or was answered), 0 to go on as any
 * command. A built-in verb whose keys are sorted sets (ZTICK, QPOP, ...)
 * is checked as the verb first (conveyor_plan): its errors are the
 * verb's. */
int client_call_conveyor(client_session *c, int argc, const resp_arg *argv, const char *p, size_t n)
{
    vp_server *srv = c->srv;
    const verb_def *verb = cmdid_verb(&srv->metrics.ids, c->cur_cmd);
    char err[VERB_ERR_MAX];
    verb_call call;
    if (verb && verb->owned) return 0; /* (a custom verb sees stored scores: docs/conveyor.md) */
    const verb_def *v;
    const resp_arg *xargv;
    int xargc;
    unsigned version = conveyor_version(c->up ? c->up->server_version : NULL);
    int planned = conveyor_plan(&srv->conf, &srv->verbs, version, argc, argv, client_conveyor_scratch(srv),
                                &v, &call, &xargv, &xargc);
    if (!planned) return 0; /* (a verb that refuses its arguments too: it answers itself) */
    if (srv->verbs.broken[v->id]) {
        snprintf(err, sizeof(err),
                 "ERR conveyor key commands are disabled: the upstream's SHA-1 for script %s is not the "
                 "pinned %s (see the proxy's log)",
                 v->name, v->sha);
        client_verb_error(c, err, 0);
        return 1;
    }
    if ((c->up->shared && upstream_requires_auth(c->up)) || c->upstream_noauth) {
        /* As for a verb (client_call_verb): Redis's answer to the EVALSHA. */
        static const char noauth[] = "-NOAUTH Authentication required.\r\n";
        client_queue_local(c, noauth, sizeof(noauth) - 1);
        return 1;
    }
    if (c->up->shared) c->used_shared = 1;
    srv->stats.conveyor_calls++;
    if (client_call_wrapped(c, version, argc, argv, xargc, xargv)) return 1;
    /* (a blocking pop blocks outside MULTI only, where the script may say
     * "wait": up_call_tail) */
    int may_block = conveyor_blocks(argc, argv) && upstream_local_mode(c->up) == UP_LOCAL_IN_ORDER;
    if (upstream_forward_verb(c->up, c, v, &call, xargc, xargv)) {
        pending_push(c, PENDING_WAITING);
        if (may_block) client_block_begin(c, argc, argv, p, n);
    }
    return 1;
}

/* Must this command wait before it can be sent on its own connection: a
 * verb or polyfill call whose server (the scripts' dialect) or protocol is
 * not known yet? */
int client_verb_must_wait(client_session *c, int argc, const resp_arg *argv)
{
    const verb_def *v = cmdid_verb(&c->srv->metrics.ids, c->cur_cmd);
    verb_call call;
    if (!v) v = verbs_find_polyfill(&c->srv->verbs, argc, argv, &call);
    if (!v && conveyor_may_translate(&c->srv->conf, &argv[0]))
        v = verbs_translation(&c->srv->verbs, VERB_TR_READ); /* (any of them: the dialect is what waits) */
    return v && upstream_verb_must_wait(c->up, v);
}

static void client_introspect(client_session *c, const resp_arg *argv, int argc)
{
    vp_buf out = {0};
    introspect_command(c->srv, argc, argv, &out);
    if (out.len && out.data[0] == '-') {
        char err[VERB_ERR_MAX];
        size_t el = out.len - 3 < sizeof(err) - 1 ? out.len - 3 : sizeof(err) - 1;
        memcpy(err, out.data + 1, el);
        err[el] = '\0';
        /* Inside MULTI refused as a whole, like an unknown command. */
        client_answer(c, out.data, out.len, err, 1);
    } else {
        client_answer(c, out.data, out.len, NULL, 1);
    }
    vp_buf_free(&out);
}

/* CLIENT SETNAME/SETINFO sent on a shared connection: kept to be sent
 * again if the client moves (the last of each kind). */
static void client_keep_setter(client_session *c, int argc, const resp_arg *argv, const char *p, size_t n)
{
    int i = argc == 3 ? 0 : cmd_arg_is(&argv[2], "lib-name") ? 1 : cmd_arg_is(&argv[2], "lib-ver") ? 2 : -1;
    if (i < 0) return; /* Redis refuses any other attribute */
    /* Nor does it take a value with a space, newline or other character
     * outside '!'..'~' (clientSetName, 7.2's SETINFO): keep what it took. */
    const resp_arg *v = &argv[argc - 1];
    for (size_t k = 0; k < v->len; k++)
        if (v->ptr[k] < '!' || v->ptr[k] > '~') return;
    /* Exactly its size (not a 4 KiB vp_buf): kept for the whole session. */
    vp_buf_free(&c->setters[i]);
    c->setters[i].data = vp_malloc(n);
    memcpy(c->setters[i].data, p, n);
    c->setters[i].len = c->setters[i].cap = n;
}

static int is_config_set(int argc, const resp_arg *argv)
{
    return argc >= 2 && cmd_arg_is(&argv[0], "config") && cmd_arg_is(&argv[1], "set");
}

static int is_script_flush(int argc, const resp_arg *argv)
{
    return argc >= 2 && argv[0].len == 6 && cmd_arg_is(&argv[0], "script") && cmd_arg_is(&argv[1], "flush");
}

/* What Redis says to AUTH or HELLO where the proxy will not judge it: queued
 * in a transaction (Redis would run it at EXEC) or while replies are not
 * counted. */
#define CLIENT_AUTH_NOT_HERE                                                                                 \
    "ERR AUTH and HELLO AUTH are answered by verbproxy itself, which cannot do so inside MULTI or while "    \
    "replies are not counted (subscribe mode, MONITOR, CLIENT REPLY OFF|SKIP)"

/* Redis's reply buffer (PROTO_REPLY_CHUNK_BYTES). Since the CVE-2025-21605
 * fix (Redis 7.0.15 as Debian ships it, 7.2.8, 7.4.3) a client that has
 * not authenticated is closed as soon as its unwritten replies overflow
 * it, none of them written: 481 pipelined -NOAUTH (16,354 bytes) are
 * answered, 482 close the connection. */
#define CLIENT_UNAUTH_REPLY_MAX 16384

/* Bytes of replies the client is owed and not yet written: the output
 * queue and the replies made and held in order behind others. */
static size_t client_unwritten(client_session *c)
{
    size_t n = outq_size(&c->out);
    for (size_t i = 0; i < c->pending_len; i++)
        n += pending_at(c, i)->len;
    return n;
}

/* The proxy has users of its own (auth.h): AUTH and HELLO ... AUTH are
 * answered here and never forwarded, and before authentication only AUTH,
 * HELLO and QUIT go on (RESET is answered here; the parser holds the
 * client to Redis's pre-auth limits meanwhile, and a client whose answers
 * pile up past Redis's output limit is closed, as by Redis). Returns 1
 * when the command was answered (the client may be closing then). */
int client_auth_gate(client_session *c, int argc, const resp_arg *argv)
{
    char reply[AUTH_REPLY_MAX];
    size_t n = 0;
    int authed = c->authed;
    auth_verdict v = auth_judge(&c->srv->conf.auth, argc, argv, &authed, reply, &n);
    if (v != AUTH_ANSWER) {
        c->authed = (unsigned)authed; /* a HELLO that authenticated goes on (client_dispatch strips AUTH) */
        return 0;
    }
    if (n > 10 && memcmp(reply, "-WRONGPASS", 10) == 0) c->srv->stats.auth_failures++;
    metrics_count(&c->srv->metrics, c->cur_cmd);
    up_local_mode mode = c->up ? upstream_local_mode(c->up) : UP_LOCAL_IN_ORDER;
    if (mode == UP_LOCAL_IN_ORDER || !c->authed) {
        c->authed = (unsigned)authed;
        client_queue_local(c, reply, n);
        if (!c->authed && client_unwritten(c) > CLIENT_UNAUTH_REPLY_MAX) {
            /* As Redis: closed, with nothing more written (the close
             * drops what is queued). */
            vp_log(VP_LOG_VERBOSE,
                   "client %llu %s: closing: replies over %d bytes unwritten before AUTH (as Redis)", c->id,
                   c->addr, CLIENT_UNAUTH_REPLY_MAX);
            c->input_done = 1;
            client_close(c);
        }
        return 1;
    }
    char line[sizeof(CLIENT_AUTH_NOT_HERE) + 8];
    int ln = snprintf(line, sizeof(line), "-%s\r\n", CLIENT_AUTH_NOT_HERE);
    client_answer(c, line, (size_t)ln, CLIENT_AUTH_NOT_HERE, 1);
    return 1;
}

/* The one gate (issue 22). Every request a client sends passes here before
 * any byte of it goes upstream: whole (client_parse_batch), or the head of
 * a large one about to be streamed (client_stream_partial), inside MULTI,
 * pipelined or over TLS alike, since all of them come through those two.
 * A streamed request is forwarded before the proxy has read it, so it is
 * let go only where reading the rest could change nothing the proxy
 * decides: the client is authenticated to the proxy's own users, and its
 * command is one the proxy neither judges (AUTH, HELLO), rewrites (verbs,
 * polyfills), answers (VERBPROXY), follows (CONFIG, ACL, connection state)
 * nor routes by its keys (cluster mode). Anything else is read whole and
 * judged here like any request. (Redis's own password, where the proxy
 * has no upstream-pass, is judged by Redis on the client's connection of
 * its own, within the pre-auth limits the parser keeps.)
 *
 * ADMIT_FORWARD sets c->admitted for the command at hand: the forwarding
 * paths refuse a command without it (client_not_admitted), so a new path
 * that skips the gate fails closed instead of leaking. */
client_admission client_admit(client_session *c, int argc, const resp_arg *argv, int whole)
{
    if (!whole) {
        if (argc < 1 || c->srv->cluster) return ADMIT_WHOLE;
        if (c->srv->conf.auth.configured && !c->authed) return ADMIT_WHOLE;
        const resp_arg *name = &argv[0];
        if (cmd_name_may_be_special(name) || cmd_name_read_whole(name) ||
            verbs_find(&c->srv->verbs, name->ptr, name->len) || verbs_may_polyfill(&c->srv->verbs, name) ||
            conveyor_may_translate(&c->srv->conf, name) || introspect_is_own_command(name))
            return ADMIT_WHOLE;
    } else if (c->srv->conf.auth.configured && client_auth_gate(c, argc, argv)) {
        return ADMIT_ANSWERED;
    }
    c->admitted = 1;
    return ADMIT_FORWARD;
}

/* A command reached a forwarding path without passing client_admit: a
 * defect of the proxy's. Nothing of it goes upstream; the client is closed
 * as after a protocol error, and the log says where. */
int client_not_admitted(client_session *c, const char *where)
{
    if (c->admitted) return 0;
    vp_log(VP_LOG_WARNING, "client %llu %s: a command reached %s without passing the gate: closed", c->id,
           c->addr, where);
    client_protocol_error(c, "internal error");
    return 1;
}

void client_dispatch(client_session *c, const resp_arg *argv, int argc, const char *p, size_t n)
{
    if (client_not_admitted(c, "dispatch")) return;
    if (cmd_is_http_request(argc, argv)) {
        client_http_request(c);
        return;
    }
    if (c->answering_unavailable) {
        metrics_count(&c->srv->metrics, c->cur_cmd);
        client_add_error(c, "ERR upstream unavailable: %s: %s", client_upstream_name(c), c->up_error);
        return;
    }
    metrics_count(&c->srv->metrics, c->cur_cmd);
    if ((c->srv->conf.nconveyor_patterns || introspect_is_own_command(&argv[0])) &&
        client_call_conveyor(c, argc, argv, p, n))
        return;
    /* (Its id, found once by client_parse_batch, says whether it is a verb.) */
    const verb_def *v = cmdid_verb(&c->srv->metrics.ids, c->cur_cmd);
    if (v) {
        client_call_verb(c, v, argv, argc);
        return;
    }
    verb_call call;
    if ((v = verbs_find_polyfill(&c->srv->verbs, argc, argv, &call)) && upstream_polyfill_wanted(c->up) &&
        !c->srv->verbs.broken[v->id]) {
        client_call_polyfill(c, v, &call, argv, argc);
        return;
    }
    if (introspect_is_own_command(&argv[0])) {
        client_introspect(c, argv, argc);
        return;
    }
    if (c->up->shared && cmd_is_quit(argc, argv)) {
        /* Redis answers +OK and closes; the shared connection must stay. */
        client_queue_local(c, "+OK\r\n", 5);
        c->input_done = 1;
        c->close_when_done = 1;
        return;
    }
    if (c->up->shared && cmd_is_select_zero(argc, argv) && !upstream_requires_auth(c->up)) {
        /* It is there already. (Where Redis wants AUTH first, it goes to
         * Redis for its -NOAUTH.) */
        client_queue_local(c, "+OK\r\n", 5);
        return;
    }
    if (c->up->shared && cmd_is_out_of_band(argc, argv)) {
        /* SCRIPT KILL and the like must not wait behind the busy script. */
        /* (On the node whose script is busy: the client's.) */
        if (upstream_side_forward(c->srv, route_node_for(c->srv, c->route_node), c, p, n))
            pending_push(c, PENDING_WAITING);
        return;
    }
    if (c->up->shared) {
        c->used_shared = 1;
        if (cmd_is_client_setter(argc, argv)) client_keep_setter(c, argc, argv, p, n);
    }
    cmd_kind kind = cmd_classify(argc, argv);
    if (kind == CMD_REPLICATION) c->opaque = 1;
    int *verb_ids = NULL, nids = 0;
    introspect_patch_kind patch = kind == CMD_PLAIN
                                      ? introspect_command_patch(&c->srv->verbs, argc, argv, &verb_ids, &nids)
                                      : INTROSPECT_PATCH_NONE;
    int answered;
    if (c->srv->conf.auth.configured && argc > 2 && cmd_arg_is(&argv[0], "hello")) {
        /* The proxy's own users judged its AUTH option (client_auth_gate):
         * Redis gets the rest, and answers it. Never longer than the
         * request it comes from. */
        size_t cap = n + 16;
        char *hello = vp_malloc(cap);
        size_t hn = auth_hello_strip(argc, argv, hello, cap);
        answered = upstream_forward_copy(c->up, c, hello, hn, kind);
        OPENSSL_cleanse(hello, cap);
        free(hello);
    } else if (kind == CMD_PLAIN && c->srv->conf.nconveyor_patterns && cmd_arg_is(&argv[0], "watch") &&
               conveyor_watch_request(&c->srv->conf, argc, argv, &client_conveyor_scratch(c->srv)->names)) {
        /* A tick moves only a conveyor key's offset key: watched too. */
        vp_buf *w = &client_conveyor_scratch(c->srv)->names;
        answered = upstream_forward_copy(c->up, c, w->data, w->len, kind);
    } else {
        answered = upstream_forward(c->up, c, p, n, kind);
    }
    if (kind == CMD_RESET) {
        /* As Redis's clientSetDefaultAuth: the default user again. */
        c->authed = (unsigned)auth_default_authenticated(&c->srv->conf.auth);
        c->pubsub = c->monitor = 0;
        /* Redis too takes it for the default user again, which needs a
         * password where Redis requires AUTH (without upstream-pass: with
         * it the proxy authenticates the connection again). */
        if (!c->up->shared && upstream_node_requires_auth(c->up)) client_mark_upstream_noauth(c);
    } else if (kind == CMD_SUBSCRIBE && !cmd_name_unsubscribes(&argv[0])) {
        c->pubsub = 1;
    } else if (kind == CMD_MONITOR) {
        c->monitor = 1;
    }
    if (answered && !c->up->shared && cmd_arg_is(&argv[0], "hello")) upstream_note_hello(c->up);
    if (!c->up->shared && (cmd_arg_is(&argv[0], "auth") || cmd_arg_is(&argv[0], "hello")))
        upstream_note_auth(c->up);
    /* Once it may have authenticated, Redis judges what it sends (a wrong
     * password included: its verbs then go to Redis as on any connection
     * of its own). */
    if (c->upstream_noauth && cmd_may_authenticate(argc, argv)) c->upstream_noauth = 0;
    if (answered) {
        client_pending *s = pending_push(c, PENDING_WAITING);
        s->patch = patch;
        s->verb_ids = verb_ids;
        s->nverb_ids = nids;
    } else {
        free(verb_ids);
    }
    if ((kind == CMD_PLAIN && is_script_flush(argc, argv)) || kind == CMD_EXEC || kind == CMD_DISCARD ||
        kind == CMD_RESET)
        upstream_scripts_flushed(c->up, kind, answered);
    /* It may have set an output limit that makes sharing unsafe. */
    if (kind == CMD_PLAIN && is_config_set(argc, argv)) upstream_probe_output_limit(c->up);
    /* It may have given the default user a password (upstream_defauth.c). */
    if (kind == CMD_PLAIN && (is_config_set(argc, argv) || cmd_arg_is(&argv[0], "acl")))
        upstream_probe_default_user(c->up);
}

/* client_answer for an error Redis finds before queueing a command (as
 * its -MOVED, -CROSSSLOT), given as the whole line "-TEXT\r\n". */
void client_answer_error_line(client_session *c, const char *line, size_t n)
{
    char err[320];
    snprintf(err, sizeof(err), "%.*s", n > 3 ? (int)(n - 3) : 0, line + 1);
    client_answer(c, line, n, err, 1);
}

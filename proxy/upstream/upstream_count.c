/* upstream_count.c - reply counting: what each request sent will be
 * answered with, and what each reply that comes is. The send side
 * (upstream_forward and its kin) pushes one FIFO entry per reply expected
 * and follows the modes that change counting (MULTI ... EXEC, RESET, the
 * raw modes of SUBSCRIBE, MONITOR, CLIENT REPLY, replication) and the
 * closing barrier; the receive side (up_decide) says where each reply
 * goes. No I/O here: what is queued is written by upstream.c. See
 * upstream.h, "Counting replies". */
#include "proxy/upstream/upstream.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "protocol/resp_write.h"
#include "proxy/verbs/verbs.h"
#include "proxy/log.h"
#include "proxy/upstream/upstream_internal.h"

#define NOSCRIPT_PREFIX "-NOSCRIPT"

/* A verb is sent again at most this often (a flush between each retry). */
#define UP_NOSCRIPT_RETRIES 2

/* A barrier is a PING with this connection's own token, so no reply a
 * client asked for can be taken for it. Its answer in RESP2 subscribe mode is
 * ["pong", token]; anywhere else the token as a bulk string. */
#define BARRIER_PREFIX "verbproxy:barrier:"

#define RESET_REPLY "+RESET\r\n"

/* ---- barriers ---- */

void up_make_barrier(upstream_conn *up)
{
    /* Unique enough: nobody guesses it by accident, and it differs per
     * connection. */
    static unsigned long long seq;
    unsigned long long r =
        uv_hrtime() ^ ((unsigned long long)(uintptr_t)up << 16) ^ (++seq * 0x9E3779B97F4A7C15ULL);
    char token[40];
    int tl = snprintf(token, sizeof(token), BARRIER_PREFIX "%016llx", r);
    const resp_arg ping[] = {{"PING", 4}, {token, (size_t)tl}}; /* (both fit: a 34-byte token) */
    up->barrier_cmd[resp_write_command(up->barrier_cmd, 2, ping)] = '\0';
    up->barrier_reply[resp_write_bulk(up->barrier_reply, token, (size_t)tl)] = '\0';
}

static int bytes_are(const char *p, size_t n, const char *lit)
{
    size_t l = strlen(lit);
    return n == l && memcmp(p, lit, l) == 0;
}

/* The answers to a closing barrier are "+RESET" (absent when a SKIP was in
 * force) and then the PING's: the token, or "-NOAUTH" when Redis needs a
 * password (RESET logged the connection out). A "+RESET" is held back until
 * the next reply shows whose it was: the client may have sent RESET too. */
#define NOAUTH_REPLY "-NOAUTH Authentication required.\r\n"

static up_route up_decide_close_barrier(upstream_conn *up, const char *p, size_t n)
{
    int held = up->reset_held;
    if (bytes_are(p, n, up->barrier_reply) || (held && bytes_are(p, n, NOAUTH_REPLY))) {
        up->reset_held = 0; /* that +RESET was ours */
        return ROUTE_SWALLOW;
    }
    /* Anything else: a +RESET held so far was the client's. */
    if (held && up->client) upstream_clients()->push(up->client, RESET_REPLY, sizeof(RESET_REPLY) - 1);
    up->reset_held = bytes_are(p, n, RESET_REPLY);
    return up->reset_held ? ROUTE_SWALLOW_KEEP : ROUTE_PUSH;
}

#define NOAUTH_PREFIX "-NOAUTH "

/* A shared connection never sends AUTH, so whether Redis requires it there
 * shows in the replies: -NOAUTH to one of the proxy's own requests says it
 * does (a client's error reply proves nothing: a script can return any
 * error text); a reply that is not an error says it does not (a command
 * passed the check, e.g. after CONFIG SET requirepass ""); other errors say
 * nothing, since Redis finds an unknown command or a wrong arity first. The
 * first reply is to the proxy's own CLIENT NO-EVICT, which passes that far
 * on any Redis: it settles the question before any client's command is sent
 * (upstream_is_ready); the output-limit probe every UP_OUTPUT_PROBE_MS asks
 * again. While it is required, clients that have not authenticated leave
 * the shared connection for their own (client_may_share). */
static void up_learn_auth(upstream_conn *up, const up_entry *e, const char *p, size_t n)
{
    if (p[0] != '-' && up->auth == UP_AUTH_NOT_REQUIRED) return; /* the common case */
    if (up->auth == UP_AUTH_UNKNOWN) up->announce_ready = 1;
    int ours = e && !e->client;
    if (p[0] != '-') {
        if (up->auth == UP_AUTH_REQUIRED) up->reauth_pending = 1;
        up->auth = UP_AUTH_NOT_REQUIRED;
    } else if (ours && n >= sizeof(NOAUTH_PREFIX) - 1 &&
               memcmp(p, NOAUTH_PREFIX, sizeof(NOAUTH_PREFIX) - 1) == 0) {
        if (up->auth != UP_AUTH_REQUIRED)
            vp_log(VP_LOG_NOTICE,
                   "upstream %s requires AUTH and the proxy has no upstream-pass: clients that have not "
                   "authenticated get connections of their own",
                   up_addr(up));
        up->auth = UP_AUTH_REQUIRED;
    } else if (up->auth == UP_AUTH_UNKNOWN)
        up->auth = UP_AUTH_NOT_REQUIRED;
}

/* A counted reply that is a whole error may be the watch's to take back
 * (cluster mode: a -MOVED, -ASK or -TRYAGAIN, sent again elsewhere); the
 * watch also reads the errors that tell it something (-CLUSTERDOWN,
 * -READONLY). */
static up_route up_decide_error(upstream_conn *up, const up_entry *e, const char *p, size_t n, int whole)
{
    const upstream_watch *w = up->srv->upstream_watch;
    if (!w || !w->error_reply || !whole || p[0] != '-') return ROUTE_REPLY;
    return w->error_reply(up, e, p, n) ? ROUTE_REDIRECT : ROUTE_REPLY;
}

static int starts_with(const char *p, size_t n, const char *lit)
{
    size_t l = strlen(lit);
    return n >= l && memcmp(p, lit, l) == 0;
}

/* Redis does not know the command (rename-command): "-ERR unknown
 * command 'MULTI', ..." (6.2 quotes it with backquotes). */
static int up_unknown_command(const char *p, size_t n)
{
    return starts_with(p, n, "-ERR unknown command");
}

/* MULTI or EXEC unknown: no connection wraps again (logged once). */
static void up_wrap_disable(upstream_conn *up, const char *p, size_t n)
{
    if (up->srv->wrap_disabled) return;
    up->srv->wrap_disabled = 1;
    vp_log(VP_LOG_WARNING,
           "upstream %s: %.*s; reads on conveyor keys go as scripts from now on (docs/conveyor.md)",
           up_addr(up), (int)(n > 2 ? n - 3 : 0), p + 1);
}

/* A part of a wrapped transaction (upstream_forward_transaction): its
 * +OK or +QUEUED is dropped; anything else is the client's answer, or the
 * session's to send again another way (ROUTE_WRAP_REFUSED), and the rest
 * of the transaction, through its EXEC, is dropped. */
static up_route up_decide_wrap(upstream_conn *up, up_entry *e, const char *p, size_t n, int whole)
{
    if (whole && (bytes_are(p, n, "+OK\r\n") || bytes_are(p, n, "+QUEUED\r\n"))) {
        e->client = NULL; /* dropped */
        return ROUTE_REPLY;
    }
    /* The rest of the transaction (its entries follow this one, through its
     * EXEC) is dropped; a refused MULTI opened none, so its EXEC's error
     * ("without MULTI", or unknown too) says nothing. */
    for (size_t i = 1; i < up->fifo_len; i++) {
        up_entry *later = up_fifo_at(up, i);
        if (later->kind != UP_WRAP && later->kind != UP_WRAP_EXEC) break;
        later->client = NULL;
        if (later->kind == UP_WRAP_EXEC) {
            if (e->multi) later->kind = UP_REPLY;
            break;
        }
    }
    if (!e->client) return ROUTE_REPLY; /* (its client left) */
    e->kind = UP_REPLY;
    if (!whole) return ROUTE_REPLY;
    /* Refusals the command alone would not meet: out of memory Redis
     * refuses every command queued in MULTI, reads included. */
    if (starts_with(p, n, "-OOM ")) {
        up->wrap_paused_until = uv_now(up->srv->loop) + UP_WRAP_OOM_PAUSE_MS;
        return ROUTE_WRAP_REFUSED;
    }
    if (starts_with(p, n, "-NOPERM ")) {
        up->wrap_paused_until = UINT64_MAX; /* (its user lacks MULTI, HGET or EXEC) */
        return ROUTE_WRAP_REFUSED;
    }
    if (up_unknown_command(p, n)) {
        up_wrap_disable(up, p, n);
        return ROUTE_WRAP_REFUSED;
    }
    return up_decide_error(up, e, p, n, whole);
}

/* The EXEC of a wrapped transaction: its reply is the client's. One Redis
 * does not know (rename-command) leaves the transaction open, where the
 * next client's commands would be queued: the connection goes. */
static up_route up_decide_wrap_exec(upstream_conn *up, up_entry *e, const char *p, size_t n, int whole)
{
    if (whole && up_unknown_command(p, n)) {
        up_wrap_disable(up, p, n);
        return ROUTE_WRAP_OPEN;
    }
    /* EXEC itself refused (and the transaction discarded) for a reason the
     * command alone would not meet: its user may not run EXEC. */
    static const char noperm[] = "-EXECABORT Transaction discarded because of: NOPERM ";
    if (whole && starts_with(p, n, noperm)) {
        up->wrap_paused_until = UINT64_MAX;
        return e->client ? ROUTE_WRAP_REFUSED : ROUTE_REPLY;
    }
    return up_decide_error(up, e, p, n, whole);
}

/* Where does the reply starting at p go? `whole` says p..p+n is all of it. */
up_route up_decide(upstream_conn *up, const char *p, size_t n, int whole)
{
    if (up->framer.type == '>') return ROUTE_PUSH;
    if (up->shared) up_learn_auth(up, up_fifo_head(up), p, n);
    up_entry *e;
    while ((e = up_fifo_head(up)) && e->kind == UP_RAW_START) {
        up->raw_rx = 1;
        up_fifo_pop(up);
    }
    if (!up->raw_rx) {
        if (e && e->kind == UP_REPLY) return up_decide_error(up, e, p, n, whole);
        if (e && e->kind == UP_WRAP) return up_decide_wrap(up, e, p, n, whole);
        if (e && e->kind == UP_WRAP_EXEC) return up_decide_wrap_exec(up, e, p, n, whole);
        if (e && e->kind == UP_ASK) return whole ? ROUTE_ASK : ROUTE_REPLY; /* (dropped: too big) */
        if (e && e->kind == UP_SERVER_PROBE) return whole ? ROUTE_SERVER : ROUTE_REPLY; /* (dropped) */
        if (e && e->kind == UP_HELLO) {
            if (whole) up_check_hello(up, e, p, n);
            return ROUTE_REPLY;
        }
        if (e && e->kind == UP_VERB) {
            /* Redis and Valkey word NOSCRIPT differently: the code is enough. */
            int noscript = whole && n >= sizeof(NOSCRIPT_PREFIX) - 1 &&
                           memcmp(p, NOSCRIPT_PREFIX, sizeof(NOSCRIPT_PREFIX) - 1) == 0;
            if (noscript && (e->retries < UP_NOSCRIPT_RETRIES || up_load_error(up, e->verb, NULL)))
                return ROUTE_NOSCRIPT;
            return up_decide_error(up, e, p, n, whole);
        }
        /* (Not for an error before any reply: Redis refusing the
         * connection before the proxy sent anything, see up_note_refusal.) */
        if (up->replied || !whole || p[0] != '-')
            vp_log(VP_LOG_WARNING, "upstream %s: reply nobody asked for; passing it on", up_addr(up));
        return ROUTE_PUSH;
    }
    if (e && whole) {
        if (e->kind == UP_CLOSE_BARRIER) return up_decide_close_barrier(up, p, n);
        if (e->kind == UP_RESET && bytes_are(p, n, RESET_REPLY)) return ROUTE_RESET;
    }
    return ROUTE_PUSH;
}

/* Copy a request into `kept` and queue it from there: written with the
 * rest, and still at hand until its entry (whose `keep` the caller sets to
 * n) is answered. req must not point into `kept` (it may move). */
static void up_send_kept(upstream_conn *up, const char *req, size_t n)
{
    size_t off = up->kept.len;
    vp_buf_append(&up->kept, req, n);
    outq_add_ref(&up->out, &up->kept, off, n);
}

void upstream_resend(upstream_conn *up, const up_entry *e, const char *req, size_t n, int asking)
{
    static const char asking_cmd[] = RESP_LIT_ARRAY(1) RESP_LIT_BULK(6, "ASKING");
    /* The script first: ASKING lets in only the command right after it
     * (Redis clears the flag once any other command ran), so a SCRIPT LOAD
     * between them sent the verb without it, -MOVED back to the source. */
    if (e->kind == UP_VERB) up_ensure_script(up, upstream_verbs(up)->verbs[e->verb]);
    if (asking) upstream_forward_silent(up, asking_cmd, sizeof(asking_cmd) - 1);
    up->srv->stats.commands_forwarded++;
    up_send_kept(up, req, n);
    up_entry *r = up_fifo_push(up, e->client, e->kind);
    r->seq = e->seq;
    r->keep = (unsigned)n;
    r->verb = e->verb;
    r->retries = e->retries;
    r->redirects = e->redirects;
    r->tries = e->tries;
    r->asked = (unsigned char)(asking != 0);
    if (e->kind == UP_VERB && e->retries > 0) up->retries_in_flight++;
}

void upstream_forward_silent(upstream_conn *up, const char *p, size_t n)
{
    outq_add_copy(&up->out, p, n);
    up_fifo_push(up, NULL, UP_REPLY); /* no client: the reply is dropped */
}

void upstream_forward_bytes(upstream_conn *up, const char *p, size_t n)
{
    outq_add(&up->out, p, n);
}

void upstream_forward_empty(upstream_conn *up, const char *p, size_t n)
{
    outq_add(&up->out, p, n);
    /* Redis resets the client after an empty request too, which ends a
     * pending CLIENT REPLY SKIP. */
    up->skip_next = 0;
}

/* RESET makes Redis authenticate the connection as the default user again
 * (clientSetDefaultAuth): with upstream credentials our AUTH follows it at
 * once, before anything the client sends next, its answer dropped. */
static void up_reauth(upstream_conn *up)
{
    const vp_config *conf = &up->srv->conf;
    if (!conf->upstream_auth) return;
    outq_add_copy(&up->out, conf->upstream_auth, conf->upstream_auth_len); /* (a reload may free them) */
    up_fifo_push(up, NULL, UP_REPLY);                                      /* no client: dropped */
}

/* The command changes how Redis answers at EXEC time, or is one the proxy
 * cannot count: note it for EXEC. */
static int up_is_special(cmd_kind kind)
{
    return kind != CMD_PLAIN && kind != CMD_MULTI && kind != CMD_EXEC && kind != CMD_DISCARD;
}

static int up_forward(upstream_conn *up, struct client_session *c, const char *p, size_t n, cmd_kind kind,
                      int copy);

int upstream_forward(upstream_conn *up, struct client_session *c, const char *p, size_t n, cmd_kind kind)
{
    return up_forward(up, c, p, n, kind, 0);
}

int upstream_forward_copy(upstream_conn *up, struct client_session *c, const char *p, size_t n, cmd_kind kind)
{
    return up_forward(up, c, p, n, kind, 1);
}

int upstream_forward_part(upstream_conn *up, struct client_session *c, unsigned long long seq,
                          const char *req, size_t n)
{
    up->srv->stats.commands_forwarded++;
    up->srv->stats.shared_commands++;
    up_hold_note(up, c);
    up_send_kept(up, req, n);
    up_entry *e = up_fifo_push(up, c, UP_REPLY);
    e->seq = seq;
    e->keep = (unsigned)n;
    return 1;
}

int upstream_can_wrap(const upstream_conn *up)
{
    const upstream_watch *w = up->srv->upstream_watch;
    return up->shared && !up->raw_tx && !up->in_multi && !(w && w->redirect) && !up->srv->wrap_disabled &&
           (up->wrap_paused_until == 0 || uv_now(up->srv->loop) >= up->wrap_paused_until);
}

/* The entries of a wrapped transaction of `queued` commands. */
static void up_push_transaction(upstream_conn *up, struct client_session *c, int queued)
{
    up_fifo_push(up, c, UP_WRAP)->multi = 1;
    for (int i = 0; i < queued; i++)
        up_fifo_push(up, c, UP_WRAP);
    up_fifo_push(up, c, UP_WRAP_EXEC);
}

int upstream_forward_transaction(upstream_conn *up, struct client_session *c, const char *req, size_t n,
                                 int queued)
{
    up->srv->stats.commands_forwarded++;
    up->srv->stats.shared_commands++;
    up_hold_note(up, c);
    outq_add_copy(&up->out, req, n);
    up_push_transaction(up, c, queued);
    return 1;
}

int upstream_forward_transaction_script(upstream_conn *up, struct client_session *c, const char *req,
                                        size_t n, int queued, const verb_def *v, int nkeys, int argc,
                                        const resp_arg *argv)
{
    static const char exec[] = RESP_LIT_ARRAY(1) RESP_LIT_BULK(4, "EXEC");
    up->srv->stats.commands_forwarded++;
    up->srv->stats.shared_commands++;
    up_hold_note(up, c);
    up_ensure_script(up, v); /* (SCRIPT LOAD goes before the MULTI) */
    outq_add_copy(&up->out, req, n);
    vp_buf *b = &up->scratch;
    b->len = 0;
    int ro = v->readonly && up->dialect == VERB_DIALECT_7;
    vp_buf_resp_array(b, 3 + argc);
    vp_buf_resp_bulk(b, ro ? "EVALSHA_RO" : "EVALSHA", ro ? 10 : 7);
    vp_buf_resp_bulk(b, verbs_sha(v, up->dialect), 40);
    char nk[RESP_HEADER_MAX];
    size_t nkl = resp_write_integer(nk, nkeys);
    vp_buf_resp_bulk(b, nk + 1, nkl - 3); /* the digits */
    for (int i = 0; i < argc; i++)
        vp_buf_resp_bulk(b, argv[i].ptr, argv[i].len);
    vp_buf_append(b, exec, sizeof(exec) - 1);
    outq_add_copy(&up->out, b->data, b->len);
    up_push_transaction(up, c, queued + 1);
    return 1;
}

static int up_forward(upstream_conn *up, struct client_session *c, const char *p, size_t n, cmd_kind kind,
                      int copy)
{
    up->srv->stats.commands_forwarded++;
    if (up->shared) {
        /* Written at the end of the loop iteration, with other clients'
         * requests, while this client's buffer has moved on: copied. A
         * shared connection only carries plain commands (client.c). */
        up->srv->stats.shared_commands++;
        if (c) up_hold_note(up, c);
        const upstream_watch *w = up->srv->upstream_watch;
        if (w && w->redirect) {
            /* Kept until answered, to be sent again if the watch takes its
             * reply back (cluster mode: a -MOVED or -ASK, up_decide_error):
             * the one copy, as outq's. */
            up_send_kept(up, p, n);
            up_fifo_push(up, c, UP_REPLY)->keep = (unsigned)n;
            return 1;
        }
        outq_add_copy(&up->out, p, n);
        up_fifo_push(up, c, UP_REPLY);
        return 1;
    }
    int skip_eaten = 0;
    if (kind == CMD_RESET && up->skip_next && up->srv->conf.upstream_auth) {
        /* A CLIENT REPLY SKIP would take the RESET's reply, and our AUTH
         * after it could not be told apart in the uncounted stream: a PING
         * takes the SKIP instead, and the RESET's reply, which the client
         * does not expect, is dropped (its +RESET counts again). */
        static const char ping[] = RESP_LIT_ARRAY(1) RESP_LIT_BULK(4, "PING");
        outq_add(&up->out, ping, sizeof(ping) - 1);
        up->skip_next = 0;
        skip_eaten = 1;
    }
    /* A verb queued in the transaction (or sent uncounted) is written in
     * its server's dialect, which cannot be asked then: ask now, ahead of
     * it. (A verb waits for the answer: upstream_verb_must_wait.) */
    if (!up->in_multi && !up->raw_tx && up->server == UP_SERVER_UNKNOWN &&
        (kind == CMD_MULTI || kind == CMD_CLIENT_REPLY_OFF || kind == CMD_CLIENT_REPLY_SKIP ||
         kind == CMD_UNCOUNTABLE || kind == CMD_SUBSCRIBE))
        upstream_ask_server(up);
    if (copy)
        outq_add_copy(&up->out, p, n);
    else
        outq_add(&up->out, p, n);

    /* RESET runs even inside MULTI and clears every mode. Its +RESET is not
     * sent when a CLIENT REPLY SKIP is in force; then the proxy cannot tell
     * where the old stream ends and stays uncounted (still in order). */
    if (kind == CMD_RESET) {
        int answered = !up->skip_next;
        upstream_note_reset(up);
        up->in_multi = up->multi_special = 0;
        up->reply_off = up->skip_next = 0;
        if (!answered) return 0;
        struct client_session *owner = skip_eaten ? NULL : c; /* NULL: dropped */
        if (up->raw_tx) {
            up_fifo_push(up, owner, UP_RESET);
            up->raw_tx = 0;
        } else {
            up_fifo_push(up, owner, UP_REPLY);
        }
        up_reauth(up);
        return !skip_eaten;
    }

    int replies = 1;   /* does this command answer? */
    int enter_raw = 0; /* does counting stop after it? */
    int queued = up->in_multi;
    if (up->in_multi) {
        /* Queued: one +QUEUED (or an error) each; EXEC answers once. */
        if (kind == CMD_EXEC || kind == CMD_DISCARD) {
            up->in_multi = 0;
            enter_raw = kind == CMD_EXEC && up->multi_special;
        } else if (up_is_special(kind)) {
            up->multi_special = 1;
        }
    } else {
        switch (kind) {
        case CMD_MULTI:
            up->in_multi = 1;
            up->multi_special = 0;
            break;
        case CMD_MONITOR:
        case CMD_SUBSCRIBE:
            replies = 0;
            enter_raw = 1;
            break;
        /* CLIENT REPLY OFF/SKIP may be refused (ACL, subscribe context), and
         * whether it was shows only in replies that may never come: count
         * no more, and keep the switches only as a best guess. */
        case CMD_CLIENT_REPLY_OFF:
            up->reply_off = 1;
            replies = 0;
            enter_raw = 1;
            break;
        case CMD_CLIENT_REPLY_SKIP:
            replies = 0;
            enter_raw = 1;
            break;
        case CMD_CLIENT_REPLY_ON:
            up->reply_off = 0;
            break;
        case CMD_UNCOUNTABLE:
            replies = 0;
            enter_raw = 1;
            break;
        case CMD_REPLICATION:
            up_fifo_push(up, c, UP_OPAQUE_START);
            up->raw_tx = 1;
            return 0;
        default:
            break;
        }
    }
    /* A SKIP applies to the next command; one queued in MULTI skips nothing
     * now (and EXEC will be uncounted). */
    up->skip_next = kind == CMD_CLIENT_REPLY_SKIP && !queued;

    int counted = 0;
    if (!up->raw_tx && replies) {
        up_fifo_push(up, c, UP_REPLY);
        counted = 1;
    }
    if (enter_raw && !up->raw_tx) {
        up_fifo_push(up, c, UP_RAW_START);
        up->raw_tx = 1;
    }
    return counted;
}

int upstream_closing_reply(upstream_conn *up, struct client_session *c)
{
    /* Counting: the reply just takes its place in the client's queue. */
    if (!up->raw_tx) return 0;
    /* The connection ends after this reply, so put Redis in a known state
     * first (out of MULTI, subscribe mode, MONITOR, CLIENT REPLY OFF/SKIP)
     * and let a PING mark the end of what it sends before. A SKIP in force
     * eats +RESET: see up_decide_close_barrier. */
    int flags = UP_LOCAL_BARRIER;
    if (up->reply_off || up->skip_next) flags |= UP_LOCAL_DROP; /* Redis would not answer either */
    static const char reset[] = RESP_LIT_ARRAY(1) RESP_LIT_BULK(5, "RESET");
    outq_add(&up->out, reset, sizeof(reset) - 1);
    outq_add(&up->out, up->barrier_cmd, strlen(up->barrier_cmd));
    up_fifo_push(up, c, UP_CLOSE_BARRIER);
    up->srv->stats.barriers_sent++;
    return flags;
}

int upstream_is_counting(const upstream_conn *up)
{
    return !up->raw_tx;
}

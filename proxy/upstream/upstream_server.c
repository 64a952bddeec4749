/* upstream_server.c - what the proxy knows of the server behind an upstream
 * connection, and the client's protocol on it.
 *
 * Redis 6.2 refuses the scripts' `#!lua` line and lacks EVALSHA_RO: a
 * connection to it loads and calls them in that dialect (verb_dialect,
 * proxy/verbs/verbs.h), known before its first verb is sent, which waits
 * for the answer as a polyfill call does (below). A verb queued in MULTI
 * cannot wait for a probe sent after MULTI, so an own connection whose
 * server is not known asks ahead of MULTI and of the commands that stop
 * counting (upstream_count.c). Unknown (HELLO refused), it is Redis 7.0's.
 *
 * AGGREGATE COUNT for ZUNION, ZINTER, ZUNIONSTORE and ZINTERSTORE came with
 * Redis 8.8. Where the server lacks it the proxy runs such a call as a
 * script of its own with Redis 8.8's reply (lua/zcount.lua,
 * lua/zcountstore.lua); where it has it the call goes through untouched.
 * Which one it is comes from the server's name and version, read from a
 * HELLO with no arguments: it answers them on Redis 6.2 and later and
 * Valkey without changing anything on the connection (an older server
 * refuses it, and lacks COUNT anyway). The reply of a HELLO a client sends
 * itself says the same, and which protocol the connection now speaks.
 *
 * Asked once per connection: on a shared connection with its setup, which
 * clients wait for anyway (upstream_shared); on an own connection when its
 * client first sends such a call, which waits for the answer (one round
 * trip, once). Nothing is asked inside MULTI or while replies are not
 * counted: there the call runs as the script, whose reply is the same. A
 * HELLO refused with -NOAUTH says the client has not authenticated: its
 * calls go to Redis as they are (for Redis's -NOAUTH) until it sends AUTH
 * or HELLO, after which the next call asks again. Refused otherwise (an
 * ACL, HELLO renamed away, a server before 6.2), it counts as "lacks
 * COUNT" (the script answers the same), and is asked again only after the
 * client's AUTH or HELLO.
 *
 * The protocol matters for ZUNION/ZINTER ... WITHSCORES, whose pairs are
 * nested in RESP3: the script is told the client's protocol. It is known as
 * of the last request sent, except after a HELLO not yet answered (the call
 * waits for it) or one queued in a transaction (unsure: asked again). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/verbs/verbs.h"
#include "protocol/resp_write.h"
#include "proxy/log.h"
#include "proxy/upstream/upstream_internal.h"

/* The first Redis with AGGREGATE COUNT. */
#define SERVER_COUNT_MAJOR 8
#define SERVER_COUNT_MINOR 8

static const char server_probe[] = RESP_LIT_ARRAY(1) RESP_LIT_BULK(5, "HELLO");

void upstream_ask_server(upstream_conn *up)
{
    outq_add(&up->out, server_probe, sizeof(server_probe) - 1);
    up_fifo_push(up, NULL, UP_SERVER_PROBE);
    up->server = UP_SERVER_ASKED;
}

int upstream_polyfill_wanted(const upstream_conn *up)
{
    /* A client that has not authenticated where Redis requires it: the
     * call goes as it is, and Redis answers -NOAUTH as it would without
     * the proxy (the script's longer EVALSHA could pass Redis's pre-auth
     * limit of 10 arguments and get the connection closed). */
    if (up->shared ? upstream_requires_auth(up) : up->server_noauth) return 0;
    switch (up->srv->conf.aggregate_count) {
    case CONF_POLYFILL_YES:
        return 1;
    case CONF_POLYFILL_NO:
        return 0;
    case CONF_POLYFILL_AUTO:
        break;
    }
    return !(up->server == UP_SERVER_KNOWN && up->has_aggregate_count);
}

int upstream_verb_must_wait(upstream_conn *up, const verb_def *v)
{
    if (v->polyfill && up->srv->conf.aggregate_count == CONF_POLYFILL_NO) return 0; /* goes as it is */
    /* A probe now would be queued in the transaction, or its answer not
     * counted: the dialect is the one known (the probe upstream_count.c
     * sends ahead of MULTI, if not yet answered: wait for it), and a
     * polyfill runs as the script, which answers the same. A HELLO of the
     * client's sent before MULTI (or CLIENT REPLY SKIP, SUBSCRIBE...) is
     * answered all the same, and says the protocol: wait for it. */
    if (up->in_multi || up->raw_tx)
        return up->server == UP_SERVER_ASKED || (v->hidden_protocol && up->hellos_in_flight > 0);
    /* The server is asked with `yes` too: the answer also says whether the
     * client must authenticate first. */
    int need_protocol = v->hidden_protocol;
    if (up->server == UP_SERVER_UNKNOWN || (need_protocol && up->resp_unsure)) {
        if (up->server != UP_SERVER_ASKED) upstream_ask_server(up);
        return 1;
    }
    if (up->server == UP_SERVER_ASKED) return 1;
    /* (Refused: the call runs as the script, and nobody asks again on this
     * connection, whose server stays what it is, until the client's AUTH
     * or HELLO, which may change what it is allowed: upstream_note_auth.) */
    return need_protocol && up->hellos_in_flight > 0;
}

int upstream_is_settled(const upstream_conn *up)
{
    return up->verbs_in_flight == 0 && up->server != UP_SERVER_ASKED && up->hellos_in_flight == 0;
}

void upstream_note_hello(upstream_conn *up)
{
    if (up->in_multi) {
        up->resp_unsure = 1; /* runs at EXEC, if at all */
        up->unsure_sent = up->sent;
        return;
    }
    /* The entry just pushed for it (a counted connection: HELLO answers). */
    if (up->raw_tx || up->fifo_len == 0) return;
    up_entry *e = up_fifo_last(up);
    if (e->kind != UP_REPLY) return;
    e->kind = UP_HELLO;
    up->hellos_in_flight++;
}

/* The value of `field` in HELLO's reply: RESP2 array or RESP3 map, both
 * `$<len> name $<len> value` for the string fields. */
static int hello_field(const char *p, size_t n, const char *field, char *out, size_t outlen)
{
    char key[64];
    size_t fl = strlen(field);
    if (RESP_BULK_SIZE(fl) + 1 > sizeof(key)) return -1;
    size_t kl = resp_write_bulk(key, field, fl);
    key[kl++] = '$'; /* and the value's header */
    const char *at = memmem(p, n, key, kl);
    if (!at) return -1;
    const char *len_at = at + kl, *end = p + n;
    char *q;
    long len = strtol(len_at, &q, 10);
    if (len < 0 || q + 2 > end || q[0] != '\r' || q + 2 + len > end || (size_t)len >= outlen) return -1;
    memcpy(out, q + 2, (size_t)len);
    out[len] = '\0';
    return 0;
}

/* Learn name and version from a HELLO reply (p[0] is '*' or '%'); -1 if
 * it does not say them. */
static int server_learn(upstream_conn *up, const char *p, size_t n)
{
    char name[sizeof(up->server_name)], version[sizeof(up->server_version)];
    if (hello_field(p, n, "server", name, sizeof(name)) < 0 ||
        hello_field(p, n, "version", version, sizeof(version)) < 0)
        return -1;
    int major = 0, minor = 0;
    sscanf(version, "%d.%d", &major, &minor);
    /* Valkey is judged by its own version: none of them has COUNT. */
    int redis = strcmp(name, "redis") == 0;
    up->has_aggregate_count =
        redis && (major > SERVER_COUNT_MAJOR || (major == SERVER_COUNT_MAJOR && minor >= SERVER_COUNT_MINOR));
    /* Every Valkey has what Redis 7.0 brought (it forked from 7.2). */
    verb_dialect dialect = redis && major < 7 ? VERB_DIALECT_PRE7 : VERB_DIALECT_7;
    if (up->dialect != dialect) {
        up->dialect = dialect;
        up->scripts_loaded = 0; /* loaded in the other dialect, if at all */
    }
    if (up->server != UP_SERVER_KNOWN || strcmp(up->server_name, name) || strcmp(up->server_version, version))
        vp_log(VP_LOG_VERBOSE, "upstream %s: %s %s, scripts in the %s dialect, AGGREGATE COUNT %s",
               up_addr(up), name, version, dialect == VERB_DIALECT_PRE7 ? "Redis 6.2" : "Redis 7.0",
               up->has_aggregate_count ? "native" : "by the proxy's script");
    memcpy(up->server_name, name, sizeof(name));
    memcpy(up->server_version, version, sizeof(version));
    up->server = UP_SERVER_KNOWN;
    up->server_noauth = 0;
    return 0;
}

/* HELLO did not say what the server is, and nothing did before on this
 * connection (a server_learn sets the name): its verbs go in the 6.2
 * dialect, which every supported server runs (7.0 and later take a script
 * without its shebang, and EVALSHA for a read-only one), where 7.0's would
 * fail on a 6.2 ("unknown command EVALSHA_RO"). A later HELLO that is
 * answered sets the dialect it says. */
static void server_unreadable(upstream_conn *up)
{
    up->server = UP_SERVER_UNREADABLE;
    if (up->server_name[0] || up->dialect == VERB_DIALECT_PRE7) return;
    up->dialect = VERB_DIALECT_PRE7;
    up->scripts_loaded = 0;
}

void up_check_server(upstream_conn *up, unsigned long long sent, const char *p, size_t n)
{
    if (n && p[0] == '-' && sent < up->auth_sent) {
        /* Refused before the client's AUTH (or HELLO) that followed it ran:
         * stale. Asked again before the next call. */
        up->server = UP_SERVER_UNKNOWN;
        return;
    }
    /* A probe sent ahead of a MULTI (upstream_count.c) may be answered
     * after a HELLO was queued in the transaction: it does not say what
     * the protocol is after EXEC. */
    int says_protocol = !up->resp_unsure || sent > up->unsure_sent;
    if (n && (p[0] == '*' || p[0] == '%')) {
        /* No arguments: the protocol it answers in is the connection's. */
        if (says_protocol) {
            up->resp3 = p[0] == '%';
            up->resp_unsure = 0;
        }
        if (server_learn(up, p, n) < 0) server_unreadable(up);
    } else {
        /* Nothing learned, and nothing to wait for any more: the protocol
         * stays as last known. */
        server_unreadable(up);
        up->server_noauth = n >= 7 && memcmp(p, "-NOAUTH", 7) == 0;
        if (says_protocol) up->resp_unsure = 0;
        vp_log(VP_LOG_DEBUG, "upstream %s: HELLO refused: %.*s", up_addr(up),
               (int)(n > 2 && n < 200 ? n - 2
                     : n > 200        ? 200
                                      : n),
               p);
    }
}

void up_check_hello(upstream_conn *up, const up_entry *e, const char *p, size_t n)
{
    if (!n || (p[0] != '*' && p[0] != '%')) return; /* refused: nothing changed */
    /* A RESET sent after it has put the connection back on RESP2 since. */
    if (e->sent >= up->reset_sent) up->resp3 = p[0] == '%';
    server_learn(up, p, n);
}

void upstream_note_auth(upstream_conn *up)
{
    /* Refused before it: ask again before the next call (a probe on its
     * way now is stale if refused: up_check_server). */
    if (up->server == UP_SERVER_UNREADABLE) up->server = UP_SERVER_UNKNOWN;
    up->server_noauth = 0;
    up->auth_sent = up->sent;
}

void upstream_note_reset(upstream_conn *up)
{
    up->resp3 = 0;
    up->resp_unsure = 0;
    up->reset_sent = up->sent;
}

void up_server_entry_done(upstream_conn *up, const up_entry *e)
{
    if (e->kind == UP_HELLO) up->hellos_in_flight--;
    /* A probe popped unanswered (lost with the connection, or a reply that
     * was not whole) asks nothing more of anyone. */
    if (e->kind == UP_SERVER_PROBE && up->server == UP_SERVER_ASKED) up->server = UP_SERVER_UNREADABLE;
}

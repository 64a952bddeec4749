/* client_block.c - BZPOPMIN, BZPOPMAX and BZMPOP on conveyor keys
 * (docs/conveyor.md#blocking-pops).
 *
 * Redis cannot block inside a script, and the script is what reads the
 * offset with the member popped. So the proxy blocks instead: the pop is
 * sent as its translation (lua/conveyor_write.lua), which pops at once or,
 * with nothing to pop, answers the marker "+VERBPROXY-WAIT". The client's
 * pending reply then waits; nothing more of what it sent is read or sent
 * (as Redis holds a blocked client's pipeline), and the same call goes
 * again after 2 ms, then 4, 8, ... at most every CLIENT_POP_MAX_MS, until
 * it pops or its timeout passes (then the nil array Redis replies at a
 * timeout). Outside MULTI only: inside, a blocking pop does not block,
 * in Redis and here.
 *
 * One timer for every waiting client (srv->pop_timer, ticking while any
 * waits), and the waiting clients in srv->pop_waiters. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/resp_write.h"
#include "proxy/conveyor/conveyor.h"
#include "proxy/log.h"
#include "proxy/session/client_internal.h"

#define CLIENT_POP_FIRST_MS 2
#define CLIENT_POP_MAX_MS 100
#define CLIENT_POP_TICK_MS 2

static const char pop_wait_marker[] = "+VERBPROXY-WAIT\r\n";

typedef struct client_pop {
    vp_buf req;        /* the request as the client sent it, sent again from here */
    uint64_t deadline; /* loop time of its timeout; 0: none */
    uint64_t next_at;  /* loop time of the next try; 0: a try is out */
    unsigned interval; /* ms to the try after the next */
} client_pop;

void client_block_init(vp_server *srv)
{
    uv_timer_init(srv->loop, &srv->pop_timer);
    srv->pop_timer.data = srv;
}

static void pop_waiters_remove(vp_server *srv, client_session *c)
{
    for (int i = 0; i < srv->npop_waiters; i++) {
        if (srv->pop_waiters[i] != c) continue;
        srv->pop_waiters[i] = srv->pop_waiters[--srv->npop_waiters];
        break;
    }
    if (srv->npop_waiters == 0) uv_timer_stop(&srv->pop_timer);
}

/* The wait is over (popped, timed out, or the client left). pop_wait
 * stays until what waited behind it is resumed (client_resume). */
static void pop_end(client_session *c)
{
    if (!c->pop) return;
    vp_buf_free(&c->pop->req);
    free(c->pop);
    c->pop = NULL;
    pop_waiters_remove(c->srv, c);
}

void client_resume(client_session *c)
{
    c->pop_wait = 0;
    c->pop_resume = 0;
    if (c->closing) return;
    client_start_reading(c);
    client_process_input(c);
}

void client_block_forget(client_session *c)
{
    pop_end(c);
    c->pop_wait = c->pop_resume = 0;
}

/* Send the pop again, as when the client sent it (the gate passed it then). */
static void pop_try(client_session *c)
{
    resp_request_parser parser;
    resp_request_init(&parser, &c->srv->limits);
    size_t used = 0;
    if (resp_request_parse(&parser, c->pop->req.data, c->pop->req.len, &used) != RESP_REQ_COMMAND) {
        resp_request_free(&parser); /* (never: it was parsed once) */
        pop_end(c);
        return;
    }
    c->pop->next_at = 0;
    c->cur_cmd = (unsigned short)cmdid_lookup(&c->srv->metrics.ids, parser.argv[0].ptr, parser.argv[0].len);
    c->admitted = 1;
    size_t before = c->pending_len;
    if (!client_call_conveyor(c, parser.argc, parser.argv, c->pop->req.data, used)) {
        /* No longer a conveyor key (a reload took its pattern): Redis
         * blocks it now, as any BZPOPMIN. */
        client_dispatch(c, parser.argv, parser.argc, c->pop->req.data, used);
        pop_end(c);
    } else if (c->pending_len == before || !pending_at(c, c->pending_len - 1)->pop_wait) {
        pop_end(c); /* answered here (an error): no wait */
    }
    c->cur_cmd = CMDID_NONE;
    resp_request_free(&parser);
    /* Out now, as client_process_input sends what it parsed. */
    if (client_send_upstream(c) < 0) return;
    client_release_ready(c);
    client_flush(c);
    if (!c->pop) client_resume(c);
}

static void pop_tick(uv_timer_t *t)
{
    vp_server *srv = t->data;
    uint64_t now = uv_now(srv->loop);
    /* (a try may end a wait, which moves the array's last into slot i) */
    for (int i = srv->npop_waiters - 1; i >= 0; i--) {
        if (i >= srv->npop_waiters) continue;
        client_session *c = srv->pop_waiters[i];
        if (!c->pop->next_at || now < c->pop->next_at) continue;
        if (!c->up || !upstream_is_ready(c->up)) {
            c->pop->next_at = now + c->pop->interval; /* (its connection comes back, or the client is told) */
            continue;
        }
        pop_try(c);
    }
}

/* The timeout argument of a blocking pop, as a deadline (0: none). */
static uint64_t pop_deadline(vp_server *srv, int argc, const resp_arg *argv)
{
    const resp_arg *t = cmd_arg_is(&argv[0], "bzmpop") ? &argv[1] : &argv[argc - 1];
    char text[64];
    if (t->len == 0 || t->len >= sizeof(text)) return 0;
    memcpy(text, t->ptr, t->len);
    text[t->len] = '\0';
    char *end;
    double s = strtod(text, &end);
    if (*end || !(s > 0) || !isfinite(s) || s > 1e12) return 0; /* (0: forever; others Redis refuses) */
    return uv_now(srv->loop) + (uint64_t)ceil(s * 1000.0);
}

void client_block_begin(client_session *c, int argc, const resp_arg *argv, const char *p, size_t n)
{
    vp_server *srv = c->srv;
    if (!c->pending_len) return;
    pending_at(c, c->pending_len - 1)->pop_wait = 1;
    if (c->pop) return; /* a try of a wait already under way */
    c->pop = vp_malloc(sizeof(*c->pop));
    memset(c->pop, 0, sizeof(*c->pop));
    vp_buf_append(&c->pop->req, p, n);
    c->pop->deadline = pop_deadline(srv, argc, argv);
    c->pop->interval = CLIENT_POP_FIRST_MS;
    c->pop_wait = 1;
    if (srv->npop_waiters == srv->pop_waiters_cap) {
        srv->pop_waiters_cap = srv->pop_waiters_cap ? 2 * srv->pop_waiters_cap : 16;
        srv->pop_waiters =
            vp_realloc(srv->pop_waiters, (size_t)srv->pop_waiters_cap * sizeof(*srv->pop_waiters));
    }
    srv->pop_waiters[srv->npop_waiters++] = c;
    if (srv->npop_waiters == 1)
        uv_timer_start(&srv->pop_timer, pop_tick, CLIENT_POP_TICK_MS, CLIENT_POP_TICK_MS);
}

int client_block_answered(client_session *c, client_pending *s)
{
    if (!c->pop) return 0;
    int wait = s->len == sizeof(pop_wait_marker) - 1 && memcmp(s->data, pop_wait_marker, s->len) == 0;
    if (wait && s != pending_at(c, c->pending_len - 1)) {
        /* (never: nothing is read behind a waiting pop) The marker cannot
         * be taken back from the middle: it ends the wait as a timeout. */
        vp_log(VP_LOG_WARNING, "client %llu: a waiting pop's reply is not its last: answered as timed out",
               c->id);
        c->pop->deadline = 1;
    }
    uint64_t now = uv_now(c->srv->loop);
    if (wait && (!c->pop->deadline || now < c->pop->deadline)) {
        /* Nothing yet: this pending reply (the last) goes, the next try
         * makes another. */
        c->pending_len--;
        pending_drop_data(s);
        uint64_t at = now + c->pop->interval;
        if (c->pop->deadline && at > c->pop->deadline) at = c->pop->deadline;
        c->pop->next_at = at ? at : 1;
        c->pop->interval =
            c->pop->interval * 2 > CLIENT_POP_MAX_MS ? CLIENT_POP_MAX_MS : c->pop->interval * 2;
        return 1;
    }
    if (wait) {
        /* Its timeout: Redis's nil array. */
        char nil[8];
        s->len = 0;
        pending_append(s, nil, resp_write_null_array(nil, c->up && c->up->resp3));
    }
    pop_end(c);
    c->pop_resume = 1; /* at the end of this read (client_round_end): not from inside it */
    return 0;
}

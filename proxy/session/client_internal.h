/* client_internal.h - what the files of the client session share
 * (client.c, client_input.c, client_dispatch.c, client_reply.c,
 * client_upstream.c, client_route.c): one module, one prefix, split along
 * its seams. Not for other modules: they use client.h. */
#ifndef VP_CLIENT_INTERNAL_H
#define VP_CLIENT_INTERNAL_H

#include "proxy/session/client.h"

/* What the proxy holds for a client on a shared connection is bounded by
 * how many replies it may be owed there at once (client_share_window): a
 * shared connection cannot stop reading for one client, so every reply it
 * owes is read and held until that client takes it. A new client may be
 * owed CLIENT_SHARED_FIRST_WINDOW replies. A client is not read further
 * while it is owed its window, until half are in; if by then the kernel
 * took every reply it was given, the window doubles, up to
 * CLIENT_SHARED_MAX_OWED (client_round_end). */
#define CLIENT_SHARED_FIRST_WINDOW 16
#define CLIENT_SHARED_MAX_OWED 256

/* A reply this big on a shared connection holds up every reply behind it
 * (Redis would interleave it with other clients' writes): its client goes
 * one request at a time and moves to a connection of its own at its next
 * command. */
#define CLIENT_BIG_REPLY (64 * 1024)

/* How client_admit lets a request go. */
typedef enum client_admission {
    ADMIT_FORWARD,  /* it may go upstream (a streamed one: from its first bytes on) */
    ADMIT_ANSWERED, /* a whole request the proxy answered itself */
    ADMIT_WHOLE     /* the head of a large request: the proxy must read all of it first */
} client_admission;

/* client.c */
void client_check_paused(client_session *c);

/* client_dispatch.c */
client_admission client_admit(client_session *c, int argc, const resp_arg *argv, int whole);
void client_answer(client_session *c, const char *reply, size_t n, const char *err, int arity);
void client_answer_error_line(client_session *c, const char *line, size_t n);
int client_auth_gate(client_session *c, int argc, const resp_arg *argv);
void client_dispatch(client_session *c, const resp_arg *argv, int argc, const char *p, size_t n);
int client_not_admitted(client_session *c, const char *where);
int client_polyfill_must_wait(client_session *c, int argc, const resp_arg *argv);

/* client_input.c */
void client_http_request(client_session *c);
int client_idle(client_session *c);
void client_input_ended(client_session *c);
void client_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
int client_parse_batch(client_session *c, size_t limit);
void client_process_input(client_session *c);
void client_protocol_error(client_session *c, const char *msg);
void client_start_reading(client_session *c);
void client_stop_reading(client_session *c);
void client_stream_partial(client_session *c, const char *p, size_t avail);
void client_unpause(client_session *c);

/* client_reply.c */
void client_add_error(client_session *c, const char *fmt, ...);
void client_close_gone(client_session *c);
void client_flush(client_session *c);
void client_learn_upstream_auth(client_session *c, const char *p, size_t n);
void client_maybe_finish(client_session *c);
void client_on_written(outq *q, int status);
void client_queue_local(client_session *c, const char *p, size_t n);
void client_release_ready(client_session *c);
void pending_append(client_pending *s, const char *p, size_t n);
client_pending *pending_at(client_session *c, size_t i);
void pending_pop(client_session *c);
client_pending *pending_push(client_session *c, client_pending_kind kind);
void pending_ring_release(client_session *c);

/* client_route.c */
int client_route(client_session *c, int argc, const resp_arg *argv);

/* client_upstream.c */
upstream_conn *client_connect(client_session *c);
void client_leave_retired(client_session *c);
void client_mark_upstream_noauth(client_session *c);
int client_may_share(client_session *c, int argc, const resp_arg *argv);
int client_owed_released(const client_session *c);
void client_refuse_no_descriptor(client_session *c);
void client_release_upstream(client_session *c);
size_t client_share_window(const client_session *c);
const char *client_upstream_name(const client_session *c);
void client_want_own(client_session *c);

#endif

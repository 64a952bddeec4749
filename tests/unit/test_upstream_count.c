/* Reply counting (proxy/upstream/upstream_count.c) without a socket: what
 * a connection expects to be answered, entry by entry, as requests are
 * queued. The integration stories check the same against redis-server
 * (test_transactions, test_pubsub, test_monitor, test_protocol_errors);
 * here each rule is pinned on its own: MULTI ... EXEC counts every queued
 * reply, SUBSCRIBE and CLIENT REPLY OFF stop counting, RESET starts it
 * again, a reply the proxy makes on an uncounted connection needs a
 * closing barrier, and a transaction the proxy wraps around a client's
 * read gives the client EXEC's reply alone, or the first refusal. Nothing
 * is written: the requests stay in the output
 * queue, which is freed unsent. */
#include <criterion/criterion.h>
#include <string.h>

#include "proxy/config.h"
#include "proxy/server.h"
#include "proxy/upstream/upstream_internal.h"

static vp_server srv;
static upstream_conn up;
static const char req[] = "*1\r\n$4\r\nPING\r\n";

static void setup(void)
{
    memset(&srv, 0, sizeof(srv));
    conf_defaults(&srv.conf);
    memset(&up, 0, sizeof(up));
    up.srv = &srv;
    up.state = UPSTREAM_READY;
    up.server = UP_SERVER_KNOWN; /* (else MULTI asks it first: below) */
    outq_init(&up.out, &up.h.stream, &up, NULL);
    up_make_barrier(&up);
}

static void teardown(void)
{
    while (upstream_owed(&up))
        up_fifo_pop(&up);
    up_fifo_free(&up);
    outq_free(&up.out);
    vp_buf_free(&up.kept);
    conf_free(&srv.conf);
}

TestSuite(upstream_count, .init = setup, .fini = teardown);

/* Send a request of this kind (no client: counting only). */
static int send_kind(cmd_kind kind)
{
    return upstream_forward(&up, NULL, req, sizeof(req) - 1, kind);
}

static up_entry_kind owed_kind(size_t i)
{
    return upstream_owed_at(&up, i)->kind;
}

Test(upstream_count, a_plain_command_owes_one_reply)
{
    cr_assert_eq(send_kind(CMD_PLAIN), 1);
    cr_assert_eq(send_kind(CMD_PLAIN), 1);
    cr_assert_eq(upstream_owed(&up), 2);
    cr_assert_eq(owed_kind(0), UP_REPLY);
    cr_assert(upstream_is_counting(&up));
}

Test(upstream_count, multi_counts_every_queued_reply_and_exec)
{
    cr_assert_eq(send_kind(CMD_MULTI), 1); /* +OK */
    cr_assert_eq(send_kind(CMD_PLAIN), 1); /* +QUEUED */
    cr_assert_eq(send_kind(CMD_PLAIN), 1); /* +QUEUED */
    cr_assert_eq(upstream_local_mode(&up), UP_LOCAL_IN_MULTI);
    cr_assert_eq(send_kind(CMD_EXEC), 1); /* the array of results */
    cr_assert_eq(upstream_owed(&up), 4);
    cr_assert(upstream_is_counting(&up));
    cr_assert_eq(upstream_local_mode(&up), UP_LOCAL_IN_ORDER);
}

Test(upstream_count, subscribe_stops_counting_and_reset_starts_it_again)
{
    cr_assert_eq(send_kind(CMD_SUBSCRIBE), 0, "its replies are not counted");
    cr_assert_not(upstream_is_counting(&up));
    cr_assert_eq(owed_kind(upstream_owed(&up) - 1), UP_RAW_START);
    cr_assert_eq(upstream_local_mode(&up), UP_LOCAL_IN_STREAM);
    cr_assert_eq(send_kind(CMD_PLAIN), 0, "nothing is counted in the stream");
    size_t before = upstream_owed(&up);
    cr_assert_eq(send_kind(CMD_RESET), 1, "RESET's +RESET is the client's");
    cr_assert_eq(owed_kind(before), UP_RESET, "its +RESET ends the stream");
    cr_assert(upstream_is_counting(&up));
    cr_assert_eq(send_kind(CMD_PLAIN), 1);
}

Test(upstream_count, a_special_command_queued_in_multi_makes_exec_uncounted)
{
    send_kind(CMD_MULTI);
    cr_assert_eq(send_kind(CMD_SUBSCRIBE), 1, "queued: +QUEUED is counted");
    cr_assert_eq(send_kind(CMD_EXEC), 1, "EXEC's own reply is counted");
    cr_assert_not(upstream_is_counting(&up), "what the SUBSCRIBE sends after EXEC is not");
}

Test(upstream_count, client_reply_off_and_skip_stop_counting)
{
    cr_assert_eq(send_kind(CMD_CLIENT_REPLY_OFF), 0);
    cr_assert_not(upstream_is_counting(&up));
    teardown();
    setup();
    cr_assert_eq(send_kind(CMD_CLIENT_REPLY_SKIP), 0);
    cr_assert_not(upstream_is_counting(&up));
}

Test(upstream_count, a_local_reply_needs_a_barrier_only_when_uncounted)
{
    cr_assert_eq(upstream_closing_reply(&up, NULL), 0, "counted: the reply just takes its place");
    send_kind(CMD_MONITOR);
    size_t before = upstream_owed(&up);
    int flags = upstream_closing_reply(&up, NULL);
    cr_assert(flags & UP_LOCAL_BARRIER);
    cr_assert_not(flags & UP_LOCAL_DROP, "MONITOR still answers");
    cr_assert_eq(owed_kind(before), UP_CLOSE_BARRIER);
    cr_assert_eq(srv.stats.barriers_sent, 1);
}

Test(upstream_count, an_ask_is_owed_like_a_reply_and_answers_its_caller)
{
    upstream_ask(&up, req, sizeof(req) - 1, NULL, NULL, UP_ASK_SETUP);
    cr_assert_eq(upstream_owed(&up), 1);
    cr_assert_eq(owed_kind(0), UP_ASK);
    cr_assert_eq(up.setup_asks, 1, "a setup ask holds the connection back");
    cr_assert_not(upstream_is_ready(&up));
    upstream_setup_done(&up);
    cr_assert_eq(up.setup_asks, 0);
}

/* A verb queued in MULTI is written in its server's dialect, which cannot
 * be asked inside the transaction: a connection whose server is not known
 * asks ahead of MULTI (its answer comes before MULTI's +OK). */
Test(upstream_count, multi_on_a_connection_whose_server_is_unknown_asks_it_first)
{
    up.server = UP_SERVER_UNKNOWN;
    cr_assert_eq(send_kind(CMD_MULTI), 1);
    cr_assert_eq(upstream_owed(&up), 2);
    cr_assert_eq(owed_kind(0), UP_SERVER_PROBE);
    cr_assert_eq(owed_kind(1), UP_REPLY);
    cr_assert_eq(up.server, UP_SERVER_ASKED);
    cr_assert_eq(send_kind(CMD_EXEC), 1);
    cr_assert_eq(send_kind(CMD_MULTI), 1);
    cr_assert_eq(upstream_owed(&up), 4, "asked once");
}

/* ---- a transaction the proxy wraps around a client's read ---- */

/* A stand-in for a client: the session's ops as far as the FIFO uses them. */
static struct client_session *const fake_client = (struct client_session *)&fake_client;
static upstream_hold_mark fake_mark;
static unsigned long long fake_next_seq(const struct client_session *c)
{
    (void)c;
    return 7;
}
static upstream_hold_mark *fake_hold_mark(struct client_session *c)
{
    (void)c;
    return &fake_mark;
}
static const upstream_client_ops fake_ops = {.next_seq = fake_next_seq, .hold_mark = fake_hold_mark};

static void wrap_setup(void)
{
    setup();
    srv.loop = uv_default_loop();
    upstream_set_session(&fake_ops, NULL);
    static const char wrapped[] =
        "*1\r\n$5\r\nMULTI\r\n*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nEXEC\r\n";
    cr_assert_eq(upstream_forward_transaction(&up, fake_client, wrapped, sizeof(wrapped) - 1, 2), 1);
}

/* The head entry meets reply `r`: where it goes, and to whom (NULL:
 * dropped); then it is done. */
static up_route answer(const char *r, struct client_session **to)
{
    up_route route = up_decide(&up, r, strlen(r), 1);
    *to = up_fifo_head(&up)->client;
    up_fifo_pop(&up);
    return route;
}

Test(upstream_count, a_wrapped_transaction_gives_its_client_exec_alone, .init = wrap_setup, .fini = teardown)
{
    cr_assert_eq(upstream_owed(&up), 4);
    cr_assert(owed_kind(0) == UP_WRAP && owed_kind(1) == UP_WRAP && owed_kind(2) == UP_WRAP);
    cr_assert_eq(owed_kind(3), UP_WRAP_EXEC);
    struct client_session *to;
    cr_assert(answer("+OK\r\n", &to) == ROUTE_REPLY && to == NULL, "MULTI's +OK is dropped");
    cr_assert(answer("+QUEUED\r\n", &to) == ROUTE_REPLY && to == NULL);
    cr_assert(answer("+QUEUED\r\n", &to) == ROUTE_REPLY && to == NULL);
    cr_assert(answer("*2\r\n$-1\r\n$4\r\nPONG\r\n", &to) == ROUTE_REPLY && to == fake_client,
              "EXEC's is the client's");
    cr_assert_eq(upstream_owed(&up), 0);
}

/* -BUSY in place of a +QUEUED (a script of someone else's past its
 * threshold) is the client's answer; the rest, EXEC's -EXECABORT among it,
 * is dropped. */
Test(upstream_count, a_refusal_inside_a_wrapped_transaction_is_the_clients_answer, .init = wrap_setup,
     .fini = teardown)
{
    struct client_session *to;
    cr_assert(answer("+OK\r\n", &to) == ROUTE_REPLY && to == NULL);
    cr_assert(answer("-BUSY Redis is busy\r\n", &to) == ROUTE_REPLY && to == fake_client);
    cr_assert(answer("-BUSY Redis is busy\r\n", &to) == ROUTE_REPLY && to == NULL);
    cr_assert(answer("-EXECABORT Transaction discarded\r\n", &to) == ROUTE_REPLY && to == NULL);
}

/* A refused MULTI: the commands behind it run outside any transaction, and
 * their replies are dropped. -NOPERM (the user lacks MULTI) is not what the
 * command alone would meet: it goes to the session to send again, and the
 * connection wraps nothing more. */
Test(upstream_count, a_refused_multi_goes_to_the_session_to_send_again, .init = wrap_setup, .fini = teardown)
{
    struct client_session *to;
    cr_assert(answer("-NOPERM this user has no permissions to run the 'multi' command\r\n", &to) ==
                  ROUTE_WRAP_REFUSED &&
              to == fake_client);
    cr_assert(answer("$-1\r\n", &to) == ROUTE_REPLY && to == NULL);
    cr_assert(answer("+PONG\r\n", &to) == ROUTE_REPLY && to == NULL);
    cr_assert(answer("-ERR EXEC without MULTI\r\n", &to) == ROUTE_REPLY && to == NULL);
    cr_assert_not(upstream_can_wrap(&up), "wraps again");
}

/* Out of memory Redis refuses every command queued in MULTI, reads too: the
 * read goes again another way, and the connection waits a while. */
Test(upstream_count, out_of_memory_a_read_goes_again_and_wrapping_pauses, .init = wrap_setup,
     .fini = teardown)
{
    struct client_session *to;
    up.shared = 1;
    cr_assert(answer("+OK\r\n", &to) == ROUTE_REPLY && to == NULL);
    cr_assert(answer("-OOM command not allowed when used memory > 'maxmemory'.\r\n", &to) ==
                  ROUTE_WRAP_REFUSED &&
              to == fake_client);
    cr_assert(answer("-OOM command not allowed when used memory > 'maxmemory'.\r\n", &to) == ROUTE_REPLY &&
              to == NULL);
    cr_assert(answer("-EXECABORT Transaction discarded because of previous errors.\r\n", &to) ==
                  ROUTE_REPLY &&
              to == NULL);
    cr_assert_not(upstream_can_wrap(&up));
    up.wrap_paused_until = uv_now(srv.loop); /* (a second later) */
    cr_assert(upstream_can_wrap(&up));
}

/* An EXEC Redis does not know (rename-command) leaves the transaction open:
 * the connection goes, and no connection wraps again. */
Test(upstream_count, an_unknown_exec_closes_the_connection, .init = wrap_setup, .fini = teardown)
{
    struct client_session *to;
    for (int i = 0; i < 3; i++)
        answer(i ? "+QUEUED\r\n" : "+OK\r\n", &to);
    cr_assert_eq(answer("-ERR unknown command 'EXEC', with args beginning with: \r\n", &to), ROUTE_WRAP_OPEN);
    cr_assert(srv.wrap_disabled);
}

/* MULTI and EXEC both renamed away: the refused MULTI opened no
 * transaction, so EXEC's unknown-command error closes nothing (the read
 * goes again as its script, and nothing wraps again). */
Test(upstream_count, with_multi_and_exec_renamed_nothing_is_lost, .init = wrap_setup, .fini = teardown)
{
    struct client_session *to;
    cr_assert_eq(answer("-ERR unknown command 'MULTI', with args beginning with: \r\n", &to),
                 ROUTE_WRAP_REFUSED);
    cr_assert(to == fake_client);
    cr_assert(srv.wrap_disabled);
    cr_assert(answer("$-1\r\n", &to) == ROUTE_REPLY && to == NULL);
    cr_assert(answer("$1\r\n1\r\n", &to) == ROUTE_REPLY && to == NULL);
    cr_assert(answer("-ERR unknown command 'EXEC', with args beginning with: \r\n", &to) == ROUTE_REPLY &&
              to == NULL);
}

/* A user that may not run EXEC: Redis discards the transaction and says
 * why; the read goes again, and this connection wraps nothing more. */
Test(upstream_count, an_exec_the_user_may_not_run_sends_the_read_again, .init = wrap_setup, .fini = teardown)
{
    struct client_session *to;
    for (int i = 0; i < 3; i++)
        answer(i ? "+QUEUED\r\n" : "+OK\r\n", &to);
    cr_assert_eq(
        answer("-EXECABORT Transaction discarded because of: NOPERM User u has no permissions to run the "
               "'exec' command\r\n",
               &to),
        ROUTE_WRAP_REFUSED);
    cr_assert(to == fake_client);
    cr_assert_eq(up.wrap_paused_until, UINT64_MAX);
}

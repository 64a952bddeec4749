/* Reply counting (proxy/upstream/upstream_count.c) without a socket: what
 * a connection expects to be answered, entry by entry, as requests are
 * queued. The integration stories check the same against redis-server
 * (test_transactions, test_pubsub, test_monitor, test_protocol_errors);
 * here each rule is pinned on its own: MULTI ... EXEC counts every queued
 * reply, SUBSCRIBE and CLIENT REPLY OFF stop counting, RESET starts it
 * again, and a reply the proxy makes on an uncounted connection needs a
 * closing barrier. Nothing is written: the requests stay in the output
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

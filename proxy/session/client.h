/* client.h - one client connection (a session).
 *
 * Reads requests, cuts them with the request parser, forwards them to its
 * upstream connection, and writes replies back in request order. The order is
 * kept by a queue of pending replies, one per request that will be answered: a
 * pending reply either waits for the upstream's reply or already holds a reply the
 * proxy made itself (a protocol error, "upstream unavailable"). Slots leave
 * the queue only from the front, so a reply the proxy makes never overtakes
 * an upstream reply still owed.
 *
 * Upstream. With shared-upstreams > 0 a new session sends its commands on
 * a shared upstream connection (upstream.h). The first command that needs
 * connection state (command.h: cmd_needs_own_connection), or a request big
 * enough to be streamed, moves it to a connection of its own for good:
 * once every reply it is owed on the shared connection is in (so nothing
 * it sent there can run after what it sends next), it opens one and sends
 * that command there.
 *
 * Ownership: the session owns its input buffer (requests are forwarded as
 * pieces pointing into it, so it is compacted only after the upstream's
 * flush), its pending replies and the bytes of its local replies, its output queue and
 * its upstream connection (closed with it). It frees itself in the close
 * callback of its handle. The input buffer and the ring of pending replies are pooled
 * (pool.h): taken for a burst of work, given back once everything read is
 * parsed and no reply is owed, so an idle session holds neither. */
#ifndef VP_CLIENT_H
#define VP_CLIENT_H

#include <uv.h>

#include "protocol/resp_request.h"
#include "proxy/buffer.h"
#include "proxy/net/outq.h"
#include "proxy/server.h"
#include "proxy/upstream/upstream.h"

typedef enum client_pending_kind {
    PENDING_WAITING, /* the upstream owes this reply */
    PENDING_READY    /* the whole reply is in data/len */
} client_pending_kind;

/* A pending reply is named by its sequence number (the FIFO entries of the upstream
 * carry it): replies normally fill the front pending reply and go straight out, but
 * after a NOSCRIPT retry the reply of a later one arrives first and is held in
 * the pending reply until the ones before it are answered. */
typedef struct client_pending {
    client_pending_kind kind;
    unsigned replace : 1;      /* data is the proxy's answer; the upstream's is dropped */
    unsigned patch : 3;        /* introspect_patch_kind: fill the verbs into a COMMAND reply */
    unsigned err : 1;          /* the reply going out is an error (metrics) */
    unsigned pooled : 1;       /* data is a block of the small held replies' pool */
    unsigned pop_wait : 1;     /* a blocking pop on a conveyor key: held whole, the wait marker retried
                                  (client_block.c) */
    unsigned wrap : 3;         /* conveyor_wrap_shape: a read on a conveyor key in a transaction with its
                                  offset; data starts with the command (wrap_cmd bytes, RESP), the
                                  reply is held behind it and rewritten (client_conveyor_unwrap) */
    unsigned wrap_checked : 1; /* that read is a checked one (conveyor_wrap.h): its script's reply last */
    unsigned wrap_fpconv : 1;  /* its server's double format (resp_double_format) */
    unsigned cmd : 16;         /* the command's id (cmdid.h; CMDID_NONE: answers none) */
    unsigned wrap_cmd;         /* wrap: the length of the command at the start of data */
    uint64_t t0;               /* when its bytes were read (metrics_read_clock; 0: not timed) */
    size_t len, cap;
    char *data;    /* owned */
    int *verb_ids; /* patch: owned */
    int nverb_ids;
    struct cmerge *merge; /* cluster mode: the parts of a split or fanned-out command (owned) */
} client_pending;

/* Cluster mode: the replies to a split command's parts are for one pending reply;
 * the part's number (from 1) is in the top bits of their sequence number
 * (sequence numbers never get near 2^48). */
#define CLIENT_PART_SHIFT 48
#define CLIENT_PART_SEQ(seq, part) ((seq) | ((unsigned long long)((part) + 1) << CLIENT_PART_SHIFT))

typedef struct client_session {
    vp_server *srv;
    unsigned long long id;
    union {
        uv_handle_t handle;
        uv_stream_t stream;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } h;
    char addr[64];
    struct vp_tls *tls; /* on tls-port: the session (proxy/net/tls.h); NULL: plaintext */

    vp_buf in; /* bytes read; in[in_pos..] not yet parsed (pooled: empty while idle) */
    size_t in_pos;
    resp_request_parser parser;

    upstream_conn *up; /* its own or a shared one (up->shared); NULL between a failed connect and the next
                          request. Cluster mode: the connection its last command went on; on shared
                          connections it may be owed replies on others too (each node's), which fill
                          its pending replies by sequence number as they come */
    struct upstream_node *route_node; /* cluster mode: the node of the command at hand (route_node_for) */
    struct cnodes *nodes; /* cluster mode: state that follows it to each node, its own connections to other
                             nodes (client_nodes.c); NULL until needed */
    char up_error[160];
    int answering_unavailable; /* answer what is buffered with up_error */

    client_pending *pending; /* ring (pooled: NULL while no reply is owed) */
    size_t pending_head, pending_len, pending_cap;
    unsigned long long pending_seq; /* sequence number of the front pending reply */
    unsigned long long read_seq;    /* client_next_seq() when its last read came in */
    uint64_t read_ns;               /* metrics_read_clock() at its last read: the pending replies' t0 */
    unsigned short cur_cmd;         /* id of the command being dispatched (CMDID_NONE between) */
    /* client_next_seq() when upstream_noauth was set: replies to what it
     * sent before say nothing about Redis requiring AUTH. */
    unsigned long long noauth_seq;

    outq out;
    /* On a shared connection: the last CLIENT SETNAME, SETINFO LIB-NAME and
     * SETINFO LIB-VER requests, sent again on its own connection if it
     * moves. */
    vp_buf setters[3];

    unsigned reading : 1;
    unsigned paused : 1;          /* reading stopped by the proxy (counted in srv->clients_paused) */
    unsigned input_done : 1;      /* read no more (protocol error, upstream lost) */
    unsigned close_when_done : 1; /* close once every pending reply is answered and written */
    unsigned closing : 1;
    unsigned opaque : 1;       /* after SYNC/PSYNC: bytes, not commands */
    unsigned streaming : 1;    /* a large request is being forwarded as it arrives */
    unsigned settling : 1;     /* the next command waits for the verbs before it (upstream_must_settle_verbs),
                                  or, on a shared connection, for every reply owed before it moves */
    unsigned own_upstream : 1; /* on a connection of its own for the rest of the session */
    unsigned touched : 1;      /* in srv->touched */
    unsigned deferred : 1;     /* in srv->deferred (cluster mode: flushed in the check phase) */
    /* On a shared connection, reasons not to read (and parse) it for now: */
    unsigned shared_wait : 1; /* the shared connection's backlog must drain (up->waiters) */
    unsigned output_held : 1; /* its own output must drain (a slow reader) */
    unsigned owed_wait : 1;   /* it is owed CLIENT_SHARED_MAX_OWED replies already */
    unsigned slow_reader : 1; /* its output was held once: its next command moves it */
    unsigned used_shared : 1; /* it sent commands on a shared connection */
    unsigned
        cluster_wait : 1; /* cluster mode: a command waits for the first slot map (client_cluster_ready) */
    unsigned on_lost : 1; /* cluster mode: owed a reply by a shared connection being lost (marker) */
    unsigned multi_deferred : 1; /* cluster mode: its MULTI was answered, and waits for the node of the
                                    command after it (client_route_deferred_multi) */
    unsigned own_state : 1;   /* cluster mode: its own connection holds lasting state (client_note_own_state)
                                 and stays on its node */
    unsigned own_tx : 1;      /* cluster mode: ... a transaction or WATCH, until EXEC, DISCARD, UNWATCH */
    unsigned big_replies : 1; /* it got a reply over CLIENT_BIG_REPLY there: its next command moves it */
    /* The proxy's own users (auth.h): has it authenticated (or needs not)? */
    unsigned authed : 1;
    /* The command at hand passed the gate (client_admit) and may go
     * upstream; cleared before each command is parsed. */
    unsigned admitted : 1;
    /* Redis requires AUTH and this client has not sent one: it left the
     * shared connection for that (client_move_to_own), or sent RESET,
     * and sent no AUTH or HELLO ... AUTH since. Redis refuses its commands
     * with -NOAUTH. */
    unsigned upstream_noauth : 1;
    /* Exempt from `timeout`, as in Redis's clientsCronHandleTimeout: it
     * subscribed (until RESET), or is a MONITOR. */
    unsigned pubsub : 1;
    unsigned monitor : 1;
    /* The end of a drain (client_drain_close): FIN once everything owed is
     * written, then the close when the client closes too. */
    unsigned linger : 1;
    unsigned shut : 1;
    /* Over TLS: the close sends no close_notify (client_close_gone): the
     * socket broke. */
    unsigned gone : 1;
    /* On a shared connection: how many replies it may be owed at once
     * (client_share_window), and the bytes of the reply coming in. */
    unsigned short share_window;
    unsigned front_started : 1; /* part of the front pending reply went out already */
    /* A blocking pop on a conveyor key waits (client_block.c): nothing
     * after it is read or sent. */
    unsigned pop_wait : 1;
    unsigned pop_resume : 1; /* ... answered: resume at the end of the read (client_round_end) */
    struct client_pop *pop;
    size_t reply_bytes;
    uint64_t eof_at;  /* loop time the client sent EOF with replies owed, 0 = not */
    uint64_t last_io; /* loop time it was last read from or written to (`timeout`) */
    /* The batch hold's mark (upstream_hold.c), kept here for it. */
    upstream_hold_mark hold;

    struct client_session *prev, *next;
    struct client_session *touched_next;
    struct client_session *deferred_next;
} client_session;

/* A new connection on a listener (`tls`: the tls-port one). */
void client_accept(vp_server *srv, uv_stream_t *listener, int is_unix, int tls);
/* Close it. Over TLS, once the handshake is over, the close_notify alert
 * goes out as the last bytes first (outq_close_notify), as from Redis. */
void client_close(client_session *c);
/* The end of a drain (proxy/ops/lifecycle.c): read nothing more, drop what was
 * read but not sent upstream, and close once every reply owed for what was
 * sent is written. */
void client_drain_close(client_session *c);
/* Has it sent commands on a shared upstream connection (this session)? */
int client_used_shared(const client_session *c);
/* At start: the timer of blocking pops on conveyor keys (client_block.c). */
void client_block_init(vp_server *srv);
/* At exit: the scratch commands on conveyor keys were built in. */
void client_conveyor_free(vp_server *srv);
/* Once a second: let go of clients that left with replies still owed, and
 * close those idle past `timeout`. */
void client_cron(vp_server *srv);

/* Called by the upstream connection. */
void client_upstream_ready(client_session *c);
void client_upstream_failed(client_session *c, const char *reason);
void client_upstream_lost(client_session *c, const char *reason);
/* Its own upstream's replies stopped being RESP: may the rest of the
 * session be a byte pipe? Not if a reply of the proxy's own waits behind
 * one of Redis's, or a held reply behind one still owed: in a pipe they
 * could not be placed. */
int client_can_become_pipe(const client_session *c);
/* Make it one, as after SYNC (`why`: the framer's error, for the log):
 * what is held of the reply in progress goes out, every pending reply is dropped,
 * and from now on its input goes upstream as bytes and the upstream's bytes
 * come back with client_push. */
void client_become_pipe(client_session *c, const char *why);
/* The sequence number the next pending reply queued will have. */
unsigned long long client_next_seq(const client_session *c);
/* Bytes of the reply owed to pending reply `seq` (p NULL: nothing to write, e.g.
 * our barrier); `done` on its last piece. */
void client_reply(client_session *c, unsigned long long seq, const char *p, size_t n, int done);
/* Bytes that answer no pending reply: pushes, subscribe-mode and MONITOR streams. */
void client_push(client_session *c, const char *p, size_t n);
/* The upstream finished a read round: write what it gave us. */
void client_round_end(client_session *c);
/* The upstream's output queue drained: read requests again. */
void client_upstream_drained(client_session *c);

/* A shared connection gave the client a reply: flush it at the end of the
 * read (client_flush_touched). */
void client_touch(client_session *c);
void client_flush_touched(vp_server *srv);
/* Cluster mode, the loop's check phase: write what client_flush_touched
 * held back for clients still owed replies by another node. */
void client_flush_deferred(vp_server *srv);
/* A shared connection's events, for every client on it. */
void client_shared_ready(vp_server *srv, upstream_conn *up);
void client_shared_failed(vp_server *srv, upstream_conn *up, const char *reason);
void client_shared_lost(vp_server *srv, upstream_conn *up, const char *reason);
void client_shared_drained(vp_server *srv, upstream_conn *up);
/* A reload retired this shared connection (upstream_retire_shared): its
 * clients owing it nothing (all: every one) leave it, and take the new one
 * with their next command. */
void client_shared_retired(vp_server *srv, upstream_conn *up, int all);
/* Cluster mode (cluster.c): a slot map was accepted: clients waiting for
 * one go on; or the first fetch failed: they get the error. */
void client_cluster_ready(vp_server *srv);
void client_cluster_failed(vp_server *srv, const char *reason);
/* Sentinel mode: the primary moved (srv->conf.upstream* now names the new
 * one; proxy/route/sentinel.c). As after a reload's address change, the
 * shared and side connections are retired: new requests go to new
 * connections, which load their scripts before their first verb like any
 * new one, and clients owing them nothing move silently. A client with
 * requests in flight on the old primary gets their replies, then a clean
 * close (client_drain_close): writes the old primary acknowledged after
 * the replica stopped following it are lost (Redis replicates
 * asynchronously), and moving that client on silently would show it its
 * own writes vanishing; a close tells it, as Redis's CLIENT KILL on the
 * demoted node tells a direct client. A client's own connection holds
 * state (database, transaction, subscriptions) on a node that is no
 * primary any more: the same. (main.c has the readiness probe reconnect
 * too.) */
void client_primary_moved(vp_server *srv);
/* The owner of a client's own connections (its argument: the client). */
extern const upstream_owner client_own_owner;
/* Give the upstream and route layers the session's callbacks
 * (upstream_set_session, route_set_session): once, before any connection
 * is opened. */
void client_register(void);
/* A reload replaced srv->verbs (the old contents now at `old`): COMMAND
 * replies still owed name the new table's verbs. */
void client_verbs_replaced(vp_server *srv, const verb_table *old);

#endif

/* upstream.h - one connection to one upstream node.
 *
 * It writes the requests it is given, frames the replies that come back
 * (protocol/resp_frame) and hands each reply to whoever is owed it. What is
 * owed is a FIFO of entries, one per reply the node will send, in send
 * order. An entry names a client (its reply goes to that client's
 * pending reply `seq`, through the session's upstream_client_ops), or carries the
 * callback of the module that asked (upstream_ask: the readiness probe, a
 * slot-map fetch, sentinel's ROLE, a script load, an output-limit probe),
 * or marks a change of counting (below). The connection itself never
 * knows who is behind a callback: whoever opens it gives an owner
 * (upstream_owner) that hears of its events: ready, failed, lost, drained.
 *
 * Counting replies. Nearly every command gets exactly one reply. The
 * exceptions are tracked on the send side (command.h): MULTI ... EXEC count
 * one reply per command, and SUBSCRIBE, MONITOR, CLIENT REPLY OFF/SKIP and
 * REPLCONF turn the connection into a stream whose replies cannot be counted
 * ("raw" mode). In raw mode every reply goes straight to the client in
 * arrival order, until the +RESET of a RESET makes it countable again. When
 * the proxy must place a reply of its own after what a raw connection still
 * sends (a protocol error, before it closes), it sends a closing barrier,
 * RESET and `PING verbproxy:barrier:<token>`, and releases its reply when
 * their answers come back. RESP3 pushes ('>') are out of band in every mode.
 *
 * Own and shared connections. A client with connection state (a database,
 * a transaction, subscriptions) has a connection of its own, whose FIFO
 * names only it. With `shared-upstreams` > 0, clients without state send
 * their commands on one of a few shared connections per node (each node's
 * shared[], upstream_node.h), whose entries name many clients. Their
 * requests are copied (the client's buffer moves on at once) and all
 * written once per loop iteration (upstream_flush_shared), sooner when 8 KiB
 * gathers, later while two writes are unanswered (up_shared_write); replies
 * are handed to each entry's client, and the clients given something are
 * flushed at the end of the read (the shared owner's read_done). A shared
 * connection never carries state: a client that needs some moves to its
 * own connection first (client.c). The side connection (upstream_side.c)
 * is one more shared connection, for the commands Redis answers while a
 * script is busy.
 *
 * Lifetime: created by its owner (a shared one by the first client that
 * needs it); freed by itself after upstream_close() once libuv has closed
 * its handles. After a failure or upstream_close() it never calls anyone
 * again. */
#ifndef VP_UPSTREAM_H
#define VP_UPSTREAM_H

#include <uv.h>

#include "protocol/resp_frame.h"
#include "proxy/buffer.h"
#include "proxy/cmd/command.h"
#include "proxy/net/outq.h"
#include "proxy/server.h"

struct client_session;
typedef struct upstream_node upstream_node; /* upstream_node.h: the node a connection goes to */

typedef enum up_entry_kind {
    UP_REPLY,         /* one reply for the client's pending reply `seq` (no client: dropped) */
    UP_VERB,          /* a verb's EVALSHA: its reply for pending reply `seq`, or NOSCRIPT -> reload, retry */
    UP_ASK,           /* a request of the proxy's own: its answer goes to `answer` (upstream_ask) */
    UP_CLOSE_BARRIER, /* RESET + barrier PING before the connection closes */
    UP_RESET,         /* RESET sent in raw mode: its +RESET ends raw mode */
    UP_RAW_START,     /* from here on replies are not counted (no reply of its own) */
    UP_OPAQUE_START,  /* from here on the stream is not RESP (SYNC/PSYNC) */
    UP_SERVER_PROBE,  /* our HELLO (no arguments): read, never shown (upstream_server.c) */
    UP_HELLO,         /* the client's HELLO: its reply is the client's, and says the protocol */
    UP_WRAP,          /* MULTI or a queued command of a transaction the proxy wrapped around a client's
                         command (upstream_forward_transaction): +OK / +QUEUED dropped */
    UP_WRAP_EXEC      /* that transaction's EXEC: its reply is the client's */
} up_entry_kind;

struct upstream_conn;
/* The answer to a request of the proxy's own (upstream_ask): the whole
 * reply p..p+n, its entry already done. Called only for a reply that came
 * whole within the ask's size (a larger one is dropped unread); a
 * connection that fails or is lost first tells its owner instead
 * (upstream_owner), never the ask. */
typedef void (*upstream_answer_fn)(struct upstream_conn *up, void *arg, const char *p, size_t n);

typedef struct up_entry {
    struct client_session *client;
    unsigned long long seq; /* the client's pending reply */
    up_entry_kind kind;
    unsigned keep;           /* bytes of `kept` this request owns, released with the entry */
    short verb;              /* UP_VERB: index in the verb table */
    short retries;           /* UP_VERB: times sent again after a NOSCRIPT */
    unsigned char redirects; /* cluster mode: times sent again after a -MOVED or -ASK */
    unsigned char tries;     /* cluster mode: times sent again after a -TRYAGAIN (tryagain.h) */
    unsigned char asked;     /* cluster mode: sent after ASKING (a -TRYAGAIN's retry is too) */
    unsigned char multi;     /* UP_WRAP: its transaction's MULTI (refused: none was opened) */
    unsigned later_ran : 1;  /* UP_VERB, retried: a later command of its client ran before the retry */
    unsigned
        flush_epoch : 31;    /* a SCRIPT FLUSH (or an EXEC running one): srv->scripts_epoch it set; else 0 */
    unsigned long long sent; /* numbers the requests in send order */
    /* UP_ASK: who gets the answer, and how (UP_ASK_* flags). */
    upstream_answer_fn answer;
    void *answer_arg;
    unsigned ask_flags;
} up_entry;

/* ---- who hears of a connection ----
 * A connection never knows who opened it, nor whose its replies are: the
 * module that opens one gives it an owner (these callbacks and their
 * argument: a client session for its own connection, the session's pool
 * handlers for a shared one, the readiness probe, the cluster's map
 * fetch), each request the proxy makes for itself carries its answer
 * callback (upstream_ask), and the session gives every connection one way
 * to reach a client (upstream_client_ops). As hiredis's redisCallback and
 * Envoy's ClientCallbacks: the connection calls, the owner decides. Any
 * callback may be NULL. After failed or lost the connection is closed and
 * never calls again. */
typedef struct upstream_owner {
    void (*ready)(struct upstream_conn *up, void *arg); /* may take requests: connected, setup answered */
    void (*failed)(struct upstream_conn *up, void *arg, const char *why); /* the connect did not succeed */
    void (*lost)(struct upstream_conn *up, void *arg, const char *why);   /* broke after connecting */
    void (*drained)(struct upstream_conn *up, void *arg);                 /* everything queued is written */
    /* A read was handed on: what clients were given may be written (their
     * output may point into the connection's read buffer until then). */
    void (*read_done)(struct upstream_conn *up, void *arg);
    /* A shared connection a reload replaced: `closing` once it owes nothing. */
    void (*retired)(struct upstream_conn *up, void *arg, int closing);
} upstream_owner;

/* The batch hold's mark on a client (upstream_hold.c), kept by the client
 * and touched only by the hold: the millisecond it last sent on a shared
 * connection, the batch it joined there last, and that connection
 * (cluster mode: one of several nodes'; only compared, never followed). */
typedef struct upstream_hold_mark {
    uint64_t window;
    unsigned batch;
    const void *up;
} upstream_hold_mark;

/* How a connection hands a reply to a client (given by the session once,
 * upstream_set_session): entries name clients, opaque here. */
typedef struct upstream_client_ops {
    unsigned long long (*next_seq)(const struct client_session *c); /* the pending reply it will queue next */
    void (*reply)(struct client_session *c, unsigned long long seq, const char *p, size_t n, int done);
    void (*push)(struct client_session *c, const char *p, size_t n); /* out of band, in arrival order */
    void (*touch)(struct client_session *c);                         /* given something: flush at read_done */
    int (*can_become_pipe)(const struct client_session *c);
    void (*become_pipe)(struct client_session *c, const char *why);
    /* The connection it was owed a reply on was lost (a shared one's). */
    void (*lost)(struct client_session *c, const char *why);
    /* Its batch hold mark (upstream_hold.c). */
    upstream_hold_mark *(*hold_mark)(struct client_session *c);
    /* Its id (which shared connection of a node it takes). */
    unsigned long long (*id)(const struct client_session *c);
    /* Redis refused a transaction wrapped around its command for a reason
     * the command alone would not meet (-OOM, -NOPERM, an unknown MULTI):
     * send the command again for pending reply `seq` on `up` some other way,
     * or answer it with p..p+n. */
    void (*wrap_refused)(struct client_session *c, unsigned long long seq, struct upstream_conn *up,
                         const char *p, size_t n);
} upstream_client_ops;

/* What the modules above (Sentinel, Cluster) watch on every connection
 * (vp_server's upstream_watch; NULL: nobody). */
typedef struct upstream_watch {
    /* A connection was just opened: queue its setup (sentinel: ROLE). */
    void (*opened)(struct upstream_conn *up);
    /* A node without an address (sentinel mode before a primary is known): why. */
    const char *(*why_no_address)(vp_server *srv);
    /* A connect failed, or a connection was lost. */
    void (*trouble)(vp_server *srv, const char *why);
    /* A counted reply that is a whole error (e: its entry, a client's
     * request or a silent one): 1 takes it back (redirect is then called
     * for it), 0 lets it go on. */
    int (*error_reply)(struct upstream_conn *up, const up_entry *e, const char *p, size_t n);
    /* Send e's request (req..req+reqn, the connection's kept copy) where
     * the error p..p+n says: 1 done, 0 not (the client then gets the error). */
    int (*redirect)(struct upstream_conn *up, const up_entry *e, const char *req, size_t reqn, const char *p,
                    size_t n);
} upstream_watch;

/* How an ask is answered (upstream_ask). */
#define UP_ASK_LARGE 1 /* read its reply whole up to 16 MiB (a slot map, a ROLE), not 16 KiB */
#define UP_ASK_SETUP 2 /* part of the connection's setup: no client's request goes before its answer */
#define UP_ASK_REFUSAL                                                                                       \
    4 /* its error, first on the connection, may be Redis refusing it (upstream_refusal)                     \
       */

/* Which scripts this connection has had loaded: one bit per script (the
 * verb table's load index); scripts past the 64th are loaded all at once
 * and share the top bit. */
#define UP_SCRIPTS_ALL (~0ULL)

/* How an argument error for a verb (or a reply the proxy makes on a
 * connection that goes on) must be delivered. */
typedef enum up_local_mode {
    UP_LOCAL_IN_ORDER, /* counted, outside MULTI: a ready pending reply in the client's queue */
    UP_LOCAL_IN_MULTI, /* inside MULTI: answered now, and the transaction must abort */
    UP_LOCAL_IN_STREAM /* replies uncounted: Redis itself must send the error, in its stream */
} up_local_mode;

typedef enum upstream_state { UPSTREAM_CONNECTING, UPSTREAM_READY, UPSTREAM_CLOSED } upstream_state;

/* What the proxy knows of the server at the other end (upstream_server.c). */
typedef enum up_server {
    UP_SERVER_UNKNOWN,   /* never asked */
    UP_SERVER_ASKED,     /* our HELLO is on its way */
    UP_SERVER_KNOWN,     /* name and version read */
    UP_SERVER_UNREADABLE /* HELLO refused (before AUTH, an ACL, a server before 6.2): taken as lacking
                            what it may lack */
} up_server;

/* Does Redis require AUTH of this connection (its authRequired)? Learned on
 * a shared connection, which never authenticates, from its replies: see
 * up_learn_auth. */
typedef enum up_auth { UP_AUTH_UNKNOWN, UP_AUTH_REQUIRED, UP_AUTH_NOT_REQUIRED } up_auth;

/* How a reply the proxy makes itself must be queued (flags). */
#define UP_LOCAL_BARRIER 1 /* a barrier was sent: queue a pending reply first */
#define UP_LOCAL_DROP 2    /* Redis would not have sent it (CLIENT REPLY OFF/SKIP) */

/* Writes a shared connection may have unanswered (see up_shared_write). */
#define UP_SHARED_BATCHES 2

typedef struct upstream_conn {
    vp_server *srv;
    upstream_node *node;           /* where it connects (upstream_node.h); the node outlives it */
    struct client_session *client; /* its one client; NULL once detached, and when shared */
    const upstream_owner *owner;   /* who hears of it (see upstream_owner) */
    void *owner_arg;
    upstream_state state;
    int shared;         /* one of its node's shared[]: its entries name many clients */
    int shared_index;   /* its place there (-1: the side connection) */
    int side;           /* its node's side (upstream_side.c): shared, for out-of-band commands only */
    unsigned waiters;   /* clients not read until its backlog drains (client shared_wait) */
    int flush_error;    /* a shared connection's early write failed: reported by the next flush */
    int setting_up;     /* a shared connection waits for its output-limit probe before clients use it */
    int announce_ready; /* its setup (our AUTH, auth state, output limit) was just answered: tell its
                           clients after the read */
    int authing;        /* our AUTH (upstream credentials) is not answered yet: not ready for clients */
    int setup_asks;  /* asks of its setup (UP_ASK_SETUP, e.g. sentinel's ROLE) not answered yet: not ready */
    int own_counted; /* counted in srv->own_upstreams (opened for a client) */
    /* A shared connection's writes not fully answered yet: the `sent` value
     * each one ended at, oldest first (see up_shared_write). */
    unsigned long long batch_end[UP_SHARED_BATCHES];
    int nbatches;
    unsigned long long marked; /* `sent` at the last write */
    /* The batch hold (upstream_hold.c): when the batch gathering was first
     * seen held (uv_hrtime, 0 = not held), its number, how many distinct
     * clients it holds, and how many sent in this millisecond (hold_window)
     * and the one before. */
    uint64_t hold_t0;
    unsigned hold_batch;
    unsigned hold_batch_clients;
    uint64_t hold_window;
    unsigned hold_cur, hold_prev;
    up_auth auth; /* shared: known from the first reply on (upstream_is_ready) */
    /* Shared: Redis stopped requiring AUTH of it (the password was removed):
     * a RESET makes it a connection Redis keeps in if a password is set
     * again, as one made now would be (up_reauth_after_read). */
    unsigned reauth_pending : 1;
    /* Wrap no transaction here before this time (uv_now; UINT64_MAX: never):
     * Redis refused one out of memory, or to this connection's user. */
    uint64_t wrap_paused_until;

    union {
        uv_handle_t handle;
        uv_stream_t stream;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } h;
    struct vp_tls *tls; /* upstream-tls: the session on the stream, from the connect on; NULL: plaintext */
    int lost;           /* it broke or Redis closed it (up_lost): its close sends no close_notify */
    uv_connect_t connect_req;
    uv_getaddrinfo_t resolve_req;
    uv_timer_t timer; /* connect timeout */
    int handles_open; /* handles not yet closed: freed when it reaches 0 */
    int stream_inited;
    int resolving;
    char error[128];

    outq out; /* requests; pieces point into the client's input buffer */
    /* Requests the proxy wrote itself (verbs rewritten into EVALSHA), kept
     * until their reply is in so a NOSCRIPT can be retried. FIFO like the
     * entries: kept[kept_head..] is live, each entry owns `keep` bytes. */
    vp_buf kept;
    size_t kept_head;
    vp_buf scratch;                    /* a request built for a raw connection, copied out at once */
    unsigned long long scripts_loaded; /* bits, as of scripts_epoch (a SCRIPT FLUSH since clears them) */
    unsigned scripts_epoch;            /* srv->scripts_epoch when scripts_loaded was last right */
    unsigned long long sent;           /* entries pushed so far */
    int verbs_in_flight;               /* UP_VERB entries not yet answered */
    int retries_in_flight;             /* of those, retried after a NOSCRIPT */
    unsigned long long reloaded_from;  /* `sent` when the last NOSCRIPT reload was sent */

    /* Replies: `in` (pooled, pool.h: empty while nothing is being read)
     * holds bytes read; in[in_pos..] is not yet handed on. A
     * small reply is handed on whole; one that grows past the stream
     * threshold is handed on piece by piece (`streaming`). */
    vp_buf in;
    size_t in_pos;
    resp_framer framer;
    int streaming;
    int route; /* where the reply being streamed goes */
    int reading;
    int paused;

    up_entry *fifo; /* ring (its first size pooled: NULL while nothing is owed) */
    size_t fifo_head, fifo_len, fifo_cap;

    /* Connection state, tracked as requests are sent. */
    unsigned raw_tx : 1;    /* requests now sent are not counted */
    unsigned raw_rx : 1;    /* replies now arriving are not counted */
    unsigned opaque_rx : 1; /* replies are not RESP any more */
    unsigned in_multi : 1;
    unsigned multi_special : 1; /* a queued command will change counting at EXEC */
    unsigned reply_off : 1;
    unsigned skip_next : 1;
    unsigned multi_flush : 1; /* a SCRIPT FLUSH is queued in the open transaction */
    int reset_held;           /* a +RESET held back while waiting for a closing barrier */

    /* Redis refusing the connection: the first reply on it was an error
     * answering one of the proxy's silent requests (the PUBLISH of a move,
     * CLIENT NO-EVICT, a SETNAME replay, a SCRIPT LOAD), e.g. "-ERR max
     * number of clients reached", which Redis writes as it accepts and then
     * closes. Kept until another reply arrives; if the connection is lost
     * first, the clients waiting on it get it (upstream_refusal). */
    char refusal[224]; /* (a TLS refusal names the upstream and the reason) */
    unsigned char refusal_len;
    unsigned replied : 1; /* a reply has arrived on it */

    /* The server (upstream_server.c): learned from a HELLO, ours or the
     * client's. The protocol is the client's (own connection; a shared one
     * is always RESP2), as of the last request sent: a HELLO whose answer
     * is not in yet, or one queued in MULTI, leaves it unsure. */
    up_server server;
    unsigned has_aggregate_count : 1; /* known: Redis 8.8 or later */
    unsigned resp3 : 1;
    unsigned resp_unsure : 1;       /* a HELLO was queued in a transaction */
    unsigned long long unsure_sent; /* `sent` when it was (a probe sent before does not settle it) */
    unsigned server_noauth : 1; /* our HELLO got -NOAUTH: the client has not authenticated (own connection) */
    int hellos_in_flight;       /* the client's HELLOs not answered yet */
    unsigned long long reset_sent; /* `sent` after the last RESET (HELLOs before it no longer count) */
    unsigned long long
        auth_sent;        /* `sent` after the client's last AUTH or HELLO (a probe before it may be stale) */
    char server_name[16]; /* "redis", "valkey"... */
    char server_version[24];
    /* Which text of the scripts it loads and calls, with which commands
     * (verb_dialect): VERB_DIALECT_7 until a HELLO says the server is an
     * older Redis. A verb waits until the server is known (upstream_verb_must_wait). */
    unsigned dialect : 1;
    unsigned load_error_logged : 1; /* a refused SCRIPT LOAD was logged (once per connection) */
    /* The server's answer to the last SCRIPT LOAD of each script that it
     * refused, by load index of the table in use (NULL: loaded, or not
     * refused); malloc'd at the first refusal. A verb whose EVALSHA meets
     * NOSCRIPT behind it gets this answer instead. */
    char **load_errors;
    int nload_errors;

    /* A config reload (proxy/ops/reload.c): */
    struct verb_table *vt; /* the verb table its verbs in flight were sent with, when a reload replaced it
                              (a reference, dropped once they are answered); NULL: srv->verbs */
    int retired;           /* a shared or side connection replaced by a reload: takes nothing new, closes once
                              it owes nothing (srv->retired lists it) */
    struct upstream_conn *retired_next;
    /* Every connection open, for the walks over all of them (upstream.c). */
    struct upstream_conn *all_next, *all_prev;

    char barrier_cmd[96];   /* PING <token> */
    char barrier_reply[64]; /* its answer */
} upstream_conn;

/* ---- the walk over shared connections, written once ----
 * fn(up, arg) for each open connection of the kinds asked: every node's
 * shared ones, their side ones, the retired ones (replaced by a reload,
 * still owed replies). fn may close the connection at hand, never
 * another. */
#define UP_EACH_SHARED 1
#define UP_EACH_SIDE 2
#define UP_EACH_RETIRED 4
#define UP_EACH_ALL (UP_EACH_SHARED | UP_EACH_SIDE | UP_EACH_RETIRED)
typedef void (*upstream_each_fn)(upstream_conn *up, void *arg);
void upstream_each_shared(vp_server *srv, unsigned which, upstream_each_fn fn, void *arg);
/* The same over one node's (UP_EACH_SHARED, UP_EACH_SIDE). */
void upstream_each_on_node(upstream_node *node, unsigned which, upstream_each_fn fn, void *arg);
/* Has the node a shared connection that serves clients now? */
int upstream_node_is_ready(upstream_node *node);

/* Start connecting to `node` (its address as it is now) for `client` (its
 * own connection; NULL: a shared, side, probe or fetch connection), told
 * to `owner` (with `arg`). Never fails synchronously: a failure is
 * reported through owner->failed from the loop. */
upstream_conn *upstream_open(vp_server *srv, upstream_node *node, struct client_session *client,
                             const upstream_owner *owner, void *arg);
/* The session's ways to reach a client, and the owner every shared
 * connection gets (its argument: srv). Once, before any connection. */
void upstream_set_session(const upstream_client_ops *clients, const upstream_owner *shared);
/* The session's client ops, for the layers between (route: a redirect or
 * a retry answered to its client). */
const upstream_client_ops *upstream_clients(void);
/* Send a request of the proxy's own (req copied), its whole reply to
 * answer(up, arg, ...): see upstream_answer_fn, UP_ASK_*. */
void upstream_ask(upstream_conn *up, const char *req, size_t n, upstream_answer_fn answer, void *arg,
                  unsigned flags);
/* A setup ask (UP_ASK_SETUP) was answered as hoped: once none is left the
 * connection serves clients. Its answer must say this or
 * upstream_setup_failed, or wait for the connection's loss (a refusal):
 * until then the connect timeout runs. */
void upstream_setup_done(upstream_conn *up);
/* A setup ask was answered otherwise: the connection fails as a connect
 * that did not succeed, with `why`. */
void upstream_setup_failed(upstream_conn *up, const char *why);
/* Is p..p+n what Redis writes to a connection it will not serve
 * (maxclients, protected mode)? It closes next; the connection's loss then
 * reports it (upstream_refusal), so an ask's answer should wait for that. */
int upstream_is_refusal(const char *p, size_t n);

/* ---- what a connection owes: its entries, oldest first ---- */
/* How many replies it owes, and the i-th (0: the oldest). For modules that
 * must look (a client deciding whether it may leave); nobody else changes
 * an entry but through the calls here. */
size_t upstream_owed(const upstream_conn *up);
const up_entry *upstream_owed_at(const upstream_conn *up, size_t i);
/* Connected, and may take requests: a shared connection only once its
 * setup is answered: CLIENT NO-EVICT's reply said whether Redis requires
 * AUTH of it, and the output-limit probe whether clients may share. */
int upstream_is_ready(const upstream_conn *up);
/* Does Redis require AUTH of this shared connection (so each client on it
 * is held to Redis's pre-auth limits by the proxy)? 0 for an own one. */
int upstream_requires_auth(const upstream_conn *up);
/* The same as last learned by any shared connection to up's node: does
 * Redis there require AUTH of a connection that has not authenticated, or
 * does its default user need a password (upstream_defauth.c)? (For a
 * client's own connection; 0 while none has learned it.) */
int upstream_node_requires_auth(const upstream_conn *up);
/* Did it ever get as far as serving clients (its setup answered)? A shared
 * connection lost before that is a failed connect for its clients. */
int upstream_was_set_up(const upstream_conn *up);
/* The shared connection to `node` for a client with this id: the open one,
 * or a new one (connecting). Clients get theirs through route_shared_for. */
upstream_conn *upstream_shared(vp_server *srv, upstream_node *node, unsigned long long client_id);
/* The client leaves a shared connection: replies still owed to it are
 * dropped when they come. */
void upstream_detach_client(upstream_conn *up, struct client_session *c);
/* Writes a shared connection's queue now if it has grown large (the rest
 * goes in upstream_flush_shared; a write error is reported there). */
void upstream_flush_early(upstream_conn *up);
/* Write what every shared connection gathered in this loop iteration (from
 * the server's prepare handle). */
void upstream_flush_shared(vp_server *srv);
/* At shutdown (the side connection and retired ones too). */
void upstream_close_shared(vp_server *srv);
/* A reload changed what upstream connections are opened with (credentials,
 * TLS, the verb table, the address): the shared and side connections are
 * retired, new requests go to new ones, each old one closes once every
 * reply it owes is in (clients on it move once they owe it nothing). */
void upstream_retire_shared(vp_server *srv);
/* A reload is about to replace srv->verbs, whose contents now live at
 * `old`: every connection with verbs in flight keeps a reference to it
 * (their FIFO entries index it); returns how many took one. */
int upstream_keep_verbs(vp_server *srv, struct verb_table *old);
/* The verb table this connection's requests index. */
const struct verb_table *upstream_verbs(const upstream_conn *up);

/* ---- the server at the other end (upstream_server.c) ----
 * The server's name and version say which dialect its scripts are written
 * in (verb_dialect: Redis 6.2 or 7.0 and later), and whether AGGREGATE
 * COUNT (Redis 8.8) must be completed by the proxy's script
 * (aggregate-count-polyfill). They are learned with a silent HELLO (no
 * arguments: it changes nothing) once per connection: on a shared
 * connection as part of its setup, on an own one when its client first
 * calls a verb, or sends MULTI (a verb queued there cannot wait). */
/* Send the silent HELLO. */
void upstream_ask_server(upstream_conn *up);
/* Must a verb or polyfill call wait (settle) before it can be decided and
 * sent? Asks the server when it has to. v: the entry (proxy/verbs/verbs.h). */
struct verb_def;
int upstream_verb_must_wait(upstream_conn *up, const struct verb_def *v);
/* Should this call run as the proxy's script (1) or go to Redis as it is (0)? */
int upstream_polyfill_wanted(const upstream_conn *up);
/* A HELLO of the client's was just forwarded (its entry is the last). */
void upstream_note_hello(upstream_conn *up);
/* An AUTH or HELLO of the client's was just forwarded (own connection): it
 * may have authenticated, so a refused probe is asked again. */
void upstream_note_auth(upstream_conn *up);
/* A RESET was just forwarded: the connection speaks RESP2 from there on. */
void upstream_note_reset(upstream_conn *up);
/* Is nothing outstanding that a held command waits for: the verbs before it
 * (NOSCRIPT), the server probe, a HELLO? */
int upstream_is_settled(const upstream_conn *up);

/* Redis's `client-output-buffer-limit normal` applies to a shared
 * connection as a whole: one client's big reply would make Redis close it
 * under every client on it. So the proxy asks (CONFIG GET, silently) when a
 * shared connection opens (clients wait for the answer), every
 * UP_OUTPUT_PROBE_MS after, and after a CONFIG SET it forwards; while the
 * normal class has a limit, srv->sharing_off is set and every client gets a
 * connection of its own, where Redis applies the limit to it alone
 * (upstream_outlimit.c). */
#define UP_OUTPUT_PROBE_MS 5000
/* Queue the probe on this connection (if it counts replies, outside MULTI). */
void upstream_probe_output_limit(upstream_conn *up);
/* Once a second: probe the shared connections when it is time (while
 * nobody shares, one to `primary` is kept open to ask). */
void upstream_cron(vp_server *srv, upstream_node *primary);

/* A shared connection opened while Redis's default user needed no password
 * stays authenticated when a password is set later (Redis keeps
 * connections made before in), and would let in every client that comes
 * after. So where the proxy has no upstream credentials it asks `ACL
 * GETUSER default` with the output-limit probe, and after a CONFIG SET or
 * ACL command it forwards; once the default user needs a password, clients
 * that connected after that was learned leave the shared connection at
 * their first command, as clients that have not authenticated
 * (upstream_defauth.c). */
void upstream_probe_default_user(upstream_conn *up);
/* Must this client, on shared connection up, be taken for one that has not
 * authenticated: does Redis require AUTH there (-NOAUTH), or did the default
 * user get a password before the client connected? */
int upstream_client_needs_auth(const upstream_conn *up, unsigned long long client_id);
/* A request Redis answers even while a script is busy (cmd_is_out_of_band)
 * from a client on a shared connection: sent on the side connection
 * (upstream_side.c), whose reply goes to the client's next pending reply. Returns 1
 * (a reply is owed). */
int upstream_side_forward(vp_server *srv, upstream_node *node, struct client_session *c, const char *p,
                          size_t n);
/* Cluster mode: one part of SCRIPT KILL or FUNCTION KILL sent to every
 * primary, on that node's side connection (as upstream_forward_part). */
int upstream_side_forward_part(vp_server *srv, struct upstream_node *node, struct client_session *c,
                               unsigned long long seq, const char *p, size_t n);
/* The client is gone: replies owed to it on the side connection are dropped. */
void upstream_side_detach(vp_server *srv, struct client_session *c);
/* Cluster mode: the request `e` kept (req..req+n) was redirected to this
 * connection's node, or is tried again there: send it again here (after
 * ASKING when `asking`), its reply for the same pending reply. Its counts
 * (redirects, tries) go with it as the caller set them. */
void upstream_resend(upstream_conn *up, const up_entry *e, const char *req, size_t n, int asking);
/* Cluster mode, on a shared connection: one part of a split or fanned-out
 * command (req copied and kept, like every request there, for redirects),
 * its reply for the client's pending reply `seq` with the part's number in its top
 * bits (CLIENT_PART_SEQ). */
int upstream_forward_part(upstream_conn *up, struct client_session *c, unsigned long long seq,
                          const char *req, size_t n);
/* A transaction the proxy wraps around one client's command, so that
 * what it reads with the command (a conveyor key's offset) is of the same
 * moment: req (copied) is MULTI, `queued` commands, EXEC. The MULTI's +OK
 * and each +QUEUED are dropped; EXEC's reply is the client's, for the
 * pending reply it queues next. Any other answer to the MULTI or a queued
 * command (-BUSY while a script runs past its threshold, -LOADING, an
 * arity error) is the client's instead, and the rest is dropped; but a
 * refusal the command alone would not meet (-OOM: Redis refuses every
 * command queued in MULTI out of memory, reads too; -NOPERM; MULTI
 * unknown) goes to the session's wrap_refused, which sends the command
 * again another way, and this connection wraps nothing for a while (-OOM:
 * a second) or ever again (-NOPERM; an unknown MULTI or EXEC: no
 * connection does). No transaction outlives its EXEC: Redis (6.2 on)
 * answers an EXEC it refuses -EXECABORT and discards the transaction
 * (rejectCommand); only an EXEC it does not know (rename-command) leaves
 * it open, and the connection is then closed as lost. Only where
 * upstream_can_wrap says. */
int upstream_forward_transaction(upstream_conn *up, struct client_session *c, const char *req, size_t n,
                                 int queued);
/* The same with a verb's script queued last: req is MULTI and `queued`
 * commands; then EVALSHA of v (loaded first where this connection has not
 * loaded it) with nkeys and argv (its keys, then its arguments), and EXEC.
 * A NOSCRIPT is not retried here: it is the script's place in EXEC's
 * reply (conveyor_wrap.h's checked reads send the command again). */
int upstream_forward_transaction_script(upstream_conn *up, struct client_session *c, const char *req,
                                        size_t n, int queued, const struct verb_def *v, int nkeys, int argc,
                                        const resp_arg *argv);
/* The request just sent (the newest entry) answers pending reply `seq`
 * instead of the next one: a command sent again (wrap_refused). */
void upstream_answer_as(upstream_conn *up, unsigned long long seq);
/* May a transaction be wrapped here: a shared connection (no transaction
 * or WATCH of a client's on it, RESP2) outside cluster mode (a redirect
 * resends one request, never a transaction), counting its replies? */
int upstream_can_wrap(const upstream_conn *up);
/* Send one request (bytes stay the caller's until upstream_flush()). Returns 1
 * if a reply will come back for it, so the client queues a pending reply
 * (whose sequence number the entry records: client_next_seq()). */
int upstream_forward(upstream_conn *up, struct client_session *c, const char *p, size_t n, cmd_kind kind);
/* The same for bytes that go away before the flush: copied. */
int upstream_forward_copy(upstream_conn *up, struct client_session *c, const char *p, size_t n,
                          cmd_kind kind);
/* Send a checked verb call as EVALSHA (or EVAL inside MULTI / uncounted).
 * Returns 1 if a reply will come back for it. */
struct verb_def;
struct verb_call;
int upstream_forward_verb(upstream_conn *up, struct client_session *c, const struct verb_def *v,
                          const struct verb_call *call, int argc, const resp_arg *argv);
/* How a reply the proxy makes now must be delivered (see up_local_mode). */
up_local_mode upstream_local_mode(const upstream_conn *up);
/* Inside MULTI: make Redis abort the transaction at EXEC, as it does after
 * a command with wrong arguments. Its reply is for a pending reply that
 * already holds the proxy's own error. Returns 1 (a reply is owed). */
int upstream_flag_multi(upstream_conn *up, struct client_session *c);
/* Have Redis answer `err` ("ERR ...") in its stream: uncounted, or queued
 * inside MULTI (EXEC then returns it in the command's place). Returns 1 if
 * a counted reply comes back for it. */
int upstream_error_in_stream(upstream_conn *up, struct client_session *c, const char *err);
/* Must this command wait until every verb sent before it is answered?
 * A verb answered NOSCRIPT is sent again after whatever followed it, so
 * those commands are held back until the verbs before them are settled:
 * MULTI, SUBSCRIBE, MONITOR, CLIENT REPLY OFF|SKIP (the retry would be
 * queued, or its reply not counted), SELECT, AUTH, HELLO, RESET (it would
 * run in another database, as another user, in another protocol) and the
 * blocking commands (it would wait behind them). One round trip, only when
 * a verb is pipelined right before one of them. */
int upstream_must_settle_verbs(const upstream_conn *up, int argc, const resp_arg *argv);
/* A SCRIPT FLUSH (kind CMD_PLAIN), or EXEC, DISCARD or RESET, was just
 * forwarded (`answered`: it has a counted reply). Loads nothing now: every
 * upstream connection of the proxy loads the scripts again before its next
 * verb, once when the flush is sent and again when it is answered (another
 * connection may have loaded between the two, before Redis ran it). A flush
 * queued in MULTI counts at EXEC. */
void upstream_scripts_flushed(upstream_conn *up, cmd_kind kind, int answered);
/* A request of the proxy's own whose reply nobody sees (copied). */
void upstream_forward_silent(upstream_conn *up, const char *p, size_t n);
/* Bytes with no reply of their own (the rest of a streamed request, a
 * replication stream). */
void upstream_forward_bytes(upstream_conn *up, const char *p, size_t n);
/* An empty request ("\r\n", "*0"): no reply, but it ends a CLIENT REPLY SKIP. */
void upstream_forward_empty(upstream_conn *up, const char *p, size_t n);
/* The client is about to answer a request itself and then close the
 * connection (a protocol error). Returns UP_LOCAL_* flags. A reply the proxy
 * makes on a connection that goes on (a verb's argument error) will need a
 * barrier that leaves Redis's state alone: an addition for the verbs. */
int upstream_closing_reply(upstream_conn *up, struct client_session *c);
/* Is every request now sent answered by exactly one counted reply? (Only
 * then may a request be streamed: a half-sent request cannot be followed by
 * a barrier.) */
int upstream_is_counting(const upstream_conn *up);
/* End of a client's input round: write. Returns 0 or a libuv error. */
int upstream_flush(upstream_conn *up);
size_t upstream_backlog(const upstream_conn *up);
/* Writing to it failed (status < 0) where the caller flushed: it is lost,
 * and its client told, as for a failure found by the upstream itself. */
void upstream_write_failed(upstream_conn *up, int status);
/* The error Redis refused this connection with (see upstream_conn.refusal),
 * NULL if none: the reply a client's waiting command gets when the
 * connection is lost. */
const char *upstream_refusal(upstream_conn *up, size_t *len);
void upstream_pause_reading(upstream_conn *up);
void upstream_resume_reading(upstream_conn *up);
/* Detach and close; the object frees itself later. Never calls the client.
 * Over TLS, once the handshake is over and unless it was lost, the
 * close_notify alert goes out first (outq_close_notify): Redis then reads
 * a clean end. */
void upstream_close(upstream_conn *up);

#endif

/* faultproxy.h - a TCP proxy that injects faults, for integration tests.
 *
 * A test puts it between two real processes (verbproxy -> faultproxy ->
 * redis-server, later TLS or cluster nodes) and makes the link misbehave
 * the way networks and dying servers do:
 *  - CUT:   close both sides with a FIN at an exact byte,
 *  - RESET: reset both sides (SO_LINGER 0: RST, unsent bytes dropped),
 *  - STALL: stop forwarding one direction for a while, or until released,
 *  - SLICE: forward one direction in small pieces (fixed or pseudo-random
 *           sizes) with pauses between them: split replies, slow links.
 * A fault acts on one direction of a connection: bytes the connecting side
 * sends to the target (VT_FP_TO_TARGET: requests, for verbproxy -> redis)
 * or bytes the target sends back (VT_FP_FROM_TARGET: replies). It triggers
 * after `at` bytes in that direction, counted on each connection from the
 * moment the fault is armed (0: at once), and applies to the first
 * connection that gets there, to every connection, or to those open now
 * (`scope`). So "cut the reply stream at byte 150001" and "reset everything,
 * now" are the same call.
 *
 * Triggers are exact: the proxy never reads past the next trigger, so the
 * bytes before it are forwarded and not one byte after (for CUT and STALL;
 * RESET drops what the kernel had not sent yet, as a real RST does).
 *
 * The proxy is a thread of the test process (poll() on non-blocking
 * sockets), listening on 127.0.0.1 on a port the kernel picks. Every socket
 * is close-on-exec, so servers the test starts later do not inherit them.
 * Without a fault it forwards both directions unchanged and passes on a
 * half-close (FIN) or a reset of either side to the other. When the target
 * refuses a connection, the accepted one is reset at once (the connecting
 * side sees its connection reset, not a refused connect).
 *
 * Thread safety: every function may be called from any thread of the test
 * while the proxy runs. vt_faultproxy_arm() returns once the proxy thread
 * has seen the fault, so a fault with at == 0 has already fired on the
 * connections open now when it returns.
 *
 * Ownership: the test owns the vt_faultproxy; vt_faultproxy_stop() closes
 * every connection (a reset), joins the thread and frees it. Errors are
 * returned (NULL, -1, false) with a line on stderr saying why; nothing here
 * asserts or aborts except on out-of-memory. */
#ifndef VT_FAULTPROXY_H
#define VT_FAULTPROXY_H

#include <stdbool.h>
#include <stddef.h>

#define VT_FP_MAX_FAULTS 32           /* faults armed over the proxy's life */
#define VT_FP_CUT_DRAIN_MS 2000       /* a CUT waits this long for both peers to close */
#define VT_FP_CONNECT_TIMEOUT_MS 2000 /* connecting to the target */

typedef enum vt_fp_dir {
    VT_FP_TO_TARGET,   /* from the side that connects to the target (requests) */
    VT_FP_FROM_TARGET, /* from the target back (replies) */
} vt_fp_dir;

typedef enum vt_fp_action {
    /* Forward the bytes before the trigger, then close both sides with a
     * FIN: nothing more flows either way (what a peer sends after the cut,
     * a reply to the last request for instance, is read and discarded
     * until it closes, so no RST follows; after VT_FP_CUT_DRAIN_MS the
     * connection is reset). */
    VT_FP_CUT,
    /* Close both sides at once with SO_LINGER 0: each peer gets an RST. */
    VT_FP_RESET,
    /* Forward what was read before the trigger, then read nothing more in
     * this direction for stall_ms, or (stall_ms 0) until
     * vt_faultproxy_release(). The other direction goes on; the kernel's
     * buffers fill and push back on the sender as on a stuck peer. */
    VT_FP_STALL,
    /* From the trigger on, forward `len` bytes (0: the rest of the
     * connection) at most `chunk` bytes per write (with `random`: 1..chunk,
     * pseudo-random from `seed`), waiting pause_us after each piece. */
    VT_FP_SLICE,
} vt_fp_action;

typedef enum vt_fp_scope {
    VT_FP_FIRST, /* the first connection (open now or later) to reach `at`; then the fault is spent */
    VT_FP_EACH,  /* every connection, open now or later, once each */
    VT_FP_OPEN,  /* every connection open now, once each; not later ones */
} vt_fp_scope;

/* What to do, where and when. Zero-initialise and fill in what matters:
 * (vt_fault){.action = VT_FP_CUT, .dir = VT_FP_FROM_TARGET, .at = 150001}. */
typedef struct vt_fault {
    vt_fp_action action;
    vt_fp_dir dir;
    long long at; /* bytes in dir on a connection, from arming (or its accept), before it fires */
    vt_fp_scope scope;
    int stall_ms;  /* STALL: how long; 0 until vt_faultproxy_release() */
    size_t chunk;  /* SLICE: largest piece (>= 1) */
    int pause_us;  /* SLICE: pause after each piece */
    bool random;   /* SLICE: piece sizes pseudo-random in 1..chunk */
    unsigned seed; /* SLICE with random: the sequence (same seed, same pieces) */
    long long len; /* SLICE: bytes sliced, then normal forwarding again (0: all) */
} vt_fault;

typedef struct vt_faultproxy vt_faultproxy; /* opaque; see above for ownership */

/* Counters since the start (consistent with each other). */
typedef struct vt_fp_stats {
    long long accepted; /* connections accepted */
    long long open;     /* connection pairs open now (including ones a CUT drains) */
    long long refused;  /* accepted, but the target could not be reached */
    long long bytes[2]; /* forwarded, indexed by vt_fp_dir */
    long long fired;    /* faults fired, all of them, counting each connection */
} vt_fp_stats;

/* Listen on 127.0.0.1:<a port the kernel picks> and forward every
 * connection to 127.0.0.1:target_port (which need not be up yet). NULL on
 * failure. */
vt_faultproxy *vt_faultproxy_start(int target_port);
/* The port to give the connecting side (verbproxy's --upstream). */
int vt_faultproxy_port(const vt_faultproxy *fp);
/* Arm a fault; returns its id (>= 0), or -1 for a fault that makes no sense
 * (SLICE with chunk 0, negative at...) or when VT_FP_MAX_FAULTS were armed. */
int vt_faultproxy_arm(vt_faultproxy *fp, const vt_fault *f);
/* Stop a fault from firing again (what it did stays done). */
void vt_faultproxy_disarm(vt_faultproxy *fp, int id);
/* Disarm fault `id` and end every stall it caused (buffered bytes then
 * flow again); a no-op for other actions. */
void vt_faultproxy_release(vt_faultproxy *fp, int id);
/* How many times fault `id` fired (one per connection it hit). */
long long vt_faultproxy_fired(vt_faultproxy *fp, int id);
/* Until fault `id` has fired at least n times; false at the timeout. */
bool vt_faultproxy_wait_fired(vt_faultproxy *fp, int id, long long n, int timeout_ms);
/* Bytes the STALL fault `id` holds back now: what its stalled directions'
 * senders wrote and nobody has read (their sockets' receive queues). A
 * sender that wrote after the stall fired shows here. */
long long vt_faultproxy_held(vt_faultproxy *fp, int id);
vt_fp_stats vt_faultproxy_stats(vt_faultproxy *fp);
/* Reset every connection, stop the thread, close the listener, free. NULL
 * is a no-op. */
void vt_faultproxy_stop(vt_faultproxy *fp);

#endif

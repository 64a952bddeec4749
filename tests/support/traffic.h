/* traffic.h - checked client traffic that may be cut: for fault stories.
 *
 * A group of worker threads, each running sessions one after another: a
 * session is a new connection, one pipeline of mixed commands on keys of
 * its own (SET, GET, INCR, a missing key, values over 16 KiB so replies
 * stream, optionally MULTI/EXEC and the virtual verbs ZTICK, QPOP,
 * LOCKRELEASE), every reply compared byte for byte with what it must be,
 * then close. Requests are written while replies are read (poll), so a
 * session never deadlocks on full socket buffers.
 *
 * The verdict on each session is one of:
 *  - complete: every reply right, in order;
 *  - closed: the replies that came were right and in order (a prefix of
 *    what was expected, possibly ending inside a reply), then the
 *    connection closed (EOF or reset). What a client of a Redis that died
 *    or a link that broke sees;
 *  - unavailable (only with opts.allow_unavailable, for stories where Redis
 *    is down for a while): right replies, then from some reply on every
 *    reply is verbproxy's "-ERR upstream unavailable: ..." and nothing else;
 *  - failed: a wrong byte, a reply out of order, or no end (complete or
 *    closed) within opts.session_deadline_ms. The first failure stops that
 *    worker and is the group's verdict, with the offset, the reply's index
 *    and the bytes expected and received.
 * The sessions of one worker never share keys, so a session cut anywhere
 * leaves no state that the next one depends on.
 *
 * Keys are `vtf:<pid>:<group>:<worker>:<session>:*`; several groups can run
 * against one server.
 *
 * Ownership: the group is the test's; vt_traffic_stop()/vt_traffic_finish()
 * join the threads and free it. Errors are returned, never asserted here. */
#ifndef VT_TRAFFIC_H
#define VT_TRAFFIC_H

#include <stdbool.h>
#include <stddef.h>

#define VT_TRAFFIC_MAX_WORKERS 32
#define VT_TRAFFIC_SESSION_DEADLINE_MS 10000 /* default opts.session_deadline_ms */
#define VT_TRAFFIC_BIG_MIN (16 * 1024 + 1)   /* the smallest big value: over the proxy's streaming size */

typedef struct vt_traffic_opts {
    int workers;            /* threads (1..VT_TRAFFIC_MAX_WORKERS) */
    int tx_workers;         /* of those, how many also send MULTI ... EXEC in each round */
    int sessions;           /* per worker; 0: until vt_traffic_stop() */
    int rounds;             /* command groups per session (0: 4); about 15 commands each */
    bool verbs;             /* ZTICK, QPOP, LOCKRELEASE: needs verbproxy in front */
    bool allow_unavailable; /* "-ERR upstream unavailable" ends a session without failing it */
    /* With allow_unavailable: the upstream may come back within a session
     * (a Sentinel failover): after the first "unavailable" the session's
     * later replies are only framed and counted, not checked (the requests
     * answered "unavailable" were never sent, so later values differ). */
    bool allow_recovery;
    int session_deadline_ms; /* 0: VT_TRAFFIC_SESSION_DEADLINE_MS */
    /* In front of a Redis Cluster: a transaction's keys share a hash tag
     * (and a counter of their own), as Redis Cluster wants; the other
     * keys still spread over every slot, and each round adds MGET, EXISTS
     * and DEL over keys of several slots (split by the proxy). */
    bool cluster;
} vt_traffic_opts;

typedef struct vt_traffic_result {
    long long sessions;    /* ended, all verdicts */
    long long complete;    /* every reply right */
    long long closed;      /* a right prefix, then closed */
    long long unavailable; /* a right prefix, then only "upstream unavailable" */
    long long replies;     /* replies checked right, all sessions */
    bool failed;
    char why[2048]; /* the first failure ("" if none) */
} vt_traffic_result;

typedef struct vt_traffic vt_traffic;

/* Start the workers against 127.0.0.1:port. NULL (why on stderr) for bad
 * options. A worker that cannot connect fails. */
vt_traffic *vt_traffic_start(int port, const vt_traffic_opts *opts);
/* Until `more` further replies (all workers, counted from this call) were
 * checked right. False at the timeout or once a worker failed. */
bool vt_traffic_wait_replies(vt_traffic *t, long long more, int timeout_ms);
/* Sessions under way that have sent requests and are still owed replies. */
int vt_traffic_owed(vt_traffic *t);
/* Sessions that ended closed so far (all workers). */
long long vt_traffic_closed(vt_traffic *t);
/* Has a worker failed yet? */
bool vt_traffic_failed(vt_traffic *t);
/* Start no new session; wait for the ones under way to end; join, free.
 * True if nothing failed. res (if not NULL) gets the counts. */
bool vt_traffic_stop(vt_traffic *t, vt_traffic_result *res);
/* The same, but let every worker run its opts.sessions first (sessions > 0). */
bool vt_traffic_finish(vt_traffic *t, vt_traffic_result *res);

#endif

/* topology.h - when to fetch the cluster's slot map again, and whether to
 * believe what came: the refresh policy as a pure state machine.
 *
 * The router owns the map (slotmap.h) and the connection the fetch goes
 * on; this module only decides, given the time, which the caller passes in
 * (milliseconds of a monotonic clock: the proxy's loop time, a test's fake
 * clock). Policy:
 *
 *   - Coalesced: at most one CLUSTER SLOTS in flight, and at most one
 *     started per TOPO_MIN_INTERVAL_MS (1 s). Every reason to refresh that
 *     comes while one is in flight or too soon after the last one is folded
 *     into the next fetch.
 *   - Reasons: start-up; every TOPO_PERIOD_MS (10 s) after the last fetch
 *     ended (new replicas, a failover nobody has hit yet; CLUSTER SLOTS
 *     costs a node microseconds); a -MOVED (the router has already moved
 *     that one slot: slotmap_moved); a -CLUSTERDOWN; a node connection
 *     that failed or was refused; a failed fetch (retried at the pace
 *     above, never in a tight loop).
 *   - Never a smaller map without confirmation: a map covering fewer slots
 *     than the one it would replace is held, not used, and another fetch
 *     is asked for (the caller sends it to another node); only if that one
 *     also covers fewer slots is the new one accepted. A node that lost its
 *     view (restarted empty, partitioned, CLUSTER RESET) cannot blank the
 *     proxy's routing by being asked first. A map covering no slot never
 *     replaces one that covers some.
 *
 * No allocation, no libuv: the caller arms a timer for topo_next_ms(). */
#ifndef VP_TOPOLOGY_H
#define VP_TOPOLOGY_H

#include <stdint.h>

#define TOPO_MIN_INTERVAL_MS 1000
#define TOPO_PERIOD_MS 10000

typedef enum topo_reason {
    TOPO_START = 1 << 0,
    TOPO_PERIODIC = 1 << 1,
    TOPO_MOVED = 1 << 2,
    TOPO_CLUSTERDOWN = 1 << 3,
    TOPO_CONN_FAILED = 1 << 4,
    TOPO_FETCH_FAILED = 1 << 5,
    TOPO_CONFIRM = 1 << 6 /* a smaller map came: fetch again before using it */
} topo_reason;

typedef enum topo_verdict {
    TOPO_ACCEPT, /* use the new map */
    TOPO_HOLD,   /* smaller: keep the old one; a confirming fetch is wanted */
    TOPO_REJECT  /* covers no slot (the old one does): keep the old; another fetch is wanted */
} topo_verdict;

typedef struct topo {
    int in_flight;             /* a fetch started and not yet reported */
    unsigned wanted;           /* topo_reason bits asked for since the last start; 0: none */
    unsigned fetching;         /* the reasons the fetch in flight answers */
    uint64_t last_start_ms;    /* when the last fetch started */
    uint64_t next_periodic_ms; /* when TOPO_PERIODIC is wanted next */
    int held_covered;          /* -1, or the coverage of a smaller map awaiting confirmation */
    /* counters (for VERBPROXY STATS and the tests) */
    uint64_t fetches, accepted, held, rejected, failed, coalesced;
} topo;

/* A fresh policy: a TOPO_START fetch is wanted at once. */
void topo_init(topo *t, uint64_t now_ms);
/* Something asks for a refresh (one bit of topo_reason). */
void topo_want(topo *t, uint64_t now_ms, topo_reason why);
/* 1: start a fetch now (it is then in flight: report it with topo_fetched
 * or topo_fetch_failed); 0: not now. */
int topo_should_fetch(topo *t, uint64_t now_ms);
/* Milliseconds from now until topo_should_fetch may say 1 (0: now);
 * while a fetch is in flight, until the next periodic one would be due
 * after it (the fetch's own timeout is the caller's). */
uint64_t topo_next_ms(const topo *t, uint64_t now_ms);
/* The fetch in flight brought a map covering new_covered slots; the map in
 * use covers old_covered. */
topo_verdict topo_fetched(topo *t, uint64_t now_ms, int old_covered, int new_covered);
/* The fetch in flight failed (error reply, unparsable, connection lost,
 * the caller's timeout): another is wanted, at the usual pace. */
void topo_fetch_failed(topo *t, uint64_t now_ms);

#endif

/* proxy/route/topology.c, the refresh policy, on a fake clock: coalescing (one
 * fetch in flight, one per second however many MOVEDs), the period, the
 * reasons, failures retried at the same pace, and a smaller map held until
 * a second fetch confirms it. */
#include <criterion/criterion.h>

#include "proxy/route/topology.h"

#define FULL 16384

Test(topology, start_fetches_at_once_then_only_periodically)
{
    topo t;
    uint64_t now = 5000;
    topo_init(&t, now);
    cr_assert_eq(topo_next_ms(&t, now), 0);
    cr_assert(topo_should_fetch(&t, now));
    cr_assert_not(topo_should_fetch(&t, now), "one in flight at most");
    now += 20;
    cr_assert_eq(topo_fetched(&t, now, 0, FULL), TOPO_ACCEPT);
    cr_assert_eq(topo_next_ms(&t, now), TOPO_PERIOD_MS);
    for (uint64_t ms = now; ms < now + TOPO_PERIOD_MS; ms += 100)
        cr_assert_not(topo_should_fetch(&t, ms));
    now += TOPO_PERIOD_MS;
    cr_assert(topo_should_fetch(&t, now));
    cr_assert(t.fetching & TOPO_PERIODIC);
    cr_assert_eq(t.fetches, 2);
}

Test(topology, a_storm_of_moved_costs_one_fetch_per_second)
{
    topo t;
    uint64_t now = 0;
    topo_init(&t, now);
    cr_assert(topo_should_fetch(&t, now));
    cr_assert_eq(topo_fetched(&t, now + 5, 0, FULL), TOPO_ACCEPT);
    /* 1000 MOVEDs over 3 s, the fetch answering quickly each time */
    int started = 0;
    for (now = 10; now < 3010; now += 3) {
        topo_want(&t, now, TOPO_MOVED);
        if (topo_should_fetch(&t, now)) {
            started++;
            cr_assert(t.fetching & TOPO_MOVED);
            cr_assert_eq(topo_fetched(&t, now + 2, FULL, FULL), TOPO_ACCEPT);
        }
    }
    cr_assert(started >= 2 && started <= 3, "%d fetches", started);
    cr_assert_gt(t.coalesced, 900);
}

Test(topology, reasons_while_in_flight_are_folded_into_the_next_fetch)
{
    topo t;
    uint64_t now = 0;
    topo_init(&t, now);
    cr_assert(topo_should_fetch(&t, now));
    topo_want(&t, 100, TOPO_CLUSTERDOWN);
    topo_want(&t, 200, TOPO_CONN_FAILED);
    cr_assert_not(topo_should_fetch(&t, 300));
    cr_assert_eq(topo_fetched(&t, 400, 0, FULL), TOPO_ACCEPT);
    cr_assert_eq(topo_next_ms(&t, 400), 600, "one second after the last start");
    cr_assert_not(topo_should_fetch(&t, 999));
    cr_assert(topo_should_fetch(&t, 1000));
    cr_assert_eq(t.fetching, TOPO_CLUSTERDOWN | TOPO_CONN_FAILED);
}

Test(topology, a_failed_fetch_is_retried_at_the_same_pace)
{
    topo t;
    uint64_t now = 0;
    topo_init(&t, now);
    for (int i = 0; i < 5; i++) {
        cr_assert(topo_should_fetch(&t, now));
        topo_fetch_failed(&t, now + 10);
        cr_assert_not(topo_should_fetch(&t, now + 10));
        cr_assert_eq(topo_next_ms(&t, now + 10), TOPO_MIN_INTERVAL_MS - 10);
        now += TOPO_MIN_INTERVAL_MS;
    }
    cr_assert_eq(t.failed, 5);
}

Test(topology, a_smaller_map_needs_a_second_fetch)
{
    topo t;
    uint64_t now = 0;
    topo_init(&t, now);
    cr_assert(topo_should_fetch(&t, now));
    cr_assert_eq(topo_fetched(&t, now, 0, FULL), TOPO_ACCEPT);
    /* a node says it serves only part: held, and a confirmation wanted */
    now += 1000;
    topo_want(&t, now, TOPO_CONN_FAILED);
    cr_assert(topo_should_fetch(&t, now));
    cr_assert_eq(topo_fetched(&t, now, FULL, FULL - 5461), TOPO_HOLD);
    cr_assert(t.wanted & TOPO_CONFIRM);
    /* the confirming fetch shows the full map again: accepted, nothing held */
    now += 1000;
    cr_assert(topo_should_fetch(&t, now));
    cr_assert_eq(topo_fetched(&t, now, FULL, FULL), TOPO_ACCEPT);
    cr_assert_eq(t.held_covered, -1);
    /* smaller twice in a row: the second is believed */
    now += 1000;
    topo_want(&t, now, TOPO_CLUSTERDOWN);
    cr_assert(topo_should_fetch(&t, now));
    cr_assert_eq(topo_fetched(&t, now, FULL, 10923), TOPO_HOLD);
    now += 1000;
    cr_assert(topo_should_fetch(&t, now));
    cr_assert_eq(topo_fetched(&t, now, FULL, 10923), TOPO_ACCEPT);
    cr_assert_eq(t.held, 2);
}

Test(topology, an_empty_map_never_replaces_a_covering_one)
{
    topo t;
    uint64_t now = 0;
    topo_init(&t, now);
    cr_assert(topo_should_fetch(&t, now));
    cr_assert_eq(topo_fetched(&t, now, 0, 0), TOPO_ACCEPT, "nothing to lose yet");
    topo_want(&t, now, TOPO_CONN_FAILED);
    for (int i = 0; i < 3; i++) {
        now += 1000;
        cr_assert(topo_should_fetch(&t, now), "a rejected map asks for another fetch");
        cr_assert_eq(topo_fetched(&t, now, FULL, 0), TOPO_REJECT);
    }
    cr_assert_eq(t.rejected, 3);
}

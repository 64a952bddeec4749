/* topology.c - the slot map's refresh policy (topology.h). */
#include "proxy/route/topology.h"

#include <string.h>

void topo_init(topo *t, uint64_t now_ms)
{
    memset(t, 0, sizeof(*t));
    t->held_covered = -1;
    t->wanted = TOPO_START;
    t->next_periodic_ms = now_ms + TOPO_PERIOD_MS;
}

void topo_want(topo *t, uint64_t now_ms, topo_reason why)
{
    (void)now_ms;
    /* folded into a fetch still to start: one fetch answers them all */
    if (t->wanted || t->in_flight) t->coalesced++;
    t->wanted |= (unsigned)why;
}

static int too_soon(const topo *t, uint64_t now_ms)
{
    return t->fetches && now_ms < t->last_start_ms + TOPO_MIN_INTERVAL_MS;
}

int topo_should_fetch(topo *t, uint64_t now_ms)
{
    if (!t->in_flight && now_ms >= t->next_periodic_ms) t->wanted |= TOPO_PERIODIC;
    if (t->in_flight || !t->wanted || too_soon(t, now_ms)) return 0;
    t->in_flight = 1;
    t->fetching = t->wanted;
    t->wanted = 0;
    t->last_start_ms = now_ms;
    t->fetches++;
    return 1;
}

uint64_t topo_next_ms(const topo *t, uint64_t now_ms)
{
    uint64_t due;
    if (t->in_flight)
        due = t->next_periodic_ms > now_ms + TOPO_PERIOD_MS ? t->next_periodic_ms : now_ms + TOPO_PERIOD_MS;
    else if (t->wanted)
        due = t->fetches ? t->last_start_ms + TOPO_MIN_INTERVAL_MS : now_ms;
    else
        due = t->next_periodic_ms;
    if (!t->in_flight && t->fetches && due < t->last_start_ms + TOPO_MIN_INTERVAL_MS)
        due = t->last_start_ms + TOPO_MIN_INTERVAL_MS;
    return due > now_ms ? due - now_ms : 0;
}

static void ended(topo *t, uint64_t now_ms)
{
    t->in_flight = 0;
    t->fetching = 0;
    t->next_periodic_ms = now_ms + TOPO_PERIOD_MS;
}

topo_verdict topo_fetched(topo *t, uint64_t now_ms, int old_covered, int new_covered)
{
    ended(t, now_ms);
    if (new_covered == 0 && old_covered > 0) {
        t->rejected++;
        t->wanted |= TOPO_CONFIRM;
        return TOPO_REJECT;
    }
    if (new_covered >= old_covered || t->held_covered >= 0) {
        /* as big, or the second smaller one in a row: believed */
        t->held_covered = -1;
        t->accepted++;
        return TOPO_ACCEPT;
    }
    t->held_covered = new_covered;
    t->held++;
    t->wanted |= TOPO_CONFIRM;
    return TOPO_HOLD;
}

void topo_fetch_failed(topo *t, uint64_t now_ms)
{
    ended(t, now_ms);
    t->failed++;
    t->wanted |= TOPO_FETCH_FAILED;
}

/* rng.h - a small seeded pseudo-random generator (xorshift64) for tests
 * that want varied but repeatable input: the same seed gives the same
 * sequence, so a failing story names its seed and can be run again.
 *
 * Header only. Not for anything that needs good randomness. */
#ifndef VT_RNG_H
#define VT_RNG_H

#include <stdint.h>

typedef struct vt_rng {
    uint64_t s; /* never 0: xorshift stays at 0 forever */
} vt_rng;

static inline vt_rng vt_rng_seeded(uint64_t seed)
{
    vt_rng g = {seed ? seed : 0x9e3779b97f4a7c15ull};
    return g;
}

static inline uint64_t vt_rng_next(vt_rng *g)
{
    g->s ^= g->s << 13;
    g->s ^= g->s >> 7;
    g->s ^= g->s << 17;
    return g->s;
}

/* 0 .. n-1 (n > 0). */
static inline int vt_rng_pick(vt_rng *g, int n)
{
    return (int)(vt_rng_next(g) % (uint64_t)n);
}

#endif

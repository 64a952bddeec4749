/* test_position_bound.c - a range end in positions as a stored-score
 * bound (proxy/conveyor/position_bound.h): exactly the stored scores whose
 * position, stored + offset as a double sum, the end takes. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "proxy/conveyor/position_bound.h"

static int inside(double s, double position, int exclusive, int lower, double offset)
{
    double p = s + offset;
    if (lower) return exclusive ? p > position : p >= position;
    return exclusive ? p < position : p <= position;
}

static uint64_t state = 88172645463325252ULL;
static uint64_t next(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

/* Integers, halves, fractions of every size, near-ties. */
static double some_double(void)
{
    switch (next() % 5) {
    case 0:
        return (double)((int64_t)(next() % 2000001) - 1000000);
    case 1:
        return ((double)((int64_t)(next() % 2001) - 1000)) / 2;
    case 2:
        return ((double)(int64_t)next()) / 9007199254740992.0 * pow(10, (double)(next() % 30) - 10);
    case 3:
        return (double)((int64_t)(next() % 200001) - 100000) * 0.1;
    default:
        return ldexp((double)(next() % 1000) - 500, (int)(next() % 120) - 60);
    }
}

Test(position_bound, takes_exactly_the_stored_scores_whose_positions_the_end_takes)
{
    for (int i = 0; i < 200000; i++) {
        double offset = some_double(), position = some_double();
        if (next() % 3 == 0) position = offset + some_double(); /* (near the stored scores' own range) */
        int exclusive = (int)(next() & 1), lower = (int)(next() & 1);
        double t = position_bound_stored(position, exclusive, lower, offset);
        /* t is inside, the next double beyond it is not */
        cr_assert(inside(t, position, exclusive, lower, offset), "%.17g %.17g %d %d -> %.17g", position,
                  offset, exclusive, lower, t);
        double beyond = nextafter(t, lower ? -INFINITY : INFINITY);
        cr_assert(!inside(beyond, position, exclusive, lower, offset), "%.17g %.17g %d %d -> %.17g", position,
                  offset, exclusive, lower, t);
        /* and the text reads back as t */
        char text[POSITION_BOUND_MAX];
        size_t n = position_bound_format(text, t);
        text[n] = '\0';
        cr_assert(strtod(text, NULL) == t || (isnan(t) && 0), "%s", text);
    }
}

Test(position_bound, integers_take_the_same_integers_as_a_subtraction)
{
    /* Not position - offset itself: a stored score just under 5 has
     * position 15 too (its sum with 10 rounds up), and the script's
     * bound takes it. But between integers the same ones. */
    double t = position_bound_stored(15, 0, 1, 10);
    cr_expect(t <= 5 && t > 4.99);
    t = position_bound_stored(15, 1, 1, 10);
    cr_expect(t > 5 && t < 5.01);
    t = position_bound_stored(-3, 0, 0, 4);
    cr_expect(t >= -7 && t < -6.99);
    cr_expect(position_bound_stored(0, 0, 1, 0) == 0);
}

Test(position_bound, reads_the_ends_redis_reads_plainly)
{
    double v;
    int ex;
    cr_expect(position_bound_parse(&(resp_arg){"(2.5", 4}, &v, &ex) && v == 2.5 && ex);
    cr_expect(position_bound_parse(&(resp_arg){"-1e3", 4}, &v, &ex) && v == -1000 && !ex);
    cr_expect(!position_bound_parse(&(resp_arg){"+inf", 4}, &v, &ex));
    cr_expect(!position_bound_parse(&(resp_arg){"1e999", 5}, &v, &ex));
    cr_expect(!position_bound_parse(&(resp_arg){" 1", 2}, &v, &ex));
    cr_expect(!position_bound_parse(&(resp_arg){"0x1", 3}, &v, &ex));
    cr_expect(!position_bound_parse(&(resp_arg){"(", 1}, &v, &ex));
    cr_expect(!position_bound_parse(&(resp_arg){"1.5.", 4}, &v, &ex));
    char text[POSITION_BOUND_MAX];
    cr_expect(position_bound_format(text, INFINITY) == 4 && memcmp(text, "+inf", 4) == 0);
}

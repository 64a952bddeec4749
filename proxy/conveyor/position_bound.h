/* position_bound.h - a score range's end given in positions, as the
 * stored-score bound that selects the same members of a conveyor key
 * (docs/conveyor.md): the proxy's half of lib/conveyor_bound.lua, for a
 * read it writes itself with the offset it expects (conveyor_wrap.h).
 *
 * A member's position is stored + offset, rounded as a double sum is
 * (lib/conveyor.lua). Rounding is monotonic, so the members a bound takes
 * are all the stored scores from (or up to) one double on; that double is
 * found exactly, by bisection over the doubles in their order, not guessed
 * from position - offset: fractional scores and offsets select the
 * members the script would. Pure: no allocation. */
#ifndef VP_POSITION_BOUND_H
#define VP_POSITION_BOUND_H

#include <stddef.h>

#include "protocol/resp_request.h"

/* Room for a bound position_bound_format writes. */
#define POSITION_BOUND_MAX 32

/* A finite range end as Redis's zslParseRange reads it ("5", "(2.5",
 * "-1e3"): 1 with its value and whether it excludes. 0 for anything the
 * proxy leaves to the script: an infinite end, NaN, hex, spaces, "",
 * anything strtod does not take whole. */
int position_bound_parse(const resp_arg *a, double *value, int *exclusive);

/* The stored score s such that the members whose position is >= position
 * (> if exclusive) when `lower`, else <= (<), are exactly those stored at
 * >= s (lower) or <= s (upper). offset and position are finite. */
double position_bound_stored(double position, int exclusive, int lower, double offset);

/* s as an inclusive bound Redis reads back exactly: its length. */
size_t position_bound_format(char out[POSITION_BOUND_MAX], double s);

#endif

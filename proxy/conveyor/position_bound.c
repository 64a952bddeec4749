/* position_bound.c - a range end in positions as a stored-score bound
 * (position_bound.h). */
#include "proxy/conveyor/position_bound.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int position_bound_parse(const resp_arg *a, double *value, int *exclusive)
{
    const char *p = a->ptr;
    size_t n = a->len;
    *exclusive = n > 0 && p[0] == '(';
    if (*exclusive) {
        p++;
        n--;
    }
    char buf[64];
    if (n == 0 || n >= sizeof(buf)) return 0;
    for (size_t i = 0; i < n;
         i++) { /* (digits, a sign, a point, an exponent: nothing strtod reads otherwise) */
        char ch = p[i];
        if (!((ch >= '0' && ch <= '9') || ch == '-' || ch == '+' || ch == '.' || ch == 'e' || ch == 'E'))
            return 0;
    }
    memcpy(buf, p, n);
    buf[n] = '\0';
    char *end;
    double d = strtod(buf, &end);
    if (end != buf + n || !isfinite(d)) return 0;
    *value = d;
    return 1;
}

/* The doubles from -inf to +inf as unsigned integers in the same order
 * (NaNs fall outside that span). */
static uint64_t pb_key(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof(u));
    return (u >> 63) ? ~u : u | (1ULL << 63);
}

static double pb_double(uint64_t k)
{
    uint64_t u = (k >> 63) ? k & ~(1ULL << 63) : ~k;
    double d;
    memcpy(&d, &u, sizeof(d));
    return d;
}

/* Does a member stored at s have its position inside the bound? As
 * lib/conveyor_bound.lua's inside(). */
static int pb_inside(double s, double position, int exclusive, int lower, double offset)
{
    double p = s + offset;
    if (lower) return p > position || (!exclusive && p == position);
    return p < position || (!exclusive && p == position);
}

double position_bound_stored(double position, int exclusive, int lower, double offset)
{
    /* inside() is monotonic along the doubles' order: false then true for
     * a lower bound (true at +inf), true then false for an upper one (true
     * at -inf). Bisect for the first true (last true). */
    uint64_t lo = pb_key(-INFINITY), hi = pb_key(INFINITY);
    if (lower) {
        while (lo < hi) { /* the first in [lo, hi] that is inside; hi is */
            uint64_t mid = lo + (hi - lo) / 2;
            if (pb_inside(pb_double(mid), position, exclusive, 1, offset))
                hi = mid;
            else
                lo = mid + 1;
        }
        return pb_double(lo);
    }
    while (lo < hi) { /* the last in [lo, hi] that is inside; lo is */
        uint64_t mid = lo + (hi - lo + 1) / 2;
        if (pb_inside(pb_double(mid), position, exclusive, 0, offset))
            lo = mid;
        else
            hi = mid - 1;
    }
    return pb_double(lo);
}

size_t position_bound_format(char out[POSITION_BOUND_MAX], double s)
{
    if (isinf(s)) {
        memcpy(out, s > 0 ? "+inf" : "-inf", 4);
        return 4;
    }
    int n = snprintf(out, POSITION_BOUND_MAX, "%.17g", s);
    return (size_t)n;
}

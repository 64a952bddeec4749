/* resp_double.c - a double as Redis writes it in a reply (resp_double.h). */
#include "protocol/resp_double.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "protocol/fpconv_dtoa.h"

/* Redis's double2ll (util.c): an integral value in the range where the
 * cast loses nothing. */
static int resp_double_integral(double d, long long *out)
{
    if (d < (double)(-LLONG_MAX / 2) || d > (double)(LLONG_MAX / 2)) return 0;
    long long ll = (long long)d;
    if ((double)ll != d) return 0;
    *out = ll;
    return 1;
}

static size_t resp_double_copy(char *out, const char *s)
{
    size_t n = strlen(s);
    memcpy(out, s, n);
    return n;
}

/* An integer's digits, as ll2string writes them. */
static size_t resp_double_digits(char *out, long long v)
{
    char tmp[24];
    size_t n = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    size_t len = 0;
    if (v < 0) out[len++] = '-';
    while (n)
        out[len++] = tmp[--n];
    return len;
}

size_t resp_double_format(char out[RESP_DOUBLE_MAX], double d, int fpconv)
{
    /* The common case first: an integral value below 2^53, which both
     * formats print as its digits (-0 aside), without printf. */
    if (d != 0 && d > -9007199254740992.0 && d < 9007199254740992.0 && d == (double)(long long)d)
        return resp_double_digits(out, (long long)d);
    if (isinf(d)) return resp_double_copy(out, d > 0 ? "inf" : "-inf");
    if (!fpconv) return (size_t)snprintf(out, RESP_DOUBLE_MAX, "%.17g", d);
    if (isnan(d)) return resp_double_copy(out, "nan");
    if (d == 0) return resp_double_copy(out, signbit(d) ? "-0" : "0");
    long long ll;
    if (resp_double_integral(d, &ll)) return resp_double_digits(out, ll);
    return (size_t)fpconv_dtoa(d, out);
}

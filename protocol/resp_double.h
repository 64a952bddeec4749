/* resp_double.h - a double as Redis writes it in a reply (addReplyDouble,
 * RESP2's bulk string or RESP3's ','): the bytes differ between versions,
 * and a reply the proxy rewrites must be the one Redis would have sent.
 *
 *   Redis 7.2 and later, Valkey (d2string): "nan", "inf", "-inf", "0",
 *   "-0"; an integral value within +-LLONG_MAX/2 as an integer; else
 *   fpconv_dtoa, the shortest digits that read back the same double
 *   (vendored from Redis's deps/fpconv, Boost Software License 1.0).
 *   Redis 6.2 and 7.0: "inf", "-inf", else printf's "%.17g".
 *
 * Pure: no allocation. */
#ifndef VP_RESP_DOUBLE_H
#define VP_RESP_DOUBLE_H

#include <stddef.h>

/* Room for any of them. */
#define RESP_DOUBLE_MAX 32

/* Which of the two: fpconv (1, Redis 7.2 on) or %.17g (0). */
size_t resp_double_format(char out[RESP_DOUBLE_MAX], double d, int fpconv);

#endif

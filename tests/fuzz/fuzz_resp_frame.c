/* fuzz_resp_frame.c - the reply framer must not care how the stream is cut.
 *
 * Each input is framed whole, then in pieces whose sizes come from a hash of
 * the input (small pieces, large pieces, empty pieces, and one byte at a time
 * for short inputs), carrying the unconsumed tail forward the way the proxy
 * does. Every way must find the same reply boundaries and stop at the same
 * byte with the same error. The calling convention is checked on every call.
 *
 * Built by CMake with VP_FUZZ=ON (this file and the protocol sources only). Built by
 * hand with -DVP_FUZZ_HIREDIS and -lhiredis, it also checks every reply
 * hiredis reads from the framed prefix of the input ends where the framer
 * said. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/resp_frame.h"

#ifdef VP_FUZZ_HIREDIS
#include <hiredis/hiredis.h>
#endif

#define CHECK(cond)                                                                                          \
    do {                                                                                                     \
        if (!(cond)) __builtin_trap();                                                                       \
    } while (0)

/* Byte-by-byte framing rescans a partial line on every byte: keep it to
 * inputs where that stays cheap. */
#define FUZZ_BYTEWISE_MAX 4096

typedef struct run {
    size_t n;    /* replies found */
    size_t *end; /* stream offset just past each reply; room for size / 3 + 1 */
    char *type;
    resp_frame_status last; /* PARTIAL or ERROR */
    const char *error;
    size_t stop; /* first byte not consumed */
    long long pending, bulk_left;
} run;

typedef struct cutter {
    uint64_t state;
    unsigned mode;
} cutter;

static uint64_t next_rand(cutter *c)
{
    uint64_t x = c->state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return c->state = x;
}

/* Size of the next piece, 0 allowed. */
static size_t next_piece(cutter *c, size_t left)
{
    size_t n;
    switch (c->mode) {
    case 0: /* whole */
        return left;
    case 1: /* one byte at a time */
        n = 1;
        break;
    case 2: /* small pieces */
        n = (size_t)(next_rand(c) % 9);
        break;
    default: /* anything, sometimes nothing */
        n = (size_t)(next_rand(c) % (left + 2));
        break;
    }
    return n < left ? n : left;
}

static void frame(const uint8_t *data, size_t size, cutter *c, run *r)
{
    const char *in = (const char *)data;
    char *acc = malloc(size + 1);
    size_t alen = 0, base = 0, fed = 0, reply_start = 0;
    resp_framer f;

    CHECK(acc != NULL);
    resp_frame_reset(&f);
    r->n = 0;
    r->last = RESP_FRAME_PARTIAL;
    r->error = NULL;
    do {
        size_t piece = next_piece(c, size - fed), off = 0;
        memcpy(acc + alen, in + fed, piece);
        alen += piece;
        fed += piece;
        for (;;) {
            size_t used = (size_t)-1;
            resp_frame_status st = resp_frame_scan(&f, acc + off, alen - off, &used);
            CHECK(used <= alen - off);
            off += used;
            if (st == RESP_FRAME_DONE) {
                CHECK(used > 0);
                CHECK(f.pending == 0 && f.bulk_left == 0);
                CHECK(f.consumed == base + off - reply_start);
                CHECK(f.type == in[reply_start]);
                CHECK(f.error == NULL);
                r->end[r->n] = base + off;
                r->type[r->n] = f.type;
                r->n++;
                reply_start = base + off;
                continue;
            }
            if (st == RESP_FRAME_ERROR) {
                size_t again = 1;
                CHECK(f.error != NULL);
                CHECK(resp_frame_scan(&f, acc + off, alen - off, &again) == RESP_FRAME_ERROR);
                CHECK(again == 0);
                r->last = RESP_FRAME_ERROR;
                r->error = f.error;
                r->stop = base + off;
                free(acc);
                return;
            }
            CHECK(st == RESP_FRAME_PARTIAL);
            CHECK(f.consumed == base + off - reply_start);
            CHECK(f.pending >= 0 && f.bulk_left >= 0);
            CHECK(f.consumed == 0 ? f.pending == 0 : (f.pending > 0 || f.bulk_left > 0));
            break;
        }
        memmove(acc, acc + off, alen - off);
        alen -= off;
        base += off;
    } while (fed < size);
    r->stop = base;
    r->pending = f.pending;
    r->bulk_left = f.bulk_left;
    free(acc);
}

static void same(const run *a, const run *b)
{
    CHECK(a->n == b->n);
    CHECK(memcmp(a->end, b->end, a->n * sizeof(*a->end)) == 0);
    CHECK(memcmp(a->type, b->type, a->n) == 0);
    CHECK(a->last == b->last);
    CHECK(a->stop == b->stop);
    if (a->last == RESP_FRAME_ERROR)
        CHECK(strcmp(a->error, b->error) == 0);
    else
        CHECK(a->pending == b->pending && a->bulk_left == b->bulk_left);
}

#ifdef VP_FUZZ_HIREDIS
/* hiredis 0.14 reads only RESP2 and at most 8 levels, is laxer in ways the
 * framer never accepts (the bytes after a payload) and stricter where the
 * framer does not look (an integer's digits), so it is only given the replies
 * the framer completed; each reply it reads from them, up to the first it
 * refuses, must end where the framer said. */
static void compare_hiredis(const uint8_t *data, const run *w)
{
    if (w->n == 0) return;
    redisReader *rd = redisReaderCreate();
    size_t i = 0, len = w->end[w->n - 1];
    CHECK(rd != NULL);
    CHECK(redisReaderFeed(rd, (const char *)data, len) == REDIS_OK);
    for (;;) {
        void *reply = NULL;
        if (redisReaderGetReply(rd, &reply) != REDIS_OK || reply == NULL) break;
        CHECK(i < w->n);
        CHECK(len - (rd->len - rd->pos) == w->end[i]);
        freeReplyObject(reply);
        i++;
    }
    redisReaderFree(rd);
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t room = size / 3 + 1; /* the shortest reply, "+\r\n", is 3 bytes */
    run whole, cut;
    uint64_t h = 1469598103934665603ULL; /* FNV-1a offset basis */

    whole.end = malloc(room * sizeof(size_t));
    whole.type = malloc(room);
    cut.end = malloc(room * sizeof(size_t));
    cut.type = malloc(room);
    CHECK(whole.end && whole.type && cut.end && cut.type);

    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 1099511628211ULL;

    cutter c = {h | 1, 0};
    frame(data, size, &c, &whole);
    for (unsigned mode = 1; mode <= 3; mode++) {
        if (mode == 1 && size > FUZZ_BYTEWISE_MAX) continue;
        c.state = (h + mode) | 1;
        c.mode = mode;
        frame(data, size, &c, &cut);
        same(&whole, &cut);
    }
#ifdef VP_FUZZ_HIREDIS
    compare_hiredis(data, &whole);
#endif
    free(whole.end);
    free(whole.type);
    free(cut.end);
    free(cut.type);
    return 0;
}

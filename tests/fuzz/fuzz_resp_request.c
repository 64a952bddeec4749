/* fuzz_resp_request.c - libFuzzer target for protocol/resp_request.c.
 *
 * Input: one control byte, then the client's byte stream. The control byte
 * picks the limits (Redis's defaults, or tiny ones so the limit checks are
 * reached) and seeds how the stream is cut.
 *
 * The stream is parsed three ways:
 *   whole  - all bytes offered at once;
 *   chunks - offered in pseudo-random chunks derived from the data, each call
 *            getting a fresh malloc'd copy of exactly the offered bytes (so a
 *            pointer kept across calls is a use-after-free ASan reports);
 *   bytes  - one more byte per call, over the same buffer.
 * Each run records every result (status, bytes used, argument bytes, error
 * text) in a log, and the three logs must be identical: where a command ends
 * cannot depend on how the bytes arrived. Along the way every result is
 * checked: used <= len, INCOMPLETE uses nothing, a command has arguments that
 * lie inside its own bytes (multibulk) or in the parser's scratch (inline),
 * an error has one of Redis's texts and is sticky.
 *
 * Build: cmake -DVP_FUZZ=ON -DCMAKE_C_COMPILER=clang, or by hand:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I. \
 *       tests/fuzz/fuzz_resp_request.c protocol/resp_request.c -o fuzz_resp_request */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/resp_request.h"

#define CHECK(cond)                                                                                          \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                         \
            abort();                                                                                         \
        }                                                                                                    \
    } while (0)

/* A growable byte log of results. */
typedef struct rlog {
    unsigned char *p;
    size_t len, cap;
} rlog;

static void rlog_put(rlog *l, const void *data, size_t n)
{
    if (l->cap - l->len < n) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        while (cap - l->len < n)
            cap *= 2;
        l->p = realloc(l->p, cap);
        CHECK(l->p != NULL);
        l->cap = cap;
    }
    memcpy(l->p + l->len, data, n);
    l->len += n;
}

static void rlog_num(rlog *l, uint64_t v)
{
    rlog_put(l, &v, sizeof(v));
}

static int known_error(const char *e)
{
    static const char *texts[] = {
        "Protocol error: too big inline request",     "Protocol error: unbalanced quotes in request",
        "Protocol error: too big mbulk count string", "Protocol error: invalid multibulk length",
        "Protocol error: too big bulk count string",  "Protocol error: invalid bulk length",
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
        if (strcmp(e, texts[i]) == 0) return 1;
    /* "...expected '$', got 'X'" with X any byte but \0, \r, \n (made spaces). */
    static const char prefix[] = "Protocol error: expected '$', got '";
    size_t n = sizeof(prefix) - 1;
    return strncmp(e, prefix, n) == 0 && e[n] != '\0' && e[n] != '\r' && e[n] != '\n' && e[n + 1] == '\'' &&
           e[n + 2] == '\0';
}

/* Record one result and check it against the invariants. */
static void record(rlog *l, resp_request_parser *p, resp_req_status st, const char *buf, size_t len,
                   size_t used)
{
    CHECK(used <= len);
    rlog_num(l, (uint64_t)st);
    switch (st) {
    case RESP_REQ_INCOMPLETE:
        CHECK(used == 0);
        break;
    case RESP_REQ_EMPTY:
        CHECK(used > 0);
        CHECK(p->argc == 0);
        rlog_num(l, used);
        break;
    case RESP_REQ_COMMAND:
        CHECK(used > 0);
        CHECK(p->argc > 0);
        CHECK(resp_request_error(p) == NULL);
        rlog_num(l, used);
        rlog_num(l, (uint64_t)p->argc);
        for (int j = 0; j < p->argc; j++) {
            const resp_arg *a = &p->argv[j];
            if (buf[0] == '*') {
                /* Zero copy: inside this command's bytes. */
                CHECK(a->ptr >= buf && a->len <= used && a->ptr - buf <= (ptrdiff_t)(used - a->len));
            } else {
                /* Unescaped into the scratch buffer, never longer than the line. */
                CHECK(a->ptr >= p->scratch && a->len <= p->scratch_cap &&
                      a->ptr - p->scratch <= (ptrdiff_t)(p->scratch_cap - a->len));
                CHECK(a->len < used);
            }
            rlog_num(l, a->len);
            rlog_put(l, a->ptr, a->len);
        }
        break;
    case RESP_REQ_ERROR: {
        CHECK(used == 0);
        const char *e = resp_request_error(p);
        CHECK(e != NULL);
        CHECK(known_error(e));
        rlog_put(l, e, strlen(e) + 1);
        /* Sticky until reset. */
        size_t again = 1;
        CHECK(resp_request_parse(p, buf, len, &again) == RESP_REQ_ERROR);
        CHECK(again == 0);
        CHECK(resp_request_error(p) == e);
        break;
    }
    default:
        CHECK(!"unknown status");
    }
}

/* xorshift64: chunk sizes that are a pure function of the input. */
static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

enum mode { WHOLE, CHUNKS, BYTES };

static void run(const resp_request_limits *lim, const char *in, size_t len, enum mode mode, uint64_t seed,
                rlog *l)
{
    resp_request_parser p;
    size_t start = 0, avail;
    uint64_t rnd = seed | 1;

    resp_request_init(&p, lim);
    avail = mode == WHOLE ? len : 0;
    for (;;) {
        size_t n = avail - start;
        const char *b = in + start;
        char *priv = NULL;
        if (mode == CHUNKS) {
            priv = malloc(n ? n : 1);
            CHECK(priv != NULL);
            if (n) memcpy(priv, b, n);
            b = priv;
        }

        size_t used = (size_t)-1;
        resp_req_status st = resp_request_parse(&p, b, n, &used);
        if (st == RESP_REQ_INCOMPLETE) {
            CHECK(used == 0);
            if (avail == len) {
                /* The stream ends inside a command (or exactly between two). */
                record(l, &p, st, b, n, used);
                rlog_num(l, len - start);
                free(priv);
                break;
            }
            free(priv);
            size_t step;
            if (mode == BYTES) {
                step = 1;
            } else {
                uint64_t r = next_rand(&rnd);
                /* Mostly small chunks, where the boundaries are; some large. */
                step = (r & 3) ? 1 + (size_t)((r >> 8) % 8) : 1 + (size_t)((r >> 8) % 512);
            }
            avail = len - avail > step ? avail + step : len;
            continue;
        }
        record(l, &p, st, b, n, used);
        free(priv);
        if (st == RESP_REQ_ERROR) break;
        start += used;
    }

    /* Reset makes it usable again. */
    resp_request_reset(&p);
    CHECK(resp_request_error(&p) == NULL);
    resp_request_free(&p);
}

/* Streaming as the proxy does it: after each INCOMPLETE release the settled
 * bytes. The stream must be cut into the same commands at the same places
 * (with the released bytes counted into the command they belong to), and the
 * same error, as when it is parsed whole. Returns the positions where
 * commands end and the error, in a log to compare. */
static void run_released(const resp_request_limits *lim, const char *in, size_t len, uint64_t seed, rlog *l)
{
    resp_request_parser p;
    resp_request_init(&p, lim);
    size_t start = 0, have = 0, cmd_start = 0;
    for (;;) {
        if (have < len) {
            size_t step = 1 + (size_t)(next_rand(&seed) % 97);
            have = have + step > len ? len : have + step;
        }
        size_t used = 0;
        resp_req_status st = resp_request_parse(&p, in + start, have - start, &used);
        if (st == RESP_REQ_INCOMPLETE) {
            size_t r = resp_request_release(&p, have - start);
            CHECK(r <= have - start);
            start += r;
            if (have == len && r == 0) break;
            continue;
        }
        if (st == RESP_REQ_ERROR) {
            rlog_put(l, "E", 1);
            rlog_put(l, resp_request_error(&p), strlen(resp_request_error(&p)));
            break;
        }
        start += used;
        rlog_num(l, start - cmd_start);
        cmd_start = start;
    }
    resp_request_free(&p);
}

/* The same log from a whole-buffer parse. */
static void run_whole_ends(const resp_request_limits *lim, const char *in, size_t len, rlog *l)
{
    resp_request_parser p;
    resp_request_init(&p, lim);
    size_t start = 0;
    for (;;) {
        size_t used = 0;
        resp_req_status st = resp_request_parse(&p, in + start, len - start, &used);
        if (st == RESP_REQ_INCOMPLETE) break;
        if (st == RESP_REQ_ERROR) {
            rlog_put(l, "E", 1);
            rlog_put(l, resp_request_error(&p), strlen(resp_request_error(&p)));
            break;
        }
        start += used;
        rlog_num(l, used);
    }
    resp_request_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;

    uint8_t ctl = data[0];
    const char *in = (const char *)data + 1;
    size_t len = size - 1;

    resp_request_limits limits = {RESP_DEFAULT_MAX_BULK_LEN, RESP_DEFAULT_MAX_MULTIBULK_LEN};
    if (ctl & 1) {
        /* Tiny limits, 0 included, so "at the limit" and "one over" happen. */
        limits.max_bulk_len = (ctl >> 1) & 15;
        limits.max_multibulk_len = (ctl >> 5) & 7;
    }

    /* FNV-1a of the whole input seeds the chunk sizes. */
    uint64_t seed = 1469598103934665603ULL;
    for (size_t i = 0; i < size; i++)
        seed = (seed ^ data[i]) * 1099511628211ULL;

    rlog whole = {0}, chunks = {0}, bytes = {0};
    run(&limits, in, len, WHOLE, seed, &whole);
    run(&limits, in, len, CHUNKS, seed, &chunks);
    run(&limits, in, len, BYTES, seed, &bytes);
    CHECK(whole.len == chunks.len && memcmp(whole.p, chunks.p, whole.len) == 0);
    CHECK(whole.len == bytes.len && memcmp(whole.p, bytes.p, whole.len) == 0);
    free(whole.p);
    free(chunks.p);
    free(bytes.p);

    rlog ends = {0}, released = {0};
    run_whole_ends(&limits, in, len, &ends);
    run_released(&limits, in, len, seed, &released);
    CHECK(ends.len == released.len && memcmp(ends.p, released.p, ends.len) == 0);
    free(ends.p);
    free(released.p);
    return 0;
}

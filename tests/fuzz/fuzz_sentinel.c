/* fuzz_sentinel.c - what a sentinel or a data node says, on arbitrary bytes
 * (proxy/route/sentinel_parse.h: every byte there may be a hostile peer's).
 *
 * The first byte picks the target, the rest is its input:
 *   0: the subscribed connection as sentinel.c reads it: the bytes framed
 *      into replies (protocol/resp_frame.h), each judged by
 *      sentinel_parse_pubsub: a switch names a master of printable bytes
 *      and a host of address characters that both lie in the reply, and a
 *      port in 1..65535; a subscribe confirmation is an array of 3; what
 *      is malformed says why in printable text;
 *   1: sentinel_parse_master (SENTINEL MASTER's answer): on success a host
 *      that lies in the input, a port in range, an epoch >= 0; on failure
 *      why is printable;
 *   2: sentinel_parse_role (ROLE's answer, or its first piece): "master"
 *      only for an array, and the same verdict with any bytes after it
 *      (a streamed reply's first piece decides); what it said is printable;
 *   3: sentinel_parse_auth: 0 only for exactly +OK.
 * Built by CMake with VP_FUZZ=ON (this file, the protocol sources and
 * sentinel_parse.c). */
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/resp_frame.h"
#include "proxy/route/sentinel_parse.h"

#define CHECK(cond)                                                                                          \
    do {                                                                                                     \
        if (!(cond)) __builtin_trap();                                                                       \
    } while (0)

/* NUL-terminated within len, every byte before it printable. */
static void check_text(const char *s, size_t len)
{
    const char *end = memchr(s, '\0', len);
    CHECK(end != NULL);
    for (const char *p = s; p < end; p++)
        CHECK(isprint((unsigned char)*p));
}

static int in_input(const char *needle, const uint8_t *d, size_t n)
{
    size_t k = strlen(needle);
    if (k == 0 || k > n) return 0;
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(d + i, needle, k) == 0) return 1;
    return 0;
}

static void check_host(const char *host, const uint8_t *d, size_t n)
{
    check_text(host, SENTINEL_HOST_MAX + 1);
    CHECK(host[0] != '\0');
    for (const char *p = host; *p; p++)
        CHECK(isalnum((unsigned char)*p) || strchr(".-:_%", *p));
    CHECK(in_input(host, d, n));
}

static void fuzz_pubsub_reply(const uint8_t *d, size_t n)
{
    sentinel_switch sw;
    char why[160];
    memset(why, 'x', sizeof(why));
    sentinel_pubsub_kind k = sentinel_parse_pubsub((const char *)d, n, &sw, why, sizeof(why));
    if (k == SENTINEL_PUBSUB_SWITCH) {
        check_host(sw.host, d, n);
        CHECK(sw.port >= 1 && sw.port <= 65535);
        check_text(sw.master, sizeof(sw.master));
        CHECK(in_input(sw.master, d, n));
        for (const char *p = sw.master; *p; p++)
            CHECK(*p != ' ');
    } else if (k == SENTINEL_PUBSUB_SUBSCRIBED) {
        CHECK(n >= 4 && memcmp(d, "*3\r\n", 4) == 0);
    } else {
        CHECK(k == SENTINEL_PUBSUB_MALFORMED);
        check_text(why, sizeof(why));
    }
}

/* The stream as the subscribed connection reads it: reply by reply, until
 * the bytes stop being RESP or run out. */
static void fuzz_pubsub(const uint8_t *d, size_t n)
{
    size_t off = 0;
    while (off < n) {
        resp_framer f;
        size_t used = 0;
        resp_frame_reset(&f);
        if (resp_frame_scan(&f, (const char *)d + off, n - off, &used) != RESP_FRAME_DONE) return;
        CHECK(used > 0 && used <= n - off);
        /* A copy of exactly the reply: reading past it is caught. */
        uint8_t *reply = malloc(used);
        CHECK(reply != NULL);
        memcpy(reply, d + off, used);
        fuzz_pubsub_reply(reply, used);
        free(reply);
        off += used;
    }
}

static void fuzz_master(const uint8_t *d, size_t n)
{
    sentinel_master_info m;
    char why[160];
    memset(why, 'x', sizeof(why));
    if (sentinel_parse_master((const char *)d, n, &m, why, sizeof(why)) == 0) {
        check_host(m.host, d, n);
        CHECK(m.port >= 1 && m.port <= 65535);
        CHECK(m.epoch >= 0);
        CHECK(m.failover_in_progress == 0 || m.failover_in_progress == 1);
        CHECK(n > 0 && d[0] == '*');
    } else {
        check_text(why, sizeof(why));
    }
}

static void fuzz_role(const uint8_t *d, size_t n)
{
    char said[64];
    memset(said, 'x', sizeof(said));
    int master = sentinel_parse_role((const char *)d, n, said, sizeof(said));
    CHECK(master == 0 || master == 1);
    if (master) {
        CHECK(n > 0 && d[0] == '*');
    } else {
        check_text(said, sizeof(said));
    }
    /* More bytes after it change nothing: the start decides. */
    uint8_t *longer = malloc(n + 3);
    CHECK(longer != NULL);
    if (n) memcpy(longer, d, n);
    memcpy(longer + n, "*\r\n", 3);
    CHECK(sentinel_parse_role((const char *)longer, n + 3, NULL, 0) == master);
    free(longer);
}

static void fuzz_auth(const uint8_t *d, size_t n)
{
    char why[128];
    memset(why, 'x', sizeof(why));
    int rc = sentinel_parse_auth((const char *)d, n, why, sizeof(why));
    if (rc == 0) {
        CHECK(n == 5 && memcmp(d, "+OK\r\n", 5) == 0);
    } else {
        CHECK(rc == -1);
        check_text(why, sizeof(why));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    switch (data[0] % 4) {
    case 0:
        fuzz_pubsub(data + 1, size - 1);
        break;
    case 1:
        fuzz_master(data + 1, size - 1);
        break;
    case 2:
        fuzz_role(data + 1, size - 1);
        break;
    default:
        fuzz_auth(data + 1, size - 1);
        break;
    }
    return 0;
}

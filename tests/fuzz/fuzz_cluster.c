/* fuzz_cluster.c - the cluster routing parsers on arbitrary bytes.
 *
 * The first byte picks the target, the rest is its input:
 *   0: slotmap_parse_slots (bytes a node sent as a CLUSTER SLOTS reply):
 *      on success every slot is NONE or a node that exists, `covered`
 *      counts the owned slots, every replica points at a primary; on
 *      failure the map is empty. Then a MOVED for a slot derived from the
 *      input keeps the same invariants.
 *   1: redirect_parse (an error reply's text): a MOVED/ASK's host lies
 *      inside the input, its slot and port are in range.
 *   2: cmd_table_lookup + rkeys_find on the input split at '\n' into
 *      arguments: every position is an argument (1..argc-1), the count
 *      never exceeds what a full buffer holds, and hashslot_of each key
 *      is a slot.
 *   3: nodesview (bytes a node sent as a CLUSTER NODES reply, read when a
 *      redirect is checked): the view lies inside the input; a node found
 *      by address has a 40-byte id that is in the view; the questions a
 *      check asks (serves, migrating to, moving) answer 0 or 1 for slots
 *      and addresses derived from the input.
 * Built by CMake with VP_FUZZ=ON (this file, the protocol sources and the
 * routing modules). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "proxy/route/hashslot.h"
#include "proxy/route/nodesview.h"
#include "proxy/route/redirect.h"
#include "proxy/route/route_keys.h"
#include "proxy/route/slotmap.h"

#define CHECK(cond)                                                                                          \
    do {                                                                                                     \
        if (!(cond)) __builtin_trap();                                                                       \
    } while (0)

#define MAX_ARGS 64

static void check_map(const slotmap *m)
{
    int covered = 0;
    for (int s = 0; s < HASHSLOT_COUNT; s++) {
        if (m->slot[s] == SLOTMAP_NONE) continue;
        CHECK(m->slot[s] < m->nnodes);
        covered++;
    }
    CHECK(covered == m->covered);
    for (int i = 0; i < m->nnodes; i++) {
        CHECK(m->nodes[i].port > 0 && m->nodes[i].port <= 65535);
        CHECK(m->nodes[i].primary >= -1 && m->nodes[i].primary < m->nnodes);
        CHECK(memchr(m->nodes[i].host, 0, SLOTMAP_HOST_MAX) != NULL);
    }
}

static void fuzz_slots(const uint8_t *d, size_t n)
{
    static slotmap m;
    char err[128];
    slotmap_init(&m);
    if (slotmap_parse_slots(&m, (const char *)d, n, "127.0.0.1", err, sizeof(err)) != 0) {
        CHECK(m.nnodes == 0 && m.covered == 0 && m.nodes == NULL);
        CHECK(strncmp(err, "CLUSTER SLOTS: ", 15) == 0);
        return;
    }
    check_map(&m);
    int slot = n ? (d[0] << 8 | d[n - 1]) % HASHSLOT_COUNT : 0;
    CHECK(slotmap_moved(&m, slot, "10.0.0.1", 8, 7000) >= 0);
    check_map(&m);
    slotmap_free(&m);
}

static void fuzz_redirect(const uint8_t *d, size_t n)
{
    redirect r;
    redirect_kind k = redirect_parse((const char *)d, n, &r);
    CHECK(k == r.kind);
    if (k == REDIRECT_MOVED || k == REDIRECT_ASK) {
        CHECK(r.slot >= 0 && r.slot < HASHSLOT_COUNT);
        CHECK(r.port > 0 && r.port <= 65535);
        CHECK(r.host >= (const char *)d && r.host + r.hostlen <= (const char *)d + n);
    } else {
        CHECK(r.host == NULL);
    }
}

static void fuzz_keys(const uint8_t *d, size_t n)
{
    const char *argv[MAX_ARGS];
    size_t lens[MAX_ARGS];
    int argc = 0;
    size_t start = 0;
    for (size_t i = 0; i <= n && argc < MAX_ARGS; i++)
        if (i == n || d[i] == '\n') {
            argv[argc] = (const char *)d + start;
            lens[argc++] = i - start;
            start = i + 1;
        }
    const cmd_info *cmd = cmd_table_lookup(argc, argv, lens);
    if (!cmd) return;
    int pos[MAX_ARGS], small[2];
    int count = rkeys_find(cmd, argc, argv, lens, pos, MAX_ARGS);
    CHECK(count >= 0 && count <= 2 * MAX_ARGS);
    for (int i = 0; i < count && i < MAX_ARGS; i++) {
        CHECK(pos[i] >= 1 && pos[i] < argc);
        int s = hashslot_of(argv[pos[i]], lens[pos[i]]);
        CHECK(s >= 0 && s < HASHSLOT_COUNT);
    }
    /* a short buffer counts the same keys and writes only what fits */
    CHECK(rkeys_find(cmd, argc, argv, lens, small, 2) == count);
    for (int i = 0; i < count && i < 2; i++)
        CHECK(small[i] == pos[i]);
}

static void fuzz_nodes(const uint8_t *d, size_t n)
{
    nview v;
    if (nview_from_reply(&v, (const char *)d, n) != 0) return;
    CHECK(v.text >= (const char *)d && v.text + v.len <= (const char *)d + n);
    int slot = n ? (d[0] << 8 | d[n - 1]) % HASHSLOT_COUNT : 0;
    /* an address from the input (its first "host:port" up to '@'), and a fixed one */
    const char *at = memchr(v.text, '@', v.len);
    const char *sp = at ? memchr(v.text, ' ', (size_t)(at - v.text)) : NULL;
    const char *host = sp ? sp + 1 : "127.0.0.1";
    const char *colon = NULL;
    for (const char *c = host; sp && c < at; c++)
        if (*c == ':') colon = c;
    size_t hostlen = colon ? (size_t)(colon - host) : 9;
    int port = colon ? (int)((colon[1] - '0') % 10) * 1000 + 7000 : 7000;
    char id[NVIEW_ID_LEN + 1];
    if (nview_find(&v, host, hostlen, port, id)) {
        CHECK(strlen(id) == NVIEW_ID_LEN);
        CHECK(memmem(v.text, v.len, id, NVIEW_ID_LEN) != NULL);
    } else {
        memcpy(id, "0123456789012345678901234567890123456789", NVIEW_ID_LEN + 1);
    }
    int a = nview_serves(&v, id, slot), b = nview_migrating_to(&v, slot, id), c = nview_moving(&v, slot);
    CHECK((a == 0 || a == 1) && (b == 0 || b == 1) && (c == 0 || c == 1));
    CHECK(!b || c); /* migrating to a node is moving */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    switch (data[0] % 4) {
    case 0:
        fuzz_slots(data + 1, size - 1);
        break;
    case 1:
        fuzz_redirect(data + 1, size - 1);
        break;
    case 2:
        fuzz_keys(data + 1, size - 1);
        break;
    default:
        fuzz_nodes(data + 1, size - 1);
        break;
    }
    return 0;
}

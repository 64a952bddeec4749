/* proxy/route/slotmap.c: CLUSTER SLOTS replies as Redis 7.0 sends them (RESP2,
 * and RESP3 with the metadata as a map), the unknown-endpoint forms, a
 * -MOVED applied, and every malformed reply refused with the map left
 * empty. The integration test (test_cluster_harness.c) parses a real
 * cluster's reply. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "proxy/route/slotmap.h"

static slotmap m;

static void setup(void)
{
    slotmap_init(&m);
}

static void teardown(void)
{
    slotmap_free(&m);
}

TestSuite(slotmap, .init = setup, .fini = teardown);

#define ID_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define ID_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define ID_C "cccccccccccccccccccccccccccccccccccccccc"
#define ID_D "dddddddddddddddddddddddddddddddddddddddd"
#define NODE2(host, port, id) "*4\r\n$9\r\n" host "\r\n:" port "\r\n$40\r\n" id "\r\n*0\r\n"

/* Two ranges, each a primary and a replica, RESP2. */
static const char two_ranges[] =
    "*2\r\n"
    "*4\r\n:0\r\n:8191\r\n" NODE2("127.0.0.1", "7000", ID_A)
        NODE2("127.0.0.1", "7003", ID_C) "*4\r\n:8192\r\n:16383\r\n" NODE2("127.0.0.1", "7001", ID_B)
            NODE2("127.0.0.1", "7004", ID_D);

Test(slotmap, two_ranges_with_replicas)
{
    char err[128];
    cr_assert_eq(slotmap_parse_slots(&m, two_ranges, sizeof(two_ranges) - 1, "seed", err, sizeof(err)), 0,
                 "%s", err);
    cr_assert_eq(m.covered, HASHSLOT_COUNT);
    cr_assert_eq(m.nnodes, 4);
    int a = slotmap_find(&m, "127.0.0.1", 9, 7000), b = slotmap_find(&m, "127.0.0.1", 9, 7001);
    int c = slotmap_find(&m, "127.0.0.1", 9, 7003), d = slotmap_find(&m, "127.0.0.1", 9, 7004);
    cr_assert(a >= 0 && b >= 0 && c >= 0 && d >= 0);
    cr_assert_eq(slotmap_owner(&m, 0), a);
    cr_assert_eq(slotmap_owner(&m, 8191), a);
    cr_assert_eq(slotmap_owner(&m, 8192), b);
    cr_assert_eq(slotmap_owner(&m, 16383), b);
    cr_assert_eq(m.nodes[a].primary, -1);
    cr_assert_eq(m.nodes[c].primary, a);
    cr_assert_eq(m.nodes[d].primary, b);
    cr_assert_str_eq(m.nodes[b].id, ID_B);

    /* MOVED: one slot to a known replica (a failover), then to a new node */
    cr_assert_eq(slotmap_moved(&m, 5, "127.0.0.1", 9, 7003), c);
    cr_assert_eq(slotmap_owner(&m, 5), c);
    cr_assert_eq(m.nodes[c].primary, -1);
    cr_assert_eq(slotmap_owner(&m, 6), a);
    int e = slotmap_moved(&m, 9000, "10.1.1.1", 8, 7009);
    cr_assert_eq(e, 4);
    cr_assert_eq(slotmap_owner(&m, 9000), e);
    cr_assert_eq(m.covered, HASHSLOT_COUNT);
    cr_assert_eq(slotmap_moved(&m, HASHSLOT_COUNT, "h", 1, 1), -1);
}

Test(slotmap, resp3_metadata_map_and_unknown_endpoints)
{
    /* RESP3: node metadata as a map; a NULL endpoint and "" mean the host we
     * asked; "?" cannot be reached: its range stays uncovered */
    static const char r3[] =
        "*3\r\n"
        "*3\r\n:0\r\n:99\r\n*4\r\n_\r\n:7000\r\n$40\r\n" ID_A "\r\n%1\r\n$8\r\nhostname\r\n$5\r\nnode0\r\n"
        "*3\r\n:100\r\n:199\r\n*3\r\n$0\r\n\r\n:7001\r\n$40\r\n" ID_B "\r\n"
        "*3\r\n:200\r\n:299\r\n*3\r\n$1\r\n?\r\n:7002\r\n$40\r\n" ID_C "\r\n";
    char err[128];
    cr_assert_eq(slotmap_parse_slots(&m, r3, sizeof(r3) - 1, "10.0.0.9", err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(m.covered, 200);
    cr_assert_eq(slotmap_owner(&m, 50), slotmap_find(&m, "10.0.0.9", 8, 7000));
    cr_assert_eq(slotmap_owner(&m, 150), slotmap_find(&m, "10.0.0.9", 8, 7001));
    cr_assert_eq(slotmap_owner(&m, 250), -1);
}

Test(slotmap, several_ranges_of_one_primary_make_one_node)
{
    static const char r[] = "*2\r\n*3\r\n:0\r\n:0\r\n" NODE2(
        "127.0.0.1", "7000", ID_A) "*3\r\n:2\r\n:3\r\n" NODE2("127.0.0.1", "7000", ID_A);
    char err[128];
    cr_assert_eq(slotmap_parse_slots(&m, r, sizeof(r) - 1, "x", err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(m.nnodes, 1);
    cr_assert_eq(m.covered, 3);
    cr_assert_eq(slotmap_owner(&m, 1), -1);
}

Test(slotmap, malformed_replies_are_refused_and_leave_the_map_empty)
{
    static const char *bad[] = {
        "-ERR This instance has cluster support disabled\r\n",
        "+OK\r\n",
        "*1\r\n",
        "*1\r\n*2\r\n:0\r\n:1\r\n",
        "*1\r\n*3\r\n:5\r\n:1\r\n" NODE2("127.0.0.1", "7000", ID_A),
        "*1\r\n*3\r\n:0\r\n:16384\r\n" NODE2("127.0.0.1", "7000", ID_A),
        "*1\r\n*3\r\n:0\r\n:10\r\n*2\r\n$9\r\n127.0.0.1\r\n:0\r\n",
        "*1\r\n*3\r\n:0\r\n:10\r\n*1\r\n$9\r\n127.0.0.1\r\n",
        "*2\r\n*3\r\n:0\r\n:10\r\n" NODE2("127.0.0.1", "7000",
                                          ID_A) "*3\r\n:10\r\n:11\r\n" NODE2("127.0.0.1", "7001", ID_B),
        "*1\r\n*3\r\n:0\r\n:10\r\n" NODE2("127.0.0.1", "7000", ID_A) "extra",
        "*1\r\n*3\r\n:0\r\n:10\r\n*4\r\n$9\r\n127.0.0.1\r\n:7000\r\n$40\r\n" ID_A "\r\n*1\r\n",
        "*1\r\n*3\r\n:0\r\n:10\r\n*2\r\n$99\r\n127.0.0.1\r\n:7000\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char err[128] = "";
        slotmap_init(&m);
        cr_assert_eq(slotmap_parse_slots(&m, bad[i], strlen(bad[i]), "x", err, sizeof(err)), -1, "case %zu",
                     i);
        cr_assert(strncmp(err, "CLUSTER SLOTS: ", 15) == 0, "case %zu: %s", i, err);
        cr_assert_eq(m.covered, 0);
        cr_assert_eq(m.nnodes, 0);
        cr_assert_null(m.nodes);
        for (int s = 0; s < HASHSLOT_COUNT; s += 97)
            cr_assert_eq(slotmap_owner(&m, s), -1);
    }
    /* every prefix of a good reply is refused (truncated), never read past */
    for (size_t n = 0; n < sizeof(two_ranges) - 1; n++) {
        char err[128];
        slotmap_init(&m);
        cr_assert_eq(slotmap_parse_slots(&m, two_ranges, n, "x", err, sizeof(err)), -1, "prefix %zu", n);
    }
}

Test(slotmap, replace_hands_over)
{
    slotmap b;
    slotmap_init(&b);
    char err[128];
    cr_assert_eq(slotmap_parse_slots(&b, two_ranges, sizeof(two_ranges) - 1, "x", err, sizeof(err)), 0);
    slotmap_moved(&m, 1, "old", 3, 1);
    slotmap_replace(&m, &b);
    cr_assert_eq(m.covered, HASHSLOT_COUNT);
    cr_assert_eq(m.nnodes, 4);
    cr_assert_eq(b.nnodes, 0);
    cr_assert_null(b.nodes);
    slotmap_free(&b);
}

/* test_cluster_merge.c - a split or fanned-out command's parts made into
 * the client's one reply (proxy/route/cluster_merge.c). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "proxy/route/cluster_merge.h"

/* Feed each part's reply (in the order given by `order`, each in pieces of
 * `piece` bytes) and return the merged reply as a C string (static). */
static const char *merge(cmerge *m, int nparts, const char *const *replies, const int *order, size_t piece)
{
    static char out[4096];
    for (int o = 0; o < nparts; o++) {
        int i = order ? order[o] : o;
        const char *r = replies[i];
        size_t n = strlen(r);
        for (size_t off = 0; off < n; off += piece) {
            size_t k = n - off < piece ? n - off : piece;
            int all = cmerge_add(m, i, r + off, k, off + k == n);
            cr_assert_eq(all, o == nparts - 1 && off + k == n,
                         "complete only at the last piece of the last part");
        }
    }
    cr_assert_eq(cmerge_owed(m), 0);
    vp_buf b = {0};
    cmerge_result(m, &b);
    cr_assert_lt(b.len, sizeof(out));
    memcpy(out, b.data, b.len);
    out[b.len] = '\0';
    vp_buf_free(&b);
    cmerge_free(m);
    return out;
}

Test(cluster_merge, mget_values_back_in_key_order_whatever_order_parts_answer)
{
    /* keys a b c d: a and c in part 0, b in part 1, d in part 2 */
    int key_part[] = {0, 1, 0, 2};
    int key_pos[] = {0, 0, 1, 0};
    const char *replies[] = {"*2\r\n$1\r\nA\r\n$-1\r\n", "*1\r\n$3\r\nBBB\r\n", "*1\r\n$0\r\n\r\n"};
    int order[] = {2, 0, 1};
    for (size_t piece = 1; piece <= 64; piece *= 4) {
        cmerge *m = cmerge_new(RPLAN_MERGE_MGET, 3, 4, key_part, key_pos);
        cr_assert_str_eq(merge(m, 3, replies, order, piece),
                         "*4\r\n$1\r\nA\r\n$3\r\nBBB\r\n$-1\r\n$0\r\n\r\n");
    }
}

Test(cluster_merge, mget_a_part_error_takes_each_of_its_keys_places)
{
    int key_part[] = {0, 1, 0};
    int key_pos[] = {0, 0, 1};
    const char *replies[] = {"-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
                             "*1\r\n$1\r\nB\r\n"};
    cmerge *m = cmerge_new(RPLAN_MERGE_MGET, 2, 3, key_part, key_pos);
    cr_assert_str_eq(merge(m, 2, replies, NULL, 7),
                     "*3\r\n-TRYAGAIN Multiple keys request during rehashing of slot\r\n$1\r\nB\r\n"
                     "-TRYAGAIN Multiple keys request during rehashing of slot\r\n");
    /* a part with the wrong number of values: said, not guessed at */
    const char *short_part[] = {"*1\r\n$1\r\nA\r\n", "*1\r\n$1\r\nB\r\n"};
    m = cmerge_new(RPLAN_MERGE_MGET, 2, 3, key_part, key_pos);
    const char *got = merge(m, 2, short_part, NULL, 100);
    cr_assert(strstr(got, "$1\r\nB\r\n") && strstr(got, "-ERR verbproxy: unexpected reply"), "%s", got);
}

Test(cluster_merge, sums_min_max_and_the_first_error)
{
    const char *replies[] = {":3\r\n", ":-1\r\n", ":10\r\n"};
    cr_assert_str_eq(merge(cmerge_new(RPLAN_MERGE_SUM, 3, 0, NULL, NULL), 3, replies, NULL, 2), ":12\r\n");
    cr_assert_str_eq(merge(cmerge_new(RPLAN_MERGE_MIN, 3, 0, NULL, NULL), 3, replies, NULL, 2), ":-1\r\n");
    cr_assert_str_eq(merge(cmerge_new(RPLAN_MERGE_MAX, 3, 0, NULL, NULL), 3, replies, NULL, 2), ":10\r\n");
    const char *errs[] = {":3\r\n", "-ERR one\r\n", "-ERR two\r\n"};
    int order[] = {2, 1, 0};
    cr_assert_str_eq(merge(cmerge_new(RPLAN_MERGE_SUM, 3, 0, NULL, NULL), 3, errs, order, 3), "-ERR one\r\n",
                     "the first error in part order, not in arrival order");
}

Test(cluster_merge, all_ok_and_one_ok)
{
    const char *oks[] = {"+OK\r\n", "+OK\r\n"};
    cr_assert_str_eq(merge(cmerge_new(RPLAN_MERGE_ALL_OK, 2, 0, NULL, NULL), 2, oks, NULL, 1), "+OK\r\n");
    const char *one_bad[] = {"+OK\r\n", "-READONLY You can't write against a read only replica.\r\n"};
    cr_assert_str_eq(merge(cmerge_new(RPLAN_MERGE_ALL_OK, 2, 0, NULL, NULL), 2, one_bad, NULL, 5),
                     "-READONLY You can't write against a read only replica.\r\n");
    const char *kill[] = {"-NOTBUSY No scripts in execution right now.\r\n", "+OK\r\n"};
    cr_assert_str_eq(merge(cmerge_new(RPLAN_MERGE_ONE_OK, 2, 0, NULL, NULL), 2, kill, NULL, 5), "+OK\r\n");
    const char *none[] = {"-NOTBUSY No scripts in execution right now.\r\n", "-NOTBUSY x\r\n"};
    cr_assert_str_eq(merge(cmerge_new(RPLAN_MERGE_ONE_OK, 2, 0, NULL, NULL), 2, none, NULL, 5),
                     "-NOTBUSY No scripts in execution right now.\r\n");
}

Test(cluster_merge, keys_concatenated_and_randomkey_the_first_key)
{
    const char *keys[] = {"*2\r\n$1\r\na\r\n$1\r\nb\r\n", "*0\r\n", "*1\r\n$1\r\nc\r\n"};
    cr_assert_str_eq(merge(cmerge_new(RPLAN_MERGE_CONCAT, 3, 0, NULL, NULL), 3, keys, NULL, 3),
                     "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n");
    const char *rnd[] = {"$-1\r\n", "$1\r\nq\r\n", "$1\r\nr\r\n"};
    cr_assert_str_eq(merge(cmerge_new(RPLAN_MERGE_ANY, 3, 0, NULL, NULL), 3, rnd, NULL, 3), "$1\r\nq\r\n");
    const char *empty[] = {"$-1\r\n", "$-1\r\n"};
    cr_assert_str_eq(merge(cmerge_new(RPLAN_MERGE_ANY, 2, 0, NULL, NULL), 2, empty, NULL, 3), "$-1\r\n");
}

Test(cluster_merge, script_exists_and_or)
{
    const char *ex[] = {"*3\r\n:1\r\n:1\r\n:0\r\n", "*3\r\n:1\r\n:0\r\n:0\r\n"};
    cr_assert_str_eq(merge(cmerge_new(RPLAN_MERGE_AND, 2, 0, NULL, NULL), 2, ex, NULL, 4),
                     "*3\r\n:1\r\n:0\r\n:0\r\n");
    cr_assert_str_eq(merge(cmerge_new(RPLAN_MERGE_OR, 2, 0, NULL, NULL), 2, ex, NULL, 4),
                     "*3\r\n:1\r\n:1\r\n:0\r\n");
    const char *odd[] = {"*1\r\n:1\r\n", "*2\r\n:1\r\n:0\r\n"};
    cr_assert(
        strstr(merge(cmerge_new(RPLAN_MERGE_AND, 2, 0, NULL, NULL), 2, odd, NULL, 4), "unexpected reply"));
}

Test(cluster_merge, scan_cursor_carries_the_node)
{
    const char *mid[] = {"*2\r\n$2\r\n17\r\n*1\r\n$1\r\nk\r\n"};
    cmerge *m = cmerge_new(RPLAN_MERGE_SCAN, 1, 0, NULL, NULL);
    cmerge_set_scan(m, 1, 3);
    uint64_t want;
    cr_assert_eq(rplan_scan_encode(1, 17, 3, &want), 0);
    char exp[128];
    char cur[32];
    int cn = snprintf(cur, sizeof(cur), "%llu", (unsigned long long)want);
    snprintf(exp, sizeof(exp), "*2\r\n$%d\r\n%s\r\n*1\r\n$1\r\nk\r\n", cn, cur);
    cr_assert_str_eq(merge(m, 1, mid, NULL, 3), exp);

    /* the node done: the next node from its start */
    const char *done[] = {"*2\r\n$1\r\n0\r\n*0\r\n"};
    m = cmerge_new(RPLAN_MERGE_SCAN, 1, 0, NULL, NULL);
    cmerge_set_scan(m, 0, 3);
    cr_assert_eq(rplan_scan_encode(0, 0, 3, &want), 0);
    cn = snprintf(cur, sizeof(cur), "%llu", (unsigned long long)want);
    snprintf(exp, sizeof(exp), "*2\r\n$%d\r\n%s\r\n*0\r\n", cn, cur);
    cr_assert_str_eq(merge(m, 1, done, NULL, 2), exp);

    /* the last node done: 0, the end */
    m = cmerge_new(RPLAN_MERGE_SCAN, 1, 0, NULL, NULL);
    cmerge_set_scan(m, 2, 3);
    cr_assert_str_eq(merge(m, 1, done, NULL, 2), "*2\r\n$1\r\n0\r\n*0\r\n");

    /* an error from the node goes as it is */
    const char *err[] = {"-ERR invalid cursor\r\n"};
    m = cmerge_new(RPLAN_MERGE_SCAN, 1, 0, NULL, NULL);
    cmerge_set_scan(m, 0, 3);
    cr_assert_str_eq(merge(m, 1, err, NULL, 2), "-ERR invalid cursor\r\n");
}

Test(cluster_merge, a_part_whole_already_ignores_more)
{
    cmerge *m = cmerge_new(RPLAN_MERGE_SUM, 2, 0, NULL, NULL);
    cr_assert_eq(cmerge_add(m, 0, ":1\r\n", 4, 1), 0);
    cr_assert_eq(cmerge_add(m, 0, ":5\r\n", 4, 1), 0);
    cr_assert_eq(cmerge_add(m, 7, ":5\r\n", 4, 1), 0, "no such part");
    cr_assert_eq(cmerge_owed(m), 1);
    cr_assert_eq(cmerge_add(m, 1, ":2\r\n", 4, 1), 1);
    vp_buf b = {0};
    cmerge_result(m, &b);
    cr_assert_eq(b.len, 4);
    cr_assert(memcmp(b.data, ":3\r\n", 4) == 0);
    vp_buf_free(&b);
    cmerge_free(m);
}

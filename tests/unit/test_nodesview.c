/* proxy/route/nodesview.c: a CLUSTER NODES reply (Redis 7.0's format, as
 * the docs and clusterGenNodeDescription write it: hostnames and 7.2's aux
 * fields after the cluster port, a noaddr node, migrating and importing
 * slots) read for the questions a redirect check asks. The integration
 * test (test_cluster_forged.c) asks a real cluster. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/route/nodesview.h"

#define ID_A "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca" /* myself, 0-5460, migrating 93 to C */
#define ID_B "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1" /* 5461-10922, importing 93 from C */
#define ID_C "292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f" /* 10923-16383, hostname */
#define ID_D "6ec23923021cf3ffec47632106199cb7f496ce01" /* noaddr */
#define ID_R "07c37dfeb235213a872192d90877d0cd55635b91" /* replica of A, hostname and aux */

static const char text[] =
    ID_R " 127.0.0.1:30004@31004,replica-a,shard-id=abc slave " ID_A " 0 1426238317239 4 connected\n" ID_B
         " 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922 [93-<-" ID_C "]\n" ID_C
         " 10.0.0.3:30003@31003,node-c master - 0 1426238318243 3 connected 10923-16383\n" ID_D
         " :0@0 master,noaddr - 1426238316232 1426238316232 5 disconnected\n" ID_A
         " 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460 [93->-" ID_C "]\n";

static nview view_of(const char *reply)
{
    nview v;
    cr_assert_eq(nview_from_reply(&v, reply, strlen(reply)), 0, "'%s'", reply);
    return v;
}

static nview the_view(char *buf, size_t cap)
{
    snprintf(buf, cap, "$%zu\r\n%s\r\n", strlen(text), text);
    return view_of(buf);
}

static void finds(const nview *v, const char *host, int port, const char *id)
{
    char got[NVIEW_ID_LEN + 1];
    cr_assert(nview_find(v, host, strlen(host), port, got), "%s:%d not found", host, port);
    cr_assert_str_eq(got, id, "%s:%d", host, port);
}

static void misses(const nview *v, const char *host, int port)
{
    char got[NVIEW_ID_LEN + 1];
    cr_assert_not(nview_find(v, host, strlen(host), port, got), "%s:%d found", host, port);
}

Test(nodesview, nodes_by_ip_or_hostname)
{
    char buf[2048];
    nview v = the_view(buf, sizeof(buf));
    finds(&v, "127.0.0.1", 30001, ID_A);
    finds(&v, "127.0.0.1", 30002, ID_B);
    finds(&v, "10.0.0.3", 30003, ID_C);
    finds(&v, "node-c", 30003, ID_C);
    finds(&v, "replica-a", 30004, ID_R);
    misses(&v, "127.0.0.1", 31001); /* the bus port is no client port */
    misses(&v, "127.0.0.1", 40000);
    misses(&v, "127.0.0.2", 30001);
    misses(&v, "shard-id=abc", 30004); /* an aux field is no hostname */
    misses(&v, "", 0);                 /* the noaddr node */
    misses(&v, "127.0.0.1", 3000);
}

Test(nodesview, slots_served_migrating_and_importing)
{
    char buf[2048];
    nview v = the_view(buf, sizeof(buf));
    cr_assert(nview_serves(&v, ID_A, 0) && nview_serves(&v, ID_A, 5460) && nview_serves(&v, ID_A, 93));
    cr_assert_not(nview_serves(&v, ID_A, 5461));
    cr_assert(nview_serves(&v, ID_B, 5461) && nview_serves(&v, ID_C, 16383));
    cr_assert_not(nview_serves(&v, ID_B, 93), "an importing slot is not served");
    cr_assert_not(nview_serves(&v, ID_R, 0) || nview_serves(&v, ID_D, 0));
    cr_assert_not(nview_serves(&v, "unknown", 0));
    /* myself (A) migrates 93 to C */
    cr_assert(nview_migrating_to(&v, 93, ID_C));
    cr_assert_not(nview_migrating_to(&v, 93, ID_B));
    cr_assert_not(nview_migrating_to(&v, 94, ID_C));
    cr_assert(nview_moving(&v, 93));
    cr_assert_not(nview_moving(&v, 92));
}

Test(nodesview, importing_is_moving_not_migrating)
{
    /* B's own view: it imports 93 from C */
    char t[1024], reply[1200];
    snprintf(t, sizeof(t), "%s 127.0.0.1:30002@31002 myself,master - 0 0 2 connected 5461-10922 [93-<-%s]\n",
             ID_B, ID_C);
    snprintf(reply, sizeof(reply), "$%zu\r\n%s\r\n", strlen(t), t);
    nview v = view_of(reply);
    cr_assert(nview_moving(&v, 93));
    cr_assert_not(nview_migrating_to(&v, 93, ID_C));
}

Test(nodesview, resp3_verbatim_and_bad_replies)
{
    char t[128] = ID_A " 127.0.0.1:1@2 myself,master - 0 0 1 connected 7\n";
    char reply[256];
    snprintf(reply, sizeof(reply), "=%zu\r\ntxt:%s\r\n", strlen(t) + 4, t);
    nview v = view_of(reply);
    cr_assert(nview_serves(&v, ID_A, 7));
    finds(&v, "127.0.0.1", 1, ID_A);
    const char *bad[] = {"-NOAUTH Authentication required.\r\n",
                         "$100\r\nshort\r\n",
                         ":1\r\n",
                         "$-1\r\n",
                         "=5\r\nmkd:x\r\n",
                         "$",
                         ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        nview b;
        cr_assert_eq(nview_from_reply(&b, bad[i], strlen(bad[i])), -1, "'%s' read as a view", bad[i]);
    }
}

/* A node with its slots in many ranges, or a hostile one, answers a line
 * of millions of fields: read in time linear in the line (each field once
 * per question), not a rescan from the line's start per field. Quadratic,
 * this line of 2,000,000 slot fields took ~10^12 steps per question
 * (hours); linear, well under a second, inside the timeout. */
#define MANY_FIELDS 2000000

Test(nodesview, a_line_of_millions_of_fields_is_read_in_linear_time, .timeout = 20)
{
    const char *head = ID_A " 127.0.0.1:30001@31001 myself,master - 0 0 1 connected";
    size_t cap = strlen(head) + 2 * (size_t)MANY_FIELDS + 64;
    char *t = malloc(cap), *reply = malloc(cap + 32);
    cr_assert(t && reply);
    size_t n = strlen(head);
    memcpy(t, head, n);
    for (int i = 0; i < MANY_FIELDS; i++) {
        t[n++] = ' ';
        t[n++] = '1';
    }
    n += (size_t)snprintf(t + n, cap - n, " 5 [9->-%s]\n", ID_C);
    int h = snprintf(reply, cap + 32, "$%zu\r\n", n);
    memcpy(reply + h, t, n);
    memcpy(reply + h + n, "\r\n", 2);
    nview v;
    cr_assert_eq(nview_from_reply(&v, reply, (size_t)h + n + 2), 0);
    /* each question walks every field: the answers are after the last '1' */
    cr_assert(nview_serves(&v, ID_A, 5));
    cr_assert_not(nview_serves(&v, ID_A, 6));
    cr_assert(nview_migrating_to(&v, 9, ID_C));
    cr_assert_not(nview_migrating_to(&v, 8, ID_C));
    cr_assert(nview_moving(&v, 9));
    cr_assert_not(nview_moving(&v, 10));
    char id[NVIEW_ID_LEN + 1];
    cr_assert(nview_find(&v, "127.0.0.1", 9, 30001, id));
    cr_assert_str_eq(id, ID_A);
    free(t);
    free(reply);
}

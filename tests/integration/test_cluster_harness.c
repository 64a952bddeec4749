/* The cluster foundations against a real Redis Cluster (tests/support/
 * cluster.h: 3 primaries + 3 replicas made by redis-cli --cluster create):
 *
 *   - proxy/route/slotmap.c parses the cluster's own CLUSTER SLOTS (RESP2 and
 *     RESP3) into a map covering all 16384 slots whose owners agree with
 *     CLUSTER NODES, with ROLE, and with where keys really live: GET on the
 *     owner answers, GET on another primary answers -MOVED to the owner
 *     (parsed by proxy/route/redirect.c), and proxy/route/hashslot.c agrees with
 *     CLUSTER KEYSLOT;
 *   - a slot moved with SETSLOT MIGRATING/IMPORTING + MIGRATE + SETSLOT
 *     NODE: -ASK while it moves (to the target; ASKING there lets the
 *     command in), -MOVED after, each parsed right; the map updated by the
 *     MOVED alone agrees with a fresh CLUSTER SLOTS;
 *   - CLUSTER FAILOVER on a replica: the fresh map names it primary, with
 *     its old primary as its replica, and a write to the old primary is
 *     -MOVED to it.
 * No proxy runs here: registered once (CMake's VP_INTEGRATION_ONCE). */
#include <stdio.h>
#include <string.h>

#include "proxy/route/hashslot.h"
#include "proxy/route/redirect.h"
#include "proxy/route/slotmap.h"
#include "tests/support/checks.h"
#include "tests/support/cluster.h"

static vt_cluster *cl;

static void setup(void)
{
    cl = vt_cluster_start();
    cr_assert_not_null(cl, "the cluster did not come up (see stderr)");
}

static void teardown(void)
{
    vt_cluster_free(cl);
}

TestSuite(cluster_harness, .init = setup, .fini = teardown, .timeout = 120);

/* A fresh map from node i's CLUSTER SLOTS, read as raw bytes (RESP3 after
 * HELLO 3 when resp3). */
static void fetch_map(int i, int resp3, slotmap *m)
{
    int fd = vt_sock_tcp(cl->node[i]->port);
    cr_assert_geq(fd, 0);
    vt_buf b = {0};
    if (resp3) {
        cr_assert(vt_sock_send_str(fd, "*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n"));
        cr_assert(vt_sock_read_replies(fd, &b, 1, VT_READ_DEADLINE_MS));
        vt_buf_consume(&b, (size_t)vt_resp_reply_len(b.data, b.len));
    }
    cr_assert(vt_sock_send_str(fd, "*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n"));
    cr_assert(vt_sock_read_replies(fd, &b, 1, VT_READ_DEADLINE_MS));
    close(fd);
    char err[160];
    slotmap_init(m);
    cr_assert_eq(slotmap_parse_slots(m, b.data, b.len, "127.0.0.1", err, sizeof(err)), 0, "%s: %s", err,
                 vt_buf_escaped(&b));
    vt_buf_free(&b);
}

/* The cluster index of a map node. */
static int index_of(const slotmap *m, int node)
{
    cr_assert_str_eq(m->nodes[node].host, "127.0.0.1");
    int i = vt_cluster_index_of_port(cl, m->nodes[node].port);
    cr_assert_geq(i, 0, "port %d is no node of ours", m->nodes[node].port);
    return i;
}

/* A command's reply from node i, as redirect_parse sees it when an error. */
static redirect_kind ask_node(int i, redirect *rd, const char *fmt, ...)
{
    redisContext *c = vt_connect(cl->node[i]->port);
    cr_assert_not_null(c);
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    cr_assert_not_null(r);
    static char text[256];
    redirect_kind k = REDIRECT_NONE;
    memset(rd, 0, sizeof(*rd));
    if (r->type == REDIS_REPLY_ERROR) {
        /* keep the bytes alive for rd->host */
        snprintf(text, sizeof(text), "%s", r->str);
        k = redirect_parse(text, strlen(text), rd);
        cr_assert_neq(k, REDIRECT_NONE, "node %d: unexpected error %s", i, text);
    }
    freeReplyObject(r);
    redisFree(c);
    return k;
}

/* CLUSTER NODES: each node's id -> role and primary id, each slot's owner id. */
static void check_against_cluster_nodes(const slotmap *m)
{
    redisContext *c = vt_connect(cl->node[0]->port);
    redisReply *r = redisCommand(c, "CLUSTER NODES");
    cr_assert(r && r->type == REDIS_REPLY_STRING);
    int lines = 0, slots = 0;
    for (char *save = NULL, *line = strtok_r(r->str, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char id[41], addr[64], flags[64], master[41];
        int used = 0;
        cr_assert_eq(sscanf(line, "%40s %63s %63s %40s %*s %*s %*s %*s%n", id, addr, flags, master, &used), 4,
                     "%s", line);
        int port = atoi(strchr(addr, ':') + 1);
        int n = slotmap_find(m, "127.0.0.1", 9, port);
        cr_assert_geq(n, 0, "%s is not in the map", addr);
        cr_assert_str_eq(m->nodes[n].id, id);
        lines++;
        if (strstr(flags, "slave")) {
            cr_assert_geq(m->nodes[n].primary, 0, "%s: a replica in CLUSTER NODES, a primary in the map",
                          addr);
            cr_assert_str_eq(m->nodes[m->nodes[n].primary].id, master);
            continue;
        }
        cr_assert_eq(m->nodes[n].primary, -1);
        /* slot ranges: "0-5460" or "5461" */
        for (char *p = line + used; *p;) {
            while (*p == ' ')
                p++;
            if (!*p) break;
            int a, b = -1, k = 0;
            cr_assert_geq(sscanf(p, "%d-%d%n", &a, &b, &k), 1, "%s", p);
            if (b < 0) b = a, sscanf(p, "%d%n", &a, &k);
            for (int s = a; s <= b; s++, slots++)
                cr_assert_eq(slotmap_owner(m, s), n, "slot %d", s);
            p += k;
        }
    }
    cr_assert_eq(lines, VT_CLUSTER_NODES);
    cr_assert_eq(slots, HASHSLOT_COUNT);
    freeReplyObject(r);
    redisFree(c);
}

Test(cluster_harness, the_map_from_cluster_slots_agrees_with_the_cluster)
{
    for (int resp3 = 0; resp3 <= 1; resp3++) {
        slotmap m;
        fetch_map(resp3 ? 3 : 0, resp3, &m);
        cr_assert_eq(m.covered, HASHSLOT_COUNT);
        cr_assert_eq(m.nnodes, VT_CLUSTER_NODES);
        int primaries = 0;
        for (int n = 0; n < m.nnodes; n++) {
            int i = index_of(&m, n);
            cr_assert_eq(vt_cluster_is_primary(cl, i), m.nodes[n].primary == -1, "node %d's role", i);
            primaries += m.nodes[n].primary == -1;
        }
        cr_assert_eq(primaries, 3);
        check_against_cluster_nodes(&m);
        slotmap_free(&m);
    }

    /* where keys really live: the owner answers, another primary redirects */
    slotmap m;
    fetch_map(1, 0, &m);
    char key[32];
    for (int k = 0; k < 300; k++) {
        snprintf(key, sizeof(key), "key:%d%s", k * 7919, k % 3 ? "" : "{tag}");
        int slot = hashslot_of(key, strlen(key));
        cr_assert_eq(slot, vt_cluster_keyslot(cl, key), "%s", key);
        int owner = index_of(&m, slotmap_owner(&m, slot));
        redirect rd;
        cr_assert_eq(ask_node(owner, &rd, "SET %s v", key), REDIRECT_NONE);
        for (int n = 0; n < m.nnodes; n++) {
            int i = index_of(&m, n);
            if (i == owner || m.nodes[n].primary != -1) continue;
            cr_assert_eq(ask_node(i, &rd, "GET %s", key), REDIRECT_MOVED, "%s on node %d", key, i);
            cr_assert_eq(rd.slot, slot);
            cr_assert_eq(rd.port, cl->node[owner]->port);
            cr_assert(rd.hostlen == 9 && memcmp(rd.host, "127.0.0.1", 9) == 0);
        }
    }
    slotmap_free(&m);
}

Test(cluster_harness, a_moving_slot_answers_ask_then_moved)
{
    slotmap m;
    fetch_map(0, 0, &m);
    const char *key = "{mover}k", *absent = "{mover}absent";
    int slot = hashslot_of(key, strlen(key));
    int from = index_of(&m, slotmap_owner(&m, slot)), to = -1;
    for (int n = 0; n < m.nnodes && to < 0; n++)
        if (m.nodes[n].primary == -1 && index_of(&m, n) != from) to = index_of(&m, n);
    redirect rd;
    cr_assert_eq(ask_node(from, &rd, "SET %s v", key), REDIRECT_NONE);

    cr_assert(vt_cluster_move_begin(cl, slot, to));
    /* a key still on the source is served there; a missing one is ASKed to the target */
    cr_assert_eq(ask_node(from, &rd, "GET %s", key), REDIRECT_NONE);
    cr_assert_eq(ask_node(from, &rd, "GET %s", absent), REDIRECT_ASK);
    cr_assert_eq(rd.slot, slot);
    cr_assert_eq(rd.port, cl->node[to]->port);
    /* the target refuses it without ASKING (-MOVED back to the source)... */
    cr_assert_eq(ask_node(to, &rd, "GET %s", absent), REDIRECT_MOVED);
    cr_assert_eq(rd.port, cl->node[from]->port);
    /* ... and takes it after ASKING, on the same connection */
    redisContext *c = vt_connect(cl->node[to]->port);
    redisAppendCommand(c, "ASKING");
    redisAppendCommand(c, "GET %s", absent);
    redisReply *r = vt_get_reply(c);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_get_reply(c);
    vt_assert_nil(r);
    freeReplyObject(r);
    redisFree(c);
    /* the map does not change for an ASK */
    cr_assert_eq(index_of(&m, slotmap_owner(&m, slot)), from);

    cr_assert(vt_cluster_move_keys(cl, slot, to));
    cr_assert_eq(ask_node(from, &rd, "GET %s", key), REDIRECT_ASK, "moved keys are ASKed for");
    cr_assert_eq(rd.port, cl->node[to]->port);

    cr_assert(vt_cluster_move_finish(cl, slot, to));
    cr_assert_eq(ask_node(from, &rd, "GET %s", key), REDIRECT_MOVED);
    cr_assert_eq(rd.slot, slot);
    cr_assert_eq(rd.port, cl->node[to]->port);
    /* the MOVED alone updates the map to what a fresh CLUSTER SLOTS says */
    cr_assert_geq(slotmap_moved(&m, rd.slot, rd.host, rd.hostlen, rd.port), 0);
    slotmap fresh;
    fetch_map(to, 0, &fresh);
    cr_assert_eq(fresh.covered, HASHSLOT_COUNT);
    for (int s = 0; s < HASHSLOT_COUNT; s++)
        cr_assert_eq(index_of(&m, slotmap_owner(&m, s)), index_of(&fresh, slotmap_owner(&fresh, s)),
                     "slot %d", s);
    cr_assert_eq(ask_node(to, &rd, "GET %s", key), REDIRECT_NONE);
    slotmap_free(&fresh);
    slotmap_free(&m);
}

Test(cluster_harness, a_failover_shows_in_the_map_and_in_moved)
{
    slotmap m;
    fetch_map(0, 0, &m);
    int replica = -1, primary = -1;
    for (int n = 0; n < m.nnodes && replica < 0; n++)
        if (m.nodes[n].primary >= 0) replica = index_of(&m, n), primary = index_of(&m, m.nodes[n].primary);
    cr_assert_geq(replica, 0);
    int slot = -1;
    for (int s = 0; s < HASHSLOT_COUNT && slot < 0; s++)
        if (index_of(&m, slotmap_owner(&m, s)) == primary) slot = s;
    slotmap_free(&m);

    cr_assert(vt_cluster_failover(cl, replica));
    fetch_map(primary, 0, &m);
    cr_assert_eq(m.covered, HASHSLOT_COUNT);
    int r = slotmap_find(&m, "127.0.0.1", 9, cl->node[replica]->port);
    int p = slotmap_find(&m, "127.0.0.1", 9, cl->node[primary]->port);
    cr_assert_eq(m.nodes[r].primary, -1, "the replica is a primary now");
    cr_assert_eq(m.nodes[p].primary, r, "the old primary replicates it");
    cr_assert_eq(slotmap_owner(&m, slot), r);
    /* a write to the old primary: MOVED to the new one */
    char key[32];
    for (int k = 0;; k++) {
        snprintf(key, sizeof(key), "fo:%d", k);
        if (hashslot_of(key, strlen(key)) != slot && slotmap_owner(&m, hashslot_of(key, strlen(key))) != r)
            continue;
        break;
    }
    redirect rd;
    cr_assert_eq(ask_node(primary, &rd, "SET %s v", key), REDIRECT_MOVED);
    cr_assert_eq(rd.port, cl->node[replica]->port);
    slotmap_free(&m);
}

/* cluster.c - a real 3 + 3 Redis Cluster for tests (cluster.h). */
#include "tests/support/cluster.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/client.h"

#define REDIS_CLI "/usr/bin/redis-cli"
#define MIGRATE_BATCH 100

redisReply *vt_cluster_node_cmd(vt_cluster *c, int i, const char *fmt, ...)
{
    redisContext *ctx = vt_connect(c->node[i]->port);
    if (!ctx) return NULL;
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    redisFree(ctx);
    return r;
}

/* A command that must answer +OK. */
static bool node_ok(vt_cluster *c, int i, const char *what, redisReply *r)
{
    bool ok = r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    if (!ok)
        fprintf(stderr, "vt cluster: node %d (port %d): %s: %s\n", i, c->node[i]->port, what,
                r && r->str ? r->str : "no reply");
    if (r) freeReplyObject(r);
    return ok;
}

typedef struct cli_wait {
    pid_t pid;
    int status;
    bool gone;
} cli_wait;

static bool cli_exited(void *arg)
{
    cli_wait *w = arg;
    pid_t r = waitpid(w->pid, &w->status, WNOHANG);
    if (r < 0 && errno != EINTR) w->status = -1, w->gone = true;
    return r == w->pid || w->gone;
}

/* Run redis-cli with `argv` to completion (deadline); its output to
 * c->cli_log. Dies with the test (PR_SET_PDEATHSIG). */
static bool run_cli(vt_cluster *c, char *const argv[], int timeout_ms)
{
    pid_t parent = getpid();
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        int in = open("/dev/null", O_RDONLY), out = open(c->cli_log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (in < 0 || out < 0) _exit(127);
        dup2(in, 0);
        dup2(out, 1);
        dup2(out, 2);
        close_range(3, ~0u, 0);
        execv(argv[0], argv);
        _exit(127);
    }
    cli_wait w = {pid, 0, false};
    if (!vt_wait_until(cli_exited, &w, timeout_ms)) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        fprintf(stderr, "vt cluster: redis-cli did not finish within %d ms (%s)\n", timeout_ms, c->cli_log);
        return false;
    }
    int status = w.status;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char *log = vt_read_file(c->cli_log);
        fprintf(stderr, "vt cluster: redis-cli failed (status 0x%x):\n%s\n", status, log);
        free(log);
        return false;
    }
    return true;
}

vt_redis *vt_cluster_node_start(int *bus, bool tls, int node_timeout_ms)
{
    /* Redis 6.2 has no --cluster-port: its bus is port + 10000, claimed
     * after the data port is picked */
    bool fixed_bus = vt_redis_version() < 700;
    for (int attempt = 0; attempt < 20; attempt++) {
        char bus_s[16], timeout_s[16];
        *bus = fixed_bus ? 0 : vt_free_port();
        snprintf(bus_s, sizeof(bus_s), "%d", *bus);
        snprintf(timeout_s, sizeof(timeout_s), "%d", node_timeout_ms);
        const char *extra[24];
        int n = 0;
        extra[n++] = "--cluster-enabled";
        extra[n++] = "yes";
        extra[n++] = "--cluster-config-file";
        extra[n++] = "nodes.conf";
        if (!fixed_bus) {
            extra[n++] = "--cluster-port";
            extra[n++] = bus_s;
        }
        extra[n++] = "--cluster-node-timeout";
        extra[n++] = timeout_s;
        /* CLUSTER SLOTS lists a replica once its replication offset is not
         * 0: sync at once (no 5 s wait for more replicas) and let the
         * primary's PING move the offset every second, not every 10 */
        extra[n++] = "--repl-diskless-sync-delay";
        extra[n++] = "0";
        extra[n++] = "--repl-ping-replica-period";
        extra[n++] = "1";
        if (tls) {
            /* the bus and replication too: a node then tells a TLS client
             * its TLS ports, a plain one its plain ports */
            extra[n++] = "--tls-cluster";
            extra[n++] = "yes";
            extra[n++] = "--tls-replication";
            extra[n++] = "yes";
        }
        extra[n] = NULL;
        vt_redis_opts o = {.tls = tls ? VT_REDIS_TLS_ALSO : VT_REDIS_TLS_NONE, .extra_args = extra};
        vt_redis *r = vt_redis_new(&o);
        if (!r) return NULL;
        if (fixed_bus) {
            *bus = r->port + 10000;
            if (*bus <= 65535 && vt_port_claim(*bus) && vt_redis_launch(r)) return r;
        } else if (r->port != *bus && vt_redis_launch(r)) {
            return r;
        }
        vt_redis_free(r); /* the bus port was taken, or handed out again as the data port: pick anew */
    }
    return NULL;
}

static vt_cluster *cluster_start(bool tls, int node_timeout_ms)
{
    vt_cluster *c = calloc(1, sizeof(*c));
    if (!c) abort();
    for (int i = 0; i < VT_CLUSTER_NODES; i++) {
        c->node[i] = vt_cluster_node_start(&c->bus_port[i], tls, node_timeout_ms);
        if (!c->node[i]) {
            fprintf(stderr, "vt cluster: node %d did not start\n", i);
            vt_cluster_free(c);
            return NULL;
        }
    }
    snprintf(c->cli_log, sizeof(c->cli_log), "%s/redis-cli.log", c->node[0]->dir);
    char addrs[VT_CLUSTER_NODES][32];
    char *argv[VT_CLUSTER_NODES + 8] = {REDIS_CLI, "--cluster", "create"};
    int n = 3;
    for (int i = 0; i < VT_CLUSTER_NODES; i++) {
        snprintf(addrs[i], sizeof(addrs[i]), "127.0.0.1:%d", c->node[i]->port);
        argv[n++] = addrs[i];
    }
    argv[n++] = "--cluster-replicas";
    argv[n++] = "1";
    argv[n++] = "--cluster-yes";
    argv[n] = NULL;
    if (!run_cli(c, argv, VT_CLUSTER_DEADLINE_MS) || !vt_cluster_wait_ok(c, VT_CLUSTER_DEADLINE_MS)) {
        vt_cluster_free(c);
        return NULL;
    }
    for (int i = 0; i < VT_CLUSTER_NODES; i++) {
        redisReply *r = vt_cluster_node_cmd(c, i, "CLUSTER MYID");
        if (!r || r->type != REDIS_REPLY_STRING || r->len != 40) {
            fprintf(stderr, "vt cluster: CLUSTER MYID of node %d\n", i);
            if (r) freeReplyObject(r);
            vt_cluster_free(c);
            return NULL;
        }
        memcpy(c->id[i], r->str, 40);
        freeReplyObject(r);
    }
    return c;
}

vt_cluster *vt_cluster_start(void)
{
    return cluster_start(false, VT_CLUSTER_NODE_TIMEOUT_MS);
}

vt_cluster *vt_cluster_start_node_timeout(int ms)
{
    return cluster_start(false, ms);
}

vt_cluster *vt_cluster_start_tls(void)
{
    return cluster_start(true, VT_CLUSTER_NODE_TIMEOUT_MS);
}

void vt_cluster_free(vt_cluster *c)
{
    if (!c) return;
    for (int i = 0; i < VT_CLUSTER_NODES; i++)
        if (c->node[i]) vt_redis_free(c->node[i]);
    free(c);
}

int vt_cluster_index_of_port(const vt_cluster *c, int port)
{
    for (int i = 0; i < VT_CLUSTER_NODES; i++)
        if (c->node[i] && c->node[i]->port == port) return i;
    return -1;
}

bool vt_cluster_is_primary(vt_cluster *c, int i)
{
    redisReply *r = vt_cluster_node_cmd(c, i, "ROLE");
    bool p = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
             r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, "master") == 0;
    if (r) freeReplyObject(r);
    return p;
}

/* owner[slot] = node index (or -1) from node i's CLUSTER SLOTS; *listed
 * (if not NULL): how many distinct nodes it names, replicas included. */
static bool slots_view_listed(vt_cluster *c, int i, int *owner, int *listed)
{
    bool seen[VT_CLUSTER_NODES] = {false};
    if (listed) *listed = 0;
    for (int s = 0; s < 16384; s++)
        owner[s] = -1;
    redisReply *r = vt_cluster_node_cmd(c, i, "CLUSTER SLOTS");
    bool ok = r && r->type == REDIS_REPLY_ARRAY;
    for (size_t k = 0; ok && k < r->elements; k++) {
        redisReply *e = r->element[k];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 || e->element[2]->type != REDIS_REPLY_ARRAY ||
            e->element[2]->elements < 2) {
            ok = false;
            break;
        }
        for (size_t n = 2; listed && n < e->elements; n++) {
            int x = e->element[n]->elements >= 2
                        ? vt_cluster_index_of_port(c, (int)e->element[n]->element[1]->integer)
                        : -1;
            if (x >= 0 && !seen[x]) seen[x] = true, (*listed)++;
        }
        int node = vt_cluster_index_of_port(c, (int)e->element[2]->element[1]->integer);
        for (long long s = e->element[0]->integer; s <= e->element[1]->integer && s < 16384; s++)
            owner[s] = node;
    }
    if (r) freeReplyObject(r);
    return ok;
}

static bool slots_view(vt_cluster *c, int i, int *owner)
{
    return slots_view_listed(c, i, owner, NULL);
}

int vt_cluster_slot_owner(vt_cluster *c, int asked, int slot)
{
    static int owner[16384];
    if (!slots_view(c, asked, owner)) return -1;
    return owner[slot];
}

int vt_cluster_keyslot(vt_cluster *c, const char *key)
{
    redisReply *r = vt_cluster_node_cmd(c, 0, "CLUSTER KEYSLOT %s", key);
    int s = r && r->type == REDIS_REPLY_INTEGER ? (int)r->integer : -1;
    if (r) freeReplyObject(r);
    return s;
}

int vt_cluster_key_node(vt_cluster *c, const char *key)
{
    int s = vt_cluster_keyslot(c, key);
    return s < 0 ? -1 : vt_cluster_slot_owner(c, 0, s);
}

/* ---- waiting for agreement ---- */

static bool all_ok(void *arg)
{
    vt_cluster *c = arg;
    static int first[16384], view[16384];
    for (int i = 0; i < VT_CLUSTER_NODES; i++) {
        redisReply *r = vt_cluster_node_cmd(c, i, "CLUSTER INFO");
        bool ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_state:ok") &&
                  strstr(r->str, "cluster_slots_assigned:16384") && strstr(r->str, "cluster_slots_ok:16384");
        if (r) freeReplyObject(r);
        if (!ok) return false;
        int listed;
        /* every replica attached and known to every node, too */
        if (!slots_view_listed(c, i, i == 0 ? first : view, &listed) || listed != VT_CLUSTER_NODES)
            return false;
        if (i && memcmp(first, view, sizeof(view)) != 0) return false;
    }
    for (int s = 0; s < 16384; s++)
        if (first[s] < 0 || !c->node[first[s]]) return false;
    return true;
}

bool vt_cluster_wait_ok(vt_cluster *c, int timeout_ms)
{
    if (vt_wait_until(all_ok, c, timeout_ms)) return true;
    fprintf(stderr,
            "vt cluster: not every node reached cluster_state:ok with one view of the slots in %d ms\n",
            timeout_ms);
    return false;
}

/* ---- moving a slot ---- */

static int owner_or_fail(vt_cluster *c, int slot, int to)
{
    int from = vt_cluster_slot_owner(c, to, slot);
    if (from < 0) fprintf(stderr, "vt cluster: slot %d has no owner\n", slot);
    return from;
}

bool vt_cluster_move_begin(vt_cluster *c, int slot, int to)
{
    int from = owner_or_fail(c, slot, to);
    if (from < 0 || from == to) return false;
    return node_ok(c, to, "SETSLOT IMPORTING",
                   vt_cluster_node_cmd(c, to, "CLUSTER SETSLOT %d IMPORTING %s", slot, c->id[from])) &&
           node_ok(c, from, "SETSLOT MIGRATING",
                   vt_cluster_node_cmd(c, from, "CLUSTER SETSLOT %d MIGRATING %s", slot, c->id[to]));
}

bool vt_cluster_move_keys(vt_cluster *c, int slot, int to)
{
    int from = owner_or_fail(c, slot, to);
    if (from < 0) return false;
    for (;;) {
        redisReply *keys = vt_cluster_node_cmd(c, from, "CLUSTER GETKEYSINSLOT %d %d", slot, MIGRATE_BATCH);
        if (!keys || keys->type != REDIS_REPLY_ARRAY) {
            if (keys) freeReplyObject(keys);
            return false;
        }
        if (keys->elements == 0) {
            freeReplyObject(keys);
            return true;
        }
        const char *argv[MIGRATE_BATCH + 8];
        size_t lens[MIGRATE_BATCH + 8];
        char port[16];
        snprintf(port, sizeof(port), "%d", c->node[to]->port);
        int n = 0;
        const char *head[] = {"MIGRATE", "127.0.0.1", port, "", "0", "5000", "REPLACE", "KEYS"};
        for (int k = 0; k < 8; k++)
            argv[n] = head[k], lens[n++] = strlen(head[k]);
        for (size_t k = 0; k < keys->elements; k++)
            argv[n] = keys->element[k]->str, lens[n++] = keys->element[k]->len;
        redisContext *ctx = vt_connect(c->node[from]->port);
        redisReply *r = ctx ? vt_cmd_argv(ctx, n, argv, lens) : NULL;
        if (ctx) redisFree(ctx);
        freeReplyObject(keys);
        if (!node_ok(c, from, "MIGRATE", r)) return false;
    }
}

typedef struct owner_wait {
    vt_cluster *c;
    int slot, to;
} owner_wait;

static bool sees_owner(void *arg)
{
    owner_wait *w = arg;
    for (int i = 0; i < VT_CLUSTER_NODES; i++)
        if (vt_cluster_slot_owner(w->c, i, w->slot) != w->to) return false;
    return true;
}

bool vt_cluster_move_finish(vt_cluster *c, int slot, int to)
{
    int from = owner_or_fail(c, slot, to);
    if (from < 0) return false;
    /* the target first (it bumps its epoch and owns the slot), then the
     * source (it stops answering ASK), then every other primary */
    if (!node_ok(c, to, "SETSLOT NODE",
                 vt_cluster_node_cmd(c, to, "CLUSTER SETSLOT %d NODE %s", slot, c->id[to])))
        return false;
    if (from != to && !node_ok(c, from, "SETSLOT NODE",
                               vt_cluster_node_cmd(c, from, "CLUSTER SETSLOT %d NODE %s", slot, c->id[to])))
        return false;
    for (int i = 0; i < VT_CLUSTER_NODES; i++)
        if (i != to && i != from && vt_cluster_is_primary(c, i))
            node_ok(c, i, "SETSLOT NODE",
                    vt_cluster_node_cmd(c, i, "CLUSTER SETSLOT %d NODE %s", slot, c->id[to]));
    owner_wait w = {c, slot, to};
    if (vt_wait_until(sees_owner, &w, VT_CLUSTER_DEADLINE_MS)) return true;
    fprintf(stderr, "vt cluster: not every node sees slot %d on node %d\n", slot, to);
    return false;
}

bool vt_cluster_move_slot(vt_cluster *c, int slot, int to)
{
    return vt_cluster_move_begin(c, slot, to) && vt_cluster_move_keys(c, slot, to) &&
           vt_cluster_move_finish(c, slot, to);
}

/* ---- failover ---- */

typedef struct failover_wait {
    vt_cluster *c;
    int replica;
} failover_wait;

static bool failed_over(void *arg)
{
    failover_wait *w = arg;
    return vt_cluster_is_primary(w->c, w->replica) && all_ok(w->c);
}

bool vt_cluster_failover(vt_cluster *c, int replica)
{
    if (vt_cluster_is_primary(c, replica)) {
        fprintf(stderr, "vt cluster: node %d is a primary, not a replica\n", replica);
        return false;
    }
    if (!node_ok(c, replica, "CLUSTER FAILOVER", vt_cluster_node_cmd(c, replica, "CLUSTER FAILOVER")))
        return false;
    failover_wait w = {c, replica};
    if (vt_wait_until(failed_over, &w, VT_CLUSTER_DEADLINE_MS)) return true;
    fprintf(stderr, "vt cluster: node %d did not become a primary seen by all\n", replica);
    return false;
}

/* ---- a fragmented slot map ---- */

/* EXEC's reply to DELSLOTS, ADDSLOTS, BUMPEPOCH: OK, OK, a status. */
static bool fragment_exec_ok(const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3) return false;
    for (size_t e = 0; e < 3; e++)
        if (r->element[e]->type != REDIS_REPLY_STATUS) return false;
    return strcmp(r->element[0]->str, "OK") == 0 && strcmp(r->element[1]->str, "OK") == 0;
}

bool vt_cluster_fragment(vt_cluster *c, int nslots, int *to_out)
{
    int from = vt_cluster_slot_owner(c, 0, 1), to = -1;
    for (int i = 0; i < VT_CLUSTER_NODES && to < 0; i++)
        if (i != from && vt_cluster_is_primary(c, i)) to = i;
    if (from < 0 || to < 0) return false;
    /* every other slot of the owner's first range: slots 1, 3, 5, ... */
    int argc = 2 + nslots;
    const char **argv = calloc((size_t)argc, sizeof(*argv));
    char(*num)[16] = calloc((size_t)nslots, sizeof(*num));
    argv[0] = "CLUSTER";
    for (int k = 0; k < nslots; k++) {
        snprintf(num[k], sizeof(num[k]), "%d", 1 + 2 * k);
        argv[2 + k] = num[k];
    }
    /* One transaction: between a DELSLOTS and an ADDSLOTS sent apart, the
     * owner's gossip can hand the slots straight back (ADDSLOTS then says
     * "already busy"), and between ADDSLOTS and BUMPEPOCH an owner with the
     * higher epoch can take them back. The highest epoch makes the claim win
     * on every node, the owner's too. */
    redisContext *ctx = vt_connect(c->node[to]->port);
    bool ok = ctx != NULL;
    if (ok) {
        redisAppendCommand(ctx, "MULTI");
        argv[1] = "DELSLOTS";
        redisAppendCommandArgv(ctx, argc, argv, NULL);
        argv[1] = "ADDSLOTS";
        redisAppendCommandArgv(ctx, argc, argv, NULL);
        redisAppendCommand(ctx, "CLUSTER BUMPEPOCH");
        redisAppendCommand(ctx, "EXEC");
        /* +OK, three +QUEUED, then EXEC's [OK, OK, BUMPED or STILL] */
        for (int k = 0; k < 5 && ok; k++) {
            redisReply *r = NULL;
            ok = redisGetReply(ctx, (void **)&r) == REDIS_OK && r;
            if (ok && k < 4) ok = r->type == REDIS_REPLY_STATUS;
            if (ok && k == 4) ok = fragment_exec_ok(r);
            if (!ok)
                fprintf(stderr, "vt cluster: node %d (port %d): fragmenting: reply %d: %s\n", to,
                        c->node[to]->port, k,
                        r && r->str ? r->str
                        : r         ? "(not as expected)"
                                    : "no reply");
            if (r) freeReplyObject(r);
        }
        redisFree(ctx);
    }
    free(num);
    free(argv);
    if (!ok) return false;
    owner_wait w = {c, 1 + 2 * (nslots - 1), to};
    if (!vt_wait_until(sees_owner, &w, VT_CLUSTER_DEADLINE_MS) ||
        !vt_cluster_wait_ok(c, VT_CLUSTER_DEADLINE_MS)) {
        fprintf(stderr, "vt cluster: the fragmented map did not settle\n");
        return false;
    }
    if (to_out) *to_out = to;
    return true;
}

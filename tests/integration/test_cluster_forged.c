/* upstream-mode cluster: redirects a client forges (issue 22, findings 2
 * and 3), against a real 3 + 3 Redis Cluster (tests/support/cluster.h), a
 * fresh one per story, with bystanders throughout.
 *
 * A script's error reply is any text it likes: `return
 * redis.error_reply('ASK 0 127.0.0.1:PORT')`. Redis Cluster gives it to the
 * script's caller and to nobody else; the proxy must do the same:
 *
 *   - a forged -ASK or -MOVED naming an address no node of the cluster
 *     names (a plain TCP listener the test owns, recording what it gets):
 *     the listener gets no connection, the client gets the script's error
 *     byte for byte; with an upstream password, the password goes nowhere;
 *   - a client returning a forged -MOVED for a slot in a loop while another
 *     client SETs and GETs keys of that slot: every one of that client's
 *     replies right, nothing reaches the forged address;
 *   - a script that INCRs and then returns -TRYAGAIN, or a forged -MOVED or
 *     -ASK to a real primary: it ran once, the counter is 1;
 *   - a script's real -ASK (its key migrated) and real -MOVED (the slot
 *     moved; the proxy's map not yet fresh) are still followed, once the
 *     replying node's CLUSTER NODES confirms them.
 *   - clients pipelining thousands of forged -MOVEDs each, more than the
 *     whole budget of held redirects: another client's script, answered a
 *     real -ASK meanwhile, is still held, checked and followed.
 *   - a custom verb (the operator's Lua) returning its caller's text as an
 *     error: a forged -MOVED or -ASK is its own error, it ran once.
 * Cluster mode needs shared connections and the cluster is plaintext:
 * registered once (CMake's VP_INTEGRATION_ONCE). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/support/checks.h"
#include "tests/support/cluster.h"

#define PASSWORD "forged-story-secret"

static vt_cluster *cl;
static vt_proxy *proxy;

/* ---- the forged address: a listener that records, never answers ---- */

#define FAKE_CONNS 16

typedef struct fake_server {
    int listen_fd;
    int port;
    pthread_t thread;
    volatile int stop;
    pthread_mutex_t mu;
    int accepted;
    char got[4096]; /* the first bytes received, over every connection */
    size_t got_len;
} fake_server;

static fake_server fake;

static void fake_accept(fake_server *f, int *fds, int *nfds)
{
    int fd = accept(f->listen_fd, NULL, NULL);
    if (fd < 0) return;
    pthread_mutex_lock(&f->mu);
    f->accepted++;
    pthread_mutex_unlock(&f->mu);
    if (*nfds < FAKE_CONNS)
        fds[(*nfds)++] = fd;
    else
        close(fd);
}

static void fake_read(fake_server *f, int fd)
{
    char buf[1024];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) return;
    pthread_mutex_lock(&f->mu);
    size_t room = sizeof(f->got) - 1 - f->got_len;
    size_t take = (size_t)n < room ? (size_t)n : room;
    memcpy(f->got + f->got_len, buf, take);
    f->got_len += take;
    pthread_mutex_unlock(&f->mu);
}

static void *fake_run(void *arg)
{
    fake_server *f = arg;
    int fds[FAKE_CONNS], nfds = 0;
    while (!f->stop) {
        struct pollfd p[FAKE_CONNS + 1];
        p[0] = (struct pollfd){.fd = f->listen_fd, .events = POLLIN};
        for (int i = 0; i < nfds; i++)
            p[i + 1] = (struct pollfd){.fd = fds[i], .events = POLLIN};
        if (poll(p, (nfds_t)nfds + 1, 50) <= 0) continue;
        if (p[0].revents) fake_accept(f, fds, &nfds);
        for (int i = 0; i < nfds; i++)
            if (p[i + 1].revents) fake_read(f, fds[i]);
    }
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    return NULL;
}

static void fake_start(void)
{
    memset(&fake, 0, sizeof(fake));
    pthread_mutex_init(&fake.mu, NULL);
    fake.listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fake.listen_fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(fake.listen_fd, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(listen(fake.listen_fd, 16), 0);
    socklen_t len = sizeof(a);
    cr_assert_eq(getsockname(fake.listen_fd, (struct sockaddr *)&a, &len), 0);
    fake.port = ntohs(a.sin_port);
    cr_assert_eq(pthread_create(&fake.thread, NULL, fake_run, &fake), 0);
}

static void fake_stop(void)
{
    if (!fake.listen_fd) return;
    fake.stop = 1;
    pthread_join(fake.thread, NULL);
    close(fake.listen_fd);
    fake.listen_fd = 0;
}

/* Nothing reached the forged address: no connection, no byte. */
static void assert_fake_got_nothing(void)
{
    pthread_mutex_lock(&fake.mu);
    int accepted = fake.accepted;
    char got[sizeof(fake.got)];
    memcpy(got, fake.got, fake.got_len);
    got[fake.got_len] = '\0';
    pthread_mutex_unlock(&fake.mu);
    cr_assert_eq(accepted, 0, "the forged address got %d connection(s), and \"%s\"", accepted,
                 vt_escape(got, strlen(got)));
    cr_assert(strstr(got, PASSWORD) == NULL, "the upstream password reached the forged address");
}

/* ---- fixtures ---- */

static void start_proxy(const char *password)
{
    static const char *args[] = {"--upstream-mode", "cluster", NULL, NULL, NULL};
    args[2] = password ? "--upstream-pass" : NULL;
    args[3] = password;
    proxy = vt_proxy_start(cl->node[0], &(vt_proxy_opts){.extra_args = args});
    cr_assert_not_null(proxy, "verbproxy did not start");
}

static void setup(void)
{
    cl = vt_cluster_start();
    cr_assert_not_null(cl, "the cluster did not come up (see stderr)");
    fake_start();
    start_proxy(NULL);
}

static void teardown(void)
{
    vt_proxy_free(proxy);
    proxy = NULL;
    fake_stop();
    vt_cluster_free(cl);
}

TestSuite(cluster_forged, .init = setup, .fini = teardown, .timeout = 180);

/* ---- helpers ---- */

/* A primary other than the one serving `slot`. */
static int other_primary(int slot)
{
    int owner = vt_cluster_slot_owner(cl, 0, slot);
    cr_assert_geq(owner, 0);
    for (int i = 0; i < VT_CLUSTER_NODES; i++)
        if (i != owner && vt_cluster_is_primary(cl, i)) return i;
    cr_assert_fail("no other primary");
    return -1;
}

/* EVAL of `script` with one key (or none: key NULL); the reply must be the
 * error `want` exactly (hiredis's text, without '-' and CRLF). */
static void expect_script_error(redisContext *c, const char *script, const char *key, const char *want)
{
    redisReply *r = key ? vt_cmd(c, "EVAL %s 1 %s", script, key) : vt_cmd(c, "EVAL %s 0", script);
    cr_assert(r && r->type == REDIS_REPLY_ERROR && strcmp(r->str, want) == 0,
              "EVAL %s: expected the script's error \"%s\", got %s", script, want, VT_DESCRIBE(r));
    freeReplyObject(r);
}

/* `return redis.error_reply('<text>')`, optionally after INCR KEYS[1]. */
static void error_script(char *buf, size_t len, const char *text, bool incr)
{
    snprintf(buf, len, "%sreturn redis.error_reply('%s')", incr ? "redis.call('INCR', KEYS[1]); " : "", text);
}

static long long counter_of(redisContext *c, const char *key)
{
    redisReply *r = vt_cmd(c, "GET %s", key);
    cr_assert(r && r->type == REDIS_REPLY_STRING, "GET %s: %s", key, VT_DESCRIBE(r));
    long long v = atoll(r->str);
    freeReplyObject(r);
    return v;
}

/* `cmd` (EVAL or EVAL_RO) of `script` with one key or none: was the reply
 * the error `want` exactly? If not, why (the first failure) says so. */
static void script_error_is(redisContext *c, const char *cmd, const char *script, const char *key,
                            const char *want, char *why, size_t whylen)
{
    if (why[0]) return;
    redisReply *r = key ? vt_cmd(c, "%s %s 1 %s", cmd, script, key) : vt_cmd(c, "%s %s 0", cmd, script);
    if (!r || r->type != REDIS_REPLY_ERROR || strcmp(r->str, want) != 0)
        snprintf(why, whylen, "%s %s: expected the script's error \"%s\", got %s", cmd, script, want,
                 VT_DESCRIBE(r));
    if (r) freeReplyObject(r);
}

/* Forged -ASK and -MOVED to the fake address: with no key, and with a key
 * of the slot they name (Redis could have said that much). The first
 * wrong reply in why (checked after the fake's record, which says more). */
static void forge_to_the_fake(redisContext *c, char *why, size_t whylen)
{
    char text[128], script[256];
    snprintf(text, sizeof(text), "ASK 0 127.0.0.1:%d", fake.port);
    error_script(script, sizeof(script), text, false);
    script_error_is(c, "EVAL", script, NULL, text, why, whylen);
    const char *key = "forged:{ask}";
    int slot = vt_cluster_keyslot(cl, key);
    snprintf(text, sizeof(text), "ASK %d 127.0.0.1:%d", slot, fake.port);
    error_script(script, sizeof(script), text, false);
    script_error_is(c, "EVAL", script, key, text, why, whylen);
    snprintf(text, sizeof(text), "MOVED %d 127.0.0.1:%d", slot, fake.port);
    error_script(script, sizeof(script), text, false);
    script_error_is(c, "EVAL", script, key, text, why, whylen);
    if (vt_redis_version() >= 700) /* (EVAL_RO came with 7.0) */
        script_error_is(c, "EVAL_RO", script, key, text, why, whylen);
}

/* ---- stories ---- */

Test(cluster_forged, a_scripts_forged_ask_or_moved_reaches_no_address_and_the_client_gets_its_error)
{
    vt_bystanders *b = vt_must_start_bystanders(proxy->port, 4, 50);
    redisContext *c = vt_must_connect(proxy->port);
    char why[512] = "";
    forge_to_the_fake(c, why, sizeof(why));
    assert_fake_got_nothing();
    cr_assert(!why[0], "%s", why);
    /* the client goes on, on every node */
    for (int i = 0; i < 20; i++) {
        redisReply *r = vt_cmd(c, "SET after-forged:%d %d", i, i);
        vt_assert_status(r, "OK");
        freeReplyObject(r);
    }
    cr_assert(vt_bystanders_wait(b, 200, VT_READ_DEADLINE_MS), "the bystanders stalled");
    vt_assert_bystanders_ok(b);
    assert_fake_got_nothing();
    /* (one forged reply fewer before 7.0: no EVAL_RO) */
    cr_assert_geq(vt_proxy_stat(proxy->port, "cluster_refused"), vt_redis_version() >= 700 ? 4 : 3,
                  "the forged redirects were not refused");
    redisFree(c);
}

/* ---- a forged -MOVED in a loop beside another client of the slot ---- */

typedef struct forger {
    int port;
    char script[256];
    char want[128];
    const char *key;
    volatile int stop;
    volatile long long started; /* EVALs sent */
    volatile long long sent;    /* EVALs answered */
    char why[512];
} forger;

static void *forger_run(void *arg)
{
    forger *f = arg;
    redisContext *c = vt_connect(f->port);
    if (!c) {
        snprintf(f->why, sizeof(f->why), "no connection");
        return NULL;
    }
    while (!f->stop && !f->why[0]) {
        f->started++;
        redisReply *r = redisCommand(c, "EVAL %s 1 %s", f->script, f->key);
        if (!r || r->type != REDIS_REPLY_ERROR || strcmp(r->str, f->want) != 0)
            snprintf(f->why, sizeof(f->why), "the forger got %s, not its own error", VT_DESCRIBE(r));
        if (r) freeReplyObject(r);
        f->sent++;
    }
    redisFree(c);
    return NULL;
}

/* Its redirects answered, or (as before the fix) followed: the map then
 * sent this slot to the forged address. */
static bool forger_going(void *arg)
{
    forger *f = arg;
    return f->sent >= 2 || f->why[0] || vt_proxy_stat(f->port, "cluster_moved") > 0;
}

/* Another client of the forged slot: rounds of pipelined SET and GET,
 * every reply checked, at least `rounds` and until the forger had 20
 * replies (its redirects are checked, ten a second). The first wrong one
 * in why. */
static void victim_rounds(int rounds, const forger *f, char *why, size_t whylen)
{
    redisContext *c = vt_must_connect(proxy->port);
    long long deadline = vt_now_ms() + 30000;
    for (int round = 0;
         !why[0] && (round < rounds || (f->sent <= 20 && !f->why[0] && vt_now_ms() < deadline)); round++) {
        for (int k = 0; k < 8; k++) {
            redisAppendCommand(c, "SET victim:{slot}:%d v%d-%d", k, round, k);
            redisAppendCommand(c, "GET victim:{slot}:%d", k);
        }
        for (int k = 0; k < 8 && !why[0]; k++) {
            redisReply *r = NULL;
            if (redisGetReply(c, (void **)&r) != REDIS_OK || !r || r->type != REDIS_REPLY_STATUS ||
                strcmp(r->str, "OK") != 0)
                snprintf(why, whylen, "round %d SET %d: %s", round, k, VT_DESCRIBE(r));
            if (r) freeReplyObject(r);
            r = NULL;
            char want[32];
            snprintf(want, sizeof(want), "v%d-%d", round, k);
            if (!why[0] && (redisGetReply(c, (void **)&r) != REDIS_OK || !r ||
                            r->type != REDIS_REPLY_STRING || strcmp(r->str, want) != 0))
                snprintf(why, whylen, "round %d GET %d: expected %s, got %s", round, k, want, VT_DESCRIBE(r));
            if (r) freeReplyObject(r);
        }
    }
    redisFree(c);
}

Test(cluster_forged, a_forged_moved_in_a_loop_moves_no_other_clients_request)
{
    vt_bystanders *b = vt_must_start_bystanders(proxy->port, 4, 50);
    forger f = {.port = proxy->port, .key = "forger:{slot}"};
    int slot = vt_cluster_keyslot(cl, f.key);
    snprintf(f.want, sizeof(f.want), "MOVED %d 127.0.0.1:%d", slot, fake.port);
    error_script(f.script, sizeof(f.script), f.want, false);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, forger_run, &f), 0);
    cr_assert(vt_wait_until(forger_going, &f, VT_READ_DEADLINE_MS), "the forger did not get going: %s",
              f.why);
    /* Another client, the same slot: pipelined SET and GET, every reply. */
    char why[512] = "";
    victim_rounds(40, &f, why, sizeof(why));
    f.stop = 1;
    pthread_join(th, NULL);
    assert_fake_got_nothing();
    cr_assert(!why[0], "the other client of the slot: %s", why);
    cr_assert(!f.why[0], "%s", f.why);
    cr_assert_gt(f.sent, 20, "the forger got %lld replies", f.sent);
    /* the values are on the slot's owner, where they belong */
    redisContext *owner = vt_must_connect(cl->node[vt_cluster_slot_owner(cl, 0, slot)]->port);
    redisReply *r = vt_cmd(owner, "GET victim:{slot}:7");
    cr_assert(r && r->type == REDIS_REPLY_STRING && strncmp(r->str, "v", 1) == 0 && strstr(r->str, "-7"),
              "victim:{slot}:7 on the slot's owner: %s", VT_DESCRIBE(r));
    freeReplyObject(r);
    redisFree(owner);
    vt_assert_bystanders_ok(b);
}

/* ---- a script's writes run once ---- */

Test(cluster_forged, a_script_that_returns_tryagain_runs_once)
{
    vt_bystanders *b = vt_must_start_bystanders(proxy->port, 4, 50);
    redisContext *c = vt_must_connect(proxy->port);
    char script[256];
    error_script(script, sizeof(script), "TRYAGAIN x", true);
    expect_script_error(c, script, "ctr:{t1}", "TRYAGAIN x");
    cr_assert_eq(counter_of(c, "ctr:{t1}"), 1, "the script ran more than once");
    /* two keys of one slot (Redis's own -TRYAGAIN needs several): the
     * replying node is asked, its slot is not migrating */
    redisReply *r = vt_cmd(c, "EVAL %s 2 ctr:{t2} other:{t2}", script);
    cr_assert(r && r->type == REDIS_REPLY_ERROR && strcmp(r->str, "TRYAGAIN x") == 0, "two keys: %s",
              VT_DESCRIBE(r));
    freeReplyObject(r);
    cr_assert_eq(counter_of(c, "ctr:{t2}"), 1, "the two-key script ran more than once");
    cr_assert_geq(vt_proxy_stat(proxy->port, "cluster_checks"), 1, "the two-key -TRYAGAIN was not checked");
    redisFree(c);
    vt_assert_bystanders_ok(b);
}

Test(cluster_forged, a_scripts_forged_moved_or_ask_to_a_real_primary_runs_it_once)
{
    vt_bystanders *b = vt_must_start_bystanders(proxy->port, 4, 50);
    redisContext *c = vt_must_connect(proxy->port);
    const char *kinds[] = {"MOVED", "ASK"};
    for (int i = 0; i < 2; i++) {
        char key[32], text[128], script[256];
        snprintf(key, sizeof(key), "ctr:{real%d}", i);
        int slot = vt_cluster_keyslot(cl, key);
        int to = other_primary(slot);
        snprintf(text, sizeof(text), "%s %d 127.0.0.1:%d", kinds[i], slot, cl->node[to]->port);
        error_script(script, sizeof(script), text, true);
        expect_script_error(c, script, key, text);
        cr_assert_eq(counter_of(c, key), 1, "%s: the script ran more than once", kinds[i]);
    }
    /* the slot map other clients use did not move */
    cr_assert_eq(vt_proxy_stat(proxy->port, "cluster_moved"), 0);
    redisFree(c);
    vt_assert_bystanders_ok(b);
}

/* ---- with an upstream password ---- */

static void require_password_everywhere(void)
{
    for (int i = 0; i < VT_CLUSTER_NODES; i++) {
        redisContext *d = vt_must_connect(cl->node[i]->port);
        redisReply *r = vt_cmd(d, "CONFIG SET masterauth %s", PASSWORD);
        vt_assert_status(r, "OK");
        freeReplyObject(r);
        r = vt_cmd(d, "CONFIG SET requirepass %s", PASSWORD);
        vt_assert_status(r, "OK");
        freeReplyObject(r);
        redisFree(d);
    }
}

static bool proxy_serves(void *arg)
{
    (void)arg;
    redisContext *c = vt_connect(proxy->port);
    if (!c) return false;
    redisReply *r = redisCommand(c, "SET pw:probe 1");
    bool ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    redisFree(c);
    return ok;
}

Test(cluster_forged, the_upstream_password_never_reaches_a_forged_address)
{
    vt_proxy_free(proxy);
    require_password_everywhere();
    start_proxy(PASSWORD);
    cr_assert(vt_wait_until(proxy_serves, NULL, VT_READ_DEADLINE_MS),
              "the proxy does not serve with the password");
    vt_bystanders *b = vt_must_start_bystanders(proxy->port, 4, 50);
    redisContext *c = vt_must_connect(proxy->port);
    char why[512] = "";
    forge_to_the_fake(c, why, sizeof(why));
    assert_fake_got_nothing();
    cr_assert(!why[0], "%s", why);
    cr_assert(vt_bystanders_wait(b, 200, VT_READ_DEADLINE_MS), "the bystanders stalled");
    vt_assert_bystanders_ok(b);
    redisFree(c);
}

/* ---- a script's real redirects still work ---- */

Test(cluster_forged, a_scripts_real_ask_and_moved_are_followed_and_its_forged_ask_in_the_migration_is_not)
{
    vt_bystanders *b = vt_must_start_bystanders(proxy->port, 4, 50);
    redisContext *c = vt_must_connect(proxy->port);
    const char *key = "mig:{real}";
    int slot = vt_cluster_keyslot(cl, key);
    int to = other_primary(slot);
    redisReply *r = vt_cmd(c, "SET %s 0", key);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    cr_assert(vt_cluster_move_begin(cl, slot, to));
    /* The slot migrates to `to`, but the key is still here: a script that
     * ran (INCR) and then returns the -ASK Redis would give for a missing
     * key is the script's own, and runs once. */
    char text[128], forged[256];
    snprintf(text, sizeof(text), "ASK %d 127.0.0.1:%d", slot, cl->node[to]->port);
    error_script(forged, sizeof(forged), text, true);
    expect_script_error(c, forged, key, text);
    cr_assert_eq(counter_of(c, key), 1, "the forged -ASK ran the script again");
    redisReply *on_target = vt_cluster_node_cmd(cl, to, "CLUSTER COUNTKEYSINSLOT %d", slot);
    cr_assert(on_target && on_target->type == REDIS_REPLY_INTEGER && on_target->integer == 0,
              "the forged -ASK ran the script again on the target: it holds %s key(s) of the slot",
              VT_DESCRIBE(on_target));
    freeReplyObject(on_target);
    cr_assert_geq(vt_proxy_stat(proxy->port, "cluster_checks"), 1, "the -ASK was not checked");
    /* Its key migrated: the source answers -ASK before the script runs. */
    static const char incr[] = "return redis.call('INCR', KEYS[1])";
    cr_assert(vt_cluster_move_keys(cl, slot, to));
    r = vt_cmd(c, "EVAL %s 1 %s", incr, key);
    vt_assert_int(r, 2);
    freeReplyObject(r);
    cr_assert_geq(vt_proxy_stat(proxy->port, "cluster_ask"), 1, "the -ASK was not followed");
    /* The slot moved: the source answers -MOVED (unless the proxy's map
     * already knows: then the script goes straight there). */
    cr_assert(vt_cluster_move_finish(cl, slot, to));
    r = vt_cmd(c, "EVAL %s 1 %s", incr, key);
    vt_assert_int(r, 3);
    freeReplyObject(r);
    redisContext *d = vt_must_connect(cl->node[to]->port);
    r = vt_cmd(d, "GET %s", key);
    vt_assert_str(r, "3");
    freeReplyObject(r);
    redisFree(d);
    redisFree(c);
    vt_assert_bystanders_ok(b);
}

/* ---- Redis's own -ASK to a node the proxy never learned ---- */

/* A seventh node, empty, met by the cluster: CLUSTER SLOTS does not name
 * it (it serves no slot), CLUSTER NODES does. */
static vt_redis *start_new_node(void)
{
    int bus_port;
    vt_redis *r = vt_cluster_node_start(&bus_port, false, VT_CLUSTER_NODE_TIMEOUT_MS);
    cr_assert_not_null(r, "the seventh node did not start");
    redisReply *m = vt_cluster_node_cmd(cl, 0, "CLUSTER MEET 127.0.0.1 %d %d", r->port, bus_port);
    vt_assert_status(m, "OK");
    freeReplyObject(m);
    return r;
}

typedef struct known_wait {
    const char *id;
    int port; /* the new node's */
} known_wait;

/* Every node of the cluster knows the new one (no handshake left), and it
 * says cluster_state:ok (it knows every slot's owner). */
static bool everyone_knows(void *arg)
{
    known_wait *w = arg;
    redisContext *d = vt_connect(w->port);
    redisReply *info = d ? redisCommand(d, "CLUSTER INFO") : NULL;
    bool state_ok = info && info->type == REDIS_REPLY_STRING && strstr(info->str, "cluster_state:ok");
    if (info) freeReplyObject(info);
    if (d) redisFree(d);
    if (!state_ok) return false;
    for (int i = 0; i < VT_CLUSTER_NODES; i++) {
        redisReply *r = vt_cluster_node_cmd(cl, i, "CLUSTER NODES");
        const char *line = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, w->id) : NULL;
        const char *end = line ? strchr(line, '\n') : NULL;
        bool ok = line && end;
        if (ok) {
            char buf[512];
            snprintf(buf, sizeof(buf), "%.*s", (int)(end - line), line);
            ok = strstr(buf, "handshake") == NULL && strstr(buf, "noaddr") == NULL &&
                 strstr(buf, " connected");
        }
        if (r) freeReplyObject(r);
        if (!ok) return false;
    }
    return true;
}

Test(cluster_forged, redis_asks_for_a_node_added_since_the_map_and_the_check_finds_it)
{
    vt_redis *added = start_new_node();
    redisContext *nd = vt_must_connect(added->port);
    redisReply *r = vt_cmd(nd, "CLUSTER MYID");
    cr_assert(r && r->type == REDIS_REPLY_STRING && r->len == 40, "%s", VT_DESCRIBE(r));
    char id[41];
    snprintf(id, sizeof(id), "%s", r->str);
    freeReplyObject(r);
    cr_assert(vt_wait_until(everyone_knows, &(known_wait){id, added->port}, VT_CLUSTER_DEADLINE_MS),
              "the cluster did not meet the seventh node");
    vt_bystanders *b = vt_must_start_bystanders(proxy->port, 4, 50);
    redisContext *c = vt_must_connect(proxy->port);
    const char *key = "grow:{new}";
    int slot = vt_cluster_keyslot(cl, key);
    int from = vt_cluster_slot_owner(cl, 0, slot);
    r = vt_cmd(c, "SET %s before", key);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    /* the slot migrates to the new node; its key goes there */
    r = vt_cmd(nd, "CLUSTER SETSLOT %d IMPORTING %s", slot, cl->id[from]);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cluster_node_cmd(cl, from, "CLUSTER SETSLOT %d MIGRATING %s", slot, id);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cluster_node_cmd(cl, from, "MIGRATE 127.0.0.1 %d %s 0 5000", added->port, key);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    /* -ASK names an address no map of the proxy's held: followed once the
     * source's CLUSTER NODES lists it, for a command and for a script */
    r = vt_cmd(c, "GET %s", key);
    vt_assert_str(r, "before");
    freeReplyObject(r);
    cr_assert_geq(vt_proxy_stat(proxy->port, "cluster_checks"), 1, "the unknown address was not checked");
    r = vt_cmd(c, "EVAL %s 1 %s", "return redis.call('GET', KEYS[1])", key);
    vt_assert_str(r, "before");
    freeReplyObject(r);
    cr_assert_geq(vt_proxy_stat(proxy->port, "cluster_checks"), 2, "the script's -ASK was not checked");
    cr_assert_geq(vt_proxy_stat(proxy->port, "cluster_ask"), 2, "the -ASKs were not followed");
    cr_assert_eq(vt_proxy_stat(proxy->port, "cluster_refused"), 0);
    /* the move ends (the new owner first, as redis-cli does): -MOVED to the
     * node the check confirmed */
    r = vt_cmd(nd, "CLUSTER SETSLOT %d NODE %s", slot, id);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    for (int i = 0; i < VT_CLUSTER_NODES; i++) {
        if (!vt_cluster_is_primary(cl, i)) continue;
        r = vt_cluster_node_cmd(cl, i, "CLUSTER SETSLOT %d NODE %s", slot, id);
        vt_assert_status(r, "OK");
        freeReplyObject(r);
    }
    r = vt_cmd(c, "SET %s after", key);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(nd, "GET %s", key);
    vt_assert_str(r, "after");
    freeReplyObject(r);
    redisFree(nd);
    redisFree(c);
    vt_assert_bystanders_ok(b);
    vt_redis_free(added);
}

/* ---- pipelined forgeries and another client's real -ASK ---- */

/* Each forger is owed at most 256 replies at once (the proxy's window for
 * a client), so at most 256 of its forgeries are held: five of them
 * (1,280) are more than the whole budget (RCHECK_MAX_HELD 1024), which
 * one client's share (RCHECK_CLIENT_HELD 64) keeps them from filling. */
#define FORGER_BATCH 2000
#define FORGERS 5

/* A forger that pipelines FORGER_BATCH forged -MOVEDs at a time (to the
 * fake address, for its key's slot: Redis could have said that much, so
 * each one is held for a check), every reply checked to be its own error. */
static void *pipelining_forger_run(void *arg)
{
    forger *f = arg;
    redisContext *c = vt_connect(f->port);
    if (!c) {
        snprintf(f->why, sizeof(f->why), "no connection");
        return NULL;
    }
    while (!f->stop && !f->why[0]) {
        for (int i = 0; i < FORGER_BATCH; i++)
            redisAppendCommand(c, "EVAL %s 1 %s", f->script, f->key);
        f->started += FORGER_BATCH;
        for (int i = 0; i < FORGER_BATCH && !f->why[0]; i++) {
            redisReply *r = NULL;
            if (redisGetReply(c, (void **)&r) != REDIS_OK || !r || r->type != REDIS_REPLY_ERROR ||
                strcmp(r->str, f->want) != 0)
                snprintf(f->why, sizeof(f->why), "the forger's reply %lld: %s, not its own error", f->sent,
                         VT_DESCRIBE(r));
            if (r) freeReplyObject(r);
            f->sent++;
        }
    }
    redisFree(c);
    return NULL;
}

static bool forgers_batch_answered(void *arg)
{
    forger *f = arg;
    for (int i = 0; i < FORGERS; i++)
        if (f[i].sent < FORGER_BATCH && !f[i].why[0]) return false;
    return true;
}

Test(cluster_forged, pipelined_forgeries_leave_room_for_another_clients_real_ask)
{
    vt_bystanders *b = vt_must_start_bystanders(proxy->port, 4, 50);
    /* the victim's key migrates: its script gets Redis's own -ASK, held
     * until the source's CLUSTER NODES confirms it */
    redisContext *c = vt_must_connect(proxy->port);
    const char *key = "mig:{victim}";
    int slot = vt_cluster_keyslot(cl, key);
    int to = other_primary(slot);
    redisReply *r = vt_cmd(c, "SET %s 0", key);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    cr_assert(vt_cluster_move_begin(cl, slot, to));
    cr_assert(vt_cluster_move_keys(cl, slot, to));
    /* the forgers: thousands of forgeries pipelined each, more held
     * together than the whole budget */
    static forger f[FORGERS];
    pthread_t th[FORGERS];
    memset(f, 0, sizeof(f));
    for (int i = 0; i < FORGERS; i++) {
        f[i].port = proxy->port;
        f[i].key = "forger:{pipe}";
        snprintf(f[i].want, sizeof(f[i].want), "MOVED %d 127.0.0.1:%d", vt_cluster_keyslot(cl, f[i].key),
                 fake.port);
        error_script(f[i].script, sizeof(f[i].script), f[i].want, false);
        cr_assert_eq(pthread_create(&th[i], NULL, pipelining_forger_run, &f[i]), 0);
    }
    cr_assert(vt_wait_until(forgers_batch_answered, f, VT_READ_DEADLINE_MS),
              "the forgers' first batches were not answered");
    /* The victim's script, again and again while the forger goes on: each
     * -ASK is held and followed (once: INCR counts), never refused because
     * the forger holds the budget. */
    char why[512] = "";
    static const char incr[] = "return redis.call('INCR', KEYS[1])";
    for (int i = 1; i <= 30 && !why[0]; i++) {
        r = vt_cmd(c, "EVAL %s 1 %s", incr, key);
        if (!r || r->type != REDIS_REPLY_INTEGER || r->integer != i)
            snprintf(why, sizeof(why), "the victim's EVAL %d: %s", i, VT_DESCRIBE(r));
        if (r) freeReplyObject(r);
    }
    long long forged_during[FORGERS];
    for (int i = 0; i < FORGERS; i++)
        forged_during[i] = f[i].sent;
    for (int i = 0; i < FORGERS; i++)
        f[i].stop = 1;
    for (int i = 0; i < FORGERS; i++)
        pthread_join(th[i], NULL);
    cr_assert(!why[0], "%s", why);
    for (int i = 0; i < FORGERS; i++) {
        cr_assert(!f[i].why[0], "forger %d: %s", i, f[i].why);
        cr_assert_gt(forged_during[i], FORGER_BATCH, "forger %d was not going during the victim's scripts",
                     i);
    }
    assert_fake_got_nothing();
    cr_assert_geq(vt_proxy_stat(proxy->port, "cluster_ask"), 30, "the victim's -ASKs were not followed");
    cr_assert(vt_cluster_move_finish(cl, slot, to));
    redisContext *d = vt_must_connect(cl->node[to]->port);
    r = vt_cmd(d, "GET %s", key);
    vt_assert_str(r, "30");
    freeReplyObject(r);
    redisFree(d);
    redisFree(c);
    vt_assert_bystanders_ok(b);
}

/* ---- a custom verb is the operator's Lua: its errors are a script's ---- */

/* The proxy restarted with a custom verb that INCRs its key and returns
 * ARGV[1] as an error: any text its caller gives. */
static void start_proxy_with_error_verb(char *dir, size_t dirlen)
{
    snprintf(dir, dirlen, "/tmp/vt-forged-verb-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof(path), "%s/err.lua", dir);
    FILE *fp = fopen(path, "w");
    cr_assert_not_null(fp);
    fputs("redis.call('INCR', KEYS[1])\nreturn redis.error_reply(ARGV[1])\n", fp);
    fclose(fp);
    static char verb[192];
    snprintf(verb, sizeof(verb), "myerr %s numkeys 1", path);
    vt_proxy_free(proxy);
    static const char *args[] = {"--upstream-mode", "cluster", "--verb", NULL, NULL};
    args[3] = verb;
    proxy = vt_proxy_start(cl->node[0], &(vt_proxy_opts){.extra_args = args});
    cr_assert_not_null(proxy, "verbproxy did not start with the custom verb");
}

/* MYERR key <text>: the reply must be the error `text` exactly. */
static void expect_verb_error(redisContext *c, const char *key, const char *text)
{
    redisReply *r = vt_cmd(c, "MYERR %s %s", key, text);
    cr_assert(r && r->type == REDIS_REPLY_ERROR && strcmp(r->str, text) == 0,
              "MYERR %s: expected the verb's error \"%s\", got %s", key, text, VT_DESCRIBE(r));
    freeReplyObject(r);
}

Test(cluster_forged, a_custom_verbs_forged_redirect_is_its_own_error)
{
    char dir[64];
    start_proxy_with_error_verb(dir, sizeof(dir));
    vt_bystanders *b = vt_must_start_bystanders(proxy->port, 4, 50);
    redisContext *c = vt_must_connect(proxy->port);
    /* to the fake address */
    const char *key = "verb:{fake}";
    int slot = vt_cluster_keyslot(cl, key);
    char text[128];
    snprintf(text, sizeof(text), "MOVED %d 127.0.0.1:%d", slot, fake.port);
    expect_verb_error(c, key, text);
    snprintf(text, sizeof(text), "ASK %d 127.0.0.1:%d", slot, fake.port);
    expect_verb_error(c, key, text);
    assert_fake_got_nothing();
    cr_assert_eq(counter_of(c, key), 2, "the verb ran more than once a call");
    /* to a real primary, which does not serve the slot: not followed (it
     * ran once), and the map other clients use did not move */
    const char *kinds[] = {"MOVED", "ASK"};
    for (int i = 0; i < 2; i++) {
        char k[32];
        snprintf(k, sizeof(k), "verb:{real%d}", i);
        int s = vt_cluster_keyslot(cl, k);
        snprintf(text, sizeof(text), "%s %d 127.0.0.1:%d", kinds[i], s, cl->node[other_primary(s)]->port);
        expect_verb_error(c, k, text);
        cr_assert_eq(counter_of(c, k), 1, "%s: the verb ran more than once", kinds[i]);
    }
    cr_assert_eq(vt_proxy_stat(proxy->port, "cluster_moved"), 0, "a verb's forged -MOVED moved the map");
    cr_assert_eq(vt_proxy_stat(proxy->port, "cluster_ask"), 0, "a verb's forged -ASK was followed");
    cr_assert(vt_bystanders_wait(b, 200, VT_READ_DEADLINE_MS), "the bystanders stalled");
    vt_assert_bystanders_ok(b);
    redisFree(c);
    char path[128];
    snprintf(path, sizeof(path), "%s/err.lua", dir);
    unlink(path);
    rmdir(dir);
}

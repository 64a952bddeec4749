/* test_passthrough.c - a client cannot tell the proxy from Redis.
 *
 * The big story: one deterministic pipeline of 100,000 mixed commands (strings,
 * counters, lists, hashes, sorted sets, streams, transactions, inline
 * commands, wrong types, unknown commands, wrong arity, requests that get no
 * reply at all) is sent once straight to Redis and once through the proxy,
 * each time on a flushed database. Every reply must be the same: type, value,
 * nested elements.
 *
 * In the cluster variant (tests/support/cluster_env.h) the proxy is in
 * front of the suite's Redis Cluster and "straight to Redis" is a
 * redis-server of the test's own: the keys spread over every slot get the
 * replies one Redis would give. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <unistd.h>
#include <sys/socket.h>
#include <hiredis/read.h>

#include "tests/support/checks.h"
#include "tests/support/cluster_env.h"
#include "tests/support/rng.h"

#define PIPELINE_COMMANDS 100000
#define PIPELINE_DEADLINE_MS 60000
#define KEYS 40 /* over all types */
#define STREAMS 4

static vt_env env;

static void setup(void)
{
    vt_env_start(&env, NULL, NULL);
}

static void teardown(void)
{
    vt_env_stop(&env);
}

TestSuite(passthrough, .init = setup, .fini = teardown, .timeout = VT_TEST_TIMEOUT_S);

Test(passthrough, a_client_sets_and_gets_through_the_proxy)
{
    redisContext *c = vt_must_connect(env.proxy->port);
    redisReply *r;

    r = vt_cmd(c, "SET greeting %s", "hello");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(c, "GET greeting");
    vt_assert_str(r, "hello");
    freeReplyObject(r);
    r = vt_cmd(c, "GET missing");
    vt_assert_nil(r);
    freeReplyObject(r);
    r = vt_cmd(c, "INCR counter");
    vt_assert_int(r, 1);
    freeReplyObject(r);
    r = vt_cmd(c, "INCR greeting");
    vt_assert_error(r, "ERR value is not an integer or out of range");
    freeReplyObject(r);
    r = vt_cmd(c, "SET %b %b", "bin\0key", (size_t)7, "v\r\n\0x", (size_t)5);
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    r = vt_cmd(c, "GET %b", "bin\0key", (size_t)7);
    cr_assert(r && r->type == REDIS_REPLY_STRING && r->len == 5 && memcmp(r->str, "v\r\n\0x", 5) == 0,
              "binary value did not round trip: %s", VT_DESCRIBE(r));
    freeReplyObject(r);

    /* and the data really is in Redis (on its key's node in a cluster) */
    redisContext *direct = vt_must_connect(vt_cluster_env_key_port("greeting", env.redis->port));
    r = vt_cmd(direct, "GET greeting");
    vt_assert_str(r, "hello");
    freeReplyObject(r);
    redisFree(direct);
    redisFree(c);
}

Test(passthrough, a_client_dribbling_one_byte_at_a_time_gets_exact_replies)
{
    const char *request = "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nhello\r\n"
                          "GET key\r\n"
                          "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n"
                          "ECHO \"a b\\x41\"\r\n"
                          "*1\r\n$4\r\nPING\r\n";
    int fd = vt_must_sock(env.proxy->port);
    for (const char *p = request; *p; p++)
        cr_assert(vt_sock_send(fd, p, 1), "send failed at byte %ld", (long)(p - request));
    vt_buf got = {0};
    vt_expect_bytes(fd, &got, "+OK\r\n$5\r\nhello\r\n$0\r\n\r\n$4\r\na bA\r\n+PONG\r\n");
    vt_buf_free(&got);
    close(fd);
}

/* ---- the 100,000 command pipeline ---- */

typedef struct pipeline {
    vt_buf bytes;
    size_t *reply_cmd; /* for reply i: offset in bytes of the command that produced it */
    size_t nreplies;
    size_t cap;
} pipeline;

static void expect_reply(pipeline *p, size_t cmd_offset)
{
    if (p->nreplies == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 1024;
        p->reply_cmd = realloc(p->reply_cmd, p->cap * sizeof(*p->reply_cmd));
        cr_assert(p->reply_cmd);
    }
    p->reply_cmd[p->nreplies++] = cmd_offset;
}

/* Append one command, noting that it gets one reply. */
static void cmd(pipeline *p, int argc, const char **argv, const size_t *lens)
{
    expect_reply(p, p->bytes.len);
    vt_buf_cmd_argv(&p->bytes, argc, argv, lens);
}

static void random_value(vt_rng *g, char *buf, size_t *len, size_t max)
{
    *len = (size_t)vt_rng_pick(g, (int)max + 1);
    for (size_t i = 0; i < *len; i++) {
        int k = vt_rng_pick(g, 10);
        /* mostly printable, sometimes the bytes that matter to a RESP parser */
        buf[i] = k == 0 ? "\r\n\0$*+-:"[vt_rng_pick(g, 8)] : (char)('a' + vt_rng_pick(g, 26));
    }
}

/* Keys live in one namespace per type, so most commands meet a key of their
 * own type; one in ten goes to another namespace and meets WRONGTYPE. */
enum { NS_STR, NS_LIST, NS_HASH, NS_ZSET, NS_ANY };

static const char *key(vt_rng *g, int ns, char *buf, size_t len)
{
    static const char *prefix[] = {"str", "list", "hash", "zset"};
    if (ns == NS_ANY || vt_rng_pick(g, 10) == 0) ns = vt_rng_pick(g, 4);
    snprintf(buf, len, "%s:%d", prefix[ns], vt_rng_pick(g, KEYS / 4));
    return buf;
}

/* A deterministic mix. Hash values stay short and hashes small so Redis keeps
 * them in listpacks (insertion order): no reply depends on dict order. */
static void build_pipeline(pipeline *p, int ncommands)
{
    vt_rng g = vt_rng_seeded(0x9e3779b97f4a7c15ull);
    char k1[16], k2[16], k3[16], num[32], f[16], s[16], id[32];
    static char val[8192];
    size_t vlen;
    long long stream_id[STREAMS] = {0};
    /* the namespace of k1 for each case below */
    static const int ns_of[30] = {NS_STR,  NS_STR,  NS_STR,  NS_STR,  NS_STR,  NS_STR, NS_LIST, NS_LIST,
                                  NS_LIST, NS_HASH, NS_HASH, NS_ZSET, NS_ZSET, NS_ANY, NS_ANY,  NS_STR,
                                  NS_ANY,  NS_ANY,  NS_ANY,  NS_STR,  NS_ANY,  NS_ANY, NS_ANY,  NS_ANY,
                                  NS_STR,  NS_ANY,  NS_HASH, NS_LIST, NS_ZSET, NS_STR};

    for (int n = 0; n < ncommands; n++) {
        int what = vt_rng_pick(&g, 30);
        key(&g, ns_of[what], k1, sizeof(k1));
        key(&g, what == 24 ? NS_STR : NS_ANY, k2, sizeof(k2));
        key(&g, what == 24 ? NS_LIST : NS_ANY, k3, sizeof(k3));
        switch (what) {
        case 0:
        case 1: {
            if (vt_rng_pick(&g, 300) == 0) {
                vlen = 5000 + (size_t)vt_rng_pick(&g, 3000);
                memset(val, 'x' + vt_rng_pick(&g, 3), vlen);
            } else {
                random_value(&g, val, &vlen, 40);
            }
            const char *a[] = {"SET", k1, val};
            size_t l[] = {3, strlen(k1), vlen};
            cmd(p, 3, a, l);
            break;
        }
        case 2:
        case 3: {
            const char *a[] = {"GET", k1};
            cmd(p, 2, a, NULL);
            break;
        }
        case 4: {
            const char *a[] = {"INCR", k1};
            cmd(p, 2, a, NULL);
            break;
        }
        case 5: {
            snprintf(num, sizeof(num), "%d", vt_rng_pick(&g, 201) - 100);
            const char *a[] = {"INCRBY", k1, num};
            cmd(p, 3, a, NULL);
            break;
        }
        case 6: {
            random_value(&g, val, &vlen, 20);
            const char *a[] = {"LPUSH", k1, val, "tail"};
            size_t l[] = {5, strlen(k1), vlen, 4};
            cmd(p, 4, a, l);
            break;
        }
        case 7: {
            const char *a[] = {"LRANGE", k1, "0", "-1"};
            cmd(p, 4, a, NULL);
            break;
        }
        case 8: {
            const char *a[] = {"LTRIM", k1, "0", "9"};
            cmd(p, 4, a, NULL);
            break;
        }
        case 9: {
            snprintf(f, sizeof(f), "f%d", vt_rng_pick(&g, 8));
            random_value(&g, val, &vlen, 30);
            const char *a[] = {"HSET", k1, f, val};
            size_t l[] = {4, strlen(k1), strlen(f), vlen};
            cmd(p, 4, a, l);
            break;
        }
        case 10: {
            const char *a[] = {"HGETALL", k1};
            cmd(p, 2, a, NULL);
            break;
        }
        case 11: {
            static const char *scores[] = {"1", "-2.5", "3.25", "inf", "-inf", "1e3", "0"};
            snprintf(s, sizeof(s), "m%d", vt_rng_pick(&g, 8));
            const char *a[] = {"ZADD", k1, scores[vt_rng_pick(&g, 7)], s};
            cmd(p, 4, a, NULL);
            break;
        }
        case 12: {
            const char *a[] = {"ZRANGE", k1, "0", "-1", "WITHSCORES"};
            cmd(p, 5, a, NULL);
            break;
        }
        case 13: {
            const char *a[] = {"DEL", k1, k2};
            cmd(p, 3, a, NULL);
            break;
        }
        case 14: {
            const char *a[] = {"EXISTS", k1, k2, k3};
            cmd(p, 4, a, NULL);
            break;
        }
        case 15: {
            const char *a[] = {"MGET", k1, k2, k3};
            cmd(p, 4, a, NULL);
            break;
        }
        case 16: {
            const char *a[] = {"NOSUCHCMD", k1, "arg"};
            cmd(p, 3, a, NULL);
            break;
        }
        case 17: {
            const char *a[] = {"GET"}; /* wrong number of arguments */
            cmd(p, 1, a, NULL);
            break;
        }
        case 18: {
            random_value(&g, val, &vlen, 60);
            const char *a[] = {"ECHO", val};
            size_t l[] = {4, vlen};
            cmd(p, 2, a, l);
            break;
        }
        case 19: {
            const char *a[] = {"INCRBYFLOAT", k1, "1.5"};
            cmd(p, 3, a, NULL);
            break;
        }
        case 20: {
            const char *a[] = {"TYPE", k1};
            cmd(p, 2, a, NULL);
            break;
        }
        case 21: {
            int st = vt_rng_pick(&g, STREAMS);
            snprintf(s, sizeof(s), "s%d", st);
            snprintf(id, sizeof(id), "%lld-1", ++stream_id[st]);
            random_value(&g, val, &vlen, 20);
            const char *a[] = {"XADD", s, id, "field", val};
            size_t l[] = {4, strlen(s), strlen(id), 5, vlen};
            cmd(p, 5, a, l);
            break;
        }
        case 22: {
            snprintf(s, sizeof(s), "s%d", vt_rng_pick(&g, STREAMS));
            const char *a[] = {"XREVRANGE", s, "+", "-", "COUNT", "3"};
            cmd(p, 6, a, NULL);
            break;
        }
        case 23: { /* inline commands between multibulk ones */
            static const char *inl[] = {"PING\r\n", "EXISTS str:1 list:2 k3\r\n",
                                        "ECHO \"quoted \\r\\n\\x41 value\"\r\n", "GET str:5\n",
                                        "  SET   str:6   'single quoted'  \r\n"};
            expect_reply(p, p->bytes.len);
            vt_buf_append_str(&p->bytes, inl[vt_rng_pick(&g, 5)]);
            break;
        }
        case 24: { /* a transaction inside the pipeline: 5 replies, the last nested */
            /* (in a cluster its keys share a slot, as a transaction's must) */
            char t1[24], t2[24], t3[24];
            const char *tag = vt_cluster_mode() ? "{tx}" : "";
            snprintf(t1, sizeof(t1), "%s%s", tag, k1);
            snprintf(t2, sizeof(t2), "%s%s", tag, k2);
            snprintf(t3, sizeof(t3), "%s%s", tag, k3);
            const char *m[] = {"MULTI"};
            const char *a[] = {"SET", t1, "in-multi"};
            const char *b[] = {"INCR", t2};
            const char *c[] = {"LPUSH", t3, "x"};
            const char *e[] = {"EXEC"};
            cmd(p, 1, m, NULL);
            cmd(p, 3, a, NULL);
            cmd(p, 2, b, NULL);
            cmd(p, 3, c, NULL);
            cmd(p, 1, e, NULL);
            break;
        }
        case 25: { /* requests Redis answers with nothing at all */
            static const char *silent[] = {"*0\r\n", "*-1\r\n", "\r\n", "\n"};
            vt_buf_append_str(&p->bytes, silent[vt_rng_pick(&g, 4)]);
            break;
        }
        case 26: {
            snprintf(f, sizeof(f), "f%d", vt_rng_pick(&g, 8));
            const char *a[] = {"HINCRBY", k1, f, "7"};
            cmd(p, 4, a, NULL);
            break;
        }
        case 27: {
            const char *a[] = {"LPOP", k1, "2"};
            cmd(p, 3, a, NULL);
            break;
        }
        case 28: {
            snprintf(s, sizeof(s), "m%d", vt_rng_pick(&g, 8));
            const char *a[] = {"ZINCRBY", k1, "0.1", s};
            cmd(p, 4, a, NULL);
            break;
        }
        default: {
            random_value(&g, val, &vlen, 10);
            const char *a[] = {"APPEND", k1, val};
            size_t l[] = {6, strlen(k1), vlen};
            cmd(p, 3, a, l);
            break;
        }
        }
    }
    /* an unmistakable last reply */
    const char *last[] = {"ECHO", "end-of-pipeline"};
    cmd(p, 2, last, NULL);
}

typedef struct writer {
    int fd;
    const vt_buf *bytes;
    bool ok;
} writer;

static void *write_all(void *arg)
{
    writer *w = arg;
    w->ok = vt_sock_send_buf(w->fd, w->bytes);
    return NULL;
}

/* Send the whole pipeline from a thread while this thread reads, so neither
 * side's buffers can deadlock us. Returns how many replies were parsed. */
static size_t run_pipeline(int port, const pipeline *p, redisReply **replies, char *err, size_t errlen)
{
    int fd = vt_sock_tcp(port);
    if (fd < 0) {
        snprintf(err, errlen, "cannot connect to %d", port);
        return 0;
    }
    writer w = {.fd = fd, .bytes = &p->bytes};
    pthread_t t;
    pthread_create(&t, NULL, write_all, &w);

    redisReader *reader = redisReaderCreate();
    reader->maxbuf = 0;
    size_t got = 0;
    long long deadline = vt_now_ms() + PIPELINE_DEADLINE_MS;
    static char chunk[1 << 16];
    err[0] = '\0';
    while (got < p->nreplies) {
        void *r = NULL;
        if (redisReaderGetReply(reader, &r) != REDIS_OK) {
            snprintf(err, errlen, "unparsable reply stream: %s", reader->errstr);
            break;
        }
        if (r) {
            replies[got++] = r;
            continue;
        }
        long long left = deadline - vt_now_ms();
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0) {
            snprintf(err, errlen, "timed out after %d ms", PIPELINE_DEADLINE_MS);
            break;
        }
        ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
        if (n <= 0) {
            snprintf(err, errlen, "connection closed");
            break;
        }
        redisReaderFeed(reader, chunk, (size_t)n);
    }
    redisReaderFree(reader);
    shutdown(fd, SHUT_RDWR); /* unblocks the writer if we gave up */
    pthread_join(t, NULL);
    close(fd);
    if (!w.ok && !err[0]) snprintf(err, errlen, "sending the pipeline failed");
    return got;
}

static void flushall(void)
{
    redisContext *c = vt_must_connect(env.redis->port);
    redisReply *r = vt_cmd(c, "FLUSHALL");
    vt_assert_status(r, "OK");
    freeReplyObject(r);
    redisFree(c);
}

static void free_replies(redisReply **r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        freeReplyObject(r[i]);
    free(r);
}

Test(passthrough, a_hundred_thousand_mixed_pipelined_commands_get_the_same_replies_as_redis, .timeout = 120)
{
    pipeline p = {0};
    build_pipeline(&p, PIPELINE_COMMANDS);
    char err[256];

    /* the cluster variant: the suite's cluster (flushed) behind the proxy,
     * one redis-server of the test's own for the reference */
    vt_redis *ref = vt_cluster_mode() ? vt_redis_start(&(vt_redis_opts){.standalone = true}) : env.redis;
    cr_assert(ref, "the reference redis-server did not start");
    if (!vt_cluster_mode()) flushall();
    redisReply **want = calloc(p.nreplies, sizeof(*want));
    size_t nwant = run_pipeline(ref->port, &p, want, err, sizeof(err));
    cr_assert_eq(nwant, p.nreplies, "straight to redis: %zu of %zu replies: %s", nwant, p.nreplies, err);

    if (!vt_cluster_mode()) flushall();
    redisReply **got = calloc(p.nreplies, sizeof(*got));
    size_t ngot = run_pipeline(env.proxy->port, &p, got, err, sizeof(err));

    size_t n = ngot < nwant ? ngot : nwant;
    for (size_t i = 0; i < n; i++) {
        char why[1200];
        if (!vt_reply_equal(want[i], got[i], why, sizeof(why))) {
            const char *c = p.bytes.data + p.reply_cmd[i];
            size_t clen = (i + 1 < p.nreplies ? p.reply_cmd[i + 1] : p.bytes.len) - p.reply_cmd[i];
            cr_assert_fail("reply %zu of %zu %s\n  command: \"%s\"", i, p.nreplies, why,
                           vt_escape(c, clen < 200 ? clen : 200));
        }
    }
    cr_assert_eq(ngot, p.nreplies, "through the proxy: only %zu of %zu replies: %s", ngot, p.nreplies, err);

    /* the data Redis holds afterwards is the same too */
    redisContext *c = vt_must_connect(ref->port);
    redisReply *r = vt_cmd(c, "DBSIZE");
    vt_assert_reply(r, c);
    cr_assert(r->integer > 0);
    if (vt_cluster_mode())
        cr_assert_eq(vt_cluster_env_dbsize(), r->integer, "the cluster's primaries hold %lld keys, Redis %lld",
                     vt_cluster_env_dbsize(), r->integer);
    freeReplyObject(r);
    redisFree(c);
    if (ref != env.redis) vt_redis_free(ref);

    free_replies(want, nwant);
    free_replies(got, ngot);
    free(p.reply_cmd);
    vt_buf_free(&p.bytes);
}

/* test_verbs_concurrency.c - many clients use the same verbs on the same keys.
 *
 * Each verb runs as one script on Redis, so however the proxy interleaves
 * its clients, a verb never runs half-way: eight workers popping one queue
 * get every job exactly once, four conveyors ticking one belt never move a
 * crate twice in one tick, and strangers trying to release a lock never
 * take it from its owner.
 *
 * Worker threads never assert (criterion asserts belong to the test's own
 * thread): each records its first problem in its job, and the test checks
 * the jobs after joining them. Every verb is proxy-only, so the whole suite
 * is skipped under VP_TEST_DIRECT=1. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>

#include "tests/support/checks.h"
#include "tests/support/cluster_env.h"

#define THREADS 8
#define JOBS 100000
#define FILL_BATCH 1000 /* members per ZADD when filling a queue */
#define POP_COUNT 100
#define LEASE_MS 60000

#define TICKERS 4
#define CRATES 1000
#define TICKS_PER_TICKER 300 /* 4 x 300 > 1000: the belt is emptied with ticks to spare */
#define THRESHOLD 1000
#define ANCHOR_SCORE (-1000000) /* a crate far behind the others, never removed */

#define STRANGERS 3
#define RENEWALS 2000
#define LOCK_TTL_MS 30000
#define RELEASE_ROUNDS 300
#define RELEASERS 4

static vt_env env;

static void setup(void)
{
    vt_env_start(&env, NULL, NULL);
}

static void teardown(void)
{
    vt_env_stop(&env);
}

TestSuite(verbs_concurrency, .init = setup, .fini = teardown, .timeout = 180);

/* ---- what a worker thread reports ---- */

typedef struct worker {
    int id;
    int port;
    pthread_barrier_t *start;
    int problems;
    char problem[512];
    long long calls;
    long long items; /* members this worker got (popped, or removed by its ticks) */
} worker;

/* Record a problem (only the first one's text is kept). */
static void complain(worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void complain(worker *w, const char *fmt, ...)
{
    if (w->problems++) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->problem, sizeof(w->problem), fmt, ap);
    va_end(ap);
}

static void check_workers(worker *w, int n)
{
    for (int i = 0; i < n; i++)
        cr_expect_eq(w[i].problems, 0, "worker %d: %d problems, the first: %s", w[i].id, w[i].problems,
                     w[i].problem);
    for (int i = 0; i < n; i++)
        cr_assert_eq(w[i].problems, 0);
}

/* "job:000042" -> 42, or -1 if the reply element is not one of ours. */
static long parse_index(const redisReply *e, const char *prefix)
{
    size_t plen = strlen(prefix);
    if (e->type != REDIS_REPLY_STRING || e->len <= plen || memcmp(e->str, prefix, plen) != 0) return -1;
    char *end;
    long v = strtol(e->str + plen, &end, 10);
    return *end == '\0' && v >= 0 ? v : -1;
}

static bool is_string(const redisReply *e, const char *want)
{
    return e && e->type == REDIS_REPLY_STRING && e->len == strlen(want) && memcmp(e->str, want, e->len) == 0;
}

/* ---- filling a queue ---- */

/* `key` := JOBS members job:000000..job:099999, member i at score i,
 * written straight to Redis in batches. */
static void fill_queue(const char *key)
{
    redisContext *admin = vt_must_connect(vt_cluster_env_key_port(key, env.redis->port));
    static const char *argv[2 + 2 * FILL_BATCH];
    static char scores[FILL_BATCH][16], members[FILL_BATCH][16];
    for (int base = 0; base < JOBS; base += FILL_BATCH) {
        argv[0] = "ZADD";
        argv[1] = key;
        for (int i = 0; i < FILL_BATCH; i++) {
            snprintf(scores[i], sizeof(scores[i]), "%d", base + i);
            snprintf(members[i], sizeof(members[i]), "job:%06d", base + i);
            argv[2 + 2 * i] = scores[i];
            argv[3 + 2 * i] = members[i];
        }
        redisAppendCommandArgv(admin, 2 + 2 * FILL_BATCH, argv, NULL);
    }
    for (int base = 0; base < JOBS; base += FILL_BATCH) {
        redisReply *r = vt_get_reply(admin);
        vt_assert_int(r, FILL_BATCH);
        freeReplyObject(r);
    }
    redisReply *r = vt_cmd(admin, "ZCARD %s", key);
    vt_assert_int(r, JOBS);
    freeReplyObject(r);
    redisFree(admin);
}

static void expect_gone(const char *key)
{
    redisContext *admin = vt_must_connect(vt_cluster_env_key_port(key, env.redis->port));
    redisReply *r = vt_cmd(admin, "EXISTS %s", key);
    cr_assert(r && r->type == REDIS_REPLY_INTEGER && r->integer == 0, "%s still exists (EXISTS: %s)", key,
              VT_DESCRIBE(r));
    freeReplyObject(r);
    redisFree(admin);
}

/* ---- eight workers empty one queue ---- */

/* How many times each job was handed out, across all workers. */
static _Atomic unsigned char delivered[JOBS];

typedef struct popper {
    worker w;
    bool with_count;   /* QPOP key COUNT 100, else QPOP key (one job per call) */
    const char *count; /* how this worker spells the option ("COUNT", "count") */
    bool lease;        /* LEASE <key>:lease 60000, then QACK what it got */
    const char *queue;
    char lease_key[64];
    bool deadline_checked;
} popper;

/* One job in a reply: member job:N at score "N". Returns N, or -1. */
static long take_job(popper *p, const redisReply *member, const redisReply *score, long after)
{
    long i = parse_index(member, "job:");
    if (i < 0 || i >= JOBS) {
        complain(&p->w, "popped something that is not a job: %s", VT_DESCRIBE(member));
        return -1;
    }
    char want_score[24]; /* any long: 20 characters and the NUL */
    snprintf(want_score, sizeof(want_score), "%ld", i);
    if (!is_string(score, want_score)) {
        complain(&p->w, "job:%06ld came with score %s, expected \"%s\"", i, VT_DESCRIBE(score), want_score);
        return -1;
    }
    /* lowest score first, and one QPOP runs whole: whatever this worker gets
     * later was behind what it got before */
    if (i <= after) complain(&p->w, "job:%06ld popped after job:%06ld", i, after);
    if (atomic_fetch_add(&delivered[i], 1) != 0) complain(&p->w, "job:%06ld delivered twice", i);
    p->w.items++;
    return i;
}

/* QPOP with LEASE: every popped job sits in the lease set with deadline
 * server time + LEASE_MS. Checked once per worker, on its first jobs. */
static void check_lease_deadline(popper *p, redisContext *c, const redisReply *member, long long t0,
                                 long long t1)
{
    redisReply *r = redisCommand(c, "ZSCORE %s %b", p->lease_key, member->str, member->len);
    if (!r || r->type != REDIS_REPLY_STRING) {
        complain(&p->w, "ZSCORE of a leased job: %s", VT_DESCRIBE(r));
    } else {
        long long deadline = atoll(r->str);
        if (deadline < t0 + LEASE_MS || deadline > t1 + LEASE_MS)
            complain(&p->w, "lease deadline %lld not within [%lld, %lld] (server time + %d ms)", deadline,
                     t0 + LEASE_MS, t1 + LEASE_MS, LEASE_MS);
    }
    if (r) freeReplyObject(r);
}

static long long server_ms(redisContext *c)
{
    redisReply *r = redisCommand(c, "TIME");
    long long ms = -1;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
        ms = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
    if (r) freeReplyObject(r);
    return ms;
}

/* QACK everything in `reply` (member, score pairs from `first`). */
static void ack(popper *p, redisContext *c, const redisReply *reply, size_t first, size_t step)
{
    size_t n = (reply->elements - first + step - 1) / step;
    const char **argv = malloc((n + 2) * sizeof(*argv));
    size_t *lens = malloc((n + 2) * sizeof(*lens));
    argv[0] = "QACK";
    lens[0] = 4;
    argv[1] = p->lease_key;
    lens[1] = strlen(p->lease_key);
    for (size_t i = 0; i < n; i++) {
        argv[2 + i] = reply->element[first + i * step]->str;
        lens[2 + i] = reply->element[first + i * step]->len;
    }
    redisReply *r = redisCommandArgv(c, (int)n + 2, argv, lens);
    if (!r || r->type != REDIS_REPLY_INTEGER || r->integer != (long long)n)
        complain(&p->w, "QACK of %zu jobs this worker holds: expected :%zu, got %s", n, n, VT_DESCRIBE(r));
    if (r) freeReplyObject(r);
    free(argv);
    free(lens);
}

static void *pop_until_empty(void *arg)
{
    popper *p = arg;
    redisContext *c = vt_connect(p->w.port);
    pthread_barrier_wait(p->w.start);
    if (!c) {
        complain(&p->w, "could not connect");
        return NULL;
    }
    char count[16];
    snprintf(count, sizeof(count), "%d", POP_COUNT);
    char lease_ms[16];
    snprintf(lease_ms, sizeof(lease_ms), "%d", LEASE_MS);
    long last = -1;
    for (;;) {
        const char *argv[8] = {"QPOP", p->queue};
        int argc = 2;
        if (p->with_count) {
            argv[argc++] = p->count;
            argv[argc++] = count;
        }
        if (p->lease) {
            argv[argc++] = "LEASE";
            argv[argc++] = p->lease_key;
            argv[argc++] = lease_ms;
        }
        long long t0 = p->lease && !p->deadline_checked ? server_ms(c) : 0;
        redisReply *r = redisCommandArgv(c, argc, argv, NULL);
        long long t1 = t0 ? server_ms(c) : 0;
        p->w.calls++;
        if (!r) {
            complain(&p->w, "QPOP: %s", c->errstr);
            break;
        }
        bool done = false;
        if (p->with_count) {
            if (r->type != REDIS_REPLY_ARRAY || r->elements % 2 || r->elements > 2 * POP_COUNT) {
                complain(&p->w, "QPOP %s %d: expected up to %d member, score pairs, got %s", p->count,
                         POP_COUNT, POP_COUNT, VT_DESCRIBE(r));
                done = true;
            } else if (r->elements == 0) {
                done = true;
            } else {
                for (size_t i = 0; i < r->elements; i += 2)
                    last = take_job(p, r->element[i], r->element[i + 1], last);
                if (t0) check_lease_deadline(p, c, r->element[0], t0, t1);
                if (p->lease) ack(p, c, r, 0, 2);
            }
        } else {
            if (r->type == REDIS_REPLY_NIL) {
                done = true;
            } else if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
                complain(&p->w, "QPOP without COUNT: expected [member, score] or nil, got %s",
                         VT_DESCRIBE(r));
                done = true;
            } else {
                last = take_job(p, r->element[0], r->element[1], last);
                if (t0) check_lease_deadline(p, c, r->element[0], t0, t1);
                if (p->lease) ack(p, c, r, 0, 2);
            }
        }
        if (t0) p->deadline_checked = true;
        freeReplyObject(r);
        if (done || p->w.problems) break;
    }
    redisFree(c);
    return NULL;
}

/* Workers 0-5 pop COUNT 100 (worker 5 spells it "count"), 6 and 7 one at a
 * time, all at once, until the queue is empty. */
static void empty_the_queue_with_eight_workers(const char *queue, bool lease)
{
    for (int i = 0; i < JOBS; i++)
        atomic_store(&delivered[i], 0);
    fill_queue(queue);

    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, THREADS);
    static popper poppers[THREADS];
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) {
        poppers[i] = (popper){
            .w = {.id = i, .port = env.proxy->port, .start = &start},
            .with_count = i < 6,
            .count = i == 5 ? "count" : "COUNT",
            .lease = lease,
            .queue = queue,
        };
        snprintf(poppers[i].lease_key, sizeof(poppers[i].lease_key), "%s:lease", queue); /* its slot */
        cr_assert_eq(pthread_create(&threads[i], NULL, pop_until_empty, &poppers[i]), 0);
    }
    long long total = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        total += poppers[i].w.items;
    }
    pthread_barrier_destroy(&start);
    worker ws[THREADS];
    for (int i = 0; i < THREADS; i++)
        ws[i] = poppers[i].w;
    check_workers(ws, THREADS);

    /* the single-job workers really raced the others */
    cr_expect_gt(poppers[6].w.items + poppers[7].w.items, 0, "the one-at-a-time workers got no job at all");

    long missing = 0, first_missing = -1;
    for (int i = 0; i < JOBS; i++) {
        int n = atomic_load(&delivered[i]);
        cr_assert(n <= 1, "job:%06d delivered %d times", i, n);
        if (n == 0 && !missing++) first_missing = i;
    }
    cr_assert_eq(missing, 0, "%ld jobs never delivered, the first job:%06ld", missing, first_missing);
    cr_assert_eq(total, JOBS, "workers got %lld jobs in all, expected %d", total, JOBS);
    expect_gone(queue);
}

Test(verbs_concurrency, eight_workers_pop_every_job_exactly_once)
{
    VT_SKIP_IF_DIRECT();
    empty_the_queue_with_eight_workers("{cq:jobs}", false);
}

Test(verbs_concurrency, eight_workers_lease_and_ack_every_job_exactly_once)
{
    VT_SKIP_IF_DIRECT();
    empty_the_queue_with_eight_workers("{cq:leased}", true);
    /* everything popped was acked: the lease set is empty, so gone */
    expect_gone("{cq:leased}:lease");
}

/* ---- four conveyors tick one belt ---- */

/* Crate c:N starts at score N (0..999), the anchor far behind at
 * ANCHOR_SCORE. Each tick adds 1 to every score and removes what reached
 * THRESHOLD, so tick number n (counted over all tickers) removes exactly
 * c:(1000 - n) at score 1000 while crates remain, and nothing after. */
static _Atomic unsigned char removed[CRATES];

static void *tick(void *arg)
{
    worker *w = arg;
    redisContext *c = vt_connect(w->port);
    pthread_barrier_wait(w->start);
    if (!c) {
        complain(w, "could not connect");
        return NULL;
    }
    char threshold[16];
    snprintf(threshold, sizeof(threshold), "%d", THRESHOLD);
    long previous = CRATES;
    for (int t = 0; t < TICKS_PER_TICKER && !w->problems; t++) {
        redisReply *r = redisCommand(c, "ZTICK cq:belt 1 %s WITHSCORES", threshold);
        w->calls++;
        if (!r) {
            complain(w, "ZTICK: %s", c->errstr);
            break;
        }
        if (r->type != REDIS_REPLY_ARRAY || (r->elements != 0 && r->elements != 2)) {
            complain(w, "tick %d: expected no crate or exactly one (member, score), got %s", t,
                     VT_DESCRIBE(r));
        } else if (r->elements == 2) {
            long i = parse_index(r->element[0], "c:");
            if (i < 0 || i >= CRATES) {
                complain(w, "tick %d removed %s", t, VT_DESCRIBE(r->element[0]));
            } else {
                /* advanced once per tick, so it crossed the line at exactly 1000 */
                if (!is_string(r->element[1], "1000"))
                    complain(w, "c:%ld removed at score %s, expected \"1000\"", i,
                             VT_DESCRIBE(r->element[1]));
                /* one tick runs whole: this ticker's later ticks remove crates
                 * that started further back */
                if (i >= previous) complain(w, "c:%ld removed after c:%ld", i, previous);
                previous = i;
                if (atomic_fetch_add(&removed[i], 1) != 0) complain(w, "c:%ld removed twice", i);
                w->items++;
            }
        }
        freeReplyObject(r);
    }
    redisFree(c);
    return NULL;
}

Test(verbs_concurrency, four_conveyors_tick_one_belt_and_move_every_crate_once_per_tick)
{
    VT_SKIP_IF_DIRECT();
    redisContext *admin = vt_must_connect(vt_cluster_env_key_port("cq:belt", env.redis->port));
    for (int i = 0; i < CRATES; i++) {
        atomic_store(&removed[i], 0);
        redisAppendCommand(admin, "ZADD cq:belt %d c:%d", i, i);
    }
    redisAppendCommand(admin, "ZADD cq:belt %d anchor", ANCHOR_SCORE);
    for (int i = 0; i <= CRATES; i++) {
        redisReply *r = vt_get_reply(admin);
        vt_assert_int(r, 1);
        freeReplyObject(r);
    }

    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, TICKERS);
    worker ws[TICKERS];
    pthread_t threads[TICKERS];
    for (int i = 0; i < TICKERS; i++) {
        ws[i] = (worker){.id = i, .port = env.proxy->port, .start = &start};
        cr_assert_eq(pthread_create(&threads[i], NULL, tick, &ws[i]), 0);
    }
    long long ticks = 0, crates = 0;
    for (int i = 0; i < TICKERS; i++) {
        pthread_join(threads[i], NULL);
        ticks += ws[i].calls;
        crates += ws[i].items;
    }
    pthread_barrier_destroy(&start);
    check_workers(ws, TICKERS);

    for (int i = 0; i < CRATES; i++)
        cr_assert_eq(atomic_load(&removed[i]), 1, "c:%d removed %d times", i, atomic_load(&removed[i]));
    cr_assert_eq(crates, CRATES, "the ticks removed %lld crates, expected %d", crates, CRATES);
    cr_assert_eq(ticks, TICKERS * TICKS_PER_TICKER);

    /* the anchor moved once per tick applied, no more, no less */
    redisReply *r = vt_cmd(admin, "ZRANGE cq:belt 0 -1 WITHSCORES");
    char want[32];
    snprintf(want, sizeof(want), "%lld", ANCHOR_SCORE + ticks);
    vt_assert_array(r, 2);
    vt_assert_str(r->element[0], "anchor");
    cr_assert(is_string(r->element[1], want), "the anchor moved to %s after %lld ticks, expected \"%s\"",
              VT_DESCRIBE(r->element[1]), ticks, want);
    freeReplyObject(r);
    redisFree(admin);
}

/* ---- a lock, its owner, and strangers ---- */

#define OWNER_TOKEN "owner-token"

static atomic_bool owner_done;

/* Strangers hold tokens that are almost the owner's. */
static const char *const stranger_tokens[] = {"owner-toke", "owner-token2", "OWNER-TOKEN", "",
                                              "owner-token "};
#define STRANGER_TOKEN_COUNT (sizeof(stranger_tokens) / sizeof(stranger_tokens[0]))

static void *owner_renews(void *arg)
{
    worker *w = arg;
    redisContext *c = vt_connect(w->port);
    pthread_barrier_wait(w->start);
    if (!c) {
        complain(w, "could not connect");
        atomic_store(&owner_done, true);
        return NULL;
    }
    for (int i = 0; i < RENEWALS && !w->problems; i++) {
        /* renew, and every other time hand the lock over to itself */
        redisReply *r =
            i % 2 ? redisCommand(c, "LOCKRENEW cq:lock %s %d", OWNER_TOKEN, LOCK_TTL_MS)
                  : redisCommand(c, "LOCKHANDOVER cq:lock %s %s %d", OWNER_TOKEN, OWNER_TOKEN, LOCK_TTL_MS);
        w->calls++;
        if (!r || r->type != REDIS_REPLY_INTEGER || r->integer != 1)
            complain(w, "%s %d by the owner: expected :1, got %s", i % 2 ? "LOCKRENEW" : "LOCKHANDOVER", i,
                     VT_DESCRIBE(r));
        if (r) freeReplyObject(r);
    }
    atomic_store(&owner_done, true);
    redisFree(c);
    return NULL;
}

static void *stranger_releases(void *arg)
{
    worker *w = arg;
    redisContext *c = vt_connect(w->port);
    pthread_barrier_wait(w->start);
    if (!c) {
        complain(w, "could not connect");
        return NULL;
    }
    for (long i = 0; !atomic_load(&owner_done) && !w->problems; i++) {
        const char *token = stranger_tokens[(i + w->id) % STRANGER_TOKEN_COUNT];
        redisReply *r;
        switch (i % 3) {
        case 0:
            r = redisCommand(c, "LOCKRELEASE cq:lock %s", token);
            break;
        case 1: /* a 1 ms TTL would make the lock vanish if it were applied */
            r = redisCommand(c, "LOCKRENEW cq:lock %s 1", token);
            break;
        default:
            r = redisCommand(c, "LOCKHANDOVER cq:lock %s stolen %d", token, LOCK_TTL_MS);
            break;
        }
        w->calls++;
        if (!r || r->type != REDIS_REPLY_INTEGER || r->integer != 0)
            complain(w, "a stranger with token \"%s\" (call %ld): expected :0, got %s", token, i,
                     VT_DESCRIBE(r));
        if (r) freeReplyObject(r);
    }
    redisFree(c);
    return NULL;
}

Test(verbs_concurrency, strangers_racing_the_owner_never_release_the_lock)
{
    VT_SKIP_IF_DIRECT();
    redisContext *admin = vt_must_connect(vt_cluster_env_key_port("cq:lock", env.redis->port));
    redisReply *r = vt_cmd(admin, "SET cq:lock %s NX PX %d", OWNER_TOKEN, LOCK_TTL_MS);
    vt_assert_status(r, "OK");
    freeReplyObject(r);

    atomic_store(&owner_done, false);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 1 + STRANGERS);
    worker ws[1 + STRANGERS];
    pthread_t threads[1 + STRANGERS];
    for (int i = 0; i <= STRANGERS; i++) {
        ws[i] = (worker){.id = i, .port = env.proxy->port, .start = &start};
        cr_assert_eq(pthread_create(&threads[i], NULL, i == 0 ? owner_renews : stranger_releases, &ws[i]), 0);
    }
    for (int i = 0; i <= STRANGERS; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&start);
    check_workers(ws, 1 + STRANGERS);
    cr_assert_eq(ws[0].calls, RENEWALS);
    long long stranger_calls = 0;
    for (int i = 1; i <= STRANGERS; i++)
        stranger_calls += ws[i].calls;
    cr_expect_gt(stranger_calls, 0, "the strangers never got a call in");

    /* the owner still holds it, with the TTL of its last renewal */
    r = vt_cmd(admin, "GET cq:lock");
    vt_assert_str(r, OWNER_TOKEN);
    freeReplyObject(r);
    r = vt_cmd(admin, "PTTL cq:lock");
    cr_assert(r && r->type == REDIS_REPLY_INTEGER && r->integer > LOCK_TTL_MS - 10000 &&
                  r->integer <= LOCK_TTL_MS,
              "PTTL %s, expected just under %d", VT_DESCRIBE(r), LOCK_TTL_MS);
    freeReplyObject(r);

    /* only the owner's release deletes it */
    redisContext *owner = vt_must_connect(env.proxy->port);
    r = vt_cmd(owner, "LOCKRELEASE cq:lock %s", OWNER_TOKEN);
    vt_assert_int(r, 1);
    freeReplyObject(r);
    r = vt_cmd(admin, "EXISTS cq:lock");
    vt_assert_int(r, 0);
    freeReplyObject(r);
    r = vt_cmd(owner, "LOCKRELEASE cq:lock %s", OWNER_TOKEN);
    vt_assert_int(r, 0);
    freeReplyObject(r);
    redisFree(owner);
    redisFree(admin);
}

/* Four holders of the same token release at the same moment, each on its
 * own proxied connection: exactly one of them gets :1, every round. */
Test(verbs_concurrency, of_four_simultaneous_releases_exactly_one_wins)
{
    VT_SKIP_IF_DIRECT();
    redisContext *admin = vt_must_connect(vt_cluster_env_key_port("cq:shared", env.redis->port));
    redisContext *holders[RELEASERS];
    for (int i = 0; i < RELEASERS; i++)
        holders[i] = vt_must_connect(env.proxy->port);

    for (int round = 0; round < RELEASE_ROUNDS; round++) {
        redisReply *r = vt_cmd(admin, "SET cq:shared tok-%d PX %d", round, LOCK_TTL_MS);
        vt_assert_status(r, "OK");
        freeReplyObject(r);
        /* everyone sends before anyone reads */
        for (int i = 0; i < RELEASERS; i++) {
            redisAppendCommand(holders[i], "LOCKRELEASE cq:shared tok-%d", round);
            int done = 0;
            while (!done)
                cr_assert_eq(redisBufferWrite(holders[i], &done), REDIS_OK, "%s", holders[i]->errstr);
        }
        long long wins = 0;
        for (int i = 0; i < RELEASERS; i++) {
            r = vt_get_reply(holders[i]);
            cr_assert(r && r->type == REDIS_REPLY_INTEGER && (r->integer == 0 || r->integer == 1),
                      "round %d, holder %d: expected :0 or :1, got %s", round, i, VT_DESCRIBE(r));
            wins += r->integer;
            freeReplyObject(r);
        }
        cr_assert_eq(wins, 1, "round %d: %lld releases succeeded, expected exactly 1", round, wins);
        r = vt_cmd(admin, "EXISTS cq:shared");
        vt_assert_int(r, 0);
        freeReplyObject(r);
    }
    for (int i = 0; i < RELEASERS; i++)
        redisFree(holders[i]);
    redisFree(admin);
}

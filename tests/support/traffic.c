/* traffic.c - see traffic.h. */
#include "tests/support/traffic.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/support/client.h"
#include "tests/support/servers.h"

#define DEFAULT_ROUNDS 4
#define IO_CHUNK (64 * 1024)
#define UNAVAILABLE "-ERR upstream unavailable: "
#define SHOW_BYTES 120 /* bytes of a reply shown in a failure */

/* One pipeline and what must come back. Owned by the worker running it. */
typedef struct session {
    vt_buf req;
    vt_buf want;
    size_t *ends; /* want offset where each reply ends */
    size_t nreplies, capreplies;
} session;

typedef enum verdict { V_COMPLETE, V_CLOSED, V_UNAVAILABLE, V_FAILED } verdict;

typedef struct worker {
    struct vt_traffic *t;
    int id;
    bool tx;
    pthread_t thread;
    int session;      /* the one running (for failure messages) */
    atomic_bool owed; /* has sent, still owed replies */
    /* written by the worker, read after the join */
    vt_traffic_result res;
} worker;

struct vt_traffic {
    int port;
    int group;
    vt_traffic_opts opts;
    atomic_bool stop;
    atomic_bool failed;
    atomic_llong replies;
    atomic_llong closed; /* sessions ended by a close, so far */
    worker w[VT_TRAFFIC_MAX_WORKERS];
};

static atomic_int next_group;

/* ---- building a session ---- */

static void expect(session *s, const char *reply, size_t len)
{
    vt_buf_append(&s->want, reply, len);
    if (s->nreplies == s->capreplies) {
        s->capreplies = s->capreplies ? 2 * s->capreplies : 64;
        s->ends = realloc(s->ends, s->capreplies * sizeof(*s->ends));
        if (!s->ends) abort();
    }
    s->ends[s->nreplies++] = s->want.len;
}

static void expect_str(session *s, const char *reply)
{
    expect(s, reply, strlen(reply));
}

static void expect_bulk(session *s, const char *v, size_t len)
{
    char head[32];
    int n = snprintf(head, sizeof(head), "$%zu\r\n", len);
    vt_buf b = {0};
    vt_buf_append(&b, head, (size_t)n);
    vt_buf_append(&b, v, len);
    vt_buf_append(&b, "\r\n", 2);
    expect(s, b.data, b.len);
    vt_buf_free(&b);
}

static void expect_int(session *s, long long v)
{
    char line[32];
    snprintf(line, sizeof(line), ":%lld\r\n", v);
    expect_str(s, line);
}

/* A command of NUL-terminated arguments, then the reply it must get. */
static void cmd(session *s, const char *reply, const char *arg0, ...)
{
    const char *argv[16];
    int argc = 0;
    va_list ap;
    va_start(ap, arg0);
    for (const char *a = arg0; a && argc < 16; a = va_arg(ap, const char *))
        argv[argc++] = a;
    va_end(ap);
    vt_buf_cmd_argv(&s->req, argc, argv, NULL);
    if (reply) expect_str(s, reply);
}

static void key(char *out, size_t len, const char *prefix, const char *name, int round)
{
    snprintf(out, len, "%s:%s:%d", prefix, name, round);
}

/* A value that names its key, so a reply routed to the wrong place or
 * moved in the stream never looks right; big ones are over 16 KiB so the
 * proxy streams them. */
static void value_for(vt_buf *v, const char *k, size_t len)
{
    vt_buf_reset(v);
    vt_buf_append_str(v, k);
    vt_buf_append(v, "|", 1);
    while (v->len < len) {
        char c = (char)('a' + (v->len * 7 + strlen(k)) % 26);
        vt_buf_append(v, &c, 1);
    }
    v->len = len;
}

static void round_plain(session *s, const char *p, int r, long long *counter, vt_buf *v, size_t big)
{
    char k[128], kbig[128];
    key(k, sizeof(k), p, "a", r);
    key(kbig, sizeof(kbig), p, "big", r);
    value_for(v, k, 10 + (size_t)r);
    const char *set[] = {"SET", k, v->data};
    size_t setl[] = {3, strlen(k), v->len};
    vt_buf_cmd_argv(&s->req, 3, set, setl);
    expect_str(s, "+OK\r\n");
    cmd(s, NULL, "GET", k, NULL);
    expect_bulk(s, v->data, v->len);
    char kn[128];
    key(kn, sizeof(kn), p, "n", 0);
    cmd(s, NULL, "INCR", kn, NULL);
    expect_int(s, ++*counter);

    value_for(v, kbig, big);
    const char *setbig[] = {"SET", kbig, v->data};
    size_t setbigl[] = {3, strlen(kbig), v->len};
    vt_buf_cmd_argv(&s->req, 3, setbig, setbigl);
    expect_str(s, "+OK\r\n");
    cmd(s, NULL, "GET", kbig, NULL);
    expect_bulk(s, v->data, v->len);
    cmd(s, NULL, "INCR", kn, NULL);
    expect_int(s, ++*counter);
    cmd(s, "$-1\r\n", "GET", p, NULL); /* the prefix itself is never a key */
    cmd(s, NULL, "GET", kbig, NULL);
    expect_bulk(s, v->data, v->len);
}

/* Cluster mode: commands the proxy splits by slot, over this round's
 * keys (each of another slot), pipelined with the rest. */
static void round_split(session *s, const char *p, int r, size_t big)
{
    char k[128], kbig[128], ksplit[128];
    key(k, sizeof(k), p, "a", r);
    key(kbig, sizeof(kbig), p, "big", r);
    key(ksplit, sizeof(ksplit), p, "split", r);
    vt_buf v = {0}, vbig = {0}, want = {0};
    value_for(&v, k, 10 + (size_t)r);
    value_for(&vbig, kbig, big);
    cmd(s, NULL, "MGET", k, p, kbig, k, NULL);
    char head[32];
    vt_buf_append_str(&want, "*4\r\n");
    int n = snprintf(head, sizeof(head), "$%zu\r\n", v.len);
    vt_buf_append(&want, head, (size_t)n);
    vt_buf_append(&want, v.data, v.len);
    vt_buf_append_str(&want, "\r\n$-1\r\n");
    n = snprintf(head, sizeof(head), "$%zu\r\n", vbig.len);
    vt_buf_append(&want, head, (size_t)n);
    vt_buf_append(&want, vbig.data, vbig.len);
    vt_buf_append_str(&want, "\r\n");
    n = snprintf(head, sizeof(head), "$%zu\r\n", v.len);
    vt_buf_append(&want, head, (size_t)n);
    vt_buf_append(&want, v.data, v.len);
    vt_buf_append_str(&want, "\r\n");
    expect(s, want.data, want.len);
    cmd(s, ":3\r\n", "EXISTS", k, p, kbig, k, NULL);
    cmd(s, "+OK\r\n", "SET", ksplit, "x", NULL);
    cmd(s, ":2\r\n", "DEL", ksplit, p, k, NULL);
    cmd(s, ":0\r\n", "EXISTS", ksplit, k, NULL);
    vt_buf_free(&v);
    vt_buf_free(&vbig);
    vt_buf_free(&want);
}

static void round_tx(session *s, const char *p, int r, long long *counter, bool cluster)
{
    char kn[128], ka[128], tag[112];
    if (cluster) {
        snprintf(tag, sizeof(tag), "{%s}", p); /* one slot for the transaction's keys */
        p = tag;
    }
    key(kn, sizeof(kn), p, "n", 0);
    key(ka, sizeof(ka), p, "tx", r);
    cmd(s, "+OK\r\n", "MULTI", NULL);
    cmd(s, "+QUEUED\r\n", "INCR", kn, NULL);
    cmd(s, "+QUEUED\r\n", "SET", ka, "in-tx", NULL);
    cmd(s, "+QUEUED\r\n", "GET", ka, NULL);
    cmd(s, NULL, "EXEC", NULL);
    char reply[64];
    snprintf(reply, sizeof(reply), "*3\r\n:%lld\r\n+OK\r\n$5\r\nin-tx\r\n", ++*counter);
    expect_str(s, reply);
}

static void round_verbs(session *s, const char *p, int r)
{
    char kz[128], kq[128], kl[128];
    key(kz, sizeof(kz), p, "z", r);
    key(kq, sizeof(kq), p, "q", r);
    key(kl, sizeof(kl), p, "lock", r);
    cmd(s, ":3\r\n", "ZADD", kz, "0", "m1", "10", "m2", "90", "m3", NULL);
    cmd(s, "*1\r\n$2\r\nm3\r\n", "ZTICK", kz, "15", "100", NULL);
    cmd(s, ":2\r\n", "ZADD", kq, "1", "job-a", "2", "job-b", NULL);
    cmd(s, "*2\r\n$5\r\njob-a\r\n$1\r\n1\r\n", "QPOP", kq, NULL);
    cmd(s, "+OK\r\n", "SET", kl, "token", NULL);
    cmd(s, ":0\r\n", "LOCKRELEASE", kl, "someone-else", NULL);
    cmd(s, ":1\r\n", "LOCKRELEASE", kl, "token", NULL);
}

static void session_build(session *s, const vt_traffic *t, const worker *w, int n)
{
    char p[96];
    snprintf(p, sizeof(p), "vtf:%d:%d:%d:%d", (int)getpid(), t->group, w->id, n);
    long long counter = 0, tx_counter = 0;
    vt_buf v = {0};
    int rounds = t->opts.rounds > 0 ? t->opts.rounds : DEFAULT_ROUNDS;
    for (int r = 0; r < rounds; r++) {
        size_t big = VT_TRAFFIC_BIG_MIN + (size_t)(w->id * 977 + n * 131 + r * 4099) % (24 * 1024);
        round_plain(s, p, r, &counter, &v, big);
        if (t->opts.cluster) round_split(s, p, r, big);
        if (w->tx) round_tx(s, p, r, t->opts.cluster ? &tx_counter : &counter, t->opts.cluster);
        if (t->opts.verbs) round_verbs(s, p, r);
    }
    vt_buf_free(&v);
}

static void session_free(session *s)
{
    vt_buf_free(&s->req);
    vt_buf_free(&s->want);
    free(s->ends);
}

/* ---- running a session ---- */

/* What reading has established so far. */
typedef struct progress {
    size_t matched;   /* bytes of s->want received right */
    size_t done;      /* replies fully received (right, or "unavailable") */
    bool unavailable; /* from reply `done` on, only "upstream unavailable" lines */
    vt_buf rest;      /* unavailable mode: bytes not yet framed */
} progress;

/* Printable bytes for a failure message, in a buffer of the caller's
 * (vt_escape's static slots are not for threads). At most SHOW_BYTES. */
typedef struct shown {
    char text[4 * SHOW_BYTES + 8];
} shown;

static const char *show(shown *out, const char *p, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n && i < SHOW_BYTES; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch == '\r' || ch == '\n') {
            out->text[o++] = '\\';
            out->text[o++] = ch == '\r' ? 'r' : 'n';
        } else if (ch < 32 || ch > 126) {
            o += (size_t)snprintf(out->text + o, sizeof(out->text) - o, "\\x%02x", ch);
        } else {
            out->text[o++] = (char)ch;
        }
    }
    out->text[o] = '\0';
    return out->text;
}

static void fail(worker *w, const char *fmt, ...)
{
    if (w->res.failed) return;
    w->res.failed = true;
    int n = snprintf(w->res.why, sizeof(w->res.why), "worker %d%s, session %d: ", w->id, w->tx ? " (tx)" : "",
                     w->session);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->res.why + n, sizeof(w->res.why) - (size_t)n, fmt, ap);
    va_end(ap);
    atomic_store(&w->t->failed, true);
}

static void count_done(worker *w, const session *s, progress *pg)
{
    while (pg->done < s->nreplies && s->ends[pg->done] <= pg->matched) {
        pg->done++;
        w->res.replies++;
        atomic_fetch_add(&w->t->replies, 1);
    }
}

/* Unavailable mode: every reply framed in pg->rest must be the proxy's
 * "upstream unavailable" error; each stands for one expected reply. */
static bool take_unavailable(worker *w, const session *s, progress *pg)
{
    for (;;) {
        long long len = vt_resp_reply_len(pg->rest.data, pg->rest.len);
        if (len == 0) return true;
        bool any = w->t->opts.allow_recovery && len > 0; /* served again: counted, not checked */
        if (!any && (len < 0 || pg->rest.data[0] != '-' ||
                     strncmp(pg->rest.data, UNAVAILABLE, strlen(UNAVAILABLE)))) {
            fail(w,
                 "reply %zu of %zu: after \"upstream unavailable\", expected only more of those, got \"%s\"",
                 pg->done + 1, s->nreplies, show(&(shown){0}, pg->rest.data, pg->rest.len));
            return false;
        }
        if (pg->done == s->nreplies) {
            fail(w, "more replies than the %zu commands: \"%s\"", s->nreplies,
                 show(&(shown){0}, pg->rest.data, (size_t)len));
            return false;
        }
        vt_buf_consume(&pg->rest, (size_t)len);
        pg->done++;
    }
}

/* Compare what arrived with what must come; false on a wrong byte. */
static bool check_bytes(worker *w, const session *s, progress *pg, const char *data, size_t n)
{
    if (pg->unavailable) {
        vt_buf_append(&pg->rest, data, n);
        return take_unavailable(w, s, pg);
    }
    size_t left = s->want.len - pg->matched;
    size_t same = 0;
    while (same < n && same < left && data[same] == s->want.data[pg->matched + same])
        same++;
    pg->matched += same;
    count_done(w, s, pg);
    if (same == n) return true;
    size_t start = pg->done ? s->ends[pg->done - 1] : 0;
    bool at_boundary = pg->matched == start;
    if (w->t->opts.allow_unavailable && at_boundary) {
        pg->unavailable = true;
        vt_buf_append(&pg->rest, data + same, n - same);
        return take_unavailable(w, s, pg);
    }
    size_t end = pg->done < s->nreplies ? s->ends[pg->done] : s->want.len;
    shown want_shown, got_shown;
    fail(w, "reply %zu of %zu wrong at byte %zu of it (session byte %zu): expected \"%s\", got \"%s\"",
         pg->done + 1, s->nreplies, pg->matched - start, pg->matched,
         show(&want_shown, s->want.data + start, end - start), show(&got_shown, data + same, n - same));
    return false;
}

static bool session_over(const session *s, const progress *pg)
{
    return pg->done == s->nreplies && (pg->unavailable ? pg->rest.len == 0 : pg->matched == s->want.len);
}

static verdict session_run(worker *w, const session *s)
{
    const vt_traffic *t = w->t;
    int fd = vt_sock_tcp(t->port);
    if (fd < 0) {
        fail(w, "could not connect to 127.0.0.1:%d", t->port);
        return V_FAILED;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    int deadline_ms =
        t->opts.session_deadline_ms > 0 ? t->opts.session_deadline_ms : VT_TRAFFIC_SESSION_DEADLINE_MS;
    long long deadline = vt_now_ms() + deadline_ms;
    progress pg = {0};
    size_t sent = 0;
    bool can_send = true;
    char *in = malloc(IO_CHUNK);
    if (!in) abort();
    verdict v = V_FAILED;
    for (;;) {
        if (session_over(s, &pg)) {
            v = pg.unavailable ? V_UNAVAILABLE : V_COMPLETE;
            break;
        }
        long long left = deadline - vt_now_ms();
        if (left <= 0) {
            fail(w, "no end within %d ms: %zu of %zu replies, %zu of %zu request bytes sent", deadline_ms,
                 pg.done, s->nreplies, sent, s->req.len);
            break;
        }
        bool sending = can_send && sent < s->req.len;
        struct pollfd pfd = {.fd = fd, .events = (short)(POLLIN | (sending ? POLLOUT : 0))};
        if (poll(&pfd, 1, (int)left) <= 0) continue;
        if (sending && (pfd.revents & POLLOUT)) {
            size_t chunk = s->req.len - sent < IO_CHUNK ? s->req.len - sent : IO_CHUNK;
            ssize_t n = send(fd, s->req.data + sent, chunk, MSG_NOSIGNAL);
            if (n > 0) {
                sent += (size_t)n;
                atomic_store(&w->owed, true);
            } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                can_send = false; /* closed under us: read what is left, then the close */
            }
        }
        if (!(pfd.revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = recv(fd, in, IO_CHUNK, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (n <= 0) {
            v = V_CLOSED; /* EOF or reset before the last reply */
            break;
        }
        if (!check_bytes(w, s, &pg, in, (size_t)n)) break;
    }
    atomic_store(&w->owed, false);
    free(in);
    vt_buf_free(&pg.rest);
    close(fd);
    return v;
}

/* ---- workers ---- */

static void *worker_main(void *arg)
{
    worker *w = arg;
    vt_traffic *t = w->t;
    for (int n = 0; !atomic_load(&t->stop) && (t->opts.sessions == 0 || n < t->opts.sessions); n++) {
        session s = {0};
        w->session = n;
        session_build(&s, t, w, n);
        verdict v = session_run(w, &s);
        session_free(&s);
        w->res.sessions++;
        if (v == V_COMPLETE) w->res.complete++;
        if (v == V_CLOSED) {
            w->res.closed++;
            atomic_fetch_add(&t->closed, 1);
        }
        if (v == V_UNAVAILABLE) w->res.unavailable++;
        if (v == V_FAILED) break;
    }
    return NULL;
}

vt_traffic *vt_traffic_start(int port, const vt_traffic_opts *opts)
{
    if (opts->workers < 1 || opts->workers > VT_TRAFFIC_MAX_WORKERS || opts->tx_workers < 0 ||
        opts->tx_workers > opts->workers || opts->sessions < 0) {
        fprintf(stderr, "vt: traffic: bad options (%d workers, %d tx)\n", opts->workers, opts->tx_workers);
        return NULL;
    }
    vt_ignore_sigpipe();
    vt_traffic *t = calloc(1, sizeof(*t));
    if (!t) abort();
    t->port = port;
    t->opts = *opts;
    t->group = atomic_fetch_add(&next_group, 1);
    for (int i = 0; i < opts->workers; i++) {
        worker *w = &t->w[i];
        w->t = t;
        w->id = i;
        w->tx = i < opts->tx_workers;
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) abort();
    }
    return t;
}

typedef struct replies_goal {
    vt_traffic *t;
    long long want;
} replies_goal;

static bool replies_reached(void *arg)
{
    replies_goal *g = arg;
    return atomic_load(&g->t->failed) || atomic_load(&g->t->replies) >= g->want;
}

bool vt_traffic_wait_replies(vt_traffic *t, long long more, int timeout_ms)
{
    replies_goal g = {t, atomic_load(&t->replies) + more};
    return vt_wait_until(replies_reached, &g, timeout_ms) && !atomic_load(&t->failed);
}

int vt_traffic_owed(vt_traffic *t)
{
    int n = 0;
    for (int i = 0; i < t->opts.workers; i++)
        n += atomic_load(&t->w[i].owed);
    return n;
}

long long vt_traffic_closed(vt_traffic *t)
{
    return atomic_load(&t->closed);
}

bool vt_traffic_failed(vt_traffic *t)
{
    return atomic_load(&t->failed);
}

bool vt_traffic_finish(vt_traffic *t, vt_traffic_result *res)
{
    vt_traffic_result all = {0};
    for (int i = 0; i < t->opts.workers; i++) {
        worker *w = &t->w[i];
        pthread_join(w->thread, NULL);
        all.sessions += w->res.sessions;
        all.complete += w->res.complete;
        all.closed += w->res.closed;
        all.unavailable += w->res.unavailable;
        all.replies += w->res.replies;
        if (w->res.failed && !all.failed) {
            all.failed = true;
            snprintf(all.why, sizeof(all.why), "%s", w->res.why);
        }
    }
    if (res) *res = all;
    free(t);
    return !all.failed;
}

bool vt_traffic_stop(vt_traffic *t, vt_traffic_result *res)
{
    atomic_store(&t->stop, true);
    return vt_traffic_finish(t, res);
}

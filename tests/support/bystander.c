#include "tests/support/bystander.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/client.h"
#include "tests/support/servers.h"

/* Commands per batch come in triples: INCR, SET, GET. */
#define BY_TRIPLES 4
/* Every this many batches the value is large enough for its GET reply to be
 * streamed by the proxy (over its 16 KiB threshold), and small enough for the
 * SET not to be (under 64 KiB). */
#define BY_LARGE_EVERY 8
#define BY_LARGE_LEN 20000

typedef struct bystander {
    struct vt_bystanders *group;
    int index;
    int fd;
    pthread_t thread;
    int started;
    atomic_llong checked;
    atomic_int failed;
    char why[512]; /* written once, before `failed` is set */
} bystander;

struct vt_bystanders {
    int n;
    int id;
    atomic_int stop;
    bystander by[VT_BYSTANDERS_MAX];
};

static void by_fail(bystander *b, const char *detail)
{
    snprintf(b->why, sizeof(b->why), "bystander %d: %s", b->index, detail);
    atomic_store(&b->failed, 1);
}

/* Printable bytes for a failure message (vt_escape's static slots are not
 * for threads). */
static void by_escape(char *out, size_t cap, const char *p, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < cap; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch == '\r') {
            out[o++] = '\\';
            out[o++] = 'r';
        } else if (ch == '\n') {
            out[o++] = '\\';
            out[o++] = 'n';
        } else if (ch < 32 || ch > 126) {
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
        } else {
            out[o++] = (char)ch;
        }
    }
    out[o] = '\0';
}

/* One batch: the requests into req, the exact replies into want. */
static void by_batch(bystander *b, long long batch, long long *counter, vt_buf *req, vt_buf *want,
                     char *value)
{
    char key[96], skey[96], num[32];
    snprintf(key, sizeof(key), "vtb:%d:%d:%d:n", (int)getpid(), b->group->id, b->index);
    snprintf(skey, sizeof(skey), "vtb:%d:%d:%d:s", (int)getpid(), b->group->id, b->index);
    size_t vlen = batch % BY_LARGE_EVERY == BY_LARGE_EVERY - 1 ? BY_LARGE_LEN : 16;
    for (int t = 0; t < BY_TRIPLES; t++) {
        /* A value of its own per command: a reply given to the wrong request
         * or the wrong client cannot match. */
        int head = snprintf(value, 64, "%d.%lld.%d.", b->index, batch, t);
        for (size_t i = (size_t)head; i < vlen; i++)
            value[i] = (char)('a' + (i + (size_t)batch) % 26);
        const char *set_argv[] = {"SET", skey, value};
        size_t set_lens[] = {3, strlen(skey), vlen};
        vt_buf_cmd(req, "INCR", key, NULL);
        vt_buf_cmd_argv(req, 3, set_argv, set_lens);
        vt_buf_cmd(req, "GET", skey, NULL);
        snprintf(num, sizeof(num), ":%lld\r\n", ++*counter);
        vt_buf_append_str(want, num);
        vt_buf_append_str(want, "+OK\r\n");
        snprintf(num, sizeof(num), "$%zu\r\n", vlen);
        vt_buf_append_str(want, num);
        vt_buf_append(want, value, vlen);
        vt_buf_append_str(want, "\r\n");
    }
}

static void *by_run(void *arg)
{
    bystander *b = arg;
    vt_buf req = {0}, want = {0}, got = {0};
    char *value = malloc(BY_LARGE_LEN + 64);
    long long counter = 0;
    for (long long batch = 0; !atomic_load(&b->group->stop); batch++) {
        vt_buf_reset(&req);
        vt_buf_reset(&want);
        vt_buf_reset(&got);
        by_batch(b, batch, &counter, &req, &want, value);
        if (!vt_sock_send_buf(b->fd, &req)) {
            by_fail(b, "send failed (connection closed)");
            break;
        }
        /* Read until the batch is in, or what came already differs (a
         * wrong reply is then reported at once, not at the deadline). */
        long long deadline = vt_now_ms() + VT_BYSTANDER_BATCH_DEADLINE_MS;
        while (got.len < want.len && memcmp(got.data ? got.data : "", want.data, got.len) == 0 && !got.eof &&
               !got.err && vt_now_ms() < deadline)
            vt_sock_read_len(b->fd, &got, got.len + 1, (int)(deadline - vt_now_ms()));
        if (got.len < want.len || memcmp(got.data, want.data, want.len) != 0) {
            /* Where it went wrong, and what came instead. */
            size_t at = 0;
            while (at < got.len && at < want.len && got.data[at] == want.data[at])
                at++;
            size_t from = at > 40 ? at - 40 : 0;
            char detail[400], shown_bytes[300];
            const char *what = at < got.len         ? "wrong reply"
                               : got.eof || got.err ? "connection closed"
                                                    : "batch late or lost";
            size_t shown = got.len - from < 120 ? got.len - from : 120;
            by_escape(shown_bytes, sizeof(shown_bytes), got.data ? got.data + from : "",
                      got.data ? shown : 0);
            snprintf(detail, sizeof(detail), "%s at byte %zu of %zu: got \"%s\"", what, at, want.len,
                     shown_bytes);
            by_fail(b, detail);
            break;
        }
        if (got.len > want.len) {
            by_fail(b, "more replies than requests");
            break;
        }
        atomic_fetch_add(&b->checked, BY_TRIPLES * 3);
    }
    free(value);
    vt_buf_free(&req);
    vt_buf_free(&want);
    vt_buf_free(&got);
    return NULL;
}

vt_bystanders *vt_bystanders_start(int port, int n)
{
    return vt_bystanders_start_auth(port, n, NULL);
}

/* AUTH on a new bystander's connection, before its thread starts (as
 * `user` when not NULL). */
static bool by_auth(int fd, const char *user, const char *password)
{
    vt_buf req = {0}, got = {0};
    if (user)
        vt_buf_cmd(&req, "AUTH", user, password, NULL);
    else
        vt_buf_cmd(&req, "AUTH", password, NULL);
    bool ok = vt_sock_send_buf(fd, &req) && vt_sock_read_len(fd, &got, 5, VT_BYSTANDER_BATCH_DEADLINE_MS) &&
              got.len == 5 && memcmp(got.data, "+OK\r\n", 5) == 0;
    vt_buf_free(&req);
    vt_buf_free(&got);
    return ok;
}

vt_bystanders *vt_bystanders_start_auth(int port, int n, const char *password)
{
    return vt_bystanders_start_auth_user(port, n, NULL, password);
}

vt_bystanders *vt_bystanders_start_auth_user(int port, int n, const char *user, const char *password)
{
    static atomic_int next_id;
    if (n < 1 || n > VT_BYSTANDERS_MAX) {
        fprintf(stderr, "vt_bystanders_start: %d bystanders (1..%d)\n", n, VT_BYSTANDERS_MAX);
        return NULL;
    }
    vt_bystanders *g = calloc(1, sizeof(*g));
    g->n = n;
    g->id = atomic_fetch_add(&next_id, 1);
    for (int i = 0; i < n; i++)
        g->by[i].fd = -1;
    for (int i = 0; i < n; i++) {
        bystander *b = &g->by[i];
        b->group = g;
        b->index = i;
        b->fd = vt_sock_tcp(port);
        if (b->fd >= 0 && password && !by_auth(b->fd, user, password)) {
            close(b->fd);
            b->fd = -1;
        }
        if (b->fd < 0) {
            fprintf(stderr, "vt_bystanders_start: bystander %d cannot connect to port %d\n", i, port);
            vt_bystanders_stop(g, NULL, NULL, 0);
            return NULL;
        }
    }
    for (int i = 0; i < n; i++)
        g->by[i].started = pthread_create(&g->by[i].thread, NULL, by_run, &g->by[i]) == 0;
    return g;
}

bool vt_bystanders_failed(vt_bystanders *g, char *why, size_t whylen)
{
    for (int i = 0; i < g->n; i++) {
        if (atomic_load(&g->by[i].failed)) {
            if (why && whylen) snprintf(why, whylen, "%s", g->by[i].why);
            return true;
        }
    }
    return false;
}

bool vt_bystanders_wait(vt_bystanders *g, long long more, int timeout_ms)
{
    long long target[VT_BYSTANDERS_MAX];
    for (int i = 0; i < g->n; i++)
        target[i] = atomic_load(&g->by[i].checked) + more;
    long long deadline = vt_now_ms() + timeout_ms;
    for (;;) {
        char why[512];
        if (vt_bystanders_failed(g, why, sizeof(why))) {
            fprintf(stderr, "vt: a bystander failed: %s\n", why);
            return false;
        }
        int behind = 0;
        for (int i = 0; i < g->n; i++)
            if (atomic_load(&g->by[i].checked) < target[i]) behind++;
        if (!behind) return true;
        if (vt_now_ms() >= deadline) {
            /* what each still lacked: one stuck, or all slow? */
            fprintf(stderr, "vt: after %d ms, %d of %d bystanders had fewer than %lld more replies; each had",
                    timeout_ms, behind, g->n, more);
            for (int i = 0; i < g->n; i++)
                fprintf(stderr, " %lld", atomic_load(&g->by[i].checked) - (target[i] - more));
            fprintf(stderr, "\n");
            return false;
        }
        usleep(2000); /* polling a condition, with a deadline */
    }
}

bool vt_bystanders_stop(vt_bystanders *g, long long *checked, char *why, size_t whylen)
{
    atomic_store(&g->stop, 1);
    long long total = 0;
    for (int i = 0; i < g->n; i++) {
        if (g->by[i].started) pthread_join(g->by[i].thread, NULL);
        if (g->by[i].fd >= 0) close(g->by[i].fd);
        total += atomic_load(&g->by[i].checked);
    }
    bool failed = vt_bystanders_failed(g, why, whylen);
    if (!failed && why && whylen) why[0] = '\0';
    if (checked) *checked = total;
    free(g);
    return !failed;
}

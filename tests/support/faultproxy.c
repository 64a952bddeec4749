/* faultproxy.c - see faultproxy.h.
 *
 * One thread, one poll() loop over the listener, a wake-up pipe and both
 * sockets of every connection. Each direction of a connection (a "half")
 * has one buffer and reads only when it is empty, so a read can be cut
 * short at the next trigger and a slice is exactly one write. All state is
 * under one mutex, which the thread drops only while it waits in ppoll();
 * the functions the test calls change state under it and wake the thread,
 * which alone touches sockets. */
#include "tests/support/faultproxy.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/servers.h"

#define HALF_BUF (64 * 1024) /* bytes one direction holds between a read and its write */
#define LISTEN_BACKLOG 512
#define NO_STALL (-1)
#define NO_DEADLINE LLONG_MAX

/* One direction of a connection: reads conn->fd[src], writes conn->fd[dst]. */
typedef struct fp_half {
    int src, dst;       /* indexes into conn->fd */
    char buf[HALF_BUF]; /* read, not yet written: [off, len) */
    size_t off, len;
    long long bytes;          /* read from src so far (the trigger counter) */
    bool eof;                 /* src closed; dst is shut down once buf is written */
    bool shut;                /* dst was shut down (SHUT_WR) */
    int stall_id;             /* the STALL fault holding this half, or NO_STALL */
    long long stall_until_us; /* NO_DEADLINE: until released */
    long long slice_left;     /* bytes still to slice (0: not slicing) */
    size_t slice_chunk;
    bool slice_random;
    unsigned slice_rng;
    int slice_pause_us;
    long long next_read_us; /* a slice's pause: no read before this */
} fp_half;

/* A connection pair: fd[0] accepted from the connecting side, fd[1] to the
 * target. Owned by the proxy's table; freed by the thread only. */
typedef struct fp_conn {
    int fd[2];
    fp_half half[2];                  /* indexed by vt_fp_dir */
    long long base[VT_FP_MAX_FAULTS]; /* half bytes when each fault was armed here */
    uint32_t done;                    /* faults fired here, or not for this connection */
    bool cutting;                     /* CUT: write what is buffered, then shut down both */
    bool draining;                    /* CUT: both shut down, discarding until the peers close */
    bool peer_closed[2];              /* while draining */
    long long cut_deadline_us;
    bool dead; /* sockets closed; freed at the next sweep */
} fp_conn;

struct vt_faultproxy {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed; /* gen_done moved, or a fault fired */
    int listen_fd;
    int wake[2]; /* a pipe: [1] written by callers, [0] polled by the thread */
    int port, target_port;
    bool stopping;
    vt_fault faults[VT_FP_MAX_FAULTS];
    bool armed[VT_FP_MAX_FAULTS];
    long long fired[VT_FP_MAX_FAULTS];
    int nfaults;
    fp_conn **conns;
    size_t nconns, capconns;
    long long gen_requested, gen_done; /* a caller waits until the thread has seen its change */
    vt_fp_stats stats;
};

/* ---- small helpers ---- */

static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void set_nonblocking(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void set_nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Close so that the peer gets an RST, not a FIN. */
static void close_with_reset(int fd)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    close(fd);
}

static void wake_thread(vt_faultproxy *fp)
{
    char c = 0;
    while (write(fp->wake[1], &c, 1) < 0 && errno == EINTR) {
    }
}

static unsigned next_rng(unsigned *state)
{
    *state = *state * 1103515245u + 12345u;
    return *state >> 8;
}

/* ---- connections ---- */

static void half_init(fp_half *h, int src, int dst)
{
    h->src = src;
    h->dst = dst;
    h->off = h->len = 0;
    h->bytes = 0;
    h->eof = h->shut = false;
    h->stall_id = NO_STALL;
    h->slice_left = 0;
    h->next_read_us = 0;
}

static void conn_reset(vt_faultproxy *fp, fp_conn *c)
{
    if (c->dead) return;
    close_with_reset(c->fd[0]);
    close_with_reset(c->fd[1]);
    c->dead = true;
    fp->stats.open--;
}

static void conn_close(vt_faultproxy *fp, fp_conn *c)
{
    if (c->dead) return;
    close(c->fd[0]);
    close(c->fd[1]);
    c->dead = true;
    fp->stats.open--;
}

static bool half_pending(const fp_half *h)
{
    return h->off < h->len;
}

/* Both sides shut down after a CUT: discard what comes until each closes. */
static void conn_begin_drain(fp_conn *c)
{
    shutdown(c->fd[0], SHUT_WR);
    shutdown(c->fd[1], SHUT_WR);
    c->draining = true;
}

/* A CUT or a normal end may be due once buffers are written. */
static void conn_progress(vt_faultproxy *fp, fp_conn *c)
{
    if (c->dead) return;
    if (c->cutting && !c->draining) {
        if (!half_pending(&c->half[0]) && !half_pending(&c->half[1])) conn_begin_drain(c);
        return;
    }
    if (c->draining) {
        if (c->peer_closed[0] && c->peer_closed[1]) conn_close(fp, c);
        return;
    }
    for (int d = 0; d < 2; d++) {
        fp_half *h = &c->half[d];
        if (h->eof && !h->shut && !half_pending(h)) {
            shutdown(c->fd[h->dst], SHUT_WR);
            h->shut = true;
        }
    }
    if (c->half[0].shut && c->half[1].shut) conn_close(fp, c);
}

/* ---- faults ---- */

static void fault_fire(vt_faultproxy *fp, fp_conn *c, int id)
{
    const vt_fault *f = &fp->faults[id];
    fp_half *h = &c->half[f->dir];
    c->done |= 1u << id;
    fp->fired[id]++;
    fp->stats.fired++;
    if (f->scope == VT_FP_FIRST) fp->armed[id] = false;
    pthread_cond_broadcast(&fp->changed);
    switch (f->action) {
    case VT_FP_CUT:
        c->cutting = true;
        c->cut_deadline_us = now_us() + (long long)VT_FP_CUT_DRAIN_MS * 1000;
        break;
    case VT_FP_RESET:
        conn_reset(fp, c);
        break;
    case VT_FP_STALL:
        h->stall_id = id;
        h->stall_until_us = f->stall_ms > 0 ? now_us() + (long long)f->stall_ms * 1000 : NO_DEADLINE;
        break;
    case VT_FP_SLICE:
        h->slice_left = f->len > 0 ? f->len : LLONG_MAX;
        h->slice_chunk = f->chunk;
        h->slice_random = f->random;
        h->slice_rng = f->seed;
        h->slice_pause_us = f->pause_us;
        break;
    }
}

/* Bytes half `d` of c may read before its next trigger (LLONG_MAX: none);
 * fires the faults whose trigger is reached. */
static long long conn_check_triggers(vt_faultproxy *fp, fp_conn *c, vt_fp_dir d)
{
    long long room = LLONG_MAX;
    for (int id = 0; id < fp->nfaults && !c->dead; id++) {
        const vt_fault *f = &fp->faults[id];
        if (!fp->armed[id] || f->dir != d || (c->done & (1u << id))) continue;
        long long left = c->base[id] + f->at - c->half[d].bytes;
        if (left <= 0)
            fault_fire(fp, c, id);
        else if (left < room)
            room = left;
    }
    return room;
}

/* ---- reading and writing ---- */

static bool half_can_read(const fp_conn *c, const fp_half *h, long long now)
{
    return !c->dead && !c->cutting && !c->draining && !h->eof && !half_pending(h) &&
           h->stall_id == NO_STALL && now >= h->next_read_us;
}

/* Write what h holds; false if the connection was reset for a write error. */
static bool half_write(vt_faultproxy *fp, fp_conn *c, fp_half *h)
{
    while (half_pending(h)) {
        ssize_t n = send(c->fd[h->dst], h->buf + h->off, h->len - h->off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
        if (n <= 0) {
            conn_reset(fp, c); /* the destination is gone: tell the source the same way */
            return false;
        }
        h->off += (size_t)n;
    }
    h->off = h->len = 0;
    return true;
}

/* How much the next read of h may take: the buffer, the slice's piece, the
 * next trigger. */
static size_t half_read_limit(vt_faultproxy *fp, fp_conn *c, fp_half *h, vt_fp_dir d)
{
    long long limit = conn_check_triggers(fp, c, d);
    if (limit > HALF_BUF) limit = HALF_BUF;
    if (h->slice_left > 0) {
        long long piece = h->slice_random ? 1 + (long long)(next_rng(&h->slice_rng) % h->slice_chunk)
                                          : (long long)h->slice_chunk;
        if (piece < limit) limit = piece;
        if (h->slice_left < limit) limit = h->slice_left;
    }
    return (size_t)limit;
}

static void half_read(vt_faultproxy *fp, fp_conn *c, vt_fp_dir d)
{
    fp_half *h = &c->half[d];
    size_t limit = half_read_limit(fp, c, h, d);
    /* the check may have fired a fault that stops this read */
    if (!half_can_read(c, h, now_us())) return;
    ssize_t n = recv(c->fd[h->src], h->buf, limit, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n < 0) {
        conn_reset(fp, c); /* the source reset: so does its peer */
        return;
    }
    if (n == 0) {
        h->eof = true;
        return;
    }
    h->len = (size_t)n;
    h->bytes += n;
    fp->stats.bytes[d] += n;
    if (h->slice_left > 0) {
        h->slice_left -= n;
        if (h->slice_pause_us > 0) h->next_read_us = now_us() + h->slice_pause_us;
    }
    if (half_write(fp, c, h) && !c->dead) conn_check_triggers(fp, c, d);
}

/* A CUT's drain: discard what a peer still sends until it closes. */
static void drain_read(fp_conn *c, int side)
{
    char scratch[4096];
    ssize_t n = recv(c->fd[side], scratch, sizeof(scratch), 0);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK))
        c->peer_closed[side] = true;
}

/* ---- accepting ---- */

static int connect_target(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct timeval tv = {VT_FP_CONNECT_TIMEOUT_MS / 1000, (VT_FP_CONNECT_TIMEOUT_MS % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    set_nonblocking(fd);
    set_nodelay(fd);
    return fd;
}

static void conns_add(vt_faultproxy *fp, fp_conn *c)
{
    if (fp->nconns == fp->capconns) {
        fp->capconns = fp->capconns ? 2 * fp->capconns : 16;
        fp->conns = realloc(fp->conns, fp->capconns * sizeof(*fp->conns));
        if (!fp->conns) abort();
    }
    fp->conns[fp->nconns++] = c;
}

static void accept_one(vt_faultproxy *fp)
{
    int in = accept4(fp->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (in < 0) return;
    fp->stats.accepted++;
    int out = connect_target(fp->target_port);
    if (out < 0) {
        fp->stats.refused++;
        close_with_reset(in);
        return;
    }
    set_nodelay(in);
    fp_conn *c = calloc(1, sizeof(*c));
    if (!c) abort();
    c->fd[0] = in;
    c->fd[1] = out;
    half_init(&c->half[VT_FP_TO_TARGET], 0, 1);
    half_init(&c->half[VT_FP_FROM_TARGET], 1, 0);
    /* faults for the connections open when they were armed skip this one */
    for (int id = 0; id < fp->nfaults; id++)
        if (fp->faults[id].scope == VT_FP_OPEN) c->done |= 1u << id;
    conns_add(fp, c);
    fp->stats.open++;
}

/* ---- the loop ---- */

static void sweep_dead(vt_faultproxy *fp)
{
    size_t kept = 0;
    for (size_t i = 0; i < fp->nconns; i++) {
        if (fp->conns[i]->dead)
            free(fp->conns[i]);
        else
            fp->conns[kept++] = fp->conns[i];
    }
    fp->nconns = kept;
}

/* Timers: stalls that end, slice pauses, CUT deadlines. Returns the
 * earliest future one (NO_DEADLINE: none). */
static long long run_timers(vt_faultproxy *fp, long long now)
{
    long long next = NO_DEADLINE;
    for (size_t i = 0; i < fp->nconns; i++) {
        fp_conn *c = fp->conns[i];
        if (c->dead) continue;
        if ((c->cutting || c->draining) && now >= c->cut_deadline_us) {
            conn_reset(fp, c); /* a peer that never reads or never closes */
            continue;
        }
        if (c->cutting || c->draining) next = next < c->cut_deadline_us ? next : c->cut_deadline_us;
        for (int d = 0; d < 2; d++) {
            fp_half *h = &c->half[d];
            if (h->stall_id != NO_STALL && h->stall_until_us != NO_DEADLINE) {
                if (now >= h->stall_until_us)
                    h->stall_id = NO_STALL;
                else if (h->stall_until_us < next)
                    next = h->stall_until_us;
            }
            if (h->next_read_us > now && h->next_read_us < next) next = h->next_read_us;
        }
    }
    return next;
}

typedef struct fp_pollset {
    struct pollfd *pfd;
    fp_conn **owner; /* NULL for the listener and the wake pipe */
    int *side;
    size_t n, cap;
} fp_pollset;

static void pollset_add(fp_pollset *ps, int fd, short events, fp_conn *c, int side)
{
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? 2 * ps->cap : 64;
        ps->pfd = realloc(ps->pfd, ps->cap * sizeof(*ps->pfd));
        ps->owner = realloc(ps->owner, ps->cap * sizeof(*ps->owner));
        ps->side = realloc(ps->side, ps->cap * sizeof(*ps->side));
        if (!ps->pfd || !ps->owner || !ps->side) abort();
    }
    ps->pfd[ps->n] = (struct pollfd){.fd = fd, .events = events};
    ps->owner[ps->n] = c;
    ps->side[ps->n] = side;
    ps->n++;
}

static void pollset_build(vt_faultproxy *fp, fp_pollset *ps, long long now)
{
    ps->n = 0;
    pollset_add(ps, fp->wake[0], POLLIN, NULL, 0);
    pollset_add(ps, fp->listen_fd, POLLIN, NULL, 0);
    for (size_t i = 0; i < fp->nconns; i++) {
        fp_conn *c = fp->conns[i];
        if (c->dead) continue;
        for (int side = 0; side < 2; side++) {
            /* side 0 is read by TO_TARGET and written by FROM_TARGET; side 1 the reverse */
            fp_half *reader = &c->half[side == 0 ? VT_FP_TO_TARGET : VT_FP_FROM_TARGET];
            fp_half *writer = &c->half[side == 0 ? VT_FP_FROM_TARGET : VT_FP_TO_TARGET];
            short ev = 0;
            if (c->draining ? !c->peer_closed[side] : half_can_read(c, reader, now)) ev |= POLLIN;
            if (!c->draining && half_pending(writer)) ev |= POLLOUT;
            if (ev) pollset_add(ps, c->fd[side], ev, c, side);
        }
    }
}

static void handle_event(vt_faultproxy *fp, fp_conn *c, int side, short revents)
{
    if (c->dead) return;
    if (c->draining) {
        if (revents & (POLLIN | POLLHUP | POLLERR)) drain_read(c, side);
        return;
    }
    vt_fp_dir rd = side == 0 ? VT_FP_TO_TARGET : VT_FP_FROM_TARGET;
    vt_fp_dir wr = side == 0 ? VT_FP_FROM_TARGET : VT_FP_TO_TARGET;
    if ((revents & (POLLOUT | POLLERR | POLLHUP)) && half_pending(&c->half[wr])) {
        if (!half_write(fp, c, &c->half[wr])) return;
    }
    if ((revents & (POLLIN | POLLERR | POLLHUP)) && half_can_read(c, &c->half[rd], now_us()))
        half_read(fp, c, rd);
}

static void drain_wake_pipe(vt_faultproxy *fp)
{
    char scratch[64];
    while (read(fp->wake[0], scratch, sizeof(scratch)) > 0) {
    }
}

static void *fp_thread(void *arg)
{
    vt_faultproxy *fp = arg;
    fp_pollset ps = {0};
    pthread_mutex_lock(&fp->lock);
    while (!fp->stopping) {
        long long now = now_us();
        for (size_t i = 0; i < fp->nconns; i++) {
            conn_check_triggers(fp, fp->conns[i], VT_FP_TO_TARGET);
            conn_check_triggers(fp, fp->conns[i], VT_FP_FROM_TARGET);
            conn_progress(fp, fp->conns[i]);
        }
        long long next = run_timers(fp, now);
        sweep_dead(fp);
        fp->gen_done = fp->gen_requested;
        pthread_cond_broadcast(&fp->changed);
        pollset_build(fp, &ps, now);

        struct timespec ts, *tsp = NULL;
        if (next != NO_DEADLINE) {
            long long wait = next > now ? next - now : 0;
            ts = (struct timespec){wait / 1000000, (wait % 1000000) * 1000};
            tsp = &ts;
        }
        pthread_mutex_unlock(&fp->lock);
        int ready = ppoll(ps.pfd, ps.n, tsp, NULL);
        pthread_mutex_lock(&fp->lock);
        if (ready <= 0) continue;
        if (ps.pfd[0].revents) drain_wake_pipe(fp);
        if (ps.pfd[1].revents & POLLIN) accept_one(fp);
        for (size_t i = 2; i < ps.n; i++)
            if (ps.pfd[i].revents) handle_event(fp, ps.owner[i], ps.side[i], ps.pfd[i].revents);
        for (size_t i = 2; i < ps.n; i++)
            conn_progress(fp, ps.owner[i]);
    }
    for (size_t i = 0; i < fp->nconns; i++)
        conn_reset(fp, fp->conns[i]);
    sweep_dead(fp);
    pthread_mutex_unlock(&fp->lock);
    free(ps.pfd);
    free(ps.owner);
    free(ps.side);
    return NULL;
}

/* ---- the API ---- */

static int listen_loopback(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, LISTEN_BACKLOG) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

vt_faultproxy *vt_faultproxy_start(int target_port)
{
    vt_ignore_sigpipe();
    vt_faultproxy *fp = calloc(1, sizeof(*fp));
    if (!fp) abort();
    fp->target_port = target_port;
    fp->listen_fd = listen_loopback(&fp->port);
    if (fp->listen_fd < 0) {
        fprintf(stderr, "vt: faultproxy: cannot listen on 127.0.0.1: %s\n", strerror(errno));
        free(fp);
        return NULL;
    }
    if (pipe2(fp->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        fprintf(stderr, "vt: faultproxy: pipe: %s\n", strerror(errno));
        close(fp->listen_fd);
        free(fp);
        return NULL;
    }
    pthread_mutex_init(&fp->lock, NULL);
    pthread_cond_init(&fp->changed, NULL);
    if (pthread_create(&fp->thread, NULL, fp_thread, fp) != 0) {
        fprintf(stderr, "vt: faultproxy: cannot start its thread\n");
        close(fp->listen_fd);
        close(fp->wake[0]);
        close(fp->wake[1]);
        free(fp);
        return NULL;
    }
    return fp;
}

int vt_faultproxy_port(const vt_faultproxy *fp)
{
    return fp->port;
}

static bool fault_valid(const vt_fault *f)
{
    if (f->at < 0 || (f->dir != VT_FP_TO_TARGET && f->dir != VT_FP_FROM_TARGET)) return false;
    if (f->scope != VT_FP_FIRST && f->scope != VT_FP_EACH && f->scope != VT_FP_OPEN) return false;
    switch (f->action) {
    case VT_FP_CUT:
    case VT_FP_RESET:
        return true;
    case VT_FP_STALL:
        return f->stall_ms >= 0;
    case VT_FP_SLICE:
        return f->chunk >= 1 && f->pause_us >= 0 && f->len >= 0;
    }
    return false;
}

/* Under the lock: wake the thread and wait until it has run a loop
 * iteration that saw the change (fired at == 0 faults, ended stalls). */
static void sync_with_thread(vt_faultproxy *fp)
{
    long long gen = ++fp->gen_requested;
    wake_thread(fp);
    while (fp->gen_done < gen && !fp->stopping)
        pthread_cond_wait(&fp->changed, &fp->lock);
}

int vt_faultproxy_arm(vt_faultproxy *fp, const vt_fault *f)
{
    if (!fault_valid(f)) {
        fprintf(stderr, "vt: faultproxy: a fault that makes no sense (action %d, at %lld)\n", f->action,
                f->at);
        return -1;
    }
    pthread_mutex_lock(&fp->lock);
    if (fp->nfaults == VT_FP_MAX_FAULTS) {
        pthread_mutex_unlock(&fp->lock);
        fprintf(stderr, "vt: faultproxy: more than %d faults armed\n", VT_FP_MAX_FAULTS);
        return -1;
    }
    int id = fp->nfaults++;
    fp->faults[id] = *f;
    fp->armed[id] = true;
    for (size_t i = 0; i < fp->nconns; i++)
        fp->conns[i]->base[id] = fp->conns[i]->half[f->dir].bytes;
    sync_with_thread(fp);
    pthread_mutex_unlock(&fp->lock);
    return id;
}

static bool id_valid(const vt_faultproxy *fp, int id)
{
    return id >= 0 && id < fp->nfaults;
}

void vt_faultproxy_disarm(vt_faultproxy *fp, int id)
{
    pthread_mutex_lock(&fp->lock);
    if (id_valid(fp, id)) fp->armed[id] = false;
    pthread_mutex_unlock(&fp->lock);
}

void vt_faultproxy_release(vt_faultproxy *fp, int id)
{
    pthread_mutex_lock(&fp->lock);
    if (id_valid(fp, id)) {
        fp->armed[id] = false;
        for (size_t i = 0; i < fp->nconns; i++)
            for (int d = 0; d < 2; d++)
                if (fp->conns[i]->half[d].stall_id == id) fp->conns[i]->half[d].stall_id = NO_STALL;
        sync_with_thread(fp);
    }
    pthread_mutex_unlock(&fp->lock);
}

long long vt_faultproxy_fired(vt_faultproxy *fp, int id)
{
    pthread_mutex_lock(&fp->lock);
    long long n = id_valid(fp, id) ? fp->fired[id] : 0;
    pthread_mutex_unlock(&fp->lock);
    return n;
}

bool vt_faultproxy_wait_fired(vt_faultproxy *fp, int id, long long n, int timeout_ms)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&fp->lock);
    bool ok = id_valid(fp, id);
    while (ok && fp->fired[id] < n)
        if (pthread_cond_timedwait(&fp->changed, &fp->lock, &deadline) == ETIMEDOUT) break;
    ok = ok && fp->fired[id] >= n;
    pthread_mutex_unlock(&fp->lock);
    return ok;
}

long long vt_faultproxy_held(vt_faultproxy *fp, int id)
{
    long long held = 0;
    pthread_mutex_lock(&fp->lock); /* the thread closes sockets only under it */
    if (id_valid(fp, id))
        for (size_t i = 0; i < fp->nconns; i++) {
            fp_conn *c = fp->conns[i];
            for (int d = 0; d < 2 && !c->dead; d++) {
                int unread = 0;
                if (c->half[d].stall_id == id && ioctl(c->fd[c->half[d].src], FIONREAD, &unread) == 0)
                    held += unread;
            }
        }
    pthread_mutex_unlock(&fp->lock);
    return held;
}

vt_fp_stats vt_faultproxy_stats(vt_faultproxy *fp)
{
    pthread_mutex_lock(&fp->lock);
    vt_fp_stats s = fp->stats;
    pthread_mutex_unlock(&fp->lock);
    return s;
}

void vt_faultproxy_stop(vt_faultproxy *fp)
{
    if (!fp) return;
    pthread_mutex_lock(&fp->lock);
    fp->stopping = true;
    pthread_cond_broadcast(&fp->changed);
    wake_thread(fp);
    pthread_mutex_unlock(&fp->lock);
    pthread_join(fp->thread, NULL);
    close(fp->listen_fd);
    close(fp->wake[0]);
    close(fp->wake[1]);
    pthread_mutex_destroy(&fp->lock);
    pthread_cond_destroy(&fp->changed);
    free(fp->conns);
    free(fp);
}

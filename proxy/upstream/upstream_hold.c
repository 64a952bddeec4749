/* upstream_hold.c - the batch hold's decision and its wake-up (what it is
 * and why: upstream_internal.h, "the batch hold of a shared connection"). */
#include "proxy/upstream/upstream_internal.h"

#include <sys/timerfd.h>
#include <unistd.h>

#include "proxy/net/outq.h"

/* One timerfd for the process: only the loop's next iteration matters
 * (the prepare phase writes every shared queue whose hold is over), so the
 * earliest deadline is all it needs to keep. */
static struct {
    int fd; /* -1: not made yet (or the kernel refused: then nothing waits) */
    int failed;
    uv_poll_t poll;
    uint64_t armed_until; /* uv_hrtime() of the deadline set, 0 = none */
} up_hold_timer = {-1, 0, {0}, 0};

static void up_hold_on_timer(uv_poll_t *h, int status, int events)
{
    (void)h;
    (void)status;
    (void)events;
    uint64_t expirations;
    if (read(up_hold_timer.fd, &expirations, sizeof(expirations)) < 0) {
        /* EAGAIN: already read; the wake-up was all it was for */
    }
    up_hold_timer.armed_until = 0;
}

static int up_hold_timer_open(uv_loop_t *loop)
{
    if (up_hold_timer.fd >= 0) return 0;
    if (up_hold_timer.failed) return -1;
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (fd < 0 || uv_poll_init(loop, &up_hold_timer.poll, fd) < 0) {
        if (fd >= 0) close(fd);
        up_hold_timer.failed = 1;
        return -1;
    }
    up_hold_timer.fd = fd;
    uv_poll_start(&up_hold_timer.poll, UV_READABLE, up_hold_on_timer);
    /* It never keeps the loop alive by itself: a held batch belongs to a
     * shared connection, which does. */
    uv_unref((uv_handle_t *)&up_hold_timer.poll);
    return 0;
}

static void up_hold_arm(uint64_t deadline, uint64_t now)
{
    if (up_hold_timer.armed_until && up_hold_timer.armed_until <= deadline) return;
    uint64_t ns = deadline - now;
    struct itimerspec its = {{0, 0}, {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)}};
    if (timerfd_settime(up_hold_timer.fd, 0, &its, NULL) == 0) up_hold_timer.armed_until = deadline;
}

int up_hold_wait(upstream_conn *up, size_t early_bytes)
{
    uint64_t hold_ns = (uint64_t)up->srv->conf.shared_batch_hold * 1000u;
    size_t queued = outq_size(&up->out);
    if (hold_ns == 0 || queued == 0 || queued >= early_bytes) return 0;
    unsigned recent = up->hold_prev > up->hold_cur ? up->hold_prev : up->hold_cur;
    if (recent < UP_HOLD_MIN_CLIENTS || recent < 2 * up->hold_batch_clients) return 0;
    uint64_t now = uv_hrtime();
    if (up->hold_t0 == 0) {
        up->hold_t0 = now;
        up->srv->stats.shared_batch_holds++;
    }
    if (now - up->hold_t0 >= hold_ns) return 0;
    if (up_hold_timer_open(up->srv->loop) < 0) return 0;
    up_hold_arm(up->hold_t0 + hold_ns, now);
    return 1;
}

static void up_hold_on_close(uv_handle_t *h)
{
    (void)h;
    close(up_hold_timer.fd);
    up_hold_timer.fd = -1;
    up_hold_timer.armed_until = 0;
}

void up_hold_close(void)
{
    if (up_hold_timer.fd < 0 || uv_is_closing((uv_handle_t *)&up_hold_timer.poll)) return;
    uv_close((uv_handle_t *)&up_hold_timer.poll, up_hold_on_close);
}

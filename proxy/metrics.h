/* metrics.h - what the proxy counts beyond stats.h, for the admin HTTP
 * endpoint (http_admin.h: Prometheus text at /metrics) and VERBPROXY INFO:
 * per command calls and error replies, the latency histogram per command
 * family, connection refusals and upstream connect failures by reason,
 * bytes in and out, and the readiness probe's verdict (readiness.h).
 *
 * Cost on the hot path: a command's id is found once (cmdid.h) and kept in
 * its pending reply with the time its bytes were read; counting is an array
 * increment by id. The clock is read once per client read batch
 * (metrics_read_clock) and once per batch of replies (metrics_clock, cached
 * until the client's output is flushed or the loop waits again), never per
 * command, and nothing is allocated. With metrics-port 0 nothing is timed
 * (`timing` 0: slots carry no time); calls and errors are still counted,
 * for VERBPROXY INFO.
 *
 * One per process, in vp_server; plain integers bumped on the loop thread. */
#ifndef VP_METRICS_H
#define VP_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "proxy/cmdid.h"

struct upstream_conn;

/* The histogram's upper bounds, in seconds: from a cached GET over
 * loopback (tens of microseconds) to a blocking command's seconds. */
#define METRICS_NBOUNDS 17
extern const uint64_t metrics_bounds_ns[METRICS_NBOUNDS];
extern const char *const metrics_bounds_text[METRICS_NBOUNDS];

typedef struct metrics_hist {
    unsigned long long bucket[METRICS_NBOUNDS + 1]; /* not cumulative; the last is above every bound */
    unsigned long long count;
    unsigned long long sum_ns;
} metrics_hist;

/* Why an upstream connect failed (verbproxy_upstream_connect_failures_total). */
typedef enum metrics_fail {
    METRICS_FAIL_REFUSED,
    METRICS_FAIL_TIMEOUT,
    METRICS_FAIL_TLS,
    METRICS_FAIL_AUTH,
    METRICS_FAIL_RESOLVE,
    METRICS_FAIL_OTHER,
    METRICS_FAIL_N
} metrics_fail;
extern const char *const metrics_fail_names[METRICS_FAIL_N];

#define READY_REASON_MAX 256

/* The readiness check's state and its latest verdict (run by
 * proxy/ops/readiness.c; /readyz and verbproxy_up read it). */
typedef struct ready_state {
    int checked;                   /* a check has completed */
    int ok;                        /* the latest completed check passed */
    char reason[READY_REASON_MAX]; /* why not ("" when ok) */
    struct upstream_conn *conn;    /* the probe's connection, NULL when none */
    uint64_t conn_opened;          /* loop time (ms) it was opened */
    int loads_pending;      /* fresh: its SCRIPT LOADs go once the PING (behind the HELLO) is answered */
    uint64_t started;       /* loop time of the check in flight (0: none) */
    int expected, answered; /* replies the check waits for, and got */
    unsigned long long checks, failures;
} ready_state;

typedef struct vp_metrics {
    cmdid_table ids;
    unsigned long long *calls;  /* [ids.count] commands dispatched */
    unsigned long long *failed; /* [ids.count] answered with an error (Redis's or the proxy's) */
    unsigned long long *ns;     /* [ids.count] nanoseconds from read to reply, summed (timing only) */
    metrics_hist *hist;         /* [ids.nfamilies] (timing only) */
    int timing;                 /* metrics-port is set: durations are measured */
    uint64_t now;               /* the cached clock (uv_hrtime) ... */
    int now_valid;              /* ... while this batch lasts */
    /* Refusals not in stats.h (stats.rejected_connections counts
     * maxclients and no-descriptor refusals together). */
    unsigned long long rejected_protected_mode;
    unsigned long long rejected_no_descriptor;
    unsigned long long connect_failures[METRICS_FAIL_N];
    unsigned long long net_input_bytes;  /* read from clients */
    unsigned long long net_output_bytes; /* queued to clients (written unless the client left first) */
    double start_time;                   /* Unix time the process started, seconds */
    uint64_t start_hr;                   /* uv_hrtime then */
    ready_state ready;
    int admin_connections; /* the admin endpoint's open connections (ops/http_admin.c keeps it) */
} vp_metrics;

/* At start-up, once the verb table is built. 0, or -1 with a reason. */
int metrics_init(vp_metrics *m, const verb_table *verbs, int timing, char *err, size_t errlen);
void metrics_free(vp_metrics *m);
/* A reload replaced the verb table (reload.c): number the commands again
 * and carry every count over by name (Redis's commands, the verbs both
 * tables have, `other`; histograms by family name). Call it while the old
 * table is still alive: the old numbering names its verbs. A reply in
 * flight across the reload is counted under whatever its old id names now
 * (never outside the arrays). 0, or -1 with a reason (nothing changed). */
int metrics_verbs_replaced(vp_metrics *m, const verb_table *verbs, char *err, size_t errlen);

/* The clock for a read batch: read now (and cached for the replies this
 * batch makes); 0 when nothing is timed. */
static inline uint64_t metrics_read_clock(vp_metrics *m)
{
    if (!m->timing) return 0;
    m->now = uv_hrtime();
    m->now_valid = 1;
    return m->now;
}

/* The clock for a reply going out: read once per batch. */
static inline uint64_t metrics_clock(vp_metrics *m)
{
    if (!m->now_valid) {
        m->now = uv_hrtime();
        m->now_valid = 1;
    }
    return m->now;
}

/* A batch is over (its output flushed, or the loop is about to wait). */
static inline void metrics_clock_expire(vp_metrics *m)
{
    m->now_valid = 0;
}

static inline void metrics_count(vp_metrics *m, unsigned id)
{
    if (id < (unsigned)m->ids.count) m->calls[id]++;
}

void metrics_observe(vp_metrics *m, unsigned id, uint64_t ns);

/* The reply to a command `id` read at t0 (0: not timed) goes out; `err`:
 * it is an error reply. */
static inline void metrics_reply_done(vp_metrics *m, unsigned id, int err, uint64_t t0)
{
    if (id >= (unsigned)m->ids.count) return; /* CMDID_NONE */
    if (err) m->failed[id]++;
    if (t0) {
        uint64_t now = metrics_clock(m);
        metrics_observe(m, id, now > t0 ? now - t0 : 0);
    }
}

/* Does a reply starting with byte c report an error (RESP2 '-', RESP3 '!')? */
static inline int metrics_is_error(char c)
{
    return c == '-' || c == '!';
}

/* An upstream connect failed with this reason (upstream.c's text); `authing`:
 * it failed while our AUTH was being answered. */
void metrics_connect_failed(vp_metrics *m, const char *why, int authing);

/* Process figures, cheap to read (Prometheus client libraries' names). */
typedef struct metrics_process {
    double cpu_seconds;
    long long resident_bytes; /* -1: unknown */
    long long open_fds;       /* -1: unknown */
    long long max_fds;
} metrics_process;
void metrics_process_read(metrics_process *p);

#endif

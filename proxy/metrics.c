#include "proxy/metrics.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <unistd.h>

#include "proxy/buffer.h"

const uint64_t metrics_bounds_ns[METRICS_NBOUNDS] = {
    50000,    100000,    250000,    500000,    1000000,    2500000,     5000000,     10000000,    25000000,
    50000000, 100000000, 250000000, 500000000, 1000000000, 2500000000u, 5000000000u, 10000000000u};
const char *const metrics_bounds_text[METRICS_NBOUNDS] = {
    "0.00005", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025",
    "0.05",    "0.1",    "0.25",    "0.5",    "1",     "2.5",    "5",     "10"};

const char *const metrics_fail_names[METRICS_FAIL_N] = {"refused", "timeout", "tls",
                                                        "auth",    "resolve", "other"};

/* The per-command counts and per-family histograms of m->ids' numbering,
 * zeroed. */
static void metrics_counts_alloc(vp_metrics *m)
{
    size_t n = (size_t)m->ids.count;
    m->calls = calloc(n, sizeof(*m->calls));
    m->failed = calloc(n, sizeof(*m->failed));
    m->ns = calloc(n, sizeof(*m->ns));
    m->hist = calloc((size_t)m->ids.nfamilies, sizeof(*m->hist));
    if (!m->calls || !m->failed || !m->ns || !m->hist) abort();
}

/* ... and the numbering with them. */
static void metrics_counts_free(vp_metrics *m)
{
    free(m->calls);
    free(m->failed);
    free(m->ns);
    free(m->hist);
    cmdid_free(&m->ids);
    m->calls = m->failed = m->ns = NULL;
    m->hist = NULL;
}

int metrics_init(vp_metrics *m, const verb_table *verbs, int timing, char *err, size_t errlen)
{
    memset(m, 0, sizeof(*m));
    if (cmdid_build(&m->ids, verbs, err, errlen) < 0) return -1;
    metrics_counts_alloc(m);
    m->timing = timing;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    m->start_time = (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
    m->start_hr = uv_hrtime();
    return 0;
}

void metrics_free(vp_metrics *m)
{
    metrics_counts_free(m);
}

int metrics_verbs_replaced(vp_metrics *m, const verb_table *verbs, char *err, size_t errlen)
{
    vp_metrics fresh = {0};
    if (cmdid_build(&fresh.ids, verbs, err, errlen) < 0) return -1;
    metrics_counts_alloc(&fresh);
    const cmdid_table *t = &fresh.ids, *o = &m->ids;
    for (int id = 0; id < o->count; id++) {
        int to = cmdid_lookup(t, o->name[id], strlen(o->name[id]));
        /* a verb that is gone has no series any more (not added to `other`) */
        if (to == t->other && id != o->other) continue;
        fresh.calls[to] += m->calls[id];
        fresh.failed[to] += m->failed[id];
        fresh.ns[to] += m->ns[id];
    }
    for (int f = 0; f < t->nfamilies; f++) {
        for (int g = 0; g < o->nfamilies; g++) {
            if (t->family_is_verb[f] == o->family_is_verb[g] &&
                strcmp(t->family_name[f], o->family_name[g]) == 0) {
                fresh.hist[f] = m->hist[g];
                break;
            }
        }
    }
    metrics_counts_free(m);
    m->ids = fresh.ids;
    m->calls = fresh.calls;
    m->failed = fresh.failed;
    m->ns = fresh.ns;
    m->hist = fresh.hist;
    return 0;
}

void metrics_observe(vp_metrics *m, unsigned id, uint64_t ns)
{
    metrics_hist *h = &m->hist[m->ids.family[id]];
    int b = 0;
    while (b < METRICS_NBOUNDS && ns > metrics_bounds_ns[b])
        b++;
    h->bucket[b]++;
    h->count++;
    h->sum_ns += ns;
    m->ns[id] += ns;
}

void metrics_connect_failed(vp_metrics *m, const char *why, int authing)
{
    metrics_fail r;
    if (strstr(why, "timed out"))
        r = METRICS_FAIL_TIMEOUT;
    else if (strncmp(why, "TLS", 3) == 0)
        r = METRICS_FAIL_TLS;
    else if (authing)
        r = METRICS_FAIL_AUTH;
    else if (strstr(why, "refused") || strstr(why, "no such file"))
        r = METRICS_FAIL_REFUSED; /* (a unix socket nobody listens on: ENOENT) */
    else if (strstr(why, "resolve"))
        r = METRICS_FAIL_RESOLVE;
    else
        r = METRICS_FAIL_OTHER;
    m->connect_failures[r]++;
}

static long long count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    long long n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n - 1; /* the directory's own descriptor */
}

void metrics_process_read(metrics_process *p)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    p->cpu_seconds = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                     (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    p->resident_bytes = -1;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        long long size, rss;
        if (fscanf(f, "%lld %lld", &size, &rss) == 2) p->resident_bytes = rss * sysconf(_SC_PAGESIZE);
        fclose(f);
    }
    p->open_fds = count_fds();
    struct rlimit rl;
    p->max_fds = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? (long long)rl.rlim_cur : -1;
}

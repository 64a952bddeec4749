/* cluster_merge.c - one reply from a split or fanned-out command's parts
 * (cluster_merge.h). */
#include "proxy/route/cluster_merge.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/resp_frame.h"

/* A part whose reply is not what its command answers (never from Redis;
 * said rather than guessed at). */
static const char unexpected[] = "-ERR verbproxy: unexpected reply from a cluster node\r\n";

typedef struct cmerge_part {
    vp_buf reply;
    int done;
} cmerge_part;

struct cmerge {
    rplan_merge rule;
    int nparts, owed;
    int nkeys;
    int *key_part, *key_pos; /* MGET */
    unsigned scan_node, scan_nnodes;
    cmerge_part parts[];
};

cmerge *cmerge_new(rplan_merge rule, int nparts, int nkeys, const int *key_part, const int *key_pos)
{
    cmerge *m = vp_malloc(sizeof(*m) + (size_t)nparts * sizeof(m->parts[0]));
    memset(m, 0, sizeof(*m) + (size_t)nparts * sizeof(m->parts[0]));
    m->rule = rule;
    m->nparts = m->owed = nparts;
    if (rule == RPLAN_MERGE_MGET && nkeys > 0) {
        m->nkeys = nkeys;
        m->key_part = vp_malloc(2 * (size_t)nkeys * sizeof(int));
        m->key_pos = m->key_part + nkeys;
        memcpy(m->key_part, key_part, (size_t)nkeys * sizeof(int));
        memcpy(m->key_pos, key_pos, (size_t)nkeys * sizeof(int));
    }
    return m;
}

void cmerge_set_scan(cmerge *m, unsigned node, unsigned nnodes)
{
    m->scan_node = node;
    m->scan_nnodes = nnodes;
}

int cmerge_add(cmerge *m, int part, const char *p, size_t n, int done)
{
    if (part < 0 || part >= m->nparts || m->parts[part].done) return m->owed == 0;
    if (p && n) vp_buf_append(&m->parts[part].reply, p, n);
    if (done) {
        m->parts[part].done = 1;
        m->owed--;
    }
    return m->owed == 0;
}

int cmerge_owed(const cmerge *m)
{
    return m->owed;
}

void cmerge_free(cmerge *m)
{
    if (!m) return;
    for (int i = 0; i < m->nparts; i++)
        vp_buf_free(&m->parts[i].reply);
    free(m->key_part);
    free(m);
}

/* ---- reading the parts' replies ---- */

typedef struct span {
    const char *p;
    size_t n;
} span;

static span part_reply(const cmerge *m, int i)
{
    return (span){m->parts[i].reply.data, m->parts[i].reply.len};
}

static int is_error(span r)
{
    return r.n > 0 && r.p[0] == '-';
}

/* The number after a type byte, up to its CRLF: 0 and *v, *hdr (bytes of
 * the line), or -1. */
static int header_number(span r, char type, long long *v, size_t *hdr)
{
    if (r.n < 4 || r.p[0] != type) return -1;
    const char *cr = memchr(r.p, '\r', r.n);
    if (!cr || (size_t)(cr - r.p) + 1 >= r.n || cr[1] != '\n') return -1;
    char tmp[32];
    size_t len = (size_t)(cr - r.p) - 1;
    if (len == 0 || len >= sizeof(tmp)) return -1;
    memcpy(tmp, r.p + 1, len);
    tmp[len] = '\0';
    char *end;
    *v = strtoll(tmp, &end, 10);
    if (*end) return -1;
    *hdr = (size_t)(cr - r.p) + 2;
    return 0;
}

static int integer_of(span r, long long *v)
{
    size_t hdr;
    return header_number(r, ':', v, &hdr) == 0 && hdr == r.n ? 0 : -1;
}

/* The bytes of the one value at r's start (0: not a whole value). */
static size_t value_len(span r)
{
    resp_framer f;
    resp_frame_reset(&f);
    size_t used = 0;
    return resp_frame_scan(&f, r.p, r.n, &used) == RESP_FRAME_DONE ? used : 0;
}

/* An array reply's elements: 0 with *count and *body (the bytes after the
 * header, which hold exactly the elements), or -1. */
static int array_of(span r, long long *count, span *body)
{
    size_t hdr;
    if (header_number(r, '*', count, &hdr) < 0 || *count < 0) return -1;
    *body = (span){r.p + hdr, r.n - hdr};
    return 0;
}

/* The first part whose reply is an error, or -1. */
static int first_error(const cmerge *m)
{
    for (int i = 0; i < m->nparts; i++)
        if (is_error(part_reply(m, i))) return i;
    return -1;
}

static void put_part(const cmerge *m, int i, vp_buf *out)
{
    span r = part_reply(m, i);
    vp_buf_append(out, r.p, r.n);
}

static void put_unexpected(vp_buf *out)
{
    vp_buf_append(out, unexpected, sizeof(unexpected) - 1);
}

/* ---- the rules ---- */

/* MGET: each part an array of its keys' values, in their order. */
static void merge_mget(const cmerge *m, vp_buf *out)
{
    /* Where each part's values start among all of them, in part order. */
    int *first = vp_malloc(((size_t)m->nparts + 1) * sizeof(int));
    span *vals = vp_malloc((size_t)m->nkeys * sizeof(span));
    memset(first, 0, ((size_t)m->nparts + 1) * sizeof(int));
    for (int k = 0; k < m->nkeys; k++)
        first[m->key_part[k] + 1]++;
    for (int i = 0; i < m->nparts; i++)
        first[i + 1] += first[i];
    for (int i = 0; i < m->nparts; i++) {
        span r = part_reply(m, i), body;
        long long count;
        int want = first[i + 1] - first[i];
        int ok = !is_error(r) && array_of(r, &count, &body) == 0 && count == want;
        for (int j = 0; j < want; j++) {
            size_t len = ok ? value_len(body) : 0;
            if (!len) ok = 0;
            if (!ok) {
                /* the part's error (or ours) in each of its keys' places */
                vals[first[i] + j] = is_error(r) ? r : (span){unexpected, sizeof(unexpected) - 1};
                continue;
            }
            vals[first[i] + j] = (span){body.p, len};
            body.p += len;
            body.n -= len;
        }
    }
    vp_buf_resp_array(out, m->nkeys);
    for (int k = 0; k < m->nkeys; k++) {
        span v = vals[first[m->key_part[k]] + m->key_pos[k]];
        vp_buf_append(out, v.p, v.n);
    }
    free(vals);
    free(first);
}

/* Integers: summed, or the smallest / largest. */
static void merge_integers(const cmerge *m, vp_buf *out)
{
    long long acc = 0;
    for (int i = 0; i < m->nparts; i++) {
        long long v;
        if (integer_of(part_reply(m, i), &v) < 0) {
            put_unexpected(out);
            return;
        }
        if (m->rule == RPLAN_MERGE_SUM)
            acc += v;
        else if (i == 0 || (m->rule == RPLAN_MERGE_MIN ? v < acc : v > acc))
            acc = v;
    }
    vp_buf_resp_integer(out, acc);
}

/* KEYS: the arrays one after the other, in node order. */
static void merge_concat(const cmerge *m, vp_buf *out)
{
    long long total = 0;
    for (int i = 0; i < m->nparts; i++) {
        long long count;
        span body;
        if (array_of(part_reply(m, i), &count, &body) < 0) {
            put_unexpected(out);
            return;
        }
        total += count;
    }
    vp_buf_resp_array(out, total);
    for (int i = 0; i < m->nparts; i++) {
        long long count;
        span body = {NULL, 0};
        if (array_of(part_reply(m, i), &count, &body) == 0) vp_buf_append(out, body.p, body.n);
    }
}

/* SCRIPT EXISTS: arrays of :0/:1, one per sha; AND (every node has it) or
 * OR. */
static void merge_logical(const cmerge *m, vp_buf *out)
{
    long long count0 = -1;
    span *body = vp_malloc((size_t)m->nparts * sizeof(span));
    for (int i = 0; i < m->nparts; i++) {
        long long count;
        if (array_of(part_reply(m, i), &count, &body[i]) < 0 || (count0 >= 0 && count != count0)) {
            put_unexpected(out);
            free(body);
            return;
        }
        count0 = count;
    }
    size_t start = out->len;
    vp_buf_resp_array(out, count0);
    for (long long j = 0; j < count0; j++) {
        int acc = m->rule == RPLAN_MERGE_AND;
        for (int i = 0; i < m->nparts; i++) {
            size_t len = value_len(body[i]);
            long long v;
            if (!len || integer_of((span){body[i].p, len}, &v) < 0) {
                out->len = start;
                put_unexpected(out);
                free(body);
                return;
            }
            body[i].p += len;
            body[i].n -= len;
            if (m->rule == RPLAN_MERGE_AND)
                acc &= v != 0;
            else
                acc |= v != 0;
        }
        vp_buf_resp_integer(out, acc);
    }
    free(body);
}

static int is_nil(span r)
{
    return (r.n == 5 && memcmp(r.p, "$-1\r\n", 5) == 0) || (r.n == 3 && memcmp(r.p, "_\r\n", 3) == 0);
}

/* SCRIPT KILL (ONE_OK): the first success. RANDOMKEY (ANY): the first key,
 * nil when every node is empty. Else the first error. */
static void merge_first_good(const cmerge *m, vp_buf *out)
{
    int nil = -1;
    for (int i = 0; i < m->nparts; i++) {
        span r = part_reply(m, i);
        if (is_error(r)) continue;
        if (m->rule == RPLAN_MERGE_ANY && is_nil(r)) {
            if (nil < 0) nil = i;
            continue;
        }
        put_part(m, i, out);
        return;
    }
    int e = first_error(m);
    put_part(m, e >= 0 ? e : nil >= 0 ? nil : 0, out);
}

/* SCAN: [cursor, keys] from one node; the cursor the client gets carries
 * the node. */
static void merge_scan(const cmerge *m, vp_buf *out)
{
    span r = part_reply(m, 0), body;
    long long count, clen;
    size_t hdr;
    if (array_of(r, &count, &body) < 0 || count != 2 || header_number(body, '$', &clen, &hdr) < 0 ||
        clen < 1 || clen > 20 || hdr + (size_t)clen + 2 > body.n) {
        put_unexpected(out);
        return;
    }
    char digits[24];
    memcpy(digits, body.p + hdr, (size_t)clen);
    digits[clen] = '\0';
    char *end;
    unsigned long long node_cursor = strtoull(digits, &end, 10);
    uint64_t cursor;
    if (*end || rplan_scan_encode(m->scan_node, node_cursor, m->scan_nnodes, &cursor) < 0) {
        vp_buf_appendf(out, "-ERR verbproxy: a cluster node's SCAN cursor %s is too big to carry\r\n",
                       digits);
        return;
    }
    char cur[24];
    int cn = snprintf(cur, sizeof(cur), "%" PRIu64, cursor);
    vp_buf_resp_array(out, 2);
    vp_buf_resp_bulk(out, cur, (size_t)cn);
    size_t skip = hdr + (size_t)clen + 2;
    vp_buf_append(out, body.p + skip, body.n - skip);
}

void cmerge_result(const cmerge *m, vp_buf *out)
{
    switch (m->rule) {
    case RPLAN_MERGE_MGET:
        merge_mget(m, out);
        return;
    case RPLAN_MERGE_ONE_OK:
    case RPLAN_MERGE_ANY:
        merge_first_good(m, out);
        return;
    default:
        break;
    }
    int e = first_error(m);
    if (e >= 0) {
        put_part(m, e, out);
        return;
    }
    switch (m->rule) {
    case RPLAN_MERGE_SUM:
    case RPLAN_MERGE_MIN:
    case RPLAN_MERGE_MAX:
        merge_integers(m, out);
        return;
    case RPLAN_MERGE_CONCAT:
        merge_concat(m, out);
        return;
    case RPLAN_MERGE_AND:
    case RPLAN_MERGE_OR:
        merge_logical(m, out);
        return;
    case RPLAN_MERGE_SCAN:
        merge_scan(m, out);
        return;
    case RPLAN_MERGE_ALL_OK:
    case RPLAN_MERGE_NONE:
    default:
        put_part(m, 0, out); /* they agree (+OK, SCRIPT LOAD's sha1) */
        return;
    }
}

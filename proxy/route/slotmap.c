/* slotmap.c - the slot map and its CLUSTER SLOTS parser (slotmap.h). */
#include "proxy/route/slotmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/resp_frame.h"

void slotmap_init(slotmap *m)
{
    memset(m, 0, sizeof(*m));
    for (int i = 0; i < HASHSLOT_COUNT; i++)
        m->slot[i] = SLOTMAP_NONE;
}

void slotmap_free(slotmap *m)
{
    free(m->nodes);
    slotmap_init(m);
}

void slotmap_replace(slotmap *a, slotmap *b)
{
    free(a->nodes);
    memcpy(a, b, sizeof(*a));
    slotmap_init(b);
}

int slotmap_find(const slotmap *m, const char *host, size_t hostlen, int port)
{
    for (int i = 0; i < m->nnodes; i++)
        if (m->nodes[i].port == port && strlen(m->nodes[i].host) == hostlen &&
            memcmp(m->nodes[i].host, host, hostlen) == 0)
            return i;
    return -1;
}

int slotmap_add(slotmap *m, const char *host, size_t hostlen, int port)
{
    int i = slotmap_find(m, host, hostlen, port);
    if (i >= 0) return i;
    if (hostlen >= SLOTMAP_HOST_MAX || m->nnodes >= SLOTMAP_NONE) return -1;
    if (m->nnodes == m->cap) {
        int cap = m->cap ? m->cap * 2 : 8;
        slotmap_node *n = realloc(m->nodes, (size_t)cap * sizeof(*n));
        if (!n) return -1;
        m->nodes = n;
        m->cap = cap;
    }
    slotmap_node *n = &m->nodes[m->nnodes];
    memset(n, 0, sizeof(*n));
    memcpy(n->host, host, hostlen);
    n->port = port;
    n->primary = -1;
    return m->nnodes++;
}

int slotmap_moved(slotmap *m, int slot, const char *host, size_t hostlen, int port)
{
    if (slot < 0 || slot >= HASHSLOT_COUNT) return -1;
    int i = slotmap_add(m, host, hostlen, port);
    if (i < 0) return -1;
    m->nodes[i].primary = -1; /* it serves a slot: a primary now (a failover) */
    if (m->slot[slot] == SLOTMAP_NONE) m->covered++;
    m->slot[slot] = (uint16_t)i;
    return i;
}

/* ---- a small reader over one complete reply's bytes ---- */

typedef struct rd {
    const char *p;
    size_t len, off;
    const char *err;
} rd;

/* A header line: its type byte and the integer after it. */
static int header(rd *r, char *type, long long *val)
{
    if (r->off >= r->len) return r->err = "truncated reply", 0;
    const char *s = r->p + r->off, *end = memchr(s, '\r', r->len - r->off);
    if (!end || (size_t)(end - r->p) + 1 >= r->len || end[1] != '\n') return r->err = "truncated reply", 0;
    *type = s[0];
    long long v = 0;
    int neg = 0;
    const char *d = s + 1;
    if (*type == '-') return r->err = "an error reply", 0;
    if (d < end && *d == '-') neg = 1, d++;
    if (d == end && *type != '_') return r->err = "bad number", 0;
    for (; d < end; d++) {
        if (*d < '0' || *d > '9' || v > 1000000000000LL) return r->err = "bad number", 0;
        v = v * 10 + (*d - '0');
    }
    *val = neg ? -v : v;
    r->off = (size_t)(end + 2 - r->p);
    return 1;
}

/* Skip one value of any type (the node metadata we do not read). */
static int skip(rd *r)
{
    resp_framer f;
    size_t used = 0;
    resp_frame_reset(&f);
    if (resp_frame_scan(&f, r->p + r->off, r->len - r->off, &used) != RESP_FRAME_DONE)
        return r->err = "truncated reply", 0;
    r->off += used;
    return 1;
}

static int aggregate(rd *r, long long *n)
{
    char t;
    if (!header(r, &t, n)) return 0;
    if (t == '%') *n *= 2; /* RESP3 map: keys and values */
    if ((t != '*' && t != '%' && t != '~') || *n < 0) return r->err = "not an array", 0;
    return 1;
}

static int integer(rd *r, long long *v)
{
    char t;
    if (!header(r, &t, v)) return 0;
    return t == ':' ? 1 : (r->err = "not an integer", 0);
}

/* A bulk string (or a simple one); *s NULL for a null. */
static int string(rd *r, const char **s, size_t *len)
{
    char t;
    long long n;
    if (r->off < r->len && r->p[r->off] == '+') {
        const char *b = r->p + r->off + 1, *e = memchr(b, '\r', r->len - r->off - 1);
        if (!e || (size_t)(e - r->p) + 1 >= r->len) return r->err = "truncated reply", 0;
        *s = b;
        *len = (size_t)(e - b);
        r->off = (size_t)(e + 2 - r->p);
        return 1;
    }
    if (!header(r, &t, &n)) return 0;
    if (t == '_' || (t == '$' && n < 0)) {
        *s = NULL;
        *len = 0;
        return 1;
    }
    if (t != '$' || (size_t)n > r->len - r->off || r->len - r->off - (size_t)n < 2)
        return r->err = "bad string", 0;
    *s = r->p + r->off;
    *len = (size_t)n;
    r->off += (size_t)n + 2;
    return 1;
}

/* One node: [endpoint, port, id, metadata...]. Its index, -2 for a node
 * that cannot be reached ("?"), -1 on error. */
static int node(rd *r, slotmap *m, const char *from_host)
{
    long long n, port;
    const char *host, *id;
    size_t hostlen, idlen = 0;
    if (!aggregate(r, &n)) return -1;
    if (n < 2) return r->err = "a node with no port", -1;
    if (!string(r, &host, &hostlen) || !integer(r, &port)) return -1;
    if (port <= 0 || port > 65535) return r->err = "bad port", -1;
    id = NULL;
    if (n >= 3 && !string(r, &id, &idlen)) return -1;
    for (long long i = 3; i < n; i++)
        if (!skip(r)) return -1;
    if (host && hostlen == 1 && host[0] == '?') return -2;
    if (!host || hostlen == 0) host = from_host, hostlen = strlen(from_host);
    int i = slotmap_add(m, host, hostlen, (int)port);
    if (i < 0) return r->err = "out of memory or host too long", -1;
    if (id && idlen == SLOTMAP_ID_LEN) memcpy(m->nodes[i].id, id, idlen);
    return i;
}

int slotmap_parse_slots(slotmap *m, const char *reply, size_t len, const char *from_host, char *err,
                        size_t errlen)
{
    rd r = {reply, len, 0, NULL};
    long long nranges;
    if (!aggregate(&r, &nranges)) goto fail;
    for (long long k = 0; k < nranges; k++) {
        long long n, start, end;
        if (!aggregate(&r, &n) || n < 3 || !integer(&r, &start) || !integer(&r, &end)) {
            if (!r.err) r.err = "a range without a node";
            goto fail;
        }
        if (start < 0 || end >= HASHSLOT_COUNT || start > end) {
            r.err = "bad slot range";
            goto fail;
        }
        int primary = node(&r, m, from_host);
        if (primary == -1) goto fail;
        for (long long i = 3; i < n; i++) {
            int rep = node(&r, m, from_host);
            if (rep == -1) goto fail;
            if (rep >= 0 && primary >= 0 && rep != primary) m->nodes[rep].primary = primary;
        }
        if (primary < 0) continue; /* "?": uncovered */
        m->nodes[primary].primary = -1;
        for (long long s = start; s <= end; s++) {
            if (m->slot[s] != SLOTMAP_NONE) {
                r.err = "overlapping slot ranges";
                goto fail;
            }
            m->slot[s] = (uint16_t)primary;
            m->covered++;
        }
    }
    if (r.off != len) {
        r.err = "bytes after the reply";
        goto fail;
    }
    return 0;
fail:
    snprintf(err, errlen, "CLUSTER SLOTS: %s", r.err ? r.err : "malformed");
    slotmap_free(m);
    return -1;
}

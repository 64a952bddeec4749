/* nodesview.c - a node's CLUSTER NODES reply, read for the questions a
 * held redirect asks (nodesview.h). */
#include "proxy/route/nodesview.h"

#include <string.h>

#include "proxy/route/hashslot.h"

/* Fields of a line: 0 id, 1 address, 2 flags; the slots from here on. */
#define NVIEW_FIELD_ADDR 1
#define NVIEW_FIELD_FLAGS 2
#define NVIEW_FIELD_SLOTS 8

typedef struct span {
    const char *p;
    size_t n;
} span;

/* A decimal of at most 9 digits, no sign: its value, or -1. */
static long decimal(const char *s, size_t n)
{
    if (n == 0 || n > 9) return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

static int span_is(span s, const char *text, size_t n)
{
    return s.n == n && memcmp(s.p, text, n) == 0;
}

int nview_from_reply(nview *v, const char *reply, size_t len)
{
    v->text = NULL;
    v->len = 0;
    if (len < 4 || (reply[0] != '$' && reply[0] != '=')) return -1;
    const char *cr = memchr(reply, '\r', len);
    if (!cr || (size_t)(cr - reply) + 1 >= len || cr[1] != '\n') return -1;
    long n = decimal(reply + 1, (size_t)(cr - reply - 1));
    size_t head = (size_t)(cr - reply) + 2;
    if (n < 0 || (size_t)n > len - head) return -1;
    v->text = reply + head;
    v->len = (size_t)n;
    if (reply[0] == '=') { /* "txt:" before the text */
        if (v->len < 4 || memcmp(v->text, "txt:", 4) != 0) return -1;
        v->text += 4;
        v->len -= 4;
    }
    return 0;
}

/* The next line from *pos (without its '\n'); 0 at the end. */
static int next_line(const nview *v, size_t *pos, span *line)
{
    if (*pos >= v->len) return 0;
    const char *start = v->text + *pos;
    const char *nl = memchr(start, '\n', v->len - *pos);
    size_t n = nl ? (size_t)(nl - start) : v->len - *pos;
    *pos += n + 1;
    if (n && start[n - 1] == '\r') n--;
    *line = (span){start, n};
    return 1;
}

/* The fields of a line (space-separated), walked once from the start:
 * each next_field costs the length of that field, so a line costs its
 * length, however many fields it has. */
typedef struct fields {
    span line;
    size_t at;
    int done;
} fields;

static fields fields_of(span line)
{
    return (fields){line, 0, 0};
}

/* The next field; 0 past the last one. */
static int next_field(fields *f, span *out)
{
    if (f->done) return 0;
    const char *start = f->line.p + f->at;
    const char *sp = memchr(start, ' ', f->line.n - f->at);
    size_t n = sp ? (size_t)(sp - start) : f->line.n - f->at;
    *out = (span){start, n};
    if (sp)
        f->at += n + 1;
    else
        f->done = 1;
    return 1;
}

/* Field i (0-based) of a line, for the few first ones; 0 when it has
 * fewer. */
static int field(span line, int i, span *out)
{
    fields f = fields_of(line);
    for (int k = 0; k <= i; k++)
        if (!next_field(&f, out)) return 0;
    return 1;
}

/* The line's fields from the first slot on: the cursor for next_field, or
 * 0 when it has none. */
static int slot_fields(span line, fields *f)
{
    span s;
    *f = fields_of(line);
    for (int k = 0; k < NVIEW_FIELD_SLOTS; k++)
        if (!next_field(f, &s)) return 0;
    return 1;
}

/* Is `word` one of the comma-separated flags? */
static int has_flag(span flags, const char *word)
{
    size_t wl = strlen(word), at = 0;
    while (at <= flags.n) {
        const char *comma = memchr(flags.p + at, ',', flags.n - at);
        size_t n = comma ? (size_t)(comma - (flags.p + at)) : flags.n - at;
        if (n == wl && memcmp(flags.p + at, word, wl) == 0) return 1;
        if (!comma) return 0;
        at += n + 1;
    }
    return 0;
}

/* Does "ip:port@cport[,hostname[,...]]" name host:port (by ip or hostname)? */
static int addr_is(span addr, const char *host, size_t hostlen, int port)
{
    const char *at = memchr(addr.p, '@', addr.n);
    if (!at) return 0;
    span ipport = {addr.p, (size_t)(at - addr.p)};
    const char *colon = NULL;
    for (size_t i = ipport.n; i > 0 && !colon; i--)
        if (ipport.p[i - 1] == ':') colon = ipport.p + i - 1;
    if (!colon) return 0;
    long p = decimal(colon + 1, (size_t)(ipport.p + ipport.n - colon - 1));
    if (p != port) return 0;
    span ip = {ipport.p, (size_t)(colon - ipport.p)};
    if (ip.n && span_is(ip, host, hostlen)) return 1;
    /* the hostname: after the cluster port's ',' */
    const char *rest = at + 1, *end = addr.p + addr.n;
    const char *comma = memchr(rest, ',', (size_t)(end - rest));
    if (!comma) return 0;
    const char *name = comma + 1;
    const char *name_end = memchr(name, ',', (size_t)(end - name));
    span hostname = {name, (size_t)((name_end ? name_end : end) - name)};
    return hostname.n && span_is(hostname, host, hostlen);
}

int nview_find(const nview *v, const char *host, size_t hostlen, int port, char id[NVIEW_ID_LEN + 1])
{
    size_t pos = 0;
    span line, f_id, f_addr, f_flags;
    while (next_line(v, &pos, &line)) {
        fields f = fields_of(line); /* fields 0, 1, 2: id, address, flags */
        if (!next_field(&f, &f_id) || f_id.n != NVIEW_ID_LEN || !next_field(&f, &f_addr) ||
            !next_field(&f, &f_flags))
            continue;
        if (has_flag(f_flags, "noaddr") || has_flag(f_flags, "handshake")) continue;
        if (!addr_is(f_addr, host, hostlen, port)) continue;
        memcpy(id, f_id.p, NVIEW_ID_LEN);
        id[NVIEW_ID_LEN] = '\0';
        return 1;
    }
    return 0;
}

/* "a" or "a-b" covering the slot? */
static int range_has(span s, int slot)
{
    const char *dash = memchr(s.p, '-', s.n);
    long lo = decimal(s.p, dash ? (size_t)(dash - s.p) : s.n);
    long hi = dash ? decimal(dash + 1, (size_t)(s.p + s.n - dash - 1)) : lo;
    return lo >= 0 && hi >= lo && hi < HASHSLOT_COUNT && lo <= slot && slot <= hi;
}

/* "[slot->-id]" (dir '>') or "[slot-<-id]" (dir '<') for this slot? The
 * other node's id in *other. */
static int moving_entry(span s, int slot, char dir, span *other)
{
    if (s.n < 6 || s.p[0] != '[' || s.p[s.n - 1] != ']') return 0;
    const char *dash = memchr(s.p, '-', s.n);
    if (!dash || decimal(s.p + 1, (size_t)(dash - s.p - 1)) != slot) return 0;
    size_t left = (size_t)(s.p + s.n - dash);
    if (left < 4 || dash[2] != '-') return 0;
    if (!((dir == '>' && dash[1] == '>') || (dir == '<' && dash[1] == '<'))) return 0;
    *other = (span){dash + 3, (size_t)(s.p + s.n - 1 - (dash + 3))};
    return 1;
}

/* The line of the node with this id (NULL: of myself, the replying node). */
static int line_of(const nview *v, const char *id, span *out)
{
    size_t pos = 0;
    span line, f;
    while (next_line(v, &pos, &line)) {
        int match = id ? field(line, 0, &f) && span_is(f, id, strlen(id))
                       : field(line, NVIEW_FIELD_FLAGS, &f) && has_flag(f, "myself");
        if (match) {
            *out = line;
            return 1;
        }
    }
    return 0;
}

int nview_serves(const nview *v, const char *id, int slot)
{
    span line, s;
    fields f;
    if (!line_of(v, id, &line) || !slot_fields(line, &f)) return 0;
    while (next_field(&f, &s))
        if (s.n && s.p[0] != '[' && range_has(s, slot)) return 1;
    return 0;
}

int nview_migrating_to(const nview *v, int slot, const char *id)
{
    span line, s, other;
    fields f;
    if (!line_of(v, NULL, &line) || !slot_fields(line, &f)) return 0;
    while (next_field(&f, &s))
        if (moving_entry(s, slot, '>', &other) && span_is(other, id, strlen(id))) return 1;
    return 0;
}

int nview_moving(const nview *v, int slot)
{
    span line, s, other;
    fields f;
    if (!line_of(v, NULL, &line) || !slot_fields(line, &f)) return 0;
    while (next_field(&f, &s))
        if (moving_entry(s, slot, '>', &other) || moving_entry(s, slot, '<', &other)) return 1;
    return 0;
}

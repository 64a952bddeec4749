/* sentinel_parse.c - sentinel and ROLE replies judged from bytes
 * (sentinel_parse.h).
 *
 * A small reader over one reply's bytes: every step checks what is left
 * before it looks, a value it does not need is skipped with the framer
 * (protocol/resp_frame.h: any type, any depth, no allocation), and text
 * that reaches the log is copied printable. The shapes accepted are the
 * ones Redis 7's Sentinel and data nodes send in RESP2 (the proxy never
 * sends them HELLO): anything else is refused, never guessed at. */
#include "proxy/route/sentinel_parse.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "protocol/resp_frame.h"

#define SENTINEL_FIELDS_MAX 4096 /* SENTINEL MASTER has about 40 elements; more is not a sentinel */

typedef struct sp_reader {
    const char *p;
    size_t len, off;
} sp_reader;

typedef struct sp_str {
    const char *p;
    size_t len;
} sp_str;

/* Copy n bytes of p into out as printable text (anything else as '?'),
 * cut to what fits. */
static void copy_printable(char *out, size_t outlen, const char *p, size_t n)
{
    if (!outlen) return;
    size_t i = 0;
    for (; i < n && i + 1 < outlen; i++)
        out[i] = isprint((unsigned char)p[i]) ? p[i] : '?';
    out[i] = '\0';
}

static int fail(char *why, size_t whylen, const char *text)
{
    if (whylen) snprintf(why, whylen, "%s", text);
    return -1;
}

/* Strict decimal: digits only, no sign, no leading zero (but "0"), at
 * most max. -1 if it is not one. */
static long long parse_decimal(const char *p, size_t n, long long max)
{
    if (n == 0 || (n > 1 && p[0] == '0')) return -1;
    long long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return -1;
        if (v > (max - (p[i] - '0')) / 10) return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

static int parse_port(const char *p, size_t n)
{
    long long v = parse_decimal(p, n, 65535);
    return v >= 1 ? (int)v : -1;
}

/* A host a sentinel may name: a name, an IPv4 or an IPv6 address (a zone
 * after '%'). Nothing that could change what the address means once it is
 * written "host:port" or logged. */
static int host_ok(const char *p, size_t n)
{
    if (n == 0 || n > SENTINEL_HOST_MAX) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (!isalnum(ch) && ch != '.' && ch != '-' && ch != ':' && ch != '_' && ch != '%') return 0;
    }
    return 1;
}

/* The line at the reader: its first byte's position and its end (the CR
 * of its CRLF). 0 if no CRLF is left. */
static int line_end(const sp_reader *r, const char **end)
{
    if (r->off >= r->len) return 0;
    const char *s = r->p + r->off;
    size_t left = r->len - r->off;
    for (size_t i = 1; i + 1 < left; i++)
        if (s[i] == '\r' && s[i + 1] == '\n') {
            *end = s + i;
            return 1;
        }
    return 0;
}

/* An aggregate header "*<n>\r\n" (n >= 0). */
static int read_array(sp_reader *r, long long *n)
{
    const char *end;
    if (!line_end(r, &end) || r->p[r->off] != '*') return 0;
    const char *d = r->p + r->off + 1;
    *n = parse_decimal(d, (size_t)(end - d), LLONG_MAX);
    if (*n < 0) return 0;
    r->off = (size_t)(end + 2 - r->p);
    return 1;
}

/* A string: bulk "$<n>\r\n<n bytes>\r\n" or simple "+<text>\r\n". */
static int read_string(sp_reader *r, sp_str *s)
{
    const char *end;
    if (!line_end(r, &end)) return 0;
    const char *start = r->p + r->off;
    if (start[0] == '+') {
        s->p = start + 1;
        s->len = (size_t)(end - s->p);
        r->off = (size_t)(end + 2 - r->p);
        return 1;
    }
    if (start[0] != '$') return 0;
    long long n = parse_decimal(start + 1, (size_t)(end - start - 1), LLONG_MAX);
    size_t body = (size_t)(end + 2 - r->p);
    if (n < 0 || (unsigned long long)n > r->len - body || r->len - body - (size_t)n < 2) return 0;
    if (r->p[body + (size_t)n] != '\r' || r->p[body + (size_t)n + 1] != '\n') return 0;
    s->p = r->p + body;
    s->len = (size_t)n;
    r->off = body + (size_t)n + 2;
    return 1;
}

/* An integer ":<n>\r\n" (any value: only its shape matters here). */
static int read_integer(sp_reader *r)
{
    const char *end;
    if (!line_end(r, &end) || r->p[r->off] != ':') return 0;
    const char *d = r->p + r->off + 1;
    size_t n = (size_t)(end - d);
    if (n && *d == '-') d++, n--;
    if (parse_decimal(d, n, LLONG_MAX) < 0) return 0;
    r->off = (size_t)(end + 2 - r->p);
    return 1;
}

/* Any one value (one the caller does not need). */
static int skip_value(sp_reader *r)
{
    resp_framer f;
    size_t used = 0;
    resp_frame_reset(&f);
    if (r->off >= r->len || resp_frame_scan(&f, r->p + r->off, r->len - r->off, &used) != RESP_FRAME_DONE)
        return 0;
    r->off += used;
    return 1;
}

static int str_is(sp_str s, const char *text)
{
    size_t n = strlen(text);
    return s.len == n && memcmp(s.p, text, n) == 0;
}

/* An error reply's text into why: -1 (not an error: 0, why untouched). */
static int error_reply(const char *reply, size_t len, char *why, size_t whylen)
{
    if (len < 3 || reply[0] != '-') return 0;
    const char *cr = memchr(reply, '\r', len);
    copy_printable(why, whylen, reply + 1, (cr ? (size_t)(cr - reply) : len) - 1);
    return -1;
}

/* ---- SENTINEL MASTER ---- */

typedef struct master_fields {
    sp_str ip, port, epoch, flags;
    int have_ip, have_port, have_epoch, have_flags;
} master_fields;

static void note_field(master_fields *m, sp_str key, sp_str value)
{
    if (str_is(key, "ip") && !m->have_ip) m->ip = value, m->have_ip = 1;
    if (str_is(key, "port") && !m->have_port) m->port = value, m->have_port = 1;
    if (str_is(key, "config-epoch") && !m->have_epoch) m->epoch = value, m->have_epoch = 1;
    if (str_is(key, "flags") && !m->have_flags) m->flags = value, m->have_flags = 1;
}

/* Does the comma-separated flags list hold `flag`? */
static int has_flag(sp_str flags, const char *flag)
{
    size_t n = strlen(flag), i = 0;
    while (i <= flags.len) {
        size_t j = i;
        while (j < flags.len && flags.p[j] != ',')
            j++;
        if (j - i == n && memcmp(flags.p + i, flag, n) == 0) return 1;
        i = j + 1;
    }
    return 0;
}

int sentinel_parse_master(const char *reply, size_t len, sentinel_master_info *out, char *why, size_t whylen)
{
    memset(out, 0, sizeof(*out));
    if (error_reply(reply, len, why, whylen)) return -1;
    sp_reader r = {reply, len, 0};
    long long n;
    if (!read_array(&r, &n) || n % 2 || n > SENTINEL_FIELDS_MAX)
        return fail(why, whylen, "not a field/value array");
    master_fields m;
    memset(&m, 0, sizeof(m));
    for (long long i = 0; i < n; i += 2) {
        sp_str key, value;
        if (!read_string(&r, &key)) return fail(why, whylen, "a field name is not a string");
        size_t at = r.off;
        if (read_string(&r, &value)) {
            note_field(&m, key, value);
            continue;
        }
        r.off = at; /* not a string: a value the proxy does not read */
        if (!skip_value(&r)) return fail(why, whylen, "a field's value is cut short");
    }
    if (r.off != len) return fail(why, whylen, "bytes after the reply");
    if (!m.have_ip || !m.have_port || !m.have_epoch || !m.have_flags)
        return fail(why, whylen, "no ip, port, config-epoch and flags in the reply");
    if (!host_ok(m.ip.p, m.ip.len)) return fail(why, whylen, "its ip is not an address");
    out->port = parse_port(m.port.p, m.port.len);
    if (out->port < 0) return fail(why, whylen, "its port is not a port");
    out->epoch = parse_decimal(m.epoch.p, m.epoch.len, LLONG_MAX);
    if (out->epoch < 0) return fail(why, whylen, "its config-epoch is not a number");
    memcpy(out->host, m.ip.p, m.ip.len);
    out->host[m.ip.len] = '\0';
    out->failover_in_progress = has_flag(m.flags, "failover_in_progress");
    return 0;
}

/* ---- AUTH ---- */

int sentinel_parse_auth(const char *reply, size_t len, char *why, size_t whylen)
{
    if (len == 5 && memcmp(reply, "+OK\r\n", 5) == 0) return 0;
    if (error_reply(reply, len, why, whylen)) return -1;
    char start[24];
    copy_printable(start, sizeof(start), reply, len);
    if (whylen) snprintf(why, whylen, "unexpected reply to AUTH: %s", start);
    return -1;
}

/* ---- the +switch-master subscription ---- */

/* "<master> <old-ip> <old-port> <new-ip> <new-port>", each well formed:
 * exactly five words, one space between each. */
static int parse_switch(sp_str payload, sentinel_switch *out)
{
    sp_str w[5];
    int nw = 0;
    size_t start = 0;
    for (size_t i = 0; i <= payload.len; i++) {
        if (i < payload.len && payload.p[i] != ' ') continue;
        if (i == start || nw == 5) return 0; /* an empty word, or a sixth */
        w[nw].p = payload.p + start;
        w[nw].len = i - start;
        nw++;
        start = i + 1;
    }
    if (nw != 5) return 0;
    if (w[0].len > SENTINEL_NAME_MAX) return 0;
    for (size_t i = 0; i < w[0].len; i++)
        if (!isgraph((unsigned char)w[0].p[i])) return 0;
    if (!host_ok(w[1].p, w[1].len) || parse_port(w[2].p, w[2].len) < 0) return 0;
    if (!host_ok(w[3].p, w[3].len)) return 0;
    out->port = parse_port(w[4].p, w[4].len);
    if (out->port < 0) return 0;
    memcpy(out->master, w[0].p, w[0].len);
    out->master[w[0].len] = '\0';
    memcpy(out->host, w[3].p, w[3].len);
    out->host[w[3].len] = '\0';
    return 1;
}

sentinel_pubsub_kind sentinel_parse_pubsub(const char *reply, size_t len, sentinel_switch *out, char *why,
                                           size_t whylen)
{
    memset(out, 0, sizeof(*out));
    sp_reader r = {reply, len, 0};
    long long n;
    sp_str kind, channel, payload;
    if (error_reply(reply, len, why, whylen)) return SENTINEL_PUBSUB_MALFORMED;
    if (!read_array(&r, &n) || n != 3 || !read_string(&r, &kind) || !read_string(&r, &channel)) {
        fail(why, whylen, "not a 3-element array of strings");
        return SENTINEL_PUBSUB_MALFORMED;
    }
    if (!str_is(channel, SENTINEL_CHANNEL)) {
        fail(why, whylen, "not about the " SENTINEL_CHANNEL " channel");
        return SENTINEL_PUBSUB_MALFORMED;
    }
    if (str_is(kind, "subscribe") && read_integer(&r) && r.off == len) return SENTINEL_PUBSUB_SUBSCRIBED;
    if (str_is(kind, "message") && read_string(&r, &payload) && r.off == len) {
        if (parse_switch(payload, out)) return SENTINEL_PUBSUB_SWITCH;
        memset(out, 0, sizeof(*out));
        fail(why, whylen, "its text is not \"<master> <old-ip> <old-port> <new-ip> <new-port>\"");
        return SENTINEL_PUBSUB_MALFORMED;
    }
    fail(why, whylen, "neither a subscribe confirmation nor a message");
    return SENTINEL_PUBSUB_MALFORMED;
}

/* ---- ROLE ---- */

int sentinel_parse_role(const char *reply, size_t len, char *said, size_t saidlen)
{
    sp_reader r = {reply, len, 0};
    long long n;
    sp_str role;
    if (read_array(&r, &n) && n >= 1 && read_string(&r, &role)) {
        if (str_is(role, "master")) return 1;
        copy_printable(said, saidlen, role.p, role.len < 32 ? role.len : 32);
        return 0;
    }
    /* Not a role at all (+OK, :1, an empty array, an error...): its start. */
    const char *cr = memchr(reply, '\r', len < 32 ? len : 32);
    char start[40];
    copy_printable(start, sizeof(start), reply, cr ? (size_t)(cr - reply) : (len < 32 ? len : 32));
    if (saidlen) snprintf(said, saidlen, "no role but %s", start);
    return 0;
}

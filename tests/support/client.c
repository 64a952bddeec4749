/* client.c - see client.h. */
#include "tests/support/client.h"
#include "tests/support/cluster_env.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tests/support/servers.h"

#define READ_CHUNK (64 * 1024)
#define DESCRIBE_MAX_STR 80 /* bytes of a string shown in a description */
#define ESCAPE_SLOTS 4      /* vt_escape results alive at once (one assert message) */
#define ESCAPE_MAX 4096     /* bytes of input shown escaped */

/* ---- hiredis ---- */

static struct timeval tv_ms(int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    return tv;
}

static redisContext *finish_connect(redisContext *c, const char *where)
{
    if (!c) {
        fprintf(stderr, "vt: connect %s: out of memory\n", where);
        return NULL;
    }
    if (c->err) {
        fprintf(stderr, "vt: connect %s: %s\n", where, c->errstr);
        redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv_ms(VT_COMMAND_TIMEOUT_MS));
    return c;
}

redisContext *vt_connect(int port)
{
    vt_ignore_sigpipe();
    char where[32];
    snprintf(where, sizeof(where), "127.0.0.1:%d", port);
    return finish_connect(redisConnectWithTimeout("127.0.0.1", port, tv_ms(VT_CONNECT_TIMEOUT_MS)), where);
}

redisContext *vt_connect_unix(const char *path)
{
    vt_ignore_sigpipe();
    return finish_connect(redisConnectUnixWithTimeout(path, tv_ms(VT_CONNECT_TIMEOUT_MS)), path);
}

redisReply *vt_cmd(redisContext *c, const char *fmt, ...)
{
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (!r) fprintf(stderr, "vt: \"%s\": %s\n", fmt, c->errstr);
    if (r && r->type == REDIS_REPLY_ERROR && vt_cluster_mode()) { /* a look at a cluster node: cluster_env.h */
        char *cmd;
        int len = redisvFormatCommand(&cmd, fmt, again);
        if (len > 0) {
            r = vt_cluster_env_follow(c, r, cmd, (size_t)len);
            free(cmd);
        }
    }
    va_end(again);
    return r;
}

redisReply *vt_cmd_argv(redisContext *c, int argc, const char **argv, const size_t *lens)
{
    redisReply *r = redisCommandArgv(c, argc, argv, lens);
    if (!r) fprintf(stderr, "vt: %s...: %s\n", argv[0], c->errstr);
    if (r && r->type == REDIS_REPLY_ERROR && vt_cluster_mode()) { /* a look at a cluster node: cluster_env.h */
        char *cmd;
        int len = redisFormatCommandArgv(&cmd, argc, argv, lens);
        if (len > 0) {
            r = vt_cluster_env_follow(c, r, cmd, (size_t)len);
            free(cmd);
        }
    }
    return r;
}

redisReply *vt_get_reply(redisContext *c)
{
    void *r = NULL;
    if (redisGetReply(c, &r) != REDIS_OK) {
        fprintf(stderr, "vt: reading a reply: %s\n", c->errstr);
        return NULL;
    }
    return r;
}

long long vt_info_int(redisContext *c, const char *section, const char *field)
{
    redisReply *r = redisCommand(c, "INFO %s", section);
    long long v = -1;
    if (r && r->type == REDIS_REPLY_STRING) {
        size_t fl = strlen(field);
        for (const char *line = r->str; line && *line; line = strchr(line, '\n')) {
            if (*line == '\n') line++;
            if (strncmp(line, field, fl) == 0 && line[fl] == ':') {
                v = strtoll(line + fl + 1, NULL, 10);
                break;
            }
        }
    }
    if (r) freeReplyObject(r);
    return v;
}

typedef struct info_wait {
    redisContext *c;
    const char *section;
    const char *field;
    long long want;
    long long last;
} info_wait;

static bool info_reached(void *arg)
{
    info_wait *w = arg;
    w->last = vt_info_int(w->c, w->section, w->field);
    return w->last == w->want;
}

bool vt_wait_info(int redis_port, const char *section, const char *field, long long want, int timeout_ms,
                  long long *last)
{
    redisContext *c = vt_connect(redis_port);
    if (!c) return false;
    info_wait w = {c, section, field, want, -1};
    bool ok = vt_wait_until(info_reached, &w, timeout_ms);
    redisFree(c);
    if (last) *last = w.last;
    return ok;
}

bool vt_wait_until_blocked(int redis_port, long long n, int timeout_ms)
{
    return vt_wait_info(redis_port, "clients", "blocked_clients", n, timeout_ms, NULL);
}

/* ---- describing and comparing replies ---- */

static void describe(const redisReply *r, char *buf, size_t len, size_t *pos)
{
#define OUT(...)                                                                                             \
    do {                                                                                                     \
        if (*pos < len) *pos += (size_t)snprintf(buf + *pos, len - *pos, __VA_ARGS__);                       \
    } while (0)
    if (!r) {
        OUT("(no reply)");
        return;
    }
    switch (r->type) {
    case REDIS_REPLY_STATUS:
        OUT("+%s", vt_escape(r->str, r->len));
        break;
    case REDIS_REPLY_ERROR:
        OUT("-%s", vt_escape(r->str, r->len));
        break;
    case REDIS_REPLY_INTEGER:
        OUT(":%lld", r->integer);
        break;
    case REDIS_REPLY_NIL:
        OUT("(nil)");
        break;
    case REDIS_REPLY_STRING:
        OUT("\"%s\"%s", vt_escape(r->str, r->len < DESCRIBE_MAX_STR ? r->len : DESCRIBE_MAX_STR),
            r->len > DESCRIBE_MAX_STR ? "..." : "");
        if (r->len > DESCRIBE_MAX_STR) OUT("(%zu bytes)", r->len);
        break;
    case REDIS_REPLY_ARRAY:
        OUT("[");
        for (size_t i = 0; i < r->elements; i++) {
            if (i) OUT(", ");
            describe(r->element[i], buf, len, pos);
        }
        OUT("]");
        break;
    default:
        OUT("(type %d)", r->type);
    }
#undef OUT
}

char *vt_reply_describe(const redisReply *r, char *buf, size_t len)
{
    size_t pos = 0;
    buf[0] = '\0';
    describe(r, buf, len, &pos);
    return buf;
}

static bool equal_at(const redisReply *a, const redisReply *b, char *path, size_t pathlen)
{
    if (!a || !b) return a == b;
    if (a->type != b->type) return false;
    switch (a->type) {
    case REDIS_REPLY_INTEGER:
        return a->integer == b->integer;
    case REDIS_REPLY_NIL:
        return true;
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
    case REDIS_REPLY_ARRAY:
        if (a->elements != b->elements) return false;
        for (size_t i = 0; i < a->elements; i++) {
            size_t l = strlen(path);
            snprintf(path + l, pathlen - l, "[%zu]", i);
            if (!equal_at(a->element[i], b->element[i], path, pathlen)) return false;
            path[l] = '\0';
        }
        return true;
    default:
        return false;
    }
}

bool vt_reply_equal(const redisReply *want, const redisReply *got, char *why, size_t whylen)
{
    char path[256] = "";
    if (equal_at(want, got, path, sizeof(path))) return true;
    if (why) {
        char w[512], g[512];
        snprintf(why, whylen, "differs at reply%s:\n  want %s\n  got  %s", path,
                 vt_reply_describe(want, w, sizeof(w)), vt_reply_describe(got, g, sizeof(g)));
    }
    return false;
}

/* ---- byte buffers ---- */

static void reserve(vt_buf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    b->data = realloc(b->data, cap);
    if (!b->data) abort();
    b->cap = cap;
}

void vt_buf_append(vt_buf *b, const void *data, size_t len)
{
    reserve(b, len);
    memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0'; /* always printable as a C string for the test's eyes */
}

void vt_buf_append_str(vt_buf *b, const char *s)
{
    vt_buf_append(b, s, strlen(s));
}

void vt_buf_cmd_argv(vt_buf *b, int argc, const char **argv, const size_t *lens)
{
    char head[32];
    snprintf(head, sizeof(head), "*%d\r\n", argc);
    vt_buf_append_str(b, head);
    for (int i = 0; i < argc; i++) {
        size_t l = lens ? lens[i] : strlen(argv[i]);
        snprintf(head, sizeof(head), "$%zu\r\n", l);
        vt_buf_append_str(b, head);
        vt_buf_append(b, argv[i], l);
        vt_buf_append(b, "\r\n", 2);
    }
}

void vt_buf_cmd(vt_buf *b, const char *arg0, ...)
{
    const char *argv[64];
    int argc = 0;
    va_list ap;
    va_start(ap, arg0);
    for (const char *a = arg0; a && argc < 64; a = va_arg(ap, const char *))
        argv[argc++] = a;
    va_end(ap);
    vt_buf_cmd_argv(b, argc, argv, NULL);
}

void vt_buf_consume(vt_buf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
    } else {
        memmove(b->data, b->data + n, b->len - n);
        b->len -= n;
    }
    if (b->data) b->data[b->len] = '\0';
}

bool vt_buf_contains(const vt_buf *b, const char *needle)
{
    return b->len && memmem(b->data, b->len, needle, strlen(needle)) != NULL;
}

void vt_buf_reset(vt_buf *b)
{
    b->len = 0;
    b->eof = false;
    b->err = 0;
    if (b->data) b->data[0] = '\0';
}

void vt_buf_free(vt_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof(*b));
}

const char *vt_escape(const void *data, size_t len)
{
    static char slots[ESCAPE_SLOTS][ESCAPE_MAX * 4 + 16];
    static int next;
    char *out = slots[next++ % ESCAPE_SLOTS];
    const unsigned char *p = data;
    size_t o = 0, n = len < ESCAPE_MAX ? len : ESCAPE_MAX;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = p[i];
        if (ch == '\r') {
            out[o++] = '\\';
            out[o++] = 'r';
        } else if (ch == '\n') {
            out[o++] = '\\';
            out[o++] = 'n';
        } else if (ch == '"' || ch == '\\') {
            out[o++] = '\\';
            out[o++] = (char)ch;
        } else if (ch < 32 || ch > 126) {
            o += (size_t)sprintf(out + o, "\\x%02x", ch);
        } else {
            out[o++] = (char)ch;
        }
    }
    if (len > n) o += (size_t)sprintf(out + o, "...(%zu bytes)", len);
    out[o] = '\0';
    return out;
}

const char *vt_buf_escaped(const vt_buf *b)
{
    return vt_escape(b->data ? b->data : "", b->len);
}

/* ---- raw sockets ---- */

int vt_sock_tcp(int port)
{
    vt_ignore_sigpipe();
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        fprintf(stderr, "vt: connect 127.0.0.1:%d: %s\n", port, strerror(errno));
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

int vt_sock_unix(const char *path)
{
    vt_ignore_sigpipe();
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        fprintf(stderr, "vt: unix socket path too long: %s\n", path);
        close(fd);
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        fprintf(stderr, "vt: connect %s: %s\n", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

bool vt_sock_send(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        len -= (size_t)n;
    }
    return true;
}

bool vt_sock_send_str(int fd, const char *s)
{
    return vt_sock_send(fd, s, strlen(s));
}

bool vt_sock_send_buf(int fd, const vt_buf *b)
{
    return vt_sock_send(fd, b->data, b->len);
}

void vt_buf_big_preauth_eval(vt_buf *b, const char *script)
{
    static char filler[16000];
    memset(filler, 'f', sizeof(filler));
    const char *argv[10] = {"EVAL", script, "0"};
    size_t lens[10] = {4, strlen(script), 1};
    for (int i = 3; i < 10; i++) {
        argv[i] = filler;
        lens[i] = sizeof(filler);
    }
    vt_buf_cmd_argv(b, 10, argv, lens);
}

/* The receive queue of the socket whose local end is `local` and remote
 * end `remote` (IPv4, as /proc/net/tcp writes them); with no remote, of the
 * socket listening on local's port (its accept queue: connections not
 * accepted yet). -1 if none. */
static long tcp_rx_queue(const struct sockaddr_in *local, const struct sockaddr_in *remote)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    if (!f) return -1;
    char line[512];
    long rx = -1;
    while (rx < 0 && fgets(line, sizeof(line), f)) {
        unsigned laddr, lport, raddr, rport, st;
        unsigned long rxq;
        /* sl local rem st tx:rx ... (addresses in network byte order, as hex) */
        if (sscanf(line, " %*d: %x:%x %x:%x %x %*x:%lx", &laddr, &lport, &raddr, &rport, &st, &rxq) != 6 ||
            lport != ntohs(local->sin_port))
            continue;
        if (remote ? laddr == local->sin_addr.s_addr && raddr == remote->sin_addr.s_addr &&
                         rport == ntohs(remote->sin_port)
                   : st == 0x0A /* LISTEN */)
            rx = (long)rxq;
    }
    fclose(f);
    return rx;
}

long vt_tcp_accept_queue(int port)
{
    struct sockaddr_in local = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    return tcp_rx_queue(&local, NULL);
}

bool vt_sock_wait_taken(int fd, int timeout_ms)
{
    struct sockaddr_in me, peer;
    socklen_t ml = sizeof(me), pl = sizeof(peer);
    if (getsockname(fd, (struct sockaddr *)&me, &ml) != 0 || getpeername(fd, (struct sockaddr *)&peer, &pl) != 0 ||
        me.sin_family != AF_INET)
        return false;
    long long deadline = vt_now_ms() + timeout_ms;
    for (;;) {
        int unsent = -1;
        if (ioctl(fd, SIOCOUTQ, &unsent) != 0) return false;
        if (unsent == 0 && tcp_rx_queue(&peer, &me) == 0) return true;
        if (vt_now_ms() >= deadline) return false;
        poll(NULL, 0, 2);
    }
}

/* Read whatever arrives until done(b, arg), EOF/error, or the deadline. */
static bool read_until(int fd, vt_buf *b, bool (*done)(const vt_buf *, const void *), const void *arg,
                       int timeout_ms)
{
    long long deadline = vt_now_ms() + timeout_ms;
    for (;;) {
        if (done(b, arg)) return true;
        if (b->eof || b->err) return false;
        long long left = deadline - vt_now_ms();
        if (left <= 0) return false;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int pr = poll(&pfd, 1, (int)left);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) continue; /* timeout: the loop head sees the deadline */
        reserve(b, READ_CHUNK);
        ssize_t n = recv(fd, b->data + b->len, READ_CHUNK, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n == 0) {
            b->eof = true;
        } else if (n < 0) {
            b->err = errno;
        } else {
            b->len += (size_t)n;
            b->data[b->len] = '\0';
        }
    }
}

static bool has_len(const vt_buf *b, const void *arg)
{
    return b->len >= *(const size_t *)arg;
}

static bool has_needle(const vt_buf *b, const void *arg)
{
    return vt_buf_contains(b, arg);
}

static bool has_replies(const vt_buf *b, const void *arg)
{
    return vt_resp_count_replies(b->data, b->len) >= *(const size_t *)arg;
}

static bool never(const vt_buf *b, const void *arg)
{
    (void)b;
    (void)arg;
    return false;
}

bool vt_sock_read_len(int fd, vt_buf *b, size_t n, int timeout_ms)
{
    return read_until(fd, b, has_len, &n, timeout_ms);
}

bool vt_sock_read_contains(int fd, vt_buf *b, const char *needle, int timeout_ms)
{
    return read_until(fd, b, has_needle, needle, timeout_ms);
}

bool vt_sock_read_replies(int fd, vt_buf *b, size_t count, int timeout_ms)
{
    return read_until(fd, b, has_replies, &count, timeout_ms);
}

bool vt_sock_read_eof(int fd, vt_buf *b, int timeout_ms)
{
    read_until(fd, b, never, NULL, timeout_ms);
    return b->eof || b->err;
}

/* ---- an independent RESP2/RESP3 framer for raw tests ---- */

/* Length of the line at p (up to and including CRLF), 0 if incomplete. */
static size_t line_len(const char *p, size_t len)
{
    const char *nl = memchr(p, '\n', len);
    return nl ? (size_t)(nl - p) + 1 : 0;
}

static long long parse_len(const char *p, size_t n, bool *ok)
{
    char tmp[32];
    if (n < 3 || n - 2 >= sizeof(tmp) || p[n - 2] != '\r') {
        *ok = false;
        return 0;
    }
    memcpy(tmp, p + 1, n - 3);
    tmp[n - 3] = '\0';
    char *end;
    long long v = strtoll(tmp, &end, 10);
    *ok = end != tmp && *end == '\0';
    return v;
}

long long vt_resp_reply_len(const char *data, size_t len)
{
    if (len == 0) return 0;
    size_t l = line_len(data, len);
    if (!l) return 0;
    bool ok = true;
    long long n;
    switch (data[0]) {
    case '+':
    case '-':
    case ':':
    case ',':
    case '#':
    case '_':
    case '(':
        return (long long)l;
    case '$':
    case '!':
    case '=':
        n = parse_len(data, l, &ok);
        if (!ok) return -1;
        if (n < 0) return (long long)l;
        if (len < l + (size_t)n + 2) return 0;
        return (long long)l + n + 2;
    case '*':
    case '~':
    case '>':
    case '%':
    case '|': {
        n = parse_len(data, l, &ok);
        if (!ok) return -1;
        if (n < 0) return (long long)l;
        if (data[0] == '%' || data[0] == '|') n *= 2;
        size_t pos = l;
        for (long long i = 0; i < n; i++) {
            long long e = vt_resp_reply_len(data + pos, len - pos);
            if (e <= 0) return e;
            pos += (size_t)e;
        }
        if (data[0] == '|') { /* attributes annotate the value that follows */
            long long e = vt_resp_reply_len(data + pos, len - pos);
            if (e <= 0) return e;
            pos += (size_t)e;
        }
        return (long long)pos;
    }
    default:
        return -1;
    }
}

size_t vt_resp_count_replies(const char *data, size_t len)
{
    size_t count = 0, pos = 0;
    for (;;) {
        long long l = vt_resp_reply_len(data + pos, len - pos);
        if (l <= 0) return count;
        pos += (size_t)l;
        count++;
    }
}

/* healthcheck.c - `verbproxy --healthcheck [HOST:]PORT[/PATH]`: a one-shot
 * HTTP GET for a container's HEALTHCHECK (the slim image has no curl).
 *
 * Plain blocking-style code over non-blocking sockets and poll(): this runs
 * instead of the proxy, in a process of its own, so no event loop is needed;
 * one deadline covers the connect, the request and the whole response. A
 * connection the server closes or resets before a byte of an answer (an
 * admin port full of other connections) is tried again within it, after
 * 25, 50, 100, then every 200 ms: the GET is idempotent. The
 * response is parsed by http-parser (Debian's libhttp-parser), never by
 * hand: a status line that is not HTTP is a failure, not a guess. */
#include "proxy/ops/healthcheck.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <http_parser.h>

#define HC_DEFAULT_HOST "127.0.0.1"
#define HC_DEFAULT_PATH "/healthz"
#define HC_RESPONSE_MAX (64 * 1024) /* a health answer is small; more is not one */
#define HC_REASON_MAX 160           /* the body's first line, shown on failure */
#define HC_RETRY_FIRST_MS 25        /* after a dropped connection: 25, 50, 100, 200, 200... ms */
#define HC_RETRY_MAX_MS 200

typedef struct hc_target {
    char host[256];
    char port[8];
    char path[512];
} hc_target;

/* "[HOST:]PORT[/PATH]", HOST may be "[v6]". Returns 0 or -1 (why set). */
static int hc_parse_target(const char *s, hc_target *t, char *why, size_t whylen)
{
    const char *slash = strchr(s, '/');
    size_t hp = slash ? (size_t)(slash - s) : strlen(s);
    snprintf(t->path, sizeof(t->path), "%s", slash ? slash : HC_DEFAULT_PATH);
    const char *port = s;
    snprintf(t->host, sizeof(t->host), "%s", HC_DEFAULT_HOST);
    if (hp && s[0] == '[') {
        const char *close = memchr(s, ']', hp);
        if (!close || close + 1 >= s + hp || close[1] != ':') goto bad;
        snprintf(t->host, sizeof(t->host), "%.*s", (int)(close - s - 1), s + 1);
        port = close + 2;
    } else {
        const char *colon = NULL;
        for (const char *p = s; p < s + hp; p++)
            if (*p == ':') colon = p;
        if (colon) {
            if (colon == s || (size_t)(colon - s) >= sizeof(t->host)) goto bad;
            snprintf(t->host, sizeof(t->host), "%.*s", (int)(colon - s), s);
            port = colon + 1;
        }
    }
    size_t pl = (size_t)(s + hp - port);
    if (pl == 0 || pl > 5) goto bad;
    long n = 0;
    for (size_t i = 0; i < pl; i++) {
        if (port[i] < '0' || port[i] > '9') goto bad;
        n = n * 10 + (port[i] - '0');
    }
    if (n < 1 || n > 65535) goto bad;
    snprintf(t->port, sizeof(t->port), "%ld", n);
    for (const char *p = t->path; *p; p++) {
        if ((unsigned char)*p <= ' ' || *p == 0x7f) goto bad; /* it goes into the request line */
    }
    return 0;
bad:
    snprintf(why, whylen, "'%s' is not [HOST:]PORT[/PATH]", s);
    return -1;
}

static long long hc_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for `events` on fd until the deadline: 1 ready, 0 timed out, -1 error. */
static int hc_wait(int fd, short events, long long deadline)
{
    for (;;) {
        long long left = deadline - hc_now_ms();
        if (left <= 0) return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int rc = poll(&p, 1, (int)left);
        if (rc > 0) return 1;
        if (rc == 0) return 0;
        if (errno != EINTR) return -1;
    }
}

/* A connected socket to one of host's addresses, or -1 (why set). */
static int hc_connect(const hc_target *t, long long deadline, char *why, size_t whylen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res;
    int rc = getaddrinfo(t->host, t->port, &hints, &res);
    if (rc != 0) {
        snprintf(why, whylen, "cannot resolve %s: %s", t->host, gai_strerror(rc));
        return -1;
    }
    int fd = -1;
    snprintf(why, whylen, "no address for %s", t->host);
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            snprintf(why, whylen, "socket: %s", strerror(errno));
            continue;
        }
        int err = 0;
        if (connect(fd, a->ai_addr, a->ai_addrlen) < 0) {
            err = errno;
            if (err == EINPROGRESS) {
                int w = hc_wait(fd, POLLOUT, deadline);
                socklen_t el = sizeof(err);
                if (w == 0)
                    err = ETIMEDOUT;
                else if (w < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
                    err = errno;
            }
        }
        if (err) {
            snprintf(why, whylen, "connect to %s:%s: %s", t->host, t->port, strerror(err));
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    return fd;
}

/* What the parser callbacks gather. */
typedef struct hc_response {
    int complete;
    char reason[HC_REASON_MAX]; /* the body's start */
    size_t reason_len;
} hc_response;

static int hc_on_body(http_parser *p, const char *at, size_t len)
{
    hc_response *r = p->data;
    size_t room = sizeof(r->reason) - 1 - r->reason_len;
    if (len > room) len = room;
    memcpy(r->reason + r->reason_len, at, len);
    r->reason_len += len;
    r->reason[r->reason_len] = '\0';
    return 0;
}

static int hc_on_message_complete(http_parser *p)
{
    ((hc_response *)p->data)->complete = 1;
    http_parser_pause(p, 1); /* one response is all we read */
    return 0;
}

/* The body's first line, printable, for the one-line reason. */
static const char *hc_first_line(hc_response *r)
{
    char *s = r->reason;
    size_t n = strcspn(s, "\r\n");
    s[n] = '\0';
    for (char *c = s; *c; c++)
        if ((unsigned char)*c < ' ' || *c == 0x7f) *c = '?';
    return s;
}

/* One attempt's outcome. */
typedef enum hc_outcome {
    HC_SENT,     /* the request is out: read the answer */
    HC_HEALTHY,  /* a 2xx */
    HC_FAILED,   /* an answer that is not 2xx, or no answer in time, or no server */
    HC_RETRYABLE /* the server closed or reset the connection before a byte of an answer */
} hc_outcome;

/* Did the server drop us before answering: no byte of a response, and the
 * connection closed (n == 0) or reset? Then nothing was answered and the
 * GET may be sent again (RFC 9110 9.2.2: idempotent requests are retried
 * automatically after such a close). */
static int hc_dropped_unanswered(ssize_t n, int err, size_t got)
{
    return got == 0 && (n == 0 || err == ECONNRESET || err == EPIPE);
}

static hc_outcome hc_send_request(int fd, const hc_target *t, long long deadline, int timeout_ms, char *why,
                                  size_t whylen)
{
    char req[1024];
    int rl =
        snprintf(req, sizeof(req),
                 "GET %s HTTP/1.1\r\nHost: %s%s%s:%s\r\nUser-Agent: verbproxy-healthcheck\r\n"
                 "Connection: close\r\n\r\n",
                 t->path, strchr(t->host, ':') ? "[" : "", t->host, strchr(t->host, ':') ? "]" : "", t->port);
    for (int off = 0; off < rl;) {
        ssize_t n = send(fd, req + off, (size_t)(rl - off), MSG_NOSIGNAL);
        if (n > 0) {
            off += (int)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (hc_wait(fd, POLLOUT, deadline) > 0) continue;
            snprintf(why, whylen, "timed out sending the request after %d ms", timeout_ms);
            return HC_FAILED;
        }
        int err = errno;
        snprintf(why, whylen, "send: %s", strerror(err));
        return hc_dropped_unanswered(-1, err, 0) ? HC_RETRYABLE : HC_FAILED;
    }
    return HC_SENT;
}

static hc_outcome hc_read_response(int fd, long long deadline, int timeout_ms, char *why, size_t whylen)
{
    http_parser parser;
    http_parser_settings settings;
    hc_response resp = {0};
    http_parser_init(&parser, HTTP_RESPONSE);
    http_parser_settings_init(&settings);
    settings.on_body = hc_on_body;
    settings.on_message_complete = hc_on_message_complete;
    parser.data = &resp;
    size_t total = 0;
    char buf[4096];
    while (!resp.complete) {
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            int w = hc_wait(fd, POLLIN, deadline);
            if (w > 0) continue;
            snprintf(why, whylen, w == 0 ? "no full response within %d ms" : "poll failed", timeout_ms);
            return HC_FAILED;
        }
        if (n < 0) {
            int err = errno;
            snprintf(why, whylen, "recv: %s", strerror(err));
            return hc_dropped_unanswered(n, err, total) ? HC_RETRYABLE : HC_FAILED;
        }
        if (n == 0 && hc_dropped_unanswered(n, 0, total)) {
            snprintf(why, whylen, "connection closed before a response");
            return HC_RETRYABLE;
        }
        total += (size_t)n;
        if (total > HC_RESPONSE_MAX) {
            snprintf(why, whylen, "response longer than %d bytes", HC_RESPONSE_MAX);
            return HC_FAILED;
        }
        /* n == 0 tells the parser about EOF (it ends a body without a length). */
        http_parser_execute(&parser, &settings, buf, (size_t)n);
        enum http_errno e = HTTP_PARSER_ERRNO(&parser);
        if (n == 0 && e == HPE_INVALID_EOF_STATE) e = HPE_OK; /* said just below */
        if (e != HPE_OK && e != HPE_PAUSED) {
            snprintf(why, whylen, "not an HTTP response: %s", http_errno_description(e));
            return HC_FAILED;
        }
        if (n == 0 && !resp.complete) {
            snprintf(why, whylen, "connection closed before a full response");
            return HC_FAILED;
        }
    }
    unsigned status = parser.status_code;
    const char *line = hc_first_line(&resp);
    snprintf(why, whylen, "HTTP %u%s%s", status, *line ? ": " : "", line);
    return status >= 200 && status < 300 ? HC_HEALTHY : HC_FAILED;
}

static hc_outcome hc_attempt(const hc_target *t, long long deadline, int timeout_ms, char *why, size_t whylen)
{
    int fd = hc_connect(t, deadline, why, whylen);
    if (fd < 0) return HC_FAILED; /* refused: nobody listens, a retry would not change that */
    hc_outcome o = hc_send_request(fd, t, deadline, timeout_ms, why, whylen);
    if (o == HC_SENT) o = hc_read_response(fd, deadline, timeout_ms, why, whylen);
    close(fd);
    return o;
}

/* Wait ms, or less if the deadline comes first: 0 when no time is left. */
static int hc_pause(int ms, long long deadline)
{
    long long left = deadline - hc_now_ms();
    if (left <= ms) return 0;
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
    return 1;
}

int healthcheck_run(const char *target, int timeout_ms, char *why, size_t whylen)
{
    hc_target t;
    if (!target || hc_parse_target(target, &t, why, whylen) < 0) {
        if (!target) snprintf(why, whylen, "--healthcheck needs [HOST:]PORT[/PATH]");
        return 1;
    }
    long long deadline = hc_now_ms() + timeout_ms;
    /* A server that drops the connection unanswered (an admin port full of
     * other connections) is asked again, within the one deadline. */
    int backoff = HC_RETRY_FIRST_MS, attempts = 1;
    hc_outcome o;
    while ((o = hc_attempt(&t, deadline, timeout_ms, why, whylen)) == HC_RETRYABLE &&
           hc_pause(backoff, deadline)) {
        attempts++;
        backoff = backoff * 2 > HC_RETRY_MAX_MS ? HC_RETRY_MAX_MS : backoff * 2;
    }
    if (o != HC_HEALTHY && attempts > 1) {
        size_t l = strlen(why);
        snprintf(why + l, whylen - l, " (%d attempts in %d ms)", attempts, timeout_ms);
    }
    return o == HC_HEALTHY ? 0 : 1;
}

int healthcheck_main(const char *target)
{
    char why[512];
    int rc = healthcheck_run(target, HEALTHCHECK_TIMEOUT_MS, why, sizeof(why));
    fprintf(rc == 0 ? stdout : stderr, "verbproxy --healthcheck %s: %s\n", target ? target : "", why);
    return rc;
}

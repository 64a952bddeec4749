#include "proxy/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

vp_log_level vp_log_threshold = VP_LOG_NOTICE;
vp_log_format vp_log_fmt = VP_LOG_FORMAT_REDIS;

static const char *const log_names[] = {"debug", "verbose", "notice", "warning"};
static const char log_marks[] = ".-*#";

/* A message (1 KiB) escaped for JSON: at most 6 bytes per byte. */
#define LOG_LINE_MAX (1024 * 6 + 256)

int vp_log_parse_level(const char *name, vp_log_level *out)
{
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(name, log_names[i]) == 0) {
            *out = (vp_log_level)i;
            return 0;
        }
    }
    return -1;
}

const char *vp_log_level_name(vp_log_level level)
{
    return log_names[level];
}

/* msg as the inside of a JSON string (RFC 8259): '"', '\\' and every
 * control byte escaped; other bytes as they are (the messages are the
 * proxy's own text and addresses, UTF-8 or ASCII). */
static size_t log_json_escape(char *out, size_t cap, const char *msg)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)msg; *p && n + 7 < cap; p++) {
        unsigned char ch = *p;
        if (ch == '"' || ch == '\\') {
            out[n++] = '\\';
            out[n++] = (char)ch;
        } else if (ch == '\n') {
            out[n++] = '\\';
            out[n++] = 'n';
        } else if (ch == '\r') {
            out[n++] = '\\';
            out[n++] = 'r';
        } else if (ch == '\t') {
            out[n++] = '\\';
            out[n++] = 't';
        } else if (ch < 0x20 || ch == 0x7f) {
            memcpy(out + n, "\\u00", 4);
            out[n + 4] = hex[ch >> 4];
            out[n + 5] = hex[ch & 15];
            n += 6;
        } else {
            out[n++] = (char)ch;
        }
    }
    out[n] = '\0';
    return n;
}

size_t vp_log_format_line(char *out, size_t cap, vp_log_format format, vp_log_level level, long long tv_sec,
                          int ms, int pid, const char *msg)
{
    time_t t = (time_t)tv_sec;
    struct tm tm;
    char when[64];
    int n;
    if (format == VP_LOG_FORMAT_JSON) {
        gmtime_r(&t, &tm);
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
        char esc[LOG_LINE_MAX];
        log_json_escape(esc, sizeof(esc), msg);
        n = snprintf(out, cap, "{\"time\":\"%s.%03dZ\",\"pid\":%d,\"role\":\"proxy\",\"level\":\"%s\",\"msg\":\"%s\"}",
                     when, ms, pid, log_names[level], esc);
    } else {
        localtime_r(&t, &tm);
        strftime(when, sizeof(when), "%d %b %Y %H:%M:%S", &tm);
        n = snprintf(out, cap, "%d:P %s.%03d %c %s", pid, when, ms, log_marks[level], msg);
    }
    if (n < 0) n = 0;
    /* (Never cut in practice: the message is at most 1023 bytes, 6 each
     * escaped, and LOG_LINE_MAX has room for that and the rest.) */
    if ((size_t)n >= cap) n = (int)cap - 1;
    return (size_t)n;
}

void vp_log(vp_log_level level, const char *fmt, ...)
{
    if (!vp_log_enabled(level)) return;

    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    struct timeval tv;
    gettimeofday(&tv, NULL);
    static char line[LOG_LINE_MAX + 2];
    size_t n = vp_log_format_line(line, sizeof(line) - 1, vp_log_fmt, level, (long long)tv.tv_sec,
                                  (int)(tv.tv_usec / 1000), (int)getpid(), msg);
    line[n++] = '\n';
    /* One write per line so concurrent writers (tests tail this) never see
     * half a line. */
    fwrite(line, 1, n, stderr);
}

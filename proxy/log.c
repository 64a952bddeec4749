#include "proxy/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

vp_log_level vp_log_threshold = VP_LOG_NOTICE;

static const char *const log_names[] = {"debug", "verbose", "notice", "warning"};
static const char log_marks[] = ".-*#";

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
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    char when[64];
    size_t off = strftime(when, sizeof(when), "%d %b %Y %H:%M:%S.", &tm);
    snprintf(when + off, sizeof(when) - off, "%03d", (int)(tv.tv_usec / 1000));

    /* One fprintf per line so concurrent writers (tests tail this) never see
     * half a line. */
    fprintf(stderr, "%d:P %s %c %s\n", (int)getpid(), when, log_marks[level], msg);
}

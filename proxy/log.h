/* log.h - leveled, timestamped log lines to stderr. Two formats
 * (`log-format`, reloadable):
 *   redis (default), Redis's own line:
 *     pid:X 02 Dec 2026 13:45:00.123 * message
 *   with Redis's level marks (. debug, - verbose, * notice, # warning);
 *   json, one object per line for log collectors:
 *     {"time":"2026-12-02T13:45:00.123Z","pid":X,"role":"proxy","level":"notice","msg":"message"} */
#ifndef VP_LOG_H
#define VP_LOG_H

#include <stddef.h>

typedef enum vp_log_level { VP_LOG_DEBUG = 0, VP_LOG_VERBOSE, VP_LOG_NOTICE, VP_LOG_WARNING } vp_log_level;
typedef enum vp_log_format { VP_LOG_FORMAT_REDIS = 0, VP_LOG_FORMAT_JSON } vp_log_format;

extern vp_log_level vp_log_threshold;
extern vp_log_format vp_log_fmt;

/* Returns 0 and sets *out for "debug", "verbose", "notice", "warning"; -1 otherwise. */
int vp_log_parse_level(const char *name, vp_log_level *out);
const char *vp_log_level_name(vp_log_level level);
void vp_log(vp_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One log line as it is written (no newline), for the tests: `tv_sec` and
 * `ms` are the time, `pid` the process. Returns the length (truncated to
 * cap - 1). */
size_t vp_log_format_line(char *out, size_t cap, vp_log_format format, vp_log_level level, long long tv_sec,
                          int ms, int pid, const char *msg);

#define vp_log_enabled(level) ((level) >= vp_log_threshold)

#endif

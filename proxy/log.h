/* log.h - leveled, timestamped log lines to stderr, in Redis's format:
 *   pid:X 02 Dec 2026 13:45:00.123 * message
 * with Redis's level marks (. debug, - verbose, * notice, # warning). */
#ifndef VP_LOG_H
#define VP_LOG_H

typedef enum vp_log_level { VP_LOG_DEBUG = 0, VP_LOG_VERBOSE, VP_LOG_NOTICE, VP_LOG_WARNING } vp_log_level;

extern vp_log_level vp_log_threshold;

/* Returns 0 and sets *out for "debug", "verbose", "notice", "warning"; -1 otherwise. */
int vp_log_parse_level(const char *name, vp_log_level *out);
void vp_log(vp_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define vp_log_enabled(level) ((level) >= vp_log_threshold)

#endif

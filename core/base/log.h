/* log.h — one-line log messages on stderr, filtered by --log-level. Every
 * line cserve writes itself starts "TIME [cserve PID] LEVEL: ", TIME being
 * UTC in ISO 8601 to the millisecond (2026-01-31T23:59:59.123Z), start-up
 * errors included, so one pattern finds them all. */
#ifndef CSERVE_LOG_H
#define CSERVE_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <time.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARNING, LOG_ERROR };

extern enum log_level log_threshold;

/* Returns 0 and sets the threshold, or -1 if name is not a level. */
int log_set_level(const char *name);
const char *log_level_name(void);

/* Writes ts as "YYYY-MM-DDTHH:MM:SS.mmmZ" (24 characters) into out, as
 * snprintf does; returns what snprintf returns. */
int log_utc_stamp(char *out, size_t size, const struct timespec *ts);

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_vmsg(enum log_level level, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

#define log_debug(...) do { if (log_threshold <= LOG_DEBUG) log_msg(LOG_DEBUG, __VA_ARGS__); } while (0)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARNING, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif

/* log.c — stderr logging. Each message is formatted into one buffer of at
 * most PIPE_BUF bytes and written with a single write(2): on a pipe (a
 * supervisor's, systemd's journal) a write that size is atomic, so lines
 * from several threads and worker processes never interleave mid-line. A
 * longer message is cut. Each line starts with its UTC time to the
 * millisecond, so lines from a file, a pipe or a terminal can be ordered
 * against other logs without the journal's stamps. */
#include "log.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum log_level log_threshold = LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warning", "error"};

int log_set_level(const char *name)
{
    for (int i = LOG_DEBUG; i <= LOG_ERROR; i++)
        if (strcmp(name, level_names[i]) == 0) {
            log_threshold = (enum log_level)i;
            return 0;
        }
    return -1;
}

const char *log_level_name(void)
{
    return level_names[log_threshold];
}

/* The civil date of a day count since 1970-01-01, by the proleptic
 * Gregorian rules (eras of 400 years, years starting in March so the leap
 * day is last). Pure arithmetic: gmtime_r takes glibc's time-zone lock,
 * which a child forked while another thread held it would never get. */
static void civil_from_days(long long days, int *y, unsigned *m, unsigned *d)
{
    days += 719468; /* days from 0000-03-01 to 1970-01-01 */
    long long era = (days >= 0 ? days : days - 146096) / 146097;
    unsigned doe = (unsigned)(days - era * 146097);                      /* [0, 146096] */
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* [0, 399] */
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);              /* [0, 365] */
    unsigned mp = (5 * doy + 2) / 153;                                   /* March = 0 */
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int)(yoe + era * 400 + (*m <= 2));
}

int log_utc_stamp(char *out, size_t size, const struct timespec *ts)
{
    long long sec = (long long)ts->tv_sec;
    long long days = (sec >= 0 ? sec : sec - 86399) / 86400;
    long long tod = sec - days * 86400;
    int y;
    unsigned m, d;
    civil_from_days(days, &y, &m, &d);
    return snprintf(out, size, "%04d-%02u-%02uT%02lld:%02lld:%02lld.%03ldZ", y, m, d, tod / 3600,
                    tod / 60 % 60, tod % 60, ts->tv_nsec / 1000000);
}

void log_vmsg(enum log_level level, const char *fmt, va_list ap)
{
    if (level < log_threshold)
        return;
    char line[PIPE_BUF];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int n = log_utc_stamp(line, sizeof line, &now);
    n += snprintf(line + n, sizeof line - (size_t)n, " [cserve %d] %s: ", (int)getpid(), level_names[level]);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w; /* nowhere left to report a failed log write */
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vmsg(level, fmt, ap);
    va_end(ap);
}

/* log.c — stderr logging. Each message is formatted into one buffer of at
 * most PIPE_BUF bytes and written with a single write(2): on a pipe (a
 * supervisor's, systemd's journal) a write that size is atomic, so lines
 * from several threads and worker processes never interleave mid-line. A
 * longer message is cut. */
#include "log.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
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

void log_vmsg(enum log_level level, const char *fmt, va_list ap)
{
    if (level < log_threshold)
        return;
    char line[PIPE_BUF];
    int n = snprintf(line, sizeof line, "[cserve %d] %s: ", (int)getpid(), level_names[level]);
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

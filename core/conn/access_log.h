/* access_log.h — --access-log: one line per request, in a standard format. */
#ifndef CSERVE_ACCESS_LOG_H
#define CSERVE_ACCESS_LOG_H

#include <stdbool.h>
#include <stdint.h>

struct job;

enum access_log_format {
    ACCESS_LOG_COMBINED, /* Apache/nginx "combined", then the duration in microseconds */
    ACCESS_LOG_COMMON,   /* the Common Log Format */
    ACCESS_LOG_JSON,     /* one JSON object a line */
};

/* "combined", "common" or "json"; -1 for anything else. */
int access_log_format_parse(const char *name);

/* Open the log (path NULL: stderr) before privileges are dropped, so a
 * root-owned log directory works. Returns 0, or -1 with errno. */
int access_log_open(const char *path, enum access_log_format format);
/* The descriptor, for a worker exec'd to replace this one (-1: none, or
 * stderr), and that worker's way to take it over. */
int access_log_fd(void);
void access_log_adopt(int fd, const char *path, enum access_log_format format);
/* SIGWINCH (logrotate): open the path anew; on failure keep the old file
 * and say why. */
void access_log_reopen(void);
/* One request: job's request line, status and bytes; peer is the
 * connection's address ("" for a unix: socket), the client a trusted proxy
 * names replaces it; end_ns the moment its last byte was written. */
void access_log_write(const struct job *job, const char *peer, uint64_t end_ns);

#endif

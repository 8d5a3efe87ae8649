/* access_log.h — --access-log: one line per request, in a standard format. */
#ifndef CSERVE_ACCESS_LOG_H
#define CSERVE_ACCESS_LOG_H

#include <stdbool.h>
#include <stdint.h>

struct forwarded_policy;
struct loop;
struct loop_response;

enum access_log_format {
    ACCESS_LOG_COMBINED, /* Apache/nginx "combined", then the duration in microseconds */
    ACCESS_LOG_COMMON,   /* the Common Log Format */
    ACCESS_LOG_JSON,     /* one JSON object a line */
};

/* "combined", "common" or "json"; -1 for anything else. */
int access_log_format_parse(const char *name);

/* Open the log (path NULL: stderr; "-": stdout) before privileges are dropped, so a
 * root-owned log directory works. forwarded (the caller's, kept for the
 * process's life) says whose proxy fields name the client. Returns 0, or
 * -1 with errno. */
int access_log_open(const char *path, enum access_log_format format, const struct forwarded_policy *forwarded);
/* The descriptor, for a worker exec'd to replace this one (-1: none, or
 * stderr), and that worker's way to take it over. */
int access_log_fd(void);
void access_log_adopt(int fd, const char *path, enum access_log_format format,
                      const struct forwarded_policy *forwarded);
/* SIGWINCH (logrotate): open the path anew; on failure keep the old file
 * and say why. */
void access_log_reopen(void);
/* One response: its request line, status and bytes; the client a trusted
 * proxy names replaces the connection's address. */
void access_log_write(const struct loop_response *r);
/* A worker's loop writes a line per response and reopens on SIGWINCH.
 * loop_hook_add's result. */
int access_log_attach(struct loop *l);

#endif

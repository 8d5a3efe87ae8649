/* options.h — the configuration: the command line, parsed once at start-up
 * (core/server/options.c) into one struct that every layer reads. */
#ifndef CSERVE_OPTIONS_H
#define CSERVE_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CSERVE_VERSION "0.1.0"

/* --max-body-size's default with --inline (options.c says why). */
#define INLINE_MAX_BODY_DEFAULT (1024 * 1024)
/* The most of a response --inline holds before the app returns (it cannot
 * write while the app runs on its thread); past it the response is cut. */
#define INLINE_MAX_RESPONSE (64u << 20)

/* --blocking-threads auto without :MAX: the most pool threads it starts.
 * Enough for an app that waits on I/O at 64 requests in flight; what each
 * costs (docs/options.md): its stack, the default one (RLIMIT_STACK's soft
 * limit, 8 MiB of address space, of which only the pages used are
 * resident, about 100 KiB with its Python thread state), and with --handoff
 * dgram four descriptors (eventfd one; ring, condvar none), opened at start
 * for all of them. */
#define AUTO_THREADS_MAX_DEFAULT 64

struct handoff_ops;

struct options {
    /* where */
    char bind_host[256];
    int bind_port;
    const char *bind_unix; /* non-NULL for --bind unix:PATH */
    const char *chdir_dir;
    int socket_mode;          /* --socket-mode for unix: binds; -1 = leave the umask's */
    const char *user;         /* --user: serve as this user after binding */
    const char *group;        /* --group: ... and this group */
    const char *virtualenv;   /* --virtualenv DIR; NULL = $VIRTUAL_ENV or none */
    /* what */
    const char *app_spec;     /* MODULE:CALLABLE; NULL = the default app */
    bool native_hello;        /* --app native-hello */
    bool inline_app;          /* --inline */
    /* how many */
    unsigned workers;
    unsigned blocking_threads;  /* pool threads per worker; with threads_auto, the most */
    bool threads_auto;          /* --blocking-threads auto[:MAX]: from one, as the load needs */
    unsigned threads_learned;   /* with threads_auto, a new worker's: the size the worker it
                                 * replaces had learned, which it starts with (0: one) */
    const struct handoff_ops *handoff;
    long spin_iters;          /* -1 = backend default */
    long spin_ns;             /* > 0: spin budget in time */
    unsigned queue_capacity;  /* jobs per pool thread */
    long loop_spin_ns;        /* the loop polls for completions this long before sleeping; -1 adaptive */
    long loop_doze_ns;        /* the longest timed wait for a busy pool; 0 default, < 0 never */
    long loop_hold_ns;        /* the longest sleep deaf to the sockets while the pool's queue lasts;
                               * 0 default, < 0 never */
    int backlog;
    /* limits, in bytes and milliseconds */
    size_t max_header_size;
    uint64_t max_body_size;
    unsigned header_timeout_ms;
    unsigned keepalive_timeout_ms;
    unsigned io_timeout_ms;
    unsigned graceful_timeout_ms;
    /* logs and instruments */
    bool access_log;
    int access_log_format;       /* enum access_log_format */
    const char *access_log_file; /* NULL = stderr */
    bool stats;
    const char *stats_json;
    double stats_window_s;     /* window starts this long after start-up; 0 = at start */
    const char *metrics_bind;  /* --metrics-bind as given: HOST:PORT or unix:PATH; NULL = off */
    const char *metrics_unix;  /* ... its PATH for unix:PATH (never empty), else NULL */
    char metrics_host[256];    /* ... else its HOST (brackets removed) */
    int metrics_port;
    const char *metrics_allow_ips; /* the peers it serves (ip_allow.h); others get 403 */
    /* a worker's life (lifecycle.h) */
    unsigned long max_requests;        /* 0 = no limit */
    unsigned long max_requests_jitter;
    unsigned workers_lifetime_ms;      /* 0 = forever */
    unsigned workers_max_rss_mb;       /* 0 = no limit */
    unsigned app_timeout_ms;           /* watchdog; 0 = off */
    const char *pid_file;
    const char *forwarded_allow_ips;   /* peers whose proxy headers are believed; "" none */
    const char *forwarded_headers;     /* ... and which of their fields are read */
    const char *root_path;             /* SCRIPT_NAME: where the app is mounted; NULL = "" */
    bool check_config;                 /* print the configuration, import the app, exit */
    bool reload;                       /* --reload: a changed .py file reloads the worker */
    bool preload;                      /* --preload: the supervisor imports the app and forks the
                                        * workers with it (else each worker imports it) */
};

#endif

/* lifecycle.h — a worker's replacement: when it asks for one (--max-requests,
 * --workers-lifetime, --workers-max-rss, SIGHUP without a supervisor), and
 * how a fresh worker is started: fork and exec of cserve itself, so that it
 * imports the app anew (docs/operating.md, "Reload and recycling"). */
#ifndef CSERVE_LIFECYCLE_H
#define CSERVE_LIFECYCLE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct handover;
struct options;
struct worker_owner;

/* What a worker started by spawn_exec finds in its environment. */
#define EXEC_WORKER_ENV "CSERVE_EXEC_WORKER"

/* The command line cserve was started with, kept for spawn_exec (options
 * point into a copy of it). Call once, first thing in main. */
void lifecycle_save_argv(int argc, char **argv);

/* Remember the directory the server serves from (the current one, after
 * --chdir). A new worker is exec'd there, whatever directory the app has
 * moved the process to since (one worker alone runs the app itself). */
void lifecycle_save_dir(void);

/* Fork and exec cserve as worker `index` of a supervisor, serving on
 * listen_fd (which the new process inherits); threads: the pool size it
 * starts with under --blocking-threads auto (the one it replaces had
 * learned; 0: one). The child never outlives the caller's thread
 * (PR_SET_PDEATHSIG). Returns its pid, or -1. */
pid_t spawn_exec(int listen_fd, unsigned index, unsigned threads);

/* In an exec'd worker: its slot, listener, access log (-1: none) and the
 * pool size to start with (0: none given) from the environment (the
 * variable removed, so the app's children do not see it). */
bool exec_worker_claim(unsigned *index, int *listen_fd, int *log_fd, unsigned *threads);

/* What a server exec'd in place by lifecycle_exec_supervisor finds in its
 * environment. */
#define SUPERVISE_ENV "CSERVE_SUPERVISE"

/* One worker alone that hands over to its successor with a pool thread
 * still in the app: no thread can be stopped from outside, so the process
 * execs cserve in place, keeping its pid (the one a pid file and systemd
 * know), its children (the successor) and the descriptors the server holds
 * (the listener, the access log, the metrics' region and listener, the pid
 * file with its lock), and ending every thread of the old image. The new
 * image supervises the successor (main.c). Returns only when the exec
 * failed, after one line saying why. */
void lifecycle_exec_supervisor(const struct handover *ho);

/* In the image lifecycle_exec_supervisor started: the handover and the
 * descriptors passed (-1: none), the variable removed; the signal pipe is
 * adopted (signals_adopt). Call before signals_init. */
struct inherited {
    int log_fd, shm_fd, metrics_fd, pid_fd;
    unsigned unix_owned; /* listen_unix_owned */
};
bool lifecycle_supervise_claim(struct handover *ho, struct inherited *in);

/* One worker's view of its own end. */
struct lifecycle {
    const struct options *opt;
    pid_t supervisor;        /* whom to ask for a replacement; 0: none (one worker alone) */
    int listen_fd;           /* the loop's listener (one worker alone) */
    int keep_fd;             /* a copy of it for the successor, which outlives the loop's
                              * (closed when this worker drains); -1: none */
    uint64_t max_requests;   /* with its jitter; 0: no limit */
    uint64_t deadline_ms;    /* --workers-lifetime; 0: none */
    uint64_t max_rss_kb;     /* 0: no limit */
    uint64_t next_check_ms;
    bool asked;              /* a replacement is asked for, or (alone) starting */
    bool reloading;          /* ... by SIGHUP (else a recycling): how a failure is logged */
    bool reload_pending;     /* SIGHUP came while a successor started: reload after it */
    const char *required;    /* a replacement this worker cannot do without (it refuses
                              * requests: the watchdog's), asked for again after each
                              * failure; NULL: none */
    uint64_t retry_at_ms;    /* not before then: after a failure, or to ask a supervisor again */
    uint64_t backoff_ms;     /* the next wait after a failure (doubles, to a minute) */
    pid_t successor;         /* one worker alone: the fresh worker starting */
    unsigned threads;        /* --blocking-threads auto: the pool's size now, the successor's
                              * to start with (0: not told) */
};

void lifecycle_init(struct lifecycle *lc, const struct options *opt, pid_t supervisor, int listen_fd,
                    uint64_t now_ms);
/* The loop calls this once a pass; it looks at the limits (and at a
 * successor that failed to start) at most once a second. */
void lifecycle_tick(struct lifecycle *lc, uint64_t now_ms, uint64_t requests);
/* Ask for a replacement, once: the supervisor, or (one worker alone)
 * start the successor here. why is logged. The services' request
 * (owner->replace) is also required: asked for again until one serves. */
void lifecycle_replace(struct lifecycle *lc, const char *why);
/* SIGHUP reached this worker. */
void lifecycle_reload(struct lifecycle *lc);
/* WORKER_READY_SIGNAL from `from`: true when it is this worker's successor
 * (the worker stops accepting and drains; the caller becomes its supervisor,
 * on lc->keep_fd). */
bool lifecycle_ready(struct lifecycle *lc, pid_t from);
/* The above as the worker's services see them (core/services/replacement.h), on lc. */
struct worker_owner lifecycle_owner(struct lifecycle *lc);

#endif

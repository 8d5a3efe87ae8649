/* loop.h — the event-loop thread of one worker and its connections.
 *
 * The loop thread owns every socket: it accepts, reads, parses, hands each
 * request to a pool thread through the handoff, and writes the responses.
 * It never touches a Python object (except in --inline mode, where it is the
 * app's thread too). */
#ifndef CSERVE_LOOP_H
#define CSERVE_LOOP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "../base/stats.h"
#include "conn.h"
#include "timer.h"

struct options;
struct handoff;
struct metrics_counts;

/* What the loop asks of the process around it about this worker's
 * replacement (--max-requests, --workers-lifetime, --workers-max-rss, SIGHUP,
 * --app-timeout, --reload). The server implements it (core/server/lifecycle.c)
 * and hands it down, so the loop includes nothing from the layer that
 * assembles it. */
struct loop_owner {
    void *ctx;
    /* once a pass: are the limits reached? */
    void (*tick)(void *ctx, uint64_t now_ms, uint64_t requests);
    /* ask for a replacement, once; why is logged */
    void (*replace)(void *ctx, const char *why);
    /* SIGHUP (or --reload) reached this worker */
    void (*reload)(void *ctx);
    /* SIGHUP came while this worker drains for its successor: the
     * supervisor this process becomes reloads */
    void (*reload_later)(void *ctx);
    /* WORKER_READY_SIGNAL from `from`: true when it is this worker's
     * successor, which now serves */
    bool (*ready)(void *ctx, pid_t from);
};

struct loop {
    const struct options *opt;
    int epfd;
    int listen_fd;
    struct poll_src listener_src, handoff_src, signal_src, reload_src;
    int signal_fd;
    struct handoff *handoff;   /* NULL with --inline or native-hello */
    unsigned workers;          /* pool threads */
    unsigned *outstanding;     /* per pool thread: jobs submitted, not yet done */
    /* Per pool thread, for the app's silence timeout (conn_on_timeout): when
     * the loop last heard from it (a message) or answered it (an ack), and
     * how many of its messages the loop has taken and not yet answered. A
     * request queued behind another on a busy thread is waiting, not stuck. */
    uint64_t *worker_seen_ms;
    unsigned *worker_owed;
    unsigned outstanding_total;
    unsigned capacity;
    struct conn conns;         /* sentinel of the list of all connections */
    unsigned nconns;
    struct conn *pending_head, *pending_tail;
    struct conn *closed;       /* connections to free at the end of this pass */
    struct job *free_jobs;
    unsigned free_count;       /* jobs on free_jobs */
    size_t free_bytes;         /* the buffers they keep (jobs.c bounds both) */
    size_t freed_bytes;        /* buffers jobs.c freed since it last gave memory back */
    uint64_t released_ms;      /* when it last did */
    struct timer_list t_header, t_keepalive, t_io, t_linger, t_hold;
    uint64_t now_ms;
    uint64_t accept_paused_until;
    bool stopping;
    bool no_doze;              /* the kernel lacks epoll_pwait2: always before_sleep */
    uint64_t stop_deadline_ms;
    double window_at;          /* --stats-window: when the window starts (0 = done) */
    struct stats *stats;
    const char *stats_path;    /* --stats-json: the file this worker writes (its part with --workers) */
    int stats_parent;          /* --workers: the supervisor's pid, told when the part is written */
    struct loop_stats lstats;
    const struct loop_owner *owner; /* this worker's replacement; NULL: none */
    pid_t handover;            /* stopping because this successor serves (one worker alone) */
    int stop_signal;           /* SIGTERM/SIGINT received (0: none) */
    bool handover_recycle;     /* the successor asked to be recycled while this one drained */
    int reload_fd;             /* --reload: the inotify descriptor (-1: off) */
    uint64_t reload_at_ms;     /* --reload: reload then, unless another change comes first */
    uint64_t watchdog_next_ms; /* --app-timeout: next look at the pool threads */
    uint64_t *watchdog_fired;  /* per pool thread: the app_since_ms already reported */
    bool retiring;             /* stopping because replaced: idle connections are not cut
                                * (conn_stop_if_idle), their keep-alive timer ends them */
    struct metrics_counts *mx; /* --metrics-bind: this worker's counts (NULL: off) */
    uint64_t mx_next_ms;       /* the next metrics_tick */
};

int loop_init(struct loop *l, const struct options *opt, int listen_fd, struct handoff *h,
              unsigned workers, struct stats *stats);
/* Run until stopped and drained (or the graceful timeout passes). Returns the
 * number of requests still with the app when it gave up (0 = clean). */
unsigned loop_run(struct loop *l);
void loop_destroy(struct loop *l);

#endif

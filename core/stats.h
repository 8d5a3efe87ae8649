/* stats.h — per-thread instruments: counters with one writer each, CPU time
 * read from each thread's own CPU clock at report time (nothing timed per
 * request), reported per measurement window as a table or JSON. */
#ifndef CSERVE_STATS_H
#define CSERVE_STATS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "../lib/counter.h"

#ifndef CSERVE_INSTRUMENTS
#define CSERVE_INSTRUMENTS 1
#endif

/* Instruments that cost more than nothing on the hot path go through STAT();
 * `make INSTRUMENTS=0` compiles them out. Request counts stay: they are the
 * denominator of every per-request figure. */
#if CSERVE_INSTRUMENTS
#define STAT(stmt) do { stmt; } while (0)
#else
#define STAT(stmt) do { if (0) { stmt; } } while (0) /* type-checked, never run */
#endif

struct loop_stats {
    counter_t requests;     /* responses finished */
    counter_t passes;       /* loop iterations */
    counter_t epoll_waits;  /* epoll_wait calls */
    counter_t events;       /* events returned by epoll_wait */
    counter_t wait_ns;      /* time inside epoll_wait */
    counter_t pass_ns;      /* time outside it */
    counter_t accepts;
    counter_t reads;        /* recv calls on client sockets */
    counter_t read_eagain;
    counter_t writes;       /* send/writev/sendfile calls */
    counter_t closes;
} __attribute__((aligned(CACHE_LINE)));

struct pool_stats {
    counter_t requests;     /* app calls finished */
    counter_t gil_releases; /* times the thread dropped the GIL to wait */
    counter_t messages;     /* intermediate messages posted (flush, need-body) */
} __attribute__((aligned(CACHE_LINE)));

struct handoff;

/* Everything one worker process reports. The loop thread owns it. */
struct stats_thread_ref {
    const char *name;
    const char *role;       /* "loop" or "pool" */
    pid_t tid;
    clockid_t cpu_clock;    /* pthread_getcpuclockid of that thread */
};

#define STATS_MAX_THREADS 260

struct stats_snapshot {
    double t;               /* CLOCK_MONOTONIC seconds */
    double cpu[STATS_MAX_THREADS];
    uint64_t loop[sizeof(struct loop_stats) / sizeof(counter_t)];
    uint64_t pool[STATS_MAX_THREADS][sizeof(struct pool_stats) / sizeof(counter_t)];
    uint64_t hloop[16];
    uint64_t hworker[STATS_MAX_THREADS][16];
};

struct stats {
    unsigned worker_index;
    unsigned nthreads;                       /* [0] is the loop */
    struct stats_thread_ref threads[STATS_MAX_THREADS];
    struct loop_stats *loop;
    struct pool_stats *pool;                 /* [nthreads - 1] */
    struct handoff *handoff;                 /* NULL inline/native */
    struct stats_snapshot base;              /* window start */
    const char *handoff_name;
    const char *app_name;
    bool inline_mode;
    bool part_file;     /* a worker under a supervisor: write only this worker's object */
};

/* Register the calling thread (the loop: index 0; pool thread i: index i+1). */
void stats_register_self(struct stats *s, unsigned index, const char *name, const char *role);
/* Start a new measurement window now. */
void stats_window_start(struct stats *s);
/* Table on f (the --stats format). */
void stats_print_table(struct stats *s, FILE *f);
/* JSON object for this worker on f (one element of "workers"). */
void stats_print_worker_json(struct stats *s, FILE *f);
/* Whole JSON document with this worker only, atomically replacing path. */
int stats_write_json(struct stats *s, const char *path);

#endif

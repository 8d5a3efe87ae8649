/* stats.h — per-thread instruments: counters with one writer each, CPU time
 * read from each thread's own CPU clock at report time (nothing timed per
 * request), and the measurement window. One snapshot of them all
 * (stats_snapshot_now) feeds every report: the table, --stats-json and
 * the live endpoints, which ../metrics/ renders. */
#ifndef CSERVE_STATS_H
#define CSERVE_STATS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "../../lib/counter.h"

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

/* Each counter list is written once, as an X-macro: the struct, the report's
 * field table (stats.c) and the snapshot arrays below are all made from it,
 * so none of them can be longer than another. */
#define LOOP_STATS_COUNTERS(X)                                      \
    X(requests)     /* responses finished */                       \
    X(passes)       /* loop iterations */                          \
    X(epoll_waits)  /* epoll_wait calls */                         \
    X(events)       /* events returned by epoll_wait */            \
    X(wait_ns)      /* time inside epoll_wait */                   \
    X(pass_ns)      /* time outside it */                          \
    X(accepts)                                                     \
    X(reads)        /* recv calls on client sockets */             \
    X(read_eagain)                                                 \
    X(writes)       /* send/writev/sendfile calls */               \
    X(closes)

#define POOL_STATS_COUNTERS(X)                                      \
    X(requests)     /* app calls finished */                       \
    X(gil_releases) /* times the thread dropped the GIL to wait */ \
    X(messages)     /* intermediate messages posted (flush, need-body) */ \
    X(skipped)      /* requests not run: their client had gone (job_skip) */

/* The handoff's counters (struct handoff_loop_counters and
 * handoff_thread_counters in handoffs/handoff.h) that the reports show;
 * stats.c checks at compile time that each names a field there. */
#define HANDOFF_LOOP_COUNTERS(X)                                    \
    X(submitted) X(full) X(submit_syscalls) X(wakes_sent) X(drained) \
    X(drain_syscalls) X(eagain) X(sleep_syscalls) X(loop_parks)     \
    X(loop_spins) X(loop_spin_hits) X(loop_dozes) X(loop_holds)
#define HANDOFF_THREAD_COUNTERS(X)                                  \
    X(taken) X(take_syscalls) X(parks) X(spins) X(yields) X(completed) \
    X(complete_syscalls) X(loop_wakes) X(spin_hits)
/* Gauges in the same structs: reported as their value when the report is
 * made, never as a difference over the window. */
#define HANDOFF_LOOP_GAUGES(X) X(loop_spin_budget_ns)
#define HANDOFF_THREAD_GAUGES(X) X(spin_budget_ns)

#define STATS_DECLARE_COUNTER(name) counter_t name;
#define STATS_ENUM_LOOP(name) LOOP_C_##name,
#define STATS_ENUM_POOL(name) POOL_C_##name,
#define STATS_ENUM_HLOOP(name) HLOOP_C_##name,
#define STATS_ENUM_HWORKER(name) HTHREAD_C_##name,
#define STATS_ENUM_HLOOP_G(name) HLOOP_G_##name,
#define STATS_ENUM_HWORKER_G(name) HTHREAD_G_##name,

struct loop_stats {
    LOOP_STATS_COUNTERS(STATS_DECLARE_COUNTER)
} __attribute__((aligned(CACHE_LINE)));

struct pool_stats {
    POOL_STATS_COUNTERS(STATS_DECLARE_COUNTER)
    /* --app-timeout: when this thread entered the app on its current
     * request (clock_coarse_ms), 0 outside it; the loop's watchdog reads it. */
    _Atomic uint64_t app_since_ms;
    /* ... and the request it is on (a struct job, stored before
     * app_since_ms): the watchdog names it only after finding it still
     * held by one of the loop's connections. */
    _Atomic(const void *) app_job;
} __attribute__((aligned(CACHE_LINE)));

/* Index of each counter in a snapshot array; the _N value is the count. */
enum { LOOP_STATS_COUNTERS(STATS_ENUM_LOOP) LOOP_C_N };
enum { POOL_STATS_COUNTERS(STATS_ENUM_POOL) POOL_C_N };
enum { HANDOFF_LOOP_COUNTERS(STATS_ENUM_HLOOP) HLOOP_C_N };
enum { HANDOFF_THREAD_COUNTERS(STATS_ENUM_HWORKER) HTHREAD_C_N };
enum { HANDOFF_LOOP_GAUGES(STATS_ENUM_HLOOP_G) HLOOP_G_N };
enum { HANDOFF_THREAD_GAUGES(STATS_ENUM_HWORKER_G) HTHREAD_G_N };

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
    uint64_t loop[LOOP_C_N];
    uint64_t pool[STATS_MAX_THREADS][POOL_C_N];
    uint64_t hloop[HLOOP_C_N];
    uint64_t hthread[STATS_MAX_THREADS][HTHREAD_C_N];
    uint64_t hloop_gauge[HLOOP_G_N];                 /* gauges: the value now, never a difference */
    uint64_t hthread_gauge[STATS_MAX_THREADS][HTHREAD_G_N];
};

struct stats {
    unsigned worker_index;
    unsigned nthreads;                       /* [0] is the loop; the pool threads registered */
    struct stats_thread_ref threads[STATS_MAX_THREADS];
    struct loop_stats *loop;
    struct pool_stats *pool;                 /* [pool_max]: room for every thread it may start */
    unsigned pool_max;                       /* the most pool threads (--blocking-threads) */
    bool threads_auto;                       /* --blocking-threads auto: their number varies */
    const unsigned *pool_active;             /* the ones taking requests now (the loop's
                                              * `active`); NULL: nthreads - 1 */
    struct handoff *handoff;                 /* NULL inline/native */
    struct stats_snapshot base;              /* window start */
    const char *handoff_name;
    const char *app_name;
    bool inline_mode;
    bool part_file;     /* a worker under a supervisor: write only this worker's object */
    /* A new window starts: the verdict's part of it (metrics.c, set by
     * worker.c: stats.c knows nothing of it). */
    void (*on_window_start)(void);
};

/* Register the calling thread (the loop: index 0; pool thread i: index i+1).
 * Its window's CPU baseline is 0, its clock's start: a thread registered
 * before the window starts gets its baseline there, and one that starts
 * later spent all of its CPU time inside the window. The readers see it
 * once s->nthreads covers it, which the thread's owner raises after the
 * registration is published (pool_registered). */
void stats_register_self(struct stats *s, unsigned index, const char *name, const char *role);
/* Pool threads taking requests now. */
unsigned stats_pool_active(const struct stats *s);
/* Thread i's CPU seconds since it started (0 when not registered). */
double stats_thread_cpu_s(const struct stats *s, unsigned i);
/* Every counter, gauge and CPU clock of s now (totals, not a window): the
 * one snapshot every report is made from (metrics.c). */
void stats_snapshot_now(struct stats *s, struct stats_snapshot *snap);
/* Start a new measurement window now (s->base). */
void stats_window_start(struct stats *s);
/* s as a JSON string literal on f, quotes included, whatever bytes s holds. */
void stats_json_string(FILE *f, const char *s);

#endif

/* metrics.h — --metrics-bind: the instruments while the server runs.
 *
 * Data path: each worker's loop thread snapshots its own counters and its
 * threads' CPU clocks twice a second (a thread's CPU clock can be read only
 * inside its process) and publishes the snapshot into its slot of a shared
 * memory region (memfd, MAP_SHARED) made before any worker starts: forked
 * workers inherit the mapping, exec'd ones the descriptor (lifecycle.c).
 * One thread of the process that started the server (the supervisor, or the
 * lone worker, which stays that process when a reload makes it its
 * successor's supervisor) reads the slots and serves HTTP on a listener of
 * its own (metrics_serve.c). */
#ifndef CSERVE_METRICS_H
#define CSERVE_METRICS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../../lib/counter.h"
#include "../base/stats.h"

struct options;

/* What the metrics read of a worker's loop, copied out by the loop itself
 * (loop_snapshot, ../conn/loop.c) on its own thread: the metrics see these
 * figures, never the loop's struct, so nothing here includes the loop. */
struct loop_snapshot {
    unsigned threads;                         /* pool threads the loop has room for */
    unsigned active;                          /* the ones it submits to: 0..active-1 */
    unsigned nconns;                          /* connections open */
    unsigned waiting;                         /* requests waiting in the loop for a thread */
    unsigned outstanding[STATS_MAX_THREADS];  /* [threads]: per pool thread, submitted, not yet done */
};

/* Request latency (the head complete to the last byte written): bucket i
 * holds requests of at most 2^(i+3) microseconds (8 us .. 8.4 s, log-spaced
 * so that one cheap bit count places a request), the last one the rest. */
#define METRICS_BUCKETS 21
#define METRICS_BUCKET_US(i) ((uint64_t)1 << ((i) + 3))
/* Status classes: 1xx .. 5xx, then anything else. */
#define METRICS_CLASSES 6

/* A worker's own counts beyond struct loop_stats; the loop thread is the
 * only writer (counter.h). */
struct metrics_counts {
    counter_t status[METRICS_CLASSES];
    counter_t latency[METRICS_BUCKETS + 1];
    counter_t latency_ns;
    counter_t bytes_in, bytes_out;   /* conn_io.c */
    counter_t samples;               /* queue-depth samples taken (metrics_tick) */
    counter_t samples_queued;        /* ... in which every pool thread had a request waiting */
    counter_t samples_waiting;       /* ... in which every pool thread was busy and a request
                                      * waited behind one */
};
extern struct metrics_counts metrics_counts;

/* --blocking-threads auto: the pool's changes of size, as the dashboard
 * shows them (core/services/sizing.c writes it on the loop thread). */
#define METRICS_SIZING_LINE 248
struct metrics_sizing {
    uint64_t changes;                /* changes of the number of threads taking requests */
    double at;                       /* when the last one was made (CLOCK_MONOTONIC s; 0: none) */
    char last[METRICS_SIZING_LINE];  /* the last one, as logged: the count and the figures */
};
extern struct metrics_sizing metrics_sizing;

/* What the queue samples count, for the pool threads taking requests: the
 * requests waiting for a busy pool (every thread busy: those behind each
 * one's current request and those waiting in the loop for a thread; 0
 * while a thread is free), and whether every thread had a request waiting
 * for it (behind its current one, or in the loop). */
unsigned metrics_pool_waiting(const struct loop_snapshot *l, bool *all_queued);

/* Each response, when metrics are on (core/services/metrics_service.c). */
static inline void metrics_count_response(struct metrics_counts *m, int status, uint64_t head_ns,
                                          uint64_t end_ns)
{
    unsigned cls = status >= 100 && status < 600 ? (unsigned)(status / 100) - 1 : METRICS_CLASSES - 1;
    counter_inc(&m->status[cls]);
    if (!head_ns || end_ns < head_ns)
        return;
    uint64_t ns = end_ns - head_ns, us = (ns + 999) / 1000;
    unsigned b = us <= METRICS_BUCKET_US(0) ? 0 : (unsigned)(64 - __builtin_clzll(us - 1)) - 3;
    counter_inc(&m->latency[b < METRICS_BUCKETS ? b : METRICS_BUCKETS]);
    counter_add(&m->latency_ns, ns);
}

/* main: before any worker starts. Makes the shared region (slots: workers)
 * and starts the thread that serves listen_fd, the --metrics-bind listener
 * (bound by the server's own binder: ../server/listen.c), which it then
 * owns. Prints the error and returns -1 when it cannot. */
int metrics_start(const struct options *opt, unsigned slots, int listen_fd);
/* main, at the end: stop the thread, close the listener. */
void metrics_stop(void);
/* The region's descriptor for an exec'd worker (-1: metrics off). */
int metrics_shm_fd(void);
/* An exec'd worker: map the region its parent passed (lifecycle.c). A
 * server that execs itself in place adopts it too, before metrics_start,
 * which then serves the region its workers already publish into. */
void metrics_shm_adopt(int fd);
/* The --metrics-bind listener metrics_start was given (-1: none). */
int metrics_listen_fd(void);

/* A worker, before it serves: its stats, and (with --metrics-bind) this
 * worker publishes into its slot. Returns true when it publishes. */
bool metrics_attach(struct stats *s);
/* The loop, every METRICS_TICK_MS (a tick hook): sample the queues,
 * publish a snapshot. */
void metrics_tick(const struct loop_snapshot *l);
#define METRICS_TICK_MS 500

/* --stats: the window starts (stats_window_start's on_window_start). */
void metrics_window_mark(void);
/* --stats and --stats-json, on the loop thread (SIGUSR1, the worker's
 * exit): one snapshot of s's window, with the loop's queues (ls), printed
 * as the table on table (NULL: none) and written as JSON to path (NULL:
 * none; the document, or with s->part_file this worker's object alone),
 * which is replaced whole. The JSON is /stats.json's writer's. Returns 0,
 * or -1 with errno when path could not be written. */
int metrics_report(struct stats *s, const struct loop_snapshot *ls, FILE *table, const char *path);

/* A thread's time runnable but not running (ns): the second figure of
 * /proc/PID/task/TID/schedstat, readable from another process. */
bool metrics_run_delay(int pid, int tid, uint64_t *ns);
/* The same file's time on the CPU and run delay, nanoseconds. */
bool metrics_schedstat(int pid, int tid, uint64_t *run_ns, uint64_t *wait_ns);
/* /proc/stat's "cpu" line: all CPUs' busy and total jiffies. */
bool metrics_proc_stat(uint64_t *busy, uint64_t *total);

#endif

/* metrics_internal.h — one worker's snapshot (metrics.c fills it: the
 * published one, and the --stats window's), and what this folder's files
 * share: the view the endpoints render (metrics_history.c fills it,
 * metrics_prometheus.c and metrics_json.c render it, metrics_serve.c
 * serves it), and the one JSON writer of a worker (metrics_json.c), which
 * renders /stats.json's workers and --stats-json's (metrics_report.c). */
#ifndef CSERVE_METRICS_INTERNAL_H
#define CSERVE_METRICS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "metrics.h"
#include "../base/stats.h"
#include "verdict.h"

struct metrics_thread {
    char name[16];
    char role[8];
    int64_t tid;
    double cpu_s;                 /* the thread's CPU clock */
    uint64_t requests;            /* loop: responses finished; pool: app calls */
    uint64_t pool[POOL_C_N];      /* pool threads */
    uint64_t hthread[HTHREAD_C_N];
    uint64_t hthread_gauge[HTHREAD_G_N];
    uint64_t queue;               /* pool threads: requests submitted, not yet done */
};

/* As published, counters are totals since the worker started (never a
 * window): a reader takes differences between its own reads. For --stats
 * (metrics_fill with a base) the threads' and the loop's counters and CPU
 * times are the window's. Words only (doubles as bits), so that the slot
 * can be copied word by word with atomic accesses. */
struct metrics_data {
    double t;                     /* CLOCK_MONOTONIC seconds: one clock for every process */
    double started;               /* when the figures begin: this worker started publishing,
                                   * or (--stats) its window started */
    int64_t pid;
    uint64_t worker;
    uint64_t nthreads;            /* threads[0] is the loop */
    uint64_t pool_threads;        /* taking requests now */
    uint64_t pool_started;        /* started (nthreads - 1) */
    uint64_t pool_max;            /* the most it may start */
    uint64_t pool_auto;           /* --blocking-threads auto */
    uint64_t sizing_changes;
    double sizing_at;
    char sizing_last[METRICS_SIZING_LINE];
    uint64_t has_handoff;
    uint64_t loop[LOOP_C_N];
    uint64_t hloop[HLOOP_C_N];
    uint64_t hloop_gauge[HLOOP_G_N];
    uint64_t status[METRICS_CLASSES];
    uint64_t latency[METRICS_BUCKETS + 1];
    uint64_t latency_ns;
    uint64_t bytes_in, bytes_out;
    uint64_t conns_open;
    uint64_t samples, samples_queued, samples_waiting;
    struct metrics_thread threads[STATS_MAX_THREADS];
};

/* metrics_start: the region, before any worker exists. */
int metrics_shm_create(unsigned nslots);
/* Slots the region holds (one per worker slot). */
unsigned metrics_nslots(void);
/* A consistent copy of slot i; false when it was never published or a
 * writer kept it busy. */
bool metrics_read_slot(unsigned i, struct metrics_data *out);

extern const char *const metrics_class_names[METRICS_CLASSES];
/* The names of the snapshot's counter arrays (loop[], pool[], hloop[],
 * hthread[]): struct loop_stats', struct pool_stats' and the handoff's. */
extern const char *const metrics_loop_names[LOOP_C_N];
extern const char *const metrics_pool_names[POOL_C_N];
extern const char *const metrics_hloop_names[HLOOP_C_N];
extern const char *const metrics_hthread_names[HTHREAD_C_N];
extern const char *const metrics_hloop_gauge_names[HLOOP_G_N];
extern const char *const metrics_hthread_gauge_names[HTHREAD_G_N];

/* metrics.c, on the loop thread: this worker's snapshot into d, from one
 * stats_snapshot_now with the loop's queues (ls) and this worker's own
 * counts. base NULL: totals, as published; else the threads' and the
 * loop's counters and CPU times less base's (the --stats window; gauges
 * and the live-only counts stay as they are). */
void metrics_fill(struct stats *s, const struct loop_snapshot *ls, const struct stats_snapshot *base,
                  struct metrics_data *d);
/* metrics.c: the --stats table's verdict line, over its window. */
void metrics_print_verdict(FILE *f, double window_s, double loop_cpu_s, double pool_cpu_s,
                           unsigned pool_threads, unsigned auto_max);

/* What the endpoints render: the latest read of every slot, and the
 * verdict over the last few seconds of samples. */
struct metrics_view {
    const struct options *opt;
    unsigned nslots;
    struct metrics_data *data; /* [nslots], the latest reads */
    bool *have;                /* [nslots]: data[i] holds a read */
    struct verdict verdict;
    struct verdict_input vin;  /* the figures it rests on */
    unsigned vworker;          /* the busiest worker, whose figures decided */
    uint64_t refused;          /* connections the listener refused (--metrics-allow-ips) */
};

/* metrics_history.c. Allocates the view and the history for the region's
 * slots (0, or -1 with errno); the first verdict is over no samples. */
int metrics_history_init(struct metrics_view *v, const struct options *opt);
void metrics_history_free(struct metrics_view *v);
/* Twice a second: read every slot into the history and the view, and
 * decide the verdict again. */
void metrics_history_sample(struct metrics_view *v);
/* Before rendering: the freshest read of every slot, not the last sample's. */
void metrics_view_refresh(struct metrics_view *v);

/* metrics_prometheus.c, metrics_json.c: the endpoints' bodies. */
void metrics_render_prometheus(FILE *f, const struct metrics_view *v);
void metrics_render_json(FILE *f, const struct metrics_view *v);
/* metrics_json.c: one worker's object, the same for /stats.json's
 * "workers" and --stats-json's: its threads and their counters. live:
 * with what only the endpoint has (connections, bytes, status classes,
 * latency, queue samples, the pool's last change of size, and the loop's
 * counters again at the top). */
void metrics_json_worker(FILE *f, const struct metrics_data *d, bool live);

#endif

/* metrics_internal.h — one worker's published snapshot, as the metrics
 * thread reads it back (metrics.c writes it, metrics_http.c serves it). */
#ifndef CSERVE_METRICS_INTERNAL_H
#define CSERVE_METRICS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "metrics.h"
#include "../base/stats.h"

enum { HLOOP_G_N = 1, HWORKER_G_N = 1 }; /* HANDOFF_*_GAUGES: one each */

struct metrics_thread {
    char name[16];
    char role[8];
    int64_t tid;
    double cpu_s;                 /* the thread's CPU clock */
    uint64_t requests;            /* loop: responses finished; pool: app calls */
    uint64_t pool[POOL_C_N];      /* pool threads */
    uint64_t hworker[HWORKER_C_N];
    uint64_t hworker_gauge[HWORKER_G_N];
    uint64_t queue;               /* pool threads: requests submitted, not yet done */
};

/* Counters are totals since the worker started (never a window): a reader
 * takes differences between its own reads. Words only (doubles as bits),
 * so that the slot can be copied word by word with atomic accesses. */
struct metrics_data {
    double t;                     /* CLOCK_MONOTONIC seconds: one clock for every process */
    double started;               /* when this worker started publishing */
    int64_t pid;
    uint64_t worker;
    uint64_t nthreads;            /* threads[0] is the loop */
    uint64_t pool_threads;
    uint64_t has_handoff;
    uint64_t loop[LOOP_C_N];
    uint64_t hloop[HLOOP_C_N];
    uint64_t hloop_gauge[HLOOP_G_N];
    uint64_t status[METRICS_CLASSES];
    uint64_t latency[METRICS_BUCKETS + 1];
    uint64_t latency_ns;
    uint64_t bytes_in, bytes_out;
    uint64_t conns_open;
    uint64_t samples, samples_queued;
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

#endif

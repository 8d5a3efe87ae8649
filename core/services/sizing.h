/* sizing.h — --blocking-threads auto: the pool's size follows the load.
 * The worker starts one pool thread; this service, on the loop's tick,
 * grows the pool at once when requests keep waiting for busy threads that
 * are off the CPU (a burst), measures a window of the worker's own figures
 * (the verdict's), adds threads while the verdict says threads-short, and
 * retires the ones the load has left idle (sizing_rule.c decides; the
 * README says why). */
#ifndef CSERVE_SIZING_H
#define CSERVE_SIZING_H

#include <stdbool.h>
#include <stdint.h>

#include "../conn/loop.h"

struct stats;
struct worker_owner;

/* What the service asks of the pool, which it cannot include (the server
 * fills it in: core/server/worker.c). Both on the loop thread. */
struct pool_control {
    void *ctx;
    /* Start pool thread k, the next one (k == the threads started so far):
     * 0, or an errno. */
    int (*start)(void *ctx, unsigned k);
    /* How many of the started threads are in the stats (an acquire). */
    unsigned (*registered)(void *ctx);
    /* Wait until n started threads are in the stats, or wait_ms has
     * passed: true when they are. */
    bool (*wait_registered)(void *ctx, unsigned n, unsigned wait_ms);
};

struct sizing {
    struct loop_hook hook;
    struct stats *stats;
    const struct pool_control *pool;
    const struct worker_owner *owner; /* told each size (a successor starts with it); NULL: none */
    unsigned started;             /* threads started (retired ones stay started, parked) */
    unsigned max;                 /* the most it may start (lowered if a start fails) */
    bool gil;                     /* the interpreter has a GIL */
    /* The window: since from_ms, how long a request waited for a busy
     * pool, how many on average, how long every thread had a queue. */
    bool opened;                  /* the first window has started (the loop's first pass) */
    uint64_t from_ms, last_ms;
    unsigned last_waiting;        /* at the last look: requests waiting for a busy pool */
    bool last_queued;             /* ... every thread had a queue */
    uint64_t waiting_ms, waiting_req_ms, queued_ms;
    /* The burst's span (sizing_rule.h): open while every look saw requests
     * waiting; at its start the loop thread's CPU clock and the threads
     * taking requests' time on the CPU and run delay (schedstat). */
    bool burst_open;
    bool burst_held;              /* a span found the threads on the CPU: none until the window closes */
    unsigned burst_gap_ms;        /* after one that found them waiting for a CPU: the wait for the next (0: none) */
    uint64_t burst_next_ms;       /* when the next may open */
    uint64_t burst_from_ms, burst_from_ns;
    unsigned burst_looks, burst_waiting;
    double burst_loop_cpu;
    uint64_t burst_run_ns, burst_ready_ns;
    bool burst_ok;                /* the threads' figures were read at its start */
    uint64_t burst_requests;      /* the requests the threads taking requests had had, at its start */
    bool capped_said;             /* the advice at its most is logged (until it leaves it) */
    bool grew;                    /* the pool grew in this pass: the next one comes at once */
    /* The window's starting points: CPU clocks, run delay, /proc/stat. */
    double loop_cpu, pool_cpu;
    uint64_t ready_ns, busy, total;
    bool ready_ok, proc_ok;
    /* Per thread [max]: when it last had a request, and its request count
     * then (a request it took and finished within one pass leaves no queue
     * for the look to see, but counts). */
    uint64_t *last_used_ms;
    uint64_t *requests_seen;
};

/* With --blocking-threads auto: register on l, whose pool has `started`
 * threads of at most l->threads, and let the loop submit to those only.
 * gil: false on a free-threaded build with the GIL off. 0, or -1 (out of
 * memory, or no room for a hook). */
int sizing_start(struct sizing *z, struct loop *l, struct stats *stats, const struct pool_control *pool,
                 unsigned started, bool gil);
/* After loop_run: wait for the threads started to be in the stats, so the
 * report at exit shows them (SIZING_STOP_WAIT_MS at most: a thread that
 * never registers does not hold the exit up); free what it holds. */
#define SIZING_STOP_WAIT_MS 1000
void sizing_stop(struct sizing *z);

#endif

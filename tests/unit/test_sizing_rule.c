/* test_sizing_rule.c — --blocking-threads auto's decisions
 * (core/services/sizing_rule.c): it grows only where the verdict says
 * threads-short, never while the GIL or the loop is saturated or the
 * threads wait for a CPU; to the threads plus the requests that waited, in
 * one step, never past the GIL's saturation by more than one nor past its
 * bound; on a free-threaded build without the GIL, neither GIL time nor
 * threads on the CPU stop it while cores are idle, and threads waiting for
 * a CPU or a full machine do; a burst (requests waiting on every look for
 * SIZING_BURST_MS, the threads off the CPU) grows it at once the same way,
 * and nothing else does; and the threads the last idle window needed. */
#include <string.h>

#include "check.h"
#include "../../core/metrics/verdict.c" /* pure files: built in, no Makefile rule of their own */
#include "../../core/services/sizing_rule.c"

/* A window at `threads` threads: loop and pool shares of a core, the pool's
 * run delay, the share of the window a request waited for a busy pool and
 * how many did on average. */
static struct sizing_window window(double loop, double pool, double ready, double waiting, double mean,
                                   unsigned threads, bool gil)
{
    return (struct sizing_window){.gil = gil, .waiting_mean = mean,
                                  .v = {.window_s = 1, .loop_util = loop, .pool_util = pool, .pool_ready = ready,
                                        .queued_frac = waiting, .queued_max = waiting, .waiting_frac = waiting,
                                        .machine_busy = 0.3, .pool_threads = threads}};
}

static unsigned grow(struct sizing_window w, unsigned active, unsigned max)
{
    struct verdict v;
    unsigned to = sizing_grow(&w, active, max, &v);
    CHECK(to == active || v.regime == REGIME_THREADS_SHORT || !w.gil, "a step rests on threads-short (%s)",
          v.name);
    return to;
}

int main(void)
{
    /* Threads short: to the threads plus the requests that waited, in one
     * step. */
    CHECK(grow(window(0.02, 0.01, 0, 1.0, 31, 1, true), 1, 32) == 32, "one thread, 31 waiting: 32");
    CHECK(grow(window(0.02, 0.04, 0, 1.0, 28, 4, true), 4, 64) == 32, "four, 28 waiting: 32");
    CHECK(grow(window(0.02, 0.10, 0, 1.0, 14.5, 16, true), 16, 32) == 31, "sixteen, 14.5 waiting: 31");
    CHECK(grow(window(0.02, 0.001, 0, 1.0, 1e12, 1, true), 1, 256) == 256, "a huge mean: the bound");
    CHECK(grow(window(0.02, 0.10, 0, 0.9, 0.8, 16, true), 16, 32) == 17, "under one waiting: one more");
    CHECK(grow(window(0.02, 0.10, 0, 1.0, 40, 16, true), 16, 24) == 24, "never past the bound");
    CHECK(grow(window(0.02, 0.10, 0, 1.0, 40, 24, true), 24, 24) == 24, "at the bound: stays");
    /* The GIL's headroom: each of 4 threads held it 15 %: 6 reach 90 %. */
    CHECK(grow(window(0.05, 0.60, 0, 1.0, 28, 4, true), 4, 32) == 6, "stops where the GIL would saturate");
    CHECK(grow(window(0.05, 0.85, 0, 1.0, 28, 4, true), 4, 32) == 5, "one past it at least");
    /* Not threads-short: no step. */
    CHECK(grow(window(0.02, 0.01, 0, 0.5, 3, 1, true), 1, 32) == 1, "requests wait half the time");
    CHECK(grow(window(0.02, 0.95, 0, 1.0, 31, 1, true), 1, 32) == 1, "gil-bound: stays at one");
    CHECK(grow(window(0.02, VERDICT_SATURATED, 0, 1.0, 31, 4, true), 4, 32) == 4, "gil-bound at the threshold");
    CHECK(grow(window(0.95, 0.10, 0, 1.0, 31, 2, true), 2, 32) == 2, "loop-bound");
    CHECK(grow(window(0.02, 0.30, 0.40, 1.0, 31, 1, true), 1, 32) == 1, "waiting for a CPU");
    CHECK(grow(window(0.02, 0.60, 0, 1.0, 31, 1, true), 1, 32) == 1, "one thread on the CPU 60%%");
    CHECK(grow(window(0, 0, 0, 0, 0, 1, true), 1, 32) == 1, "idle");
    /* Free-threaded, the GIL off: four threads at 95 % of a core together,
     * and four at 2.4 cores (on the CPU 60 % each), with the machine 30 %
     * busy: idle cores, short of threads either way. */
    CHECK(grow(window(0.05, 0.95, 0, 1.0, 28, 4, false), 4, 32) == 32, "no GIL: GIL time does not stop it");
    CHECK(grow(window(0.05, 2.4, 0, 1.0, 28, 4, false), 4, 32) == 32, "no GIL: threads on the CPU, cores idle");
    CHECK(grow(window(0.05, 0.8, 0.5, 1.0, 28, 4, false), 4, 32) == 4, "no GIL: threads waiting for a CPU");
    CHECK(grow(window(0.95, 0.4, 0, 1.0, 28, 4, false), 4, 32) == 4, "no GIL: the loop saturated");
    CHECK(grow(window(0.05, 0.2, 0, 0.3, 28, 4, false), 4, 32) == 4, "no GIL: requests seldom wait");
    struct sizing_window full = window(0.05, 1.6, 0.2, 1.0, 28, 4, false);
    full.v.machine_busy = VERDICT_SATURATED;
    CHECK(grow(full, 4, 32) == 4, "no GIL: the machine full");

    /* A burst: 39 requests waited on every look for SIZING_BURST_MS with
     * the one thread off the CPU: 40 at once, within the bound. */
    const double span = SIZING_BURST_MS / 1000.0;
    struct sizing_burst b = {.span_s = span, .looks = 3, .waiting = 39, .loop_util = 0.05, .pool_util = 0.01,
                             .gil = true};
    CHECK(sizing_burst(&b, 1, 64) == 40, "a burst of 40 on one thread: 40");
    CHECK(sizing_burst(&b, 1, 16) == 16, "within the bound");
    CHECK(sizing_burst(&b, 16, 16) == 16, "at the bound: stays");
    CHECK(sizing_burst(&b, 8, 64) == 47, "from eight: eight more than waited");
    struct sizing_burst c = b;
    c.span_s = span * 0.9;
    CHECK(sizing_burst(&c, 1, 64) == 1, "a span shorter than SIZING_BURST_MS");
    c = b;
    c.looks = SIZING_BURST_LOOKS - 1;
    CHECK(sizing_burst(&c, 1, 64) == 1, "one look");
    c = b;
    c.waiting = 0;
    CHECK(sizing_burst(&c, 1, 64) == 1, "nothing waiting");
    c = b;
    c.loop_util = VERDICT_SATURATED;
    CHECK(sizing_burst(&c, 1, 64) == 1, "the loop saturated");
    c = b;
    c.pool_util = 0.95;
    CHECK(sizing_burst(&c, 1, 64) == 1, "the thread on the CPU (the GIL held)");
    c.pool_util = 0.6;
    CHECK(sizing_burst(&c, 1, 64) == 1, "the thread on the CPU more than half the span");
    c.pool_util = 0.92;
    CHECK(sizing_burst(&c, 4, 64) == 4, "four threads on the GIL 92%% of the span");
    c.pool_util = 0.3;
    CHECK(sizing_burst(&c, 1, 64) == 3, "30%% of the GIL: three reach 90%%");
    c.pool_util = 0.45;
    CHECK(sizing_burst(&c, 1, 64) == 2, "45%%: two");
    c = b;
    c.pool_ready = 0.6;
    CHECK(sizing_burst(&c, 1, 64) == 1, "the thread waiting for a CPU (runnable, not running)");
    c.pool_ready = 0.15;
    CHECK(sizing_burst(&c, 1, 64) == 1, "waiting for a CPU past VERDICT_READY");
    c.pool_ready = 0.3;
    CHECK(sizing_burst(&c, 4, 64) == 43, "four threads, 7.5%% of the span each waiting for a CPU");
    c.pool_ready = -1;
    CHECK(sizing_burst(&c, 1, 64) == 40, "the run delay unknown");
    c = b;
    c.gil = false;
    c.pool_util = 1.2;
    CHECK(sizing_burst(&c, 4, 64) == 43, "no GIL: four threads 30%% on the CPU each: no GIL cap");
    c.pool_util = 2.4;
    CHECK(sizing_burst(&c, 4, 64) == 4, "no GIL: four threads on the CPU: the window decides");

    /* After a span that did not grow: threads that ran hold the bursts
     * until the window closes; threads off the CPU that waited for one
     * (a wake-up on a busy machine) get another span, at doubling gaps. */
    c = b;
    c.pool_ready = 0.3;
    CHECK(sizing_burst(&c, 1, 64) == 1 && sizing_burst_gap(&c, 1, 0) == 2 * SIZING_BURST_MS,
          "a woken thread's run delay: again after 20 ms");
    CHECK(sizing_burst_gap(&c, 1, 2 * SIZING_BURST_MS) == 4 * SIZING_BURST_MS, "then after 40 ms");
    CHECK(sizing_burst_gap(&c, 1, SIZING_BURST_GAP_MS / 2 + 1) == 0, "past half the window: the window decides");
    unsigned spans = 0;
    for (unsigned g = sizing_burst_gap(&c, 1, 0); g; g = sizing_burst_gap(&c, 1, g))
        spans++;
    CHECK(spans == 5, "five spans more a window at most");
    c.pool_util = 0.6;
    CHECK(sizing_burst_gap(&c, 1, 0) == 0, "the thread on the CPU: held until the window closes");
    c.pool_util = 0.3;
    c.pool_ready = 0.7;
    CHECK(sizing_burst_gap(&c, 1, 0) == 0, "a CPU-bound thread on a busy machine: held");
    CHECK(sizing_burst_gap(&c, 4, 0) == 2 * SIZING_BURST_MS, "the same time over four threads: looked at again");
    c.pool_util = 0.01;
    c.loop_util = VERDICT_SATURATED;
    CHECK(sizing_burst_gap(&c, 1, 0) == 0, "the loop saturated: held");
    c = b;
    c.pool_util = 0.92;
    CHECK(sizing_burst_gap(&c, 4, 0) == 0, "the GIL saturated: held");
    CHECK(sizing_burst_gap(&c, 16, 0) == 0, "the GIL saturated over sixteen threads: held");
    c = b;
    c.finished = true;
    CHECK(sizing_burst(&c, 1, 64) == 1 && sizing_burst_gap(&c, 1, 0) == 0,
          "a thread that finished a request within the span: not a burst, held");

    /* The threads a new worker starts with: its predecessor's size, within
     * its own bound. */
    CHECK(sizing_first(0, 64) == 1, "a first start: one");
    CHECK(sizing_first(12, 64) == 12, "the learned size");
    CHECK(sizing_first(100, 64) == 64, "no more than its MAX (a reload may lower it)");
    CHECK(sizing_first(5, 0) == 0, "no pool");

    /* The threads the last idle window needed. */
    const uint64_t now = 100000, idle = SIZING_IDLE_MS;
    uint64_t used[6] = {now, now - 100, now - idle - 1, now - idle + 1, now - 3 * idle, 0};
    CHECK(sizing_needed(used, 6, now, idle) == 4, "the highest used within the window: thread 3");
    CHECK(sizing_needed(used, 3, now, idle) == 2, "of the active ones only");
    CHECK(sizing_needed(used + 4, 2, now, idle) == 1, "none used: one stays");
    uint64_t at_edge[2] = {now, now - idle};
    CHECK(sizing_needed(at_edge, 2, now, idle) == 1, "idle for exactly the window: retired");
    return check_summary();
}

/* test_verdict.c — the regime table of core/metrics/verdict.c: each regime from its
 * figures, the thresholds' edges, the precedence when several apply, that
 * requests queued most of the window are never called not-loaded, and that
 * threads are short when requests wait for busy threads, not only when each
 * thread has a queue. */
#include <string.h>

#include "check.h"
#include "../../core/metrics/verdict.c" /* one pure file: built in, no Makefile rule of its own */

/* queued: both queue shares (every thread queued, a request waiting for a
 * busy pool), which are one with one thread. */
static enum regime decide_ready(double loop, double pool, double ready, double queued, double busy,
                               unsigned threads)
{
    struct verdict_input in = {.window_s = 3, .loop_util = loop, .pool_util = pool, .pool_ready = ready,
                               .queued_frac = queued, .waiting_frac = queued, .machine_busy = busy,
                               .pool_threads = threads};
    struct verdict v;
    verdict_decide(&in, &v);
    CHECK(v.name && v.advice[0] && v.why[0], "every verdict names itself, advises and explains");
    CHECK(strcmp(v.name, verdict_name(v.regime)) == 0, "name matches the regime");
    return v.regime;
}

static enum regime decide(double loop, double pool, double queued, double busy, unsigned threads)
{
    return decide_ready(loop, pool, 0, queued, busy, threads);
}

/* Two workers: the least queued one's share, and the most queued one's. */
static enum regime decide_two(double pool, double queued_least, double queued_most, double busy)
{
    struct verdict_input in = {.window_s = 3, .loop_util = 0.2, .pool_util = pool, .queued_frac = queued_least,
                               .queued_max = queued_most, .waiting_frac = queued_least, .machine_busy = busy,
                               .pool_threads = 1};
    struct verdict v;
    verdict_decide(&in, &v);
    return v.regime;
}

/* Many threads, the two shares apart: every thread busy and requests
 * waiting (waiting) while some threads have no queue (queued is less). */
static enum regime decide_waiting(double pool, double queued, double waiting, unsigned threads)
{
    struct verdict_input in = {.window_s = 3, .loop_util = 0.1, .pool_util = pool, .queued_frac = queued,
                               .queued_max = queued, .waiting_frac = waiting, .machine_busy = 0.3,
                               .pool_threads = threads};
    struct verdict v;
    verdict_decide(&in, &v);
    CHECK(strstr(v.why, "a request waiting for a busy pool") != NULL, "why names the waiting share");
    return v.regime;
}

int main(void)
{
    /* One regime each. */
    CHECK(decide(0.95, 0.30, 0.0, 0.99, 1) == REGIME_LOOP_BOUND, "loop at 95%%");
    CHECK(decide(0.40, 0.97, 1.0, 0.80, 4) == REGIME_GIL_BOUND, "pool together at 97%%");
    CHECK(decide(0.10, 0.05, 1.0, 0.10, 1) == REGIME_THREADS_SHORT, "pool idle, queued");
    CHECK(decide(0.60, 0.60, 0.2, 0.95, 1) == REGIME_MACHINE_BOUND, "no stage full, machine full");
    CHECK(decide(0.20, 0.60, 0.9, 0.50, 1) == REGIME_POOL_QUEUED, "queued, the thread on the GIL 60%%");
    CHECK(decide(0.05, 0.02, 0.0, 0.05, 1) == REGIME_NOT_LOADED, "idle");
    /* Edges: the thresholds count as reached. */
    CHECK(decide(VERDICT_SATURATED, 0, 0, 0, 1) == REGIME_LOOP_BOUND, "loop at the threshold");
    CHECK(decide(0.8999, 0, 0, 0, 1) == REGIME_NOT_LOADED, "loop just under");
    CHECK(decide(0, VERDICT_SATURATED, 0, 0, 1) == REGIME_GIL_BOUND, "pool at the threshold");
    CHECK(decide(0, 0, VERDICT_QUEUED, 0, 1) == REGIME_THREADS_SHORT, "queued at the threshold");
    CHECK(decide(0, 0, 0.74, 0, 1) == REGIME_POOL_QUEUED, "queued just under: still queued most of the time");
    CHECK(decide(0, 0.6, VERDICT_QUEUED_MOST, 0, 1) == REGIME_POOL_QUEUED, "queued half the time");
    CHECK(decide(0, 0.6, 0.49, 0, 1) == REGIME_NOT_LOADED, "queued just under half the time");
    CHECK(decide(0, 0, 0, VERDICT_SATURATED, 1) == REGIME_MACHINE_BOUND, "machine at the threshold");
    /* Precedence. */
    CHECK(decide(0.95, 0.95, 1.0, 1.0, 1) == REGIME_LOOP_BOUND, "loop before the GIL");
    CHECK(decide(0.50, 0.95, 1.0, 1.0, 1) == REGIME_GIL_BOUND, "GIL before short threads");
    CHECK(decide(0.40, 0.30, 1.0, 1.0, 1) == REGIME_THREADS_SHORT, "short threads before the machine");
    CHECK(decide(0.20, 0.60, 0.9, 0.95, 1) == REGIME_MACHINE_BOUND, "the machine before a queued pool");
    /* Queued but runnable: short of a CPU, not of threads. */
    CHECK(decide_ready(0.15, 0.15, 0.60, 0.9, 1.0, 1) == REGIME_MACHINE_BOUND, "queued, waiting for a CPU");
    CHECK(decide_ready(0.15, 0.15, 0.30, 0.9, 1.0, 1) == REGIME_MACHINE_BOUND, "waiting 30%% for a CPU");
    CHECK(decide_ready(0.15, 0.35, 0.05, 0.9, 1.0, 1) == REGIME_THREADS_SHORT, "off the CPU 60%%");
    CHECK(decide_ready(0.10, 0.45, 0.09, 1.0, 0.2, 1) == REGIME_POOL_QUEUED, "running or runnable 54%%");
    CHECK(decide_ready(0.10, 0.80, 0.30, 1.0, 0.2, 4) == REGIME_THREADS_SHORT, "four threads, 27%% each");
    CHECK(decide_ready(0.10, 0.40, 0.50, 1.0, 0.2, 4) == REGIME_POOL_QUEUED, "four threads waiting 12%% each");
    /* A burst queued 83%% of the window, its one thread on the GIL 60%%,
     * half the machine idle: the dashboard once called that not-loaded. */
    CHECK(decide_ready(0.15, 0.60, 0.04, 0.83, 0.5, 1) == REGIME_POOL_QUEUED, "a queued burst");
    /* Two workers: threads short only if both are; queued if either is. */
    CHECK(decide_two(0.6, 0.0, 0.83, 0.5) == REGIME_POOL_QUEUED, "one worker queued, one idle");
    CHECK(decide_two(0.6, 0.0, 0.20, 0.5) == REGIME_NOT_LOADED, "neither queued");
    /* Whatever the other figures, requests queued half the window or more
     * are never "not loaded". */
    {
        static const double loads[] = {0, 0.3, 0.5, 0.7, 0.89};
        static const double busies[] = {-1, 0, 0.5, 0.89};
        static const double queues[] = {0.5, 0.6, 0.75, 0.83, 1.0};
        static const unsigned threads[] = {1, 2, 4};
        unsigned idle = 0;
        for (size_t a = 0; a < 5; a++)
            for (size_t b = 0; b < 5; b++)
                for (size_t r = 0; r < 5; r++)
                    for (size_t q = 0; q < 5; q++)
                        for (size_t m = 0; m < 4; m++)
                            for (size_t t = 0; t < 3; t++)
                                idle += decide_ready(loads[a], loads[b], loads[r], queues[q], busies[m],
                                                     threads[t]) == REGIME_NOT_LOADED;
        CHECK(idle == 0, "queued half the window or more: never not-loaded (%u cases were)", idle);
    }
    /* 32 requests on 17 threads: 15 with two, 2 with one, so never every
     * thread queued, yet 15 requests wait for a thread all the time. */
    CHECK(decide_waiting(0.05, 0.0, 0.95, 17) == REGIME_THREADS_SHORT, "requests wait, not every thread queued");
    CHECK(decide_waiting(0.05, 0.0, 0.5, 17) == REGIME_NOT_LOADED, "requests wait half the time");
    CHECK(decide_waiting(0.05, 0.0, VERDICT_QUEUED, 17) == REGIME_THREADS_SHORT, "waiting at the threshold");
    CHECK(decide_waiting(0.6, 0.6, 0.6, 4) == REGIME_POOL_QUEUED, "queued 60%%, waiting under the threshold");
    CHECK(decide_waiting(0.95, 0.0, 1.0, 17) == REGIME_GIL_BOUND, "waiting behind the GIL: gil-bound");
    /* No pool (--inline, native-hello): pool figures cannot decide. */
    CHECK(decide(0.2, 0.95, 1.0, 0.2, 0) == REGIME_NOT_LOADED, "no pool threads");
    CHECK(decide(0.2, 0.2, 0.0, -1, 1) == REGIME_NOT_LOADED, "machine unknown");
    /* Advice names the option to change. */
    CHECK(strstr(verdict_advice(REGIME_LOOP_BOUND), "--workers") != NULL, "loop: workers");
    CHECK(strstr(verdict_advice(REGIME_GIL_BOUND), "--workers") != NULL, "GIL: workers");
    CHECK(strstr(verdict_advice(REGIME_THREADS_SHORT), "--blocking-threads") != NULL, "threads");
    CHECK(strstr(verdict_advice(REGIME_POOL_QUEUED), "--workers") != NULL, "a queued pool: workers");
    CHECK(strstr(verdict_advice(REGIME_NOT_LOADED), "nothing to do") != NULL, "idle");
    CHECK(strstr(verdict_advice(REGIME_NOT_LOADED), "idle") == NULL, "not-loaded claims no idle CPU");
    CHECK(strcmp(verdict_name(REGIME_N), "unknown") == 0, "out of range");
    /* With --blocking-threads auto, threads-short's advice is auto's: it
     * adds threads below its MAX; at it, raise MAX (or, at the most there
     * is, add workers). Other regimes keep theirs. */
    struct verdict_input short_in = {.window_s = 1, .loop_util = 0.05, .pool_util = 0.05, .queued_frac = 1,
                                     .queued_max = 1, .waiting_frac = 1, .machine_busy = 0.2, .pool_threads = 8};
    struct verdict v;
    verdict_decide(&short_in, &v);
    CHECK(v.regime == REGIME_THREADS_SHORT && strcmp(v.advice, verdict_advice(REGIME_THREADS_SHORT)) == 0,
          "a fixed count: add --blocking-threads");
    short_in.auto_max = 64;
    verdict_decide(&short_in, &v);
    CHECK(strcmp(v.advice, "none: --blocking-threads auto is adding threads (8 of at most 64)") == 0, "%s", v.advice);
    short_in.auto_max = 8;
    verdict_decide(&short_in, &v);
    CHECK(strncmp(v.advice, "raise auto's MAX: --blocking-threads auto:16 (it is at its most, 8,", 66) == 0, "%s",
          v.advice);
    short_in.auto_max = short_in.pool_threads = 200;
    verdict_decide(&short_in, &v);
    CHECK(strstr(v.advice, "--blocking-threads auto:256 ") != NULL, "doubled, within the bound: %s", v.advice);
    short_in.auto_max = short_in.pool_threads = VERDICT_AUTO_MOST;
    verdict_decide(&short_in, &v);
    CHECK(strncmp(v.advice, "add --workers: --blocking-threads auto is at the most", 52) == 0, "%s", v.advice);
    short_in.pool_util = 0.95;
    verdict_decide(&short_in, &v);
    CHECK(v.regime == REGIME_GIL_BOUND && strcmp(v.advice, verdict_advice(REGIME_GIL_BOUND)) == 0,
          "gil-bound with auto: its own advice");
    return check_summary();
}

/* test_verdict.c — the regime table of core/metrics/verdict.c: each regime from its
 * figures, the thresholds' edges, and the precedence when several apply. */
#include <string.h>

#include "check.h"
#include "../../core/metrics/verdict.c" /* one pure file: built in, no Makefile rule of its own */

static enum regime decide_ready(double loop, double pool, double ready, double queued, double busy,
                               unsigned threads)
{
    struct verdict_input in = {.window_s = 3, .loop_util = loop, .pool_util = pool, .pool_ready = ready,
                               .queued_frac = queued, .machine_busy = busy, .pool_threads = threads};
    struct verdict v;
    verdict_decide(&in, &v);
    CHECK(v.name && v.advice && v.why[0], "every verdict names itself, advises and explains");
    CHECK(strcmp(v.name, verdict_name(v.regime)) == 0, "name matches the regime");
    return v.regime;
}

static enum regime decide(double loop, double pool, double queued, double busy, unsigned threads)
{
    return decide_ready(loop, pool, 0, queued, busy, threads);
}

int main(void)
{
    /* One regime each. */
    CHECK(decide(0.95, 0.30, 0.0, 0.99, 1) == REGIME_LOOP_BOUND, "loop at 95%%");
    CHECK(decide(0.40, 0.97, 1.0, 0.80, 4) == REGIME_GIL_BOUND, "pool together at 97%%");
    CHECK(decide(0.10, 0.05, 1.0, 0.10, 1) == REGIME_THREADS_SHORT, "pool idle, queued");
    CHECK(decide(0.60, 0.60, 0.2, 0.95, 1) == REGIME_MACHINE_BOUND, "no stage full, machine full");
    CHECK(decide(0.05, 0.02, 0.0, 0.05, 1) == REGIME_NOT_LOADED, "idle");
    /* Edges: the thresholds count as reached. */
    CHECK(decide(VERDICT_SATURATED, 0, 0, 0, 1) == REGIME_LOOP_BOUND, "loop at the threshold");
    CHECK(decide(0.8999, 0, 0, 0, 1) == REGIME_NOT_LOADED, "loop just under");
    CHECK(decide(0, VERDICT_SATURATED, 0, 0, 1) == REGIME_GIL_BOUND, "pool at the threshold");
    CHECK(decide(0, 0, VERDICT_QUEUED, 0, 1) == REGIME_THREADS_SHORT, "queued at the threshold");
    CHECK(decide(0, 0, 0.74, 0, 1) == REGIME_NOT_LOADED, "queued just under");
    CHECK(decide(0, 0, 0, VERDICT_SATURATED, 1) == REGIME_MACHINE_BOUND, "machine at the threshold");
    /* Precedence. */
    CHECK(decide(0.95, 0.95, 1.0, 1.0, 1) == REGIME_LOOP_BOUND, "loop before the GIL");
    CHECK(decide(0.50, 0.95, 1.0, 1.0, 1) == REGIME_GIL_BOUND, "GIL before short threads");
    CHECK(decide(0.40, 0.30, 1.0, 1.0, 1) == REGIME_THREADS_SHORT, "short threads before the machine");
    /* Queued but runnable: short of a CPU, not of threads. */
    CHECK(decide_ready(0.15, 0.15, 0.60, 0.9, 1.0, 1) == REGIME_MACHINE_BOUND, "queued, waiting for a CPU");
    CHECK(decide_ready(0.15, 0.15, 0.30, 0.9, 1.0, 1) == REGIME_MACHINE_BOUND, "waiting 30%% for a CPU");
    CHECK(decide_ready(0.15, 0.35, 0.05, 0.9, 1.0, 1) == REGIME_THREADS_SHORT, "off the CPU 60%%");
    CHECK(decide_ready(0.10, 0.45, 0.09, 1.0, 0.2, 1) == REGIME_NOT_LOADED, "running or runnable 54%%");
    CHECK(decide_ready(0.10, 0.80, 0.30, 1.0, 0.2, 4) == REGIME_THREADS_SHORT, "four threads, 27%% each");
    CHECK(decide_ready(0.10, 0.40, 0.50, 1.0, 0.2, 4) == REGIME_NOT_LOADED, "four threads waiting 12%% each");
    /* No pool (--inline, native-hello): pool figures cannot decide. */
    CHECK(decide(0.2, 0.95, 1.0, 0.2, 0) == REGIME_NOT_LOADED, "no pool threads");
    CHECK(decide(0.2, 0.2, 0.0, -1, 1) == REGIME_NOT_LOADED, "machine unknown");
    /* Advice names the option to change. */
    CHECK(strstr(verdict_advice(REGIME_LOOP_BOUND), "--workers") != NULL, "loop: workers");
    CHECK(strstr(verdict_advice(REGIME_GIL_BOUND), "--workers") != NULL, "GIL: workers");
    CHECK(strstr(verdict_advice(REGIME_THREADS_SHORT), "--blocking-threads") != NULL, "threads");
    CHECK(strstr(verdict_advice(REGIME_NOT_LOADED), "nothing to do") != NULL, "idle");
    CHECK(strcmp(verdict_name(REGIME_N), "unknown") == 0, "out of range");
    return check_summary();
}

/* verdict.c — the regime table (verdict.h).
 *
 * Precedence, and why: the loop comes first because every request passes
 * through it, so while it is saturated nothing behind it can be fed faster
 * (a busy GIL behind a saturated loop is a symptom). The GIL comes before
 * short threads because more threads cannot help while one of them holding
 * the GIL is already the limit. A stage of the server saturated comes before
 * the machine being full, since the stage is what an option can change;
 * the machine is the bound only when no stage is. Threads count as short
 * when requests wait for one while every thread is busy (not only when each
 * has a queue: with more threads than half the requests in flight, some
 * have one request and none behind it, and another thread would still
 * take a waiting request), and only while they wait off the CPU: queued
 * threads that are runnable but
 * not running (a full machine) are short of a CPU, which more threads
 * would not give them. Requests that queue for the pool most of the window
 * while its threads are none of these (partly on the GIL, partly waiting)
 * still mean the pool is the bound: never "not loaded". */
#include "verdict.h"

#include <stdio.h>

static const char *const names[REGIME_N] = {
    [REGIME_LOOP_BOUND] = "loop-bound",
    [REGIME_GIL_BOUND] = "gil-bound",
    [REGIME_THREADS_SHORT] = "threads-short",
    [REGIME_MACHINE_BOUND] = "machine-bound",
    [REGIME_POOL_QUEUED] = "pool-queued",
    [REGIME_NOT_LOADED] = "not-loaded",
};

static const char *const advice[REGIME_N] = {
    [REGIME_LOOP_BOUND] = "add --workers: each worker has a loop thread of its own",
    [REGIME_GIL_BOUND] = "add --workers: one GIL per process (more threads would only queue "
                         "for the same GIL); past the cores, the app is the cost",
    [REGIME_THREADS_SHORT] = "add --blocking-threads: requests wait for a thread while the "
                             "threads wait on I/O with the GIL released",
    [REGIME_MACHINE_BOUND] = "the machine is full: the app (or what shares the machine) is the "
                             "cost; more workers or threads would not help",
    [REGIME_POOL_QUEUED] = "add --workers: requests queue for the pool threads, busy partly on the GIL "
                          "and partly waiting; more --blocking-threads would help only the waiting part",
    [REGIME_NOT_LOADED] = "nothing to do: no stage is saturated and requests seldom wait for a pool thread",
};

const char *verdict_name(enum regime r)
{
    return r < REGIME_N ? names[r] : "unknown";
}

const char *verdict_advice(enum regime r)
{
    return r < REGIME_N ? advice[r] : "";
}

bool verdict_threads_short(const struct verdict_input *in)
{
    double ready = in->pool_ready > 0 ? in->pool_ready : 0;
    return in->pool_threads && in->waiting_frac >= VERDICT_QUEUED &&
           (in->pool_util + ready) / in->pool_threads < VERDICT_OFF_CPU &&
           ready / in->pool_threads < VERDICT_READY;
}

void verdict_decide(const struct verdict_input *in, struct verdict *out)
{
    enum regime r;
    if (in->loop_util >= VERDICT_SATURATED)
        r = REGIME_LOOP_BOUND;
    else if (in->pool_threads && in->pool_util >= VERDICT_SATURATED)
        r = REGIME_GIL_BOUND;
    else if (verdict_threads_short(in))
        r = REGIME_THREADS_SHORT;
    else if (in->machine_busy >= VERDICT_SATURATED)
        r = REGIME_MACHINE_BOUND;
    else if (in->pool_threads && (in->queued_max > in->queued_frac ? in->queued_max : in->queued_frac) >=
                                     VERDICT_QUEUED_MOST)
        r = REGIME_POOL_QUEUED;
    else
        r = REGIME_NOT_LOADED;
    out->regime = r;
    out->name = names[r];
    snprintf(out->advice, sizeof out->advice, "%s", advice[r]);
    /* With auto, more threads are its to start: below its MAX it does,
     * at it only a higher MAX (or, at the most there is, more workers)
     * gives more. */
    if (r == REGIME_THREADS_SHORT && in->auto_max) {
        unsigned more = in->auto_max * 2 < VERDICT_AUTO_MOST ? in->auto_max * 2 : VERDICT_AUTO_MOST;
        if (in->pool_threads < in->auto_max)
            snprintf(out->advice, sizeof out->advice, "none: --blocking-threads auto is adding threads "
                     "(%u of at most %u)", in->pool_threads, in->auto_max);
        else if (in->auto_max < VERDICT_AUTO_MOST)
            snprintf(out->advice, sizeof out->advice, "raise auto's MAX: --blocking-threads auto:%u (it is at "
                     "its most, %u, and requests wait for a thread while the threads wait on I/O with the GIL "
                     "released)", more, in->auto_max);
        else
            snprintf(out->advice, sizeof out->advice, "add --workers: --blocking-threads auto is at the most "
                     "it may have (%u) and requests still wait for a thread", in->auto_max);
    }
    char busy[16] = "?";
    if (in->machine_busy >= 0)
        snprintf(busy, sizeof busy, "%.0f%%", 100.0 * in->machine_busy);
    char most[48] = "";
    if (in->queued_max > in->queued_frac + 0.005)
        snprintf(most, sizeof most, " (%.0f%% in the most queued worker)", 100.0 * in->queued_max);
    snprintf(out->why, sizeof out->why,
             "over %.1f s: loop %.0f%% of a core, pool %.0f%% (GIL held) and %.0f%% waiting for a CPU, "
             "a request waiting for a busy pool %.0f%% of the time, every pool thread queued %.0f%%%s, "
             "machine %s busy",
             in->window_s, 100.0 * in->loop_util, 100.0 * in->pool_util,
             100.0 * (in->pool_ready > 0 ? in->pool_ready : 0), 100.0 * in->waiting_frac,
             100.0 * in->queued_frac, most, busy);
}

/* sizing_rule.c — see sizing_rule.h. */
#include "sizing_rule.h"

/* Grow while the verdict says threads-short: requests wait for busy pool
 * threads that are off the CPU (with the GIL free). With a GIL the whole
 * table decides, so a saturated loop or a GIL held 90 % of the time stops
 * it (more threads would only queue for them); without one (a free-threaded
 * build with the GIL off) gil-bound does not exist: threads-short's own
 * test decides, with the loop not saturated, and the threads waiting for a
 * CPU (its run-delay test) is what stops it once the cores are full.
 *
 * The step: as many threads as requests waited on average, at most
 * doubling, so that a pool far too small reaches its size in a few windows
 * and one slightly short grows by one or two. With a GIL it also stops
 * short of the count at which the threads' GIL time, growing with their
 * number, would reach saturation (each held it pool_util / active of the
 * window): one thread past it at least, so that the verdict, not this
 * estimate, says gil-bound. */
unsigned sizing_grow(const struct sizing_window *w, unsigned active, unsigned max, struct verdict *v)
{
    verdict_decide(&w->v, v);
    bool grow = w->gil ? v->regime == REGIME_THREADS_SHORT
                       : w->v.loop_util < VERDICT_SATURATED && verdict_threads_short(&w->v);
    if (!grow || active >= max)
        return active;
    unsigned step = active; /* the waiting requests, rounded up, within 1..active */
    if (w->waiting_mean < active) {
        step = (unsigned)w->waiting_mean;
        step += step < w->waiting_mean;
        step += step == 0;
    }
    unsigned to = active + step;
    if (w->gil && w->v.pool_util > 0) {
        double cap = active * VERDICT_SATURATED / w->v.pool_util;
        unsigned c = cap >= max ? max : (unsigned)cap;
        if (c < active + 1)
            c = active + 1;
        if (to > c)
            to = c;
    }
    return to > max ? max : to;
}

unsigned sizing_needed(const uint64_t *last_used_ms, unsigned active, uint64_t now_ms, uint64_t idle_ms)
{
    unsigned need = 1;
    for (unsigned i = 0; i < active; i++)
        if (last_used_ms[i] + idle_ms > now_ms)
            need = i + 1;
    return need;
}

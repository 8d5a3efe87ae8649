/* sizing_rule.c — see sizing_rule.h. */
#include "sizing_rule.h"

/* Grow while the verdict says threads-short: requests wait for busy pool
 * threads that are off the CPU (with the GIL free). With a GIL the whole
 * table decides, so a saturated loop or a GIL held 90 % of the time stops
 * it (more threads would only queue for them).
 *
 * Without one (a free-threaded build with the GIL off) gil-bound does not
 * exist, and a thread on the CPU is not a bound either while a core is
 * idle: another thread runs on it. There it grows while requests wait for
 * busy threads (the same share), the threads seldom wait for a CPU
 * (threads-short's run-delay test) and the machine is not full, with the
 * loop not saturated: the cores, not a lock, are what stop it.
 *
 * The step: as many threads as requests waited on average, at most
 * doubling, so that a pool far too small reaches its size in a few windows
 * and one slightly short grows by one or two. With a GIL it also stops
 * short of the count at which the threads' GIL time, growing with their
 * number, would reach saturation (each held it pool_util / active of the
 * window): one thread past it at least, so that the verdict, not this
 * estimate, says gil-bound. */
static bool cores_free(const struct verdict_input *in)
{
    double ready = in->pool_ready > 0 ? in->pool_ready : 0;
    return in->pool_threads && in->loop_util < VERDICT_SATURATED && in->waiting_frac >= VERDICT_QUEUED &&
           ready / in->pool_threads < VERDICT_READY && in->machine_busy < VERDICT_SATURATED;
}

unsigned sizing_grow(const struct sizing_window *w, unsigned active, unsigned max, struct verdict *v)
{
    verdict_decide(&w->v, v);
    bool grow = w->gil ? v->regime == REGIME_THREADS_SHORT : cores_free(&w->v);
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

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
 * The step, the window's and the burst's alike: to what the waiting work
 * needs, the threads taking requests plus the requests that waited for
 * them, at once, so that a pool far too small reaches its size in one
 * step. With a GIL it stops short of the count at which the threads' GIL
 * time, growing with their number, would reach saturation (each held it
 * pool_util / active of the span): one thread past it at least, so that
 * the verdict, not this estimate, says gil-bound. */
static bool cores_free(const struct verdict_input *in)
{
    double ready = in->pool_ready > 0 ? in->pool_ready : 0;
    return in->pool_threads && in->loop_util < VERDICT_SATURATED && in->waiting_frac >= VERDICT_QUEUED &&
           ready / in->pool_threads < VERDICT_READY && in->machine_busy < VERDICT_SATURATED;
}

/* active + waiting, within the GIL's headroom and max. */
static unsigned step_to(unsigned active, unsigned waiting, double pool_util, bool gil, unsigned max)
{
    unsigned to = active + (waiting ? waiting : 1);
    if (to < active) /* wrapped */
        to = max;
    if (gil && pool_util > 0) {
        double cap = active * VERDICT_SATURATED / pool_util;
        unsigned c = cap >= max ? max : (unsigned)cap;
        if (c < active + 1)
            c = active + 1;
        if (to > c)
            to = c;
    }
    return to > max ? max : to;
}

unsigned sizing_grow(const struct sizing_window *w, unsigned active, unsigned max, struct verdict *v)
{
    verdict_decide(&w->v, v);
    bool grow = w->gil ? v->regime == REGIME_THREADS_SHORT : cores_free(&w->v);
    if (!grow || active >= max)
        return active;
    /* The requests that waited on average, rounded up. */
    double mean = w->waiting_mean < max ? w->waiting_mean : max;
    unsigned waiting = (unsigned)mean;
    waiting += waiting < mean;
    return step_to(active, waiting, w->v.pool_util, w->gil, max);
}

/* The burst: requests have waited for a busy pool on every look for
 * SIZING_BURST_MS, and the pool's threads were off the CPU meanwhile:
 * threads-short's test over the span (each ran or waited for a CPU less
 * than VERDICT_OFF_CPU of it, and waited for one less than VERDICT_READY),
 * with a GIL not held VERDICT_SATURATED of it, and the loop not saturated.
 * Then they wait on I/O, and each request waiting would start at once on a
 * thread of its own. And none of them finished a request within it: one
 * that did was not held up all along, and its time off the CPU may be a
 * wait for the loop, itself short of a CPU, to hand it the next. A busy machine alone does not stop it, as it does not
 * stop threads-short: a thread waiting on I/O takes no core. A CPU-bound
 * pool, a busy GIL, threads on the CPU of a free-threaded build, are left
 * to the window's rule. */
unsigned sizing_burst(const struct sizing_burst *b, unsigned active, unsigned max)
{
    if (active >= max || !active || !b->waiting || b->looks < SIZING_BURST_LOOKS ||
        b->span_s * 1000 < SIZING_BURST_MS || b->finished)
        return active;
    double ready = b->pool_ready > 0 ? b->pool_ready : 0;
    if (b->loop_util >= VERDICT_SATURATED || (b->pool_util + ready) / active >= VERDICT_OFF_CPU ||
        ready / active >= VERDICT_READY || (b->gil && b->pool_util >= VERDICT_SATURATED))
        return active;
    return step_to(active, b->waiting, b->pool_util, b->gil, max);
}

unsigned sizing_burst_gap(const struct sizing_burst *b, unsigned active, unsigned last_gap_ms)
{
    if (!active || b->finished || b->loop_util >= VERDICT_SATURATED || b->pool_util / active >= VERDICT_READY ||
        (b->gil && b->pool_util >= VERDICT_SATURATED))
        return 0;
    unsigned gap = last_gap_ms ? 2 * last_gap_ms : 2 * SIZING_BURST_MS;
    return gap > SIZING_BURST_GAP_MS ? 0 : gap;
}

unsigned sizing_first(unsigned learned, unsigned max)
{
    if (!max)
        return 0;
    if (!learned)
        return 1;
    return learned < max ? learned : max;
}

unsigned sizing_needed(const uint64_t *last_used_ms, unsigned active, uint64_t now_ms, uint64_t idle_ms)
{
    unsigned need = 1;
    for (unsigned i = 0; i < active; i++)
        if (last_used_ms[i] + idle_ms > now_ms)
            need = i + 1;
    return need;
}

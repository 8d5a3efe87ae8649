/* sizing.c — see sizing.h. What it costs the loop: once a pass a clock
 * comparison and a look at the active threads' queue counts (one load
 * each, from an array the loop writes); while requests wait for a busy
 * pool, at the start and the end of a burst's span (SIZING_BURST_MS, one
 * at a time, and none after a span that did not grow the pool until the
 * window closes) the loop thread's CPU clock and the schedstat of the
 * threads taking requests (/proc: time on the CPU, run delay); once a window (a
 * second) each pool thread's CPU clock and run delay, and /proc/stat, as
 * the live verdict reads them. */
#include "sizing.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../lib/clock.h"
#include "../base/log.h"
#include "../base/stats.h"
#include "../metrics/metrics.h"
#include "replacement.h"
#include "sizing_rule.h"

/* The window's starting points: every figure is a difference from them. */
static void window_open(struct sizing *z, uint64_t now_ms)
{
    struct stats *s = z->stats;
    z->from_ms = now_ms;
    z->waiting_ms = z->waiting_req_ms = z->queued_ms = 0;
    z->loop_cpu = stats_thread_cpu_s(s, 0);
    z->pool_cpu = 0;
    z->ready_ns = 0;
    z->ready_ok = true;
    for (unsigned i = 1; i < s->nthreads; i++) {
        uint64_t ns;
        z->pool_cpu += stats_thread_cpu_s(s, i);
        if (z->ready_ok && metrics_run_delay((int)getpid(), (int)s->threads[i].tid, &ns))
            z->ready_ns += ns;
        else
            z->ready_ok = false;
    }
    z->proc_ok = metrics_proc_stat(&z->busy, &z->total);
}

/* The window's figures, as the verdict takes them. A thread started during
 * the window spent all its CPU time in it, so sums over the threads in the
 * stats at each end are the window's. */
static void window_figures(struct sizing *z, struct loop *l, uint64_t now_ms, struct sizing_window *w)
{
    struct stats *s = z->stats;
    double span = (double)(now_ms - z->from_ms);
    *w = (struct sizing_window){.gil = z->gil, .v = {.window_s = span / 1000, .machine_busy = -1}};
    struct verdict_input *in = &w->v;
    double pool = 0;
    uint64_t ready = 0;
    bool ready_ok = z->ready_ok;
    for (unsigned i = 1; i < s->nthreads; i++) {
        uint64_t ns;
        pool += stats_thread_cpu_s(s, i);
        if (ready_ok && metrics_run_delay((int)getpid(), (int)s->threads[i].tid, &ns))
            ready += ns;
        else
            ready_ok = false;
    }
    in->loop_util = (stats_thread_cpu_s(s, 0) - z->loop_cpu) / in->window_s;
    in->pool_util = (pool - z->pool_cpu) / in->window_s;
    if (ready_ok && ready >= z->ready_ns)
        in->pool_ready = (double)(ready - z->ready_ns) / 1e9 / in->window_s;
    uint64_t busy, total;
    if (z->proc_ok && metrics_proc_stat(&busy, &total) && total > z->total)
        in->machine_busy = (double)(busy - z->busy) / (double)(total - z->total);
    in->waiting_frac = (double)z->waiting_ms / span;
    in->queued_frac = in->queued_max = (double)z->queued_ms / span;
    in->pool_threads = dispatch_active(&l->disp);
    in->auto_max = z->max;
    w->waiting_mean = (double)z->waiting_req_ms / span;
}

/* Tell the owner the size: a successor starts with it. */
static void tell(const struct sizing *z, unsigned active)
{
    if (z->owner && z->owner->sized)
        z->owner->sized(z->owner->ctx, active);
}

/* Publish a change: the log line, and the dashboard's copy. */
static void changed(const char *line)
{
    log_info("%s", line);
    metrics_sizing.changes++;
    metrics_sizing.at = clock_s();
    snprintf(metrics_sizing.last, sizeof metrics_sizing.last, "%s", line);
}

/* Start threads up to `to` and submit to them; why: what the step rests
 * on, for the log line. */
static void grow(struct sizing *z, struct loop *l, unsigned to, const char *why)
{
    unsigned from = dispatch_active(&l->disp);
    while (z->started < to) {
        int err = z->pool->start(z->pool->ctx, z->started);
        if (err) {
            log_error("blocking threads auto: cannot start pool thread %u: %s; staying at %u at most",
                      z->started, strerror(err), z->started);
            z->max = z->started;
            to = z->started;
            break;
        }
        z->started++;
    }
    if (to <= from || loop_set_active(l, to) != 0)
        return;
    for (unsigned i = from; i < to; i++) /* a new or a parked thread gets its idle time anew */
        z->last_used_ms[i] = l->now_ms;
    /* What waits for room is submitted by the loop's next pass, which
     * before_sleep makes come at once rather than at the next event. */
    z->grew = true;
    tell(z, to);
    char line[METRICS_SIZING_LINE * 2];
    snprintf(line, sizeof line, "blocking threads %u -> %u (auto, at most %u): %s", from, to, z->max, why);
    changed(line);
}

static void grow_window(struct sizing *z, struct loop *l, unsigned to, const struct verdict *v,
                        const struct sizing_window *w)
{
    char why[METRICS_SIZING_LINE * 2 - 64];
    /* Without a GIL the rule is not the verdict's regime (sizing_rule.c). */
    const char *rule = z->gil ? v->name : "requests wait for busy threads and cores are idle (no GIL)";
    snprintf(why, sizeof why, "%s, %.1f requests waiting on average; %s", rule, w->waiting_mean, v->why);
    grow(z, l, to, why);
}

static void retire(struct sizing *z, struct loop *l, unsigned to)
{
    unsigned from = dispatch_active(&l->disp);
    if (loop_set_active(l, to) != 0)
        return; /* one of them still had a job: the next window looks again */
    tell(z, to);
    char which[48], line[METRICS_SIZING_LINE];
    if (from - to == 1)
        snprintf(which, sizeof which, "pool thread %u", to);
    else
        snprintf(which, sizeof which, "pool threads %u to %u", to, from - 1);
    snprintf(line, sizeof line, "blocking threads %u -> %u (auto): %s took no request for %.0f s; parked, "
             "kept for reuse", from, to, which, SIZING_IDLE_MS / 1000.0);
    changed(line);
}

static void window_close(struct sizing *z, struct loop *l, uint64_t now_ms)
{
    struct sizing_window w;
    window_figures(z, l, now_ms, &w);
    for (unsigned i = 0; i < dispatch_active(&l->disp); i++) {
        uint64_t req = counter_get(&z->stats->pool[i].requests);
        if (dispatch_outstanding(&l->disp, i) || req != z->requests_seen[i])
            z->last_used_ms[i] = now_ms;
        z->requests_seen[i] = req;
    }
    /* A stopping loop takes no new connection, but the requests it took
     * before the stop still wait for a thread: the pool grows for them as
     * before, or they get a bare close at --graceful-timeout. Not while
     * refusing: the app is stuck, and a new thread would only take work
     * the loop refuses anyway. */
    if (!l->refusing) {
        struct verdict v;
        unsigned to = sizing_grow(&w, dispatch_active(&l->disp), z->max, &v);
        log_debug("blocking threads auto: %u taking requests: %s, %.1f requests waiting on average; %s",
                  dispatch_active(&l->disp), v.name, w.waiting_mean, v.why);
        /* At its most with the verdict saying threads-short: the advice
         * (raise MAX) once, until the pool leaves that state. */
        bool capped = dispatch_active(&l->disp) >= z->max && v.regime == REGIME_THREADS_SHORT;
        if (capped && !z->capped_said)
            log_warn("blocking threads auto: %s; %s", v.advice, v.why);
        z->capped_said = capped;
        if (to > dispatch_active(&l->disp))
            grow_window(z, l, to, &v, &w);
        else if (!l->stopping &&
                 (to = sizing_needed(z->last_used_ms, dispatch_active(&l->disp), now_ms, SIZING_IDLE_MS)) < dispatch_active(&l->disp))
            retire(z, l, to);
    }
    window_open(z, now_ms);
    z->burst_held = false; /* a new window: bursts are looked for again */
    z->burst_gap_ms = 0;
    /* Again each window, not only at a change: a supervisor that took
     * over since (a lone worker's, once its successor serves) learns the
     * size within a second. */
    tell(z, dispatch_active(&l->disp));
}

/* The threads taking requests: their time on the CPU and their run delay,
 * together (false: unknown). Their own, from schedstat, not the process's
 * clock: the metrics' server rendering a page is not the pool's. */
static bool active_sched_ns(const struct sizing *z, unsigned active, uint64_t *run, uint64_t *ready)
{
    const struct stats *s = z->stats;
    *run = *ready = 0;
    for (unsigned i = 1; i <= active && i < s->nthreads; i++) {
        uint64_t r, w;
        if (!metrics_schedstat((int)getpid(), (int)s->threads[i].tid, &r, &w))
            return false;
        *run += r;
        *ready += w;
    }
    return true;
}

/* The requests the threads taking requests have had, together. */
static uint64_t active_requests(const struct sizing *z, unsigned active)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < active; i++)
        n += counter_get(&z->stats->pool[i].requests);
    return n;
}

/* The burst's span starts (again) here: its time, CPU clocks, run delay. */
static void burst_open(struct sizing *z, struct loop *l, uint64_t now_ms, unsigned waiting)
{
    z->burst_open = true;
    z->burst_from_ms = now_ms;
    z->burst_next_ms = now_ms + SIZING_BURST_MS;
    z->burst_from_ns = clock_ns();
    z->burst_looks = 1;
    z->burst_waiting = waiting;
    z->burst_loop_cpu = (double)clock_thread_cpu_ns() / 1e9; /* the tick runs on the loop thread */
    z->burst_ok = active_sched_ns(z, dispatch_active(&l->disp), &z->burst_run_ns, &z->burst_ready_ns);
    z->burst_requests = active_requests(z, dispatch_active(&l->disp));
}

/* A look at the end of a jiffy: the requests waiting the last pass left,
 * which held until now. A span is judged once it is SIZING_BURST_MS long,
 * on the requests waiting at its last look (a burst that arrives over a
 * few passes counts whole); after a growth a new one may start, at the new
 * size; after none, none does until the window closes when the threads
 * were on the CPU, so a CPU-bound pool with requests always waiting costs
 * two spans a second, not a hundred, and when they only waited for one, a
 * few more, at doubling gaps (sizing_burst_gap). */
static void burst_look(struct sizing *z, struct loop *l, uint64_t now_ms)
{
    if (!z->last_waiting) {
        z->burst_open = false;
        return;
    }
    if (!z->burst_open)
        return;
    z->burst_looks++;
    z->burst_waiting = z->last_waiting;
    if (now_ms - z->burst_from_ms < SIZING_BURST_MS)
        return;
    z->burst_open = false;
    double span = (double)(clock_ns() - z->burst_from_ns) / 1e9;
    if (span <= 0)
        return;
    /* The threads' figures unknown (a thread not yet in the stats, /proc
     * unreadable): the window decides. */
    uint64_t run, ready;
    if (!z->burst_ok || !active_sched_ns(z, dispatch_active(&l->disp), &run, &ready) || run < z->burst_run_ns ||
        ready < z->burst_ready_ns)
        return;
    struct sizing_burst b = {.span_s = span, .looks = z->burst_looks, .waiting = z->burst_waiting,
                             .loop_util = ((double)clock_thread_cpu_ns() / 1e9 - z->burst_loop_cpu) / span,
                             .pool_util = (double)(run - z->burst_run_ns) / 1e9 / span,
                             .pool_ready = (double)(ready - z->burst_ready_ns) / 1e9 / span, .gil = z->gil,
                             .finished = active_requests(z, dispatch_active(&l->disp)) != z->burst_requests};
    unsigned to = l->refusing ? dispatch_active(&l->disp) : sizing_burst(&b, dispatch_active(&l->disp), z->max);
    if (to <= dispatch_active(&l->disp)) {
        unsigned gap = l->refusing ? 0 : sizing_burst_gap(&b, dispatch_active(&l->disp), z->burst_gap_ms);
        char again[48] = "until the window closes";
        if (gap)
            snprintf(again, sizeof again, "again in %u ms", gap);
        log_debug("blocking threads auto: %u taking requests, %u waited for them for %.0f ms, loop %.0f%% of a "
                  "core, pool %.0f%% and %.0f%% waiting for a CPU: not a burst's (%s)",
                  dispatch_active(&l->disp), b.waiting, span * 1000, 100 * b.loop_util, 100 * b.pool_util,
                  100 * b.pool_ready, again);
        z->burst_gap_ms = gap;
        z->burst_next_ms = now_ms + gap;
        z->burst_held = !gap;
        return;
    }
    char why[METRICS_SIZING_LINE];
    snprintf(why, sizeof why, "a burst: %u requests waited for busy threads for %.0f ms, loop %.0f%% of a core, "
             "pool %.0f%% and %.0f%% waiting for a CPU", b.waiting, span * 1000, 100 * b.loop_util,
             100 * b.pool_util, 100 * b.pool_ready);
    grow(z, l, to, why);
    z->burst_gap_ms = 0;
    window_open(z, now_ms); /* the window measures the new count from here */
}

/* The stats show a thread once its registration is published: then
 * nthreads may cover it (stats.h). */
static void take_registered(struct sizing *z)
{
    struct stats *s = z->stats;
    if (s->nthreads < 1 + z->started && z->pool->registered(z->pool->ctx) == z->started)
        s->nthreads = 1 + z->started;
}

static void sizing_tick(void *ctx, struct loop *l)
{
    struct sizing *z = ctx;
    uint64_t now = l->now_ms;
    if (!z->opened) { /* the first pass: the pool has started, its threads are in the stats */
        z->opened = true;
        z->last_ms = now;
        window_open(z, now);
        /* The threads it starts with (a predecessor's size) get their idle
         * time from here, as added ones do. */
        for (unsigned i = 0; i < dispatch_active(&l->disp); i++)
            z->last_used_ms[i] = now;
        tell(z, dispatch_active(&l->disp));
    }
    /* The queues change only in the loop's passes: what the last pass left
     * held until this one. Each tick of the coarse clock is credited to the
     * state its last pass left, the state at that instant: a sample at a
     * time the load does not choose. (Looking only at the first pass of
     * each tick would sample just after completions were drained and
     * before the clients' next requests came: too few busy threads.) */
    if (now != z->last_ms) {
        uint64_t dt = now - z->last_ms;
        if (z->last_waiting) {
            z->waiting_ms += dt;
            z->waiting_req_ms += dt * z->last_waiting;
        }
        if (z->last_queued)
            z->queued_ms += dt;
        z->last_ms = now;
        burst_look(z, l, now);
    }
    struct loop_snapshot snap;
    loop_snapshot(l, &snap);
    z->last_waiting = metrics_pool_waiting(&snap, &z->last_queued);
    /* A span opens at most once per SIZING_BURST_MS (or its gap): what a
     * load that waits on and off costs is bounded. */
    if (z->last_waiting && !z->burst_open && !z->burst_held && dispatch_active(&l->disp) < z->max && !l->stopping &&
        !l->refusing && now >= z->burst_next_ms)
        burst_open(z, l, now, z->last_waiting);
    take_registered(z);
    if (now - z->from_ms >= SIZING_WINDOW_MS)
        window_close(z, l, now);
}

/* A pass at once after a grow; while a span is open, one when it is due,
 * and one when the next may open after a gap (the loop may have nothing
 * else to wake it: its threads all busy). */
static int sizing_before_sleep(void *ctx, struct loop *l, int timeout_ms)
{
    struct sizing *z = ctx;
    if (z->grew) {
        z->grew = false;
        return 0;
    }
    uint64_t due;
    if (z->burst_open)
        due = z->burst_from_ms + SIZING_BURST_MS;
    else if (z->burst_gap_ms && z->last_waiting && !z->burst_held && !l->stopping && !l->refusing)
        due = z->burst_next_ms; /* the next span, after its gap (none opens once stopping) */
    else
        return timeout_ms;
    /* At least a millisecond: the coarse clock may not have moved yet. */
    int ms = due > l->now_ms ? (int)(due - l->now_ms) : 1;
    return timeout_ms >= 0 && timeout_ms < ms ? timeout_ms : ms;
}

int sizing_start(struct sizing *z, struct loop *l, struct stats *stats, const struct pool_control *pool,
                 unsigned started, bool gil)
{
    *z = (struct sizing){.stats = stats, .pool = pool, .started = started, .max = dispatch_threads(&l->disp),
                         .gil = gil};
    z->last_used_ms = calloc(dispatch_threads(&l->disp), sizeof *z->last_used_ms);
    z->requests_seen = calloc(dispatch_threads(&l->disp), sizeof *z->requests_seen);
    if (!z->last_used_ms || !z->requests_seen || loop_set_active(l, started) != 0) {
        errno = ENOMEM;
        return -1;
    }
    z->hook = (struct loop_hook){.ctx = z, .tick = sizing_tick, .before_sleep = sizing_before_sleep};
    return loop_hook_add(l, &z->hook);
}

void sizing_stop(struct sizing *z)
{
    if (z->opened && z->stats->nthreads < 1 + z->started) {
        z->pool->wait_registered(z->pool->ctx, z->started, SIZING_STOP_WAIT_MS);
        take_registered(z);
    }
    free(z->last_used_ms);
    free(z->requests_seen);
    z->last_used_ms = z->requests_seen = NULL;
}

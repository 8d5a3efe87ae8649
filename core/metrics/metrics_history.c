/* metrics_history.c — the samples the verdict is decided from.
 *
 * Twice a second the metrics thread reads every worker's slot (metrics.c)
 * into a short history; the verdict is computed from differences over the
 * last VERDICT_WINDOW_S of it, never from one read, so that it follows the
 * load within a few seconds and a replaced worker (whose counters start
 * again from zero) is not read as negative work. */
#include <stdlib.h>

#include "../../lib/clock.h"
#include "metrics_internal.h"

#define HISTORY 32             /* samples kept (METRICS_TICK_MS apart) */
#define VERDICT_WINDOW_S 3.0

/* One worker's figures in a history sample. */
struct wsample {
    bool ok;
    int64_t pid;
    double t, loop_cpu, pool_cpu;
    double pool_ready;  /* run delay of the pool threads together, seconds; < 0: unknown */
    uint64_t samples, queued, waiting, pool_threads;
    uint64_t auto_max;  /* --blocking-threads auto's MAX; 0: a fixed count */
};

struct hsample {
    double t;
    bool proc;
    uint64_t busy, total;
    struct wsample *w; /* [nslots] */
};

static struct {
    struct hsample hist[HISTORY];
    unsigned next, count;
} H;

int metrics_history_init(struct metrics_view *v, const struct options *opt)
{
    v->opt = opt;
    v->nslots = metrics_nslots();
    v->data = calloc(v->nslots, sizeof *v->data);
    v->have = calloc(v->nslots, sizeof *v->have);
    if (!v->data || !v->have)
        return -1;
    for (unsigned i = 0; i < HISTORY; i++)
        if (!(H.hist[i].w = calloc(v->nslots, sizeof *H.hist[i].w)))
            return -1;
    verdict_decide(&v->vin, &v->verdict);
    return 0;
}

void metrics_history_free(struct metrics_view *v)
{
    for (unsigned i = 0; i < HISTORY; i++) {
        free(H.hist[i].w);
        H.hist[i].w = NULL;
    }
    free(v->data);
    free(v->have);
    v->data = NULL;
    v->have = NULL;
}

void metrics_view_refresh(struct metrics_view *v)
{
    for (unsigned i = 0; i < v->nslots; i++)
        v->have[i] = metrics_read_slot(i, &v->data[i]);
}

static void take_sample(struct metrics_view *v)
{
    struct hsample *h = &H.hist[H.next];
    h->t = clock_s();
    h->proc = metrics_proc_stat(&h->busy, &h->total);
    for (unsigned i = 0; i < v->nslots; i++) {
        struct metrics_data *d = &v->data[i];
        struct wsample *w = &h->w[i];
        v->have[i] = metrics_read_slot(i, d);
        w->ok = v->have[i];
        if (!w->ok)
            continue;
        w->pid = d->pid;
        w->t = d->t;
        w->loop_cpu = d->nthreads ? d->threads[0].cpu_s : 0;
        w->pool_cpu = 0;
        w->pool_ready = 0;
        for (uint64_t k = 1; k < d->nthreads; k++) {
            uint64_t ns;
            w->pool_cpu += d->threads[k].cpu_s;
            if (w->pool_ready >= 0 && metrics_run_delay((int)d->pid, (int)d->threads[k].tid, &ns))
                w->pool_ready += (double)ns / 1e9;
            else
                w->pool_ready = -1;
        }
        w->samples = d->samples;
        w->queued = d->samples_queued;
        w->waiting = d->samples_waiting;
        w->pool_threads = d->pool_threads;
        w->auto_max = d->pool_auto ? d->pool_max : 0;
    }
    H.next = (H.next + 1) % HISTORY;
    if (H.count < HISTORY)
        H.count++;
}

static struct hsample *hist_at(unsigned back)
{
    return &H.hist[(H.next + HISTORY - 1 - back) % HISTORY];
}

/* The verdict over the last VERDICT_WINDOW_S: for each worker, differences
 * between its newest sample and its newest one at least that old (or its
 * oldest, early on or after it was replaced: a new process's counters
 * start again from zero). */
static void decide(struct metrics_view *v)
{
    struct verdict_input in = {.machine_busy = -1};
    v->vworker = 0;
    if (H.count >= 2) {
        struct hsample *now = hist_at(0), *then = NULL;
        for (unsigned b = 1; b < H.count; b++) {
            if (!hist_at(b)->proc)
                break;
            then = hist_at(b);
            if (now->t - then->t >= VERDICT_WINDOW_S)
                break;
        }
        if (now->proc && then && now->total > then->total)
            in.machine_busy = (double)(now->busy - then->busy) / (double)(now->total - then->total);
        bool first = true, seen_pool = false;
        for (unsigned i = 0; i < v->nslots; i++) {
            struct wsample *b = &now->w[i], *a = NULL;
            if (!b->ok)
                continue;
            for (unsigned k = 1; k < H.count; k++) {
                struct wsample *s = &hist_at(k)->w[i];
                if (!s->ok || s->pid != b->pid)
                    break;
                a = s;
                if (b->t - s->t >= VERDICT_WINDOW_S)
                    break;
            }
            if (!a || b->t <= a->t)
                continue;
            double dt = b->t - a->t;
            double lu = (b->loop_cpu - a->loop_cpu) / dt, pu = (b->pool_cpu - a->pool_cpu) / dt;
            double ready =
                a->pool_ready >= 0 && b->pool_ready >= a->pool_ready ? (b->pool_ready - a->pool_ready) / dt : 0;
            double q = b->samples > a->samples
                           ? (double)(b->queued - a->queued) / (double)(b->samples - a->samples) : 0;
            double wq = b->samples > a->samples
                            ? (double)(b->waiting - a->waiting) / (double)(b->samples - a->samples) : 0;
            if (dt > in.window_s)
                in.window_s = dt;
            if (first || lu > in.loop_util) {
                in.loop_util = lu;
                v->vworker = i;
            }
            if (first || pu > in.pool_util) {
                in.pool_util = pu;
                in.pool_ready = ready;
            }
            /* Threads are short only if every worker's are; requests
             * queue if any worker's do. */
            if (b->pool_threads && (!in.pool_threads || q < in.queued_frac)) {
                in.queued_frac = q;
                in.pool_threads = (unsigned)b->pool_threads;
                in.auto_max = (unsigned)b->auto_max;
            }
            if (b->pool_threads && (!seen_pool || wq < in.waiting_frac))
                in.waiting_frac = wq;
            seen_pool |= b->pool_threads != 0;
            if (b->pool_threads && q > in.queued_max)
                in.queued_max = q;
            first = false;
        }
    }
    v->vin = in;
    verdict_decide(&in, &v->verdict);
}

void metrics_history_sample(struct metrics_view *v)
{
    take_sample(v);
    decide(v);
}

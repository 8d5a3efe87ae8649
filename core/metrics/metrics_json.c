/* metrics_json.c — the JSON of the instruments: /stats.json (the view as
 * one document, what the dashboard reads: the verdict with its figures,
 * then every worker) and the one writer of a worker's object, which
 * --stats-json writes too (metrics_report.c): its threads with the same
 * keys from the same snapshot, the endpoint's totals or the file's window;
 * what the endpoint alone has is marked live. */
#include "../base/options.h"
#include "../base/stats.h"
#include "../../lib/clock.h"
#include "metrics_internal.h"

#include <string.h>

static void json_latency(FILE *f, const uint64_t *b, uint64_t ns)
{
    uint64_t n = 0;
    fprintf(f, "{\"le_us\": [");
    for (unsigned k = 0; k < METRICS_BUCKETS; k++)
        fprintf(f, "%s%llu", k ? ", " : "", (unsigned long long)METRICS_BUCKET_US(k));
    fprintf(f, "], \"counts\": [");
    for (unsigned k = 0; k <= METRICS_BUCKETS; k++) {
        n += b[k];
        fprintf(f, "%s%llu", k ? ", " : "", (unsigned long long)b[k]);
    }
    fprintf(f, "], \"count\": %llu, \"sum_s\": %.9f}", (unsigned long long)n, (double)ns / 1e9);
}

/* "name": value pairs, comma-separated (the caller writes the braces). */
static void json_pairs(FILE *f, const char *const *names, const uint64_t *val, size_t n)
{
    for (size_t k = 0; k < n; k++)
        fprintf(f, "%s\"%s\": %llu", k ? ", " : "", names[k], (unsigned long long)val[k]);
}

static void json_named(FILE *f, const char *const *names, const uint64_t *val, size_t n)
{
    fputc('{', f);
    json_pairs(f, names, val, n);
    fputc('}', f);
}

/* One side of the handoff: its counters, then its gauges (values now). */
static void json_handoff(FILE *f, const char *const *names, const uint64_t *val, size_t n,
                         const char *const *gnames, const uint64_t *gval, size_t gn)
{
    fputc('{', f);
    json_pairs(f, names, val, n);
    for (size_t k = 0; k < gn; k++)
        fprintf(f, ", \"%s\": %llu", gnames[k], (unsigned long long)gval[k]);
    fputc('}', f);
}

static void pool_handoff(FILE *f, const struct metrics_data *d, const struct metrics_thread *t)
{
    if (!d->has_handoff)
        return;
    fprintf(f, ", \"handoff\": ");
    json_handoff(f, metrics_hthread_names, t->hthread, HTHREAD_C_N, metrics_hthread_gauge_names, t->hthread_gauge,
                 HTHREAD_G_N);
}

/* A thread: `requests` on its own, the rest of its counters under
 * "counters" (the loop's with its figures per wait and in seconds, the
 * handoff's side in "handoff"); a pool thread's queue and, where the
 * dashboard reads them, its handoff counters at the top too. */
static void json_thread(FILE *f, const struct metrics_data *d, const struct metrics_thread *t, bool is_loop,
                        double window)
{
    double util = window > 0 ? t->cpu_s / window : 0;
    if (util > 1)
        util = 1; /* clock granularity at a window's edges */
    fprintf(f, "{\"name\": ");
    stats_json_string(f, t->name);
    fprintf(f, ", \"role\": ");
    stats_json_string(f, t->role);
    fprintf(f, ", \"tid\": %lld, \"cpu_s\": %.6f, \"utilisation\": %.6f, \"requests\": %llu, ",
            (long long)t->tid, t->cpu_s, util, (unsigned long long)t->requests);
    if (t->requests)
        fprintf(f, "\"us_per_request\": %.4f, ", t->cpu_s / (double)t->requests * 1e6);
    else
        fprintf(f, "\"us_per_request\": null, ");
    fprintf(f, "\"counters\": {");
    _Static_assert(LOOP_C_requests == 0 && POOL_C_requests == 0, "requests come first: shown on their own");
    if (is_loop) {
        const uint64_t *c = d->loop;
        json_pairs(f, metrics_loop_names + 1, c + 1, LOOP_C_N - 1);
        fprintf(f, ", \"events_per_wait\": %.4f, \"wait_s\": %.6f, \"pass_s\": %.6f",
                c[LOOP_C_epoll_waits] ? (double)c[LOOP_C_events] / (double)c[LOOP_C_epoll_waits] : 0.0,
                (double)c[LOOP_C_wait_ns] / 1e9, (double)c[LOOP_C_pass_ns] / 1e9);
        if (d->has_handoff) {
            fprintf(f, ", \"handoff\": ");
            json_handoff(f, metrics_hloop_names, d->hloop, HLOOP_C_N, metrics_hloop_gauge_names, d->hloop_gauge,
                         HLOOP_G_N);
        }
        fprintf(f, "}}");
        return;
    }
    json_pairs(f, metrics_pool_names + 1, t->pool + 1, POOL_C_N - 1);
    fprintf(f, ", \"app_calls\": %llu", (unsigned long long)t->requests);
    pool_handoff(f, d, t);
    fprintf(f, "}, \"queue_depth\": %llu", (unsigned long long)t->queue);
    pool_handoff(f, d, t); /* where the dashboard reads them */
    fputc('}', f);
}

void metrics_json_worker(FILE *f, const struct metrics_data *d, bool live)
{
    double window = d->t - d->started;
    fprintf(f, "{\"worker\": %llu, \"pid\": %lld, \"t\": %.6f, \"started\": %.6f, \"window_s\": %.6f, ",
            (unsigned long long)d->worker, (long long)d->pid, d->t, d->started, window);
    if (live) {
        fprintf(f, "\"connections_open\": %llu, \"bytes_in\": %llu, \"bytes_out\": %llu, \"requests_by_class\": {",
                (unsigned long long)d->conns_open, (unsigned long long)d->bytes_in, (unsigned long long)d->bytes_out);
        for (unsigned c = 0; c < METRICS_CLASSES; c++)
            fprintf(f, "%s\"%s\": %llu", c ? ", " : "", metrics_class_names[c], (unsigned long long)d->status[c]);
        fprintf(f, "}, \"latency\": ");
        json_latency(f, d->latency, d->latency_ns);
        fprintf(f, ", \"queue_samples\": %llu, \"queue_samples_all_waiting\": %llu, "
                   "\"queue_samples_request_waiting\": %llu, ",
                (unsigned long long)d->samples, (unsigned long long)d->samples_queued,
                (unsigned long long)d->samples_waiting);
    }
    /* The pool's size: the file's only when there is a pool, the endpoint's
     * always (the dashboard reads it), with the last change of its size. */
    if (live || d->pool_max) {
        fprintf(f, "\"blocking_threads\": {\"auto\": %s, \"active\": %llu, \"started\": %llu, \"max\": %llu",
                d->pool_auto ? "true" : "false", (unsigned long long)d->pool_threads,
                (unsigned long long)d->pool_started, (unsigned long long)d->pool_max);
        if (live) {
            fprintf(f, ", \"changes\": %llu, \"last_change_t\": %.6f, \"last_change\": ",
                    (unsigned long long)d->sizing_changes, d->sizing_at);
            char line[METRICS_SIZING_LINE + 1];
            memcpy(line, d->sizing_last, METRICS_SIZING_LINE);
            line[METRICS_SIZING_LINE] = '\0'; /* a copy from shared memory: never trust its end */
            stats_json_string(f, line);
        }
        fprintf(f, "}, ");
    }
    if (live) {
        fprintf(f, "\"loop\": ");
        json_named(f, metrics_loop_names, d->loop, LOOP_C_N);
        if (d->has_handoff) {
            fprintf(f, ", \"handoff\": ");
            json_named(f, metrics_hloop_names, d->hloop, HLOOP_C_N);
        }
        fprintf(f, ", ");
    }
    fprintf(f, "\"threads\": [");
    bool first = true;
    for (uint64_t j = 0; j < d->nthreads; j++) {
        const struct metrics_thread *t = &d->threads[j];
        if (!t->name[0])
            continue; /* not registered: nothing to say of it */
        fprintf(f, "%s\n    ", first ? "" : ",");
        json_thread(f, d, t, j == 0, window);
        first = false;
    }
    fprintf(f, "\n  ]}");
}

void metrics_render_json(FILE *f, const struct metrics_view *v)
{
    fprintf(f, "{\"version\": \"%s\", \"t\": %.6f, \"regimes\": [", CSERVE_VERSION, clock_s());
    for (int r = 0; r < REGIME_N; r++)
        fprintf(f, "%s\"%s\"", r ? ", " : "", verdict_name((enum regime)r));
    fprintf(f, "],\n \"verdict\": {\"regime\": \"%s\", \"advice\": ", v->verdict.name);
    stats_json_string(f, v->verdict.advice);
    fprintf(f, ", \"why\": ");
    stats_json_string(f, v->verdict.why);
    fprintf(f, ", \"precedence\": \"loop-bound > gil-bound > threads-short > machine-bound > pool-queued > "
               "not-loaded\", \"figures\": {\"window_s\": %.3f, \"loop_util\": %.4f, \"pool_util\": %.4f, "
               "\"pool_ready\": %.4f, \"queued_frac\": %.4f, \"queued_max\": %.4f, \"waiting_frac\": %.4f, "
               "\"machine_busy\": %.4f, \"worker\": %u, \"pool_threads\": %u}},\n",
            v->vin.window_s, v->vin.loop_util, v->vin.pool_util, v->vin.pool_ready, v->vin.queued_frac,
            v->vin.queued_max, v->vin.waiting_frac, v->vin.machine_busy, v->vworker, v->vin.pool_threads);
    fprintf(f, " \"workers\": [");
    bool first = true;
    for (unsigned i = 0; i < v->nslots; i++) {
        if (!v->have[i])
            continue;
        fprintf(f, "%s\n  ", first ? "" : ",");
        first = false;
        metrics_json_worker(f, &v->data[i], true);
    }
    fprintf(f, "\n ]}\n");
}

/* metrics_json.c — /stats.json: the view as one JSON document, what the
 * dashboard reads: the verdict with its figures, then every worker's
 * counters and threads. */
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

static void json_named(FILE *f, const char *const *names, const uint64_t *val, size_t n)
{
    fputc('{', f);
    for (size_t k = 0; k < n; k++)
        fprintf(f, "%s\"%s\": %llu", k ? ", " : "", names[k], (unsigned long long)val[k]);
    fputc('}', f);
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
        const struct metrics_data *d = &v->data[i];
        fprintf(f, "%s\n  {\"worker\": %u, \"pid\": %lld, \"t\": %.6f, \"started\": %.6f, \"connections_open\": %llu, "
                   "\"bytes_in\": %llu, \"bytes_out\": %llu, \"requests_by_class\": {",
                first ? "" : ",", i, (long long)d->pid, d->t, d->started, (unsigned long long)d->conns_open,
                (unsigned long long)d->bytes_in, (unsigned long long)d->bytes_out);
        first = false;
        for (unsigned c = 0; c < METRICS_CLASSES; c++)
            fprintf(f, "%s\"%s\": %llu", c ? ", " : "", metrics_class_names[c], (unsigned long long)d->status[c]);
        fprintf(f, "}, \"latency\": ");
        json_latency(f, d->latency, d->latency_ns);
        fprintf(f, ", \"queue_samples\": %llu, \"queue_samples_all_waiting\": %llu, "
                   "\"queue_samples_request_waiting\": %llu, \"blocking_threads\": {\"auto\": %s, \"active\": %llu, "
                   "\"started\": %llu, \"max\": %llu, \"changes\": %llu, \"last_change_t\": %.6f, \"last_change\": ",
                (unsigned long long)d->samples, (unsigned long long)d->samples_queued,
                (unsigned long long)d->samples_waiting, d->pool_auto ? "true" : "false",
                (unsigned long long)d->pool_threads, (unsigned long long)d->pool_started,
                (unsigned long long)d->pool_max, (unsigned long long)d->sizing_changes, d->sizing_at);
        char line[METRICS_SIZING_LINE + 1];
        memcpy(line, d->sizing_last, METRICS_SIZING_LINE);
        line[METRICS_SIZING_LINE] = '\0'; /* a copy from shared memory: never trust its end */
        stats_json_string(f, line);
        fprintf(f, "}, \"loop\": ");
        json_named(f, metrics_loop_names, d->loop, LOOP_C_N);
        if (d->has_handoff) {
            fprintf(f, ", \"handoff\": ");
            json_named(f, metrics_hloop_names, d->hloop, HLOOP_C_N);
        }
        fprintf(f, ", \"threads\": [");
        for (uint64_t j = 0; j < d->nthreads; j++) {
            const struct metrics_thread *t = &d->threads[j];
            fprintf(f, "%s\n    {\"name\": ", j ? "," : "");
            stats_json_string(f, t->name);
            fprintf(f, ", \"role\": ");
            stats_json_string(f, t->role);
            fprintf(f, ", \"tid\": %lld, \"cpu_s\": %.6f, \"requests\": %llu", (long long)t->tid, t->cpu_s,
                    (unsigned long long)t->requests);
            if (j) {
                fprintf(f, ", \"queue_depth\": %llu, \"counters\": ", (unsigned long long)t->queue);
                json_named(f, metrics_pool_names, t->pool, POOL_C_N);
                if (d->has_handoff) {
                    fprintf(f, ", \"handoff\": ");
                    json_named(f, metrics_hworker_names, t->hworker, HWORKER_C_N);
                }
            }
            fputc('}', f);
        }
        fprintf(f, "]}");
    }
    fprintf(f, "\n ]}\n");
}

/* metrics_prometheus.c — /metrics: the view in the Prometheus text format
 * (0.0.4). Every per-worker series has a total over the workers beside it
 * (worker="all"), equal to their sum; names are in base units (seconds),
 * counters end in _total. docs/instruments.md lists the families. */
#include <string.h>

#include "../../handoffs/handoff.h"
#include "../base/options.h"
#include "metrics_internal.h"

/* A label value: \, " and newline escaped (the text format's rule). */
static void label(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            fprintf(f, "\\%c", *s);
        else if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
}

static void thread_labels(FILE *f, const struct metrics_data *d, const struct metrics_thread *t)
{
    fprintf(f, "{worker=\"%llu\",thread=\"", (unsigned long long)d->worker);
    label(f, t->name);
    fprintf(f, "\",role=\"");
    label(f, t->role);
    fprintf(f, "\"}");
}

static void head(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static bool ns_counter(const char *n)
{
    size_t len = strlen(n);
    return len > 3 && strcmp(n + len - 3, "_ns") == 0;
}

/* A counter of the loop thread (k: index in loop[]) for every worker, then
 * the total over workers. */
static void loop_family(FILE *f, const struct metrics_view *v, size_t k)
{
    char name[96];
    const char *n = metrics_loop_names[k];
    bool ns = ns_counter(n);
    if (ns)
        snprintf(name, sizeof name, "cserve_loop_%.*s_seconds_total", (int)strlen(n) - 3, n);
    else
        snprintf(name, sizeof name, "cserve_loop_%s_total", n);
    head(f, name, "counter", "the loop thread's counter of the same name (struct loop_stats)");
    double sum = 0;
    for (unsigned i = 0; i < v->nslots; i++) {
        if (!v->have[i] || !v->data[i].nthreads)
            continue;
        double x = (double)v->data[i].loop[k] / (ns ? 1e9 : 1);
        sum += x;
        fputs(name, f);
        thread_labels(f, &v->data[i], &v->data[i].threads[0]);
        fprintf(f, " %.17g\n", x);
    }
    fprintf(f, "%s{worker=\"all\",thread=\"all\",role=\"loop\"} %.17g\n", name, sum);
}

/* A per-thread value of role `role` for every worker, then the total. */
typedef double (*thread_value)(const struct metrics_data *d, const struct metrics_thread *t, size_t k);

static void thread_family(FILE *f, const struct metrics_view *v, const char *name, const char *type, const char *help, const char *role,
                          thread_value get, size_t k, bool total)
{
    head(f, name, type, help);
    double sums[2] = {0, 0}; /* loop, pool */
    bool seen[2] = {false, false};
    for (unsigned i = 0; i < v->nslots; i++) {
        if (!v->have[i])
            continue;
        const struct metrics_data *d = &v->data[i];
        for (uint64_t j = 0; j < d->nthreads; j++) {
            const struct metrics_thread *t = &d->threads[j];
            if (role && strcmp(t->role, role) != 0)
                continue;
            if (!role && !t->name[0])
                continue;
            double x = get(d, t, k);
            sums[j != 0] += x;
            seen[j != 0] = true;
            fputs(name, f);
            thread_labels(f, d, t);
            fprintf(f, " %.17g\n", x);
        }
    }
    if (!total)
        return;
    static const char *const roles[2] = {"loop", "pool"};
    for (int r = 0; r < 2; r++)
        if (seen[r])
            fprintf(f, "%s{worker=\"all\",thread=\"all\",role=\"%s\"} %.17g\n", name, roles[r], sums[r]);
}

static double get_cpu(const struct metrics_data *d, const struct metrics_thread *t, size_t k)
{
    (void)d, (void)k;
    return t->cpu_s;
}
static double get_requests(const struct metrics_data *d, const struct metrics_thread *t, size_t k)
{
    (void)d, (void)k;
    return (double)t->requests;
}
static double get_pool(const struct metrics_data *d, const struct metrics_thread *t, size_t k)
{
    (void)d;
    return (double)t->pool[k];
}
static double get_hthread(const struct metrics_data *d, const struct metrics_thread *t, size_t k)
{
    (void)d;
    return (double)t->hthread[k];
}
static double get_hthread_gauge_s(const struct metrics_data *d, const struct metrics_thread *t, size_t k)
{
    (void)d;
    return (double)t->hthread_gauge[k] / 1e9;
}
static double get_queue(const struct metrics_data *d, const struct metrics_thread *t, size_t k)
{
    (void)d, (void)k;
    return (double)t->queue;
}
static double get_hloop(const struct metrics_data *d, const struct metrics_thread *t, size_t k)
{
    (void)t;
    return (double)d->hloop[k];
}

/* A per-worker value (no thread), then the total. */
static void worker_family(FILE *f, const struct metrics_view *v, const char *name, const char *type, const char *help,
                          uint64_t (*get)(const struct metrics_data *d))
{
    head(f, name, type, help);
    uint64_t sum = 0;
    for (unsigned i = 0; i < v->nslots; i++) {
        if (!v->have[i])
            continue;
        uint64_t x = get(&v->data[i]);
        sum += x;
        fprintf(f, "%s{worker=\"%u\"} %llu\n", name, i, (unsigned long long)x);
    }
    fprintf(f, "%s{worker=\"all\"} %llu\n", name, (unsigned long long)sum);
}

static uint64_t get_bytes_in(const struct metrics_data *d) { return d->bytes_in; }
static uint64_t get_bytes_out(const struct metrics_data *d) { return d->bytes_out; }
static uint64_t get_conns(const struct metrics_data *d) { return d->conns_open; }
static uint64_t get_pool_threads(const struct metrics_data *d) { return d->pool_threads; }
static uint64_t get_pool_started(const struct metrics_data *d) { return d->pool_started; }
static uint64_t get_pool_max(const struct metrics_data *d) { return d->pool_max; }
static uint64_t get_sizing_changes(const struct metrics_data *d) { return d->sizing_changes; }

static void latency_series(FILE *f, const char *worker, const uint64_t *b, uint64_t ns)
{
    uint64_t cum = 0;
    for (unsigned k = 0; k <= METRICS_BUCKETS; k++) {
        cum += b[k];
        fprintf(f, "cserve_request_duration_seconds_bucket{worker=\"%s\",le=\"", worker);
        if (k < METRICS_BUCKETS)
            fprintf(f, "%g", (double)METRICS_BUCKET_US(k) / 1e6);
        else
            fputs("+Inf", f);
        fprintf(f, "\"} %llu\n", (unsigned long long)cum);
    }
    fprintf(f, "cserve_request_duration_seconds_sum{worker=\"%s\"} %.9f\n", worker, (double)ns / 1e9);
    fprintf(f, "cserve_request_duration_seconds_count{worker=\"%s\"} %llu\n", worker, (unsigned long long)cum);
}

void metrics_render_prometheus(FILE *f, const struct metrics_view *v)
{
    head(f, "cserve_info", "gauge", "the server: version and handoff");
    fprintf(f, "cserve_info{version=\"%s\",handoff=\"", CSERVE_VERSION);
    label(f, v->opt->native_hello ? "none" : v->opt->inline_app ? "none (inline)" : v->opt->handoff->name);
    fprintf(f, "\"} 1\n");
    head(f, "cserve_metrics_refused_total", "counter",
         "connections to this listener refused (403): the peer is not in --metrics-allow-ips");
    fprintf(f, "cserve_metrics_refused_total %llu\n", (unsigned long long)v->refused);
    head(f, "cserve_worker_pid", "gauge", "the process serving each worker slot");
    for (unsigned i = 0; i < v->nslots; i++)
        if (v->have[i])
            fprintf(f, "cserve_worker_pid{worker=\"%u\"} %lld\n", i, (long long)v->data[i].pid);
    thread_family(f, v, "cserve_thread_cpu_seconds_total", "counter", "CPU time of each thread (its own CPU clock)",
                  NULL, get_cpu, 0, true);
    thread_family(f, v, "cserve_thread_requests_total", "counter",
                  "requests each thread finished (loop: responses written; pool: app calls)", NULL,
                  get_requests, 0, true);
    for (size_t k = 0; k < LOOP_C_N; k++)
        loop_family(f, v, k);
    for (size_t k = 1; k < POOL_C_N; k++) { /* [0] is requests, above */
        char name[96];
        snprintf(name, sizeof name, "cserve_pool_%s_total", metrics_pool_names[k]);
        thread_family(f, v, name, "counter", "the pool thread's counter of the same name (struct pool_stats)",
                      "pool", get_pool, k, true);
    }
    bool handoff = false;
    for (unsigned i = 0; i < v->nslots; i++)
        handoff |= v->have[i] && v->data[i].has_handoff;
    if (handoff) {
        for (size_t k = 0; k < HLOOP_C_N; k++) {
            char name[96];
            snprintf(name, sizeof name, "cserve_handoff_loop_%s_total", metrics_hloop_names[k]);
            thread_family(f, v, name, "counter", "the handoff's loop-side counter of the same name", "loop",
                          get_hloop, k, true);
        }
        for (size_t k = 0; k < HTHREAD_C_N; k++) {
            char name[96];
            snprintf(name, sizeof name, "cserve_handoff_worker_%s_total", metrics_hthread_names[k]);
            thread_family(f, v, name, "counter", "the handoff's pool-side counter of the same name", "pool",
                          get_hthread, k, true);
        }
        /* The budgets are kept in nanoseconds; Prometheus' base unit is the second. */
        head(f, "cserve_handoff_loop_spin_budget_seconds", "gauge", "the loop's adaptive spin budget now");
        for (unsigned i = 0; i < v->nslots; i++)
            if (v->have[i] && v->data[i].has_handoff && v->data[i].nthreads) {
                fputs("cserve_handoff_loop_spin_budget_seconds", f);
                thread_labels(f, &v->data[i], &v->data[i].threads[0]);
                fprintf(f, " %.9f\n", (double)v->data[i].hloop_gauge[0] / 1e9);
            }
        thread_family(f, v, "cserve_handoff_worker_spin_budget_seconds", "gauge",
                      "each pool thread's adaptive spin budget now", "pool", get_hthread_gauge_s, 0, false);
    }
    thread_family(f, v, "cserve_queue_depth", "gauge",
                  "requests submitted to each pool thread and not yet done (the one it runs included)", "pool",
                  get_queue, 0, true);

    head(f, "cserve_requests_total", "counter", "responses finished, by status class");
    uint64_t cls[METRICS_CLASSES] = {0};
    for (unsigned i = 0; i < v->nslots; i++) {
        if (!v->have[i])
            continue;
        for (unsigned c = 0; c < METRICS_CLASSES; c++) {
            cls[c] += v->data[i].status[c];
            fprintf(f, "cserve_requests_total{worker=\"%u\",class=\"%s\"} %llu\n", i, metrics_class_names[c],
                    (unsigned long long)v->data[i].status[c]);
        }
    }
    for (unsigned c = 0; c < METRICS_CLASSES; c++)
        fprintf(f, "cserve_requests_total{worker=\"all\",class=\"%s\"} %llu\n", metrics_class_names[c],
                (unsigned long long)cls[c]);

    head(f, "cserve_request_duration_seconds", "histogram",
         "from the request head complete to the last byte of the response written");
    uint64_t lat[METRICS_BUCKETS + 1] = {0}, lat_ns = 0;
    for (unsigned i = 0; i < v->nslots; i++) {
        if (!v->have[i])
            continue;
        char w[16];
        snprintf(w, sizeof w, "%u", i);
        latency_series(f, w, v->data[i].latency, v->data[i].latency_ns);
        for (unsigned k = 0; k <= METRICS_BUCKETS; k++)
            lat[k] += v->data[i].latency[k];
        lat_ns += v->data[i].latency_ns;
    }
    latency_series(f, "all", lat, lat_ns);

    worker_family(f, v, "cserve_received_bytes_total", "counter", "bytes read from clients", get_bytes_in);
    worker_family(f, v, "cserve_sent_bytes_total", "counter", "bytes written to clients", get_bytes_out);
    worker_family(f, v, "cserve_connections_open", "gauge", "client connections open", get_conns);
    worker_family(f, v, "cserve_pool_threads", "gauge",
                  "pool threads taking requests (--blocking-threads; with auto, as the load needs)",
                  get_pool_threads);
    worker_family(f, v, "cserve_pool_threads_started", "gauge",
                  "pool threads started (taking requests, or parked after they were retired)", get_pool_started);
    worker_family(f, v, "cserve_pool_threads_max", "gauge", "the most pool threads a worker may start",
                  get_pool_max);
    worker_family(f, v, "cserve_pool_threads_changes_total", "counter",
                  "changes of the number of pool threads taking requests (--blocking-threads auto)",
                  get_sizing_changes);

    head(f, "cserve_regime", "gauge",
         "which stage bounds the server over the last few seconds (1: the verdict); precedence: "
         "loop-bound, gil-bound, threads-short, machine-bound, pool-queued, not-loaded");
    for (int r = 0; r < REGIME_N; r++)
        fprintf(f, "cserve_regime{regime=\"%s\"} %d\n", verdict_name((enum regime)r),
                v->verdict.regime == (enum regime)r);
    head(f, "cserve_verdict_window_seconds", "gauge", "the window the verdict's figures cover");
    fprintf(f, "cserve_verdict_window_seconds %.3f\n", v->vin.window_s);
    head(f, "cserve_verdict_loop_utilisation", "gauge", "the busiest loop thread's share of a core");
    fprintf(f, "cserve_verdict_loop_utilisation %.4f\n", v->vin.loop_util);
    head(f, "cserve_verdict_pool_utilisation", "gauge",
         "the busiest worker's pool threads' CPU together, as a share of a core (the GIL held)");
    fprintf(f, "cserve_verdict_pool_utilisation %.4f\n", v->vin.pool_util);
    head(f, "cserve_verdict_pool_ready_ratio", "gauge",
         "the same pool threads' time runnable but not running (waiting for a CPU), as a share of a core");
    fprintf(f, "cserve_verdict_pool_ready_ratio %.4f\n", v->vin.pool_ready);
    head(f, "cserve_verdict_queued_ratio", "gauge",
         "share of samples in which every pool thread had a request waiting");
    fprintf(f, "cserve_verdict_queued_ratio %.4f\n", v->vin.queued_frac);
    head(f, "cserve_verdict_waiting_ratio", "gauge",
         "share of samples in which every pool thread was busy and a request waited for one");
    fprintf(f, "cserve_verdict_waiting_ratio %.4f\n", v->vin.waiting_frac);
    head(f, "cserve_verdict_queued_max_ratio", "gauge",
         "the same share in the worker where it is largest");
    fprintf(f, "cserve_verdict_queued_max_ratio %.4f\n", v->vin.queued_max);
    head(f, "cserve_verdict_machine_busy_ratio", "gauge", "share of all CPUs busy (/proc/stat; -1: unknown)");
    fprintf(f, "cserve_verdict_machine_busy_ratio %.4f\n", v->vin.machine_busy);
}

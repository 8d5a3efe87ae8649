/* metrics_report.c — --stats and --stats-json: the measurement window's
 * report, made on the worker's loop thread from one snapshot (metrics_fill
 * less the window's start), the one /stats.json is made from. The table is
 * drawn from it here; the JSON is metrics_json.c's writer's, so the file
 * and the endpoint cannot differ but in what only the endpoint has. */
#include "metrics.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/options.h"
#include "../base/stats.h"
#include "metrics_internal.h"

/* A counter in nanoseconds, shown per request in microseconds. */
static bool is_ns(const char *name)
{
    size_t n = strlen(name);
    return n > 3 && strcmp(name + n - 3, "_ns") == 0;
}

static void print_per_request(FILE *f, const char *const *names, const uint64_t *val, size_t n, double per)
{
    for (size_t k = 0; k < n; k++)
        fprintf(f, " %s=%.3f", names[k], (double)val[k] * per);
}

static void print_gauges(FILE *f, const char *const *names, const uint64_t *val, size_t n)
{
    fprintf(f, " |");
    for (size_t k = 0; k < n; k++)
        fprintf(f, " %s=%llu", names[k], (unsigned long long)val[k]);
}

static void print_table(const struct stats *s, const struct metrics_data *d, FILE *f)
{
    double window = d->t - d->started;
    fprintf(f, "cserve stats: worker %llu (pid %lld), window %.2f s, handoff %s%s", (unsigned long long)d->worker,
            (long long)d->pid, window, s->handoff_name, s->inline_mode ? " (inline)" : "");
    if (d->pool_auto)
        fprintf(f, ", blocking threads auto: %llu taking requests, %llu started, at most %llu",
                (unsigned long long)d->pool_threads, (unsigned long long)d->pool_started,
                (unsigned long long)d->pool_max);
    fprintf(f, "\n");
    fprintf(f, "  %-16s %8s %9s %11s %9s\n", "thread", "util", "cpu s", "requests", "us/req");
    double loop_cpu = 0, pool_cpu = 0;
    for (uint64_t i = 0; i < d->nthreads; i++) {
        const struct metrics_thread *t = &d->threads[i];
        if (!t->name[0])
            continue;
        *(i ? &pool_cpu : &loop_cpu) += t->cpu_s;
        fprintf(f, "  %-16s %7.1f%% %9.3f %11llu %9.2f\n", t->name, window > 0 ? 100.0 * t->cpu_s / window : 0.0,
                t->cpu_s, (unsigned long long)t->requests,
                t->requests ? t->cpu_s / (double)t->requests * 1e6 : 0.0);
    }
    uint64_t req = d->loop[LOOP_C_requests];
    double per = req ? 1.0 / (double)req : 0;
    fprintf(f, "  loop per request:");
    for (size_t k = 1; k < LOOP_C_N; k++) {
        double v = (double)d->loop[k] * per;
        if (is_ns(metrics_loop_names[k]))
            fprintf(f, " %s=%.2fus", metrics_loop_names[k], v / 1000.0);
        else
            fprintf(f, " %s=%.3f", metrics_loop_names[k], v);
    }
    fprintf(f, "\n");
    if (d->has_handoff) {
        fprintf(f, "  handoff (loop) per request:");
        print_per_request(f, metrics_hloop_names, d->hloop, HLOOP_C_N, per);
        print_gauges(f, metrics_hloop_gauge_names, d->hloop_gauge, HLOOP_G_N);
        fprintf(f, "\n");
        for (uint64_t i = 1; i < d->nthreads; i++) {
            const struct metrics_thread *t = &d->threads[i];
            fprintf(f, "  handoff (pool-%llu) per request:", (unsigned long long)(i - 1));
            print_per_request(f, metrics_hthread_names, t->hthread, HTHREAD_C_N, per);
            print_gauges(f, metrics_hthread_gauge_names, t->hthread_gauge, HTHREAD_G_N);
            fprintf(f, "\n");
        }
    }
    metrics_print_verdict(f, window, loop_cpu, pool_cpu, (unsigned)d->pool_threads,
                          d->pool_auto ? (unsigned)d->pool_max : 0);
}

/* The whole table in one write: with --workers the workers share stderr,
 * and a table written piecemeal interleaves with another worker's. */
static void write_table(const struct stats *s, const struct metrics_data *d, FILE *out)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) {
        print_table(s, d, out);
    } else {
        print_table(s, d, m);
        if (fclose(m) == 0)
            fwrite(buf, 1, len, out);
        free(buf);
    }
    fflush(out);
}

/* Written beside path and renamed over it: a reader never sees half. */
static int write_json(const struct stats *s, const struct metrics_data *d, const char *path)
{
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= sizeof tmp) {
        errno = ENAMETOOLONG; /* a cut name would be renamed over the wrong file */
        return -1;
    }
    FILE *f = fopen(tmp, "we");
    if (!f)
        return -1;
    if (s->part_file) {
        metrics_json_worker(f, d, false); /* the supervisor merges the parts */
    } else {
        fprintf(f, "{\"version\": \"%s\", \"handoff\": \"%s\", \"inline\": %s, \"app\": ", CSERVE_VERSION,
                s->handoff_name, s->inline_mode ? "true" : "false");
        stats_json_string(f, s->app_name);
        fprintf(f, ", \"instruments\": %s, \"workers\": [\n  ", CSERVE_INSTRUMENTS ? "true" : "false");
        metrics_json_worker(f, d, false);
        fprintf(f, "\n]}\n");
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        errno = err;
        return -1;
    }
    return 0;
}

int metrics_report(struct stats *s, const struct loop_snapshot *ls, FILE *table, const char *path)
{
    if (!table && !path)
        return 0;
    struct metrics_data *d = malloc(sizeof *d); /* large: not on the loop's stack */
    if (!d)
        return -1;
    metrics_fill(s, ls, &s->base, d);
    if (table)
        write_table(s, d, table);
    int rc = path ? write_json(s, d, path) : 0;
    free(d);
    return rc;
}

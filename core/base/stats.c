/* stats.c — per-thread reports over a measurement window.
 *
 * CPU time comes from each thread's own CPU clock (pthread_getcpuclockid),
 * read only when a report or a window starts: the hot path times nothing per
 * request. A window subtracts a snapshot taken at its start, so counters are
 * never written by anyone but their owning thread. */
#include "stats.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../handoffs/handoff.h"
#include "../../lib/clock.h"
#include "options.h"

struct field {
    const char *name;
    size_t off;
};

#define LOOP_FIELD(name) {#name, offsetof(struct loop_stats, name)},
#define POOL_FIELD(name) {#name, offsetof(struct pool_stats, name)},
#define HLOOP_FIELD(name) {#name, offsetof(struct handoff_loop_counters, name)},
#define HWORKER_FIELD(name) {#name, offsetof(struct handoff_worker_counters, name)},
static const struct field loop_fields[] = {LOOP_STATS_COUNTERS(LOOP_FIELD)};
static const struct field pool_fields[] = {POOL_STATS_COUNTERS(POOL_FIELD)};
static const struct field hloop_fields[] = {HANDOFF_LOOP_COUNTERS(HLOOP_FIELD)};
static const struct field hworker_fields[] = {HANDOFF_WORKER_COUNTERS(HWORKER_FIELD)};
static const struct field hloop_gauges[] = {HANDOFF_LOOP_GAUGES(HLOOP_FIELD)};
static const struct field hworker_gauges[] = {HANDOFF_WORKER_GAUGES(HWORKER_FIELD)};
#define COUNT(a) (sizeof(a) / sizeof *(a))

/* A snapshot array holds exactly its table, and each table fits its struct
 * (offsetof already rejects a name the struct lacks). */
#define SNAP_ROW(member) COUNT(((struct stats_snapshot *)0)->member)
_Static_assert(COUNT(loop_fields) == SNAP_ROW(loop), "loop table and snapshot differ");
_Static_assert(COUNT(pool_fields) == SNAP_ROW(pool[0]), "pool table and snapshot differ");
_Static_assert(COUNT(hloop_fields) == SNAP_ROW(hloop), "handoff loop table and snapshot differ");
_Static_assert(COUNT(hworker_fields) == SNAP_ROW(hworker[0]), "handoff worker table and snapshot differ");
_Static_assert(HLOOP_C_N * sizeof(counter_t) <= sizeof(struct handoff_loop_counters),
               "more handoff loop counters listed than exist");
_Static_assert(HWORKER_C_N * sizeof(counter_t) <= sizeof(struct handoff_worker_counters),
               "more handoff worker counters listed than exist");
/* The reports show `requests` on its own and skip element 0 of the rest. */
_Static_assert(LOOP_C_requests == 0 && POOL_C_requests == 0, "requests must come first");

static uint64_t get(const void *base, const struct field *f)
{
    return counter_get((const counter_t *)((const char *)base + f->off));
}

/* Gauges: the value now (in the table, after " |"). */
static void print_gauges(FILE *f, const struct field *fields, size_t n, const void *base)
{
    fprintf(f, " |");
    for (size_t k = 0; k < n; k++)
        fprintf(f, " %s=%llu", fields[k].name, (unsigned long long)get(base, &fields[k]));
}

static void json_gauges(FILE *f, const struct field *fields, size_t n, const void *base)
{
    for (size_t k = 0; k < n; k++)
        fprintf(f, ", \"%s\": %llu", fields[k].name, (unsigned long long)get(base, &fields[k]));
}

static double thread_cpu(const struct stats_thread_ref *t)
{
    struct timespec ts;
    if (!t->name || clock_gettime(t->cpu_clock, &ts) != 0)
        return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Threads the arrays can hold: nthreads is set by the worker from the
 * options, and the snapshot's arrays have STATS_MAX_THREADS rows. */
static unsigned threads_in(const struct stats *s)
{
    return s->nthreads < STATS_MAX_THREADS ? s->nthreads : STATS_MAX_THREADS;
}

static void snapshot(struct stats *s, struct stats_snapshot *snap)
{
    snap->t = clock_s();
    unsigned nthreads = threads_in(s);
    for (unsigned i = 0; i < nthreads; i++)
        snap->cpu[i] = thread_cpu(&s->threads[i]);
    for (size_t f = 0; f < COUNT(loop_fields); f++)
        snap->loop[f] = get(s->loop, &loop_fields[f]);
    for (unsigned i = 0; i + 1 < nthreads; i++)
        for (size_t f = 0; f < COUNT(pool_fields); f++)
            snap->pool[i][f] = get(&s->pool[i], &pool_fields[f]);
    if (s->handoff) {
        for (size_t f = 0; f < COUNT(hloop_fields); f++)
            snap->hloop[f] = get(&s->handoff->loop, &hloop_fields[f]);
        for (unsigned i = 0; i + 1 < nthreads && i < s->handoff->workers; i++)
            for (size_t f = 0; f < COUNT(hworker_fields); f++)
                snap->hworker[i][f] = get(&s->handoff->worker[i], &hworker_fields[f]);
    }
}

void stats_register_self(struct stats *s, unsigned index, const char *name, const char *role)
{
    if (index >= STATS_MAX_THREADS)
        return; /* not reported; options.c keeps --blocking-threads below this */
    struct stats_thread_ref *t = &s->threads[index];
    t->role = role;
    t->tid = (pid_t)syscall(SYS_gettid);
    pthread_getcpuclockid(pthread_self(), &t->cpu_clock);
    t->name = strdup(name);
}

unsigned stats_pool_active(const struct stats *s)
{
    if (s->pool_active)
        return *s->pool_active;
    return threads_in(s) ? threads_in(s) - 1 : 0;
}

double stats_thread_cpu_s(const struct stats *s, unsigned i)
{
    return i < threads_in(s) ? thread_cpu(&s->threads[i]) : 0;
}

void stats_snapshot_now(struct stats *s, struct stats_snapshot *snap)
{
    snapshot(s, snap);
}

void stats_window_start(struct stats *s)
{
    snapshot(s, &s->base);
    if (s->on_window_start)
        s->on_window_start();
}

/* The window's figures, as a reader wants them. */
struct report {
    struct stats_snapshot now;
    double window;
};

static void report_take(struct stats *s, struct report *r)
{
    snapshot(s, &r->now);
    r->window = r->now.t - s->base.t;
}

static uint64_t thread_requests(struct stats *s, struct report *r, unsigned i)
{
    if (i == 0)
        return r->now.loop[LOOP_C_requests] - s->base.loop[LOOP_C_requests];
    return r->now.pool[i - 1][POOL_C_requests] - s->base.pool[i - 1][POOL_C_requests];
}

static void print_table(struct stats *s, FILE *f)
{
    struct report *r = malloc(sizeof *r);
    if (!r)
        return;
    report_take(s, r);
    fprintf(f, "cserve stats: worker %u (pid %d), window %.2f s, handoff %s%s", s->worker_index,
            (int)getpid(), r->window, s->handoff_name, s->inline_mode ? " (inline)" : "");
    if (s->threads_auto)
        fprintf(f, ", blocking threads auto: %u taking requests, %u started, at most %u",
                stats_pool_active(s), threads_in(s) - 1, s->pool_max);
    fprintf(f, "\n");
    fprintf(f, "  %-16s %8s %9s %11s %9s\n", "thread", "util", "cpu s", "requests", "us/req");
    double loop_cpu = 0, pool_cpu = 0;
    for (unsigned i = 0; i < threads_in(s); i++) {
        if (!s->threads[i].name)
            continue;
        double cpu = r->now.cpu[i] - s->base.cpu[i];
        *(i ? &pool_cpu : &loop_cpu) += cpu;
        uint64_t req = thread_requests(s, r, i);
        fprintf(f, "  %-16s %7.1f%% %9.3f %11llu %9.2f\n", s->threads[i].name,
                r->window > 0 ? 100.0 * cpu / r->window : 0.0, cpu, (unsigned long long)req,
                req ? cpu / (double)req * 1e6 : 0.0);
    }
    uint64_t req = r->now.loop[LOOP_C_requests] - s->base.loop[LOOP_C_requests];
    double per = req ? 1.0 / (double)req : 0;
    fprintf(f, "  loop per request:");
    for (size_t k = 1; k < COUNT(loop_fields); k++) {
        double v = (double)(r->now.loop[k] - s->base.loop[k]) * per;
        if (loop_fields[k].name[strlen(loop_fields[k].name) - 1] == 's' &&
            strstr(loop_fields[k].name, "_ns"))
            fprintf(f, " %s=%.2fus", loop_fields[k].name, v / 1000.0);
        else
            fprintf(f, " %s=%.3f", loop_fields[k].name, v);
    }
    fprintf(f, "\n");
    if (s->handoff) {
        fprintf(f, "  handoff (loop) per request:");
        for (size_t k = 0; k < COUNT(hloop_fields); k++)
            fprintf(f, " %s=%.3f", hloop_fields[k].name,
                    (double)(r->now.hloop[k] - s->base.hloop[k]) * per);
        print_gauges(f, hloop_gauges, COUNT(hloop_gauges), &s->handoff->loop);
        fprintf(f, "\n");
        for (unsigned i = 0; i + 1 < threads_in(s) && i < s->handoff->workers; i++) {
            fprintf(f, "  handoff (pool-%u) per request:", i);
            for (size_t k = 0; k < COUNT(hworker_fields); k++)
                fprintf(f, " %s=%.3f", hworker_fields[k].name,
                        (double)(r->now.hworker[i][k] - s->base.hworker[i][k]) * per);
            print_gauges(f, hworker_gauges, COUNT(hworker_gauges), &s->handoff->worker[i]);
            fprintf(f, "\n");
        }
    }
    if (s->print_verdict)
        s->print_verdict(f, r->window, loop_cpu, pool_cpu, stats_pool_active(s));
    fflush(f);
    free(r);
}

/* The whole table in one write: with --workers the workers share stderr,
 * and a table written piecemeal interleaves with another worker's. */
void stats_print_table(struct stats *s, FILE *out)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) {
        print_table(s, out);
        return;
    }
    print_table(s, m);
    if (fclose(m) == 0)
        fwrite(buf, 1, len, out);
    fflush(out);
    free(buf);
}

static void json_counters(FILE *f, const struct field *fields, size_t n, const uint64_t *now,
                          const uint64_t *base)
{
    for (size_t k = 0; k < n; k++)
        fprintf(f, "%s\"%s\": %llu", k ? ", " : "", fields[k].name,
                (unsigned long long)(now[k] - base[k]));
}

void stats_print_worker_json(struct stats *s, FILE *f)
{
    struct report *r = malloc(sizeof *r);
    if (!r)
        return;
    report_take(s, r);
    fprintf(f, "{\"worker\": %u, \"pid\": %d, \"window_s\": %.6f, ", s->worker_index, (int)getpid(),
            r->window);
    if (s->pool_max)
        fprintf(f, "\"blocking_threads\": {\"auto\": %s, \"active\": %u, \"started\": %u, \"max\": %u}, ",
                s->threads_auto ? "true" : "false", stats_pool_active(s), threads_in(s) - 1, s->pool_max);
    fprintf(f, "\"threads\": [");
    bool first = true;
    for (unsigned i = 0; i < threads_in(s); i++) {
        const struct stats_thread_ref *t = &s->threads[i];
        if (!t->name)
            continue;
        double cpu = r->now.cpu[i] - s->base.cpu[i];
        uint64_t req = thread_requests(s, r, i);
        double util = r->window > 0 ? cpu / r->window : 0;
        if (util > 1)
            util = 1; /* clock granularity at a window's edges */
        fprintf(f, "%s\n    {\"name\": \"%s\", \"role\": \"%s\", \"tid\": %d, \"cpu_s\": %.6f, "
                   "\"utilisation\": %.6f, \"requests\": %llu, ",
                first ? "" : ",", t->name, t->role, (int)t->tid, cpu, util, (unsigned long long)req);
        if (req)
            fprintf(f, "\"us_per_request\": %.4f, ", cpu / (double)req * 1e6);
        else
            fprintf(f, "\"us_per_request\": null, ");
        fprintf(f, "\"counters\": {");
        if (i == 0) {
            json_counters(f, loop_fields + 1, COUNT(loop_fields) - 1, r->now.loop + 1, s->base.loop + 1);
            const uint64_t *now = r->now.loop, *base = s->base.loop;
            uint64_t w = now[LOOP_C_epoll_waits] - base[LOOP_C_epoll_waits];
            uint64_t e = now[LOOP_C_events] - base[LOOP_C_events];
            fprintf(f, ", \"events_per_wait\": %.4f, \"wait_s\": %.6f, \"pass_s\": %.6f",
                    w ? (double)e / (double)w : 0.0,
                    (double)(now[LOOP_C_wait_ns] - base[LOOP_C_wait_ns]) / 1e9,
                    (double)(now[LOOP_C_pass_ns] - base[LOOP_C_pass_ns]) / 1e9);
            if (s->handoff) {
                fprintf(f, ", \"handoff\": {");
                json_counters(f, hloop_fields, COUNT(hloop_fields), r->now.hloop, s->base.hloop);
                json_gauges(f, hloop_gauges, COUNT(hloop_gauges), &s->handoff->loop);
                fprintf(f, "}");
            }
        } else {
            json_counters(f, pool_fields + 1, COUNT(pool_fields) - 1, r->now.pool[i - 1] + 1,
                          s->base.pool[i - 1] + 1);
            fprintf(f, ", \"app_calls\": %llu", (unsigned long long)req);
            if (s->handoff) {
                fprintf(f, ", \"handoff\": {");
                json_counters(f, hworker_fields, COUNT(hworker_fields), r->now.hworker[i - 1],
                              s->base.hworker[i - 1]);
                json_gauges(f, hworker_gauges, COUNT(hworker_gauges), &s->handoff->worker[i - 1]);
                fprintf(f, "}");
            }
        }
        fprintf(f, "}}");
        first = false;
    }
    fprintf(f, "\n  ]}");
    free(r);
}

/* Length of the well-formed UTF-8 sequence at p (RFC 3629: no overlong
 * forms, no surrogates, nothing past U+10FFFF), or 0. */
static size_t utf8_len(const unsigned char *p)
{
    unsigned char c = p[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else {
        return 0;
    }
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++) /* a NUL stops here too: it is no continuation byte */
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return n;
}

/* s as a JSON string: the app's name holds a path, which may hold '"', '\\',
 * control characters (RFC 8259 §7) or bytes that are not UTF-8 (a JSON text
 * must be UTF-8, §8.1: each such byte becomes U+FFFD). */
void stats_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') {
            fprintf(f, "\\%c", *p);
        } else if (*p < 0x20 || *p == 0x7f) {
            fprintf(f, "\\u%04x", *p);
        } else if (*p < 0x80) {
            fputc(*p, f);
        } else {
            size_t n = utf8_len(p);
            if (n) {
                fwrite(p, 1, n, f);
                p += n - 1;
            } else {
                fputs("\\ufffd", f);
            }
        }
    }
    fputc('"', f);
}

int stats_write_json(struct stats *s, const char *path)
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
        stats_print_worker_json(s, f); /* the supervisor merges the parts */
    } else {
        fprintf(f, "{\"version\": \"%s\", \"handoff\": \"%s\", \"inline\": %s, \"app\": ",
                CSERVE_VERSION, s->handoff_name, s->inline_mode ? "true" : "false");
        stats_json_string(f, s->app_name);
        fprintf(f, ", \"instruments\": %s, \"workers\": [\n  ", CSERVE_INSTRUMENTS ? "true" : "false");
        stats_print_worker_json(s, f);
        fprintf(f, "\n]}\n");
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* stats.c — per-thread instruments: registration, the snapshot, the window.
 *
 * CPU time comes from each thread's own CPU clock (pthread_getcpuclockid),
 * read only when a report or a window starts: the hot path times nothing per
 * request. A window subtracts a snapshot taken at its start, so counters are
 * never written by anyone but their owning thread. The reports themselves
 * (the table, --stats-json, /stats.json) are rendered by ../metrics/ from
 * the snapshot taken here. */
#include "stats.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../handoffs/handoff.h"
#include "../../lib/clock.h"

struct field {
    const char *name;
    size_t off;
};

#define LOOP_FIELD(name) {#name, offsetof(struct loop_stats, name)},
#define POOL_FIELD(name) {#name, offsetof(struct pool_stats, name)},
#define HLOOP_FIELD(name) {#name, offsetof(struct handoff_loop_counters, name)},
#define HTHREAD_FIELD(name) {#name, offsetof(struct handoff_thread_counters, name)},
static const struct field loop_fields[] = {LOOP_STATS_COUNTERS(LOOP_FIELD)};
static const struct field pool_fields[] = {POOL_STATS_COUNTERS(POOL_FIELD)};
static const struct field hloop_fields[] = {HANDOFF_LOOP_COUNTERS(HLOOP_FIELD)};
static const struct field hthread_fields[] = {HANDOFF_THREAD_COUNTERS(HTHREAD_FIELD)};
static const struct field hloop_gauges[] = {HANDOFF_LOOP_GAUGES(HLOOP_FIELD)};
static const struct field hthread_gauges[] = {HANDOFF_THREAD_GAUGES(HTHREAD_FIELD)};
#define COUNT(a) (sizeof(a) / sizeof *(a))

/* A snapshot array holds exactly its table, and each table fits its struct
 * (offsetof already rejects a name the struct lacks). */
#define SNAP_ROW(member) COUNT(((struct stats_snapshot *)0)->member)
_Static_assert(COUNT(loop_fields) == SNAP_ROW(loop), "loop table and snapshot differ");
_Static_assert(COUNT(pool_fields) == SNAP_ROW(pool[0]), "pool table and snapshot differ");
_Static_assert(COUNT(hloop_fields) == SNAP_ROW(hloop), "handoff loop table and snapshot differ");
_Static_assert(COUNT(hthread_fields) == SNAP_ROW(hthread[0]), "handoff thread table and snapshot differ");
_Static_assert(COUNT(hloop_gauges) == SNAP_ROW(hloop_gauge), "handoff loop gauges and snapshot differ");
_Static_assert(COUNT(hthread_gauges) == SNAP_ROW(hthread_gauge[0]), "handoff thread gauges and snapshot differ");
_Static_assert(HLOOP_C_N * sizeof(counter_t) <= sizeof(struct handoff_loop_counters),
               "more handoff loop counters listed than exist");
_Static_assert(HTHREAD_C_N * sizeof(counter_t) <= sizeof(struct handoff_thread_counters),
               "more handoff thread counters listed than exist");

static uint64_t get(const void *base, const struct field *f)
{
    return counter_get((const counter_t *)((const char *)base + f->off));
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
        for (size_t f = 0; f < COUNT(hloop_gauges); f++)
            snap->hloop_gauge[f] = get(&s->handoff->loop, &hloop_gauges[f]);
        for (unsigned i = 0; i + 1 < nthreads && i < s->handoff->threads; i++) {
            for (size_t f = 0; f < COUNT(hthread_fields); f++)
                snap->hthread[i][f] = get(&s->handoff->thread[i], &hthread_fields[f]);
            for (size_t f = 0; f < COUNT(hthread_gauges); f++)
                snap->hthread_gauge[i][f] = get(&s->handoff->thread[i], &hthread_gauges[f]);
        }
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

/* metrics.c — the shared slots and the loop's side of --metrics-bind.
 *
 * Each worker owns one slot of a MAP_SHARED region and publishes a snapshot
 * into it from its loop thread twice a second (metrics_tick): its counters,
 * its threads' CPU clocks, its queues. The metrics thread (metrics_serve.c),
 * in another process or in this one, copies a slot out under a seqlock. */
#include "metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../handoffs/handoff.h"
#include "../../lib/clock.h"
#include "../../lib/futex.h"
#include "../base/log.h"
#include "metrics_internal.h"
#include "verdict.h"

struct metrics_counts metrics_counts;
struct metrics_sizing metrics_sizing;
_Static_assert(METRICS_SIZING_LINE % sizeof(uint64_t) == 0, "the line travels as whole words");

const char *const metrics_class_names[METRICS_CLASSES] = {"1xx", "2xx", "3xx", "4xx", "5xx", "other"};
#define NAME(n) #n,
const char *const metrics_loop_names[LOOP_C_N] = {LOOP_STATS_COUNTERS(NAME)};
const char *const metrics_pool_names[POOL_C_N] = {POOL_STATS_COUNTERS(NAME)};
const char *const metrics_hloop_names[HLOOP_C_N] = {HANDOFF_LOOP_COUNTERS(NAME)};
const char *const metrics_hthread_names[HTHREAD_C_N] = {HANDOFF_THREAD_COUNTERS(NAME)};
const char *const metrics_hloop_gauge_names[HLOOP_G_N] = {HANDOFF_LOOP_GAUGES(NAME)};
const char *const metrics_hthread_gauge_names[HTHREAD_G_N] = {HANDOFF_THREAD_GAUGES(NAME)};
#undef NAME

#define WORDS (sizeof(struct metrics_data) / sizeof(uint64_t))
_Static_assert(sizeof(struct metrics_data) % sizeof(uint64_t) == 0, "a snapshot is whole words");
_Static_assert(sizeof(double) == sizeof(uint64_t), "doubles travel as words");
/* The region is shared between processes: its atomics must be the lock-free
 * kind (an address-free instruction), never a lock private to a process. */
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free");

#define METRICS_MAGIC 0x63736d6574726963ull /* "csmetric" */

/* One worker's slot.
 *
 * The seqlock, and why its orders are enough. No fences: GCC's TSan cannot
 * check atomic_thread_fence, so each data word carries the order itself.
 * The sequence word holds a count in its low 32 bits, odd while a writer
 * holds the slot, and that writer's pid in its high 32 bits (0 when free).
 *   writer: CAS seq (0, s) -> (pid, s+1) (s even), each data word stored
 *           with release, seq = (0, s+2) (release).
 *   reader: s1 = seq (acquire), each data word loaded with acquire,
 *           s2 = seq (relaxed); the copy stands if s1 == s2 and s1's count
 *           is even.
 * If s1 is the writer's (0, s+2), that acquire synchronises with its
 * release, so the data loads see that version or a later one. If a data
 * load saw a later version's store, that store is a release after the
 * later writer's CAS to an odd count, and the load is an acquire before
 * the reader's s2 load: the odd word happens-before s2's load, so s2 != s1
 * and the copy is thrown away. Every data word is an atomic, so a torn copy
 * is discarded rather than being a data race; on x86-64 release stores and
 * acquire loads are plain moves. The CAS makes the writer side a try-lock:
 * during a reload the old and the new worker of a slot both run, and the
 * one named by `owner` (the newest) publishes; the one it replaces stops
 * at its next tick (a publish of its already past that check is its last).
 *
 * A writer killed while it holds the slot never releases it. The pid in
 * the word says who holds it: a writer that finds it held by a process
 * that no longer exists takes it over with a CAS that keeps the count odd
 * ((dead, s+1) -> (pid, s+1)), writes a whole snapshot and releases it as
 * its own ((0, s+2)). Readers cannot tell the two writers apart and need
 * not: the count stayed odd from the dead writer's CAS to the release. */
#define SEQ_COUNT(w) ((uint32_t)(w))
/* A reader that finds the slot held sleeps on the count's half of the
 * word (a shared futex: the writer may be another process) until the writer
 * releases it and wakes it, READ_WAIT_NS at most: a writer killed while it
 * held the slot never wakes anyone. */
#define READ_WAIT_NS 5000000ull
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the count is the low half: the futex word's first bytes");
#define SEQ_HOLDER(w) ((pid_t)((w) >> 32))
#define SEQ_WORD(holder, count) ((uint64_t)(uint32_t)(holder) << 32 | (uint32_t)(count))

struct metrics_slot {
    _Atomic uint64_t seq;  /* (holder pid, count): see above */
    _Atomic int64_t owner; /* pid of the worker that publishes here */
    char pad[CACHE_LINE - 16];
    _Atomic uint64_t words[WORDS];
};

struct metrics_region {
    uint64_t magic;
    uint64_t nslots;
    char pad[CACHE_LINE - 16];
    struct metrics_slot slots[];
};

static struct metrics_region *region;
static size_t region_size;
static int region_fd = -1;

static size_t size_for(unsigned nslots)
{
    return sizeof(struct metrics_region) + (size_t)nslots * sizeof(struct metrics_slot);
}

int metrics_shm_create(unsigned nslots)
{
    if (!nslots)
        nslots = 1;
    int fd = memfd_create("cserve-metrics", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t size = size_for(nslots);
    void *p = ftruncate(fd, (off_t)size) == 0 ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                                              : MAP_FAILED;
    if (p == MAP_FAILED) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    region = p; /* a fresh memfd reads as zeros: every slot unpublished */
    region->magic = METRICS_MAGIC;
    region->nslots = nslots;
    region_size = size;
    region_fd = fd;
    return 0;
}

int metrics_shm_fd(void)
{
    return region_fd;
}

void metrics_shm_adopt(int fd)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(struct metrics_region))
        return;
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return;
    struct metrics_region *r = p;
    if (r->magic != METRICS_MAGIC || size_for((unsigned)r->nslots) > (size_t)st.st_size) {
        munmap(p, (size_t)st.st_size);
        return;
    }
    region = r;
    region_size = (size_t)st.st_size;
    region_fd = fd; /* passed on again if this worker is ever the one that execs */
}

unsigned metrics_nslots(void)
{
    return region ? (unsigned)region->nslots : 0;
}

bool metrics_read_slot(unsigned i, struct metrics_data *out)
{
    if (!region || i >= region->nslots)
        return false;
    struct metrics_slot *s = &region->slots[i];
    uint64_t *w = (uint64_t *)out;
    uint64_t deadline = clock_ns() + READ_WAIT_NS;
    for (int tries = 0; tries < 50; tries++) {
        uint64_t s1 = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (s1 == 0)
            return false; /* never published */
        if (SEQ_COUNT(s1) & 1) {
            /* Held: sleep until the release wakes us (a count changed
             * meanwhile returns at once), then look again. */
            uint64_t now = clock_ns();
            if (now >= deadline)
                return false;
            struct timespec left = {(time_t)((deadline - now) / 1000000000u), (long)((deadline - now) % 1000000000u)};
            futex_wait_shared(&s->seq, SEQ_COUNT(s1), &left);
            continue;
        }
        /* The header first, then only the threads it names. */
        size_t head = offsetof(struct metrics_data, threads) / sizeof(uint64_t);
        for (size_t k = 0; k < head; k++)
            w[k] = atomic_load_explicit(&s->words[k], memory_order_acquire);
        uint64_t n = out->nthreads < STATS_MAX_THREADS ? out->nthreads : STATS_MAX_THREADS;
        size_t end = head + (size_t)n * (sizeof(struct metrics_thread) / sizeof(uint64_t));
        for (size_t k = head; k < end; k++)
            w[k] = atomic_load_explicit(&s->words[k], memory_order_acquire);
        if (atomic_load_explicit(&s->seq, memory_order_relaxed) == s1) {
            out->nthreads = n;
            return true;
        }
    }
    return false;
}

/* A pid that no longer names a process of ours: gone (ESRCH), or reused
 * by another user's (EPERM). A killed worker is reaped by its supervisor
 * before its successor starts, so its pid is gone by then; the one left
 * is a pid reused by a process of ours, which keeps the slot locked until
 * that process ends. */
static bool writer_gone(pid_t pid)
{
    return pid > 0 && kill(pid, 0) != 0 && (errno == ESRCH || errno == EPERM);
}

/* Returns false when another process owns the slot now (it replaced this
 * worker), or a live writer holds it. */
static bool publish(unsigned i, const struct metrics_data *d)
{
    struct metrics_slot *s = &region->slots[i];
    pid_t me = getpid();
    if (atomic_load_explicit(&s->owner, memory_order_relaxed) != (int64_t)me)
        return false;
    uint64_t w = atomic_load_explicit(&s->seq, memory_order_relaxed), held;
    if (!(SEQ_COUNT(w) & 1))
        held = SEQ_WORD(me, SEQ_COUNT(w) + 1);
    else if (SEQ_HOLDER(w) == me || writer_gone(SEQ_HOLDER(w)))
        /* Killed while it wrote: take it over. Held in our own name, it was
         * an earlier process with our pid: only the loop thread publishes,
         * so never this one mid-write. */
        held = SEQ_WORD(me, SEQ_COUNT(w));
    else
        return false;
    if (!atomic_compare_exchange_strong_explicit(&s->seq, &w, held, memory_order_relaxed,
                                                 memory_order_relaxed))
        return false;
    const uint64_t *words = (const uint64_t *)d;
    size_t n = offsetof(struct metrics_data, threads) / sizeof(uint64_t) +
               (size_t)d->nthreads * (sizeof(struct metrics_thread) / sizeof(uint64_t));
    for (size_t k = 0; k < n; k++)
        atomic_store_explicit(&s->words[k], words[k], memory_order_release);
    atomic_store_explicit(&s->seq, SEQ_WORD(0, SEQ_COUNT(held) + 1), memory_order_release);
    /* A syscall per publish (a few a second), for any reader that found
     * the slot held: cheaper than the bookkeeping to know there is none. */
    futex_wake_shared(&s->seq, INT32_MAX);
    return true;
}

/* ---- the loop's side ---- */

static struct {
    struct stats *stats;
    struct stats_snapshot snap;  /* large: kept here, not on the loop's stack */
    struct metrics_data data;    /* the published snapshot */
    unsigned slot;
    double started;
    bool publishing;
    /* --stats: the window's start, for the table's verdict line */
    uint64_t win_samples, win_queued, win_waiting, win_busy, win_total, win_ready;
    bool win_proc, win_ready_ok;
} me;

bool metrics_attach(struct stats *s)
{
    me.stats = s;
    if (!region || s->worker_index >= region->nslots)
        return false;
    me.slot = s->worker_index;
    me.started = clock_s();
    me.publishing = true;
    /* The newest worker of a slot owns it: the one it replaces stops
     * publishing at its next tick. */
    atomic_store_explicit(&region->slots[me.slot].owner, (int64_t)getpid(), memory_order_relaxed);
    return true;
}

unsigned metrics_pool_waiting(const struct loop_snapshot *l, bool *all_queued)
{
    /* A request waiting behind the one its thread runs: outstanding >= 2. */
    unsigned least = ~0u, total = 0;
    for (unsigned w = 0; w < l->active; w++) {
        unsigned o = l->outstanding[w];
        least = o < least ? o : least;
        total += o;
    }
    /* The loop binds a request to a thread late (core/conn/dispatch.c):
     * those it holds back wait for the busy threads as much as the ones
     * queued behind them. */
    bool busy = l->active && least >= 1;
    *all_queued = busy && (least >= 2 || l->waiting);
    return busy ? total - l->active + l->waiting : 0;
}

static void sample_queues(const struct loop_snapshot *l)
{
    if (!l->threads)
        return;
    bool all;
    unsigned waiting = metrics_pool_waiting(l, &all);
    counter_inc(&metrics_counts.samples);
    if (all)
        counter_inc(&metrics_counts.samples_queued);
    if (waiting)
        counter_inc(&metrics_counts.samples_waiting);
}

/* Counters less the window's start (base NULL: as they are). */
static void since(uint64_t *out, const uint64_t *now, const uint64_t *base, size_t n)
{
    for (size_t k = 0; k < n; k++)
        out[k] = now[k] - (base ? base[k] : 0);
}

void metrics_fill(struct stats *s, const struct loop_snapshot *l, const struct stats_snapshot *base,
                  struct metrics_data *d)
{
    struct stats_snapshot *snap = &me.snap;
    stats_snapshot_now(s, snap);
    unsigned n = s->nthreads < STATS_MAX_THREADS ? s->nthreads : STATS_MAX_THREADS;
    d->t = snap->t;
    d->started = base ? base->t : me.started;
    d->pid = getpid();
    d->worker = s->worker_index;
    d->nthreads = n;
    d->pool_threads = s->pool_max ? stats_pool_active(s) : 0;
    d->pool_started = n ? n - 1 : 0;
    d->pool_max = s->pool_max;
    d->pool_auto = s->threads_auto;
    d->sizing_changes = metrics_sizing.changes;
    d->sizing_at = metrics_sizing.at;
    memcpy(d->sizing_last, metrics_sizing.last, sizeof d->sizing_last);
    d->has_handoff = s->handoff != NULL;
    since(d->loop, snap->loop, base ? base->loop : NULL, LOOP_C_N);
    since(d->hloop, snap->hloop, base ? base->hloop : NULL, HLOOP_C_N);
    memcpy(d->hloop_gauge, snap->hloop_gauge, sizeof d->hloop_gauge);
    for (unsigned k = 0; k < METRICS_CLASSES; k++)
        d->status[k] = counter_get(&metrics_counts.status[k]);
    for (unsigned k = 0; k <= METRICS_BUCKETS; k++)
        d->latency[k] = counter_get(&metrics_counts.latency[k]);
    d->latency_ns = counter_get(&metrics_counts.latency_ns);
    d->bytes_in = counter_get(&metrics_counts.bytes_in);
    d->bytes_out = counter_get(&metrics_counts.bytes_out);
    d->samples = counter_get(&metrics_counts.samples);
    d->samples_queued = counter_get(&metrics_counts.samples_queued);
    d->samples_waiting = counter_get(&metrics_counts.samples_waiting);
    d->conns_open = l->nconns;
    for (unsigned i = 0; i < n; i++) {
        struct metrics_thread *t = &d->threads[i];
        const struct stats_thread_ref *r = &s->threads[i];
        memset(t, 0, sizeof *t);
        snprintf(t->name, sizeof t->name, "%s", r->name ? r->name : "");
        snprintf(t->role, sizeof t->role, "%s", r->role ? r->role : "");
        t->tid = r->tid;
        t->cpu_s = snap->cpu[i] - (base ? base->cpu[i] : 0);
        if (i == 0) {
            t->requests = d->loop[LOOP_C_requests];
            continue;
        }
        since(t->pool, snap->pool[i - 1], base ? base->pool[i - 1] : NULL, POOL_C_N);
        t->requests = t->pool[POOL_C_requests];
        t->queue = i - 1 < l->threads ? l->outstanding[i - 1] : 0;
        if (s->handoff && i - 1 < s->handoff->threads) {
            since(t->hthread, snap->hthread[i - 1], base ? base->hthread[i - 1] : NULL, HTHREAD_C_N);
            memcpy(t->hthread_gauge, snap->hthread_gauge[i - 1], sizeof t->hthread_gauge);
        }
    }
}

void metrics_tick(const struct loop_snapshot *l)
{
    sample_queues(l);
    if (!me.publishing || !me.stats)
        return;
    metrics_fill(me.stats, l, NULL, &me.data);
    publish(me.slot, &me.data);
}

/* ---- --stats: the verdict over the table's window ---- */

bool metrics_proc_stat(uint64_t *busy, uint64_t *total)
{
    FILE *f = fopen("/proc/stat", "re");
    if (!f)
        return false;
    unsigned long long v[10] = {0};
    int got = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                     &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
    fclose(f);
    if (got < 4)
        return false;
    /* user nice system idle iowait irq softirq steal (guest time is
     * already in user): idle is idle + iowait. */
    uint64_t t = 0;
    for (int k = 0; k < 8 && k < got; k++)
        t += v[k];
    *total = t;
    *busy = t - v[3] - (got > 4 ? v[4] : 0);
    return true;
}

bool metrics_run_delay(int pid, int tid, uint64_t *ns)
{
    uint64_t run;
    return metrics_schedstat(pid, tid, &run, ns);
}

bool metrics_schedstat(int pid, int tid, uint64_t *run_ns, uint64_t *wait_ns)
{
    char path[64], buf[128];
    snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", pid, tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    unsigned long long run, wait;
    if (n <= 0)
        return false;
    buf[n] = '\0';
    if (sscanf(buf, "%llu %llu", &run, &wait) != 2)
        return false;
    *run_ns = run;
    *wait_ns = wait;
    return true;
}

/* The pool threads' run delay together (false: unknown). */
static bool pool_run_delay(uint64_t *ns)
{
    struct stats *s = me.stats;
    *ns = 0;
    if (!s)
        return false;
    for (unsigned i = 1; i < s->nthreads && i < STATS_MAX_THREADS; i++) {
        uint64_t v;
        if (!s->threads[i].name || !metrics_run_delay((int)getpid(), (int)s->threads[i].tid, &v))
            return false;
        *ns += v;
    }
    return true;
}

void metrics_window_mark(void)
{
    me.win_ready_ok = pool_run_delay(&me.win_ready);
    me.win_samples = counter_get(&metrics_counts.samples);
    me.win_queued = counter_get(&metrics_counts.samples_queued);
    me.win_waiting = counter_get(&metrics_counts.samples_waiting);
    me.win_proc = metrics_proc_stat(&me.win_busy, &me.win_total);
}

void metrics_print_verdict(FILE *f, double window_s, double loop_cpu_s, double pool_cpu_s,
                           unsigned pool_threads, unsigned auto_max)
{
    struct verdict_input in = {.window_s = window_s, .pool_threads = pool_threads, .auto_max = auto_max,
                               .machine_busy = -1};
    uint64_t ready;
    if (window_s > 0) {
        in.loop_util = loop_cpu_s / window_s;
        in.pool_util = pool_cpu_s / window_s;
        if (me.win_ready_ok && pool_run_delay(&ready) && ready >= me.win_ready)
            in.pool_ready = (double)(ready - me.win_ready) / 1e9 / window_s;
    }
    uint64_t samples = counter_get(&metrics_counts.samples) - me.win_samples;
    if (samples) {
        in.queued_frac = (double)(counter_get(&metrics_counts.samples_queued) - me.win_queued) / (double)samples;
        in.waiting_frac = (double)(counter_get(&metrics_counts.samples_waiting) - me.win_waiting) / (double)samples;
    }
    in.queued_max = in.queued_frac; /* the table is one worker's */
    uint64_t busy, total;
    if (me.win_proc && metrics_proc_stat(&busy, &total) && total > me.win_total)
        in.machine_busy = (double)(busy - me.win_busy) / (double)(total - me.win_total);
    struct verdict v;
    verdict_decide(&in, &v);
    fprintf(f, "  verdict: %s (%s); advice: %s\n", v.name, v.why, v.advice);
}

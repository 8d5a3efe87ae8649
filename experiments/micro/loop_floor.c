/* loop_floor.c — the least a cross-core handoff can add to the loop's time
 * per request, on the machine it runs on.
 *
 *     loop_floor --mode inline|ring|batched|pingpong [--prefetch] [--window N] [--batch B]
 *                [--publish-every K] [--response BYTES] [--request-lines N]
 *                [--worker-ns NS] [--seconds S]
 *
 * It prints one JSON object: the loop thread's busy ns per job, and what it
 * needs to read that figure (batch sizes, idle polls, the clock's own cost).
 *
 * Both modes do the same per-job bookkeeping on the loop thread: take a job
 * from a free list, get its response into the job's buffer, copy the
 * response out (as the kernel's sendmsg copies it into a socket buffer),
 * check it is the job's own, and put the job back. They differ in who writes
 * the response:
 *
 *   inline  the loop writes it itself, as native-hello's loop does: every
 *           line of the job stays in the loop's cache.
 *   ring    a worker thread writes it. The loop submits jobs through the
 *           ring backend (handoffs/ring.c, the code the server runs) and
 *           drains their completions; the worker busy-polls try_take, so no
 *           side ever parks and no syscall is made. Each submit and each
 *           completion publishes its ring's tail and then fences (F1, F3),
 *           as the server's do.
 *   batched the same two rings (spsc_ring.h) with each side's tail published
 *           once per K jobs (spsc_stage/spsc_publish; K = --publish-every,
 *           by default a whole pass), each publish followed by the fence and
 *           the look at the other side's parked flag that the park
 *           handshake needs (nobody parks here, so the flag stays 0). With
 *           K = 1 it is the ring's protocol without its counters; with
 *           K = a pass it is what batching the publication would leave.
 *
 * The job is as lean as such a handoff allows: the request needs no field in
 * the job (the ring slot is the pointer), the response's length shares a
 * line with its first bytes, and the loop writes nothing the worker writes.
 * So per job the loop pulls only the response's lines from the worker's
 * core (three for cserve's 131-byte hello response), plus its share of the
 * rings' index and slot lines. ring − inline is what the ring as built adds
 * to the loop per request beyond native-hello's work, with no parsing,
 * sockets or interpreter in the way; batched − inline is what a ring that
 * publishes once per batch would add: the floor for this architecture (one
 * loop thread doing all socket I/O, the app on another core).
 *
 * pingpong: the yardstick. The two threads pass one cache line back and
 * forth (each waits for the other's store, then stores); "busy ns per job"
 * is then the time of one one-way transfer. In a guest the host may move
 * the two vCPUs between cores that share a cache and cores that do not, so
 * this cost, and every ring row with it, can change several-fold from one
 * run to the next. So every two-thread run is bracketed by a short
 * pingpong just before and just after it (--yardstick-ms each, on two
 * fresh threads, after one discarded as a warm-up), reported as
 * yardstick_before_ns and yardstick_after_ns:
 * a run whose two differ much saw the host move its vCPUs.
 *
 * --request-lines N fattens the job the way a server's is: before each
 * submit the loop writes N lines of request (one store per line, as a
 * parser filling views does), and whoever serves the job reads them back
 * (as the app's environ is built) and checks they are this job's. Inline,
 * the lines never leave the loop's core; through the ring every one of them
 * crosses to the worker and back each time the job is reused.
 *
 * Placement: the loop runs pinned to the first CPU it may use and every
 * second thread to the second (sched_getaffinity), so the two never share
 * a CPU: left to the scheduler, a new thread starts beside its creator and
 * the two spinning threads would time-share one CPU until the balancer
 * moves one, which measures the scheduler, not the lines.
 *
 * Busy time: the loop's monotonic clock around each pass that found work
 * (a drain that returned jobs, their processing and the submits that refill
 * the window), less two clock reads per pass (calibrated at start). Passes
 * that found nothing are idle polls, counted but not timed, so a worker
 * slower than the loop (--worker-ns) does not inflate the loop's figure. */
#include <errno.h>
#include <sched.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../handoffs/handoff.h"
#include "../../handoffs/spsc_ring.h"
#include "../../lib/aligned.h"
#include "../../lib/cpu_relax.h"

#define RESPONSE_MAX 960 /* with the length: 16 lines at most */
#define REQUEST_LINES_MAX 64

struct job {
    /* The loop's line: the worker never touches it. */
    _Alignas(CACHE_LINE) struct job *next_free;
    uint32_t id;
    /* The request, written by the loop (--request-lines of it). */
    _Alignas(CACHE_LINE) uint64_t request[REQUEST_LINES_MAX][CACHE_LINE / sizeof(uint64_t)];
    /* The response, written by whoever serves the job; its length shares
     * the first line with the first bytes. */
    _Alignas(CACHE_LINE) uint32_t len;
    char bytes[RESPONSE_MAX];
};

struct floor_options {
    enum { MODE_INLINE, MODE_RING, MODE_BATCHED, MODE_PINGPONG } mode;
    unsigned publish_every; /* batched: jobs per publish on each side */
    bool prefetch;    /* ring: prefetch every drained job's response before copying any */
    unsigned window;  /* jobs in flight (the ring's capacity) */
    unsigned batch;   /* the most jobs a pass drains and resubmits */
    unsigned response;
    unsigned request_lines;
    long worker_ns;   /* ring: the worker spins this long per job (an app's cost) */
    double yardstick_ms; /* the pingpong before and after a two-thread run */
    double seconds;
};

static char template_bytes[RESPONSE_MAX];
static int loop_cpu = -1, worker_cpu = -1; /* pin_setup */
static char sink[64 * 1024]; /* where responses are copied out (a socket buffer's stand-in) */
static size_t sink_at;

/* The first two CPUs this process may run on; the loop is pinned to the
 * first. -1 if there are not two. */
static int pin_setup(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return -1;
    for (int c = 0; c < CPU_SETSIZE && worker_cpu < 0; c++)
        if (CPU_ISSET(c, &set)) {
            if (loop_cpu < 0)
                loop_cpu = c;
            else
                worker_cpu = c;
        }
    if (worker_cpu < 0)
        return -1;
    CPU_ZERO(&set);
    CPU_SET(loop_cpu, &set);
    return sched_setaffinity(0, sizeof set, &set);
}

/* Called first by every second thread. */
static void pin_worker(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(worker_cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static uint64_t now_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The response for job id: the template with the id in its first bytes, so
 * the loop can tell it copied this job's response and not a stale one. */
static void write_response(struct job *job, unsigned len)
{
    memcpy(job->bytes, template_bytes, len);
    memcpy(job->bytes, &job->id, sizeof job->id);
    job->len = len;
}

/* The loop's side of the request: one store in each of its lines. */
static void write_request(struct job *job, unsigned lines)
{
    for (unsigned i = 0; i < lines; i++)
        job->request[i][0] = (uint64_t)job->id * REQUEST_LINES_MAX + i;
}

/* The app's side: read every line back. 0, or -1 if one is not this job's. */
static int read_request(const struct job *job, unsigned lines)
{
    uint64_t sum = 0, base = (uint64_t)job->id * REQUEST_LINES_MAX;
    for (unsigned i = 0; i < lines; i++)
        sum += job->request[i][0] - base;
    return sum == (uint64_t)lines * (lines - 1) / 2 ? 0 : -1;
}

/* Copy the response out and check it. 0, or -1 if it is not job's. */
static int send_response(struct job *job, unsigned len)
{
    uint32_t n = job->len, id;
    if (n != len)
        return -1;
    if (sink_at + n > sizeof sink)
        sink_at = 0;
    memcpy(sink + sink_at, job->bytes, n);
    memcpy(&id, sink + sink_at, sizeof id);
    sink_at += n;
    return id == job->id ? 0 : -1;
}

struct worker {
    const struct handoff_ops *ops;
    struct handoff *h;
    const struct floor_options *opt;
    atomic_bool stop;
    int failed;
};

static void *worker_main(void *p)
{
    struct worker *w = p;
    pthread_setname_np(pthread_self(), "floor-worker");
    pin_worker();
    for (;;) {
        struct job *job;
        while (!(job = w->ops->try_take(w->h, 0)))
            if (atomic_load_explicit(&w->stop, memory_order_relaxed))
                return NULL;
        if (w->opt->worker_ns > 0) {
            uint64_t until = now_ns(CLOCK_MONOTONIC) + (uint64_t)w->opt->worker_ns;
            while (now_ns(CLOCK_MONOTONIC) < until)
                cpu_relax();
        }
        if (read_request(job, w->opt->request_lines) != 0) {
            w->failed = 1;
            return NULL;
        }
        write_response(job, w->opt->response);
        if (w->ops->complete(w->h, 0, job) != 0) {
            w->failed = 1;
            return NULL;
        }
    }
}

/* What timing one pass costs: two reads of the monotonic clock, ns. */
static double clock_pair_ns(void)
{
    enum { N = 200000 };
    volatile uint64_t last = 0;
    uint64_t t0 = now_ns(CLOCK_MONOTONIC);
    for (int i = 0; i < N; i++)
        last = now_ns(CLOCK_MONOTONIC);
    return (double)(last - t0) / N * 2;
}

struct result {
    uint64_t jobs, passes, idle_polls, busy_ns, loop_cpu_ns, worker_cpu_ns, wall_ns;
    double clock_pair_ns;
};

static struct job *pop_free(struct job **free_list)
{
    struct job *job = *free_list;
    *free_list = job->next_free;
    return job;
}

static void push_free(struct job **free_list, struct job *job)
{
    job->next_free = *free_list;
    *free_list = job;
}

static int run_inline(const struct floor_options *opt, struct job *jobs, struct result *r)
{
    struct job *free_list = NULL;
    for (unsigned i = 0; i < opt->window; i++)
        push_free(&free_list, &jobs[i]);
    struct job *batch[opt->batch];
    uint64_t start = now_ns(CLOCK_MONOTONIC), end = start + (uint64_t)(opt->seconds * 1e9);
    uint64_t cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    while (now_ns(CLOCK_MONOTONIC) < end) {
        uint64_t t0 = now_ns(CLOCK_MONOTONIC);
        for (unsigned i = 0; i < opt->batch; i++) {
            batch[i] = pop_free(&free_list);
            write_request(batch[i], opt->request_lines);
            if (read_request(batch[i], opt->request_lines) != 0)
                return -1;
            write_response(batch[i], opt->response);
        }
        for (unsigned i = 0; i < opt->batch; i++) {
            if (send_response(batch[i], opt->response) != 0)
                return -1;
            push_free(&free_list, batch[i]);
        }
        r->busy_ns += now_ns(CLOCK_MONOTONIC) - t0;
        r->passes++;
        r->jobs += opt->batch;
    }
    r->loop_cpu_ns = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    r->wall_ns = now_ns(CLOCK_MONOTONIC) - start;
    return 0;
}

static int run_ring(const struct floor_options *opt, struct job *jobs, struct result *r)
{
    const struct handoff_ops *ops = handoff_find("ring");
    struct handoff_config cfg = {.workers = 1, .capacity = opt->window, .spin_iters = -1,
                                 .loop_spin_ns = 0};
    struct handoff *h = ops ? ops->create(&cfg) : NULL;
    if (!h) {
        fprintf(stderr, "loop_floor: ring create: %s\n", strerror(errno));
        return -1;
    }
    struct worker w = {.ops = ops, .h = h, .opt = opt};
    pthread_t thread;
    if (pthread_create(&thread, NULL, worker_main, &w) != 0) {
        ops->destroy(h);
        return -1;
    }
    int rc = 0;
    for (unsigned i = 0; i < opt->window && rc == 0; i++) {
        write_request(&jobs[i], opt->request_lines);
        if (ops->submit(h, 0, &jobs[i]) != HANDOFF_OK)
            rc = -1;
    }
    ops->flush(h);
    struct job *done[opt->batch];
    uint64_t start = now_ns(CLOCK_MONOTONIC), end = start + (uint64_t)(opt->seconds * 1e9);
    uint64_t cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    clockid_t worker_clock;
    uint64_t wcpu0 = 0;
    bool have_worker_clock = pthread_getcpuclockid(thread, &worker_clock) == 0;
    if (have_worker_clock)
        wcpu0 = now_ns(worker_clock);
    while (rc == 0 && now_ns(CLOCK_MONOTONIC) < end) {
        uint64_t t0 = now_ns(CLOCK_MONOTONIC);
        size_t n = ops->drain(h, false, done, opt->batch);
        if (n == 0) {
            r->idle_polls++;
            continue;
        }
        if (opt->prefetch)
            for (size_t i = 0; i < n; i++)
                for (unsigned off = 0; off < sizeof done[i]->len + opt->response; off += CACHE_LINE)
                    __builtin_prefetch((const char *)&done[i]->len + off);
        /* Each drained job is sent and then, being free again, goes straight
         * back to the worker: the free list's pop and push, as inline's. */
        struct job *free_list = NULL;
        for (size_t i = 0; i < n; i++) {
            if (send_response(done[i], opt->response) != 0) {
                rc = -1;
                break;
            }
            push_free(&free_list, done[i]);
        }
        for (size_t i = 0; i < n && rc == 0; i++) {
            struct job *job = pop_free(&free_list);
            write_request(job, opt->request_lines);
            if (ops->submit(h, 0, job) != HANDOFF_OK)
                rc = -1;
        }
        ops->flush(h);
        r->busy_ns += now_ns(CLOCK_MONOTONIC) - t0;
        r->passes++;
        r->jobs += n;
    }
    r->loop_cpu_ns = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    if (have_worker_clock)
        r->worker_cpu_ns = now_ns(worker_clock) - wcpu0;
    r->wall_ns = now_ns(CLOCK_MONOTONIC) - start;
    atomic_store(&w.stop, true);
    ops->shutdown(h);
    pthread_join(thread, NULL);
    ops->destroy(h);
    if (w.failed) {
        fprintf(stderr, "loop_floor: complete failed\n");
        rc = -1;
    }
    return rc;
}

/* ---- batched: the rings of spsc_ring.h, each side publishing per K jobs ---- */

struct batched {
    struct spsc_ring req, done;             /* loop -> worker, worker -> loop */
    _Alignas(CACHE_LINE) atomic_int worker_parked; /* the handshake's flags: never 1 here */
    _Alignas(CACHE_LINE) atomic_int loop_parked;
    _Alignas(CACHE_LINE) atomic_bool stop;
    const struct floor_options *opt;
    int failed;
};

/* A publish as the park handshake needs it: the tail, a seq_cst fence (F1 /
 * F3's place), a look at the other side's flag. */
static void publish(struct spsc_ring *r, unsigned staged, atomic_int *other_parked, int *woke)
{
    spsc_publish(r, staged);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(other_parked, memory_order_relaxed))
        (*woke)++; /* never: nobody parks in this driver */
}

static void *batched_worker(void *p)
{
    struct batched *b = p;
    pthread_setname_np(pthread_self(), "floor-worker");
    pin_worker();
    unsigned staged = spsc_staged_start(&b->done), pending = 0;
    int woke = 0;
    while (!atomic_load_explicit(&b->stop, memory_order_relaxed)) {
        struct job *job = spsc_pop(&b->req);
        if (!job) {
            if (pending) { /* nothing more now: what is done goes back */
                publish(&b->done, staged, &b->loop_parked, &woke);
                pending = 0;
            }
            continue;
        }
        if (b->opt->worker_ns > 0) {
            uint64_t until = now_ns(CLOCK_MONOTONIC) + (uint64_t)b->opt->worker_ns;
            while (now_ns(CLOCK_MONOTONIC) < until)
                cpu_relax();
        }
        if (read_request(job, b->opt->request_lines) != 0) {
            b->failed = 1;
            return NULL;
        }
        write_response(job, b->opt->response);
        if (!spsc_stage(&b->done, &staged, job)) { /* the window never exceeds capacity */
            b->failed = 1;
            return NULL;
        }
        if (++pending >= b->opt->publish_every) {
            publish(&b->done, staged, &b->loop_parked, &woke);
            pending = 0;
        }
    }
    b->failed |= woke != 0;
    return NULL;
}

static int run_batched(const struct floor_options *opt, struct job *jobs, struct result *r)
{
    struct batched *b = aligned_zalloc(sizeof *b);
    if (!b || spsc_init(&b->req, opt->window) < 0 || spsc_init(&b->done, opt->window) < 0) {
        fprintf(stderr, "loop_floor: out of memory\n");
        return -1;
    }
    b->opt = opt;
    int rc = 0, woke = 0;
    unsigned staged = spsc_staged_start(&b->req);
    for (unsigned i = 0; i < opt->window; i++) {
        write_request(&jobs[i], opt->request_lines);
        spsc_stage(&b->req, &staged, &jobs[i]);
    }
    publish(&b->req, staged, &b->worker_parked, &woke);
    pthread_t thread;
    if (pthread_create(&thread, NULL, batched_worker, b) != 0)
        return -1;
    struct job *done[opt->batch];
    clockid_t worker_clock;
    bool have_worker_clock = pthread_getcpuclockid(thread, &worker_clock) == 0;
    uint64_t start = now_ns(CLOCK_MONOTONIC), end = start + (uint64_t)(opt->seconds * 1e9);
    uint64_t cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID), wcpu0 = have_worker_clock ? now_ns(worker_clock) : 0;
    while (rc == 0 && now_ns(CLOCK_MONOTONIC) < end) {
        uint64_t t0 = now_ns(CLOCK_MONOTONIC);
        size_t n = 0;
        struct job *job;
        while (n < opt->batch && (job = spsc_pop(&b->done)) != NULL)
            done[n++] = job;
        if (n == 0) {
            r->idle_polls++;
            continue;
        }
        if (opt->prefetch)
            for (size_t i = 0; i < n; i++)
                for (unsigned off = 0; off < sizeof done[i]->len + opt->response; off += CACHE_LINE)
                    __builtin_prefetch((const char *)&done[i]->len + off);
        struct job *free_list = NULL;
        for (size_t i = 0; i < n; i++) {
            if (send_response(done[i], opt->response) != 0) {
                rc = -1;
                break;
            }
            push_free(&free_list, done[i]);
        }
        unsigned pending = 0;
        for (size_t i = 0; i < n && rc == 0; i++) {
            struct job *next = pop_free(&free_list);
            write_request(next, opt->request_lines);
            if (!spsc_stage(&b->req, &staged, next))
                rc = -1;
            else if (++pending >= opt->publish_every) {
                publish(&b->req, staged, &b->worker_parked, &woke);
                pending = 0;
            }
        }
        if (pending)
            publish(&b->req, staged, &b->worker_parked, &woke);
        r->busy_ns += now_ns(CLOCK_MONOTONIC) - t0;
        r->passes++;
        r->jobs += n;
    }
    r->loop_cpu_ns = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    if (have_worker_clock)
        r->worker_cpu_ns = now_ns(worker_clock) - wcpu0;
    r->wall_ns = now_ns(CLOCK_MONOTONIC) - start;
    atomic_store(&b->stop, true);
    pthread_join(thread, NULL);
    if (b->failed || woke) {
        fprintf(stderr, "loop_floor: batched: the window overflowed a ring, or a parked flag was set\n");
        rc = -1;
    }
    spsc_destroy(&b->req);
    spsc_destroy(&b->done);
    free(b);
    return rc;
}

/* ---- pingpong: one line passed back and forth ---- */

struct pingpong {
    _Alignas(CACHE_LINE) atomic_ulong ball; /* odd: the worker's turn; even: the loop's */
    _Alignas(CACHE_LINE) atomic_bool stop;
};

static void *pingpong_worker(void *p)
{
    struct pingpong *pp = p;
    pthread_setname_np(pthread_self(), "floor-worker");
    pin_worker();
    for (;;) {
        unsigned long v;
        while (!((v = atomic_load_explicit(&pp->ball, memory_order_acquire)) & 1))
            if (atomic_load_explicit(&pp->stop, memory_order_relaxed))
                return NULL;
        atomic_store_explicit(&pp->ball, v + 1, memory_order_release);
    }
}

static int run_pingpong(const struct floor_options *opt, struct result *r)
{
    struct pingpong *pp = aligned_zalloc(sizeof *pp);
    pthread_t thread;
    if (!pp || pthread_create(&thread, NULL, pingpong_worker, pp) != 0)
        return -1;
    clockid_t worker_clock;
    bool have_worker_clock = pthread_getcpuclockid(thread, &worker_clock) == 0;
    uint64_t start = now_ns(CLOCK_MONOTONIC), end = start + (uint64_t)(opt->seconds * 1e9);
    uint64_t cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID), wcpu0 = have_worker_clock ? now_ns(worker_clock) : 0;
    unsigned long v = 0;
    while (now_ns(CLOCK_MONOTONIC) < end) {
        for (int i = 0; i < 1024; i++) { /* round trips between two clock reads */
            atomic_store_explicit(&pp->ball, v + 1, memory_order_release);
            while ((v = atomic_load_explicit(&pp->ball, memory_order_acquire)) & 1)
                cpu_relax();
        }
        r->jobs += 2048; /* one-way transfers */
        r->passes++;
    }
    uint64_t stop_at = now_ns(CLOCK_MONOTONIC);
    r->wall_ns = r->busy_ns = stop_at - start;
    r->passes = r->jobs; /* no clock read per transfer to correct for */
    r->clock_pair_ns = 0;
    r->loop_cpu_ns = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    if (have_worker_clock)
        r->worker_cpu_ns = now_ns(worker_clock) - wcpu0;
    atomic_store(&pp->stop, true);
    pthread_join(thread, NULL);
    free(pp);
    return v == r->jobs ? 0 : -1;
}

/* ns per one-way transfer over a pingpong of opt->yardstick_ms; -1 on failure. */
static double yardstick_ns(const struct floor_options *opt)
{
    struct floor_options o = *opt;
    o.seconds = opt->yardstick_ms / 1000;
    struct result y = {0};
    if (run_pingpong(&o, &y) != 0 || y.jobs == 0)
        return -1;
    return (double)y.busy_ns / (double)y.jobs;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: loop_floor --mode inline|ring|batched|pingpong [--prefetch] [--window N] [--batch B]\n"
               "                  [--publish-every K] [--response BYTES] [--request-lines N]\n"
               "                  [--worker-ns NS] [--seconds S] [--yardstick-ms MS]\n"
               "Prints the loop thread's busy ns per job as JSON (see the comment atop loop_floor.c).\n");
}

int main(int argc, char **argv)
{
    struct floor_options opt = {.window = 256, .batch = 16, .response = 131, .seconds = 1.0,
                                .yardstick_ms = 30};
    const char *mode = NULL;
    static const struct option longopts[] = {
        {"mode", required_argument, 0, 'm'},     {"prefetch", no_argument, 0, 'p'},
        {"window", required_argument, 0, 'w'},   {"batch", required_argument, 0, 'b'},
        {"response", required_argument, 0, 'r'}, {"worker-ns", required_argument, 0, 'n'},
        {"seconds", required_argument, 0, 's'},  {"publish-every", required_argument, 0, 'k'},
        {"request-lines", required_argument, 0, 'q'}, {"yardstick-ms", required_argument, 0, 'y'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': mode = optarg; break;
        case 'p': opt.prefetch = true; break;
        case 'w': opt.window = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'b': opt.batch = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'r': opt.response = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'n': opt.worker_ns = strtol(optarg, NULL, 10); break;
        case 's': opt.seconds = strtod(optarg, NULL); break;
        case 'y': opt.yardstick_ms = strtod(optarg, NULL); break;
        case 'q': opt.request_lines = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'k': opt.publish_every = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (mode && strcmp(mode, "inline") == 0)
        opt.mode = MODE_INLINE;
    else if (mode && strcmp(mode, "ring") == 0)
        opt.mode = MODE_RING;
    else if (mode && strcmp(mode, "batched") == 0)
        opt.mode = MODE_BATCHED;
    else if (mode && strcmp(mode, "pingpong") == 0)
        opt.mode = MODE_PINGPONG;
    else
        mode = NULL;
    if (!mode || optind != argc) {
        usage(stderr);
        return 2;
    }
    if (opt.publish_every == 0)
        opt.publish_every = opt.batch;
    if (opt.window < 2 || (opt.window & (opt.window - 1)) || opt.batch < 1 ||
        opt.batch > opt.window || opt.response < sizeof(uint32_t) || opt.response > RESPONSE_MAX ||
        opt.request_lines > REQUEST_LINES_MAX || !(opt.seconds > 0) || !(opt.yardstick_ms > 0)) {
        fprintf(stderr, "loop_floor: --window a power of two >= 2, 1 <= --batch <= window, "
                        "%zu <= --response <= %d, --request-lines <= %d, --seconds and --yardstick-ms > 0\n",
                sizeof(uint32_t), RESPONSE_MAX, REQUEST_LINES_MAX);
        return 2;
    }
    if (opt.mode != MODE_INLINE && pin_setup() != 0) {
        fprintf(stderr, "loop_floor: --mode %s needs two CPUs to pin its two threads to\n", mode);
        return 1;
    }
    for (unsigned i = 0; i < RESPONSE_MAX; i++)
        template_bytes[i] = (char)('a' + i % 26);
    struct job *jobs = aligned_zalloc(sizeof *jobs * opt.window);
    if (!jobs)
        return 1;
    for (unsigned i = 0; i < opt.window; i++)
        jobs[i].id = i;
    struct result r = {.clock_pair_ns = clock_pair_ns()};
    bool bracket = opt.mode == MODE_RING || opt.mode == MODE_BATCHED;
    if (bracket)
        yardstick_ns(&opt); /* a warm-up: an idle vCPU answers slowly at first */
    double yard_before = bracket ? yardstick_ns(&opt) : 0;
    int rc = opt.mode == MODE_RING      ? run_ring(&opt, jobs, &r)
             : opt.mode == MODE_BATCHED ? run_batched(&opt, jobs, &r)
             : opt.mode == MODE_PINGPONG ? run_pingpong(&opt, &r)
                                        : run_inline(&opt, jobs, &r);
    double yard_after = bracket && rc == 0 ? yardstick_ns(&opt) : 0;
    if (yard_before < 0 || yard_after < 0)
        rc = -1;
    free(jobs);
    if (rc != 0 || r.jobs == 0) {
        fprintf(stderr, "loop_floor: %s run failed (a response was not its job's, or no job ran)\n",
                mode);
        return 1;
    }
    double busy = (double)r.busy_ns - r.clock_pair_ns * (double)r.passes;
    printf("{\"mode\": \"%s\", \"prefetch\": %s, \"window\": %u, \"batch\": %u, \"response\": %u, \"request_lines\": %u, "
           "\"publish_every\": %u, \"worker_ns\": %ld, \"jobs\": %llu, \"passes\": %llu, \"idle_polls\": %llu, "
           "\"clock_pair_ns\": %.2f, \"busy_ns_per_job\": %.2f, \"loop_cpu_ns_per_job\": %.2f, "
           "\"worker_cpu_ns_per_job\": %.2f, \"wall_ns_per_job\": %.2f, \"jobs_per_pass\": %.2f, "
           "\"yardstick_before_ns\": %.2f, \"yardstick_after_ns\": %.2f}\n",
           mode, opt.prefetch ? "true" : "false", opt.window, opt.batch, opt.response, opt.request_lines,
           opt.mode == MODE_BATCHED ? opt.publish_every : 1, opt.worker_ns, (unsigned long long)r.jobs, (unsigned long long)r.passes,
           (unsigned long long)r.idle_polls, r.clock_pair_ns, busy / (double)r.jobs,
           (double)r.loop_cpu_ns / (double)r.jobs, (double)r.worker_cpu_ns / (double)r.jobs,
           (double)r.wall_ns / (double)r.jobs, (double)r.jobs / (double)r.passes, yard_before, yard_after);
    return 0;
}

/* loop_floor.c — what a cross-core handoff adds to the loop's time per
 * request, on the machine it runs on, with no sockets, parser or
 * interpreter in the way.
 *
 *     loop_floor --mode inline|ring|batched|pingpong [--window N] [--batch B]
 *                [--pass-ns NS] [--publish-every K] [--response BYTES]
 *                [--request-lines N] [--worker-ns NS] [--seconds S]
 *                [--yardstick-ms MS]
 *
 * It prints one JSON object: the loop thread's busy ns per job, and what it
 * takes to read that figure (jobs per pass, idle polls, the clock's cost,
 * the yardsticks, the CPUs the threads ran on).
 *
 * Every mode does the same per-job work on the loop thread: take a job,
 * write its request (a ticket, new for every use, in the first of
 * --request-lines lines, one store per line, as a parser filling views
 * does), get its response, copy the response out (as the kernel's sendmsg
 * copies it into a socket buffer), check it carries this use's ticket, and
 * recycle the job. Every mode cycles through all --window jobs, each job
 * coming round again only after the whole window has passed (in the ring
 * modes in completion order, a pass's worth at a time). The modes differ in who serves the job (reads the
 * request back, as an app's environ is built, and writes the response):
 *
 *   inline  the loop itself, as native-hello's loop does: no line of any
 *           job leaves the loop's core.
 *   ring    a worker thread. The loop submits through the ring backend
 *           (handoffs/ring.c, the code the server runs) and drains its
 *           completions; the worker busy-polls try_take, so no side parks
 *           and no syscall is made. Each submit and each completion
 *           publishes its ring's tail and then fences (F1, F3), as the
 *           server's do.
 *   batched the same two SPSC rings (spsc_ring.h), each side publishing its
 *           tail once per K jobs (spsc_stage/spsc_publish; K =
 *           --publish-every, by default a whole pass; the worker also
 *           publishes whenever it finds no job), each publish followed by
 *           the fence and the look at the other side's parked flag that the
 *           park handshake needs (nobody parks here: the flag stays 0).
 *
 * ring − inline is then what the ring as built adds to the loop per request
 * beyond native-hello's own work: the ring's operations and the job's lines
 * crossing cores (the request's there, the response's back, the rings'
 * index and slot lines).
 *
 * How completions reach the loop matters, so it is a parameter. A loop
 * with nothing else to do drains each completion as it lands, which behind
 * a slow worker (--worker-ns, an app's cost per job) is one at a time. A
 * server's loop spends most of a pass on its sockets and drains once, at
 * the pass's end, whatever landed meanwhile: --pass-ns has the loop spend
 * that long (spinning on the clock, untimed, touching no job or ring)
 * before each drain, so completions pile up as they do there.
 *
 * pingpong: the yardstick. The two threads pass one cache line back and
 * forth; "busy ns per job" is one one-way transfer. The host places this
 * guest's vCPUs and may move them between cores that share a cache and
 * cores that do not, so this cost, and every ring row with it, can change
 * several-fold from one minute to the next. So every two-thread run is
 * bracketed by a short pingpong just before and just after it, after one
 * discarded as a warm-up (yardstick_before_ns, yardstick_after_ns): a run
 * whose two differ much saw the vCPUs move.
 *
 * Placement: the loop is pinned to the first CPU this process may use and
 * every second thread to the second, so the two never share a CPU (left to
 * the scheduler, a new thread starts beside its creator, and two spinning
 * threads would time-share one CPU until the balancer moved one: that
 * measures the scheduler, not the lines). Each thread reports the CPU it
 * ran on.
 *
 * Busy time: the loop's monotonic clock around each drain that returned
 * jobs and around each pass's handling and resubmission, less one clock
 * read per timed interval (the least cost of a read, calibrated at start).
 * Drains that found nothing are idle polls, counted but not timed, so a
 * worker slower than the loop does not inflate the loop's figure. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
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

#define RESPONSE_MAX 960 /* 15 lines */
#define REQUEST_LINES_MAX 64

struct job {
    /* The loop's line: the worker never touches it. */
    _Alignas(CACHE_LINE) struct job *next_free;
    uint64_t ticket; /* the loop's copy of this use's ticket */
    /* The request: line i holds ticket + i. */
    _Alignas(CACHE_LINE) uint64_t request[REQUEST_LINES_MAX][CACHE_LINE / sizeof(uint64_t)];
    /* The response, written by whoever serves the job; its length shares
     * the first line with its first bytes (which are the ticket). */
    _Alignas(CACHE_LINE) uint32_t len;
    char bytes[RESPONSE_MAX];
};

struct floor_options {
    enum { MODE_INLINE, MODE_RING, MODE_BATCHED, MODE_PINGPONG } mode;
    unsigned window;        /* jobs in flight (the rings' capacity) */
    unsigned batch;         /* the most jobs a pass handles */
    long pass_ns;           /* the loop's other work per pass (untimed), before each drain */
    unsigned publish_every; /* batched: jobs per publish on each side */
    unsigned response;      /* bytes */
    unsigned request_lines;
    long worker_ns;         /* the worker's own work per job (spun) */
    double seconds;
    double yardstick_ms;
};

struct result {
    uint64_t jobs, passes, timed, idle_polls, busy_ns, loop_cpu_ns, worker_cpu_ns, wall_ns;
    int worker_ran_on;
};

static char template_bytes[RESPONSE_MAX];
static char sink[64 * 1024]; /* where responses are copied out (a socket buffer's stand-in) */
static size_t sink_at;
static int loop_cpu = -1, worker_cpu = -1; /* pin_setup */

static uint64_t now_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The least cost of one monotonic clock read, ns: what each timed interval
 * carries beyond the work it times (the end of the first read and the start
 * of the second). The least over many batches, so a preempted batch does
 * not count. */
static double clock_read_ns(void)
{
    double best = 1e9;
    for (int b = 0; b < 64; b++) {
        uint64_t t0 = now_ns(CLOCK_MONOTONIC), last = t0;
        for (int i = 0; i < 256; i++)
            last = now_ns(CLOCK_MONOTONIC);
        double per = (double)(last - t0) / 256;
        if (per < best)
            best = per;
    }
    return best;
}

/* The first two CPUs this process may use; the calling (loop) thread is
 * pinned to the first. -1 if there are not two or pinning fails. */
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

/* Called first by every second thread: pin it to the second CPU. The CPU it
 * then runs on, or -1. */
static int pin_worker(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(worker_cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
        return -1;
    return sched_getcpu();
}

/* ---- the per-job work, the same in every mode ---- */

static void write_request(struct job *job, uint64_t ticket, unsigned lines)
{
    job->ticket = ticket;
    for (unsigned i = 0; i < lines; i++)
        job->request[i][0] = ticket + i;
}

/* Serve the job: read the request back and write the response. -1 if the
 * request is not one use's whole. */
static int serve(struct job *job, const struct floor_options *opt)
{
    uint64_t ticket = job->request[0][0];
    for (unsigned i = 1; i < opt->request_lines; i++)
        if (job->request[i][0] != ticket + i)
            return -1;
    if (opt->worker_ns > 0) {
        uint64_t until = now_ns(CLOCK_MONOTONIC) + (uint64_t)opt->worker_ns;
        while (now_ns(CLOCK_MONOTONIC) < until)
            cpu_relax();
    }
    memcpy(job->bytes, template_bytes, opt->response);
    memcpy(job->bytes, &ticket, sizeof ticket);
    job->len = opt->response;
    return 0;
}

/* Copy the response out. -1 unless it is this use's (its ticket). */
static int send_response(struct job *job, unsigned len)
{
    uint32_t n = job->len;
    uint64_t ticket;
    if (n != len)
        return -1;
    if (sink_at + n > sizeof sink)
        sink_at = 0;
    memcpy(sink + sink_at, job->bytes, n);
    memcpy(&ticket, sink + sink_at, sizeof ticket);
    sink_at += n;
    return ticket == job->ticket ? 0 : -1;
}

static void push_free(struct job **list, struct job *job)
{
    job->next_free = *list;
    *list = job;
}

static struct job *pop_free(struct job **list)
{
    struct job *job = *list;
    *list = job->next_free;
    return job;
}

/* ---- inline ---- */

static int run_inline(const struct floor_options *opt, struct job *jobs, struct result *r)
{
    uint64_t ticket = 0;
    unsigned next = 0;
    struct job *batch[opt->batch];
    uint64_t start = now_ns(CLOCK_MONOTONIC), end = start + (uint64_t)(opt->seconds * 1e9);
    uint64_t cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    while (now_ns(CLOCK_MONOTONIC) < end) {
        uint64_t t0 = now_ns(CLOCK_MONOTONIC);
        for (unsigned i = 0; i < opt->batch; i++) {
            batch[i] = &jobs[next];
            next = (next + 1) % opt->window;
            write_request(batch[i], ++ticket, opt->request_lines);
            if (serve(batch[i], opt) != 0)
                return -1;
        }
        /* As the ring modes: send each, free it, take it back for its next use. */
        struct job *free_list = NULL;
        for (unsigned i = 0; i < opt->batch; i++) {
            if (send_response(batch[i], opt->response) != 0)
                return -1;
            push_free(&free_list, batch[i]);
        }
        for (unsigned i = 0; i < opt->batch; i++)
            batch[i] = pop_free(&free_list);
        r->busy_ns += now_ns(CLOCK_MONOTONIC) - t0;
        r->timed++;
        r->passes++;
        r->jobs += opt->batch;
    }
    r->loop_cpu_ns = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    r->wall_ns = now_ns(CLOCK_MONOTONIC) - start;
    return 0;
}

/* ---- the two-thread modes: one loop, two transports ---- */

/* What the loop does with a transport (ring.c's ops, or the batched rings). */
struct transport {
    int (*submit)(void *ctx, struct job *job); /* 0, or -1 */
    void (*end_pass)(void *ctx);               /* after a pass's submits */
    size_t (*drain)(void *ctx, struct job **out, size_t max);
    void *ctx;
};

struct worker {
    const struct floor_options *opt;
    atomic_bool stop;
    int failed;
    int ran_on;
};

/* A worker thread's start: its name and its CPU. False (and failed set) if
 * it could not be pinned. */
static bool worker_start(struct worker *w)
{
    pthread_setname_np(pthread_self(), "floor-worker");
    if ((w->ran_on = pin_worker()) < 0) {
        w->failed = 1;
        return false;
    }
    return true;
}

/* ring.c, as the server drives it */
struct ring_ctx {
    struct worker w; /* first: the worker thread gets a struct worker * */
    const struct handoff_ops *ops;
    struct handoff *h;
};

static int ring_submit(void *ctx, struct job *job)
{
    struct ring_ctx *c = ctx;
    return c->ops->submit(c->h, 0, job) == HANDOFF_OK ? 0 : -1;
}

static void ring_end_pass(void *ctx)
{
    struct ring_ctx *c = ctx;
    c->ops->flush(c->h);
}

static size_t ring_drain(void *ctx, struct job **out, size_t max)
{
    struct ring_ctx *c = ctx;
    return c->ops->drain(c->h, false, out, max);
}

static void *ring_thread(void *p)
{
    struct ring_ctx *c = p;
    if (!worker_start(&c->w))
        return NULL;
    for (;;) {
        struct job *job;
        while (!(job = c->ops->try_take(c->h, 0)))
            if (atomic_load_explicit(&c->w.stop, memory_order_relaxed))
                return NULL;
        if (serve(job, c->w.opt) != 0 || c->ops->complete(c->h, 0, job) != 0) {
            c->w.failed = 1;
            return NULL;
        }
    }
}

/* The batched rings: each side stages, and publishes per K jobs. */
struct batched_ctx {
    struct worker w;
    struct spsc_ring req, done;                     /* loop -> worker, worker -> loop */
    _Alignas(CACHE_LINE) atomic_int worker_parked; /* the handshake's flags: never 1 here */
    _Alignas(CACHE_LINE) atomic_int loop_parked;
    _Alignas(CACHE_LINE) unsigned staged, pending; /* the loop's */
    int woke;                                      /* the loop's; must stay 0 */
};

/* A publish as the park handshake needs it: the tail, a seq_cst fence (F1
 * or F3's place), a look at the other side's flag. */
static void publish(struct spsc_ring *r, unsigned staged, atomic_int *other_parked, int *woke)
{
    spsc_publish(r, staged);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(other_parked, memory_order_relaxed))
        (*woke)++; /* never: nobody parks in this driver */
}

static int batched_submit(void *ctx, struct job *job)
{
    struct batched_ctx *c = ctx;
    if (!spsc_stage(&c->req, &c->staged, job))
        return -1; /* the window never exceeds the capacity */
    if (++c->pending >= c->w.opt->publish_every) {
        publish(&c->req, c->staged, &c->worker_parked, &c->woke);
        c->pending = 0;
    }
    return 0;
}

static void batched_end_pass(void *ctx)
{
    struct batched_ctx *c = ctx;
    if (c->pending) {
        publish(&c->req, c->staged, &c->worker_parked, &c->woke);
        c->pending = 0;
    }
}

static size_t batched_drain(void *ctx, struct job **out, size_t max)
{
    struct batched_ctx *c = ctx;
    size_t n = 0;
    struct job *job;
    while (n < max && (job = spsc_pop(&c->done)) != NULL)
        out[n++] = job;
    return n;
}

static void *batched_worker(void *p)
{
    struct batched_ctx *c = p;
    if (!worker_start(&c->w))
        return NULL;
    unsigned staged = spsc_staged_start(&c->done), pending = 0;
    int woke = 0;
    while (!atomic_load_explicit(&c->w.stop, memory_order_relaxed)) {
        struct job *job = spsc_pop(&c->req);
        if (!job) {
            if (pending) { /* nothing more now: what is done goes back */
                publish(&c->done, staged, &c->loop_parked, &woke);
                pending = 0;
            }
            continue;
        }
        if (serve(job, c->w.opt) != 0 || !spsc_stage(&c->done, &staged, job)) {
            c->w.failed = 1;
            return NULL;
        }
        if (++pending >= c->w.opt->publish_every) {
            publish(&c->done, staged, &c->loop_parked, &woke);
            pending = 0;
        }
    }
    c->w.failed |= woke != 0;
    return NULL;
}

/* The loop's side, for either transport: keep the window in flight; per
 * pass spend --pass-ns elsewhere, drain up to a batch, send each response,
 * resubmit each job with a new request. */
static int stream(const struct floor_options *opt, const struct transport *t, struct job *jobs,
                  struct result *r)
{
    uint64_t ticket = 0;
    for (unsigned i = 0; i < opt->window; i++) {
        write_request(&jobs[i], ++ticket, opt->request_lines);
        if (t->submit(t->ctx, &jobs[i]) != 0)
            return -1;
    }
    t->end_pass(t->ctx);
    struct job *done[opt->batch];
    uint64_t start = now_ns(CLOCK_MONOTONIC), end = start + (uint64_t)(opt->seconds * 1e9);
    uint64_t cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    while (now_ns(CLOCK_MONOTONIC) < end) {
        if (opt->pass_ns > 0) { /* the pass's socket work, as far as the rings can tell */
            uint64_t until = now_ns(CLOCK_MONOTONIC) + (uint64_t)opt->pass_ns;
            while (now_ns(CLOCK_MONOTONIC) < until)
                cpu_relax();
        }
        size_t n = 0;
        do {
            uint64_t t0 = now_ns(CLOCK_MONOTONIC);
            size_t k = t->drain(t->ctx, done + n, opt->batch - n);
            if (k == 0) {
                r->idle_polls++;
                continue;
            }
            r->busy_ns += now_ns(CLOCK_MONOTONIC) - t0;
            r->timed++;
            n += k;
        } while (n == 0 && now_ns(CLOCK_MONOTONIC) < end);
        if (n == 0)
            break;
        uint64_t t0 = now_ns(CLOCK_MONOTONIC);
        struct job *free_list = NULL;
        for (size_t i = 0; i < n; i++) {
            if (send_response(done[i], opt->response) != 0)
                return -1;
            push_free(&free_list, done[i]);
        }
        for (size_t i = 0; i < n; i++) {
            struct job *job = pop_free(&free_list);
            write_request(job, ++ticket, opt->request_lines);
            if (t->submit(t->ctx, job) != 0)
                return -1;
        }
        t->end_pass(t->ctx);
        r->busy_ns += now_ns(CLOCK_MONOTONIC) - t0;
        r->timed++;
        r->passes++;
        r->jobs += n;
    }
    r->loop_cpu_ns = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    r->wall_ns = now_ns(CLOCK_MONOTONIC) - start;
    return 0;
}

/* stream() against a worker thread running worker_main(ctx), whose struct
 * worker is w: the worker's CPU time over the run, then stop it (and, if
 * given, before_join(ctx)) and join it. The stream's result, or -1 if the
 * thread could not start. */
static int with_worker(const struct floor_options *opt, const struct transport *t, struct worker *w,
                       void *(*worker_main)(void *), void (*before_join)(void *), struct job *jobs,
                       struct result *r)
{
    pthread_t thread;
    if (pthread_create(&thread, NULL, worker_main, t->ctx) != 0)
        return -1;
    clockid_t worker_clock;
    bool have_clock = pthread_getcpuclockid(thread, &worker_clock) == 0;
    uint64_t wcpu0 = have_clock ? now_ns(worker_clock) : 0;
    int rc = stream(opt, t, jobs, r);
    if (have_clock)
        r->worker_cpu_ns = now_ns(worker_clock) - wcpu0;
    atomic_store(&w->stop, true);
    if (before_join)
        before_join(t->ctx);
    pthread_join(thread, NULL);
    r->worker_ran_on = w->ran_on;
    return rc;
}

static void ring_shutdown(void *ctx)
{
    struct ring_ctx *c = ctx;
    c->ops->shutdown(c->h);
}

static int run_ring(const struct floor_options *opt, struct job *jobs, struct result *r)
{
    struct ring_ctx c = {.w = {.opt = opt}, .ops = handoff_find("ring")};
    struct handoff_config cfg = {.threads = 1, .capacity = opt->window, .spin_iters = -1};
    if (!c.ops || !(c.h = c.ops->create(&cfg))) {
        fprintf(stderr, "loop_floor: ring create: %s\n", strerror(errno));
        return -1;
    }
    struct transport t = {ring_submit, ring_end_pass, ring_drain, &c};
    int rc = with_worker(opt, &t, &c.w, ring_thread, ring_shutdown, jobs, r);
    c.ops->destroy(c.h);
    return rc || c.w.failed ? -1 : 0;
}

static int run_batched(const struct floor_options *opt, struct job *jobs, struct result *r)
{
    struct batched_ctx *c = aligned_zalloc(sizeof *c);
    int rc = -1;
    if (c && spsc_init(&c->req, opt->window) == 0 && spsc_init(&c->done, opt->window) == 0) {
        c->w.opt = opt;
        c->staged = spsc_staged_start(&c->req);
        struct transport t = {batched_submit, batched_end_pass, batched_drain, c};
        rc = with_worker(opt, &t, &c->w, batched_worker, NULL, jobs, r);
        rc = rc || c->w.failed || c->woke ? -1 : 0;
    }
    if (c) {
        spsc_destroy(&c->req); /* free(NULL) for a ring never initialised */
        spsc_destroy(&c->done);
        free(c);
    }
    return rc;
}

/* ---- pingpong: one line passed back and forth ---- */

struct pingpong {
    _Alignas(CACHE_LINE) atomic_ulong ball; /* odd: the worker's turn; even: the loop's */
    _Alignas(CACHE_LINE) atomic_bool stop;
    atomic_int ran_on; /* 0 until the worker has pinned itself; -1 if it could not */
};

static void *pingpong_worker(void *p)
{
    struct pingpong *pp = p;
    pthread_setname_np(pthread_self(), "floor-worker");
    int cpu = pin_worker();
    atomic_store(&pp->ran_on, cpu < 0 ? -1 : cpu + 1);
    if (cpu < 0)
        return NULL;
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
    if (!pp)
        return -1;
    if (pthread_create(&thread, NULL, pingpong_worker, pp) != 0) {
        free(pp);
        return -1;
    }
    clockid_t worker_clock;
    bool have_clock = pthread_getcpuclockid(thread, &worker_clock) == 0;
    uint64_t start = now_ns(CLOCK_MONOTONIC), end = start + (uint64_t)(opt->seconds * 1e9);
    uint64_t cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID), wcpu0 = have_clock ? now_ns(worker_clock) : 0;
    unsigned long v = 0;
    bool alive = true;
    while (alive && now_ns(CLOCK_MONOTONIC) < end) {
        for (int i = 0; i < 1024; i++) { /* round trips between two clock reads */
            atomic_store_explicit(&pp->ball, v + 1, memory_order_release);
            uint64_t spins = 0;
            while ((v = atomic_load_explicit(&pp->ball, memory_order_acquire)) & 1)
                if (++spins > (1u << 20) && atomic_load(&pp->ran_on) < 0) { /* the worker could not pin: gone */
                    alive = false;
                    break;
                }
            if (!alive)
                break;
        }
        r->jobs += 2048; /* one-way transfers */
    }
    r->wall_ns = r->busy_ns = now_ns(CLOCK_MONOTONIC) - start;
    r->passes = r->jobs; /* one transfer a "pass": jobs_per_pass 1 */
    r->loop_cpu_ns = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    if (have_clock)
        r->worker_cpu_ns = now_ns(worker_clock) - wcpu0;
    atomic_store(&pp->stop, true);
    pthread_join(thread, NULL);
    int ran_on = atomic_load(&pp->ran_on);
    r->worker_ran_on = ran_on > 0 ? ran_on - 1 : -1;
    int rc = alive && ran_on > 0 && v == r->jobs ? 0 : -1;
    free(pp);
    return rc;
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
    fprintf(f, "usage: loop_floor --mode inline|ring|batched|pingpong [--window N] [--batch B]\n"
               "                  [--pass-ns NS] [--publish-every K] [--response BYTES]\n"
               "                  [--request-lines N] [--worker-ns NS] [--seconds S]\n"
               "                  [--yardstick-ms MS]\n"
               "Prints the loop thread's busy ns per job as JSON (see the comment atop loop_floor.c).\n");
}

int main(int argc, char **argv)
{
    struct floor_options opt = {.window = 1024, .batch = 16, .response = 131, .request_lines = 1,
                                .seconds = 1.0, .yardstick_ms = 30};
    const char *mode = NULL;
    static const struct option longopts[] = {
        {"mode", required_argument, 0, 'm'},          {"window", required_argument, 0, 'w'},
        {"batch", required_argument, 0, 'b'},         {"pass-ns", required_argument, 0, 'p'},
        {"publish-every", required_argument, 0, 'k'}, {"response", required_argument, 0, 'r'},
        {"request-lines", required_argument, 0, 'q'}, {"worker-ns", required_argument, 0, 'n'},
        {"seconds", required_argument, 0, 's'},       {"yardstick-ms", required_argument, 0, 'y'},
        {"help", no_argument, 0, 'h'},                {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': mode = optarg; break;
        case 'w': opt.window = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'b': opt.batch = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'p': opt.pass_ns = strtol(optarg, NULL, 10); break;
        case 'k': opt.publish_every = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'r': opt.response = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'q': opt.request_lines = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'n': opt.worker_ns = strtol(optarg, NULL, 10); break;
        case 's': opt.seconds = strtod(optarg, NULL); break;
        case 'y': opt.yardstick_ms = strtod(optarg, NULL); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    static const char *const modes[] = {"inline", "ring", "batched", "pingpong"};
    int m = -1;
    for (int i = 0; mode && i < 4; i++)
        if (strcmp(mode, modes[i]) == 0)
            m = i;
    if (m < 0 || optind != argc) {
        usage(stderr);
        return 2;
    }
    opt.mode = m;
    if (opt.publish_every == 0)
        opt.publish_every = opt.batch;
    if (opt.window < 2 || opt.window > 65536 || (opt.window & (opt.window - 1)) || opt.batch < 1 ||
        opt.batch > opt.window || opt.seconds > 3600 || opt.yardstick_ms > 60000 ||
        opt.response < sizeof(uint64_t) || opt.response > RESPONSE_MAX || opt.request_lines < 1 ||
        opt.request_lines > REQUEST_LINES_MAX || !(opt.seconds > 0) || !(opt.yardstick_ms > 0)) {
        fprintf(stderr, "loop_floor: --window a power of two from 2 to 65536, 1 <= --batch <= window, "
                        "%zu <= --response <= %d, 1 <= --request-lines <= %d, 0 < --seconds <= 3600, "
                        "0 < --yardstick-ms <= 60000\n", sizeof(uint64_t), RESPONSE_MAX, REQUEST_LINES_MAX);
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
    double read_ns = clock_read_ns();
    bool bracket = opt.mode == MODE_RING || opt.mode == MODE_BATCHED;
    if (bracket)
        yardstick_ns(&opt); /* a warm-up: an idle vCPU answers slowly at first */
    double yard_before = bracket ? yardstick_ns(&opt) : 0;
    struct result r = {.worker_ran_on = -1};
    int rc = yard_before < 0             ? -1
             : opt.mode == MODE_RING     ? run_ring(&opt, jobs, &r)
             : opt.mode == MODE_BATCHED  ? run_batched(&opt, jobs, &r)
             : opt.mode == MODE_PINGPONG ? run_pingpong(&opt, &r)
                                         : run_inline(&opt, jobs, &r);
    double yard_after = bracket && rc == 0 ? yardstick_ns(&opt) : 0;
    free(jobs);
    if (rc != 0 || r.jobs == 0 || yard_before < 0 || yard_after < 0) {
        fprintf(stderr, "loop_floor: %s run failed (a response or request not its use's, a thread "
                        "that could not be pinned, or no job ran)\n", mode);
        return 1;
    }
    double busy = opt.mode == MODE_PINGPONG ? (double)r.busy_ns : (double)r.busy_ns - read_ns * (double)r.timed;
    printf("{\"mode\": \"%s\", \"window\": %u, \"batch\": %u, \"pass_ns\": %ld, \"publish_every\": %u, "
           "\"response\": %u, \"request_lines\": %u, \"worker_ns\": %ld, \"jobs\": %llu, \"passes\": %llu, "
           "\"timed\": %llu, \"idle_polls\": %llu, \"clock_read_ns\": %.2f, \"busy_ns_per_job\": %.2f, "
           "\"busy_raw_ns_per_job\": %.2f, "
           "\"loop_cpu_ns_per_job\": %.2f, \"worker_cpu_ns_per_job\": %.2f, \"wall_ns_per_job\": %.2f, "
           "\"jobs_per_pass\": %.2f, \"yardstick_before_ns\": %.2f, \"yardstick_after_ns\": %.2f, "
           "\"loop_cpu\": %d, \"worker_cpu\": %d}\n",
           mode, opt.window, opt.batch, opt.pass_ns,
           opt.mode == MODE_BATCHED ? opt.publish_every : 1, opt.response, opt.request_lines, opt.worker_ns,
           (unsigned long long)r.jobs, (unsigned long long)r.passes, (unsigned long long)r.timed,
           (unsigned long long)r.idle_polls, read_ns, busy / (double)r.jobs, (double)r.busy_ns / (double)r.jobs,
           (double)r.loop_cpu_ns / (double)r.jobs, (double)r.worker_cpu_ns / (double)r.jobs,
           (double)r.wall_ns / (double)r.jobs, (double)r.jobs / (double)r.passes, yard_before, yard_after,
           opt.mode == MODE_INLINE ? sched_getcpu() : loop_cpu, r.worker_ran_on);
    return 0;
}

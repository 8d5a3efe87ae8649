/* stress.c — every handoff backend under a loop thread and N workers, checked.
 *
 *   stress -b BACKEND [-w WORKERS] [-n JOBS] [-c CAPACITY] [-s SPIN_ITERS]
 *          [-p PAUSE_PERCENT] [-t WATCHDOG_MS] [-r SEED]
 *
 * The "loop" thread drives the handoff exactly as the server does: submit (at
 * most `capacity` outstanding per worker), drain(fd_ready=false) every pass
 * when ops->polled, and when it decides to wait: before_sleep, epoll_wait
 * (timeout 0 if before_sleep said completions are waiting, else forever),
 * after_sleep, drain(fd_ready=true) for the handoff's event. It waits forever
 * on purpose: a lost wakeup then hangs the loop instead of being papered over
 * by a timeout, and the watchdog turns the hang into a failure.
 *
 * Checks (exit 1 with a message on the first violation):
 *   - every job is taken once and completed once (per-job state machine),
 *   - each worker takes its jobs in submission order, and the loop drains each
 *     worker's completions in that same order (so nothing is lost or doubled),
 *   - the worker's write to the job is visible to the loop after drain
 *     (publication through the handoff; TSan checks the happens-before),
 *   - totals and the handoff's own counters agree with what happened,
 *   - progress: no drained job for WATCHDOG_MS (default 1000) = lost wakeup,
 *   - the registry: ring first, handoff_find by name, bad capacity refused.
 * Random pauses on both sides (short spins, and sleeps long enough for the
 * other side to park) make both the spinning and the parking paths run. */
#include "../handoff.h"
#include "../../lib/clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

enum job_state { JOB_FREE, JOB_SUBMITTED, JOB_TAKEN, JOB_COMPLETED };

struct job {
    uint64_t seq;        /* per-worker submission number */
    unsigned thread;
    enum job_state state; /* owned by whoever holds the job */
    uint64_t result;     /* written by the worker, checked by the loop */
    struct job *next_free;
};

struct options {
    const struct handoff_ops *ops;
    unsigned threads, capacity;
    uint64_t jobs;
    long spin_iters;
    long loop_spin_ns;
    bool check_settle;
    unsigned pause_percent;
    long watchdog_ms;
    uint64_t seed;
};

static struct options opt = {
    .threads = 1, .capacity = 8, .jobs = 200000, .spin_iters = -1, .loop_spin_ns = -1,
    .pause_percent = 5, .watchdog_ms = 1000, .seed = 1,
};

static struct handoff *h;
static atomic_uint_fast64_t progress; /* jobs drained so far (watchdog reads it) */
static atomic_bool finished;

#define HANDOFF_TAG 0x68616e64u

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "stress[%s w=%u]: FAIL: ", opt.ops ? opt.ops->name : "?", opt.threads);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    _exit(1);
}

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static uint64_t job_result(const struct job *j) { return j->seq * 0x9e3779b97f4a7c15ull + j->thread; }

/* With probability pause_percent: mostly a short busy pause (the other side
 * spins through it), sometimes a sleep long enough for it to park. */
static void random_pause(uint64_t *rng)
{
    uint64_t r = xorshift(rng);
    if (r % 100 >= opt.pause_percent)
        return;
    if ((r >> 8) % 8 == 0) {
        struct timespec ts = {0, (long)(20000 + (r >> 16) % 80000)}; /* 20-100 us */
        nanosleep(&ts, NULL);
    } else {
        for (volatile unsigned i = 0, n = (unsigned)((r >> 16) % 2000); i < n; i++) {
        }
    }
}

/* ------------------------------------------------------------------ worker */

struct thread_arg {
    unsigned index;
    uint64_t taken;
    pthread_t thread;
};

static void *thread_main(void *p)
{
    struct thread_arg *wa = p;
    uint64_t rng = opt.seed * 7919 + wa->index + 1;
    uint64_t expect = 0;
    for (;;) {
        struct job *j = NULL;
        /* Mix try_take (the pool's GIL-held poll) with take. */
        if (opt.ops->try_take && (xorshift(&rng) & 1))
            j = opt.ops->try_take(h, wa->index);
        if (!j)
            j = opt.ops->take(h, wa->index);
        if (!j)
            break;
        if (j->thread != wa->index)
            fail("worker %u took a job for worker %u", wa->index, j->thread);
        if (j->state != JOB_SUBMITTED)
            fail("worker %u took job seq %llu in state %d (taken twice?)", wa->index,
                 (unsigned long long)j->seq, (int)j->state);
        if (j->seq != expect)
            fail("worker %u took seq %llu, expected %llu (order/loss)", wa->index,
                 (unsigned long long)j->seq, (unsigned long long)expect);
        expect++;
        j->state = JOB_TAKEN;
        random_pause(&rng);
        j->result = job_result(j);
        j->state = JOB_COMPLETED;
        if (opt.ops->complete(h, wa->index, j) != 0)
            fail("complete failed: %s", strerror(errno));
        wa->taken++;
    }
    return NULL;
}

/* ---------------------------------------------------------------- watchdog */

/* -S: the adaptive budgets, sampled every 10 ms by the watchdog. */
#define MAX_SAMPLES 4096
static uint64_t budget_samples[MAX_SAMPLES][2]; /* worker 0's, the loop's */
static unsigned n_samples;

static void *watchdog_main(void *p)
{
    (void)p;
    uint64_t last = atomic_load(&progress);
    long quiet_ms = 0;
    while (!atomic_load(&finished)) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
        if (n_samples < MAX_SAMPLES) {
            budget_samples[n_samples][0] = counter_get(&h->thread[0].spin_budget_ns);
            budget_samples[n_samples][1] = counter_get(&h->loop.loop_spin_budget_ns);
            n_samples++;
        }
        uint64_t now = atomic_load(&progress);
        if (now != last) {
            last = now;
            quiet_ms = 0;
        } else if ((quiet_ms += 10) >= opt.watchdog_ms) {
            fail("no progress for %ld ms at %llu of %llu jobs drained: lost wakeup", quiet_ms,
                 (unsigned long long)now, (unsigned long long)opt.jobs);
        }
    }
    return NULL;
}

/* -------------------------------------------------------------------- loop */

struct loop_state {
    struct job *pool;           /* workers * capacity jobs */
    struct job **free_list;     /* per worker: its free jobs (so outstanding <= capacity) */
    uint64_t *next_seq;         /* per worker: next submission number */
    uint64_t *next_done;        /* per worker: next completion number expected */
    unsigned *outstanding;      /* per worker */
    unsigned total_outstanding;
    uint64_t submitted, drained, full;
    uint64_t rng;
    unsigned rr;                /* round-robin cursor */
};

static void accept_completion(struct loop_state *s, struct job *j)
{
    unsigned w = j->thread;
    if (w >= opt.threads)
        fail("drained a job with worker %u", w);
    if (j->state != JOB_COMPLETED)
        fail("drained job seq %llu of worker %u in state %d", (unsigned long long)j->seq, w, (int)j->state);
    if (j->seq != s->next_done[w])
        fail("worker %u completion seq %llu, expected %llu (lost, doubled or reordered)", w,
             (unsigned long long)j->seq, (unsigned long long)s->next_done[w]);
    if (j->result != job_result(j))
        fail("job seq %llu: result not visible after drain", (unsigned long long)j->seq);
    s->next_done[w]++;
    s->outstanding[w]--;
    s->total_outstanding--;
    s->drained++;
    j->state = JOB_FREE;
    j->next_free = s->free_list[w];
    s->free_list[w] = j;
}

static void drain_all(struct loop_state *s, bool fd_ready)
{
    struct job *out[16];
    size_t n;
    do {
        /* Vary max so the "cut short by max" path runs too. */
        size_t max = 1 + xorshift(&s->rng) % 16;
        n = opt.ops->drain(h, fd_ready, out, max);
        /* A continuation call may repeat fd_ready or not: both must work. */
        fd_ready = fd_ready && (xorshift(&s->rng) & 1);
        if (n > max)
            fail("drain returned %zu > max %zu", n, max);
        for (size_t i = 0; i < n; i++)
            accept_completion(s, out[i]);
        if (n == max)
            continue;
        break;
    } while (1);
    atomic_store(&progress, s->drained);
}

/* Submit one job to worker w if it has room; false if it has none. */
static bool submit_one(struct loop_state *s, unsigned w)
{
    struct job *j = s->free_list[w];
    if (!j)
        return false;
    j->seq = s->next_seq[w];
    j->thread = w;
    j->state = JOB_SUBMITTED;
    j->result = 0;
    int r = opt.ops->submit(h, w, j);
    if (r == HANDOFF_ERROR)
        fail("submit error: %s", strerror(errno));
    if (r == HANDOFF_FULL) { /* allowed; nothing was queued */
        j->state = JOB_FREE;
        s->full++;
        return false;
    }
    s->free_list[w] = j->next_free;
    s->next_seq[w]++;
    s->outstanding[w]++;
    s->total_outstanding++;
    s->submitted++;
    return true;
}

static void wait_for_completions(struct loop_state *s, int epfd)
{
    struct epoll_event ev[4];
    /* As core/conn/loop.c: a hold (a sleep, then an epoll_wait that does not
     * wait) or a doze is a bounded wait nobody is asked to end. */
    uint64_t hold = opt.ops->hold ? opt.ops->hold(h, s->total_outstanding) : 0;
    uint64_t doze = !hold && opt.ops->doze ? opt.ops->doze(h, s->total_outstanding) : 0;
    bool waiting = !hold && !doze && opt.ops->before_sleep(h, s->total_outstanding);
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(hold ? hold : doze)};
    if (hold)
        nanosleep(&ts, NULL);
    int n;
    do
        n = doze ? epoll_pwait2(epfd, ev, 4, &ts, NULL) : epoll_wait(epfd, ev, 4, waiting || hold ? 0 : -1);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        fail("epoll_wait: %s", strerror(errno));
    if (!hold && !doze)
        opt.ops->after_sleep(h);
    bool ready = false;
    for (int i = 0; i < n; i++)
        if (ev[i].data.u64 == HANDOFF_TAG)
            ready = true;
        else
            fail("epoll event with unknown tag");
    if (ready || opt.ops->polled)
        drain_all(s, ready);
}

static void run_loop(struct loop_state *s)
{
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0 || opt.ops->watch(h, epfd, HANDOFF_TAG) < 0)
        fail("epoll/watch: %s", strerror(errno));
    while (s->drained < opt.jobs) {
        /* A burst of submits, spread over workers (round-robin or random). */
        unsigned burst = 1 + (unsigned)(xorshift(&s->rng) % (2 * opt.capacity));
        for (unsigned i = 0; i < burst && s->submitted < opt.jobs; i++) {
            unsigned w = (xorshift(&s->rng) & 1) ? s->rr++ % opt.threads
                                                 : (unsigned)(xorshift(&s->rng) % opt.threads);
            submit_one(s, w);
        }
        /* End the batch as the server's pass does (flush), but not always:
         * a quarter of the time the owed wake-ups are left to before_sleep,
         * which must pay them before the loop can block. */
        if (opt.ops->flush && xorshift(&s->rng) % 4 != 0)
            opt.ops->flush(h);
        random_pause(&s->rng);
        if (opt.ops->polled)
            drain_all(s, false);
        /* Block when there is nothing to submit, and sometimes anyway (as a
         * server does while it waits for the network). Never with nothing
         * outstanding: only the handoff can wake this epoll. */
        bool nothing_to_submit = s->submitted == opt.jobs;
        if (!nothing_to_submit) {
            nothing_to_submit = true;
            for (unsigned w = 0; w < opt.threads; w++)
                if (s->free_list[w])
                    nothing_to_submit = false;
        }
        if (s->total_outstanding > 0 && (nothing_to_submit || xorshift(&s->rng) % 4 == 0))
            wait_for_completions(s, epfd);
    }
    close(epfd);
}

/* -------------------------------------------------------------------- main */

static void usage(void)
{
    fprintf(stderr, "usage: stress -b BACKEND [-w WORKERS] [-n JOBS] [-c CAPACITY] [-s SPIN_ITERS]\n"
                    "              [-p PAUSE_PERCENT] [-t WATCHDOG_MS] [-r SEED] [-l LOOP_SPIN_NS] [-S]\n"
                    "  -s/-l -1: the ring's adaptive budgets (default); -S: require them to settle\nbackends:");
    for (const struct handoff_ops *const *b = handoff_backends; *b; b++)
        fprintf(stderr, " %s", (*b)->name);
    fputc('\n', stderr);
    exit(2);
}

static void parse_args(int argc, char **argv)
{
    int c;
    while ((c = getopt(argc, argv, "b:w:n:c:s:p:t:r:l:S")) != -1) {
        switch (c) {
        case 'b': opt.ops = handoff_find(optarg); if (!opt.ops) usage(); break;
        case 'w': opt.threads = (unsigned)strtoul(optarg, NULL, 0); break;
        case 'n': opt.jobs = strtoull(optarg, NULL, 0); break;
        case 'c': opt.capacity = (unsigned)strtoul(optarg, NULL, 0); break;
        case 's': opt.spin_iters = strtol(optarg, NULL, 0); break;
        case 'l': opt.loop_spin_ns = strtol(optarg, NULL, 0); break;
        case 'S': opt.check_settle = true; break;
        case 'p': opt.pause_percent = (unsigned)strtoul(optarg, NULL, 0); break;
        case 't': opt.watchdog_ms = strtol(optarg, NULL, 0); break;
        case 'r': opt.seed = strtoull(optarg, NULL, 0) | 1; break;
        default: usage();
        }
    }
    if (!opt.ops || opt.threads < 1)
        usage();
}

static void check_counters(const struct loop_state *s, const struct thread_arg *wa)
{
    uint64_t taken = 0, completed = 0, counted_taken = 0;
    for (unsigned w = 0; w < opt.threads; w++) {
        taken += wa[w].taken;
        counted_taken += counter_get(&h->thread[w].taken);
        completed += counter_get(&h->thread[w].completed);
    }
    if (s->submitted != opt.jobs || s->drained != opt.jobs || taken != opt.jobs)
        fail("totals: submitted %llu drained %llu taken %llu of %llu", (unsigned long long)s->submitted,
             (unsigned long long)s->drained, (unsigned long long)taken, (unsigned long long)opt.jobs);
    if (counter_get(&h->loop.submitted) != opt.jobs || counter_get(&h->loop.drained) != opt.jobs ||
        counted_taken != opt.jobs || completed != opt.jobs || counter_get(&h->loop.full) != s->full)
        fail("handoff counters disagree: submitted %llu drained %llu taken %llu completed %llu full %llu/%llu",
             (unsigned long long)counter_get(&h->loop.submitted), (unsigned long long)counter_get(&h->loop.drained),
             (unsigned long long)counted_taken, (unsigned long long)completed,
             (unsigned long long)counter_get(&h->loop.full), (unsigned long long)s->full);
    if (counter_get(&h->loop.eagain) > counter_get(&h->loop.drain_syscalls))
        fail("more EAGAINs than drain syscalls");
}

static void print_summary(double elapsed)
{
    uint64_t parks = 0, spins = 0, yields = 0, take_sc = 0, complete_sc = 0, loop_wakes = 0;
    for (unsigned w = 0; w < opt.threads; w++) {
        const struct handoff_thread_counters *c = &h->thread[w];
        parks += counter_get(&c->parks);
        spins += counter_get(&c->spins);
        yields += counter_get(&c->yields);
        take_sc += counter_get(&c->take_syscalls);
        complete_sc += counter_get(&c->complete_syscalls);
        loop_wakes += counter_get(&c->loop_wakes);
    }
    const struct handoff_loop_counters *l = &h->loop;
    printf("stress %-7s w=%u jobs=%llu %.2fs | loop: submit_sc=%llu wakes=%llu full=%llu drain_sc=%llu "
           "eagain=%llu loop_parks=%llu dozes=%llu holds=%llu | workers: take_sc=%llu parks=%llu spins=%llu yields=%llu "
           "complete_sc=%llu loop_wakes=%llu | OK\n",
           opt.ops->name, opt.threads, (unsigned long long)opt.jobs, elapsed,
           (unsigned long long)counter_get(&l->submit_syscalls), (unsigned long long)counter_get(&l->wakes_sent),
           (unsigned long long)counter_get(&l->full), (unsigned long long)counter_get(&l->drain_syscalls),
           (unsigned long long)counter_get(&l->eagain), (unsigned long long)counter_get(&l->loop_parks),
           (unsigned long long)counter_get(&l->loop_dozes), (unsigned long long)counter_get(&l->loop_holds),
           (unsigned long long)take_sc, (unsigned long long)parks, (unsigned long long)spins,
           (unsigned long long)yields, (unsigned long long)complete_sc, (unsigned long long)loop_wakes);
}

/* -S: over the second half of the run, each budget changes between at most
 * one in five samples (+2). The policy re-decides every 32 waits, hundreds of
 * times between two samples here: without its hysteresis and decay it
 * changes between most samples. The bound is loose because this machine is
 * shared: a preempted thread is a real change in the waits, and the policy
 * is right to follow it. */
static void check_settled(void)
{
    if (n_samples < 20)
        fail("-S: only %u budget samples (run longer)", n_samples);
    for (int side = 0; side < 2; side++) {
        unsigned first = n_samples / 2, n = n_samples - first, changes = 0, best = 0;
        uint64_t mode = 0;
        for (unsigned i = first; i < n_samples; i++) {
            unsigned same = 0;
            for (unsigned j = first; j < n_samples; j++)
                same += budget_samples[j][side] == budget_samples[i][side];
            if (same > best) {
                best = same;
                mode = budget_samples[i][side];
            }
            changes += i > first && budget_samples[i][side] != budget_samples[i - 1][side];
        }
        printf("stress: %s spin budget over the last %u samples (10 ms apart): %u %% at %llu ns, %u changes\n",
               side ? "loop" : "worker 0", n, 100 * best / n, (unsigned long long)mode, changes);
        if (getenv("STRESS_SAMPLES"))
            for (unsigned i = 0; i < n_samples; i++)
                printf("%llu%c", (unsigned long long)budget_samples[i][side], i + 1 < n_samples ? ' ' : '\n');
        fflush(stdout);
        if (changes > n / 5 + 2)
            fail("-S: the %s's spin budget did not settle", side ? "loop" : "worker");
    }
}

/* The registry and the config check, before the run proper. */
static void check_registry(void)
{
    if (handoff_backends[0] != &handoff_ring)
        fail("handoff_backends[0] is not the ring (the default)");
    for (const struct handoff_ops *const *b = handoff_backends; *b; b++)
        if (handoff_find((*b)->name) != *b)
            fail("handoff_find(\"%s\") does not return that backend", (*b)->name);
    if (handoff_find("no-such-backend"))
        fail("handoff_find accepted an unknown name");
    struct handoff_config bad = {.threads = 1, .capacity = 3, .spin_iters = -1};
    errno = 0;
    struct handoff *x = opt.ops->create(&bad);
    if (x || errno != EINVAL)
        fail("create accepted capacity 3 (not a power of two)");
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    check_registry();
    struct handoff_config cfg = {.threads = opt.threads, .capacity = opt.capacity,
                                 .spin_iters = opt.spin_iters, .loop_spin_ns = opt.loop_spin_ns};
    h = opt.ops->create(&cfg);
    if (!h)
        fail("create: %s", strerror(errno));

    struct loop_state s = {.rng = opt.seed};
    s.pool = calloc((size_t)opt.threads * opt.capacity, sizeof *s.pool);
    s.free_list = calloc(opt.threads, sizeof *s.free_list);
    s.next_seq = calloc(opt.threads, sizeof *s.next_seq);
    s.next_done = calloc(opt.threads, sizeof *s.next_done);
    s.outstanding = calloc(opt.threads, sizeof *s.outstanding);
    struct thread_arg *wa = calloc(opt.threads, sizeof *wa);
    if (!s.pool || !s.free_list || !s.next_seq || !s.next_done || !s.outstanding || !wa)
        fail("out of memory");
    for (unsigned w = 0; w < opt.threads; w++)
        for (unsigned i = 0; i < opt.capacity; i++) {
            struct job *j = &s.pool[w * opt.capacity + i];
            j->next_free = s.free_list[w];
            s.free_list[w] = j;
        }

    double t0 = clock_s();
    for (unsigned w = 0; w < opt.threads; w++) {
        wa[w].index = w;
        if (pthread_create(&wa[w].thread, NULL, thread_main, &wa[w]) != 0)
            fail("pthread_create");
    }
    pthread_t watchdog;
    if (pthread_create(&watchdog, NULL, watchdog_main, NULL) != 0)
        fail("pthread_create");

    run_loop(&s);

    opt.ops->shutdown(h);
    for (unsigned w = 0; w < opt.threads; w++)
        pthread_join(wa[w].thread, NULL);
    atomic_store(&finished, true);
    pthread_join(watchdog, NULL);
    double elapsed = clock_s() - t0;

    check_counters(&s, wa);
    print_summary(elapsed);
    if (opt.check_settle)
        check_settled();
    opt.ops->destroy(h);
    free(s.pool);
    free(s.free_list);
    free(s.next_seq);
    free(s.next_done);
    free(s.outstanding);
    free(wa);
    return 0;
}

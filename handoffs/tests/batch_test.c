/* batch_test.c — the ring pays at most one wake per batch, each way.
 *
 * 1. A worker parked (spin 0: it parks as soon as its ring is empty); the loop
 *    submits a burst of N jobs back to back: no syscall at all during the
 *    burst (the first submit sees the worker parked and owes it a wake-up,
 *    the rest see the debt); the worker stays parked until the loop ends the
 *    batch with flush, which pays exactly one futex wake; the worker then
 *    takes all N without parking again (they were all queued before it woke).
 * 2. O1: a wake-up owed and never flushed is paid by before_sleep: the loop
 *    cannot block while a parked worker waits for a job it was never told of.
 * 3. A burst longer than RING_WAKE_BATCH does not wait for the flush: the
 *    submit at which that many jobs wait pays the wake-up.
 * 4. The loop announced it will sleep (before_sleep said nothing is waiting);
 *    the worker completes N jobs back to back: exactly one eventfd write (the
 *    first complete takes loop_parked; the rest see 0), and one drain returns
 *    all N, in order.
 * 5. The eventfd is a doorbell (ring_watch: edge-triggered, never read): the
 *    write of part 4 is reported by epoll once, and not again; drains make no
 *    syscall; the next write, to a count nobody has reset, is reported again.
 * 6. Dozing: while the worker has a queue and completes at a steady pace
 *    (every few tens of us: quick enough to doze through), the
 *    loop waits on a timer (doze) instead of announcing a sleep, so those
 *    completions cost the worker no eventfd write; each doze is within its
 *    bounds and, with the worker's queue of PACE_JOBS ahead, as long as
 *    that queue allows (the work ahead over RING_DOZE_AHEAD), not a quarter
 *    of the pace; and once the worker stalls for several times its pace, the loop
 *    stops dozing and announces its sleep, and the late completion wakes it.
 * 7. Dozing on a fast worker (a few us a job, as pipelined hello requests
 *    are): with a long queue ahead of it the loop dozes and the worker
 *    writes the eventfd for few of its jobs; every doze is the work queued
 *    ahead over RING_DOZE_AHEAD, within its bounds, and there is none with
 *    less work ahead than RING_DOZE_AHEAD of the shortest dozes (a queue of
 *    FAST_MID jobs); and a stall with a queue behind it makes the loop
 *    announce again.
 * 8. Holding, by the rule (two workers, paces and queues set by hand, no
 *    thread running): no hold while a worker has nothing queued, with a
 *    short queue, for a fast pool, for one that waits more than it works
 *    (on its CPU less than a quarter of its pace), or once four paces have
 *    passed with no completion (the stall rule); otherwise the shortest of
 *    the workers' queued work at its pace, less the margin, at most
 *    RING_HOLD_MAX_NS.
 * 9. Holding on a worker that completes every few tens of us with a long
 *    queue: the loop holds (each hold the rule's), the completions cost no
 *    eventfd write, and a stall with jobs queued behind it makes the loop
 *    stop holding and announce its sleep.
 * 10. Dozing, by the rule (one worker, its pace, its queue and the time of
 *    its last completion set by hand, no thread running): no doze without
 *    a queue, at an unknown pace, for a pool slower than four of the
 *    longest dozes, for a fast pool with less work ahead than
 *    RING_DOZE_AHEAD short dozes, or after four paces (or four dozes)
 *    with no completion; otherwise the doze_wanted below.
 * 11. The pace counts only jobs that ran: a worker whose jobs each take
 *    SKIP_NS on the CPU, between runs of jobs handed back unrun (unrun,
 *    then complete) as many, paces at SKIP_NS or more, not near half.
 * Counters are the handoff's own (handoff.h), so this also pins what the
 * server's stats report for a burst. Exit 1 on a violation.
 *
 * `batch_test` runs parts 1-5, 8, 10 and 11, whose verdicts the code decides
 * alone: each waits for the state it checks (a worker parked, a job taken),
 * and the rule cases judge the stall rules at a clock they fix
 * (RING_POLICY_NOW). `make test` runs it, and `make mutants` requires it to
 * catch the doze and hold mutants. `batch_test --paced` runs parts 6, 7 and
 * 9, whose workers keep a pace on the live scheduler: a busy machine changes
 * what the loop sees there, so `make perf-check` runs them, not `make test`. */
/* ring.c itself, so part 7 can read the worker's pace (every other
 * handoff source is linked beside this file, as for ring_litmus.c). */
#include "../../lib/futex.h" /* first: ring.c's own include of it is then a no-op */
#include <stdint.h>

/* The rule cases (parts 8 and 10) fix the stall rules' clock at fixed_now;
 * 0: the real clock. */
static uint64_t fixed_now;
#define RING_POLICY_NOW() (fixed_now ? fixed_now : clock_ns())
#include "../ring.c"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define N 8
#define PACE_JOBS 32 /* part 6 */
#define PACE_US 30   /* a nanosleep of this (1 us timer slack): inside the doze's range */
#define STALL_MS 40
#define FAST_LONG 400 /* part 7: jobs queued at once */
#define FAST_SHORT 200 /* part 7: jobs kept FAST_MID at a time */
#define FAST_MID 32 /* part 7: 31 jobs of FAST_NS ahead: less than RING_DOZE_AHEAD short dozes */
#define FAST_STALLED 256 /* part 7: the jobs of its stall phase */
#define FAST_BEFORE_STALL 16 /* part 7: of those, the fast ones before the stall */
#define FAST_NS 2000L /* part 7: each job's busy time */

struct job {
    int seq;
};

static struct handoff *_Atomic h; /* part 6 swaps in a fresh one */
static struct job jobs[N];
static struct job *taken[N];
static atomic_int phase; /* 4: complete part 1's jobs; 5: complete one more; 6: pace; 7: fast */
static struct job last = {.seq = 99};
static atomic_int done;

static void fail(const char *what, unsigned long long got, unsigned long long want)
{
    fprintf(stderr, "batch_test: FAIL: %s: %llu, expected %llu\n", what, got, want);
    exit(1);
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A job's work, on the CPU (a sleep this short would last a timer wake). */
static void busy_ns(long ns)
{
    uint64_t end = clock_ns() + (uint64_t)ns;
    while (clock_ns() < end)
        ;
}

/* Takes N jobs (part 1), 1 (part 2) and RING_WAKE_BATCH (part 3), then
 * completes part 1's N when told (part 4), and one more (part 5). */
static atomic_int took;
static atomic_ullong parks_after_burst; /* the worker's park count once part 1's N were taken */

static void *worker(void *p)
{
    (void)p;
    for (int i = 0; i < N; i++) {
        taken[i] = handoff_ring.take(h, 0);
        atomic_fetch_add(&took, 1);
    }
    atomic_store(&parks_after_burst, counter_get(&h->thread[0].parks));
    atomic_store(&done, 1);
    for (int k = 0; k < 1 + RING_WAKE_BATCH; k++) {
        handoff_ring.take(h, 0);
        atomic_fetch_add(&took, 1);
    }
    atomic_store(&done, 3);
    while (atomic_load(&phase) != 4)
        pause_ms(1);
    for (int i = 0; i < N; i++)
        if (handoff_ring.complete(h, 0, taken[i]) != 0) {
            perror("complete");
            exit(1);
        }
    atomic_store(&done, 4);
    while (atomic_load(&phase) != 5)
        pause_ms(1);
    if (handoff_ring.complete(h, 0, &last) != 0) {
        perror("complete");
        exit(1);
    }
    atomic_store(&done, 5);
    return NULL;
}

/* Parts 6 and 7 (--paced): the worker keeps a pace. */
static void *worker_paced(void *p)
{
    (void)p;
    prctl(PR_SET_TIMERSLACK, 1000UL); /* the paced sleeps of part 6 */
    /* 6: take PACE_JOBS jobs, completing each PACE_MS after the last, then
     * three more, the second after a stall of STALL_MS (the third queued
     * behind it). */
    while (atomic_load(&phase) != 6)
        pause_ms(1);
    for (int i = 0; i < PACE_JOBS + 3; i++) {
        struct job *j = handoff_ring.take(h, 0);
        if (i == PACE_JOBS + 1)
            pause_ms(STALL_MS);
        else
            nanosleep(&(struct timespec){0, PACE_US * 1000L}, NULL);
        if (handoff_ring.complete(h, 0, j) != 0) {
            perror("complete");
            exit(1);
        }
    }
    /* 7: every job busy for FAST_NS, except one of the last phase's, which
     * stalls for STALL_MS. */
    while (atomic_load(&phase) != 7)
        pause_ms(1);
    for (int i = 0; i < FAST_LONG + FAST_SHORT + FAST_STALLED; i++) {
        struct job *j = handoff_ring.take(h, 0);
        if (i == FAST_LONG + FAST_SHORT + FAST_BEFORE_STALL)
            pause_ms(STALL_MS);
        else
            busy_ns(FAST_NS);
        if (handoff_ring.complete(h, 0, j) != 0) {
            perror("complete");
            exit(1);
        }
    }
    return NULL;
}

/* Waits (up to 30 s: a hang, not a slow machine) until the worker has
 * parked `parks` times in all and is in futex_wait, not just announced. */
static void await_parked(struct handoff_thread_counters *w, unsigned long long parks)
{
    for (int i = 0; i < 30000 && counter_get(&w->parks) < parks; i++)
        pause_ms(1);
    pause_ms(20);
    if (counter_get(&w->parks) != parks)
        fail("worker parks before the burst", counter_get(&w->parks), parks);
}

/* Waits (up to 30 s) until the worker has taken `n` jobs in all. */
static bool await_took(int n)
{
    for (int i = 0; i < 30000 && atomic_load(&took) < n; i++)
        pause_ms(1);
    return atomic_load(&took) >= n;
}

/* A fresh handoff in h, watched by a fresh epoll (*epfd; the old one closed). */
static void fresh_handoff(const struct handoff_config *cfg, int *epfd)
{
    h = handoff_ring.create(cfg);
    if (!h) {
        perror("create");
        exit(2);
    }
    if (*epfd >= 0)
        close(*epfd);
    *epfd = epoll_create1(EPOLL_CLOEXEC);
    if (*epfd < 0 || handoff_ring.watch(h, *epfd, 7) != 0) {
        perror("epoll/watch");
        exit(2);
    }
}

/* Parts 6 and 7: js[from, to) to the only worker, then the end of the
 * loop's pass (flush: a parked worker is woken once for them all). */
static void submit_flushed(struct job *js, unsigned from, unsigned to)
{
    for (unsigned i = from; i < to; i++)
        if (handoff_ring.submit(h, 0, &js[i]) != HANDOFF_OK)
            fail("submit refused at", i, 0);
    handoff_ring.flush(h);
}

/* Parts 6 and 7: the loop's drain after a wait, up to 2N completions,
 * counted into *drained and taken off *outstanding. */
static void drain_counted(unsigned *drained, unsigned *outstanding)
{
    struct job *got[2 * N];
    unsigned k = (unsigned)handoff_ring.drain(h, false, got, 2 * N);
    *drained += k;
    *outstanding -= k;
}

/* The pace ring_doze reads (the only worker's). */
static uint64_t worker_pace(void)
{
    return atomic_load_explicit(&((struct ring_handoff *)h)->w[0].pace_ns, memory_order_relaxed);
}

/* One wait of the loop, as core/conn/loop.c waits with `outstanding` jobs out: a
 * doze (a timed wait announced to nobody, within its bounds), else
 * before_sleep and epoll until the eventfd (or 1 s: a lost wake-up fails).
 * The doze's length, or 0 when it announced. */
static uint64_t loop_wait(int epfd, unsigned outstanding)
{
    uint64_t doze = handoff_ring.doze(h, outstanding);
    if (doze) {
        if (doze < RING_DOZE_MIN_NS || doze > RING_DOZE_MAX_NS)
            fail("doze outside its bounds (ns)", doze, RING_DOZE_MAX_NS);
        struct timespec ts = {0, (long)doze};
        nanosleep(&ts, NULL);
        return doze;
    }
    struct epoll_event ev[2];
    if (!handoff_ring.before_sleep(h, outstanding) && epoll_wait(epfd, ev, 2, 1000) != 1)
        fail("epoll events after an announced sleep (a lost wake-up)", 0, 1);
    handoff_ring.after_sleep(h);
    return 0;
}

/* The doze ring_doze must choose for `outstanding` jobs out to one worker
 * of this pace, restated from its rule ("Dozing", handoffs/README.md): the
 * work queued ahead over RING_DOZE_AHEAD, within the doze's bounds; for a
 * pool faster than two short dozes none while that work is less than
 * RING_DOZE_AHEAD short dozes, for a slower one at least a quarter of its
 * pace. 0: no doze. */
static uint64_t doze_wanted(unsigned outstanding, uint64_t pace)
{
    uint64_t ahead = (uint64_t)(outstanding - 1) * pace, want = ahead / RING_DOZE_AHEAD;
    if (pace < 2 * RING_DOZE_MIN_NS) {
        if (ahead < RING_DOZE_AHEAD * RING_DOZE_MIN_NS)
            return 0;
    } else if (want < pace / 4) {
        want = pace / 4;
    }
    return want < RING_DOZE_MIN_NS ? RING_DOZE_MIN_NS : want > RING_DOZE_MAX_NS ? RING_DOZE_MAX_NS : want;
}

/* Parts 6 and 7: one wait of the loop with `outstanding` jobs out, checked
 * against doze_wanted. *pace is the worker's pace when it did not change
 * across the wait (then ring_doze saw it), else 0: such a wait is not
 * checked (a busy machine makes one). A wait that announced is not checked
 * either (the stall rule may have chosen it), bar a fast pool's with too
 * little work ahead, which must: a doze there fails. */
static uint64_t checked_wait(int epfd, unsigned outstanding, uint64_t *pace)
{
    uint64_t before = worker_pace();
    uint64_t doze = loop_wait(epfd, outstanding);
    *pace = before && worker_pace() == before ? before : 0;
    if (!doze || !*pace)
        return doze;
    uint64_t want = doze_wanted(outstanding, *pace);
    if (!want)
        fail("a fast pool's doze with less work queued ahead than RING_DOZE_AHEAD shortest dozes (ns)",
             (uint64_t)(outstanding - 1) * *pace, RING_DOZE_AHEAD * RING_DOZE_MIN_NS);
    if (doze != want)
        fail(*pace < 2 * RING_DOZE_MIN_NS ? "a fast pool's doze is not the work queued ahead over RING_DOZE_AHEAD (ns)"
                                          : "a slow pool's doze is not the longer of a quarter of its pace and the "
                                            "work queued ahead over RING_DOZE_AHEAD (ns)",
             doze, want);
    return doze;
}

/* Part 7's waits: checked_wait, with *pace kept only while it is fast
 * (part 6 checks the slow ones). */
static uint64_t fast_wait(int epfd, unsigned outstanding, uint64_t *pace)
{
    uint64_t doze = checked_wait(epfd, outstanding, pace);
    if (*pace >= 2 * RING_DOZE_MIN_NS)
        *pace = 0;
    return doze;
}

/* The margin a hold leaves before the shortest queued work (`ahead`) runs
 * out, the slowest pace `slowest`: the longest of RING_HOLD_MARGIN_NS, a
 * quarter of that pace and a quarter of that work. */
static uint64_t hold_margin(uint64_t slowest, uint64_t ahead)
{
    uint64_t m = RING_HOLD_MARGIN_NS;
    m = slowest / 4 > m ? slowest / 4 : m;
    return ahead / 4 > m ? ahead / 4 : m;
}

/* The hold ring_hold must choose with the first n of two workers in use,
 * restated from its rule ("Holding", handoffs/README.md): q[i] jobs queued
 * on worker i at pace p[i]; 0: no hold. The stall rule is checked apart. */
static uint64_t hold_wanted(const unsigned q[2], const uint64_t p[2], unsigned n)
{
    uint64_t ahead = UINT64_MAX, slowest = 0;
    for (unsigned i = 0; i < n; i++) {
        if (!q[i] || p[i] < RING_HOLD_PACE_NS)
            return 0;
        ahead = q[i] * p[i] < ahead ? q[i] * p[i] : ahead;
        slowest = p[i] > slowest ? p[i] : slowest;
    }
    uint64_t margin = hold_margin(slowest, ahead);
    if (ahead < margin + RING_HOLD_MIN_NS)
        return 0;
    return ahead - margin < RING_HOLD_MAX_NS ? ahead - margin : RING_HOLD_MAX_NS;
}

/* Part 8: one case of the rule on a fresh two-worker handoff whose workers
 * never run, the first `active` of them in use (set_active; 0: both): q[i]
 * jobs submitted to worker i, its pace set to p[i] and its CPU time per job
 * to busy (0: its pace, a worker that only works), the last completion
 * `since` ns ago. Returns what ring_hold chose. */
static uint64_t hold_case(const unsigned q[2], const uint64_t p[2], uint64_t since, uint64_t busy, unsigned active)
{
    struct handoff_config cfg = {.threads = 2, .capacity = 512, .spin_iters = 0, .loop_spin_ns = 0};
    struct handoff *hh = handoff_ring.create(&cfg);
    if (!hh) {
        perror("create");
        exit(2);
    }
    struct ring_handoff *rh = (struct ring_handoff *)hh;
    static struct job queued[1024];
    for (int i = 0; i < 2; i++) {
        atomic_store_explicit(&rh->w[i].pace_ns, p[i], memory_order_relaxed);
        atomic_store_explicit(&rh->w[i].busy_ns, busy ? busy : p[i], memory_order_relaxed);
        for (unsigned k = 0; k < q[i]; k++)
            if (handoff_ring.submit(hh, (unsigned)i, &queued[k]) != HANDOFF_OK)
                fail("part 8 submit refused at", k, 0);
    }
    if (active)
        handoff_ring.set_active(hh, active);
    fixed_now = clock_ns();
    rh->done_at = fixed_now - since;
    /* a job running on each worker in use besides those queued */
    uint64_t hold = handoff_ring.hold(hh, q[0] + q[1] + (active ? active : 2));
    fixed_now = 0;
    handoff_ring.shutdown(hh);
    handoff_ring.destroy(hh);
    return hold;
}

/* Part 9's worker: PACED_JOBS jobs, each PACE_US on its CPU (a hold is for
 * a worker that works), but the one after PACED_STALL_AT, which stalls
 * STALL_MS with the rest queued behind it. */
#define PACED_JOBS 160
#define PACED_STALL_AT 120
static void *paced_worker(void *p)
{
    (void)p;
    prctl(PR_SET_TIMERSLACK, 1000UL);
    for (int i = 0; i < PACED_JOBS; i++) {
        struct job *j = handoff_ring.take(h, 0);
        if (!j)
            return NULL;
        if (i == PACED_STALL_AT)
            pause_ms(STALL_MS);
        else
            busy_ns(PACE_US * 1000L);
        if (handoff_ring.complete(h, 0, j) != 0) {
            perror("complete");
            exit(1);
        }
    }
    return NULL;
}

/* Parts 1 to 5: a burst each way on one worker, each step awaited. */
static void burst_parts(void)
{
    struct handoff_config cfg = {.threads = 1, .capacity = 2 * RING_WAKE_BATCH, .spin_iters = 0, .loop_spin_ns = 0};
    h = handoff_ring.create(&cfg);
    if (!h) {
        perror("create");
        exit(2);
    }
    struct handoff_loop_counters *l = &h->loop;
    struct handoff_thread_counters *w = &h->thread[0];
    prctl(PR_SET_TIMERSLACK, 1000UL); /* the loop's dozes, as core/conn/loop.c sets it */
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0 || handoff_ring.watch(h, epfd, 7) != 0) {
        perror("epoll/watch");
        exit(2);
    }
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);

    /* 1. Submit a burst to a parked worker: owed, then one wake at the flush. */
    await_parked(w, 1);
    for (int i = 0; i < N; i++) {
        jobs[i].seq = i;
        if (handoff_ring.submit(h, 0, &jobs[i]) != HANDOFF_OK)
            fail("submit refused at", (unsigned long long)i, 0);
    }
    if (counter_get(&l->submit_syscalls) != 0)
        fail("syscalls during a burst of submits (the wake-up is owed to the flush)",
             counter_get(&l->submit_syscalls), 0);
    pause_ms(20);
    if (atomic_load(&took) != 0)
        fail("jobs taken before the flush by a parked worker", (unsigned long long)atomic_load(&took), 0);
    handoff_ring.flush(h);
    if (counter_get(&l->wakes_sent) != 1 || counter_get(&l->submit_syscalls) != 1)
        fail("futex wakes (and submit syscalls) paid by the flush of the burst", counter_get(&l->wakes_sent), 1);
    if (!await_took(N))
        fail("jobs taken after the flush", (unsigned long long)atomic_load(&took), N);
    while (atomic_load(&done) != 1)
        pause_ms(1);
    /* It woke with all N queued: no park between them. */
    if (atomic_load(&parks_after_burst) != 1)
        fail("worker parks while taking a flushed burst", atomic_load(&parks_after_burst), 1);

    /* 2. O1: an owed wake-up that nobody flushed is paid by before_sleep. */
    await_parked(w, 2);
    struct job one = {.seq = -1};
    if (handoff_ring.submit(h, 0, &one) != HANDOFF_OK)
        fail("submit refused", 1, 0);
    pause_ms(20);
    if (atomic_load(&took) != N)
        fail("job taken by a parked worker before any wake-up", (unsigned long long)atomic_load(&took), N);
    handoff_ring.before_sleep(h, 1); /* no flush before it */
    if (counter_get(&l->wakes_sent) != 2)
        fail("before_sleep did not pay the owed wake-up: futex wakes", counter_get(&l->wakes_sent), 2);
    if (!await_took(N + 1))
        fail("the unflushed job was never taken (the loop would block with it queued)",
             (unsigned long long)atomic_load(&took), N + 1);
    handoff_ring.after_sleep(h);

    /* 3. A long burst: the submit at which RING_WAKE_BATCH jobs wait pays. */
    await_parked(w, 3);
    static struct job many[RING_WAKE_BATCH];
    for (int i = 0; i < RING_WAKE_BATCH; i++) {
        if (handoff_ring.submit(h, 0, &many[i]) != HANDOFF_OK)
            fail("submit refused at", (unsigned long long)i, 0);
        unsigned long long want_wakes = i + 1 < RING_WAKE_BATCH ? 2 : 3;
        if (counter_get(&l->wakes_sent) != want_wakes)
            fail(i + 1 < RING_WAKE_BATCH ? "wake paid before RING_WAKE_BATCH jobs waited"
                                         : "no wake paid once RING_WAKE_BATCH jobs waited",
                 counter_get(&l->wakes_sent), want_wakes);
    }
    if (!await_took(N + 1 + RING_WAKE_BATCH))
        fail("jobs of the long burst taken", (unsigned long long)atomic_load(&took), N + 1 + RING_WAKE_BATCH);
    handoff_ring.flush(h); /* nothing owed: no wake */
    if (counter_get(&l->wakes_sent) != 3)
        fail("futex wakes after flushing with nothing owed", counter_get(&l->wakes_sent), 3);

    /* 4. Complete a burst to a parked loop. */
    while (atomic_load(&done) != 3)
        pause_ms(1);
    if (handoff_ring.before_sleep(h, N))
        fail("before_sleep saw completions before any", 1, 0);
    atomic_store(&phase, 4);
    while (atomic_load(&done) != 4)
        pause_ms(1);
    if (counter_get(&w->loop_wakes) != 1)
        fail("eventfd writes for a burst of 8 completions", counter_get(&w->loop_wakes), 1);
    if (counter_get(&w->complete_syscalls) != 1)
        fail("complete syscalls for the burst", counter_get(&w->complete_syscalls), 1);
    handoff_ring.after_sleep(h);
    struct job *out[2 * N];
    size_t got = handoff_ring.drain(h, true, out, 2 * N);
    if (got != N)
        fail("completions returned by one drain", got, N);
    for (int i = 0; i < N; i++)
        if (out[i]->seq != i)
            fail("completion order at", (unsigned long long)i, (unsigned long long)out[i]->seq);

    /* 5. The doorbell: reported once per write, never read. */
    struct epoll_event ev[2];
    int n = epoll_wait(epfd, ev, 2, 0);
    if (n != 1 || ev[0].data.u64 != 7)
        fail("epoll events for part 4's eventfd write", (unsigned long long)(n < 0 ? 0 : n), 1);
    n = epoll_wait(epfd, ev, 2, 0);
    if (n != 0)
        fail("epoll events for the same write, asked again (level-triggered?)", (unsigned long long)n, 0);
    if (handoff_ring.before_sleep(h, 1))
        fail("before_sleep saw completions before the last", 1, 0);
    atomic_store(&phase, 5);
    n = epoll_wait(epfd, ev, 2, 30000); /* the count was never reset: an edge all the same */
    if (n != 1 || ev[0].data.u64 != 7)
        fail("epoll events for a write to an unread eventfd", (unsigned long long)(n < 0 ? 0 : n), 1);
    handoff_ring.after_sleep(h);
    got = handoff_ring.drain(h, true, out, 2 * N);
    if (got != 1 || out[0] != &last)
        fail("completions drained after the second write", got, 1);
    if (counter_get(&l->drain_syscalls) != 0)
        fail("syscalls in drain (the doorbell is never read)", counter_get(&l->drain_syscalls), 0);
    if (counter_get(&w->loop_wakes) != 2)
        fail("eventfd writes in all", counter_get(&w->loop_wakes), 2);
    pthread_join(t, NULL);
    handoff_ring.shutdown(h);
    handoff_ring.destroy(h);
    close(epfd);
}

/* Parts 6 and 7: a worker keeping a pace, the loop dozing on it. */
static void doze_parts(void)
{
    struct handoff_config cfg = {.threads = 1, .capacity = 2 * RING_WAKE_BATCH, .spin_iters = 0, .loop_spin_ns = 0};
    int epfd = -1;
    struct epoll_event ev[2];
    pthread_t t;
    pthread_create(&t, NULL, worker_paced, NULL);

    /* 6. Dozing on a busy worker's pace. The loop waits as core/conn/loop.c does:
     * a doze is a timed wait announced to nobody, else before_sleep and
     * epoll until the eventfd (or 1 s: a lost wake-up fails below). On a
     * fresh handoff: the pace the earlier parts left (their completions
     * waited on the phases, not on take) can be far above any dozed through,
     * and how fast it decays is not what this part is about. */
    fresh_handoff(&cfg, &epfd);
    struct handoff_loop_counters *l = &h->loop;
    struct handoff_thread_counters *w = &h->thread[0];
    static struct job paced[PACE_JOBS + 3];
    submit_flushed(paced, 0, PACE_JOBS);
    atomic_store(&phase, 6);
    unsigned outstanding = PACE_JOBS, drained6 = 0, dozes = 0, announced = 0, slow_checked = 0;
    unsigned long long writes0 = counter_get(&w->loop_wakes);
    bool stall_submitted = false, stall_announced = false;
    while (drained6 < PACE_JOBS + 3) {
        if (!stall_submitted && drained6 >= PACE_JOBS - 1) { /* a drain may take two */
            /* one job still paced, and behind it three: the second stalls,
             * with the third queued behind it (the worker still has a queue) */
            submit_flushed(paced, PACE_JOBS, PACE_JOBS + 3);
            outstanding += 3;
            stall_submitted = true;
        }
        uint64_t pace;
        uint64_t doze = checked_wait(epfd, outstanding, &pace);
        if (doze && pace >= 2 * RING_DOZE_MIN_NS)
            slow_checked++;
        if (doze) {
            dozes++;
        } else {
            announced++;
            stall_announced |= drained6 == PACE_JOBS + 1;
        }
        drain_counted(&drained6, &outstanding);
    }
    epoll_wait(epfd, ev, 2, 0); /* a write for a sleep already over: consumed */
    unsigned long long writes = counter_get(&w->loop_wakes) - writes0;
    if (!dozes)
        fail("dozes while a worker with a queue completed every few tens of us", 0, 1);
    /* Writes only for announced sleeps, and for at most half the jobs: once
     * the worker's first run of RING_PACE_RUN jobs has set its pace, the paced
     * ones came while the loop dozed. */
    if (writes > announced || writes > PACE_JOBS / 2)
        fail("eventfd writes for paced completions", writes, PACE_JOBS / 2);
    if (!stall_announced)
        fail("the loop kept dozing through a stall of many paces", 0, 1);
    if (counter_get(&l->loop_dozes) != dozes)
        fail("loop_dozes counted", counter_get(&l->loop_dozes), dozes);
    if (!slow_checked)
        printf("batch_test: part 6 not fully checked: no doze at a steady slow pace (a busy machine?)\n");

    /* 7. Dozing on a fast worker, on a fresh handoff (part 6's pace is
     * tens of us) with room for the long queue. */
    struct handoff *second = h;
    struct handoff_config fast_cfg = cfg;
    fast_cfg.capacity = 512;
    fresh_handoff(&fast_cfg, &epfd);
    l = &h->loop;
    w = &h->thread[0];
    static struct job fast[FAST_LONG + FAST_SHORT + FAST_STALLED];
    /* 7a. A long queue: once the worker's pace is known, the loop dozes.
     * Counted over the first half of the queue: all through it the work
     * ahead lasts far more than RING_DOZE_AHEAD of the shortest dozes. */
    submit_flushed(fast, 0, FAST_LONG);
    outstanding = FAST_LONG;
    unsigned next = FAST_LONG; /* the next of fast[] to submit */
    atomic_store(&phase, 7);
    unsigned drained7 = 0, long_fast = 0, long_dozes = 0;
    unsigned long long long_writes = 0;
    while (drained7 < FAST_LONG) {
        unsigned long long writes_before = counter_get(&w->loop_wakes);
        uint64_t pace;
        uint64_t doze = fast_wait(epfd, outstanding, &pace);
        if (drained7 < FAST_LONG / 2 && pace) {
            long_fast++;
            long_dozes += doze != 0;
            long_writes += counter_get(&w->loop_wakes) - writes_before;
        }
        drain_counted(&drained7, &outstanding);
    }
    /* Each of those waits has a fresh completion behind it (the drain
     * before it) and a long queue ahead: it dozes, bar a vCPU taken from the
     * loop between the drain and the wait; and the worker writes the eventfd
     * only for the waits that announced. */
    if (long_dozes * 4 < long_fast * 3)
        fail("dozes while a fast worker had a long queue", long_dozes, long_fast);
    if (long_writes * 4 > long_fast)
        fail("eventfd writes while a fast worker had a long queue", long_writes, long_fast / 4);
    /* 7b. FAST_MID jobs out: the work ahead is less than RING_DOZE_AHEAD
     * short dozes, so the loop announces (fast_wait fails on a doze). */
    unsigned mid_fast = 0;
    while (drained7 < FAST_LONG + FAST_SHORT) {
        unsigned more = FAST_MID - outstanding;
        if (more > FAST_LONG + FAST_SHORT - next)
            more = FAST_LONG + FAST_SHORT - next;
        submit_flushed(fast, next, next + more);
        next += more;
        outstanding += more;
        uint64_t pace;
        fast_wait(epfd, outstanding, &pace);
        mid_fast += pace && (uint64_t)(outstanding - 1) * pace < RING_DOZE_AHEAD * RING_DOZE_MIN_NS;
        drain_counted(&drained7, &outstanding);
    }
    /* Where no wait could be checked (the worker's pace never fast and
     * steady: a busy machine), say so rather than pass in silence. */
    if (!long_fast || !mid_fast)
        printf("batch_test: part 7 not fully checked: waits at a fast pace: %u with a long queue, %u with "
               "%d jobs out (a busy machine?)\n", long_fast, mid_fast, FAST_MID);
    /* 7c. A stall with a long queue behind it: a few fast jobs, then one
     * that takes STALL_MS; the loop must stop dozing and announce. */
    submit_flushed(fast, next, FAST_LONG + FAST_SHORT + FAST_STALLED);
    outstanding += FAST_LONG + FAST_SHORT + FAST_STALLED - next;
    bool fast_stall_announced = false;
    while (drained7 < FAST_LONG + FAST_SHORT + FAST_STALLED) {
        uint64_t pace;
        bool dozed = fast_wait(epfd, outstanding, &pace) != 0;
        fast_stall_announced |= !dozed && drained7 == FAST_LONG + FAST_SHORT + FAST_BEFORE_STALL;
        drain_counted(&drained7, &outstanding);
    }
    if (!fast_stall_announced)
        fail("the loop kept dozing through a fast worker's stall", 0, 1);
    epoll_wait(epfd, ev, 2, 0);

    handoff_ring.shutdown(h);
    pthread_join(t, NULL);
    handoff_ring.destroy(h);
    handoff_ring.destroy(second);
    close(epfd);
}

/* Part 8: holding, by the rule. */
static void hold_rule_part(void)
{
    struct {
        const char *what;
        unsigned q[2];
        uint64_t p[2], since, busy;
        unsigned active;
    } cases[] = {
        {"a hold while a worker had nothing queued", {40, 0}, {40000, 40000}, 0, 0, 0},
        {"a hold that is not the shortest queued work less the margin", {10, 12}, {40000, 60000}, 0, 0, 0},
        /* 2 ms of work each, the dispatcher's budget: the pass after the
         * hold is left half a millisecond, not the fixed margin */
        {"a hold that leaves a short queue less than a quarter of its work", {50, 50}, {40000, 40000}, 0, 0, 0},
        {"a hold past RING_HOLD_MAX_NS", {200, 200}, {40000, 40000}, 0, 0, 0},
        {"a hold with little queued", {3, 3}, {40000, 40000}, 0, 0, 0},
        {"a hold for a fast pool", {200, 200}, {10000, 10000}, 0, 0, 0},
        {"a slow pool's hold that is not its queued work less a quarter of its pace", {2, 3}, {1000000, 1000000}, 0, 0, 0},
        {"a hold through a stall", {40, 40}, {40000, 40000}, 5 * 40000, 0, 0},
        {"a hold for a pool that waits more than it works", {4, 4}, {1000000, 1000000}, 0, 200000, 0},
        /* a pool that sizes itself: the idle worker beyond the prefix is
         * not one "with nothing queued" */
        {"no hold, or a wrong one, for the one worker in use", {40, 0}, {40000, 40000}, 0, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint64_t chose = hold_case(cases[i].q, cases[i].p, cases[i].since, cases[i].busy, cases[i].active);
        uint64_t want = cases[i].since || cases[i].busy
                            ? 0
                            : hold_wanted(cases[i].q, cases[i].p, cases[i].active ? cases[i].active : 2);
        if (chose != want)
            fail(cases[i].what, chose, want);
    }
}

/* Part 10: one case of the doze's rule on a fresh one-worker handoff whose
 * worker never runs: q jobs queued behind the one it runs, its pace set to
 * pace, the last completion `since` ns before the fixed clock. Returns what
 * ring_doze chose. */
static uint64_t doze_case(unsigned q, uint64_t pace, uint64_t since)
{
    struct handoff_config cfg = {.threads = 1, .capacity = 512, .spin_iters = 0, .loop_spin_ns = 0};
    struct handoff *hh = handoff_ring.create(&cfg);
    if (!hh) {
        perror("create");
        exit(2);
    }
    struct ring_handoff *rh = (struct ring_handoff *)hh;
    static struct job queued[512];
    atomic_store_explicit(&rh->w[0].pace_ns, pace, memory_order_relaxed);
    for (unsigned k = 0; k < q; k++)
        if (handoff_ring.submit(hh, 0, &queued[k]) != HANDOFF_OK)
            fail("part 10 submit refused at", k, 0);
    fixed_now = clock_ns();
    rh->done_at = fixed_now - since;
    uint64_t doze = handoff_ring.doze(hh, q + 1);
    fixed_now = 0;
    handoff_ring.shutdown(hh);
    handoff_ring.destroy(hh);
    return doze;
}

/* Part 10: dozing, by the rule. A slow pool's stall comes before a fast
 * one's: the stall mutant that spares only a fast pool (D4) must not be
 * caught by the slow pool's case, nor the one that spares both (D3) by the
 * fast pool's first. */
static void doze_rule_part(void)
{
    struct {
        const char *what;
        unsigned q;
        uint64_t pace, since;
    } cases[] = {
        {"dozes while a fast worker had a long queue", 399, FAST_NS, 0},
        {"a fast pool's doze with less work queued ahead than RING_DOZE_AHEAD shortest dozes", FAST_MID - 1,
         FAST_NS, 0},
        {"a slow pool's doze is not the longer of a quarter of its pace and the work queued ahead over "
         "RING_DOZE_AHEAD (queue)", PACE_JOBS, 30000, 0},
        {"a slow pool's doze is not the longer of a quarter of its pace and the work queued ahead over "
         "RING_DOZE_AHEAD (pace)", 2, 100000, 0},
        {"the loop kept dozing through a stall of many paces", PACE_JOBS, 30000, 1000000},
        {"the loop kept dozing through a fast worker's stall", 399, FAST_NS, 1000000},
        {"a doze with no queue", 0, 30000, 0},
        {"a doze at an unknown pace", PACE_JOBS, 0, 0},
        {"a doze for a pool slower than four of the longest dozes", 8, 4 * RING_DOZE_MAX_NS + 1000, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint64_t chose = doze_case(cases[i].q, cases[i].pace, cases[i].since);
        uint64_t want = 0;
        if (cases[i].q && cases[i].pace && cases[i].pace <= 4 * RING_DOZE_MAX_NS) {
            want = doze_wanted(cases[i].q + 1, cases[i].pace);
            if (cases[i].since > 4 * (cases[i].pace > want ? cases[i].pace : want))
                want = 0; /* the stall rule */
        }
        if (chose != want)
            fail(cases[i].what, chose, want);
    }
}

/* Part 11: on one thread, loop and worker in turn (the rings are SPSC,
 * and each side is only ever this thread). Each job that runs takes
 * SKIP_NS of the clock or more, however the thread is scheduled, so every
 * pace sample of jobs that ran is at least SKIP_NS; counted in, the
 * unrun ones would take it near half. */
#define SKIP_NS 200000L
static void skip_part(void)
{
    struct handoff_config cfg = {.threads = 1, .capacity = 8, .spin_iters = 0, .loop_spin_ns = 0};
    struct handoff *hh = handoff_ring.create(&cfg);
    if (!hh) {
        perror("create");
        exit(2);
    }
    static struct job ran, unrun;
    struct job *out[2];
    /* Blocks of RING_PACE_RUN unrun, then RING_PACE_RUN + 1 that ran: a
     * full run of those follows the last unrun one's completion. */
    const int block = 2 * RING_PACE_RUN + 1;
    for (int k = 0; k < 3 * block; k++) {
        bool runs = k % block >= RING_PACE_RUN;
        if (handoff_ring.submit(hh, 0, runs ? &ran : &unrun) != HANDOFF_OK)
            fail("part 11 submit refused at", (unsigned long long)k, 0);
        handoff_ring.flush(hh);
        struct job *job = handoff_ring.try_take(hh, 0);
        if (!job)
            fail("part 11: no job to take at", (unsigned long long)k, 1);
        if (runs)
            busy_ns(SKIP_NS);
        else
            handoff_ring.unrun(hh, 0);
        if (handoff_ring.complete(hh, 0, job) != 0) {
            perror("complete");
            exit(1);
        }
        if (handoff_ring.drain(hh, false, out, 2) != 1)
            fail("part 11: completions drained at", (unsigned long long)k, 1);
    }
    uint64_t pace = atomic_load_explicit(&((struct ring_handoff *)hh)->w[0].pace_ns, memory_order_relaxed);
    if (pace < (uint64_t)SKIP_NS)
        fail("part 11: the pace (ns) of jobs of at least SKIP_NS, beside jobs handed back unrun", pace,
             (unsigned long long)SKIP_NS);
    handoff_ring.shutdown(hh);
    handoff_ring.destroy(hh);
}

/* Part 9: holding on a paced worker with a long queue, then a stall. */
static unsigned hold_paced_part(void)
{
    struct handoff_config paced_cfg = {.threads = 1, .capacity = 256, .spin_iters = 0, .loop_spin_ns = 0};
    int epfd = -1;
    struct epoll_event ev[2];
    pthread_t t;
    fresh_handoff(&paced_cfg, &epfd);
    struct handoff_loop_counters *l = &h->loop;
    struct handoff_thread_counters *w = &h->thread[0];
    static struct job held[PACED_JOBS];
    submit_flushed(held, 0, PACED_JOBS);
    pthread_create(&t, NULL, paced_worker, NULL);
    unsigned drained9 = 0, holds = 0, announced9 = 0;
    unsigned outstanding = PACED_JOBS;
    unsigned stall_holds = 0;
    bool stall_announced9 = false;
    while (drained9 < PACED_JOBS) {
        uint64_t before = worker_pace();
        uint64_t hold = handoff_ring.hold(h, outstanding);
        if (hold) {
            holds++;
            /* The rule for one worker at the pace it read: some number of
             * jobs queued (at most those out) at that pace, less the margin,
             * or the ceiling. */
            bool ruled = false;
            for (unsigned q = 1; q <= outstanding && !ruled; q++)
                ruled = hold == (uint64_t)q * before - hold_margin(before, (uint64_t)q * before);
            if (worker_pace() == before && hold != RING_HOLD_MAX_NS &&
                (hold < RING_HOLD_MIN_NS || hold > RING_HOLD_MAX_NS || !ruled))
                fail("a hold on a paced worker that is not its queued work less the margin (ns)", hold,
                     (uint64_t)outstanding * before - hold_margin(before, (uint64_t)outstanding * before));
            stall_holds += drained9 == PACED_STALL_AT;
            nanosleep(&(struct timespec){0, (long)hold}, NULL);
        } else {
            bool slept = loop_wait(epfd, outstanding) == 0;
            announced9 += slept;
            stall_announced9 |= slept && drained9 == PACED_STALL_AT;
        }
        drain_counted(&drained9, &outstanding);
    }
    pthread_join(t, NULL);
    epoll_wait(epfd, ev, 2, 0);
    if (!holds)
        printf("batch_test: part 9 not fully checked: no hold on a worker paced at %d us with %d jobs "
               "queued (a busy machine?)\n", PACE_US, PACED_JOBS);
    if (counter_get(&w->loop_wakes) > announced9)
        fail("eventfd writes while the loop held", counter_get(&w->loop_wakes), announced9);
    /* The stalled job's predecessor came within a pace of the hold before
     * the stall was seen: one hold at most, then the loop announces. */
    if (stall_holds > 1 || !stall_announced9)
        fail("the loop kept holding through a stall of many paces: holds", stall_holds, 1);
    if (counter_get(&l->loop_holds) != holds)
        fail("loop_holds counted", counter_get(&l->loop_holds), holds);
    handoff_ring.shutdown(h);
    handoff_ring.destroy(h);
    close(epfd);
    return holds;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--paced") == 0) {
        doze_parts();
        unsigned holds = hold_paced_part();
        printf("batch_test --paced: paced completions while the loop dozed, each as long as the queue allows: "
               "no write, a stall: it announces again; a fast worker: dozed through with a long queue, each the "
               "work ahead over RING_DOZE_AHEAD, none with less ahead, not through a stall; %u holds on a paced "
               "worker, each by the rule, none through its stall: OK\n", holds);
        return 0;
    }
    if (argc != 1) {
        fprintf(stderr, "usage: batch_test [--paced]\n");
        return 2;
    }
    burst_parts();
    hold_rule_part();
    doze_rule_part();
    skip_part();
    printf("batch_test: a burst of %d: no syscall until the flush, 1 futex wake, 1 park; an unflushed "
           "submit woken by before_sleep; a burst of %d woken at its last submit; %d completions: 1 eventfd "
           "write, 1 drain; the eventfd an edge per write, never read; holds and dozes by the rule; a pace "
           "of the jobs that ran: OK\n",
           N, RING_WAKE_BATCH, N);
    return 0;
}

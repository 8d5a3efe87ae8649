/* ring.c — SPSC rings with spin-then-park on both sides.
 *
 * Per pool thread: a request ring (loop -> pool thread) and a completion ring
 * (pool thread -> loop), see spsc_ring.h. On the common path nobody makes a
 * syscall: a submit is a store and a fence, a completion the same. A pool thread
 * with nothing to do spins (pause), yields a few times, then parks on a futex;
 * the loop wakes it only if it is parked, and once per batch: a submit that
 * finds it parked owes the wake-up to the end of the loop's pass (ring_flush),
 * so the pool thread starts with every request that pass parsed. The loop side is
 * the same shape with one eventfd for the whole handoff as the doorbell: a
 * pool thread writes it only when the loop has announced it is about to block in
 * epoll_wait, and the loop never reads it (ring_watch).
 *
 * The park/wake handshake (both directions) is the store-buffering shape:
 *
 *     producer                        consumer
 *     push: store(tail)  [R1]         store(parked, 1)
 *     F1: fence(seq_cst)              F2: fence(seq_cst)
 *     load(parked)                    re-check the ring: load(tail) [A1]
 *     if 1: wake                      if empty: sleep
 *
 * Each side stores one location and then loads the other's. Release/acquire
 * alone allow both loads to return the old values (x86's store buffer does
 * exactly that: handoffs/tests/ring_litmus.c shows it on this code), and then the producer
 * sees parked == 0 and does not wake while the consumer sees an empty ring and
 * sleeps: a lost wakeup, with a job queued and nobody to run it. With a
 * seq_cst fence between the store and the load on *both* sides, the fences are
 * totally ordered: if F1 comes first the consumer's re-check sees the push, if
 * F2 comes first the producer sees parked == 1. A fence on one side only does
 * not help — the other side's store can still sit in its buffer past its load.
 *
 * The loop waits in one of three ways. It announces (ring_before_sleep:
 * the F3/F4 handshake above) and is woken by the eventfd; or it dozes
 * (ring_doze) or holds (ring_hold): a bounded wait announced to nobody,
 * after which it drains the rings, so nothing a pool thread pushed meanwhile can
 * be missed, and no pool thread writes the eventfd for it. Neither touches a
 * flag or a fence; each pays the owed wake-ups first (O1), as
 * ring_before_sleep does, so no parked pool thread waits for a job through it.
 * A hold differs from a doze only in what ends it early (a doze watches
 * the sockets, a hold does not), which is the loop's business, not the
 * protocol's: the model gives the loop the same choice of the two.
 *
 * Every ordering named here (F1..F5, X1, C1, O1, and R1/A1, R2/A2, R3 in spsc_ring.h)
 * is written through ring_order.h, so a mutant build can remove exactly one;
 * `make mutants` requires a test to fail on each. handoffs/tests/
 * ring_protocol.pml models this file's protocol (both parks, two pool threads
 * racing for loop_parked, the eventfd doorbell, shutdown, the capacity rule)
 * under a weak store model, and check_steps.py keeps its steps in the order
 * of the operations below. */
#include "handoff.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "../lib/aligned.h"
#include "../lib/futex.h"
#include "../lib/clock.h"
#include "../lib/cpu_relax.h"
#include "ring_order.h"
#include "spin_policy.h"
#include "spsc_ring.h"

/* The adaptive budgets (spin_iters == -1 and spin_ns <= 0 for the pool threads,
 * loop_spin_ns == -1 for the loop) are chosen by spin_policy.h from the waits
 * each side has seen. A pool thread starts at 8 us: the gap between jobs in the
 * loop-bound regime is the loop's per-request cost, 5-10 us, and a park costs
 * ~20 us here. The loop starts at 0 (its spin delays socket work) and learns
 * from the pool threads' wake-up stamps. Neither spins longer than the park costs
 * can justify: 64 us at most. */
#define RING_WORKER_START_SPIN_NS 8000L
#define RING_LOOP_START_SPIN_NS 0L
#define RING_MAX_ADAPTIVE_SPIN_NS 64000L
/* sched_yield calls between spinning and parking (crossbeam uses 4): cheap
 * when the core is idle, and hand the core to a runnable loop when shared. */
#define RING_YIELDS 4
/* Longest run of pause instructions between two looks at the ring
 * (crossbeam's backoff doubles 1, 2, ..., 64). */
#define RING_MAX_PAUSE_STEP 64
/* Dozing (ring_doze): while the pool has a queue, the loop waits for the next
 * completion on a timer rather than asking a pool thread to wake it, because the
 * pool thread is the busy stage and a wake-up is its eventfd write, which wakes an
 * idle vCPU: an inter-processor interrupt, dear in a guest
 * (handoffs/README.md, "Dozing"). The pace is each pool thread's own: its time per
 * job over runs of RING_PACE_RUN jobs taken without waiting (measured by the
 * pool thread, so the loop's wake-up latency, which a pace seen from the loop
 * would include, cannot keep it parking). A doze lasts at least
 * RING_DOZE_MIN_NS (a timer wake costs the loop a few us) and at most
 * RING_DOZE_MAX_NS (what a response may wait for the loop to look); within
 * those, the work queued ahead of the pool over RING_DOZE_AHEAD, and for a
 * slow pool at least a quarter of the fastest pool thread's pace. A pace slower
 * than four of the longest dozes is not dozed through: its wake-ups are a
 * small part of its time per job, and more timer wakes per job would cost the
 * loop more than they save the pool. A pace faster than two of the shortest
 * dozes gets through several jobs per doze, so a doze must be judged against
 * the queue, not the job: such a pool is dozed through only while the work
 * queued ahead of it lasts RING_DOZE_AHEAD dozes (pipelined requests,
 * hundreds of connections), and the doze is that work over RING_DOZE_AHEAD. A
 * short queue of fast jobs (a few connections, each with one request) is not:
 * there the loop's CPU is the scarce one, a doze would be much of a
 * response's wait, and timer wakes lost more than they saved (measured with
 * dozing for every fast pace). Once four paces, or four dozes, have gone by
 * with no completion the pool is not busy but stuck (a slow request, I/O, the
 * GIL elsewhere): the loop announces its sleep and is woken as before. */
#define RING_PACE_RUN 8 /* jobs per pace sample: two clock reads per 8 completions */
/* (RING_DOZE_MIN_NS, RING_DOZE_MAX_NS and RING_DOZE_AHEAD are in ring_order.h,
 * for the tests.) */

/* The clock of the doze's and the hold's stall rules. A test that includes
 * this file defines it first to fix the time its rule cases are judged at
 * (batch_test.c), so that the rule, not the scheduler, decides them. */
#ifndef RING_POLICY_NOW
#define RING_POLICY_NOW() clock_ns()
#endif

struct ring_thread {
    struct spsc_ring req;  /* loop -> pool thread */
    struct spsc_ring done; /* pool thread -> loop */
    /* Futex word: 1 while the pool thread is parked or about to park. Written by
     * the pool thread (1, and 0 after it finds work) and by the loop (exchange to 0
     * when it wakes it), so it has a line of its own, shared only with
     * the loop's bookkeeping of its wake-ups below (the loop reads this line
     * on every submit anyway). */
    _Alignas(CACHE_LINE) atomic_int parked;
    /* When the loop last woke this pool thread (clock_ns), written just before
     * the futex_wake: tells the pool thread's policy how long its wait really was. */
    _Atomic uint64_t wake_at;
    /* The loop's own: a submit saw this pool thread parked and its wake-up is
     * owed to the end of the batch (ring_flush). */
    bool wake_owed;
    unsigned owed_jobs; /* jobs queued since the wake-up became owed */
    /* The pool thread's own: its adaptive spin policy, and its pace (ring_doze):
     * run jobs completed since run_from without a wait in between (0: the
     * next completion starts a run). */
    _Alignas(CACHE_LINE) struct spin_policy policy;
    unsigned run;
    uint64_t run_from;
    uint64_t cpu_from;     /* the thread's CPU clock at run_from */
    /* Written by the pool thread, read by the loop's ring_doze and ring_hold: its
     * time per job while it has a queue, and its own CPU time per job over
     * the same runs (EWMAs over runs; 0: not known yet). */
    _Alignas(CACHE_LINE) _Atomic uint64_t pace_ns;
    _Atomic uint64_t busy_ns;
} __attribute__((aligned(CACHE_LINE)));

struct ring_handoff {
    struct handoff base;
    struct ring_thread *w;
    unsigned inited;
    /* Loop-side state, written by the loop. */
    _Alignas(CACHE_LINE) unsigned drain_next;
    unsigned owed;  /* pool threads with wake_owed set */
    int efd;
    bool loop_adaptive;
    long loop_spin_ns;     /* fixed budget when !loop_adaptive */
    uint64_t sleep_from;   /* clock_ns when the loop ran out of completions; 0: no wait */
    uint64_t done_at;      /* clock_ns of the last drain that found completions while
                            * the pool had a queue (0: none since it had none) */
    long doze_max_ns;      /* the longest doze (0: never) */
    long hold_max_ns;      /* the longest hold (0: never) */
    struct spin_policy loop_policy;
    uint64_t wakes_seen;   /* loop.wakes_sent when the loop last learnt from a wait */
    /* 1 while the loop is in (or about to enter) epoll_wait. Set/cleared by the
     * loop, exchanged to 0 by the one pool thread that writes the eventfd. */
    _Alignas(CACHE_LINE) atomic_int loop_parked;
    _Atomic uint64_t loop_wake_at; /* when a pool thread last wrote the eventfd (clock_ns) */
    /* Read-mostly. */
    _Alignas(CACHE_LINE) atomic_bool stopping;
    long spin_iters; /* used when spin_ns <= 0 */
    long spin_ns;
    int yields;
    bool adaptive; /* pool threads: budget from w->policy, not spin_ns/spin_iters */
};

static void ring_destroy(struct handoff *base)
{
    struct ring_handoff *h = (struct ring_handoff *)base;
    if (!h)
        return;
    for (unsigned i = 0; i < h->inited; i++) {
        spsc_destroy(&h->w[i].req);
        spsc_destroy(&h->w[i].done);
    }
    free(h->w);
    if (h->efd >= 0)
        close(h->efd);
    handoff_free(h);
}

static struct handoff *ring_create(const struct handoff_config *cfg)
{
    struct ring_handoff *h = handoff_alloc(&handoff_ring, cfg, sizeof *h);
    if (!h)
        return NULL;
    h->efd = -1;
    if (cfg->spin_ns > 0) {
        h->spin_ns = cfg->spin_ns;
    } else if (cfg->spin_iters >= 0) {
        h->spin_iters = cfg->spin_iters;
    } else {
        h->adaptive = true;
    }
    /* Spinning is cheap only if the loop and every pool thread can each have a core. */
    bool spare = spin_policy_spare_core(cfg->threads + 1);
    /* The loop learns only where a core is spare. Without one, the loop's
     * spin runs on the core the pool thread needs to produce the very
     * completion the loop waits for (and the client's), so its waits grow
     * with its own budget; in the stress harness on a 2-vCPU guest the two
     * policies then chased each other (the budget changed between most 10 ms
     * samples). There the adaptive loop does not spin at all. */
    h->loop_adaptive = cfg->loop_spin_ns < 0 && spare;
    h->loop_spin_ns = cfg->loop_spin_ns > 0 ? cfg->loop_spin_ns : 0;
    h->doze_max_ns = cfg->loop_doze_ns < 0 ? 0 : cfg->loop_doze_ns > 0 ? cfg->loop_doze_ns : RING_DOZE_MAX_NS;
    h->hold_max_ns = cfg->loop_hold_ns < 0 ? 0 : cfg->loop_hold_ns > 0 ? cfg->loop_hold_ns : RING_HOLD_MAX_NS;
    spin_policy_init(&h->loop_policy, SPIN_POLICY_PARK_NS, spare, RING_MAX_ADAPTIVE_SPIN_NS,
                     RING_LOOP_START_SPIN_NS);
    /* "0 = park at once": no spinning and no yields either. */
    h->yields = (cfg->spin_ns <= 0 && cfg->spin_iters == 0) ? 0 : RING_YIELDS;
    h->w = aligned_zalloc(cfg->threads * sizeof *h->w);
    if (!h->w)
        goto err;
    for (; h->inited < cfg->threads; h->inited++) {
        struct ring_thread *w = &h->w[h->inited];
        atomic_init(&w->parked, 0);
        spin_policy_init(&w->policy, SPIN_POLICY_PARK_NS, spare, RING_MAX_ADAPTIVE_SPIN_NS,
                         RING_WORKER_START_SPIN_NS);
        if (spsc_init(&w->req, cfg->capacity) < 0 || spsc_init(&w->done, cfg->capacity) < 0) {
            h->inited++;
            goto err;
        }
    }
    h->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (h->efd < 0)
        goto err;
    return &h->base;
err:;
    int saved = errno ? errno : ENOMEM;
    ring_destroy(&h->base);
    errno = saved;
    return NULL;
}

/* ---------------------------------------------------------------- loop side */

/* Pays the wake-up ring_submit left owed to pool thread w. Between the submit's
 * look at `parked` and this exchange the pool thread either stayed parked (the
 * exchange takes the 1 and wakes it) or found work and withdrew (the
 * exchange sees 0: nothing to do). */
static void pay_wake(struct ring_handoff *h, struct ring_thread *w)
{
    w->wake_owed = false;
    h->owed--;
    if (RING_HAS_X1) {
        /* X1: clear the flag, then wake. The pool thread's futex_wait(parked, 1)
         * then either finds 0 (and returns) or is already asleep (and this
         * wake finds it). Wake-then-clear would let a pool thread that enters
         * futex_wait between the two sleep on a 1 after the wake has gone.
         * The exchange makes exactly one wake per park. */
        if (atomic_exchange_explicit(&w->parked, 0, memory_order_relaxed) != 1)
            return;
        /* For the pool thread's spin policy only; the handshake does not read it. */
        atomic_store_explicit(&w->wake_at, clock_ns(), memory_order_relaxed);
        futex_wake(&w->parked, 1);
    } else { /* the X1 mutant */
        futex_wake(&w->parked, 1);
        atomic_store_explicit(&w->parked, 0, memory_order_relaxed);
    }
    counter_inc(&h->base.loop.submit_syscalls);
    counter_inc(&h->base.loop.wakes_sent);
}

static int ring_submit(struct handoff *base, unsigned wi, struct job *job)
{
    struct ring_handoff *h = (struct ring_handoff *)base;
    struct ring_thread *w = &h->w[wi];
    if (!spsc_push(&w->req, job)) { /* R1 inside */
        counter_inc(&base->loop.full);
        return HANDOFF_FULL;
    }
    counter_inc(&base->loop.submitted);
    /* F1: pairs with F2 in ring_take (store-buffering shape, see the top). */
    RING_FENCE(F1);
    if (w->wake_owed) {
        /* A long batch: start the pool thread on what is queued rather than
         * leave it idle while the loop parses the rest. */
        if (++w->owed_jobs >= RING_WAKE_BATCH)
            pay_wake(h, w);
    } else if (atomic_load_explicit(&w->parked, memory_order_relaxed)) {
        /* (A plain load: a busy pool thread's flag is 0 and its line stays
         * shared; pay_wake's exchange takes it exclusive once per park.)
         * O1: the pool thread is parked (or about to park) and will not see this
         * job by itself. Owe it a wake-up, paid by ring_flush at the end of
         * the batch, so that a pass that parses k requests wakes it once,
         * with all k queued, instead of waking it at the first and letting
         * it run dry and park again after each of the rest. */
        w->wake_owed = true;
        w->owed_jobs = 1;
        h->owed++;
    }
    return HANDOFF_OK;
}

/* The end of a batch: pay every wake-up still owed (the loop calls it after
 * each pass's socket events; ring_before_sleep calls it before the loop can
 * block: O1). */
static void ring_flush(struct handoff *base)
{
    struct ring_handoff *h = (struct ring_handoff *)base;
    for (unsigned i = 0; h->owed > 0 && i < base->active; i++)
        if (h->w[i].wake_owed)
            pay_wake(h, &h->w[i]);
}

/* Edge-triggered, and never read. An eventfd write wakes the fd's wait
 * queue every time, and epoll queues an edge-triggered item again on every
 * wake-up, so each write is an event even while the count is not zero: the
 * eventfd is a doorbell, not a counter, and the loop pays no read(2) to
 * reset it (the rings say what is there). The count only grows, by one per
 * write of a pool thread that found the loop parked; it would reach its limit
 * (2^64 - 2, after which a write fails with EAGAIN) after centuries of
 * writes. handoffs/tests/batch_test.c checks that an unread eventfd still
 * reports the next write. */
static int ring_watch(struct handoff *base, int epfd, uint64_t tag)
{
    struct ring_handoff *h = (struct ring_handoff *)base;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.u64 = tag};
    return epoll_ctl(epfd, EPOLL_CTL_ADD, h->efd, &ev);
}

static size_t ring_drain(struct handoff *base, bool fd_ready, struct job **out, size_t max)
{
    struct ring_handoff *h = (struct ring_handoff *)base;
    (void)fd_ready; /* the doorbell needs no reset (ring_watch) */
    size_t got = 0;
    for (unsigned visited = 0; visited < base->active && got < max; visited++) {
        struct spsc_ring *r = &h->w[h->drain_next].done;
        struct job *job;
        while (got < max && (job = spsc_pop(r)) != NULL) /* A1 inside */
            out[got++] = job;
        if (got < max) /* this ring is empty: next drain starts after it */
            h->drain_next = (h->drain_next + 1) % base->active;
    }
    counter_add(&base->loop.drained, got);
    if (got && (h->doze_max_ns || h->hold_max_ns)) /* the stall rule of ring_doze and ring_hold */
        h->done_at = clock_ns();
    return got;
}

/* Any completion queued? (consumer-side look at every ring, no pop). */
static bool any_done(struct ring_handoff *h)
{
    for (unsigned i = 0; i < h->base.active; i++)
        if (spsc_nonempty(&h->w[i].done))
            return true;
    return false;
}

/* The loop's spin: poll the completion rings until `until`. */
static bool spin_for_done(struct ring_handoff *h, uint64_t until)
{
    counter_t *spins = &h->base.loop.loop_spins;
    do {
        for (int i = 0; i < 32; i++)
            cpu_relax();
        counter_inc(spins);
        if (any_done(h))
            return true;
    } while (clock_ns() < until);
    return false;
}

static void loop_record(struct ring_handoff *h, uint64_t wait_ns)
{
    if (!h->loop_adaptive)
        return;
    /* A wait during which the loop had to wake a parked pool thread measures that
     * pool thread's wake-up, not the pool's service time: learning from it would
     * couple the two policies (the pool thread parks -> the loop's waits grow ->
     * the loop parks -> the pool thread's waits grow ...). Skip it. */
    uint64_t wakes = counter_get(&h->base.loop.wakes_sent);
    if (wakes != h->wakes_seen) {
        h->wakes_seen = wakes;
        return;
    }
    spin_policy_record(&h->loop_policy, wait_ns);
    atomic_store_explicit(&h->base.loop.loop_spin_budget_ns, (uint64_t)h->loop_policy.budget_ns,
                          memory_order_relaxed);
}

static bool ring_before_sleep(struct handoff *base, unsigned outstanding)
{
    struct ring_handoff *h = (struct ring_handoff *)base;
    /* O1: no job may wait for a wake-up owed past the point where the loop
     * can block. */
    if (RING_HAS_O1)
        ring_flush(base);
    h->sleep_from = 0;
    if (outstanding > 0) {
        /* The loop waits for the pool: spin a little first (the budget is
         * the policy's, or the fixed --loop-spin). The spin only looks; the
         * handshake below is the same whether it ran or not. */
        uint64_t t0 = clock_ns();
        long budget = h->loop_adaptive ? h->loop_policy.budget_ns : h->loop_spin_ns;
        if (budget > 0 && spin_for_done(h, t0 + (uint64_t)budget)) {
            counter_inc(&base->loop.loop_spin_hits);
            loop_record(h, clock_ns() - t0);
            return true;
        }
        h->sleep_from = t0;
    }
    atomic_store_explicit(&h->loop_parked, 1, memory_order_relaxed);
    counter_inc(&base->loop.loop_parks);
    /* F4: pairs with F3 in ring_complete. After it, either our re-check sees
     * a completion pushed before F3, or that pool thread's load after F3 sees
     * loop_parked == 1 and writes the eventfd. */
    RING_FENCE(F4);
    for (unsigned i = 0; i < base->active; i++)
        if (spsc_nonempty(&h->w[i].done)) { /* A1, re-read after the fence (C1) */
            atomic_store_explicit(&h->loop_parked, 0, memory_order_relaxed);
            if (h->sleep_from)
                loop_record(h, clock_ns() - h->sleep_from);
            h->sleep_from = 0;
            return true;
        }
    return false;
}

/* The loop is about to wait with `outstanding` jobs out: doze (a bounded,
 * unannounced wait, see RING_DOZE_MIN_NS) while the pool has a queue and has
 * been completing at a steady pace, else 0 (ring_before_sleep: announce and
 * be woken). Dozing is polling: loop_parked stays 0, so no pool thread writes the
 * eventfd, and nothing can be lost, because the loop drains the rings when
 * the doze ends (ring.c is `polled`); a completion waits at most the doze. */
static uint64_t ring_doze(struct handoff *base, unsigned outstanding)
{
    struct ring_handoff *h = (struct ring_handoff *)base;
    /* O1 for the dozing wait too: no parked pool thread waits for its wake-up
     * until the doze is over. */
    if (RING_HAS_O1)
        ring_flush(base);
    if (outstanding <= base->active) {
        /* No queue: the pool will go idle, and the time until its next
         * completion is not its pace. */
        h->done_at = 0;
        return 0;
    }
    uint64_t most = (uint64_t)h->doze_max_ns, least = RING_DOZE_MIN_NS < most ? RING_DOZE_MIN_NS : most;
    uint64_t pace = 0;
    for (unsigned i = 0; i < base->active; i++) {
        uint64_t p = atomic_load_explicit(&h->w[i].pace_ns, memory_order_relaxed);
        if (p && (!pace || p < pace))
            pace = p;
    }
    if (!most || !pace || pace > 4 * most || !h->done_at)
        return 0;
    /* The work queued ahead of the pool: a doze of a RING_DOZE_AHEADth of
     * it adds a small part to the time a response already waits in that
     * queue, and the loop, woken by its timer once per doze, drains many
     * completions at a time. */
    uint64_t ahead = (uint64_t)(outstanding - base->active) * pace / base->active;
    uint64_t doze = ahead / RING_DOZE_AHEAD;
    if (pace < 2 * least) {
        /* A fast pool (pipelined hello: a few us a job) gets through many
         * jobs in one doze. Worth it only while the queue ahead of the pool
         * outlasts RING_DOZE_AHEAD dozes. A short queue (few connections,
         * unpipelined) does not doze: there each doze would be most of a
         * response's wait. */
#if defined(RING_DOZE_MUTANT_D1) /* D1: no doze for a fast pool */
        ahead = 0;
#elif defined(RING_DOZE_MUTANT_D2) /* D2: a fast pool dozed through whatever its queue */
        ahead = RING_DOZE_AHEAD * least;
#endif
        if (ahead < RING_DOZE_AHEAD * least)
            return 0;
    } else {
        /* A slow pool (an app of tens of us) is dozed through for a quarter
         * of its pace, or longer while its queue allows: quarter-pace dozes
         * alone could fire the loop's timer up to four times a job, CPU the
         * loop takes from the pool and the client when the two vCPUs are
         * shared (a socket's event ends a doze early all the same). */
#ifdef RING_DOZE_MUTANT_D5 /* D5: a slow pool's doze ignores its queue */
        doze = 0;
#endif
        if (doze < pace / 4)
            doze = pace / 4;
    }
    doze = doze < least ? least : doze > most ? most : doze;
    /* The stall rule: four paces, or four dozes, with no completion. */
#ifndef RING_DOZE_MUTANT_D3 /* D3: the stall rule removed */
#ifdef RING_DOZE_MUTANT_D4 /* D4: the stall rule removed for a fast pool only */
    if (pace >= 2 * least)
#endif
    if (RING_POLICY_NOW() - h->done_at > 4 * (pace > doze ? pace : doze))
        return 0;
#endif
    counter_inc(&base->loop.loop_dozes);
    return doze;
}

/* The loop is about to wait with `outstanding` jobs out: hold (sleep deaf to
 * its sockets, unannounced) while every pool thread has work queued, for the
 * shortest of their queues at their own pace less a margin (a quarter of it,
 * at least RING_HOLD_MARGIN_NS or a quarter of the slowest pace), else 0
 * (doze or announce). Under a closed-loop client the socket events of a busy pool thread
 * come about one per request (each response written brings the next
 * request), so a loop that waits on its sockets is woken about once per
 * request, and on a guest whose vCPUs the pool and the client keep busy each
 * wake preempts one of them. A hold lets the requests and the completions
 * gather and takes them in one pass: the pool never waits for them (the
 * hold ends while it still has work), and the responses wait at most the
 * hold, a part of what each already waits in the queue. Only for pool threads
 * that work: one on its CPU less than a quarter of its pace (an app that
 * waits on I/O) preempts nobody when woken, and holding would starve it. As
 * a doze, a hold is polling: loop_parked stays 0 and the fences are
 * untouched. The stall rule is the doze's: four of the slowest paces with
 * no completion, and the pool is stuck, not busy. */
static uint64_t ring_hold(struct handoff *base, unsigned outstanding)
{
    struct ring_handoff *h = (struct ring_handoff *)base;
    if (RING_HAS_O1) /* O1 for the hold as for any wait */
        ring_flush(base);
    if (!h->hold_max_ns || outstanding <= base->active || !h->done_at)
        return 0;
    uint64_t ahead = UINT64_MAX, slowest = 0;
    for (unsigned i = 0; i < base->active; i++) { /* those beyond have no work */
        struct ring_thread *w = &h->w[i];
        uint64_t pace = atomic_load_explicit(&w->pace_ns, memory_order_relaxed);
        /* Queued, not yet taken: our tail against the pool thread's head (a
         * relaxed look: a stale head overcounts by the jobs taken in the
         * last moments, nanoseconds of work against the margin). */
        unsigned queued = atomic_load_explicit(&w->req.tail, memory_order_relaxed) -
                          atomic_load_explicit(&w->req.head, memory_order_relaxed);
#ifdef RING_HOLD_MUTANT_H3 /* H3: a pool thread with nothing queued does not stop the hold */
        if (!queued)
            continue;
#endif
        if (!pace || pace < RING_HOLD_PACE_NS || !queued)
            return 0;
#ifndef RING_HOLD_MUTANT_H5 /* H5: a pool thread that waits is held as one that works */
        /* On its CPU less than a quarter of its pace: it waits (on I/O, on
         * the GIL held elsewhere), and its wake-ups preempt nobody; a hold
         * would only keep its next request from it. */
        if (4 * atomic_load_explicit(&w->busy_ns, memory_order_relaxed) < pace)
            return 0;
#endif
        if ((uint64_t)queued * pace < ahead)
            ahead = (uint64_t)queued * pace;
        if (pace > slowest)
            slowest = pace;
    }
#ifndef RING_HOLD_MUTANT_H2 /* H2: the stall rule removed */
    if (RING_POLICY_NOW() - h->done_at > 4 * slowest)
        return 0;
#endif
    /* The pass after the hold takes what gathered, about a queue's worth of
     * completions and of requests, so it is left a quarter of the queued
     * work, not only a fixed margin: a queue the dispatcher keeps near the
     * hold's ceiling would otherwise run dry during that pass. */
    uint64_t margin = slowest / 4 > RING_HOLD_MARGIN_NS ? slowest / 4 : RING_HOLD_MARGIN_NS;
    if (ahead / 4 > margin)
        margin = ahead / 4;
#ifdef RING_HOLD_MUTANT_H4 /* H4: no margin: the loop wakes as the work queued runs out */
    margin = 0;
#endif
    if (ahead < margin + RING_HOLD_MIN_NS)
        return 0;
    uint64_t hold = ahead - margin;
#ifndef RING_HOLD_MUTANT_H1 /* H1: no ceiling */
    if (hold > (uint64_t)h->hold_max_ns)
        hold = (uint64_t)h->hold_max_ns;
#endif
    counter_inc(&base->loop.loop_holds);
    return hold;
}

/* Clearing late is harmless (at worst a pool thread writes the eventfd for nothing
 * and the next epoll_wait returns at once); the loop polls every pass. */
static void ring_after_sleep(struct handoff *base)
{
    struct ring_handoff *h = (struct ring_handoff *)base;
    atomic_store_explicit(&h->loop_parked, 0, memory_order_relaxed);
    /* A pool thread's wake-up stamp after we started waiting is when the first
     * completion came: that was the wait. Woken by a socket instead: no
     * sample (the wait for the pool was cut short, its length unknown). */
    uint64_t stamp = atomic_load_explicit(&h->loop_wake_at, memory_order_relaxed);
    if (h->sleep_from && stamp > h->sleep_from)
        loop_record(h, stamp - h->sleep_from);
    h->sleep_from = 0;
}

/* --------------------------------------------------------- pool thread side */

static struct job *ring_try_take(struct handoff *base, unsigned wi)
{
    struct ring_handoff *h = (struct ring_handoff *)base;
    struct job *job = spsc_pop(&h->w[wi].req); /* A1 */
    if (job)
        counter_inc(&base->thread[wi].taken);
    return job;
}

/* Spin with doubling runs of pause between looks at the ring, for spin_iters
 * pauses or spin_ns nanoseconds (from t0). NULL if the budget ran out. */
static struct job *spin_for_job(struct ring_handoff *h, struct ring_thread *w,
                                struct handoff_thread_counters *c, uint64_t t0, long spin_ns)
{
    long deadline = spin_ns > 0 ? (long)t0 + spin_ns : 0;
    long left = spin_ns > 0 ? -1 : h->spin_iters;
    long step = 1;
    while (deadline ? (long)clock_ns() < deadline : left > 0) {
        long n = (left >= 0 && left < step) ? left : step;
        for (long i = 0; i < n; i++)
            cpu_relax();
        counter_add(&c->spins, (uint64_t)n);
        if (left >= 0)
            left -= n;
        struct job *job = spsc_pop(&w->req);
        if (job)
            return job;
        /* An unbounded budget (benchmarks) must still notice shutdown. */
        if (atomic_load_explicit(&h->stopping, memory_order_relaxed))
            return NULL;
        if (step < RING_MAX_PAUSE_STEP)
            step *= 2;
    }
    return NULL;
}

static struct job *ring_take(struct handoff *base, unsigned wi)
{
    struct ring_handoff *h = (struct ring_handoff *)base;
    struct ring_thread *w = &h->w[wi];
    struct handoff_thread_counters *c = &base->thread[wi];
    struct job *job = spsc_pop(&w->req);
    if (job) {
        counter_inc(&c->taken);
        return job;
    }
    /* Nothing there: a wait starts (and the pace's run ends: a wait is not
     * work). The spin and the yields only look again; the handshake below
     * is the same whatever budget they had. */
    w->run = 0;
    uint64_t t0 = h->adaptive || h->spin_ns > 0 ? clock_ns() : 0;
    long budget = h->adaptive ? w->policy.budget_ns : h->spin_ns;
    bool woken = false;
    if (!h->adaptive || budget > 0)
        job = spin_for_job(h, w, c, t0, budget);
    if (job)
        counter_inc(&c->spin_hits);
    int yields = h->adaptive && budget == 0 ? 0 : h->yields; /* budget 0: park at once */
    for (int i = 0; !job && i < yields; i++) {
        sched_yield();
        counter_inc(&c->yields);
        counter_inc(&c->take_syscalls);
        job = spsc_pop(&w->req);
    }
    while (!job) {
        atomic_store_explicit(&w->parked, 1, memory_order_relaxed);
        /* F2: pairs with F1 in ring_submit and F5 in ring_shutdown. */
        RING_FENCE(F2);
        job = spsc_pop(&w->req); /* the re-check: reloads tail when empty (A1) */
        if (job)
            break;
        if (atomic_load_explicit(&h->stopping, memory_order_relaxed)) {
            atomic_store_explicit(&w->parked, 0, memory_order_relaxed);
            return NULL;
        }
        counter_inc(&c->parks);
        counter_inc(&c->take_syscalls);
        /* Sleeps only if parked is still 1 when the kernel looks, so a wake
         * that exchanged it to 0 after our re-check is not lost. Returns on a
         * wake, a signal or spuriously: the loop re-checks either way. */
        woken = futex_wait(&w->parked, 1) == 0;
        job = spsc_pop(&w->req);
    }
    /* Found work while announced as parked: withdraw, so the loop does not
     * pay for a wake we no longer need. (If it already took the flag, its
     * wake finds nobody asleep and costs only the syscall.) */
    if (atomic_load_explicit(&w->parked, memory_order_relaxed))
        atomic_store_explicit(&w->parked, 0, memory_order_relaxed);
    counter_inc(&c->taken);
    if (h->adaptive) {
        /* The wait lasted until the job came: when the loop's wake-up says,
         * if it woke us during this wait, else until now. */
        uint64_t end = clock_ns();
        uint64_t stamp = atomic_load_explicit(&w->wake_at, memory_order_relaxed);
        spin_policy_record(&w->policy, (woken && stamp > t0 && stamp < end ? stamp : end) - t0);
        atomic_store_explicit(&c->spin_budget_ns, (uint64_t)w->policy.budget_ns, memory_order_relaxed);
    }
    return job;
}

/* The pool thread's pace (ring_doze): every RING_PACE_RUN completions with no
 * wait between them, the time they took per job, smoothed. For ring_doze
 * only; the handshake does not read it. */
static void record_pace(struct ring_thread *w)
{
    if (w->run == 0) {
        w->run_from = clock_ns();
        w->cpu_from = clock_thread_cpu_ns();
        w->run = 1;
        return;
    }
    if (++w->run <= RING_PACE_RUN)
        return;
    uint64_t now = clock_ns(), cpu = clock_thread_cpu_ns();
    uint64_t sample = (now - w->run_from) / RING_PACE_RUN, busy = (cpu - w->cpu_from) / RING_PACE_RUN;
    uint64_t old = atomic_load_explicit(&w->pace_ns, memory_order_relaxed);
    atomic_store_explicit(&w->pace_ns, old ? (old * 3 + sample) / 4 : sample, memory_order_relaxed);
    old = atomic_load_explicit(&w->busy_ns, memory_order_relaxed);
    atomic_store_explicit(&w->busy_ns, old ? (old * 3 + busy) / 4 : busy, memory_order_relaxed);
    w->run_from = now;
    w->cpu_from = cpu;
    w->run = 1;
}

/* A run spans jobs that ran back to back. One handed back unrun took no
 * time, and counted in a run it would read the thread as faster than its
 * jobs are: it ends the run, as a wait does, and its completion starts the
 * next. */
static void ring_unrun(struct handoff *base, unsigned wi)
{
    ((struct ring_handoff *)base)->w[wi].run = 0;
}

static int ring_complete(struct handoff *base, unsigned wi, struct job *job)
{
    struct ring_handoff *h = (struct ring_handoff *)base;
    struct handoff_thread_counters *c = &base->thread[wi];
    if (!spsc_push(&h->w[wi].done, job)) { /* R1; full is impossible under the capacity rule */
        errno = ENOBUFS;
        return -1;
    }
    counter_inc(&c->completed);
    if (h->doze_max_ns || h->hold_max_ns)
        record_pace(&h->w[wi]);
    /* F3: pairs with F4 in ring_before_sleep (store-buffering shape). */
    RING_FENCE(F3);
    /* Several pool threads may see the flag; the exchange lets one write. */
    if (atomic_load_explicit(&h->loop_parked, memory_order_relaxed) &&
        atomic_exchange_explicit(&h->loop_parked, 0, memory_order_relaxed) == 1) {
        uint64_t one = 1;
        counter_inc(&c->complete_syscalls);
        counter_inc(&c->loop_wakes);
        atomic_store_explicit(&h->loop_wake_at, clock_ns(), memory_order_relaxed); /* policy only */
        /* The job is in the completion ring whatever write says, so this is
         * still a success (-1 would tell the pool it still owns the job). A
         * lost nudge costs latency, not the job: the ring is polled, and the
         * loop drains it on every pass, at least once a second. */
        if (write(h->efd, &one, sizeof one) != sizeof one) {
            /* (only a full eventfd counter or a closed fd: neither loses the job) */
        }
    }
    return 0;
}

/* Pool threads at n and above have nothing outstanding (handoff.h): the loop
 * side's scans stop at n. A wake-up still owed to one of them (its job was
 * found without it, and is done) is paid first, so that none is left
 * outside the scans. */
static void ring_set_active(struct handoff *base, unsigned n)
{
    struct ring_handoff *h = (struct ring_handoff *)base;
    ring_flush(base);
    /* A pool thread coming back into use has a pace from another load, perhaps
     * minutes old: unknown again (it idled, so it writes neither now). */
    for (unsigned i = base->active; i < n; i++) {
        atomic_store_explicit(&h->w[i].pace_ns, 0, memory_order_relaxed);
        atomic_store_explicit(&h->w[i].busy_ns, 0, memory_order_relaxed);
    }
    base->active = n;
    if (h->drain_next >= n)
        h->drain_next = 0;
}

static void ring_shutdown(struct handoff *base)
{
    struct ring_handoff *h = (struct ring_handoff *)base;
    atomic_store_explicit(&h->stopping, true, memory_order_relaxed);
    /* F5: pairs with F2. A pool thread that parks after this sees `stopping` in
     * its re-check; one that parked before it has parked == 1 here. */
    RING_FENCE(F5);
    for (unsigned i = 0; i < base->threads; i++) {
        atomic_store_explicit(&h->w[i].parked, 0, memory_order_relaxed);
        futex_wake(&h->w[i].parked, 1);
    }
    uint64_t one = 1;
    if (write(h->efd, &one, sizeof one) < 0) {
        /* the loop only needs a nudge; a full counter already is one */
    }
}

const struct handoff_ops handoff_ring = {
    .name = "ring",
    .summary = "SPSC rings, spin-then-park, wake only if parked (0 syscalls when busy)",
    .create = ring_create,
    .destroy = ring_destroy,
    .submit = ring_submit,
    .flush = ring_flush,
    .watch = ring_watch,
    .drain = ring_drain,
    .polled = true,
    .before_sleep = ring_before_sleep,
    .after_sleep = ring_after_sleep,
    .doze = ring_doze,
    .hold = ring_hold,
    .set_active = ring_set_active,
    .try_take = ring_try_take,
    .take = ring_take,
    .complete = ring_complete,
    .unrun = ring_unrun,
    .shutdown = ring_shutdown,
};

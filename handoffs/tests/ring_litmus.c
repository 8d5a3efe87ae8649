/* ring_litmus.c — the store-buffering litmus test on the ring's own code.
 *
 *   ring_litmus worker|loop SECONDS [--expect-lost]
 *
 * Two threads pinned on different CPUs drive ring.c's real functions (this
 * file #includes ../ring.c) in a tight round loop that lands the two halves of
 * a park/wake handshake on top of each other, round after round:
 *
 *   worker: the loop thread ring_submit()s job k (and ring_flush()es the
 *     batch of one) as soon as it sees that the
 *     worker took job k-1; the worker, having taken k-1, calls ring_take()
 *     with no spin budget, so it misses, announces itself parked (F2 side)
 *     while the submit pushes and looks at `parked` (F1 side).
 *   loop: the worker ring_complete()s job k as soon as the loop drained k-1;
 *     the loop, having drained k-1, calls ring_before_sleep() (F4 side) while
 *     the complete pushes and looks at `loop_parked` (F3 side).
 *
 * The only thing replaced is the kernel: futex_wait / futex_wake become a
 * small emulation with the kernel's contract (futex_wait sleeps only if the
 * word still holds the expected value; a wake with nobody asleep is lost), and
 * the loop's epoll_wait becomes "wait until the worker's complete returned,
 * then is the eventfd readable?". A sleeper still asleep after the other side
 * has finished its half of the round would sleep forever in the real server:
 * that is a lost handshake. The test counts it, rescues the sleeper and goes on.
 *
 * Normal builds: a lost handshake is a failure (exit 1). Built as a fence
 * mutant (-DRING_MUTANT=RING_M_F1..F4, see ring_order.h) and run with
 * --expect-lost: at least one lost handshake must be seen within SECONDS, else
 * exit 1 — on x86 a missing seq_cst fence between a store and a later load of
 * another location lets the store wait in the store buffer past the load, and
 * this loop hits that window often. */
#include "../../lib/futex.h" /* first: ring.c's own include of it is then a no-op */

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long emu_futex_wait(atomic_int *word, int expected);
static long emu_futex_wake(atomic_int *word, int n);
#define futex_wait emu_futex_wait
#define futex_wake emu_futex_wake
#include "../ring.c"
#undef futex_wait
#undef futex_wake

#include "../../lib/clock.h"

struct job {
    unsigned long seq;
};

static struct handoff *H;
static double deadline;
static bool expect_lost;

/* Published by each side after its half of a round returned. */
static _Alignas(CACHE_LINE) atomic_ulong loop_done;   /* submits (worker test), drains (loop test) */
static _Alignas(CACHE_LINE) atomic_ulong worker_done; /* takes (worker test), completes (loop test) */
static _Alignas(CACHE_LINE) atomic_bool stop;
static _Alignas(CACHE_LINE) atomic_ulong lost, rounds, sleeps;
static atomic_bool shut; /* ring_shutdown was called: a sleeper left then is no loss */

/* ------------------------------------------------------- the kernel, emulated */

static pthread_mutex_t kernel = PTHREAD_MUTEX_INITIALIZER;
static bool asleep;             /* the worker is blocked in futex_wait */
static atomic_ulong *wait_peer; /* the other side's round counter */
static unsigned long wait_round;

static long emu_futex_wait(atomic_int *word, int expected)
{
    pthread_mutex_lock(&kernel);
    if (atomic_load(word) != expected) {
        pthread_mutex_unlock(&kernel);
        errno = EAGAIN;
        return -1;
    }
    asleep = true;
    pthread_mutex_unlock(&kernel);
    sleeps++;
    for (;;) {
        /* Read the peer's progress first, then whether we were woken: a wake
         * issued inside that round happened before its counter moved. */
        bool peer_finished = atomic_load(wait_peer) >= wait_round;
        bool over = atomic_load(&shut);
        pthread_mutex_lock(&kernel);
        bool still = asleep;
        if (still && (peer_finished || over))
            asleep = false; /* rescue: the real thread would sleep forever */
        pthread_mutex_unlock(&kernel);
        if (still && peer_finished)
            lost++;
        if (!still || peer_finished || over)
            return 0;
        cpu_relax();
    }
}

static long emu_futex_wake(atomic_int *word, int n)
{
    (void)word;
    (void)n;
    pthread_mutex_lock(&kernel);
    long woke = asleep;
    asleep = false;
    pthread_mutex_unlock(&kernel);
    return woke;
}

/* ----------------------------------------------------------------- helpers */

static void pin(int which)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) < 2)
        return; /* one CPU: the threads still race, just less often */
    int seen = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set) && seen++ == which) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(c, &one);
            pthread_setaffinity_np(pthread_self(), sizeof one, &one);
            return;
        }
}

static bool time_up(unsigned long r)
{
    if (atomic_load_explicit(&stop, memory_order_relaxed))
        return true;
    if (r % 1024 == 0 && (clock_s() > deadline || (expect_lost && lost > 0))) {
        atomic_store(&stop, true);
        return true;
    }
    return false;
}

/* Spin until *c reaches want (or the run stops); false if it stopped. */
static bool await(atomic_ulong *c, unsigned long want)
{
    unsigned n = 0;
    while (atomic_load_explicit(c, memory_order_acquire) < want) {
        if (atomic_load_explicit(&stop, memory_order_relaxed))
            return false;
        if (++n % 4096 == 0)
            sched_yield(); /* the peer lost its CPU: give it ours */
        cpu_relax();
    }
    return true;
}

/* A few pauses, varied per round (0..2^bits-1), so that the two halves slide
 * over each other: the side that sees the other's progress late (the one
 * that waits for it) gets fewer, the other side more. */
static void jitter(unsigned long r, unsigned bits)
{
    for (unsigned long i = ((r * 2654435761u) & 0xffffffffu) >> (32 - bits); i > 0; i--)
        cpu_relax();
}

/* --------------------------------------------- worker park: F1 against F2 */

static struct job jobs[2];

static void *wp_loop(void *p)
{
    (void)p;
    pin(0);
    for (unsigned long k = 1; !time_up(k); k++) {
        if (!await(&worker_done, k - 1)) /* the worker took job k-1 */
            break;
        jitter(k, 2);
        if (ring_submit(H, 0, &jobs[k & 1]) != HANDOFF_OK) {
            fprintf(stderr, "ring_litmus: submit refused\n");
            exit(2);
        }
        ring_flush(H); /* the end of the loop's batch: the owed wake-up, if any */
        atomic_store_explicit(&loop_done, k, memory_order_release);
    }
    atomic_store(&stop, true);
    atomic_store(&shut, true);
    ring_shutdown(H); /* the worker may be parked waiting for a job that never comes */
    return NULL;
}

static void *wp_worker(void *p)
{
    (void)p;
    pin(1);
    wait_peer = &loop_done;
    for (unsigned long k = 1;; k++) {
        wait_round = k;
        jitter(k * 7, 4);
        struct job *j = ring_take(H, 0);
        if (!j || atomic_load(&stop))
            break;
        atomic_store(&rounds, k);
        atomic_store_explicit(&worker_done, k, memory_order_release);
    }
    atomic_store(&stop, true);
    return NULL;
}

/* ----------------------------------------------- loop park: F3 against F4 */

static void *lp_worker(void *p)
{
    (void)p;
    pin(1);
    for (unsigned long k = 1; !time_up(k); k++) {
        if (!await(&loop_done, k - 1)) /* the loop drained job k-1 */
            break;
        jitter(k, 2);
        if (ring_complete(H, 0, &jobs[k & 1]) != 0) {
            fprintf(stderr, "ring_litmus: complete failed: %s\n", strerror(errno));
            exit(2);
        }
        atomic_store_explicit(&worker_done, k, memory_order_release);
    }
    atomic_store(&stop, true);
    return NULL;
}

static void *lp_loop(void *p)
{
    (void)p;
    pin(0);
    struct job *out[4];
    for (unsigned long k = 1; !atomic_load(&stop); k++) {
        /* Job k is on its way: announce the sleep, as the server's loop does. */
        jitter(k * 7, 4);
        if (!ring_before_sleep(H, 1)) {
            sleeps++;
            /* "epoll_wait(-1)": returns once the eventfd is readable. The only
             * writer is the worker's complete of this round, so once that has
             * returned, an unreadable eventfd means we would sleep forever. */
            if (!await(&worker_done, k))
                break;
            uint64_t v;
            if (read(((struct ring_handoff *)H)->efd, &v, sizeof v) != sizeof v)
                lost++; /* rescue: go on to the drain */
        } else {
            /* Completions already waiting: the server polls epoll with timeout
             * 0, which consumes the edge of a write made meanwhile (the ring's
             * eventfd is edge-triggered and never read). This read is that
             * consumption here, where readability stands in for "an edge is
             * pending": a stale count would hide a later lost write. */
            uint64_t v;
            if (read(((struct ring_handoff *)H)->efd, &v, sizeof v) < 0) {
                /* EAGAIN: nobody wrote it */
            }
        }
        ring_after_sleep(H);
        size_t got = 0;
        while (got == 0 && !atomic_load(&stop))
            got = ring_drain(H, false, out, 4);
        if (got > 1) {
            fprintf(stderr, "ring_litmus: drained %zu jobs in one round\n", got);
            exit(2);
        }
        atomic_store(&rounds, k);
        atomic_store_explicit(&loop_done, k, memory_order_release);
    }
    atomic_store(&stop, true);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[1], "worker") && strcmp(argv[1], "loop"))) {
        fprintf(stderr, "usage: ring_litmus worker|loop SECONDS [--expect-lost]\n");
        return 2;
    }
    bool worker_side = strcmp(argv[1], "worker") == 0;
    double seconds = strtod(argv[2], NULL);
    expect_lost = argc > 3 && strcmp(argv[3], "--expect-lost") == 0;
    /* Spin 0: every empty take goes straight to the park path. */
    struct handoff_config cfg = {.threads = 1, .capacity = 4, .spin_iters = 0, .spin_ns = 0};
    H = ring_create(&cfg);
    if (!H) {
        perror("ring_create");
        return 2;
    }
    deadline = clock_s() + seconds;
    pthread_t a, b;
    pthread_create(&a, NULL, worker_side ? wp_loop : lp_loop, NULL);
    pthread_create(&b, NULL, worker_side ? wp_worker : lp_worker, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    ring_destroy(H);

    const char *what = worker_side ? "worker park (F1/F2)" : "loop park (F3/F4)";
    unsigned long n_lost = atomic_load(&lost);
    printf("ring_litmus %-19s mutant=%d: %lu rounds, %lu sleeps, %lu lost handshakes\n", what,
           RING_MUTANT, (unsigned long)atomic_load(&rounds), (unsigned long)atomic_load(&sleeps), n_lost);
    if (expect_lost && n_lost == 0) {
        fprintf(stderr, "ring_litmus %s: FAIL: mutant %d lost no handshake in %.1f s\n", what,
                RING_MUTANT, seconds);
        return 1;
    }
    if (!expect_lost && n_lost > 0) {
        fprintf(stderr, "ring_litmus %s: FAIL: %lu lost handshakes with the fences in place\n",
                what, n_lost);
        return 1;
    }
    return 0;
}

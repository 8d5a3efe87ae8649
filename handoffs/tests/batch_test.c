/* batch_test.c — the ring pays at most one wake per batch, each way.
 *
 * 1. A worker parked (spin 0: it parks as soon as its ring is empty); the loop
 *    submits a burst of N jobs back to back: one futex wake (the first submit
 *    takes the flag with its exchange; the rest see 0) — one per park, never
 *    one per submit.
 * 2. The loop announced it will sleep (before_sleep said nothing is waiting);
 *    the worker completes N jobs back to back: exactly one eventfd write (the
 *    first complete takes loop_parked; the rest see 0), and one drain returns
 *    all N, in order.
 * Counters are the handoff's own (handoff.h), so this also pins what the
 * server's stats report for a burst. Exit 1 on a violation. */
#include "../handoff.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 8

struct job {
    int seq;
};

static struct handoff *h;
static struct job jobs[N];
static struct job *taken[N];
static atomic_int phase; /* 1: take N; 2: complete them */
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

static void *worker(void *p)
{
    (void)p;
    for (int i = 0; i < N; i++)
        taken[i] = handoff_ring.take(h, 0);
    atomic_store(&done, 1);
    while (atomic_load(&phase) != 2)
        pause_ms(1);
    for (int i = 0; i < N; i++)
        if (handoff_ring.complete(h, 0, taken[i]) != 0) {
            perror("complete");
            exit(1);
        }
    atomic_store(&done, 2);
    return NULL;
}

int main(void)
{
    struct handoff_config cfg = {.workers = 1, .capacity = 2 * N, .spin_iters = 0, .loop_spin_ns = 0};
    h = handoff_ring.create(&cfg);
    if (!h) {
        perror("create");
        return 2;
    }
    struct handoff_loop_counters *l = &h->loop;
    struct handoff_worker_counters *w = &h->worker[0];
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);

    /* 1. Submit a burst to a parked worker. */
    for (int i = 0; i < 2000 && counter_get(&w->parks) == 0; i++)
        pause_ms(1);
    pause_ms(20); /* into futex_wait, not just announced */
    if (counter_get(&w->parks) != 1)
        fail("worker parks before the burst", counter_get(&w->parks), 1);
    for (int i = 0; i < N; i++) {
        jobs[i].seq = i;
        if (handoff_ring.submit(h, 0, &jobs[i]) != HANDOFF_OK)
            fail("submit refused at", (unsigned long long)i, 0);
    }
    while (atomic_load(&done) != 1)
        pause_ms(1);
    /* One wake per park, never one per submit. (If this thread is preempted
     * mid-burst the worker may empty its ring and park again: then that is a
     * second batch and a second wake, still one per park.) */
    unsigned long long parks = counter_get(&w->parks);
    if (counter_get(&l->wakes_sent) != parks)
        fail("futex wakes for a burst of 8 submits (one per park)", counter_get(&l->wakes_sent), parks);
    if (counter_get(&l->submit_syscalls) != parks)
        fail("submit syscalls for the burst", counter_get(&l->submit_syscalls), parks);
    if (parks > 1)
        printf("batch_test: note: the worker parked %llu times during the burst (this thread was preempted)\n",
               parks);

    /* 2. Complete a burst to a parked loop. */
    if (handoff_ring.before_sleep(h, N))
        fail("before_sleep saw completions before any", 1, 0);
    atomic_store(&phase, 2);
    while (atomic_load(&done) != 2)
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

    handoff_ring.shutdown(h);
    pthread_join(t, NULL);
    handoff_ring.destroy(h);
    printf("batch_test: a burst of %d: %llu futex wake(s) for %llu park(s), 1 eventfd write, 1 drain: OK\n", N,
           (unsigned long long)counter_get(&l->wakes_sent), parks);
    return 0;
}

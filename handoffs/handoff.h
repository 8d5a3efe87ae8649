/* handoff.h — how a job crosses from the loop thread to a pool thread and back.
 *
 * One interface, one file per backend (dgram.c, condvar.c, eventfd.c, ring.c),
 * picked by name at run time (handoff_find). A backend moves `struct job *`
 * pointers and never looks inside one; the job's owner is whoever last took it
 * from the handoff: the loop after submit→drain, the pool thread after take→complete.
 * The handoff's own synchronisation (a kernel queue, a mutex, or the ring's
 * release/acquire pairs) is what publishes the job's contents to the other side.
 *
 * Threads: exactly one loop thread calls the "loop side" functions; exactly one
 * pool thread w (0 <= w < threads) calls the "pool thread side" functions
 * with its own index. shutdown may be called from any thread.
 *
 * Capacity: the loop never has more than `capacity` jobs outstanding on one
 * pool thread (submitted and not yet drained as finished; a job drained as an
 * intermediate message stays outstanding). Each outstanding job is in the
 * handoff at most once at a time. So complete never finds its queue full. */
#ifndef CSERVE_HANDOFF_H
#define CSERVE_HANDOFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../lib/counter.h"

struct job; /* opaque here */

/* wrk's tri-state: pushed / fatal / full (backpressure: try later). */
enum handoff_result { HANDOFF_OK = 0, HANDOFF_FULL = 1, HANDOFF_ERROR = -1 };

struct handoff_config {
    unsigned threads;   /* pool threads, >= 1 */
    unsigned capacity;  /* max outstanding jobs per pool thread; a power of two >= 2 */
    long spin_iters;    /* ring: pause iterations before yield/park; 0 = park at once;
                           -1 (with spin_ns <= 0) = adaptive (spin_policy.h) */
    long spin_ns;       /* ring: spin for this long instead (>0 overrides spin_iters) */
    long loop_spin_ns;  /* ring: the loop polls for completions this long before it parks
                           (in before_sleep); 0 = never; -1 = adaptive (spin_policy.h) */
    long loop_doze_ns;  /* ring: the longest doze (doze below); 0 = the default
                           (RING_DOZE_MAX_NS), < 0 = never doze */
    long loop_hold_ns;  /* ring: the longest hold (hold below); 0 = the default
                           (RING_HOLD_MAX_NS), < 0 = never hold */
};

/* Written only by the loop thread. */
struct handoff_loop_counters {
    counter_t submitted;       /* jobs accepted by submit */
    counter_t full;            /* submits refused for lack of space */
    counter_t submit_syscalls; /* syscalls inside submit, or the flush that ends its batch
                                  (send, write, futex wake) */
    counter_t wakes_sent;      /* wake-ups of a parked pool thread (submit or flush) */
    counter_t drained;         /* completions returned by drain */
    counter_t drain_syscalls;  /* syscalls inside drain (recv/read), EAGAIN ones included */
    counter_t eagain;          /* drain syscalls that found nothing */
    counter_t sleep_syscalls;  /* syscalls in before_sleep/after_sleep */
    counter_t loop_parks;      /* times the loop announced it would sleep */
    counter_t loop_spins;      /* ring: polls of the completion rings in before_sleep */
    counter_t loop_spin_hits;  /* ring: before_sleep spins that found a completion */
    counter_t loop_dozes;      /* ring: bounded, unannounced waits for a busy pool (doze) */
    counter_t loop_holds;      /* ring: timed sleeps deaf to the sockets while the pool's queue lasts (hold) */
    counter_t loop_spin_budget_ns; /* ring: the loop's current spin budget (a gauge, not a count) */
} __attribute__((aligned(CACHE_LINE)));

/* Written only by pool thread w. */
struct handoff_thread_counters {
    counter_t taken;            /* jobs returned by take/try_take */
    counter_t take_syscalls;    /* syscalls inside take (recv, read, futex wait, sched_yield) */
    counter_t parks;            /* blocking waits entered */
    counter_t spins;            /* pause iterations */
    counter_t yields;           /* sched_yield calls */
    counter_t completed;        /* complete calls */
    counter_t complete_syscalls;/* syscalls inside complete (send, write, futex wake) */
    counter_t loop_wakes;       /* completes that woke a parked loop */
    counter_t spin_hits;        /* ring: waits that ended in the spin (no park) */
    counter_t spin_budget_ns;   /* ring: the current spin budget (a gauge, not a count) */
} __attribute__((aligned(CACHE_LINE)));

/* Every backend's object starts with this. */
struct handoff {
    const struct handoff_ops *ops;
    unsigned threads;
    unsigned capacity;
    unsigned active; /* the loop's: pool threads 0..active-1 may have jobs (set_active; = threads) */
    struct handoff_loop_counters loop;
    struct handoff_thread_counters *thread; /* [threads], each on its own lines */
};

struct handoff_ops {
    const char *name;    /* as given to --handoff */
    const char *summary; /* one line for --help */

    /* NULL with errno set on failure. cfg is copied. */
    struct handoff *(*create)(const struct handoff_config *cfg);
    /* After shutdown and after every pool thread has returned from take. */
    void (*destroy)(struct handoff *h);

    /* ---- loop side ---- */
    /* Queue job on pool thread w: HANDOFF_OK (queued once), or HANDOFF_FULL / HANDOFF_ERROR
     * (errno set), after which nothing is queued and the job is still the loop's.
     * A backend with flush may leave the wake-up of a sleeping pool thread owed
     * until the next flush or before_sleep, whichever comes first. */
    int (*submit)(struct handoff *h, unsigned w, struct job *job);
    /* The loop has submitted a batch (the requests one pass parsed): pay the
     * wake-ups submit left owed, at most one per parked pool thread. NULL for
     * backends that wake inside submit. The loop calls it after each pass's
     * socket events; before_sleep pays anything still owed, so a loop that
     * never calls flush is slower to start its pool threads, never stuck. */
    void (*flush)(struct handoff *h);
    /* Register with epoll the fd(s) whose readability means completions may be
     * waiting; each event carries data.u64 == tag. Returns 0, or -1 with errno. */
    int (*watch)(struct handoff *h, int epfd, uint64_t tag);
    /* Move up to max completed jobs, in each pool thread's completion order, into out[].
     * fd_ready: the loop saw an event tagged for this handoff (consume/reset the fd,
     * for a backend whose fd needs it; an edge-triggered doorbell does not).
     * Never blocks. The loop calls it again while it returns max. */
    size_t (*drain)(struct handoff *h, bool fd_ready, struct job **out, size_t max);
    /* True when completions can arrive with no fd event while the loop is busy
     * (the ring): the loop then calls drain(fd_ready=false) on every pass. */
    bool polled;
    /* The loop is about to block in epoll_wait. Returns true if completions are
     * already waiting (the loop then polls with timeout 0 and calls after_sleep).
     * `outstanding`: jobs on all pool threads not yet drained as finished. */
    bool (*before_sleep)(struct handoff *h, unsigned outstanding);
    void (*after_sleep)(struct handoff *h);
    /* Optional (NULL: always before_sleep). The loop is about to wait with
     * `outstanding` jobs out. A backend that expects a completion within N ns
     * and would rather be polled then than signalled returns N > 0: the loop
     * waits at most N ns without announcing a sleep (no before_sleep, no
     * after_sleep; a pool thread makes no syscall for it) and, being `polled`,
     * drains after. 0: announce and wait as usual. Pays owed wake-ups as
     * before_sleep does. */
    uint64_t (*doze)(struct handoff *h, unsigned outstanding);
    /* Optional (NULL: never). Asked before doze, with the same meaning of
     * `outstanding`. A backend whose every pool thread has work queued for
     * longer than N ns, by its own measure of their pace, returns N (less a
     * margin): the loop then sleeps N ns without watching its sockets or
     * announcing a sleep, and handles whatever came meanwhile (requests,
     * completions) in one pass after. 0: doze or announce as usual. Pays
     * owed wake-ups as before_sleep does. */
    uint64_t (*hold)(struct handoff *h, unsigned outstanding);
    /* Optional (NULL: the backend looks at every pool thread). From now on the
     * loop submits to pool threads 0..n-1 only, and those at n and above have
     * nothing outstanding (1 <= n <= threads): the loop side may visit the
     * first n alone (drain, the sleep checks, the doze's arithmetic), so
     * a pool that sizes itself (--blocking-threads auto) pays per pass for
     * the threads it uses, not for the most it may start. Every pool thread's
     * queues exist from create; only the prefix in use changes. */
    void (*set_active)(struct handoff *h, unsigned n);

    /* ---- pool thread side (pool thread w only) ---- */
    /* Never blocks and makes no syscall; NULL when nothing is queued. May be
     * NULL for backends whose only check is a syscall (the pool then releases
     * the GIL and calls take). */
    struct job *(*try_take)(struct handoff *h, unsigned w);
    /* Blocks until a job is queued (may spin first). NULL once shut down and
     * the pool thread's queue is empty. Called without the GIL. */
    struct job *(*take)(struct handoff *h, unsigned w);
    /* Hand job back to the loop. 0: queued once, and the loop will drain it
     * even if the wake-up syscall failed (ring: the loop polls; condvar: the
     * wake-up stays owed, paid by the next complete or before_sleep). -1
     * (errno set): not queued, the pool thread still owns the job (dgram: the send
     * failed; eventfd: the wake-up failed and the push was taken back; ring,
     * condvar: a full queue, impossible under the capacity rule). Every
     * backend keeps this: handoffs/tests/submit_error.c. */
    int (*complete)(struct handoff *h, unsigned w, struct job *job);
    /* The next complete hands back a job that was not run (its client left
     * while it was queued): no sample of the pool thread's pace. NULL where
     * the backend keeps no pace. */
    void (*unrun)(struct handoff *h, unsigned w);

    /* Any thread: make every take return NULL once its queue is empty. */
    void (*shutdown)(struct handoff *h);
};

extern const struct handoff_ops handoff_dgram, handoff_condvar, handoff_eventfd, handoff_ring;

/* All backends, NULL-terminated, in --help order (ring first: the default). */
extern const struct handoff_ops *const handoff_backends[];

/* The backend called name, or NULL. */
const struct handoff_ops *handoff_find(const char *name);

/* Helpers for backends: allocate/free the base with `size` bytes in all
 * (size >= sizeof(struct handoff)), cache-line aligned, counters zeroed. */
void *handoff_alloc(const struct handoff_ops *ops, const struct handoff_config *cfg, size_t size);
void handoff_free(void *h);

#endif

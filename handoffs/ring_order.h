/* ring_order.h — every memory ordering the ring's correctness argument names,
 * as a macro, so that a test build can take exactly one of them away.
 *
 * ring.c and spsc_ring.h write each ordering they rely on through one of the
 * macros below, labelled with its name from the comments (F1..F5, R1/A1,
 * R2/A2, R3, X1, C1, O1). A normal build gets the real thing. A build with
 * -DRING_MUTANT=RING_M_<name> gets a "mutant" with that one ordering removed
 * (a fence becomes nothing, a release or acquire becomes relaxed, the
 * exchange-then-wake becomes wake-then-clear, the fresh re-check becomes a
 * look at a stale copy, the owed wake-up is not paid before the loop blocks). `make mutants` builds each mutant and requires a test
 * to fail on it; handoffs/README.md has the table of which test catches which.
 *
 * RING_HAS_<name> is 1 when the ordering is present; the model checker's run
 * (handoffs/tests/check_model.sh) reads these with `cc -dM -E` so that the
 * Promela model checks the same protocol the build compiled. */
#ifndef CSERVE_RING_ORDER_H
#define CSERVE_RING_ORDER_H

#include <stdatomic.h>

#define RING_M_NONE 0
#define RING_M_F1 1  /* seq_cst fence in ring_submit (after the push, before load(parked)) */
#define RING_M_F2 2  /* seq_cst fence in ring_take (after store(parked,1), before the re-check) */
#define RING_M_F3 3  /* seq_cst fence in ring_complete (after the push, before load(loop_parked)) */
#define RING_M_F4 4  /* seq_cst fence in ring_before_sleep (after store(loop_parked,1)) */
#define RING_M_F5 5  /* seq_cst fence in ring_shutdown (after store(stopping)) */
#define RING_M_R1 6  /* release store of tail in spsc_push */
#define RING_M_A1 7  /* acquire load of tail in spsc_pop / spsc_nonempty */
#define RING_M_R2 8  /* release store of head in spsc_pop */
#define RING_M_A2 9  /* acquire load of head in spsc_push */
#define RING_M_X1 10 /* ring_submit clears `parked` (exchange) before futex_wake */
#define RING_M_C1 11 /* ring_before_sleep re-reads tail (not the cached copy) after F4 */
#define RING_M_O1 12 /* ring_before_sleep pays the wake-ups ring_submit left owed */
#define RING_M_R3 13 /* release store of tail in spsc_publish (the batched push; not used by ring.c) */

#ifndef RING_MUTANT
#define RING_MUTANT RING_M_NONE
#endif

#define RING_HAS_F1 (RING_MUTANT != RING_M_F1)
#define RING_HAS_F2 (RING_MUTANT != RING_M_F2)
#define RING_HAS_F3 (RING_MUTANT != RING_M_F3)
#define RING_HAS_F4 (RING_MUTANT != RING_M_F4)
#define RING_HAS_F5 (RING_MUTANT != RING_M_F5)
#define RING_HAS_R1 (RING_MUTANT != RING_M_R1)
#define RING_HAS_A1 (RING_MUTANT != RING_M_A1)
#define RING_HAS_R2 (RING_MUTANT != RING_M_R2)
#define RING_HAS_A2 (RING_MUTANT != RING_M_A2)
#define RING_HAS_X1 (RING_MUTANT != RING_M_X1)
#define RING_HAS_C1 (RING_MUTANT != RING_M_C1)
#define RING_HAS_O1 (RING_MUTANT != RING_M_O1)
#define RING_HAS_R3 (RING_MUTANT != RING_M_R3)

/* O1's bound: a wake-up owed to a parked pool thread is paid at the end of the
 * loop's pass (ring_flush), before the loop can block (ring_before_sleep),
 * or by the submit at which this many jobs wait for it: enough that one wake
 * (a futex syscall each side, ~20 us of wake-up latency) is shared by many
 * requests, few enough that a pass parsing hundreds of pipelined requests
 * does not keep the pool thread idle until its end. handoffs/tests/batch_test.c
 * checks all three. */
#define RING_WAKE_BATCH 32

/* A doze's bounds (ring.c, ring_doze): at least a timer wake's worth, at
 * most what a response may wait for the loop to look. */
#define RING_DOZE_MIN_NS 10000L
#define RING_DOZE_MAX_NS 50000L
/* A pool faster than two of the shortest dozes is dozed through only while
 * the work queued ahead of it lasts this many dozes (ring.c, ring_doze). */
#define RING_DOZE_AHEAD 16

/* A hold (ring.c, ring_hold): the loop sleeps deaf to its sockets while
 * every pool thread has work queued, and wakes RING_HOLD_MARGIN_NS (or a
 * quarter of the slowest pace, or a quarter of the shortest queued work,
 * whichever is longest) before the first of them would run out: its own
 * wake-up and its pass, which takes about a queue's worth of completions
 * and requests, on a guest whose vCPUs the pool and the client keep busy. Only for pools at least
 * RING_HOLD_PACE_NS a job (the doze's slow class: an app's Python, not
 * pipelined hello), and only when the work ahead leaves a hold of at least
 * RING_HOLD_MIN_NS (shorter is the doze's business); at most
 * RING_HOLD_MAX_NS, what a request arriving on a quiet connection may wait
 * to be read. */
#ifndef RING_HOLD_MARGIN_NS /* (a build may set them, to compare) */
#define RING_HOLD_MARGIN_NS 100000L
#endif
#ifndef RING_HOLD_PACE_NS
#define RING_HOLD_PACE_NS 20000L
#endif
#ifndef RING_HOLD_MIN_NS
#define RING_HOLD_MIN_NS 100000L
#endif
#define RING_HOLD_MAX_NS 2000000L

/* A seq_cst fence named `name` (F1..F5); nothing in that one mutant. The
 * condition is a constant: the compiler keeps the fence or drops it. */
#define RING_FENCE(name)                                                                           \
    do {                                                                                           \
        if (RING_HAS_##name)                                                                       \
            atomic_thread_fence(memory_order_seq_cst);                                             \
    } while (0)

/* The memory order of a release (R1, R2) or acquire (A1, A2) named `name`:
 * `mo` normally, relaxed in that one mutant. A constant expression, so
 * atomic_*_explicit still sees a compile-time order. */
#define RING_ORDER(name, mo) (RING_HAS_##name ? (mo) : memory_order_relaxed)

#endif

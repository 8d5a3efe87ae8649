/* ring_park.pml — the ring's park/wake handshake (handoffs/ring.c) under a
 * store-buffer memory model, checked with spin.
 *
 * Producer (the loop in ring_submit): push = store(tail); F1; load(parked);
 *   if 1: exchange(parked, 0) and futex_wake.
 * Consumer (the worker in ring_take): pop; if empty: store(parked, 1); F2;
 *   re-check the ring; if still empty: futex_wait(&parked, 1).
 *
 * Weak memory (x86-TSO) is modelled explicitly: a thread's plain store goes
 * into its own store buffer and reaches memory later, at a moment the
 * `memory` process picks non-deterministically; a thread's loads see its own
 * buffered store first (store forwarding), everyone else sees memory. A
 * fence, a locked RMW (the exchange) and a syscall (futex_wait: the kernel
 * takes locks) drain the buffer first. futex_wait atomically compares the
 * word in memory with 1 and sleeps only if equal; futex_wake wakes a sleeper
 * if there is one and is otherwise lost — exactly the kernel's contract.
 *
 * Property: no lost wakeup. The producer pushes N items and stops; the
 * consumer must take all N. A consumer asleep forever with items queued is a
 * deadlock, which spin reports as an invalid end state (the consumer is not
 * at its end). `assert` also checks it took exactly N items.
 *
 * Compile-time switches (spin -DFENCE_P -DFENCE_C -a ring_park.pml):
 *   FENCE_P  the producer's seq_cst fence F1 after the push
 *   FENCE_C  the consumer's seq_cst fence F2 after parked = 1
 *   REACH_WAKE  assert(0) right after a wake: must be violated, proving the
 *            fenced run really explores parks and wakes (not a vacuous pass)
 * With both fences: no errors. Without either one: spin finds the lost wakeup. */

#ifndef N
#define N 2
#endif

/* Shared memory. */
byte tail = 0;     /* items published by the producer */
bit parked = 0;    /* the consumer's futex word */
bit asleep = 0;    /* the consumer is blocked in futex_wait (kernel state) */

/* Store buffers: one pending store per thread (each thread stores to one
 * shared location only, so one slot is enough; a newer store replaces the
 * older one, which is just the older one becoming visible for zero time). */
bit  p_pending = 0; byte p_value;  /* producer's buffered store to tail */
bit  c_pending = 0; bit  c_value;  /* consumer's buffered store to parked */

inline flush_p() { atomic { if :: p_pending -> tail = p_value; p_pending = 0 :: else fi } }
inline flush_c() { atomic { if :: c_pending -> parked = c_value; c_pending = 0 :: else fi } }

/* The producer's load of its own index, with store forwarding. */
inline load_tail_p(v)   { atomic { if :: p_pending -> v = p_value :: else -> v = tail fi } }

/* The hardware drains buffers on its own schedule. */
active proctype memory()
{
end:
    do
    :: atomic { p_pending -> tail = p_value; p_pending = 0 }
    :: atomic { c_pending -> parked = c_value; c_pending = 0 }
    od
}

active proctype producer()
{
    byte i = 0;
    byte t;
    bit old;
    do
    :: i == N -> break
    :: else ->
        /* push: R1 store(tail, release) — a plain store on x86, buffered */
        load_tail_p(t);
        atomic { p_pending = 1; p_value = t + 1 };
        i++;
#ifdef FENCE_P
        flush_p();                      /* F1: seq_cst fence drains the buffer */
#endif
        /* load(parked) from memory (the producer has no store to it buffered) */
        if
        :: parked == 1 ->
            /* exchange(parked, 0): a locked RMW drains the buffer, then is atomic */
            flush_p();
            atomic { old = parked; parked = 0 };
            if
            :: old == 1 -> atomic { if :: asleep -> asleep = 0 :: else fi }  /* futex_wake */
            :: else
            fi
        :: else
        fi
    od
}

active proctype consumer()
{
    byte head = 0;   /* consumer-private index */
    do
    :: head == N -> break
    :: else ->
        if
        :: tail > head -> head++                        /* pop succeeded (A1 sees memory) */
        :: else ->
            atomic { c_pending = 1; c_value = 1 };      /* store(parked, 1), buffered */
#ifdef FENCE_C
            flush_c();                                  /* F2: seq_cst fence */
#endif
            if
            :: tail > head ->                           /* re-check found work */
                atomic { c_pending = 1; c_value = 0 }   /* withdraw: store(parked, 0) */
            :: else ->
                /* futex_wait(&parked, 1): enter the kernel (drains the buffer);
                 * the kernel compares the word and sleeps only if it is 1 */
                flush_c();
                atomic { if :: parked == 1 -> asleep = 1 :: else fi };
                (asleep == 0);                          /* blocked until futex_wake */
#ifdef REACH_WAKE
                assert(0)   /* non-vacuity: a park followed by a wake is reachable */
#endif
            fi
        fi
    od;
    assert(head == N)
}

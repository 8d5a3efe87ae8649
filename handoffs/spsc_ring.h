/* spsc_ring.h — a bounded single-producer/single-consumer ring of job pointers.
 *
 * Free-running unsigned indices masked by capacity-1 (a power of two): the fill
 * level is tail - head even across wrap-around. Each index lives on its own
 * cache line with the *other* side's cached copy of the opposite index
 * (rigtorp's SPSCQueue): the producer re-reads `head` only when its cached copy
 * says the ring is full, the consumer re-reads `tail` only when its copy says
 * empty, so in steady state each side touches the shared line once per batch.
 *
 * Synchronising pairs (R3, the batched push's, is at spsc_publish below):
 *   R1 store(tail, release) in spsc_push   pairs with A1 load(tail, acquire) in
 *      spsc_pop / spsc_nonempty: the slot write (and the job it points to)
 *      happens before the consumer reads it.
 *   R2 store(head, release) in spsc_pop    pairs with A2 load(head, acquire) in
 *      spsc_push: the consumer's read of a slot happens before the producer
 *      overwrites that slot on the next lap. */
#ifndef CSERVE_SPSC_RING_H
#define CSERVE_SPSC_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "../lib/counter.h"
#include "ring_order.h"

struct job;

struct spsc_ring {
    /* Producer's line: written by the producer only. */
    _Alignas(CACHE_LINE) atomic_uint tail; /* next slot to fill */
    unsigned head_cache;                   /* producer's last view of head */
    /* Consumer's line: written by the consumer only. */
    _Alignas(CACHE_LINE) atomic_uint head; /* next slot to read */
    unsigned tail_cache;                   /* consumer's last view of tail */
    /* Read-only after init. */
    _Alignas(CACHE_LINE) struct job **slots;
    unsigned mask;
};

/* capacity: a power of two. 0, or -1 when out of memory. */
static inline int spsc_init(struct spsc_ring *r, unsigned capacity)
{
    atomic_init(&r->tail, 0);
    atomic_init(&r->head, 0);
    r->head_cache = r->tail_cache = 0;
    r->mask = capacity - 1;
    r->slots = calloc(capacity, sizeof *r->slots);
    return r->slots ? 0 : -1;
}

static inline void spsc_destroy(struct spsc_ring *r)
{
    free(r->slots);
    r->slots = NULL;
}

/* Producer only. False when full (nothing stored). */
static inline bool spsc_push(struct spsc_ring *r, struct job *job)
{
    unsigned t = atomic_load_explicit(&r->tail, memory_order_relaxed); /* own index */
    if (t - r->head_cache > r->mask) {
        r->head_cache = atomic_load_explicit(&r->head, RING_ORDER(A2, memory_order_acquire));
        if (t - r->head_cache > r->mask)
            return false;
    }
    r->slots[t & r->mask] = job;
    atomic_store_explicit(&r->tail, t + 1, RING_ORDER(R1, memory_order_release)); /* pairs with A1 */
    return true;
}

/* Consumer only. NULL when empty. */
static inline struct job *spsc_pop(struct spsc_ring *r)
{
    unsigned h = atomic_load_explicit(&r->head, memory_order_relaxed); /* own index */
    if (h == r->tail_cache) {
        r->tail_cache = atomic_load_explicit(&r->tail, RING_ORDER(A1, memory_order_acquire));
        if (h == r->tail_cache)
            return NULL;
    }
    struct job *job = r->slots[h & r->mask];
    atomic_store_explicit(&r->head, h + 1, RING_ORDER(R2, memory_order_release)); /* pairs with A2 */
    return job;
}

/* Consumer only: is anything queued? Re-reads tail (A1) — used right after a
 * seq_cst fence, where a stale cached copy would defeat the fence (C1: the
 * mutant without the re-read answers from the cached copy alone). */
static inline bool spsc_nonempty(struct spsc_ring *r)
{
    unsigned h = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (RING_HAS_C1)
        r->tail_cache = atomic_load_explicit(&r->tail, RING_ORDER(A1, memory_order_acquire));
    return h != r->tail_cache;
}

/* The batched push, producer only: spsc_stage writes job into the slot after
 * *staged, a tail of the producer's own that starts at spsc_staged_start(r),
 * without publishing it; spsc_publish(r, staged) then makes every staged job
 * visible at once. So a batch costs one release store (R3), and one transfer of the
 * tail's line to a consumer that is polling it, instead of one per job.
 * Between stage and publish the consumer sees none of the batch; nothing may
 * be pushed with spsc_push in between. False when full (nothing staged).
 * (Used by experiments/micro/loop_floor.c to measure what batching the
 * publication would save; ring.c publishes every push.) */
static inline unsigned spsc_staged_start(struct spsc_ring *r)
{
    return atomic_load_explicit(&r->tail, memory_order_relaxed); /* own index */
}

static inline bool spsc_stage(struct spsc_ring *r, unsigned *staged, struct job *job)
{
    unsigned t = *staged;
    if (t - r->head_cache > r->mask) {
        r->head_cache = atomic_load_explicit(&r->head, RING_ORDER(A2, memory_order_acquire));
        if (t - r->head_cache > r->mask)
            return false;
    }
    r->slots[t & r->mask] = job;
    *staged = t + 1;
    return true;
}

static inline void spsc_publish(struct spsc_ring *r, unsigned staged)
{
    /* R3: pairs with A1, as R1 does: every slot staged before it (and the
     * job each points to) happens before the consumer reads them. */
    atomic_store_explicit(&r->tail, staged, RING_ORDER(R3, memory_order_release));
}

#endif

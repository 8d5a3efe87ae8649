/* counter.h — single-writer event counters that another thread may read.
 *
 * Every counter has exactly one writer thread (the loop, or one pool thread), so
 * an increment needs no lock prefix: a relaxed load and a relaxed store compile
 * to plain moves on x86-64. They are still _Atomic so that a stats dump from
 * another thread is a well-defined (possibly slightly stale) read, not a data
 * race (TSan agrees). Keep each writer's counters on cache lines of its own.
 * Nobody but the writer stores to a counter: a measurement window subtracts a
 * snapshot taken at its start instead of resetting (see core/base/stats.c). */
#ifndef CSERVE_COUNTER_H
#define CSERVE_COUNTER_H

#include <stdatomic.h>
#include <stdint.h>

typedef _Atomic uint64_t counter_t;

#define CACHE_LINE 64

static inline void counter_add(counter_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

static inline void counter_inc(counter_t *c) { counter_add(c, 1); }

static inline uint64_t counter_get(const counter_t *c)
{
    return atomic_load_explicit((counter_t *)c, memory_order_relaxed);
}

#endif

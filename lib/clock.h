/* clock.h — the monotonic clock reads cserve makes, in the units callers want.
 *
 * CLOCK_MONOTONIC and CLOCK_MONOTONIC_COARSE are read through the vDSO (no
 * syscall): ~20 ns for the fine clock, a few ns for the coarse one, which ticks
 * once per jiffy (1-4 ms) and is enough for timeouts counted in milliseconds. */
#ifndef CSERVE_CLOCK_H
#define CSERVE_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds since an arbitrary fixed point (boot). */
static inline uint64_t clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The same clock in seconds, for intervals printed or compared as doubles. */
static inline double clock_s(void)
{
    return (double)clock_ns() / 1e9;
}

/* Milliseconds, coarse (jiffy resolution): timer wheels and deadlines. */
static inline uint64_t clock_coarse_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The calling thread's own CPU time, in nanoseconds. Not in the vDSO: a
 * system call (a fraction of a microsecond), for samples taken every few
 * jobs, not per request. */
static inline uint64_t clock_thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif

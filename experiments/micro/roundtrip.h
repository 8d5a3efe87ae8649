/* roundtrip.h — C drivers for the handoff round-trip micro-benchmarks.
 *
 * One round trip: the calling thread (the "loop") submits one job to worker 0
 * and waits for it the way the server's loop does (drain every pass if the
 * backend is polled; before_sleep, epoll_wait, after_sleep, drain); worker 0
 * takes it and completes it at once. Registered from bench_handoff.cc. */
#ifndef CSERVE_ROUNDTRIP_H
#define CSERVE_ROUNDTRIP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rt_bench;

enum rt_worker_wait {
    RT_WORKER_TAKE,      /* the backend's take (ring: with cfg spin budget) */
    RT_WORKER_POLL,      /* busy-poll try_take (never parks) */
};

struct rt_options {
    const char *backend;
    long spin_iters;             /* ring: handed to the config (-1 default, 0 park at once) */
    enum rt_worker_wait worker_wait;
    unsigned loop_poll;          /* polled backends: drain(false) this many times before sleeping */
};

/* Everything measured so far, cumulative; subtract two snapshots. */
struct rt_snapshot {
    uint64_t round_trips;
    uint64_t loop_cpu_ns, worker_cpu_ns;
    uint64_t loop_syscalls;   /* submit + drain + epoll_wait (+ sleep hooks) */
    uint64_t worker_syscalls; /* take + complete */
    uint64_t worker_parks, loop_sleeps; /* blocking waits entered (loop: epoll_wait with timeout -1) */
};

/* NULL on error (message on stderr). */
struct rt_bench *rt_open(const struct rt_options *opt);
/* One round trip; 0, or -1 on error. */
int rt_round_trip(struct rt_bench *b);
/* Call from the thread that calls rt_round_trip (it reads its CPU clock). */
void rt_sample(struct rt_bench *b, struct rt_snapshot *out);
void rt_close(struct rt_bench *b);

#ifdef __cplusplus
}
#endif

#endif

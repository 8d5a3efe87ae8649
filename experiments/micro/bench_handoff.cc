// bench_handoff.cc — registers the C round-trip drivers (roundtrip.c) with
// Google Benchmark. Time = wall ns per round trip; counters = CPU ns per
// round trip on each thread and syscalls/parks per round trip.
#include <benchmark/benchmark.h>

#include "roundtrip.h"

static void RoundTrip(benchmark::State &state, rt_options opt)
{
    rt_bench *b = rt_open(&opt);
    if (!b) {
        state.SkipWithError("rt_open failed");
        return;
    }
    rt_snapshot s0, s1;
    rt_sample(b, &s0);
    for (auto _ : state)
        if (rt_round_trip(b) != 0) {
            state.SkipWithError("round trip failed");
            break;
        }
    rt_sample(b, &s1);
    rt_close(b);
    auto per_rt = [&](uint64_t a, uint64_t z) {
        return benchmark::Counter(double(z - a), benchmark::Counter::kAvgIterations);
    };
    state.counters["loop_cpu_ns"] = per_rt(s0.loop_cpu_ns, s1.loop_cpu_ns);
    state.counters["worker_cpu_ns"] = per_rt(s0.worker_cpu_ns, s1.worker_cpu_ns);
    state.counters["loop_sc"] = per_rt(s0.loop_syscalls, s1.loop_syscalls);
    state.counters["worker_sc"] = per_rt(s0.worker_syscalls, s1.worker_syscalls);
    state.counters["worker_parks"] = per_rt(s0.worker_parks, s1.worker_parks);
    state.counters["loop_sleeps"] = per_rt(s0.loop_sleeps, s1.loop_sleeps);
}

static const long kForever = 1L << 50; // a spin budget the worker never exhausts

#define RT(name, ...) \
    BENCHMARK_CAPTURE(RoundTrip, name, rt_options{__VA_ARGS__})->UseRealTime()->MinTime(0.5)

// Worker busy-waiting (never parks); loop parks in epoll unless it polls.
RT(ring_workerspin_loopspin, "ring", kForever, RT_WORKER_TAKE, 1u << 30);
RT(ring_workerspin_loopsleep, "ring", kForever, RT_WORKER_TAKE, 0);
RT(condvar_workerpoll, "condvar", -1, RT_WORKER_POLL, 0);
// Worker parked: every job is a park + wake.
RT(ring_workerpark, "ring", 0, RT_WORKER_TAKE, 0);
RT(condvar, "condvar", -1, RT_WORKER_TAKE, 0);
RT(eventfd, "eventfd", -1, RT_WORKER_TAKE, 0);
RT(dgram, "dgram", -1, RT_WORKER_TAKE, 0);
// The ring's default budget (spin, 4 yields, then park).
RT(ring_default_loopsleep, "ring", -1, RT_WORKER_TAKE, 0);

BENCHMARK_MAIN();

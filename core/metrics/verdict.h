/* verdict.h — which stage bounds the server, decided from figures measured
 * over a window of a few seconds: pure, no I/O, so its table is unit-tested
 * (tests/unit/test_verdict.c) and the same decision serves /metrics, the
 * dashboard and the --stats table. */
#ifndef CSERVE_VERDICT_H
#define CSERVE_VERDICT_H

#include <stdbool.h>
#include <stddef.h>

/* In order of precedence: when two apply, the earlier one is the verdict. */
enum regime {
    REGIME_LOOP_BOUND,    /* the loop thread is saturated */
    REGIME_GIL_BOUND,     /* the pool threads together hold a core: the GIL */
    REGIME_THREADS_SHORT, /* requests wait for busy pool threads, the GIL is not held */
    REGIME_MACHINE_BOUND, /* no stage saturated, but the machine has no idle CPU */
    REGIME_POOL_QUEUED,    /* requests queue for the pool, whose threads are none of the above */
    REGIME_NOT_LOADED,    /* none of the above: nothing to do */
    REGIME_N
};

/* Thresholds: a share of one core (or of the machine) counted as full. */
#define VERDICT_SATURATED 0.90
/* The share of samples in which every pool thread was busy and a request
 * waited behind one, for the threads to count as short... */
#define VERDICT_QUEUED 0.75
/* ... while each spent less than this share of the window running or
 * runnable: off the CPU, waiting on I/O. A thread queued but runnable is
 * short of a CPU, not of threads. */
#define VERDICT_OFF_CPU 0.5
/* ... and each waited for a CPU less than this share of the window: past
 * it, the machine is what keeps them from their queues. */
#define VERDICT_READY 0.10
/* Requests queued behind every pool thread of a worker in this share of
 * the samples or more: they wait for the pool most of the window, which is
 * never "not loaded", whatever the threads did meanwhile. */
#define VERDICT_QUEUED_MOST 0.50

/* The most --blocking-threads auto:MAX may ask for (the option's bound). */
#define VERDICT_AUTO_MOST 256

struct verdict_input {
    double window_s;     /* the window the figures cover */
    double loop_util;    /* loop thread CPU / window (the busiest worker's) */
    double pool_util;    /* the pool threads' CPU together / window (the busiest worker's):
                          * with the GIL only one runs Python at a time, so this is the
                          * time the GIL was held */
    double queued_frac;  /* samples in which every pool thread had a request waiting
                          * behind its current one / samples (the least queued worker's) */
    double queued_max;   /* the same, the most queued worker's (one worker: the same) */
    double waiting_frac; /* samples in which every pool thread was busy and a request waited
                          * behind one / samples (the least waiting worker's): with one
                          * thread, queued_frac; with more, what another thread would take */
    double pool_ready;   /* the pool threads' time runnable but not running (schedstat's run
                          * delay) together / window: waiting for a CPU, not for I/O */
    double machine_busy; /* 1 - idle share of all CPUs (/proc/stat); < 0: unknown */
    unsigned pool_threads; /* per worker; 0: --inline or native-hello */
    unsigned auto_max;   /* --blocking-threads auto: its MAX, which the pool grows to by
                          * itself; 0: a fixed count */
};

struct verdict {
    enum regime regime;
    const char *name;    /* "loop-bound", ... (the label in /metrics) */
    char advice[200];    /* one line: the regime's (verdict_advice), or with auto, what
                          * auto does or what its MAX should be */
    char why[256];       /* the figures it rests on */
};

void verdict_decide(const struct verdict_input *in, struct verdict *out);
/* threads-short's own test, whatever comes before it in the precedence:
 * requests wait for busy threads that are off the CPU. */
bool verdict_threads_short(const struct verdict_input *in);
const char *verdict_name(enum regime r);
const char *verdict_advice(enum regime r);

#endif

/* sizing_rule.h — --blocking-threads auto's decisions, from the figures a
 * window measured: pure (no I/O, no clock read), so that
 * tests/unit/test_sizing_rule.c drives every branch. sizing.c measures the
 * figures and applies the decisions; the README says why these rules. */
#ifndef CSERVE_SIZING_RULE_H
#define CSERVE_SIZING_RULE_H

#include <stdbool.h>
#include <stdint.h>

#include "../metrics/verdict.h"

/* The window the verdict's figures cover. */
#define SIZING_WINDOW_MS 1000
/* A burst: requests that waited for a busy pool on every look (at least
 * SIZING_BURST_LOOKS of them) for SIZING_BURST_MS grow the pool at once,
 * without waiting for the window. */
#define SIZING_BURST_MS 10
#define SIZING_BURST_LOOKS 2
/* A thread that took no request for this long is retired (parked). */
#define SIZING_IDLE_MS 5000

struct sizing_window {
    struct verdict_input v; /* the window's figures; v.pool_threads: the threads taking requests */
    double waiting_mean;    /* requests waiting for a busy pool, on average over the window */
    bool gil;               /* the interpreter has a GIL (false: free-threaded, the GIL off) */
};

/* How many threads should take requests after this window: `active` (no
 * change) or more, never past max. *v: the verdict the step rests on. */
unsigned sizing_grow(const struct sizing_window *w, unsigned active, unsigned max, struct verdict *v);

/* A span in which every look saw requests waiting for a busy pool. */
struct sizing_burst {
    double span_s;     /* from its first look to this one */
    unsigned looks;    /* the looks in it, each with requests waiting */
    unsigned waiting;  /* requests waiting at the last of them */
    double loop_util;  /* the loop thread's CPU / span */
    double pool_util;  /* the threads taking requests: their time on the CPU together / span */
    double pool_ready; /* the threads taking requests: their run delay together / span */
    bool finished;     /* one of them finished (or started) a request within it */
    bool gil;          /* the interpreter has a GIL */
};

/* How many threads should take requests now, before the window closes:
 * `active` (no change), or active + waiting (within the GIL's headroom and
 * max) when the span is long enough and its threads were off the CPU, not
 * waiting for one. */
unsigned sizing_burst(const struct sizing_burst *b, unsigned active, unsigned max);

/* After a span that did not grow the pool, how long until the next may
 * open: 0 when none may until the window closes (its threads ran a tenth
 * of it or more, VERDICT_READY, or the GIL or the loop was saturated: the window's
 * rule decides), or, when its threads hardly ran and failed only the
 * run-delay test, twice
 * last_gap_ms (2 * SIZING_BURST_MS after a span that grew, or in a new
 * window: last_gap_ms 0), and 0 once that would pass SIZING_BURST_GAP_MS.
 * On a busy machine the thread that just woke for a request waits for a
 * CPU a few ms, a third of a 10 ms span: a later span, the thread then
 * blocked, tells that wake-up from threads short of a CPU; at most
 * log2(SIZING_BURST_GAP_MS / SIZING_BURST_MS) spans a window. Threads that
 * ran more are on a CPU-bound load on a busy machine: more spans there
 * would only be more chances to catch the thread parked while the loop,
 * short of a CPU itself, has not yet handed it the next request. */
#define SIZING_BURST_GAP_MS (SIZING_WINDOW_MS / 2)
unsigned sizing_burst_gap(const struct sizing_burst *b, unsigned active, unsigned last_gap_ms);

/* The threads a worker starts with: the size the worker it replaces had
 * learned (0: none, a first start), at least one, at most max (which a
 * reload's options may have lowered); 0 when max is (no pool). */
unsigned sizing_first(unsigned learned, unsigned max);

/* How many threads the last idle_ms needed: one past the highest of the
 * `active` threads used within idle_ms of now (last_used_ms[i]: when thread
 * i last had a request), and at least one. The chooser gives each request
 * to the lowest of the least loaded threads, so a thread is used only when
 * every one below it is busy: the ones above the highest used were never
 * needed. */
unsigned sizing_needed(const uint64_t *last_used_ms, unsigned active, uint64_t now_ms, uint64_t idle_ms);

#endif

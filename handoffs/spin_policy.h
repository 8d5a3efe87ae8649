/* spin_policy.h — how long one side of the ring spins before it parks,
 * learnt from the waits that side has seen (no flag needed).
 *
 * The problem is ski rental: a thread that finds nothing to do can spin
 * (costs CPU for as long as it spins, and the core it spins on) or park
 * (costs a fixed P: the futex/eventfd syscalls on both sides plus the wake-up
 * latency, ~20 us on these KVM guests). If the wait w were known, the right
 * budget is "spin if w < P/s, else park at once" (s: what a spun microsecond
 * costs, 1 when no core is spare). It is not known, but its distribution is:
 * each side records every wait it has done — the time from "nothing there"
 * to "work arrived" — and picks the budget B that minimises the expected cost
 *
 *     cost(B) = sum over recorded waits w of  (w <= B ? s*w : s*B + P)
 *
 * over B in {0, 1, 2, 4, ..., 64 us}. The true w is known even after a park:
 * the side that wakes a parked thread stamps the time of its wake-up
 * (ring.c), so choosing B = 0 does not blind the policy to short waits.
 *
 * Stability: the waits are kept in a histogram of log2 buckets whose counts
 * lose 1/8 at every decision (an EWMA with a memory of ~8 decision periods);
 * a decision is taken every SPIN_POLICY_PERIOD waits; and the budget moves only
 * when the best candidate is at least 1/4 and P/8 per wait cheaper than the
 * current one and has been the best SPIN_POLICY_CONFIRM decisions in a row
 * (hysteresis and a debounce), so neither two nearly equal candidates nor
 * one burst of odd waits can make it flap. And since the budget changes the
 * waits it then sees (a spin on a shared core delays the producer), every
 * move is a trial: if the realised cost did not drop, the policy goes back
 * and bars that direction for a while (spin_policy.c, judge_trial). Bounds:
 * 0 <= B <= max_ns. Same pattern as glibc's adaptive mutex (an EWMA of the
 * spins that succeeded, capped) and the kernel's adaptive spinning (spin only
 * while spinning can pay off), with the cost made explicit for this pipeline. */
#ifndef CSERVE_SPIN_POLICY_H
#define CSERVE_SPIN_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#define SPIN_POLICY_BUCKETS 9    /* [0,1) [1,2) [2,4) ... [64,128) [128,inf) us */
#define SPIN_POLICY_PERIOD 32    /* waits between two decisions */
#define SPIN_POLICY_PARK_NS 20000 /* P: what a park + wake costs here, in spun ns */
#define SPIN_POLICY_CONFIRM 3    /* decisions in a row a new budget must win */
#define SPIN_POLICY_GAIN_DIV 8   /* a move must gain P/8 per wait */
#define SPIN_POLICY_TRIAL 2      /* periods a move is on trial (after a mixed one) */
#define SPIN_POLICY_BAR 64       /* decisions a candidate that failed its trial is barred */
#define SPIN_POLICY_BAR_MAX 4096 /* ... doubling per failure up to this */

struct spin_policy {
    uint32_t hist[SPIN_POLICY_BUCKETS]; /* decayed counts of recorded waits */
    unsigned since;                     /* waits recorded since the last decision */
    long budget_ns;                     /* the current budget B */
    long pending_ns;                    /* the candidate that won the last decision(s) */
    unsigned streak;                    /* how many in a row */
    uint64_t period_cost;               /* realised cost of the waits since the last decision */
    uint64_t cur_cost;                  /* realised cost per wait under the budget (EWMA), 0 unknown */
    unsigned since_move;                /* decisions since the last change */
    long trial_from;                    /* the budget before a move on trial, -1 none */
    uint64_t trial_from_cost;           /* what a wait cost under it */
    unsigned trial_periods;
    unsigned barred_until[SPIN_POLICY_BUCKETS]; /* per candidate: decision it is barred until */
    unsigned bar_len;                           /* the next bar's length, doubling */
    unsigned trials_failed;
    long max_ns;                        /* B never exceeds it */
    long park_ns;                       /* P */
    unsigned spin_cost_pct;             /* s in percent: 100 with no spare core */
    unsigned decisions, changes;        /* for tests and stats */
};

/* park_ns: P; spare_core: a core is idle enough that spinning on it costs
 * little (s = 1/4); start_ns: the budget before anything is known. */
void spin_policy_init(struct spin_policy *p, long park_ns, bool spare_core, long max_ns,
                      long start_ns);

/* One wait of wait_ns ended. Every SPIN_POLICY_PERIOD calls it re-decides the
 * budget. Single-threaded: each side owns its policy. */
void spin_policy_record(struct spin_policy *p, uint64_t wait_ns);

/* Does this machine have a core to spare for `busy` always-running threads? */
bool spin_policy_spare_core(unsigned busy);

#endif

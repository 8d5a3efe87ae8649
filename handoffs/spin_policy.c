/* spin_policy.c — the adaptive spin budget (see spin_policy.h for the why). */
#include "spin_policy.h"

#include <sched.h>
#include <string.h>

/* Upper edge of bucket b in ns (the candidate budgets are these edges). */
static uint64_t bucket_top_ns(unsigned b) { return b == 0 ? 1000 : 1000ull << b; }

/* A representative wait for bucket b: the middle of [2^(b-1), 2^b) us, and
 * 256 us for the open-ended last bucket (long enough that spinning through it
 * is never cheaper than a park). */
static uint64_t bucket_mid_ns(unsigned b)
{
    if (b == 0)
        return 500;
    if (b == SPIN_POLICY_BUCKETS - 1)
        return 256000;
    return bucket_top_ns(b) * 3 / 4;
}

static unsigned bucket_of(uint64_t ns)
{
    unsigned b = 0;
    while (b < SPIN_POLICY_BUCKETS - 1 && ns >= bucket_top_ns(b))
        b++;
    return b;
}

void spin_policy_init(struct spin_policy *p, long park_ns, bool spare_core, long max_ns,
                      long start_ns)
{
    memset(p, 0, sizeof *p);
    p->park_ns = park_ns;
    p->spin_cost_pct = spare_core ? 25 : 100;
    p->max_ns = max_ns;
    p->budget_ns = start_ns < max_ns ? start_ns : max_ns;
}

/* Expected cost (arbitrary units) of budget b_ns over the histogram. */
static uint64_t cost_of(const struct spin_policy *p, uint64_t b_ns)
{
    uint64_t cost = 0;
    for (unsigned b = 0; b < SPIN_POLICY_BUCKETS; b++) {
        if (!p->hist[b])
            continue;
        uint64_t each = bucket_top_ns(b) <= b_ns
                            ? bucket_mid_ns(b) * p->spin_cost_pct / 100
                            : b_ns * p->spin_cost_pct / 100 + (uint64_t)p->park_ns;
        cost += each * p->hist[b];
    }
    return cost;
}

static void decide(struct spin_policy *p)
{
    uint64_t best_b = 0, best = cost_of(p, 0);
    for (unsigned b = 0; b < SPIN_POLICY_BUCKETS - 1; b++) {
        uint64_t cand = bucket_top_ns(b);
        if ((long)cand > p->max_ns)
            break;
        uint64_t c = cost_of(p, cand);
        if (c < best) {
            best = c;
            best_b = cand;
        }
    }
    uint64_t now = cost_of(p, (uint64_t)p->budget_ns);
    /* Hysteresis: move only for a clear (1/4) gain, and only to a candidate
     * that won SPIN_POLICY_CONFIRM decisions in a row (a burst of odd waits,
     * e.g. one preemption, moves the histogram for a period or two only). */
    if ((long)best_b != p->budget_ns && best + best / 4 < now) {
        p->streak = (long)best_b == p->pending_ns ? p->streak + 1 : 1;
        p->pending_ns = (long)best_b;
        if (p->streak >= SPIN_POLICY_CONFIRM) {
            p->budget_ns = (long)best_b;
            p->changes++;
            p->streak = 0;
        }
    } else {
        p->streak = 0;
    }
    p->decisions++;
    for (unsigned b = 0; b < SPIN_POLICY_BUCKETS; b++)
        p->hist[b] -= p->hist[b] / 8; /* decay: a memory of ~8 periods */
}

void spin_policy_record(struct spin_policy *p, uint64_t wait_ns)
{
    /* Counts are scaled by 64 so that the decay keeps a memory of one wait;
     * the steady state is 8 periods' worth, far from overflow. */
    p->hist[bucket_of(wait_ns)] += 64;
    if (++p->since >= SPIN_POLICY_PERIOD) {
        p->since = 0;
        decide(p);
    }
}

bool spin_policy_spare_core(unsigned busy)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return false;
    return (unsigned)CPU_COUNT(&set) > busy;
}

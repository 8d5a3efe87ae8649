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
    p->confirm = SPIN_POLICY_CONFIRM;
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

/* Is moving from the current budget (expected cost `now`) to the best
 * candidate (cost `best`) a clear gain? Both must hold: the best is 1/4
 * cheaper, and P/8 per recorded wait. The second is the one that matters when
 * most waits end in a park: their P dominates the total, so a quarter of
 * it is a lot; when most waits are short it is a quarter of little, and
 * only P/8 per wait (2.5 us of a 20 us park) keeps two budgets whose costs
 * differ by a few hundred ns per wait from trading places on noise. */
static bool clear_gain(const struct spin_policy *p, uint64_t best, uint64_t now)
{
#ifdef SPIN_POLICY_MUTANT_P1 /* hysteresis removed: any gain moves */
    return best < now;
#else
    uint64_t waits = 0;
    for (unsigned b = 0; b < SPIN_POLICY_BUCKETS; b++)
        waits += p->hist[b];
    return best + best / 4 < now &&
           now - best > waits * (uint64_t)p->park_ns / SPIN_POLICY_GAIN_DIV;
#endif
}

/* A move that reverses the previous one (down after up, up after down) is
 * the signature of the feedback loop: the budget changes the waits it then
 * sees (on a shared core a spinning worker delays the producer, so with a
 * budget the waits are long and without one they are short, and each
 * regime argues for the other budget). Each reversal doubles the number of
 * decisions in a row a new budget must win, up to SPIN_POLICY_CONFIRM_MAX;
 * 4x that many calm decisions in a row (no candidate clearly better) halve
 * it again. A genuine oscillation is
 * thus slowed exponentially (O(log n) changes in n decisions), while a
 * single change of regime is still followed after SPIN_POLICY_CONFIRM. */
static void moved(struct spin_policy *p, long to)
{
    int dir = to > p->budget_ns ? 1 : -1;
#ifndef SPIN_POLICY_MUTANT_P2 /* P2: no back-off on reversals */
    if (p->last_dir && dir != p->last_dir && p->confirm < SPIN_POLICY_CONFIRM_MAX)
        p->confirm *= 2;
#endif
    p->last_dir = dir;
    p->budget_ns = to;
    p->changes++;
    p->streak = 0;
    p->held = 0;
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
    /* Debounce: only a candidate that won `confirm` decisions in a row (a
     * burst of odd waits, e.g. one preemption, moves the histogram for a
     * period or two only). */
    if ((long)best_b != p->budget_ns && clear_gain(p, best, now)) {
        p->streak = (long)best_b == p->pending_ns ? p->streak + 1 : 1;
        p->pending_ns = (long)best_b;
        p->held = 0; /* not calm: the back-off does not relax */
#ifdef SPIN_POLICY_MUTANT_P1
        p->streak = p->confirm;
#endif
        if (p->streak >= p->confirm)
            moved(p, (long)best_b);
    } else {
        p->streak = 0;
        if (++p->held >= 4 * p->confirm && p->confirm > SPIN_POLICY_CONFIRM) {
            p->confirm /= 2;
            p->held = 0;
        }
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

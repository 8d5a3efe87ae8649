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

/* Candidate budgets: 0 ns, then the bucket tops (1, 2, 4 ... 128 us). */
static uint64_t candidate_ns(unsigned i) { return i == 0 ? 0 : bucket_top_ns(i - 1); }

void spin_policy_init(struct spin_policy *p, long park_ns, bool spare_core, long max_ns,
                      long start_ns)
{
    memset(p, 0, sizeof *p);
    p->park_ns = park_ns;
    p->spin_cost_pct = spare_core ? 25 : 100;
    p->max_ns = max_ns;
    p->budget_ns = start_ns < max_ns ? start_ns : max_ns;
    p->trial_from = -1;
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
 * cheaper, and P/8 per recorded wait. The second is the one that matters
 * when most waits are short: a quarter of little is little, and only P/8
 * per wait (2.5 us of a 20 us park) keeps two budgets whose costs differ by
 * a few hundred ns per wait from trading places on noise. */
static bool clear_gain(const struct spin_policy *p, uint64_t best, uint64_t now)
{
#ifdef SPIN_POLICY_MUTANT_P1 /* P1: hysteresis removed, any gain moves */
    (void)p;
    return best < now;
#else
    uint64_t waits = 0;
    for (unsigned b = 0; b < SPIN_POLICY_BUCKETS; b++)
        waits += p->hist[b];
    return best + best / 4 < now &&
           now - best > waits * (uint64_t)p->park_ns / SPIN_POLICY_GAIN_DIV;
#endif
}

static void move_to(struct spin_policy *p, long to, bool trial)
{
    p->trial_from = trial ? p->budget_ns : -1;
    p->trial_from_cost = p->cur_cost;
    p->trial_periods = 0;
    p->budget_ns = to;
    p->cur_cost = 0;
    p->changes++;
    p->streak = 0;
}

/* The histogram answers "what would budget X have cost on the waits seen
 * under the current budget?" — but the waits depend on the budget. On a
 * shared core a spin holds the CPU the producer needs, so the wait grows by
 * about the budget (the stress harness, 4 pool threads + loop on 2 vCPUs: waits
 * of 1-4 us with B = 0, 8-16 us with B = 4 us, 16-32 us with B = 16 us),
 * and the counterfactual keeps saying "spin a little longer" although every
 * budget, once in effect, costs more than parking at once. So every move is
 * a trial: SPIN_POLICY_TRIAL periods after it (the first one, which mixes
 * the two budgets, left out), the realised cost per wait under the new
 * budget is compared with the one under the old. If the move did not pay,
 * the policy goes back and bars the candidate (and those beyond it) for a
 * time that doubles with each failed trial (from SPIN_POLICY_BAR decisions,
 * at most SPIN_POLICY_BAR_MAX; a successful trial resets it): a bar, not a
 * verdict, since the load may change. */
static void judge_trial(struct spin_policy *p)
{
    if (p->trial_from < 0 || ++p->trial_periods <= SPIN_POLICY_TRIAL)
        return;
    long from = p->trial_from;
    p->trial_from = -1;
    bool failed = p->trial_from_cost && p->cur_cost >= p->trial_from_cost;
#ifdef SPIN_POLICY_MUTANT_P2 /* P2: trust the counterfactual alone */
    failed = false;
#endif
    if (failed) {
        /* The feedback grows with the budget: if spinning longer did not
         * pay, spinning longer still will not either (and likewise down),
         * so the bar covers every candidate beyond this one too. */
        p->bar_len = p->bar_len ? p->bar_len * 2 : SPIN_POLICY_BAR;
        if (p->bar_len > SPIN_POLICY_BAR_MAX)
            p->bar_len = SPIN_POLICY_BAR_MAX;
        for (unsigned i = 0; i < SPIN_POLICY_BUCKETS; i++)
            if (from < p->budget_ns ? (long)candidate_ns(i) >= p->budget_ns
                                    : (long)candidate_ns(i) <= p->budget_ns)
                p->barred_until[i] = p->decisions + p->bar_len;
        p->trials_failed++;
        move_to(p, from, false);
        return;
    }
    if (p->trial_from_cost)
        p->bar_len = 0;
}

static void decide(struct spin_policy *p)
{
    /* The realised cost of the budget in effect: an EWMA (1/4) over periods,
     * skipping the period that straddles a move. */
    uint64_t per_wait = p->period_cost / SPIN_POLICY_PERIOD + 1; /* 0: none yet */
    if (p->since_move++ > 0)
        p->cur_cost = p->cur_cost ? (3 * p->cur_cost + per_wait) / 4 : per_wait;
    p->period_cost = 0;
    unsigned changes = p->changes;
    judge_trial(p);
    if (p->changes != changes) {
        p->since_move = 0;
    } else {
        int best_i = 0;
        uint64_t best = cost_of(p, 0);
        for (unsigned i = 1; i < SPIN_POLICY_BUCKETS; i++) {
            uint64_t cand = candidate_ns(i);
            if ((long)cand > p->max_ns)
                break;
            if (p->barred_until[i] > p->decisions)
                continue;
            uint64_t c = cost_of(p, cand);
            if (c < best) {
                best = c;
                best_i = (int)i;
            }
        }
        long best_b = (long)candidate_ns((unsigned)best_i);
        if (p->barred_until[0] > p->decisions && best_i == 0)
            best_b = p->budget_ns;
        uint64_t now = cost_of(p, (uint64_t)p->budget_ns);
        /* Debounce: only a candidate that won `confirm` decisions in a row
         * (a burst of odd waits, e.g. one preemption, moves the histogram
         * for a period or two only), and not while a trial runs. */
        if (best_b != p->budget_ns && p->trial_from < 0 && clear_gain(p, best, now)) {
            p->streak = best_b == p->pending_ns ? p->streak + 1 : 1;
            p->pending_ns = best_b;
#ifdef SPIN_POLICY_MUTANT_P1
            p->streak = SPIN_POLICY_CONFIRM;
#endif
            if (p->streak >= SPIN_POLICY_CONFIRM) {
                move_to(p, best_b, true);
                p->since_move = 0;
            }
        } else {
            p->streak = 0;
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
    /* What this wait really cost under the budget in effect. */
    uint64_t b = (uint64_t)p->budget_ns;
    p->period_cost += wait_ns <= b ? wait_ns * p->spin_cost_pct / 100
                                   : b * p->spin_cost_pct / 100 + (uint64_t)p->park_ns;
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

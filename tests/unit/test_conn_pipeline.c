/* test_conn_pipeline.c — how many of a pipeline's requests the real
 * connection code (conn_pipeline, through tests/fuzz/conn_harness.c) hands
 * a pool of one thread at once, out of a turn, with the thread's queue
 * already past the budget's depth in other connections' requests: as many
 * as fit in a turn's worth at the thread's pace (dispatch_turn_fits), the
 * one that went to the app first included, for cheap requests; only the
 * first for requests slower than a turn; counted at the thread's slow
 * side, not its pace; and never more behind their connections' first than
 * the worker's cap (loop.piped). The dispatcher's own rules:
 * tests/unit/test_dispatch.c. */
#include "../../core/conn/dispatch.h"
#include "../fuzz/conn_harness.h"
#include "check.h"

#define US 1000u

int main(void)
{
    /* 10 us a request: the budget's depth is 201, the one thread's for new
     * requests 256 (DISPATCH_ALONE_MAX). */
    const unsigned budget = 1 + DISPATCH_BUDGET_NS / (10 * US);
    unsigned worth = DISPATCH_TURN_NS / (10 * US), n = 20;
    CHECK(worth > 1 && worth < n && budget + n < DISPATCH_ALONE_MAX, "the case's premises (worth %u)", worth);
    unsigned bound = harness_pipeline_bound(10 * US, 10 * US, budget, n);
    CHECK(bound == worth, "cheap, past the budget's depth: %u of %u bound, a turn's worth (%u) expected", bound, n,
          worth);
    /* Below the budget's depth the budget decides, as before: all of them
     * (at most PIPE_MAX_JOBS, and 24 running, of one connection). */
    bound = harness_pipeline_bound(10 * US, 10 * US, 1, n);
    CHECK(bound == n, "cheap, within the budget's depth: %u of %u bound", bound, n);
    /* 1 ms a request never fits: past the budget's depth (3), only the
     * new request binds (deep, as every new one on one thread). */
    bound = harness_pipeline_bound(1000 * US, 1000 * US, 1 + DISPATCH_BUDGET_NS / (1000 * US), n);
    CHECK(bound == 1, "slow, past the budget's depth: %u bound, the first only expected", bound);
    /* A pace of 10 us with a slow side of 40 us (a slower request lately):
     * what fits is counted at the slow side, 3, not 12 at the pace; the
     * budget's depth too (51). */
    const unsigned slow_budget = 1 + DISPATCH_BUDGET_NS / (40 * US), slow_worth = DISPATCH_TURN_NS / (40 * US);
    CHECK(slow_worth > 1 && slow_worth < worth, "the case's premises (worth %u at the slow side)", slow_worth);
    bound = harness_pipeline_bound(10 * US, 40 * US, slow_budget, n);
    CHECK(bound == slow_worth, "a slow side above the pace: %u of %u bound, %u expected", bound, n, slow_worth);
    /* The worker's cap on pipelined jobs (loop.piped.most; half of
     * RLIMIT_NOFILE in the server), 3 here: within the budget's depth, the
     * request on stage and 3 behind it, not all of them. */
    harness_set_pipe_most(3);
    bound = harness_pipeline_bound(10 * US, 10 * US, 1, n);
    harness_set_pipe_most(0);
    CHECK(bound == 1 + 3, "the worker's cap of 3 pipelined jobs: %u of %u bound, 4 expected", bound, n);
    return check_summary();
}

/* test_dispatch.c — the dispatcher's late binding (core/conn/dispatch.c):
 * dispatch_depth on every branch (unmeasured, past the budget, a pace of
 * microseconds held at the hand-off's capacity, one of milliseconds at one,
 * a long-running request lowering a fast thread's depth); then the
 * dispatcher itself on a stand-in hand-off, its clock set by the test:
 * the pick among threads with room (shortest queue, lowest index), none
 * with room, a request's running time counted to the loop's last look at
 * the completions, the paces a pass of several completions settles, a request
 * given to a thread that had run dry counted from its submit, the pending
 * list in arrival order with a retried head keeping its place, a
 * connection's turn while others wait (dispatch_turn, dispatch_charge): a
 * batch of cheap requests, one slow request, one from an unmeasured thread,
 * a turn that ran over paid back before the next turn of several; and the
 * slow side of the pace that sets the depth after a slow request; a pool
 * of one thread, whose new requests bind deeper than a pipeline's; and
 * how many of a pipeline's next fit in a turn's worth out of a turn; and
 * the requests a thread took but did not run. */
#include <string.h>

#include "check.h"
#include "../../core/conn/dispatch.c" /* built in, as the loop links it */

#define US 1000u
#define MS 1000000u

static unsigned submitted;

static int stub_submit(struct handoff *h, unsigned w, struct job *job)
{
    (void)h, (void)w, (void)job;
    submitted++;
    return HANDOFF_OK;
}

static const struct handoff_ops stub_ops = {.name = "stub", .submit = stub_submit};
static struct handoff stub = {.ops = &stub_ops};

static void depth_cases(void)
{
    CHECK(dispatch_depth(0, 0, DISPATCH_BUDGET_NS, 64) == 1, "unmeasured: one at a time");
    CHECK(dispatch_depth(0, 5 * MS, DISPATCH_BUDGET_NS, 64) == 1, "unmeasured, running long: one");
    CHECK(dispatch_depth(5 * US, 0, DISPATCH_BUDGET_NS, 1024) == 1 + DISPATCH_BUDGET_NS / (5 * US),
          "microseconds: the budget's worth");
    CHECK(dispatch_depth(5 * US, 0, DISPATCH_BUDGET_NS, 64) == 64, "microseconds: at most the capacity");
    CHECK(dispatch_depth(1, 0, DISPATCH_BUDGET_NS, 64) == 64, "faster than the clock: the capacity");
    CHECK(dispatch_depth(1 * MS, 0, DISPATCH_BUDGET_NS, 64) == 3, "one ms: the running one and two behind");
    CHECK(dispatch_depth(5 * MS, 0, DISPATCH_BUDGET_NS, 64) == 1, "milliseconds past the budget: one");
    CHECK(dispatch_depth(DISPATCH_BUDGET_NS, 0, DISPATCH_BUDGET_NS, 64) == 2, "the budget exactly: one behind");
    CHECK(dispatch_depth(10 * US, 500 * US, DISPATCH_BUDGET_NS, 64) == 5,
          "a request running long counts at its running time");
    CHECK(dispatch_depth(10 * US, DISPATCH_BUDGET_NS, DISPATCH_BUDGET_NS, 64) == 2,
          "running the budget exactly: one behind");
    CHECK(dispatch_depth(10 * US, DISPATCH_BUDGET_NS + 1, DISPATCH_BUDGET_NS, 64) == 1,
          "running past the budget: nothing behind");
    CHECK(dispatch_depth(10 * US, 0, DISPATCH_BUDGET_NS, 1) == 1, "a capacity of one");
}

/* Each thread's jobs in submit order: a thread finishes them in that
 * order, as a pool thread does. */
static struct job jobs[2][64];
static unsigned queued[2], finished[2];

static unsigned submit(struct dispatch *d)
{
    unsigned w = dispatch_pick(d);
    if (w == DISPATCH_NONE)
        return DISPATCH_NONE;
    struct job *j = &jobs[w][queued[w] % 64];
    if (dispatch_submit(d, w, j) != HANDOFF_OK)
        return DISPATCH_NONE;
    queued[w]++;
    return j->thread;
}

/* Thread w's oldest job completes, stamped by the pool thread (job.done_ns)
 * or 0: no stamp. */
static void done_at(struct dispatch *d, unsigned w, uint64_t stamp)
{
    struct job *j = &jobs[w][finished[w]++ % 64];
    j->done_ns = stamp;
    dispatch_done(d, j, 0);
}

static void done(struct dispatch *d, unsigned w) { done_at(d, w, 0); }

static void dispatcher_cases(void)
{
    struct dispatch d;
    CHECK(dispatch_init(&d, &stub, 2, 64) == 0, "init");
    dispatch_clock(&d, 1000 * MS);
    /* Unmeasured threads take one each, the lowest index first. */
    CHECK(submit(&d) == 0, "an idle pool: thread 0");
    CHECK(submit(&d) == 1, "thread 0 unmeasured and busy: thread 1");
    CHECK(submit(&d) == DISPATCH_NONE && dispatch_pick(&d) == DISPATCH_NONE, "both busy, unmeasured: none");
    CHECK(dispatch_submit(&d, DISPATCH_NONE, &jobs[0][63]) == HANDOFF_FULL, "none: full");
    /* Thread 1 finishes two passes' work at 10 us a request: a pace. */
    dispatch_clock(&d, 1000 * MS + 10 * US);
    done(&d, 1);
    dispatch_settle(&d);
    CHECK(d.t[1].pace_ns == 10 * US, "the first sample is the pace (%llu)", (unsigned long long)d.t[1].pace_ns);
    CHECK(submit(&d) == 1 && submit(&d) == 1, "thread 1 measured fast: it takes more, thread 0 none");
    /* Two finished in one pass, 20 us after they started: 10 us each. */
    dispatch_clock(&d, 1000 * MS + 30 * US);
    for (int i = 0; i < 2; i++)
        done(&d, 1);
    dispatch_settle(&d);
    CHECK(d.t[1].pace_ns == 10 * US, "a pass of several: the span over their number (%llu)",
          (unsigned long long)d.t[1].pace_ns);
    CHECK(d.t[1].done_pass == 0 && !d.unsettled, "settled");
    /* Two more, finished 10 us apart by the thread's own stamps, taken by a
     * pass a millisecond later (the loop held): the pace ends at the last
     * stamp, and the thread's idle time after it is not work. */
    uint64_t start = d.now_ns;
    CHECK(submit(&d) == 1 && submit(&d) == 1, "thread 1 again");
    dispatch_clock(&d, 1000 * MS + 1 * MS);
    done_at(&d, 1, start + 10 * US);
    done_at(&d, 1, start + 20 * US);
    dispatch_settle(&d);
    CHECK(d.t[1].pace_ns == 10 * US, "to the stamp, not the pass (%llu)", (unsigned long long)d.t[1].pace_ns);
    CHECK(d.t[1].busy_since_ns == start + 20 * US, "the next, had one been queued, started at the last stamp");
    /* Thread 0's request has run past the budget: nothing goes behind it,
     * even measured fast; but only once the loop has looked at the
     * completions and found none of its (a pass takes its sockets first,
     * and by then a busy thread may have finished many). */
    d.t[0].pace_ns = d.t[0].slow_ns = 10 * US;
    dispatch_clock(&d, 1000 * MS + DISPATCH_BUDGET_NS + 1);
    CHECK(dispatch_room(&d, 0, false), "past the budget since its start, but not since the last look: room");
    dispatch_settle(&d); /* the look: nothing from thread 0 */
    CHECK(!dispatch_room(&d, 0, false) && dispatch_room(&d, 1, false), "thread 0 running long: no room");
    /* Ties go to the lowest index, the shortest queue first. (Thread 0's
     * long request set its slow side past the budget, slow_cases' matter:
     * back to its pace for these.) */
    done(&d, 0);
    dispatch_settle(&d);
    CHECK(d.t[0].slow_ns > DISPATCH_BUDGET_NS, "the long one is the slow side (%llu)",
          (unsigned long long)d.t[0].slow_ns);
    d.t[0].slow_ns = d.t[0].pace_ns;
    CHECK(submit(&d) == 0, "both idle: thread 0");
    CHECK(submit(&d) == 1, "shortest queue");
    CHECK(submit(&d) == 0, "a tie: thread 0");
    /* A thread that empties and takes a new request in the same pass (the
     * one that took its completion) is measured up to then, before the new
     * request's start is stamped. */
    uint64_t pace = d.t[1].pace_ns, since = d.t[1].busy_since_ns;
    dispatch_clock(&d, d.now_ns + 10 * MS);
    done(&d, 1);
    CHECK(submit(&d) == 1, "thread 0 running long, thread 1 idle: thread 1");
    CHECK(d.t[1].done_pass == 0 && d.t[1].busy_since_ns == d.now_ns, "settled at the submit, busy from now");
    CHECK(d.t[1].pace_ns == (pace * 3 + (d.now_ns - since)) / 4, "its pace: the time to the completion (%llu)",
          (unsigned long long)d.t[1].pace_ns);
    CHECK(!dispatch_room(&d, 1, false), "now slow, and busy: no room");
    /* Retiring a thread and taking it back: it measures its pace anew. */
    done(&d, 1);
    dispatch_settle(&d);
    CHECK(dispatch_set_active(&d, 1) == 0 && dispatch_active(&d) == 1, "retired thread 1");
    CHECK(!dispatch_room(&d, 1, false) && !dispatch_room(&d, DISPATCH_NONE, false),
          "a retired thread, or none, has no room (a pipeline there waits)");
    CHECK(dispatch_set_active(&d, 3) == -1 && dispatch_set_active(&d, 0) == -1, "out of range");
    CHECK(dispatch_set_active(&d, 2) == 0 && d.t[1].pace_ns == 0 && d.t[1].slow_ns == 0, "taken back: unmeasured");
    CHECK(submit(&d) == 1 && dispatch_set_active(&d, 1) == -1 && dispatch_active(&d) == 2,
          "a thread with work is not retired");
    dispatch_destroy(&d);
}

/* A request given to a thread that had already run dry, in the pass that
 * then takes that thread's last completion (the loop takes a pass's
 * sockets first): it starts at its own submit, not at that completion, so
 * the thread's idle time between them is not counted as its work. */
static void dry_thread_case(void)
{
    struct dispatch d;
    CHECK(dispatch_init(&d, &stub, 1, 64) == 0, "init");
    queued[0] = finished[0] = 0;
    uint64_t n0 = 2000 * MS;
    dispatch_clock(&d, n0);
    CHECK(submit(&d) == 0, "A");
    dispatch_clock(&d, n0 + 10 * US);
    done_at(&d, 0, n0 + 10 * US);
    dispatch_settle(&d);
    CHECK(d.t[0].pace_ns == 10 * US, "measured at 10 us");
    /* A' submitted, done at +10 us by its stamp, but the loop takes it in
     * a pass 1 ms on, after it has submitted B in the same pass. */
    dispatch_clock(&d, n0 + 20 * US);
    CHECK(submit(&d) == 0, "A'");
    dispatch_clock(&d, n0 + 1 * MS);
    CHECK(submit(&d) == 0, "B, to a thread the loop thinks busy");
    done_at(&d, 0, n0 + 30 * US);
    dispatch_settle(&d);
    CHECK(d.t[0].pace_ns == 10 * US, "A' ran 10 us (%llu)", (unsigned long long)d.t[0].pace_ns);
    CHECK(d.t[0].busy_since_ns == n0 + 1 * MS, "B started at its submit, not at A''s stamp (%llu)",
          (unsigned long long)(d.t[0].busy_since_ns - n0));
    dispatch_clock(&d, n0 + 2 * MS);
    done_at(&d, 0, n0 + 1 * MS + 10 * US);
    dispatch_settle(&d);
    CHECK(d.t[0].pace_ns == 10 * US, "B ran 10 us, the idle millisecond before it is not work (%llu)",
          (unsigned long long)d.t[0].pace_ns);
    dispatch_destroy(&d);
}

static struct conn conns[4];

static void pending_cases(void)
{
    struct dispatch d;
    CHECK(dispatch_init(&d, &stub, 1, 64) == 0, "init");
    dispatch_park(&d, &conns[0], false);
    dispatch_park(&d, &conns[1], false);
    dispatch_park(&d, &conns[2], false);
    CHECK(dispatch_waiting(&d) == 3 && dispatch_first_waiting(&d) == &conns[0], "arrival order");
    dispatch_unpark(&d, &conns[0]);
    CHECK(dispatch_first_waiting(&d) == &conns[1] && dispatch_waiting(&d) == 2, "the first leaves");
    dispatch_park(&d, &conns[0], true);
    CHECK(dispatch_first_waiting(&d) == &conns[0], "a retried head keeps its place");
    dispatch_unpark(&d, &conns[3]);
    CHECK(dispatch_waiting(&d) == 3, "one not parked: nothing changes");
    dispatch_unpark(&d, &conns[2]);
    dispatch_park(&d, &conns[3], false);
    CHECK(d.pending_tail == &conns[3] && conns[1].pending_next == &conns[3], "the tail follows");
    CHECK(conns[3].pending_prev == &conns[1] && conns[1].pending_prev == &conns[0] && !conns[0].pending_prev,
          "and back");
    dispatch_unpark(&d, &conns[1]); /* from the middle */
    CHECK(conns[0].pending_next == &conns[3] && conns[3].pending_prev == &conns[0] && dispatch_waiting(&d) == 2,
          "the middle leaves");
    dispatch_unpark(&d, &conns[3]); /* the tail */
    CHECK(d.pending_tail == &conns[0] && !conns[0].pending_next && dispatch_waiting(&d) == 1, "the tail leaves");
    dispatch_unpark(&d, &conns[3]);
    CHECK(dispatch_waiting(&d) == 1 && d.pending_head == &conns[0], "twice: nothing changes");
    dispatch_unpark(&d, &conns[0]);
    CHECK(!d.pending_head && !d.pending_tail && !dispatch_waiting(&d), "the last leaves");
    dispatch_park(&d, &conns[2], true);
    dispatch_park(&d, &conns[1], false);
    CHECK(d.pending_head == &conns[2] && d.pending_tail == &conns[1] && conns[1].pending_prev == &conns[2],
          "parked again, first then last");
    dispatch_unpark(&d, &conns[1]);
    dispatch_unpark(&d, &conns[2]);
    dispatch_park(&d, &conns[3], false);
    CHECK(dispatch_can_retry(&d), "an idle thread: retry");
    submit(&d);
    CHECK(!dispatch_can_retry(&d), "its one unmeasured thread busy: wait");
    dispatch_destroy(&d);
}

static void turn_cases(void)
{
    struct dispatch d;
    CHECK(dispatch_init(&d, &stub, 2, 1024) == 0, "init");
    int64_t credit = DISPATCH_CREDIT_START;
    d.t[0].pace_ns = d.t[0].slow_ns = 2 * US;
    CHECK(dispatch_turn(&d, 0, &credit) == 1 && credit == 0, "a first turn: one");
    dispatch_charge(&credit, 2 * US);
    /* A cheap pipelining client, charged what its turns take: every turn
     * after the first is a whole turn's worth, not one in two. */
    unsigned least = ~0u;
    for (int i = 0; i < 8; i++) {
        unsigned n = dispatch_turn(&d, 0, &credit);
        if (n < least)
            least = n;
        dispatch_charge(&credit, n * 2 * US);
    }
    CHECK(least >= DISPATCH_TURN_NS / (2 * US) - 1, "cheap: every turn near %u (the least %u)",
          DISPATCH_TURN_NS / (2 * US), least);
    CHECK(least > 16, "a pipeline of 16 in one turn");
    CHECK(dispatch_turn(&d, 0, &credit) == DISPATCH_TURN_NS / (2 * US) && credit == DISPATCH_TURN_NS,
          "credit is not hoarded past one turn");
    d.t[1].slow_ns = 0;
    CHECK(dispatch_turn(&d, 1, &credit) == 1, "an unmeasured thread: one");
    d.t[0].slow_ns = 1;
    CHECK(dispatch_turn(&d, 0, &credit) == 1024, "faster than the clock: at most the capacity");
    d.t[0].slow_ns = DISPATCH_TURN_NS / 2;
    CHECK(dispatch_turn(&d, 0, &credit) == 2, "half a turn: two");
    d.t[0].slow_ns = DISPATCH_TURN_NS / 2 + 1;
    CHECK(dispatch_turn(&d, 0, &credit) == 1, "more than half a turn: one");
    d.t[0].slow_ns = 5 * MS;
    CHECK(dispatch_turn(&d, 0, &credit) == 1, "milliseconds: one per turn");
    /* A client whose pipelined requests are slower than the thread's pace:
     * its turn, a turn's worth at the pace, ran 50 ms each. It pays that
     * back a turn at a time, each of one request (charged too), before a
     * turn of several again. */
    d.t[0].slow_ns = 2 * US;
    unsigned big = dispatch_turn(&d, 0, &credit);
    CHECK(big == DISPATCH_TURN_NS / (2 * US), "cheap on the thread's pace: %u", big);
    for (unsigned i = 0; i < big; i++)
        dispatch_charge(&credit, 50 * MS);
    int64_t debt = credit;
    CHECK(debt < 0, "in debt");
    unsigned turns = 0, ones = 0;
    for (;;) {
        unsigned n = dispatch_turn(&d, 0, &credit);
        if (n > 1 || turns >= 100000)
            break;
        ones++;
        dispatch_charge(&credit, 2 * US);
        turns++;
    }
    CHECK(ones == turns && turns >= (unsigned)(-debt / DISPATCH_TURN_NS),
          "in debt: turns of one until repaid, a turn's worth a turn at most (%u)", turns);
    CHECK(turns < 100000, "repaid: a turn of several again");
    credit = 0;
    dispatch_charge(&credit, UINT64_MAX);
    dispatch_charge(&credit, UINT64_MAX);
    CHECK(credit < 0 && credit >= INT64_MIN / 2, "no overflow");
    d.t[1].slow_ns = 2 * US;
    credit = DISPATCH_TURN_NS;
    CHECK(dispatch_set_active(&d, 1) == 0 && dispatch_turn(&d, 1, &credit) == 1, "a retired thread: one");
    dispatch_destroy(&d);
}

/* What a request may take a thread (slow_ns, for its depth): the pace, but
 * a request past the budget among fast ones is taken at once and forgotten
 * slowly, so a thread that just ran a slow one gets nothing queued behind
 * the next few dozen; a sample under the budget moves only the pace. */
/* Thread 0 of d runs one request of `cost` alone: submitted at *now,
 * finished and settled at *now + cost. */
static void run_one(struct dispatch *d, uint64_t *now, uint64_t cost)
{
    dispatch_clock(d, *now);
    submit(d);
    *now += cost;
    dispatch_clock(d, *now);
    done_at(d, 0, *now);
    dispatch_settle(d);
}

static void slow_cases(void)
{
    struct dispatch d;
    CHECK(dispatch_init(&d, &stub, 1, 64) == 0, "init");
    queued[0] = finished[0] = 0;
    uint64_t now = 1000 * MS;
    /* One request at a time, each finished and settled: uniform 1 ms. */
    for (int i = 0; i < 8; i++)
        run_one(&d, &now, 1 * MS);
    CHECK(d.t[0].slow_ns == 1 * MS && d.t[0].pace_ns == 1 * MS, "uniform: the pace (%llu)",
          (unsigned long long)d.t[0].slow_ns);
    CHECK(dispatch_depth(d.t[0].slow_ns, 0, DISPATCH_BUDGET_NS, 64) == 3, "1 ms: two behind the running one");
    run_one(&d, &now, 100 * MS); /* one of 100 ms */
    CHECK(d.t[0].slow_ns == 100 * MS, "a slow one is taken at once (%llu)", (unsigned long long)d.t[0].slow_ns);
    /* Then fast ones again: for the next several, nothing behind the
     * running one, though the smoothed pace is back under the budget. */
    int fast = 0, pace_back = -1;
    for (; fast < 60 && dispatch_depth(d.t[0].slow_ns, 0, DISPATCH_BUDGET_NS, 64) == 1; fast++) {
        if (pace_back < 0 && dispatch_depth(d.t[0].pace_ns, 0, DISPATCH_BUDGET_NS, 64) > 1)
            pace_back = fast;
        run_one(&d, &now, 1 * MS);
    }
    CHECK(pace_back >= 0 && pace_back <= 12 && fast >= 2 * pace_back,
          "the pace alone would queue behind the %dth fast one; the slow side keeps one for %d", pace_back, fast);
    CHECK(fast < 60, "and then the depth comes back (%d)", fast);
    /* The same slow request, then the fast ones taken by passes of four
     * (a hold): the excess falls back by the requests, not the passes. */
    run_one(&d, &now, 100 * MS);
    int batched = 0;
    for (; batched < 160 && dispatch_depth(d.t[0].slow_ns, 0, DISPATCH_BUDGET_NS, 64) == 1; batched += 4) {
        dispatch_clock(&d, now);
        for (int k = 0; k < 4; k++) /* past its depth: these came as a pipeline's turn would */
            CHECK(dispatch_submit(&d, 0, &jobs[0][queued[0]++ % 64]) == HANDOFF_OK, "submit");
        for (int k = 0; k < 4; k++)
            done_at(&d, 0, now + (uint64_t)(k + 1) * MS);
        now += 4 * MS;
        dispatch_clock(&d, now);
        dispatch_settle(&d);
    }
    /* (The smoothed pace itself moves by the settling: it is what keeps
     * the depth at one longer here. The excess by the settling would keep
     * it about four times as long as one request at a time.) */
    CHECK(batched <= 2 * fast, "in passes of four: back after %d requests (one at a time: %d)", batched, fast);
    /* A settling under the budget, though far above the pace (a thread
     * that lost its CPU for a millisecond): the pace takes its quarter,
     * the slow side nothing more. */
    for (int i = 0; i < 40; i++) /* back to a uniform 10 us first */
        run_one(&d, &now, 10 * US);
    run_one(&d, &now, 1 * MS);
    CHECK(d.t[0].slow_ns == d.t[0].pace_ns && d.t[0].pace_ns < 1 * MS,
          "under the budget: the slow side is the pace (%llu, pace %llu)", (unsigned long long)d.t[0].slow_ns,
          (unsigned long long)d.t[0].pace_ns);
    dispatch_destroy(&d);
}

/* New requests given out (dispatch_pick) until no thread has room, all at
 * one instant: how many thread 0 took. */
static unsigned arrivals_taken(struct dispatch *d)
{
    unsigned n = 0, w;
    for (unsigned k = 0; k < 4096 && (w = dispatch_pick(d)) != DISPATCH_NONE; k++) {
        CHECK(dispatch_submit(d, w, &jobs[w][0]) == HANDOFF_OK, "submit");
        n += w == 0;
    }
    return n;
}

/* A dispatcher of `threads` threads, capacity 1024, whose thread 0 has
 * run requests of `cost` one at a time and is idle at *now. */
static void measured(struct dispatch *d, unsigned threads, uint64_t *now, uint64_t cost)
{
    CHECK(dispatch_init(d, &stub, threads, 1024) == 0, "init");
    queued[0] = finished[0] = 0;
    for (int i = 0; i < 8; i++)
        run_one(d, now, cost);
    CHECK(d->t[0].slow_ns == cost, "measured at %llu ns (%llu)", (unsigned long long)cost,
          (unsigned long long)d->t[0].slow_ns);
}

/* A pool that can never have a second thread binds new requests, and a
 * pipeline's next in its connection's turn, as deep as DISPATCH_ALONE_NS
 * at the thread's pace, at most DISPATCH_ALONE_MAX, and only while its
 * current request has not run past the budget; a pipeline's next out of a
 * turn only as deep as the budget. A pool of two binds all at the budget. */
static void alone_cases(void)
{
    struct dispatch d;
    uint64_t now = 3000 * MS;
    const unsigned budget = 1 + DISPATCH_BUDGET_NS / (100 * US), alone = 1 + DISPATCH_ALONE_NS / (100 * US);

    measured(&d, 1, &now, 100 * US);
    dispatch_clock(&d, now);
    dispatch_settle(&d);
    unsigned n = 0;
    for (; n < budget && dispatch_pick(&d) == 0; n++)
        CHECK(dispatch_submit(&d, 0, &jobs[0][0]) == HANDOFF_OK, "submit");
    CHECK(n == budget && !dispatch_room(&d, 0, false) && dispatch_pick(&d) == 0,
          "one thread, a budget's worth queued: no room for a pipeline's next, room for a new request");
    CHECK(dispatch_room(&d, 0, true), "and room for a pipeline's next in its connection's turn");
    n += arrivals_taken(&d);
    CHECK(n == alone, "one thread: %u new requests outstanding, %u expected", n, alone);
    CHECK(!dispatch_room(&d, 0, true), "a turn's next: no deeper than a new request, 20 ms at the pace");
    dispatch_destroy(&d);

    measured(&d, 1, &now, 10 * US);
    dispatch_clock(&d, now);
    dispatch_settle(&d);
    n = arrivals_taken(&d);
    CHECK(n == DISPATCH_ALONE_MAX, "one thread at 10 us: at most %u, not %u (%u)", DISPATCH_ALONE_MAX,
          1 + DISPATCH_ALONE_NS / (10 * US), n);
    CHECK(!dispatch_room(&d, 0, true), "a turn's next: at most as deep as a new request");
    dispatch_destroy(&d);

    /* The current request has run 1 ms (the loop has seen nothing from
     * it since): new requests still bind, at that running time; once it
     * has run past the budget, none. */
    measured(&d, 1, &now, 100 * US);
    dispatch_clock(&d, now);
    CHECK(submit(&d) == 0, "the request that will run long");
    dispatch_clock(&d, now + 1 * MS);
    dispatch_settle(&d);
    n = 1 + arrivals_taken(&d);
    CHECK(n == 1 + DISPATCH_ALONE_NS / MS, "running 1 ms: %u outstanding, 20 ms of it expected", n);
    CHECK(!dispatch_room(&d, 0, false), "and no room for a pipeline's next");
    dispatch_clock(&d, now + DISPATCH_BUDGET_NS + 1);
    dispatch_settle(&d);
    CHECK(dispatch_pick(&d) == DISPATCH_NONE && !dispatch_room(&d, 0, true),
          "running past the budget: nothing more binds, in a turn neither");
    dispatch_destroy(&d);
    measured(&d, 1, &now, 100 * US); /* the same with nothing behind it */
    dispatch_clock(&d, now);
    CHECK(submit(&d) == 0, "the request that will run long");
    dispatch_clock(&d, now + DISPATCH_BUDGET_NS + 1);
    dispatch_settle(&d);
    CHECK(dispatch_pick(&d) == DISPATCH_NONE, "alone, running past the budget: nothing binds behind it");
    dispatch_destroy(&d);

    measured(&d, 2, &now, 100 * US);
    dispatch_clock(&d, now);
    dispatch_settle(&d);
    n = arrivals_taken(&d);
    CHECK(n == budget, "two threads: %u on thread 0, the budget's %u expected", n, budget);
    CHECK(!dispatch_room(&d, 0, true), "two threads: a turn's next at the budget too");
    dispatch_destroy(&d);

    /* A pool that may grow to two (auto) with one active: a second thread
     * may yet free first, so the budget holds. */
    measured(&d, 2, &now, 100 * US);
    CHECK(dispatch_set_active(&d, 1) == 0, "one of two active");
    dispatch_clock(&d, now);
    dispatch_settle(&d);
    n = arrivals_taken(&d);
    CHECK(n == budget && !dispatch_room(&d, 0, true), "one of two active: %u, the budget's %u expected", n, budget);
    dispatch_destroy(&d);
}

/* Out of a turn, a pipeline's next ones bind as deep as a turn's while a
 * turn's worth of them fits (dispatch_turn_fits): n of them at the slow
 * side of the pace, within DISPATCH_TURN_NS; never on an unmeasured or
 * retired thread. */
static void fits_cases(void)
{
    struct dispatch d;
    uint64_t now = 7000 * MS;
    CHECK(dispatch_init(&d, &stub, 2, 1024) == 0, "init");
    CHECK(!dispatch_turn_fits(&d, 0, 1), "unmeasured: none fits");
    dispatch_destroy(&d);

    measured(&d, 2, &now, 10 * US);
    const unsigned worth = DISPATCH_TURN_NS / (10 * US);
    CHECK(worth >= 2 && dispatch_turn_fits(&d, 0, worth) && !dispatch_turn_fits(&d, 0, worth + 1),
          "10 us each: %u fit in a turn's worth, not one more", worth);
    d.t[1].pace_ns = d.t[1].slow_ns = 10 * US; /* as if it had run them too */
    CHECK(dispatch_turn_fits(&d, 1, 1) && dispatch_set_active(&d, 1) == 0 && !dispatch_turn_fits(&d, 1, 1),
          "a retired thread: none fits");
    dispatch_destroy(&d);

    /* One thread, its queue past the budget's depth in new requests: a
     * pipeline's next that fits binds as deep as a turn's. */
    measured(&d, 1, &now, 10 * US);
    dispatch_clock(&d, now);
    dispatch_settle(&d);
    for (unsigned n = 0; n < 1 + DISPATCH_BUDGET_NS / (10 * US); n++)
        CHECK(submit(&d) == 0, "submit");
    CHECK(!dispatch_room(&d, 0, false) && dispatch_room(&d, 0, dispatch_turn_fits(&d, 0, 1)),
          "past the budget's depth: room for a pipeline's next that fits a turn");
    dispatch_destroy(&d);

    /* After a request of 100 ms the slow side decides, not the pace: the
     * pace is back under half a turn after some fast ones, and still none
     * fits until the slow side has fallen back too. */
    measured(&d, 1, &now, 10 * US);
    run_one(&d, &now, 100 * MS);
    int fast = 0;
    while (fast < 60 && d.t[0].pace_ns > DISPATCH_TURN_NS / 2) {
        run_one(&d, &now, 10 * US);
        fast++;
    }
    CHECK(fast < 60 && !dispatch_turn_fits(&d, 0, 1),
          "the pace is back under half a turn after %d fast ones, the slow side is not: none fits", fast);
    dispatch_destroy(&d);
}

/* Requests a thread took but did not run, their client gone (job_skip):
 * the thread is past them, so the request after them started at their
 * end, but they are no sample of its pace (which would read fast) and
 * charge nothing to their connection's turns. */
static void skip_cases(void)
{
    struct dispatch d;
    uint64_t now = 5000 * MS;
    measured(&d, 1, &now, 100 * US);
    dispatch_clock(&d, now);
    for (int i = 0; i < 3; i++)
        CHECK(submit(&d) == 0, "submit %d", i);
    struct job *a = &jobs[0][finished[0] % 64], *b = &jobs[0][(finished[0] + 1) % 64];
    a->incomplete = b->incomplete = JOB_UNRUN;
    now += 2 * US;
    dispatch_clock(&d, now);
    a->done_ns = now - 1 * US;
    finished[0]++;
    CHECK(dispatch_done(&d, a, 0) == 0, "a skipped request charges nothing");
    done_at(&d, 0, now);
    dispatch_settle(&d);
    CHECK(d.t[0].pace_ns == 100 * US && d.t[0].slow_ns == 100 * US, "two skipped: the pace unmoved (%llu)",
          (unsigned long long)d.t[0].pace_ns);
    CHECK(d.t[0].busy_since_ns == now, "the one left started when the last skipped one ended");
    now += 100 * US;
    dispatch_clock(&d, now);
    done_at(&d, 0, now);
    dispatch_settle(&d);
    CHECK(d.t[0].pace_ns == 100 * US, "the one run after them: 100 us, from their end (%llu)",
          (unsigned long long)d.t[0].pace_ns);
    a->incomplete = b->incomplete = JOB_WHOLE;
    dispatch_destroy(&d);
}

int main(void)
{
    depth_cases();
    dispatcher_cases();
    dry_thread_case();
    pending_cases();
    turn_cases();
    slow_cases();
    alone_cases();
    fits_cases();
    skip_cases();
    return check_summary();
}

/* dispatch.c — the loop's dispatcher: which pool thread runs which request,
 * what is outstanding and owed on each, the requests waiting for a thread,
 * and what the loop's hold and doze decide on. It calls nothing of the
 * connection's stages: they call it. */
#include <stdlib.h>

#include "../../handoffs/handoff.h"
#include "../python/job.h"
#include "conn.h"
#include "dispatch.h"

int dispatch_init(struct dispatch *d, struct handoff *h, unsigned threads, unsigned capacity)
{
    *d = (struct dispatch){.handoff = h, .threads = threads, .active = threads, .capacity = capacity};
    d->t = calloc(threads ? threads : 1, sizeof *d->t);
    return d->t ? 0 : -1;
}

void dispatch_destroy(struct dispatch *d)
{
    free(d->t);
    d->t = NULL;
}

int dispatch_set_active(struct dispatch *d, unsigned n)
{
    if (n < 1 || n > d->threads)
        return -1;
    for (unsigned w = n; w < d->active; w++)
        if (d->t[w].outstanding)
            return -1;
    for (unsigned w = n; w < d->active; w++) { /* retired: no pace to settle */
        d->t[w].done_pass = d->t[w].run_pass = 0;
        d->t[w].work_ns = 0;
    }
    for (unsigned w = d->active; w < n; w++) /* a thread taken back measures its pace anew */
        d->t[w].pace_ns = d->t[w].slow_ns = 0;
    d->active = n;
    if (d->handoff->ops->set_active)
        d->handoff->ops->set_active(d->handoff, n);
    return 0;
}

/* n requests, but at least one and at most the capacity. */
static unsigned within_capacity(uint64_t n, unsigned capacity)
{
    return n < 1 ? 1 : n < capacity ? (unsigned)n : capacity > 1 ? capacity : 1;
}

/* Late binding: a request goes to a thread only when that thread will
 * start it within about the budget, so the rest wait in the loop, in
 * arrival order, for whichever thread frees first, rather than behind a
 * slow request while another thread idles. A thread whose requests take
 * microseconds still gets a deep queue (the hold's batching needs every
 * thread's queue to outlast a hold); one whose requests take milliseconds,
 * about one; an unmeasured one, or one whose request has already run past
 * the budget, nothing behind its current request. */
unsigned dispatch_depth(uint64_t pace_ns, uint64_t running_ns, uint64_t budget_ns, unsigned capacity)
{
    if (!pace_ns || running_ns > budget_ns)
        return 1;
    uint64_t each = pace_ns > running_ns ? pace_ns : running_ns;
    return within_capacity(1 + budget_ns / each, capacity);
}

/* Thread w's depth for a request that may bind deep (a new one, one of
 * its connection's turn, or a pipeline's next that fits in a turn's worth:
 * dispatch_turn_fits) or only within the budget (a pipeline's next past
 * that while no other connection waits). On a pool that can never have a
 * second thread a request waits for that thread wherever it waits, and in
 * its queue it costs the loop no pass to bind it, so it may queue for
 * DISPATCH_ALONE_NS, at most DISPATCH_ALONE_MAX deep, while the current
 * request has not run past the budget: a bound request cannot be taken
 * back once its thread has started it (core/conn/README.md, "One
 * thread"), so what a wrong pace can bind stays what the budget's depth
 * could. A turn may bind as deep because its credit, not the depth, bounds
 * what one connection takes (Turns); held to the budget, a turn behind a
 * queue deep in new requests would have no room past its first request. */
static unsigned depth_for(const struct dispatch *d, uint64_t slow_ns, uint64_t running_ns, bool deep_ok)
{
    unsigned depth = dispatch_depth(slow_ns, running_ns, DISPATCH_BUDGET_NS, d->capacity);
    if (deep_ok && d->threads == 1 && running_ns <= DISPATCH_BUDGET_NS) {
        unsigned most = d->capacity < DISPATCH_ALONE_MAX ? d->capacity : DISPATCH_ALONE_MAX;
        unsigned deep = dispatch_depth(slow_ns, running_ns, DISPATCH_ALONE_NS, most);
        if (deep > depth)
            depth = deep;
    }
    return depth;
}

static bool room_for(const struct dispatch *d, unsigned w, bool deep_ok)
{
    if (w >= d->active) /* being retired, or DISPATCH_NONE: nothing new goes there */
        return false;
    const struct dispatch_thread *t = &d->t[w];
    if (!t->outstanding)
        return true;
    /* Run for as long as the loop has seen no completion from it: up to
     * its last look at them, not to now. A pass takes its sockets before
     * its completions, so to now would count what a busy thread finished
     * since that look as one request still running, and a thread working
     * through a deep queue would read as stuck past the budget (core/conn/
     * README.md, "Depth"); a stuck one reads as stuck a look later. */
    uint64_t running = d->looked_ns > t->busy_since_ns ? d->looked_ns - t->busy_since_ns : 0;
    return t->outstanding < depth_for(d, t->slow_ns, running, deep_ok);
}

bool dispatch_room(const struct dispatch *d, unsigned w, bool deep) { return room_for(d, w, deep); }

/* What a request of thread w's may take, as turns count it: its slow side;
 * 0 (unknown) while it has no pace or is not active. */
static uint64_t turn_pace(const struct dispatch *d, unsigned w)
{
    return w < d->active ? d->t[w].slow_ns : 0;
}

/* Turns go round the waiting connections in arrival order. A turn of a
 * single request would have each response to a pipelining client written
 * on its own (core/conn/README.md, "Turns"), so a turn takes as many as its
 * credit covers at the thread's pace; the pace is the thread's, and a
 * client's own requests may be slower, so what they really took is
 * charged when they finish (dispatch_charge): a connection whose turn ran
 * over pays it back, a turn of one request at a time, before it has a
 * turn of several again. A connection starts a turn's worth in debt
 * (DISPATCH_CREDIT_START), so its first turn is one request. */
unsigned dispatch_turn(const struct dispatch *d, unsigned w, int64_t *credit)
{
    *credit = *credit < 0 ? *credit + DISPATCH_TURN_NS : DISPATCH_TURN_NS; /* at most a turn's worth */
    uint64_t pace = turn_pace(d, w);
    if (!pace || *credit <= 0)
        return 1;
    return within_capacity((uint64_t)*credit / pace, d->capacity);
}

/* Out of a turn nobody waits, so nothing is charged: what bounds a
 * pipeline binding deep then is this, a full turn's count of its requests
 * at the thread's slow side, whatever its connection's credit (a debt is
 * paid back in turns only). */
bool dispatch_turn_fits(const struct dispatch *d, unsigned w, unsigned n)
{
    uint64_t pace = turn_pace(d, w);
    return pace && n <= DISPATCH_TURN_NS / pace;
}

void dispatch_charge(int64_t *credit, uint64_t ran_ns)
{
    /* A debt of a century at most: no overflow, whatever the clock says. */
    const int64_t most = INT64_C(1) << 62;
    int64_t ran = ran_ns < (uint64_t)most ? (int64_t)ran_ns : most;
    *credit = *credit > -most + ran ? *credit - ran : -most;
}

/* Only the active threads: a thread above them gets nothing new, so it
 * empties and can be retired. */
unsigned dispatch_pick(const struct dispatch *d)
{
    unsigned best = DISPATCH_NONE;
    for (unsigned w = 0; w < d->active; w++)
        if ((best == DISPATCH_NONE || d->t[w].outstanding < d->t[best].outstanding) &&
            room_for(d, w, true))
            best = w;
    return best;
}

/* Thread w's pace from the requests it ran since the last settling: the
 * time they ran (dispatch_done) over their number. */
static void settle_pace(struct dispatch_thread *t)
{
    uint64_t sample = t->work_ns / t->run_pass;
    if (!sample)
        sample = 1; /* measured: faster than the clock tells */
    t->pace_ns = t->pace_ns ? (t->pace_ns * 3 + sample) / 4 : sample;
    /* The depth is judged at the slow side of the pace: a thread whose
     * requests mostly take a millisecond and sometimes a hundred would
     * otherwise, after a run of fast ones, take requests behind the next
     * one, sometimes slow, and those would wait it out while another
     * thread frees first. Only a sample past the budget sets it: one
     * under it is what the depth already allows for, and on a shared CPU
     * a settling that lost its CPU reads slow without its requests being
     * so. The excess over the pace falls back by a DISPATCH_SLOW_FALL-th a
     * request (not a settling: a pass may take many), so one slow request
     * keeps the thread's depth at one for some dozens of fast ones. */
    uint64_t excess = t->slow_ns > t->pace_ns ? t->slow_ns - t->pace_ns : 0;
    for (unsigned k = 0; k < t->run_pass && excess; k++)
        excess -= excess / DISPATCH_SLOW_FALL ? excess / DISPATCH_SLOW_FALL : excess;
    t->slow_ns = t->pace_ns + excess;
    if (sample > DISPATCH_BUDGET_NS && sample > t->slow_ns)
        t->slow_ns = sample;
}

/* Its pace, if it ran any; then its current request, if it has one,
 * started at the last stamp of the completions taken; or, when it is the
 * only one left, at its own submit if that came later (the loop takes a
 * pass's sockets before its completions, so it may have given work to a
 * thread that had already run dry without knowing). */
static void settle_thread(struct dispatch_thread *t)
{
    if (t->run_pass)
        settle_pace(t);
    t->busy_since_ns = t->last_end_ns;
    /* With one left it is the newest. With more, the oldest's submit is not
     * kept: the last stamp may start it early, which only shortens the
     * thread's queue until its next completion. */
    if (t->outstanding == 1 && t->last_submit_ns > t->busy_since_ns)
        t->busy_since_ns = t->last_submit_ns;
    t->done_pass = t->run_pass = 0;
    t->work_ns = 0;
}

int dispatch_submit(struct dispatch *d, unsigned w, struct job *job)
{
    if (w == DISPATCH_NONE || w >= d->active || d->t[w].outstanding >= d->capacity)
        return HANDOFF_FULL;
    struct dispatch_thread *t = &d->t[w];
    int r = d->handoff->ops->submit(d->handoff, w, job);
    if (r == HANDOFF_OK) {
        if (!t->outstanding) {
            if (t->done_pass) /* settled now, so that settling does not move its start */
                settle_thread(t);
            t->busy_since_ns = d->now_ns;
        }
        job->thread = w;
        job->submit_ns = d->now_ns;
        t->last_submit_ns = d->now_ns;
        t->outstanding++;
        d->outstanding_total++;
    }
    return r;
}

bool dispatch_can_retry(const struct dispatch *d)
{
    return d->pending_head && dispatch_pick(d) != DISPATCH_NONE;
}

uint64_t dispatch_done(struct dispatch *d, const struct job *job, uint64_t now_ms)
{
    struct dispatch_thread *t = &d->t[job->thread];
    t->seen_ms = now_ms;
    t->outstanding--;
    d->outstanding_total--;
    /* A thread runs its requests one after another, so this one started
     * when it was submitted or when the one before it finished, whichever
     * came later: the time between is the thread's idle time, not work. It
     * ended at the thread's stamp, not at the pass that took it: the loop
     * may take it long after, at the end of a hold or a doze, and a pace
     * that counted the idle time since would shrink the thread's queue, so
     * it ran dry sooner in the next hold and looked slower still (core/conn/
     * README.md, "Pace"). A completion with no stamp ends at the pass. */
    uint64_t end = job->done_ns && job->done_ns < d->now_ns ? job->done_ns : d->now_ns;
    uint64_t start = job->submit_ns > t->last_end_ns ? job->submit_ns : t->last_end_ns;
    uint64_t ran = end > start ? end - start : 0;
    if (end > t->last_end_ns)
        t->last_end_ns = end;
    t->done_pass++;
    d->unsettled = true;
    /* Not run (job_skip): the thread is past it, but its moment is no
     * sample of what a request takes, and would read a thread whose
     * clients left as fast. */
    if (job->incomplete == JOB_UNRUN)
        return 0;
    t->work_ns += ran;
    t->run_pass++;
    return ran;
}

void dispatch_settle(struct dispatch *d)
{
    d->looked_ns = d->now_ns;
    if (!d->unsettled)
        return;
    d->unsettled = false;
    for (unsigned w = 0; w < d->active; w++)
        if (d->t[w].done_pass)
            settle_thread(&d->t[w]);
}

void dispatch_message(struct dispatch *d, const struct job *job, uint64_t now_ms)
{
    struct dispatch_thread *t = &d->t[job->thread];
    t->seen_ms = now_ms;
    t->owed++; /* until answered (dispatch_answered) */
    d->talked_ms = now_ms;
}

void dispatch_answered(struct dispatch *d, const struct job *job, uint64_t now_ms)
{
    struct dispatch_thread *t = &d->t[job->thread];
    t->owed--;
    t->seen_ms = now_ms;
}

bool dispatch_thread_working(const struct dispatch *d, unsigned w, uint64_t now_ms, uint64_t timeout_ms)
{
    return d->t[w].owed > 0 || now_ms - d->t[w].seen_ms < timeout_ms;
}

/* Doubly linked: a connection leaves from anywhere in it (a reset, a
 * timeout) at a constant cost, so clients that park many connections and
 * reset them newest first cost the loop no walk of the list each. */
void dispatch_park(struct dispatch *d, struct conn *c, bool first)
{
    d->waiting++;
    if (first) {
        c->pending_prev = NULL;
        c->pending_next = d->pending_head;
        if (d->pending_head)
            d->pending_head->pending_prev = c;
        else
            d->pending_tail = c;
        d->pending_head = c;
        return;
    }
    c->pending_next = NULL;
    c->pending_prev = d->pending_tail;
    if (d->pending_tail)
        d->pending_tail->pending_next = c;
    else
        d->pending_head = c;
    d->pending_tail = c;
}

void dispatch_unpark(struct dispatch *d, struct conn *c)
{
    if (!c->pending_prev && d->pending_head != c)
        return; /* not parked */
    if (c->pending_prev)
        c->pending_prev->pending_next = c->pending_next;
    else
        d->pending_head = c->pending_next;
    if (c->pending_next)
        c->pending_next->pending_prev = c->pending_prev;
    else
        d->pending_tail = c->pending_prev;
    c->pending_prev = c->pending_next = NULL;
    d->waiting--;
}

/* A pool that talks to the loop mid-request (a response streamed in
 * parts, a body read in windows) waits for the loop's answer to each
 * message: a hold would stall it for the whole hold. So no hold while a
 * message is unanswered, nor within HOLD_QUIET_MS of the last one (a
 * thread posts the next part while the loop sleeps deaf). */
#define HOLD_QUIET_MS 1000

static bool pool_talks_to_loop(const struct dispatch *d, uint64_t now_ms)
{
    if (d->talked_ms && now_ms - d->talked_ms < HOLD_QUIET_MS)
        return true;
    for (unsigned w = 0; w < d->active; w++)
        if (d->t[w].owed)
            return true;
    return false;
}

void dispatch_plan_wait(struct dispatch *d, uint64_t now_ms, struct dispatch_wait *w)
{
    const struct handoff_ops *hops = d->handoff->ops;
    *w = (struct dispatch_wait){0};
    /* Every pool thread has work queued for a while: let requests and
     * completions gather, deaf to the sockets, and take them in one pass
     * (handoffs/README.md, "Holding"). */
    if (hops->hold && !pool_talks_to_loop(d, now_ms))
        w->hold_ns = hops->hold(d->handoff, d->outstanding_total);
    /* A busy pool's next completion is near: wait for it on a timer (the
     * handoff polls) rather than have the pool wake us. */
    if (!w->hold_ns && hops->doze && !d->no_doze)
        w->doze_ns = hops->doze(d->handoff, d->outstanding_total);
}

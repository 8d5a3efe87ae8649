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
    d->active = n;
    if (d->handoff->ops->set_active)
        d->handoff->ops->set_active(d->handoff, n);
    return 0;
}

/* Only the active threads: a thread above them gets nothing new, so it
 * empties and can be retired. */
unsigned dispatch_pick(const struct dispatch *d)
{
    unsigned best = 0;
    for (unsigned w = 1; w < d->active; w++)
        if (d->t[w].outstanding < d->t[best].outstanding)
            best = w;
    return best;
}

bool dispatch_room(const struct dispatch *d, unsigned w)
{
    return d->t[w].outstanding < d->capacity;
}

int dispatch_submit(struct dispatch *d, unsigned w, struct job *job)
{
    if (!dispatch_room(d, w))
        return HANDOFF_FULL;
    int r = d->handoff->ops->submit(d->handoff, w, job);
    if (r == HANDOFF_OK) {
        job->thread = w;
        d->t[w].outstanding++;
        d->outstanding_total++;
    }
    return r;
}

bool dispatch_can_retry(const struct dispatch *d)
{
    return d->pending_head && d->outstanding_total < d->active * d->capacity;
}

void dispatch_done(struct dispatch *d, const struct job *job, uint64_t now_ms)
{
    struct dispatch_thread *t = &d->t[job->thread];
    t->seen_ms = now_ms;
    t->outstanding--;
    d->outstanding_total--;
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

void dispatch_park(struct dispatch *d, struct conn *c)
{
    c->pending_next = NULL;
    if (d->pending_tail)
        d->pending_tail->pending_next = c;
    else
        d->pending_head = c;
    d->pending_tail = c;
}

void dispatch_unpark(struct dispatch *d, struct conn *c)
{
    struct conn **pp = &d->pending_head, *prev = NULL;
    while (*pp && *pp != c) {
        prev = *pp;
        pp = &(*pp)->pending_next;
    }
    if (*pp)
        *pp = c->pending_next;
    if (d->pending_tail == c)
        d->pending_tail = prev;
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

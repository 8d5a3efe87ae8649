/* fault.c — see fault.h. The wrapper's ops are the inner backend's with
 * submit replaced, so the loop's hot path has no test hook of its own: it
 * calls submit through the ops as it always does. The pool threads and
 * the loop's drain go straight through to the inner backend, whose
 * counters are the ones the instruments read. */
#include "fault.h"

#include <errno.h>
#include <stdlib.h>

#include "../lib/clock.h"

struct fault {
    struct handoff base;       /* first: the loop and the pool see a handoff */
    struct handoff_ops ops;    /* inner's, but submit and destroy */
    struct handoff *inner;
    long full_ms;
    uint64_t since_ms;         /* the first submit */
    bool started;
};

static struct handoff *inner_of(struct handoff *h) { return ((struct fault *)h)->inner; }

static int fault_submit(struct handoff *h, unsigned w, struct job *job)
{
    (void)w, (void)job;
    struct fault *f = (struct fault *)h;
    uint64_t now = clock_coarse_ms();
    if (!f->started) {
        f->started = true;
        f->since_ms = now;
    }
    if (now - f->since_ms < (uint64_t)f->full_ms)
        return HANDOFF_FULL;
    errno = EIO;
    return HANDOFF_ERROR;
}

static void fault_destroy(struct handoff *h)
{
    struct handoff *in = inner_of(h);
    in->ops->destroy(in);
    handoff_free(h);
}

static void fault_flush(struct handoff *h) { inner_of(h)->ops->flush(inner_of(h)); }

static int fault_watch(struct handoff *h, int epfd, uint64_t tag)
{
    return inner_of(h)->ops->watch(inner_of(h), epfd, tag);
}

static size_t fault_drain(struct handoff *h, bool fd_ready, struct job **out, size_t max)
{
    return inner_of(h)->ops->drain(inner_of(h), fd_ready, out, max);
}

static bool fault_before_sleep(struct handoff *h, unsigned outstanding)
{
    return inner_of(h)->ops->before_sleep(inner_of(h), outstanding);
}

static void fault_after_sleep(struct handoff *h) { inner_of(h)->ops->after_sleep(inner_of(h)); }

static uint64_t fault_doze(struct handoff *h, unsigned outstanding)
{
    return inner_of(h)->ops->doze(inner_of(h), outstanding);
}

static uint64_t fault_hold(struct handoff *h, unsigned outstanding)
{
    return inner_of(h)->ops->hold(inner_of(h), outstanding);
}

static void fault_set_active(struct handoff *h, unsigned n)
{
    h->active = n;
    inner_of(h)->ops->set_active(inner_of(h), n);
}

static struct job *fault_try_take(struct handoff *h, unsigned w)
{
    return inner_of(h)->ops->try_take(inner_of(h), w);
}

static struct job *fault_take(struct handoff *h, unsigned w) { return inner_of(h)->ops->take(inner_of(h), w); }

static int fault_complete(struct handoff *h, unsigned w, struct job *job)
{
    return inner_of(h)->ops->complete(inner_of(h), w, job);
}

static void fault_unrun(struct handoff *h, unsigned w) { inner_of(h)->ops->unrun(inner_of(h), w); }

static void fault_shutdown(struct handoff *h) { inner_of(h)->ops->shutdown(inner_of(h)); }

struct handoff *handoff_fault_wrap(struct handoff *inner, long full_ms)
{
    const struct handoff_ops *in = inner->ops;
    struct handoff_config cfg = {.threads = inner->threads, .capacity = inner->capacity};
    struct fault *f = handoff_alloc(in, &cfg, sizeof *f);
    if (!f)
        return NULL;
    /* An optional op stays absent where the inner backend has none. */
    f->ops = (struct handoff_ops){
        .name = in->name, .summary = in->summary, .create = NULL, .destroy = fault_destroy,
        .submit = fault_submit, .flush = in->flush ? fault_flush : NULL, .watch = fault_watch,
        .drain = fault_drain, .polled = in->polled, .before_sleep = fault_before_sleep,
        .after_sleep = fault_after_sleep, .doze = in->doze ? fault_doze : NULL,
        .hold = in->hold ? fault_hold : NULL,
        .set_active = in->set_active ? fault_set_active : NULL,
        .try_take = in->try_take ? fault_try_take : NULL, .take = fault_take,
        .complete = fault_complete, .unrun = in->unrun ? fault_unrun : NULL, .shutdown = fault_shutdown,
    };
    f->base.ops = &f->ops;
    f->inner = inner;
    f->full_ms = full_ms < 0 ? 0 : full_ms;
    return &f->base;
}

/* condvar.c — mutex + condvar queue per pool thread; one locked completion queue
 * plus an eventfd for the loop (libuv threadpool style).
 *
 * submit: lock, push, unlock, and signal only if the pool thread is waiting (a futex
 * wake). Pool thread: futex wait in pthread_cond_wait when its queue is empty.
 * complete: lock, push, unlock, and write the eventfd only when the completion
 * queue went from empty to non-empty (or a wake-up is owed: see
 * condvar_complete). Loop: epoll + one eventfd read per drain, then the whole
 * batch under the lock (done_eventfd.h). */
#include "handoff.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "../lib/aligned.h"
#include "done_eventfd.h"
#include "ptr_fifo.h"

struct condvar_thread {
    pthread_mutex_t lock;
    pthread_cond_t nonempty;
    struct ptr_fifo queue; /* under lock */
    bool waiting;          /* under lock: the pool thread is (about to be) in cond_wait */
    bool stopping;         /* under lock */
} __attribute__((aligned(CACHE_LINE)));

struct condvar_handoff {
    struct handoff base;
    struct condvar_thread *w;
    unsigned inited; /* pool threads whose lock/cond/queue exist (for cleanup) */
    pthread_mutex_t done_lock;
    struct ptr_fifo done; /* completions from all pool threads, under done_lock */
    struct done_eventfd loop_wake;
    /* A wake-up write failed while completions were queued: the next complete
     * or the loop's next before_sleep writes instead. Changed under done_lock;
     * before_sleep peeks without it. */
    atomic_bool wake_owed;
    bool done_inited;
};

static void condvar_destroy(struct handoff *base)
{
    struct condvar_handoff *h = (struct condvar_handoff *)base;
    if (!h)
        return;
    for (unsigned i = 0; i < h->inited; i++) {
        pthread_mutex_destroy(&h->w[i].lock);
        pthread_cond_destroy(&h->w[i].nonempty);
        ptr_fifo_destroy(&h->w[i].queue);
    }
    free(h->w);
    if (h->done_inited) {
        pthread_mutex_destroy(&h->done_lock);
        ptr_fifo_destroy(&h->done);
    }
    done_eventfd_close(&h->loop_wake);
    handoff_free(h);
}

static struct handoff *condvar_create(const struct handoff_config *cfg)
{
    struct condvar_handoff *h = handoff_alloc(&handoff_condvar, cfg, sizeof *h);
    if (!h)
        return NULL;
    h->loop_wake.fd = -1;
    atomic_init(&h->wake_owed, false);
    h->w = aligned_zalloc(cfg->threads * sizeof *h->w);
    if (!h->w)
        goto err;
    for (; h->inited < cfg->threads; h->inited++) {
        struct condvar_thread *w = &h->w[h->inited];
        if (ptr_fifo_init(&w->queue, cfg->capacity) < 0)
            goto err;
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->nonempty, NULL);
    }
    /* Every outstanding job can be completed at once: pool threads x capacity. */
    if (ptr_fifo_init(&h->done, cfg->threads * cfg->capacity) < 0)
        goto err;
    pthread_mutex_init(&h->done_lock, NULL);
    h->done_inited = true;
    if (done_eventfd_open(&h->loop_wake) < 0)
        goto err;
    return &h->base;
err:;
    int saved = errno ? errno : ENOMEM;
    condvar_destroy(&h->base);
    errno = saved;
    return NULL;
}

static int condvar_submit(struct handoff *base, unsigned wi, struct job *job)
{
    struct condvar_handoff *h = (struct condvar_handoff *)base;
    struct condvar_thread *w = &h->w[wi];
    pthread_mutex_lock(&w->lock);
    if (!ptr_fifo_push(&w->queue, job)) {
        pthread_mutex_unlock(&w->lock);
        counter_inc(&base->loop.full);
        return HANDOFF_FULL;
    }
    /* Take the waiting flag with the push, under the lock: one signal per wait,
     * and none at all while the pool thread is busy (libuv: signal only if idle). */
    bool wake = w->waiting;
    w->waiting = false;
    pthread_mutex_unlock(&w->lock);
    counter_inc(&base->loop.submitted);
    if (wake) {
        pthread_cond_signal(&w->nonempty); /* a FUTEX_WAKE */
        counter_inc(&base->loop.submit_syscalls);
        counter_inc(&base->loop.wakes_sent);
    }
    return HANDOFF_OK;
}

static int condvar_watch(struct handoff *base, int epfd, uint64_t tag)
{
    return done_eventfd_watch(&((struct condvar_handoff *)base)->loop_wake, epfd, tag);
}

/* The eventfd is reset before the batch is taken (done_eventfd.h says why). */
static size_t condvar_drain(struct handoff *base, bool fd_ready, struct job **out, size_t max)
{
    struct condvar_handoff *h = (struct condvar_handoff *)base;
    done_eventfd_reset(&h->loop_wake, base, fd_ready);
    size_t got = 0;
    pthread_mutex_lock(&h->done_lock);
    while (got < max && (out[got] = ptr_fifo_pop(&h->done)) != NULL)
        got++;
    if (ptr_fifo_count(&h->done) == 0)
        atomic_store_explicit(&h->wake_owed, false, memory_order_relaxed); /* nothing to wake for */
    pthread_mutex_unlock(&h->done_lock);
    return done_eventfd_drained(&h->loop_wake, base, got, max);
}

/* Write the eventfd for completions queued since the last drain. False if
 * the write failed: then the wake-up is owed again (unless the queue is empty:
 * the loop has taken everything, so there is nothing to wake it for). */
static bool wake_loop(struct condvar_handoff *h)
{
    if (done_eventfd_ring(&h->loop_wake))
        return true;
    pthread_mutex_lock(&h->done_lock);
    if (ptr_fifo_count(&h->done) > 0)
        atomic_store_explicit(&h->wake_owed, true, memory_order_relaxed);
    pthread_mutex_unlock(&h->done_lock);
    return false;
}

static bool condvar_before_sleep(struct handoff *base, unsigned outstanding)
{
    struct condvar_handoff *h = (struct condvar_handoff *)base;
    (void)outstanding;
    counter_inc(&base->loop.loop_parks);
    /* The eventfd is the latch, but a completion whose write failed left it
     * unset: the loop rings it itself, so that the epoll_wait it is about to
     * make reports the queue. If that fails too, the loop must not block: it
     * polls and tries again next pass. */
    if (!atomic_load_explicit(&h->wake_owed, memory_order_relaxed))
        return false;
    pthread_mutex_lock(&h->done_lock);
    bool owed = atomic_exchange_explicit(&h->wake_owed, false, memory_order_relaxed);
    pthread_mutex_unlock(&h->done_lock);
    if (!owed)
        return false;
    counter_inc(&base->loop.sleep_syscalls);
    return !wake_loop(h);
}

static void condvar_after_sleep(struct handoff *base) { (void)base; }

static struct job *condvar_try_take(struct handoff *base, unsigned wi)
{
    struct condvar_handoff *h = (struct condvar_handoff *)base;
    struct condvar_thread *w = &h->w[wi];
    pthread_mutex_lock(&w->lock);
    struct job *job = ptr_fifo_pop(&w->queue);
    pthread_mutex_unlock(&w->lock);
    if (job)
        counter_inc(&base->thread[wi].taken);
    return job;
}

static struct job *condvar_take(struct handoff *base, unsigned wi)
{
    struct condvar_handoff *h = (struct condvar_handoff *)base;
    struct condvar_thread *w = &h->w[wi];
    struct handoff_thread_counters *c = &base->thread[wi];
    pthread_mutex_lock(&w->lock);
    struct job *job;
    while ((job = ptr_fifo_pop(&w->queue)) == NULL && !w->stopping) {
        w->waiting = true;
        counter_inc(&c->parks);
        counter_inc(&c->take_syscalls); /* the futex wait inside cond_wait */
        pthread_cond_wait(&w->nonempty, &w->lock);
    }
    w->waiting = false;
    pthread_mutex_unlock(&w->lock);
    if (job)
        counter_inc(&c->taken);
    return job;
}

/* Only the push that makes the queue non-empty writes the eventfd. Safe because
 * the loop resets the eventfd before it empties the queue (see condvar_drain):
 * while the queue is non-empty, the write of the push that made it so has
 * happened or is about to, after that reset, so epoll will report it.
 * That write can fail, and the completions pushed behind it meanwhile found
 * the queue non-empty and wrote nothing: taking our job back would not help
 * them. So a failed write leaves the job queued and the wake-up owed
 * (wake_owed), paid by the next complete or by the loop before it sleeps;
 * complete returns 0, the job being handed back either way. */
static int condvar_complete(struct handoff *base, unsigned wi, struct job *job)
{
    struct condvar_handoff *h = (struct condvar_handoff *)base;
    struct handoff_thread_counters *c = &base->thread[wi];
    pthread_mutex_lock(&h->done_lock);
    bool was_empty = ptr_fifo_count(&h->done) == 0;
    bool ok = ptr_fifo_push(&h->done, job);
    bool wake = ok && (was_empty || atomic_load_explicit(&h->wake_owed, memory_order_relaxed));
    if (wake)
        atomic_store_explicit(&h->wake_owed, false, memory_order_relaxed);
    pthread_mutex_unlock(&h->done_lock);
    if (!ok) { /* impossible under the capacity rule */
        errno = ENOBUFS;
        return -1;
    }
    counter_inc(&c->completed);
    if (wake) {
        counter_inc(&c->complete_syscalls);
        counter_inc(&c->loop_wakes);
        wake_loop(h);
    }
    return 0;
}

static void condvar_shutdown(struct handoff *base)
{
    struct condvar_handoff *h = (struct condvar_handoff *)base;
    for (unsigned i = 0; i < base->threads; i++) {
        pthread_mutex_lock(&h->w[i].lock);
        h->w[i].stopping = true;
        pthread_cond_broadcast(&h->w[i].nonempty);
        pthread_mutex_unlock(&h->w[i].lock);
    }
}

const struct handoff_ops handoff_condvar = {
    .name = "condvar",
    .summary = "mutex+condvar queue per pool thread; locked completion queue + eventfd (libuv style)",
    .create = condvar_create,
    .destroy = condvar_destroy,
    .submit = condvar_submit,
    .watch = condvar_watch,
    .drain = condvar_drain,
    .polled = false,
    .before_sleep = condvar_before_sleep,
    .after_sleep = condvar_after_sleep,
    .try_take = condvar_try_take,
    .take = condvar_take,
    .complete = condvar_complete,
    .shutdown = condvar_shutdown,
};

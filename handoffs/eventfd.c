/* eventfd.c — a locked queue plus an eventfd each way: a write per handoff.
 *
 * submit: push under the pool thread's lock, write(its eventfd). Pool thread: a
 * blocking read of its eventfd returns how many jobs were announced; it pops
 * that many into a private batch and serves later takes from the batch without
 * a syscall. complete: push to the pool thread's completion queue, write(loop
 * eventfd). Loop: epoll + one read, then pop every completion queue
 * (done_eventfd.h). */
#include "handoff.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../lib/aligned.h"
#include "done_eventfd.h"
#include "ptr_fifo.h"

struct eventfd_thread {
    pthread_mutex_t lock;    /* guards queue */
    struct ptr_fifo queue;   /* loop -> pool thread */
    int efd;                 /* counts jobs pushed on queue; the pool thread blocks in read */
    struct ptr_fifo batch;   /* thread-private: popped, not yet returned by take */
    pthread_mutex_t done_lock;
    struct ptr_fifo done;    /* pool thread -> loop, under done_lock */
} __attribute__((aligned(CACHE_LINE)));

struct eventfd_handoff {
    struct handoff base;
    struct eventfd_thread *w;
    unsigned inited;
    unsigned drain_next; /* fairness when drain is cut short by max */
    struct done_eventfd loop_wake; /* written once per completion */
    atomic_bool stopping;
};

static void eventfd_destroy(struct handoff *base)
{
    struct eventfd_handoff *h = (struct eventfd_handoff *)base;
    if (!h)
        return;
    for (unsigned i = 0; i < h->inited; i++) {
        struct eventfd_thread *w = &h->w[i];
        pthread_mutex_destroy(&w->lock);
        pthread_mutex_destroy(&w->done_lock);
        ptr_fifo_destroy(&w->queue);
        ptr_fifo_destroy(&w->batch);
        ptr_fifo_destroy(&w->done);
        if (w->efd >= 0)
            close(w->efd);
    }
    free(h->w);
    done_eventfd_close(&h->loop_wake);
    handoff_free(h);
}

static struct handoff *eventfd_create(const struct handoff_config *cfg)
{
    struct eventfd_handoff *h = handoff_alloc(&handoff_eventfd, cfg, sizeof *h);
    if (!h)
        return NULL;
    h->loop_wake.fd = -1;
    h->w = aligned_zalloc(cfg->threads * sizeof *h->w);
    if (!h->w)
        goto err;
    for (; h->inited < cfg->threads; h->inited++) {
        struct eventfd_thread *w = &h->w[h->inited];
        pthread_mutex_init(&w->lock, NULL);
        pthread_mutex_init(&w->done_lock, NULL);
        w->efd = eventfd(0, EFD_CLOEXEC); /* blocking: the pool thread sleeps in read */
        if (ptr_fifo_init(&w->queue, cfg->capacity) < 0 || ptr_fifo_init(&w->batch, cfg->capacity) < 0 ||
            ptr_fifo_init(&w->done, cfg->capacity) < 0 || w->efd < 0) {
            h->inited++;
            goto err;
        }
    }
    if (done_eventfd_open(&h->loop_wake) < 0)
        goto err;
    return &h->base;
err:;
    int saved = errno ? errno : ENOMEM;
    eventfd_destroy(&h->base);
    errno = saved;
    return NULL;
}

static int eventfd_submit(struct handoff *base, unsigned wi, struct job *job)
{
    struct eventfd_handoff *h = (struct eventfd_handoff *)base;
    struct eventfd_thread *w = &h->w[wi];
    pthread_mutex_lock(&w->lock);
    bool ok = ptr_fifo_push(&w->queue, job);
    pthread_mutex_unlock(&w->lock);
    if (!ok) {
        counter_inc(&base->loop.full);
        return HANDOFF_FULL;
    }
    /* Push first, then write: a count the pool thread reads never exceeds the jobs
     * already queued (except shutdown's extra one, see take). */
    uint64_t one = 1;
    counter_inc(&base->loop.submit_syscalls);
    if (write(w->efd, &one, sizeof one) != sizeof one) {
        /* HANDOFF_ERROR means "nothing queued": the loop then still owns the
         * job and may reuse it at once. So take the push back. The pool thread
         * only pops what a count announced, so the job is normally still
         * there; only after shutdown (whose extra count lets the pool thread pop
         * unannounced jobs) can it be gone, and then it was handed over
         * after all: the pool thread will complete it, so report OK. */
        if (ptr_fifo_undo_push(&w->queue, &w->lock, job))
            return HANDOFF_ERROR;
    }
    counter_inc(&base->loop.submitted);
    return HANDOFF_OK;
}

static int eventfd_watch(struct handoff *base, int epfd, uint64_t tag)
{
    return done_eventfd_watch(&((struct eventfd_handoff *)base)->loop_wake, epfd, tag);
}

/* The eventfd is reset before the queues are popped (done_eventfd.h says why). */
static size_t eventfd_drain(struct handoff *base, bool fd_ready, struct job **out, size_t max)
{
    struct eventfd_handoff *h = (struct eventfd_handoff *)base;
    done_eventfd_reset(&h->loop_wake, base, fd_ready);
    size_t got = 0;
    for (unsigned visited = 0; visited < base->active && got < max; visited++) {
        struct eventfd_thread *w = &h->w[h->drain_next];
        pthread_mutex_lock(&w->done_lock);
        while (got < max && (out[got] = ptr_fifo_pop(&w->done)) != NULL)
            got++;
        bool empty = ptr_fifo_count(&w->done) == 0;
        pthread_mutex_unlock(&w->done_lock);
        if (empty)
            h->drain_next = (h->drain_next + 1) % base->active;
    }
    return done_eventfd_drained(&h->loop_wake, base, got, max);
}

/* Pool threads at n and above have nothing outstanding (handoff.h): a drain
 * takes no lock of theirs. */
static void eventfd_set_active(struct handoff *base, unsigned n)
{
    struct eventfd_handoff *h = (struct eventfd_handoff *)base;
    base->active = n;
    if (h->drain_next >= n)
        h->drain_next = 0;
}

static bool eventfd_before_sleep(struct handoff *base, unsigned outstanding)
{
    (void)outstanding;
    counter_inc(&base->loop.loop_parks);
    return false; /* the eventfd is the latch */
}

static void eventfd_after_sleep(struct handoff *base) { (void)base; }

/* Move up to n queued jobs into the private batch; returns how many moved. */
static unsigned refill_batch(struct eventfd_thread *w, uint64_t n)
{
    unsigned moved = 0;
    pthread_mutex_lock(&w->lock);
    struct job *job;
    while (moved < n && (job = ptr_fifo_pop(&w->queue)) != NULL) {
        ptr_fifo_push(&w->batch, job);
        moved++;
    }
    pthread_mutex_unlock(&w->lock);
    return moved;
}

static struct job *eventfd_take(struct handoff *base, unsigned wi)
{
    struct eventfd_handoff *h = (struct eventfd_handoff *)base;
    struct eventfd_thread *w = &h->w[wi];
    struct handoff_thread_counters *c = &base->thread[wi];
    for (;;) {
        struct job *job = ptr_fifo_pop(&w->batch);
        if (job) {
            counter_inc(&c->taken);
            return job;
        }
        /* Shutdown writes the eventfd once; after that read has been consumed
         * a blocking read would never return, so check the flag first. */
        if (atomic_load(&h->stopping)) {
            if (refill_batch(w, UINT64_MAX) == 0)
                return NULL;
            continue;
        }
        uint64_t announced;
        counter_inc(&c->take_syscalls);
        counter_inc(&c->parks);
        if (read(w->efd, &announced, sizeof announced) != sizeof announced) {
            if (errno == EINTR)
                continue;
            return NULL;
        }
        /* Pop what the counter announced, no more: a job pushed but not yet
         * announced would leave a count with nothing behind it. Shutdown's
         * extra count may make us pop fewer; the stopping check handles it. */
        refill_batch(w, announced);
    }
}

static int eventfd_complete(struct handoff *base, unsigned wi, struct job *job)
{
    struct eventfd_handoff *h = (struct eventfd_handoff *)base;
    struct eventfd_thread *w = &h->w[wi];
    struct handoff_thread_counters *c = &base->thread[wi];
    pthread_mutex_lock(&w->done_lock);
    bool ok = ptr_fifo_push(&w->done, job);
    pthread_mutex_unlock(&w->done_lock);
    if (!ok) { /* impossible under the capacity rule */
        errno = ENOBUFS;
        return -1;
    }
    counter_inc(&c->completed);
    counter_inc(&c->complete_syscalls);
    counter_inc(&c->loop_wakes);
    if (done_eventfd_ring(&h->loop_wake))
        return 0;
    /* As in submit: -1 must mean "not handed back", so the pool thread still
     * owns the job. Take the push back unless the loop has drained it already
     * (woken by another completion), in which case it was handed back. */
    return ptr_fifo_undo_push(&w->done, &w->done_lock, job) ? -1 : 0;
}

static void eventfd_shutdown(struct handoff *base)
{
    struct eventfd_handoff *h = (struct eventfd_handoff *)base;
    atomic_store(&h->stopping, true);
    uint64_t one = 1;
    for (unsigned i = 0; i < base->threads; i++)
        if (write(h->w[i].efd, &one, sizeof one) < 0) {
            /* nothing else to do: the pool thread sees `stopping` on its next take */
        }
}

const struct handoff_ops handoff_eventfd = {
    .name = "eventfd",
    .summary = "locked queue + one eventfd each way (a write per handoff)",
    .create = eventfd_create,
    .destroy = eventfd_destroy,
    .submit = eventfd_submit,
    .watch = eventfd_watch,
    .drain = eventfd_drain,
    .polled = false,
    .before_sleep = eventfd_before_sleep,
    .after_sleep = eventfd_after_sleep,
    .set_active = eventfd_set_active,
    .try_take = NULL,
    .take = eventfd_take,
    .complete = eventfd_complete,
    .shutdown = eventfd_shutdown,
};

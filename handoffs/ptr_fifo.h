/* ptr_fifo.h — a bounded FIFO of job pointers with no synchronisation of its own.
 *
 * The locked backends (condvar.c, eventfd.c) keep one behind a mutex; the lock
 * is what publishes the slots, so the indices here are plain integers.
 * Free-running unsigned indices with a power-of-two mask (kfifo style): the
 * count is tail - head even across wrap-around, and full/empty never collide. */
#ifndef CSERVE_PTR_FIFO_H
#define CSERVE_PTR_FIFO_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

struct job;

struct ptr_fifo {
    struct job **slots;
    unsigned mask;
    unsigned head; /* next slot to pop */
    unsigned tail; /* next slot to push */
};

/* Smallest power of two >= n (n >= 1). */
static inline unsigned pow2_at_least(unsigned n)
{
    unsigned p = 1;
    while (p < n)
        p <<= 1;
    return p;
}

/* Room for at least `min_capacity` pointers. 0, or -1 when out of memory. */
static inline int ptr_fifo_init(struct ptr_fifo *f, unsigned min_capacity)
{
    unsigned cap = pow2_at_least(min_capacity);
    f->slots = calloc(cap, sizeof *f->slots);
    f->mask = cap - 1;
    f->head = f->tail = 0;
    return f->slots ? 0 : -1;
}

static inline void ptr_fifo_destroy(struct ptr_fifo *f)
{
    free(f->slots);
    f->slots = NULL;
}

static inline unsigned ptr_fifo_count(const struct ptr_fifo *f) { return f->tail - f->head; }

static inline bool ptr_fifo_push(struct ptr_fifo *f, struct job *job)
{
    if (f->tail - f->head > f->mask)
        return false;
    f->slots[f->tail++ & f->mask] = job;
    return true;
}

/* Take back the newest entry if it is `job` (a push the producer must undo:
 * see eventfd_submit). False when it is gone already, popped by the consumer. */
static inline bool ptr_fifo_unpush(struct ptr_fifo *f, struct job *job)
{
    if (f->head == f->tail || f->slots[(f->tail - 1) & f->mask] != job)
        return false;
    f->tail--;
    return true;
}

/* A push whose wake-up write failed must not count as handed over ("error =
 * not queued"): take it back under the queue's lock. True when taken back,
 * with errno as the failed write left it; false when the consumer popped it
 * already (woken some other way), so it was handed over after all. */
static inline bool ptr_fifo_undo_push(struct ptr_fifo *f, pthread_mutex_t *lock, struct job *job)
{
    int saved = errno;
    pthread_mutex_lock(lock);
    bool taken_back = ptr_fifo_unpush(f, job);
    pthread_mutex_unlock(lock);
    errno = saved;
    return taken_back;
}

/* NULL when empty. */
static inline struct job *ptr_fifo_pop(struct ptr_fifo *f)
{
    if (f->head == f->tail)
        return NULL;
    return f->slots[f->head++ & f->mask];
}

#endif

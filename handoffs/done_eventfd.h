/* done_eventfd.h — the loop's side of a completion eventfd, shared by the
 * locked backends (condvar.c, eventfd.c).
 *
 * Their pool threads push completions on a locked queue and write an eventfd
 * the loop watches with epoll. The loop resets the eventfd (one read) *before*
 * it takes the batch: a completion pushed after the take writes after its
 * push, so the next epoll_wait reports it; one pushed before the take is in
 * the batch. Resetting after the take instead could swallow the write of a
 * completion that arrived in between, and the loop would sleep on a non-empty
 * queue. A drain cut short at max is continued on the same pass without the
 * read: this round's reset has happened, and another read would only find
 * EAGAIN. */
#ifndef CSERVE_DONE_EVENTFD_H
#define CSERVE_DONE_EVENTFD_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "handoff.h"

struct done_eventfd {
    int fd;         /* readable while completions may be waiting; -1 before open */
    bool cut_short; /* loop-only: the last drain stopped at max */
};

/* The fd, or -1 with errno set. Non-blocking: the loop reads it only after
 * epoll reported it, and a read that finds nothing must not wait. */
static inline int done_eventfd_open(struct done_eventfd *d)
{
    d->cut_short = false;
    d->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return d->fd;
}

static inline void done_eventfd_close(struct done_eventfd *d)
{
    if (d->fd >= 0)
        close(d->fd);
    d->fd = -1;
}

static inline int done_eventfd_watch(const struct done_eventfd *d, int epfd, uint64_t tag)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = tag};
    return epoll_ctl(epfd, EPOLL_CTL_ADD, d->fd, &ev);
}

/* The start of a drain, before the batch is taken: the reset above, counted
 * in the loop's drain syscalls. */
static inline void done_eventfd_reset(struct done_eventfd *d, struct handoff *base, bool fd_ready)
{
    if (!fd_ready || d->cut_short)
        return;
    uint64_t v;
    counter_inc(&base->loop.drain_syscalls);
    if (read(d->fd, &v, sizeof v) < 0 && errno == EAGAIN)
        counter_inc(&base->loop.eagain);
}

/* The end of a drain that took `got` of at most `max`: remembers whether it
 * was cut short, counts the completions, returns got. */
static inline size_t done_eventfd_drained(struct done_eventfd *d, struct handoff *base, size_t got, size_t max)
{
    d->cut_short = got == max;
    counter_add(&base->loop.drained, got);
    return got;
}

/* A pool thread's wake-up of the loop. False when the write failed (the
 * caller decides what is owed then). */
static inline bool done_eventfd_ring(const struct done_eventfd *d)
{
    uint64_t one = 1;
    return write(d->fd, &one, sizeof one) == sizeof one;
}

#endif

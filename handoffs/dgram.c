/* dgram.c — the baseline: two SOCK_DGRAM socketpairs per pool thread.
 *
 * The job pointer *is* the datagram. The kernel's socket lock is the fence that
 * publishes the job, the socket buffer is the queue, and the completion end is
 * something epoll can wake the loop on. The price is a syscall at every step:
 * submit send, pool thread recv, completion send, loop recv per completion plus the
 * recv that ends each drain with EAGAIN. */
#include "handoff.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../lib/aligned.h"

struct dgram_thread {
    int submit_loop;   /* loop sends jobs here (non-blocking) */
    int submit_thread; /* pool thread's blocking recv */
    int done_thread;   /* pool thread sends completions here (blocking) */
    int done_loop;     /* loop recvs completions here (non-blocking, in epoll) */
} __attribute__((aligned(CACHE_LINE)));

struct dgram_handoff {
    struct handoff base;
    struct dgram_thread *w;
    unsigned drain_next; /* pool thread the next drain starts at (fairness under max) */
    bool cut_short;      /* the last drain stopped at max: datagrams are left */
    atomic_bool stopping;
};

static void close_pair(int *a, int *b)
{
    if (*a >= 0)
        close(*a);
    if (*b >= 0)
        close(*b);
    *a = *b = -1;
}

/* One datagram costs a few hundred bytes of socket buffer (skb overhead); size
 * the send buffer so `capacity` pointers always fit and submit only reports FULL
 * when the capacity rule was broken. */
static int open_pair(int *loop_end, int *thread_end, unsigned capacity, int loop_sends)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -1;
    *loop_end = sv[0];
    *thread_end = sv[1];
    int sndbuf = (int)(capacity * 2048u);
    setsockopt(loop_sends ? sv[0] : sv[1], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    return 0;
}

static void dgram_destroy(struct handoff *base)
{
    struct dgram_handoff *h = (struct dgram_handoff *)base;
    if (!h)
        return;
    if (h->w) {
        for (unsigned i = 0; i < base->threads; i++) {
            close_pair(&h->w[i].submit_loop, &h->w[i].submit_thread);
            close_pair(&h->w[i].done_thread, &h->w[i].done_loop);
        }
        free(h->w);
    }
    handoff_free(h);
}

static struct handoff *dgram_create(const struct handoff_config *cfg)
{
    struct dgram_handoff *h = handoff_alloc(&handoff_dgram, cfg, sizeof *h);
    if (!h)
        return NULL;
    h->w = aligned_zalloc(cfg->threads * sizeof *h->w);
    if (!h->w)
        goto err;
    for (unsigned i = 0; i < cfg->threads; i++)
        h->w[i] = (struct dgram_thread){-1, -1, -1, -1};
    for (unsigned i = 0; i < cfg->threads; i++) {
        struct dgram_thread *w = &h->w[i];
        if (open_pair(&w->submit_loop, &w->submit_thread, cfg->capacity, 1) < 0 ||
            open_pair(&w->done_loop, &w->done_thread, cfg->capacity, 0) < 0)
            goto err;
    }
    return &h->base;
err:;
    int saved = errno;
    dgram_destroy(&h->base);
    errno = saved;
    return NULL;
}

static int dgram_submit(struct handoff *base, unsigned w, struct job *job)
{
    struct dgram_handoff *h = (struct dgram_handoff *)base;
    counter_inc(&base->loop.submit_syscalls);
    ssize_t n = send(h->w[w].submit_loop, &job, sizeof job, MSG_DONTWAIT);
    if (n == (ssize_t)sizeof job) {
        counter_inc(&base->loop.submitted);
        return HANDOFF_OK;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)) {
        counter_inc(&base->loop.full);
        return HANDOFF_FULL;
    }
    return HANDOFF_ERROR;
}

static int dgram_watch(struct handoff *base, int epfd, uint64_t tag)
{
    struct dgram_handoff *h = (struct dgram_handoff *)base;
    for (unsigned i = 0; i < base->threads; i++) {
        /* Level-triggered: a drain cut short by `max` is re-reported. */
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = tag};
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, h->w[i].done_loop, &ev) < 0)
            return -1;
    }
    return 0;
}

/* One event tag covers every pool thread's socket, so a ready drain visits them all
 * and pays one EAGAIN recv per pool thread: the baseline's cost, kept on purpose. */
static size_t dgram_drain(struct handoff *base, bool fd_ready, struct job **out, size_t max)
{
    struct dgram_handoff *h = (struct dgram_handoff *)base;
    size_t got = 0;
    /* Nothing can be waiting unless epoll said so or the last drain stopped
     * at max (then the loop calls again, perhaps with fd_ready false). */
    if (!fd_ready && !h->cut_short)
        return 0;
    for (unsigned visited = 0; visited < base->active && got < max; visited++) {
        unsigned i = h->drain_next;
        while (got < max) {
            struct job *job;
            counter_inc(&base->loop.drain_syscalls);
            ssize_t n = recv(h->w[i].done_loop, &job, sizeof job, MSG_DONTWAIT);
            if (n != (ssize_t)sizeof job) {
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                    counter_inc(&base->loop.eagain);
                break;
            }
            out[got++] = job;
        }
        if (got < max) /* this pool thread is empty: the next drain starts after it */
            h->drain_next = (i + 1) % base->active;
    }
    h->cut_short = got == max;
    counter_add(&base->loop.drained, got);
    return got;
}

/* Pool threads at n and above have nothing outstanding (handoff.h): a drain
 * pays no EAGAIN recv for them. */
static void dgram_set_active(struct handoff *base, unsigned n)
{
    struct dgram_handoff *h = (struct dgram_handoff *)base;
    base->active = n;
    if (h->drain_next >= n)
        h->drain_next = 0;
}

static bool dgram_before_sleep(struct handoff *base, unsigned outstanding)
{
    (void)outstanding;
    counter_inc(&base->loop.loop_parks);
    return false; /* the kernel queue is the latch: epoll sees anything already sent */
}

static void dgram_after_sleep(struct handoff *base) { (void)base; }

static struct job *dgram_take(struct handoff *base, unsigned w)
{
    struct dgram_handoff *h = (struct dgram_handoff *)base;
    struct handoff_thread_counters *c = &base->thread[w];
    for (;;) {
        struct job *job;
        counter_inc(&c->take_syscalls);
        counter_inc(&c->parks); /* a blocking recv: it parks whenever the queue is empty */
        ssize_t n = recv(h->w[w].submit_thread, &job, sizeof job, 0);
        if (n == (ssize_t)sizeof job) {
            counter_inc(&c->taken);
            return job;
        }
        if (n == 0 || atomic_load(&h->stopping)) /* shut down and drained */
            return NULL;
        if (n < 0 && errno != EINTR)
            return NULL;
    }
}

static int dgram_complete(struct handoff *base, unsigned w, struct job *job)
{
    struct dgram_handoff *h = (struct dgram_handoff *)base;
    struct handoff_thread_counters *c = &base->thread[w];
    counter_inc(&c->completed);
    for (;;) {
        counter_inc(&c->complete_syscalls);
        ssize_t n = send(h->w[w].done_thread, &job, sizeof job, 0);
        if (n == (ssize_t)sizeof job)
            return 0;
        if (n < 0 && errno == EINTR)
            continue;
        return -1;
    }
}

/* SHUT_RD on the pool thread's receiving end wakes a blocked recv; queued datagrams
 * are still delivered first, then recv returns 0. */
static void dgram_shutdown(struct handoff *base)
{
    struct dgram_handoff *h = (struct dgram_handoff *)base;
    atomic_store(&h->stopping, true);
    for (unsigned i = 0; i < base->threads; i++)
        shutdown(h->w[i].submit_thread, SHUT_RD);
}

const struct handoff_ops handoff_dgram = {
    .name = "dgram",
    .summary = "two SOCK_DGRAM socketpairs per pool thread (the baseline: 4 syscalls + EAGAIN)",
    .create = dgram_create,
    .destroy = dgram_destroy,
    .submit = dgram_submit,
    .watch = dgram_watch,
    .drain = dgram_drain,
    .polled = false,
    .before_sleep = dgram_before_sleep,
    .after_sleep = dgram_after_sleep,
    .set_active = dgram_set_active,
    .try_take = NULL,
    .take = dgram_take,
    .complete = dgram_complete,
    .shutdown = dgram_shutdown,
};

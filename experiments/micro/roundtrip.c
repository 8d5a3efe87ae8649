/* roundtrip.c — see roundtrip.h. */
#include "roundtrip.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "../../handoffs/handoff.h"
#include "../../lib/cpu_relax.h"

struct job {
    uint64_t value;
};

struct rt_bench {
    struct rt_options opt;
    const struct handoff_ops *ops;
    struct handoff *h;
    int epfd;
    pthread_t worker;
    atomic_bool stop; /* RT_WORKER_POLL only: the poller's exit flag */
    struct job job;
    uint64_t round_trips, epoll_waits, loop_sleeps;
};

#define RT_TAG 1

static void *worker_main(void *p)
{
    struct rt_bench *b = p;
    pthread_setname_np(pthread_self(), "rt-worker");
    for (;;) {
        struct job *j = NULL;
        if (b->opt.worker_wait == RT_WORKER_POLL) {
            while (!(j = b->ops->try_take(b->h, 0)))
                if (atomic_load_explicit(&b->stop, memory_order_relaxed))
                    return NULL;
        } else {
            j = b->ops->take(b->h, 0);
            if (!j)
                return NULL;
        }
        j->value++;
        if (b->ops->complete(b->h, 0, j) != 0)
            return NULL;
    }
}

struct rt_bench *rt_open(const struct rt_options *opt)
{
    struct rt_bench *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->opt = *opt;
    b->epfd = -1;
    b->ops = handoff_find(opt->backend);
    if (!b->ops || (opt->worker_wait == RT_WORKER_POLL && !b->ops->try_take)) {
        fprintf(stderr, "rt_open: no backend %s (or no try_take)\n", opt->backend);
        free(b);
        return NULL;
    }
    struct handoff_config cfg = {.threads = 1, .capacity = 2, .spin_iters = opt->spin_iters};
    b->h = b->ops->create(&cfg);
    b->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (!b->h || b->epfd < 0 || b->ops->watch(b->h, b->epfd, RT_TAG) < 0 ||
        pthread_create(&b->worker, NULL, worker_main, b) != 0) {
        fprintf(stderr, "rt_open %s: %s\n", opt->backend, strerror(errno));
        if (b->h)
            b->ops->destroy(b->h);
        if (b->epfd >= 0)
            close(b->epfd);
        free(b);
        return NULL;
    }
    return b;
}

int rt_round_trip(struct rt_bench *b)
{
    const struct handoff_ops *ops = b->ops;
    struct job *out[2];
    uint64_t before = b->job.value;
    if (ops->submit(b->h, 0, &b->job) != HANDOFF_OK)
        return -1;
    if (ops->flush) /* the end of the batch, as the server's loop pass ends it */
        ops->flush(b->h);
    for (;;) {
        if (ops->polled) {
            for (unsigned i = 0; i <= b->opt.loop_poll; i++) {
                if (ops->drain(b->h, false, out, 2) == 1)
                    goto done;
                if (b->opt.loop_poll)
                    cpu_relax();
            }
        }
        bool waiting = ops->before_sleep(b->h, 1);
        struct epoll_event ev[2];
        int n = epoll_wait(b->epfd, ev, 2, waiting ? 0 : -1);
        b->epoll_waits++;
        b->loop_sleeps += !waiting;
        ops->after_sleep(b->h);
        if (n < 0 && errno != EINTR)
            return -1;
        if (ops->drain(b->h, n > 0, out, 2) == 1)
            goto done;
    }
done:
    b->round_trips++;
    return out[0] == &b->job && b->job.value == before + 1 ? 0 : -1;
}

/* A thread's CPU clock (lib/clock.h reads only the monotonic one). */
static uint64_t cpu_clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void rt_sample(struct rt_bench *b, struct rt_snapshot *s)
{
    const struct handoff_loop_counters *l = &b->h->loop;
    const struct handoff_thread_counters *w = &b->h->thread[0];
    clockid_t worker_clock;
    memset(s, 0, sizeof *s);
    s->round_trips = b->round_trips;
    s->loop_cpu_ns = cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    if (pthread_getcpuclockid(b->worker, &worker_clock) == 0)
        s->worker_cpu_ns = cpu_clock_ns(worker_clock);
    s->loop_syscalls = counter_get(&l->submit_syscalls) + counter_get(&l->drain_syscalls) +
                       counter_get(&l->sleep_syscalls) + b->epoll_waits;
    s->worker_syscalls = counter_get(&w->take_syscalls) + counter_get(&w->complete_syscalls);
    s->worker_parks = counter_get(&w->parks);
    s->loop_sleeps = b->loop_sleeps;
}

void rt_close(struct rt_bench *b)
{
    atomic_store(&b->stop, true);
    b->ops->shutdown(b->h);
    pthread_join(b->worker, NULL);
    b->ops->destroy(b->h);
    close(b->epfd);
    free(b);
}

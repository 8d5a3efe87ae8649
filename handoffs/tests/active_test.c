/* active_test.c — the set_active contract (handoff.h), every backend that
 * has the op, the test thread playing the loop and each worker in turn:
 *
 *  1. After the loop narrows to the first n workers, a completion of each of
 *     them comes back in one drain, even when the last drain stopped short
 *     at a worker past n (a backend that resumed there would spend its
 *     visits on workers out of the prefix and miss one in it; with an
 *     eventfd already reset, that completion would wait for another).
 *  2. The loop side visits the prefix only: a ready drain of dgram pays one
 *     recv per active worker, not one per worker created.
 *  3. Widened again, a worker past the old prefix is drained as before.
 * Exit 0 when every backend keeps it, 1 with a message otherwise. */
#include "../handoff.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

struct job {
    int id;
};

static int failures;

#define EXPECT(cond, ...)                                          \
    do {                                                           \
        if (!(cond)) {                                             \
            failures++;                                            \
            fprintf(stderr, "active_test: %s: ", ops->name);       \
            fprintf(stderr, __VA_ARGS__);                          \
            fputc('\n', stderr);                                   \
        }                                                          \
    } while (0)

/* Worker w runs job j: submitted, taken (queued, so take does not block)
 * and completed, all on this thread. */
static void run_one(const struct handoff_ops *ops, struct handoff *h, unsigned w, struct job *j)
{
    EXPECT(ops->submit(h, w, j) == HANDOFF_OK, "submit to worker %u", w);
    if (ops->flush)
        ops->flush(h);
    struct job *t = ops->take(h, w);
    EXPECT(t == j, "worker %u takes its job", w);
    if (t)
        EXPECT(ops->complete(h, w, t) == 0, "worker %u completes", w);
}

static void check(const struct handoff_ops *ops)
{
    struct handoff_config cfg = {.threads = 4, .capacity = 8, .spin_iters = 0, .loop_spin_ns = 0};
    struct handoff *h = ops->create(&cfg);
    if (!h) {
        fprintf(stderr, "active_test: %s: create failed\n", ops->name);
        failures++;
        return;
    }
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    EXPECT(epfd >= 0 && ops->watch(h, epfd, 1) == 0, "watch");
    struct job jobs[4] = {{0}, {1}, {2}, {3}};
    struct job *out[8];

    /* Two completions on worker 2, taken by a drain of exactly two, and
     * the rest of the rounds: the next drain would start past the prefix
     * (at worker 2, or 3 for a backend that moves on from a queue it
     * emptied). */
    run_one(ops, h, 2, &jobs[0]);
    run_one(ops, h, 2, &jobs[1]);
    size_t got = ops->drain(h, true, out, 2);
    EXPECT(got == 2, "both of worker 2's completions (%zu)", got);
    while (ops->drain(h, false, out, 8)) /* the continuation: nothing left */
        ;
    ops->set_active(h, 2);
    EXPECT(h->active == 2, "the prefix is 2 (%u)", h->active);

    /* 1: a completion of each worker of the prefix, in one drain. */
    run_one(ops, h, 0, &jobs[2]);
    run_one(ops, h, 1, &jobs[3]);
    got = ops->drain(h, true, out, 8);
    EXPECT(got == 2, "workers 0 and 1's completions in one drain (%zu)", got);

    /* 2: what an empty ready drain costs. */
    uint64_t before = counter_get(&h->loop.drain_syscalls);
    got = ops->drain(h, true, out, 8);
    uint64_t cost = counter_get(&h->loop.drain_syscalls) - before;
    EXPECT(got == 0, "nothing left (%zu)", got);
    if (strcmp(ops->name, "dgram") == 0)
        EXPECT(cost == 2, "a dgram drain pays a recv per active worker: %llu for 2", (unsigned long long)cost);

    /* 3: widened again. */
    ops->set_active(h, 4);
    run_one(ops, h, 3, &jobs[0]);
    got = ops->drain(h, true, out, 8);
    EXPECT(got == 1 && out[0] == &jobs[0], "worker 3 after widening (%zu)", got);

    ops->shutdown(h);
    for (unsigned w = 0; w < cfg.threads; w++)
        EXPECT(ops->take(h, w) == NULL, "worker %u: nothing after shutdown", w);
    close(epfd);
    ops->destroy(h);
}

int main(void)
{
    unsigned checked = 0;
    for (const struct handoff_ops *const *b = handoff_backends; *b; b++)
        if ((*b)->set_active) {
            check(*b);
            checked++;
        }
    if (checked < 3) {
        fprintf(stderr, "active_test: only %u backends have set_active\n", checked);
        failures++;
    }
    if (failures)
        return 1;
    printf("active_test: set_active kept by %u backends\n", checked);
    return 0;
}

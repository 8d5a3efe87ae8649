/* submit_error.c — the submit contract when a backend's syscall fails.
 *
 * The loop treats HANDOFF_ERROR like HANDOFF_FULL in one respect: it still
 * owns the job and may recycle it at once. So a submit that returns ERROR
 * (or FULL) must leave nothing queued, and one that returns OK must have
 * queued the job exactly once. A backend that queues first and then fails
 * its wake-up syscall breaks this: the worker later takes a job the loop has
 * already reused.
 *
 * How: the binary is linked with -Wl,--wrap=write,--wrap=send, so every
 * write(2)/send(2) the backends make goes through the wrappers below, which
 * fail with EIO while `fail_syscalls` is set. For each backend, with the
 * test thread playing both sides (one worker):
 *   submit A with syscalls failing, then B normally, then shut down and take
 *   until NULL; A must come out iff its submit said OK, B exactly once, and
 *   nothing else. Also: a submit after a failed one works (the handoff is
 *   still usable), and FULL still means nothing queued.
 * complete, the other way, by the same rule: -1 means the job was not handed
 * back (the pool thread still owns it), 0 that the loop will drain it. And
 * will be told to: with two workers, the second completing while the first
 * one's wake-up fails, a loop that drains only when the handoff says so
 * (epoll, or every pass for a polled backend) must get every job handed back.
 * Exit 0 when every backend keeps the contract, 1 with a message otherwise. */
#include "../handoff.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

struct job {
    const char *name;
};

static bool fail_syscalls;
/* Run once inside the next failing syscall, before it fails, with syscalls
 * working: what another thread does while this one is in the kernel. */
static void (*while_failing)(void);

static void run_while_failing(void)
{
    void (*fn)(void) = while_failing;
    if (!fn)
        return;
    while_failing = NULL;
    fail_syscalls = false;
    fn();
    fail_syscalls = true;
}

ssize_t __real_write(int fd, const void *buf, size_t n);
ssize_t __wrap_write(int fd, const void *buf, size_t n);
ssize_t __real_send(int fd, const void *buf, size_t n, int flags);
ssize_t __wrap_send(int fd, const void *buf, size_t n, int flags);

ssize_t __wrap_write(int fd, const void *buf, size_t n)
{
    if (fail_syscalls) {
        run_while_failing();
        errno = EIO;
        return -1;
    }
    return __real_write(fd, buf, n);
}

ssize_t __wrap_send(int fd, const void *buf, size_t n, int flags)
{
    if (fail_syscalls) {
        run_while_failing();
        errno = EIO;
        return -1;
    }
    return __real_send(fd, buf, n, flags);
}

static int failures;

static void check(bool ok, const char *backend, const char *what)
{
    if (!ok) {
        fprintf(stderr, "submit_error[%s]: FAIL: %s\n", backend, what);
        failures++;
    }
}

static const char *result_name(int r)
{
    return r == HANDOFF_OK ? "OK" : r == HANDOFF_FULL ? "FULL" : r == HANDOFF_ERROR ? "ERROR" : "?";
}

/* Shut down and take everything still queued for worker 0. */
static unsigned take_all(struct handoff *h, struct job **out, unsigned max)
{
    h->ops->shutdown(h);
    unsigned n = 0;
    struct job *j;
    while ((j = h->ops->take(h, 0)) != NULL) {
        if (n < max)
            out[n] = j;
        n++;
    }
    return n;
}

static void failed_submit(const struct handoff_ops *ops)
{
    struct handoff_config cfg = {.threads = 1, .capacity = 4, .spin_iters = 0, .spin_ns = 0};
    struct handoff *h = ops->create(&cfg);
    if (!h) {
        fprintf(stderr, "submit_error[%s]: cannot create: %s\n", ops->name, strerror(errno));
        failures++;
        return;
    }
    struct job a = {"A"}, b = {"B"};
    fail_syscalls = true;
    int ra = ops->submit(h, 0, &a);
    fail_syscalls = false;
    int rb = ops->submit(h, 0, &b);
    check(rb == HANDOFF_OK, ops->name, "a submit after a failed one does not work");

    struct job *got[8];
    unsigned n = take_all(h, got, 8);
    bool a_out = false;
    unsigned b_out = 0, other = 0;
    for (unsigned i = 0; i < n && i < 8; i++) {
        if (got[i] == &a)
            a_out = true;
        else if (got[i] == &b)
            b_out++;
        else
            other++;
    }
    char msg[160];
    snprintf(msg, sizeof msg, "submit returned %s but the job %s taken", result_name(ra),
             a_out ? "was" : "was not");
    check(a_out == (ra == HANDOFF_OK), ops->name, msg);
    check(ra == HANDOFF_OK || ra == HANDOFF_FULL || ra == HANDOFF_ERROR, ops->name,
          "submit returned something else");
    check(b_out == 1 && other == 0 && n == (unsigned)a_out + 1, ops->name,
          "wrong jobs taken after shutdown");
    printf("submit_error[%s]: failing syscalls -> %s, job %s\n", ops->name, result_name(ra),
           a_out ? "taken once" : "not queued");
    ops->destroy(h);
}

/* FULL: fill the queue, one more is refused, and exactly the accepted ones come out. */
static void full_submit(const struct handoff_ops *ops)
{
    struct handoff_config cfg = {.threads = 1, .capacity = 2, .spin_iters = 0, .spin_ns = 0};
    struct handoff *h = ops->create(&cfg);
    if (!h) {
        failures++;
        return;
    }
    struct job jobs[64];
    unsigned accepted = 0;
    int r = HANDOFF_OK;
    /* dgram's capacity is a socket buffer size, so it may take more than 2. */
    for (unsigned i = 0; i < 64 && r == HANDOFF_OK; i++) {
        jobs[i].name = "J";
        r = ops->submit(h, 0, &jobs[i]);
        if (r == HANDOFF_OK)
            accepted++;
    }
    struct job *got[64];
    unsigned n = take_all(h, got, 64);
    check(n == accepted, ops->name, "the jobs taken are not the jobs accepted");
    for (unsigned i = 0; i < n && i < 64; i++)
        check(got[i] == &jobs[i], ops->name, "jobs taken out of order");
    ops->destroy(h);
}

/* complete with its syscalls failing: -1 must mean the job was not handed
 * back (the pool thread still owns it), 0 that the loop will drain it. The
 * loop has announced it is about to sleep, so every backend writes its
 * wake-up fd. */
static void failed_complete(const struct handoff_ops *ops)
{
    struct handoff_config cfg = {.threads = 1, .capacity = 4, .spin_iters = 0, .spin_ns = 0};
    struct handoff *h = ops->create(&cfg);
    if (!h) {
        failures++;
        return;
    }
    struct job a = {"A"};
    check(ops->submit(h, 0, &a) == HANDOFF_OK, ops->name, "submit failed");
    check(ops->take(h, 0) == &a, ops->name, "take did not return the job");
    ops->before_sleep(h, 1);
    fail_syscalls = true;
    int rc = ops->complete(h, 0, &a);
    fail_syscalls = false;
    ops->after_sleep(h);
    struct job *got[8];
    size_t n = ops->drain(h, true, got, 8);
    bool drained = n == 1 && got[0] == &a;
    check(n <= 1 && (n == 0 || drained), ops->name, "drain returned something else");
    bool keeps = drained == (rc == 0);
    printf("submit_error[%s]: complete with failing syscalls -> %d, job %s\n", ops->name, rc,
           drained ? "handed back" : "kept by the worker");
    check(keeps, ops->name, rc == 0 ? "complete returned 0 but the job never arrived"
                                     : "complete returned -1 but the job was handed back");
    ops->shutdown(h);
    ops->destroy(h);
}

/* The second worker's complete, run while the first one's wake-up fails. */
static struct {
    struct handoff *h;
    struct job *job;
    int rc;
} behind;

static void complete_behind(void) { behind.rc = behind.h->ops->complete(behind.h, 1, behind.job); }

/* Two workers complete together: A's wake-up syscall fails, and B's
 * completion lands while A is in it (B found A queued, so it may rely on A's
 * wake-up). The loop side then does what the loop does: announce its sleep,
 * wait for the handoff's fd (or drain anyway, if the backend is polled),
 * drain. Every job complete handed back (returned 0) must arrive, and none
 * it kept: a queued completion nothing will report is stranded, and its
 * client waits for good. */
static void failed_complete_behind(const struct handoff_ops *ops)
{
    struct handoff_config cfg = {.threads = 2, .capacity = 4, .spin_iters = 0, .spin_ns = 0};
    struct handoff *h = ops->create(&cfg);
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    if (!h || epfd < 0 || ops->watch(h, epfd, 7) < 0) {
        fprintf(stderr, "submit_error[%s]: cannot set up: %s\n", ops->name, strerror(errno));
        failures++;
        if (h)
            ops->destroy(h);
        if (epfd >= 0)
            close(epfd);
        return;
    }
    struct job a = {"A"}, b = {"B"};
    check(ops->submit(h, 0, &a) == HANDOFF_OK && ops->submit(h, 1, &b) == HANDOFF_OK, ops->name,
          "submit failed");
    if (ops->flush)
        ops->flush(h);
    check(ops->take(h, 0) == &a && ops->take(h, 1) == &b, ops->name, "take did not return the jobs");
    behind.h = h;
    behind.job = &b;
    behind.rc = -2;
    /* The loop is about to sleep: every backend writes its wake-up fd. */
    bool announced = !ops->before_sleep(h, 2);
    fail_syscalls = true;
    while_failing = complete_behind;
    int ra = ops->complete(h, 0, &a);
    fail_syscalls = false;
    while_failing = NULL;
    if (behind.rc == -2) /* A made no syscall: B simply follows */
        complete_behind();
    if (announced)
        ops->after_sleep(h);
    int rb = behind.rc;
    check(rb == 0, ops->name, "the completion behind the failing one failed");

    bool got_a = false, got_b = false, other = false;
    /* A few passes, as the loop would make them; a backend may need one to
     * notice what it owes. */
    for (int pass = 0; pass < 3; pass++) {
        bool ready = false;
        bool waiting = ops->before_sleep(h, 2);
        struct epoll_event ev;
        int n = epoll_wait(epfd, &ev, 1, waiting ? 0 : 50);
        ops->after_sleep(h);
        ready = n > 0;
        if (!ready && !ops->polled)
            continue;
        struct job *got[8];
        size_t k;
        bool fd_ready = ready;
        do {
            k = ops->drain(h, fd_ready, got, 8);
            fd_ready = false;
            for (size_t i = 0; i < k; i++) {
                if (got[i] == &a && !got_a)
                    got_a = true;
                else if (got[i] == &b && !got_b)
                    got_b = true;
                else
                    other = true;
            }
        } while (k == 8);
    }
    char msg[200];
    snprintf(msg, sizeof msg, "complete returned %d for A and %d for B, but %s%s%s arrived", ra, rb,
             got_a ? "A" : "not A", ", ", got_b ? "B" : "not B");
    check(got_a == (ra == 0) && got_b == (rb == 0) && !other, ops->name, msg);
    printf("submit_error[%s]: a failing wake-up with a completion behind it -> A %s, B %s\n",
           ops->name, got_a ? "handed back" : ra == 0 ? "STRANDED" : "kept by the worker",
           got_b ? "handed back" : "STRANDED");
    ops->shutdown(h);
    ops->destroy(h);
    close(epfd);
}

int main(void)
{
    for (const struct handoff_ops *const *ops = handoff_backends; *ops; ops++) {
        failed_submit(*ops);
        full_submit(*ops);
        failed_complete(*ops);
        failed_complete_behind(*ops);
    }
    if (failures) {
        fprintf(stderr, "submit_error: %d failure(s)\n", failures);
        return 1;
    }
    printf("submit_error: every backend keeps the contract\n");
    return 0;
}

/* futex.h — the futex calls cserve makes: the ring's park/wake handshake,
 * a pool thread's wait for the loop's answer to a job's message, and a
 * metrics reader's wait for a slot's writer (another process) to finish.
 *
 * FUTEX_WAIT sleeps only if *word still equals `expected` when the kernel
 * looks (under the futex hash-bucket lock), which is what makes
 * "set flag, re-check, then sleep" safe against a wake that lands between the
 * re-check and the sleep. Private futexes where the word never leaves the
 * process; the shared pair for a word in memory mapped by several. */
#ifndef CSERVE_FUTEX_H
#define CSERVE_FUTEX_H

#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Returns 0 when woken (or spuriously), -1 with errno EAGAIN if *word != expected
 * on entry, EINTR on a signal. Callers re-check their condition either way. */
static inline long futex_wait(atomic_int *word, int expected)
{
    return syscall(SYS_futex, (int *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

/* Wakes up to n waiters on word; returns how many were woken. */
static inline long futex_wake(atomic_int *word, int n)
{
    return syscall(SYS_futex, (int *)word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/* The same for a 32-bit word in a MAP_SHARED mapping, waited on from one
 * process and woken from another; timeout is relative (NULL: none), and
 * -1 with errno ETIMEDOUT reports it ran out. */
static inline long futex_wait_shared(void *word, uint32_t expected, const struct timespec *timeout)
{
    return syscall(SYS_futex, word, FUTEX_WAIT, expected, timeout, NULL, 0);
}

static inline long futex_wake_shared(void *word, int n)
{
    return syscall(SYS_futex, word, FUTEX_WAKE, n, NULL, NULL, 0);
}

#endif

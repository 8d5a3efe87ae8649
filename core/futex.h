/* futex.h — the two futex operations cserve uses (private to the process). */
#ifndef CSERVE_FUTEX_H
#define CSERVE_FUTEX_H

#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Sleep while *word == expected (the kernel re-checks it, so a wake between
 * the caller's check and the sleep is not lost). Spurious returns happen. */
static inline void futex_wait(_Atomic uint32_t *word, uint32_t expected)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static inline void futex_wake(_Atomic uint32_t *word, int count)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
}

#endif

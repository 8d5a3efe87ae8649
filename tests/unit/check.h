/* check.h — the unit tests' assertion helper: count, report, keep going.
 *
 * CHECK(cond, fmt, ...) records a pass or prints the failing condition with
 * a message naming the case; check_summary() prints "N passed, N failed" as
 * the last line and returns the process exit status. */
#ifndef CSERVE_TEST_CHECK_H
#define CSERVE_TEST_CHECK_H

#include <stdio.h>

static int check_passed, check_failed;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (cond) {                                                             \
            check_passed++;                                                     \
        } else {                                                                \
            check_failed++;                                                     \
            fprintf(stderr, "%s:%d: FAILED: %s -- ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
        }                                                                       \
    } while (0)

static inline int check_summary(void)
{
    printf("%d passed, %d failed\n", check_passed, check_failed);
    return check_failed ? 1 : 0;
}

#endif

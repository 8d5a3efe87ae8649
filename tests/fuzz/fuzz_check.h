/* fuzz_check.h — what the fuzz targets share: an assertion that survives
 * -DNDEBUG and names the broken invariant, a hash for comparing byte streams,
 * and a small deterministic generator for data-derived split points. */
#ifndef CSERVE_FUZZ_CHECK_H
#define CSERVE_FUZZ_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FUZZ_ASSERT(cond)                                                              \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                   \
        }                                                                              \
    } while (0)

/* FNV-1a, continued from h: hashing pieces in order equals hashing the whole. */
static inline uint64_t fuzz_hash(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * UINT64_C(0x100000001b3);
    return h;
}
#define FUZZ_HASH_INIT UINT64_C(0xcbf29ce484222325)

/* xorshift64: the split points come from the input itself, so a crash
 * reproduces from the saved input alone. */
static inline uint64_t fuzz_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* True when [p, p+n) lies inside [base, base+len). */
static inline int fuzz_inside(const void *p, size_t n, const void *base, size_t len)
{
    uintptr_t c = (uintptr_t)p, b = (uintptr_t)base;
    return c >= b && n <= len && c - b <= len - n;
}

#endif

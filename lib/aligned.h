/* aligned.h — zeroed, cache-line-aligned allocation for per-thread state.
 *
 * Per-thread structures written by different threads must not share a cache
 * line (false sharing turns every counter bump into a line transfer), so the
 * backends allocate them with this and pad their members to CACHE_LINE. */
#ifndef CSERVE_ALIGNED_H
#define CSERVE_ALIGNED_H

#include <stdlib.h>
#include <string.h>

#include "counter.h"

/* size rounded up to whole cache lines, zeroed; NULL when out of memory. */
static inline void *aligned_zalloc(size_t size)
{
    size_t rounded = (size + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE;
    void *p = aligned_alloc(CACHE_LINE, rounded ? rounded : CACHE_LINE);
    if (p)
        memset(p, 0, rounded ? rounded : CACHE_LINE);
    return p;
}

#endif

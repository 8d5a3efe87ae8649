/* handoff.c — the backend registry and the base-object allocator. */
#include "handoff.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/aligned.h"

/* Ring first: it is the default and the one --help lists first. */
const struct handoff_ops *const handoff_backends[] = {
    &handoff_ring, &handoff_dgram, &handoff_condvar, &handoff_eventfd, NULL,
};

const struct handoff_ops *handoff_find(const char *name)
{
    for (const struct handoff_ops *const *b = handoff_backends; *b; b++)
        if (strcmp((*b)->name, name) == 0)
            return *b;
    return NULL;
}

static int config_valid(const struct handoff_config *cfg)
{
    return cfg->threads >= 1 && cfg->capacity >= 2 && (cfg->capacity & (cfg->capacity - 1)) == 0;
}

void *handoff_alloc(const struct handoff_ops *ops, const struct handoff_config *cfg, size_t size)
{
    if (!config_valid(cfg) || size < sizeof(struct handoff)) {
        errno = EINVAL;
        return NULL;
    }
    struct handoff *h = aligned_zalloc(size);
    if (!h)
        return NULL;
    /* The counter struct is aligned(CACHE_LINE), so each array element starts
     * on a line of its own and no two pool threads' counters share a line. */
    h->thread = aligned_zalloc(cfg->threads * sizeof *h->thread);
    if (!h->thread) {
        free(h);
        errno = ENOMEM;
        return NULL;
    }
    h->ops = ops;
    h->threads = cfg->threads;
    h->active = cfg->threads;
    h->capacity = cfg->capacity;
    return h;
}

void handoff_free(void *p)
{
    struct handoff *h = p;
    if (!h)
        return;
    free(h->thread);
    free(h);
}

/* watchdog.h — --app-timeout: the loop's check on pool threads stuck in the app. */
#ifndef CSERVE_WATCHDOG_H
#define CSERVE_WATCHDOG_H

#include <stdbool.h>
#include <stdint.h>

#include "../conn/loop.h"

struct stats;
struct worker_owner;

struct watchdog {
    struct loop_hook hook;
    unsigned timeout_ms;            /* --app-timeout */
    struct stats *stats;            /* each pool thread's app_since_ms */
    const struct worker_owner *owner;
    uint64_t next_ms;               /* the next look at the pool threads */
    uint64_t *fired;                /* per pool thread: the app_since_ms already reported */
    bool *stuck;                    /* per pool thread: stuck at the last look */
};

/* With --app-timeout and pool threads: register the check on l, which
 * looks at the pool threads a few times a second. A thread in the app on
 * one request for longer than the timeout gets every thread's Python stack
 * written to stderr, the worker asks the owner to be replaced and lets go
 * of its clients (watchdog.c says how). 0, or -1 (out of memory, or no
 * room for a hook). */
int watchdog_start(struct watchdog *w, struct loop *l, struct stats *stats, const struct worker_owner *owner);
void watchdog_stop(struct watchdog *w);

#endif

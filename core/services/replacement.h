/* replacement.h — a worker's replacement, as its loop takes part in it:
 * the limits looked at once a pass, SIGHUP, and the handover to a
 * successor that serves (or the supervisor's word to drain). */
#ifndef CSERVE_REPLACEMENT_H
#define CSERVE_REPLACEMENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../conn/loop.h"

/* What the services ask of the process around the worker about its
 * replacement (--max-requests, --workers-lifetime, --workers-max-rss,
 * SIGHUP, --app-timeout, --reload). The server implements it
 * (core/server/lifecycle.c) and hands it down, so nothing here includes
 * the layer that assembles a worker. */
struct worker_owner {
    void *ctx;
    /* once a pass: are the limits reached? */
    void (*tick)(void *ctx, uint64_t now_ms, uint64_t requests);
    /* ask for a replacement; why (kept, not copied) is logged. The
     * worker cannot serve without one: asked again until one serves */
    void (*replace)(void *ctx, const char *why);
    /* SIGHUP (or --reload) reached this worker */
    void (*reload)(void *ctx);
    /* SIGHUP came while this worker drains for its successor: the
     * supervisor this process becomes reloads */
    void (*reload_later)(void *ctx);
    /* WORKER_READY_SIGNAL from `from`: true when it is this worker's
     * successor, which now serves */
    bool (*ready)(void *ctx, pid_t from);
    /* --blocking-threads auto: the pool now has `threads` taking requests,
     * the size a successor starts with */
    void (*sized)(void *ctx, unsigned threads);
};

struct replacement {
    struct loop_hook hook;
    const struct worker_owner *owner;
    /* How the loop ended, for worker_run: */
    pid_t successor;     /* it drained because this successor serves (one worker alone) */
    int stop_signal;     /* a SIGTERM/SIGINT came (0: none): the successor's supervisor stops */
    bool recycle;        /* the successor asked to be recycled while this one drained */
};

/* Register r's hooks on l (loop_hook_add's result). */
int replacement_start(struct replacement *r, struct loop *l, const struct worker_owner *owner);

#endif

/* services.h — a worker's services: the features that ride on its loop
 * through hooks (../conn/loop.h) rather than inside it. Which of them run
 * follows the options; worker_run (../server/worker.c) starts them once
 * its loop exists and stops them after loop_run. */
#ifndef CSERVE_SERVICES_H
#define CSERVE_SERVICES_H

#include <stdbool.h>
#include <sys/types.h>

#include "devreload.h"
#include "metrics_service.h"
#include "replacement.h"
#include "sizing.h"
#include "stats_report.h"
#include "watchdog.h"

struct loop;
struct stats;

struct services_config {
    struct stats *stats;
    const char *stats_path;          /* --stats-json: this worker's file (NULL: none) */
    pid_t supervisor;                /* --workers: the supervisor (0: one worker alone) */
    const struct worker_owner *owner; /* the worker's replacement (core/server/lifecycle.c) */
    char **reload_dirs;              /* --reload: the app's folders (NULL-terminated) */
    const struct pool_control *pool; /* --blocking-threads auto: starting threads later */
    unsigned pool_started;           /* ... the threads the worker starts with */
    bool gil;                        /* ... the interpreter has a GIL */
};

struct services {
    struct replacement replacement;  /* always: how the loop ended is read here */
    struct stats_report report;      /* always: SIGUSR1, SIGUSR2, --stats-window */
    struct metrics_service metrics;  /* always: the queue samples; --metrics-bind publishes */
    struct watchdog watchdog;        /* --app-timeout with pool threads */
    struct devreload reload;         /* --reload */
    struct sizing sizing;            /* --blocking-threads auto */
    bool watching, reloading, sizing_on; /* the last three started */
};

/* Start the services l's options ask for and register them on l. Returns
 * 0, or -1 (logged) when one that must run cannot. */
int services_start(struct services *s, struct loop *l, const struct services_config *cfg);
/* The worker accepts from now (it is about to tell whoever replaced it). */
void services_serving(struct services *s);
/* After loop_run: release what the services hold (descriptors, memory). */
void services_stop(struct services *s);

#endif

/* metrics_service.h — the live instruments' part in a worker's loop: a
 * snapshot every METRICS_TICK_MS (../metrics/metrics.h), and with
 * --metrics-bind each response counted by status and latency. */
#ifndef CSERVE_METRICS_SERVICE_H
#define CSERVE_METRICS_SERVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "../conn/loop.h"

struct stats;

struct metrics_service {
    struct loop_hook hook;
    bool publishing;     /* --metrics-bind: this worker has a slot */
    uint64_t next_ms;    /* the next metrics_tick */
};

/* Attach stats (metrics_attach) and register on l. loop_hook_add's result. */
int metrics_service_start(struct metrics_service *m, struct loop *l, struct stats *stats);

#endif

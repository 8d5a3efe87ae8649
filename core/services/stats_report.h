/* stats_report.h — the instruments on request: SIGUSR1 prints the stats
 * table (--stats) and writes --stats-json, SIGUSR2 and --stats-window start
 * a new measurement window. */
#ifndef CSERVE_STATS_REPORT_H
#define CSERVE_STATS_REPORT_H

#include <sys/types.h>

#include "../conn/loop.h"

struct stats;

struct stats_report {
    struct loop_hook hook;
    struct stats *stats;
    bool table;          /* --stats: SIGUSR1 prints the table */
    const char *path;    /* --stats-json: the file this worker writes (its part with --workers) */
    pid_t supervisor;    /* --workers: told when the part is written (0: none) */
    double window_s;     /* --stats-window: a window starts this long after the worker serves */
    double window_at;    /* ... then, clock_s (0: none to come) */
};

/* Register on l (loop_hook_add's result). */
int stats_report_start(struct stats_report *r, struct loop *l, struct stats *stats, bool table,
                       const char *path, pid_t supervisor, double window_s);
/* The worker serves from now: --stats-window counts from here. */
void stats_report_serving(struct stats_report *r);
/* The report now, from one snapshot of the window (SIGUSR1, the worker's
 * exit): the table on stderr (--stats) and the --stats-json file, as
 * ../metrics/metrics.h's metrics_report makes them. 0, or -1 (logged) when
 * the file could not be written. */
int stats_report_write(struct stats_report *r, struct loop *l);

#endif

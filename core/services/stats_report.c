/* stats_report.c — see stats_report.h. */
#include "stats_report.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../../lib/clock.h"
#include "../base/log.h"
#include "../base/signals.h"
#include "../base/stats.h"
#include "../metrics/metrics.h"

int stats_report_write(struct stats_report *r, struct loop *l)
{
    struct loop_snapshot snap;
    loop_snapshot(l, &snap);
    if (metrics_report(r->stats, &snap, r->table ? stderr : NULL, r->path) == 0)
        return 0;
    log_error("cannot write %s: %s", r->path ? r->path : "the stats table", strerror(errno));
    return -1;
}

static void report_signal(void *ctx, struct loop *l, const struct server_signal *si)
{
    struct stats_report *r = ctx;
    if (si->signo == SIGUSR1) {
        /* With --workers each worker writes its own part and tells the
         * supervisor (signals.h), which merges the parts into --stats-json
         * once all have answered (workers writing the one file would
         * overwrite each other). */
        if (stats_report_write(r, l) == 0 && r->path && r->supervisor > 0 && getppid() == r->supervisor)
            kill(r->supervisor, STATS_WRITTEN_SIGNAL);
    } else if (si->signo == SIGUSR2) {
        stats_window_start(r->stats);
        log_info("stats: new measurement window");
    }
}

/* The pass's coarse time: the window starts within a jiffy of its mark. */
static void report_tick(void *ctx, struct loop *l)
{
    struct stats_report *r = ctx;
    if (r->window_at > 0 && (double)l->now_ms / 1e3 >= r->window_at) {
        r->window_at = 0;
        stats_window_start(r->stats);
    }
}

static int report_before_sleep(void *ctx, struct loop *l, int timeout_ms)
{
    struct stats_report *r = ctx;
    if (r->window_at <= 0)
        return timeout_ms;
    double due = (r->window_at - (double)l->now_ms / 1e3) * 1e3;
    return due < 0 ? 0 : due < timeout_ms ? (int)due + 1 : timeout_ms;
}

int stats_report_start(struct stats_report *r, struct loop *l, struct stats *stats, bool table,
                       const char *path, pid_t supervisor, double window_s)
{
    *r = (struct stats_report){.stats = stats, .table = table, .path = path, .supervisor = supervisor,
                               .window_s = window_s};
    r->hook = (struct loop_hook){.ctx = r, .tick = report_tick, .before_sleep = report_before_sleep,
                                .signal = report_signal};
    return loop_hook_add(l, &r->hook);
}

void stats_report_serving(struct stats_report *r)
{
    if (r->window_s > 0)
        r->window_at = clock_s() + r->window_s;
}

/* metrics_service.c — see metrics_service.h. The queue samples are taken
 * with or without --metrics-bind (the --stats verdict reads them), so the
 * tick always runs; only a publishing worker keeps the loop waking for it
 * when idle, as its snapshots must keep coming. */
#include "metrics_service.h"

#include "../metrics/metrics.h"

static void metrics_service_tick(void *ctx, struct loop *l)
{
    struct metrics_service *m = ctx;
    if (l->now_ms < m->next_ms)
        return;
    m->next_ms = l->now_ms + METRICS_TICK_MS;
    struct loop_snapshot snap;
    loop_snapshot(l, &snap);
    metrics_tick(&snap); /* a few clock reads, twice a second */
}

static int metrics_service_before_sleep(void *ctx, struct loop *l, int timeout_ms)
{
    struct metrics_service *m = ctx;
    uint64_t due = m->next_ms > l->now_ms ? m->next_ms - l->now_ms : 0;
    return due < (uint64_t)timeout_ms ? (int)due : timeout_ms;
}

static void metrics_service_response(void *ctx, const struct loop_response *r)
{
    (void)ctx;
    metrics_count_response(&metrics_counts, r->status, r->head_ns, r->end_ns);
}

int metrics_service_start(struct metrics_service *m, struct loop *l, struct stats *stats)
{
    *m = (struct metrics_service){.publishing = metrics_attach(stats), .next_ms = l->now_ms + METRICS_TICK_MS};
    m->hook = (struct loop_hook){.ctx = m, .tick = metrics_service_tick};
    if (m->publishing) {
        m->hook.before_sleep = metrics_service_before_sleep;
        m->hook.response = metrics_service_response;
    }
    return loop_hook_add(l, &m->hook);
}

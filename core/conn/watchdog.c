/* watchdog.c — a pool thread stuck in the app cannot be stopped (Python
 * offers no safe way to kill a thread that may hold locks or the GIL), only
 * reported and abandoned: its stack and every other thread's go to stderr
 * through faulthandler (registered on WATCHDOG_DUMP_SIGNAL by the bridge,
 * and safe without the GIL), the clients waiting on it get their
 * connections closed rather than wait for ever, and the worker asks for a
 * replacement; the stuck worker then drains what it can and exits at
 * --graceful-timeout. */
#include "watchdog.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "../base/log.h"
#include "conn.h"
#include "loop.h"
#include "../base/options.h"
#include "../base/signals.h"
#include "../base/stats.h"

#define WATCHDOG_PERIOD_MS 250

void watchdog_check(struct loop *l)
{
    unsigned timeout = l->opt->app_timeout_ms;
    if (!timeout || !l->workers || l->now_ms < l->watchdog_next_ms)
        return;
    l->watchdog_next_ms = l->now_ms + WATCHDOG_PERIOD_MS;
    if (!l->watchdog_fired) {
        l->watchdog_fired = calloc(l->workers, sizeof *l->watchdog_fired);
        if (!l->watchdog_fired)
            return;
    }
    for (unsigned w = 0; w < l->workers; w++) {
        uint64_t since = atomic_load_explicit(&l->stats->pool[w].app_since_ms, memory_order_relaxed);
        if (!since || l->now_ms < since || l->now_ms - since < timeout || l->watchdog_fired[w] == since)
            continue;
        l->watchdog_fired[w] = since; /* once per stuck request */
        unsigned closed = 0;
        for (struct conn *c = l->conns.next, *next; c != &l->conns; c = next) {
            next = c->next;
            if (c->job && c->holder != HOLDER_LOOP && c->job->worker == w && c->state != CONN_ORPHAN) {
                conn_abort(c);
                closed++;
            }
        }
        log_error("app watchdog: pool thread %u has been in the app for %.1f s on one request "
                  "(--app-timeout); every thread's Python stack follows; closed %u connection(s) "
                  "waiting on it; this worker will be replaced",
                  w, (double)(l->now_ms - since) / 1000.0, closed);
        pthread_kill(pthread_self(), WATCHDOG_DUMP_SIGNAL);
        if (l->owner && !l->stopping)
            l->owner->replace(l->owner->ctx, "a pool thread is stuck in the app (--app-timeout)");
    }
}

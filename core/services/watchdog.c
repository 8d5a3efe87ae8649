/* watchdog.c — a pool thread stuck in the app cannot be stopped (Python
 * offers no safe way to kill a thread that may hold locks or the GIL), only
 * reported and abandoned: its stack and every other thread's go to stderr
 * through faulthandler (registered on WATCHDOG_DUMP_SIGNAL by the bridge,
 * and safe without the GIL), and the worker asks for a replacement.
 *
 * Its clients are let go at once, not left to wait for a thread that may
 * never come back: the loop refuses (loop_refuse: it accepts nothing more,
 * the successor takes the listener's backlog; a request not yet with the
 * app gets a 503 that closes; idle connections close), and every request
 * on a stuck thread, the stuck one and those queued behind it, gets a 503
 * that closes in its place (conn_refuse), looked for again at each check
 * as pipelined requests come up. Requests on threads that are not stuck
 * finish. The stuck worker then drains and exits at --graceful-timeout
 * (one worker alone, which is the server's process, execs itself in place
 * instead: core/server/lifecycle.c), which ends the stuck thread. */
#include "watchdog.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "../base/log.h"
#include "../base/options.h"
#include "../base/signals.h"
#include "../base/stats.h"
#include "replacement.h"

#define WATCHDOG_PERIOD_MS 250

/* The connection that holds job (submitted, or pipelined behind its
 * first request), or NULL: a pointer a pool thread published is only
 * read through once the loop finds it still in use. */
static const struct job *held_job(struct loop *l, const void *job)
{
    for (struct conn *c = l->conns.next; job && c != &l->conns; c = c->next) {
        if (c->holder == HOLDER_LOOP)
            continue;
        if (c->job == job)
            return c->job;
        for (const struct job *p = c->pipe_head; p; p = p->pipe_next)
            if (p == job)
                return p;
    }
    return NULL;
}

/* The stuck request, as the log names it: its method and path, not the
 * query string (tokens and other secrets travel there; the access log is
 * where an operator chooses to record whole targets). */
static void describe_request(const struct job *job, char *out, size_t cap)
{
    if (!job) {
        snprintf(out, cap, "a request that has since ended");
        return;
    }
    enum { MAX_PATH = 200 };
    const struct http_target *t = &job->target;
    int plen = t->path_len > MAX_PATH ? MAX_PATH : (int)t->path_len;
    snprintf(out, cap, "%.*s %.*s%s", (int)job->req.method_len, job->req.method, plen, t->path,
             t->path_len > MAX_PATH ? "..." : "");
}

static void watchdog_tick(void *ctx, struct loop *l)
{
    struct watchdog *wd = ctx;
    if (l->now_ms < wd->next_ms)
        return;
    wd->next_ms = l->now_ms + WATCHDOG_PERIOD_MS;
    bool any = false;
    for (unsigned w = 0; w < dispatch_threads(&l->disp); w++) {
        uint64_t since = atomic_load_explicit(&wd->stats->pool[w].app_since_ms, memory_order_acquire);
        wd->stuck[w] = since && l->now_ms >= since && l->now_ms - since >= wd->timeout_ms;
        any |= wd->stuck[w];
        if (!wd->stuck[w] || wd->fired[w] == since)
            continue;
        wd->fired[w] = since; /* once per stuck request */
        char request[256];
        describe_request(held_job(l, atomic_load_explicit(&wd->stats->pool[w].app_job, memory_order_relaxed)),
                         request, sizeof request);
        log_error("app watchdog: pool thread %u has been in the app for %.1f s on one request, %s "
                  "(--app-timeout); every thread's Python stack follows; this worker accepts no more, "
                  "answers 503 to the requests waiting on it and will be replaced",
                  w, (double)(l->now_ms - since) / 1000.0, request);
        pthread_kill(pthread_self(), WATCHDOG_DUMP_SIGNAL);
        /* First: alone, the replacement keeps a copy of the listener. */
        if (!l->stopping)
            wd->owner->replace(wd->owner->ctx, "a pool thread is stuck in the app (--app-timeout)");
        loop_refuse(l);
    }
    if (!any)
        return;
    for (struct conn *c = l->conns.next, *next; c != &l->conns; c = next) {
        next = c->next;
        if (c->job && c->holder != HOLDER_LOOP && wd->stuck[c->job->thread])
            conn_refuse(c);
    }
}

/* While requests are with the app, look on time even if nothing else
 * wakes the loop. */
static int watchdog_before_sleep(void *ctx, struct loop *l, int timeout_ms)
{
    struct watchdog *wd = ctx;
    if (!dispatch_outstanding_total(&l->disp))
        return timeout_ms;
    uint64_t due = wd->next_ms > l->now_ms ? wd->next_ms - l->now_ms : 0;
    return due < (uint64_t)timeout_ms ? (int)due : timeout_ms;
}

int watchdog_start(struct watchdog *w, struct loop *l, struct stats *stats, const struct worker_owner *owner)
{
    *w = (struct watchdog){.timeout_ms = l->opt->app_timeout_ms, .stats = stats, .owner = owner};
    w->fired = calloc(dispatch_threads(&l->disp), sizeof *w->fired);
    w->stuck = calloc(dispatch_threads(&l->disp), sizeof *w->stuck);
    if (!w->fired || !w->stuck)
        return -1;
    w->hook = (struct loop_hook){.ctx = w, .tick = watchdog_tick, .before_sleep = watchdog_before_sleep};
    return loop_hook_add(l, &w->hook);
}

void watchdog_stop(struct watchdog *w)
{
    free(w->fired);
    free(w->stuck);
    w->fired = NULL;
    w->stuck = NULL;
}

/* worker.c — assemble a worker: handoff, pool threads, loop; then take it
 * apart in the order that lets every thread finish what it holds. */
#include <Python.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../handoffs/fault.h"
#include "../../handoffs/handoff.h"
#include "../../lib/clock.h"
#include "../http/buffer.h"
#include "lifecycle.h"
#include "listen.h"
#include "pidfile.h"
#include "../base/log.h"
#include "../conn/loop.h"
#include "../metrics/metrics.h"
#include "../base/options.h"
#include "../python/interp.h"
#include "../python/pool.h"
#include "../services/services.h"
#include "../services/sizing_rule.h"
#include "proctitle.h"
#include "../base/signals.h"
#include "../base/stats.h"
#include "worker.h"
#include "../python/wsgi.h"

/* --blocking-threads auto: the sizing service starts threads through
 * these (ctx: the worker's pool pointer, set once the pool runs). */
static int start_pool_thread(void *ctx, unsigned k) { return pool_start_thread(*(struct pool **)ctx, k); }
static unsigned pool_threads_registered(void *ctx) { return pool_registered(*(struct pool **)ctx); }
static bool pool_threads_wait_registered(void *ctx, unsigned n, unsigned wait_ms)
{
    return pool_wait_registered(*(struct pool **)ctx, n, wait_ms);
}

int worker_run(const struct options *opt, int listen_fd, unsigned index, const char *stats_path,
               bool part, const char *app_name, struct handover *handover)
{
    if (handover)
        *handover = (struct handover){.pid = 0, .listen_fd = -1, .stop_signal = 0};
    bool python = !opt->native_hello;
    bool pooled = python && !opt->inline_app;
    unsigned nthreads = pooled ? opt->blocking_threads : 0; /* with auto, the most */
    /* The threads it starts with: with auto, the size its predecessor had
     * learned (one at a first start). */
    unsigned first = opt->threads_auto ? sizing_first(opt->threads_learned, nthreads) : nthreads;
    if (first > 1 && opt->threads_auto)
        log_info("blocking threads auto: starting with %u, the size the worker it replaces had learned", first);

    struct stats *stats = calloc(1, sizeof *stats);
    struct loop *loop = calloc_lines(1, sizeof *loop);
    if (!stats || !loop) {
        log_error("out of memory");
        return 1;
    }
    stats->worker_index = index;
    stats->nthreads = 1 + first;
    stats->pool = calloc_lines(nthreads ? nthreads : 1, sizeof *stats->pool);
    stats->pool_max = nthreads;
    stats->threads_auto = opt->threads_auto && nthreads;
    stats->pool_active = dispatch_active_ref(&loop->disp);
    stats->handoff_name = pooled ? opt->handoff->name : opt->inline_app ? "none (inline)" : "none";
    stats->app_name = app_name;
    stats->on_window_start = metrics_window_mark;
    stats->inline_mode = opt->inline_app;
    stats->part_file = part;
    stats->loop = &loop->lstats;
    pthread_setname_np(pthread_self(), "cserve-loop");
    if (part) /* one worker alone keeps the command line it was started with */
        proctitle_set("cserve: worker %u [%s]", index, app_name);
    stats_register_self(stats, 0, "cserve-loop", "loop");

    struct handoff *h = NULL;
    if (pooled) {
        struct handoff_config cfg = {.threads = nthreads, .capacity = opt->queue_capacity,
                                     .spin_iters = opt->spin_iters, .spin_ns = opt->spin_ns,
                                     .loop_spin_ns = opt->loop_spin_ns, .loop_doze_ns = opt->loop_doze_ns,
                                     .loop_hold_ns = opt->loop_hold_ns};
        h = opt->handoff->create(&cfg);
        if (!h) {
            log_error("cannot create the %s handoff: %s", opt->handoff->name, strerror(errno));
            return 1;
        }
        stats->handoff = h;
#if CSERVE_TEST_HOOKS
        /* Test builds only (fault.h): the loop's paths a healthy backend never takes. */
        const char *fault = getenv("CSERVE_FAULT_SUBMIT");
        struct handoff *wrapped = fault ? handoff_fault_wrap(h, atol(fault)) : h;
        if (!wrapped) {
            log_error("cannot wrap the handoff: %s", strerror(errno));
            return 1;
        }
        h = wrapped;
#endif
    }
    if (loop_init(loop, opt, listen_fd, h, nthreads) != 0) {
        log_error("cannot start the event loop: %s", strerror(errno));
        return 1;
    }
    /* The loop's stats live in the loop struct, which loop_init cleared. */
    stats->loop = &loop->lstats;
    /* The app is imported: a slot's socket that is only bound listens from
     * here on (the kernel sent this slot's share of connections to the
     * workers that serve until now). */
    if (listen_serve(listen_fd, opt->backlog) != 0) {
        log_error("worker %u: cannot listen: %s", index, strerror(errno));
        return 1;
    }
    pid_t supervisor = part ? getppid() : 0;
    struct lifecycle life;
    lifecycle_init(&life, opt, supervisor, listen_fd, clock_coarse_ms());
    const struct worker_owner owner = lifecycle_owner(&life);
    char **dirs = opt->reload && python ? wsgi_source_dirs() : NULL; /* the GIL is held here */
    struct pool *pool = NULL;
    const struct pool_control pool_ctl = {.ctx = &pool, .start = start_pool_thread,
                                          .registered = pool_threads_registered,
                                          .wait_registered = pool_threads_wait_registered};
    struct services svc;
    int started = services_start(&svc, loop, &(struct services_config){
        .stats = stats, .stats_path = stats_path, .supervisor = supervisor, .owner = &owner, .reload_dirs = dirs,
        .pool = pooled ? &pool_ctl : NULL, .pool_started = first, .gil = python ? interp_gil_enabled() : true});
    for (char **d = dirs; d && *d; d++)
        free(*d);
    free(dirs);
    if (started != 0)
        return 1;

    PyThreadState *main_state = NULL;
    if (pooled && opt->app_timeout_ms && wsgi_watchdog_arm(WATCHDOG_DUMP_SIGNAL) != 0)
        log_warn("--app-timeout: faulthandler could not be registered; a stuck thread's stack will not be shown");
    if (pooled) {
        pool = pool_start(h, first, nthreads, stats, opt->app_timeout_ms > 0);
        if (!pool)
            return 1;
        main_state = PyEval_SaveThread();
    } else if (python) {
        pool_set_inline_state(PyEval_SaveThread());
    }
    stats_window_start(stats);
    services_serving(&svc);
    /* The loop accepts from here on: a worker this one replaces may stop. */
    if (part && getppid() == supervisor)
        kill(supervisor, WORKER_READY_SIGNAL);

    unsigned abandoned = loop_run(loop);
    services_stop(&svc);
    const struct replacement *rp = &svc.replacement;
    if (rp->successor && handover)
        *handover = (struct handover){.pid = rp->successor, .listen_fd = life.keep_fd,
                                      .stop_signal = rp->stop_signal, .recycle = rp->recycle,
                                      .reload = life.reload_pending};
    else if (life.keep_fd >= 0)
        close(life.keep_fd);

    /* Report while the pool threads exist: a dead thread has no CPU clock. */
    stats_report_write(&svc.report, loop);
    bool joined = true;
    if (pool)
        joined = pool_stop(pool, abandoned ? 200 : 10000);
    if (abandoned || !joined) {
        /* An app thread still runs a request: nothing it may touch can be
         * freed, and the interpreter cannot be finalised under it. */
        if (rp->successor) { /* the process lives on as the successor's supervisor */
            log_warn("handing over with %u request(s) unfinished", abandoned);
            if (handover)
                handover->stranded = true;
            return 0;
        }
        log_warn("exiting with %u request(s) unfinished", abandoned);
        listen_cleanup(); /* _exit skips atexit */
        pidfile_release();
        fflush(NULL);
        _exit(0);
    }
    loop_destroy(loop);
    if (h)
        h->ops->destroy(h);
    if (python) {
        if (main_state)
            PyEval_RestoreThread(main_state);
        else
            pool_restore_inline_state();
        wsgi_finalize();
    }
    for (unsigned i = 0; i < stats->nthreads; i++)
        free((void *)stats->threads[i].name);
    free(stats->pool);
    free(stats);
    free(loop);
    log_info("stopped");
    return 0;
}

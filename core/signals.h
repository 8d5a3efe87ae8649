/* signals.h — the signals a worker's loop reads from its signalfd. They are
 * blocked in every thread (set before any thread starts) so that none is
 * delivered asynchronously: SIGTERM/SIGINT stop gracefully, SIGUSR1 reports
 * the stats, SIGUSR2 starts a new stats window, SIGHUP replaces the workers
 * with fresh ones that import the app anew (docs/operating.md). */
#ifndef CSERVE_SIGNALS_H
#define CSERVE_SIGNALS_H

#include <signal.h>

/* A worker of --workers N tells the supervisor that its --stats-json part
 * is written (after a SIGUSR1). Real-time, so that two workers answering at
 * once are two signals, not one. */
#define STATS_WRITTEN_SIGNAL (SIGRTMIN + 1)
/* A worker tells whoever spawned it that its loop accepts (a replacement is
 * serving, so the one it replaces may stop accepting)... */
#define WORKER_READY_SIGNAL (SIGRTMIN + 2)
/* ... or that it wants to be replaced (--max-requests, --workers-lifetime,
 * --workers-max-rss, the app watchdog). */
#define WORKER_RECYCLE_SIGNAL (SIGRTMIN + 3)
/* The supervisor tells a replaced worker to drain: as SIGTERM, except that an
 * idle keep-alive connection is not closed under a client that may be
 * sending on it; it gets its next request answered ("Connection: close")
 * or its keep-alive timeout. */
#define WORKER_RETIRE_SIGNAL (SIGRTMIN + 4)
/* The app watchdog raises this on the loop thread; Python's faulthandler,
 * registered for it, writes every thread's stack without needing the GIL
 * (which the stuck thread may hold). Not in the blocked set below. */
#define WATCHDOG_DUMP_SIGNAL (SIGRTMIN + 5)

static inline void server_signal_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGUSR1);
    sigaddset(set, SIGUSR2);
    sigaddset(set, SIGHUP);
    sigaddset(set, WORKER_READY_SIGNAL);
    sigaddset(set, WORKER_RETIRE_SIGNAL);
}

/* The supervisor reads these too: its children's ends, its own timer, the
 * workers' answers and requests. */
static inline void supervisor_signal_set(sigset_t *set)
{
    sigaddset(set, SIGCHLD);
    sigaddset(set, SIGALRM);
    sigaddset(set, STATS_WRITTEN_SIGNAL);
    sigaddset(set, WORKER_RECYCLE_SIGNAL);
}

#endif

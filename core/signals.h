/* signals.h — the signals a worker's loop reads from its signalfd. They are
 * blocked in every thread (set before any thread starts) so that none is
 * delivered asynchronously: SIGTERM/SIGINT stop gracefully, SIGUSR1 reports
 * the stats, SIGUSR2 starts a new stats window. */
#ifndef CSERVE_SIGNALS_H
#define CSERVE_SIGNALS_H

#include <signal.h>

/* A worker of --workers N tells the supervisor that its --stats-json part
 * is written (after a SIGUSR1). Real-time, so that two workers answering at
 * once are two signals, not one. */
#define STATS_WRITTEN_SIGNAL (SIGRTMIN + 1)

static inline void server_signal_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGUSR1);
    sigaddset(set, SIGUSR2);
}

#endif

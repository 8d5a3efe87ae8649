/* signals.h — how the server's signals reach the loop (and the supervisor):
 * a handler writes each one, with its sender, to a pipe that they read like
 * any other descriptor. SIGTERM/SIGINT stop gracefully, SIGUSR1 reports the
 * stats, SIGUSR2 starts a new stats window, SIGHUP replaces the workers with
 * fresh ones that import the app anew (docs/operating.md), SIGWINCH reopens
 * the access log.
 *
 * No thread blocks them. A blocked mask would be inherited by every program
 * the app starts (subprocess execs straight from vfork, past any fork
 * handler), which would then ignore SIGTERM; and a handler, unlike a
 * signalfd, does not care which thread the kernel picks. A child the app
 * forks inherits the handler, which sees it is not the server (its pid) and
 * acts as if there were none. */
#ifndef CSERVE_SIGNALS_H
#define CSERVE_SIGNALS_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

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
 * (which the stuck thread may hold). Not one of the server's signals. */
#define WATCHDOG_DUMP_SIGNAL (SIGRTMIN + 5)
/* A worker tells its supervisor the size its --blocking-threads auto pool
 * has learned (sigqueue: the value is the count), which the worker that
 * replaces it starts with. */
#define WORKER_SIZED_SIGNAL (SIGRTMIN + 6)

struct server_signal {
    int signo;
    pid_t pid; /* the sender (si_pid) */
    int value; /* what a sigqueue sent with it (si_value); 0 otherwise */
};

/* The process's signal pipe and the handlers of a worker's signals. Call
 * first thing in main, and again in a forked child that is to read its own
 * (a supervisor's worker): it replaces what the parent had. Returns 0 or -1. */
int signals_init(void);
/* A process that execs itself in place (core/server/lifecycle.c) passes
 * its pipe to the new image, which adopts it before signals_init: what
 * the old image's handlers wrote, until the exec ended its threads, is
 * read by the new one. signals_pipe: the two ends (-1 when none). */
void signals_pipe(int *rd, int *wr);
void signals_adopt(int rd, int wr);
/* A supervisor's signals too: its children's ends and its timer. */
int signals_supervise(void);
/* The pipe's read end (non-blocking, close-on-exec). */
int signals_fd(void);
/* The next signal received, if any. */
bool signals_next(struct server_signal *out);

#endif

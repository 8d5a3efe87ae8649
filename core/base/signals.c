/* signals.c — the server's signals as messages on a pipe (signals.h says
 * why not a signalfd). The handler does only async-signal-safe things:
 * getpid, write, and for a forked child, restoring the default action. A
 * full pipe (hundreds of unread signals) drops the newest: none of them is
 * a count that matters beyond the first. */
#include "signals.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

static int pipe_rd = -1, pipe_wr = -1;
static pid_t owner;
static bool adopted; /* signals_adopt: signals_init keeps the pipe */

static void on_signal(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    int saved = errno;
    if (getpid() != owner) {
        /* A child the app forked: the signal is its own, as if we had no
         * handler (it is blocked until we return, then acts). */
        signal(sig, SIG_DFL);
        raise(sig);
    } else {
        struct server_signal m = {.signo = sig, .pid = si ? si->si_pid : 0,
                                  .value = si && si->si_code == SI_QUEUE ? si->si_value.sival_int : 0};
        ssize_t n = write(pipe_wr, &m, sizeof m);
        (void)n;
    }
    errno = saved;
}

static int handle(int sig)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    return sigaction(sig, &sa, NULL);
}

void signals_pipe(int *rd, int *wr)
{
    *rd = pipe_rd;
    *wr = pipe_wr;
}

void signals_adopt(int rd, int wr)
{
    fcntl(rd, F_SETFD, FD_CLOEXEC);
    fcntl(wr, F_SETFD, FD_CLOEXEC);
    pipe_rd = rd;
    pipe_wr = wr;
    adopted = true;
}

int signals_init(void)
{
    if (adopted) {
        adopted = false; /* a forked child's next call makes its own */
    } else {
        if (pipe_rd >= 0) {
            close(pipe_rd);
            close(pipe_wr);
        }
        int fds[2];
        if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
            return -1;
        pipe_rd = fds[0];
        pipe_wr = fds[1];
    }
    owner = getpid();
    /* A worker forked by a supervisor does not reap or time its children. */
    signal(SIGCHLD, SIG_DFL);
    signal(SIGALRM, SIG_DFL);
    /* The workers' answers and requests are handled everywhere: a lone
     * worker gets them from its successor before it has become that
     * successor's supervisor, and their default action is to terminate. */
    const int sigs[] = {SIGTERM, SIGINT, SIGUSR1, SIGUSR2, SIGHUP, SIGWINCH, WORKER_READY_SIGNAL,
                        WORKER_RETIRE_SIGNAL, STATS_WRITTEN_SIGNAL, WORKER_RECYCLE_SIGNAL, WORKER_SIZED_SIGNAL};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        if (handle(sigs[i]) != 0)
            return -1;
    /* Whatever a parent blocked (an older cserve, a shell) is not ours. */
    sigset_t all;
    sigfillset(&all);
    return pthread_sigmask(SIG_UNBLOCK, &all, NULL) == 0 ? 0 : -1;
}

int signals_supervise(void)
{
    const int sigs[] = {SIGCHLD, SIGALRM};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        if (handle(sigs[i]) != 0)
            return -1;
    return 0;
}

int signals_fd(void)
{
    return pipe_rd;
}

bool signals_next(struct server_signal *out)
{
    return read(pipe_rd, out, sizeof *out) == (ssize_t)sizeof *out;
}

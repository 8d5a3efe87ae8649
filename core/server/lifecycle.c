/* lifecycle.c — when a worker is replaced, and how a fresh one starts.
 *
 * A fresh worker is cserve itself, exec'd with the command line it was
 * started with and EXEC_WORKER_ENV naming its slot and the listening socket
 * it inherits: it imports the app in a new interpreter, which is what a
 * reload is for (the supervisor imported the app before forking, so a fork
 * would serve the old code). The old worker keeps accepting on the same
 * socket until the new one says it accepts too (WORKER_READY_SIGNAL), so
 * the listener never has nobody behind it; then it drains gracefully. */
#include "lifecycle.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../services/access_log.h"
#include "../services/replacement.h"
#include "../base/log.h"
#include "../metrics/metrics.h"
#include "../base/options.h"
#include "../base/signals.h"
#include "listen.h"
#include "pidfile.h"
#include "worker.h"

extern char **environ;

/* After a new worker failed to start, the next try waits this long, then
 * twice as long each time. */
#define BACKOFF_FIRST_MS 1000
#define BACKOFF_MAX_MS 60000

static char **saved_argv;
static char **saved_env;
static int saved_dir = -1; /* lifecycle_save_dir: O_PATH */

/* A new worker starts from the environment cserve was started with, not
 * the one the app's import left (os.environ.setdefault of a settings
 * module, say: the new code may name another), less what systemd passed
 * for this process alone. */
static bool for_new_workers(const char *var)
{
    return strncmp(var, "LISTEN_PID=", 11) && strncmp(var, "LISTEN_FDS=", 11) &&
           strncmp(var, "LISTEN_FDNAMES=", 15);
}

void lifecycle_save_argv(int argc, char **argv)
{
    saved_argv = calloc((size_t)argc + 1, sizeof *saved_argv);
    if (!saved_argv)
        return;
    for (int i = 0; i < argc; i++)
        saved_argv[i] = strdup(argv[i]);
    size_t n = 0;
    while (environ[n])
        n++;
    saved_env = calloc(n + 1, sizeof *saved_env);
    for (size_t i = 0, k = 0; saved_env && i < n; i++)
        if (for_new_workers(environ[i]))
            saved_env[k++] = strdup(environ[i]);
}

void lifecycle_save_dir(void)
{
    if (saved_dir < 0)
        saved_dir = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
}

pid_t spawn_exec(int listen_fd, unsigned index, unsigned threads)
{
    if (!saved_argv) {
        errno = ENOMEM;
        return -1;
    }
    /* Everything the child needs is built here: between fork and exec a
     * child of a threaded process may only make async-signal-safe calls. */
    char **env = saved_env ? saved_env : environ;
    size_t n = 0;
    while (env[n])
        n++;
    char **envp = calloc(n + 2, sizeof *envp);
    char var[80];
    int log_fd = access_log_fd();
    int metrics_fd = metrics_shm_fd(); /* --metrics-bind: the slots it publishes into */
    snprintf(var, sizeof var, EXEC_WORKER_ENV "=%u:%d:%d:%d:%u", index, listen_fd, log_fd, metrics_fd, threads);
    if (!envp)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (env[i] && strncmp(env[i], EXEC_WORKER_ENV "=", sizeof EXEC_WORKER_ENV) != 0)
            envp[k++] = env[i];
    envp[k++] = var;
    envp[k] = NULL;
    pid_t parent = getpid();
    /* The new worker starts with every signal blocked (exec keeps the
     * mask and what is pending) until main has installed its handlers. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) /* the parent died before prctl */
            _exit(1);
        /* What the new worker inherits: the listener, and the access log
         * opened before root was dropped (it may not open it itself). */
        if (fcntl(listen_fd, F_SETFD, 0) < 0 || (log_fd >= 0 && fcntl(log_fd, F_SETFD, 0) < 0) ||
            (metrics_fd >= 0 && fcntl(metrics_fd, F_SETFD, 0) < 0))
            _exit(126);
        /* It imports the app from its directory (sys.path[0]), which the
         * app's own os.chdir may have moved this process from. */
        if (saved_dir >= 0 && fchdir(saved_dir) != 0)
            _exit(126);
        execve("/proc/self/exe", saved_argv, envp);
        _exit(127);
    }
    int err = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    free(envp);
    errno = err;
    return pid;
}

void lifecycle_exec_supervisor(const struct handover *ho)
{
    if (!saved_argv) {
        log_error("cannot exec the supervisor: out of memory; a stuck thread keeps running");
        return;
    }
    /* The signal pipe too: a signal the old image's threads take until the
     * exec ends them is written there, unread since the loop stopped. */
    int sig_rd, sig_wr;
    signals_pipe(&sig_rd, &sig_wr);
    int fds[] = {ho->listen_fd, access_log_fd(), metrics_shm_fd(), metrics_listen_fd(), pidfile_fd(), sig_rd,
                 sig_wr};
    enum { NFDS = sizeof fds / sizeof *fds };
    char var[200];
    snprintf(var, sizeof var, SUPERVISE_ENV "=%d:%d:%d:%d:%d:%d:%d:%d:%u:%d:%d:%d", (int)ho->pid, fds[0], fds[1],
             fds[2], fds[3], fds[4], fds[5], fds[6], listen_unix_owned(), ho->stop_signal, ho->recycle,
             ho->reload);
    char **env = saved_env ? saved_env : environ;
    size_t n = 0;
    while (env[n])
        n++;
    char **envp = calloc(n + 2, sizeof *envp);
    if (!envp) {
        log_error("cannot exec the supervisor: out of memory; a stuck thread keeps running");
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(env[i], SUPERVISE_ENV "=", sizeof SUPERVISE_ENV) != 0)
            envp[k++] = env[i];
    envp[k++] = var;
    envp[k] = NULL;
    for (unsigned i = 0; i < NFDS; i++)
        if (fds[i] >= 0)
            fcntl(fds[i], F_SETFD, 0);
    /* Signals stay pending across the exec until main has its handlers
     * (signals_init): the successor's, and a stop, are not lost. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    /* Its own directory, as a new worker's: the pid file's and a unix:
     * socket's relative paths are looked up again there. */
    if (saved_dir >= 0 && fchdir(saved_dir) != 0)
        log_warn("cannot return to the server's directory: %s", strerror(errno));
    log_info("worker: a pool thread still runs the app; this process execs itself to supervise pid %d",
             (int)ho->pid);
    fflush(NULL);
    execve("/proc/self/exe", saved_argv, envp);
    int err = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    for (unsigned i = 0; i < NFDS; i++)
        if (fds[i] >= 0)
            fcntl(fds[i], F_SETFD, FD_CLOEXEC);
    free(envp);
    log_error("cannot exec the supervisor: %s; a stuck thread keeps running", strerror(err));
}

bool lifecycle_supervise_claim(struct handover *ho, struct inherited *in)
{
    const char *v = getenv(SUPERVISE_ENV);
    if (!v)
        return false;
    int pid, fd, sig_rd, sig_wr, stop, recycle, reload;
    *in = (struct inherited){.log_fd = -1, .shm_fd = -1, .metrics_fd = -1, .pid_fd = -1};
    if (sscanf(v, "%d:%d:%d:%d:%d:%d:%d:%d:%u:%d:%d:%d", &pid, &fd, &in->log_fd, &in->shm_fd, &in->metrics_fd,
               &in->pid_fd, &sig_rd, &sig_wr, &in->unix_owned, &stop, &recycle, &reload) != 12 || pid <= 0 ||
        fd < 0 || sig_rd < 0 || sig_wr < 0) {
        log_error("%s='%s' is not what cserve passes itself", SUPERVISE_ENV, v);
        exit(2);
    }
    unsetenv(SUPERVISE_ENV);
    /* Not the app's children's, nor the workers' but through spawn_exec. */
    const int fds[] = {fd, in->log_fd, in->shm_fd, in->metrics_fd, in->pid_fd};
    for (size_t i = 0; i < sizeof fds / sizeof *fds; i++)
        if (fds[i] >= 0)
            fcntl(fds[i], F_SETFD, FD_CLOEXEC);
    signals_adopt(sig_rd, sig_wr);
    *ho = (struct handover){.pid = pid, .listen_fd = fd, .stop_signal = stop, .recycle = recycle != 0,
                            .reload = reload != 0};
    return true;
}

bool exec_worker_claim(unsigned *index, int *listen_fd, int *log_fd, unsigned *threads)
{
    const char *v = getenv(EXEC_WORKER_ENV);
    if (!v)
        return false;
    unsigned i, t = 0;
    int fd, lfd, mfd = -1;
    if (sscanf(v, "%u:%d:%d:%d:%u", &i, &fd, &lfd, &mfd, &t) < 3 || fd < 0) {
        log_error("%s='%s' is not SLOT:FD:LOGFD[:METRICSFD[:THREADS]]", EXEC_WORKER_ENV, v);
        exit(2);
    }
    *threads = t; /* bounded by the worker's own MAX (sizing_first) */
    if (mfd >= 0)
        metrics_shm_adopt(mfd);
    unsetenv(EXEC_WORKER_ENV);
    fcntl(fd, F_SETFD, FD_CLOEXEC); /* not the app's children's */
    if (lfd >= 0)
        fcntl(lfd, F_SETFD, FD_CLOEXEC);
    *index = i;
    *listen_fd = fd;
    *log_fd = lfd;
    return true;
}

static uint64_t rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "re");
    if (!f)
        return 0;
    unsigned long size = 0, resident = 0;
    int got = fscanf(f, "%lu %lu", &size, &resident);
    fclose(f);
    return got == 2 ? (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE) / 1024 : 0;
}

void lifecycle_init(struct lifecycle *lc, const struct options *opt, pid_t supervisor, int listen_fd,
                    uint64_t now_ms)
{
    *lc = (struct lifecycle){.opt = opt, .supervisor = supervisor, .listen_fd = listen_fd, .keep_fd = -1};
    if (opt->max_requests) {
        /* Jitter spreads the recycling of workers started together. */
        unsigned seed = (unsigned)getpid() ^ (unsigned)time(NULL);
        lc->max_requests = opt->max_requests + (opt->max_requests_jitter ? (uint64_t)rand_r(&seed) %
                                                (opt->max_requests_jitter + 1) : 0);
    }
    if (opt->workers_lifetime_ms)
        lc->deadline_ms = now_ms + opt->workers_lifetime_ms;
    lc->max_rss_kb = (uint64_t)opt->workers_max_rss_mb * 1024;
    lc->next_check_ms = now_ms + 1000;
    lc->backoff_ms = BACKOFF_FIRST_MS;
}

static void back_off(struct lifecycle *lc, uint64_t now_ms)
{
    lc->retry_at_ms = now_ms + lc->backoff_ms;
    lc->backoff_ms = lc->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : lc->backoff_ms * 2;
}

void lifecycle_replace(struct lifecycle *lc, const char *why)
{
    if (lc->asked)
        return;
    lc->asked = true;
    if (lc->supervisor > 0) {
        /* Asked again later (lifecycle_tick) in case the supervisor's new
         * worker fails: a failure is not reported back here. */
        log_info("worker: %s; asking for a replacement", why);
        if (getppid() == lc->supervisor)
            kill(lc->supervisor, WORKER_RECYCLE_SIGNAL);
        return;
    }
    if (lc->listen_fd < 0) {
        log_warn("worker: %s, but the listener is closed: nothing to hand over to", why);
        return;
    }
    if (lc->keep_fd < 0)
        lc->keep_fd = fcntl(lc->listen_fd, F_DUPFD_CLOEXEC, 0);
    lc->successor = lc->keep_fd < 0 ? -1 : spawn_exec(lc->keep_fd, 0, lc->threads);
    if (lc->successor < 0) {
        log_error("worker: %s, but cannot start a new worker: %s", why, strerror(errno));
        lc->successor = 0;
        lc->asked = false;
        return;
    }
    log_info("worker: %s; started a new worker (pid %d)", why, (int)lc->successor);
}

/* A limit was reached: replace this worker, unless a failure's back-off runs. */
static void limit_reached(struct lifecycle *lc, uint64_t now_ms, const char *why)
{
    if (lc->asked || now_ms < lc->retry_at_ms)
        return;
    lc->reloading = false;
    lifecycle_replace(lc, why);
    if (lc->asked && lc->supervisor > 0)
        back_off(lc, now_ms);
}

void lifecycle_tick(struct lifecycle *lc, uint64_t now_ms, uint64_t requests)
{
    char why[96];
    if (lc->max_requests && requests >= lc->max_requests && !lc->asked && now_ms >= lc->retry_at_ms) {
        snprintf(why, sizeof why, "served %llu requests (--max-requests)", (unsigned long long)requests);
        limit_reached(lc, now_ms, why);
        return;
    }
    if (now_ms < lc->next_check_ms)
        return;
    lc->next_check_ms = now_ms + 1000;
    if (lc->successor > 0) {
        /* A successor that exits before it serves failed to start (its
         * import raised, most often): this worker keeps serving, and tries
         * again only after a back-off, or at once for a newer SIGHUP. */
        int status;
        if (waitpid(lc->successor, &status, WNOHANG) == lc->successor) {
            back_off(lc, now_ms);
            char after[96] = "the old one keeps serving";
            if (lc->required)
                snprintf(after, sizeof after, "the old one cannot serve; another try in %.0f s",
                         (double)(lc->retry_at_ms - now_ms) / 1000.0);
            log_error("%s failed: the new worker (pid %d) %s %d before it served; %s",
                      lc->reloading ? "reload" : "recycling", (int)lc->successor,
                      WIFSIGNALED(status) ? "was killed by signal" : "exited with",
                      WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), after);
            lc->successor = 0;
            lc->asked = false;
            if (lc->reload_pending) {
                lc->reload_pending = false;
                lifecycle_reload(lc);
            }
        }
        return;
    }
    if (lc->asked) {
        /* Under a supervisor: still here, so its new worker did not take
         * over (it failed): ask again, less and less often. */
        if (lc->supervisor > 0 && now_ms >= lc->retry_at_ms && getppid() == lc->supervisor) {
            kill(lc->supervisor, WORKER_RECYCLE_SIGNAL);
            back_off(lc, now_ms);
        }
        return;
    }
    if (lc->required) {
        /* A worker that refuses every request serves nobody until its
         * successor does: no limit to wait for, only the back-off. */
        if (now_ms >= lc->retry_at_ms) {
            lc->reloading = false;
            lifecycle_replace(lc, lc->required);
        }
        return;
    }
    if (lc->deadline_ms && now_ms >= lc->deadline_ms) {
        limit_reached(lc, now_ms, "lived its --workers-lifetime");
    } else if (lc->max_rss_kb) {
        uint64_t kb = rss_kb();
        if (kb > lc->max_rss_kb) {
            snprintf(why, sizeof why, "resident memory %llu MB over --workers-max-rss",
                     (unsigned long long)(kb / 1024));
            limit_reached(lc, now_ms, why);
        }
    }
}

void lifecycle_reload(struct lifecycle *lc)
{
    if (lc->supervisor > 0) /* the supervisor reloads every worker: it got SIGHUP too */
        return;
    if (lc->successor > 0) {
        log_info("reload: a new worker (pid %d) is starting; the reload follows it", (int)lc->successor);
        lc->reload_pending = true;
        return;
    }
    lc->asked = false;
    lc->reloading = true;
    lifecycle_replace(lc, "SIGHUP: reloading");
}

bool lifecycle_ready(struct lifecycle *lc, pid_t from)
{
    return lc->successor > 0 && from == lc->successor;
}

static void owner_tick(void *lc, uint64_t now_ms, uint64_t requests)
{
    lifecycle_tick(lc, now_ms, requests);
}

static void owner_replace(void *lc, const char *why)
{
    ((struct lifecycle *)lc)->required = why;
    lifecycle_replace(lc, why);
}

static void owner_reload(void *lc)
{
    lifecycle_reload(lc);
}

static void owner_reload_later(void *lc)
{
    ((struct lifecycle *)lc)->reload_pending = true;
}

static bool owner_ready(void *lc, pid_t from)
{
    return lifecycle_ready(lc, from);
}

/* Kept for a successor this process starts (one worker alone), and told
 * to the supervisor, which starts the others (WORKER_SIZED_SIGNAL). */
static void owner_sized(void *ctx, unsigned threads)
{
    struct lifecycle *lc = ctx;
    lc->threads = threads;
    if (lc->supervisor > 0 && getppid() == lc->supervisor)
        sigqueue(lc->supervisor, WORKER_SIZED_SIGNAL, (union sigval){.sival_int = (int)threads});
}

struct worker_owner lifecycle_owner(struct lifecycle *lc)
{
    return (struct worker_owner){.ctx = lc, .tick = owner_tick, .replace = owner_replace, .reload = owner_reload,
                               .reload_later = owner_reload_later, .ready = owner_ready, .sized = owner_sized};
}

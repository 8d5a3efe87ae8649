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
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../conn/access_log.h"
#include "log.h"
#include "options.h"
#include "signals.h"

extern char **environ;

static char **saved_argv;

void lifecycle_save_argv(int argc, char **argv)
{
    saved_argv = calloc((size_t)argc + 1, sizeof *saved_argv);
    if (!saved_argv)
        return;
    for (int i = 0; i < argc; i++)
        saved_argv[i] = strdup(argv[i]);
}

pid_t spawn_exec(int listen_fd, unsigned index)
{
    if (!saved_argv) {
        errno = ENOMEM;
        return -1;
    }
    /* Everything the child needs is built here: between fork and exec a
     * child of a threaded process may only make async-signal-safe calls. */
    size_t n = 0;
    while (environ[n])
        n++;
    char **envp = calloc(n + 2, sizeof *envp);
    char var[64];
    int log_fd = access_log_fd();
    snprintf(var, sizeof var, EXEC_WORKER_ENV "=%u:%d:%d", index, listen_fd, log_fd);
    if (!envp)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], EXEC_WORKER_ENV "=", sizeof EXEC_WORKER_ENV) != 0)
            envp[k++] = environ[i];
    envp[k++] = var;
    envp[k] = NULL;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) /* the parent died before prctl */
            _exit(1);
        /* What the new worker inherits: the listener, and the access log
         * opened before root was dropped (it may not open it itself). */
        if (fcntl(listen_fd, F_SETFD, 0) < 0 || (log_fd >= 0 && fcntl(log_fd, F_SETFD, 0) < 0))
            _exit(126);
        execve("/proc/self/exe", saved_argv, envp);
        _exit(127);
    }
    int err = errno;
    free(envp);
    errno = err;
    return pid;
}

bool exec_worker_claim(unsigned *index, int *listen_fd, int *log_fd)
{
    const char *v = getenv(EXEC_WORKER_ENV);
    if (!v)
        return false;
    unsigned i;
    int fd, lfd;
    if (sscanf(v, "%u:%d:%d", &i, &fd, &lfd) != 3 || fd < 0) {
        fprintf(stderr, "cserve: error: %s='%s' is not SLOT:FD:LOGFD\n", EXEC_WORKER_ENV, v);
        exit(2);
    }
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
}

void lifecycle_replace(struct lifecycle *lc, const char *why)
{
    if (lc->asked)
        return;
    lc->asked = true;
    if (lc->supervisor > 0) {
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
    lc->successor = lc->keep_fd < 0 ? -1 : spawn_exec(lc->keep_fd, 0);
    if (lc->successor < 0) {
        log_error("worker: %s, but cannot start a new worker: %s", why, strerror(errno));
        lc->successor = 0;
        lc->asked = false;
        return;
    }
    log_info("worker: %s; started a new worker (pid %d)", why, (int)lc->successor);
}

void lifecycle_tick(struct lifecycle *lc, uint64_t now_ms, uint64_t requests)
{
    char why[96];
    if (lc->max_requests && requests >= lc->max_requests && !lc->asked) {
        snprintf(why, sizeof why, "served %llu requests (--max-requests)", (unsigned long long)requests);
        lifecycle_replace(lc, why);
        return;
    }
    if (now_ms < lc->next_check_ms)
        return;
    lc->next_check_ms = now_ms + 1000;
    if (lc->successor > 0) {
        /* A successor that exits before it serves failed to start (its
         * import raised, most often): this worker keeps serving. */
        int status;
        if (waitpid(lc->successor, &status, WNOHANG) == lc->successor) {
            log_error("reload failed: the new worker (pid %d) %s %d before it served; "
                      "the old one keeps serving",
                      (int)lc->successor, WIFSIGNALED(status) ? "was killed by signal" : "exited with",
                      WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
            lc->successor = 0;
            lc->asked = false;
        }
        return;
    }
    if (lc->asked)
        return;
    if (lc->deadline_ms && now_ms >= lc->deadline_ms) {
        lifecycle_replace(lc, "lived its --workers-lifetime");
    } else if (lc->max_rss_kb) {
        uint64_t kb = rss_kb();
        if (kb > lc->max_rss_kb) {
            snprintf(why, sizeof why, "resident memory %llu MB over --workers-max-rss",
                     (unsigned long long)(kb / 1024));
            lifecycle_replace(lc, why);
        }
    }
}

void lifecycle_reload(struct lifecycle *lc)
{
    if (lc->supervisor > 0) /* the supervisor reloads every worker: it got SIGHUP too */
        return;
    if (lc->successor > 0) {
        log_info("reload: a new worker (pid %d) is already starting", (int)lc->successor);
        return;
    }
    lc->asked = false;
    lifecycle_replace(lc, "SIGHUP: reloading");
}

bool lifecycle_ready(struct lifecycle *lc, pid_t from)
{
    return lc->successor > 0 && from == lc->successor;
}

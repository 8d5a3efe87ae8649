/* supervisor.c — the parent of --workers N processes.
 *
 * main opens every worker's listener (SO_REUSEPORT, one per worker slot; one
 * shared socket for unix: and systemd's) before forking, so a bad --bind
 * fails before anything runs,
 * and a worker that dies leaves its listener open: connections queue there
 * until the respawned worker accepts them, instead of being reset. The app
 * was imported before the fork, so a respawn costs a fork, not an import. */
#include <Python.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../handoffs/handoff.h"
#include "../lib/clock.h"
#include "listen.h"
#include "log.h"
#include "signals.h"
#include "options.h"
#include "supervisor.h"
#include "worker.h"
#include "wsgi.h"

struct slot {
    pid_t pid;
    int listen_fd;
    double started;
    unsigned quick_deaths; /* deaths within a second of starting, in a row */
    bool stats_owed;       /* SIGUSR1 forwarded: its stats part not written yet */
};

/* The supervisor's signalfd: a worker closes its copy (it reads its own). */
static int super_sfd = -1;

static void part_path(char *out, size_t cap, const char *path, unsigned i)
{
    snprintf(out, cap, "%s.worker%u", path, i);
}

static pid_t spawn(const struct options *opt, struct slot *slots, unsigned i, const char *app_name)
{
    bool python = !opt->native_hello;
    if (python)
        PyOS_BeforeFork();
    pid_t pid = fork();
    if (pid == 0) {
        if (python)
            PyOS_AfterFork_Child();
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlive the supervisor */
        /* The supervisor's own signals are not the worker's to block (nor
         * the app's children's to inherit blocked). */
        sigset_t own;
        sigemptyset(&own);
        sigaddset(&own, SIGCHLD);
        sigaddset(&own, SIGALRM);
        sigaddset(&own, STATS_WRITTEN_SIGNAL);
        sigprocmask(SIG_UNBLOCK, &own, NULL);
        if (super_sfd >= 0)
            close(super_sfd);
        for (unsigned j = 0; j < opt->workers; j++)
            if (slots[j].listen_fd != slots[i].listen_fd)
                close(slots[j].listen_fd);
        char stats_path[4200];
        if (opt->stats_json)
            part_path(stats_path, sizeof stats_path, opt->stats_json, i);
        exit(worker_run(opt, slots[i].listen_fd, i, opt->stats_json ? stats_path : NULL, true,
                        app_name));
    }
    if (python)
        PyOS_AfterFork_Parent();
    if (pid < 0) {
        log_error("fork: %s", strerror(errno));
        return -1;
    }
    slots[i].pid = pid;
    slots[i].started = clock_s();
    return pid;
}

static void forward(struct slot *slots, unsigned n, int sig)
{
    for (unsigned i = 0; i < n; i++)
        if (slots[i].pid > 0)
            kill(slots[i].pid, sig);
}

static void merge_stats(const struct options *opt, const char *app_name)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", opt->stats_json);
    FILE *out = fopen(tmp, "we");
    if (!out)
        return;
    fprintf(out, "{\"version\": \"%s\", \"handoff\": \"%s\", \"inline\": %s, \"app\": \"%s\", "
                 "\"instruments\": %s, \"workers\": [",
            CSERVE_VERSION, opt->native_hello ? "none" : opt->inline_app ? "none (inline)" : opt->handoff->name,
            opt->inline_app ? "true" : "false", app_name, CSERVE_INSTRUMENTS ? "true" : "false");
    bool first = true;
    for (unsigned i = 0; i < opt->workers; i++) {
        char part[4200];
        part_path(part, sizeof part, opt->stats_json, i);
        FILE *in = fopen(part, "re");
        if (!in)
            continue;
        fprintf(out, "%s\n  ", first ? "" : ",");
        first = false;
        char buf[8192];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, in)) > 0)
            fwrite(buf, 1, n, out);
        fclose(in);
        unlink(part);
    }
    fprintf(out, "\n]}\n");
    if (fclose(out) == 0)
        rename(tmp, opt->stats_json);
}

/* SIGUSR1 with --stats-json: the supervisor forwards it, each worker writes
 * its part (FILE.workerN) and answers with STATS_WRITTEN_SIGNAL (a real-time
 * signal: those queue, so answers arriving together are not merged into one), and once
 * every worker asked has answered (or died), the parts are merged into FILE
 * as at exit. A second request before the answers merely asks again. */
static void merge_if_answered(const struct options *opt, const char *app_name, struct slot *slots,
                              unsigned n)
{
    bool any_owed = false, asked = false;
    for (unsigned i = 0; i < n; i++) {
        any_owed |= slots[i].stats_owed;
        asked |= slots[i].pid > 0;
    }
    if (!any_owed && asked)
        merge_stats(opt, app_name);
}

static void stats_asked(struct slot *slots, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        slots[i].stats_owed = slots[i].pid > 0;
}

static void stats_answered(const struct options *opt, const char *app_name, struct slot *slots,
                           unsigned n, pid_t from)
{
    for (unsigned i = 0; i < n; i++) {
        if (slots[i].pid > 0 && slots[i].pid == from && slots[i].stats_owed) {
            slots[i].stats_owed = false;
            merge_if_answered(opt, app_name, slots, n);
        }
    }
}

int supervisor_run(const struct options *opt, const char *app_name, const int *listen_fds)
{
    unsigned n = opt->workers;
    struct slot *slots = calloc(n, sizeof *slots);
    if (!slots)
        return 1;
    for (unsigned i = 0; i < n; i++)
        slots[i].listen_fd = listen_fds[i];
    sigset_t set;
    server_signal_set(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGALRM);
    sigaddset(&set, STATS_WRITTEN_SIGNAL);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int sfd = super_sfd = signalfd(-1, &set, SFD_CLOEXEC);
    if (sfd < 0) {
        log_error("signalfd: %s", strerror(errno));
        return 1;
    }
    for (unsigned i = 0; i < n; i++)
        if (spawn(opt, slots, i, app_name) < 0)
            return 1;
    prctl(PR_SET_NAME, "cserve-super");
    bool stopping = false;
    unsigned alive = n;
    while (alive > 0) {
        struct signalfd_siginfo si;
        if (read(sfd, &si, sizeof si) != (ssize_t)sizeof si)
            continue;
        switch (si.ssi_signo) {
        case SIGCHLD: {
            int status;
            pid_t pid;
            while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
                for (unsigned i = 0; i < n; i++) {
                    if (slots[i].pid != pid)
                        continue;
                    slots[i].pid = 0;
                    if (slots[i].stats_owed) { /* it will not answer: merge without it */
                        slots[i].stats_owed = false;
                        merge_if_answered(opt, app_name, slots, n);
                    }
                    if (stopping) {
                        alive--;
                        break;
                    }
                    if (WIFSIGNALED(status))
                        log_warn("worker %u (pid %d) killed by signal %d; respawning", i, (int)pid,
                                 WTERMSIG(status));
                    else
                        log_warn("worker %u (pid %d) exited with %d; respawning", i, (int)pid,
                                 WEXITSTATUS(status));
                    slots[i].quick_deaths = clock_s() - slots[i].started < 1.0 ? slots[i].quick_deaths + 1 : 0;
                    if (slots[i].quick_deaths >= 5) /* crash loop: slow down */
                        usleep(500000);
                    if (spawn(opt, slots, i, app_name) < 0)
                        alive--;
                    break;
                }
            }
            break;
        }
        case SIGTERM:
        case SIGINT:
            if (!stopping) {
                stopping = true;
                log_info("supervisor: stopping %u worker(s)", alive);
                forward(slots, n, (int)si.ssi_signo);
                /* Nobody accepts on these any more: let new connections be
                 * refused rather than queue. */
                for (unsigned i = 0; i < n; i++)
                    if (i == 0 || slots[i].listen_fd != slots[0].listen_fd)
                        close(slots[i].listen_fd);
                /* A worker past its own graceful timeout is stuck: kill it. */
                alarm((unsigned)(opt->graceful_timeout_ms / 1000 + 5));
            }
            break;
        case SIGALRM:
            log_warn("supervisor: workers did not stop in time; killing them");
            forward(slots, n, SIGKILL);
            break;
        case SIGUSR1:
            if (opt->stats_json)
                stats_asked(slots, n);
            forward(slots, n, SIGUSR1);
            break;
        default:
            if ((int)si.ssi_signo == STATS_WRITTEN_SIGNAL) {
                stats_answered(opt, app_name, slots, n, (pid_t)si.ssi_pid);
                break;
            }
            forward(slots, n, (int)si.ssi_signo);
            break;
        }
    }
    if (opt->stats_json)
        merge_stats(opt, app_name);
    if (!opt->native_hello)
        wsgi_finalize(); /* the supervisor kept the imported app for respawns */
    free(slots);
    log_info("supervisor: stopped");
    return 0;
}

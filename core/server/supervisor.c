/* supervisor.c — the parent of --workers N processes.
 *
 * main opens every worker's listener (SO_REUSEPORT, one per worker slot; one
 * shared socket for unix: and systemd's) before forking, so a bad --bind
 * fails before anything runs. A slot's own TCP socket is in the kernel's
 * SO_REUSEPORT group only while it listens, and it listens only while the
 * slot's worker can serve (listen.h): slot 0's from the start, each other
 * slot's once its worker has imported the app (listen_serve, in the
 * worker). The kernel spreads new connections over the sockets that
 * listen, so a worker still importing, or whose import fails, is sent
 * none, where a listening socket would hold its share until it serves.
 *
 * A worker that dies leaves its listener listening when its successor
 * serves at once (a fork of the imported app): connections queue there
 * for it. When the successor must import the app first, or waits (a crash
 * loop's pause, a failing import's backoff), and another slot serves, the
 * listener is paused (listen_pause): the connections already in its
 * backlog are reset, which a client may retry, where they would otherwise
 * wait out an import that may never succeed; new ones go to the slots
 * that serve. It is paused only while the slot has no process that could
 * serve from it, so it never pauses under a worker that accepts; the last
 * slot that listens is never paused (nobody else would take its
 * connections). A shared socket (unix:, systemd's) is never paused: only
 * the workers that serve accept from it.
 *
 * Each worker imports the app itself (started by exec, as a reload's):
 * what the import opens (a database connection, a thread) is its own.
 * Slot 0's worker starts first and the others once it serves, so an app
 * that cannot be imported fails once; if it fails so (exit 2) before any
 * worker has served, the server exits 2 with it rather than respawn.
 * With --preload the app was imported here before the fork: the workers
 * share its memory, and a respawn costs a fork, not an import.
 *
 * A slot's worker is replaced (SIGHUP for all slots, a worker's
 * WORKER_RECYCLE_SIGNAL for its own) by starting the new one on the same
 * listener first and stopping the old one only once the new one says it
 * accepts (WORKER_READY_SIGNAL): each slot always has a worker accepting.
 * A reload execs cserve (lifecycle.c), so the new worker imports the app
 * afresh; once a slot has been reloaded, its respawns exec too, since the
 * app imported here is the old code. A new worker that dies before it is
 * ready leaves the old one serving. A reload starts slot 0's new worker
 * first and the others only once it serves: new code that does not import
 * fails once (one traceback, one line) instead of once per worker, and
 * every slot keeps its old worker. */
#include <Python.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <poll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../handoffs/handoff.h"
#include "../../lib/clock.h"
#include "../services/access_log.h"
#include "lifecycle.h"
#include "listen.h"
#include "../base/log.h"
#include "proctitle.h"
#include "../base/signals.h"
#include "../base/options.h"
#include "../base/stats.h"
#include "supervisor.h"
#include "worker.h"
#include "../python/wsgi.h"

/* Replaced workers of one slot that may drain at once: each reload adds
 * one; past this the oldest is killed (it has outlived that many reloads). */
#define MAX_DRAINING 16
/* A slot whose workers keep dying at start (CRASH_LOOP_DEATHS in a row)
 * starts the next one this much later. */
#define CRASH_LOOP_DEATHS 5
#define CRASH_LOOP_PAUSE_S 0.5
/* A slot whose worker cannot import the app (exit 2 before it served)
 * while others serve tries again this long later, then twice as long
 * after each failure in a row: the import runs the app's code, and a
 * traceback a second helps nobody. A SIGHUP tries at once. */
#define IMPORT_RETRY_FIRST_S 1
#define IMPORT_RETRY_MAX_S 60

struct slot {
    pid_t pid;             /* the worker serving this slot */
    pid_t next;            /* its replacement, until it is ready (0: none) */
    pid_t draining[MAX_DRAINING]; /* replaced workers still finishing their requests */
    unsigned ndraining;
    bool exec;             /* start workers by exec: the imported app is stale or absent */
    bool reloading;        /* next is a reload's (logged as such when it fails) */
    bool reload_pending;   /* SIGHUP came while next was starting: reload again after it */
    bool reload_queued;    /* a reload waits for slot 0's new worker to serve first */
    int listen_fd;
    double started;
    unsigned quick_deaths; /* deaths within a second of starting, in a row */
    unsigned import_failures; /* exits 2 before serving, in a row */
    bool ready;            /* pid has said it accepts */
    double respawn_at;     /* a crash loop's pause or a failing import's backoff: its worker starts then (clock_s; 0: none waits) */
    bool stats_owed;       /* SIGUSR1 forwarded: its stats part not written yet */
    bool served;           /* one of its workers has said it accepts */
    unsigned threads;      /* --blocking-threads auto: the size its worker learned
                            * (WORKER_SIZED_SIGNAL), which the next one starts with */
};

static void part_path(char *out, size_t cap, const char *path, unsigned i)
{
    snprintf(out, cap, "%s.worker%u", path, i);
}

static pid_t spawn(const struct options *opt, struct slot *slots, unsigned i, const char *app_name)
{
    if (slots[i].exec) {
        pid_t pid = spawn_exec(slots[i].listen_fd, i, slots[i].threads);
        if (pid < 0)
            log_error("cannot start worker %u: %s", i, strerror(errno));
        return pid;
    }
    bool python = !opt->native_hello;
    /* Signals wait (pending) until the child has its own handlers: one
     * forwarded to a worker still starting would otherwise meet the
     * inherited handler, which acts as if there were none. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    if (python)
        PyOS_BeforeFork();
    pid_t pid = fork();
    if (pid == 0) {
        if (python)
            PyOS_AfterFork_Child();
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlive the supervisor */
        /* Its own signal pipe and a worker's handlers: the supervisor's
         * pipe and its SIGCHLD are not the worker's. */
        if (signals_init() != 0)
            _exit(1);
        for (unsigned j = 0; j < opt->workers; j++)
            if (slots[j].listen_fd != slots[i].listen_fd)
                close(slots[j].listen_fd);
        char stats_path[4200];
        if (opt->stats_json)
            part_path(stats_path, sizeof stats_path, opt->stats_json, i);
        struct options own = *opt; /* the slot's learned size, its own */
        own.threads_learned = slots[i].threads;
        exit(worker_run(&own, slots[i].listen_fd, i, opt->stats_json ? stats_path : NULL, true,
                        app_name, NULL));
    }
    if (python)
        PyOS_AfterFork_Parent();
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (pid < 0) {
        log_error("fork: %s", strerror(errno));
        return -1;
    }
    return pid;
}

/* Start slot i's worker (at start, or after its worker died). */
static bool start_slot(const struct options *opt, struct slot *slots, unsigned i, const char *app_name)
{
    pid_t pid = spawn(opt, slots, i, app_name);
    if (pid < 0)
        return false;
    slots[i].pid = pid;
    slots[i].ready = false;
    slots[i].started = clock_s();
    return true;
}

/* Whether a slot other than i, on a socket of its own, has a worker that
 * serves. */
static bool other_serves(const struct slot *slots, unsigned n, unsigned i)
{
    for (unsigned j = 0; j < n; j++)
        if (j != i && slots[j].pid > 0 && slots[j].ready && slots[j].listen_fd != slots[i].listen_fd)
            return true;
    return false;
}

/* A slot whose worker could not be started (fork or exec failed: out of
 * processes or memory) is tried again this much later, not left vacant. */
#define SPAWN_RETRY_S 1.0

/* How long slot i waits before its next worker starts (0: at once). */
static double respawn_delay(const struct slot *s)
{
    if (s->import_failures) {
        double d = IMPORT_RETRY_FIRST_S;
        for (unsigned k = 1; k < s->import_failures && d < IMPORT_RETRY_MAX_S; k++)
            d *= 2;
        return d < IMPORT_RETRY_MAX_S ? d : IMPORT_RETRY_MAX_S;
    }
    return s->quick_deaths >= CRASH_LOOP_DEATHS ? CRASH_LOOP_PAUSE_S : 0;
}

/* Start slot i's worker again: it has no process. At once, or, in a crash
 * loop or after failed imports, after a pause that supervisor_run's wait
 * times (start_due), so that the supervisor answers signals meanwhile.
 * Its listener is paused when its next worker will not serve at once and
 * another slot serves (see the top of this file). Returns whether it was
 * paused. */
static bool respawn(const struct options *opt, struct slot *slots, unsigned n, unsigned i, const char *app_name)
{
    struct slot *s = &slots[i];
    double delay = respawn_delay(s);
    bool paused = false;
    if ((delay > 0 || s->exec) && other_serves(slots, n, i)) {
        paused = listen_pause(s->listen_fd) == 0;
        if (!paused)
            log_warn("worker %u: its listener cannot stop listening (%s); connections sent to it wait for "
                     "its next worker", i, strerror(errno));
    }
    if (delay > 0)
        s->respawn_at = clock_s() + delay;
    else if (!start_slot(opt, slots, i, app_name))
        s->respawn_at = clock_s() + SPAWN_RETRY_S; /* fork or exec failed (spawn logged it) */
    return paused;
}

/* The slots whose pause is over get their worker, unless one took the slot
 * meanwhile (a reload's new worker). Returns the poll timeout until the
 * next pause ends, in ms (-1: none waits). */
static int start_due(const struct options *opt, struct slot *slots, unsigned n, const char *app_name)
{
    double now = clock_s(), next = 0;
    for (unsigned i = 0; i < n; i++) {
        struct slot *s = &slots[i];
        if (!s->respawn_at)
            continue;
        if (s->pid > 0 || s->next > 0) {
            s->respawn_at = 0;
        } else if (s->respawn_at <= now) {
            s->respawn_at = 0;
            if (!start_slot(opt, slots, i, app_name)) {
                s->respawn_at = now + SPAWN_RETRY_S; /* fork or exec failed (spawn logged it) */
                if (!next || s->respawn_at < next)
                    next = s->respawn_at;
            }
        } else if (!next || s->respawn_at < next) {
            next = s->respawn_at;
        }
    }
    return next ? (int)((next - now) * 1000.0) + 1 : -1;
}

static bool respawn_waits(const struct slot *slots, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (slots[i].respawn_at)
            return true;
    return false;
}

/* Start a replacement for slot i's worker; it takes over once ready. A
 * reload asked for while one starts follows it (it may carry newer code). */
static void replace_slot(const struct options *opt, struct slot *slots, unsigned i, const char *app_name,
                         bool reload)
{
    if (slots[i].next > 0) {
        if (reload && !slots[i].reload_pending) {
            log_info("worker %u: a new worker is starting; the reload follows it", i);
            slots[i].reload_pending = true;
        }
        return;
    }
    bool was_exec = slots[i].exec;
    if (reload)
        slots[i].exec = true;
    pid_t pid = spawn(opt, slots, i, app_name);
    slots[i].exec = was_exec;
    if (pid < 0)
        return;
    slots[i].next = pid;
    slots[i].reloading = reload;
}

/* A reload: slot 0's new worker first; the others are queued behind it. */
static void reload_all(const struct options *opt, struct slot *slots, unsigned n, const char *app_name)
{
    replace_slot(opt, slots, 0, app_name, true);
    for (unsigned i = 1; i < n; i++)
        slots[i].reload_queued = true;
}

/* Slot 0's new worker serves the new code: the queued slots follow. */
static void reload_queued_slots(const struct options *opt, struct slot *slots, unsigned n, const char *app_name)
{
    for (unsigned i = 0; i < n; i++)
        if (slots[i].reload_queued) {
            slots[i].reload_queued = false;
            replace_slot(opt, slots, i, app_name, true);
        }
}

/* Slot 0's new worker failed: the queued slots keep their workers. */
static unsigned unqueue_reload(struct slot *slots, unsigned n)
{
    unsigned dropped = 0;
    for (unsigned i = 0; i < n; i++) {
        dropped += slots[i].reload_queued;
        slots[i].reload_queued = false;
    }
    return dropped;
}

/* Slot i's replacement accepts: it becomes the worker, the old one drains. */
static void promote(struct slot *s, unsigned i)
{
    if (s->reloading)
        s->exec = true;
    pid_t old = s->pid;
    s->pid = s->next;
    s->next = 0;
    s->started = clock_s();
    s->quick_deaths = 0;
    s->import_failures = 0;
    s->stats_owed = false;
    s->served = true;
    s->ready = true;
    if (old <= 0) {
        log_info("worker %u: pid %d serves", i, (int)s->pid);
        return;
    }
    if (s->ndraining == MAX_DRAINING) {
        log_warn("worker %u: %d reloads later pid %d still drains; killing it", i, MAX_DRAINING,
                 (int)s->draining[0]);
        kill(s->draining[0], SIGKILL);
        memmove(s->draining, s->draining + 1, (MAX_DRAINING - 1) * sizeof *s->draining);
        s->ndraining--;
    }
    s->draining[s->ndraining++] = old;
    log_info("worker %u: pid %d serves; pid %d drains", i, (int)s->pid, (int)old);
    kill(old, WORKER_RETIRE_SIGNAL);
}

static bool drained(struct slot *s, pid_t pid)
{
    for (unsigned k = 0; k < s->ndraining; k++)
        if (s->draining[k] == pid) {
            s->draining[k] = s->draining[--s->ndraining];
            return true;
        }
    return false;
}

static unsigned live_processes(const struct slot *slots, unsigned n)
{
    unsigned live = 0;
    for (unsigned i = 0; i < n; i++)
        live += (slots[i].pid > 0) + (slots[i].next > 0) + slots[i].ndraining;
    return live;
}

static void signal_all(struct slot *slots, unsigned n, int sig)
{
    for (unsigned i = 0; i < n; i++) {
        if (slots[i].pid > 0)
            kill(slots[i].pid, sig);
        if (slots[i].next > 0)
            kill(slots[i].next, sig);
        for (unsigned k = 0; k < slots[i].ndraining; k++)
            kill(slots[i].draining[k], sig);
    }
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
    fprintf(out, "{\"version\": \"%s\", \"handoff\": \"%s\", \"inline\": %s, \"app\": ",
            CSERVE_VERSION, opt->native_hello ? "none" : opt->inline_app ? "none (inline)" : opt->handoff->name,
            opt->inline_app ? "true" : "false");
    stats_json_string(out, app_name); /* a path: it may hold anything but NUL */
    fprintf(out, ", \"instruments\": %s, \"workers\": [", CSERVE_INSTRUMENTS ? "true" : "false");
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

static bool any_served(const struct slot *slots, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (slots[i].served)
            return true;
    return false;
}

/* A child exited: which of a slot's processes it was decides what follows.
 * Returns true when it was a worker that refused to start (exit 2: the app
 * does not import) before any worker served: the server cannot start. */
static bool reap(const struct options *opt, const char *app_name, struct slot *slots, unsigned n,
                 pid_t pid, int status, bool stopping)
{
    char how[64];
    snprintf(how, sizeof how, WIFSIGNALED(status) ? "was killed by signal %d" : "exited with %d",
             WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    bool exit2 = WIFEXITED(status) && WEXITSTATUS(status) == 2; /* the app did not import */
    for (unsigned i = 0; i < n; i++) {
        struct slot *s = &slots[i];
        if (drained(s, pid)) /* a replaced worker finished draining */
            return false;
        if (s->next == pid) {
            s->next = 0;
            if (stopping)
                return false;
            /* The reload's first new worker failed: the queued ones would
             * import the same code (a newer SIGHUP's retry keeps them). */
            unsigned dropped = s->reloading && !s->reload_pending ? unqueue_reload(slots, n) : 0;
            char others[96] = "";
            if (dropped)
                snprintf(others, sizeof others, "; the other %u worker%s keep%s the old code too", dropped,
                         dropped == 1 ? "" : "s", dropped == 1 ? "s" : "");
            bool vacant = s->pid <= 0 && !s->reload_pending;
            if (vacant) {
                s->quick_deaths++;
                s->import_failures = exit2 ? s->import_failures + 1 : 0;
            }
            char then[48] = "starting one";
            if (vacant && respawn_delay(s) > 0)
                snprintf(then, sizeof then, "next try in %.0f s", respawn_delay(s));
            if (s->pid > 0)
                log_error("%s: worker %u's new process (pid %d) %s before it served; pid %d keeps serving%s",
                          s->reloading ? "reload failed" : "recycling failed", i, (int)pid, how, (int)s->pid,
                          others);
            else /* the worker it was to replace died meanwhile: the slot has none */
                log_error("%s: worker %u's new process (pid %d) %s before it served, and the slot has no "
                          "worker; %s%s", s->reloading ? "reload failed" : "recycling failed", i,
                          (int)pid, how, then, others);
            if (s->reload_pending) { /* a newer reload may find the app mended */
                s->reload_pending = false;
                replace_slot(opt, slots, i, app_name, true);
            }
            if (s->pid <= 0 && s->next <= 0)
                respawn(opt, slots, n, i, app_name);
            return false;
        }
        if (s->pid != pid)
            continue;
        bool import_failed = exit2 && !s->ready;
        s->pid = 0;
        s->ready = false;
        if (s->stats_owed) { /* it will not answer: merge without it */
            s->stats_owed = false;
            merge_if_answered(opt, app_name, slots, n);
        }
        if (stopping)
            return false;
        if (!any_served(slots, n) && exit2) {
            log_error("worker %u (pid %d) could not start the app before any worker served; stopping", i,
                      (int)pid);
            return true;
        }
        if (s->next > 0) { /* its replacement is starting: it takes the slot */
            log_warn("worker %u (pid %d) %s; its replacement (pid %d) takes over", i, (int)pid, how,
                     (int)s->next);
            return false;
        }
        s->quick_deaths = clock_s() - s->started < 1.0 ? s->quick_deaths + 1 : 0;
        s->import_failures = import_failed ? s->import_failures + 1 : 0;
        double delay = respawn_delay(s);
        bool paused = respawn(opt, slots, n, i, app_name);
        if (import_failed)
            log_error("worker %u (pid %d) could not import the app (exit 2, %u in a row)%s; next try in %.0f s",
                      i, (int)pid, s->import_failures,
                      paused ? " while other workers serve: its connections go to them" : "", delay);
        else
            log_warn("worker %u (pid %d) %s; respawning%s", i, (int)pid, how,
                     paused ? "; the other workers take its connections until the new one serves" : "");
        return false;
    }
    return false;
}

int supervisor_run(const struct options *opt, const char *app_name, const int *listen_fds,
                   const struct handover *adopted)
{
    unsigned n = opt->workers;
    struct slot *slots = calloc(n, sizeof *slots);
    if (!slots)
        return 1;
    for (unsigned i = 0; i < n; i++)
        slots[i].listen_fd = listen_fds[i];
    if (signals_supervise() != 0) {
        log_error("sigaction: %s", strerror(errno));
        return 1;
    }
    struct pollfd pfd = {.fd = signals_fd(), .events = POLLIN};
    bool imported = opt->preload && !opt->native_hello && !adopted; /* main imported the app here */
    bool others_wait = false; /* slots 1.. start once slot 0's worker serves */
    int rc = 0;
    if (adopted) {
        /* One worker alone was replaced (main.c): supervise its successor,
         * and start any later one by exec (the interpreter here is gone). */
        slots[0].pid = adopted->pid;
        slots[0].exec = true;
        slots[0].served = slots[0].ready = true;
        slots[0].started = clock_s();
        log_info("supervisor: worker 0 is pid %d", (int)adopted->pid);
        if (adopted->stop_signal) /* read from the signal pipe below: stop at once */
            kill(getpid(), adopted->stop_signal);
        else if (adopted->reload || adopted->recycle)
            replace_slot(opt, slots, 0, app_name, adopted->reload);
    } else {
        /* Each worker imports the app: exec'd, as for a reload; the others
         * wait for slot 0's to serve. */
        for (unsigned i = 0; i < n; i++)
            slots[i].exec = !imported && !opt->native_hello;
        for (unsigned i = 0; i < (slots[0].exec ? 1 : n); i++)
            if (!start_slot(opt, slots, i, app_name))
                return 1;
        others_wait = slots[0].exec && n > 1;
    }
    prctl(PR_SET_NAME, "cserve-super");
    proctitle_set("cserve: supervisor [%s]", app_name);
    bool stopping = false;
    /* An adopted worker may have ended before SIGCHLD had a handler here. */
    struct server_signal si = {.signo = SIGCHLD};
    bool have = adopted != NULL;
    /* A slot in a crash loop's pause has no process, and the supervisor
     * runs on for it: poll wakes when the pause ends, or at a signal. Once
     * stopping, the paused worker is not started. */
    for (;;) {
        int wait_ms = stopping ? -1 : start_due(opt, slots, n, app_name);
        if (live_processes(slots, n) == 0 && (stopping || !respawn_waits(slots, n)))
            break;
        if (!have && !signals_next(&si)) {
            poll(&pfd, 1, wait_ms);
            continue;
        }
        have = false;
        int sig = si.signo;
        if (sig == SIGCHLD) {
            int status;
            pid_t pid;
            while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
                if (reap(opt, app_name, slots, n, pid, status, stopping) && !stopping) {
                    stopping = true;
                    rc = 2;
                    signal_all(slots, n, SIGTERM);
                    alarm((unsigned)(opt->graceful_timeout_ms / 1000 + 5));
                }
        } else if (sig == SIGTERM || sig == SIGINT) {
            if (!stopping) {
                stopping = true;
                log_info("supervisor: stopping %u worker(s)", live_processes(slots, n));
                signal_all(slots, n, sig);
                /* Nobody accepts on these any more: let new connections be
                 * refused rather than queue. */
                for (unsigned i = 0; i < n; i++)
                    if (i == 0 || slots[i].listen_fd != slots[0].listen_fd)
                        close(slots[i].listen_fd);
                /* A worker past its own graceful timeout is stuck: kill it. */
                alarm((unsigned)(opt->graceful_timeout_ms / 1000 + 5));
            }
        } else if (sig == SIGALRM) {
            log_warn("supervisor: workers did not stop in time; killing them");
            signal_all(slots, n, SIGKILL);
        } else if (sig == SIGHUP) {
            if (!stopping) {
                if (n > 1)
                    log_info("supervisor: SIGHUP: a new worker imports the app afresh; once it serves, %u more "
                             "follow", n - 1);
                else
                    log_info("supervisor: SIGHUP: a new worker imports the app afresh");
                reload_all(opt, slots, n, app_name);
            }
        } else if (sig == WORKER_RECYCLE_SIGNAL) {
            for (unsigned i = 0; i < n && !stopping; i++)
                if (slots[i].pid == (pid_t)si.pid)
                    replace_slot(opt, slots, i, app_name, false);
        } else if (sig == WORKER_READY_SIGNAL) {
            for (unsigned i = 0; i < n; i++)
                if (slots[i].pid > 0 && slots[i].pid == (pid_t)si.pid) {
                    slots[i].served = slots[i].ready = true;
                    if (slots[i].import_failures)
                        log_info("worker %u: pid %d imported the app and serves, after %u failed tr%s", i,
                                 (int)si.pid, slots[i].import_failures,
                                 slots[i].import_failures == 1 ? "y" : "ies");
                    slots[i].import_failures = 0;
                }
            for (unsigned i = 0; i < n; i++)
                if (slots[i].next > 0 && slots[i].next == (pid_t)si.pid) {
                    if (stopping) {
                        kill(slots[i].next, SIGTERM);
                        continue;
                    }
                    bool reloaded = slots[i].reloading;
                    promote(&slots[i], i);
                    if (reloaded) /* the new code imports: the queued slots follow */
                        reload_queued_slots(opt, slots, n, app_name);
                    if (slots[i].reload_pending) { /* SIGHUP came while it started */
                        slots[i].reload_pending = false;
                        replace_slot(opt, slots, i, app_name, true);
                    }
                }
            if (others_wait && slots[0].served && !stopping) {
                others_wait = false;
                for (unsigned i = 1; i < n; i++)
                    if (slots[i].pid <= 0 && slots[i].next <= 0)
                        start_slot(opt, slots, i, app_name);
            }
        } else if (sig == SIGWINCH) {
            /* Workers it starts from now on inherit its access log. */
            access_log_reopen();
            forward(slots, n, sig);
        } else if (sig == SIGUSR1) {
            if (opt->stats_json)
                stats_asked(slots, n);
            forward(slots, n, SIGUSR1);
        } else if (sig == WORKER_SIZED_SIGNAL) {
            /* From the slot's worker or its replacement once it starts (a
             * drained one no longer changes its size). */
            for (unsigned i = 0; i < n; i++)
                if (si.value > 0 && ((slots[i].pid > 0 && slots[i].pid == (pid_t)si.pid) ||
                                     (slots[i].next > 0 && slots[i].next == (pid_t)si.pid)))
                    slots[i].threads = (unsigned)si.value;
        } else if (sig == STATS_WRITTEN_SIGNAL) {
            stats_answered(opt, app_name, slots, n, (pid_t)si.pid);
        } else {
            forward(slots, n, sig);
        }
    }
    if (opt->stats_json)
        merge_stats(opt, app_name);
    if (imported)
        wsgi_finalize(); /* the supervisor kept the imported app for respawns */
    free(slots);
    log_info("supervisor: stopped");
    return rc;
}

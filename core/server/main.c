/* main.c — cserve: parse options, pick the interpreter and virtualenv, start
 * Python and import the app (so a bad app fails before anything listens),
 * open the sockets, then serve as one worker or as the supervisor of
 * several. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../../handoffs/handoff.h"
#include "../services/access_log.h"
#include "../python/interp.h"
#include "../http/http_forwarded.h"
#include "lifecycle.h"
#include "listen.h"
#include "../base/log.h"
#include "../metrics/metrics.h"
#include "../base/signals.h"
#include "options_parse.h"
#include "pidfile.h"
#include "preflight.h"
#include "privs.h"
#include "proctitle.h"
#include "supervisor.h"
#include "worker.h"
#include "../python/wsgi.h"

/* apps/ next to the binary, or next to the directory it is in (for
 * build-asan/cserve and the like), or PREFIX/share/cserve/apps where
 * `pip install` puts it beside PREFIX/bin/cserve. */
static void default_app_dir(char *out, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    char *dir = dirname(exe);
    static const char *const candidates[] = {"%s/apps", "%s/../apps", "%s/../share/cserve/apps"};
    for (size_t i = 0; i < sizeof candidates / sizeof *candidates; i++) {
        snprintf(out, cap, candidates[i], dir);
        char probe[PATH_MAX + 16];
        snprintf(probe, sizeof probe, "%s/hello.py", out);
        if (access(probe, R_OK) == 0)
            return;
    }
    snprintf(out, cap, "%s/apps", dir); /* the error will name this one */
}

/* Idle keep-alive connections are cheap; descriptors should not be the limit. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* The metrics listener before the app's: an address it cannot have ends
 * the start before the app's listener exists. */
static int open_listeners(const struct options *opt, int *fds, int *metrics_fd)
{
    if (opt->metrics_bind && (*metrics_fd = listen_metrics_open(opt)) < 0)
        return -1;
    return listen_open_all(opt, opt->workers, fds);
}

/* What the start-up line and the process titles call the app. */
static void describe_app(const struct options *opt, const char *apps, char *out, size_t cap)
{
    if (opt->native_hello)
        snprintf(out, cap, "native-hello");
    else if (opt->app_spec)
        snprintf(out, cap, "%s", opt->app_spec);
    else
        snprintf(out, cap, "%s/hello.py:application", apps);
}

/* One worker alone that handed over with a pool thread still in the app
 * exec'd itself (lifecycle_exec_supervisor): this image supervises its
 * successor, with what the server held passed on. It imports nothing. */
static int supervise_main(struct options *opt, const struct forwarded_policy *forwarded, struct handover *ho,
                          const struct inherited *in)
{
    if (opt->access_log && in->log_fd >= 0)
        access_log_adopt(in->log_fd, opt->access_log_file, (enum access_log_format)opt->access_log_format,
                         forwarded);
    if (opt->pid_file && in->pid_fd >= 0)
        pidfile_adopt(opt->pid_file, in->pid_fd);
    listen_adopt_unix(opt, in->unix_owned);
    if (opt->metrics_bind && in->metrics_fd >= 0) {
        metrics_shm_adopt(in->shm_fd);
        if (metrics_start(opt, opt->workers, in->metrics_fd) != 0)
            log_warn("--metrics-bind: not served from here on");
    }
    char apps[PATH_MAX];
    default_app_dir(apps, sizeof apps);
    char app_name[PATH_MAX + 64];
    describe_app(opt, apps, app_name, sizeof app_name);
    int rc = supervisor_run(opt, app_name, &ho->listen_fd, ho);
    metrics_stop();
    listen_cleanup();
    return rc;
}

/* A worker exec'd by a supervisor (or by a worker it replaces): the
 * listener, the user and the directory are inherited; it imports the app
 * afresh (a failure exits here, before it tells its parent it accepts). */
static int exec_worker_main(struct options *opt, const struct forwarded_policy *forwarded, unsigned index,
                            int listen_fd, int log_fd)
{
    if (opt->access_log)
        access_log_adopt(log_fd, opt->access_log_file, (enum access_log_format)opt->access_log_format,
                         forwarded);
    bool python = !opt->native_hello;
    if (python)
        interp_select(opt);
    char apps[PATH_MAX];
    default_app_dir(apps, sizeof apps);
    char app_name[PATH_MAX + 64];
    describe_app(opt, apps, app_name, sizeof app_name);
    if (python)
        wsgi_init(opt, forwarded, apps);
    char stats_path[4200];
    if (opt->stats_json)
        snprintf(stats_path, sizeof stats_path, "%s.worker%u", opt->stats_json, index);
    log_info("worker %u: serving %s", index, app_name);
    return worker_run(opt, listen_fd, index, opt->stats_json ? stats_path : NULL, true, app_name, NULL);
}

int main(int argc, char **argv)
{
    static struct options opt;
    /* The two --forwarded-* lists, parsed: the access log and the WSGI
     * bridge each get a pointer to this one policy. */
    static struct forwarded_policy forwarded;
    /* First: it takes its variable out of environ, which proctitle_init copies. */
    unsigned exec_index, exec_threads = 0;
    int exec_fd, exec_log_fd;
    bool exec_worker = exec_worker_claim(&exec_index, &exec_fd, &exec_log_fd, &exec_threads);
    struct handover handed;
    struct inherited inherited;
    bool supervise = !exec_worker && lifecycle_supervise_claim(&handed, &inherited);
    lifecycle_save_argv(argc, argv);
    argv = proctitle_init(argc, argv); /* options keep pointers into these strings */
    options_parse(&opt, argc, argv);
    opt.threads_learned = exec_threads;
    if (!exec_worker && !supervise) /* the server's first process says it, not each worker again */
        options_check_environment();
    char why[160];
    if (forwarded_trust_parse(&forwarded, opt.forwarded_allow_ips, why, sizeof why) != 0) {
        log_error("--forwarded-allow-ips: %s (see cserve --help)", why);
        return 2;
    }
    if (forwarded_fields_parse(&forwarded, opt.forwarded_headers, why, sizeof why) != 0) {
        log_error("--forwarded-headers: %s (see cserve --help)", why);
        return 2;
    }

    signal(SIGPIPE, SIG_IGN);
    if (signals_init() != 0) {
        log_error("cannot set up signal handling: %s", strerror(errno));
        return 1;
    }
    raise_fd_limit();

    if (exec_worker)
        return exec_worker_main(&opt, &forwarded, exec_index, exec_fd, exec_log_fd);
    if (supervise)
        return supervise_main(&opt, &forwarded, &handed, &inherited);
    /* What the start refuses, --check-config refuses too. */
    if (listen_metrics_check(&opt) != 0)
        return 2;
    listen_claim_inherited();
    bool python = !opt.native_hello;
    /* A wrong virtualenv or user fails here, before anything listens. */
    if (python)
        interp_select(&opt);
    if (opt.check_config) { /* after interp_select: it names the virtualenv chosen */
        options_print(&opt, stdout);
        fflush(stdout);
    }
    bool dropping = privs_resolve(&opt);
    char apps[PATH_MAX];
    default_app_dir(apps, sizeof apps);
    if (opt.chdir_dir && chdir(opt.chdir_dir) != 0) {
        log_error("--chdir %s: %s", opt.chdir_dir, strerror(errno));
        return 2;
    }
    lifecycle_save_dir();
    /* What the start refuses, --check-config refuses too: the same checks. */
    if (preflight_before_drop(&opt) != 0)
        return 2;
    char app_name[PATH_MAX + 64];
    describe_app(&opt, apps, app_name, sizeof app_name);

    /* Normally the app is imported first, so a bad app fails before anything
     * listens. With --user the sockets come first (port 80 needs root), then
     * root is dropped, and only then does app code run: never as root. With
     * --workers N each worker imports it, unless --preload: the supervisor
     * imports nothing, and exits 2 when its first worker cannot import
     * (supervisor.c), before any worker serves. */
    if (opt.check_config) { /* nothing binds; the app is imported as it would be served */
        if (dropping)
            privs_drop();
        if (preflight_as_server(&opt) != 0)
            return 2;
        if (python)
            wsgi_init(&opt, &forwarded, apps);
        printf("app imports: %s\n", python ? "yes" : "(native-hello: no Python)");
        return 0;
    }
    /* A running server's pid file is not taken over: `kill -HUP $(cat FILE)`
     * must reach that server. Ours names us before anything listens. */
    if (opt.pid_file && pidfile_take(opt.pid_file) != 0)
        return 2;
    /* Before root is dropped: /var/log is root's. */
    if (opt.access_log &&
        access_log_open(opt.access_log_file, (enum access_log_format)opt.access_log_format, &forwarded) != 0) {
        log_error("--access-log=%s: %s", opt.access_log_file, strerror(errno));
        return 2;
    }
    /* Exit 2: cserve refuses to start, for what it was given or found (an
     * option, the app, an address in use, a file it cannot open), with one
     * line, before it serves. Exit 1: the server itself failed (memory, a
     * thread). */
    int *fds = calloc(opt.workers, sizeof *fds), metrics_fd = -1;
    if (!fds) {
        log_error("out of memory");
        return 1;
    }
    int rc = 2;
    if (dropping) {
        if (open_listeners(&opt, fds, &metrics_fd) != 0)
            goto out;
        privs_drop();
    }
    if (preflight_as_server(&opt) != 0)
        goto out;
    if (python && (opt.workers == 1 || opt.preload))
        wsgi_init(&opt, &forwarded, apps);
    if (!dropping && open_listeners(&opt, fds, &metrics_fd) != 0)
        goto out;
    /* Before the start-up line, so a failure is the one line before it.
     * Before any worker exists: the slots are inherited, and the thread
     * that serves them stays in this process through a reload. */
    if (opt.metrics_bind && metrics_start(&opt, opt.workers, metrics_fd) != 0)
        goto out;

    char how[600];
    const char *mode = opt.native_hello ? "native hello, no Python"
                     : opt.inline_app   ? "inline: the app runs on the loop thread"
                                        : NULL;
    if (opt.workers > 1)
        snprintf(how, sizeof how, "%u workers; %s", opt.workers, mode ? mode : opt.handoff->name);
    else if (mode)
        snprintf(how, sizeof how, "%s", mode);
    else if (opt.threads_auto)
        snprintf(how, sizeof how, "handoff %s, blocking threads auto: 1 to %u as the load needs",
                 opt.handoff->name, opt.blocking_threads);
    else
        snprintf(how, sizeof how, "handoff %s, %u blocking thread%s", opt.handoff->name,
                 opt.blocking_threads, opt.blocking_threads == 1 ? "" : "s");
    /* Root without --user runs the app's code, and anything that reaches it
     * through a request, as root; --user root says it on purpose. Said once
     * serving, so an error before that stays the one line it is. */
    if (geteuid() == 0 && !opt.user)
        log_warn("running as root without --user: the app runs as root. Give --user USER (and --group "
                 "GROUP): cserve binds as root, then serves as USER");
    log_info("cserve %s serving %s on %s (%s%s%s%s%s)", CSERVE_VERSION, app_name, listen_describe(), how,
             python ? "; " : "", python ? interp_describe() : "", dropping ? "; as " : "",
             dropping ? privs_describe() : "");
    if (opt.workers > 1) {
        rc = supervisor_run(&opt, app_name, fds, NULL);
    } else {
        struct handover ho;
        rc = worker_run(&opt, fds[0], 0, opt.stats_json, false, app_name, &ho);
        if (ho.pid > 0 && ho.stranded) /* returns only if the exec failed */
            lifecycle_exec_supervisor(&ho);
        if (ho.pid > 0) /* reloaded or recycled: this process now supervises */
            rc = supervisor_run(&opt, app_name, &ho.listen_fd, &ho);
    }
    metrics_stop();
    listen_cleanup();
out:
    free(fds);
    return rc;
}

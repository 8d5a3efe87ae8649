/* worker.h — one worker process: its loop, its pool, its handoff. */
#ifndef CSERVE_WORKER_H
#define CSERVE_WORKER_H

#include <stdbool.h>
#include <sys/types.h>

struct options;

/* Serve on listen_fd until SIGTERM/SIGINT and a graceful drain. Called with
 * the GIL held when Python runs (not with --app native-hello). stats_path is
 * where --stats-json goes (NULL: nowhere); part: this worker has a
 * supervisor (its parent): write only this worker's object there (the
 * supervisor merges), tell it when the loop accepts, ask it for a
 * replacement. Returns the exit status. One worker alone (part false) may
 * be replaced after a reload or a recycle: then *handover (when not NULL)
 * names the worker that now serves and the listener it serves on, which
 * the caller supervises; else handover->pid is 0. */
struct handover {
    pid_t pid;
    int listen_fd;
    int stop_signal; /* a SIGTERM/SIGINT that came during the handover: the server stops */
    bool recycle;    /* the successor asked to be replaced meanwhile */
    bool reload;     /* ... or a SIGHUP came */
    bool stranded;   /* a pool thread still runs the app (stuck, or past the drain): this
                      * process must not go on as it is (lifecycle_exec_supervisor) */
};
int worker_run(const struct options *opt, int listen_fd, unsigned index, const char *stats_path,
               bool part, const char *app_name, struct handover *handover);

#endif

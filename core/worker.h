/* worker.h — one worker process: its loop, its pool, its handoff. */
#ifndef CSERVE_WORKER_H
#define CSERVE_WORKER_H

#include <stdbool.h>

struct options;

/* Serve on listen_fd until SIGTERM/SIGINT and a graceful drain. Called with
 * the GIL held when Python runs (not with --app native-hello). stats_path is
 * where --stats-json goes (NULL: nowhere); part: write only this worker's
 * object there (the supervisor merges). Returns the exit status. */
int worker_run(const struct options *opt, int listen_fd, unsigned index, const char *stats_path,
               bool part, const char *app_name);

#endif

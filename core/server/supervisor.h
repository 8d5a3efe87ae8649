/* supervisor.h — --workers N > 1: fork the workers, respawn the dead,
 * forward signals, merge their stats. */
#ifndef CSERVE_SUPERVISOR_H
#define CSERVE_SUPERVISOR_H

struct options;

#include <sys/types.h>

/* listen_fds[i]: worker i's listening socket (the same fd may repeat).
 * adopted > 0: one worker alone has handed over to this successor, its
 * child, which becomes worker 0 (no worker is started). */
int supervisor_run(const struct options *opt, const char *app_name, const int *listen_fds,
                   pid_t adopted);

#endif

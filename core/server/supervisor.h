/* supervisor.h — --workers N > 1: fork the workers, respawn the dead,
 * forward signals, merge their stats. */
#ifndef CSERVE_SUPERVISOR_H
#define CSERVE_SUPERVISOR_H

struct options;

#include <sys/types.h>

struct handover;

/* listen_fds[i]: worker i's listening socket (the same fd may repeat).
 * adopted: one worker alone has handed over to its successor, its child,
 * which becomes worker 0 (no worker is started), with what came during the
 * handover (a stop, the successor's request to be recycled); NULL
 * otherwise. */
int supervisor_run(const struct options *opt, const char *app_name, const int *listen_fds,
                   const struct handover *adopted);

#endif

/* supervisor.h — --workers N > 1: fork the workers, respawn the dead,
 * forward signals, merge their stats. */
#ifndef CSERVE_SUPERVISOR_H
#define CSERVE_SUPERVISOR_H

struct options;

/* listen_fds[i]: worker i's listening socket (the same fd may repeat). */
int supervisor_run(const struct options *opt, const char *app_name, const int *listen_fds);

#endif

/* supervisor.h — --workers N > 1: fork the workers, respawn the dead,
 * forward signals, merge their stats. */
#ifndef CSERVE_SUPERVISOR_H
#define CSERVE_SUPERVISOR_H

struct options;

int supervisor_run(const struct options *opt, const char *app_name);

#endif

/* devreload.h — --reload, for development: a changed .py file in the app's
 * own folders reloads the worker (as SIGHUP does). */
#ifndef CSERVE_DEVRELOAD_H
#define CSERVE_DEVRELOAD_H

#include <stdint.h>

struct loop;

/* Watch dirs (NULL-terminated) with inotify and register the descriptor in
 * the loop's epoll. Returns 0, or -1 with errno. */
int devreload_start(struct loop *l, char **dirs);
/* The inotify descriptor is readable: note a .py change (a reload follows
 * once the folders are quiet for a moment: editors write in steps). */
void devreload_on_event(struct loop *l);
/* Once a pass: reload when a change has settled. */
void devreload_tick(struct loop *l);

#endif

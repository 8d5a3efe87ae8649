/* devreload.h — --reload, for development: a changed .py file in the app's
 * own folders reloads the worker (as SIGHUP does). */
#ifndef CSERVE_DEVRELOAD_H
#define CSERVE_DEVRELOAD_H

#include <stdint.h>
#include <sys/types.h>

#include "../conn/loop.h"

struct worker_owner;

struct devreload {
    struct loop_watch watch;        /* the inotify descriptor, in the loop's epoll */
    struct loop_hook hook;
    int fd;                         /* inotify (-1: off) */
    uint64_t at_ms;                 /* reload then, unless another change comes first (0: none) */
    pid_t supervisor;               /* reloads every worker (0: one worker alone) */
    const struct worker_owner *owner;
};

/* Watch dirs (NULL-terminated) with inotify from l's epoll. A change
 * reloads through the supervisor (SIGHUP to it) or, alone, the owner.
 * Returns 0, or -1 with errno (d->fd is then -1 and nothing is watched). */
int devreload_start(struct devreload *d, struct loop *l, char **dirs, pid_t supervisor,
                    const struct worker_owner *owner);
/* After loop_run: close the descriptor. */
void devreload_stop(struct devreload *d);

#endif

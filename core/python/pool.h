/* pool.h — the Python pool threads of one worker (the job's messages are
 * job.h's). */
#ifndef CSERVE_POOL_H
#define CSERVE_POOL_H

#include <stdbool.h>

struct handoff;
struct stats;
struct job;

struct pool;

/* Start n pool threads taking jobs from h. Called with the GIL held by the
 * caller, which keeps it. watched (--app-timeout): each thread publishes
 * when its request started (stats->pool[i].app_since_ms) for the watchdog.
 * NULL on failure. */
struct pool *pool_start(struct handoff *h, unsigned n, struct stats *stats, bool watched);
/* Shut the handoff down and wait up to wait_ms for the threads to exit.
 * Returns true if all exited (then the pool is freed). */
bool pool_stop(struct pool *p, unsigned wait_ms);

/* --inline: the thread state the loop thread runs the app with. */
void pool_set_inline_state(void *thread_state);
/* --inline, at exit: take the GIL back on the loop thread. */
void pool_restore_inline_state(void);

#endif

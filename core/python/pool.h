/* pool.h — the Python pool threads of one worker (the job's messages are
 * job.h's). */
#ifndef CSERVE_POOL_H
#define CSERVE_POOL_H

#include <stdbool.h>

struct handoff;
struct stats;
struct job;

struct pool;

/* Start n pool threads taking jobs from h, of at most max (h, stats->pool
 * and stats->threads have room for max; max >= n). Called with the GIL held
 * by the caller, which keeps it. watched (--app-timeout): each thread
 * publishes when its request started (stats->pool[i].app_since_ms) for the
 * watchdog. NULL on failure. */
struct pool *pool_start(struct handoff *h, unsigned n, unsigned max, struct stats *stats, bool watched);
/* Start pool thread k, the next one (k == the threads started so far, k <
 * max), later on: --blocking-threads auto. Called on the loop thread, which
 * does not hold the GIL, and does not wait for it: the thread takes it
 * itself, and its jobs wait in its queue until it does. 0, or an errno. */
int pool_start_thread(struct pool *p, unsigned k);
/* Threads started, and of those the ones that have put themselves in the
 * stats (stats->threads[1..]): an acquire, so that the stats of that many
 * are complete to whoever reads it. */
unsigned pool_started(const struct pool *p);
unsigned pool_registered(const struct pool *p);
/* Wait until pool_registered(p) >= n or wait_ms has passed (woken by each
 * registration): true when it is. */
bool pool_wait_registered(struct pool *p, unsigned n, unsigned wait_ms);
/* Shut the handoff down and wait up to wait_ms for the threads to exit.
 * Returns true if all exited (then the pool is freed). */
bool pool_stop(struct pool *p, unsigned wait_ms);

/* --inline: the thread state the loop thread runs the app with. */
void pool_set_inline_state(void *thread_state);
/* --inline, at exit: take the GIL back on the loop thread. */
void pool_restore_inline_state(void);

#endif

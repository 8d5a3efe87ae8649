/* pool.h — the Python pool threads of one worker, and the pool side of a
 * job's messages (job.h). */
#ifndef CSERVE_POOL_H
#define CSERVE_POOL_H

#include <stdbool.h>

struct handoff;
struct stats;
struct job;

struct pool;

/* Start n pool threads taking jobs from h. Called with the GIL held by the
 * caller, which keeps it. NULL on failure. */
struct pool *pool_start(struct handoff *h, unsigned n, struct stats *stats);
/* Shut the handoff down and wait up to wait_ms for the threads to exit.
 * Returns true if all exited (then the pool is freed). */
bool pool_stop(struct pool *p, unsigned wait_ms);

/* --inline: the thread state the loop thread runs the app with. */
void pool_set_inline_state(void *thread_state);
/* --inline, at exit: take the GIL back on the loop thread. */
void pool_restore_inline_state(void);

/* ---- the pool side of a job's messages (called by the WSGI bridge, GIL held) ---- */
/* Post job->out[fill_buf] for writing now and switch to the other buffer.
 * Inline: nothing (everything goes out with the final message). */
void job_flush(struct job *job);
/* The body window is empty: ask the loop for more and wait (GIL released). */
void job_need_body(struct job *job);
/* Post the final message. The job is the loop's after this. */
void job_done(struct job *job);
/* True if the job's messages are answered by a loop on another thread. */
bool job_streams(void);

#endif

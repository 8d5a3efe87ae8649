/* conn_app.h — the app the connection harness runs, two ways: on the loop
 * thread the way --inline runs one (inline_run, job.h), or on a stand-in
 * pool that takes submitted jobs through a stand-in handoff and answers
 * with the job protocol's messages (need-body, flush, done) one step at a
 * time, between loop passes. Everything is single-threaded, so a run is a
 * function of its input and seed.
 *
 * Both ways the app answers a request the same: it reads the whole body and
 * answers 200 with an "X-Seq" header (the how-many-th request the app ran)
 * and the body's length and hash as the response body; a target containing
 * "close-after" makes it close the connection (Connection: close), and a
 * body the loop reports bad gets that status (400, 413; 500 when the client
 * went). On the pool the response leaves in up to three parts (two flushes
 * at data-derived points, then done): the bytes are the same. How often the
 * pool flushes (never, sometimes, always) and whether its handoff is
 * sometimes full are chosen per run from the seed. */
#ifndef CSERVE_CONN_APP_H
#define CSERVE_CONN_APP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct job;
struct handoff;

/* Start a run: nothing submitted; seed drives the pool's choices. */
void app_reset(uint64_t seed);
/* From now on in this run, the stand-in handoff is never full. */
void app_never_full(void);
/* How many requests the app started; whether one met a body error. */
unsigned app_runs(void);
bool app_body_error(void);
/* Whether a job the app ran was told its client is gone (conn_lost). */
bool app_lost(void);

/* The stand-in handoff to put in loop.handoff (submit only). */
struct handoff *app_pool_handoff(void);
/* One step of the job the pool runs (jobs run one after another, in submit
 * order, as on one pool thread). False when it can do nothing: no job, or
 * the job waits for the loop's acknowledgement. */
bool app_pool_step(void);
/* The clock the pool stamps its completions with (job.done_ns): the loop's
 * at the step, so that a completion the loop takes passes later carries an
 * earlier stamp, as a real one does. */
void app_pool_clock(uint64_t now_ns);
/* The oldest message posted and not yet taken by the loop, or NULL. */
struct job *app_pool_message(void);
/* No job submitted and not done, and no message waiting. */
bool app_pool_idle(void);
/* Every job the pool was ever handed (each once), for the leak check. */
size_t app_pool_jobs(struct job *const **jobs);
void app_free(void);

#endif

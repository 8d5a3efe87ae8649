/* jobs.h — the loop's free list of jobs (jobs.c): no allocation per request
 * in steady state. */
#ifndef CSERVE_JOBS_H
#define CSERVE_JOBS_H

struct job;
struct loop;

struct job *job_get(struct loop *l);
void job_put(struct loop *l, struct job *job);
void jobs_free_all(struct loop *l);
/* Once a pass: if the free list let go of much memory lately, ask the
 * allocator to return it to the system (at most once a second). */
void jobs_release_memory(struct loop *l);


#endif

/* jobs.c — the loop's free list of jobs. A job is taken when a head parses
 * and returned when its response is out, so the steady state allocates
 * nothing; the response buffers stay with the job for the next request. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loop.h"

#define OUT_KEEP (256 * 1024) /* a response buffer larger than this is freed after use */
#define OWN_KEEP (128 * 1024)

static void job_clear(struct job *job)
{
    struct buffer out0 = job->out[0], out1 = job->out[1], raw = job->body.raw;
    char *own = job->body.own;
    size_t own_cap = job->body.own_cap;
    /* Everything but the reusable storage goes back to zero: the request
     * views, framing and flags all belong to one request. The headers array
     * is left as is: the parser overwrites what it reports. */
    memset(job, 0, offsetof(struct job, req));
    job->req.num_headers = 0;
    memset(&job->framing, 0, sizeof *job - offsetof(struct job, framing));
    buffer_reset(&out0, OUT_KEEP);
    buffer_reset(&out1, OUT_KEEP);
    buffer_reset(&raw, OWN_KEEP);
    if (own_cap > OWN_KEEP) {
        free(own);
        own = NULL;
        own_cap = 0;
    }
    job->out[0] = out0;
    job->out[1] = out1;
    job->body.raw = raw;
    job->body.own = own;
    job->body.own_cap = own_cap;
    job->file_fd = -1;
}

struct job *job_get(struct loop *l)
{
    struct job *job = l->free_jobs;
    if (job) {
        l->free_jobs = job->next_free;
    } else {
        job = calloc(1, sizeof *job);
        if (!job)
            return NULL;
    }
    job_clear(job);
    return job;
}

void job_put(struct loop *l, struct job *job)
{
    if (job->file_fd >= 0)
        close(job->file_fd);
    job->file_fd = -1;
    job->next_free = l->free_jobs;
    l->free_jobs = job;
}

void jobs_free_all(struct loop *l)
{
    while (l->free_jobs) {
        struct job *job = l->free_jobs;
        l->free_jobs = job->next_free;
        buffer_free(&job->out[0]);
        buffer_free(&job->out[1]);
        buffer_free(&job->body.raw);
        free(job->body.own);
        free(job);
    }
}

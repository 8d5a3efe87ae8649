/* jobs.c — the loop's free list of jobs. A job is taken when a head parses
 * and returned when its response is out, so the steady state allocates
 * nothing; the response buffers stay with the job for the next request. */
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include "../lib/aligned.h"
#include "loop.h"

_Static_assert(offsetof(struct job, file_fd) + sizeof(int) - offsetof(struct job, out) <= CACHE_LINE,
               "what the loop reads of a message (job.h: out[] to file_fd) fits one cache line");

#define OUT_KEEP (256 * 1024) /* a response buffer larger than this is freed after use */
#define OWN_KEEP (128 * 1024)

/* Every field of struct job is named here, in order, group by group: a
 * memset over a range of offsets would depend on the field order and would
 * write the _Atomic members with plain stores. tests/unit/jobs_clear.c fails
 * if a field is added to struct job and not reset here. */
static void job_clear(struct job *job)
{
    /* loop side */
    job->conn = NULL;
    job->next_free = NULL;
    job->pipe_next = NULL;
    job->worker = 0;
    job->posted = false;

    /* the request: the parser fills the headers it reports (up to
     * num_headers), so the array is not wiped (it is most of the job) */
    job->req.method = NULL;
    job->req.method_len = 0;
    job->req.target = NULL;
    job->req.target_len = 0;
    job->req.minor_version = 0;
    job->req.num_headers = 0;
    job->framing = (struct http_framing){0};
    job->target = (struct http_target){0};
    job->remote_addr = NULL;
    job->remote_port = NULL;
    job->keep_alive = false;
    job->is_head = false;

    /* the body: all per request but the loop's refill storage */
    struct buffer raw = job->body.raw;
    char *own = job->body.own;
    size_t own_cap = job->body.own_cap;
    buffer_reset(&raw, OWN_KEEP);
    if (own_cap > OWN_KEEP) {
        free(own);
        own = NULL;
        own_cap = 0;
    }
    job->body = (struct body_pipe){.own = own, .own_cap = own_cap, .raw = raw};

    /* the response: the buffers stay (emptied, or freed if they grew large) */
    buffer_reset(&job->out[0], OUT_KEEP);
    buffer_reset(&job->out[1], OUT_KEEP);
    job->msg_buf = 0;
    job->msg = JOB_DONE;
    job->close_after = false;
    job->incomplete = false;
    job->file_fd = -1;
    job->file_off = 0;
    job->file_len = 0;
    job->status = 0;
    job->body_bytes = 0;

    /* loop -> pool: no other thread holds the job now, but these are the
     * words the two threads share, so they are written as atomics */
    atomic_store_explicit(&job->ack, 0, memory_order_relaxed);
    atomic_store_explicit(&job->conn_lost, false, memory_order_relaxed);

    /* pool side */
    job->fill_buf = 0;
    job->acks_seen = 0;
    job->awaiting_ack = false;
}

struct job *job_get(struct loop *l)
{
    struct job *job = l->free_jobs;
    if (job) {
        l->free_jobs = job->next_free;
    } else {
        job = aligned_zalloc(sizeof *job); /* job.h: the message's line is aligned */
        if (!job)
            return NULL;
        atomic_init(&job->ack, 0);
        atomic_init(&job->conn_lost, false);
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

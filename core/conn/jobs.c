/* jobs.c — the loop's free list of jobs. A job is taken when a head parses
 * and returned when its response is out, so the steady state allocates
 * nothing; the response buffers stay with the job for the next request.
 *
 * But only so much: a burst (many connections, deep pipelines, large
 * responses) would otherwise leave the list as long as the burst was wide
 * and every buffer as large as its largest response, for good. So the list
 * keeps at most FREE_KEEP_JOBS jobs and FREE_KEEP_BYTES of their buffers;
 * a job beyond that is freed, and its buffers beyond that are. */
#include <malloc.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include "../../lib/aligned.h"
#include "jobs.h"
#include "loop.h"

_Static_assert(offsetof(struct job, done_ns) + sizeof(uint64_t) - offsetof(struct job, out) <= CACHE_LINE,
               "what the loop reads of a message (job.h: out[] to done_ns) fits one cache line");

#define OUT_KEEP (256 * 1024) /* a response buffer larger than this is freed after use */
#define OWN_KEEP (128 * 1024)
#define SMALL_KEEP (16 * 1024)  /* what a job keeps once the list's byte budget is spent */
#define FREE_KEEP_JOBS 256
#define FREE_KEEP_BYTES (2 * 1024 * 1024)
#define RELEASE_AFTER_BYTES (1024 * 1024) /* freed since the last release: worth another */
#define RELEASE_EVERY_MS 1000

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
    job->thread = 0;
    job->posted = false;
    job->in_turn = false;
    job->submit_ns = 0;

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
    job->head_ns = 0;
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
    job->incomplete = JOB_WHOLE;
    job->file_fd = -1;
    job->done_ns = 0;
    job->file_off = 0;
    job->file_len = 0;
    job->status = 0;
    job->body_bytes = 0;

    /* loop -> pool: no other thread holds the job now, but these are the
     * words the two threads share, so they are written as atomics */
    atomic_store_explicit(&job->ack, 0, memory_order_relaxed);
    atomic_store_explicit(&job->conn_lost, false, memory_order_relaxed);
    atomic_store_explicit(&job->last_head, false, memory_order_relaxed);

    /* pool side */
    job->fill_buf = 0;
    job->acks_seen = 0;
    job->awaiting_ack = false;
}

static size_t kept_bytes(const struct job *job)
{
    return job->out[0].cap + job->out[1].cap + job->body.raw.cap + job->body.own_cap;
}

static void free_buffers(struct job *job)
{
    buffer_free(&job->out[0]);
    buffer_free(&job->out[1]);
    buffer_free(&job->body.raw);
    free(job->body.own);
    job->body.own = NULL;
    job->body.own_cap = 0;
}

struct job *job_get(struct loop *l)
{
    struct job *job = l->free_list.jobs;
    if (job) {
        l->free_list.jobs = job->next_free;
        l->free_list.count--;
        l->free_list.bytes -= kept_bytes(job);
    } else {
        job = aligned_zalloc(sizeof *job); /* job.h: the message's line is aligned */
        if (!job)
            return NULL;
        atomic_init(&job->ack, 0);
        atomic_init(&job->conn_lost, false);
        atomic_init(&job->last_head, false);
    }
    job_clear(job);
    return job;
}

void job_put(struct loop *l, struct job *job)
{
    if (job->file_fd >= 0)
        close(job->file_fd);
    job->file_fd = -1;
    size_t bytes = kept_bytes(job);
    if (l->free_list.count >= FREE_KEEP_JOBS) {
        free_buffers(job);
        free(job);
        l->free_list.freed_bytes += bytes + sizeof *job;
        return;
    }
    if (l->free_list.bytes + bytes > FREE_KEEP_BYTES) {
        /* The budget is spent: keep only small buffers (the request's
         * views are dead, the job is being recycled). */
        buffer_reset(&job->out[0], SMALL_KEEP);
        buffer_reset(&job->out[1], SMALL_KEEP);
        buffer_reset(&job->body.raw, SMALL_KEEP);
        if (job->body.own_cap > SMALL_KEEP) {
            free(job->body.own);
            job->body.own = NULL;
            job->body.own_cap = 0;
        }
        size_t now = kept_bytes(job);
        l->free_list.freed_bytes += bytes - now;
        bytes = now;
    }
    job->next_free = l->free_list.jobs;
    l->free_list.jobs = job;
    l->free_list.count++;
    l->free_list.bytes += bytes;
}

void jobs_free_all(struct loop *l)
{
    while (l->free_list.jobs) {
        struct job *job = l->free_list.jobs;
        l->free_list.jobs = job->next_free;
        free_buffers(job);
        free(job);
    }
    l->free_list.count = 0;
    l->free_list.bytes = 0;
}

/* jemalloc's, when it is the allocator (weak: NULL with the C library's). */
extern int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
    __attribute__((weak));

/* Freed memory is not given back to the system at once: jemalloc returns
 * it with its decay (seconds), glibc keeps what is not at the top of a
 * heap. After a burst that is what the server's size stays at, so once the
 * free list has let go of a good amount, the allocator is told to return
 * its free pages now. A system call or a few per second at most. */
void jobs_release_memory(struct loop *l)
{
    if (l->free_list.freed_bytes < RELEASE_AFTER_BYTES || l->now_ms - l->free_list.released_ms < RELEASE_EVERY_MS)
        return;
    l->free_list.freed_bytes = 0;
    l->free_list.released_ms = l->now_ms;
    if (mallctl)
        mallctl("arena.4096.purge", NULL, NULL, NULL, 0); /* 4096: MALLCTL_ARENAS_ALL */
    else
        malloc_trim(0);
}

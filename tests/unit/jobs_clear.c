/* jobs_clear.c — a job taken from the free list carries nothing of the last
 * request (core/conn/jobs.c's job_clear).
 *
 * Two checks:
 *  1. Values: a job filled with a byte pattern, put on the free list and
 *     taken again, has every field at its fresh-request value (zero, NULL,
 *     false, file_fd -1); the kept storage (out[], body.raw/own) is emptied
 *     but not lost. Three patterns, so a field left alone cannot pass because
 *     the pattern happened to be its reset value.
 *  2. Completeness: the members checked here tile struct job and struct
 *     http_request exactly — in offset order, each starts where the previous one ends, rounded
 *     up to its own alignment, and the last ends at sizeof. A member added to
 *     either struct makes this fail until it is added here, and so to
 *     job_clear, which resets the same members in the same order. A new
 *     member small enough to sit in a hole of existing padding moves no
 *     offset and is not caught; on x86-64 today the holes are after
 *     `in_turn` (2 bytes), `is_head` (6), `body` (40: `out` starts a cache
 *     line, job.h), `incomplete` (2), `status` (4), `last_head` (2),
 *     `awaiting_ack` (7) and `req` (24: the struct is a whole number of
 *     lines). A field added to struct job goes in its group and into this
 *     list: the two large holes are no place for one. */
#include <stdlib.h>
#include <string.h>

#include "../../core/conn/jobs.h"
#include "../../core/conn/loop.h"
#include "../../lib/aligned.h"
#include "check.h"

struct member {
    const char *name;
    size_t off, size, align;
};

#define M(type, m) {#m, offsetof(type, m), sizeof(((type *)0)->m), __alignof__(((type *)0)->m)}

static const struct member job_members[] = {
    M(struct job, conn), M(struct job, next_free), M(struct job, pipe_next), M(struct job, thread),
    M(struct job, posted), M(struct job, in_turn), M(struct job, submit_ns), M(struct job, req),
    M(struct job, framing), M(struct job, target), M(struct job, remote_addr),
    M(struct job, remote_port), M(struct job, head_ns), M(struct job, keep_alive), M(struct job, is_head),
    M(struct job, body), M(struct job, out), M(struct job, msg_buf), M(struct job, msg),
    M(struct job, close_after), M(struct job, incomplete), M(struct job, file_fd), M(struct job, done_ns),
    M(struct job, file_off), M(struct job, file_len), M(struct job, status),
    M(struct job, body_bytes), M(struct job, ack), M(struct job, conn_lost),
    M(struct job, last_head),
    M(struct job, fill_buf), M(struct job, acks_seen), M(struct job, awaiting_ack),
};

/* job_clear resets req member by member (the headers array is kept). */
static const struct member req_members[] = {
    M(struct http_request, method), M(struct http_request, method_len),
    M(struct http_request, target), M(struct http_request, target_len),
    M(struct http_request, minor_version), M(struct http_request, num_headers),
    M(struct http_request, headers),
};

static int by_offset(const void *a, const void *b)
{
    size_t x = ((const struct member *)a)->off, y = ((const struct member *)b)->off;
    return x < y ? -1 : x > y;
}

/* In offset order, so that reordering a struct's members is not a failure. */
static void tiles(const char *what, const struct member *list, size_t n, size_t size, size_t align)
{
    struct member m[64];
    if (n > 64) {
        CHECK(0, "too many members");
        return;
    }
    memcpy(m, list, n * sizeof *m);
    qsort(m, n, sizeof *m, by_offset);
    size_t end = 0;
    for (size_t i = 0; i < n; i++) {
        size_t want = (end + m[i].align - 1) / m[i].align * m[i].align;
        CHECK(m[i].off == want, "%s.%s at offset %zu, expected %zu: a member before it is not listed",
              what, m[i].name, m[i].off, want);
        end = m[i].off + m[i].size;
    }
    size_t want = (end + align - 1) / align * align;
    CHECK(size == want, "%s is %zu bytes, the listed members %zu: a member after %s is not listed",
          what, size, want, m[n - 1].name);
}

static void poison(struct job *job, unsigned char pattern)
{
    memset(job, pattern, sizeof *job);
    /* Storage job_clear keeps and may free: real (small) allocations. */
    job->out[0] = job->out[1] = (struct buffer){0};
    job->body.raw = (struct buffer){0};
    buffer_append(&job->out[0], "response", 8);
    buffer_append(&job->body.raw, "chunked", 7);
    job->body.own = malloc(64);
    job->body.own_cap = 64;
    job->file_fd = -1; /* job_put closes a file it finds open */
}

#define ZERO(expr) CHECK((expr) == 0, "pattern 0x%02x: %s not reset", pattern, #expr)

static void recycle_with(unsigned char pattern)
{
    struct loop *l = calloc(1, sizeof *l);
    struct job *job = aligned_zalloc(sizeof *job); /* over-aligned, as jobs.c allocates it */
    if (!l || !job) {
        CHECK(0, "out of memory");
        return;
    }
    poison(job, pattern);
    char *out0 = job->out[0].data, *own = job->body.own;
    job_put(l, job);
    CHECK(job_get(l) == job, "the free list gave back another job");

    ZERO(job->conn);
    ZERO(job->next_free);
    ZERO(job->pipe_next);
    ZERO(job->thread);
    ZERO(job->posted);
    ZERO(job->in_turn);
    ZERO(job->submit_ns);
    ZERO(job->req.method);
    ZERO(job->req.method_len);
    ZERO(job->req.target);
    ZERO(job->req.target_len);
    ZERO(job->req.minor_version);
    ZERO(job->req.num_headers);
    ZERO(job->framing.body);
    ZERO(job->framing.content_length);
    ZERO(job->framing.keep_alive);
    ZERO(job->framing.expect_continue);
    ZERO(job->framing.host);
    ZERO(job->framing.host_len);
    ZERO(job->target.path);
    ZERO(job->target.path_len);
    ZERO(job->target.query);
    ZERO(job->target.query_len);
    ZERO(job->target.has_query);
    ZERO(job->remote_addr);
    ZERO(job->remote_port);
    ZERO(job->head_ns);
    ZERO(job->keep_alive);
    ZERO(job->is_head);
    ZERO(job->body.data);
    ZERO(job->body.len);
    ZERO(job->body.pos);
    ZERO(job->body.eof);
    ZERO(job->body.error);
    ZERO(job->body.remaining);
    ZERO(job->body.received);
    ZERO(job->body.chunked.state);
    ZERO(job->body.chunked.remaining);
    ZERO(job->body.chunked.line_bytes);
    ZERO(job->body.chunked.trailer_bytes);
    ZERO(job->body.raw.len);
    ZERO(job->body.chunked_body);
    ZERO(job->body.expect_continue);
    ZERO(job->body.continue_sent);
    ZERO(job->out[0].len);
    ZERO(job->out[1].len);
    ZERO(job->msg_buf);
    ZERO(job->msg);
    ZERO(job->close_after);
    ZERO(job->incomplete);
    CHECK(job->file_fd == -1, "pattern 0x%02x: file_fd is %d, not -1", pattern, job->file_fd);
    ZERO(job->done_ns);
    ZERO(job->file_off);
    ZERO(job->file_len);
    ZERO(job->status);
    ZERO(job->body_bytes);
    ZERO(atomic_load(&job->ack));
    ZERO(atomic_load(&job->conn_lost));
    ZERO(atomic_load(&job->last_head));
    ZERO(job->fill_buf);
    ZERO(job->acks_seen);
    ZERO(job->awaiting_ack);
    /* Small storage is kept for the next request (the point of the free list). */
    CHECK(job->out[0].data == out0 && job->body.own == own && job->body.own_cap == 64,
          "pattern 0x%02x: kept storage lost", pattern);

    job_put(l, job);
    jobs_free_all(l); /* frees the kept storage too: ASan reports a leak otherwise */
    free(l);
}

int main(void)
{
    tiles("struct job", job_members, sizeof job_members / sizeof *job_members, sizeof(struct job),
          _Alignof(struct job));
    tiles("struct http_request", req_members, sizeof req_members / sizeof *req_members,
          sizeof(struct http_request), _Alignof(struct http_request));
    recycle_with(0xa5);
    recycle_with(0x5a);
    recycle_with(0xff);
    return check_summary();
}

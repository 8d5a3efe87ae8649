/* job.h — one request in flight between the loop thread and the app.
 *
 * Ownership alternates, and the handoff is the fence: the loop fills a job
 * and submits it; the pool thread owns it until it posts a message
 * (job_flush, job_need_body, job_done); the loop owns it again until it
 * acknowledges the message with job_ack (job->ack, a futex word: release by
 * the loop, acquire by the pool). The connection records which side holds
 * the job (struct conn's `holder`). Only
 * JOB_DONE ends the request; the loop then recycles the job. The request's
 * bytes stay in the connection's receive buffer (the views in req) until then.
 *
 * Messages (pool → loop):
 *   JOB_DONE       out[msg_buf] holds the rest of the response (and maybe a
 *                  file to sendfile after it); the job is the loop's again.
 *   JOB_FLUSH      out[msg_buf] must be written now; the pool keeps running
 *                  and fills the other buffer; the loop acks once it is sent.
 *   JOB_NEED_BODY  the body window is empty and not at EOF: the loop reads
 *                  more from the socket into it and acks.
 * At most one message per job is unacknowledged at a time (the pool waits for
 * the previous ack before posting again), so a job is in the handoff at most
 * once. */
#ifndef CSERVE_JOB_H
#define CSERVE_JOB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../lib/counter.h" /* CACHE_LINE */
#include "../http/buffer.h"
#include "../http/http_parser.h"
#include "../http/response_head.h"

enum job_msg { JOB_DONE, JOB_FLUSH, JOB_NEED_BODY };

/* What a JOB_DONE's response lacks (job.incomplete): nothing; its end (the
 * app failed after the head, or the head could not be made); or all of it,
 * the app never having been called for it (job_skip). */
enum job_cut { JOB_WHOLE, JOB_CUT, JOB_UNRUN };

/* The request body as the app sees it: a window of bytes the pool reads,
 * refilled by the loop on JOB_NEED_BODY. */
struct body_pipe {
    const char *data; /* window: data[pos..len) not yet read by the app */
    size_t len;
    size_t pos;
    bool eof;         /* no bytes will follow the window */
    int error;        /* 0; 413 over --max-body-size; 400 bad chunking; -1 client gone or stalled */
    /* loop side only */
    char *own;        /* the loop's buffer for refills, allocated on first need */
    size_t own_cap;
    uint64_t remaining;       /* Content-Length bytes not yet received */
    uint64_t received;        /* body bytes received so far (for the limit) */
    struct http_chunked chunked;
    struct buffer raw;        /* chunked: received bytes not yet decoded */
    bool chunked_body;
    bool expect_continue;
    bool continue_sent;
};

struct conn;

struct job {
    /* ---- loop side (never read by the pool) ---- */
    struct conn *conn;
    struct job *next_free;
    struct job *pipe_next;   /* the connection's next pipelined request in flight */
    unsigned thread;         /* the pool thread it was submitted to */
    bool posted;             /* a pipelined job's message waits for its turn */
    bool in_turn;            /* submitted in a connection's turn: its time is charged to the
                              * connection's credit (dispatch_charge) */
    uint64_t submit_ns;      /* when (the pass's clock): the earliest it could start, for the pace */

    /* ---- the request: set by the loop before submit, read-only after ---- */
    /* (req, which is mostly its array of header views, is the job's last
     * member: the fields both threads touch for every request sit together
     * in the first few lines, and only the headers a request has follow) */
    struct http_framing framing;
    struct http_target target;
    const char *remote_addr; /* NUL-terminated, owned by the connection */
    const char *remote_port;
    uint64_t head_ns;        /* --access-log: when the head was framed (clock_ns) */
    bool keep_alive;         /* the client allows another request after this one */
    bool is_head;

    struct body_pipe body;

    /* ---- the response: written by the pool, sent by the loop ---- */
    /* out[] to done_ns are what the loop reads of every message: one cache
     * line of their own (64 bytes on x86-64), so that a message costs the loop
     * one line transfer from the pool's core, not three lines shared with the
     * request's fields (jobs.c allocates jobs aligned). Hence the narrow
     * msg_buf and msg. */
    _Alignas(CACHE_LINE) struct buffer out[2];
    unsigned char msg_buf;   /* which out buffer the message carries (set before posting) */
    unsigned char msg;       /* an enum job_msg */
    bool close_after;        /* close the connection once the response is sent */
    unsigned char incomplete; /* an enum job_cut: not JOB_WHOLE closes the connection after it */
    int file_fd;             /* JOB_DONE: >= 0, send file_len bytes from file_off after out */
    uint64_t done_ns;        /* JOB_DONE from a pool thread: when it finished (clock_ns), the
                              * end of the request (and the earliest start of the next one on
                              * its thread), for the dispatcher's pace (dispatch.c) */
    off_t file_off;
    uint64_t file_len;
    int status;              /* for the access log */
    uint64_t body_bytes;     /* for the access log */

    /* ---- loop → pool during the request ---- */
    atomic_int ack;          /* futex word: bumped by the loop to answer a message */
    _Atomic bool conn_lost;  /* the client is gone: stop producing. Atomic because the
                              * loop may set it while the app runs (relaxed: nothing
                              * else is published with it; an ack orders it anyway) */
    _Atomic bool last_head;  /* the loop stops or refuses and this is the last request it
                              * answers on its connection: the head says close (job_head_end) */

    /* ---- pool side only ---- */
    int fill_buf;            /* the out buffer the pool is filling */
    int acks_seen;
    bool awaiting_ack;

    /* ---- the request line and header views (see "the request" above) ---- */
    struct http_request req;
};

/* ---- the protocol (job.c) ---- */
struct handoff;
struct pool_stats;

/* Loop side: answer the message the loop took (JOB_FLUSH written out, or the
 * body window refilled); the job is the app's again. */
void job_ack(struct job *job);

/* The app's side (GIL held). On a pool thread each posts through the handoff;
 * with --inline (no pool thread) they only record the message for the loop. */
/* Post job->out[fill_buf] for writing now and switch to the other buffer. */
void job_flush(struct job *job);
/* The body window is empty and not at EOF: ask the loop for more and wait. */
void job_need_body(struct job *job);
/* Post the final message. The job is the loop's after this. */
void job_done(struct job *job);
/* A pool thread took a job whose client had gone (job_lost) while it
 * waited in the thread's queue: post JOB_DONE without calling the app. */
void job_skip(struct job *job);
/* True if messages go to a loop on another thread (flushing is worth it). */
bool job_streams(void);

/* How a thread that runs apps waits for an acknowledgement (pool.c): drop
 * the GIL before the blocking wait (begin returns what end takes back).
 * Given rather than called by name, so that the protocol does not depend on
 * the pool that uses it. */
struct job_waiter {
    void *(*begin)(void);
    void (*end)(void *token);
};
/* Called once by each pool thread before it runs apps. */
void job_thread_init(struct handoff *h, unsigned index, struct pool_stats *stats,
                     const struct job_waiter *waiter);

/* --inline: run the WSGI app for job on the calling (loop) thread; the body
 * is complete. On return the job carries a JOB_DONE message (pool.c). */
void inline_run(struct job *job);

/* Loop side, before it handles a message the pool just posted: start
 * fetching the two lines it reads first, the job's loop-side fields (which
 * connection, which pool thread, `posted`) and the message (out[] to file_fd: one
 * line, written by the pool's core). Only a hint. */
static inline void job_prefetch_message(const struct job *job)
{
    __builtin_prefetch(job);
    __builtin_prefetch(job->out);
}

/* End a response head for job: the connection field and the empty line.
 * A body the app did not read to the end leaves bytes on the wire we cannot
 * frame the next request from: close rather than guess. The head says
 * "Connection: close" too when the loop stopped or refuses and this is the
 * last request it answers on its connection (job->last_head). Sets
 * job->close_after when the connection must close. The caller reserved
 * RESPONSE_HEAD_FIXED bytes.
 *
 * The mark is read relaxed, on whichever thread builds the head: it
 * publishes nothing else, and it only tells the client what the loop does
 * anyway; what the head said comes back to the loop in close_after, with
 * the message. The loop decides to close from its own state once the
 * response is written (conn_request.c's conn_finish), so a head built
 * before a store is visible says keep-alive and the connection still closes
 * after it (or, when the worker is retiring and does not refuse, is kept
 * and its next head says close): a keep-alive head, then the close of a
 * connection with nothing more in flight, loses nothing. A close head is
 * never followed by a response: the loop marks last_head only on the last
 * request its connection has with the app, and hands it none behind once
 * it stops or refuses (conn_stop, conn.c). */
static inline void job_head_end(struct buffer *out, struct job *job)
{
    job->close_after = job->close_after || !job->keep_alive || !job->body.eof || job->body.error ||
                       atomic_load_explicit(&job->last_head, memory_order_relaxed);
    response_head_end(out, job->close_after, job->req.minor_version);
}

static inline bool job_lost(struct job *job)
{
    return atomic_load_explicit(&job->conn_lost, memory_order_relaxed);
}

static inline void job_set_lost(struct job *job)
{
    atomic_store_explicit(&job->conn_lost, true, memory_order_relaxed);
}

#endif

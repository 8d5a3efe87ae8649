/* conn_request.c — a request's way through a connection: read its head,
 * frame it, hand it to the app, take the app's messages, and once the
 * response is out start on the next request (pipelined bytes may be here). */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/resource.h>

#include "../../handoffs/handoff.h"
#include "../../lib/clock.h"
#include "app.h"
#include "conn_body.h"
#include "conn_request.h"
#include "conn_state.h"
#include "dispatch.h"
#include "conn_write.h"
#include "jobs.h"
#include "loop.h"
#include "../base/log.h"
#include "../base/options.h"

#define RBUF_INITIAL 8192

/* True when the bytes from c->scanned on hold a line end: only then can the
 * head have completed (or a line have gone bad), so a client dribbling one
 * byte at a time costs one memchr per byte, not one parse. */
static bool new_line_end(struct conn *c)
{
    const char *from = c->rbuf.data + c->scanned;
    size_t n = c->rbuf.len - c->scanned;
    c->scanned = c->rbuf.len;
    return memchr(from, '\n', n) != NULL;
}

/* A framed request's job learns its connection, whether it may keep it
 * alive, and (for the response hooks: the access log, the metrics) when its
 * head was complete. */
static void job_bind(struct conn *c, struct job *job)
{
    struct loop *l = c->loop;
    job->conn = c;
    job->remote_addr = c->remote_addr;
    job->remote_port = c->remote_port;
    job->keep_alive = job->framing.keep_alive && !l->stopping;
    /* Methods are case-sensitive (RFC 9110 §9.1): "head" is not HEAD. */
    job->is_head = job->req.method_len == 4 && memcmp(job->req.method, "HEAD", 4) == 0;
    job->head_ns = l->nresponders ? clock_ns() : 0;
}

/* A head parsed into job: frame it and decide what comes next. */
static enum verdict frame(struct conn *c, struct job *job, size_t head_len)
{
    struct loop *l = c->loop;
    const struct options *opt = l->opt;
    int status = http_request_framing(&job->req, &job->framing);
    if (!status)
        status = http_split_target(job->req.method, job->req.method_len, job->req.target,
                                   job->req.target_len, &job->target);
    if (!status && job->framing.body == HTTP_BODY_LENGTH &&
        job->framing.content_length > opt->max_body_size)
        status = 413;
    c->job = job;
    c->holder = HOLDER_LOOP;
    c->part_sent = false;
    if (status) {
        job->head_ns = l->nresponders ? clock_ns() : 0; /* job_bind's, for the error's hooks */
        return conn_fail(c, status);
    }
    job_bind(c, job);
    timer_disarm(&c->timer);
    status = conn_body_start(c, head_len);
    if (status)
        return conn_fail(c, status);
    /* Where the body is framed before the app runs, for every mode. */
    const struct body_pipe *b = &job->body;
    if (b->eof || opt->native_hello) {
        /* native-hello reads no body: its response says Connection: close
         * when the body is not all here (job_head_end, job.h) */
        conn_set_state(c, CONN_READY);
    } else if (opt->inline_app) {
        /* The app runs on this thread and cannot wait for us: read all of
         * the body first, after "100 Continue" if the client waits for it. */
        if (b->expect_continue)
            conn_queue_continue(c);
        else
            conn_set_state(c, CONN_PREREAD);
    } else {
        /* A pool thread can ask for more; a client that waits for
         * "100 Continue" is not read ahead: the app decides. */
        conn_set_state(c, b->expect_continue ? CONN_READY : CONN_PREREAD);
    }
    return VERDICT_NEXT;
}

/* The peer sent its last byte. A head is parsed only when a line end
 * arrives, so bytes after the last one are judged now: a bad head gets its
 * error response however the stream was split. */
static enum verdict head_at_eof(struct conn *c)
{
    struct loop *l = c->loop;
    if (c->rbuf.len == 0 || c->scanned == 0)
        return VERDICT_CLOSE;
    struct job *job = job_get(l);
    if (!job)
        return VERDICT_CLOSE;
    int status = 0;
    int n = http_parse_request(c->rbuf.data, c->rbuf.len, l->opt->max_header_size, &job->req,
                               &status);
    job_put(l, job);
    return n == HTTP_ERROR ? conn_fail(c, status) : VERDICT_CLOSE;
}

enum verdict conn_read_head(struct conn *c)
{
    struct loop *l = c->loop;
    const struct options *opt = l->opt;
    bool try_parse = c->rbuf.len > 0 && (new_line_end(c) || c->rbuf.len >= opt->max_header_size);
    for (;;) {
        if (try_parse) {
            struct job *job = job_get(l);
            if (!job)
                return conn_fail(c, 503);
            int status = 0;
            int n = http_parse_request(c->rbuf.data, c->rbuf.len, opt->max_header_size,
                                       &job->req, &status);
            if (n > 0) {
                c->scanned = 0;
                return frame(c, job, (size_t)n);
            }
            job_put(l, job);
            if (n == HTTP_ERROR)
                return conn_fail(c, status);
        }
        if (!c->readable)
            return VERDICT_WAIT; /* the header or keep-alive timer is armed */
        if (c->rbuf.cap - c->rbuf.len < 1024) {
            size_t limit = opt->max_header_size + RBUF_INITIAL;
            size_t more = c->rbuf.cap ? c->rbuf.cap : RBUF_INITIAL;
            if (c->rbuf.len + more > limit)
                more = limit - c->rbuf.len;
            if (more == 0) /* full of a head the parser could not end */
                return conn_fail(c, 431);
            if (!buffer_reserve(&c->rbuf, more))
                return VERDICT_CLOSE;
        }
        ssize_t got = conn_recv(c, c->rbuf.data + c->rbuf.len, c->rbuf.cap - c->rbuf.len);
        if (got < 0)
            return head_at_eof(c);
        try_parse = false;
        if (got == 0)
            continue; /* drained: the readable check above parks us */
        if (c->timer.list != &l->t_header) /* the head's clock starts at its first byte */
            timer_arm(&l->t_header, &c->timer, l->now_ms);
        c->rbuf.len += (size_t)got;
        try_parse = new_line_end(c) || c->rbuf.len >= opt->max_header_size;
    }
}

static bool ends_batch(const struct job *j);
static void answer_pipelined(struct conn *c, uint64_t start_ns);

bool conn_stop_skips(const struct conn *c)
{
    return c->loop->stopping && !c->loop->refusing && c->pipelined;
}

/* CONN_READY: the body is as framed as it will be before the app runs. */
enum verdict conn_start_app(struct conn *c)
{
    struct loop *l = c->loop;
    struct job *job = c->job;
    /* The stop's sweep closes such a request at the end of the stop's
     * first pass; one that comes here earlier in that pass, a thread
     * having freed for it, is closed here. */
    if (conn_stop_skips(c)) {
        c->turn = false;
        return conn_shutdown(c);
    }
    if (l->opt->native_hello) {
        native_hello_respond(job);
        answer_pipelined(c, 0);
        return conn_take_message(c);
    }
    if (l->opt->inline_app) {
        uint64_t start_ns = clock_ns();
        inline_run(job); /* returns with the job's final message recorded */
        answer_pipelined(c, start_ns);
        return conn_take_message(c);
    }
    bool turn = c->turn;
    c->turn = false;
    if (l->refusing) /* the pool cannot be relied on (loop_refuse) */
        return conn_fail(c, 503);
    /* Requests wait for a thread in arrival order: behind the ones already
     * waiting, unless this is the first of them. */
    int r = !turn && dispatch_first_waiting(&l->disp) ? HANDOFF_FULL
                                                       : dispatch_submit(&l->disp, dispatch_pick(&l->disp), job);
    if (r == HANDOFF_OK) {
        c->holder = HOLDER_APP;
        conn_set_state(c, CONN_APP);
        timer_arm(&l->t_io, &c->timer, l->now_ms); /* the app's time is bounded too */
        conn_pipeline(c, true);
        return VERDICT_WAIT;
    }
    if (r == HANDOFF_ERROR) {
        log_error("handoff submit failed: %s", strerror(errno));
        return conn_fail(c, 503);
    }
    /* No thread may take it now (or the hand-off is full): park the
     * connection (one entry per connection at most, not a growing queue)
     * and stop reading it until a thread frees; the first keeps its place. */
    conn_set_state(c, CONN_QUEUED);
    dispatch_park(&l->disp, c, turn);
    return VERDICT_WAIT;
}

/* The app posted c->job->msg (the job is the loop's until it is acked). */
enum verdict conn_take_message(struct conn *c)
{
    struct job *job = c->job;
    struct buffer *out = &job->out[job->msg_buf];
    switch ((enum job_msg)job->msg) {
    case JOB_NEED_BODY:
        if (job->body.expect_continue && !job->body.continue_sent)
            conn_queue_continue(c);
        else
            conn_set_state(c, CONN_BODY);
        return VERDICT_NEXT;
    case JOB_FLUSH:
        c->part_sent = true;
        conn_queue(c, out->data, out->len);
        conn_set_state(c, CONN_SEND_PART);
        return VERDICT_NEXT;
    case JOB_DONE:
        conn_set_state(c, CONN_HOLD);
        return VERDICT_NEXT;
    }
    return VERDICT_CLOSE;
}

/* A finished response that ends the connection: nothing is answered behind it. */
static bool ends_conn(const struct job *j)
{
    return j->close_after || j->incomplete || !j->keep_alive;
}

/* A finished response that nothing may be written behind in the same
 * write (conn_queue_pipelined stops there). */
static bool ends_batch(const struct job *j)
{
    return ends_conn(j) || j->file_fd >= 0;
}

/* True while the next pipelined request that is not finished still runs and
 * its response could join this write: it is worth waiting for. One that
 * posted a flush may be waiting for us already, so then we write; one behind
 * a response that closes the connection will never be written.
 *
 * Called once per message of the pipeline, so it resumes after the jobs an
 * earlier call found finished (c->pipe_done; a finished job stays finished
 * until pipe_pop takes it, which resets the mark): each job is looked at
 * once, not once per message behind it. */
static bool pipeline_running(struct conn *c)
{
    if (ends_batch(c->job))
        return false;
    struct job *j = c->pipe_done ? c->pipe_done->pipe_next : c->pipe_head;
    while (j && j->posted && j->msg == JOB_DONE) {
        if (ends_batch(j))
            return false;
        c->pipe_done = j;
        j = j->pipe_next;
    }
    return j && !j->posted;
}

/* CONN_HOLD: c->job's response is complete. While pipelined requests behind
 * it still run (on the same pool thread, one after another) it waits for
 * them, so their responses leave in one write instead of one each; but for
 * CONN_HOLD_MS at most, so that a response is never held behind a slow
 * request: a fast pipeline's responses come within that, and a slow one's
 * would come seconds later. */
enum verdict conn_hold(struct conn *c)
{
    struct loop *l = c->loop;
    if (l->handoff)
        conn_pipeline(c, false); /* this response's size is known now */
    if (!c->hold_over && pipeline_running(c)) {
        if (c->timer.list != &l->t_hold) /* from the response's end, not re-armed */
            timer_arm(&l->t_hold, &c->timer, l->now_ms);
        return VERDICT_WAIT;
    }
    c->hold_over = false;
    timer_disarm(&c->timer);
    struct job *job = c->job;
    const struct buffer *out = &job->out[job->msg_buf];
    conn_queue(c, out->data, out->len);
    if (job->file_fd >= 0) {
        c->wfile_fd = job->file_fd;
        c->wfile_off = job->file_off;
        c->wfile_left = job->file_len;
        job->file_fd = -1;
    } else if (!job->close_after && !job->incomplete) {
        conn_queue_pipelined(c);
    }
    conn_set_state(c, CONN_SEND_LAST);
    return VERDICT_NEXT;
}

/* The next request pipelined in rbuf at c->consumed, if it is whole there
 * (head and body) and can run as it is: a job ready for the app, its length
 * in *len (c->consumed is not moved). NULL for anything else (a partial or
 * bad head, a chunked body, a body still to read, no job): that request
 * waits for its turn on the ordinary path, which reads, frames and answers
 * it (errors included) as if it had come alone. */
static struct job *next_whole(struct conn *c, size_t *len)
{
    struct loop *l = c->loop;
    const struct options *opt = l->opt;
    if (c->consumed >= c->rbuf.len)
        return NULL;
    /* The loop reads nothing while it pipelines, and this is called after
     * every message and write: a request behind the whole ones that cannot
     * run as it is (a partial head, a body still to come, one the ordinary
     * path must answer) would be parsed again each time, for as many bytes
     * as its head has. The verdict is the same until those bytes change. */
    if (c->tail_len == c->rbuf.len && c->tail_from == c->consumed)
        return NULL;
    const char *p = c->rbuf.data + c->consumed;
    size_t avail = c->rbuf.len - c->consumed;
    struct job *job = job_get(l);
    if (!job)
        return NULL;
    int status = 0;
    int n = http_parse_request(p, avail, opt->max_header_size, &job->req, &status);
    uint64_t body = 0;
    bool ok = n > 0 && http_request_framing(&job->req, &job->framing) == 0 &&
              http_split_target(job->req.method, job->req.method_len, job->req.target,
                                job->req.target_len, &job->target) == 0;
    if (ok && job->framing.body == HTTP_BODY_LENGTH)
        body = job->framing.content_length;
    ok = ok && job->framing.body != HTTP_BODY_CHUNKED && body <= avail - (size_t)n &&
         body <= opt->max_body_size;
    if (!ok) {
        c->tail_from = c->consumed;
        c->tail_len = c->rbuf.len;
        job_put(l, job);
        return NULL;
    }
    job_bind(c, job);
    job->body.data = p + n;
    job->body.len = (size_t)body;
    job->body.received = body;
    job->body.eof = true;
    *len = (size_t)n + (size_t)body;
    return job;
}

unsigned conn_pipe_most(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur / 2 >= UINT_MAX)
        return UINT_MAX;
    return (unsigned)(rl.rlim_cur / 2);
}

/* Whether one more job may go behind its connection's first. A file
 * response (wsgi.file_wrapper) keeps its descriptor until it is written,
 * and a pipelined one waits for those before it, which a client that
 * does not read never lets go: counted per connection, a few hundred
 * such clients would take every descriptor the worker has. */
static bool pipe_room(const struct loop *l) { return l->piped.jobs < l->piped.most; }

/* job goes behind c->job, in order; its bytes are taken from rbuf. */
static void pipe_push(struct conn *c, struct job *job, size_t len)
{
    c->loop->piped.jobs++;
    if (c->pipe_tail)
        c->pipe_tail->pipe_next = job;
    else
        c->pipe_head = job;
    c->pipe_tail = job;
    c->consumed += len;
}

/* What one connection may have with the app or unsent beyond the request
 * on stage: pipelined jobs, and response bytes (those made and not yet
 * written, plus those the jobs still running are expected to make). A
 * client that pipelines without reading gets no more than this of the
 * server's memory and of its pool thread's time until it reads. */
#define PIPE_MAX_JOBS 32
#define PIPE_MAX_BYTES (256 * 1024)

/* Requests pipelined behind c->job, already whole in rbuf, go to the app
 * now, to the same pool thread: it runs them back to back, so a deep
 * pipeline costs no hand-off wake per request, and their responses come
 * back in order. Only within that thread's depth (dispatch_room; as deep
 * as a turn's while a turn's worth fits, dispatch_turn_fits), only a
 * turn's worth while other connections wait for a thread (turn: c->job
 * has just been submitted), only while the worker's pipelined jobs are
 * under their cap (pipe_room), and only as many as the budget above allows:
 * a job running is counted at the largest response part this connection
 * has had (half the budget before the first: so one request goes behind
 * the first at once), the finished ones at what they made. The rest stay
 * in rbuf; the loop reads no more from this socket meanwhile (it reads
 * heads only in CONN_HEAD), and they are submitted as responses are made
 * and written (conn_hold, conn_finish, conn_on_message), or read as usual
 * once the pipeline is empty. */
void conn_pipeline(struct conn *c, bool turn)
{
    struct loop *l = c->loop;
    struct job *cur = c->job;
    if (!l->handoff || !cur || !cur->keep_alive || cur->body.raw.len || c->peer_gone)
        return;
    if (l->stopping || l->refusing) /* what the app has is all that is answered (conn_stop) */
        return;
    if (c->state == CONN_LINGER || c->state == CONN_ORPHAN || c->state == CONN_SEND_ERROR ||
        c->state == CONN_CLOSED || c->state == CONN_QUEUED)
        return;
    /* The next ones go to the thread that runs this connection's requests
     * still with the app, if any: one thread runs a pipeline, so its
     * requests never run at once or out of order, whatever loop_set_active
     * retired and started again since. With none running, to cur's thread
     * if it is still in use, else to any. */
    const struct job *runs = NULL;
    uint64_t unsent = 0;
    unsigned running = 0, piped = 0;
    if (c->holder == HOLDER_LOOP) {
        if (ends_conn(cur))
            return; /* nothing is answered behind it */
        unsent += cur->out[cur->msg_buf].len;
    } else {
        running++;
        runs = cur;
    }
    for (const struct job *j = c->pipe_head; j; j = j->pipe_next) {
        piped++;
        if (j->posted && j->msg == JOB_DONE) {
            if (ends_conn(j))
                return;
            unsent += j->out[j->msg_buf].len;
        } else {
            running++;
            if (!runs)
                runs = j;
        }
    }
    const struct dispatch *d = &l->disp;
    unsigned w = runs ? runs->thread : cur->thread < dispatch_active(d) ? cur->thread : dispatch_pick(d);
    if (w == DISPATCH_NONE) /* every thread at its depth: the next request takes the ordinary path */
        return;
    /* Topped up in batches, once a quarter of the jobs are done, while
     * the pool thread still has the rest to run: it is neither woken for
     * each request nor left to run dry and park between batches. */
    if (running > PIPE_MAX_JOBS * 3 / 4 || (c->pipe_tail && !c->pipe_tail->keep_alive))
        return;
    /* Connections take turns: while another waits for a thread, this one
     * queues no more ahead of it than its turn, the request just submitted
     * and those behind it, as many in all as its credit covers
     * (dispatch_turn: one, for requests that take more than half a turn's
     * worth), each charged what it took when it finishes; and nothing
     * between turns. Its next request takes the ordinary path once its
     * pipeline is done (read, framed, then behind the waiting ones), or
     * goes ahead here at a later call, when none waits. */
    unsigned most = UINT_MAX;
    bool in_turn = dispatch_first_waiting(d) != NULL;
    if (in_turn) {
        if (!turn)
            return;
        most = dispatch_turn(d, w, &c->turn_credit_ns);
        cur->in_turn = true;
    }
    /* Out of a turn, as deep as a turn while a turn's worth of them fits
     * (dispatch_turn_fits): on a pool of one thread, a queue that new
     * requests filled past the budget's depth would otherwise stop a
     * pipeline there, and its batch's responses go out in several writes. */
    uint64_t each = c->resp_max ? c->resp_max : PIPE_MAX_BYTES / 2;
    while (piped < PIPE_MAX_JOBS && running < most && pipe_room(l) &&
           dispatch_room(d, w, in_turn || dispatch_turn_fits(d, w, running + 1)) &&
           unsent + (uint64_t)(running + 1) * each <= PIPE_MAX_BYTES) {
        size_t len;
        struct job *job = next_whole(c, &len); /* all of it before submit: it may run at once */
        if (!job)
            return;
        if (dispatch_submit(&l->disp, w, job) != HANDOFF_OK) {
            job_put(l, job);
            return;
        }
        job->in_turn = in_turn;
        pipe_push(c, job, len);
        piped++;
        running++;
        if (!job->keep_alive)
            return;
    }
}

/* Where the loop answers requests itself (native-hello, --inline), it answers
 * the ones already whole in rbuf behind c->job too, before writing, so that
 * their responses leave in one write (conn_hold, conn_queue_pipelined) rather
 * than one send() each. The batch ends where a write would come anyway: no
 * further whole request, a response that ends it (ends_batch), the iovec
 * array full, the worker's pipelined jobs at their cap (pipe_room), or
 * CONN_BATCH_BYTES of output queued (the first response's
 * latency stays bounded, and so does the memory pinned in jobs). */
#define CONN_BATCH_BYTES (64 * 1024)

static void answer_pipelined(struct conn *c, uint64_t start_ns)
{
    const struct job *first = c->job;
    if (ends_batch(first) || first->body.raw.len)
        return;
    size_t queued = first->out[first->msg_buf].len;
    for (int n = 1; n < CONN_IOV && queued < CONN_BATCH_BYTES && pipe_room(c->loop); n++) {
        /* With --inline, an app that took its time ends the batch: the
         * responses made are not held back behind slow ones (conn_hold
         * bounds the pool's pipelines the same way). */
        if (start_ns && clock_ns() - start_ns > CONN_HOLD_MS * UINT64_C(1000000))
            return;
        size_t len;
        struct job *job = next_whole(c, &len);
        if (!job)
            return;
        if (c->loop->opt->native_hello)
            native_hello_respond(job);
        else
            inline_run(job);
        job->posted = true; /* its JOB_DONE, as a pool thread's would be */
        pipe_push(c, job, len);
        queued += job->out[job->msg_buf].len;
        if (ends_batch(job))
            return;
    }
}

/* One request's end: count it, tell the response hooks. Returns true when
 * the connection must close. */
static bool finish_one(struct conn *c, struct job *job)
{
    struct loop *l = c->loop;
    counter_inc(&l->lstats.requests);
    if (l->nresponders) {
        const struct loop_response r = {.req = &job->req, .peer = c->remote_addr, .status = job->status,
                                        .body_bytes = job->body_bytes, .head_ns = job->head_ns,
                                        .end_ns = clock_ns()};
        loop_responded(l, &r);
    }
    /* A stopping or refusing loop closes once nothing is left with the app
     * (conn_finish). */
    return job->close_after || job->incomplete || !job->keep_alive;
}

static struct job *pipe_pop(struct conn *c)
{
    struct job *job = c->pipe_head;
    c->loop->piped.jobs--;
    c->pipe_head = job->pipe_next;
    if (!c->pipe_head)
        c->pipe_tail = NULL;
    job->pipe_next = NULL;
    c->pipe_done = NULL; /* pipeline_running looks again from the new head */
    return job;
}

void conn_pipe_put_all(struct conn *c)
{
    while (c->pipe_head)
        job_put(c->loop, pipe_pop(c));
}

/* Whether n bytes left after a request hold a start of another: empty
 * lines before a request line are ignored (RFC 9112 §2.2), so a stray CRLF
 * after a body, as old clients send, is none. */
static bool request_bytes(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != '\r' && p[i] != '\n')
            return true;
    return false;
}

/* The response (and the pipelined ones written with it) is out: drop the
 * requests, then go on with the next one in flight, the next in rbuf, or
 * close. */
enum verdict conn_finish(struct conn *c)
{
    struct loop *l = c->loop;
    struct job *job = c->job;
    bool close_after = finish_one(c, job);
    for (unsigned i = 0; i < c->wjobs; i++) {
        struct job *j = pipe_pop(c);
        close_after |= finish_one(c, j);
        job_put(l, j);
    }
    c->wjobs = 0;
    c->job = NULL;
    c->part_sent = false;
    /* A stopping or refusing loop closes after the last response it owes:
     * the requests still with the app are answered first (their heads say
     * keep-alive, but the last one's: conn_stop). A retiring worker keeps a
     * connection whose last response promised keep-alive (its head was made
     * before the stop): the client may send on it at once, and its next
     * response says "Connection: close". Not when the next request is in
     * rbuf already: the client pipelined it, so it is ready to send it
     * again on a new connection (RFC 9112 §9.3.2), and it is not run. Not a
     * refusing one: that next request would only get a 503, where a closed
     * connection has a proxy retry it elsewhere. */
    bool behind = !c->pipe_head && (request_bytes(c->rbuf.data + c->consumed, c->rbuf.len - c->consumed) ||
                                    request_bytes(job->body.raw.data, job->body.raw.len));
    if (!c->pipe_head && (l->refusing || (l->stopping && (!l->retiring || behind))))
        close_after = true;
    if (c->pipe_head && close_after) {
        /* Requests behind a closing response are not answered; those still
         * with the app read their bytes in rbuf, so it stays as it is. One
         * that posted a message is answered now: lingering may take seconds,
         * and its pool thread would wait for us all that time. */
        job_put(l, job);
        for (struct job *j = c->pipe_head; j; j = j->pipe_next) {
            bool waits = j->posted && j->msg != JOB_DONE;
            conn_release(j, waits);
            if (waits)
                j->posted = false;
        }
        return conn_shutdown(c);
    }
    if (c->pipe_head) {
        /* The next pipelined request takes the stage (its bytes stay in
         * rbuf until the last one is done). */
        job_put(l, job);
        struct job *next = pipe_pop(c);
        c->job = next;
        if (next->posted) {
            next->posted = false;
            c->holder = next->msg == JOB_DONE ? HOLDER_LOOP : HOLDER_APP_WAITS;
            return conn_take_message(c);
        }
        c->holder = HOLDER_APP;
        conn_set_state(c, CONN_APP);
        timer_arm(&l->t_io, &c->timer, l->now_ms);
        conn_pipeline(c, false); /* what was written made room */
        return VERDICT_WAIT;
    }
    /* A chunked body read past its end leaves the next request's first bytes
     * in the decoder's buffer. */
    struct buffer *raw = &job->body.raw;
    size_t rest = c->rbuf.len - c->consumed;
    if (rest)
        memmove(c->rbuf.data, c->rbuf.data + c->consumed, rest);
    c->rbuf.len = rest;
    if (raw->len && !close_after && !buffer_append(&c->rbuf, raw->data, raw->len))
        close_after = true;
    c->consumed = 0;
    c->scanned = 0;
    c->tail_len = 0;
    c->pipelined = behind;
    conn_window_return(c, job);
    job_put(l, job);
    if (c->rbuf.len == 0) {
        /* Idle until the client speaks again: pin no more memory than a
         * small head needs. */
        if (c->rbuf.cap > 4 * RBUF_INITIAL)
            buffer_free(&c->rbuf);
        conn_window_free(c);
    }
    if (close_after)
        return conn_shutdown(c); /* pipelined jobs still out come back to conn_abort */
    conn_set_state(c, CONN_HEAD);
    timer_arm(c->rbuf.len > 0 ? &l->t_header : &l->t_keepalive, &c->timer, l->now_ms);
    return VERDICT_NEXT;
}

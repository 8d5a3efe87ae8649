/* job.c — the job protocol: how the thread running the app and the loop
 * thread pass one request's job back and forth (job.h says who owns what).
 *
 * Pool side: post a message (flush, need-body, done) through the handoff and
 * wait for the loop's acknowledgement on the job's futex word. Loop side:
 * acknowledge. With --inline or native-hello there is no pool thread: the
 * loop calls the app itself, messages are only recorded in the job, and the
 * loop reads them when the app returns — the same states, without the wait.
 *
 * The ordering is one release/acquire pair per acknowledgement: A1 (job_ack,
 * the loop) publishes what the loop wrote into the job before it (a refilled
 * body window, EOF, an error, conn_lost) to A2 (await_ack, the pool). The
 * other direction is published by the handoff itself (handoffs/README.md). */
#include <errno.h>
#include <string.h>

#include "../../handoffs/handoff.h"
#include "../../lib/clock.h"
#include "../../lib/futex.h"
#include "job.h"
#include "../base/log.h"
#include "../base/stats.h"

/* The pool thread this OS thread is, if any: set once by job_thread_init. */
static _Thread_local struct {
    struct handoff *handoff;
    unsigned index;
    struct pool_stats *stats;
    const struct job_waiter *waiter;
} self;

void job_thread_init(struct handoff *h, unsigned index, struct pool_stats *stats,
                     const struct job_waiter *waiter)
{
    self.handoff = h;
    self.index = index;
    self.stats = stats;
    self.waiter = waiter;
}

bool job_streams(void) { return self.handoff != NULL; }

/* ---- loop side ---- */

void job_ack(struct job *job)
{
    /* A1: release, paired with A2 in await_ack. */
    atomic_fetch_add_explicit(&job->ack, 1, memory_order_release);
    futex_wake(&job->ack, 1);
}

/* ---- the app's side ---- */

static void post(struct job *job, enum job_msg msg)
{
    job->msg = msg;
    job->msg_buf = job->fill_buf;
    if (!self.handoff)
        return; /* inline: the loop reads the message when the app returns */
    struct handoff *h = self.handoff;
    if (msg != JOB_DONE)
        STAT(counter_inc(&self.stats->messages));
    else
        job->done_ns = clock_ns(); /* published with the completion, as out[] is */
    /* Not retried: -1 means the job was not queued (handoff.h), but what
     * failed (a send, a wake-up write) would most likely fail again. The
     * loop does not wait forever: a connection whose app is silent for the
     * I/O timeout is closed (conn.c). */
    if (h->ops->complete(h, self.index, job) != 0)
        log_error("handoff complete failed: %s; the client is cut off at its I/O timeout",
                  strerror(errno));
}

/* Wait for the loop's answer to the message in flight, without the GIL. */
static void await_ack(struct job *job)
{
    if (!job->awaiting_ack)
        return;
    int want = job->acks_seen + 1;
    /* A2: acquire, paired with A1 in job_ack. */
    if (atomic_load_explicit(&job->ack, memory_order_acquire) != want) {
        void *token = self.waiter->begin();
        STAT(counter_inc(&self.stats->gil_releases));
        while (atomic_load_explicit(&job->ack, memory_order_acquire) != want)
            futex_wait(&job->ack, want - 1);
        self.waiter->end(token);
    }
    job->acks_seen = want;
    job->awaiting_ack = false;
}

void job_flush(struct job *job)
{
    if (!self.handoff)
        return; /* inline: everything leaves with the final message */
    await_ack(job); /* the other buffer is written out and free again */
    post(job, JOB_FLUSH);
    job->awaiting_ack = true;
    job->fill_buf ^= 1;
    job->out[job->fill_buf].len = 0;
}

void job_need_body(struct job *job)
{
    if (!self.handoff) {
        /* inline: the loop read the whole body before it called the app
         * (conn_body.c), so an empty window is the end. */
        job->body.eof = true;
        return;
    }
    await_ack(job);
    post(job, JOB_NEED_BODY);
    job->awaiting_ack = true;
    await_ack(job);
}

/* Nothing to write and nobody to read it: the loop drops the connection's
 * jobs as they come back (conn_release's callers), so the message only
 * hands the job back. Not a sample of the thread's pace: neither the
 * dispatcher's (dispatch_done) nor the handoff's (unrun). */
void job_skip(struct job *job)
{
    job->incomplete = JOB_UNRUN;
    job->close_after = true;
    job->fill_buf = 0;
    job->out[0].len = 0;
    counter_inc(&self.stats->skipped); /* rare: counted in every build, as requests are */
    if (self.handoff && self.handoff->ops->unrun)
        self.handoff->ops->unrun(self.handoff, self.index);
    post(job, JOB_DONE);
}

void job_done(struct job *job)
{
    await_ack(job);
    post(job, JOB_DONE);
}

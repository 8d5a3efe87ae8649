/* conn_state.c — what every stage of a connection shares: the state change
 * (which takes a parked connection off the loop's pending list), reading the
 * socket, and answering the app's messages. The stages (conn_request.c,
 * conn_body.c, conn_write.c) and the driver (conn.c) stand on this file, so
 * none of them depends on another that depends on it. */
#include <errno.h>

#include "conn_io.h"
#include "conn_state.h"
#include "dispatch.h"
#include "loop.h"

void conn_set_state(struct conn *c, enum conn_state s)
{
    if (c->state == CONN_QUEUED && s != CONN_QUEUED)
        dispatch_unpark(&c->loop->disp, c);
    c->state = s;
}

/* Every answer to a pool thread's message goes through here: the thread is
 * running again from now on (see conn_on_timeout). */
static void answer(struct loop *l, struct job *job)
{
    if (l->handoff)
        dispatch_answered(&l->disp, job, l->now_ms);
    job_ack(job);
}

/* Tell the app a job's client is gone, and answer the message it waits
 * for (if any), so it ends soon. */
void conn_release(struct job *job, bool waits)
{
    job_set_lost(job);
    if (waits) {
        if (job->msg == JOB_NEED_BODY)
            job->body.error = -1;
        answer(job->conn->loop, job); /* publishes conn_lost and the error too */
    }
}

void conn_ack(struct conn *c)
{
    struct loop *l = c->loop;
    c->holder = HOLDER_APP;
    conn_set_state(c, CONN_APP);
    timer_arm(&l->t_io, &c->timer, l->now_ms); /* the app's own time is bounded too */
    answer(l, c->job);
}

ssize_t conn_recv(struct conn *c, char *dst, size_t room)
{
    struct loop *l = c->loop;
    ssize_t n = conn_io_recv(c->fd, dst, room);
    STAT(counter_inc(&l->lstats.reads));
    if (n > 0) {
        /* A short read drained the socket, and new data brings a new edge,
         * so the EAGAIN read can be skipped. Not once the peer has shut:
         * that edge was the last one, and the EOF or error still waiting
         * behind the data must be read, or the connection would wait for
         * an edge that never comes. */
        if ((size_t)n < room && !c->peer_shut)
            c->readable = false;
        return n;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        STAT(counter_inc(&l->lstats.read_eagain));
        if (errno == EAGAIN)
            c->readable = false;
        return 0;
    }
    return -1;
}

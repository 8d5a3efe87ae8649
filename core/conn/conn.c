/* conn.c — one client connection's driver: the loop's events come in here,
 * the current state's handler runs, and its verdict says what happens next
 * (conn_state.h). This file alone acts on VERDICT_CLOSE, and nothing here
 * frees a connection during a pass: closed ones wait on l->closed for
 * conn_reap, which the loop calls when the pass is over.
 *
 * Sockets are registered once, edge-triggered, for input and output; the
 * connection remembers readiness (readable/writable) and reads only when it
 * wants bytes, so no epoll_ctl is made per request. A short read means the
 * socket was drained at that instant (a new edge follows any later data), so
 * it clears `readable` without the extra EAGAIN read. */
#include <errno.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "conn.h"
#include "dispatch.h"
#include "conn_body.h"
#include "conn_io.h"
#include "conn_request.h"
#include "conn_state.h"
#include "conn_write.h"
#include "jobs.h"
#include "loop.h"
#include "../base/log.h"
#include "../base/options.h"

/* ---- life and death ---- */

struct conn *conn_new(struct loop *l, int fd)
{
    struct conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->src.kind = POLL_CONN;
    c->fd = fd;
    c->loop = l;
    c->state = CONN_HEAD;
    c->wfile_fd = -1;
    c->turn_credit_ns = DISPATCH_CREDIT_START;
    c->readable = true; /* a client usually sends its request at once */
    c->writable = true; /* and a new socket's send buffer is empty */
    c->next = &l->conns;
    c->prev = l->conns.prev;
    l->conns.prev->next = c;
    l->conns.prev = c;
    l->nconns++;
    timer_arm(&l->t_header, &c->timer, l->now_ms);
    return c;
}

void conn_accept(struct loop *l, int fd, const struct sockaddr_storage *addr)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct conn *c = conn_new(l, fd);
    if (!c) {
        close(fd);
        return;
    }
    if (addr->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)addr;
        inet_ntop(AF_INET, &a->sin_addr, c->remote_addr, sizeof c->remote_addr);
        snprintf(c->remote_port, sizeof c->remote_port, "%u", ntohs(a->sin_port));
    } else if (addr->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)addr;
        inet_ntop(AF_INET6, &a->sin6_addr, c->remote_addr, sizeof c->remote_addr);
        snprintf(c->remote_port, sizeof c->remote_port, "%u", ntohs(a->sin6_port));
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = c};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        log_warn("epoll_ctl(ADD): %s", strerror(errno));
        conn_abort(c);
        return;
    }
    STAT(counter_inc(&l->lstats.accepts));
    conn_drive(c);
}

static void close_socket(struct conn *c)
{
    if (c->fd >= 0)
        conn_io_close_socket(c->loop->epfd, c->fd);
    c->fd = -1;
}

/* The end of a connection, from any state. Called again (CONN_ORPHAN) as
 * the app hands its jobs back. */
void conn_abort(struct conn *c)
{
    if (c->state == CONN_CLOSED)
        return;
    timer_disarm(&c->timer);
    close_socket(c);
    bool with_app = false;
    if (c->job && c->holder != HOLDER_LOOP) {
        conn_release(c->job, c->holder == HOLDER_APP_WAITS);
        c->holder = HOLDER_APP;
        with_app = true;
    }
    for (struct job *j = c->pipe_head; j; j = j->pipe_next) {
        if (j->posted && j->msg == JOB_DONE)
            continue; /* back for good */
        conn_release(j, j->posted);
        j->posted = false;
        with_app = true;
    }
    if (with_app) {
        /* Keep the struct until the app hands every job back. */
        conn_set_state(c, CONN_ORPHAN);
        return;
    }
    conn_set_state(c, CONN_CLOSED);
    c->closed_next = c->loop->closed;
    c->loop->closed = c;
}

static void conn_free(struct conn *c)
{
    struct loop *l = c->loop;
    c->prev->next = c->next;
    c->next->prev = c->prev;
    l->nconns--;
    STAT(counter_inc(&l->lstats.closes));
    if (c->job)
        job_put(l, c->job);
    conn_pipe_put_all(c);
    if (c->wfile_fd >= 0)
        conn_io_close(c->wfile_fd);
    /* Counted toward giving memory back (jobs_release_memory): after a
     * flood of connections their buffers are most of what was grown. */
    l->free_list.freed_bytes += sizeof *c + c->rbuf.cap + c->err_resp.cap;
    buffer_free(&c->rbuf);
    conn_window_free(c);
    buffer_free(&c->err_resp);
    free(c);
}

void conn_reap(struct loop *l)
{
    while (l->closed) {
        struct conn *c = l->closed;
        l->closed = c->closed_next;
        conn_free(c);
    }
}

/* ---- the driver ---- */

static enum verdict step(struct conn *c)
{
    switch (c->state) {
    case CONN_HEAD: return conn_read_head(c);
    case CONN_PREREAD: return conn_preread(c);
    case CONN_READY:   /* a reset read with the request, or while it waited: not run */
        return c->peer_gone ? VERDICT_CLOSE : conn_start_app(c);
    case CONN_HOLD: return conn_hold(c);
    case CONN_BODY: return conn_fill_body(c);
    case CONN_SEND_CONTINUE:
    case CONN_SEND_PART:
    case CONN_SEND_LAST:
    case CONN_SEND_ERROR: return conn_send(c);
    case CONN_SENT: return conn_finish(c);
    case CONN_LINGER: return conn_linger(c);
    case CONN_QUEUED:  /* the loop retries it every pass (retry_pending) */
        /* Not yet the app's: a client that reset it is dropped now, so its
         * request is never run (and never holds a place in the hand-off). */
        return c->peer_gone ? VERDICT_CLOSE : VERDICT_WAIT;
    case CONN_APP:     /* the app posts a message */
        /* A reset: nobody reads the answer. Dropped now, its jobs marked
         * (conn_abort), so that one still in a thread's queue is not run
         * (job_skip) and one running stops streaming. */
        return c->peer_gone ? VERDICT_CLOSE : VERDICT_WAIT;
    case CONN_ORPHAN:  /* the app's last message frees it */
    case CONN_CLOSED: return VERDICT_WAIT;
    }
    return VERDICT_CLOSE;
}

void conn_drive(struct conn *c)
{
    enum verdict v;
    while ((v = step(c)) == VERDICT_NEXT)
        ;
    if (v == VERDICT_CLOSE)
        conn_abort(c);
}

/* ---- what the loop tells a connection ---- */

void conn_on_event(struct conn *c, uint32_t events)
{
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        c->readable = true;
    if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        c->peer_shut = true;
    /* A FIN alone is a half-close: the client may still read the response,
     * so the request it sent stands. A reset (or both directions closed)
     * means nobody will read it. */
    if (events & (EPOLLHUP | EPOLLERR))
        c->peer_gone = true;
    if (events & (EPOLLOUT | EPOLLHUP | EPOLLERR))
        c->writable = true;
    conn_drive(c);
}

void conn_on_message(struct conn *c, struct job *job)
{
    struct loop *l = c->loop;
    if (l->handoff) {
        if (job->msg == JOB_DONE) {
            uint64_t ran = dispatch_done(&l->disp, job, l->now_ms);
            if (job->in_turn)
                dispatch_charge(&c->turn_credit_ns, ran);
        } else
            dispatch_message(&l->disp, job, l->now_ms); /* owed until answered (conn_state.c) */
    }
    if (job->msg != JOB_NEED_BODY && job->out[job->msg_buf].len > c->resp_max)
        c->resp_max = job->out[job->msg_buf].len;
    if (job != c->job) {
        /* A pipelined request behind the current one: its message waits for
         * its turn (conn_finish), unless the connection is closing. */
        job->posted = true;
        if (c->state == CONN_ORPHAN || c->state == CONN_LINGER || c->state == CONN_SEND_ERROR) {
            if (job->msg != JOB_DONE) {
                conn_release(job, true);
                job->posted = false;
            }
            if (c->state == CONN_ORPHAN)
                conn_abort(c); /* frees it once the app has handed back every job */
        } else if (c->state == CONN_HOLD) {
            conn_drive(c); /* conn_hold takes more pipelined requests, or writes */
        } else if (job->msg == JOB_DONE) {
            conn_pipeline(c, false); /* room in the connection's budget, maybe */
        }
        return;
    }
    c->holder = job->msg == JOB_DONE ? HOLDER_LOOP : HOLDER_APP_WAITS;
    if (c->state == CONN_ORPHAN) {
        conn_abort(c); /* answers the message, or frees once the job is back */
        return;
    }
    if (c->state == CONN_SEND_ERROR || c->state == CONN_LINGER) {
        /* Refused (conn_refuse): a 503 took its place. Back for good, or
         * told at once that its client is gone. */
        if (job->msg != JOB_DONE) {
            conn_release(job, true);
            c->holder = HOLDER_APP;
        }
        return;
    }
    enum verdict v = conn_take_message(c);
    if (v == VERDICT_CLOSE)
        conn_abort(c);
    else if (v == VERDICT_NEXT)
        conn_drive(c);
}

void conn_retry_submit(struct conn *c)
{
    c->turn = true;
    conn_set_state(c, CONN_READY); /* a reset one closes there (step), unrun */
    conn_drive(c);
}

void conn_refuse(struct conn *c)
{
    if (c->state == CONN_SEND_ERROR || c->state == CONN_LINGER || c->state == CONN_ORPHAN ||
        c->state == CONN_CLOSED)
        return; /* answered already, or going */
    if (c->state != CONN_APP || c->holder != HOLDER_APP || c->part_sent) {
        conn_abort(c); /* the response began, or the app waits for the loop */
        return;
    }
    /* The app may still run them one day: it is told the client is gone.
     * The requests behind are not answered (the 503 closes): each one
     * waiting for the loop's answer gets it now. */
    timer_disarm(&c->timer);
    conn_release(c->job, false);
    for (struct job *j = c->pipe_head; j; j = j->pipe_next) {
        bool waits = j->posted && j->msg != JOB_DONE;
        conn_release(j, waits);
        if (waits)
            j->posted = false;
    }
    if (conn_fail(c, 503) == VERDICT_NEXT)
        conn_drive(c);
    else
        conn_abort(c);
}

/* A pool thread is working if the loop owes it an answer (it waits for
 * the loop, e.g. a flush to a slow client) or heard from it within the
 * timeout: a request queued behind others there is waiting its turn, and
 * gets another full timeout. So the app is cut off only once its thread
 * has been silent for the whole timeout (at most twice it, from the
 * request's own start). */
static bool thread_working(const struct conn *c)
{
    const struct loop *l = c->loop;
    if (!l->handoff || !c->job)
        return false;
    return dispatch_thread_working(&l->disp, c->job->thread, l->now_ms, l->opt->io_timeout_ms);
}

void conn_on_timeout(struct conn *c)
{
    if (c->state == CONN_HOLD && c->timer.list == &c->loop->t_hold) {
        /* A finished response does not wait longer for the ones behind it. */
        timer_disarm(&c->timer);
        c->hold_over = true;
        conn_drive(c);
        return;
    }
    timer_disarm(&c->timer);
    if ((c->state == CONN_APP || c->state == CONN_HOLD) && thread_working(c)) {
        timer_arm(&c->loop->t_io, &c->timer, c->loop->now_ms);
        return;
    }
    if (c->state == CONN_APP || c->state == CONN_HOLD)
        log_warn("%s:%s: the app sent nothing for the I/O timeout; closing the connection",
                 c->remote_addr, c->remote_port);
    else if (c->state != CONN_LINGER && c->state != CONN_HEAD)
        log_debug("closing %s:%s: no progress for the I/O timeout", c->remote_addr, c->remote_port);
    conn_abort(c);
}

/* The loop stops or refuses: the last request c has with the app is the
 * last it answers (conn_pipeline hands it none behind from now on, and
 * conn_finish closes once it is written). Its head says close if the
 * thread that builds it sees the mark; if it was built already, it said
 * keep-alive, and the close after it loses nothing (job_head_end argues the
 * ordering). The request on stage that is not with the app yet (its body
 * being read, or parked for room) is marked too: when stopping, it is
 * answered, with close, when it has run, unless it came pipelined behind
 * an answered one (conn_stop_unstarted); when refusing, it gets a 503 that
 * closes instead (conn_start_app). A request bound after a stop says close
 * by itself (job_bind); after a refusal it gets that 503. */
void conn_stop(struct conn *c)
{
    struct job *last = c->pipe_tail ? c->pipe_tail : c->job;
    if (last)
        atomic_store_explicit(&last->last_head, true, memory_order_relaxed);
}

/* A stop runs no request the client pipelined behind an answered one
 * that the app does not have yet: conn_finish closes where it finds such
 * bytes after a response once the loop stops, and one already on stage
 * then (framed, its body being read, or parked for a thread) closes here,
 * the same for a stop and a reload. Its client must be ready to send it
 * again on a new connection (RFC 9112 §9.3.2); what it read is all the
 * app ran for it. A refusing loop answers those with a 503 instead
 * (conn_start_app). */
void conn_stop_unstarted(struct conn *c)
{
    if (!conn_stop_skips(c) || c->pipe_head)
        return;
    bool unstarted = c->state == CONN_PREREAD || c->state == CONN_READY || c->state == CONN_QUEUED ||
                     (c->state == CONN_HEAD && c->rbuf.len > 0);
    if (!unstarted)
        return;
    if (conn_shutdown(c) == VERDICT_NEXT)
        conn_drive(c);
}

void conn_stop_if_idle(struct conn *c)
{
    if (c->state != CONN_HEAD || c->rbuf.len > 0 || c->job)
        return;
    /* A replaced worker's successor serves: a client may be sending on this
     * connection right now, and closing under it would fail that request.
     * Its next response says "Connection: close"; the keep-alive timer ends
     * it if none comes. */
    if (c->loop->retiring && !c->loop->refusing)
        return;
    /* A request may have arrived with its edge not yet seen: try one read
     * whatever `readable` says (a request found is served, with
     * "Connection: close"); the stop's next look (loop.c, sweep_due)
     * closes what stayed idle. A refusing loop closes it now: a request
     * sent meanwhile would only get a 503, where a closed connection has a
     * proxy retry it elsewhere. */
    if (!c->stop_probe) {
        c->stop_probe = true;
        c->readable = true;
        conn_drive(c);
        if (!c->loop->refusing || c->state != CONN_HEAD || c->rbuf.len > 0 || c->job)
            return;
    }
    conn_abort(c);
}


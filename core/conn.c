/* conn.c — one client connection: read a request head, frame it, hand it to
 * the app, and start the next one when the response is out.
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

#include "../handoffs/handoff.h"
#include "app.h"
#include "conn_internal.h"
#include "log.h"
#include "options.h"

#define RBUF_INITIAL 8192

void conn_accept(struct loop *l, int fd, const struct sockaddr_storage *addr)
{
    struct conn *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return;
    }
    c->src.kind = POLL_CONN;
    c->fd = fd;
    c->loop = l;
    c->state = CONN_HEAD;
    c->wfile_fd = -1;
    c->readable = true; /* a client usually sends its request at once */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
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
        close(fd);
        free(c);
        return;
    }
    c->next = &l->conns;
    c->prev = l->conns.prev;
    l->conns.prev->next = c;
    l->conns.prev = c;
    l->nconns++;
    STAT(counter_inc(&l->lstats.accepts));
    timer_arm(&l->t_header, &c->timer, l->now_ms);
    conn_read_head(c);
}

static void conn_free(struct conn *c)
{
    struct loop *l = c->loop;
    timer_disarm(&c->timer);
    conn_unpend(c);
    if (c->fd >= 0)
        close(c->fd);
    c->prev->next = c->next;
    c->next->prev = c->prev;
    l->nconns--;
    STAT(counter_inc(&l->lstats.closes));
    if (c->job)
        job_put(l, c->job);
    if (c->wfile_fd >= 0)
        close(c->wfile_fd);
    buffer_free(&c->rbuf);
    free(c->err_resp);
    free(c);
}

/* Who holds the job right now decides whether the connection can go at once. */
static bool job_with_app(const struct conn *c)
{
    if (!c->job || c->pending)
        return false;
    switch (c->state) {
    case CONN_APP: return true;
    case CONN_BODY: return !c->prereading;
    case CONN_WRITE: return c->after_write == AW_ACK || c->after_write == AW_BODY;
    default: return false;
    }
}

void conn_close(struct conn *c)
{
    if (!job_with_app(c)) {
        conn_free(c);
        return;
    }
    /* The app still runs this request: close the socket now, keep the struct
     * until the job comes back, and answer whatever the app waits for. */
    struct job *job = c->job;
    timer_disarm(&c->timer);
    close(c->fd);
    c->fd = -1;
    c->dead = true;
    job_set_lost(job); /* the app may stop early; an ack below publishes it too */
    if (c->state == CONN_BODY || (c->state == CONN_WRITE && c->after_write == AW_BODY)) {
        job->body.error = -1;
        job_ack(job);
    } else if (c->state == CONN_WRITE) {
        job_ack(job);
    }
    c->state = CONN_APP;
}

void conn_on_event(struct conn *c, uint32_t events)
{
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        c->readable = true;
    if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        c->peer_shut = true;
    if (events & (EPOLLOUT | EPOLLHUP | EPOLLERR))
        c->writable = true;
    switch (c->state) {
    case CONN_HEAD: conn_read_head(c); break;
    case CONN_BODY: if (c->readable) conn_fill_body(c); break;
    case CONN_WRITE: if (c->writable) conn_write(c); break;
    case CONN_LINGER: if (c->readable) conn_linger(c); break;
    case CONN_APP:
        /* The app has the request. A reset shows up when we next write. */
        break;
    }
}

/* Read into dst. Returns bytes read, 0 when nothing is waiting, -1 when the
 * peer closed or failed (the caller closes). */
ssize_t conn_recv(struct conn *c, char *dst, size_t room)
{
    struct loop *l = c->loop;
    ssize_t n = recv(c->fd, dst, room, 0);
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

void conn_read_head(struct conn *c)
{
    struct loop *l = c->loop;
    const struct options *opt = l->opt;
    bool try_parse = c->rbuf.len > 0;
    for (;;) {
        if (try_parse && c->rbuf.len > 0) {
            struct job *job = job_get(l);
            if (!job) {
                conn_error(c, 503);
                return;
            }
            int status = 0;
            int n = http_parse_request(c->rbuf.data, c->rbuf.len, opt->max_header_size,
                                       &job->req, &status);
            if (n > 0) {
                c->scanned = 0;
                conn_dispatch(c, job, (size_t)n);
                return;
            }
            job_put(l, job);
            if (n == HTTP_ERROR) {
                conn_error(c, status);
                return;
            }
        }
        if (!c->readable)
            return; /* the header or keep-alive timer is armed */
        if (c->rbuf.cap - c->rbuf.len < 1024) {
            size_t limit = opt->max_header_size + RBUF_INITIAL;
            size_t more = c->rbuf.cap ? c->rbuf.cap : RBUF_INITIAL;
            if (c->rbuf.len + more > limit)
                more = limit - c->rbuf.len;
            if (more == 0) { /* full of a head the parser could not end */
                conn_error(c, 431);
                return;
            }
            if (!buffer_reserve(&c->rbuf, more)) {
                conn_close(c);
                return;
            }
        }
        ssize_t got = conn_recv(c, c->rbuf.data + c->rbuf.len, c->rbuf.cap - c->rbuf.len);
        if (got < 0) {
            conn_close(c);
            return;
        }
        if (got == 0)
            continue; /* drained: the readable check above parks us */
        if (c->timer.list != &l->t_header) /* the head's clock starts at its first byte */
            timer_arm(&l->t_header, &c->timer, l->now_ms);
        c->rbuf.len += (size_t)got;
        try_parse = new_line_end(c) || c->rbuf.len >= opt->max_header_size;
    }
}

void conn_dispatch(struct conn *c, struct job *job, size_t head_len)
{
    struct loop *l = c->loop;
    const struct options *opt = l->opt;
    int status = http_request_framing(&job->req, &job->framing);
    if (!status)
        status = http_split_target(job->req.method, job->req.method_len, job->req.target,
                                   job->req.target_len, &job->target);
    if (status) {
        job_put(l, job);
        conn_error(c, status);
        return;
    }
    if (job->framing.body == HTTP_BODY_LENGTH && job->framing.content_length > opt->max_body_size) {
        job_put(l, job);
        conn_error(c, 413);
        return;
    }
    job->conn = c;
    job->remote_addr = c->remote_addr;
    job->remote_port = c->remote_port;
    job->keep_alive = job->framing.keep_alive && !l->stopping;
    /* Methods are case-sensitive (RFC 9110 §9.1): "head" is not HEAD. */
    job->is_head = job->req.method_len == 4 && memcmp(job->req.method, "HEAD", 4) == 0;
    c->job = job;
    timer_disarm(&c->timer);
    status = conn_body_start(c, head_len);
    if (status) {
        c->job = NULL;
        job_put(l, job);
        conn_error(c, status);
        return;
    }
    c->state = CONN_APP;
    if (!job->body.eof && !opt->native_hello && !job->body.expect_continue) {
        c->prereading = true;
        conn_fill_body(c);
    } else {
        conn_run_app(c);
    }
}

/* The request is ready for the app (its body complete, or streaming). */
void conn_run_app(struct conn *c)
{
    struct loop *l = c->loop;
    struct job *job = c->job;
    c->state = CONN_APP;
    if (l->opt->native_hello) {
        native_hello_respond(job);
        conn_on_message(c, job);
    } else if (l->opt->inline_app) {
        inline_run(l, job);
        conn_on_message(c, job);
    } else {
        conn_submit(c);
    }
}

/* Join the shortest queue; ties go to the lowest index, so at low load the
 * work stays on one hot (spinning) thread and the others stay parked rather
 * than each being woken in turn, as round-robin would. */
static unsigned pick_worker(const struct loop *l)
{
    unsigned best = 0;
    for (unsigned w = 1; w < l->workers; w++)
        if (l->outstanding[w] < l->outstanding[best])
            best = w;
    return best;
}

void conn_submit(struct conn *c)
{
    struct loop *l = c->loop;
    struct job *job = c->job;
    unsigned w = pick_worker(l);
    int r = HANDOFF_FULL;
    if (l->fault_submit_ms >= 0) { /* tests only: see loop.h */
        if (!l->fault_since_ms)
            l->fault_since_ms = l->now_ms;
        r = l->now_ms - l->fault_since_ms < (uint64_t)l->fault_submit_ms ? HANDOFF_FULL
                                                                       : (errno = EIO, HANDOFF_ERROR);
    }
    else if (l->outstanding[w] < l->capacity)
        r = l->handoff->ops->submit(l->handoff, w, job);
    if (r == HANDOFF_OK) {
        job->worker = w;
        l->outstanding[w]++;
        l->outstanding_total++;
        c->state = CONN_APP;
        return;
    }
    if (r == HANDOFF_ERROR) {
        log_error("handoff submit failed: %s", strerror(errno));
        conn_error(c, 503);
        return;
    }
    /* Backpressure: park the connection (not a growing queue: one entry per
     * connection at most) and stop reading it until a job finishes. */
    c->pending = true;
    c->pending_next = NULL;
    if (l->pending_tail)
        l->pending_tail->pending_next = c;
    else
        l->pending_head = c;
    l->pending_tail = c;
}

void conn_unpend(struct conn *c)
{
    struct loop *l = c->loop;
    if (!c->pending)
        return;
    struct conn **pp = &l->pending_head, *prev = NULL;
    while (*pp && *pp != c) {
        prev = *pp;
        pp = &(*pp)->pending_next;
    }
    if (*pp)
        *pp = c->pending_next;
    if (l->pending_tail == c)
        l->pending_tail = prev;
    c->pending = false;
}

void conn_on_message(struct conn *c, struct job *job)
{
    struct loop *l = c->loop;
    if (job->msg == JOB_DONE && l->handoff && !l->opt->inline_app && !l->opt->native_hello) {
        l->outstanding[job->worker]--;
        l->outstanding_total--;
    }
    if (c->dead) {
        if (job->msg == JOB_DONE) {
            conn_free(c);
        } else {
            if (job->msg == JOB_NEED_BODY)
                job->body.error = -1;
            job_set_lost(job);
            job_ack(job);
        }
        return;
    }
    switch (job->msg) {
    case JOB_NEED_BODY:
        c->state = CONN_BODY;
        conn_fill_body(c);
        break;
    case JOB_FLUSH:
        conn_queue(c, job->out[job->msg_buf].data, job->out[job->msg_buf].len, NULL, 0);
        c->after_write = AW_ACK;
        conn_write(c);
        break;
    case JOB_DONE:
        conn_queue(c, job->out[job->msg_buf].data, job->out[job->msg_buf].len, NULL, 0);
        if (job->file_fd >= 0) {
            c->wfile_fd = job->file_fd;
            c->wfile_off = job->file_off;
            c->wfile_left = job->file_len;
            job->file_fd = -1;
        }
        c->after_write = AW_FINISH;
        conn_write(c);
        break;
    }
}

void conn_retry_submit(struct conn *c)
{
    c->pending = false;
    conn_submit(c);
}

/* The response is out: log it, drop the request's bytes, and go on with the
 * next request (pipelined bytes may already be here) or close. */
void conn_finish(struct conn *c)
{
    struct loop *l = c->loop;
    struct job *job = c->job;
    counter_inc(&l->lstats.requests);
    if (l->opt->access_log)
        access_log_write(c, job);
    bool close_after = job->close_after || job->incomplete || !job->keep_alive || l->stopping;
    /* A chunked body read past its end leaves the next request's first bytes
     * in the decoder's buffer. */
    struct buffer *raw = &job->body.raw;
    size_t rest = c->rbuf.len - c->consumed;
    if (rest)
        memmove(c->rbuf.data, c->rbuf.data + c->consumed, rest);
    c->rbuf.len = rest;
    if (raw->len && !close_after && buffer_append(&c->rbuf, raw->data, raw->len) == false)
        close_after = true;
    c->consumed = 0;
    c->scanned = 0;
    c->job = NULL;
    job_put(l, job);
    if (c->rbuf.cap > 4 * RBUF_INITIAL && c->rbuf.len == 0)
        buffer_free(&c->rbuf); /* one huge head must not pin memory while idle */
    if (close_after) {
        conn_shutdown(c);
        return;
    }
    c->state = CONN_HEAD;
    if (c->rbuf.len > 0)
        timer_arm(&l->t_header, &c->timer, l->now_ms);
    else
        timer_arm(&l->t_keepalive, &c->timer, l->now_ms);
    conn_read_head(c);
}

void conn_on_timeout(struct conn *c)
{
    timer_disarm(&c->timer);
    if (c->state == CONN_LINGER || c->state == CONN_HEAD) {
        conn_free(c);
        return;
    }
    log_debug("closing %s:%s: no progress for the I/O timeout", c->remote_addr, c->remote_port);
    conn_close(c);
}

void conn_stop_if_idle(struct conn *c)
{
    if (c->state != CONN_HEAD || c->rbuf.len > 0 || c->job)
        return;
    /* A request may have arrived with its edge not yet seen: try one read
     * whatever `readable` says (a request found is served, with
     * "Connection: close"); the next pass closes what stayed idle. */
    if (!c->stop_read) {
        c->stop_read = true;
        c->readable = true;
        conn_read_head(c);
        return;
    }
    conn_free(c);
}

/* conn_write.c — getting responses out: non-blocking writes that resume on
 * EPOLLOUT, sendfile for wsgi.file_wrapper, the loop's own error responses,
 * and the lingering close that keeps a final response from being destroyed
 * by a reset when the client is still sending. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "../../lib/clock.h"
#include "conn_io.h"
#include "conn_state.h"
#include "conn_write.h"
#include "jobs.h"
#include "loop.h"
#include "../http/response_head.h"
#include "../base/log.h"
#include "../base/options.h"

void conn_queue(struct conn *c, const char *a, size_t alen)
{
    c->wvcnt = 0;
    c->wjobs = 0;
    if (alen)
        c->wv[c->wvcnt++] = (struct iovec){.iov_base = (void *)a, .iov_len = alen};
}

/* Behind the current response: the finished responses of the pipelined
 * requests that follow it, so one write carries them all, up to and
 * including the first that closes the connection. */
void conn_queue_pipelined(struct conn *c)
{
    for (struct job *j = c->pipe_head; j && j->posted && j->msg == JOB_DONE && j->file_fd < 0;
         j = j->pipe_next) {
        if (c->wvcnt == CONN_IOV)
            break;
        const struct buffer *out = &j->out[j->msg_buf];
        if (out->len)
            c->wv[c->wvcnt++] = (struct iovec){.iov_base = out->data, .iov_len = out->len};
        c->wjobs++;
        /* Nothing may follow a response that ends the connection: after a
         * cut-short or close-delimited body it would read as that body. */
        if (j->close_after || j->incomplete || !j->keep_alive)
            break;
    }
}

/* After a failed write: 1 to retry (EINTR), 0 when the socket is full (wait
 * for EPOLLOUT), -1 when the peer is gone. */
static int write_failed(struct conn *c)
{
    if (errno == EINTR)
        return 1;
    if (errno == EAGAIN) {
        c->writable = false;
        return 0;
    }
    return -1;
}

/* 1: all written; 0: the socket is full (wait for EPOLLOUT); -1: the peer is gone. */
static int write_out(struct conn *c)
{
    struct loop *l = c->loop;
    while (c->wvcnt > 0) {
        ssize_t n = conn_io_writev(c->fd, c->wv, c->wvcnt);
        STAT(counter_inc(&l->lstats.writes));
        if (n < 0) {
            int r = write_failed(c);
            if (r > 0)
                continue;
            return r;
        }
        size_t done = (size_t)n;
        int i = 0;
        while (i < c->wvcnt && done >= c->wv[i].iov_len)
            done -= c->wv[i++].iov_len;
        if (i > 0) {
            memmove(c->wv, c->wv + i, (size_t)(c->wvcnt - i) * sizeof *c->wv);
            c->wvcnt -= i;
        }
        if (c->wvcnt > 0) {
            c->wv[0].iov_base = (char *)c->wv[0].iov_base + done;
            c->wv[0].iov_len -= done;
        }
    }
    while (c->wfile_left > 0) {
        size_t chunk = c->wfile_left > (1u << 30) ? (1u << 30) : (size_t)c->wfile_left;
        ssize_t n = conn_io_sendfile(c->fd, c->wfile_fd, &c->wfile_off, chunk);
        STAT(counter_inc(&l->lstats.writes));
        if (n < 0) {
            int r = write_failed(c);
            if (r > 0)
                continue;
            return r;
        }
        if (n == 0) /* the file shrank under us: the response cannot be completed */
            return -1;
        c->wfile_left -= (uint64_t)n;
    }
    if (c->wfile_fd >= 0) {
        conn_io_close(c->wfile_fd);
        c->wfile_fd = -1;
    }
    return 1;
}

/* The client waits for this before it sends the body (RFC 9110 §10.1.1). */
void conn_queue_continue(struct conn *c)
{
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    conn_queue(c, cont, sizeof cont - 1);
    conn_set_state(c, CONN_SEND_CONTINUE);
}

/* The loop's own response is out: the response hooks see it as they see
 * the app's (a probe's 400 counts and is logged like any request). Its
 * request is c->job's head when one was parsed, else the first line the
 * client sent (a head starts at the receive buffer's first byte). */
static void report_error(struct conn *c)
{
    struct loop_response r = {.peer = c->remote_addr, .status = c->err_status,
                              .body_bytes = strlen(http_reason_phrase(c->err_status)) + 1, .end_ns = clock_ns()};
    if (c->job) {
        r.req = &c->job->req; /* read-only for both threads, even when the app holds it */
        r.head_ns = c->job->head_ns;
    } else if (c->rbuf.len) {
        const char *eol = memchr(c->rbuf.data, '\n', c->rbuf.len);
        r.line = c->rbuf.data;
        r.line_len = eol ? (size_t)(eol - c->rbuf.data) : c->rbuf.len;
        if (r.line_len && r.line[r.line_len - 1] == '\r')
            r.line_len--;
    }
    loop_responded(c->loop, &r);
}

/* CONN_SEND_*: write what is queued, then move on. */
enum verdict conn_send(struct conn *c)
{
    struct loop *l = c->loop;
    if (!c->writable)
        return VERDICT_WAIT;
    int r = write_out(c);
    if (r == 0) {
        timer_arm(&l->t_io, &c->timer, l->now_ms);
        return VERDICT_WAIT;
    }
    if (r < 0)
        return VERDICT_CLOSE; /* conn_abort tells an app still running */
    switch (c->state) {
    case CONN_SEND_CONTINUE:
        c->job->body.continue_sent = true;
        /* The app asked (pool) or the loop reads it all first (--inline). */
        conn_set_state(c, c->holder == HOLDER_APP_WAITS ? CONN_BODY : CONN_PREREAD);
        return VERDICT_NEXT;
    case CONN_SEND_PART:
        /* Part of the response is on the wire, so a 100 Continue is owed no
         * more: one now would land inside the body (RFC 9110 §10.1.1 allows
         * it only before the final response). A body the app reads after
         * this is read as the client sends it; the head already said close
         * (job_head_end: the body was not all read), so whatever the
         * client holds back cannot be taken for the next request. */
        c->job->body.expect_continue = false;
        conn_ack(c);
        return VERDICT_WAIT;
    case CONN_SEND_LAST:
        conn_set_state(c, CONN_SENT); /* the driver runs conn_finish */
        return VERDICT_NEXT;
    case CONN_SEND_ERROR:
        if (l->nresponders)
            report_error(c);
        return conn_shutdown(c);
    default: return VERDICT_CLOSE;
    }
}

/* The loop answers the request itself, and closes after. c->job, if any,
 * stays the connection's until it is freed: the request this answers. The
 * loop holds it, or (conn_refuse) the app does and was told its client is
 * gone; nothing behind it is answered. The head is response_head.c's, as
 * every response's; the body names the status. c->err_resp keeps its
 * storage for the connection's life. */
enum verdict conn_fail(struct conn *c, int status)
{
    const char *reason = http_reason_phrase(status);
    size_t reason_len = strlen(reason);
    char line[64], fields[96];
    int ln = snprintf(line, sizeof line, "%d %s", status, reason);
    int fn = snprintf(fields, sizeof fields, "Content-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n",
                      reason_len + 1);
    struct buffer *out = &c->err_resp;
    out->len = 0;
    if (!buffer_reserve(out, (size_t)ln + (size_t)fn + 2 * RESPONSE_HEAD_FIXED + reason_len + 1))
        return VERDICT_CLOSE;
    response_head_start(out, line, (size_t)ln);
    memcpy(out->data + out->len, fields, (size_t)fn);
    out->len += (size_t)fn;
    response_head_end(out, true, 1); /* it closes: the client's version changes nothing */
    memcpy(out->data + out->len, reason, reason_len);
    out->len += reason_len;
    out->data[out->len++] = '\n';
    log_debug("%s:%s: %d %s", c->remote_addr, c->remote_port, status, reason);
    c->err_status = status;
    conn_queue(c, out->data, out->len);
    conn_set_state(c, CONN_SEND_ERROR);
    return VERDICT_NEXT;
}

/* Half-close and keep reading (and discarding) until the client closes too,
 * or the linger timer fires: closing with unread input would send a reset
 * that can destroy the response before the client reads it. */
enum verdict conn_shutdown(struct conn *c)
{
    struct loop *l = c->loop;
    conn_io_shutdown(c->fd);
    conn_set_state(c, CONN_LINGER);
    timer_arm(&l->t_linger, &c->timer, l->now_ms);
    return VERDICT_NEXT;
}

/* CONN_LINGER */
enum verdict conn_linger(struct conn *c)
{
    char sink[16384];
    if (!c->readable)
        return VERDICT_WAIT;
    for (int i = 0; i < 64; i++) { /* bounded: a flood cannot hold the loop */
        ssize_t n = conn_recv(c, sink, sizeof sink);
        if (n < 0)
            return VERDICT_CLOSE;
        if (n == 0)
            return VERDICT_WAIT;
    }
    return VERDICT_WAIT;
}

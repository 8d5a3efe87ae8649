/* conn_write.c — getting responses out: non-blocking writes that resume on
 * EPOLLOUT, sendfile for wsgi.file_wrapper, the loop's own error responses,
 * and the lingering close that keeps a final response from being destroyed
 * by a reset when the client is still sending. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "conn_internal.h"
#include "httpdate.h"
#include "log.h"
#include "options.h"

void conn_queue(struct conn *c, const char *a, size_t alen, const char *b, size_t blen)
{
    c->wvcnt = 0;
    if (alen)
        c->wv[c->wvcnt++] = (struct iovec){.iov_base = (void *)a, .iov_len = alen};
    if (blen)
        c->wv[c->wvcnt++] = (struct iovec){.iov_base = (void *)b, .iov_len = blen};
    c->state = CONN_WRITE;
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
        ssize_t n = c->wvcnt == 1 ? send(c->fd, c->wv[0].iov_base, c->wv[0].iov_len, MSG_NOSIGNAL)
                                  : writev(c->fd, c->wv, c->wvcnt);
        STAT(counter_inc(&l->lstats.writes));
        if (n < 0) {
            int r = write_failed(c);
            if (r > 0)
                continue;
            return r;
        }
        size_t done = (size_t)n;
        while (c->wvcnt > 0 && done >= c->wv[0].iov_len) {
            done -= c->wv[0].iov_len;
            c->wv[0] = c->wv[1];
            c->wvcnt--;
        }
        if (c->wvcnt > 0) {
            c->wv[0].iov_base = (char *)c->wv[0].iov_base + done;
            c->wv[0].iov_len -= done;
        }
    }
    while (c->wfile_left > 0) {
        size_t chunk = c->wfile_left > (1u << 30) ? (1u << 30) : (size_t)c->wfile_left;
        ssize_t n = sendfile(c->fd, c->wfile_fd, &c->wfile_off, chunk);
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
        close(c->wfile_fd);
        c->wfile_fd = -1;
    }
    return 1;
}

void conn_write(struct conn *c)
{
    struct loop *l = c->loop;
    int r = write_out(c);
    if (r == 0) {
        timer_arm(&l->t_io, &c->timer, l->now_ms);
        return;
    }
    timer_disarm(&c->timer);
    if (r < 0) {
        conn_close(c);
        return;
    }
    switch (c->after_write) {
    case AW_FINISH: conn_finish(c); break;
    case AW_ACK:
        c->state = CONN_APP;
        job_ack(c->job);
        break;
    case AW_BODY: conn_fill_body(c); break;
    case AW_CLOSE: conn_shutdown(c); break;
    }
}

static const char *reason_phrase(int status)
{
    switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Internal Server Error";
    }
}

void conn_error(struct conn *c, int status)
{
    struct loop *l = c->loop;
    if (c->job) { /* only called while the loop holds the job */
        job_put(l, c->job);
        c->job = NULL;
    }
    const char *reason = reason_phrase(status);
    free(c->err_resp);
    c->err_resp = malloc(512);
    if (!c->err_resp) {
        conn_close(c);
        return;
    }
    int n = snprintf(c->err_resp, 512,
                     "HTTP/1.1 %d %s\r\nServer: cserve\r\nDate: %s\r\n"
                     "Content-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s\n",
                     status, reason, http_date_now(), strlen(reason) + 1, reason);
    log_debug("%s:%s: %d %s", c->remote_addr, c->remote_port, status, reason);
    conn_queue(c, c->err_resp, (size_t)n, NULL, 0);
    c->after_write = AW_CLOSE;
    conn_write(c);
}

/* Half-close and keep reading (and discarding) until the client closes too,
 * or the linger timer fires: closing with unread input would send a reset
 * that can destroy the response before the client reads it. */
void conn_shutdown(struct conn *c)
{
    struct loop *l = c->loop;
    shutdown(c->fd, SHUT_WR);
    c->state = CONN_LINGER;
    timer_arm(&l->t_linger, &c->timer, l->now_ms);
    if (c->readable)
        conn_linger(c);
}

void conn_linger(struct conn *c)
{
    char sink[16384];
    for (int i = 0; i < 64; i++) { /* bounded: a flood cannot hold the loop */
        ssize_t n = conn_recv(c, sink, sizeof sink);
        if (n < 0) {
            conn_close(c);
            return;
        }
        if (n == 0)
            return;
    }
}

void access_log_write(struct conn *c, struct job *job)
{
    static FILE *out;
    if (!out) {
        const char *path = c->loop->opt->access_log_file;
        out = path ? fopen(path, "a") : stderr;
        if (!out) {
            log_error("cannot open access log %s: %s", path, strerror(errno));
            out = stderr;
        }
    }
    fprintf(out, "%s - - [%s] \"%.*s %.*s HTTP/1.%d\" %d %llu\n", c->remote_addr, http_date_now(),
            (int)job->req.method_len, job->req.method, (int)job->req.target_len, job->req.target,
            job->req.minor_version, job->status, (unsigned long long)job->body_bytes);
    fflush(out);
}

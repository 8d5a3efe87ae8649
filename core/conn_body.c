/* conn_body.c — the request body, from the socket into the app's window.
 *
 * The bytes that arrived with the head are read in place from the receive
 * buffer (chunked ones decoded in place there). The rest is read only when
 * the app asks (JOB_NEED_BODY), into a 64 KiB window that the app drains
 * before asking again: the body is never held twice, and a client cannot make
 * us buffer more than a window of what the app has not asked for.
 *
 * Before the app is called, up to one window of body is read ahead
 * (prereading): most bodies are small, and then the app's read() never waits
 * for the loop. With --inline the whole body is read first (the loop cannot
 * wait for itself). A client that sent "Expect: 100-continue" and nothing
 * else is not read ahead: the app decides whether it wants the body. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conn_internal.h"
#include "../lib/futex.h"
#include "options.h"

#define BODY_WINDOW 65536
#define RAW_READ 16384
#define PREREAD_MAX BODY_WINDOW

void job_ack(struct job *job)
{
    /* A1: release — publishes the loop's writes to the window (or
     * conn_lost) to the pool thread's acquire load A2 in await_ack (pool.c). */
    atomic_fetch_add_explicit(&job->ack, 1, memory_order_release);
    futex_wake(&job->ack, 1);
}

int conn_body_start(struct conn *c, size_t head_len)
{
    struct job *job = c->job;
    struct body_pipe *b = &job->body;
    char *start = c->rbuf.data + head_len;
    size_t avail = c->rbuf.len - head_len;
    const struct options *opt = c->loop->opt;

    b->expect_continue = job->framing.expect_continue && avail == 0;
    switch (job->framing.body) {
    case HTTP_BODY_NONE:
        b->eof = true;
        c->consumed = head_len;
        return 0;
    case HTTP_BODY_LENGTH: {
        uint64_t cl = job->framing.content_length;
        b->data = start;
        if (avail >= cl) {
            b->len = (size_t)cl;
            b->eof = true;
            c->consumed = head_len + (size_t)cl;
        } else {
            b->len = avail;
            b->remaining = cl - avail;
            c->consumed = c->rbuf.len;
        }
        b->received = b->len;
        return 0;
    }
    case HTTP_BODY_CHUNKED: {
        b->chunked_body = true;
        http_chunked_init(&b->chunked);
        size_t used = 0, out_len = 0;
        int status = 0;
        int r = http_chunked_decode(&b->chunked, start, avail, &used, start, avail, &out_len, &status);
        if (r == HTTP_ERROR)
            return status;
        b->data = start;
        b->len = out_len;
        b->received = out_len;
        if (b->received > opt->max_body_size)
            return 413;
        if (r == 1) {
            b->eof = true;
            c->consumed = head_len + used;
        } else {
            /* Anything the decoder did not take (it takes all it can) waits
             * in raw for the next read. */
            if (used < avail && !buffer_append(&b->raw, start + used, avail - used))
                return 503;
            c->consumed = c->rbuf.len;
        }
        return 0;
    }
    }
    return 400;
}

static bool own_reserve(struct body_pipe *b, size_t need)
{
    if (b->own_cap >= need)
        return true;
    size_t cap = b->own_cap ? b->own_cap : BODY_WINDOW;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->own, cap);
    if (!p)
        return false;
    if (b->data == b->own)
        b->data = p;
    b->own = p;
    b->own_cap = cap;
    return true;
}

/* The window is ready (data, EOF or an error): give the job back. */
static void deliver(struct conn *c)
{
    struct job *job = c->job;
    timer_disarm(&c->timer);
    if (c->prereading) {
        c->prereading = false;
        if (job->body.error > 0) {
            conn_error(c, job->body.error);
            return;
        }
        conn_run_app(c);
        return;
    }
    c->state = CONN_APP;
    job_ack(job);
}

/* Read one batch of socket bytes into the window. Returns the data bytes
 * added (possibly 0 with EOF or an error set on b), or -1 when the socket has
 * nothing now, or -2 when the client is gone. */
static long read_some(struct conn *c, struct body_pipe *b, size_t base, size_t room)
{
    if (!b->chunked_body) {
        if (room > b->remaining)
            room = (size_t)b->remaining;
        ssize_t n = conn_recv(c, b->own + base, room);
        if (n < 0)
            return -2;
        if (n == 0)
            return -1;
        b->remaining -= (uint64_t)n;
        if (b->remaining == 0)
            b->eof = true;
        return n;
    }
    for (;;) {
        if (b->raw.len > 0) {
            size_t used = 0, out_len = 0;
            int status = 0;
            int r = http_chunked_decode(&b->chunked, b->raw.data, b->raw.len, &used, b->own + base,
                                        room, &out_len, &status);
            if (r == HTTP_ERROR) {
                b->error = status;
                return 0;
            }
            memmove(b->raw.data, b->raw.data + used, b->raw.len - used);
            b->raw.len -= used;
            if (r == 1)
                b->eof = true; /* what is left in raw is the next request's */
            if (out_len > 0 || r == 1)
                return (long)out_len;
        }
        if (!buffer_reserve(&b->raw, RAW_READ)) {
            b->error = -1;
            return 0;
        }
        ssize_t n = conn_recv(c, b->raw.data + b->raw.len, b->raw.cap - b->raw.len);
        if (n < 0)
            return -2;
        if (n == 0)
            return -1;
        b->raw.len += (size_t)n;
    }
}

void conn_fill_body(struct conn *c)
{
    struct loop *l = c->loop;
    struct job *job = c->job;
    struct body_pipe *b = &job->body;

    if (b->expect_continue && !b->continue_sent) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        b->continue_sent = true;
        conn_queue(c, cont, sizeof cont - 1, NULL, 0);
        c->after_write = AW_BODY;
        conn_write(c);
        return;
    }
    c->state = CONN_BODY;
    if (c->prereading) {
        /* Accumulate the whole body in own, starting with what came with the head. */
        if (b->data != b->own) {
            if (!own_reserve(b, b->len + BODY_WINDOW)) {
                conn_error(c, 503);
                return;
            }
            memmove(b->own, b->data, b->len);
            b->data = b->own;
        }
    } else if (b->pos >= b->len) {
        if (!own_reserve(b, BODY_WINDOW)) {
            b->error = -1;
            deliver(c);
            return;
        }
        b->data = b->own;
        b->len = b->pos = 0;
    }
    for (;;) {
        if (b->eof || b->error) {
            deliver(c);
            return;
        }
        if (!c->readable) {
            timer_arm(&l->t_io, &c->timer, l->now_ms);
            return;
        }
        if (c->prereading && !own_reserve(b, b->len + RAW_READ)) {
            conn_error(c, 503);
            return;
        }
        long got = read_some(c, b, b->len, b->own_cap - b->len);
        if (got == -2) {
            conn_close(c); /* the app, if waiting, gets an error (conn.c) */
            return;
        }
        if (got == -1)
            continue; /* readable is now false */
        b->len += (size_t)got;
        b->received += (uint64_t)got;
        if (b->received > l->opt->max_body_size)
            b->error = 413;
        bool ready = c->prereading ? !c->loop->opt->inline_app && b->len >= PREREAD_MAX
                                   : b->len > b->pos;
        if (ready) {
            deliver(c);
            return;
        }
        timer_arm(&l->t_io, &c->timer, l->now_ms);
    }
}

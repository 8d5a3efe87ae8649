/* conn_body.c — the request body, from the socket into the app's window.
 *
 * The bytes that arrived with the head are read in place from the receive
 * buffer (chunked ones decoded in place there). The rest is read only when
 * the app asks (JOB_NEED_BODY), into a 64 KiB window that the app drains
 * before asking again: the body is never held twice, and a client cannot make
 * us buffer more than a window of what the app has not asked for.
 *
 * Before the app is called, up to one window of body is read ahead
 * (CONN_PREREAD): most bodies are small, and then the app's read() never
 * waits for the loop. With --inline the whole body is read first (the loop
 * cannot wait for itself), after "100 Continue" when the client asked for
 * it. Otherwise a client that sent "Expect: 100-continue" and nothing else is
 * not read ahead: the app decides, and its first read sends the 100. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conn_body.h"
#include "conn_state.h"
#include "conn_write.h"
#include "loop.h"
#include "../base/options.h"

#define BODY_WINDOW 65536
#define RAW_READ 16384
#define PREREAD_MAX BODY_WINDOW

/* The body window belongs to the connection and is lent to the job that
 * reads a body: jobs are many (pipelining keeps several per connection in
 * flight), bodies are read one at a time per connection. */
static void window_lend(struct conn *c, struct body_pipe *b)
{
    if (b->own || !c->win)
        return;
    b->own = c->win;
    b->own_cap = c->win_cap;
    c->win = NULL;
    c->win_cap = 0;
}

/* The same for the chunked decoder's input buffer. */
static void raw_lend(struct conn *c, struct body_pipe *b)
{
    if (b->raw.cap || !c->raw.cap)
        return;
    b->raw = c->raw;
    c->raw = (struct buffer){0};
}

void conn_window_return(struct conn *c, struct job *job)
{
    struct body_pipe *b = &job->body;
    if (b->own) {
        if (c->win || b->own_cap > BODY_WINDOW * 2) {
            free(b->own); /* a big one is not worth keeping */
        } else {
            c->win = b->own;
            c->win_cap = b->own_cap;
        }
        b->own = NULL;
        b->own_cap = 0;
        b->data = NULL;
    }
    if (b->raw.cap) {
        if (c->raw.cap || b->raw.cap > RAW_READ * 4) {
            buffer_free(&b->raw);
        } else {
            c->raw = b->raw;
            c->raw.len = 0;
        }
        b->raw = (struct buffer){0};
    }
}

void conn_window_free(struct conn *c)
{
    free(c->win);
    c->win = NULL;
    c->win_cap = 0;
    buffer_free(&c->raw);
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
        raw_lend(c, b);
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

/* One batch into own[b->len..]: -1 nothing now, -2 client gone, else the
 * bytes added (counted against --max-body-size). */
static long read_batch(struct conn *c, struct body_pipe *b)
{
    long got = read_some(c, b, b->len, b->own_cap - b->len);
    if (got > 0) {
        b->len += (size_t)got;
        b->received += (uint64_t)got;
        if (b->received > c->loop->opt->max_body_size)
            b->error = 413;
        struct loop *l = c->loop;
        timer_arm(&l->t_io, &c->timer, l->now_ms); /* progress */
    }
    return got;
}

/* CONN_PREREAD: gather the body (all of it with --inline, else up to one
 * window) in own, starting with what came with the head. */
enum verdict conn_preread(struct conn *c)
{
    struct loop *l = c->loop;
    struct body_pipe *b = &c->job->body;
    window_lend(c, b);
    if (b->data != b->own) {
        if (!own_reserve(b, b->len + BODY_WINDOW))
            return conn_fail(c, 503);
        memmove(b->own, b->data, b->len);
        b->data = b->own;
    }
    bool all = l->opt->inline_app;
    while (!b->eof && !b->error && (all || b->len < PREREAD_MAX)) {
        if (!c->readable) {
            if (!c->timer.list)
                timer_arm(&l->t_io, &c->timer, l->now_ms);
            return VERDICT_WAIT;
        }
        if (!own_reserve(b, b->len + RAW_READ))
            return conn_fail(c, 503);
        long got = read_batch(c, b);
        if (got == -2)
            return VERDICT_CLOSE;
    }
    timer_disarm(&c->timer);
    if (b->error > 0)
        return conn_fail(c, b->error);
    if (b->error < 0)
        return VERDICT_CLOSE;
    conn_set_state(c, CONN_READY);
    return VERDICT_NEXT;
}

/* CONN_BODY: the app read its window empty; refill it and ack. */
enum verdict conn_fill_body(struct conn *c)
{
    struct loop *l = c->loop;
    struct body_pipe *b = &c->job->body;
    window_lend(c, b);
    if (b->pos >= b->len) {
        if (!own_reserve(b, BODY_WINDOW)) {
            b->error = -1;
            conn_ack(c);
            return VERDICT_WAIT;
        }
        b->data = b->own;
        b->len = b->pos = 0;
    }
    while (!b->eof && !b->error && b->len == b->pos) {
        if (!c->readable) {
            timer_arm(&l->t_io, &c->timer, l->now_ms);
            return VERDICT_WAIT;
        }
        if (read_batch(c, b) == -2)
            return VERDICT_CLOSE; /* conn_abort tells the app the client is gone */
    }
    conn_ack(c);
    return VERDICT_NEXT; /* CONN_APP: a reset read with the body's end closes now */
}

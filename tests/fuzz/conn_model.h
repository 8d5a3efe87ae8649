/* conn_model.h — a connection as a server runs it, for the fuzzers and the
 * corpus test: bytes arrive in arbitrary pieces into a bounded buffer; heads
 * are parsed from the front, framed, their bodies consumed by Content-Length
 * or chunked, then the next pipelined request, until an error or
 * "Connection: close" ends it. Every event (request, body end, error status,
 * where the stream stopped) goes into a log: a running hash of all of them and
 * the first CONN_LOG_KEEP in full. Static functions: include it once. */
#ifndef CSERVE_CONN_MODEL_H
#define CSERVE_CONN_MODEL_H

#include "../../core/http_parser.h"
#include "fuzz_check.h"

#include <string.h>

#ifndef CONN_MAX_HEAD
#define CONN_MAX_HEAD 1024 /* small, so fuzzed inputs reach the limits */
#endif
#define MAX_HEAD CONN_MAX_HEAD
#define BUF_CAP (4 * MAX_HEAD) /* > MAX_HEAD, so a full buffer always decides a head */
#define OUT_CAP 61    /* decoded-body scratch: small and odd on purpose */
#define CONN_LOG_KEEP 16

enum conn_state { READ_HEAD, READ_LENGTH, READ_CHUNKED, CLOSED };

struct conn {
    char buf[BUF_CAP];
    size_t len;
    enum conn_state st;
    bool keep_alive;
    uint64_t remaining;
    struct http_chunked chunked;
    uint64_t body_len, body_hash;
    uint64_t log_hash; /* every event, in order */
    unsigned events;
    struct conn_event {
        char kind; /* 'R' request, 'B' body end, 'E' error status, 'S' stop */
        uint64_t a, b;
    } first[CONN_LOG_KEEP]; /* the first few, for tests that read them */
};

static void log_event(struct conn *c, uint64_t kind, uint64_t a, uint64_t b)
{
    uint64_t e[3] = {kind, a, b};
    c->log_hash = fuzz_hash(c->log_hash, e, sizeof e);
    if (c->events < CONN_LOG_KEEP) c->first[c->events] = (struct conn_event){(char)kind, a, b};
    c->events++;
}

static void consume(struct conn *c, size_t n)
{
    memmove(c->buf, c->buf + n, c->len - n);
    c->len -= n;
}

static void fail(struct conn *c, int status)
{
    log_event(c, 'E', (uint64_t)status, 0);
    c->st = CLOSED;
}

static void body_done(struct conn *c)
{
    log_event(c, 'B', c->body_len, c->body_hash);
    c->st = c->keep_alive ? READ_HEAD : CLOSED;
}

static uint64_t hash_request(const struct http_request *req)
{
    uint64_t h = fuzz_hash(FUZZ_HASH_INIT, req->method, req->method_len);
    h = fuzz_hash(h, req->target, req->target_len);
    h = fuzz_hash(h, &req->minor_version, sizeof req->minor_version);
    for (size_t i = 0; i < req->num_headers; i++) {
        h = fuzz_hash(h, req->headers[i].name, req->headers[i].name_len);
        h = fuzz_hash(h, ":", 1);
        h = fuzz_hash(h, req->headers[i].value, req->headers[i].value_len);
    }
    return h;
}

/* Everything the buffered bytes allow, as a server's read handler would. */
static void process(struct conn *c)
{
    static struct http_request req;
    for (;;) {
        switch (c->st) {
        case READ_HEAD: {
            if (c->len == 0) return;
            int status = 0;
            int r = http_parse_request(c->buf, c->len, MAX_HEAD, &req, &status);
            if (r == HTTP_PARTIAL) {
                FUZZ_ASSERT(c->len < MAX_HEAD);
                return;
            }
            if (r == HTTP_ERROR) {
                fail(c, status);
                return;
            }
            FUZZ_ASSERT((size_t)r <= c->len);
            struct http_framing f;
            struct http_target t;
            int st = http_request_framing(&req, &f);
            if (st == 0) st = http_split_target(req.method, req.method_len, req.target,
                                                req.target_len, &t);
            if (st != 0) {
                fail(c, st);
                return;
            }
            log_event(c, 'R', hash_request(&req), (uint64_t)r);
            consume(c, (size_t)r);
            c->keep_alive = f.keep_alive;
            c->body_len = 0;
            c->body_hash = FUZZ_HASH_INIT;
            if (f.body == HTTP_BODY_LENGTH) {
                c->remaining = f.content_length;
                c->st = READ_LENGTH;
            } else if (f.body == HTTP_BODY_CHUNKED) {
                http_chunked_init(&c->chunked);
                c->st = READ_CHUNKED;
            } else {
                body_done(c);
            }
            break;
        }
        case READ_LENGTH: {
            size_t n = c->remaining < c->len ? (size_t)c->remaining : c->len;
            c->body_hash = fuzz_hash(c->body_hash, c->buf, n);
            c->body_len += n;
            c->remaining -= n;
            consume(c, n);
            if (c->remaining) return; /* buffer drained, more body to come */
            body_done(c);
            break;
        }
        case READ_CHUNKED: {
            char out[OUT_CAP];
            size_t off = 0;
            int r = 0, status = 0;
            while (r == 0 && off < c->len) {
                size_t used = 0, got = 0;
                r = http_chunked_decode(&c->chunked, c->buf + off, c->len - off, &used, out,
                                        sizeof out, &got, &status);
                FUZZ_ASSERT(r != 0 || used > 0 || got > 0);
                off += used;
                c->body_hash = fuzz_hash(c->body_hash, out, got);
                c->body_len += got;
            }
            consume(c, off);
            if (r == HTTP_ERROR) {
                fail(c, status);
                return;
            }
            if (r == 0) return;
            body_done(c);
            break;
        }
        case CLOSED:
            return;
        }
    }
}

/* Feeds the stream in pieces of 1..max_piece bytes (max_piece 0: whole),
 * never holding more than BUF_CAP bytes, and returns the final log. */
static struct conn *conn_run(const uint8_t *data, size_t size, uint64_t seed, size_t max_piece)
{
    struct conn *c = calloc(1, sizeof *c);
    c->log_hash = FUZZ_HASH_INIT;
    size_t pos = 0;
    while (pos < size && c->st != CLOSED) {
        size_t piece = max_piece ? 1 + (size_t)(fuzz_next(&seed) % max_piece) : size - pos;
        if (piece > size - pos) piece = size - pos;
        size_t end = pos + piece;
        while (pos < end && c->st != CLOSED) {
            size_t n = BUF_CAP - c->len;
            if (n > end - pos) n = end - pos;
            FUZZ_ASSERT(n > 0); /* process() always frees room in a full buffer */
            memcpy(c->buf + c->len, data + pos, n);
            c->len += n;
            pos += n;
            process(c);
        }
    }
    /* where the stream stopped is part of the outcome */
    log_event(c, 'S', (uint64_t)c->st, c->st == CLOSED ? 0 : c->len);
    return c;
}

#endif

/* conn_harness.c — see conn_harness.h. Links against core/conn*.c in place
 * of core/conn_io.c (the syscalls), core/pool.c (the app) and core/loop.c. */
#include "conn_harness.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>

#include "../../core/app.h"
#include "../../core/conn_internal.h"
#include "../../core/httpdate.h"
#include "../../core/options.h"
#include "../../core/response_head.h"
#include "fuzz_check.h"

/* ---- what loop.c, httpdate.c and pool.c would provide ---- */

atomic_bool server_stopping;

const char *http_date_now(void) { return "Sun, 06 Nov 1994 08:49:37 GMT"; }

void *job_wait_begin(void) { return NULL; }
void job_wait_end(void *token) { (void)token; }

/* The app: 200, the body's length and hash as the response body. */
void inline_run(struct loop *l, struct job *job)
{
    (void)l;
    struct body_pipe *b = &job->body;
    FUZZ_ASSERT(b->eof && !b->error && b->pos <= b->len); /* framed before the app runs */
    size_t len = b->len - b->pos;
    uint64_t h = len ? fuzz_hash(FUZZ_HASH_INIT, b->data + b->pos, len) : FUZZ_HASH_INIT;
    char text[64];
    int n = snprintf(text, sizeof text, "%zu %016llx", len, (unsigned long long)h);
    b->pos = b->len;
    struct buffer *out = &job->out[0];
    out->len = 0;
    FUZZ_ASSERT(buffer_reserve(out, 256));
    response_head_start(out, "200 OK", 6);
    /* (HEAD gets "0": the response parser below does not track methods) */
    out->len += (size_t)snprintf(out->data + out->len, 64, "Content-Length: %d\r\n",
                                 job->is_head ? 0 : n);
    response_head_end(out, job);
    if (!job->is_head) {
        memcpy(out->data + out->len, text, (size_t)n);
        out->len += (size_t)n;
    }
    job->status = 200;
    job_done(job); /* no pool thread: only records the message */
}

/* ---- the socket ---- */

static struct {
    const uint8_t *in;
    size_t delivered, read_pos;
    bool eof, shut_wr, closed, blocked;
    uint64_t seed;
    size_t max_write;
    /* the response stream, parsed as it goes */
    char head[8192];
    size_t head_len;
    uint64_t body_left;
    struct harness_result *r;
} sock;

ssize_t conn_io_recv(int fd, void *buf, size_t len)
{
    (void)fd;
    FUZZ_ASSERT(!sock.closed);
    size_t avail = sock.delivered - sock.read_pos;
    if (avail == 0) {
        if (sock.eof)
            return 0;
        errno = EAGAIN;
        return -1;
    }
    size_t n = avail < len ? avail : len;
    memcpy(buf, sock.in + sock.read_pos, n);
    sock.read_pos += n;
    return (ssize_t)n;
}

/* One response byte: heads are parsed for their status and length. */
static void out_byte(char ch)
{
    struct harness_result *r = sock.r;
    if (sock.body_left > 0) {
        sock.body_left--;
        r->out_hash = fuzz_hash(r->out_hash, &ch, 1);
        r->out_len++;
        return;
    }
    FUZZ_ASSERT(sock.head_len < sizeof sock.head);
    sock.head[sock.head_len++] = ch;
    if (sock.head_len < 4 || memcmp(sock.head + sock.head_len - 4, "\r\n\r\n", 4) != 0)
        return;
    int status = 0;
    FUZZ_ASSERT(sscanf(sock.head, "HTTP/1.1 %d", &status) == 1);
    if (status == 100) {
        r->continues++;
    } else {
        if (r->responses < HARNESS_KEEP_STATUSES)
            r->statuses[r->responses] = status;
        r->responses++;
        r->out_hash = fuzz_hash(r->out_hash, sock.head, sock.head_len);
        r->out_len += sock.head_len;
        sock.head[sock.head_len] = '\0';
        const char *cl = strstr(sock.head, "Content-Length: ");
        FUZZ_ASSERT(cl != NULL);
        sock.body_left = strtoull(cl + 16, NULL, 10);
    }
    sock.head_len = 0;
}

ssize_t conn_io_writev(int fd, const struct iovec *iov, int cnt)
{
    (void)fd;
    FUZZ_ASSERT(!sock.closed);
    if (sock.shut_wr) {
        errno = EPIPE;
        return -1;
    }
    if (sock.max_write && !sock.blocked && fuzz_next(&sock.seed) % 4 == 0) {
        sock.blocked = true; /* full: the next writable event reopens it */
        errno = EAGAIN;
        return -1;
    }
    FUZZ_ASSERT(!sock.blocked);
    size_t room = sock.max_write ? 1 + (size_t)(fuzz_next(&sock.seed) % sock.max_write) : SIZE_MAX;
    size_t done = 0;
    for (int i = 0; i < cnt && done < room; i++)
        for (size_t j = 0; j < iov[i].iov_len && done < room; j++, done++)
            out_byte(((const char *)iov[i].iov_base)[j]);
    return (ssize_t)done;
}

ssize_t conn_io_sendfile(int fd, int file_fd, off_t *off, size_t len)
{
    (void)fd, (void)file_fd, (void)off, (void)len;
    FUZZ_ASSERT(!"the stand-in app sends no file");
    return -1;
}

void conn_io_shutdown(int fd)
{
    (void)fd;
    sock.shut_wr = true;
}

void conn_io_close(int fd)
{
    (void)fd;
    sock.closed = true;
}

/* ---- the run ---- */

static bool gone(const struct conn *c) { return c->state == CONN_CLOSED; }

/* Deliver an event, then the writable events a blocked write waits for. */
static void event(struct conn *c, uint32_t events)
{
    conn_on_event(c, events);
    while (!gone(c) && sock.blocked) {
        sock.blocked = false;
        conn_on_event(c, EPOLLOUT);
    }
    /* A handler that waits must have read everything it could: edge
     * triggering brings no second event for bytes already here. */
    if (!gone(c) && (c->state == CONN_HEAD || c->state == CONN_PREREAD))
        FUZZ_ASSERT(!c->readable || sock.read_pos == sock.delivered);
}

void harness_run(const uint8_t *data, size_t size, uint64_t seed, size_t max_piece,
                 size_t max_write, size_t max_head, struct harness_result *r)
{
    struct options opt;
    memset(&opt, 0, sizeof opt);
    opt.inline_app = true;
    opt.max_header_size = max_head;
    opt.max_body_size = UINT64_C(1) << 40;
    opt.header_timeout_ms = opt.keepalive_timeout_ms = opt.io_timeout_ms = 1000;
    static struct loop l;
    memset(&l, 0, sizeof l);
    l.opt = &opt;
    l.conns.next = l.conns.prev = &l.conns;
    l.fault_submit_ms = -1;
    timer_list_init(&l.t_header, 1000);
    timer_list_init(&l.t_keepalive, 1000);
    timer_list_init(&l.t_io, 1000);
    timer_list_init(&l.t_linger, 1000);

    memset(r, 0, sizeof *r);
    r->out_hash = FUZZ_HASH_INIT;
    memset(&sock, 0, sizeof sock);
    sock.in = data;
    sock.seed = seed;
    sock.max_write = max_write;
    sock.r = r;

    struct conn *c = conn_new(&l, 3);
    FUZZ_ASSERT(c != NULL);
    conn_drive(c);
    while (sock.delivered < size && !gone(c) && c->state != CONN_LINGER) {
        size_t piece = max_piece ? 1 + (size_t)(fuzz_next(&sock.seed) % max_piece) : size;
        if (piece > size - sock.delivered)
            piece = size - sock.delivered;
        sock.delivered += piece;
        event(c, EPOLLIN);
    }
    r->closed_early = gone(c) || c->state == CONN_LINGER;
    if (!gone(c)) {
        sock.eof = true;
        event(c, EPOLLIN | EPOLLRDHUP);
    }
    if (!gone(c))
        conn_abort(c);
    FUZZ_ASSERT(sock.closed && l.nconns == 1 && !l.pending_head);
    conn_reap(&l);
    FUZZ_ASSERT(l.nconns == 0);
    jobs_free_all(&l);
}

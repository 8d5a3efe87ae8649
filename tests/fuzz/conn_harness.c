/* conn_harness.c — see conn_harness.h. Links against core/conn/conn*.c,
 * jobs.c and core/python/job.c in place of core/conn/conn_io.c (the
 * syscalls), core/conn/loop.c and the handoff; tests/fuzz/conn_app.c stands in for the app and the pool. */
#include "conn_harness.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>

#include "../../core/conn/conn.h"
#include "../../core/conn/conn_io.h"
#include "../../core/conn/jobs.h"
#include "../../core/conn/loop.h"
#include "../../core/http/httpdate.h"
#include "../../core/base/options.h"
#include "../../core/http/response_head.h"
#include "conn_app.h"
#include "fuzz_check.h"

/* ---- what httpdate.c would provide ---- */

const char *http_date_now(void) { return "Sun, 06 Nov 1994 08:49:37 GMT"; }

/* ---- the socket ---- */

static struct {
    const uint8_t *in;
    size_t delivered, read_pos;
    bool eof, shut_wr, closed, blocked;
    bool reset;        /* the peer reset: reads and writes fail */
    uint64_t seed;
    size_t max_write;
    /* the response stream, parsed as it goes */
    char head[8192];
    size_t head_len;
    uint64_t body_left;
    struct harness_result *r;
    unsigned next_seq; /* the X-Seq the next app response must carry */
} sock;

ssize_t conn_io_recv(int fd, void *buf, size_t len)
{
    (void)fd;
    FUZZ_ASSERT(!sock.closed);
    if (sock.reset) {
        errno = ECONNRESET;
        return -1;
    }
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
    /* Nothing after a response that closes: after a close-delimited or
     * cut-short body it would read as that body. */
    if (sock.body_left == 0 && sock.head_len == 0)
        FUZZ_ASSERT(!r->closing_seen);
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
        if (strstr(sock.head, "\r\nConnection: close\r\n"))
            r->closing_seen = true;
        /* One response per request the app ran, in request order. */
        const char *seq = strstr(sock.head, "\r\nX-Seq: ");
        if (seq) {
            FUZZ_ASSERT(strtoul(seq + 9, NULL, 10) == sock.next_seq);
            sock.next_seq++;
        }
    }
    sock.head_len = 0;
}

ssize_t conn_io_writev(int fd, const struct iovec *iov, int cnt)
{
    (void)fd;
    FUZZ_ASSERT(!sock.closed);
    if (sock.shut_wr || sock.reset) {
        errno = sock.reset ? ECONNRESET : EPIPE;
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

void conn_io_close_socket(int epfd, int fd)
{
    (void)epfd;
    conn_io_close(fd);
}

/* ---- the response hooks: what the access log and the metrics see ---- */

static struct {
    unsigned n;
    int statuses[HARNESS_KEEP_STATUSES];
} seen;

static void on_response(void *ctx, const struct loop_response *r)
{
    (void)ctx;
    FUZZ_ASSERT(r->req || r->line_len <= sock.delivered); /* a request, or what the client sent */
    FUZZ_ASSERT(r->status >= 200 && r->status < 600);
    if (seen.n < HARNESS_KEEP_STATUSES)
        seen.statuses[seen.n] = r->status;
    seen.n++;
}

static const struct loop_hook responder = {.response = on_response};

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

/* Retry a connection parked for a full handoff, as the loop does after a
 * drain (here as if another connection's job had finished). */
static bool retry_pending(struct loop *l)
{
    if (!dispatch_can_retry(&l->disp))
        return false;
    conn_retry_submit(dispatch_first_waiting(&l->disp));
    return true;
}

/* conn_hold's mark (loop.h: pipe_done) is NULL or one of the pipelined
 * jobs, and it and every job before it have finished for good: posted,
 * JOB_DONE, and nothing that stops a coalesced write (conn_request.c's
 * ends_batch). A mark left behind by pipe_pop would point at a job back on
 * the free list. */
static void check_pipe_done(const struct conn *c)
{
    if (!c->pipe_done)
        return;
    const struct job *j = c->pipe_head;
    for (;; j = j->pipe_next) {
        FUZZ_ASSERT(j != NULL); /* the mark is in the list */
        FUZZ_ASSERT(j->posted && j->msg == JOB_DONE);
        FUZZ_ASSERT(!j->close_after && !j->incomplete && j->keep_alive && j->file_fd < 0);
        if (j == c->pipe_done)
            return;
    }
}

/* Take up to max of the app's messages, as the loop's drain does, then
 * retry a parked connection. */
static bool deliver(struct loop *l, size_t max)
{
    bool any = false;
    struct job *job;
    while (max-- && (job = app_pool_message())) {
        any = true;
        struct conn *c = job->conn;
        conn_on_message(c, job);
        while (!gone(c) && sock.blocked) {
            sock.blocked = false;
            conn_on_event(c, EPOLLOUT);
        }
        if (!gone(c))
            check_pipe_done(c);
    }
    if (l->handoff)
        dispatch_settle(&l->disp);
    any |= retry_pending(l);
    return any;
}

/* One pass of the pool and the loop: a few app steps, then some messages. */
static bool pass(struct loop *l)
{
    bool any = false;
    unsigned steps = (unsigned)(fuzz_next(&sock.seed) % 4);
    /* The pool's pace and how long its request has run, as the loop's
     * clock says: the input chooses how much of the depth the pipeline
     * gets (0 to 3 ms a pass, around DISPATCH_BUDGET_NS). */
    dispatch_clock(&l->disp, l->disp.now_ns + fuzz_next(&sock.seed) % 3000000);
    app_pool_clock(l->disp.now_ns);
    for (unsigned i = 0; i < steps; i++)
        any |= app_pool_step();
    any |= deliver(l, 1 + (size_t)(fuzz_next(&sock.seed) % 3));
    return any;
}

/* Run the pool and the loop until neither can move. */
static void settle(struct loop *l)
{
    for (unsigned guard = 0;; guard++) {
        FUZZ_ASSERT(guard < 1000000); /* a protocol that never settles is a hang */
        bool any = false;
        while (app_pool_step())
            any = true;
        any |= deliver(l, SIZE_MAX);
        if (!any)
            return;
    }
}

/* loop.piped.most for the runs that follow (harness_set_pipe_most); 0: no cap. */
static unsigned pipe_most;

void harness_set_pipe_most(unsigned most) { pipe_most = most; }

static void loop_init_for(struct loop *l, struct options *opt, const struct harness_config *cfg)
{
    memset(opt, 0, sizeof *opt);
    opt->inline_app = !cfg->pool;
    opt->max_header_size = cfg->max_head;
    opt->max_body_size = UINT64_C(1) << 40;
    opt->header_timeout_ms = opt->keepalive_timeout_ms = opt->io_timeout_ms = 1000;
    memset(l, 0, sizeof *l);
    l->opt = opt;
    l->conns.next = l->conns.prev = &l->conns;
    l->piped.most = pipe_most ? pipe_most : UINT_MAX;
    l->hooks[0] = l->responders[0] = &responder; /* as loop_hook_add does */
    l->nhooks = l->nresponders = 1;
    if (cfg->pool) {
        l->handoff = app_pool_handoff();
        FUZZ_ASSERT(dispatch_init(&l->disp, l->handoff, 1, cfg->capacity ? cfg->capacity : 64) == 0);
    }
    timer_list_init(&l->t_header, 1000);
    timer_list_init(&l->t_keepalive, 1000);
    timer_list_init(&l->t_io, 1000);
    timer_list_init(&l->t_linger, 1000);
    timer_list_init(&l->t_hold, 2);
}

/* A run's loop and connection, nothing delivered yet. */
static struct conn *run_start(struct loop *l, struct options *opt, const uint8_t *data, uint64_t seed,
                              const struct harness_config *cfg, struct harness_result *r)
{
    loop_init_for(l, opt, cfg);
    /* Unless a case set the worker's cap on pipelined jobs, a quarter of
     * the runs have one of 1 to 3, so that a pipeline the cap stops, and
     * then takes the ordinary path, meets every close and reset too. */
    if (!pipe_most && seed % 4 == 0)
        l->piped.most = 1 + (unsigned)(seed / 4 % 3);
    app_reset(seed ^ UINT64_C(0x9e3779b97f4a7c15));

    memset(r, 0, sizeof *r);
    r->out_hash = FUZZ_HASH_INIT;
    memset(&sock, 0, sizeof sock);
    memset(&seen, 0, sizeof seen);
    sock.in = data;
    sock.seed = seed | 1;
    sock.max_write = cfg->max_write;
    sock.r = r;

    struct conn *c = conn_new(l, 3);
    FUZZ_ASSERT(c != NULL);
    conn_drive(c);
    return c;
}

static void run_finish(struct loop *l, const struct harness_config *cfg, struct conn *c,
                       struct harness_result *r);

void harness_run(const uint8_t *data, size_t size, uint64_t seed,
                 const struct harness_config *cfg, struct harness_result *r)
{
    struct options opt;
    static struct loop l;
    struct conn *c = run_start(&l, &opt, data, seed, cfg, r);
    while (sock.delivered < size && !gone(c) && c->state != CONN_LINGER &&
           c->state != CONN_ORPHAN) {
        if (cfg->pool) {
            /* the app moves between the pieces, a data-derived amount */
            if (pass(&l) && fuzz_next(&sock.seed) % 2)
                continue;
            if (cfg->drop && (c->state == CONN_APP || c->state == CONN_HOLD || c->pipe_head) && fuzz_next(&sock.seed) % 16 == 0) {
                /* The whole --io-timeout passes. The app is cut off (ORPHAN)
                 * unless its thread is waiting for the loop (an answer owed):
                 * then the timer is only re-armed (conn_on_timeout). */
                l.now_ms += opt.io_timeout_ms + 1;
                conn_on_timeout(c);
                if (c->state == CONN_ORPHAN || gone(c)) {
                    r->dropped = true;
                    break;
                }
            }
            if (cfg->drop && fuzz_next(&sock.seed) % 32 == 0) {
                /* The peer resets, with bytes of the stream unread maybe.
                 * Nobody reads what follows: a connection whose request is
                 * with the app (or ready for it) is given up at once, and
                 * the app told (job_lost: a job not yet started is handed
                 * back unrun, as job_skip does). */
                enum conn_state was = c->state;
                sock.reset = true;
                event(c, EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR);
                if (was == CONN_APP || was == CONN_READY)
                    FUZZ_ASSERT(c->state == CONN_ORPHAN || gone(c));
                r->dropped = true;
                break;
            }
        }
        size_t piece = cfg->max_piece ? 1 + (size_t)(fuzz_next(&sock.seed) % cfg->max_piece) : size;
        if (piece > size - sock.delivered)
            piece = size - sock.delivered;
        sock.delivered += piece;
        event(c, EPOLLIN);
    }
    run_finish(&l, cfg, c, r);
}

/* The end of a run: the peer's EOF, then every check. */
static void run_finish(struct loop *l, const struct harness_config *cfg, struct conn *c,
                       struct harness_result *r)
{
    if (cfg->pool)
        settle(l); /* as inline would have: every request here is answered */
    r->closed_early = gone(c) || c->state == CONN_LINGER || c->state == CONN_ORPHAN;
    if (!gone(c) && c->state != CONN_ORPHAN) {
        sock.eof = true;
        event(c, EPOLLIN | EPOLLRDHUP);
    }
    if (cfg->pool)
        settle(l);
    if (!gone(c))
        conn_abort(c);
    if (cfg->pool)
        settle(l); /* the app hands back what it held: ORPHAN ends */
    FUZZ_ASSERT(gone(c) && app_pool_idle());
    FUZZ_ASSERT(sock.closed && l->nconns == 1 && !dispatch_first_waiting(&l->disp) &&
                dispatch_outstanding_total(&l->disp) == 0);
    r->app_runs = app_runs();
    r->body_error = app_body_error();
    /* Every request the app ran got its response, unless one closed the
     * connection first, or the loop gave up on it (a timeout, or the peer
     * gone in the middle of a body) and told the app so. */
    FUZZ_ASSERT(sock.next_seq == r->app_runs || r->closing_seen || r->dropped || app_lost());
    /* Every response written was reported, as sent, unless the connection
     * was dropped with a write still under way. */
    if (!r->dropped) {
        FUZZ_ASSERT(seen.n == r->responses);
        for (unsigned i = 0; i < seen.n && i < HARNESS_KEEP_STATUSES; i++)
            FUZZ_ASSERT(seen.statuses[i] == r->statuses[i]);
    }
    conn_reap(l);
    FUZZ_ASSERT(l->nconns == 0 && l->piped.jobs == 0);
    /* Every job the pool held is back on the free list. */
    struct job *const *jobs;
    size_t n = app_pool_jobs(&jobs);
    for (size_t i = 0; i < n; i++) {
        const struct job *j = l->free_list.jobs;
        while (j && j != jobs[i])
            j = j->next_free;
        FUZZ_ASSERT(j != NULL);
    }
    jobs_free_all(l);
    dispatch_destroy(&l->disp);
}

/* The scripted runs' pool: one thread, whose queue never fills. */
static const struct harness_config one_thread = {.max_head = 8192, .pool = true, .capacity = 1024};

static struct conn *one_thread_start(struct loop *l, struct options *opt, const char *raw,
                                     struct harness_result *r)
{
    struct conn *c = run_start(l, opt, (const uint8_t *)raw, 1, &one_thread, r);
    app_never_full();
    return c;
}

unsigned harness_pipeline_bound(uint64_t pace_ns, uint64_t slow_ns, unsigned others, unsigned n)
{
    static char raw[64 * 64];
    size_t len = 0, first = 0;
    FUZZ_ASSERT(n < 64);
    for (unsigned i = 0; i <= n; i++) {
        len += (size_t)snprintf(raw + len, sizeof raw - len, "GET /p%02u HTTP/1.1\r\nHost: h\r\n\r\n", i);
        if (i == 0)
            first = len;
    }
    struct harness_result r;
    struct options opt;
    static struct loop l;
    struct conn *c = one_thread_start(&l, &opt, raw, &r);
    /* One request answered: the connection knows its responses' size. */
    sock.delivered = first;
    event(c, EPOLLIN);
    settle(&l);
    FUZZ_ASSERT(r.responses == 1 && c->state == CONN_HEAD);
    /* The one thread, measured, runs another connection's request that has
     * just started, with others - 1 more queued behind it. */
    struct dispatch *d = &l.disp;
    struct dispatch_thread *t = &d->t[0];
    dispatch_clock(d, d->now_ns + 1000000);
    dispatch_settle(d);
    t->pace_ns = pace_ns;
    t->slow_ns = slow_ns;
    t->outstanding += others;
    d->outstanding_total += others;
    t->busy_since_ns = d->now_ns;
    sock.delivered = len;
    event(c, EPOLLIN);
    unsigned bound = t->outstanding - others;
    t->outstanding -= others; /* those others were never the pool's: gone again */
    d->outstanding_total -= others;
    run_finish(&l, &one_thread, c, &r);
    FUZZ_ASSERT(r.responses == n + 1);
    return bound;
}

unsigned harness_stop_pipelined(bool thread_frees_first)
{
    static const char raw[] = "GET /p00 HTTP/1.1\r\nHost: h\r\n\r\nGET /p01 HTTP/1.1\r\nHost: h\r\n\r\n";
    struct harness_result r;
    struct options opt;
    static struct loop l;
    struct conn *c = one_thread_start(&l, &opt, raw, &r);
    /* The one thread, measured at 50 ms a request (a depth of one, past
     * DISPATCH_ALONE_NS too), runs another connection's request: both of
     * c's wait, the first parked. */
    struct dispatch *d = &l.disp;
    struct dispatch_thread *t = &d->t[0];
    dispatch_clock(d, d->now_ns + 1000000);
    dispatch_settle(d);
    t->pace_ns = t->slow_ns = 50000000;
    t->outstanding++;
    d->outstanding_total++;
    t->busy_since_ns = d->now_ns;
    sock.delivered = sizeof raw - 1;
    event(c, EPOLLIN);
    FUZZ_ASSERT(c->state == CONN_QUEUED);
    /* That request ends: c's first takes the thread, alone (a first turn),
     * and another connection's request queues behind it. */
    t->outstanding--;
    d->outstanding_total--;
    FUZZ_ASSERT(retry_pending(&l) && c->state == CONN_APP && !c->pipe_head);
    t->outstanding++;
    d->outstanding_total++;
    /* c's first is answered; its second, framed from the buffer, waits
     * for the thread. */
    settle(&l);
    FUZZ_ASSERT(r.responses == 1 && c->state == CONN_QUEUED && c->pipelined);
    l.stopping = true; /* loop_stop */
    conn_stop(c);
    if (!thread_frees_first)
        conn_stop_unstarted(c);
    t->outstanding--; /* the other connection's request ends */
    d->outstanding_total--;
    retry_pending(&l);
    conn_stop_unstarted(c);
    run_finish(&l, &one_thread, c, &r);
    return r.app_runs;
}

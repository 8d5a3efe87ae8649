/* loop.h — the event-loop thread of one worker and its connections.
 *
 * The loop thread owns every socket: it accepts, reads, parses, hands each
 * request to a pool thread through the handoff, and writes the responses.
 * It never touches a Python object (except in --inline mode, where it is the
 * app's thread too). It is only a loop: a feature (the watchdog, --reload,
 * the access log, a worker's replacement, the live metrics) reaches it
 * through hooks that the worker's services register (core/services/). */
#ifndef CSERVE_LOOP_H
#define CSERVE_LOOP_H

#include <stdbool.h>
#include <stdint.h>

#include "../base/stats.h"
#include "../http/http_parser.h"
#include "conn.h"
#include "dispatch.h"
#include "timer.h"

struct options;
struct handoff;
struct server_signal;
struct loop;
struct loop_snapshot;

/* One response the server made, as the response hooks see it: the app's,
 * or one the loop made itself. */
struct loop_response {
    const struct http_request *req; /* its request's head; NULL when none parsed ... */
    const char *line;               /* ... then the first line the client sent, as sent */
    size_t line_len;                /* (up to its line end, or all the client sent) */
    const char *peer;               /* the connection's address ("" for a unix: socket) */
    int status;
    uint64_t body_bytes;
    uint64_t head_ns, end_ns;       /* the head framed, the last byte written (clock_ns) */
};

/* A feature's hooks into the loop, which knows none of them by name: the
 * worker's services (core/services/) register them. Every member but ctx
 * may be NULL. Each is called on the loop thread. */
struct loop_hook {
    void *ctx;
    /* Once a pass, after its events, the hand-off's completions and the
     * timers; l->now_ms is the pass's time. */
    void (*tick)(void *ctx, struct loop *l);
    /* Before the loop waits: the wait it may take, timeout_ms or shorter
     * (when this feature has something due sooner). No system call. */
    int (*before_sleep)(void *ctx, struct loop *l, int timeout_ms);
    /* A signal the loop read from the process's signal pipe (SIGTERM and
     * SIGINT too, after the loop began to stop). */
    void (*signal)(void *ctx, struct loop *l, const struct server_signal *si);
    /* A response's last byte was written (with a pool, the loop thread's
     * time per request: keep it short). */
    void (*response)(void *ctx, const struct loop_response *r);
};
#define LOOP_MAX_HOOKS 8

/* A descriptor of a feature's own in the loop's epoll (readable: ready). */
struct loop_watch {
    struct poll_src src;
    void (*ready)(struct loop_watch *w, struct loop *l);
};

struct loop {
    const struct options *opt;
    int epfd;
    int listen_fd;
    struct poll_src listener_src, handoff_src, signal_src;
    int signal_fd;
    struct handoff *handoff;   /* NULL with --inline or native-hello */
    struct dispatch disp;      /* which pool thread runs which request (dispatch.h) */
    struct conn conns;         /* sentinel of the list of all connections */
    unsigned nconns;
    struct conn *closed;       /* connections to free at the end of this pass */
    struct {                   /* pipelined jobs, behind their connection's first (conn_request.c) */
        unsigned jobs;         /* in every connection's pipe list */
        unsigned most;         /* at most, so that their file responses' descriptors are bounded */
    } piped;
    struct {                   /* the free list of jobs (jobs.c bounds both) */
        struct job *jobs;
        unsigned count;        /* jobs on it */
        size_t bytes;          /* the buffers they keep */
        size_t freed_bytes;    /* buffers jobs.c freed since it last gave memory back */
        uint64_t released_ms;  /* when it last did */
    } free_list;
    struct timer_list t_header, t_keepalive, t_io, t_linger, t_hold;
    uint64_t now_ms;
    struct {                   /* accepts paused for want of descriptors (loop.c) */
        uint64_t until_ms;     /* 0: accepting */
        uint64_t since_ms;     /* the episode's first pause; 0: none */
        uint64_t logged_ms;    /* the episode's last line */
        unsigned unlogged;     /* pauses since that line */
    } accept_pause;
    bool stopping;
    bool retiring;             /* stopping because replaced: idle connections are not cut
                                * (conn_stop_if_idle), their keep-alive timer ends them */
    bool refusing;             /* the app cannot answer (loop_refuse): accept nothing, a
                                * request not yet with the app gets a 503 that closes,
                                * each connection closes after what the app has of it */
    struct {                   /* while stopping or refusing */
        uint64_t deadline_ms;  /* --graceful-timeout's end (loop_stop) */
        uint64_t swept_ms;     /* the last look at every connection (sweep_due) */
        unsigned sweeps;       /* looks so far, counted up to 2 */
    } stop;
    struct loop_stats lstats;
    const struct loop_hook *hooks[LOOP_MAX_HOOKS];
    unsigned nhooks;
    const struct loop_hook *responders[LOOP_MAX_HOOKS]; /* the hooks with a response */
    unsigned nresponders;
};

int loop_init(struct loop *l, const struct options *opt, int listen_fd, struct handoff *h, unsigned threads);
/* Register h (kept, not copied) for the rest of the loop's life. 0, or -1
 * when LOOP_MAX_HOOKS are registered. */
int loop_hook_add(struct loop *l, const struct loop_hook *h);
/* Watch fd (readable) in the loop's epoll: w->ready is called on the loop
 * thread. The caller owns fd and closes it after loop_run. 0, or -1 with errno. */
int loop_watch_fd(struct loop *l, int fd, struct loop_watch *w);
/* Stop accepting, take what the listener's backlog already holds, and
 * drain: each connection answers the requests the app has of it and runs
 * no more (conn_stop); the loop returns once every connection is done (or
 * at --graceful-timeout). retiring: a successor serves, so an idle keep-alive
 * connection is left to its timer rather than cut under a client that may
 * be sending. Once only; later calls do nothing. */
void loop_stop(struct loop *l, bool retiring);
/* The app can no longer be relied on to answer (a pool thread is stuck in
 * it): stop accepting (the listener's backlog waits for the successor),
 * answer each request not yet with the app, the ones parked for room
 * included, with a 503 that closes, and close idle connections; requests
 * the app holds finish, or are refused by the caller (conn_refuse). As in
 * a stop, each connection answers what the app has of it and no more, the
 * last response closing it (conn_stop). Once; the loop runs on until
 * stopped as usual. */
void loop_refuse(struct loop *l);
/* Submit to pool threads 0..n-1 only from now on (1 <= n <= threads); the
 * threads at n and above must have nothing outstanding, so that lowering n
 * retires a thread the chooser has already left idle. Returns 0, or -1
 * (nothing changed) when n is out of range or a thread above it still has
 * jobs. */
int loop_set_active(struct loop *l, unsigned n);
/* Copy what the metrics read of l into out (its queues and connections:
 * struct loop_snapshot, ../metrics/metrics.h). On the loop thread. */
void loop_snapshot(const struct loop *l, struct loop_snapshot *out);
/* Run until stopped and drained (or the graceful timeout passes). Returns the
 * number of requests still with the app when it gave up (0 = clean). */
unsigned loop_run(struct loop *l);
void loop_destroy(struct loop *l);

/* Tell the response hooks (finish_one, conn_request.c). Inline, and only
 * when one is registered: r's clock reads are made for them alone. */
static inline void loop_responded(const struct loop *l, const struct loop_response *r)
{
    for (unsigned i = 0; i < l->nresponders; i++)
        l->responders[i]->response(l->responders[i]->ctx, r);
}

#endif

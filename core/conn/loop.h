/* loop.h — the event-loop thread of one worker and its connections.
 *
 * The loop thread owns every socket: it accepts, reads, parses, hands each
 * request to a pool thread through the handoff, and writes the responses.
 * It never touches a Python object (except in --inline mode, where it is the
 * app's thread too). */
#ifndef CSERVE_LOOP_H
#define CSERVE_LOOP_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "../http/buffer.h"
#include "../python/job.h"
#include "../server/stats.h"
#include "timer.h"

struct options;
struct handoff;
struct lifecycle;

#define CONN_IOV 32 /* responses one write may carry */
/* The longest a finished response waits for the pipelined ones behind it,
 * so that they leave in one write (conn_hold, answer_pipelined). */
#define CONN_HOLD_MS 2

/* What an epoll event's data.ptr points at. */
enum poll_kind { POLL_CONN, POLL_LISTENER, POLL_HANDOFF, POLL_SIGNAL };
struct poll_src {
    enum poll_kind kind;
};

/* Where a connection is in the life of a request (core/README.md has the
 * diagram). Exactly one is current; only conn*.c assign it. */
enum conn_state {
    CONN_HEAD,          /* reading a request head (an idle keep-alive connection too) */
    CONN_PREREAD,       /* reading the body before the app runs: a window of it, or
                         * all of it when the app runs on the loop thread (--inline) */
    CONN_READY,         /* the request is framed: hand it to the app */
    CONN_QUEUED,        /* the handoff was full: waiting on the loop's pending list */
    CONN_APP,           /* the app runs the request; nothing to do until it posts */
    CONN_HOLD,          /* the response is done, but pipelined requests behind it
                         * are still with the app: their responses leave together */
    CONN_BODY,          /* the app asked for body bytes: fill its window, then ack */
    CONN_SEND_CONTINUE, /* writing "100 Continue", then reading the body */
    CONN_SEND_PART,     /* writing a part the app flushed, then ack */
    CONN_SEND_LAST,     /* writing the end of a response, then the next request */
    CONN_SEND_ERROR,    /* writing the loop's own error response, then linger */
    CONN_LINGER,        /* write side shut: discarding input until EOF or the timer */
    CONN_ORPHAN,        /* socket closed while the app holds the job: kept until
                         * the job comes back (JOB_DONE) */
    CONN_CLOSED,        /* done: the loop frees it at the end of its pass */
};

/* Who holds the connection's job (when it has one). Stored, never inferred:
 * it decides whether a closing connection can be freed or must wait. */
enum job_holder {
    HOLDER_LOOP,      /* not submitted yet, or back for good (JOB_DONE) */
    HOLDER_APP,       /* the app runs with it; the loop must not touch it */
    HOLDER_APP_WAITS, /* the app posted a message and waits for job_ack */
};

struct conn {
    struct poll_src src;
    int fd;
    enum conn_state state;
    enum job_holder holder;
    /* Socket readiness as edge-triggered epoll reported it (not states). */
    bool readable;       /* data (or EOF) may be waiting */
    bool peer_shut;      /* the peer's FIN/RST was reported: no further edge will come */
    bool peer_gone;      /* a reset or an error (EPOLLERR/EPOLLHUP): nothing can be sent back */
    bool writable;       /* the send buffer has room */
    bool stop_probe;     /* shutting down: the last read of an idle connection is done */
    struct loop *loop;
    struct conn *prev, *next;         /* all connections (for shutdown) */
    struct conn *pending_next;        /* CONN_QUEUED: the loop's pending list */
    struct conn *closed_next;         /* CONN_CLOSED: the loop's list to free */
    struct timer_link timer;

    struct buffer rbuf;  /* request bytes; the current head starts at 0 */
    size_t scanned;      /* rbuf bytes already checked for a line end */
    size_t consumed;     /* rbuf bytes the request in flight accounts for */
    struct job *job;
    char *win;           /* the body window, lent to the job reading a body */
    size_t win_cap;
    struct buffer raw;   /* the chunked decoder's input, lent the same way */

    struct job *pipe_head, *pipe_tail; /* pipelined requests submitted behind `job`, in order */
    struct job *pipe_done; /* the last of them conn_hold found finished (NULL: none yet) */
    size_t resp_max;     /* the largest response part the app made here: what the next
                          * pipelined one is expected to cost (conn_pipeline) */
    bool hold_over;      /* CONN_HOLD waited its longest: write what is finished */
    unsigned wjobs;      /* pipelined responses in wv after job's (CONN_SEND_LAST) */
    struct iovec wv[CONN_IOV]; /* memory still to write, in order */
    int wvcnt;
    int wfile_fd;        /* then this file, from wfile_off, wfile_left bytes */
    off_t wfile_off;
    uint64_t wfile_left;
    char *err_resp;      /* an error response the loop made itself */

    char remote_addr[64];
    char remote_port[8];
};

struct loop {
    const struct options *opt;
    int epfd;
    int listen_fd;
    struct poll_src listener_src, handoff_src, signal_src;
    int signal_fd;
    struct handoff *handoff;   /* NULL with --inline or native-hello */
    unsigned workers;          /* pool threads */
    unsigned *outstanding;     /* per pool thread: jobs submitted, not yet done */
    /* Per pool thread, for the app's silence timeout (conn_on_timeout): when
     * the loop last heard from it (a message) or answered it (an ack), and
     * how many of its messages the loop has taken and not yet answered. A
     * request queued behind another on a busy thread is waiting, not stuck. */
    uint64_t *worker_seen_ms;
    unsigned *worker_owed;
    unsigned outstanding_total;
    unsigned capacity;
    struct conn conns;         /* sentinel of the list of all connections */
    unsigned nconns;
    struct conn *pending_head, *pending_tail;
    struct conn *closed;       /* connections to free at the end of this pass */
    struct job *free_jobs;
    unsigned free_count;       /* jobs on free_jobs */
    size_t free_bytes;         /* the buffers they keep (jobs.c bounds both) */
    size_t freed_bytes;        /* buffers jobs.c freed since it last gave memory back */
    uint64_t released_ms;      /* when it last did */
    struct timer_list t_header, t_keepalive, t_io, t_linger, t_hold;
    uint64_t now_ms;
    uint64_t accept_paused_until;
    bool stopping;
    bool no_doze;              /* the kernel lacks epoll_pwait2: always before_sleep */
    uint64_t stop_deadline_ms;
    double window_at;          /* --stats-window: when the window starts (0 = done) */
    struct stats *stats;
    const char *stats_path;    /* --stats-json: the file this worker writes (its part with --workers) */
    int stats_parent;          /* --workers: the supervisor's pid, told when the part is written */
    struct loop_stats lstats;
    struct lifecycle *life;    /* when this worker is replaced (lifecycle.h) */
    pid_t handover;            /* stopping because this successor serves (one worker alone) */
    int stop_signal;           /* SIGTERM/SIGINT received (0: none) */
    uint64_t watchdog_next_ms; /* --app-timeout: next look at the pool threads */
    uint64_t *watchdog_fired;  /* per pool thread: the app_since_ms already reported */
    bool retiring;             /* stopping because replaced: idle connections are not cut
                                * (conn_stop_if_idle), their keep-alive timer ends them */
    long fault_submit_ms;      /* tests: CSERVE_FAULT_SUBMIT=ms refuses submits as full for
                                * ms after the first one, then fails them (-1: off) */
    uint64_t fault_since_ms;
};

int loop_init(struct loop *l, const struct options *opt, int listen_fd, struct handoff *h,
              unsigned workers, struct stats *stats);
/* Run until stopped and drained (or the graceful timeout passes). Returns the
 * number of requests still with the app when it gave up (0 = clean). */
unsigned loop_run(struct loop *l);
void loop_destroy(struct loop *l);

/* conn.c: what the loop tells a connection. None of these frees it: a
 * connection that is done goes on l->closed, and the loop calls conn_reap at
 * the end of its pass, when no caller can still hold the pointer. */
void conn_accept(struct loop *l, int fd, const struct sockaddr_storage *addr);
void conn_on_event(struct conn *c, uint32_t events);
void conn_on_message(struct conn *c, struct job *job);
void conn_on_timeout(struct conn *c);
void conn_retry_submit(struct conn *c);   /* CONN_QUEUED: there may be room now */
void conn_stop_if_idle(struct conn *c);
void conn_abort(struct conn *c);          /* close it, whatever it was doing */
void conn_reap(struct loop *l);           /* free the CONN_CLOSED ones */

/* jobs.c: the loop's free list of jobs */
struct job *job_get(struct loop *l);
void job_put(struct loop *l, struct job *job);
void jobs_free_all(struct loop *l);
/* Once a pass: if the free list let go of much memory lately, ask the
 * allocator to return it to the system (at most once a second). */
void jobs_release_memory(struct loop *l);

#endif

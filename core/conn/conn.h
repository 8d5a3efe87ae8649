/* conn.h — one client connection: where it is in the life of a request, what
 * it holds, and what the loop tells it (conn.c). The stages that run it have
 * their own headers (conn_state.h, conn_request.h, conn_body.h,
 * conn_write.h); the loop that owns it is loop.h. */
#ifndef CSERVE_CONN_H
#define CSERVE_CONN_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "../http/buffer.h"
#include "../python/job.h"
#include "timer.h"

struct loop;

#define CONN_IOV 32 /* responses one write may carry */
/* The longest a finished response waits for the pipelined ones behind it,
 * so that they leave in one write (conn_hold, answer_pipelined). */
#define CONN_HOLD_MS 2

/* What an epoll event's data.ptr points at. */
enum poll_kind { POLL_CONN, POLL_LISTENER, POLL_HANDOFF, POLL_SIGNAL, POLL_WATCH };
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
    CONN_SEND_LAST,     /* writing the end of a response */
    CONN_SENT,          /* the response is out: drop its requests, then the next */
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
    bool pipelined;      /* the request on stage came in rbuf behind an answered one (not
                          * empty lines only): the client sent it before it read that
                          * answer (conn_finish) */
    bool turn;           /* CONN_READY off the head of the pending list: it goes before
                          * the ones still waiting (conn_start_app) */
    int64_t turn_credit_ns; /* what its turns may still queue while others wait, in ns of
                             * its requests' time; below 0, a debt (dispatch_turn) */
    struct loop *loop;
    struct conn *prev, *next;         /* all connections (for shutdown) */
    struct conn *pending_prev, *pending_next; /* CONN_QUEUED: the loop's pending list */
    struct conn *closed_next;         /* CONN_CLOSED: the loop's list to free */
    struct timer_link timer;

    struct buffer rbuf;  /* request bytes; the current head starts at 0 */
    size_t scanned;      /* rbuf bytes already checked for a line end */
    size_t consumed;     /* rbuf bytes the request in flight accounts for */
    size_t tail_from, tail_len; /* rbuf from tail_from on held no request that could run as
                                 * it was when rbuf.len was tail_len (0: not known); next_whole */
    struct job *job;
    char *win;           /* the body window, lent to the job reading a body */
    size_t win_cap;
    struct buffer raw;   /* the chunked decoder's input, lent the same way */

    struct job *pipe_head, *pipe_tail; /* pipelined requests submitted behind `job`, in order */
    struct job *pipe_done; /* the last of them conn_hold found finished (NULL: none yet) */
    size_t resp_max;     /* the largest response part the app made here: what the next
                          * pipelined one is expected to cost (conn_pipeline) */
    bool hold_over;      /* CONN_HOLD waited its longest: write what is finished */
    bool part_sent;      /* a part of job's response is queued or written (JOB_FLUSH):
                          * no other response can take its place */
    unsigned wjobs;      /* pipelined responses in wv after job's (CONN_SEND_LAST) */
    struct iovec wv[CONN_IOV]; /* memory still to write, in order */
    int wvcnt;
    int wfile_fd;        /* then this file, from wfile_off, wfile_left bytes */
    off_t wfile_off;
    uint64_t wfile_left;
    struct buffer err_resp; /* an error response the loop made itself */
    int err_status;      /* ... and its status */

    char remote_addr[64];
    char remote_port[8];
};

/* A connection on socket fd, in CONN_HEAD with its header timer armed; no
 * system call (conn_accept makes them). NULL when out of memory. */
struct conn *conn_new(struct loop *l, int fd);
/* Run the current state's handler, and the next one's while each says the
 * state changed; act on the last verdict. */
void conn_drive(struct conn *c);

/* What the loop tells a connection. None of these frees it: a
 * connection that is done goes on l->closed, and the loop calls conn_reap at
 * the end of its pass, when no caller can still hold the pointer. */
void conn_accept(struct loop *l, int fd, const struct sockaddr_storage *addr);
void conn_on_event(struct conn *c, uint32_t events);
void conn_on_message(struct conn *c, struct job *job);
void conn_on_timeout(struct conn *c);
void conn_retry_submit(struct conn *c);   /* CONN_QUEUED: there may be room now */
/* The app will not answer c's current request (its pool thread is stuck):
 * a 503 that closes in its place, or, when part of its response is out or
 * the app waits for the loop, the connection closed. */
void conn_refuse(struct conn *c);
void conn_stop(struct conn *c);           /* the loop stops or refuses: mark the last request answered */
void conn_stop_if_idle(struct conn *c);
/* Once the loop stops: c closes if the request on stage came pipelined
 * behind an answered one and the app does not have it yet. */
void conn_stop_unstarted(struct conn *c);
void conn_abort(struct conn *c);          /* close it, whatever it was doing */
/* How many pipelined jobs, behind their connections' first, a worker keeps
 * at most (loop.piped): half of RLIMIT_NOFILE, because each may end as a
 * file response that holds a descriptor until its turn to be written. */
unsigned conn_pipe_most(void);
void conn_reap(struct loop *l);           /* free the CONN_CLOSED ones */

#endif

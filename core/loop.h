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

#include "buffer.h"
#include "job.h"
#include "stats.h"
#include "timer.h"

struct options;
struct handoff;

/* What an epoll event's data.ptr points at. */
enum poll_kind { POLL_CONN, POLL_LISTENER, POLL_HANDOFF, POLL_SIGNAL };
struct poll_src {
    enum poll_kind kind;
};

enum conn_state {
    CONN_HEAD,   /* waiting for a complete request head */
    CONN_APP,    /* the request is with the app; nothing to do until it posts */
    CONN_BODY,   /* the app waits for body bytes (or --inline waits for the whole body) */
    CONN_WRITE,  /* writing a response, a part of one, or 100 Continue */
    CONN_LINGER, /* response sent and write side shut: discarding input until EOF */
};

/* What to do once the write queue is empty. */
enum after_write { AW_FINISH, AW_ACK, AW_BODY, AW_CLOSE };

struct conn {
    struct poll_src src;
    int fd;
    enum conn_state state;
    enum after_write after_write;
    bool readable;       /* edge-triggered: data may be waiting */
    bool peer_shut;      /* the peer's FIN/RST was reported: no further edge will come */
    bool writable;       /* edge-triggered: send buffer has room */
    bool dead;           /* socket closed; kept only until the app's job returns */
    bool stop_read;      /* shutting down: the last read of an idle connection is done */
    bool prereading;     /* reading the body before calling the app: all of it with
                          * --inline, else up to PREREAD_MAX (so a small body costs
                          * the app no round trip to the loop) */
    struct loop *loop;
    struct conn *prev, *next;         /* all connections (for shutdown) */
    struct conn *pending_next;        /* waiting for room in the handoff */
    bool pending;
    struct timer_link timer;

    struct buffer rbuf;  /* request bytes; the current head starts at 0 */
    size_t scanned;      /* rbuf bytes already checked for a line end */
    size_t consumed;     /* rbuf bytes the request in flight accounts for */
    struct job *job;

    struct iovec wv[2];  /* memory still to write, in order */
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
    unsigned outstanding_total;
    unsigned capacity;
    struct conn conns;         /* sentinel of the list of all connections */
    unsigned nconns;
    struct conn *pending_head, *pending_tail;
    struct job *free_jobs;
    struct timer_list t_header, t_keepalive, t_io, t_linger;
    uint64_t now_ms;
    uint64_t accept_paused_until;
    bool stopping;
    uint64_t stop_deadline_ms;
    double window_at;          /* --stats-window: when the window starts (0 = done) */
    struct stats *stats;
    struct loop_stats lstats;
    long fault_submit_ms;      /* tests: CSERVE_FAULT_SUBMIT=ms refuses submits as full for
                                * ms after the first one, then fails them (-1: off) */
    uint64_t fault_since_ms;
};

/* Pool threads read this when they build a response head: once it is set,
 * responses say "Connection: close". */
extern atomic_bool server_stopping;

int loop_init(struct loop *l, const struct options *opt, int listen_fd, struct handoff *h,
              unsigned workers, struct stats *stats);
/* Run until stopped and drained (or the graceful timeout passes). Returns the
 * number of requests still with the app when it gave up (0 = clean). */
unsigned loop_run(struct loop *l);
void loop_destroy(struct loop *l);

/* conn.c */
void conn_accept(struct loop *l, int fd, const struct sockaddr_storage *addr);
void conn_on_event(struct conn *c, uint32_t events);
void conn_on_message(struct conn *c, struct job *job);
void conn_on_timeout(struct conn *c);
void conn_retry_submit(struct conn *c);
void conn_stop_if_idle(struct conn *c);
void conn_close(struct conn *c);

/* jobs.c: the loop's free list of jobs */
struct job *job_get(struct loop *l);
void job_put(struct loop *l, struct job *job);
void jobs_free_all(struct loop *l);

#endif

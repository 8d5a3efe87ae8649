/* conn_internal.h — what the conn_*.c files share; the loop sees loop.h only.
 *
 * Every handler below runs the connection's current state one step and
 * returns a verdict to the driver (conn_drive in conn.c). No handler calls
 * the next stage: it sets the next state and returns VERDICT_NEXT, and the
 * driver calls that state's handler. So nothing is re-entered, and only the
 * driver acts on VERDICT_CLOSE. */
#ifndef CSERVE_CONN_INTERNAL_H
#define CSERVE_CONN_INTERNAL_H

#include <sys/types.h>
#include <sys/uio.h>

#include "loop.h"

enum verdict {
    VERDICT_NEXT,  /* the state changed: run the new state's handler now */
    VERDICT_WAIT,  /* nothing more to do until an event (socket, app message, timer) */
    VERDICT_CLOSE, /* the connection is over (peer gone, fatal error, timeout) */
};

/* conn.c */
/* A connection on socket fd, in CONN_HEAD with its header timer armed; no
 * system call (conn_accept makes them). NULL when out of memory. */
struct conn *conn_new(struct loop *l, int fd);
void conn_drive(struct conn *c);
void conn_set_state(struct conn *c, enum conn_state s);
/* Read into dst. Returns bytes read, 0 when nothing is waiting, -1 when the
 * peer closed or failed. */
ssize_t conn_recv(struct conn *c, char *dst, size_t room);
/* Mark a job's client gone; if the app waits for an answer (waits), give
 * it now so the app ends soon. */
void conn_release(struct job *job, bool waits);
/* Answer the app's pending message and give the job back to it. */
void conn_ack(struct conn *c);

/* conn_request.c: from bytes to a framed request and back */
enum verdict conn_read_head(struct conn *c);   /* CONN_HEAD */
enum verdict conn_start_app(struct conn *c);   /* CONN_READY */
enum verdict conn_take_message(struct conn *c);/* the job's message → the next state */
enum verdict conn_finish(struct conn *c);      /* the response is out */
enum verdict conn_hold(struct conn *c);        /* CONN_HOLD */
/* Submit complete requests pipelined behind c->job to its pool thread, as
 * far as the connection's budget allows (more as its responses leave). */
void conn_pipeline(struct conn *c);

/* conn_body.c: the request body, from the socket into the app's window */
int conn_body_start(struct conn *c, size_t head_len); /* 0 or an error status */
enum verdict conn_preread(struct conn *c);     /* CONN_PREREAD */
enum verdict conn_fill_body(struct conn *c);   /* CONN_BODY */
void conn_window_return(struct conn *c, struct job *job); /* the job's body window back */
void conn_window_free(struct conn *c);

/* conn_write.c */
void conn_queue(struct conn *c, const char *a, size_t alen);
void conn_queue_continue(struct conn *c);     /* → CONN_SEND_CONTINUE */
void conn_queue_pipelined(struct conn *c);
enum verdict conn_send(struct conn *c);        /* CONN_SEND_* */
enum verdict conn_fail(struct conn *c, int status); /* → CONN_SEND_ERROR */
enum verdict conn_shutdown(struct conn *c);    /* → CONN_LINGER */
enum verdict conn_linger(struct conn *c);      /* CONN_LINGER */

/* conn_io.c: the only system calls a connection makes after accept; the
 * fuzzers link their own versions (tests/fuzz/fuzz_conn_io.c). */
ssize_t conn_io_recv(int fd, void *buf, size_t len);
ssize_t conn_io_writev(int fd, const struct iovec *iov, int cnt);
ssize_t conn_io_sendfile(int fd, int file_fd, off_t *off, size_t len);
void conn_io_shutdown(int fd);
void conn_io_close(int fd);
/* Close a socket the loop registered, deleting its registration first. */
void conn_io_close_socket(int epfd, int fd);

#endif

/* conn_state.h — what every stage of a connection shares (conn_state.c):
 * the verdict a handler returns, the state change, reading the socket, and
 * answering the app.
 *
 * Every handler (conn_request.h, conn_body.h, conn_write.h) runs the
 * connection's current state one step and returns a verdict to the driver
 * (conn_drive in conn.c). A handler never runs another state's handler: it
 * sets the next state (itself, or through a helper such as conn_fail or
 * conn_shutdown) and returns VERDICT_NEXT, and the driver runs that state's
 * handler. So nothing is re-entered, and only the driver acts on
 * VERDICT_CLOSE. */
#ifndef CSERVE_CONN_STATE_H
#define CSERVE_CONN_STATE_H

#include <stdbool.h>
#include <sys/types.h>

#include "conn.h"

enum verdict {
    VERDICT_NEXT,  /* the state changed: run the new state's handler now */
    VERDICT_WAIT,  /* nothing more to do until an event (socket, app message, timer) */
    VERDICT_CLOSE, /* the connection is over (peer gone, fatal error, timeout) */
};

void conn_set_state(struct conn *c, enum conn_state s);
/* Read into dst. Returns bytes read, 0 when nothing is waiting, -1 when the
 * peer closed or failed. */
ssize_t conn_recv(struct conn *c, char *dst, size_t room);
/* Mark a job's client gone; if the app waits for an answer (waits), give
 * it now so the app ends soon. */
void conn_release(struct job *job, bool waits);
/* Answer the app's pending message and give the job back to it. */
void conn_ack(struct conn *c);

#endif

/* conn_request.h — from bytes to a framed request, to the app, and back
 * (conn_request.c). */
#ifndef CSERVE_CONN_REQUEST_H
#define CSERVE_CONN_REQUEST_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "conn_state.h"

enum verdict conn_read_head(struct conn *c);   /* CONN_HEAD */
enum verdict conn_start_app(struct conn *c);   /* CONN_READY */
enum verdict conn_take_message(struct conn *c);/* the job's message → the next state */
enum verdict conn_finish(struct conn *c);      /* CONN_SENT: the response is out */
enum verdict conn_hold(struct conn *c);        /* CONN_HOLD */
/* Submit complete requests pipelined behind c->job to its pool thread, as
 * far as the connection's budget allows (more as its responses leave).
 * While other connections wait for a thread, only at turn (c->job was just
 * submitted) and only a turn's worth (dispatch_turn). */
void conn_pipeline(struct conn *c, bool turn);
/* Put every job of c's pipeline back on the free list (conn_free). */
void conn_pipe_put_all(struct conn *c);
/* Once the loop stops (not refusing): c's request on stage, if the app
 * does not have it yet, is not run, because it came pipelined behind an
 * answered one (conn.pipelined). Where it would reach the app,
 * conn_start_app closes c; conn_stop_unstarted, in the stop's sweep. */
bool conn_stop_skips(const struct conn *c);

#endif

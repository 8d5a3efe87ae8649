/* conn_body.h — the request body, from the socket into the app's window
 * (conn_body.c). */
#ifndef CSERVE_CONN_BODY_H
#define CSERVE_CONN_BODY_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "conn_state.h"

int conn_body_start(struct conn *c, size_t head_len); /* 0 or an error status */
enum verdict conn_preread(struct conn *c);     /* CONN_PREREAD */
enum verdict conn_fill_body(struct conn *c);   /* CONN_BODY */
void conn_window_return(struct conn *c, struct job *job); /* the job's body window back */
void conn_window_free(struct conn *c);

#endif

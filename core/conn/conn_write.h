/* conn_write.h — writes, the loop's own error responses, 100 Continue and
 * lingering close (conn_write.c). */
#ifndef CSERVE_CONN_WRITE_H
#define CSERVE_CONN_WRITE_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "conn_state.h"

void conn_queue(struct conn *c, const char *a, size_t alen);
void conn_queue_continue(struct conn *c);     /* → CONN_SEND_CONTINUE */
void conn_queue_pipelined(struct conn *c);
enum verdict conn_send(struct conn *c);        /* CONN_SEND_* */
enum verdict conn_fail(struct conn *c, int status); /* → CONN_SEND_ERROR */
enum verdict conn_shutdown(struct conn *c);    /* → CONN_LINGER */
enum verdict conn_linger(struct conn *c);      /* CONN_LINGER */

#endif

/* conn_internal.h — what the conn_*.c files share; the loop sees loop.h only. */
#ifndef CSERVE_CONN_INTERNAL_H
#define CSERVE_CONN_INTERNAL_H

#include <sys/types.h>

#include "loop.h"

/* conn.c */
void conn_read_head(struct conn *c);
void conn_dispatch(struct conn *c, struct job *job, size_t head_len);
void conn_submit(struct conn *c);
void conn_run_app(struct conn *c);
void conn_unpend(struct conn *c);
void conn_finish(struct conn *c);
ssize_t conn_recv(struct conn *c, char *dst, size_t room);

/* conn_body.c: the request body, from the socket into the app's window */
int conn_body_start(struct conn *c, size_t head_len); /* 0 or an error status */
void conn_fill_body(struct conn *c);
/* Answer the pool's message: release pairs with the pool's acquire A2 in await_ack (pool.c). */
void job_ack(struct job *job);

/* conn_write.c */
void conn_queue(struct conn *c, const char *a, size_t alen, const char *b, size_t blen);
void conn_write(struct conn *c);
void conn_error(struct conn *c, int status);
void conn_shutdown(struct conn *c);
void conn_linger(struct conn *c);
void access_log_write(struct conn *c, struct job *job);

#endif

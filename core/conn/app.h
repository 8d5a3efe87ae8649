/* app.h — the three ways a request is answered, as the loop sees them. */
#ifndef CSERVE_APP_H
#define CSERVE_APP_H

struct job;
struct loop;

/* --app native-hello: fill job->out with the hello response (no Python). */
void native_hello_respond(struct job *job);

/* --inline: run the WSGI app for job on the calling (loop) thread; the body is
 * complete. On return the job carries a JOB_DONE message. */
void inline_run(struct loop *l, struct job *job);

#endif

/* app.h — the app the loop answers itself, with no Python. (The other two
 * ways a request is answered, a pool thread and --inline, are the job
 * interface's: job.h.) */
#ifndef CSERVE_APP_H
#define CSERVE_APP_H

struct job;

/* --app native-hello: fill job->out with the hello response (no Python). */
void native_hello_respond(struct job *job);

#endif

/* wsgi.h — the bridge between a job and a PEP 3333 application. */
#ifndef CSERVE_WSGI_H
#define CSERVE_WSGI_H

#include <stdbool.h>
#include <stddef.h>

struct forwarded_policy;
struct options;
struct job;

/* Initialise the interpreter, import the app (the default one when
 * opt->app_spec is NULL, found at default_app_dir) and prepare the bridge,
 * which reads a trusted proxy's fields by forwarded (the caller's, kept
 * for the process's life).
 * On failure prints one line naming the problem and exits 2. Returns with
 * the GIL held by the calling thread. */
void wsgi_init(const struct options *opt, const struct forwarded_policy *forwarded, const char *default_app_dir);

/* Run the app for job; GIL held. Posts the response through job.h's
 * job_flush/job_done: when it returns, the job is the loop's. */
void wsgi_handle(struct job *job);

/* Free what the bridge keeps per thread; call on a thread that ran apps,
 * before it exits. */
void wsgi_thread_cleanup(void);

/* --app-timeout: have Python's faulthandler write every thread's stack to
 * stderr when signo is raised (it needs no GIL). GIL held. Returns 0 or -1. */
int wsgi_watchdog_arm(int signo);

/* --reload: the folders of the app's imported modules, leaving out the
 * interpreter's own and site-packages (malloc'd, NULL-terminated; NULL on
 * failure). GIL held. */
char **wsgi_source_dirs(void);

/* Finalise the interpreter (GIL held by the caller). */
void wsgi_finalize(void);

#endif

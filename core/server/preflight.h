/* preflight.h — what a start refuses in the files and addresses it was
 * given, found before anything is opened. The start and --check-config
 * call the same functions, so a configuration --check-config passes is
 * one that starts, and one it refuses fails with the same line. */
#ifndef CSERVE_PREFLIGHT_H
#define CSERVE_PREFLIGHT_H

struct options;

/* As the process is before --user drops root, in the directory it serves
 * from (after --chdir: relative paths mean what they will): the listeners
 * (listen_check), the pid file and the access log can be written. What a
 * server running now holds (its port, its live unix: socket, its pid
 * file's lock) is not refused here: --check-config is run beside the
 * server it checks, and the start refuses those itself. 0, or -1 after one
 * line saying why. */
int preflight_before_drop(const struct options *opt);

/* As the server runs (after --user): --stats-json's file can be written in
 * its folder, which it is only at SIGUSR1 and at exit. 0, or -1 after one
 * line saying why. */
int preflight_as_server(const struct options *opt);

#endif

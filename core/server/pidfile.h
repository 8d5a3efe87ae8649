/* pidfile.h — --pid-file: the server's pid for `kill -HUP $(cat FILE)`,
 * held by one live server at a time. */
#ifndef CSERVE_PIDFILE_H
#define CSERVE_PIDFILE_H

/* Before anything listens: hold path and write this process's pid into
 * it, so that the file names the server before a client can reach it.
 * When a running server holds path: one line naming its pid and exit 2. A
 * file no server holds (one left by a server that was killed) is taken
 * over. Removed at this process's exit if it still holds that pid. Returns
 * 0, or -1 after one line saying why. */
int pidfile_take(const char *path);
/* Remove the file as pidfile_take's exit handler does (if this process
 * took it and it still holds this pid): for an exit that skips atexit. */
void pidfile_release(void);
/* The held file's descriptor (-1: none), for a server that execs itself in
 * place (lifecycle_exec_supervisor): the lock lives on in the new image
 * through it. */
int pidfile_fd(void);
/* That new image: hold path through fd, inherited with its lock and this
 * pid already written, as pidfile_take would have. 0, or -1 after one line. */
int pidfile_adopt(const char *path, int fd);

#endif

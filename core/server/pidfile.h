/* pidfile.h — --pid-file: the server's pid for `kill -HUP $(cat FILE)`,
 * held by one live server at a time. */
#ifndef CSERVE_PIDFILE_H
#define CSERVE_PIDFILE_H

/* Before anything listens: when a running server holds path, one line
 * naming its pid and exit 2. A file no server holds (one left by a server
 * that was killed) is taken over later. */
void pidfile_check(const char *path);
/* Once the server listens: hold path and write this process's pid into it;
 * removed at this process's exit if it still holds that pid. Returns 0, or
 * -1 after one line saying why (another server took it meanwhile: exit 2). */
int pidfile_write(const char *path);

#endif

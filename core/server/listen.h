/* listen.h — the listening sockets: TCP, unix: (guarded), or inherited from
 * systemd. */
#ifndef CSERVE_LISTEN_H
#define CSERVE_LISTEN_H

#include <stdbool.h>
#include <sys/types.h>

struct options;

/* Take a listening socket systemd passed (LISTEN_FDS/LISTEN_PID naming this
 * process) and remove those variables from the environment: call first,
 * before Python copies the environment. */
void listen_claim_inherited(void);

/* The listening sockets for n workers into fds[0..n-1], all non-blocking.
 * A socket systemd passed (LISTEN_FDS/LISTEN_PID) or a unix: socket is one
 * socket every worker accepts on; TCP with n > 1 is one SO_REUSEPORT socket
 * per worker (the kernel spreads connections). A unix: path that holds a
 * non-socket or a live socket ends the process with one line and exit 2.
 * Returns 0, or -1 after logging why. */
int listen_open_all(const struct options *opt, unsigned n, int *fds);

/* What is listened on, for the start-up line: "http://HOST:PORT",
 * "unix:PATH", or "systemd socket fd 3 (...)". Valid after listen_open_all. */
const char *listen_describe(void);

/* Give a unix: socket this process created to uid:gid (before dropping
 * privileges, so the server can still remove it at exit). 0 or -1 (errno). */
int listen_chown(uid_t uid, gid_t gid);

/* Remove the unix: socket this process created, if the path still holds
 * it: called at exit (also registered with atexit), a no-op in forked
 * workers and for every other kind of socket. */
void listen_cleanup(void);

#endif

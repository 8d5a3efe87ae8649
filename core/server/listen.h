/* listen.h — the listening sockets: TCP, unix: (guarded), or inherited from
 * systemd; the app's (--bind) and the metrics listener (--metrics-bind). */
#ifndef CSERVE_LISTEN_H
#define CSERVE_LISTEN_H

#include <stdbool.h>
#include <sys/types.h>

struct options;

/* Take a listening socket systemd passed (LISTEN_FDS/LISTEN_PID naming this
 * process) and remove those variables from the environment: call first,
 * before Python copies the environment. */
void listen_claim_inherited(void);

/* The sockets for n workers into fds[0..n-1], all non-blocking. A socket
 * systemd passed (LISTEN_FDS/LISTEN_PID) or a unix: socket is one socket
 * every worker accepts on; TCP with n > 1 is one SO_REUSEPORT socket per
 * worker (the kernel spreads connections over those that listen): fds[0]
 * listens, the others are bound and listen once their worker serves
 * (listen_serve). A unix: path that holds a non-socket or a live socket
 * ends the process with one line and exit 2. Returns 0, or -1 after
 * logging why. */
int listen_open_all(const struct options *opt, unsigned n, int *fds);

/* A worker about to serve on fd: make it listen if it is only bound (a
 * slot's socket no worker has served from, or one listen_pause paused);
 * one that listens is left as it is. 0, or -1 (errno). */
int listen_serve(int fd, int backlog);

/* A slot's TCP socket whose worker is gone and whose next one will not
 * serve at once: it stops listening (leaves the SO_REUSEPORT group, so the
 * kernel sends new connections to the slots that serve; what its backlog
 * holds is reset) and stays bound, for listen_serve. A socket that does
 * not listen is left alone. 0, or -1 (errno; EOPNOTSUPP for a unix:
 * socket, which every worker shares). */
int listen_pause(int fd);

/* What is listened on, for the start-up line: "http://HOST:PORT",
 * "unix:PATH", or "systemd socket fd 3 (...)". Valid after listen_open_all. */
const char *listen_describe(void);

/* --metrics-bind's HOST resolves (a unix: path's form was checked with the
 * options) and --metrics-allow-ips is a list of peers. The start and
 * --check-config both call it, before anything listens. 0, or -1 after
 * printing why. */
int listen_metrics_check(const struct options *opt);

/* Whether the listeners could be made, without making them: each
 * address --bind and --metrics-bind name is one of this host's (a port
 * this process may bind), a unix: path's folder takes a socket and the
 * path holds no non-socket. What a server running now holds (the port,
 * a live socket) passes: the start refuses that itself. After
 * listen_claim_inherited (systemd's socket replaces --bind). 0, or -1
 * after one line saying why. */
int listen_check(const struct options *opt);

/* The metrics listener, non-blocking, through the same binders as
 * listen_open_all: a unix: path is refused (one line, exit 2) as --bind's
 * is, and removed at exit by listen_cleanup. Returns the socket, or -1
 * after logging why. */
int listen_metrics_open(const struct options *opt);

/* Give the unix: sockets this process created to uid:gid (before dropping
 * privileges, so the server can still remove it at exit). 0 or -1 (errno). */
int listen_chown(uid_t uid, gid_t gid);

/* Remove the unix: sockets this process created, where the path still holds
 * them: called at exit (also registered with atexit), a no-op in forked
 * workers and for every other kind of socket. */
void listen_cleanup(void);

/* Which unix: sockets this process created (bit 0: --bind's, bit 1:
 * --metrics-bind's), for a server that execs itself in place
 * (lifecycle_exec_supervisor); the new image takes them on with
 * listen_adopt_unix, to remove them at its exit. */
unsigned listen_unix_owned(void);
void listen_adopt_unix(const struct options *opt, unsigned owned);

#endif

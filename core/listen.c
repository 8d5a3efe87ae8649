/* listen.c — open what the server accepts on.
 *
 * unix: paths are handled like gunicorn's: a path holding anything but a
 * socket is never deleted; a socket something still accepts on is never
 * taken over (the first server would keep running, unreachable); only a
 * stale socket (connect gets ECONNREFUSED) is replaced. The socket this
 * process created is removed at exit, if the path still holds that inode. */
#include "listen.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "options.h"

#define SD_LISTEN_FDS_START 3 /* sd_listen_fds(3): passed sockets start at fd 3 */

static char described[NI_MAXHOST + NI_MAXSERV + 200];
static struct {
    char path[sizeof ((struct sockaddr_un *)0)->sun_path];
    dev_t dev;
    ino_t ino;
    pid_t owner; /* 0: no socket of ours to remove */
} created;

static void refuse(const char *path, const char *why) __attribute__((noreturn));
static void refuse(const char *path, const char *why)
{
    fprintf(stderr, "cserve: error: --bind unix:%s: %s\n", path, why);
    exit(2);
}

/* Decide what may be done with whatever is at path before binding there. */
static void clear_unix_path(const char *path, const struct sockaddr_un *sun)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return;
        refuse(path, strerror(errno));
    }
    if (!S_ISSOCK(st.st_mode))
        refuse(path, "the path exists and is not a socket; refusing to replace it");
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe < 0)
        refuse(path, strerror(errno));
    int rc = connect(probe, (const struct sockaddr *)sun, sizeof *sun);
    int err = errno;
    close(probe);
    if (rc == 0 || err == EAGAIN) /* EAGAIN: alive, its backlog is full */
        refuse(path, "a server is listening on this socket (another cserve?); refusing to take it over");
    if (err != ECONNREFUSED) {
        char why[300];
        snprintf(why, sizeof why, "cannot tell whether the socket there is stale: %s", strerror(err));
        refuse(path, why);
    }
    if (unlink(path) != 0 && errno != ENOENT)
        refuse(path, strerror(errno));
    log_info("removed the stale socket %s", path);
}

static int listen_unix(const struct options *opt)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    snprintf(sun.sun_path, sizeof sun.sun_path, "%s", opt->bind_unix);
    clear_unix_path(opt->bind_unix, &sun);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&sun, sizeof sun) != 0) {
        log_error("cannot listen on unix:%s: %s", opt->bind_unix, strerror(errno));
        close(fd);
        return -1;
    }
    struct stat st;
    if (stat(opt->bind_unix, &st) == 0) {
        snprintf(created.path, sizeof created.path, "%s", opt->bind_unix);
        created.dev = st.st_dev;
        created.ino = st.st_ino;
        created.owner = getpid();
        atexit(listen_cleanup);
    }
    /* Before listen(): nobody can connect while the mode is still the umask's. */
    if (opt->socket_mode >= 0 && chmod(opt->bind_unix, (mode_t)opt->socket_mode) != 0) {
        log_error("--socket-mode: chmod %s: %s", opt->bind_unix, strerror(errno));
        close(fd);
        return -1;
    }
    if (listen(fd, opt->backlog) != 0) {
        log_error("cannot listen on unix:%s: %s", opt->bind_unix, strerror(errno));
        close(fd);
        return -1;
    }
    snprintf(described, sizeof described, "unix:%s", opt->bind_unix);
    return fd;
}

static int listen_tcp(const struct options *opt, bool reuseport)
{
    char port[16];
    snprintf(port, sizeof port, "%d", opt->bind_port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV}, *res;
    int err = getaddrinfo(opt->bind_host, port, &hints, &res);
    if (err) {
        log_error("cannot resolve %s: %s", opt->bind_host, gai_strerror(err));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (reuseport)
            setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, opt->backlog) == 0)
            break;
        log_error("cannot listen on %s:%s: %s", opt->bind_host, port, strerror(errno));
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    snprintf(described, sizeof described, "http://%s:%d", opt->bind_host, opt->bind_port);
    return fd;
}

/* sd_listen_fds(3) without libsystemd: the sockets are ours only if
 * LISTEN_PID names this process. The variables are removed (before Python
 * copies the environment into os.environ) so nothing this process starts
 * takes them for its own. Sets inherited to the fd, or -2 for a passed fd
 * that cannot be served. */
static int inherited = -1;

void listen_claim_inherited(void)
{
    const char *pid_s = getenv("LISTEN_PID"), *fds_s = getenv("LISTEN_FDS");
    if (!pid_s || !fds_s)
        return;
    long pid = strtol(pid_s, NULL, 10), nfds = strtol(fds_s, NULL, 10);
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    if (pid != (long)getpid() || nfds < 1)
        return;
    if (nfds > 1)
        log_warn("systemd passed %ld sockets; serving on the first (fd %d) only", nfds, SD_LISTEN_FDS_START);
    int fd = SD_LISTEN_FDS_START;
    int type = 0, accepting = 0;
    socklen_t len = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) {
        log_error("fd %d from systemd (LISTEN_FDS) is not a stream socket", fd);
        inherited = -2;
        return;
    }
    len = sizeof accepting;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) != 0 || !accepting) {
        log_error("fd %d from systemd (LISTEN_FDS) is not listening (Accept=no is required)", fd);
        inherited = -2;
        return;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    struct sockaddr_storage ss;
    len = sizeof ss;
    char what[NI_MAXHOST + NI_MAXSERV + 140] = "";
    if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_UNIX)
            snprintf(what, sizeof what, " (unix:%s)", ((struct sockaddr_un *)&ss)->sun_path);
        else {
            char host[NI_MAXHOST], serv[NI_MAXSERV];
            if (getnameinfo((struct sockaddr *)&ss, len, host, sizeof host, serv, sizeof serv,
                            NI_NUMERICHOST | NI_NUMERICSERV) == 0)
                snprintf(what, sizeof what, " (%s:%s)", host, serv);
        }
    }
    snprintf(described, sizeof described, "systemd socket fd %d%s", fd, what);
    inherited = fd;
}

int listen_open_all(const struct options *opt, unsigned n, int *fds)
{
    int shared = inherited;
    if (shared == -2)
        return -1;
    if (shared < 0 && opt->bind_unix)
        shared = listen_unix(opt);
    if (shared >= 0 || opt->bind_unix) {
        for (unsigned i = 0; i < n; i++)
            fds[i] = shared;
        return shared >= 0 ? 0 : -1;
    }
    for (unsigned i = 0; i < n; i++) {
        fds[i] = listen_tcp(opt, n > 1);
        if (fds[i] < 0) {
            while (i-- > 0)
                close(fds[i]);
            return -1;
        }
    }
    return 0;
}

const char *listen_describe(void)
{
    return described;
}

int listen_chown(uid_t uid, gid_t gid)
{
    if (created.owner != getpid())
        return 0;
    return chown(created.path, uid, gid);
}

void listen_cleanup(void)
{
    if (created.owner != getpid())
        return;
    created.owner = 0;
    struct stat st;
    /* Only our inode: a later server may have replaced the path already. */
    if (stat(created.path, &st) != 0) {
        if (errno != ENOENT)
            log_warn("cannot remove %s: %s", created.path, strerror(errno));
        return;
    }
    if (st.st_dev == created.dev && st.st_ino == created.ino && unlink(created.path) != 0)
        log_warn("cannot remove %s: %s", created.path, strerror(errno));
}

/* listen.c — open what the server accepts on.
 *
 * unix: paths are handled like gunicorn's: a path holding anything but a
 * socket is never deleted; a socket something still accepts on is never
 * taken over (the first server would keep running, unreachable); only a
 * stale socket (connect gets ECONNREFUSED) is replaced. The socket this
 * process created is removed at exit, if the path still holds that inode.
 * Others may write to the socket's directory meanwhile: every step acts on
 * the node it checked, never on whatever the path names by then, and no
 * symlink there is followed. */
#include "listen.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../base/log.h"
#include "../base/options.h"

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
    log_error("--bind unix:%s: %s", path, why);
    exit(2);
}

/* The node at path itself (a symlink is not followed: O_PATH|O_NOFOLLOW
 * opens the link), so that what is checked is what is then acted on. */
static int open_node(const char *path)
{
    return open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
}

/* "/proc/self/fd/N": names the node an O_PATH descriptor holds, for the
 * calls that take only a path (connect, chmod). Without /proc these fail,
 * and a unix: bind that needs them is refused rather than done unsafely. */
static void fd_path(char *out, size_t cap, int fd)
{
    snprintf(out, cap, "/proc/self/fd/%d", fd);
}

/* Remove the node at path if it is still the inode dev/ino, without a
 * window where path names something else that unlink would remove: the
 * entry is first moved into a new directory of ours (mode 0700, in the
 * same directory, so rename is atomic and nobody else can swap it there),
 * checked, and only then unlinked; anything else is put back. Returns 0,
 * or -1 with why set. */
static int remove_if_same(const char *path, dev_t dev, ino_t ino, const char **why)
{
    char dir[PATH_MAX], aside[PATH_MAX + 16];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, "./.cserve-XXXXXX");
    else if ((size_t)snprintf(dir, sizeof dir, "%.*s/.cserve-XXXXXX", (int)(slash - path), path) >= sizeof dir) {
        *why = strerror(ENAMETOOLONG);
        return -1;
    }
    if (!mkdtemp(dir)) {
        *why = strerror(errno);
        return -1;
    }
    snprintf(aside, sizeof aside, "%s/old", dir);
    int rc = -1;
    struct stat st;
    if (rename(path, aside) != 0) {
        int err = errno;
        rc = err == ENOENT ? 0 : -1; /* gone already: nothing to do */
        *why = err == ENOENT ? NULL : strerror(err);
    } else if (lstat(aside, &st) == 0 && st.st_dev == dev && st.st_ino == ino) {
        rc = unlink(aside);
        *why = rc ? strerror(errno) : NULL;
    } else {
        *why = "the path changed while it was checked; left as it was";
        if (renameat2(AT_FDCWD, aside, AT_FDCWD, path, RENAME_NOREPLACE) != 0)
            log_error("%s was replaced while cserve checked it; what was there is now %s", path, aside);
    }
    rmdir(dir); /* fails, leaving it, only where the node could not be put back */
    return rc;
}

/* Decide what may be done with whatever is at path before binding there. */
static void clear_unix_path(const char *path)
{
    int node = open_node(path);
    if (node < 0) {
        if (errno == ENOENT)
            return;
        refuse(path, strerror(errno));
    }
    struct stat st;
    if (fstat(node, &st) != 0)
        refuse(path, strerror(errno));
    if (!S_ISSOCK(st.st_mode))
        refuse(path, "the path exists and is not a socket; refusing to replace it");
    /* Probe the very node just checked, not whatever path names by now. */
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    fd_path(sun.sun_path, sizeof sun.sun_path, node);
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe < 0)
        refuse(path, strerror(errno));
    int rc = connect(probe, (const struct sockaddr *)&sun, sizeof sun);
    int err = errno;
    close(probe);
    close(node);
    if (rc == 0 || err == EAGAIN) /* EAGAIN: alive, its backlog is full */
        refuse(path, "a server is listening on this socket (another cserve?); refusing to take it over");
    if (err != ECONNREFUSED) {
        char why[300];
        snprintf(why, sizeof why, "cannot tell whether the socket there is stale: %s", strerror(err));
        refuse(path, why);
    }
    const char *why;
    if (remove_if_same(path, st.st_dev, st.st_ino, &why) != 0)
        refuse(path, why);
    log_info("removed the stale socket %s", path);
}

static int listen_unix(const struct options *opt)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    snprintf(sun.sun_path, sizeof sun.sun_path, "%s", opt->bind_unix);
    clear_unix_path(opt->bind_unix);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    /* bind gives the new node the socket inode's mode less the umask: with
     * --socket-mode it starts with no permission at all, so nobody but root
     * can connect before the mode below is set, whatever the umask. */
    if (opt->socket_mode >= 0 && fchmod(fd, 0) != 0) {
        log_error("--socket-mode: %s", strerror(errno));
        close(fd);
        return -1;
    }
    if (bind(fd, (struct sockaddr *)&sun, sizeof sun) != 0) {
        log_error("cannot listen on unix:%s: %s", opt->bind_unix, strerror(errno));
        close(fd);
        return -1;
    }
    /* From here on the path is only acted on through the node it names,
     * opened without following a symlink and checked to be a socket: a
     * symlink swapped in since bind (by someone who can write to the
     * directory, and so could remove our socket anyway) is refused, never
     * followed to chmod, chown or remove another file. */
    int node = open_node(opt->bind_unix);
    struct stat st;
    if (node < 0 || fstat(node, &st) != 0 || !S_ISSOCK(st.st_mode)) {
        log_error("cannot listen on unix:%s: the path no longer holds a socket after bind", opt->bind_unix);
        if (node >= 0)
            close(node);
        close(fd);
        return -1;
    }
    snprintf(created.path, sizeof created.path, "%s", opt->bind_unix);
    created.dev = st.st_dev;
    created.ino = st.st_ino;
    created.owner = getpid();
    atexit(listen_cleanup);
    char node_path[32];
    fd_path(node_path, sizeof node_path, node);
    int rc = opt->socket_mode >= 0 ? chmod(node_path, (mode_t)opt->socket_mode) : 0;
    int err = errno;
    close(node);
    if (rc != 0) {
        log_error("--socket-mode: chmod %s: %s", opt->bind_unix, strerror(err));
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
    if (nfds > 1) {
        /* The others are ours too (LISTEN_PID says so) but unused: close
         * them rather than keep them, inheritable, for the app's children. */
        log_warn("systemd passed %ld sockets; serving on the first (fd %d) only", nfds, SD_LISTEN_FDS_START);
        unsigned last = nfds - 1 > (long)(INT_MAX - SD_LISTEN_FDS_START) ? (unsigned)INT_MAX
                                                                          : (unsigned)(SD_LISTEN_FDS_START + nfds - 1);
        if (close_range(SD_LISTEN_FDS_START + 1, last, 0) != 0) {
            long open_max = sysconf(_SC_OPEN_MAX);
            for (long fd = SD_LISTEN_FDS_START + 1; fd <= (long)last && fd < open_max; fd++)
                close((int)fd);
        }
    }
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
    int node = open_node(created.path);
    if (node < 0)
        return -1;
    struct stat st;
    int rc = -1;
    if (fstat(node, &st) != 0)
        ;
    else if (st.st_dev != created.dev || st.st_ino != created.ino)
        errno = ESTALE; /* not the socket we made: not ours to give away */
    else
        rc = fchownat(node, "", uid, gid, AT_EMPTY_PATH);
    int err = errno;
    close(node);
    errno = err;
    return rc;
}

void listen_cleanup(void)
{
    if (created.owner != getpid())
        return;
    created.owner = 0;
    /* Only our inode: a later server may have replaced the path already
     * (then it is not even moved aside for the check). */
    struct stat st;
    if (lstat(created.path, &st) != 0) {
        if (errno != ENOENT)
            log_warn("cannot remove %s: %s", created.path, strerror(errno));
        return;
    }
    if (st.st_dev != created.dev || st.st_ino != created.ino)
        return;
    const char *why;
    if (remove_if_same(created.path, created.dev, created.ino, &why) != 0 && why)
        log_warn("cannot remove %s: %s", created.path, why);
}

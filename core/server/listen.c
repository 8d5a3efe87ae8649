/* listen.c — open what the server accepts on: the app's listener (--bind)
 * and the metrics listener (--metrics-bind), through the same binders.
 *
 * unix: paths are handled like gunicorn's: a path holding anything but a
 * socket is never deleted; a socket something still accepts on is never
 * taken over (the first server would keep running, unreachable); only a
 * stale socket (connect gets ECONNREFUSED) is replaced. The socket this
 * process created is removed at exit, if the path still holds that inode.
 * Others may write to the socket's directory meanwhile: every step acts on
 * the node it checked, never on whatever the path names by then, and no
 * symlink there is followed.
 *
 * The path appears only once the socket listens: it is bound under a
 * temporary name beside it and renamed into place after listen(). A socket
 * bound but not yet listening refuses connections, so a client that saw
 * the path would be refused, and a second server starting at that moment
 * would take it for stale and replace it, leaving the first unreachable. */
#include "listen.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../base/log.h"
#include "../base/options.h"
#include "../http/ip_allow.h"

#define SD_LISTEN_FDS_START 3 /* sd_listen_fds(3): passed sockets start at fd 3 */

/* The metrics listener's backlog: its thread serves 32 clients at once
 * (core/metrics/metrics_serve.c); a few more may wait. */
#define METRICS_BACKLOG 32

static char described[NI_MAXHOST + NI_MAXSERV + 200];
/* The unix: sockets this process created: --bind's and --metrics-bind's. */
static struct created {
    char path[PATH_MAX]; /* absolute: the app's os.chdir (one worker) must not move it */
    dev_t dev;
    ino_t ino;
    pid_t owner; /* 0: no socket of ours to remove */
} created[2];

static void refuse(const char *flag, const char *path, const char *why) __attribute__((noreturn));
static void refuse(const char *flag, const char *path, const char *why)
{
    log_error("%s unix:%s: %s", flag, path, why);
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
static void clear_unix_path(const char *flag, const char *path)
{
    int node = open_node(path);
    if (node < 0) {
        if (errno == ENOENT)
            return;
        refuse(flag, path, strerror(errno));
    }
    struct stat st;
    if (fstat(node, &st) != 0)
        refuse(flag, path, strerror(errno));
    if (!S_ISSOCK(st.st_mode))
        refuse(flag, path, "the path exists and is not a socket; refusing to replace it");
    /* Probe the very node just checked, not whatever path names by now.
     * Non-blocking: a live server whose backlog is full answers EAGAIN at
     * once, where a blocking connect would wait, start-up with it, for
     * that server to accept. */
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    fd_path(sun.sun_path, sizeof sun.sun_path, node);
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (probe < 0)
        refuse(flag, path, strerror(errno));
    int rc = connect(probe, (const struct sockaddr *)&sun, sizeof sun);
    int err = errno;
    close(probe);
    close(node);
    if (rc == 0 || err == EAGAIN) /* EAGAIN: alive, its backlog is full */
        refuse(flag, path, "a server is listening on this socket (another cserve?); refusing to take it over");
    if (err != ECONNREFUSED) {
        char why[300];
        snprintf(why, sizeof why, "cannot tell whether the socket there is stale: %s", strerror(err));
        refuse(flag, path, why);
    }
    const char *why;
    if (remove_if_same(path, st.st_dev, st.st_ino, &why) != 0)
        refuse(flag, path, why);
    log_info("removed the stale socket %s", path);
}

/* Bind fd to a fresh name in path's directory, into tmp: ".cserve-" and
 * random letters, shortened where sun_path has less room (the final path
 * fits, so one letter always does). bind() creates the name or fails with
 * EADDRINUSE if anything is there, a dangling symlink included: a name
 * someone else holds is never used, another is drawn. */
static int bind_temporary(int fd, const char *path, char *tmp, size_t cap)
{
    static const char letters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    const char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash - path) + 1 : 0;
    size_t room = cap - 1 - dir, len = room < 14 ? room : 14;
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    for (int tries = 0; tries < 100; tries++) {
        unsigned char rnd[14];
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
            return -1;
        memcpy(sun.sun_path, path, dir);
        char *name = sun.sun_path + dir;
        for (size_t i = 0; i < len; i++)
            name[i] = letters[rnd[i] % (sizeof letters - 1)];
        if (len == 14)
            memcpy(name, ".cserve-", 8);
        else if (len > 1)
            name[0] = '.';
        name[len] = '\0';
        if (bind(fd, (struct sockaddr *)&sun, sizeof sun) == 0) {
            snprintf(tmp, cap, "%s", sun.sun_path);
            return 0;
        }
        if (errno != EADDRINUSE)
            return -1;
    }
    return -1;
}

/* The temporary name of a socket that will not serve: removed if it still
 * holds the node bound (whatever was swapped in is left). */
static void drop_temporary(const char *tmp, const struct stat *st)
{
    const char *why;
    if (remove_if_same(tmp, st->st_dev, st->st_ino, &why) != 0 && why)
        log_warn("cannot remove %s: %s", tmp, why);
}

static void cleanup_at_exit(void)
{
    static bool registered;
    if (!registered)
        atexit(listen_cleanup);
    registered = true;
}

/* The socket this process made (or took over) at path, as st found it:
 * removed at exit if the path still holds that node (an absolute path,
 * so a later chdir does not matter). */
static void record_created(struct created *c, const char *path, const struct stat *st)
{
    char cwd[PATH_MAX];
    if (path[0] == '/' || !getcwd(cwd, sizeof cwd) ||
        (size_t)snprintf(c->path, sizeof c->path, "%s/%s", cwd, path) >= sizeof c->path)
        snprintf(c->path, sizeof c->path, "%s", path);
    c->dev = st->st_dev;
    c->ino = st->st_ino;
    c->owner = getpid();
    cleanup_at_exit();
}

/* A checked unix: listener at path (flag names the option in messages;
 * mode < 0 leaves the umask's), recorded in own for removal at exit.
 * Refuses (one line, exit 2) an empty path, a path holding a non-socket or
 * a live socket. Returns the socket, or -1 after logging why. */
static int listen_unix(const char *flag, const char *path, int mode, int backlog, struct created *own)
{
    if (!path[0]) /* the abstract namespace: no file, no mode, open to any local user */
        refuse(flag, path, "an empty path; give a file name");
    clear_unix_path(flag, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    /* bind gives the new node the socket inode's mode less the umask: with
     * a mode to set it starts with no permission at all, so nobody but root
     * can connect before the mode below is set, whatever the umask. */
    if (mode >= 0 && fchmod(fd, 0) != 0) {
        log_error("%s: %s", flag, strerror(errno));
        close(fd);
        return -1;
    }
    char tmp[sizeof ((struct sockaddr_un *)0)->sun_path];
    if (bind_temporary(fd, path, tmp, sizeof tmp) != 0) {
        log_error("cannot listen on unix:%s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    /* From here on the name is only acted on through the node it names,
     * opened without following a symlink and checked to be a socket: a
     * symlink swapped in since bind (by someone who can write to the
     * directory, and so could remove our socket anyway) is refused, never
     * followed to chmod, chown or remove another file. */
    int node = open_node(tmp);
    struct stat st;
    if (node < 0 || fstat(node, &st) != 0 || !S_ISSOCK(st.st_mode)) {
        log_error("cannot listen on unix:%s: the path no longer holds a socket after bind", path);
        if (node >= 0)
            close(node);
        close(fd);
        return -1;
    }
    char node_path[32];
    fd_path(node_path, sizeof node_path, node);
    int rc = mode >= 0 ? chmod(node_path, (mode_t)mode) : 0;
    int err = errno;
    close(node);
    if (rc != 0 || listen(fd, backlog) != 0) {
        err = rc != 0 ? err : errno;
        log_error("cannot listen on unix:%s: %s%s", path, rc != 0 ? "chmod: " : "", strerror(err));
        drop_temporary(tmp, &st);
        close(fd);
        return -1;
    }
    /* Into place, listening; never over whatever took the path since it
     * was checked. */
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) != 0) {
        err = errno;
        drop_temporary(tmp, &st);
        refuse(flag, path, err == EEXIST ? "something took the path while cserve bound it; left as it is"
                                         : strerror(err));
    }
    struct stat now;
    if (lstat(path, &now) != 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino) {
        log_error("cannot listen on unix:%s: the socket bound was swapped before it took the path", path);
        close(fd);
        return -1;
    }
    record_created(own, path, &st);
    return fd;
}

/* The addresses host:port may be bound at (freeaddrinfo them), or NULL
 * after logging why. */
static struct addrinfo *resolve_passive(const char *host, int port)
{
    char serv[16];
    snprintf(serv, sizeof serv, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV}, *res;
    int err = getaddrinfo(host, serv, &hints, &res);
    if (err) {
        log_error("cannot resolve %s: %s", host, gai_strerror(err));
        return NULL;
    }
    return res;
}

/* A TCP listener on host:port: the first address it resolves to that
 * binds; bound only (not listening) unless listening. Returns the socket,
 * or -1 after logging why. */
static int listen_tcp(const char *host, int port, int backlog, bool reuseport, bool listening)
{
    struct addrinfo *res = resolve_passive(host, port);
    if (!res)
        return -1;
    int fd = -1;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (reuseport)
            setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && (!listening || listen(fd, backlog) == 0))
            break;
        log_error("cannot listen on %s:%d: %s", host, port, strerror(errno));
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
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
    if (shared < 0 && opt->bind_unix) {
        shared = listen_unix("--bind", opt->bind_unix, opt->socket_mode, opt->backlog, &created[0]);
        snprintf(described, sizeof described, "unix:%s", opt->bind_unix);
    }
    if (shared >= 0 || opt->bind_unix) {
        for (unsigned i = 0; i < n; i++)
            fds[i] = shared;
        return shared >= 0 ? 0 : -1;
    }
    snprintf(described, sizeof described, "http://%s:%d", opt->bind_host, opt->bind_port);
    /* The first slot's listens from the start: its connections wait for
     * the first worker, as one worker's would. The others are bound only:
     * a TCP socket joins the kernel's SO_REUSEPORT group at listen(), which
     * its worker calls once it serves (listen_serve), so a worker still
     * importing the app is sent no connections. */
    for (unsigned i = 0; i < n; i++) {
        fds[i] = listen_tcp(opt->bind_host, opt->bind_port, opt->backlog, n > 1, i == 0);
        if (fds[i] < 0) {
            while (i-- > 0)
                close(fds[i]);
            return -1;
        }
    }
    return 0;
}

int listen_serve(int fd, int backlog)
{
    int accepting = 0;
    socklen_t len = sizeof accepting;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) == 0 && accepting)
        return 0; /* systemd's, unix:, or a slot's that serves: its backlog stays as it is */
    return listen(fd, backlog);
}

/* shutdown() of a listening TCP socket ends its listening: it leaves the
 * SO_REUSEPORT group and resets what its backlog holds, and stays bound to
 * its address (bound explicitly: the kernel keeps the port), so listen()
 * takes it back into the group. */
int listen_pause(int fd)
{
    int accepting = 0;
    socklen_t len = sizeof accepting;
    struct sockaddr_storage ss;
    socklen_t slen = sizeof ss;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) != 0 || !accepting)
        return 0;
    if (getsockname(fd, (struct sockaddr *)&ss, &slen) != 0)
        return -1;
    if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) {
        errno = EOPNOTSUPP; /* a unix: socket is shared by every worker: never paused */
        return -1;
    }
    return shutdown(fd, SHUT_RD);
}

const char *listen_describe(void)
{
    return described;
}

/* --metrics-allow-ips is a list of peers and --metrics-bind's HOST
 * resolves, each refusal naming its option (listen_check then tries the
 * address itself). main runs it once, before anything listens. */
int listen_metrics_check(const struct options *opt)
{
    if (!opt->metrics_bind)
        return 0;
    struct ip_allow allow;
    char why[160];
    if (ip_allow_parse(&allow, opt->metrics_allow_ips, why, sizeof why) != 0) {
        log_error("--metrics-allow-ips: %s (see cserve --help)", why);
        return -1;
    }
    if (opt->metrics_unix)
        return 0; /* the path's form was checked with the options */
    char serv[16];
    snprintf(serv, sizeof serv, "%d", opt->metrics_port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res;
    int rc = getaddrinfo(opt->metrics_host, serv, &hints, &res);
    if (rc != 0) {
        log_error("--metrics-bind %s: %s", opt->metrics_bind, gai_strerror(rc));
        return -1;
    }
    freeaddrinfo(res);
    return 0;
}

/* Whether a unix: listener could be made at path: the same temporary
 * name in its folder that listen_unix binds, then removed; a path that
 * holds something other than a socket is refused as it would be there. A
 * socket at path is left alone: a stale one is replaced at start, a live
 * one belongs to a server running now. */
static int check_unix(const char *flag, const char *path)
{
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
        log_error("%s unix:%s: the path exists and is not a socket; refusing to replace it", flag, path);
        return -1;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    char tmp[sizeof ((struct sockaddr_un *)0)->sun_path];
    if (fd < 0 || bind_temporary(fd, path, tmp, sizeof tmp) != 0) {
        log_error("cannot listen on unix:%s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    unlink(tmp);
    close(fd);
    return 0;
}

/* Whether host:port could be bound: an address of this host, a port this
 * process may take. EADDRINUSE is a server running now, not the address:
 * the start refuses that itself. */
static int check_tcp(const char *host, int port)
{
    struct addrinfo *res = resolve_passive(host, port);
    if (!res)
        return -1;
    int why = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            why = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
        int rc = bind(fd, ai->ai_addr, ai->ai_addrlen);
        why = rc == 0 ? 0 : errno;
        close(fd);
        if (rc == 0 || why == EADDRINUSE) {
            why = 0;
            break;
        }
    }
    freeaddrinfo(res);
    if (why)
        log_error("cannot listen on %s:%d: %s", host, port, strerror(why));
    return why ? -1 : 0;
}

int listen_check(const struct options *opt)
{
    if (opt->metrics_unix && check_unix("--metrics-bind", opt->metrics_unix) != 0)
        return -1;
    if (opt->metrics_bind && !opt->metrics_unix && check_tcp(opt->metrics_host, opt->metrics_port) != 0)
        return -1;
    if (inherited != -1) /* systemd's socket replaces --bind; -2: it cannot serve, said already */
        return inherited == -2 ? -1 : 0;
    if (opt->bind_unix)
        return check_unix("--bind", opt->bind_unix);
    return check_tcp(opt->bind_host, opt->bind_port);
}

int listen_metrics_open(const struct options *opt)
{
    if (opt->metrics_unix)
        return listen_unix("--metrics-bind", opt->metrics_unix, -1, METRICS_BACKLOG, &created[1]);
    return listen_tcp(opt->metrics_host, opt->metrics_port, METRICS_BACKLOG, false, true);
}

static int chown_created(const struct created *c, uid_t uid, gid_t gid)
{
    if (c->owner != getpid())
        return 0;
    int node = open_node(c->path);
    if (node < 0)
        return -1;
    struct stat st;
    int rc = -1;
    if (fstat(node, &st) != 0)
        ;
    else if (st.st_dev != c->dev || st.st_ino != c->ino)
        errno = ESTALE; /* not the socket we made: not ours to give away */
    else
        rc = fchownat(node, "", uid, gid, AT_EMPTY_PATH);
    int err = errno;
    close(node);
    errno = err;
    return rc;
}

int listen_chown(uid_t uid, gid_t gid)
{
    for (size_t i = 0; i < sizeof created / sizeof *created; i++)
        if (chown_created(&created[i], uid, gid) != 0)
            return -1;
    return 0;
}

static void cleanup_created(struct created *c)
{
    if (c->owner != getpid())
        return;
    c->owner = 0;
    /* Only our inode: a later server may have replaced the path already
     * (then it is not even moved aside for the check). */
    struct stat st;
    if (lstat(c->path, &st) != 0) {
        if (errno != ENOENT)
            log_warn("cannot remove %s: %s", c->path, strerror(errno));
        return;
    }
    if (st.st_dev != c->dev || st.st_ino != c->ino)
        return;
    const char *why;
    if (remove_if_same(c->path, c->dev, c->ino, &why) != 0 && why)
        log_warn("cannot remove %s: %s", c->path, why);
}

void listen_cleanup(void)
{
    for (size_t i = 0; i < sizeof created / sizeof *created; i++)
        cleanup_created(&created[i]);
}

unsigned listen_unix_owned(void)
{
    unsigned owned = 0;
    for (unsigned i = 0; i < sizeof created / sizeof *created; i++)
        if (created[i].owner == getpid())
            owned |= 1u << i;
    return owned;
}

/* The same process, the same directory (the exec is made from the one the
 * sockets were bound in): the path holds the node created before. */
static void adopt_created(struct created *c, const char *path)
{
    struct stat st;
    if (!path || lstat(path, &st) != 0 || !S_ISSOCK(st.st_mode))
        return;
    record_created(c, path, &st);
}

void listen_adopt_unix(const struct options *opt, unsigned owned)
{
    if (owned & 1u)
        adopt_created(&created[0], opt->bind_unix);
    if (owned & 2u)
        adopt_created(&created[1], opt->metrics_unix);
}

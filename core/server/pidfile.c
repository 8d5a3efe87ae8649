/* pidfile.c — --pid-file, held with an open file description lock (OFD,
 * fcntl F_OFD_SETLK) for as long as the server runs.
 *
 * The lock, not the pid written in the file, says whether a server still
 * runs: the kernel drops it when the last descriptor of the open file goes,
 * however the process exits, and a pid read back from a stale file may
 * since belong to any other process (after a reboot, in a new container).
 * Not a POSIX record lock: that one is dropped when its process closes any
 * descriptor of the file, and with one worker the app runs in this process
 * (an app that reads the pid file would let a second server take it over).
 * An OFD lock, like flock's, belongs to the open file, which a forked
 * child shares: each child closes its copy at once (pthread_atfork), so
 * only this process keeps the lock alive. Who holds it is read from the
 * file, which its holder wrote before it serves.
 *
 * At exit the file is removed only when its name still names the file this
 * process holds and it still holds this pid: a file another server wrote
 * since, or someone rewrote, is left alone. The name is looked up in the
 * directory the file was opened in (held open), not through the path
 * again: with one worker the app runs in this process and may have
 * changed its directory since, which would move a relative path. */
#include "pidfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/log.h"

static const char *held_name; /* the file's name in held_dir */
static int held_dir = -1;
static int held_fd = -1;
static pid_t held_pid;

static struct flock whole_file(short type)
{
    return (struct flock){.l_type = type, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
}

static void refuse(const char *path, int fd)
{
    /* The holder writes its pid right after it takes the lock: a start
     * racing it may read the file as it was just before. */
    char text[32] = "";
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    text[strcspn(text, "\n")] = '\0';
    log_error("--pid-file %s is held by a running server (pid %s): stop it first, or give another file", path,
              text[0] ? text : "unknown");
    exit(2);
}

/* A forked child (a worker, or a process the app forks) must not keep the
 * open file, and with it the lock, alive after this process exits. */
static void close_in_child(void)
{
    if (held_fd >= 0)
        close(held_fd);
    if (held_dir >= 0)
        close(held_dir);
    held_fd = held_dir = -1;
}

void pidfile_release(void)
{
    if (held_fd < 0 || held_pid != getpid())
        return; /* a forked child exiting: the file is its parent's */
    struct stat named, ours;
    char text[32];
    ssize_t n = pread(held_fd, text, sizeof text - 1, 0);
    if (n <= 0 || fstatat(held_dir, held_name, &named, AT_SYMLINK_NOFOLLOW) != 0 || fstat(held_fd, &ours) != 0)
        return;
    text[n] = '\0';
    if (named.st_dev == ours.st_dev && named.st_ino == ours.st_ino && strtol(text, NULL, 10) == held_pid)
        unlinkat(held_dir, held_name, 0);
}

/* The directory path is in, opened (O_PATH) for lookups of *name later. */
static int open_dir_of(const char *path, const char **name)
{
    const char *slash = strrchr(path, '/');
    *name = slash ? slash + 1 : path;
    if (!**name) { /* "" or "dir/": no file named */
        errno = path[0] ? EISDIR : ENOENT;
        return -1;
    }
    if (!slash)
        return open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    char dir[PATH_MAX];
    size_t len = slash == path ? 1 : (size_t)(slash - path);
    if (len >= sizeof dir) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(dir, path, len);
    dir[len] = '\0';
    return open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

int pidfile_fd(void)
{
    return held_pid == getpid() ? held_fd : -1;
}

static void hold(const char *name, int dir, int fd)
{
    held_name = name;
    held_dir = dir;
    held_fd = fd; /* kept open: the lock lives as long as it does */
    held_pid = getpid();
    atexit(pidfile_release);
    pthread_atfork(NULL, NULL, close_in_child);
}

int pidfile_adopt(const char *path, int fd)
{
    const char *name;
    int dir = open_dir_of(path, &name);
    if (dir < 0 || fd < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
        log_error("--pid-file %s: %s", path, strerror(dir < 0 ? errno : EBADF));
        if (dir >= 0)
            close(dir);
        return -1;
    }
    hold(name, dir, fd);
    return 0;
}

int pidfile_take(const char *path)
{
    const char *name;
    int dir = open_dir_of(path, &name);
    int fd = dir < 0 ? -1 : openat(dir, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        log_error("--pid-file %s: %s", path, strerror(errno));
        if (dir >= 0)
            close(dir);
        return -1;
    }
    struct flock fl = whole_file(F_WRLCK);
    if (fcntl(fd, F_OFD_SETLK, &fl) != 0) {
        if (errno != EAGAIN && errno != EACCES) {
            log_error("--pid-file %s: cannot lock it: %s", path, strerror(errno));
            close(fd);
            close(dir);
            return -1;
        }
        refuse(path, fd); /* a running server holds it */
    }
    char line[32];
    int n = snprintf(line, sizeof line, "%d\n", (int)getpid());
    /* Over the old text, then cut to size: a reader never finds the file
     * empty, only the old pid or this one. */
    if (pwrite(fd, line, (size_t)n, 0) != n || ftruncate(fd, n) != 0) {
        log_error("--pid-file %s: %s", path, strerror(errno));
        close(fd);
        close(dir);
        return -1;
    }
    hold(name, dir, fd);
    return 0;
}

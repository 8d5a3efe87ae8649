/* pidfile.c — --pid-file, held with a POSIX record lock for as long as the
 * server runs.
 *
 * The lock, not the pid written in the file, says whether a server still
 * runs: the kernel drops it when the process that took it exits, however
 * it exits, and a pid read back from a stale file may since belong to any
 * other process (after a reboot, in a new container). A record lock (not
 * flock) is not inherited by fork, so a worker forked by the supervisor
 * never keeps it alive, and F_GETLK names the pid that holds it. It is
 * dropped when this process closes any descriptor of the file, so the file
 * is opened once and read back through that descriptor at exit.
 *
 * At exit the file is removed only when the path still names the file this
 * process holds and it still holds this pid: a file another server wrote
 * since, or someone rewrote, is left alone. */
#include "pidfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/log.h"

static const char *held_path;
static int held_fd = -1;
static pid_t held_pid;

static struct flock whole_file(short type)
{
    return (struct flock){.l_type = type, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
}

static void refuse(const char *path, pid_t holder)
{
    log_error("--pid-file %s is held by a running server (pid %d): stop it first, or give another file", path,
              (int)holder);
    exit(2);
}

void pidfile_release(void)
{
    if (held_fd < 0 || held_pid != getpid())
        return; /* a forked child exiting: the file is its parent's */
    struct stat named, ours;
    char text[32];
    ssize_t n = pread(held_fd, text, sizeof text - 1, 0);
    if (n <= 0 || stat(held_path, &named) != 0 || fstat(held_fd, &ours) != 0)
        return;
    text[n] = '\0';
    if (named.st_dev == ours.st_dev && named.st_ino == ours.st_ino && strtol(text, NULL, 10) == held_pid)
        unlink(held_path);
}

int pidfile_take(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        log_error("--pid-file %s: %s", path, strerror(errno));
        return -1;
    }
    struct flock fl = whole_file(F_WRLCK);
    if (fcntl(fd, F_SETLK, &fl) != 0) {
        /* a running server holds it */
        struct flock who = whole_file(F_WRLCK);
        pid_t holder = fcntl(fd, F_GETLK, &who) == 0 && who.l_type != F_UNLCK ? who.l_pid : 0;
        close(fd);
        refuse(path, holder);
    }
    char line[32];
    int n = snprintf(line, sizeof line, "%d\n", (int)getpid());
    /* Over the old text, then cut to size: a reader never finds the file
     * empty, only the old pid or this one. */
    if (pwrite(fd, line, (size_t)n, 0) != n || ftruncate(fd, n) != 0) {
        log_error("--pid-file %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    held_path = path;
    held_fd = fd; /* kept open: the lock lives as long as it does */
    held_pid = getpid();
    atexit(pidfile_release);
    return 0;
}

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
 * Not flock either, for the same reason as OFD locks need care: a forked
 * child shares the open file, so each child closes its copy at once
 * (pthread_atfork) and only this process keeps the lock alive. Who holds
 * the lock is read from the file, which its holder wrote before it serves.
 *
 * At exit the file is removed only when the path still names the file this
 * process holds and it still holds this pid: a file another server wrote
 * since, or someone rewrote, is left alone. */
#include "pidfile.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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
    held_fd = -1;
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
    if (fcntl(fd, F_OFD_SETLK, &fl) != 0) {
        if (errno != EAGAIN && errno != EACCES) {
            log_error("--pid-file %s: cannot lock it: %s", path, strerror(errno));
            close(fd);
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
        return -1;
    }
    held_path = path;
    held_fd = fd; /* kept open: the lock lives as long as it does */
    held_pid = getpid();
    atexit(pidfile_release);
    pthread_atfork(NULL, NULL, close_in_child);
    return 0;
}

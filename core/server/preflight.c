/* preflight.c — the files and addresses a start needs, checked by the start
 * and by --check-config alike. */
#include "preflight.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../base/log.h"
#include "../base/options.h"
#include "listen.h"

/* A file opened for appending: one there is opened as it will be
 * (O_NONBLOCK: a FIFO must not block the check) and closed untouched; for
 * one not there, a file is made beside it and removed, as access() would
 * say yes to root on a folder it still cannot write (/proc). 0, or -1
 * with errno. */
static int can_append(const char *path)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    if (errno != ENOENT)
        return -1;
    char probe[PATH_MAX];
    if ((size_t)snprintf(probe, sizeof probe, "%s.cserve-check.%d", path, (int)getpid()) >= sizeof probe) {
        errno = ENAMETOOLONG;
        return -1;
    }
    fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_NOCTTY | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    close(fd);
    unlink(probe);
    return 0;
}

int preflight_before_drop(const struct options *opt)
{
    if (listen_check(opt) != 0)
        return -1;
    if (opt->pid_file && can_append(opt->pid_file) != 0) {
        log_error("--pid-file %s: %s", opt->pid_file, strerror(errno));
        return -1;
    }
    const char *log = opt->access_log_file;
    if (opt->access_log && log && strcmp(log, "-") != 0 && can_append(log) != 0) {
        log_error("--access-log=%s: %s", log, strerror(errno));
        return -1;
    }
    return 0;
}

int preflight_as_server(const struct options *opt)
{
    /* Written beside itself and renamed over it: the folder must take a
     * new file, whether or not the file is there. */
    if (!opt->stats_json)
        return 0;
    char probe[PATH_MAX];
    int fd = -1;
    if ((size_t)snprintf(probe, sizeof probe, "%s.tmp.%d", opt->stats_json, (int)getpid()) >= sizeof probe)
        errno = ENAMETOOLONG;
    else
        fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_NOCTTY | O_CLOEXEC, 0600);
    if (fd < 0) {
        log_error("--stats-json %s: cannot write there: %s", opt->stats_json, strerror(errno));
        return -1;
    }
    close(fd);
    unlink(probe);
    return 0;
}

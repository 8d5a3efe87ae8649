/* devreload.c — --reload watches the folders holding the app's modules (not
 * the interpreter's or site-packages'), so a module imported later from one
 * of them is covered too. Watching folders, not files, sees an editor that
 * saves by writing a new file and renaming it over the old. A change is
 * acted on after DEVRELOAD_QUIET_MS without another, then the worker is
 * replaced the way SIGHUP replaces it: a new process imports the app. */
#include "devreload.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "../base/log.h"
#include "loop.h"

#define DEVRELOAD_QUIET_MS 300

int devreload_start(struct loop *l, char **dirs)
{
    l->reload_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (l->reload_fd < 0)
        return -1;
    unsigned n = 0;
    for (char **d = dirs; d && *d; d++) {
        if (inotify_add_watch(l->reload_fd, *d, IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE |
                                                    IN_MOVED_FROM | IN_ONLYDIR) >= 0)
            n++;
        else
            log_warn("--reload: cannot watch %s: %s", *d, strerror(errno));
    }
    l->reload_src.kind = POLL_RELOAD;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &l->reload_src};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->reload_fd, &ev) != 0)
        return -1;
    log_info("--reload: watching %u folder(s) for changed .py files", n);
    return 0;
}

void devreload_on_event(struct loop *l)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n;
    while ((n = read(l->reload_fd, buf, sizeof buf)) > 0) {
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *e = (const struct inotify_event *)p;
            size_t len = e->len ? strlen(e->name) : 0;
            if (len > 3 && strcmp(e->name + len - 3, ".py") == 0) {
                if (!l->reload_at_ms)
                    log_info("--reload: %s changed", e->name);
                l->reload_at_ms = l->now_ms + DEVRELOAD_QUIET_MS;
            }
            p += sizeof *e + e->len;
        }
    }
}

void devreload_tick(struct loop *l)
{
    if (!l->reload_at_ms || l->now_ms < l->reload_at_ms || l->stopping)
        return;
    l->reload_at_ms = 0;
    if (l->stats_parent > 0 && getppid() == l->stats_parent)
        kill(l->stats_parent, SIGHUP); /* the supervisor replaces its worker */
    else if (l->owner)
        l->owner->reload(l->owner->ctx);
}

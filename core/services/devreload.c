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
#include <sys/inotify.h>
#include <unistd.h>

#include "../base/log.h"
#include "replacement.h"

#define DEVRELOAD_QUIET_MS 300

/* The inotify descriptor is readable: note a .py change (a reload follows
 * once the folders are quiet for a moment: editors write in steps). */
static void devreload_ready(struct loop_watch *w, struct loop *l)
{
    struct devreload *d = (struct devreload *)((char *)w - offsetof(struct devreload, watch));
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n;
    while ((n = read(d->fd, buf, sizeof buf)) > 0) {
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *e = (const struct inotify_event *)p;
            size_t len = e->len ? strlen(e->name) : 0;
            if (len > 3 && strcmp(e->name + len - 3, ".py") == 0) {
                if (!d->at_ms)
                    log_info("--reload: %s changed", e->name);
                d->at_ms = l->now_ms + DEVRELOAD_QUIET_MS;
            }
            p += sizeof *e + e->len;
        }
    }
}

static void devreload_tick(void *ctx, struct loop *l)
{
    struct devreload *d = ctx;
    if (!d->at_ms || l->now_ms < d->at_ms || l->stopping)
        return;
    d->at_ms = 0;
    if (d->supervisor > 0 && getppid() == d->supervisor)
        kill(d->supervisor, SIGHUP); /* the supervisor replaces its worker */
    else
        d->owner->reload(d->owner->ctx);
}

static int devreload_before_sleep(void *ctx, struct loop *l, int timeout_ms)
{
    struct devreload *d = ctx;
    if (!d->at_ms)
        return timeout_ms;
    uint64_t due = d->at_ms > l->now_ms ? d->at_ms - l->now_ms : 0;
    return due < (uint64_t)timeout_ms ? (int)due : timeout_ms;
}

int devreload_start(struct devreload *d, struct loop *l, char **dirs, pid_t supervisor,
                    const struct worker_owner *owner)
{
    *d = (struct devreload){.supervisor = supervisor, .owner = owner};
    d->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (d->fd < 0)
        return -1;
    unsigned n = 0;
    for (char **p = dirs; p && *p; p++) {
        if (inotify_add_watch(d->fd, *p, IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE |
                                             IN_MOVED_FROM | IN_ONLYDIR) >= 0)
            n++;
        else
            log_warn("--reload: cannot watch %s: %s", *p, strerror(errno));
    }
    d->watch.ready = devreload_ready;
    d->hook = (struct loop_hook){.ctx = d, .tick = devreload_tick, .before_sleep = devreload_before_sleep};
    if (loop_watch_fd(l, d->fd, &d->watch) != 0 || loop_hook_add(l, &d->hook) != 0) {
        int err = errno;
        devreload_stop(d);
        errno = err;
        return -1;
    }
    log_info("--reload: watching %u folder(s) for changed .py files", n);
    return 0;
}

void devreload_stop(struct devreload *d)
{
    if (d->fd >= 0)
        close(d->fd);
    d->fd = -1;
}

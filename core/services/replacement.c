/* replacement.c — see replacement.h. When and how a successor starts is
 * the server's (core/server/lifecycle.c); this is the loop's side: it asks
 * once a pass whether a limit is reached, passes SIGHUP on, and when the
 * successor says it serves (or the supervisor says drain) stops the loop
 * as a retiring one. */
#include "replacement.h"

#include <signal.h>

#include "../base/log.h"
#include "../base/signals.h"

static void replacement_tick(void *ctx, struct loop *l)
{
    struct replacement *r = ctx;
    if (!l->stopping)
        r->owner->tick(r->owner->ctx, l->now_ms, counter_get(&l->lstats.requests));
}

static void replacement_signal(void *ctx, struct loop *l, const struct server_signal *si)
{
    struct replacement *r = ctx;
    const struct worker_owner *o = r->owner;
    if (si->signo == SIGTERM || si->signo == SIGINT) {
        r->stop_signal = si->signo; /* a handover in progress passes it on */
    } else if (si->signo == SIGHUP) {
        if (!l->stopping)
            o->reload(o->ctx);
        else if (r->successor) /* the supervisor this becomes reloads */
            o->reload_later(o->ctx);
    } else if (si->signo == WORKER_READY_SIGNAL) {
        /* Its successor accepts on the listener too: stop, drain, and let
         * worker_run hand the process over to supervising it. */
        if (!l->stopping && o->ready(o->ctx, si->pid)) {
            r->successor = si->pid;
            log_info("reload: the new worker (pid %d) serves; this one drains", (int)r->successor);
            loop_stop(l, true);
        }
    } else if (si->signo == WORKER_RECYCLE_SIGNAL) {
        if (r->successor && si->pid == r->successor)
            r->recycle = true; /* the supervisor this process becomes acts on it */
    } else if (si->signo == WORKER_RETIRE_SIGNAL) {
        loop_stop(l, true);
    }
}

int replacement_start(struct replacement *r, struct loop *l, const struct worker_owner *owner)
{
    *r = (struct replacement){.owner = owner};
    r->hook = (struct loop_hook){.ctx = r, .tick = replacement_tick, .signal = replacement_signal};
    return loop_hook_add(l, &r->hook);
}

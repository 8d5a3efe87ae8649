/* loop.c — the event loop of one worker: epoll, accept, signals, timers,
 * and the handoff's completions.
 *
 * One pass: wait (unless work is already waiting; a hold, a timed sleep deaf
 * to the sockets, while every pool thread has work queued; a doze, a short
 * timed wait announced to nobody, while a busy pool's next completion is
 * near), handle
 * socket events (reads parse and submit), flush the handoff (wake the pool
 * once for the batch), drain completions (writes), retry the requests that
 * waited for room, expire timers, then the hooks' ticks. The hooks (loop.h) are the features': the loop calls them
 * once a pass or before it waits, never per request, but for the response
 * hooks that are registered. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../handoffs/handoff.h"
#include "../../lib/clock.h"
#include "../base/log.h"
#include "../base/signals.h"
#include "conn.h"
#include "dispatch.h"
#include "jobs.h"
#include "loop.h"
#include "../base/options.h"
#include "../base/stats.h"
#include "../metrics/metrics.h"

#define MAX_EVENTS 256
#define MAX_DRAIN 256
#define ACCEPTS_PER_EVENT 64

int loop_init(struct loop *l, const struct options *opt, int listen_fd, struct handoff *h, unsigned threads)
{
    memset(l, 0, sizeof *l);
    l->opt = opt;
    l->listen_fd = listen_fd;
    l->handoff = h;
    l->conns.next = l->conns.prev = &l->conns;
    l->now_ms = clock_coarse_ms();
    l->piped.most = conn_pipe_most();
    timer_list_init(&l->t_header, opt->header_timeout_ms);
    timer_list_init(&l->t_keepalive, opt->keepalive_timeout_ms);
    timer_list_init(&l->t_io, opt->io_timeout_ms);
    timer_list_init(&l->t_linger, opt->io_timeout_ms < 2000 ? opt->io_timeout_ms : 2000);
    timer_list_init(&l->t_hold, CONN_HOLD_MS);
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (dispatch_init(&l->disp, h, threads, opt->queue_capacity) != 0 || l->epfd < 0)
        return -1;

    l->listener_src.kind = POLL_LISTENER;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &l->listener_src};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, listen_fd, &ev) != 0)
        return -1;

    l->signal_fd = signals_fd(); /* the process's, not the loop's to close */
    l->signal_src.kind = POLL_SIGNAL;
    ev = (struct epoll_event){.events = EPOLLIN, .data.ptr = &l->signal_src};
    if (l->signal_fd < 0 || epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->signal_fd, &ev) != 0)
        return -1;

    if (h) {
        l->handoff_src.kind = POLL_HANDOFF;
        if (h->ops->watch(h, l->epfd, (uint64_t)(uintptr_t)&l->handoff_src) != 0)
            return -1;
    }
    return 0;
}

int loop_hook_add(struct loop *l, const struct loop_hook *h)
{
    if (l->nhooks == LOOP_MAX_HOOKS) {
        errno = ENOSPC;
        return -1;
    }
    l->hooks[l->nhooks++] = h;
    if (h->response)
        l->responders[l->nresponders++] = h;
    return 0;
}

int loop_watch_fd(struct loop *l, int fd, struct loop_watch *w)
{
    w->src.kind = POLL_WATCH;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &w->src};
    return epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev);
}

static void stop_accepting(struct loop *l)
{
    if (l->listen_fd < 0)
        return;
    epoll_ctl(l->epfd, EPOLL_CTL_DEL, l->listen_fd, NULL);
    close(l->listen_fd);
    l->listen_fd = -1;
}

/* Out of descriptors, the loop pauses accepts ACCEPT_PAUSE_MS at a time
 * until one succeeds: an episode. Its log is bounded whatever its length:
 * a line when it starts, one every ACCEPT_PAUSE_LOG_MS that counts the
 * pauses since, and one when an accept succeeds again. */
#define ACCEPT_PAUSE_MS 100
#define ACCEPT_PAUSE_LOG_MS 10000

static void log_accept_pause(struct loop *l, int err)
{
    if (!l->accept_pause.since_ms) {
        l->accept_pause.since_ms = l->accept_pause.logged_ms = l->now_ms ? l->now_ms : 1;
        l->accept_pause.unlogged = 0;
        log_warn("accept: %s; pausing accepts for %d ms at a time until a descriptor is free "
                 "(this repeats in one line every %d s)", strerror(err), ACCEPT_PAUSE_MS,
                 ACCEPT_PAUSE_LOG_MS / 1000);
        return;
    }
    l->accept_pause.unlogged++;
    if (l->now_ms - l->accept_pause.logged_ms < ACCEPT_PAUSE_LOG_MS)
        return;
    log_warn("accept: %s; paused accepts %u more times in %.1f s (out of descriptors for %.1f s)",
             strerror(err), l->accept_pause.unlogged, (double)(l->now_ms - l->accept_pause.logged_ms) / 1000,
             (double)(l->now_ms - l->accept_pause.since_ms) / 1000);
    l->accept_pause.logged_ms = l->now_ms;
    l->accept_pause.unlogged = 0;
}

/* Returns true when it stopped at ACCEPTS_PER_EVENT: more may be waiting. */
static bool on_listener(struct loop *l)
{
    for (int i = 0; i < ACCEPTS_PER_EVENT; i++) {
        struct sockaddr_storage addr;
        socklen_t alen = sizeof addr;
        int fd = accept4(l->listen_fd, (struct sockaddr *)&addr, &alen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* Out of descriptors: stop accepting for a moment rather
                 * than spin on a listener that stays readable. */
                if (!l->accept_pause.until_ms)
                    epoll_ctl(l->epfd, EPOLL_CTL_DEL, l->listen_fd, NULL);
                l->accept_pause.until_ms = l->now_ms + ACCEPT_PAUSE_MS;
                log_accept_pause(l, errno);
            }
            return false;
        }
        if (l->accept_pause.since_ms) {
            log_info("accept: descriptors free again after %.1f s; accepting",
                     (double)(l->now_ms - l->accept_pause.since_ms) / 1000);
            l->accept_pause.since_ms = 0;
        }
        conn_accept(l, fd, &addr);
    }
    return true;
}

static void resume_accepting(struct loop *l)
{
    if (!l->accept_pause.until_ms || l->now_ms < l->accept_pause.until_ms || l->listen_fd < 0 || l->refusing)
        return;
    l->accept_pause.until_ms = 0;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &l->listener_src};
    epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->listen_fd, &ev);
}

void loop_stop(struct loop *l, bool retiring)
{
    if (l->stopping)
        return;
    l->stopping = true;
    l->retiring = retiring;
    /* Each connection answers what the app has of it and no more: its last
     * response says close (conn_stop). Before the backlog is taken: those
     * connections have no request yet. */
    for (struct conn *c = l->conns.next; c != &l->conns; c = c->next)
        conn_stop(c);
    l->stop.deadline_ms = l->now_ms + l->opt->graceful_timeout_ms;
    l->stop.sweeps = 0; /* its own first two (sweep_due) */
    /* Take what the kernel already accepted for us, all of it, then close:
     * a connection left in the backlog would be reset. Even while accepts
     * are paused for want of descriptors: some may have been freed since
     * (if not, the accept fails and those connections are lost anyway).
     * Not when refusing: the successor, which holds the listener too,
     * takes them. */
    if (l->listen_fd >= 0 && !l->refusing)
        while (on_listener(l))
            ;
    stop_accepting(l);
    log_info("stopping: %u connection(s) open, %u request(s) with the app", l->nconns,
             dispatch_outstanding_total(&l->disp));
}

void loop_refuse(struct loop *l)
{
    if (l->refusing)
        return;
    l->refusing = true;
    l->stop.sweeps = 0; /* its own first two (sweep_due) */
    /* As in a stop, each connection answers what the app already has of it
     * (requests on threads that are not stuck finish), its last response
     * says close, and nothing more is run: a close on every head would drop
     * the pipelined responses behind the first, whose requests the app ran. */
    for (struct conn *c = l->conns.next; c != &l->conns; c = c->next)
        conn_stop(c);
    /* Out of the epoll set but open: the backlog stays in the socket (its
     * other holders, the successor or the supervisor, accept it). */
    if (l->listen_fd >= 0 && !l->accept_pause.until_ms)
        epoll_ctl(l->epfd, EPOLL_CTL_DEL, l->listen_fd, NULL);
    l->accept_pause.until_ms = 0;
    /* Parked for room: answered now (conn_start_app refuses), not run.
     * Idle connections go from this pass on (loop_run: conn_stop_if_idle). */
    while (dispatch_first_waiting(&l->disp))
        conn_retry_submit(dispatch_first_waiting(&l->disp));
}

int loop_set_active(struct loop *l, unsigned n)
{
    return dispatch_set_active(&l->disp, n);
}

/* SIGTERM and SIGINT stop the loop; every signal goes to the hooks too
 * (a handover in progress passes a stop on to the successor's supervisor). */
static void on_signal(struct loop *l)
{
    struct server_signal si;
    while (signals_next(&si)) {
        if (si.signo == SIGTERM || si.signo == SIGINT)
            loop_stop(l, false);
        for (unsigned i = 0; i < l->nhooks; i++)
            if (l->hooks[i]->signal)
                l->hooks[i]->signal(l->hooks[i]->ctx, l, &si);
    }
}

/* Returns how many messages it handled. */
static size_t drain_completions(struct loop *l, bool fd_ready)
{
    struct job *done[MAX_DRAIN];
    size_t n, total = 0;
    do {
        n = l->handoff->ops->drain(l->handoff, fd_ready, done, MAX_DRAIN);
        fd_ready = false;
        total += n;
        if (n) /* when they finished, as near as the loop can tell: the paces */
            dispatch_clock(&l->disp, clock_ns());
        /* Each message is in a line another core wrote: ask for all of them
         * before reading the first, so the transfers overlap. */
        for (size_t i = 0; i < n; i++)
            job_prefetch_message(done[i]);
        for (size_t i = 0; i < n; i++)
            conn_on_message(done[i]->conn, done[i]);
    } while (n == MAX_DRAIN);
    dispatch_settle(&l->disp);
    return total;
}

/* Submit what waits for a thread (CONN_QUEUED), oldest first, while a
 * thread has room: in the pass that took the completions that made it.
 * Every pass, not only after a drain: a hand-off may refuse with nothing in flight (a datagram
 * socket out of buffers, the test build's fault hook), and then no
 * completion ever comes to wake a backend that is not polled; the loop's
 * timed pass (at most a second apart) is what retries. A connection is
 * never freed during a pass (conn_reap runs at its end), so c can be read
 * after the retry whatever became of it. */
static void retry_pending(struct loop *l)
{
    while (dispatch_can_retry(&l->disp)) {
        struct conn *c = dispatch_first_waiting(&l->disp);
        conn_retry_submit(c);
        if (c->state == CONN_QUEUED)
            break; /* still full */
    }
}

static void expire_timers(struct loop *l)
{
    struct timer_list *lists[] = {&l->t_header, &l->t_keepalive, &l->t_io, &l->t_linger, &l->t_hold};
    for (size_t i = 0; i < sizeof lists / sizeof *lists; i++) {
        struct timer_link *t;
        while ((t = timer_expired(lists[i], l->now_ms)) != NULL) {
            struct conn *c = (struct conn *)((char *)t - offsetof(struct conn, timer));
            conn_on_timeout(c);
        }
    }
}

static int next_timeout_ms(struct loop *l)
{
    /* At least once a second (the date, the hooks' ticks, shutdown); a hook
     * with something due sooner shortens it. */
    uint64_t t = 1000;
    struct timer_list *lists[] = {&l->t_header, &l->t_keepalive, &l->t_io, &l->t_linger, &l->t_hold};
    for (size_t i = 0; i < sizeof lists / sizeof *lists; i++) {
        uint64_t n = timer_next_ms(lists[i], l->now_ms);
        if (n < t)
            t = n;
    }
    if (l->accept_pause.until_ms && l->accept_pause.until_ms - l->now_ms < t)
        t = l->accept_pause.until_ms > l->now_ms ? l->accept_pause.until_ms - l->now_ms : 0;
    if (l->stopping)
        t = t > 50 ? 50 : t;
    int ms = (int)t;
    for (unsigned i = 0; i < l->nhooks; i++)
        if (l->hooks[i]->before_sleep)
            ms = l->hooks[i]->before_sleep(l->hooks[i]->ctx, l, ms);
    return ms;
}

/* While stopping or refusing, the loop looks at every connection for what
 * it closes (conn_stop_unstarted, conn_stop_if_idle): on the first two
 * passes, which close what the stop found idle or not to run (the second
 * closes what its probe read nothing from), then at most every
 * LOOP_SWEEP_MS for what is left. A connection that comes to such a state
 * later closes where it does (conn_finish, conn_start_app); a look every
 * pass would cost a loop of many connections a walk of them all for each
 * event, a byte dribbled by one client included, until the stop ends. */
#define LOOP_SWEEP_MS 50

static bool sweep_due(struct loop *l)
{
    if (l->stop.sweeps < 2 || l->now_ms - l->stop.swept_ms >= LOOP_SWEEP_MS) {
        l->stop.sweeps += l->stop.sweeps < 2;
        l->stop.swept_ms = l->now_ms;
        return true;
    }
    return false;
}

static bool drained(struct loop *l)
{
    return l->nconns == 0 && dispatch_outstanding_total(&l->disp) == 0;
}

/* epoll_wait for at most timeout_ms, or doze_ns when that is set and shorter
 * (a doze is microseconds: epoll_pwait2 takes a timespec). A kernel without
 * epoll_pwait2 (before 5.11) gets this one wait rounded up to a millisecond,
 * still bounded, and no doze after it. */
static int wait_events(struct loop *l, struct epoll_event *events, int timeout_ms, uint64_t doze_ns)
{
    if (!doze_ns)
        return epoll_wait(l->epfd, events, MAX_EVENTS, timeout_ms);
    if (timeout_ms >= 0 && (uint64_t)timeout_ms * 1000000u < doze_ns)
        doze_ns = (uint64_t)timeout_ms * 1000000u;
    struct timespec ts = {.tv_sec = (time_t)(doze_ns / 1000000000u), .tv_nsec = (long)(doze_ns % 1000000000u)};
    int n = epoll_pwait2(l->epfd, events, MAX_EVENTS, &ts, NULL);
    if (n < 0 && errno == ENOSYS) {
        log_warn("epoll_pwait2: %s; the loop will not doze", strerror(errno));
        dispatch_doze_off(&l->disp);
        n = epoll_wait(l->epfd, events, MAX_EVENTS, 1);
    }
    return n;
}

/* A hold (handoff.h): sleep hold_ns (or until the loop's own timeout)
 * without watching the sockets, then take every event that came meanwhile
 * without waiting. A signal delivered to this thread ends the sleep early
 * (EINTR); one taken by another thread waits for the hold's end (at most
 * the hold's ceiling). Either is read in this pass like any event. */
static int hold_events(struct loop *l, struct epoll_event *events, int timeout_ms, uint64_t hold_ns)
{
    if (timeout_ms >= 0 && (uint64_t)timeout_ms * 1000000u < hold_ns)
        hold_ns = (uint64_t)timeout_ms * 1000000u;
    struct timespec ts = {.tv_sec = (time_t)(hold_ns / 1000000000u), .tv_nsec = (long)(hold_ns % 1000000000u)};
    clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
    return epoll_wait(l->epfd, events, MAX_EVENTS, 0);
}

void loop_snapshot(const struct loop *l, struct loop_snapshot *out)
{
    const struct dispatch *d = &l->disp;
    unsigned n = dispatch_threads(d) < STATS_MAX_THREADS ? dispatch_threads(d) : STATS_MAX_THREADS;
    out->threads = n;
    out->active = dispatch_active(d) < n ? dispatch_active(d) : n;
    out->nconns = l->nconns;
    out->waiting = dispatch_waiting(d);
    for (unsigned w = 0; w < n; w++)
        out->outstanding[w] = dispatch_outstanding(d, w);
}

unsigned loop_run(struct loop *l)
{
    struct epoll_event events[MAX_EVENTS];
    const struct handoff_ops *hops = l->handoff ? l->handoff->ops : NULL;
    /* A doze or a hold (handoff.h) is microseconds; the kernel's default
     * timer slack (50 us) would stretch it by as much again. This thread's
     * other timeouts are milliseconds and lose nothing by being precise.
     * Set here, on the loop's own thread once the pool has started, not
     * before: a thread inherits its creator's slack, and the app's own
     * sleeps on a pool thread keep the kernel's default, as under any
     * other server. */
    prctl(PR_SET_TIMERSLACK, 1000UL);
    uint64_t t_mark = clock_ns();
    for (;;) {
        int timeout = next_timeout_ms(l);
        bool slept = false;
        uint64_t doze_ns = 0, hold_ns = 0;
        if (timeout != 0 && hops) {
            struct dispatch_wait plan;
            dispatch_plan_wait(&l->disp, l->now_ms, &plan);
            hold_ns = plan.hold_ns;
            doze_ns = plan.doze_ns;
            if (!hold_ns && !doze_ns) {
                if (hops->before_sleep(l->handoff, dispatch_outstanding_total(&l->disp)))
                    timeout = 0;
                slept = true;
            }
        }
        uint64_t t0 = clock_ns();
        int n = hold_ns ? hold_events(l, events, timeout, hold_ns) : wait_events(l, events, timeout, doze_ns);
        uint64_t t1 = clock_ns();
        if (slept)
            hops->after_sleep(l->handoff);
        STAT(counter_inc(&l->lstats.passes); counter_inc(&l->lstats.epoll_waits);
             counter_add(&l->lstats.wait_ns, t1 - t0); counter_add(&l->lstats.pass_ns, t0 - t_mark));
        t_mark = t1;
        if (n < 0) {
            if (errno != EINTR) {
                log_error("epoll_wait: %s", strerror(errno));
                break;
            }
            n = 0;
        }
        STAT(counter_add(&l->lstats.events, (uint64_t)n));
        l->now_ms = clock_coarse_ms();
        dispatch_clock(&l->disp, t1);
        bool handoff_ready = false;
        for (int i = 0; i < n; i++) {
            struct poll_src *src = events[i].data.ptr;
            switch (src->kind) {
            case POLL_CONN: conn_on_event((struct conn *)src, events[i].events); break;
            case POLL_LISTENER: on_listener(l); break;
            case POLL_HANDOFF: handoff_ready = true; break;
            case POLL_SIGNAL: on_signal(l); break;
            case POLL_WATCH: ((struct loop_watch *)src)->ready((struct loop_watch *)src, l); break;
            }
        }
        /* The requests this pass's socket events parsed are queued: start
         * the pool on all of them with one wake-up (at most one per parked
         * pool thread), before the responses below are written. A request
         * submitted while those are handled (the next one already in a
         * connection's buffer, a retry) is paid for by before_sleep or the
         * next pass's flush, at most one pass later. */
        if (hops && hops->flush)
            hops->flush(l->handoff);
        if (hops && (handoff_ready || hops->polled))
            drain_completions(l, handoff_ready);
        else if (hops) /* none was posted before the wait returned: that is a look too */
            dispatch_settle(&l->disp);
        retry_pending(l);
        expire_timers(l);
        for (unsigned i = 0; i < l->nhooks; i++)
            if (l->hooks[i]->tick)
                l->hooks[i]->tick(l->hooks[i]->ctx, l);
        conn_reap(l); /* the one place connections are freed */
        jobs_release_memory(l);
        resume_accepting(l);
        if ((l->stopping || l->refusing) && sweep_due(l)) {
            for (struct conn *c = l->conns.next, *next; c != &l->conns; c = next) {
                next = c->next;
                conn_stop_unstarted(c);
                conn_stop_if_idle(c);
            }
            conn_reap(l);
        }
        if (l->stopping) {
            if (drained(l))
                break;
            if (l->now_ms >= l->stop.deadline_ms) {
                log_warn("graceful timeout: %u request(s) still with the app, %u connection(s) open",
                         dispatch_outstanding_total(&l->disp), l->nconns);
                /* Every socket closed now: the process may live on (as its
                 * successor's supervisor) with the app's threads in it. A
                 * connection the app holds stays, socketless, until its
                 * jobs come back (CONN_ORPHAN). */
                for (struct conn *c = l->conns.next, *next; c != &l->conns; c = next) {
                    next = c->next;
                    conn_abort(c);
                }
                conn_reap(l);
                break;
            }
        }
    }
    return dispatch_outstanding_total(&l->disp);
}

void loop_destroy(struct loop *l)
{
    /* Connections whose job is still with the app are left alone: the pool
     * may touch them. Only a clean stop frees everything. */
    if (dispatch_outstanding_total(&l->disp) == 0) {
        for (struct conn *c = l->conns.next; c != &l->conns; c = c->next)
            conn_abort(c);
        conn_reap(l);
    }
    stop_accepting(l);
    if (l->signal_fd >= 0)
        epoll_ctl(l->epfd, EPOLL_CTL_DEL, l->signal_fd, NULL);
    /* The hand-off's descriptors stay registered until its destroy, after
     * this: harmless, as no epoll_wait on this instance follows. */
    close(l->epfd);
    jobs_free_all(l);
    dispatch_destroy(&l->disp);
}

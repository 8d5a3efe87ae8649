/* dispatch.h — which pool thread runs which request.
 *
 * The loop's dispatcher: what is outstanding on each pool thread, which of
 * them take requests (`active`, a prefix), the requests that wait in the
 * loop for a thread (the pending list of connections, CONN_QUEUED), what the
 * loop owes each thread (its messages taken and not yet answered), and the
 * inputs of the loop's hold and doze. Everything here runs on the loop
 * thread. Other folders read it through the functions below, never its
 * fields. */
#ifndef CSERVE_DISPATCH_H
#define CSERVE_DISPATCH_H

#include <stdbool.h>
#include <stdint.h>

struct conn;
struct job;
struct handoff;

/* One pool thread, as the loop sees it. */
struct dispatch_thread {
    unsigned outstanding; /* jobs submitted, not yet done */
    /* For the app's silence timeout (conn_on_timeout): how many of its
     * messages the loop has taken and not yet answered, and when the loop
     * last heard from it (a message) or answered it (an ack). A request
     * queued behind another on a busy thread is waiting, not stuck. */
    unsigned owed;
    uint64_t seen_ms;
    /* Its pace: the time a request takes it (from the request's start to
     * the thread's own stamp of its completion), smoothed; 0 until its first
     * completion. A request starts at the later of its submit and the
     * previous one's completion. */
    uint64_t pace_ns;
    /* What a request may take it, for its depth and its turns: the pace,
     * but a sample past the budget is taken at once, and its excess over
     * the pace falls back by a DISPATCH_SLOW_FALL-th a request (dispatch.c,
     * settle_thread). */
    uint64_t slow_ns;
    uint64_t busy_since_ns;  /* when its current request started, as far as the loop can tell */
    uint64_t last_submit_ns; /* the submit of its newest request */
    uint64_t last_end_ns;    /* the stamp of the last completion taken (job.done_ns) */
    unsigned done_pass;      /* completions taken since the pace was last settled */
    unsigned run_pass;       /* of those, the ones the app ran (not job_skip's) */
    uint64_t work_ns;        /* the time these ran, summed */
};

/* The longest a request is meant to wait in a pool thread's queue before
 * that thread starts it (dispatch_depth): the ring's longest hold, so that
 * under uniform load every thread's queue outlasts a full hold. */
#define DISPATCH_BUDGET_NS 2000000u
/* The budget of a new request (dispatch_pick), or of a pipeline's next
 * that may bind as deep (dispatch_room's deep), on a pool that can never
 * have a second thread (--blocking-threads 1), and the most it queues that
 * way: that thread runs every request, so a request waits for it as long
 * in its queue as in the loop, and the deeper queue saves the loop the
 * passes that bind it. Bounded all the same, in time at the thread's
 * pace and in number: a bound request cannot be taken back once its
 * thread has started it (core/conn/README.md, "One thread"). */
#define DISPATCH_ALONE_NS 20000000u
#define DISPATCH_ALONE_MAX 256u
/* What one turn of a connection's is worth while others wait
 * (dispatch_turn): its requests' time, at most. A response written alone
 * costs the loop a write, about what a hello costs the app: a small part
 * of a request that takes more than half of this, which takes a turn of
 * its own. Enough for a batch of a pipeline's cheap requests (wrk's 16
 * hellos) at their pace as measured, in wall time: with the loop and the
 * client on the same few CPUs it reads several times their CPU, and half
 * this, 64 us, split such batches into several writes (core/conn/
 * README.md, "Turns"). */
#define DISPATCH_TURN_NS 128000u
/* A new connection's credit: a turn's worth in debt, so that its first
 * turn is one request (dispatch_turn). */
#define DISPATCH_CREDIT_START (-(int64_t)DISPATCH_TURN_NS)
/* The excess of a thread's slow side over its pace falls back by this
 * fraction (1/n) for each request it finishes (dispatch.c, settle_thread). */
#define DISPATCH_SLOW_FALL 8u
/* dispatch_pick: no thread may take one more now. */
#define DISPATCH_NONE (~0u)

struct dispatch {
    struct handoff *handoff;      /* NULL with --inline or native-hello */
    unsigned threads;             /* pool threads (with --blocking-threads auto, the most it may have) */
    unsigned active;              /* the ones it submits to: 0..active-1 (dispatch_set_active) */
    unsigned capacity;            /* the most outstanding on one thread (the hand-off's bound) */
    unsigned outstanding_total;
    struct dispatch_thread *t;    /* [threads] */
    uint64_t talked_ms;           /* now_ms of the last message a pool thread sent mid-request */
    bool no_doze;                 /* the kernel lacks epoll_pwait2: never doze */
    bool unsettled;               /* completions taken whose pace is not yet settled */
    uint64_t now_ns;              /* the pass's clock (dispatch_clock) */
    uint64_t looked_ns;           /* the clock of the loop's last look at the completions (dispatch_settle) */
    struct conn *pending_head, *pending_tail; /* waiting for a thread, in arrival order */
    unsigned waiting;             /* connections on the pending list */
};

/* How many requests a pool thread may have outstanding (the one it runs
 * and those queued behind it) when it takes a request in pace_ns and its
 * current one has run running_ns (0: none): 1 until it has a pace, and
 * once its current request has run past budget_ns; else 1 and as many as
 * fill the budget at the larger of the two, at most capacity. */
unsigned dispatch_depth(uint64_t pace_ns, uint64_t running_ns, uint64_t budget_ns, unsigned capacity);

/* threads pool threads on h (h NULL, threads 0: no pool), each taking at
 * most capacity jobs. 0, or -1 out of memory. */
int dispatch_init(struct dispatch *d, struct handoff *h, unsigned threads, unsigned capacity);
void dispatch_destroy(struct dispatch *d);

static inline unsigned dispatch_threads(const struct dispatch *d) { return d->threads; }
static inline unsigned dispatch_active(const struct dispatch *d) { return d->active; }
/* Where the count of active threads lives, for a reader that follows it
 * (the stats' pool_active). */
static inline const unsigned *dispatch_active_ref(const struct dispatch *d) { return &d->active; }
static inline unsigned dispatch_outstanding(const struct dispatch *d, unsigned w) { return d->t[w].outstanding; }
static inline unsigned dispatch_outstanding_total(const struct dispatch *d) { return d->outstanding_total; }
/* The connection that has waited longest for a thread, or NULL. */
static inline struct conn *dispatch_first_waiting(const struct dispatch *d) { return d->pending_head; }
/* Connections waiting for a thread. */
static inline unsigned dispatch_waiting(const struct dispatch *d) { return d->waiting; }
/* The time of the loop's pass (clock_ns), for the paces and the depths. */
static inline void dispatch_clock(struct dispatch *d, uint64_t now_ns) { d->now_ns = now_ns; }

/* Submit to threads 0..n-1 only from now on (1 <= n <= threads); the
 * threads at n and above must have nothing outstanding. 0, or -1 (nothing
 * changed). Tells the hand-off. */
int dispatch_set_active(struct dispatch *d, unsigned n);

/* The thread a new request goes to: of the active threads with room (below
 * their depth; deeper when the pool can have only one thread, see
 * DISPATCH_ALONE_NS), the shortest queue, ties to the lowest index, so
 * that at low load the work stays on one hot (spinning) thread and the
 * others stay parked rather than each being woken in turn, as round-robin
 * would. DISPATCH_NONE when none has room: the request waits in the loop. */
unsigned dispatch_pick(const struct dispatch *d);
/* True when thread w may be given one more job now: an active thread below
 * its depth (false for one being retired, and for DISPATCH_NONE). A
 * pipeline's next requests ask this. The depth is the budget's
 * (DISPATCH_BUDGET_NS), unless deep: they are part of their connection's
 * turn, whose number its credit bounds (dispatch_turn), or they fit in a
 * turn's worth (dispatch_turn_fits), so on a pool of one thread they bind
 * as deep as a new request (DISPATCH_ALONE_NS). */
bool dispatch_room(const struct dispatch *d, unsigned w, bool deep);
/* How many requests, in all, one connection's turn may give thread w
 * while other connections wait for a thread (the one that waited, and
 * those pipelined behind it), given its *credit: the credit first gains
 * DISPATCH_TURN_NS, up to that much; then as many as it covers at what a
 * request may take w (slow_ns), at least 1 and at most the capacity; 1
 * while w has no pace or the credit is not above 0. */
unsigned dispatch_turn(const struct dispatch *d, unsigned w, int64_t *credit);
/* True when n requests of thread w's fit in a turn's worth
 * (DISPATCH_TURN_NS) at what a request may take it (slow_ns); false while
 * it has no pace. A pipeline's next ones out of a turn bind as deep as a
 * turn's (dispatch_room) while they fit. */
bool dispatch_turn_fits(const struct dispatch *d, unsigned w, unsigned n);
/* A request of a turn ran ran_ns (dispatch_done): less credit. */
void dispatch_charge(int64_t *credit, uint64_t ran_ns);
/* Submit job to thread w (DISPATCH_NONE: HANDOFF_FULL): HANDOFF_OK (job->thread is w, counted as
 * outstanding), HANDOFF_FULL or HANDOFF_ERROR (nothing changed). */
int dispatch_submit(struct dispatch *d, unsigned w, struct job *job);
/* True when the first waiting connection may be retried now. */
bool dispatch_can_retry(const struct dispatch *d);

/* The app's messages, as the loop takes them: job's thread finished it
 * (JOB_DONE; its time, from job.submit_ns or the previous completion to
 * job.done_ns, counts toward the pace, and is returned), or posted a
 * message and waits for the loop's answer. */
uint64_t dispatch_done(struct dispatch *d, const struct job *job, uint64_t now_ms);
/* After the pass has taken the completions there were (none, for a
 * hand-off that said it had none): each thread that finished requests
 * gets its pace (the time they ran over their number: a pass may take
 * many at once), and what the loop knows of every thread is as of now. */
void dispatch_settle(struct dispatch *d);
void dispatch_message(struct dispatch *d, const struct job *job, uint64_t now_ms);
/* The loop answered job's message: its thread runs again. */
void dispatch_answered(struct dispatch *d, const struct job *job, uint64_t now_ms);
/* Thread w is working (not stuck): the loop owes it an answer, or heard
 * from it within timeout_ms. */
bool dispatch_thread_working(const struct dispatch *d, unsigned w, uint64_t now_ms, uint64_t timeout_ms);

/* The pending list: c waits for a thread (at the end; first: at the head,
 * the place it had), or no longer. */
void dispatch_park(struct dispatch *d, struct conn *c, bool first);
void dispatch_unpark(struct dispatch *d, struct conn *c);

/* How the loop waits when it would block with jobs out: a hold (hold_ns:
 * sleep deaf to the sockets while every pool thread has work queued), a
 * doze (doze_ns: a short timed wait announced to nobody), or neither (both
 * 0: announce the sleep through the hand-off's before_sleep). */
struct dispatch_wait {
    uint64_t hold_ns, doze_ns;
};
void dispatch_plan_wait(struct dispatch *d, uint64_t now_ms, struct dispatch_wait *w);
/* The kernel cannot doze (no epoll_pwait2): never plan one again. */
static inline void dispatch_doze_off(struct dispatch *d) { d->no_doze = true; }

#endif

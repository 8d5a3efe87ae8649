/* ring_protocol.pml — the ring's whole park/wake protocol (handoffs/ring.c)
 * under a weak memory model, checked with spin by check_model.sh.
 *
 * Threads: the loop and two pool threads. The loop submits N jobs round-robin
 * (never more than CAP outstanding per worker: the capacity rule; a submit
 * that finds a worker parked owes it a wake-up, paid when the loop ends the
 * batch with ring_flush or, at the latest, in ring_before_sleep), drains
 * completions every pass, and when it has nothing to submit either holds or
 * dozes (a bounded wait announced to nobody, ring_hold, ring_doze) or
 * announces that it will sleep (ring_before_sleep) and blocks in epoll_wait
 * until the eventfd is written; when all N are back it calls ring_shutdown. Each pool thread takes
 * (pop; park on its futex when empty) and completes (push; write the eventfd
 * if the loop announced a sleep; the two workers race for loop_parked) until
 * shutdown. Spinning and yielding before a park are extra pops: they can only
 * find work sooner, so the model leaves them out.
 *
 * Memory: per thread, per location, at most one store waits in a buffer and
 * reaches memory at a moment the `memory` process picks (partial store order:
 * a thread's stores to different locations may land in either order, as C11
 * relaxed stores may). A thread's own loads see its buffered store first. A
 * release store (R1, the ring's tail) first lands the thread's earlier stores.
 * A seq_cst fence, a locked exchange and every syscall (futex, eventfd,
 * epoll) land all of the thread's buffered stores first. futex_wait compares
 * the word in memory and sleeps only if it still holds 1; futex_wake wakes a
 * sleeper if there is one and is otherwise lost. The eventfd is registered
 * edge-triggered and never read (ring_watch): a write leaves an edge pending
 * in epoll, and the epoll_wait that reports it consumes it, whatever the
 * eventfd's count.
 *
 * Properties: every job is completed and drained once (assert), no thread
 * blocks forever (spin's invalid end state), complete never finds its ring
 * full (assert: the capacity rule). REACH_WAKE / REACH_LOOPWAKE assert(0) on
 * the worker's and the loop's wake paths: those runs must fail, showing the
 * checked run really parks and wakes both sides (not a vacuous pass).
 *
 * Mutants: NO_F1..NO_F5 drop that fence, NO_X1 wakes before clearing
 * `parked`, NO_C1 lets ring_before_sleep look at its cached tail, NO_O1
 * lets the loop block with a worker's wake-up still owed. check_model.sh
 * derives these switches from handoffs/ring_order.h for the build it checks.
 *
 * Every step that ring.c also has carries a tag (a comment starting with @)
 * inside an inline named after the ring.c function; check_steps.py requires
 * the tags, in order, to match the operations in that function's code. */

#ifndef N
#define N 3
#endif
#define W 2
#define CAP 1
#ifndef WAKE_BATCH
#define WAKE_BATCH 32
#endif

/* ---- memory: value, and per-thread buffered store (pending flag + value) */
byte req_tail[W];   /* loop writes (R1) */
byte done_tail[W];  /* worker w writes (R1) */
bit parked[W];      /* worker w writes 1/0; the loop exchanges / stores 0 */
bit loop_parked;    /* the loop writes 1/0; workers exchange */
bit stopping;       /* the loop writes 1 */
bit asleep[W];      /* kernel: worker w blocked in futex_wait */
bit efd;            /* kernel: an edge of the eventfd is pending in epoll */

/* the loop's buffered stores */
bit lb_req_p[W]; byte lb_req_v[W];
bit lb_parked_p[W];                    /* value is always 0 (shutdown / X1 mutant) */
bit lb_lp_p; bit lb_lp_v;
bit lb_stop_p;                         /* value is always 1 */
/* worker w's buffered stores */
bit wb_done_p[W]; byte wb_done_v[W];
bit wb_parked_p[W]; bit wb_parked_v[W];

inline land_loop() {
    atomic {
        if :: lb_req_p[0] -> req_tail[0] = lb_req_v[0]; lb_req_p[0] = 0 :: else fi;
        if :: lb_req_p[1] -> req_tail[1] = lb_req_v[1]; lb_req_p[1] = 0 :: else fi;
        if :: lb_parked_p[0] -> parked[0] = 0; lb_parked_p[0] = 0 :: else fi;
        if :: lb_parked_p[1] -> parked[1] = 0; lb_parked_p[1] = 0 :: else fi;
        if :: lb_lp_p -> loop_parked = lb_lp_v; lb_lp_p = 0 :: else fi;
        if :: lb_stop_p -> stopping = 1; lb_stop_p = 0 :: else fi
    }
}
inline land_worker(w) {
    atomic {
        if :: wb_done_p[w] -> done_tail[w] = wb_done_v[w]; wb_done_p[w] = 0 :: else fi;
        if :: wb_parked_p[w] -> parked[w] = wb_parked_v[w]; wb_parked_p[w] = 0 :: else fi
    }
}

/* The hardware lands any one buffered store, any time. */
active proctype memory()
{
end:
    do
    :: atomic { lb_req_p[0] -> req_tail[0] = lb_req_v[0]; lb_req_p[0] = 0 }
    :: atomic { lb_req_p[1] -> req_tail[1] = lb_req_v[1]; lb_req_p[1] = 0 }
    :: atomic { lb_parked_p[0] -> parked[0] = 0; lb_parked_p[0] = 0 }
    :: atomic { lb_parked_p[1] -> parked[1] = 0; lb_parked_p[1] = 0 }
    :: atomic { lb_lp_p -> loop_parked = lb_lp_v; lb_lp_p = 0 }
    :: atomic { lb_stop_p -> stopping = 1; lb_stop_p = 0 }
    :: atomic { wb_done_p[0] -> done_tail[0] = wb_done_v[0]; wb_done_p[0] = 0 }
    :: atomic { wb_done_p[1] -> done_tail[1] = wb_done_v[1]; wb_done_p[1] = 0 }
    :: atomic { wb_parked_p[0] -> parked[0] = wb_parked_v[0]; wb_parked_p[0] = 0 }
    :: atomic { wb_parked_p[1] -> parked[1] = wb_parked_v[1]; wb_parked_p[1] = 0 }
    od
}

/* ---------------------------------------------------------------- the loop */
byte sub_tail[W];    /* the loop's own req tail (its loads of it forward) */
byte done_head[W];   /* the loop's consumer index on done[w] */
byte tail_cache[W];  /* the loop's cached copy of done_tail[w] */
byte outstanding[W];
byte drained_n;
bit old_l;
bit owed[W];         /* the loop's own: a submit saw worker w parked, wake-up not yet paid */
byte owed_jobs[W];   /* jobs submitted to w since the wake-up became owed */

/* Pays the wake-up a submit left owed (ring.c's pay_wake). */
inline pay_wake(w) {
    owed[w] = 0;
#ifndef NO_X1
    land_loop(); atomic { old_l = parked[w]; parked[w] = 0 }; /*@XCHG*/
    if
    :: old_l -> land_loop(); atomic { asleep[w] = 0 } /*@WAKE*/
    :: else
    fi
#else
    land_loop(); atomic { asleep[w] = 0 }; /*@WAKE*/
    lb_parked_p[w] = 1 /*@UNPARK*/
#endif
}

/* The submit only looks at `parked`: a parked worker is owed its wake-up,
 * paid by ring_flush or ring_before_sleep (O1), or by the submit at which
 * WAKE_BATCH jobs have been submitted since the debt began (ring.c's
 * RING_WAKE_BATCH). With CAP 1 that count passes 1 only through a stale
 * debt (the worker found its job in its re-check and withdrew, and the loop
 * left the flush to a later pass), so check_model.sh also runs the model
 * with WAKE_BATCH 2, where this path is taken. */
inline ring_submit(w) {
    land_loop(); /* R1 is a release: earlier stores land first */
    atomic { sub_tail[w]++; lb_req_p[w] = 1; lb_req_v[w] = sub_tail[w] } /*@PUSH*/
    outstanding[w]++;
#ifndef NO_F1
    land_loop(); /*@F1*/
#endif
    if
    :: owed[w] ->
        owed_jobs[w]++;
        if :: owed_jobs[w] >= WAKE_BATCH -> pay_wake(w) /*@PAY*/
        :: else
        fi
    :: else ->
        if
        :: parked[w] == 1 && !lb_parked_p[w] -> owed[w] = 1; owed_jobs[w] = 1 /*@LOAD_PARKED*/ /* (a buffered 0 of ours forwards) */
        :: else
        fi
    fi
}

/* The end of a batch: pay every owed wake-up. */
inline ring_flush() {
    i = 0;
    do
    :: i == W -> break
    :: else ->
        if :: owed[i] -> pay_wake(i) /*@PAY*/ :: else fi;
        i++
    od
}

/* One pass over both completion rings (spsc_pop: reload tail when the
 * cached copy says empty — A1). */
inline ring_drain() {
    i = 0;
    do
    :: i == W -> break
    :: else ->
        do
        :: done_head[i] == tail_cache[i] && done_tail[i] != tail_cache[i] -> tail_cache[i] = done_tail[i]
        :: done_head[i] != tail_cache[i] -> /*@POP*/
            done_head[i]++; outstanding[i]--; drained_n++
        :: else -> break
        od;
        i++
    od
}

inline ring_before_sleep() {
#ifndef NO_O1
    ring_flush(); /*@FLUSH*/
#endif
    atomic { lb_lp_p = 1; lb_lp_v = 1 }; /*@LPARK*/
#ifndef NO_F4
    land_loop(); /*@F4*/
#endif
    waiting = 0;
    i = 0;
    do
    :: i == W -> break
    :: else ->
#ifndef NO_C1
        tail_cache[i] = done_tail[i];
#endif
        if :: tail_cache[i] != done_head[i] -> waiting = 1 :: else fi; /*@NONEMPTY*/
        i++
    od;
    if :: waiting -> atomic { lb_lp_p = 1; lb_lp_v = 0 } /*@LUNPARK*/
    :: else
    fi
}

/* A doze (ring_doze): a bounded wait the loop announces to nobody, so no
 * worker writes the eventfd for it; the loop drains when it ends. Whether the
 * code dozes depends on clocks, which the model leaves to the choice below. */
inline ring_doze() {
#ifndef NO_O1
    ring_flush(); /*@FLUSH*/
#endif
    skip
}

/* A hold (ring_hold): to the protocol, a doze: a bounded wait announced to
 * nobody (a sleep deaf to the sockets, then an epoll_wait that does not
 * wait), the loop drains when it ends; whether it holds depends on the
 * workers' queues and paces, which the model leaves to the choice below. */
inline ring_hold() {
#ifndef NO_O1
    ring_flush(); /*@FLUSH*/
#endif
    skip
}

inline ring_after_sleep() {
    atomic { lb_lp_p = 1; lb_lp_v = 0 } /*@LUNPARK*/
}

inline ring_shutdown() {
    lb_stop_p = 1; /*@STOP*/
#ifndef NO_F5
    land_loop(); /*@F5*/
#endif
    i = 0;
    do
    :: i == W -> break
    :: else ->
        lb_parked_p[i] = 1; /*@UNPARK*/
        land_loop(); atomic { asleep[i] = 0 }; /*@WAKE*/
        i++
    od;
    land_loop(); efd = 1 /*@EFD_W*/
}

active proctype loop()
{
    byte next = 0;
    byte i;
    bit waiting;
    do
    :: drained_n == N -> break
    :: else ->
        /* submit what the capacity rule allows */
        do
        :: next < N && outstanding[next % W] < CAP -> ring_submit(next % W); next++
        :: else -> break
        od;
        /* the pass ends the batch (core/conn/loop.c), or the owed wake-ups are
         * left to ring_before_sleep (a submit from a later stage of a pass) */
        if :: ring_flush() :: skip fi;
        ring_drain();
        if
        :: drained_n < N && (next == N || outstanding[next % W] == CAP) ->
            if
            :: if :: ring_hold() :: ring_doze() fi;
                land_loop(); efd = 0;            /* epoll_pwait2 until the timer, or a hold's
                                                  * sleep and epoll_wait(0): any edge */
                ring_drain()
            :: ring_before_sleep();
                if
                :: waiting -> land_loop(); efd = 0  /* epoll_wait(timeout 0) reports any edge */
                :: else ->
                    land_loop(); atomic { (efd == 1); efd = 0 } /* epoll_wait(-1): an edge */
#ifdef REACH_LOOPWAKE
                    assert(0);
#endif
                    skip
                fi;
                ring_after_sleep();
                ring_drain()
            fi
        :: else
        fi
    od;
    assert(drained_n == N);
    ring_shutdown()
}

/* ------------------------------------------------------------- the workers */
byte take_head[W];   /* worker w's consumer index on req[w] */
byte push_tail[W];   /* worker w's own done tail */
bit old_w[W];
bit got[W];
byte taken_n;

/* pop: a job is there if the visible tail is past our head (A1) */
inline pop(w) {
    if :: req_tail[w] != take_head[w] -> take_head[w]++; got[w] = 1 :: else -> got[w] = 0 fi
}

inline ring_take(w) {
    pop(w); /*@POP*/
    if :: got[w] == 0 -> pop(w) :: else fi; /*@POP*/ /* the yields' looks (and the spin's) */
    do
    :: got[w] -> break
    :: else ->
        atomic { wb_parked_p[w] = 1; wb_parked_v[w] = 1 }; /*@PARK*/
#ifndef NO_F2
        land_worker(w); /*@F2*/
#endif
        pop(w); /*@POP*/
        if
        :: got[w] -> break
        :: else
        fi;
        if
        :: stopping == 1 -> /*@LOAD_STOP*/
            atomic { wb_parked_p[w] = 1; wb_parked_v[w] = 0 }; /*@UNPARK*/
            goto done_w
        :: else
        fi;
        land_worker(w); atomic { if :: parked[w] == 1 -> asleep[w] = 1 :: else fi }; /*@WAIT*/
        (asleep[w] == 0);
#ifdef REACH_WAKE
        assert(0);
#endif
        pop(w) /*@POP*/
    od;
    /* withdraw: the load-then-store of ring.c lands as a store of 0 */
    skip; /*@LOAD_PARKED*/
    atomic { wb_parked_p[w] = 1; wb_parked_v[w] = 0 } /*@UNPARK*/
}

inline ring_complete(w) {
    assert(push_tail[w] - done_head[w] < CAP + 1);        /* never full: the capacity rule */
    land_worker(w); /* R1 is a release */
    atomic { push_tail[w]++; wb_done_p[w] = 1; wb_done_v[w] = push_tail[w] } /*@PUSH*/
#ifndef NO_F3
    land_worker(w); /*@F3*/
#endif
    if
    :: loop_parked == 1 -> /*@LOAD_LPARKED*/
        land_worker(w); atomic { old_w[w] = loop_parked; loop_parked = 0 }; /*@XCHG*/
        if
        :: old_w[w] -> land_worker(w); efd = 1 /*@EFD_W*/
        :: else
        fi
    :: else
    fi
}

proctype worker(byte w)
{
    do
    :: ring_take(w); atomic { taken_n++ }; ring_complete(w)
    od;
done_w:
    skip
}

init {
    atomic { run worker(0); run worker(1) }
}

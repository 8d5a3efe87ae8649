/* litmus_sb.c — the store-buffering (Dekker) litmus test on this machine.
 *
 *   litmus_sb [ROUNDS [MAX_SECONDS]]   (defaults 1000000 rounds, 3 s per variant)
 *
 * Two threads, each: store its own flag, then load the other's. The outcome
 * "both loaded the old value" is exactly the ring's lost wakeup (producer:
 * store tail, load parked; consumer: store parked, load tail — ring.c).
 *
 *   weak:   store(release); load(acquire)            — the forbidden outcome is
 *           allowed by C11 and by x86-TSO (store buffer): we print how often.
 *   fenced: store; atomic_thread_fence(seq_cst); load — must never happen:
 *           exit 1 if it does.
 *
 * A round's flag value is its round number, so nothing is reset between
 * rounds: "old" means "less than this round". The threads meet at a spin
 * barrier before every round so that their stores race closely. A weak run
 * that happens to show 0 (a quiet machine, threads on one core) is reported,
 * not failed: the claim tested is only that the fences forbid the outcome. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct shared {
    _Alignas(64) atomic_ulong x;       /* thread A's flag */
    _Alignas(64) atomic_ulong y;       /* thread B's flag */
    _Alignas(64) atomic_ulong arrived; /* barrier: 2 per round */
    _Alignas(64) unsigned long rounds;
    bool fenced;
    double max_seconds;            /* a loaded machine gets fewer rounds, not a hang */
    _Alignas(64) atomic_ulong done_rounds; /* set by A when it stops early */
    unsigned char *saw_old_a, *saw_old_b; /* per round: did A (B) load an old value */
};

static struct shared S;

/* Both threads arrive, then both leave as close together as we can make it. */
static void barrier(unsigned long round)
{
    atomic_fetch_add_explicit(&S.arrived, 1, memory_order_acq_rel);
    unsigned long target = 2 * round; /* rounds count from 1 */
    unsigned spins = 0;
    while (atomic_load_explicit(&S.arrived, memory_order_acquire) < target)
        if (++spins % 128 == 0)
            sched_yield(); /* the partner may share our core: let it run */
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Side A alone decides when to stop (every 64 rounds it looks at the clock)
 * and publishes the round count before the barrier B is waiting at. */
static void run_side(atomic_ulong *mine, atomic_ulong *theirs, unsigned char *saw_old, bool decides)
{
    double deadline = now_s() + S.max_seconds;
    for (unsigned long r = 1; r <= S.rounds; r++) {
        if (decides && r % 64 == 0 && now_s() > deadline)
            atomic_store(&S.done_rounds, r - 1);
        barrier(r);
        unsigned long stop = atomic_load(&S.done_rounds);
        if (stop && r > stop)
            break;
        unsigned long seen;
        if (S.fenced) {
            atomic_store_explicit(mine, r, memory_order_relaxed);
            atomic_thread_fence(memory_order_seq_cst);
            seen = atomic_load_explicit(theirs, memory_order_relaxed);
        } else {
            atomic_store_explicit(mine, r, memory_order_release);
            seen = atomic_load_explicit(theirs, memory_order_acquire);
        }
        saw_old[r - 1] = seen < r;
    }
}

static void *side_a(void *p) { (void)p; run_side(&S.x, &S.y, S.saw_old_a, true); return NULL; }
static void *side_b(void *p) { (void)p; run_side(&S.y, &S.x, S.saw_old_b, false); return NULL; }

/* Returns the rounds where both sides loaded an old value; *ran: rounds run. */
static unsigned long run(bool fenced, unsigned long rounds, unsigned long *ran)
{
    S.rounds = rounds;
    S.fenced = fenced;
    atomic_store(&S.done_rounds, 0);
    atomic_store(&S.x, 0);
    atomic_store(&S.y, 0);
    atomic_store(&S.arrived, 0);
    S.saw_old_a = calloc(rounds, 1);
    S.saw_old_b = calloc(rounds, 1);
    if (!S.saw_old_a || !S.saw_old_b) {
        perror("calloc");
        exit(2);
    }
    pthread_t a, b;
    pthread_create(&a, NULL, side_a, NULL);
    pthread_create(&b, NULL, side_b, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    unsigned long stop = atomic_load(&S.done_rounds);
    *ran = stop ? stop : rounds;
    unsigned long both_old = 0;
    for (unsigned long r = 0; r < *ran; r++)
        both_old += S.saw_old_a[r] && S.saw_old_b[r];
    free(S.saw_old_a);
    free(S.saw_old_b);
    return both_old;
}

int main(int argc, char **argv)
{
    unsigned long rounds = argc > 1 ? strtoul(argv[1], NULL, 0) : 1000000;
    S.max_seconds = argc > 2 ? strtod(argv[2], NULL) : 3.0;
    if (rounds == 0)
        rounds = 1;
    unsigned long ran;
    unsigned long weak = run(false, rounds, &ran);
    printf("litmus_sb weak   (release/acquire): both loaded the old value in %lu of %lu rounds (%.2f %%)%s\n",
           weak, ran, 100.0 * (double)weak / (double)ran,
           weak ? "" : "  [note: none seen this run; allowed, not a failure]");
    unsigned long fenced = run(true, rounds, &ran);
    printf("litmus_sb fenced (seq_cst fences) : both loaded the old value in %lu of %lu rounds\n", fenced, ran);
    if (fenced) {
        fprintf(stderr, "litmus_sb: FAIL: the seq_cst fences allowed the store-buffering outcome\n");
        return 1;
    }
    printf("litmus_sb: OK\n");
    return 0;
}

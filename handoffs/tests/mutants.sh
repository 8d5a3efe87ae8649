#!/bin/sh
# mutants.sh [--litmus] WORKDIR — build every ring mutant (handoffs/ring_order.h)
# and require the tests named for it to fail on it. Exit 1 if any mutant
# survives.
#
#   F1..F4  the Promela model; with --litmus, the litmus test on ring.c
#           instead (ring_litmus.c, --expect-lost: a lost handshake must be
#           seen on this CPU within LITMUS_MUTANT_SECONDS)
#   F5, X1, C1  the Promela model
#   O1      the Promela model AND batch_test.c (an unflushed owed wake-up
#           must be paid by before_sleep)
#   R1, A1, R2, A2, R3  spsc_test.c under TSan (a data race on a slot or payload;
#           R3, the batched push's release, only in its second part)
#   P1, P2  spin_policy_test.c (P1: spin_policy.c without hysteresis,
#           P2: without the trials; a feedback-loop case fails)
#   D1..D5  batch_test.c, the doze policy (ring.c, ring_doze): D1 no doze for a
#           fast pool, D2 a fast pool dozed through whatever its queue, D3 the
#           stall rule removed, D4 the stall rule removed for a fast pool
#           only, D5 a slow pool's doze blind to its queue (part 10's cases,
#           on a fixed clock); each fails the case named for it
#   H1..H5  batch_test.c, the hold policy (ring.c, ring_hold): H1 no
#           ceiling, H2 the stall rule removed, H3 a hold while a worker has
#           nothing queued, H4 no margin, H5 a worker that waits held as one
#           that works (part 8's cases, on a fixed clock)
# batch_test runs without --paced here: the verdicts the code decides
# alone, so a busy machine cannot hide a mutant behind a paced part's miss.
# The table in handoffs/README.md is this list, with the reasons.
# Without --litmus (make mutants, in make test) every verdict is the code's
# alone: the model's search, batch_test's awaited steps and rule cases, a
# race TSan sees in any interleaving, the spin policy fed synthetic waits.
# Whether this CPU shows a fence's absence within the litmus test's seconds
# depends on how often the two threads run at once, which a busy machine
# changes: --litmus (make perf-check) checks F1..F4 that way, alone.
set -u
litmus=0
if [ "${1:-}" = --litmus ]; then litmus=1; shift; fi
work=${1:?usage: mutants.sh [--litmus] WORKDIR}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
cc=${CC:-cc}
cflags="-std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -g"
litmus_s=${LITMUS_MUTANT_SECONDS:-20}
mkdir -p "$work" && work=$(cd "$work" && pwd)
survivors=""
t0=$(date +%s)

# ring_litmus.c and batch_test.c #include ring.c: every other handoff source
# beside them.
others=$(ls "$src"/*.c | grep -v '/ring\.c$')

all="F1 F2 F3 F4 F5 X1 C1 O1 R1 A1 R2 A2 R3 P1 P2 D1 D2 D3 D4 D5 H1 H2 H3 H4 H5"
[ "$litmus" = 0 ] || all="F1 F2 F3 F4"
for m in $all; do
    need="" caught=""
    [ "$litmus" = 1 ] || case $m in F*|X1|C1|O1)
        need="$need model"
        "$here/check_model.sh" "$work/model" "$m" >"$work/$m.model.log" 2>&1 && caught="$caught model" ;;
    esac
    [ "$litmus" = 0 ] || case $m in F1|F2|F3|F4)
        side=worker; case $m in F3|F4) side=loop ;; esac
        need="$need litmus-$side"
        if $cc $cflags -O2 -DRING_MUTANT=RING_M_$m -o "$work/litmus-$m" "$here/ring_litmus.c" \
               $others -lpthread &&
           "$work/litmus-$m" $side "$litmus_s" --expect-lost >"$work/$m.litmus.log" 2>&1; then
            caught="$caught litmus-$side"
        fi ;;
    esac
    case $m in O1|D*|H*)
        need="$need batch"
        case $m in
            O1) def="-DRING_MUTANT=RING_M_O1" want="before_sleep did not pay" ;;
            D1) def="-DRING_DOZE_MUTANT_D1" want="dozes while a fast worker had a long queue" ;;
            D2) def="-DRING_DOZE_MUTANT_D2" want="a fast pool's doze" ;;
            D3) def="-DRING_DOZE_MUTANT_D3" want="kept dozing through a stall of many paces" ;;
            D4) def="-DRING_DOZE_MUTANT_D4" want="kept dozing through a fast worker's stall" ;;
            D5) def="-DRING_DOZE_MUTANT_D5" want="a slow pool's doze is not" ;;
            H1) def="-DRING_HOLD_MUTANT_H1" want="a hold past RING_HOLD_MAX_NS" ;;
            H2) def="-DRING_HOLD_MUTANT_H2" want="a hold through a stall" ;;
            H3) def="-DRING_HOLD_MUTANT_H3" want="a hold while a worker had nothing queued" ;;
            H4) def="-DRING_HOLD_MUTANT_H4" want="a hold that is not the shortest queued work less the margin" ;;
            H5) def="-DRING_HOLD_MUTANT_H5" want="a hold for a pool that waits more than it works" ;;
        esac
        $cc $cflags -O2 $def -o "$work/batch-$m" "$here/batch_test.c" $others -lpthread &&
        if "$work/batch-$m" >"$work/$m.batch.log" 2>&1; then :;
        elif grep -q "$want" "$work/$m.batch.log"; then caught="$caught batch"; fi ;;
    esac
    case $m in R*|A*)
        need="$need spsc-tsan"
        $cc $cflags -O1 -fsanitize=thread -DRING_MUTANT=RING_M_$m -o "$work/spsc-$m" "$here/spsc_test.c" -lpthread &&
        if TSAN_OPTIONS=halt_on_error=1 "$work/spsc-$m" 100000 >"$work/$m.tsan.log" 2>&1; then :;
        elif grep -q "ThreadSanitizer: data race" "$work/$m.tsan.log"; then caught="$caught spsc-tsan"; fi ;;
    esac
    case $m in P*)
        need="$need policy"
        $cc $cflags -O2 -DSPIN_POLICY_MUTANT_$m -o "$work/policy-$m" "$here/spin_policy_test.c" "$src/spin_policy.c" &&
        if "$work/policy-$m" >"$work/$m.policy.log" 2>&1; then :;
        elif grep -q "feedback loop.*FAIL" "$work/$m.policy.log"; then caught="$caught policy"; fi ;;
    esac
    # Every test named for the mutant must catch it.
    missing=""
    for t in $need; do case " $caught " in *" $t "*) ;; *) missing="$missing $t" ;; esac; done
    if [ -n "$missing" ]; then
        echo "mutant $m: SURVIVED:$missing did not fail (logs: $work/$m.*.log)" >&2
        survivors="$survivors $m"
    else
        detail=$(cat "$work"/$m.*.log 2>/dev/null | grep -oE '[0-9]+ rounds, [0-9]+ sleeps, [0-9]+ lost handshakes|invalid end state|ThreadSanitizer: data race|before_sleep did not pay|batch_test: FAIL: [^:]*|^spin_policy_test: .*FAIL$' | sed 's/^spin_policy_test: \(.*[^ ]\) *budget .*/\1 FAILED/' | sort -u | tr '\n' ';')
        echo "mutant $m: caught by$caught ($detail)"
    fi
done
echo "mutants: $(( $(date +%s) - t0 )) s"
[ -z "$survivors" ] || { echo "mutants: FAIL: survivors:$survivors" >&2; exit 1; }
echo "mutants: OK (every mutant caught)"

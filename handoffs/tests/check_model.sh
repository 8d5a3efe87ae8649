#!/bin/sh
# check_model.sh [--quick|--exhaustive] WORKDIR [MUTANT] — check
# handoffs/tests/ring_protocol.pml with spin.
#
# Without MUTANT (the build as it is):
#   check_steps.py   the model's steps match ring.c's operations, in order
#   checked          no lost wakeup, no hang, nothing lost: 0 errors
#   batch2           the same with WAKE_BATCH 2, so that a submit pays an owed
#                    wake-up (unreachable at 32 with capacity 1)
#   reach-wake       a worker parks and is woken (assert(0) there must fire)
#   reach-loopwake   the loop sleeps in epoll and is woken by the eventfd
# --quick: check_steps.py and the two reach searches (seconds; make test).
# --exhaustive: the two searches of every interleaving, checked and batch2
# (minutes each and about 5 GB each; make test-long). Neither: all of them.
# With MUTANT (F1..F5, X1, C1, O1: see handoffs/ring_order.h): the orderings the
# build -DRING_MUTANT=RING_M_MUTANT lacks are read from ring_order.h with the
# preprocessor and switched off in the model; exit 0 only if spin then finds a
# violation (the mutant is caught), 1 if the model still passes.
set -eu
part=all
case ${1:-} in --quick) part=quick; shift ;; --exhaustive) part=exhaustive; shift ;; esac
work=${1:?usage: check_model.sh [--quick|--exhaustive] WORKDIR [MUTANT]}
mutant=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
model=$here/ring_protocol.pml
cc=${CC:-cc}
python=${PYTHON:-/usr/bin/python3}
mkdir -p "$work" && work=$(cd "$work" && pwd)

# run_pan NAME SPIN_FLAGS... : prints the error count; output in WORK/NAME.out
run_pan() {
    name=$1; shift
    d=$work/$name
    rm -rf "$d" && mkdir -p "$d"
    (cd "$d" && spin "$@" -a "$model" >/dev/null && $cc -O2 -w -DSAFETY -o pan pan.c &&
     ./pan -m100000 >"$work/$name.out" 2>&1) || true
    sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$work/$name.out" | tail -n 1
}

if [ -n "$mutant" ]; then
    flags=$(for n in F1 F2 F3 F4 F5 X1 C1 O1; do printf '#if !RING_HAS_%s\n-DNO_%s\n#endif\n' $n $n; done |
            $cc -E -P -DRING_MUTANT=RING_M_$mutant -include "$here/../ring_order.h" - | grep '^-DNO_' | tr -s ' \n' ' ')
    if [ -z "$(echo $flags)" ]; then echo "model: mutant $mutant changes nothing the model has"; exit 1; fi
    errs=$(run_pan "mutant-$mutant" $flags)
    if [ -n "$errs" ] && [ "$errs" != 0 ]; then
        echo "model: mutant $mutant ($flags): violation found: $(grep -oE 'invalid end state|assertion violated.*' "$work/mutant-$mutant.out" | head -n 1)"
        exit 0
    fi
    echo "model: mutant $mutant ($flags): no violation" >&2
    exit 1
fi

fail=0
expect() { # NAME WANT(0|found) ERRORS REASON
    if [ "$2" = 0 ] && [ "$3" = 0 ]; then echo "ring_protocol.pml $1: no errors (expected) -- $4"
    elif [ "$2" = found ] && [ -n "$3" ] && [ "$3" != 0 ]; then echo "ring_protocol.pml $1: violation found (expected) -- $4"
    else echo "ring_protocol.pml $1: FAIL: errors=${3:-none} but expected $2 -- $4" >&2; fail=1; fi
}
# The searches are independent, and the exhaustive two take minutes each:
# they run side by side, then each is judged.
if [ "$part" != exhaustive ]; then
    $python "$here/check_steps.py" "$here/../ring.c" "$model" || fail=1
    run_pan reach-wake -DREACH_WAKE >"$work/reach-wake.errors" &
    run_pan reach-loopwake -DREACH_LOOPWAKE >"$work/reach-loopwake.errors" &
fi
if [ "$part" != quick ]; then
    run_pan checked >"$work/checked.errors" &
    run_pan batch2 -DWAKE_BATCH=2 >"$work/batch2.errors" &
fi
wait
if [ "$part" != quick ]; then
    expect checked    0     "$(cat "$work/checked.errors")"        "every ordering in place: no lost wakeup, no hang"
    expect batch2     0     "$(cat "$work/batch2.errors")"         "a submit pays an owed wake-up (stale debt): no lost wakeup, no hang"
fi
if [ "$part" != exhaustive ]; then
    expect reach-wake     found "$(cat "$work/reach-wake.errors")"     "a worker parks and is woken"
    expect reach-loopwake found "$(cat "$work/reach-loopwake.errors")" "the loop sleeps and the eventfd wakes it"
    grep -q "assertion violated" "$work/reach-wake.out" || fail=1
    grep -q "assertion violated" "$work/reach-loopwake.out" || fail=1
fi
exit $fail

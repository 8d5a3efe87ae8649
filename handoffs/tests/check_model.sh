#!/bin/sh
# check_model.sh WORKDIR — verify handoffs/tests/ring_park.pml with spin and
# assert every expected outcome:
#   both fences          -> 0 errors (no lost wakeup in any interleaving)
#   producer fence only  -> the lost wakeup is found
#   consumer fence only  -> the lost wakeup is found
#   no fences            -> the lost wakeup is found
#   both fences + REACH_WAKE -> the park/wake path is reachable (non-vacuous)
set -eu
work=${1:?usage: check_model.sh WORKDIR}
model=$(cd "$(dirname "$0")" && pwd)/ring_park.pml
cc=${CC:-cc}
mkdir -p "$work"
cd "$work"

# run_pan NAME FLAGS... : prints the pan error count
run_pan() {
    name=$1; shift
    rm -f pan pan.* "$name.out"
    spin "$@" -a "$model" >/dev/null
    $cc -O2 -w -DSAFETY -o pan pan.c
    ./pan -m10000 >"$name.out" 2>&1 || true
    sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$name.out" | tail -n 1
}

fail=0
expect() { # NAME WANT(0|found) ERRORS REASON
    if [ "$2" = 0 ] && [ "$3" = 0 ]; then echo "ring_park.pml $1: no errors (expected) -- $4"
    elif [ "$2" = found ] && [ -n "$3" ] && [ "$3" != 0 ]; then echo "ring_park.pml $1: violation found (expected) -- $4"
    else echo "ring_park.pml $1: FAIL: errors=${3:-none} but expected $2 -- $4" >&2; fail=1; fi
}

expect fenced      0     "$(run_pan fenced -DFENCE_P -DFENCE_C)" "fences on both sides: no lost wakeup"
expect no-cfence   found "$(run_pan no-cfence -DFENCE_P)"       "consumer fence removed: lost wakeup"
expect no-pfence   found "$(run_pan no-pfence -DFENCE_C)"       "producer fence removed: lost wakeup"
expect no-fences   found "$(run_pan no-fences)"                 "no fences: lost wakeup"
expect reach-wake  found "$(run_pan reach-wake -DFENCE_P -DFENCE_C -DREACH_WAKE)" "park+wake path is explored"
# The lost-wakeup runs must fail as a deadlock (invalid end state), not anything else.
for n in no-cfence no-pfence no-fences; do
    grep -q "invalid end state" "$n.out" || { echo "ring_park.pml $n: FAIL: not an invalid end state" >&2; fail=1; }
done
exit $fail

#!/bin/sh
# The sweep on a machine with a core for every thread (prepared; not run on
# the 2-vCPU guest the recorded results come from).
#
#   scripts/many_core.sh [OUT]      default experiments/results/many-core-<nproc>
#
# Placement "dedicated" (experiments/lib/pinning.py): CPU 0 for the harness
# and stray threads, the loop alone on CPU 1, each pool thread on a core of
# its own, the client on the rest, with CLIENT_THREADS threads (default 4).
# It runs in two invocations of the same command, because the loop-bound
# regime's prediction is committed before the run it predicts:
#
#   1st: the regime's calibration (shared placement) and its prediction for
#        the dedicated placement, into OUT/regime; then it stops and says
#        what to commit
#   2nd: the prediction's configurations, every thread on its own core
#        (experiments/regime.py); the main sweeps (calib, connections,
#        appcost, threads) dedicated, wrk with CLIENT_THREADS threads; the
#        free-threaded CPython at 1, 2 and 4 pool threads
#        (experiments/freethreaded.py, where build-ft exists); the report.
#
# On 16 cores: ~20 min for the first, ~1 h for the second.
set -eu
PY=${PYTHON:-/usr/bin/python3}
CLIENT_THREADS=${CLIENT_THREADS:-4}
n=$(nproc)
need=$((3 + CLIENT_THREADS))
if [ "$n" -lt "$need" ]; then
    echo "many_core.sh: $n CPUs; needs at least $need (harness, loop, pool, $CLIENT_THREADS client threads)" >&2
    exit 1
fi
cd "$(dirname "$0")/.."
OUT=${1:-experiments/results/many-core-$n}
make all
if [ ! -f "$OUT/regime/prediction.json" ]; then
    $PY -m experiments.regime --calibrate --placement dedicated --client-threads "$CLIENT_THREADS" \
        --out "$OUT/regime"
    echo "many_core.sh: the prediction is in $OUT/regime/prediction.json; commit it, then run again:"
    echo "    git add $OUT/regime/prediction.json $OUT/regime/prediction.md $OUT/regime/calib.jsonl"
    echo "    git commit -m 'Prediction of the loop-bound regime, $n cores, dedicated' && scripts/many_core.sh $OUT"
    exit 0
fi
$PY -m experiments.regime --out "$OUT/regime"
$PY -m experiments.run --out "$OUT" --sweep calib --sweep connections --sweep appcost --sweep threads \
    --placement dedicated --wrk-threads "$CLIENT_THREADS"
if [ -x build-ft/cserve ]; then
    $PY -m experiments.freethreaded --out "$OUT/freethreaded"
else
    echo "many_core.sh: no build-ft/cserve (make BUILD=build-ft PYTHON=...python3.13t): free-threaded rows skipped" >&2
fi
$PY -m experiments.des --dir "$OUT"
$PY -m experiments.report --dir "$OUT"
echo "many_core.sh: results in $OUT"

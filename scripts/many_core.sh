#!/bin/sh
# The real sweep on a machine with cores to spare (prepared; not run here).
#
#   scripts/many_core.sh [OUT]      default experiments/results/many-core-<nproc>
#
# cserve's loop on CPU 1 and its pool thread on CPU 2, each alone; the client
# on CPUs 3 and up; CPU 0 left to the harness and the kernel. This tests the
# pipeline model's dedicated-core bound, 1/max(c_loop, c_pool), which the
# 2-vCPU machine cannot, and checks experiments/des.py's predictions
# (compare DIR/des.md from the 2-vCPU run with this run's tables).
set -eu
PY=${PYTHON:-/usr/bin/python3}
n=$(nproc)
if [ "$n" -lt 4 ]; then
    echo "many_core.sh: $n CPUs; needs at least 4 (loop, pool, client, harness)" >&2
    exit 1
fi
OUT=${1:-experiments/results/many-core-$n}
cd "$(dirname "$0")/.."
make all
$PY -m experiments.run --out "$OUT" --sweep calib --sweep connections --sweep appcost --sweep threads \
    --pin cserve-loop=1,cserve-pool-0=2 --wrk-cpus "3-$((n - 1))"
$PY -m experiments.des --dir "$OUT"
$PY -m experiments.report --dir "$OUT"
echo "many_core.sh: results in $OUT"

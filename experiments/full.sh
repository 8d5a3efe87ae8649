#!/bin/sh
# Every experiment, then the report: `make experiments` and `make experiments-quick`.
#
#   experiments/full.sh OUT            the full run (~50 min on 2 vCPUs); refuses a dirty
#                                      tree and a folder that already holds results; then
#                                      `make paper` builds the paper from experiments/results/full
#   experiments/full.sh --quick OUT    each dimension once, tiny (~2 min): the plumbing end to
#                                      end into a scratch folder (emptied first); fails only
#                                      when a step breaks or an output is missing
set -eu
PY=${PYTHON:-/usr/bin/python3}
QUICK=""
if [ "${1:-}" = "--quick" ]; then QUICK="--quick"; shift; fi
OUT=${1:?usage: experiments/full.sh [--quick] OUT}
cd "$(dirname "$0")/.."

if [ -n "$QUICK" ]; then rm -rf "$OUT"; fi
mkdir -p "$OUT"
start=$(date +%s)
$PY -m experiments.run $QUICK --out "$OUT"
$PY -m experiments.openloop $QUICK --out "$OUT"
$PY -m experiments.startup $QUICK --out "$OUT"
$PY -m experiments.timeline $QUICK --out "$OUT"
$PY -m experiments.profiles $QUICK --out "$OUT"
$PY -m experiments.sampler_trap $QUICK --out "$OUT"
$PY -m experiments.des $QUICK --dir "$OUT"
if [ -s "$OUT/instruments.jsonl" ]; then
    $PY -m experiments.instrument_cost "$OUT/instruments.jsonl" > "$OUT/instrument_cost.md"
fi
$PY -m experiments.report --dir "$OUT"
if [ -n "$QUICK" ]; then
    # The loop-bound regime's three steps, tiny, with an uncommitted prediction.
    # The full run's are their own commands (experiments/README.md): its
    # prediction is committed before it measures.
    $PY -m experiments.regime --quick --out "$OUT/regime"
fi
if [ -n "$QUICK" ]; then
    $PY -m experiments.paper --results "$OUT" --out "$OUT/paper.out.md"
else
    # What the paper would lack (printed, not written): the paper and README's
    # section are built from experiments/results/full by `make paper`.
    $PY -m experiments.paper --results "$OUT" --out /dev/null
fi
echo "full.sh: done in $(( $(date +%s) - start )) s; results in $OUT"

if [ -n "$QUICK" ]; then
    # Plumbing, not numbers: each stage's output exists and parses.
    need="calib.md connections.md appcost.md model.md des.md numbers.json paper.out.md placement.md
          regime/calib.jsonl regime/prediction.json regime/regime.jsonl regime/regime.md
          fig/rate_vs_connections.svg fig/utilisation.png fig/regime_map.svg fig/predicted_vs_measured.svg"
    # The optional tools' outputs, where the tool is there (their scripts skip otherwise).
    if command -v perf >/dev/null; then
        need="$need timeline.md fig/handoff_timeline.svg profile-ring.md sampler_trap.md"
    fi
    if command -v hyperfine >/dev/null; then need="$need startup.md"; fi
    if command -v oha >/dev/null || [ -x "$HOME/.cargo/bin/oha" ]; then
        need="$need openloop.md fig/latency_vs_offered.svg"
    fi
    for f in $need; do
        [ -s "$OUT/$f" ] || { echo "full.sh --quick: missing $OUT/$f" >&2; exit 1; }
    done
    $PY - "$OUT" <<'PYEOF'
import json, sys
d = sys.argv[1]
n = json.load(open(f"{d}/numbers.json"))
need = ["const:saturation", "count:configs", "param:c_loop[ring/wrk-p16]", "model_runs", "des_abs_err_median",
        "rps:cserve ring bt1 hello c16 wrk-p16"]
miss = [k for k in need if k not in n]
sys.exit(f"full.sh --quick: numbers.json lacks {miss}") if miss else print("full.sh --quick: outputs complete")
PYEOF
fi

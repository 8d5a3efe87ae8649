#!/bin/sh
# Every experiment, then the report: `make experiments` and `make experiments-quick`.
#
#   experiments/full.sh OUT            the full run (~50 min on 2 vCPUs); refuses a dirty
#                                      tree and a folder that already holds results
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
$PY experiments/run.py $QUICK --out "$OUT"
$PY experiments/openloop.py $QUICK --out "$OUT"
$PY experiments/startup.py $QUICK --out "$OUT"
$PY experiments/timeline.py $QUICK --out "$OUT"
$PY experiments/profiles.py $QUICK --out "$OUT"
$PY experiments/sampler_trap.py $QUICK --out "$OUT"
$PY experiments/des.py $QUICK --dir "$OUT"
if [ -s "$OUT/instruments.jsonl" ]; then
    $PY experiments/instrument_cost.py "$OUT/instruments.jsonl" > "$OUT/instrument_cost.md"
fi
$PY experiments/report.py --dir "$OUT"
# The quick run's paper checks the plumbing; a full run's paper is `make paper`'s
# paper/paper.out.md (a copy in the results folder would go stale).
if [ -n "$QUICK" ]; then $PY paper/build.py --results "$OUT" --out "$OUT/paper.out.md"; fi
echo "full.sh: done in $(( $(date +%s) - start )) s; results in $OUT"

if [ -n "$QUICK" ]; then
    # Plumbing, not numbers: each stage's output exists and parses.
    need="calib.md connections.md appcost.md model.md des.md numbers.json paper.out.md
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

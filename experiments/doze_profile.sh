#!/bin/sh
# What a busy pool thread pays to wake the loop, with the ring's dozing on and
# off (handoffs/README.md, "Dozing"): Flask (pool-bound) under wrk -t1 -c16,
# an on-CPU profile of each (scripts/profile.sh), interleaved ROUNDS times.
#
#   experiments/doze_profile.sh [ROUNDS]     (default 3; ~15 s a profile)
#
# Writes experiments/results/doze/profile-{doze,nodoze}-N.md (each with its
# command, rate, machine and commit) and summary.md: per round, wrk's rate
# and the pool thread's µs per request in all and in write(2), from each
# profile's report.json.
set -eu
cd "$(dirname "$0")/.."
rounds=${1:-3}
out=experiments/results/doze
mkdir -p "$out"
make -s all
for i in $(seq "$rounds"); do
    for mode in doze nodoze; do
        args="--chdir apps flask_hello:app"
        [ $mode = nodoze ] && args="--loop-doze 0 $args"
        # shellcheck disable=SC2086
        scripts/profile.sh -d 5 -c 16 -o "/tmp/cserve-doze-$mode" -- $args >/dev/null
        cp "/tmp/cserve-doze-$mode/report.md" "$out/profile-$mode-$i.md"
        cp "/tmp/cserve-doze-$mode/report.json" "$out/profile-$mode-$i.json"
    done
done
/usr/bin/python3 - "$out" "$rounds" <<'PY'
import json, re, sys
out, rounds = sys.argv[1], int(sys.argv[2])
lines = ["# Dozing on and off: Flask, wrk -t1 -c16 (experiments/doze_profile.sh)", "",
         "Per profile (`profile-MODE-ROUND.md` beside this file, each with its command, machine and commit): "
         "wrk's rate, and each thread's CPU per request, the pool thread's in all and inside write(2) (the "
         "eventfd writes that wake a parked loop), from experiments/lib/perf_reduce.py's report.json.", "",
         "| round | mode | rps | pool µs/req | pool write(2) µs/req | loop µs/req |", "|---:|---|---:|---:|---:|---:|"]
for i in range(1, rounds + 1):
    for mode in ("doze", "nodoze"):
        r = json.load(open(f"{out}/profile-{mode}-{i}.json"))
        md = open(f"{out}/profile-{mode}-{i}.md").read()
        m = re.search(r"Requests/sec: ([0-9.]+)", md)
        th = {t["thread"].split()[0]: t for t in r["threads"]}
        pool = next((t for k, t in th.items() if k.startswith("cserve-pool")), {})
        loop = next((t for k, t in th.items() if k.startswith("cserve-loop")), {})
        write = sum(b["us_per_request"] or 0 for b in pool.get("by_bucket", []) if "write" in b["bucket"])
        lines.append(f"| {i} | {mode} | {float(m.group(1)) if m else 0:,.0f} | {pool.get('us_per_request') or 0:.2f} | "
                     f"{write:.2f} | {loop.get('us_per_request') or 0:.2f} |")
open(f"{out}/summary.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY

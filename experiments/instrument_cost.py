"""The instruments' own cost, from the `instruments` sweep of experiments/run.py:
the same hello run with the counters compiled in (./cserve) and out
(make INSTRUMENTS=0 BUILD=build-noinst), alternated three times per
connection count so both share the machine's drift. Prints the mean rps and
the loop thread's mean µs per request per variant, and the ratio.

    python3 -m experiments.instrument_cost [experiments/results/instruments.jsonl]
"""
import json
import statistics
import sys
from collections import defaultdict


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "experiments/results/instruments.jsonl"
    runs = defaultdict(list)
    for line in open(path):
        r = json.loads(line)
        cfg = r["config"]
        variant = "off" if cfg.get("binary") else "on"
        loop = next((t for t in r.get("stats_threads") or [] if t["role"] == "loop"), None)
        runs[(cfg["conns"], variant)].append((r["rps"], loop["us_per_request"] if loop else None))
    print("| connections | instruments | runs | mean rps | rps range | mean loop µs/req |")
    print("|---:|---|---:|---:|---|---:|")
    for conns in sorted({c for c, _ in runs}):
        means = {}
        for variant in ("on", "off"):
            xs = runs.get((conns, variant), [])
            if not xs:
                continue
            rps = [x[0] for x in xs]
            us = [x[1] for x in xs if x[1]]
            means[variant] = statistics.mean(rps)
            print(f"| {conns} | {variant} | {len(xs)} | {statistics.mean(rps):,.0f} | "
                  f"{min(rps):,.0f}–{max(rps):,.0f} | {statistics.mean(us):.2f} |")
        if len(means) == 2:
            print(f"| {conns} | on/off | | {means['on'] / means['off']:.3f} | | |")


if __name__ == "__main__":
    main()

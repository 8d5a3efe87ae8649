#!/usr/bin/python3
"""The loop's hold, ablated where nothing saturates: hello without
pipelining at 16 and 64 connections, each handoff, cserve as it ships and
with --loop-hold 0, in interleaved, shuffled rounds (the main sweep's
unsaturated shapes, shared cores, one pool thread).

The main sweep names a mechanism for its unsaturated rows from their
counters: about a sleep per request and almost no wake-ups across the
handoff, so the loop sleeps on its sockets, waiting for the client. If the
hold (the loop waiting on the ring for completions instead of sleeping)
were what kept those rows short of a bound, turning it off would move
them; if the sockets are, it would not. DIR/prediction.md, committed
before the run, says which.

    /usr/bin/python3 -m experiments.hold_ablation [--rounds 3] [--out DIR]
    /usr/bin/python3 -m experiments.hold_ablation --report

Per run (lib/probe.py): rate, each stage's share of a core, the regime by
lib/model.py's rule, sleeps, wake-ups and holds per request from cserve's
counters. Writes DIR/hold.jsonl and DIR/hold.md, DIR/numbers.json."""
import functools
import os
import sys

from experiments.lib import entry, model, probe, stats
from experiments.lib import numbers as numbers_mod
from experiments.lib.serverctl import ROOT

OUT = os.path.join(ROOT, "experiments", "results", "hold-ablation")
HANDOFFS = ("ring", "dgram", "condvar", "eventfd")
CONNS = (16, 64)
HOLDS = ("default", "0")
FULL, QUICK = (3, 3.0, 1.0), (1, 1.0, 0.3)


def cfg(handoff, conns, hold):
    c = {"server": "cserve", "handoff": handoff, "bt": 1, "app": "hello", "conns": conns, "client": "wrk",
         "wrk_threads": 1, "hold": hold}
    if hold != "default":
        c["args"] = ["--loop-hold", hold]
    return c


def label(c):
    return f"{c['handoff']} hello c{c['conns']} hold {c['hold']}"


def plan(quick=False):
    hs, cs = (HANDOFFS[:1], CONNS[:1]) if quick else (HANDOFFS, CONNS)
    return [cfg(h, c, x) for h in hs for c in cs for x in HOLDS]


def extra(rec):
    m = model.metrics(rec)
    return {k: m.get(k) for k in ("sleeps_per_req", "wakes_per_req", "holds_per_req")}


def _f(x, fmt="{:.2f}"):
    return "—" if x is None else fmt.format(x)


def pairs(rs):
    """[(handoff, conns, the default row, the --loop-hold 0 row)] where both ran."""
    by = {(r["config"]["handoff"], r["config"]["conns"], r["config"]["hold"]): r for r in rs.values()}
    return [(h, c, by[(h, c, "default")], by[(h, c, "0")]) for h in HANDOFFS for c in CONNS
            if (h, c, "default") in by and (h, c, "0") in by]


def markdown(meta, recs):
    rs = probe.summarise(recs, extra=extra)
    L = probe.header("The loop's hold, ablated where nothing saturates", "experiments/hold_ablation.py", meta,
                     "Medians over the clean runs; the prediction: [prediction.md](prediction.md).")
    L += ["| shape | hold | rate /s (range) | loop / pool / client | regime (runs) | sleeps/req | wake-ups/req "
          "| holds/req | rate ÷ default |", "|---|---|---:|---:|---|---:|---:|---:|---:|"]
    for h, c, d, z in pairs(rs):
        for r in (d, z):
            lo, hi = r["rps_range"]
            L.append(f"| {h} hello c{c} | {r['config']['hold']} | {r['rps']:,.0f} ({lo:,.0f}–{hi:,.0f}) | "
                     f"{_f(r['loop_util'], '{:.0%}')} / {_f(r['pool_util'], '{:.0%}')} / "
                     f"{_f(r['client_util'], '{:.0%}')} | {r['regime']} ({r['regime_n']}/{r['regime_of']}) | "
                     f"{_f(r.get('sleeps_per_req'))} | {_f(r.get('wakes_per_req'))} | "
                     f"{_f(r.get('holds_per_req'))} | "
                     + (f"{r['rps'] / d['rps']:.2f}× |" if r is z and d["rps"] else "|"))
    n = numbers(meta, recs)
    L += ["", f"**Finding.** Rate with `--loop-hold 0` over the default, median over the shapes: "
          f"{n['rate_ratio']['text']}; regime labels that changed: {n['flips']['text']}; the default's holds "
          f"per request, median: {n['holds_default']['text']}."]
    return "\n".join(L) + "\n"


def numbers(meta, recs):
    rs = probe.summarise(recs, extra=extra)
    ps = pairs(rs)
    N = {}

    put = functools.partial(numbers_mod.words, N=N)
    ratios = [z["rps"] / d["rps"] for _, _, d, z in ps if d["rps"] and z["rps"]]
    r = stats.median(ratios) if ratios else None
    put("rate_ratio", "not measured" if r is None else f"{r:.2f}× ({min(ratios):.2f}–{max(ratios):.2f}×)", r)
    flips = sum(1 for _, _, d, z in ps if d["regime"] != z["regime"])
    put("flips", f"{flips} of {len(ps)}", flips)
    hd = [d.get("holds_per_req") for _, _, d, _ in ps if d.get("holds_per_req") is not None]
    put("holds_default", "not measured" if not hd else f"{stats.median(hd):.2f}", stats.median(hd) if hd else None)
    unsat = sum(1 for _, _, d, _ in ps if d["regime"] == "unsaturated")
    put("unsaturated_default", f"{unsat} of {len(ps)}", unsat)
    return N


def write_report(out):
    return entry.write_report(out, "hold", markdown, numbers)


def main():
    ap = entry.parser(__doc__, OUT, FULL, QUICK, "one shape once, short windows (plumbing)", "hold")
    a = entry.start(ap.parse_args(), write_report)
    if a is None:
        return 0
    todo = entry.runnable("hold_ablation", plan(a.quick), label)
    meta, recs = entry.measure(a, "hold_ablation", todo)
    entry.write_records(os.path.join(a.out, "hold.jsonl"), meta, recs)
    print(write_report(a.out))
    return entry.status(recs)


if __name__ == "__main__":
    sys.exit(main())

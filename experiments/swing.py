#!/usr/bin/python3
"""The few-connection swing, build against build on one guest: hello
without pipelining at 1 and 4 connections, ring and dgram, cserve built
from two revisions (each instrumented, as the full sweep runs it), in
interleaved, shuffled rounds.

The full sweep's rows with one to four connections moved about twofold
between two runs that differed in build and guest at once, and little
between two runs of one build on two guests. Run here, both builds on the
same guest and in the same rounds, the guest drops out: what is left is
the build's.

    /usr/bin/python3 -m experiments.swing --builds REV_A,REV_B [--rounds 5] [--out DIR]
    /usr/bin/python3 -m experiments.swing --report

Each build is `git archive REV` into build-base/REV-inst/ and its own
`make cserve` (production.build_baseline). Per run (lib/probe.py): the rate, each stage's CPU µs per
request (the load generator's included), sleeps and wake-ups per request.
Writes DIR/swing.jsonl, DIR/swing.md and DIR/numbers.json."""
import functools
import os
import sys

from experiments import production
from experiments.lib import entry, model, probe, stats
from experiments.lib import numbers as numbers_mod
from experiments.lib.serverctl import ROOT

OUT = os.path.join(ROOT, "experiments", "results", "swing")
HANDOFFS = ("ring", "dgram")
CONNS = (1, 4)
FULL, QUICK = (5, 3.0, 1.0), (1, 1.0, 0.3)


def cfg(rev, binary, handoff, conns):
    return {"server": "cserve", "handoff": handoff, "bt": 1, "app": "hello", "conns": conns, "client": "wrk",
            "wrk_threads": 1, "binary": binary, "rev": rev}


def label(c):
    return f"{c['rev']} {c['handoff']} hello c{c['conns']}"


def extra(rec):
    m = model.metrics(rec)
    return {k: m.get(k) for k in ("sleeps_per_req", "wakes_per_req")}


def _f(x, fmt="{:.1f}"):
    return "—" if x is None else fmt.format(x)


def rows_by(rs):
    return {(r["config"]["rev"], r["config"]["handoff"], r["config"]["conns"]): r for r in rs.values()}


def numbers(meta, recs):
    rs = probe.summarise(recs, extra=extra)
    revs = (meta or {}).get("builds") or sorted({r["config"]["rev"] for r in rs.values()})
    by = rows_by(rs)
    N = {}

    put = functools.partial(numbers_mod.words, N=N)
    if len(revs) == 2:
        a, b = revs
        for k, key in (("rate", "rps"), ("loop", "c_loop"), ("client", "c_client")):
            xs = [by[(b, h, c)][key] / by[(a, h, c)][key] for h in HANDOFFS for c in CONNS
                  if (a, h, c) in by and (b, h, c) in by and by[(a, h, c)][key] and by[(b, h, c)][key]]
            v = stats.median(xs) if xs else None
            put(f"{k}_ratio", "not measured" if v is None else f"{v:.2f}×", v)
        put("builds", f"{a} and {b}", list(revs))
    return N


def markdown(meta, recs):
    rs = probe.summarise(recs, extra=extra)
    revs = (meta or {}).get("builds") or sorted({r["config"]["rev"] for r in rs.values()})
    by = rows_by(rs)
    L = probe.header("The few-connection swing, build against build on one guest", "experiments/swing.py", meta,
                     "Medians over the clean runs, their range in parentheses.")
    L += ["| shape | build | rate /s (range) | loop µs/req | pool µs/req | client µs/req | sleeps/req | "
          "wake-ups/req |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for h in HANDOFFS:
        for c in CONNS:
            for rev in revs:
                r = by.get((rev, h, c))
                if not r:
                    continue
                lo, hi = r["rps_range"]
                L.append(f"| {h} hello c{c} | {rev} | {r['rps']:,.0f} ({lo:,.0f}–{hi:,.0f}) | {_f(r['c_loop'])} | "
                         f"{_f(r['c_pool'])} | {_f(r['c_client'])} | {_f(r.get('sleeps_per_req'), '{:.2f}')} | "
                         f"{_f(r.get('wakes_per_req'), '{:.2f}')} |")
    n = numbers(meta, recs)
    if "rate_ratio" in n:
        L += ["", f"**Finding.** {revs[1]} over {revs[0]}, median over the shapes: rate {n['rate_ratio']['text']}, "
              f"the loop's CPU per request {n['loop_ratio']['text']}, the load generator's "
              f"{n['client_ratio']['text']}."]
    return "\n".join(L) + "\n"


def write_report(out):
    return entry.write_report(out, "swing", markdown, numbers)


def main():
    ap = entry.parser(__doc__, OUT, FULL, QUICK, "one round, short windows (plumbing)", "swing")
    ap.add_argument("--builds", help="two git revisions, comma-separated: the earlier first")
    a = ap.parse_args()
    if a.report:
        print(write_report(a.out))
        return 0
    revs = (a.builds or "").split(",")
    if len(revs) != 2 or not all(revs):
        sys.exit("swing: --builds REV_A,REV_B")
    entry.resolve(a)
    bins = {rev: production.build_baseline(rev, instrumented=True) for rev in revs}
    todo = [(label(c), c) for c in (cfg(rev, bins[rev], h, n) for rev in revs for h in HANDOFFS for n in CONNS)]
    meta, recs = entry.measure(a, "swing", todo, meta_extra={"builds": revs})
    entry.write_records(os.path.join(a.out, "swing.jsonl"), meta, recs)
    print(write_report(a.out))
    return entry.status(recs)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Early against late binding across the spread of request costs, with
each handoff and beside the peers, against a queueing prediction made
before the run (experiments/queueing.py).

Four cells, one worker, wrk -t1 -c32, each mix beside a uniform app of the
same mean cost:

  io-mix       apps/mix.py: 95 % wait 1 ms, 5 % wait 100 ms (the GIL released); 8 threads
  io-uniform   every request waits the io-mix's mean; 8 threads
  cpu-mix      95 % run 50 µs, 5 % run 5 ms of Python (the GIL held); 4 threads
  cpu-uniform  every request runs about the cpu-mix's mean; 4 threads

Rows: cserve (late binding: the uninstrumented build) and the build before
the dispatcher (--baseline REV, early binding: join the shortest queue on
arrival), each with every handoff (ring, dgram, condvar, eventfd); gunicorn
(gthread), Granian and uWSGI at the same thread counts, as
experiments/dispatch.py starts them.

    /usr/bin/python3 -m experiments.queueing               # the prediction; commit it
    /usr/bin/python3 -m experiments.binding --baseline REV [--rounds 3]
    /usr/bin/python3 -m experiments.binding --report       # binding.md from the record

The measuring step refuses unless DIR/prediction.json is committed as it
is. Per run, the figures of experiments/dispatch.py (rate, p50/p90/p99
from wrk --latency, requests in flight, server CPU per request, the window's
steal and foreign CPU; a disturbed run rerun up to twice); medians over the
clean runs with their range. Writes DIR/binding.jsonl and DIR/binding.md."""
import functools
import json
import os
import sys
import tempfile

from experiments import dispatch, prediction, production
from experiments.lib import entry, model, probe, stats
from experiments.lib import numbers as numbers_mod
from experiments.lib.serverctl import ROOT

OUT = os.path.join(ROOT, "experiments", "results", "binding")
QUICK_OUT = os.path.join(tempfile.gettempdir(), "cserve-binding-quick")
HANDOFFS = ("ring", "dgram", "condvar", "eventfd")
PEERS = dispatch.PEERS
CONNS = 32
CELLS = {
    "io-mix": {"app": dispatch.IO_MIX, "conns": CONNS, "threads": 8},
    "io-uniform": {"app": "mix-sleep5950-5950-0", "conns": CONNS, "threads": 8},
    "cpu-mix": {"app": dispatch.CPU_MIX, "conns": CONNS, "threads": 4},
    "cpu-uniform": {"app": "mix-cpu298-298-0", "conns": CONNS, "threads": 4},
}
FULL, QUICK_KNOBS = (3, 4.0, 1.5), (1, 1.0, 0.5)   # rounds, window s, warm-up s
BINDING = {"cserve": "late", "baseline": "early"}


def cfg(cell, row, handoff=None, binary=None):
    c = CELLS[cell]
    cells = {cell: {"app": c["app"], "conns": c["conns"]}}
    out = dispatch.cfg(cell, row, c["threads"], binary=binary, cells=cells)
    if handoff:
        out["handoff"] = handoff
    return out


def label(c):
    h = f"/{c['handoff']}" if c["server"] == "cserve" else ""
    return f"{c['cell']} {c['row']}{h} {c['bt']}"


def plan(quick=False, baseline=None):
    out = []
    for cell in CELLS if not quick else ("io-mix", "cpu-mix"):
        for row in ("cserve", "baseline") if baseline else ("cserve",):
            for h in HANDOFFS if not quick else HANDOFFS[:1]:
                out.append(cfg(cell, row, h, baseline if row == "baseline" else None))
        out += [cfg(cell, p) for p in (PEERS if not quick else PEERS[:1])]
    return out


# ------------------------------------------------------------------ the report

def predicted(pred, r):
    """The prediction for a row's binding (cserve late, the baseline early;
    None for a peer)."""
    c = r["config"]
    b = BINDING.get(c["row"])
    return ((pred or {}).get("cells", {}).get(c["cell"]) or {}).get(b) if b else None


def _ms(x):
    return "—" if x is None else f"{x:.1f}"


def _err(m, p):
    return "—" if m is None or not p else f"{100 * (m / p - 1):+.0f} %"


def table(rows, pred):
    L = ["| row | binding | rate /s (range) | p50 ms | p99 ms (range) | in flight | predicted rate / p50 / p99 "
         "| measured p99 over predicted |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        m, rg, c = r["med"], r["range"], r["config"]
        p = predicted(pred, r)
        share = m.get("in_flight_share")
        flag = " ‡" if share is not None and share < model.IN_FLIGHT_MIN else " §" if distorted(r) else ""
        lo, hi = rg.get("rate", (None, None))
        plo, phi = rg.get("p99_ms", (None, None))
        L.append(f"| {label(c)} | {BINDING.get(c['row'], 'peer')} | {m.get('rate') or 0:,.0f} "
                 f"({lo or 0:,.0f}–{hi or 0:,.0f}) | {_ms(m.get('p50_ms'))} | {_ms(m.get('p99_ms'))} "
                 f"({_ms(plo)}–{_ms(phi)}) | {'—' if share is None else f'{100 * share:.0f} %'}{flag} | "
                 + (f"{p['rate']:,.0f} / {p['p50_ms']:.1f} / {p['p99_ms']:.1f}" if p else "—")
                 + f" | {_err(m.get('p99_ms'), p and p['p99_ms'])} |")
    return L


# wrk's latencies are corrected for coordinated omission (queueing.wrk_view):
# a long response makes it add samples, and the mean behind a row's requests
# in flight (rate × mean latency) can then exceed the connections. A row past
# this share of them is marked: its percentiles are wrk's correction's as
# much as the server's.
IN_FLIGHT_MAX = 1.5


def distorted(r):
    share = r["med"].get("in_flight_share")
    return share is not None and share > IN_FLIGHT_MAX


def ordering(rows, pred, cell, key="p99_ms"):
    """(predicted late ÷ early p99 (key: "p99_ms", or "p99_ms_wrk" for the
    prediction as wrk reports latency), measured: the median over handoffs
    of late ÷ early p99 on the same handoff), or Nones."""
    p = (pred or {}).get("cells", {}).get(cell) or {}
    pr = p["late"][key] / p["early"][key] if key in (p.get("late") or {}) and p.get("early") else None
    by = {(r["config"]["row"], r["config"].get("handoff")): r["med"].get("p99_ms") for r in rows}
    ratios = [by[("cserve", h)] / by[("baseline", h)] for h in HANDOFFS
              if by.get(("cserve", h)) and by.get(("baseline", h))]
    return pr, (stats.median(ratios) if ratios else None)


def provenance_line(meta):
    return (f"{probe.meta_line(meta)} {meta.get('rounds')} interleaved, shuffled round(s); {meta.get('warmup')} s "
            f"warm-up, {meta.get('duration')} s window per run, each a fresh server of one worker; early binding "
            f"is cserve built from `{meta.get('baseline')}`. A run that lost more than {model.DISTURB_LIMIT} core to "
            "steal and foreign CPU was rerun up to twice, then kept and marked. Figures: medians over the clean "
            "runs, their range (min–max) in parentheses.")


def markdown(meta, recs, pred):
    rs = dispatch.summarise(recs)
    L = ["# Early against late binding, across the spread of request costs", "",
         "<!-- generated by experiments/binding.py; do not edit -->", ""]
    if meta:
        L += [provenance_line(meta), ""]
        if meta.get("quick"):
            L += ["**Smoke run, not a measurement** (`--quick`).", ""]
        pc = meta.get("prediction") or {}
        L += [f"Prediction: [prediction.md](prediction.md), committed at {str(pc.get('commit'))[:7]} before "
              "the run (experiments/queueing.py: the queue alone, without the server's own cost).", ""]
    by_cell = {}
    for r in rs.values():
        by_cell.setdefault(r["config"]["cell"], []).append(r)
    order = {label(c): i for i, c in enumerate(plan(baseline="b"))}
    for cell in CELLS:
        rows = sorted(by_cell.get(cell, []), key=lambda r: order.get(label(r["config"]), 999))
        if not rows:
            continue
        pr, me = ordering(rows, pred, cell)
        L += [f"## {cell}: `{CELLS[cell]['app']}`, {CELLS[cell]['threads']} threads, c{CELLS[cell]['conns']}", ""]
        L += table(rows, pred)
        L += ["", f"Late ÷ early p99: predicted {'—' if pr is None else f'{pr:.2f}×'}, measured "
              f"{'—' if me is None else f'{me:.2f}×'} (the median over the handoffs, each against itself).", ""]
    L += [f"‡ kept fewer than {100 * model.IN_FLIGHT_MIN:.0f} % of the connections in flight: no yardstick. "
          f"§ more than {100 * IN_FLIGHT_MAX:.0f} % by wrk's latencies, which its correction for coordinated "
          "omission inflates after a long response: its percentiles are the correction's as much as the "
          "server's."]
    return "\n".join(L) + "\n"


def brief_md(meta, recs, pred, wrk_pred=None):
    """binding.brief.md, what the paper includes: per cell the prediction
    for each binding, the ring's early and late rows, the ratio of their
    p99s predicted and measured, and the peers' p99."""
    rs = dispatch.summarise(recs)

    def pl(x):
        return "—" if not x else f"{x['p50_ms']:.1f} / {x['p99_ms']:.1f}"

    def ml(r):
        return "—" if not r else f"{_ms(r['med'].get('p50_ms'))} / {_ms(r['med'].get('p99_ms'))}"
    L = ["<!-- generated by experiments/binding.py; do not edit -->", "",
         "| cell | early: predicted / measured p50 / p99 ms | late: predicted / measured | late ÷ early p99, "
         "predicted / measured | " + " / ".join(PEERS) + " p99 ms |", "|---|---:|---:|---:|---:|"]
    for cell in CELLS:
        rows = [r for r in rs.values() if r["config"]["cell"] == cell]
        if not rows:
            continue
        p = (pred or {}).get("cells", {}).get(cell) or {}
        ring = {r["config"]["row"]: r for r in rows if r["config"].get("handoff") == "ring"}
        peers = {r["config"]["row"]: r for r in rows if r["config"]["row"] in PEERS}
        pr, me = ordering(rows, pred, cell)
        L.append(f"| {cell} | {pl(p.get('early'))} / {ml(ring.get('baseline'))} | {pl(p.get('late'))} / "
                 f"{ml(ring.get('cserve'))} | {'—' if pr is None else f'{pr:.2f}×'} / "
                 f"{'—' if me is None else f'{me:.2f}×'} | "
                 + " / ".join(_ms((peers.get(x) or {}).get("med", {}).get("p99_ms")) for x in PEERS) + " |")
    if wrk_pred:
        ws = []
        for cell in CELLS:
            pw, _ = ordering([], wrk_pred, cell, "p99_ms_wrk")
            if pw is not None:
                ws.append(f"{cell} {pw:.2f}×")
        L += ["", "Through wrk's correction for coordinated omission, after the run "
              "([prediction-wrk.md](../experiments/results/binding/prediction-wrk.md)), the prediction's late ÷ "
              "early p99: " + ", ".join(ws) + "."]
    L += ["", "Measured: the ring's rows; the ratio is the median over the four handoffs, each against itself "
          "([binding.md](../experiments/results/binding/binding.md), "
          "[prediction.md](../experiments/results/binding/prediction.md))."]
    return "\n".join(L) + "\n"


def numbers(meta, recs, pred, wrk_pred=None):
    """What the paper quotes ({{@binding:KEY}}); wrk_pred: queueing.py
    --wrk-view's prediction, made after the run."""
    rs = dispatch.summarise(recs)
    N = {}

    put = functools.partial(numbers_mod.words, N=N)
    put("conns", str(CONNS), CONNS)
    for cell in CELLS:
        rows = [r for r in rs.values() if r["config"]["cell"] == cell]
        pr, me = ordering(rows, pred, cell)
        prw, _ = ordering(rows, wrk_pred, cell, "p99_ms_wrk")
        put(f"late_early_p99_pred_wrk:{cell}", "not computed" if prw is None else f"{prw:.2f}×", prw)
        put(f"late_early_p99_pred:{cell}", "—" if pr is None else f"{pr:.2f}×", pr)
        put(f"late_early_p99:{cell}", "not measured" if me is None else f"{me:.2f}×", me)
        p = (pred or {}).get("cells", {}).get(cell) or {}
        pw = (wrk_pred or {}).get("cells", {}).get(cell) or {}
        for b in ("early", "late"):
            if p.get(b):
                put(f"pred_p99:{cell}:{b}", f"{p[b]['p99_ms']:.1f} ms", p[b]["p99_ms"])
                put(f"pred_p50:{cell}:{b}", f"{p[b]['p50_ms']:.1f} ms", p[b]["p50_ms"])
            if pw.get(b):
                put(f"pred_p50_wrk:{cell}:{b}", f"{pw[b]['p50_ms_wrk']:.1f} ms", pw[b]["p50_ms_wrk"])
        ring = {r["config"]["row"]: r for r in rows if r["config"].get("handoff") == "ring"}
        for row in ("cserve", "baseline"):
            v = (ring.get(row) or {}).get("med", {}).get("p50_ms")
            if v is not None:
                put(f"p50:{cell}:{row}", f"{v:.1f} ms", v)
        for b, row in (("late", "cserve"), ("early", "baseline")):
            hs = [r for r in rows if r["config"]["row"] == row and r["med"].get("rate")]
            if hs:
                top = max(hs, key=lambda r: r["med"]["rate"])
                put(f"best_rate_handoff:{cell}:{b}", f"{top['config']['handoff']} ({top['med']['rate']:,.0f}/s)",
                    top["config"]["handoff"])
                lo, hi = min(r["med"]["rate"] for r in hs), max(r["med"]["rate"] for r in hs)
                put(f"handoff_rate_spread:{cell}:{b}", f"{100 * (hi / lo - 1):.0f} %", hi / lo - 1)
        for r in rows:
            c = r["config"]
            if c["row"] == "cserve" and c.get("handoff") == "ring" or c["row"] in PEERS:
                key = "cserve" if c["row"] == "cserve" else c["row"]
                if r["med"].get("p99_ms") is not None:
                    put(f"p99:{cell}:{key}", f"{r['med']['p99_ms']:.1f} ms", r["med"]["p99_ms"])
    return N


def write_report(out):
    path = os.path.join(out, "binding.jsonl")
    meta, recs = entry.load(path) if os.path.exists(path) else (None, [])
    pred, wrk_pred = prediction_of(out), prediction_of(out, "prediction-wrk.json")
    md = markdown(meta, recs, pred)
    with open(os.path.join(out, "binding.md"), "w") as f:
        f.write(md)
    with open(os.path.join(out, "binding.brief.md"), "w") as f:
        f.write(brief_md(meta, recs, pred, wrk_pred))
    with open(os.path.join(out, "numbers.json"), "w") as f:
        json.dump(numbers(meta, recs, pred, wrk_pred), f, indent=1, sort_keys=True)
        f.write("\n")
    return md


def prediction_of(out, name="prediction.json"):
    p = os.path.join(out, name)
    return json.load(open(p)) if os.path.exists(p) else None


def main():
    ap = entry.parser(__doc__, None, FULL, QUICK_KNOBS, "a few rows once, short windows (plumbing), into a "
                      "scratch folder, the prediction uncommitted", "binding")
    ap.add_argument("--baseline", help="a git revision: cserve built from it (early binding), beside every cserve row")
    a = ap.parse_args()
    a.out = a.out or (QUICK_OUT if a.quick else OUT)
    if a.report:
        print(write_report(a.out))
        return 0
    path = os.path.join(a.out, "prediction.json")
    if a.quick and not os.path.exists(path):
        from experiments import queueing
        queueing.write(a.out, CELLS)
    sha, clean = prediction.committed(path)
    if not a.quick and not (sha and clean):
        sys.exit(f"binding: {os.path.relpath(path, ROOT)} is not committed as it is; the prediction comes "
                 "first (python3 -m experiments.queueing, then commit it)")
    entry.resolve(a)
    production.build_noinst()
    baseline = production.build_baseline(a.baseline) if a.baseline else None
    todo = entry.runnable("binding", plan(a.quick, baseline), label)
    meta, recs = entry.measure(a, "binding", todo, runner=dispatch.measure_run(a), per_run_extra=3.0,
                               meta_extra={"baseline": a.baseline, "cells": CELLS,
                                           "prediction": {"path": os.path.relpath(path, ROOT), "commit": sha,
                                                          "committed": bool(sha and clean)}})
    entry.write_records(os.path.join(a.out, "binding.jsonl"), meta, recs)
    print(write_report(a.out))
    return entry.status(recs)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Does --blocking-threads auto find the thread count a person would pick?
Two apps on one worker, each at hand-picked counts and at auto, in
interleaved rounds:

  io   apps/gil_release.py sleeping 10 ms a request with the GIL released
       (an I/O-wait stand-in), on 24 connections: one thread serves at most
       100 requests a second, and more threads serve more until there is a
       thread per connection or a CPU runs out
  cpu  apps/cpu.py, 1 ms of GIL-holding Python a request, on 24
       connections: one thread holds the GIL flat out, and more only take
       turns at it

at --blocking-threads 1, 2, 4, 8, 16, 32 and auto (at most its default).
The warm-up (full: 10 s) is longer than auto takes to settle (a burst's
step within a few milliseconds, a window's each second), and each run starts a fresh
server, so auto's window is measured where it settled, and the thread
count it settled on is recorded (the worker's own, from --stats-json at
the window's end).

    /usr/bin/python3 -m experiments.auto_threads            # the full run: 3 rounds, ~13 min on 2 vCPUs
    /usr/bin/python3 -m experiments.auto_threads --quick    # 1 round, a short window: plumbing (~3 min)
    /usr/bin/python3 -m experiments.auto_threads --report   # the .md from the record
    /usr/bin/python3 -m experiments.auto_threads --readme   # docs/results.md's block from the record

Record only on a quiet machine (the load average under 0.5): the rounds
are interleaved and a run disturbed by other tenants is rerun (lib/probe.py),
but a rate on a busy two-vCPU guest says more about its neighbours. Writes
DIR/auto_threads.jsonl (a provenance line, then one line per run) and
DIR/auto_threads.md.

The goal it checks: auto's rate within 10 % of the best hand-picked
count's on the io app, and one thread on the cpu app in every run."""
import os
import sys

from experiments.lib import entry, generated, model, probe
from experiments.lib.serverctl import ROOT, app_spec

OUT = os.path.join(ROOT, "experiments", "results", "auto_threads")
QUICK_OUT = os.path.join(ROOT, "experiments", "results", "tmp", "auto_threads")
RECORD = os.path.join(OUT, "auto_threads.jsonl")
COUNTS = (1, 2, 4, 8, 16, 32)
CONNS = 24
APPS = {  # name -> (serverctl's app, what it is)
    "io": ("gil-sleep10000", "apps/gil_release.py, 10 ms asleep with the GIL released"),
    "cpu": ("cpu1000", "apps/cpu.py, 1 ms of GIL-holding Python"),
}
GOAL = 0.10  # auto's rate within this much of the best fixed count's (io)


def cfg(app, bt):
    return {"server": "cserve", "handoff": "ring", "bt": bt, "app": APPS[app][0], "conns": CONNS,
            "client": "wrk", "family": app, "path": app_spec(APPS[app][0])[2]}


def label(c):
    return f"{c['family']} {'auto' if c['bt'] == 'auto' else str(c['bt']) + ' threads'}"


def plan(quick):
    counts = (1, 4, 32) if quick else COUNTS
    return [(label(c), c) for app in APPS for c in [cfg(app, bt) for bt in counts + ("auto",)]]


# ------------------------------------------------------------------ the report

def settled(rec):
    """The pool threads taking requests at the window's end (auto), or None."""
    bts = ((rec.get("stats_window") or {}).get("blocking_threads") or [None])
    b = bts[0] if bts else None
    return b.get("active") if b else None


def rows(recs):
    """label -> probe.summarise's row, with the threads auto settled on
    (median, and every run's)."""
    out = probe.summarise(recs, extra=lambda r: {"settled": settled(r)})
    for lab, row in out.items():
        row["settled_all"] = sorted(settled(r) for r in recs if r["label"] == lab and "error" not in r
                                    and settled(r) is not None)
    return out


def verdict(rs, app):
    """(best fixed row, auto row, auto's rate / best's) for app; None when
    either is missing."""
    fixed = [r for r in rs.values() if r["config"]["family"] == app and r["config"]["bt"] != "auto" and r["rps"]]
    auto = [r for r in rs.values() if r["config"]["family"] == app and r["config"]["bt"] == "auto" and r["rps"]]
    if not fixed or not auto:
        return None
    best = max(fixed, key=lambda r: r["rps"])
    return best, auto[0], auto[0]["rps"] / best["rps"]


def findings(rs):
    """The two lines the goal is read from."""
    L = []
    v = verdict(rs, "io")
    if v:
        best, auto, ratio = v
        ok = ratio >= 1 - GOAL
        L.append(f"I/O-wait app: auto served {auto['rps']:,.0f} requests/s, {100 * ratio:.0f} % of the best "
                 f"hand-picked count ({best['config']['bt']} threads, {best['rps']:,.0f}/s), "
                 f"{'within' if ok else 'not within'} {100 * GOAL:.0f} %; it settled on "
                 f"{fmt_threads(auto['settled_all'])} threads.")
    v = verdict(rs, "cpu")
    if v:
        best, auto, ratio = v
        ones = sum(1 for n in auto["settled_all"] if n == 1)
        L.append(f"CPU-bound app: auto stayed at one thread in {ones} of {len(auto['settled_all'])} runs "
                 f"({auto['rps']:,.0f} requests/s, {100 * ratio:.0f} % of the best hand-picked count: "
                 f"{best['config']['bt']} thread{'s' if best['config']['bt'] != 1 else ''}, {best['rps']:,.0f}/s).")
    return L


def fmt_threads(ns):
    if not ns:
        return "—"
    lo, hi = min(ns), max(ns)
    return str(lo) if lo == hi else f"{lo}–{hi}"


def table(rs):
    L = ["| app | threads | requests/s (range) | of the best fixed | pool / loop (% of a core) | threads at the "
         "window's end | regime (runs) |", "|---|---|---:|---:|---:|---:|---|"]
    order = {lab: i for i, (lab, _) in enumerate(plan(False))}
    for r in sorted(rs.values(), key=lambda r: order.get(r["label"], 999)):
        c = r["config"]
        if r["regime"] == "error" or not r["rps"]:
            L.append(f"| {c['family']} | {c['bt']} | error | | | | |")
            continue
        v = verdict(rs, c["family"])
        of = f"{100 * r['rps'] / v[0]['rps']:.0f} %" if v else "—"
        lo, hi = r["rps_range"]
        L.append(f"| {c['family']} | {c['bt']}{' †' if r['all_disturbed'] else ''} | {r['rps']:,.0f} "
                 f"({lo:,.0f}–{hi:,.0f}) | {of} | {pct(r['pool_util'])} / {pct(r['loop_util'])} | "
                 f"{fmt_threads(r['settled_all'])} | {r['regime']} ({r['regime_n']}/{r['regime_of']}) |")
    return L


def pct(x):
    return "—" if x is None else f"{100 * x:.0f}"


def provenance_line(meta):
    return (f"{probe.meta_line(meta)} {meta['rounds']} interleaved, shuffled round(s); {meta['warmup']:g} s warm-up "
            f"(auto settles within it), {meta['duration']:g} s window per run, each run a fresh server; "
            f"wrk -t1 -c{CONNS}. A run that lost more than {model.DISTURB_LIMIT} core to steal and foreign CPU "
            "was rerun (up to twice), then kept and marked †. Medians (range) over the runs; the regime by "
            "experiments/lib/model.py's rule.")


def markdown(meta, rs):
    L = ["# --blocking-threads auto against hand-picked counts", ""]
    if meta.get("quick"):
        L += ["**Smoke run, not a measurement** (`--quick`).", ""]
    L += [provenance_line(meta), ""] + [f"- `{k}`: {v[1]}" for k, v in APPS.items()] + [""] + table(rs)
    L += [""] + [f"**{x.split(':')[0]}.**{x[x.index(':') + 1:]}" for x in findings(rs)]
    return "\n".join(L) + "\n"


def readme_body(path, doc=None):
    """The "auto-threads" block (experiments/lib/generated.py) from a record."""
    meta, recs = entry.load(path)
    rs = rows(recs)
    rel = os.path.relpath(path, ROOT)
    L = ["", provenance_line(meta) + f" Record: `{rel}`.", ""] + [f"- `{k}`: {v[1]}" for k, v in APPS.items()]
    L += [""] + table(rs) + [""] + [f"- {x}" for x in findings(rs)] + [""]
    return "\n".join(L)


def write_report(path):
    meta, recs = entry.load(path)
    md = markdown(meta, rows(recs))
    with open(os.path.splitext(path)[0] + ".md", "w") as f:
        f.write(md)
    return md


FULL, QUICK = (3, 5.0, 10.0), (1, 2.0, 8.0)   # rounds, window s, warm-up s


def main():
    ap = entry.parser(__doc__, None, FULL, QUICK, "1 round, fixed counts 1, 4, 32 and auto, a short window",
                      "auto-threads")
    ap.add_argument("--readme", nargs="?", const=RECORD, metavar="JSONL",
                    help="only rewrite docs/results.md's block from a record")
    a = ap.parse_args()
    out = a.out or (QUICK_OUT if a.quick else OUT)
    path = os.path.join(out, "auto_threads.jsonl")
    if a.readme:
        generated.write("auto-threads", a.readme)
        return 0
    if a.report:
        print(write_report(path))
        return 0
    entry.need_cserve()
    entry.resolve(a)
    a.out = out
    meta, recs = entry.measure(a, "auto_threads", plan(a.quick))
    entry.write_records(path, meta, recs)
    print(write_report(path))
    return entry.status(recs)


if __name__ == "__main__":
    sys.exit(main())

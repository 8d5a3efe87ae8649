#!/usr/bin/python3
"""Is there a loop-bound configuration with a handoff on this machine? A
sweep over the shapes where the loop's work per request grows and the
pool's does not, for the ring and dgram handoffs at one blocking thread:

  heads     browser-like request heads with 0 / 2 / 4 / 8 KiB of cookies
            (experiments/wrk/heads.lua), one request in flight per
            connection (c64) and pipelined 16 deep (c16): a larger recv and
            a longer parse on the loop, the same environ work on the pool
            (cserve passes the Cookie header as one string)
  pipeline  small requests (wrk's two-line head) pipelined 16 and 32 deep
            (experiments/wrk/pipeline.lua, c16): the client's cost per
            request falls, so a server stage can fill
  files     64 KiB and 1 MiB responses through wsgi.file_wrapper
            (apps/files.py, c16): the loop sends them with sendfile, the
            pool's part is a few µs whatever the size

    /usr/bin/python3 -m experiments.loopbound [--quick] [--rounds 3] [--out DIR]
    /usr/bin/python3 -m experiments.loopbound --report [--out DIR]   # the .md from the .jsonl

Per run: the rate (cserve's own window), the loop's, the pool's and the
client's share of a core, steal and foreign CPU, the loop's µs of CPU per
request; the regime by the repo's rule (lib/model.py: a stage at >= 90 % of
a core names it, the client included; else machine-bound when at most 0.1
core is idle; else unsaturated). Rounds are interleaved and shuffled; a run
whose window lost more than 0.05 core to steal and foreign CPU is rerun up
to twice, then kept and marked (lib/probe.py). Writes DIR/loopbound.jsonl
(a provenance line, then one line per run) and DIR/loopbound.md.
Full: 3 rounds of 24 configurations, ~6 min plus reruns; --quick: 6
configurations once, ~30 s, plumbing only.
"""
import os
import sys

from experiments.lib import entry, model, probe
from experiments.lib.serverctl import ROOT

OUT = os.path.join(ROOT, "experiments", "results", "loopbound")
HANDOFFS = ("ring", "dgram")
COOKIES = (0, 2, 4, 8)      # KiB of Cookie header
DEPTHS = (16, 32)           # pipelined small requests
FILES = (64, 1024)          # KiB per file_wrapper response


def cfg(handoff, family, **kw):
    c = {"server": "cserve", "handoff": handoff, "bt": 1, "app": "hello", "wrk_threads": 1, "family": family}
    c.update(kw)
    return c


def shape(c):
    """The configuration's shape, without the handoff (a table's row group)."""
    f = c["family"]
    if f == "heads":
        kb, depth = c["script_args"][0] // 1024, c["script_args"][1]
        return f"head +{kb} KiB cookies{f' p{depth}' if depth > 1 else ''} c{c['conns']}"
    if f == "pipeline":
        return f"small requests p{c['script_args'][0]} c{c['conns']}"
    return f"file_wrapper {c['kb'] if c['kb'] < 1024 else c['kb'] // 1024}{' KiB' if c['kb'] < 1024 else ' MiB'} c{c['conns']}"


def label(c):
    return f"{c['handoff']} {shape(c)}"


def plan(quick):
    out = []
    for h in HANDOFFS:
        if quick:
            out += [cfg(h, "heads", script="heads.lua", script_args=[8192, 16], conns=16),
                    cfg(h, "pipeline", script="pipeline.lua", script_args=[32], conns=16),
                    cfg(h, "files", app="files", kb=1024, path="/?kb=1024", conns=16)]
            continue
        out += [cfg(h, "heads", script="heads.lua", script_args=[kb * 1024, 1], conns=64) for kb in COOKIES]
        out += [cfg(h, "heads", script="heads.lua", script_args=[kb * 1024, 16], conns=16) for kb in COOKIES]
        out += [cfg(h, "pipeline", script="pipeline.lua", script_args=[d], conns=16) for d in DEPTHS]
        out += [cfg(h, "files", app="files", kb=kb, path=f"/?kb={kb}", conns=16) for kb in FILES]
    return [(label(c), c) for c in out]


# ------------------------------------------------------------------ the report

def finding(rows):
    """(found, text): the loop-bound rows with a handoff, or the measured
    argument for why there is none (how far the loop got, and what bound
    each family instead)."""
    hand = [r for r in rows if r["config"].get("handoff") and r["regime"] != "error"]
    lb = [r for r in hand if r["regime"] == "loop-bound"]
    if lb:
        names = "; ".join(f"`{r['label']}` (loop {pct(r['loop_util'])}, pool {pct(r['pool_util'])}, "
                          f"client {pct(r['client_util'])}; {r['regime_n']}/{r['regime_of']} runs)" for r in lb)
        return True, f"Loop-bound with a handoff on this machine: {names}."
    if not hand:
        return False, "No run with a handoff completed."
    top = max(hand, key=lambda r: r["loop_util"] or 0)
    regs = {}
    for r in hand:
        regs.setdefault(r["regime"], []).append(r["label"])
    text = (f"No configuration with a handoff was loop-bound. The busiest loop was `{top['label']}`, at "
            f"{pct(top['loop_util'])} of a core ({top['regime']}; pool {pct(top['pool_util'])}, client "
            f"{pct(top['client_util'])}, idle {num(top['idle'], '{:.2f}')} core). The rows were "
            + "; ".join(f"{k}: {len(v)}" for k, v in sorted(regs.items())) + ".")
    return False, text


def growth(rows):
    """Per family and handoff: the loop's and the pool's µs per request at
    the family's lightest and heaviest shape (what grows where)."""
    out = []
    for fam, key in (("heads", lambda c: (c["script_args"][1], c["script_args"][0])),
                     ("pipeline", lambda c: c["script_args"][0]), ("files", lambda c: c["kb"])):
        for h in HANDOFFS:
            rs = sorted((r for r in rows if r["config"]["family"] == fam and r["config"].get("handoff") == h
                         and r["c_loop"] is not None), key=lambda r: key(r["config"]))
            # heads: one line per client shape (closed-loop, pipelined), each within its own shape
            groups = ([[r for r in rs if r["config"]["script_args"][1] == d]
                       for d in sorted({r["config"]["script_args"][1] for r in rs})] if fam == "heads" else [rs])
            for g in groups:
                if len(g) < 2:
                    continue
                a, b = g[0], g[-1]
                out.append(f"{h}, {shape(a['config'])} → {shape(b['config'])}: loop {num(a['c_loop'])} → "
                           f"{num(b['c_loop'])} µs/request, pool {num(a['c_pool'])} → {num(b['c_pool'])}")
    return out


def pct(x):
    return "—" if x is None else f"{100 * x:.0f} %"


def num(x, fmt="{:.2f}"):
    return "—" if x is None else fmt.format(x)


def markdown(meta, rows, quick):
    L = ["# Looking for a loop-bound configuration with a handoff", ""]
    if quick:
        L += ["**Smoke run, not a measurement** (`--quick`: one round, short windows, on whatever else the "
              "machine was doing).", ""]
    L += [probe.meta_line(meta), "",
          f"{meta['rounds']} interleaved, shuffled rounds; {meta['warmup']} s warm-up, {meta['duration']} s "
          f"window per run; wrk -t1. A run that lost more than {model.DISTURB_LIMIT} core to steal and "
          "foreign CPU was rerun up to twice, then kept and marked (†: every run of the row was disturbed; "
          "the medians are then over those). Medians (range) over the runs; the regime is the majority "
          f"over them (stage ≥ {100 * model.SAT:.0f} % of a core, the client included; else machine-bound "
          f"with ≤ {model.IDLE_MAX} core idle; else unsaturated).", "",
          "| configuration | rps (range) | loop / pool / client | loop run delay | steal + foreign | idle "
          "| loop µs/req (pool) | in flight | regime (runs) |", "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    order = {}
    for i, (lab, _) in enumerate(plan(False) + plan(True)):  # the full plan's order; quick labels repeat it
        order.setdefault(lab, i)
    for r in sorted(rows, key=lambda r: order.get(r["label"], 999)):
        if r["regime"] == "error":
            L.append(f"| {r['label']} | error | | | | | | | |")
            continue
        lo, hi = r["rps_range"]
        lost = (r["steal"] or 0) + (r["foreign"] or 0)
        also = f"; also {', '.join(r['regime_also'])}" if r["regime_also"] else ""
        L.append(f"| {r['label']}{' †' if r['all_disturbed'] else ''} | {r['rps']:,.0f} ({lo:,.0f}–{hi:,.0f}) | "
                 f"{pct(r['loop_util'])} / {pct(r['pool_util'])} / {pct(r['client_util'])} | "
                 f"{pct(r['loop_run_delay'])} | {lost:.2f} | {num(r['idle'])} | {num(r['c_loop'])} ({num(r['c_pool'])}) | "
                 f"{pct(r['in_flight_share'])} | {r['regime']} ({r['regime_n']}/{r['regime_of']}{also}) |")
    found, text = finding(rows)
    L += ["", "**Finding.** " + text]
    g = growth(rows)
    if g:
        L += ["", "Where the work grows, lightest to heaviest shape of each family:", ""] + [f"- {x}" for x in g]
    dist = sum(r["disturbed_runs"] for r in rows)
    marked = sum(1 for r in rows if r["all_disturbed"])
    L += ["", f"Runs disturbed by other tenants: {dist} of {sum(r['runs'] for r in rows)} (each rerun; a row's "
          f"medians leave its disturbed runs out unless all were, marked †: {marked} rows)."]
    return "\n".join(L) + "\n"


def brief_md(meta, rows):
    """loopbound.brief.md: the finding and where the work grows, for the
    paper (its title line is dropped there); the table is loopbound.md."""
    L = ["# Looking for a loop-bound configuration with a handoff, in brief", "",
         "<!-- generated by experiments/loopbound.py; do not edit -->", "",
         probe.meta_line(meta), "", "**Finding.** " + finding(rows)[1]]
    g = growth(rows)
    if g:
        L += ["", "Where the work grows, lightest to heaviest shape of each family:", ""] + [f"- {x}" for x in g]
    L += ["", "Every row with its regime, utilisations, steal and idle cores: "
          "[loopbound.md](../experiments/results/loopbound/loopbound.md)."]
    return "\n".join(L) + "\n"


def write_report(out):
    meta, recs = entry.load(os.path.join(out, "loopbound.jsonl"))
    rows = list(probe.summarise(recs).values())
    md = markdown(meta, rows, meta.get("quick"))
    with open(os.path.join(out, "loopbound.md"), "w") as f:
        f.write(md)
    with open(os.path.join(out, "loopbound.brief.md"), "w") as f:
        f.write(brief_md(meta, rows))
    return md


FULL, QUICK = (3, 2.0, 1.0), (1, 1.0, 0.3)   # rounds, window s, warm-up s


def main():
    a = entry.parser(__doc__, OUT, FULL, QUICK, "6 configurations once, short windows (plumbing)",
                     "loopbound").parse_args()
    if a.report:
        print(write_report(a.out))
        return 0
    entry.need_cserve()
    entry.resolve(a)
    meta, recs = entry.measure(a, "loopbound", plan(a.quick))
    entry.write_records(os.path.join(a.out, "loopbound.jsonl"), meta, recs)
    print(write_report(a.out))
    return entry.status(recs)


if __name__ == "__main__":
    sys.exit(main())

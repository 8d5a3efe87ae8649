"""Turn a results folder into tables, the model's out-of-sample check,
numbers for the prose, and figures.

    python3 -m experiments.report --dir DIR [--compare DIR2]

Reads DIR/<sweep>.jsonl (every repeat is kept) and writes:
  DIR/<sweep>.md      one row per configuration: n repeats (and how many were
                      left out as disturbed: steal + foreign CPU over
                      model.DISTURB_LIMIT in the window), the rate's median
                      and range (min–max; a 95 % bootstrap CI from
                      stats.MIN_BOOT repeats on), per-stage utilisation
                      (client included), µs/request per stage, the loop's wait
                      and work per request, process cores, foreign CPU and
                      steal in the window, the machine's idle cores, wrk's
                      socket errors, the measured regime (with how many
                      repeats agree, and any other saturated stage), and the
                      model's prediction
  DIR/model.md        the model's calibration (from `calib` only) and
                      predicted vs measured for every other run, with the
                      error distribution
  DIR/numbers.json    every number the prose quotes (lib/numbers.py)
  DIR/agreement.md    with --compare: how many configurations' medians differ
                      by more than 10 % between two full runs, and how many
                      regime labels flip
  DIR/fig/*.svg|png   the figures (experiments/figures.py)
Rates: `rps` is cserve's own stats window (steady state only); comparisons
across servers use `rps_wrk`, the client's count, the same for every server.
"""
import argparse
import glob
import json
import os
import re

from experiments.lib import configs, extras, model, stats
from experiments.lib import numbers as numbers_mod

NON_SWEEP = {"meta", "openloop", "startup", "timeline", "des", "sampler_trap"}


def load(d):
    sweeps = {}
    for path in sorted(glob.glob(os.path.join(d, "*.jsonl"))):
        name = os.path.basename(path)[:-6]
        if name in NON_SWEEP:
            continue
        rows = []
        for line in open(path):
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
        sweeps[name] = rows
    return sweeps


def load_jsonl(d, name):
    p = os.path.join(d, f"{name}.jsonl")
    if not os.path.exists(p):
        return []
    out = []
    for line in open(p):
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def group(rows):
    """label -> list of (record, metrics), in first-seen order. A failed run
    has no metrics; a disturbed one (model.disturbed) has them, marked
    m["disturbed"], and is left out of the summaries (see included())."""
    g = {}
    for r in rows:
        m = None if "error" in r else model.metrics(r)
        if m is not None:
            m["disturbed"] = model.disturbed(r)
        g.setdefault(r["label"], []).append((r, m))
    return g


def included(items, exclude_disturbed=True):
    """The runs a summary uses: measured, and not disturbed by other tenants
    (a quick run keeps its disturbed runs: it tests plumbing, not rates)."""
    return [(r, m) for r, m in items if m and not (exclude_disturbed and m["disturbed"])]


# Bootstrap intervals for what the prose and figures compare; the rest get
# the median alone (the intervals are pure Python and cost time in make test).
CI_KEYS = {"rps", "rps_wrk", "p99_us", "loop_util", "pool_util", "client_util", "c_loop", "c_pool", "cores", "idle"}


def agg(items, key):
    xs = [m[key] for _, m in items if m and m.get(key) is not None]
    if key in CI_KEYS:
        return stats.median_ci(xs)
    return (stats.median(xs), None, None)


def f(v, fmt="{:.2f}", none="—"):
    return none if v is None else fmt.format(v)


def fci(t, fmt="{:,.0f}", n=None):
    """median with its interval: "m (lo–hi)" for a range (n < stats.MIN_BOOT,
    or n not given), "m [lo, hi]" for a bootstrap CI."""
    m, lo, hi = t
    if m is None:
        return "—"
    if lo is None or hi is None or lo == hi:
        return fmt.format(m)
    if n is not None and stats.interval_kind(n) == "CI":
        return f"{fmt.format(m)} [{fmt.format(lo)}, {fmt.format(hi)}]"
    return f"{fmt.format(m)} ({fmt.format(lo)}–{fmt.format(hi)})"


def pct(t):
    return "—" if t[0] is None else f"{100 * t[0]:.0f}"


def majority(items):
    regs = [m["regime"] for _, m in items if m]
    if not regs:
        return "error", 0, 0
    best = max(sorted(set(regs)), key=regs.count)
    return best, regs.count(best), len(regs)


def also_saturated(items, regime_name):
    """The other stages that saturated in the runs of the majority regime
    (most common first): the table names them beside it."""
    also = [a for _, m in items if m and m["regime"] == regime_name for a in m.get("regime_also") or []]
    return sorted(set(also), key=lambda a: (-also.count(a), a))


def load_plan(d, sweeps):
    """sweep -> labels it shows (run.py's plan.json; else what each .jsonl holds)."""
    try:
        return json.load(open(os.path.join(d, "plan.json")))
    except (OSError, ValueError):
        return {name: sorted({r["label"] for r in rows}) for name, rows in sweeps.items()}


def summarise(sweeps, params, nproc, plan=None, exclude_disturbed=True):
    """label -> summary dict (used by the tables, numbers and figures). A label
    is one configuration: its repeats are pooled whichever sweep recorded them,
    and s["sweeps"] lists every sweep that shows it. A configuration in `calib`
    is never scored as a prediction (it is the model's input)."""
    plan = plan or {name: sorted({r["label"] for r in rows}) for name, rows in sweeps.items()}
    allrows = [r for rows in sweeps.values() for r in rows]
    out = {}
    for lab, items in group(allrows).items():
        ok = included(items, exclude_disturbed)
        cfg = items[0][0]["config"]
        member = sorted(k for k, labs in plan.items() if lab in labs) or [items[0][0].get("sweep")]
        sweep = items[0][0].get("sweep") or member[0]
        measured = [(r, m) for r, m in items if m]
        s = {"sweep": sweep, "sweeps": member, "label": lab, "config": cfg, "n": len(ok),
             "errors": len(items) - len(measured), "disturbed": len(measured) - len(ok),
             # steal + foreign of every measured run, the left-out ones included
             "lost_all": [m["lost"] for _, m in measured if m.get("lost") is not None],
             "commits": sorted({(r.get("commit") or "?")[:7] + ("-dirty" if r.get("dirty") else "")
                                for r, _ in ok})}
        for k in ("rps", "rps_wrk", "p50_us", "p99_us", "loop_util", "pool_util", "client_util", "cores",
                  "c_loop", "c_pool", "c_client", "loop_wait_us", "loop_work_us", "foreign", "steal", "idle",
                  "sock_err", "in_flight", "in_flight_share", "loop_on_cpu", "loop_run_delay", "pool_run_delay",
                  "client_on_cpu", "client_run_delay", "sleeps_per_req", "wakes_per_req", "holds_per_req"):
            s[k] = agg(ok, k)
        s["rps_all"] = [m["rps"] for _, m in ok]
        s["rps_wrk_all"] = [m["rps_wrk"] for _, m in ok]
        s["regime"], s["regime_n"], s["regime_of"] = majority(ok)
        s["regime_also"] = also_saturated(ok, s["regime"])
        # The same rule at each threshold of model.SAT_SWEEP: how much the
        # counts owe to where the line is drawn.
        s["regime_at"] = {t: majority([(r, dict(m, regime=model.regime_detail(m, cfg, t)[0])) for r, m in ok])[0]
                          for t in model.SAT_SWEEP}
        strict = [model.loop_bound_strict(m) for _, m in ok]
        s["loop_bound_strict"] = bool(strict) and 2 * sum(1 for x in strict if x) > len(strict)
        # Runs whose loop saturated, whatever the configuration's majority:
        # a minority of loop-bound runs is shown, not voted away.
        s["runs_loop_saturated"] = sum(1 for _, m in ok if m and model.saturated(m, "loop-bound"))
        preds = []
        for r, m in ok:
            pr, bound, _ = model.predict(params, cfg, m, nproc)
            if pr is not None:
                preds.append((pr, bound, m["rps"], m["regime"]))
        s["pred"] = stats.median([p for p, _, _, _ in preds]) if preds else None
        s["pred_bound"] = preds[0][1] if preds else None
        scored = [t for t in preds if t[2]] if "calib" not in member else []
        s["pred_err"] = [p / meas - 1 for p, _, meas, _ in scored]
        # Only runs that satisfy the predicted bound's assumption test it
        # (model.bound_tested): a machine bound on an unsaturated run is an
        # upper limit, not a prediction.
        tested = [(p / meas - 1, b) for p, b, meas, reg in scored if model.bound_tested(b, reg)]
        s["pred_err_tested"] = [e for e, _ in tested]
        s["pred_tested_bounds"] = [b for _, b in tested]
        out[lab] = s
    calib = [s["config"] for s in out.values() if "calib" in s["sweeps"]]
    for s in out.values():
        s["region"] = model.region(s["config"], calib) if "calib" not in s["sweeps"] else None
    return out



HDR = (f"| config | n | rps: median (min–max; [95 % CI] from n = {stats.MIN_BOOT}) | client rps | p50 µs | p99 µs | loop % | pool % | client % | "
       "cores | loop µs/req | pool µs/req | client µs/req | loop wait/work µs/req | loop / pool / client run delay % | "
       "foreign cores | steal | idle cores | socket errors | in flight | regime (measured) | model rps | model bound |")


def n_cell(s):
    """n, with the runs left out: "3 (+2 disturbed)"."""
    extra = [f"+{s['errors']} err"] if s["errors"] else []
    extra += [f"+{s['disturbed']} disturbed"] if s["disturbed"] else []
    return f"{s['n']}" + (f" ({', '.join(extra)})" if extra else "")


def in_flight_cell(s):
    """The share of the client's requests the server kept in flight (rate ×
    mean latency over connections × depth), marked ‡ under model.IN_FLIGHT_MIN:
    such a row is not compared with others."""
    v = s["in_flight_share"][0]
    if v is None:
        return "—"
    return f"{100 * v:.0f} %" + (" ‡" if model.keeps_too_few(s) else "")


def regime_cell(s):
    """The regime, its repeats, and any other stage that saturated too."""
    also = f"; also {', '.join(s['regime_also'])}" if s.get("regime_also") else ""
    return f"{s['regime']} ({s['regime_n']}/{s['regime_of']}{also})"


def label_cell(s, run_commit=None):
    """The configuration, with its runs' commit where it is not the run's."""
    other = [c for c in s.get("commits") or [] if run_commit is None or not run_commit.startswith(c.split("-")[0])
             or c.endswith("-dirty")]
    return s["label"] + (f" (commit {', '.join(other)})" if other and run_commit else "")


def table(summ, sweep, run_commit=None):
    out = [HDR, "|" + "---|" * (HDR.count("|") - 1)]
    for s in summ.values():
        if sweep not in s["sweeps"]:
            continue
        if not s["n"]:
            why = "; ".join(w for w in (f"{s['errors']} failed" if s["errors"] else "",
                                        f"{s['disturbed']} disturbed" if s["disturbed"] else "") if w)
            out.append(f"| {label_cell(s, run_commit)} | 0 | no included run ({why}) |" + " |" * 20)
            continue
        ww = "—" if s["loop_wait_us"][0] is None else f"{s['loop_wait_us'][0]:.2f} / {s['loop_work_us'][0]:.2f}"
        delay = " / ".join(pct(s[k]) for k in ("loop_run_delay", "pool_run_delay", "client_run_delay"))
        out.append("| " + " | ".join([
            label_cell(s, run_commit), n_cell(s), fci(s["rps"], n=s["n"]),
            f(s["rps_wrk"][0], "{:,.0f}"), f(s["p50_us"][0], "{:.0f}"), f(s["p99_us"][0], "{:.0f}"),
            pct(s["loop_util"]), pct(s["pool_util"]), pct(s["client_util"]), f(s["cores"][0]),
            f(s["c_loop"][0]), f(s["c_pool"][0]), f(s["c_client"][0]), ww, delay, f(s["foreign"][0]),
            f(s["steal"][0]), f(s["idle"][0]), f(s["sock_err"][0], "{:,.0f}"), in_flight_cell(s), regime_cell(s),
            f(s["pred"], "{:,.0f}"), s["pred_bound"] or "—"]) + " |")
    return "\n".join(out)


# The paper's order of sweeps: a configuration that several sweeps share is
# shown in the first brief table that holds it and named in the later ones.
PAPER_ORDER = ("calib", "connections", "appcost", "threads", "instruments", "peers", "frameworks", "browser")
BRIEF_HDR = ("| config | n | rps, median (range) | loop / pool / client % | loop / pool µs per request | "
             "idle cores | in flight | regime (measured) |")


def _short(label):
    return label.replace("cserve ", "").replace("build-noinst/cserve", "plain build")


def _row_order(s):
    """Servers, then handoffs, then app cost and connections in numeric order."""
    c = s["config"]
    us = configs.app_us(c.get("app", ""))
    return (c.get("server") != "cserve", c.get("server", ""), c.get("mode") or c.get("handoff") or "",
            c.get("bt", 1), s["label"].count(" --") + bool(c.get("binary")), us is None,
            us if us is not None else 0, c.get("app", ""), c.get("client", ""), c.get("conns", 0))


def brief_table(summ, sweep, shown):
    """The paper's table of a sweep: eight columns (the full table, with
    latency, the loop's wait and work, process cores, socket errors and the
    model's prediction, is DIR/<sweep>.md). A row another brief table showed
    first (`shown`) is named below the table, not repeated; `shown` grows."""
    out = [BRIEF_HDR, "|---|---:|---:|---:|---:|---:|---:|---|"]
    before = []
    for s in sorted(summ.values(), key=_row_order):
        if sweep not in s["sweeps"]:
            continue
        if s["label"] in shown:
            before.append(s["label"])
            continue
        shown.add(s["label"])
        if not s["n"]:
            out.append(f"| {_short(s['label'])} | {n_cell(s)} | no included run | | | | | |")
            continue
        pool = "—" if s["c_pool"][0] is None else f"{s['c_pool'][0]:.2f}"
        out.append("| " + " | ".join([
            _short(s["label"]), n_cell(s), fci(s["rps"], n=s["n"]),
            f"{pct(s['loop_util'])} / {pct(s['pool_util'])} / {pct(s['client_util'])}",
            f"{f(s['c_loop'][0])} / {pool}", f(s["idle"][0]), in_flight_cell(s), regime_cell(s)]) + " |")
    if len(out) == 2:
        out = []
    elif any(s["config"].get("server") != "cserve" and s["label"] in shown and sweep in s["sweeps"]
             for s in summ.values()):
        out += ["", "A peer's pool: its threads that run Python, summed per interpreter (one GIL); its loop: "
                "Granian's busiest tokio thread (gunicorn and uWSGI run their I/O in Python: pool only)."]
    if len(out) > 2 and any(s["label"] in shown and sweep in s["sweeps"] and s["n"] and model.keeps_too_few(s)
                            for s in summ.values()):
        out += ["", f"‡ kept fewer than {100 * model.IN_FLIGHT_MIN:.0f} % of the client's requests in flight "
                "(rate × mean latency) while the client had time to spare (neither on CPU nor waiting for one "
                "most of the window: schedstat, where the record has it): the server did not take the client's "
                "load; left out of every ratio."]
    if before:
        out += ["", "Also in this sweep, shown in an earlier table: " + ", ".join(f"`{_short(x)}`" for x in before)
                + "."]
    return "\n".join(out).strip()


def write_brief_tables(d, summ, plan):
    """DIR/<sweep>.brief.md for each sweep in PAPER_ORDER that the plan has."""
    shown = set()
    for name in [n for n in PAPER_ORDER if n in plan] + sorted(n for n in plan if n not in PAPER_ORDER):
        body = brief_table(summ, name, shown)
        if not body:
            continue
        with open(os.path.join(d, f"{name}.brief.md"), "w") as fh:
            fh.write(f"<!-- generated by experiments/report.py from the {name} sweep; do not edit -->\n\n{body}\n\n"
                     f"Full table (latency, socket errors, the model's rate): `{name}.md`.\n")


HANDOFF_SHAPES = (("hello c16 wrk-p16", "pipelined, c16"), ("hello c64 wrk", "one request per connection, c64"))


def handoffs_md(summ):
    """µs of CPU per request on the loop and on the pool for every handoff,
    hello, with the pipelined client and with one request per connection:
    what each handoff costs each side."""
    hdr = " | ".join(f"loop µs ({w}) | pool µs ({w})" for _, w in HANDOFF_SHAPES)
    L = [f"| handoff | {hdr} |", "|---|" + "---:|" * (2 * len(HANDOFF_SHAPES))]
    for h in configs.HANDOFFS:
        cells = []
        for shape, _ in HANDOFF_SHAPES:
            s = summ.get(f"cserve {h} bt1 {shape}")
            if not s or not s["n"]:
                cells += ["—", "—"]
                continue
            cells += [fci(s["c_loop"], "{:.2f}", s["n"]), fci(s["c_pool"], "{:.2f}", s["n"])]
        L.append(f"| {h} | " + " | ".join(cells) + " |")
    L += ["", "Medians over the included runs with their range (a 95 % bootstrap interval from "
          f"{stats.MIN_BOOT} runs); the server's own per-thread CPU clocks over its window (--stats-json), "
          "the instrumented build. The pool's figure holds the app's own few µs (apps/hello.py)."]
    return "\n".join(L) + "\n"


def placement_md(summ):
    """Each configuration run with the loop alone on a core beside its run on
    shared cores: the rate, the loop's time on CPU and waiting for one (run
    delay), the pool's and the client's share, the regime."""
    pairs = [(s["label"].replace(" @loop-alone", ""), s) for s in summ.values()
             if s["n"] and s["config"].get("placement") == "loop-alone"]
    if not pairs:
        return ("No configuration of this run had the loop alone on a core (its plan predates the placement "
                "sweep); `experiments/results/regime/` has the loop-alone experiments.\n")
    L = ["| configuration | placement | rps (range) | loop on CPU (run delay) | pool | client | regime |",
         "|---|---|---:|---:|---:|---:|---|"]
    for shared, s in sorted(pairs, key=lambda t: t[0]):
        for where, r in (("shared", summ.get(shared)), ("loop alone", s)):
            if not r or not r["n"]:
                L.append(f"| {_short(shared)} | {where} | no included run | | | | |")
                continue
            on = r["loop_on_cpu"] if r["loop_on_cpu"][0] is not None else r["loop_util"]

            def pc(t):
                return "—" if t[0] is None else f"{100 * t[0]:.0f} %"
            L.append(f"| {_short(shared)} | {where} | {fci(r['rps'], n=r['n'])} | {pc(on)} "
                     f"({pc(r['loop_run_delay'])}) | {pc(r['pool_util'])} | {pc(r['client_util'])} | "
                     f"{regime_cell(r)} |")
    return "\n".join(L) + "\n"


def thresholds_md(summ):
    """The configurations by regime at each saturation threshold
    (model.SAT_SWEEP), and by the loop-alone experiments' stricter loop
    rule: the counts' dependence on where the line is drawn."""
    names = [r for r in numbers_mod.REGIMES]
    rows = [s for s in summ.values() if s["n"]]
    L = ["| a stage saturates at | " + " | ".join(names) + " | of |", "|---:|" + "---:|" * (len(names) + 1)]
    for t in model.SAT_SWEEP:
        regs = [s["regime_at"][t] for s in rows]
        L.append(f"| {100 * t:.0f} % of a core{' (the rule)' if t == model.SAT else ''} | "
                 + " | ".join(str(regs.count(n)) for n in names) + f" | {len(rows)} |")
    strict = sum(1 for s in rows if s["loop_bound_strict"])
    L += ["", f"By the loop-alone experiments' rule (the loop on CPU ≥ {100 * model.LOOP_ON:.0f} % of the window, "
          f"the pool < {100 * model.POOL_SLACK:.0f} %, in a majority of runs): {strict} of {len(rows)} loop-bound."]
    return "\n".join(L) + "\n"


def provenance(meta, rows):
    if not meta:
        return ""
    m = meta[-1]
    mach = m["machine"]
    v = mach.get("versions", {})
    b = mach.get("build", {})
    commits = sorted({r.get("commit", "?")[:12] + ("-dirty" if r.get("dirty") else "") for r in rows})
    d = m.get("durations", {})
    times = sorted(r["time"] for r in rows if "time" in r)
    measured = [r for r in rows if "error" not in r and r.get("window_cpu")]
    left = sum(model.disturbed(r) for r in measured)
    vs = ", ".join(f"{k} {val}" for k, val in v.items() if val)
    return (f"Machine: {mach.get('nproc')}× {mach.get('cpu_model')} (hypervisor: {mach.get('hypervisor')}), "
            f"kernel {mach.get('kernel')}. Build: {b.get('cc')}, {b.get('opt')}, allocator {b.get('allocator')}, "
            f"instruments {b.get('instruments')}. Versions: {vs}. Commit(s): {', '.join(commits)}. "
            f"Window {d.get('window')} s after {d.get('warmup')} s warm-up; {m.get('repeats')} interleaved "
            f"shuffled repeats (seed {m.get('seed')!r}){' — QUICK (plumbing only)' if m.get('quick') else ''}; "
            f"runs {times[0] if times else '?'} … {times[-1] if times else '?'}. "
            f"Left out as disturbed (steal + foreign CPU over {model.DISTURB_LIMIT} core in the window): "
            f"{left} of {len(measured)} runs. Exact commands and CPU flags: the .jsonl records.")


def model_md(params, summ):
    lines = ["## Calibration (the `calib` sweep only)", "",
             "| parameter | value (µs/request) |", "|---|---:|"]
    for k, d in params.items():
        for kk, v in sorted(d.items()):
            lines.append(f"| {k}[{kk}] | {f(v)} |")
    lines += ["", "## Predicted vs measured (every included run outside `calib`)", "",
              "N = the vCPUs less the window's foreign CPU and steal. A run tests the model only where its "
              "measured regime is the bound the model predicts (the predicted stage saturated, or the "
              "machine was full for the machine bound); elsewhere the prediction is an upper limit.", "",
              "| sweep | config | measured rps | model rps | model bound | measured regime | tests the bound | "
              "error (median) |",
              "|---|---|---:|---:|---|---|---:|---:|"]
    errs, tested = [], []
    for s in summ.values():
        if "calib" in s["sweeps"] or s["pred"] is None:
            continue
        e = stats.median(s["pred_err"])
        errs += s["pred_err"]
        tested += s["pred_err_tested"]
        lines.append(f"| {s['sweep']} | {s['label']} | {f(s['rps'][0], '{:,.0f}')} | {f(s['pred'], '{:,.0f}')} | "
                     f"{s['pred_bound']} | {s['regime']} | {len(s['pred_err_tested'])}/{len(s['pred_err'])} | "
                     f"{f(e and 100 * e, '{:+.0f} %')} |")
    for what, es in (("runs whose regime is the predicted bound", tested), ("included runs in all", errs)):
        if es:
            q = stats.quantiles([abs(e) for e in es])
            lines += ["", f"Absolute error over {len(es)} {what}: median {100 * q[0.5]:.0f} %, "
                      f"75th percentile {100 * q[0.75]:.0f} %, 95th {100 * q[0.95]:.0f} %."]
        else:
            lines += ["", f"No {what}."]
    over = sum(e >= 0 for e in errs)
    if errs:
        lines += ["", f"The model is at or above the measured rate in {over} of {len(errs)} runs."]
    lines += ["", "## By region (`lib/model.py: region`)", "",
              "Identity: a calibrated shape at a connection count the calibration covers (the model restates "
              "its inputs). Interpolates: handoff and client calibrated, the app's cost and the connections "
              "within the calibrated ones. Extrapolates: anything else (a dearer app, a cost borrowed from "
              "another handoff or client, connections outside the calibrated range).", "",
              "| region | configurations | runs | median abs. error | runs that test the bound | "
              "their median abs. error |", "|---|---:|---:|---:|---:|---:|"]
    for reg, (n, every, tested) in model.region_errors(summ).items():
        lines.append(f"| {reg} | {n} | {len(every)} | {f(100 * stats.median(every) if every else None, '{:.0f} %')} | "
                     f"{len(tested)} | {f(100 * stats.median(tested) if tested else None, '{:.0f} %')} |")
    lines += ["", "## Sleeps and wake-ups per request, by measured regime", "",
              "Medians over the configurations with a handoff: sleeps (the loop parked, a pool thread "
              "parked), wake-ups across the handoff (either way) and the loop's holds, each per request. A "
              "stage that sleeps and is woken for every request spends the window waiting, not computing: "
              "where nothing saturated, this is where its time went.", "",
              "| measured regime | configurations | sleeps/req | wake-ups/req | holds/req |", "|---|---:|---:|---:|---:|"]
    for reg, (n, sl, wk, hd) in model.waiting_by_regime(summ).items():
        lines.append(f"| {reg} | {n} | {f(sl)} | {f(wk)} | {f(hd)} |")
    return "\n".join(lines) + "\n"


def compare(summ_a, summ_b):
    """Two runs of the plan, configuration by configuration: their medians'
    relative difference (more than stats.DIFF counts as differing) and
    whether the regime label flips. Overlapping ranges are shown but decide
    nothing: ranges of a few runs overlap for almost anything."""
    pairs = [(lab, s["rps"][0], summ_b[lab]["rps"][0], s["regime"], summ_b[lab]["regime"])
             for lab, s in summ_a.items() if lab in summ_b and s["n"] and summ_b[lab]["n"]]
    ag = stats.agreement(pairs)
    lines = [f"| config | run A rps (n) | run B rps (n) | Δ median | > {100 * stats.DIFF:.0f} % | regime A | "
             "regime B | ranges overlap |", "|---|---:|---:|---:|---|---|---|---|"]
    for lab, d, differs, flipped in ag["rows"]:
        s, t = summ_a[lab], summ_b[lab]
        lines.append(f"| {lab} | {fci(s['rps'], n=s['n'])} ({s['n']}) | {fci(t['rps'], n=t['n'])} ({t['n']}) | "
                     f"{100 * d:+.0f} % | {'yes' if differs else 'no'} | {s['regime']} | "
                     f"{t['regime']}{' (flip)' if flipped else ''} | {'yes' if stats.overlap(s['rps'], t['rps']) else 'no'} |")
    overl = sum(stats.overlap(summ_a[lab]["rps"], summ_b[lab]["rps"]) for lab, *_ in ag["rows"])
    head = (f"Of {ag['of']} configurations measured in both runs, {ag['differ']} have medians more than "
            f"{100 * stats.DIFF:.0f} % apart and {ag['flips']} change regime label; (their ranges overlap in "
            f"{overl}, which says little with so few runs.)\n\n")
    ag["overlap"] = overl
    few_text, ag["few"] = few_conns(summ_a, summ_b)
    return head + "\n".join(lines) + "\n" + few_text, ag


FEW_CONNS = 4  # at most this many connections: each request is a sleep and a wake-up on every thread


def conns_of(label):
    m = re.search(r" c(\d+)(?: |$)", label)
    return int(m.group(1)) if m else None


def few_conns(summ_a, summ_b):
    """The unpipelined rows through a handoff with FEW_CONNS connections or
    fewer, in both runs: the rate
    and each stage's CPU µs per request. There every thread sleeps and is
    woken for each request, so a guest whose sleeps and wake-ups cost more
    raises every stage's cost alike, the load generator's too, whose code
    is the same in both runs. Returns (markdown, {"rate", "loop", "pool",
    "client": median ratio B ÷ A, "n": rows}) or ("", None)."""
    rows = [(lab, s, summ_b[lab]) for lab, s in sorted(summ_a.items())
            if lab in summ_b and s["n"] and summ_b[lab]["n"] and (conns_of(lab) or FEW_CONNS + 1) <= FEW_CONNS
            and "-p" not in lab and " native " not in lab]  # unpipelined, through a handoff
    if not rows:
        return "", None
    L = ["", f"Unpipelined rows through a handoff with {FEW_CONNS} connections or fewer: the rate, and each "
         "stage's CPU µs per request, run A → run B.", "",
         "| config | rps | loop µs/req | pool µs/req | client µs/req |", "|---|---:|---:|---:|---:|"]
    ratios = {k: [] for k in ("rate", "loop", "pool", "client")}

    def cell(a, b, fmt):
        return "—" if a is None or b is None else f"{fmt.format(a)} → {fmt.format(b)}"
    for lab, a, b in rows:
        L.append(f"| {lab} | {cell(a['rps'][0], b['rps'][0], '{:,.0f}')} | "
                 f"{cell(a['c_loop'][0], b['c_loop'][0], '{:.1f}')} | {cell(a['c_pool'][0], b['c_pool'][0], '{:.1f}')} | "
                 f"{cell(a['c_client'][0], b['c_client'][0], '{:.1f}')} |")
        for k, key in (("rate", "rps"), ("loop", "c_loop"), ("pool", "c_pool"), ("client", "c_client")):
            if a[key][0] and b[key][0] is not None:
                ratios[k].append(b[key][0] / a[key][0])
    med = {k: stats.median(v) if v else None for k, v in ratios.items()}
    L += ["", "Median B ÷ A over these rows: "
          + ", ".join(f"{k} {'—' if v is None else f'{v:.2f}×'}" for k, v in med.items())
          + " (loop, pool and client: CPU µs per request)."]
    return "\n".join(L) + "\n", dict(med, n=len(rows))


def ratio_agreement(na, nb):
    """The between-server and between-handoff ratios of two runs, side by
    side: whether each run's range or interval holds the other's median, and
    whether the two put the ratio on the same side of 1× (above, below, or
    spanning it): the claim "A is faster than B" survives the second run
    only then. Returns (markdown, how many hold, how many on the same side,
    how many on the same side and not spanning it, how many compared)."""
    def side(x):
        return "above" if x["lo"] is not None and x["lo"] > 1 else \
            "below" if x["hi"] is not None and x["hi"] < 1 else "spans"
    keys = sorted(k for k in na if k.startswith("ratio_") and ":" not in k
                  and isinstance(na[k].get("value"), float) and isinstance(nb.get(k, {}).get("value"), float))
    if not keys:
        return "", 0, 0, 0, 0
    rows, hold, same, firm = [], 0, 0, 0
    for k in keys:
        a, b = na[k], nb[k]
        holds = a["lo"] is not None and b["lo"] is not None and a["lo"] <= b["value"] <= a["hi"] \
            and b["lo"] <= a["value"] <= b["hi"]
        sa, sb = side(a), side(b)
        hold += holds
        same += sa == sb
        firm += sa == sb != "spans"
        rows.append(f"| {k.removeprefix('ratio_')} | {a['text_ci']} | {b['text_ci']} | "
                    f"{100 * stats.rel_diff(a['value'], b['value']):+.0f} % | {'yes' if holds else 'no'} | "
                    f"{sa} / {sb} |")
    lines = ["", f"The ratios in both runs (run A's interval or range; run B's): in {hold} of {len(keys)} each "
             f"run's interval or range holds the other's median; in {same} of {len(keys)} the two put the ratio "
             f"on the same side of 1× (above it, below it, or spanning it), and in {firm} of these both exclude "
             "1×: a direction both runs show.", "",
             "| ratio | run A | run B | Δ | each holds the other's median | side of 1× (A / B) |",
             "|---|---:|---:|---:|---|---|"]
    return "\n".join(lines + rows) + "\n", hold, same, firm, len(keys)


def extras_md(extra):
    out = {}
    ol = [r for r in extra.get("openloop", []) if "error" not in r]
    if ol:
        lines = ["| server | load (× closed-loop capacity) | offered rps | n | achieved rps | p50 µs | "
                 f"p99 µs (min–max; [95 % CI] from n = {stats.MIN_BOOT}) | p99.9 µs | server cores | oha cores |",
                 "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for (srv, load), rs in sorted(extras.openloop_groups(ol).items()):
            lines.append(f"| {srv} | {load:.2f} | {f(stats.median([r['offered'] for r in rs]), '{:,.0f}')} | "
                         f"{len(rs)} | {f(stats.median([r['achieved'] for r in rs]), '{:,.0f}')} | "
                         f"{f(stats.median([r['p50_us'] for r in rs]), '{:,.0f}')} | "
                         f"{fci(stats.median_ci([r['p99_us'] for r in rs]), n=len(rs))} | "
                         f"{f(stats.median([r['p999_us'] for r in rs]), '{:,.0f}')} | "
                         f"{f(stats.median([r.get('server_cores') for r in rs]))} | "
                         f"{f(stats.median([r.get('client_cores') for r in rs]))} |")
        out["openloop"] = "\n".join(lines) + ("\n\nEach repeat first measures the server's closed-loop capacity "
                                              "(wrk, 64 connections), then offers fractions of it; a row is one "
                                              "fraction over the repeats (offered rps: their median). Commands: "
                                              "the oha_cmd of each record in openloop.jsonl.\n")
    st = [r for r in extra.get("startup", []) if "error" not in r]
    if st:
        lines = ["| server | start to first response, ms | graceful stop, ms | runs |",
                 "|---|---:|---:|---:|"]
        for r in st:
            b = r["baseline_median_s"]
            lines.append(f"| {r['server']} | {fci(stats.median_ci([(t - b) * 1e3 for t in r['start_times_s']]), '{:.0f}', len(r['start_times_s']))} | "
                         f"{fci(stats.median_ci([(t - b) * 1e3 for t in r['stop_times_s']]), '{:.0f}', len(r['stop_times_s']))} | {r['runs']} |")
        out["startup"] = "\n".join(lines) + ("\n\nhyperfine; the helper's own start-up (a shell and an "
                                              "interpreter, timed alone) is subtracted. Median [95 % bootstrap "
                                              f"CI] from {stats.MIN_BOOT} runs on, else median (min–max).\n")
    tl = [r for r in extra.get("timeline", []) if "error" not in r]
    if tl:
        lines = ["| handoff | connections | context switches / request | wake-ups / request |", "|---|---:|---:|---:|"]
        lines += [f"| {r['handoff']} | {r['conns']} | {f(r['switches_per_request'])} | {f(r['wakeups_per_request'])} |"
                  for r in tl]
        out["timeline"] = "\n".join(lines) + "\n\nFrom perf sched (timeline.py): loop, pool and wrk threads.\n"
    return out


def build(d, compare_dir=None, figs=True):
    sweeps = load(d)
    if not sweeps:
        raise SystemExit(f"report: no sweep *.jsonl in {d}; run python3 -m experiments.run first")
    meta = load_jsonl(d, "meta")
    nproc = (meta[-1]["machine"]["nproc"] if meta else os.cpu_count()) or 2
    clean = not (meta and meta[-1].get("quick"))  # a quick run keeps its disturbed runs
    params = model.fit(sweeps.get("calib", []), clean)
    plan = load_plan(d, sweeps)
    summ = summarise(sweeps, params, nproc, plan, clean)
    for name in plan:
        rows = [r for rs in sweeps.values() for r in rs if r["label"] in set(plan[name])]
        if not rows:
            continue
        md = (f"<!-- generated by experiments/report.py from the {name} sweep; do not edit -->\n\n"
              f"{table(summ, name, meta[-1]['commit'] if meta else None)}\n\n{provenance(meta, rows)}\n")
        with open(os.path.join(d, f"{name}.md"), "w") as fh:
            fh.write(md)
    write_brief_tables(d, summ, plan)
    with open(os.path.join(d, "placement_pairs.md"), "w") as fh:
        fh.write("<!-- generated by experiments/report.py; do not edit -->\n\n" + placement_md(summ))
    with open(os.path.join(d, "handoffs.md"), "w") as fh:
        fh.write("<!-- generated by experiments/report.py; do not edit -->\n\n" + handoffs_md(summ))
    with open(os.path.join(d, "thresholds.md"), "w") as fh:
        fh.write("<!-- generated by experiments/report.py; do not edit -->\n\n" + thresholds_md(summ))
    with open(os.path.join(d, "model.md"), "w") as fh:
        fh.write("<!-- generated by experiments/report.py; do not edit -->\n\n" + model_md(params, summ))
    extra = {k: load_jsonl(d, k) for k in ("openloop", "startup", "timeline", "des")}
    for name, text in extras_md(extra).items():
        with open(os.path.join(d, f"{name}.md"), "w") as fh:
            fh.write(f"<!-- generated by experiments/report.py from {name}.jsonl; do not edit -->\n\n{text}")
    nums = numbers_mod.compute(summ, params, meta, extra)
    if compare_dir:
        sw = load(compare_dir)
        pb = model.fit(sw.get("calib", []))
        sb = summarise(sw, pb, nproc, load_plan(compare_dir, sw))
        meta_b = load_jsonl(compare_dir, "meta")
        text, ag = compare(summ, sb)
        # The ratios the prose cites, computed in each run: on another host
        # every rate may move while the ratios hold, or not.
        rb = numbers_mod.compute(sb, pb, meta_b, {})
        rtext, rhold, rsame, rfirm, rof = ratio_agreement(nums, rb)
        numbers_mod.agreement_numbers(nums, {
            "agree": ag["of"] - ag["differ"], "of": ag["of"], "differ": ag["differ"], "flips": ag["flips"],
            "overlap": ag["overlap"],
            "n_a": sorted({s["n"] for s in summ.values() if s["n"]}),
            "n_b": sorted({s["n"] for s in sb.values() if s["n"]}),
            # the other run's own day, commit and steal, so its conditions are shown beside it
            "other_meta": (meta_b or [{}])[-1],
            "other_steal": [s["steal"][0] for s in sb.values() if s["n"] and s["steal"][0] is not None],
            # its ratios, and whether its loop saturated with a handoff
            "other_numbers": {k: v for k, v in rb.items() if (k.startswith("ratio_") and ":" not in k)
                              or k.startswith("count:")
                              or k in ("runs_loop_saturated_with_handoff", "runs_with_handoff",
                                       "configs_loop_saturated_some_run", "loop_bound_with_handoff",
                                       "loop_util_max_with_pool", "regime_tally")},
            "ratios_hold": rhold, "ratios_side": rsame, "ratios_firm": rfirm, "ratios_of": rof,
            "few": ag.get("few"),
            # relative to the repository root (numbers.json travels with the repo)
            "other": os.path.relpath(os.path.abspath(compare_dir),
                                     os.path.dirname(os.path.dirname(os.path.abspath(__file__))))})
        text = "<!-- generated by experiments/report.py --compare; do not edit -->\n\n" + text + rtext
    else:
        text = ("<!-- generated by experiments/report.py; do not edit -->\n\nNo second full run has been "
                "compared with this one yet (the plan at this run's commit on another day, into "
                "experiments/results/full-3 (experiments/README.md), then "
                "`python3 -m experiments.report --dir experiments/results/full --compare experiments/results/full-3`).\n")
    with open(os.path.join(d, "agreement.md"), "w") as fh:
        fh.write(text)
    with open(os.path.join(d, "numbers.json"), "w") as fh:
        json.dump(nums, fh, indent=1, sort_keys=True)
    made = []
    if figs:
        from experiments import figures
        made = figures.make_all(d, summ, params, extra)
    return summ, params, nums, made


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--compare", help="a second full run's folder: do the two agree within intervals?")
    ap.add_argument("--no-figures", action="store_true")
    a = ap.parse_args()
    summ, _, nums, made = build(a.dir, a.compare, not a.no_figures)
    print(f"report: {len(summ)} configurations, {len(nums)} numbers, {len(made)} figures in {a.dir}")


if __name__ == "__main__":
    main()

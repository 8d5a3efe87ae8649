"""Turn a results folder into tables, the model's out-of-sample check,
numbers for the prose, and figures.

    python3 -m experiments.report --dir DIR [--compare DIR2]

Reads DIR/<sweep>.jsonl (every repeat is kept) and writes:
  DIR/<sweep>.md      one row per configuration: n repeats, median and 95 %
                      bootstrap interval of the rate, per-stage utilisation
                      (client included), µs/request per stage, the loop's wait
                      and work per request, process cores, foreign CPU and
                      steal in the window, the measured regime (with how many
                      repeats agree), and the model's prediction
  DIR/model.md        the model's calibration (from `calib` only) and
                      predicted vs measured for every other run, with the
                      error distribution
  DIR/numbers.json    every number the prose quotes (lib/numbers.py)
  DIR/agreement.md    with --compare: do two full runs agree within intervals
  DIR/fig/*.svg|png   the figures (experiments/figures.py)
Rates: `rps` is cserve's own stats window (steady state only); comparisons
across servers use `rps_wrk`, the client's count, the same for every server.
"""
import argparse
import glob
import json
import os

from experiments.lib import extras, model, stats
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
    """label -> list of (record, metrics), in first-seen order."""
    g = {}
    for r in rows:
        g.setdefault(r["label"], []).append((r, None if "error" in r else model.metrics(r)))
    return g


# Bootstrap intervals for what the prose and figures compare; the rest get
# the median alone (the intervals are pure Python and cost time in make test).
CI_KEYS = {"rps", "rps_wrk", "p99_us", "loop_util", "pool_util", "client_util", "c_loop", "c_pool", "cores"}


def agg(items, key):
    xs = [m[key] for _, m in items if m and m.get(key) is not None]
    if key in CI_KEYS:
        return stats.median_ci(xs)
    return (stats.median(xs), None, None)


def f(v, fmt="{:.2f}", none="—"):
    return none if v is None else fmt.format(v)


def fci(t, fmt="{:,.0f}"):
    m, lo, hi = t
    if m is None:
        return "—"
    return f"{fmt.format(m)} [{fmt.format(lo)}, {fmt.format(hi)}]"


def pct(t):
    return "—" if t[0] is None else f"{100 * t[0]:.0f}"


def majority(items):
    regs = [m["regime"] for _, m in items if m]
    if not regs:
        return "error", 0, 0
    best = max(set(regs), key=regs.count)
    return best, regs.count(best), len(regs)


def load_plan(d, sweeps):
    """sweep -> labels it shows (run.py's plan.json; else what each .jsonl holds)."""
    try:
        return json.load(open(os.path.join(d, "plan.json")))
    except (OSError, ValueError):
        return {name: sorted({r["label"] for r in rows}) for name, rows in sweeps.items()}


def summarise(sweeps, params, nproc, plan=None):
    """label -> summary dict (used by the tables, numbers and figures). A label
    is one configuration: its repeats are pooled whichever sweep recorded them,
    and s["sweeps"] lists every sweep that shows it. A configuration in `calib`
    is never scored as a prediction (it is the model's input)."""
    plan = plan or {name: sorted({r["label"] for r in rows}) for name, rows in sweeps.items()}
    allrows = [r for rows in sweeps.values() for r in rows]
    out = {}
    for lab, items in group(allrows).items():
        ok = [(r, m) for r, m in items if m]
        cfg = items[0][0]["config"]
        member = sorted(k for k, labs in plan.items() if lab in labs) or [items[0][0].get("sweep")]
        sweep = items[0][0].get("sweep") or member[0]
        s = {"sweep": sweep, "sweeps": member, "label": lab, "config": cfg, "n": len(ok),
             "errors": len(items) - len(ok)}
        for k in ("rps", "rps_wrk", "p50_us", "p99_us", "loop_util", "pool_util", "client_util", "cores",
                  "c_loop", "c_pool", "c_client", "loop_wait_us", "loop_work_us", "foreign", "steal"):
            s[k] = agg(ok, k)
        s["rps_all"] = [m["rps"] for _, m in ok]
        s["rps_wrk_all"] = [m["rps_wrk"] for _, m in ok]
        s["regime"], s["regime_n"], s["regime_of"] = majority(ok)
        preds = []
        for r, m in ok:
            pr, bound, _ = model.predict(params, cfg, m, nproc)
            if pr is not None:
                preds.append((pr, bound, m["rps"]))
        s["pred"] = stats.median([p for p, _, _ in preds]) if preds else None
        s["pred_bound"] = preds[0][1] if preds else None
        s["pred_err"] = [p / meas - 1 for p, _, meas in preds if meas] if "calib" not in member else []
        out[lab] = s
    return out


HDR = ("| config | n | rps (median [95 % CI]) | client rps | p50 µs | p99 µs | loop % | pool % | client % | "
       "cores | loop µs/req | pool µs/req | client µs/req | loop wait/work µs/req | foreign cores | steal | "
       "regime (measured) | model rps | model bound |")


def table(summ, sweep):
    out = [HDR, "|" + "---|" * (HDR.count("|") - 1)]
    for s in summ.values():
        if sweep not in s["sweeps"]:
            continue
        if not s["n"]:
            out.append(f"| {s['label']} | 0 | error ({s['errors']} runs) |" + " |" * 16)
            continue
        ww = "—" if s["loop_wait_us"][0] is None else f"{s['loop_wait_us'][0]:.2f} / {s['loop_work_us'][0]:.2f}"
        out.append("| " + " | ".join([
            s["label"], f"{s['n']}" + (f" (+{s['errors']} err)" if s["errors"] else ""), fci(s["rps"]),
            f(s["rps_wrk"][0], "{:,.0f}"), f(s["p50_us"][0], "{:.0f}"), f(s["p99_us"][0], "{:.0f}"),
            pct(s["loop_util"]), pct(s["pool_util"]), pct(s["client_util"]), f(s["cores"][0]),
            f(s["c_loop"][0]), f(s["c_pool"][0]), f(s["c_client"][0]), ww, f(s["foreign"][0]),
            f(s["steal"][0]), f"{s['regime']} ({s['regime_n']}/{s['regime_of']})",
            f(s["pred"], "{:,.0f}"), s["pred_bound"] or "—"]) + " |")
    return "\n".join(out)


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
    vs = ", ".join(f"{k} {val}" for k, val in v.items() if val)
    return (f"Machine: {mach.get('nproc')}× {mach.get('cpu_model')} (hypervisor: {mach.get('hypervisor')}), "
            f"kernel {mach.get('kernel')}. Build: {b.get('cc')}, {b.get('opt')}, allocator {b.get('allocator')}, "
            f"instruments {b.get('instruments')}. Versions: {vs}. Commit(s): {', '.join(commits)}. "
            f"Window {d.get('window')} s after {d.get('warmup')} s warm-up; {m.get('repeats')} interleaved "
            f"shuffled repeats (seed {m.get('seed')!r}){' — QUICK (plumbing only)' if m.get('quick') else ''}; "
            f"runs {times[0] if times else '?'} … {times[-1] if times else '?'}. "
            f"Exact commands and CPU flags: the .jsonl records.")


def model_md(params, summ):
    lines = ["## Calibration (the `calib` sweep only)", "",
             "| parameter | value (µs/request) |", "|---|---:|"]
    for k, d in params.items():
        for kk, v in sorted(d.items()):
            lines.append(f"| {k}[{kk}] | {f(v)} |")
    lines += ["", "## Predicted vs measured (every run outside `calib`)", "",
              "| sweep | config | measured rps | model rps | model bound | measured regime | error (median) |",
              "|---|---|---:|---:|---|---|---:|"]
    errs = []
    for s in summ.values():
        if "calib" in s["sweeps"] or s["pred"] is None:
            continue
        e = stats.median(s["pred_err"])
        errs += s["pred_err"]
        lines.append(f"| {s['sweep']} | {s['label']} | {f(s['rps'][0], '{:,.0f}')} | {f(s['pred'], '{:,.0f}')} | "
                     f"{s['pred_bound']} | {s['regime']} | {f(e and 100 * e, '{:+.0f} %')} |")
    if errs:
        q = stats.quantiles([abs(e) for e in errs])
        lines += ["", f"Absolute error over {len(errs)} runs: median {100 * q[0.5]:.0f} %, "
                  f"75th percentile {100 * q[0.75]:.0f} %, 95th {100 * q[0.95]:.0f} %."]
    return "\n".join(lines) + "\n"


def compare(summ_a, summ_b):
    lines = ["| config | run A rps [CI] | run B rps [CI] | agree |", "|---|---:|---:|---|"]
    n = agree = 0
    for lab, s in summ_a.items():
        t = summ_b.get(lab)
        if not t or not s["n"] or not t["n"]:
            continue
        ok = stats.overlap(s["rps"], t["rps"])
        n += 1
        agree += ok
        lines.append(f"| {lab} | {fci(s['rps'])} | {fci(t['rps'])} | {'yes' if ok else 'NO'} |")
    return f"{agree} of {n} configurations agree (intervals overlap).\n\n" + "\n".join(lines) + "\n", agree, n


def extras_md(extra):
    out = {}
    ol = [r for r in extra.get("openloop", []) if "error" not in r]
    if ol:
        lines = ["| server | load (× closed-loop capacity) | offered rps | n | achieved rps | p50 µs | "
                 "p99 µs [95 % CI] | p99.9 µs | server cores | oha cores |",
                 "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for (srv, load), rs in sorted(extras.openloop_groups(ol).items()):
            lines.append(f"| {srv} | {load:.2f} | {f(stats.median([r['offered'] for r in rs]), '{:,.0f}')} | "
                         f"{len(rs)} | {f(stats.median([r['achieved'] for r in rs]), '{:,.0f}')} | "
                         f"{f(stats.median([r['p50_us'] for r in rs]), '{:,.0f}')} | "
                         f"{fci(stats.median_ci([r['p99_us'] for r in rs]))} | "
                         f"{f(stats.median([r['p999_us'] for r in rs]), '{:,.0f}')} | "
                         f"{f(stats.median([r.get('server_cores') for r in rs]))} | "
                         f"{f(stats.median([r.get('client_cores') for r in rs]))} |")
        out["openloop"] = "\n".join(lines) + ("\n\nEach repeat first measures the server's closed-loop capacity "
                                              "(wrk, 64 connections), then offers fractions of it; a row is one "
                                              "fraction over the repeats (offered rps: their median). Commands: "
                                              "the oha_cmd of each record in openloop.jsonl.\n")
    st = [r for r in extra.get("startup", []) if "error" not in r]
    if st:
        lines = ["| server | start to first response, ms [95 % CI] | graceful stop, ms [95 % CI] | runs |",
                 "|---|---:|---:|---:|"]
        for r in st:
            b = r["baseline_median_s"]
            lines.append(f"| {r['server']} | {fci(stats.median_ci([(t - b) * 1e3 for t in r['start_times_s']]), '{:.0f}')} | "
                         f"{fci(stats.median_ci([(t - b) * 1e3 for t in r['stop_times_s']]), '{:.0f}')} | {r['runs']} |")
        out["startup"] = "\n".join(lines) + ("\n\nhyperfine; the helper's own start-up (a shell and an "
                                              "interpreter, timed alone) is subtracted.\n")
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
    params = model.fit(sweeps.get("calib", []))
    plan = load_plan(d, sweeps)
    summ = summarise(sweeps, params, nproc, plan)
    for name in plan:
        rows = [r for rs in sweeps.values() for r in rs if r["label"] in set(plan[name])]
        if not rows:
            continue
        md = (f"<!-- generated by experiments/report.py from the {name} sweep; do not edit -->\n\n"
              f"{table(summ, name)}\n\n{provenance(meta, rows)}\n")
        with open(os.path.join(d, f"{name}.md"), "w") as fh:
            fh.write(md)
    with open(os.path.join(d, "model.md"), "w") as fh:
        fh.write("<!-- generated by experiments/report.py; do not edit -->\n\n" + model_md(params, summ))
    agreement = None
    if not compare_dir:
        with open(os.path.join(d, "agreement.md"), "w") as fh:
            fh.write("<!-- generated by experiments/report.py; do not edit -->\n\nNo second full run has been "
                     "compared with this one yet (`make experiments EXP_OUT=experiments/results/full-2`, then "
                     "`python3 -m experiments.report --dir experiments/results/full --compare experiments/results/full-2`).\n")
    if compare_dir:
        sw = load(compare_dir)
        sb = summarise(sw, model.fit(sw.get("calib", [])), nproc, load_plan(compare_dir, sw))
        text, agree, n = compare(summ, sb)
        agreement = {"agree": agree, "of": n,
                     # relative to the repository root (numbers.json travels with the repo)
                     "other": os.path.relpath(os.path.abspath(compare_dir),
                                              os.path.dirname(os.path.dirname(os.path.abspath(__file__))))}
        with open(os.path.join(d, "agreement.md"), "w") as fh:
            fh.write("<!-- generated by experiments/report.py --compare; do not edit -->\n\n" + text)
    extra = {k: load_jsonl(d, k) for k in ("openloop", "startup", "timeline", "des")}
    for name, text in extras_md(extra).items():
        with open(os.path.join(d, f"{name}.md"), "w") as fh:
            fh.write(f"<!-- generated by experiments/report.py from {name}.jsonl; do not edit -->\n\n{text}")
    nums = numbers_mod.compute(summ, params, meta, extra, agreement)
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

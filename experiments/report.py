#!/usr/bin/python3
"""Turn experiments/results/*.jsonl into markdown tables (results/<sweep>.md)
and figures (results/*.png).

    experiments/report.py [--dir experiments/results]

The latest record of each configuration (by label) wins, so re-running a
sweep replaces its rows. Every table says where its numbers came from
(machine, commit, durations, the exact commands are in the .jsonl).

Per-thread µs/request is cserve's in-process figure (CLOCK_THREAD_CPUTIME_ID
over the stats window); for peers it is scripts/threadcpu.py's median CPU
fraction over the rate. `pred` is the pipeline model on dedicated cores,
1e6 / max(c_loop, c_pool) — what the rate would be if each stage had its own
core; on these 2-core guests wrk takes a core, so measured < pred there.
"""
import argparse
import glob
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(d):
    sweeps = {}
    for path in sorted(glob.glob(os.path.join(d, "*.jsonl"))):
        name = os.path.basename(path)[:-6]
        latest = {}
        for line in open(path):
            try:
                r = json.loads(line)
            except ValueError:
                continue
            latest[r["label"]] = r  # file order = time order
        sweeps[name] = list(latest.values())
    return sweeps


def stages(r):
    """(c_loop, c_pool, loop_util, pool_util, wrk_util) in µs/request and fractions."""
    th = r.get("stats_threads") or []
    loops = [t for t in th if t["role"] == "loop"]
    pools = [t for t in th if t["role"] == "pool"]
    reqs = sum(t["requests"] or 0 for t in loops)
    c_loop = sum(t["cpu_s"] for t in loops) / reqs * 1e6 if reqs else None
    c_pool = sum(t["cpu_s"] for t in pools) / reqs * 1e6 if reqs and pools else None
    lu = max((t["utilisation"] for t in loops), default=None)
    pu = max((t["utilisation"] for t in pools), default=None)
    wrk = [t for t in r.get("threadcpu") or [] if t["name"].startswith("wrk")]
    wu = sum(t["median_pct"] for t in wrk) / 100 if wrk else None
    if not th:  # a peer: the two busiest server threads from /proc
        srv = sorted((t for t in r.get("threadcpu") or [] if not t["name"].startswith("wrk")),
                     key=lambda t: -t["median_pct"])
        if srv:
            c_loop, lu = srv[0]["us_per_request"], srv[0]["median_pct"] / 100
        if len(srv) > 1:
            c_pool, pu = srv[1]["us_per_request"], srv[1]["median_pct"] / 100
    return c_loop, c_pool, lu, pu, wu


def pred(c_loop, c_pool, bt=1):
    cs = [c for c in (c_loop, (c_pool / bt) if c_pool else None) if c]
    return 1e6 / max(cs) if cs else None


def regime(c_loop, c_pool, lu, pu):
    if c_pool is None:
        return "one thread"
    if lu is not None and pu is not None and abs(lu - pu) < 0.05:
        return "balanced"
    return "loop-bound" if (c_loop or 0) >= (c_pool or 0) else "pool-bound"


def f(v, fmt="{:.2f}", none="—"):
    return none if v is None else fmt.format(v)


def hand(r, key):
    for t in r.get("stats_threads") or []:
        v = (t.get("per_request") or {}).get("handoff." + key)
        if v is not None:
            return v
    return None


def table(rows):
    out = ["| config | placement | rps | p50 µs | p99 µs | loop % | pool % | wrk % | loop µs/req | pool µs/req | "
           "pred rps | regime | submit sys/req | drain sys/req | pool parks/req |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['label']} | {r.get('placement', '')} | error: {r['error'][:80]} |" + " |" * 12)
            continue
        c_loop, c_pool, lu, pu, wu = stages(r)
        lat = r.get("latency") or {}
        bt = r["config"].get("bt", 1)
        cfg = r["label"].split(" [")[0]
        out.append("| " + " | ".join([
            cfg, r.get("placement", ""), f(r.get("rps"), "{:,.0f}"), f(lat.get("p50_us"), "{:.0f}"),
            f(lat.get("p99_us"), "{:.0f}"), f(lu and 100 * lu, "{:.0f}"), f(pu and 100 * pu, "{:.0f}"),
            f(wu and 100 * wu, "{:.0f}"), f(c_loop), f(c_pool), f(pred(c_loop, c_pool, bt), "{:,.0f}"),
            regime(c_loop, c_pool, lu, pu), f(hand(r, "submit_syscalls"), "{:.3f}"),
            f(hand(r, "drain_syscalls"), "{:.3f}"), f(hand(r, "parks"), "{:.3f}")]) + " |")
    return "\n".join(out)


def provenance(rows):
    ok = [r for r in rows if "machine" in r]
    if not ok:
        return ""
    m = ok[-1]["machine"]
    d = ok[-1].get("durations", {})
    commits = sorted({r.get("commit", "?") for r in ok})
    # Runs go back to back, so every load average but the first includes the
    # sweep's own previous run: only the first one says whether something
    # else was running.
    busy = ok[0].get("loadavg_before") or 0
    return (f"Machine: {m.get('nproc')}× {m.get('model')}, kernel {m.get('kernel')}, Python {m.get('python')}, "
            f"{m.get('cserve')}; commit {', '.join(commits)}; window {d.get('window')} s after "
            f"{d.get('warmup')} s warm-up{' (quick)' if d.get('quick') else ''}; wrk -t1; runs "
            f"{ok[0]['time']} … {ok[-1]['time']}; 1-min load average before the first run {busy}"
            f"{' — BUSY MACHINE, rates not comparable' if busy > 0.5 else ''}. "
            f"Commands: experiments/run.py (exact lines in the .jsonl).")


def figures(sweeps, d):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("report: no matplotlib, no figures")
        return []
    made = []
    # 1. rps vs connections per handoff
    rows = [r for r in sweeps.get("connections", []) if "error" not in r]
    if rows:
        fig, ax = plt.subplots(figsize=(6, 4))
        for h in sorted({r["config"].get("handoff") for r in rows}):
            pts = sorted((r["config"]["conns"], r["rps"]) for r in rows if r["config"].get("handoff") == h)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=h)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("connections (wrk -t1)")
        ax.set_ylabel("requests/s")
        ax.set_title("hello, 1 blocking thread")
        ax.legend()
        ax.grid(alpha=.3)
        p = os.path.join(d, "rps_vs_connections.png")
        fig.tight_layout()
        fig.savefig(p, dpi=110)
        plt.close(fig)
        made.append(p)
    # 2. per-thread µs/request, loop and pool stacked
    rows = [r for s in ("connections", "modes", "peers") for r in sweeps.get(s, [])
            if "error" not in r and r["config"].get("conns") == 64]
    if rows:
        fig, ax = plt.subplots(figsize=(max(6, len(rows) * 0.9), 4))
        names, lo, po = [], [], []
        for r in rows:
            c_loop, c_pool, *_ = stages(r)
            names.append(r["label"].split(" [")[0].replace(" hello c64", ""))
            lo.append(c_loop or 0)
            po.append(c_pool or 0)
        x = range(len(rows))
        ax.bar(x, lo, label="loop / I/O thread")
        ax.bar(x, po, bottom=lo, label="pool / Python thread")
        ax.set_xticks(list(x))
        ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("µs of CPU per request")
        ax.set_title("per-thread CPU per request, hello, c64")
        ax.legend()
        p = os.path.join(d, "us_per_request_stacked.png")
        fig.tight_layout()
        fig.savefig(p, dpi=110)
        plt.close(fig)
        made.append(p)
    # 3. regime vs app cost, with the pipeline prediction
    rows = [r for r in sweeps.get("appcost", []) if "error" not in r]
    if rows:
        cost = {"hello": 0, "cpu5": 5, "cpu20": 20, "cpu100": 100}
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
        for h in sorted({r["config"].get("handoff") for r in rows}):
            rs = sorted((r for r in rows if r["config"].get("handoff") == h), key=lambda r: cost.get(r["config"]["app"], 0))
            xs = [cost.get(r["config"]["app"], 0) for r in rs]
            st = [stages(r) for r in rs]
            ax1.plot(xs, [r["rps"] for r in rs], marker="o", label=f"{h} measured")
            ax1.plot(xs, [pred(s[0], s[1]) for s in st], ls="--", marker="x", label=f"{h} 1/max(c_loop, c_pool)")
            ax2.plot(xs, [s[0] for s in st], marker="o", label=f"{h} c_loop")
            ax2.plot(xs, [s[1] for s in st], marker="s", label=f"{h} c_pool")
        for ax in (ax1, ax2):
            ax.set_xscale("symlog", linthresh=5)
            ax.set_xlabel("app cost, nominal µs (apps/cpu.py; 0 = hello)")
            ax.grid(alpha=.3)
            ax.legend(fontsize=7)
        ax1.set_ylabel("requests/s")
        ax1.set_yscale("log")
        ax2.set_ylabel("µs of CPU per request")
        ax1.set_title("rate vs app cost (c64)")
        ax2.set_title("stage costs: loop-bound where c_loop > c_pool")
        p = os.path.join(d, "regime_vs_app_cost.png")
        fig.tight_layout()
        fig.savefig(p, dpi=110)
        plt.close(fig)
        made.append(p)
    return made


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.path.join(ROOT, "experiments", "results"))
    a = ap.parse_args()
    sweeps = load(a.dir)
    if not sweeps:
        raise SystemExit(f"report: no *.jsonl in {a.dir}; run experiments/run.py first")
    for name, rows in sweeps.items():
        md = f"<!-- generated by experiments/report.py from {name}.jsonl; do not edit -->\n\n" \
             f"{table(rows)}\n\n{provenance(rows)}\n"
        with open(os.path.join(a.dir, f"{name}.md"), "w") as fh:
            fh.write(md)
        print(f"wrote {os.path.join(a.dir, name + '.md')} ({len(rows)} rows)")
    for p in figures(sweeps, a.dir):
        print(f"wrote {p}")


if __name__ == "__main__":
    main()

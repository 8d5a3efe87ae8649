"""The figures, each as SVG (for the paper and slides) and PNG, in DIR/fig/.
Called by report.py with its summaries; every point is a median over the
repeats and every error bar its range (min–max; a 95 % bootstrap interval from
lib/stats.py's MIN_BOOT repeats on).

  rate_vs_connections     rate vs connections per handoff (closed-loop and pipelined client)
  utilisation             per-thread utilisation, client included, for each connections row
  latency_vs_offered      open-loop p50/p99/p99.9 against offered rate (oha)
  regime_map              app cost × connections/handoff, coloured by the measured bound,
                          with the model's loop/pool boundary
  predicted_vs_measured   the model out of sample, one point per configuration
  handoff_timeline        who runs and who sleeps, ring vs dgram (timeline.py's trace)
"""
import json
import os

from experiments.lib import configs, extras, model, stats

COLOURS = {"loop-bound": "#d62728", "pool-bound": "#1f77b4", "client-bound": "#7f7f7f",
           "machine-bound": "#ff7f0e", "unsaturated": "#ffffff"}


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": 9, "svg.fonttype": "none"})
    return plt


def _save(fig, d, name, made):
    os.makedirs(os.path.join(d, "fig"), exist_ok=True)
    fig.tight_layout()
    for ext in ("svg", "png"):
        p = os.path.join(d, "fig", f"{name}.{ext}")
        fig.savefig(p, dpi=130)
        made.append(p)


def _err(t):
    m, lo, hi = t
    return m, [[m - lo], [hi - m]]


def rate_vs_connections(plt, d, summ, made):
    rows = [s for s in summ.values() if "connections" in s["sweeps"] and s["n"]]
    if not rows:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    keys = sorted({(s["config"].get("mode") or s["config"]["handoff"], s["config"]["client"]) for s in rows})
    for h, cl in keys:
        pts = sorted(((s["config"]["conns"], s) for s in rows
                      if (s["config"].get("mode") or s["config"]["handoff"]) == h and s["config"]["client"] == cl),
                     key=lambda t: t[0])
        if not pts:
            continue
        xs = [c for c, _ in pts]
        ys = [s["rps"][0] for _, s in pts]
        lo = [s["rps"][0] - s["rps"][1] for _, s in pts]
        hi = [s["rps"][2] - s["rps"][0] for _, s in pts]
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o" if cl == "wrk" else "s", capsize=3,
                    ls="-" if cl == "wrk" else "--", label=f"{h} ({cl})")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("connections")
    ax.set_ylabel("requests/s (median, 95 % CI)")
    ax.set_title("hello: rate vs connections")
    ax.grid(alpha=.3)
    ax.legend(fontsize=7)
    _save(fig, d, "rate_vs_connections", made)
    plt.close(fig)


def utilisation(plt, d, summ, made):
    rows = [s for s in summ.values() if set(s["sweeps"]) & {"connections", "calib", "appcost"} and s["n"]]
    if not rows:
        return
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(rows)), 4))
    x = range(len(rows))
    w = 0.27
    for i, (k, lab) in enumerate((("loop_util", "loop"), ("pool_util", "pool (sum)"), ("client_util", "client (wrk)"))):
        ys = [100 * (s[k][0] or 0) for s in rows]
        lo = [100 * ((s[k][0] or 0) - (s[k][1] or 0)) for s in rows]
        hi = [100 * ((s[k][2] or 0) - (s[k][0] or 0)) for s in rows]
        ax.bar([xi + (i - 1) * w for xi in x], ys, w, yerr=[lo, hi], capsize=2, label=lab)
    ax.axhline(90, color="k", lw=0.8, ls=":", label="90 %: saturated")
    ax.set_xticks(list(x))
    ax.set_xticklabels([s["label"].replace("cserve ", "") for s in rows], rotation=60, ha="right", fontsize=6)
    ax.set_ylabel("% of one core (median, 95 % CI)")
    ax.set_title("per-thread utilisation, client included")
    ax.legend(fontsize=7)
    _save(fig, d, "utilisation", made)
    plt.close(fig)


def latency_vs_offered(plt, d, extra, made):
    ol = [r for r in extra.get("openloop", []) if "error" not in r]
    if not ol:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    groups = extras.openloop_groups(ol)
    for ci, srv in enumerate(sorted({r["server"] for r in ol})):
        loads = sorted(load for s, load in groups if s == srv)
        xs = [stats.median([r["offered"] for r in groups[srv, load]]) for load in loads]
        for q, ls in (("p50_us", ":"), ("p99_us", "-"), ("p999_us", "--")):
            med = [stats.median_ci([r[q] for r in groups[srv, load]]) for load in loads]
            ax.errorbar(xs, [m[0] for m in med], yerr=[[m[0] - m[1] for m in med], [m[2] - m[0] for m in med]],
                        ls=ls, marker=".", capsize=2, color=f"C{ci}", label=f"{srv} {q[:-3]}")
    ax.set_yscale("log")
    ax.set_xlabel("offered requests/s (oha -q, open loop)")
    ax.set_ylabel("latency µs (coordinated-omission corrected)")
    ax.set_title("latency vs offered load (one colour per server; dotted p50, solid p99, dashed p99.9)")
    ax.grid(alpha=.3)
    ax.legend(fontsize=6, ncol=2)
    _save(fig, d, "latency_vs_offered", made)
    plt.close(fig)


def regime_map(plt, d, summ, params, made):
    rows = [s for s in summ.values() if set(s["sweeps"]) & {"appcost", "calib"} and s["n"]
            and s["config"]["server"] == "cserve" and not s["config"].get("mode")
            and configs.app_us(s["config"]["app"]) is not None]
    if not rows:
        return
    key = (lambda s: f"{s['config']['handoff']} c{s['config']['conns']}")
    hs = sorted({key(s) for s in rows})
    fig, ax = plt.subplots(figsize=(6, 2 + 0.5 * len(hs)))
    for i, h in enumerate(hs):
        for s in rows:
            if key(s) != h:
                continue
            us = configs.app_us(s["config"]["app"])
            ax.scatter(us, i, s=140, color=COLOURS.get(s["regime"], "#2ca02c"), edgecolor="k",
                       label=s["regime"])
        # The model's boundary: the app cost N where c_pool(cpuN) = c_loop.
        hd = h.split()[0]
        cl = params["c_loop"].get(f"{hd}/wrk-p16")
        c0, sl = model.pool_cost(params, hd, "cpu0"), params["slope"].get(hd)
        if None not in (cl, c0, sl) and sl > 0:
            b = (cl - c0) / sl
            ax.plot([b, b], [i - 0.4, i + 0.4], color="k", lw=2)
    hnd, lab = ax.get_legend_handles_labels()
    uniq = dict(zip(lab, hnd))
    ax.legend(uniq.values(), uniq.keys(), fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    ax.set_yticks(range(len(hs)))
    ax.set_yticklabels(hs)
    ax.set_ylim(-0.7, len(hs) - 0.3)
    ax.set_xlabel("app cost, µs of GIL-held Python per request (apps/cpu.py), pipelined client")
    ax.set_title("measured bound (colour) and the model's loop/pool boundary (bar)")
    _save(fig, d, "regime_map", made)
    plt.close(fig)


def predicted_vs_measured(plt, d, summ, made):
    rows = [s for s in summ.values() if s["pred"] is not None and "calib" not in s["sweeps"] and s["n"]]
    if not rows:
        return
    fig, (ax, axh) = plt.subplots(1, 2, figsize=(9, 4.5), gridspec_kw={"width_ratios": [3, 2]})
    errs = [100 * e for s in rows for e in s["pred_err"]]
    if errs:  # the error distribution, every run (not only medians)
        axh.hist(errs, bins=min(20, max(5, len(errs) // 3)), color="#888", edgecolor="k")
        axh.axvline(0, color="k", lw=1)
        axh.set_xlabel("model error per run, % (predicted / measured - 1)")
        axh.set_ylabel("runs")
        axh.set_title(f"error distribution ({len(errs)} runs)")
    for s in rows:
        m = s["rps"]
        ax.errorbar(s["pred"], m[0], yerr=[[m[0] - m[1]], [m[2] - m[0]]], marker="o", capsize=2,
                    color=COLOURS.get(s["regime"], "#2ca02c"), label=s["regime"])
    lim = [min(min(s["pred"], s["rps"][1]) for s in rows) * 0.8, max(max(s["pred"], s["rps"][2]) for s in rows) * 1.2]
    ax.plot(lim, lim, "k:", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("model rps (costs from calib only)")
    ax.set_ylabel("measured rps (median, 95 % CI)")
    ax.set_title("the model out of sample")
    hnd, lab = ax.get_legend_handles_labels()
    uniq = dict(zip(lab, hnd))
    ax.legend(uniq.values(), uniq.keys(), fontsize=7)
    _save(fig, d, "predicted_vs_measured", made)
    plt.close(fig)


def handoff_timeline(plt, d, extra, made):
    tl = [r for r in extra.get("timeline", []) if "error" not in r and r.get("spans")]
    if not tl:
        return
    fig, axes = plt.subplots(len(tl), 1, figsize=(7, 1.4 + 1.1 * len(tl)), squeeze=False)
    for ax, r in zip(axes[:, 0], tl):
        names = r["threads"]
        for i, name in enumerate(names):
            spans = [(s[1], s[2] - s[1]) for s in r["spans"] if s[0] == name]
            ax.broken_barh(spans, (i - 0.35, 0.7), color="#1f77b4")
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels(names, fontsize=7)
        ax.set_xlim(0, r["span_us"])
        ax.set_title(f"{r['handoff']}: on-CPU (bars) and asleep (gaps), {r['span_us']:.0f} µs of a "
                     f"{r['conns']}-connection run (perf sched)", fontsize=8)
    axes[-1, 0].set_xlabel("µs")
    _save(fig, d, "handoff_timeline", made)
    plt.close(fig)


def make_all(d, summ, params, extra):
    try:
        plt = _plt()
    except ImportError:
        print("figures: no matplotlib (python3-matplotlib), no figures")
        return []
    made = []
    rate_vs_connections(plt, d, summ, made)
    utilisation(plt, d, summ, made)
    latency_vs_offered(plt, d, extra, made)
    regime_map(plt, d, summ, params, made)
    predicted_vs_measured(plt, d, summ, made)
    handoff_timeline(plt, d, extra, made)
    with open(os.path.join(d, "fig", "index.json"), "w") as f:
        json.dump(sorted(os.path.basename(p) for p in made), f)
    return made

"""The figures, each as SVG (for the paper and slides) and PNG, in DIR/fig/.
Called by report.py with its summaries; every point is a median over the
repeats and every error bar its range (min–max; a 95 % bootstrap interval from
lib/stats.py's MIN_BOOT repeats on).

  rate_vs_connections     rate vs connections per handoff (closed-loop and pipelined client)
  utilisation             a heatmap: stage utilisation (loop, pool, client) and the machine's
                          busy share for every configuration, saturated cells outlined
  latency_vs_offered      open-loop p50/p99/p99.9 against offered rate (oha)
  latency_percentiles     HDR-style: latency by percentile, a line per offered load (oha keeps
                          p50, p99, p99.9 and the maximum)
  regime_map              every configuration's measured bound: the app-cost sweep (with the
                          model's loop/pool boundary where it falls in the range) and the rest
                          by connections
  predicted_vs_measured   the model out of sample, one point per configuration
  handoff_timeline        who runs and who sleeps, ring vs dgram (timeline.py's trace)
"""
import json
import os

from experiments.lib import configs, extras, model, stats

COLOURS = {"loop-bound": "#d62728", "pool-bound": "#1f77b4", "client-bound": "#7f7f7f",
           "machine-bound": "#ff7f0e", "unsaturated": "#ffffff"}


HANDOFF_COLOURS = {"ring": "C0", "dgram": "C1", "condvar": "C2", "eventfd": "C4", "native": "C3", "inline": "C5"}
PAPER_ORDER = ("calib", "connections", "appcost", "threads", "instruments", "peers", "frameworks", "browser")


def _iv_words():
    return f"median; bars: range, 95 % bootstrap CI from {stats.MIN_BOOT} repeats"


def _conn_ticks(ax, conns):
    ticks = sorted(set(conns))
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks])
    from matplotlib.ticker import NullLocator
    ax.xaxis.set_minor_locator(NullLocator())


def _colour(regime):
    return COLOURS.get(regime, "#2ca02c")


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    # A fixed salt for the SVG element ids: the same records make the same bytes.
    plt.rcParams.update({"font.size": 9, "svg.fonttype": "none", "svg.hashsalt": "cserve"})
    return plt


def _save(fig, d, name, made):
    os.makedirs(os.path.join(d, "fig"), exist_ok=True)
    fig.tight_layout()
    for ext in ("svg", "png"):
        p = os.path.join(d, "fig", f"{name}.{ext}")
        # No creation date in the file: the same records make the same bytes.
        fig.savefig(p, dpi=130, bbox_inches="tight", pad_inches=0.05,
                    metadata={"Date": None} if ext == "svg" else None)
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
                    ls="-" if cl == "wrk" else "--", label=f"{h} ({cl})", color=HANDOFF_COLOURS.get(h))
    ax.set_xscale("log", base=2)
    _conn_ticks(ax, [s["config"]["conns"] for s in rows])
    ax.set_yscale("log")  # native-hello's rate would flatten every other line on a linear axis
    ax.set_xlabel("connections")
    ax.set_ylabel("requests/s (log scale)")
    ax.set_title("hello: rate vs connections (solid: closed loop; dashed: pipelined)", fontsize=9)
    ax.grid(alpha=.3)
    ax.legend(fontsize=7)
    _save(fig, d, "rate_vs_connections", made)
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
    ax.set_title("latency vs offered load\n(colour: server; dotted p50, solid p99, dashed p99.9)", fontsize=8)
    ax.grid(alpha=.3)
    ax.legend(fontsize=6, ncol=2)
    _save(fig, d, "latency_vs_offered", made)
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
    ax.set_ylabel("measured rps (median, range)")
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


def _paper_rows(summ):
    """Every configuration with included runs, once, in the paper's order:
    by the first sweep (PAPER_ORDER) that shows it, then servers, handoffs,
    app cost and connections."""
    def first(s):
        k = [PAPER_ORDER.index(w) for w in s["sweeps"] if w in PAPER_ORDER]
        return min(k) if k else len(PAPER_ORDER)
    from experiments import report
    return sorted((s for s in summ.values() if s["n"]), key=lambda s: (first(s), report._row_order(s)))


def _short(label):
    return label.replace("cserve ", "").replace("build-noinst/cserve", "plain")


def utilisation(plt, d, summ, made, nproc=2):
    """Stage utilisation per configuration as a heatmap: a row per
    configuration (every one, once), a column per stage (loop, pool summed,
    client) and the machine's busy share; saturated cells outlined."""
    rows = _paper_rows(summ)
    if not rows:
        return
    cols = ("loop", "pool", "client", "machine")
    half = (len(rows) + 1) // 2
    parts = [rows[:half], rows[half:]] if len(rows) > 24 else [rows]
    fig, axes = plt.subplots(1, len(parts), figsize=(7.6, 0.6 + 0.12 * len(parts[0])), squeeze=False)
    import matplotlib.colors as mcolors
    cmap = plt.get_cmap("YlOrRd")
    norm = mcolors.Normalize(0, 1)
    for ax, part in zip(axes[0], parts):
        for y, s in enumerate(part):
            busy = None if s["idle"][0] is None else (nproc - s["idle"][0]) / nproc
            vals = (s["loop_util"][0], s["pool_util"][0], s["client_util"][0], busy)
            for x, v in enumerate(vals):
                if v is None:
                    ax.add_patch(plt.Rectangle((x - .5, y - .5), 1, 1, facecolor="#eeeeee", edgecolor="white"))
                    ax.text(x, y, "—", ha="center", va="center", fontsize=5, color="#888")
                    continue
                sat = v >= model.SAT if x < 3 else s["regime"] == "machine-bound"
                ax.add_patch(plt.Rectangle((x - .5, y - .5), 1, 1, facecolor=cmap(norm(min(v, 1))),
                                           edgecolor="k" if sat else "white", lw=1.2 if sat else .5))
                ax.text(x, y, f"{100 * v:.0f}", ha="center", va="center", fontsize=5,
                        color="white" if v > .75 else "black", fontweight="bold" if sat else "normal")
            ax.text(3.65, y, s["regime"].replace("-bound", ""), va="center", fontsize=5,
                    color="#333" if s["regime"] in COLOURS else "#2ca02c")
        ax.set_xlim(-.5, 5.2)
        ax.set_ylim(len(part) - .5, -.5)
        ax.set_xticks(range(len(cols)))
        ax.set_xticklabels(cols, fontsize=6)
        ax.xaxis.tick_top()
        ax.set_yticks(range(len(part)))
        ax.set_yticklabels([_short(s["label"]) for s in part], fontsize=5)
        ax.tick_params(length=0)
        for sp in ax.spines.values():
            sp.set_visible(False)
    fig.suptitle("% of one core per stage (median), machine: % of its vCPUs busy; "
                 f"outlined: saturated (stage ≥ {100 * model.SAT:.0f} %)", fontsize=7)
    _save(fig, d, "utilisation", made)
    plt.close(fig)


def regime_map(plt, d, summ, params, made):
    """The measured bound of every configuration. Left: app cost (the
    pipelined app-cost sweep), with the model's loop/pool boundary where it
    falls in the swept range. Right: every other configuration, by
    connections, one line per server/handoff/app/client."""
    rows = [s for s in summ.values() if s["n"]]
    if not rows:
        return
    def in_cost(s):
        c = s["config"]
        return (c["server"] == "cserve" and not c.get("mode") and c.get("client") == "wrk-p16" and not c.get("args")
                and not c.get("binary") and c.get("bt", 1) == 1 and configs.app_us(c["app"]) is not None
                and c["conns"] in (16, 64) and set(s["sweeps"]) & {"appcost", "calib"})
    cost = [s for s in rows if in_cost(s)]
    rest = [s for s in rows if not in_cost(s)]
    series = (lambda s: _short(s["label"]).replace(f" c{s['config']['conns']} ", " ").replace(
        f" c{s['config']['conns']}", ""))
    keys_r = sorted({series(s) for s in rest})
    keys_c = sorted({f"{s['config']['handoff']} c{s['config']['conns']}" for s in cost})
    fig, (axc, axr) = plt.subplots(1, 2, figsize=(7.6, 0.9 + 0.15 * max(len(keys_r), 3 * len(keys_c))),
                                   gridspec_kw={"width_ratios": [1.1, 1]})
    seen = {}
    for i, k in enumerate(keys_c):
        pts = [s for s in cost if f"{s['config']['handoff']} c{s['config']['conns']}" == k]
        for s in pts:
            h = axc.scatter(configs.app_us(s["config"]["app"]), i, s=60, color=_colour(s["regime"]), edgecolor="k")
            seen.setdefault(s["regime"], h)
        hd = k.split()[0]
        cl = params["c_loop"].get(f"{hd}/wrk-p16")
        c0, sl = model.pool_cost(params, hd, "cpu0"), params["slope"].get(hd)
        xmax = max(configs.app_us(s["config"]["app"]) for s in cost)
        if None not in (cl, c0, sl) and sl > 0:
            b = (cl - c0) / sl
            if 0 <= b <= xmax:
                axc.plot([b, b], [i - 0.4, i + 0.4], color="k", lw=2)
            elif b < 0:
                axc.annotate("model: pool first at every cost", (xmax, i + 0.3), fontsize=5.5, ha="right",
                             va="top")
    axc.set_yticks(range(len(keys_c)))
    axc.set_yticklabels(keys_c, fontsize=7)
    axc.set_ylim(len(keys_c) - 0.5, -0.7)
    axc.set_xlabel("app cost, µs of GIL-held Python (pipelined client)", fontsize=7)
    axc.set_title("app-cost sweep (bar: model's loop/pool boundary)", fontsize=8)
    axc.grid(axis="x", alpha=.3)
    for i, k in enumerate(keys_r):
        for s in rest:
            if series(s) == k:
                h = axr.scatter(s["config"]["conns"], i, s=45, color=_colour(s["regime"]), edgecolor="k")
                seen.setdefault(s["regime"], h)
    axr.set_xscale("log", base=2)
    _conn_ticks(axr, [s["config"]["conns"] for s in rest])
    axr.set_yticks(range(len(keys_r)))
    axr.set_yticklabels(keys_r, fontsize=5.5)
    axr.set_ylim(len(keys_r) - 0.5, -0.5)
    axr.set_xlabel("connections", fontsize=7)
    axr.set_title("every other configuration", fontsize=8)
    axr.grid(axis="x", alpha=.3)
    order = [r for r in COLOURS if r in seen] + sorted(r for r in seen if r not in COLOURS)
    fig.legend([seen[r] for r in order], order, fontsize=6, loc="lower center", ncol=len(order),
               bbox_to_anchor=(0.5, -0.02), frameon=False)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    _save(fig, d, "regime_map", made)
    plt.close(fig)


NINES = {"p50_us": 50, "p99_us": 99, "p999_us": 99.9, "max_us": 99.99}


def latency_percentiles(plt, d, extra, made):
    """HDR-style latency by percentile from the open-loop records: one panel
    per server, one line per offered load. oha's records keep p50, p99,
    p99.9 and the maximum only, so each line has those four points (the
    maximum drawn at the 99.99th position); median over the repeats, bars
    their range."""
    ol = [r for r in extra.get("openloop", []) if "error" not in r]
    if not ol:
        return
    groups = extras.openloop_groups(ol)
    servers = sorted({r["server"] for r in ol})
    fig, axes = plt.subplots(1, len(servers), figsize=(7.6, 2.9), sharey=True, squeeze=False)
    cmap = plt.get_cmap("viridis")
    x = {q: 1 / (1 - p / 100) for q, p in NINES.items()}
    for ax, srv in zip(axes[0], servers):
        loads = sorted(load for s, load in groups if s == srv)
        for li, load in enumerate(loads):
            rs = groups[srv, load]
            pts = [(x[q], stats.median_ci([r.get(q) for r in rs])) for q in NINES]
            pts = [(xx, m) for xx, m in pts if m[0] is not None]
            ax.errorbar([xx for xx, _ in pts], [m[0] for _, m in pts],
                        yerr=[[m[0] - m[1] for _, m in pts], [m[2] - m[0] for _, m in pts]],
                        marker=".", capsize=1.5, lw=1, color=cmap(li / max(1, len(loads) - 1)),
                        label=f"{load:.2f}× ({len(rs)})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(list(x.values()))
        ax.set_xticklabels(["50", "99", "99.9", "max"], fontsize=7)
        ax.set_xlabel("percentile", fontsize=7)
        ax.set_title(srv, fontsize=8)
        ax.grid(alpha=.3)
        from matplotlib.ticker import NullLocator
        ax.xaxis.set_minor_locator(NullLocator())
    hnd, lab = axes[0][0].get_legend_handles_labels()
    fig.legend(hnd, lab, fontsize=6, ncol=len(lab), loc="lower center", bbox_to_anchor=(0.5, -0.06),
               title="offered load, × the closed-loop capacity (repeats)", title_fontsize=6, frameon=False)
    axes[0][0].set_ylabel("latency µs (corrected)", fontsize=7)
    _save(fig, d, "latency_percentiles", made)
    plt.close(fig)


def make_all(d, summ, params, extra):
    try:
        plt = _plt()
    except ImportError:
        print("figures: no matplotlib (python3-matplotlib), no figures")
        return []
    made = []
    rate_vs_connections(plt, d, summ, made)
    meta = [json.loads(x) for x in open(os.path.join(d, "meta.jsonl"))] if os.path.exists(
        os.path.join(d, "meta.jsonl")) else []
    utilisation(plt, d, summ, made, (meta[-1]["machine"]["nproc"] if meta else os.cpu_count()) or 2)
    latency_vs_offered(plt, d, extra, made)
    latency_percentiles(plt, d, extra, made)
    regime_map(plt, d, summ, params, made)
    predicted_vs_measured(plt, d, summ, made)
    handoff_timeline(plt, d, extra, made)
    with open(os.path.join(d, "fig", "index.json"), "w") as f:
        json.dump(sorted(os.path.basename(p) for p in made), f)
    return made

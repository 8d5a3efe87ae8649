"""The loop-bound regime, sought with the loop pinned alone on one core, the
pool and the client on the other, and the rate predicted before the run.

With the loop on a core of its own it bounds the server where its cost per
request exceeds the pool's and the client's together (c_loop > c_pool +
c_client, lib/model.py: predict_placed). Two families of shapes grow the
loop's cost: browser-like request heads with 0 to 8 KiB of cookies (a
larger receive and a longer parse, but the pool's environ and the client's
writes grow with them), and a chunked request body of 1024 or 4096
one-byte chunks, which only the loop decodes (the app does not read it;
the client writes bytes made once). build/pipeload, a client cheaper per
request than wrk, keeps the other side light. Then the app's cost rises
step by step on the dearest shape (prediction.CROSS) until the loop is no
longer the bound: the crossover. Above it the report says what bound each
cost (nothing, at first, may saturate before the pool's side does).

Three steps, each one command (experiments/README.md says in which order):

    python3 -m experiments.regime --calibrate   # the shapes in the shared placement -> calib.jsonl,
                                                # then prediction.json/.md (experiments/prediction.py)
    git add experiments/results/regime/prediction.* && git commit   # the prediction, before the run
    python3 -m experiments.regime               # the prediction's configurations, loop alone
    python3 -m experiments.regime --report      # regime.md, regime.brief.md, numbers.json, fig/ again

The measuring step runs exactly the configurations prediction.json lists,
and refuses to unless that file is committed and unchanged; its record
names the prediction's commit. --quick does all three steps in a scratch
folder, tiny, with the prediction uncommitted (plumbing only).

Per run (lib/probe.py): the rate (cserve's window), every thread's on-CPU
time and run delay (schedstat), the loop's, the pool's and the client's µs
per request, requests in flight. A run is loop-bound by the rule stated
before the run (lib/model.py: loop_bound_strict): the loop on CPU at least
95 % of the window and the pool under 70 % of a core; the regime by the
repo's rule beside it, where the pool's and the client's shared core is a
stage of its own ("pool+client"). Full: calibration 3 rounds of 24 shapes
(~7 min), measurement 5 rounds of the prediction's configurations (~31:
~15 min), plus reruns of disturbed runs."""
import functools
import json
import os
import sys

from experiments import prediction
from experiments.lib import entry, model, probe, stats
from experiments.lib import numbers as numbers_mod
from experiments.lib.serverctl import ROOT

OUT = os.path.join(ROOT, "experiments", "results", "regime")
OUT_REALISTIC = os.path.join(ROOT, "experiments", "results", "regime-realistic")
HANDOFFS = ("ring", "dgram")
COOKIES = (0, 2048, 4096, 8192)
SHAPES = ((64, 1), (16, 16))       # (connections, depth): one request in flight, and pipelined 16 deep
# A chunked body of one-byte chunks (pipeload -k): the loop decodes each
# chunk; the client sends bytes made once and the app need not read them.
CHUNKS = (1024, 4096)
CHUNK_SHAPES = ((16, 16),)
# --realistic, a record of its own: requests a real client sends. An upload
# the app reads (apps/upload.py), a chunked body of (chunks, bytes each)
# KiB-sized chunks, in SHAPES; and hello pipelined deep (connections,
# depth) by pipeload, the client cheapest per request, so its core has room.
UPLOADS = ((16, 1024), (64, 1024), (16, 4096))
DEEP_SHAPES = ((16, 64), (64, 64), (4, 256))
CALIB_US = (0, 20)                 # the cpu app's costs that calibrate the pool's line
CALIB = ((3, 3.0, 1.0), (1, 1.0, 0.3))     # calibration: rounds, window s, warm-up s (full, quick)
MEASURE = ((5, 3.0, 1.0), (1, 1.0, 0.3))   # measurement


def cfg(handoff, cookie, conns, depth, app="hello", placement="shared", client_threads=1, chunks=0, chunk_bytes=1):
    return prediction.config(handoff, cookie, conns, depth, app, "pipeload", placement, client_threads, chunks,
                             chunk_bytes)


def realistic_plan(quick, client_threads=1):
    """--realistic's calibration: the uploads and the deep pipelines."""
    ups, shapes, deep = (UPLOADS, SHAPES, DEEP_SHAPES) if not quick else (UPLOADS[:1], SHAPES[:1], DEEP_SHAPES[:1])
    hs = HANDOFFS if not quick else HANDOFFS[1:]
    out = [cfg(h, None, c, d, "upload", client_threads=client_threads, chunks=k, chunk_bytes=b)
           for h in hs for c, d in shapes for k, b in ups]
    out += [cfg(h, None, c, d, client_threads=client_threads) for h in hs for c, d in deep]
    return [(prediction.label(c), c) for c in out]


def calib_plan(quick, client_threads=1, realistic=False):
    if realistic:
        return realistic_plan(quick, client_threads)
    x = prediction.CROSS
    xk = x.get("chunks", 0)
    if quick:
        out = [cfg("dgram", x["cookie"], x["conns"], x["depth"], app, client_threads=client_threads, chunks=xk)
               for app in ("hello", "cpu0", "cpu20")]
    else:
        out = [cfg(h, ck, c, d, client_threads=client_threads) for h in HANDOFFS for c, d in SHAPES for ck in COOKIES]
        out += [cfg(h, None, c, d, client_threads=client_threads, chunks=k)
                for h in HANDOFFS for c, d in CHUNK_SHAPES for k in CHUNKS]
        out += [cfg(h, x["cookie"], x["conns"], x["depth"], f"cpu{us}", client_threads=client_threads, chunks=xk)
                for h in HANDOFFS for us in CALIB_US]
    return [(prediction.label(c), c) for c in out]


# ------------------------------------------------------------------ the report

def extra(rec):
    m = model.metrics(rec)
    return {k: m.get(k) for k in ("loop_on_cpu", "loop_run_delay", "pool_run_delay", "client_run_delay",
                                  "pool_client_core", "in_flight_share")}


def rows(recs, pred):
    """label -> probe.summarise's row, with the prediction, the runs the
    strict rule calls loop-bound, and the model's error."""
    out = probe.summarise(recs, extra=extra)
    by = {}
    for r in recs:
        by.setdefault(r["label"], []).append(r)
    want = {prediction.label(p["config"]): p for p in (pred or {}).get("configs", [])}
    for lab, row in out.items():
        ok = [r for r in by[lab] if "error" not in r]
        use = [r for r in ok if not r.get("disturbed")] or ok
        strict = [model.loop_bound_strict(model.metrics(r)) for r in use]
        row["strict_n"], row["strict_of"] = sum(1 for s in strict if s), len(strict)
        row["strict"] = row["strict_of"] > 0 and 2 * row["strict_n"] > row["strict_of"]
        row["pred"] = want.get(lab)
        p = row["pred"] and row["pred"].get("rate")
        row["err"] = p / row["rps"] - 1 if p and row["rps"] else None
        row["tested"] = bool(row["pred"] and row["err"] is not None and (
            row["strict"] if row["pred"]["regime"] == "loop-bound" else row["regime"] == f"{row['pred']['bound']}-bound"))
    return out


def pct(x):
    return "—" if x is None else f"{100 * x:.0f} %"


def num(x, fmt="{:.2f}"):
    return "—" if x is None else fmt.format(x)


def measured_crossover(rs, handoff):
    """(last app µs loop-bound by the strict rule, first app µs above it
    where it is not), over the crossover rows of one handoff; None where
    the grid does not reach that side."""
    cross = sorted((r["pred"]["app_us"], r) for r in rs.values()
                   if r["pred"] and r["pred"].get("family") == "crossover" and r["config"]["handoff"] == handoff)
    lb = [us for us, r in cross if r["strict"]]
    if not cross:
        return None, None, []
    last = max(lb) if lb else None
    after = [us for us, r in cross if not r["strict"] and (last is None or us > last)]
    return last, (min(after) if after else None), cross


# The families numbers() reports apart (prediction.family); "chunked" is
# the synthetic body, "crossover" the app-cost sweep on it.
FAMILIES = ("heads", "upload", "deep")


# What bound a crossover row that the strict rule does not call loop-bound,
# in words (the repo's regime labels).
REGIME_WORDS = {"unsaturated": "nothing saturated", "loop-bound": "the loop was the bound",
                "pool-bound": "the pool was the bound", "client-bound": "the client was the bound",
                "pool+client-bound": "the shared pool-and-client core was the bound",
                "machine-bound": "the machine was the bound"}


def after_loop(rs, handoff):
    """What the crossover rows of one handoff measured above the last one the
    strict rule calls loop-bound: [((regime, other stages saturated), [app
    µs, ...])], consecutive costs alike grouped. Raising the app's cost need
    not hand the bound to the pool straight away: the rows in between may
    saturate nothing."""
    last, _, cross = measured_crossover(rs, handoff)
    out = []
    for us, r in cross:
        if r["strict"] or (last is not None and us <= last):
            continue
        key = (r["regime"], tuple(r.get("regime_also") or ()))
        if out and out[-1][0] == key:
            out[-1][1].append(us)
        else:
            out.append((key, [us]))
    return out


def after_loop_text(groups):
    def costs(us):
        xs = [f"{u:g}" for u in us]
        return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1]

    def words(key):
        reg, also = key
        too = [REGIME_WORDS.get(a, a).replace(" was the bound", " saturated") for a in also]
        return REGIME_WORDS.get(reg, reg) + "".join(f" ({t} too)" for t in too)
    if not groups:
        return "no cost of the grid above it"
    return ", then ".join(f"{words(k)} at {costs(us)} µs" for k, us in groups) + " of app work"


def crossover_text(pred, rs):
    out = []
    for x in (pred or {}).get("crossover") or []:
        if "error" in x:
            out.append(f"{x['handoff']}: not predicted ({x['error']})")
            continue
        lo, hi, cross = measured_crossover(rs, x["handoff"])
        p = (f"predicted from {x['app_us']:.1f} µs of app work" if x["app_us"] > 0 else
             "predicted never loop-bound (the pool's side binds from no app work)")
        if not cross:
            out.append(f"{x['handoff']}: {p}; not measured")
            continue
        if lo is not None and hi is not None:
            m = f"measured between {lo:g} and {hi:g} µs; above it, {after_loop_text(after_loop(rs, x['handoff']))}"
        elif lo is None:
            m = f"not loop-bound at any cost of the grid (from {cross[0][0]:g} µs)"
        else:
            m = f"loop-bound up to the grid's top, {lo:g} µs: not bracketed"
        out.append(f"{x['handoff']}: {p}, {m}")
    return out


def errors(rs):
    """(median |error| over rows whose regime is the predicted one, how
    many, median |error| over all predicted rows, how many)."""
    tested = [abs(r["err"]) for r in rs.values() if r.get("tested")]
    every = [abs(r["err"]) for r in rs.values() if r.get("err") is not None]
    return stats.median(tested), len(tested), stats.median(every), len(every)


def finding(rs, pred, meta):
    if not rs:
        n = len((pred or {}).get("configs") or [])
        lb = [prediction.label(p["config"]) for p in (pred or {}).get("configs") or [] if p.get("regime") == "loop-bound"]
        return (f"Not measured yet: the prediction lists {n} configurations, "
                f"{len(lb)} of them predicted loop-bound" + (f" ({', '.join(f'`{x}`' for x in lb)})" if lb else "")
                + "; `python3 -m experiments.regime` measures them.")
    lb = sorted(r["label"] for r in rs.values() if r["strict"])
    plb = sorted(r["label"] for r in rs.values() if r["pred"] and r["pred"].get("regime") == "loop-bound")
    both = sorted(set(lb) & set(plb))
    t, nt, a, na = errors(rs)
    text = (f"Loop-bound by the rule (loop on CPU ≥ {100 * model.LOOP_ON:.0f} %, pool < "
            f"{100 * model.POOL_SLACK:.0f} %) in a majority of runs: {len(lb)} of {len(rs)} configurations"
            + (f" ({', '.join(f'`{x}`' for x in lb)})" if lb else "")
            + f"; predicted loop-bound: {len(plb)}, of which {len(both)} measured so. ")
    text += (f"The model's error, the rate predicted from the shared-placement calibration against the rate "
             f"measured: median {pct(t)} over the {nt} configurations in the predicted regime, {pct(a)} over "
             f"all {na}.")
    return text


def markdown(meta, recs, pred):
    rs = rows(recs, pred)
    L = ["# The loop-bound regime, the loop alone on a core", ""]
    fams = {p.get("family") for p in (pred or {}).get("configs") or []}
    if fams & {"upload", "deep"}:
        L += ["Realistic attempts (`--realistic`): uploads that the app reads (apps/upload.py; a chunked body, "
              "chunks × bytes each in the label) and hello pipelined deep by pipeload, the client cheapest per "
              "request.", ""]
    if (meta or {}).get("quick") or (pred or {}).get("quick"):
        L += ["**Smoke run, not a measurement** (`--quick`: one round, short windows, an uncommitted "
              "prediction, on whatever else the machine was doing).", ""]
    if meta:
        pc = meta.get("prediction") or {}
        L += [probe.meta_line(meta), "",
              f"Prediction: `{pc.get('path')}`, committed at {str(pc.get('commit'))[:7]}"
              + (" (uncommitted: quick)" if not pc.get("committed") else "")
              + f", sha256 {str(pc.get('sha256'))[:12]}…; calibrated in the shared placement "
              f"({(pred or {}).get('calibration', {}).get('path')}).", "",
              f"{meta['rounds']} interleaved, shuffled rounds; {meta['warmup']} s warm-up, {meta['duration']} s "
              "window per run; build/pipeload, one thread. The loop on the second CPU alone, the pool, the "
              "client and every other thread on the first (lib/pinning.py). Loop on CPU and its run delay: "
              "schedstat, shares of the window; pool: its own clock; pool+client: every thread's time on "
              "the shared core. A run that lost more than "
              f"{model.DISTURB_LIMIT} core to steal and foreign CPU was rerun up to twice, then kept and marked †.",
              ""]
    if not recs:
        L += ["**Finding.** " + finding(rs, pred, meta), "",
              "The configurations and their predicted rates: [prediction.md](prediction.md)."]
        return "\n".join(L) + "\n"
    L += ["| configuration | predicted rps (bound) | measured rps (range) | error | loop on CPU (delay) "
          "| pool | client | pool+client core | loop-bound runs | regime (runs) | in flight |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    order = {prediction.label(p["config"]): i for i, p in enumerate((pred or {}).get("configs") or [])}
    for r in sorted(rs.values(), key=lambda r: order.get(r["label"], 999)):
        p = r["pred"] or {}
        if r["regime"] == "error":
            L.append(f"| {r['label']} | | error | | | | | | | | |")
            continue
        lo, hi = r["rps_range"]
        also = f"; also {', '.join(r['regime_also'])}" if r["regime_also"] else ""
        L.append(f"| {r['label']}{' †' if r['all_disturbed'] else ''} | {num(p.get('rate'), '{:,.0f}')} "
                 f"({p.get('bound') or '—'}) | {r['rps']:,.0f} ({lo:,.0f}–{hi:,.0f}) | "
                 f"{num(r['err'] and 100 * r['err'], '{:+.0f} %')} | {pct(r['loop_on_cpu'])} "
                 f"({pct(r['loop_run_delay'])}) | {pct(r['pool_util'])} | {pct(r['client_util'])} | "
                 f"{pct(r['pool_client_core'])} | {r['strict_n']}/{r['strict_of']} | {r['regime']} "
                 f"({r['regime_n']}/{r['regime_of']}{also}) | {pct(r['in_flight_share'])} |")
    L += ["", "**Finding.** " + finding(rs, pred, meta)]
    cx = crossover_text(pred, rs)
    if cx:
        L += ["", "**Crossover** (the app cost at which the loop stops being the bound, and what bound the runs "
              "above it): "
              + "; ".join(cx) + "."]
    if recs:
        dist = sum(r["disturbed_runs"] for r in rs.values())
        L += ["", f"Runs disturbed by other tenants: {dist} of {sum(r['runs'] for r in rs.values())}."]
        if cx:
            L += ["", "![the crossover](fig/crossover.png)"]
    return "\n".join(L) + "\n"


def brief_md(meta, recs, pred):
    """regime.brief.md, what the paper includes: the finding, the crossover
    and the figure; the table is regime.md."""
    rs = rows(recs, pred)
    L = ["# The loop-bound regime, in brief", "", "<!-- generated by experiments/regime.py; do not edit -->", ""]
    if meta:
        L += [probe.meta_line(meta), ""]
    L += ["**Finding.** " + finding(rs, pred, meta)]
    cx = crossover_text(pred, rs)
    if cx:
        L += ["", "**Crossover.** " + "; ".join(cx) + "."]
    if recs:
        L += ["", "![Rate and utilisation against the app's cost, the loop alone on a core: measured "
              "(points, coloured by regime) and predicted before the run (line)]"
              "(../experiments/results/regime/fig/crossover.png)"]
    L += ["", "Every configuration with its prediction, utilisations, run delay and regime: "
          "[regime.md](../experiments/results/regime/regime.md); the prediction: "
          "[prediction.md](../experiments/results/regime/prediction.md)."]
    return "\n".join(L) + "\n"


def numbers(meta, recs, pred):
    """Numbers the paper's prose quotes ({{@regime:KEY}}), each with its text;
    before a measurement, each says so."""
    rs = rows(recs, pred)
    N = {}

    put = functools.partial(numbers_mod.words, N=N)
    plb = [prediction.label(p["config"]) for p in (pred or {}).get("configs") or [] if p.get("regime") == "loop-bound"]
    put("predicted_loop_bound", f"{len(plb)} of {len((pred or {}).get('configs') or [])}", len(plb))
    for h in HANDOFFS:  # every handoff's key exists: a crossover the prediction lacks says so
        put(f"crossover:{h}", "not predicted (the calibration lacks the cpu app on the crossover's shape)")
    for h in HANDOFFS:
        put(f"after_loop:{h}", "not measured")
    if not recs:
        for k in ("loop_bound", "loop_bound_list", "loop_bound_example", "crossover", "model_err", "model_err_all",
                  "chunks") + tuple(f"{f}_{k}" for f in FAMILIES
                                    for k in ("loop_bound", "loop_max", "loop_max_config")):
            put(k, "not measured yet")
        for x in (pred or {}).get("crossover") or []:
            put(f"crossover:{x['handoff']}", "not measured yet")
        return N
    lb = sorted((r for r in rs.values() if r["strict"]), key=lambda r: -(r["loop_on_cpu"] or 0))
    put("loop_bound", f"{len(lb)} of {len(rs)} configurations", len(lb))
    put("loop_bound_list", ", ".join(f"`{r['label']}`" for r in lb) or "none", [r["label"] for r in lb])
    put("loop_bound_example", (f"`{lb[0]['label']}` (loop on CPU {pct(lb[0]['loop_on_cpu'])}, pool "
                               f"{pct(lb[0]['pool_util'])}, {lb[0]['strict_n']} of {lb[0]['strict_of']} runs)")
        if lb else "none")
    # The families apart: browser-like heads, the synthetic chunked body (the
    # one-byte chunks the app never reads) the loop-bound rows have, and
    # --realistic's uploads and deep pipelines.
    fam = {lab: (r["pred"] or {}).get("family") for lab, r in rs.items()}
    for f in FAMILIES:  # per family: how many loop-bound, and the loop's highest share of a core
        rows_f = [r for lab, r in rs.items() if fam[lab] == f and r.get("loop_on_cpu") is not None]
        hb = [r for r in rows_f if r["strict"]]
        put(f"{f}_loop_bound", f"{len(hb)} of {len(rows_f)} configurations", len(hb))
        top = max(rows_f, key=lambda r: r["loop_on_cpu"], default=None)
        put(f"{f}_loop_max", pct(top["loop_on_cpu"]) if top else "not measured", top and top["loop_on_cpu"])
        put(f"{f}_loop_max_config", f"`{top['label']}`" if top else "not measured", top and top["label"])
    ks = sorted({r["config"].get("chunks") for lab, r in rs.items() if fam[lab] == "chunked"} - {None})
    put("chunks", " or ".join(f"{k:,}" for k in ks) or "none", ks)
    cx = crossover_text(pred, rs)
    put("crossover", "; ".join(cx) or "not predicted")
    for x in (pred or {}).get("crossover") or []:
        if "error" in x:
            put(f"crossover:{x['handoff']}", f"not predicted ({x['error']})")
            continue
        lo, hi, cross = measured_crossover(rs, x["handoff"])
        p = f"predicted {x['app_us']:.1f} µs" if x["app_us"] > 0 else "predicted never loop-bound"
        m = (f"between {lo:g} and {hi:g} µs" if lo is not None and hi is not None else
             "not loop-bound on the grid" if lo is None else f"above the grid's {lo:g} µs")
        put(f"crossover:{x['handoff']}", f"{m} of app work ({p})" if cross else f"not measured ({p})")
        if cross:
            put(f"after_loop:{x['handoff']}", after_loop_text(after_loop(rs, x["handoff"])))
    t, nt, a, na = errors(rs)
    put("model_err", f"{pct(t)} ({nt} configurations)", t)
    put("model_err_all", f"{pct(a)} over {na} configurations", a)
    return N


def figure(out, recs, pred):
    """fig/crossover.{svg,png}: per handoff, rate and utilisation against the
    app's cost on the crossover shape, measured against predicted."""
    rs = rows(recs, pred)
    xs = [x for x in (pred or {}).get("crossover") or [] if "error" not in x]
    if not recs or not xs:
        return []
    from experiments import figures
    plt = figures._plt()
    fig, axes = plt.subplots(2, len(xs), figsize=(4.2 * len(xs), 5.2), squeeze=False, sharex="col")
    colours = {True: "#d62728", False: "#1f77b4"}
    for j, x in enumerate(xs):
        _, _, cross = measured_crossover(rs, x["handoff"])
        top = max([g for g in x["grid"]] + [1.0])
        dense = [top * i / 100 for i in range(101)]
        pr = [model.predict_placed(x["c_loop"], x["c_pool0"] + x["slope"] * u, x["c_client"],
                                   pred["placement"])[0] for u in dense]
        ax = axes[0][j]
        ax.plot(dense, pr, "-", color="0.4", lw=1, label="predicted")
        if x["app_us"] > 0:
            ax.axvline(x["app_us"], ls="--", color="0.6", lw=0.8)
        for us, r in cross:
            lo, hi = r["rps_range"]
            ax.errorbar([us], [r["rps"]], yerr=[[r["rps"] - lo], [hi - r["rps"]]], fmt="o", capsize=3,
                        color=colours[r["strict"]])
        ax.set_title(f"{x['handoff']}: {prediction.shape_text(x['shape'])}", fontsize=9)
        ax.set_ylabel("requests/s")
        ax.set_ylim(bottom=0)
        ax2 = axes[1][j]
        ax2.plot([us for us, _ in cross], [r["loop_on_cpu"] for _, r in cross], "o-", color="#d62728",
                 label="loop on CPU")
        ax2.plot([us for us, _ in cross], [r["pool_util"] for _, r in cross], "s-", color="#1f77b4", label="pool")
        ax2.plot([us for us, _ in cross], [r["pool_client_core"] for _, r in cross], "^:", color="0.4",
                 label="pool+client core")
        ax2.axhline(model.LOOP_ON, color="#d62728", lw=0.6, ls=":")
        ax2.axhline(model.POOL_SLACK, color="#1f77b4", lw=0.6, ls=":")
        if x["app_us"] > 0:
            ax2.axvline(x["app_us"], ls="--", color="0.6", lw=0.8)
        ax2.set_ylim(0, 1.05)
        ax2.set_xlabel("app µs per request (dashed: predicted crossover)")
        ax2.set_ylabel("share of a core")
        if j == 0:
            ax2.legend(fontsize=7, loc="center right")
            ax.plot([], [], "o", color=colours[True], label="loop-bound (rule)")
            ax.plot([], [], "o", color=colours[False], label="not loop-bound")
            ax.legend(fontsize=7)
    made = []
    figures._save(fig, out, "crossover", made)
    plt.close(fig)
    return made


def write_report(out):
    pred = load_prediction(out)
    path = os.path.join(out, "regime.jsonl")
    meta, recs = entry.load(path) if os.path.exists(path) else (None, [])
    with open(os.path.join(out, "regime.md"), "w") as f:
        f.write(markdown(meta, recs, pred))
    with open(os.path.join(out, "regime.brief.md"), "w") as f:
        f.write(brief_md(meta, recs, pred))
    with open(os.path.join(out, "numbers.json"), "w") as f:
        json.dump(numbers(meta, recs, pred), f, indent=1, sort_keys=True)
        f.write("\n")
    figure(out, recs, pred)
    return markdown(meta, recs, pred)


def load_prediction(out):
    p = os.path.join(out, "prediction.json")
    return json.load(open(p)) if os.path.exists(p) else None


# ------------------------------------------------------------------ the steps

def calibrate(a):
    a._full, a._quick = CALIB
    entry.resolve(a)
    todo = entry.runnable("regime", [c for _, c in calib_plan(a.quick, a.client_threads, a.realistic)],
                          prediction.label)
    meta, recs = entry.measure(a, "regime", todo, meta_extra={"step": "calibrate"})
    path = os.path.join(a.out, "calib.jsonl")
    entry.write_records(path, meta, recs)
    p = prediction.write(a.out, path, a.placement, a.quick)
    print(prediction.markdown(p))
    return entry.status(recs)


def measure(a):
    pred = load_prediction(a.out)
    path = os.path.join(a.out, "prediction.json")
    if not pred:
        sys.exit(f"regime: no {os.path.relpath(path, ROOT)}: python3 -m experiments.regime --calibrate, "
                 "then commit the prediction")
    sha, clean = prediction.committed(path)
    if not a.quick and not (sha and clean):
        rel = os.path.relpath(a.out, ROOT)
        sys.exit(f"regime: {os.path.relpath(path, ROOT)} is not committed as it is; a prediction is committed "
                 f"before the run it predicts (git add {rel}/prediction.* && git commit)")
    a._full, a._quick = MEASURE
    entry.resolve(a)
    todo = [(prediction.label(p["config"]), p["config"]) for p in pred["configs"]]
    todo = entry.runnable("regime", [c for _, c in todo], prediction.label)
    import hashlib
    meta, recs = entry.measure(a, "regime", todo, meta_extra={
        "step": "measure", "prediction": {"path": os.path.relpath(path, ROOT), "commit": sha,
                                          "committed": bool(sha and clean),
                                          "sha256": hashlib.sha256(open(path, "rb").read()).hexdigest()}})
    entry.write_records(os.path.join(a.out, "regime.jsonl"), meta, recs)
    print(write_report(a.out))
    return entry.status(recs)


def main():
    ap = entry.parser(__doc__, OUT, MEASURE[0], MEASURE[1],
                      "calibrate, predict and measure, tiny, in --out (plumbing; the prediction uncommitted)",
                      "regime")
    ap.add_argument("--calibrate", action="store_true",
                    help=f"the calibration (shared placement; full {CALIB[0][0]} rounds) and the prediction")
    ap.add_argument("--placement", default="loop-alone", choices=("loop-alone", "dedicated"),
                    help="the placement the prediction is for and the measurement runs in (--calibrate; "
                    "dedicated: every stage on cores of its own, scripts/many_core.sh)")
    ap.add_argument("--client-threads", type=int, default=1, help="pipeload's threads (--calibrate)")
    ap.add_argument("--realistic", action="store_true",
                    help="the realistic attempts instead (uploads the app reads, deep pipelines), a record of "
                    f"their own (default --out {os.path.relpath(OUT_REALISTIC, ROOT)})")
    a = ap.parse_args()
    if a.realistic and os.path.abspath(a.out) == os.path.abspath(OUT):
        a.out = OUT_REALISTIC
    if a.report:
        print(write_report(a.out))
        return 0
    entry.need_cserve()
    if a.calibrate:
        return calibrate(a)
    if a.quick:
        if os.path.abspath(a.out) in (os.path.abspath(OUT), os.path.abspath(OUT_REALISTIC)):
            sys.exit("regime --quick: give --out a scratch folder (the recorded prediction stays as it is)")
        rc = calibrate(a)
        a.rounds = a.duration = a.warmup = None
        return rc or measure(a)
    return measure(a)


if __name__ == "__main__":
    sys.exit(main())

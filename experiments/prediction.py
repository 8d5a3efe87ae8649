"""The loop-bound regime's prediction, written from calibration records
before the run it predicts, to be committed before that run.

    python3 -m experiments.prediction [--calib JSONL] [--out DIR] [--placement loop-alone]

Reads calibration runs (experiments/regime.py --calibrate's calib.jsonl, or
any probe record of the same shapes, e.g. experiments/loopbound.py's), takes
each shape's loop, pool and client µs per request (medians over its clean
runs: lib/probe.py), and writes DIR/prediction.json and DIR/prediction.md:

  shapes     for every calibrated shape with the hello app, the rate in the
             placement (lib/model.py: predict_placed; with the loop alone on
             a core, min(1/c_loop, 1/(c_pool + c_client))), the bound, and
             the loop's and the pool's predicted share of a core; "loop-bound"
             where the loop's core is the bound and the pool's share stays
             under model.POOL_SLACK
  crossover  per handoff, on the crossover shape (calibrated with the cpu
             app at two costs: the pool's µs per request is the line through
             them), the app cost N* at which the pool's side becomes the
             bound (c_pool(N*) + c_client = c_loop), and a grid of app costs
             that brackets it: points below and above N*, and one where the
             pool is predicted at 90 % of a core

experiments/regime.py measures exactly the configurations listed here, and
refuses to unless this prediction.json is committed and unchanged (it
records the prediction's commit). A quick prediction (--quick) is for the
plumbing: two grid points, and regime.py --quick takes it uncommitted."""
import argparse
import hashlib
import json
import os
import subprocess
import sys

from experiments.lib import model, probe, provenance
from experiments.lib.serverctl import ROOT

OUT = os.path.join(ROOT, "experiments", "results", "regime")
HANDOFFS = ("ring", "dgram")
# The crossover's shape: the dearest loop, a chunked body of one-byte
# chunks that only the loop decodes (the app need not read it).
CROSS = {"cookie": None, "conns": 16, "depth": 16, "chunks": 4096}
POOL_AT = 0.90         # the grid's top point: the pool predicted at this share of a core
BELOW, ABOVE = (0.0, 0.5, 0.8), (1.25, 2.0)  # grid points as fractions of N*


def shape(cfg):
    """(handoff, cookie bytes or None, conns, depth, app, body chunks, bytes
    per chunk) of a probe configuration, whichever client made it:
    pipeload's cookie, depth and chunked body (0 chunks: none), or
    heads.lua's script arguments (bytes, depth) and pipeline.lua's."""
    chunks, chunk_bytes = 0, 1
    if cfg.get("client") == "pipeload":
        cookie, depth, chunks = cfg.get("cookie"), cfg.get("depth", 1), cfg.get("chunks", 0)
        chunk_bytes = cfg.get("chunk_bytes", 1)
    elif cfg.get("script") == "heads.lua":
        cookie, depth = cfg["script_args"][0], cfg["script_args"][1]
    else:
        return None
    return (cfg.get("handoff"), cookie, cfg["conns"], depth, cfg.get("app", "hello"), chunks, chunk_bytes)


# Pipelines at least this deep are the "deep" family: hello, pipelined so
# that the cheapest client spends little per request.
DEEP = 64
# The apps a prediction is made for; the cpu apps only calibrate the crossover.
PREDICTED_APPS = ("hello", "upload")


def family(cfg):
    """Which family of shapes a configuration belongs to: "upload" (a body
    in KiB-sized chunks the app reads), "chunked" (the synthetic body of
    one-byte chunks the app never reads), "deep" (hello pipelined DEEP or
    deeper) or "heads" (browser-like heads, or wrk's small one)."""
    if cfg.get("app") == "upload":
        return "upload"
    if cfg.get("chunks"):
        return "chunked"
    if cfg.get("client") == "pipeload" and cfg.get("depth", 1) >= DEEP:
        return "deep"
    return "heads"


def shape_text(x):
    """The crossover's shape in words: "head +8 KiB, p16, c16" or
    "small head, a body of 4096 chunks, p16, c16"."""
    head = "small head" if x.get("cookie") is None else f"head +{x['cookie'] // 1024} KiB"
    body = f", a body of {x['chunks']} chunks" if x.get("chunks") else ""
    return f"{head}{body}, p{x['depth']}, c{x['conns']}"


def costs(records):
    """{shape: {"c_loop", "c_pool", "c_client", "runs", "client"}}: each
    calibrated shape's medians over its clean runs."""
    out = {}
    for row in probe.summarise([r for r in records if "error" not in r]).values():
        sh = shape(row["config"])
        if sh is None or not sh[0] or row["c_loop"] is None:
            continue
        out[sh] = {"c_loop": row["c_loop"], "c_pool": row["c_pool"], "c_client": row["c_client"],
                   "runs": row["used"], "client": row["config"].get("client") or "wrk",
                   "client_threads": row["config"].get("wrk_threads", 1), "label": row["label"]}
    return out


def _rnd(x):
    return round(x, 1)


def grid(n_star, n_pool, quick):
    """App costs (µs) bracketing the crossover n_star: points below it and
    above it, then n_pool (the pool at POOL_AT of a core) where that is
    higher. Where the loop is never the bound (n_star <= 0) the grid starts
    at 0 and climbs to n_pool, so the pool's regime is still shown."""
    if n_star is None or n_star <= 0:
        top = max(n_pool or 20.0, 1.0)
        pts = [0.0, top / 4, top / 2, top] if not quick else [0.0, top]
    else:
        pts = [n_star * f for f in (BELOW + ABOVE if not quick else (0.0, 2.0))]
        if not quick and n_pool and n_pool > pts[-1]:
            pts.append(n_pool)
    return sorted({_rnd(p) for p in pts})


def crossover(c, handoff, quick, placement="loop-alone"):
    """The crossover on CROSS's shape for one handoff, from its hello, cpu0
    and cpuN calibration: N*, the pool's line, the grid; None where the
    calibration lacks a point. With the loop alone the pool's side is the
    pool and the client on one core (c_pool(N*) + c_client = c_loop);
    dedicated, the pool alone (c_pool(N*) = c_loop)."""
    base, chunks = (handoff, CROSS["cookie"], CROSS["conns"], CROSS["depth"]), CROSS.get("chunks", 0)
    pts = sorted((float(sh[4][3:]), v) for sh, v in c.items()
                 if sh[:4] == base and sh[5] == chunks and sh[6] == 1 and sh[4].startswith("cpu"))
    hello = c.get(base + ("hello", chunks, 1))
    if len(pts) < 2 or pts[-1][0] <= pts[0][0]:
        return None
    (u0, a), (u1, b) = pts[0], pts[-1]
    slope = (b["c_pool"] - a["c_pool"]) / (u1 - u0)
    c0 = a["c_pool"] - slope * u0
    # The loop's and the client's costs do not depend on the app's: their
    # medians over the shape's calibrated apps.
    rows = [v for _, v in pts] + ([hello] if hello else [])
    c_loop = sorted(r["c_loop"] for r in rows)[len(rows) // 2]
    c_client = sorted(r["c_client"] for r in rows)[len(rows) // 2]
    if slope <= 0:
        return {"handoff": handoff, "error": f"the pool's cost does not grow with the app's (slope {slope:.3f})"}
    if placement == "dedicated":
        n_star, n_pool = (c_loop - c0) / slope, None
    else:
        n_star = (c_loop - c_client - c0) / slope
        n_pool = (POOL_AT / (1 - POOL_AT) * c_client - c0) / slope
    return {"handoff": handoff, "shape": dict(CROSS), "c_loop": c_loop, "c_client": c_client,
            "c_pool0": c0, "slope": slope, "calibrated_us": [u0, u1], "app_us": n_star,
            "pool_at_us": n_pool, "grid": grid(n_star, n_pool, quick)}


def expect(c_loop, c_pool, c_client, placement, client_threads=1):
    """The prediction for one configuration's costs."""
    rate, bound = model.predict_placed(c_loop, c_pool, c_client, placement, client_threads=client_threads)
    if rate is None:
        return {"rate": None, "bound": None}
    loop, pool = rate * c_loop / 1e6, rate * c_pool / 1e6
    regime = "loop-bound" if bound == "loop" and pool < model.POOL_SLACK else f"{bound}-bound"
    return {"rate": rate, "bound": bound, "loop_util": loop, "pool_util": pool, "regime": regime,
            "c_loop": c_loop, "c_pool": c_pool, "c_client": c_client}


def config(handoff, cookie, conns, depth, app, client, placement, client_threads=1, chunks=0, chunk_bytes=1):
    """The probe configuration a prediction is for (what regime.py runs)."""
    from experiments.lib.serverctl import app_spec
    c = {"server": "cserve", "handoff": handoff, "bt": 1, "app": app, "conns": conns, "placement": placement,
         "path": app_spec(app)[2]}
    if client == "pipeload":
        c.update(client="pipeload", depth=depth, cookie=cookie)
        if chunks:
            c["chunks"] = chunks
        if chunks and chunk_bytes > 1:
            c["chunk_bytes"] = chunk_bytes
        if client_threads > 1:
            c["wrk_threads"] = client_threads
    else:  # wrk with heads.lua, as the calibration ran it
        c.update(client="wrk", script="heads.lua", script_args=[cookie, depth], wrk_threads=1)
    return c


def make(records, calib_meta, calib_path, placement="loop-alone", quick=False):
    c = costs(records)
    out = {"kind": "prediction", "placement": placement, "quick": quick,
           "rules": {"loop_on": model.LOOP_ON, "pool_slack": model.POOL_SLACK, "pool_at": POOL_AT},
           "calibration": {"path": os.path.relpath(calib_path, ROOT),
                           "sha256": hashlib.sha256(open(calib_path, "rb").read()).hexdigest(),
                           "commit": (calib_meta or {}).get("commit"), "date": (calib_meta or {}).get("date"),
                           "placement": "shared"},
           "made_on": provenance.git_commit()[0], "configs": []}
    for sh, v in sorted(c.items(), key=lambda kv: (kv[0][0], kv[0][3], kv[0][1] or 0, kv[0][2]) + kv[0][4:]):
        handoff, cookie, conns, depth, app, chunks, chunk_bytes = sh
        if app not in PREDICTED_APPS:
            continue
        p = expect(v["c_loop"], v["c_pool"], v["c_client"], placement, v["client_threads"])
        cf = config(handoff, cookie, conns, depth, app, v["client"], placement, v["client_threads"], chunks,
                    chunk_bytes)
        out["configs"].append(dict(p, family=family(cf), config=cf, calibrated_from=v["label"]))
    out["crossover"] = []
    for h in HANDOFFS:
        x = crossover(c, h, quick, placement)
        if x is None:
            continue
        out["crossover"].append(x)
        if "error" in x:
            continue
        client, threads = next((v["client"], v["client_threads"]) for sh, v in c.items() if sh[0] == h)
        for us in x["grid"]:
            app = "cpu" + (f"{us:g}")
            p = expect(x["c_loop"], x["c_pool0"] + x["slope"] * us, x["c_client"], placement, threads)
            out["configs"].append(dict(p, family="crossover", app_us=us,
                                       config=config(h, CROSS["cookie"], CROSS["conns"], CROSS["depth"], app,
                                                     client, placement, threads, CROSS.get("chunks", 0))))
    return out


def markdown(p):
    L = ["# The loop-bound regime, predicted", "",
         "<!-- generated by experiments/prediction.py; do not edit -->", "",
         f"Written before the run from `{p['calibration']['path']}` (calibration in the shared placement, "
         f"commit {str(p['calibration'].get('commit'))[:7]}, {p['calibration'].get('date')}); code at commit "
         f"{str(p.get('made_on'))[:7]}. Placement predicted: {p['placement']}. The rate is the model's "
         "(`lib/model.py: predict_placed`) from each shape's µs per request; a configuration is predicted "
         f"loop-bound where the loop's core is the bound and the pool stays under "
         f"{100 * p['rules']['pool_slack']:.0f} % of a core." + (" **Quick: plumbing only.**" if p["quick"] else ""),
         "", "| configuration | loop / pool / client µs per request | predicted rate | bound | loop / pool share "
         "| predicted regime |", "|---|---:|---:|---|---:|---|"]
    for x in p["configs"]:
        if x["rate"] is None:
            continue
        L.append(f"| {label(x['config'])} | {x['c_loop']:.2f} / {x['c_pool']:.2f} / {x['c_client']:.2f} | "
                 f"{x['rate']:,.0f} | {x['bound']} | {100 * x['loop_util']:.0f} % / {100 * x['pool_util']:.0f} % | "
                 f"{x['regime']} |")
    for x in p.get("crossover") or []:
        if "error" in x:
            L += ["", f"Crossover, {x['handoff']}: not predicted ({x['error']})."]
            continue
        L += ["", f"Crossover, {x['handoff']} ({shape_text(x['shape'])}): the pool's µs per request "
              f"{x['c_pool0']:.2f} + {x['slope']:.3f} × the "
              f"app's µs (calibrated at {x['calibrated_us'][0]:g} and {x['calibrated_us'][1]:g}); loop "
              f"{x['c_loop']:.2f}, client {x['c_client']:.2f}: the pool's side becomes the bound from "
              f"{x['app_us']:.1f} µs of app work; the pool reaches {100 * POOL_AT:.0f} % of a core at "
              f"{x['pool_at_us']:.1f} µs. Grid: {', '.join(f'{g:g}' for g in x['grid'])} µs."]
    return "\n".join(L) + "\n"


def label(cfg):
    """A regime configuration's label: handoff, head, pipelining, connections, app, placement."""
    if cfg.get("client") == "pipeload":
        cookie, depth, client = cfg.get("cookie"), cfg.get("depth", 1), ""
    else:
        cookie, depth, client = cfg["script_args"][0], cfg["script_args"][1], " wrk"
    head = "small head" if cookie is None else f"head +{cookie // 1024} KiB"
    if cfg.get("chunks"):
        b = cfg.get("chunk_bytes", 1)
        head += f" body {cfg['chunks']}×" + (f"{b // 1024} KiB" if b % 1024 == 0 else f"{b} B")
    app = "" if cfg["app"] == "hello" else f" {cfg['app']}"
    pl = "" if cfg.get("placement") in (None, "shared") else f" @{cfg['placement']}"
    t = f" t{cfg['wrk_threads']}" if cfg.get("client") == "pipeload" and cfg.get("wrk_threads", 1) > 1 else ""
    return f"{cfg['handoff']} {head}{f' p{depth}' if depth > 1 else ''} c{cfg['conns']}{app}{client}{t}{pl}"


def committed(path, root=ROOT):
    """(commit, clean): the last commit that changed path (None: never
    committed), and whether the file is that commit's (no edit since)."""
    rel = os.path.relpath(path, root)
    tracked = subprocess.run(["git", "ls-files", "--error-unmatch", rel], cwd=root, capture_output=True).returncode == 0
    if not tracked:
        return None, False
    sha = subprocess.run(["git", "log", "-1", "--format=%H", "--", rel], cwd=root, capture_output=True,
                         text=True).stdout.strip() or None
    clean = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", rel], cwd=root).returncode == 0
    return sha, clean


def write(out_dir, calib_path, placement="loop-alone", quick=False):
    from experiments.lib import entry
    meta, recs = entry.load(calib_path)
    p = make([r for r in recs if r.get("kind", "run") == "run"], meta, calib_path, placement, quick)
    return save(out_dir, p, markdown(p))


def save(out_dir, p, md, name="prediction"):
    """A prediction into out_dir: NAME.json (p) and NAME.md (md), the files a
    measuring step checks are committed; returns p."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
        json.dump(p, f, indent=1, sort_keys=True)
        f.write("\n")
    with open(os.path.join(out_dir, f"{name}.md"), "w") as f:
        f.write(md)
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calib", help="calibration records (default: OUT/calib.jsonl)")
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--placement", default="loop-alone", choices=("loop-alone", "dedicated"))
    ap.add_argument("--quick", action="store_true", help="two grid points per crossover (plumbing)")
    a = ap.parse_args()
    calib = a.calib or os.path.join(a.out, "calib.jsonl")
    if not os.path.exists(calib):
        sys.exit(f"prediction: no {calib}: python3 -m experiments.regime --calibrate first")
    p = write(a.out, calib, a.placement, a.quick)
    print(markdown(p))
    rel = os.path.relpath(os.path.join(a.out, "prediction.json"), ROOT)
    print(f"prediction: {len(p['configs'])} configurations; commit it before measuring:\n"
          f"    git add {rel} {rel[:-5]}.md && git commit -m 'Prediction of the loop-bound regime'", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

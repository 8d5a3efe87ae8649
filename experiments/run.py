"""The closed-loop sweeps: start a server, load it with wrk, read its
per-thread CPU from inside (cserve --stats-json) and outside
(experiments/lib/threadcpu.py, the client's thread included), and append one JSON
line per run to OUT/<sweep>.jsonl.

    python3 -m experiments.run --out DIR                  # the full plan (lib/configs.py:full), 5 repeats, 3 s windows
    python3 -m experiments.run --quick --out /tmp/q       # each dimension once, tiny; plumbing only
    python3 -m experiments.run --sweep appcost --repeats 3 --out DIR
    python3 -m experiments.run --list

Repeats are interleaved and shuffled: round r runs every configuration once,
in an order drawn from --seed and r, so slow drift on the machine (another
tenant, thermal state) spreads over all configurations instead of biasing the
ones that ran last. Every repeat is kept; report.py takes medians and
bootstrap intervals over them.

Full runs (not --quick) refuse a dirty tree, so every row records one clean
commit; --allow-dirty overrides and marks the records "dirty": true.

Per run: the server starts; wrk runs W+D+M seconds; after W seconds of
warm-up SIGUSR2 opens a cserve stats window, threadcpu samples /proc for D
seconds while /proc/stat is read before and after (foreign CPU and steal in
the window), then SIGUSR1 writes the window while wrk still loads it.

Other tenants: a run whose window lost more than --disturb-limit cores to
steal and foreign CPU together (lib/model.py: disturbed) is recorded, marked
"disturbed", and run again at the end of the queue, up to --reruns times per
run and --rerun-cap reruns in all; what is still disturbed then stays
recorded and report.py leaves it out and counts it.
"""
import argparse
import datetime
import json
import os
import random
import shlex
import shutil
import signal
import sys
import tempfile
import time

from experiments.lib import configs, model, pinning, provenance
from experiments.lib.serverctl import (CSERVE, client_cmd, finish_window, free_port, load_window, server_cmd,
                                       start, start_client, stop, unavailable, wait_ready)


def run_one(run, a):
    port = free_port()
    tmpdir = tempfile.mkdtemp(prefix="cserve-exp-")
    stats_file = os.path.join(tmpdir, "stats.json")
    is_cserve = run["server"] == "cserve"
    cmd = server_cmd(run, port, stats_file if is_cserve else None)
    proc, log = start(cmd, os.path.join(tmpdir, "server.log"))
    rec = {"time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "label": configs.label(run), "config": run, "server_cmd": shlex.join(cmd)}
    # gunicorn/granian run the app in a child process, cserve --workers N in N
    children = not is_cserve or run.get("workers", 1) > 1
    try:
        if not wait_ready(proc, port, listeners=run.get("workers", 1) if is_cserve else 1):
            log.seek(0)
            rec["error"] = "server did not start: " + log.read()[-2000:]
            return rec
        time.sleep(0.3)  # threads named, pools started
        total = a.warmup + a.duration + a.margin
        wrk = client_cmd(run, port, total)
        rec["wrk_cmd"] = shlex.join(wrk)
        wp, rec["placement"], check = start_client(proc, run, wrk, children)
        series, rec["window_cpu"], mtime = load_window(proc, wp, a.warmup, a.duration, a.interval, children,
                                                       stats_file if is_cserve else None)
        check()
        st = finish_window(rec, wp, total + 30, series, stats_file if is_cserve else None, mtime)
        if st:
            rec["stats_meta"] = {k: st.get(k) for k in ("version", "handoff", "inline", "app", "instruments")}
    except Exception as e:  # record the failure, keep sweeping
        rec["error"] = f"{type(e).__name__}: {e}"
    finally:
        rec["server_exit"] = stop(proc)
        log.seek(0)
        tail = log.read()[-1500:]
        log.close()
        if "error" in rec or rec["server_exit"] not in (0, -signal.SIGTERM, None):
            rec["server_log_tail"] = tail
        shutil.rmtree(tmpdir, ignore_errors=True)
    return rec


def brief(rec):
    if "error" in rec:
        return f"{rec['label']}: ERROR {rec['error'][:200]}"
    parts = [f"{rec['label']}: {rec['rps'] or 0:,.0f} rps (wrk {rec['rps_wrk'] or 0:,.0f})"]
    for t in rec.get("threadcpu") or []:
        parts.append(f"{t['name']} {t['median_pct']:.0f}%")
    w = rec.get("window_cpu") or {}
    parts.append(f"foreign {w.get('foreign_cores', 0):.2f} steal {w.get('steal_cores', 0):.2f}")
    return "  ".join(parts)


def rerun_decision(rec, attempt, reruns_used, a):
    """What to do with a finished run: "keep" (clean, or failed: a failure is
    not the machine's fault), "rerun" (disturbed, and both bounds allow
    another try) or "exclude" (disturbed, no try left: recorded, left out by
    report.py, counted)."""
    if "error" in rec or not model.disturbed(rec, a.disturb_limit):
        return "keep"
    if attempt < a.reruns and reruns_used < a.rerun_cap:
        return "rerun"
    return "exclude"


def plan(a):
    S = configs.quick() if a.quick else configs.full()
    names = a.sweep or list(S)
    todo, seen = [], {}
    a.membership = {}
    for name in names:
        if name not in S:
            sys.exit(f"unknown sweep {name!r}; have {', '.join(S)}")
        for r in S[name]:
            if a.placement and a.placement != "shared" and r["server"] == "cserve":
                r = dict(r, placement=a.placement)
            if a.wrk_threads > 1 and r["conns"] >= a.wrk_threads:
                r = dict(r, wrk_threads=a.wrk_threads)
            why = unavailable(r)
            if why:
                print(f"skip {configs.label(r)}: {why}", file=sys.stderr)
                continue
            lab = configs.label(r)
            a.membership.setdefault(name, []).append(lab)
            # A configuration in several sweeps runs once per round, recorded
            # under its first sweep; the report shows it in each (plan.json).
            if lab in seen:
                continue
            seen[lab] = name
            todo.append((name, r))
    # Interleaved, shuffled: one round = every configuration once, and the
    # headline rows' extra runs (configs.headline) spread over the rounds;
    # an extra run's repeat number counts on from a.repeats.
    heads = {configs.label(r) for r in configs.headline()} if a.headline_repeats > a.repeats else set()
    extra = {}
    for name, r in todo:
        if configs.label(r) in heads:
            for k in range(a.headline_repeats - a.repeats):
                extra.setdefault(k % a.repeats, []).append((a.repeats + k, name, r))
    order = []
    for rep in range(a.repeats):
        rnd = [(rep, name, r) for name, r in todo] + extra.get(rep, [])
        random.Random(f"{a.seed}-{rep}").shuffle(rnd)
        order += rnd
    return order


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="each dimension once, short windows")
    ap.add_argument("--sweep", action="append", help="run only these sweeps (repeatable)")
    ap.add_argument("--repeats", type=int, help="repeats per configuration (full 5, quick 2)")
    ap.add_argument("--headline-repeats", type=int,
                    help=f"runs of each row the headlines cite (lib/configs.py: headline; full "
                         f"{configs.HEADLINE_REPEATS}, quick: the plain repeats)")
    ap.add_argument("--seed", default="cserve", help="shuffle seed (recorded)")
    ap.add_argument("--duration", type=float, help="measured seconds per run (full 3, quick 1)")
    ap.add_argument("--warmup", type=float, help="seconds of load before the window (full 1, quick 0.3)")
    ap.add_argument("--margin", type=float, default=0.5, help="load seconds after the window")
    ap.add_argument("--interval", type=float, help="threadcpu sampling interval (default duration/4)")
    ap.add_argument("--out", required=True, help="results folder (its *.jsonl are appended to)")
    ap.add_argument("--allow-dirty", action="store_true", help="full run on a dirty tree (marked dirty)")
    ap.add_argument("--append", action="store_true", help="add to a folder that already holds a full run")
    ap.add_argument("--placement", choices=pinning.PLACEMENTS,
                    help="every cserve configuration in this placement (lib/pinning.py; e.g. dedicated: "
                    "each stage on cores of its own, scripts/many_core.sh); default: each configuration's own")
    ap.add_argument("--wrk-threads", type=int, default=1,
                    help="wrk's threads in every run with at least as many connections (a machine with cores "
                    "for the client: scripts/many_core.sh)")
    ap.add_argument("--disturb-limit", type=float, default=model.DISTURB_LIMIT,
                    help="cores of steal + foreign CPU in the window above which a run is rerun (default %(default)s)")
    ap.add_argument("--reruns", type=int, help="reruns of one disturbed run at most (full 2, quick 0)")
    ap.add_argument("--rerun-cap", type=int, help="reruns in all at most (default: an eighth of the runs)")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    a.duration = a.duration or (1.0 if a.quick else 3.0)
    a.warmup = a.warmup if a.warmup is not None else (0.3 if a.quick else 1.0)
    a.repeats = a.repeats or (2 if a.quick else 5)
    a.headline_repeats = a.headline_repeats or (a.repeats if a.quick else configs.HEADLINE_REPEATS)
    a.interval = a.interval or a.duration / 4

    order = plan(a)
    a.reruns = a.reruns if a.reruns is not None else (0 if a.quick else 2)
    a.rerun_cap = a.rerun_cap if a.rerun_cap is not None else len(order) // 8
    per = a.warmup + a.duration + a.margin + 1.5
    print(f"{len(order)} runs, ~{len(order) * per / 60:.1f} min (+ up to {a.rerun_cap} reruns of disturbed "
          f"runs, ~{a.rerun_cap * per / 60:.1f} min); results in {a.out}", file=sys.stderr)
    if a.list:
        for rep, name, r in order:
            print(f"{rep} {name:<12} {configs.label(r)}")
        return 0
    sha, dirty = provenance.git_commit()
    if dirty and not a.quick and not a.allow_dirty:
        sys.exit("run.py: the tree is dirty; a full run records one clean commit. "
                 "Commit first, or pass --allow-dirty (records are then marked dirty).")
    if not a.quick and not a.append and os.path.isdir(a.out) and \
            any(f.endswith(".jsonl") for f in os.listdir(a.out)):
        sys.exit(f"run.py: {a.out} already holds results; a full run starts in an empty folder "
                 "(or pass --append)")
    if not os.access(CSERVE, os.X_OK):
        sys.exit(f"no {CSERVE}: run make first")
    os.makedirs(a.out, exist_ok=True)
    mach = provenance.machine(CSERVE)
    meta = {"commit": sha, "dirty": dirty, "quick": a.quick, "seed": a.seed, "repeats": a.repeats,
            "headline_repeats": max(a.headline_repeats, a.repeats),
            "durations": {"warmup": a.warmup, "window": a.duration, "margin": a.margin},
            "disturb": {"limit": a.disturb_limit, "reruns": a.reruns, "rerun_cap": a.rerun_cap},
            "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": mach}
    with open(os.path.join(a.out, "meta.jsonl"), "a") as f:
        f.write(json.dumps(meta) + "\n")
    plan_path = os.path.join(a.out, "plan.json")
    membership = json.load(open(plan_path)) if os.path.exists(plan_path) else {}
    for k, labs in a.membership.items():
        membership[k] = sorted(set(membership.get(k, [])) | set(labs))
    with open(plan_path, "w") as f:
        json.dump(membership, f, indent=1, sort_keys=True)
    failures = reruns = excluded = 0
    queue = [(rep, name, r, 0) for rep, name, r in order]
    i = 0
    while queue:
        rep, name, r, attempt = queue.pop(0)
        i += 1
        rec = run_one(r, a)
        rec.update(sweep=name, repeat=rep, order=i, attempt=attempt, commit=sha, dirty=dirty, quick=a.quick,
                   durations=meta["durations"], machine=mach)
        what = rerun_decision(rec, attempt, reruns, a)
        if what != "keep":
            rec["disturbed"] = True
        with open(os.path.join(a.out, f"{name}.jsonl"), "a") as f:
            f.write(json.dumps(rec) + "\n")
        failures += "error" in rec
        if what == "rerun":  # at the end of the queue: a burst of steal passes meanwhile
            reruns += 1
            queue.append((rep, name, r, attempt + 1))
        excluded += what == "exclude"
        print(f"[{i}/{len(order) + reruns}] r{rep} {name}: {brief(rec)}"
              f"{' (disturbed: rerun)' if what == 'rerun' else ' (disturbed: left out)' if what == 'exclude' else ''}",
              file=sys.stderr, flush=True)
    print(f"run.py: {len(order) - failures}/{len(order)} runs ok; {reruns} reruns of disturbed runs, "
          f"{excluded} still disturbed (recorded, left out by report.py)", file=sys.stderr)
    # Quick: any failure is broken plumbing. Full: a lone failed run is
    # recorded and reported (its row shows the error), not worth the hour.
    return 1 if (failures and a.quick) or failures == len(order) else 0


if __name__ == "__main__":
    sys.exit(main())

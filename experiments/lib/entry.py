"""The entry point the measured experiments share (loopbound, seed,
production, freethreaded): their command-line arguments, the full and quick
defaults, the interleaved rounds with reruns of disturbed runs, and the
record file (a provenance line, then one line per run).

An experiment keeps what is its own (its plan, its report, extra steps such
as seed's profiles) and calls these in order:

    a = entry.parser(__doc__, OUT, FULL, QUICK, "what --quick runs", "seed").parse_args()
    if a.report: ...                       # rewrite the report from the record
    entry.resolve(a)                       # --rounds/--duration/--warmup: full or quick defaults
    meta, recs = entry.measure(a, "NAME", todo)
    entry.write_records(path, meta, recs)
    return entry.status(recs)

FULL and QUICK are (rounds, duration s, warm-up s)."""
import argparse
import json
import os
import shlex
import sys

from . import model, probe
from .serverctl import CSERVE, ROOT, unavailable

KNOBS = ("rounds", "duration", "warmup")


def parser(doc, out, full, quick, quick_help, seed=None):
    """The shared arguments. seed: the shuffle seed's default; given, the
    probe experiments' --reruns, --seed and --report are added too."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help=quick_help)
    ap.add_argument("--rounds", type=int, help=f"interleaved rounds (full {full[0]}, quick {quick[0]})")
    ap.add_argument("--duration", type=float, help=f"measured seconds per run (full {full[1]:g}, quick {quick[1]:g})")
    ap.add_argument("--warmup", type=float,
                    help=f"seconds of load before the window (full {full[2]:g}, quick {quick[2]:g})")
    ap.add_argument("--out", default=out, help="results folder" + (f" (default {os.path.relpath(out, ROOT)})"
                                                                     if out else ""))
    if seed is not None:
        ap.add_argument("--reruns", type=int, default=2, help="reruns of one disturbed run at most")
        ap.add_argument("--seed", default=seed, help="shuffle seed (recorded)")
        ap.add_argument("--report", action="store_true", help="only rewrite the report from the record")
    ap.set_defaults(_full=tuple(full), _quick=tuple(quick))
    return ap


def resolve(a):
    """Fill --rounds, --duration and --warmup left unset from the full or the
    quick defaults; returns a."""
    d = a._quick if a.quick else a._full
    for k, v in zip(KNOBS, d):
        if getattr(a, k) is None:
            setattr(a, k, v)
    return a


def need_cserve():
    if not os.access(CSERVE, os.X_OK):
        sys.exit(f"no {CSERVE}: run make first")


def runnable(name, todo, label):
    """todo's configurations that can run here ([(label, cfg)]), each skipped
    one named on stderr with what installs it; exits when none can."""
    out = []
    for c in todo:
        why = unavailable(c)
        if why:
            print(f"{name}: skip {label(c)}: {why}", file=sys.stderr)
            continue
        out.append((label(c), c))
    if not out:
        sys.exit(f"{name}: nothing can run here")
    return out


def command(module):
    return shlex.join(["/usr/bin/python3", "-m", f"experiments.{module}"] + sys.argv[1:])


def log(s):
    print(s, file=sys.stderr, flush=True)


def measure(a, module, todo, runner=None, per_run_extra=1.5, meta_extra=None):
    """Run todo ([(label, cfg)]) in a.rounds interleaved, shuffled rounds
    (probe.run_rounds; a quick run reruns nothing) with runner(cfg, label)
    -> record, by default probe.measure over a.warmup and a.duration.
    Returns (meta, records): the provenance line with the run's knobs, and
    every run's record."""
    per = a.warmup + a.duration + 0.5 + per_run_extra
    log(f"{module}: {len(todo) * a.rounds} runs, ~{len(todo) * a.rounds * per / 60:.1f} min plus reruns; "
        f"results in {os.path.relpath(a.out, ROOT)}")
    meta = probe.meta(command(module))
    meta.update(quick=a.quick, rounds=a.rounds, warmup=a.warmup, duration=a.duration, seed=a.seed,
                disturb_limit=model.DISTURB_LIMIT, reruns=a.reruns, **(meta_extra or {}))
    runner = runner or (lambda c, lab: probe.measure(c, lab, a.warmup, a.duration))
    recs = probe.run_rounds(todo, a.rounds, a.seed, runner, reruns=0 if a.quick else a.reruns, log=log)
    return meta, recs


def write_records(path, meta, recs, more=()):
    """path: the provenance line, one line per run (kind "run"), then `more`
    (records that carry their own kind, e.g. seed's profiles)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(json.dumps(meta) + "\n")
        for r in recs:
            f.write(json.dumps(dict(r, kind="run")) + "\n")
        for r in more:
            f.write(json.dumps(r) + "\n")


def start(a, write_report):
    """After parse_args: with --report, rewrite the report from the record
    (write_report(out)) and return None; else check that ./cserve is built
    and fill the knobs left unset; returns a."""
    if a.report:
        print(write_report(a.out))
        return None
    need_cserve()
    return resolve(a)


def write_report(out, name, markdown, numbers):
    """OUT/NAME.md (markdown(meta, records)) and OUT/numbers.json
    (numbers(meta, records)) from OUT/NAME.jsonl, the record
    write_records wrote (none yet: both say so); returns the markdown."""
    path = os.path.join(out, f"{name}.jsonl")
    meta, recs = load(path) if os.path.exists(path) else (None, [])
    md = markdown(meta, recs)
    with open(os.path.join(out, f"{name}.md"), "w") as f:
        f.write(md)
    with open(os.path.join(out, "numbers.json"), "w") as f:
        json.dump(numbers(meta, recs), f, indent=1, sort_keys=True)
        f.write("\n")
    return md


def load(path):
    """(meta, [records]) of a file write_records wrote (every non-meta line)."""
    meta, recs = None, []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("kind") == "meta":
                meta = r
            else:
                recs.append(r)
    return meta, recs


def status(recs):
    """The exit status: 1 when any run or step failed."""
    return 1 if any("error" in r for r in recs) else 0

"""make micro-record: the handoff round-trip micro-benchmarks, recorded.

    python3 -m experiments.micro --bin build/micro/bench_handoff [--rounds 5] [--out experiments/results/micro]
    python3 -m experiments.micro --readme experiments/results/micro/micro.json [--readme-path DOC.md ...]

One round runs every registered benchmark once (Google Benchmark, JSON out);
rounds are repeated, so each row's median and range are over whole rounds run
one after another on the same machine. Wall ns per round trip, CPU ns on each
thread and syscalls per round trip (the drivers' own counters,
experiments/micro/roundtrip.c). --readme rewrites the micro-benchmark
block (between its GENERATED markers; in the documents experiments/lib/generated.py
names for it) from a recorded micro.json, so the table is never typed by hand."""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from experiments.lib import generated, provenance

# Benchmark name -> how the table's row reads, in table order.
ROWS = [
    ("ring_workerspin_loopspin", "ring, worker spins, loop polls"),
    ("ring_workerspin_loopsleep", "ring, worker spins, loop sleeps in epoll"),
    ("ring_default_loopsleep", "ring, learnt spin budget, loop sleeps in epoll"),
    ("ring_workerpark", "ring, `--spin 0` (a park every job)"),
    ("condvar_workerpoll", "condvar, worker polls"),
    ("condvar", "condvar"),
    ("eventfd", "eventfd"),
    ("dgram", "dgram (two datagram socketpairs)"),
]
FIELDS = ["real_time", "loop_cpu_ns", "worker_cpu_ns", "loop_sc", "worker_sc", "worker_parks"]


def run_round(binary):
    p = subprocess.run([binary, "--benchmark_format=json"], capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit(f"micro.py: {binary} failed ({p.returncode}): {p.stderr.strip()[-500:]}")
    out = {}
    for b in json.loads(p.stdout)["benchmarks"]:
        if b.get("error_occurred"):
            sys.exit(f"micro.py: {b['name']}: {b.get('error_message')}")
        name = b["name"].split("/")[1] if b["name"].startswith("RoundTrip/") else b["name"]
        scale = {"ns": 1, "us": 1e3, "ms": 1e6}[b.get("time_unit", "ns")]
        out[name] = {f: b[f] * (scale if f == "real_time" else 1) for f in FIELDS}
    return out


def summarise(rounds):
    summ = {}
    for name, _ in ROWS:
        vals = {f: [r[name][f] for r in rounds if name in r] for f in FIELDS}
        if vals["real_time"]:
            summ[name] = {f: {"median": statistics.median(v), "min": min(v), "max": max(v)}
                          for f, v in vals.items()}
    return summ


def fmt_ns(x):
    return f"{x / 1000:.1f}k" if x >= 1000 else f"{x:.0f}"


def cell(s, f):
    m, lo, hi = s[f]["median"], s[f]["min"], s[f]["max"]
    if f.endswith("_sc") or f == "worker_parks":
        return f"{m:.2f}"
    return f"{fmt_ns(m)} ({fmt_ns(lo)}–{fmt_ns(hi)})"


def table(data):
    lines = ["| round trip | wall ns | loop CPU ns | worker CPU ns | loop syscalls | worker syscalls "
             "| worker parks |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, label in ROWS:
        s = data["summary"].get(name)
        if s:
            lines.append(f"| {label} | " + " | ".join(cell(s, f) for f in FIELDS) + " |")
    return lines


def describe(data):
    m = data["meta"]
    return (f"`{m['command']}`, {m['time']}, commit {m['commit']}: {m['cpu_model']}, {m['nproc']} CPUs, "
            f"kernel {m['kernel']}. Median (min–max) over {m['rounds']} rounds, each round every "
            f"benchmark once; per round trip: one job submitted and its completion awaited. "
            f"Syscalls (the loop's include epoll_wait) and parks are medians per round trip.")


def readme_body(json_path, doc=None):
    """The "micro" block (experiments/lib/generated.py) from a recorded run."""
    data = json.load(open(json_path))
    return "\n".join(["", describe(data), ""] + table(data) + [""])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", help="the bench_handoff binary (make micro builds it)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(ROOT, "experiments", "results", "micro"))
    ap.add_argument("--readme", metavar="JSON", help="rewrite the generated block (handoffs/README.md) from this recorded run")
    ap.add_argument("--readme-path", action="append",
                    help="a Markdown file with the block (repeatable; default: where experiments/lib/generated.py puts it)")
    a = ap.parse_args()
    if a.readme:
        generated.write("micro", a.readme, a.readme_path)
        return
    if not a.bin:
        ap.error("--bin or --readme is required")
    rounds = []
    for r in range(a.rounds):
        rounds.append(run_round(a.bin))
        print(f"micro.py: round {r + 1}/{a.rounds} done", file=sys.stderr)
    cpu = provenance.cpu_info()
    meta = {"command": "make micro-record", "time": datetime.datetime.now(datetime.timezone.utc)
            .isoformat(timespec="seconds"), "commit": provenance.short_commit(),
            "cpu_model": cpu["model"], "nproc": cpu["nproc"], "kernel": platform.release(),
            "rounds": a.rounds, "loadavg_before": os.getloadavg()[0]}
    data = {"meta": meta, "rounds": rounds, "summary": summarise(rounds)}
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "micro.json")
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
    with open(os.path.join(a.out, "micro.md"), "w") as f:
        f.write("# make micro-record\n\n" + describe(data) + "\n\n" + "\n".join(table(data)) + "\n")
    print("\n".join(table(data)))
    print(f"micro.py: wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()

"""make loop-floor: what the handoff itself adds to the loop per request.

    python3 -m experiments.loop_floor --bin build/micro/loop_floor [--rounds 9] [--seconds 1.0]
                              [--out experiments/results/loop-floor]
    python3 -m experiments.loop_floor --readme experiments/results/loop-floor/loop_floor.json
    python3 -m experiments.loop_floor --markdown experiments/results/loop-floor/loop_floor.json

Runs experiments/micro/loop_floor.c in each configuration below, once per
round, in a fresh shuffled order each round, and records the loop thread's
busy ns per job. A two-thread configuration is paired, round by round, with
the inline one of the same job (the loop serving each job itself, as
native-hello does): the difference is what the handoff adds to the loop.

This guest's host places its two vCPUs and moves them: the cost of a cache
line crossing between them (the yardstick that brackets every two-thread
run) changes several-fold between minutes. The record therefore splits the
runs by their own yardstick: "near" runs, in which a line crossed in at
most the goal's margin (so one crossing a request would fit it), and "far"
runs, the rest. Runs whose yardsticks before and after disagree by more
than MOVED saw the vCPUs move and are in neither.

The record sets the rows beside goal 3 of `make bench` (the ring's loop at
most 1.1x native-hello's at c256 pipelined, from experiments/results/bench/)
and beside how many completions the server's loop drains a pass there
(experiments/results/placement/). --readme rewrites the block
(where experiments/lib/generated.py puts it) from a record, --markdown the .md beside it.
The record keeps every run; the summary and the lines under the table are
computed from it each time, so a change to the analysis needs no re-run."""
import argparse
import datetime
import json
import os
import platform
import random
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from experiments.bench import median_spread, steal_jiffies, steal_pct
from experiments.lib import generated, provenance

MOVED = 1.5    # yardsticks before and after a run further apart than this factor: its vCPUs moved
PACE_NS = 2000    # the pool's time per job (the bench's ring pool at the goal's cell is of this order)
PASS_NS = 128000  # the server-like loop's time on its sockets between two drains
BATCHED_K = 16    # the batched rows' jobs per publish, each side (a pipelined connection's depth in the bench)
REQ_LINES = 8     # a server-sized job: about the lines of cserve's struct job both threads touch for a GET
LEAN = ["--batch", "16"]                                       # a loop polling its completions
SERVER = ["--worker-ns", str(PACE_NS), "--pass-ns", str(PASS_NS), "--batch", "256"]  # drains once a pass
# key, how the row reads, loop_floor's arguments, the inline row it is paired with.
ROWS = [
    ("pingpong", "yardstick: one cache line passed between the two threads, ns per one-way transfer",
     ["--mode", "pingpong"], None),
    ("inline", "the loop serves each job itself (native-hello's way)", ["--mode", "inline"] + LEAN, None),
    ("ring", "ring as built, a worker as fast as the loop, the loop polling", ["--mode", "ring"] + LEAN, "inline"),
    ("ring_polled", f"ring as built, a {PACE_NS // 1000} µs worker, the loop polling (one completion a drain)",
     ["--mode", "ring", "--worker-ns", str(PACE_NS)] + LEAN, "inline"),
    ("ring_server", f"ring as built, a {PACE_NS // 1000} µs worker, the loop draining every "
                    f"{PASS_NS // 1000} µs", ["--mode", "ring"] + SERVER, "inline"),
    ("batched_1_server", "the same two SPSC rings, publishing and fencing every job",
     ["--mode", "batched", "--publish-every", "1"] + SERVER, "inline"),
    ("batched_server", f"the same two SPSC rings, publishing and fencing once per {BATCHED_K} jobs",
     ["--mode", "batched", "--publish-every", str(BATCHED_K)] + SERVER, "inline"),
    ("inline_req", f"inline, {REQ_LINES} lines of request a job",
     ["--mode", "inline", "--request-lines", str(REQ_LINES)] + LEAN, None),
    ("ring_req_server", f"ring as built, draining every {PASS_NS // 1000} µs, {REQ_LINES} lines of request",
     ["--mode", "ring", "--request-lines", str(REQ_LINES)] + SERVER, "inline_req"),
    ("batched_req_server", f"SPSC rings publishing once per {BATCHED_K} jobs, {REQ_LINES} lines of request",
     ["--mode", "batched", "--publish-every", str(BATCHED_K), "--request-lines", str(REQ_LINES)] + SERVER,
     "inline_req"),
]
FIELDS = ["busy_ns_per_job", "worker_cpu_ns_per_job", "jobs_per_pass"]
BENCH = os.path.join(ROOT, "experiments", "results", "bench", "bench.json")
GOAL_CELL = ("hello", 256, 16)
PLACEMENT = os.path.join(ROOT, "experiments", "results", "placement", "placement.json")
PLACEMENT_ROW = "ring: either CPU"  # the server as it runs by default, at the goal's cell


def run_one(binary, args, seconds):
    cmd = [binary, "--seconds", str(seconds)] + args
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60 + 10 * seconds)
    if p.returncode != 0:
        sys.exit(f"loop_floor.py: {' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-500:]}")
    return json.loads(p.stdout)


def spread(vals):
    m, lo, hi = median_spread(vals)
    return None if m is None else {"median": m, "min": lo, "max": hi, "n": len([v for v in vals if v is not None])}


def run_yardstick(run):
    """A two-thread run's ns per line transfer: the mean of the pingpongs
    just before and after it, or None if it has none or they disagree by
    more than MOVED (the host moved the vCPUs during the run)."""
    b, a = run.get("yardstick_before_ns") or 0, run.get("yardstick_after_ns") or 0
    if b <= 0 or a <= 0 or max(a, b) > MOVED * min(a, b):
        return None
    return (a + b) / 2


def margin_ns(bench):
    """Goal 3's margin a request, ns: a tenth of native-hello's loop."""
    return 0.1 * bench["native_loop_us"] * 1000 if bench else None


def placement_of(run, margin):
    """'near' (a line crossed in at most the margin), 'far', or None (the
    vCPUs moved during the run, no yardstick, or no margin to judge by)."""
    y = run_yardstick(run)
    if not y or not margin:
        return None
    return "near" if y <= margin else "far"


def summarise(rounds, margin=None, row_bases=None):
    """Per row: its fields' median (min-max) over the rounds; for a paired
    row the per-round excess over its inline row, over all runs and over
    the near and far ones apart (by margin), how many of each came within
    the margin, and how many runs saw their vCPUs move."""
    summ = {}
    for key, base in (row_bases or {k: b for k, _, _, b in ROWS}).items():
        runs = [r[key] for r in rounds if key in r]
        if not runs:
            continue
        row = {f: spread([x[f] for x in runs]) for f in FIELDS}
        if base:
            pairs = [(r[key], r[key]["busy_ns_per_job"] - r[base]["busy_ns_per_job"])
                     for r in rounds if key in r and base in r]
            row["over_inline_ns"] = spread([e for _, e in pairs])
            for where in ("near", "far"):
                placed = [e for run, e in pairs if placement_of(run, margin) == where]
                row[f"over_inline_ns_{where}"] = spread(placed)
                row[f"within_margin_{where}"] = [sum(1 for e in placed if e <= margin), len(placed)]
            row["yardstick_ns"] = {where: spread([run_yardstick(run) for run, _ in pairs
                                                  if placement_of(run, margin) == where]) for where in ("near", "far")}
            row["moved_runs"] = sum(1 for run, _ in pairs if not run_yardstick(run))
        summ[key] = row
    return summ


def bench_loops(path=BENCH):
    """The goal's figures from a recorded make bench at the goal's cell:
    the loop's µs per request (threadcpu, as the goal measures it) with the
    ring and with native-hello, and the ring's pool's; None without one."""
    try:
        data = json.load(open(path))
    except OSError:
        return None
    us = {}
    for row in data["summary"]:
        if (row["app"], row["conns"], row["pipeline"]) == GOAL_CELL and row["server"] in ("ring", "native"):
            us[row["server"]] = row.get("us_per_req") or {}
    if not (us.get("ring") or {}).get("loop") or not (us.get("native") or {}).get("loop"):
        return None
    return {"ring_loop_us": us["ring"]["loop"], "native_loop_us": us["native"]["loop"],
            "ring_pool_us": us["ring"].get("pool"), "bench_time": data["meta"].get("time"),
            "bench_commit": (data["meta"].get("machine") or {}).get("commit") or data["meta"].get("commit")}


def server_passes(path=PLACEMENT):
    """How many requests the server's loop handles per pass at the goal's
    cell (it drains the completion rings once a pass, so on average as many
    completions a drain): the placement record's loop passes per request,
    median and range, or None where there is no record."""
    try:
        data = json.load(open(path))
    except OSError:
        return None
    for row in data["summary"]:
        if row["placement"] == PLACEMENT_ROW:
            p = row["loop_passes_per_req"]
            return {"passes_per_req": {k: p[k] for k in ("median", "min", "max")},
                    "time": data["meta"].get("time"),
                    "commit": (data["meta"].get("machine") or {}).get("commit") or data["meta"].get("commit")}
    return None


def num(x, f="{:.0f}"):
    """A number as the tables print it, with a true minus sign and no -0."""
    text = f.format(x)
    return "0" if text in ("-0", "-0.0") and f == "{:.0f}" else text.replace("-", "\u2212")


def fmt(s, f="{:.0f}"):
    if not s:
        return "—"
    return f"{num(s['median'], f)} ({num(s['min'], f)} to {num(s['max'], f)})" if s["min"] < 0 else \
        f"{num(s['median'], f)} ({num(s['min'], f)}–{num(s['max'], f)})"


def counted(s):
    return "—" if not s else f"{fmt(s)} [{s['n']}]"


def labels(data):
    return data.get("labels") or {key: label for key, label, _, _ in ROWS}


def bases(data):
    """Each row's inline pair, as recorded (a record made with other rows
    is read with its own)."""
    return data.get("bases") or {key: base for key, _, _, base in ROWS}


def param(data, key, field):
    """A driver parameter of a row, from its recorded runs (None if absent)."""
    vals = {r[key][field] for r in data.get("rounds", []) if key in r and field in r[key]}
    return vals.pop() if len(vals) == 1 else None


def table(data):
    lines = ["| configuration | loop busy ns/job | over its inline row, ns/job | crossing ≤ margin [n] "
             "| crossing > margin [n] | worker CPU ns/job | jobs a drain | vCPUs moved |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for key, label in labels(data).items():
        s = data["summary"].get(key)
        if not s:
            continue
        paired = "over_inline_ns" in s
        lines.append(f"| {label} | {fmt(s['busy_ns_per_job'])} | {fmt(s.get('over_inline_ns'))} | "
                     + (f"{counted(s.get('over_inline_ns_near'))} | {counted(s.get('over_inline_ns_far'))} | "
                        f"{fmt(s['worker_cpu_ns_per_job'])} | " if paired else "— | — | — | ")
                     + f"{fmt(s['jobs_per_pass'], '{:.1f}')} | {s['moved_runs'] if paired else '—'} |")
    return lines


def verdict(data):
    """The lines under the table: the rows beside goal 3's margin, the runs
    whose crossing fitted it and those whose did not apart. Each sentence is
    computed from the record, and says only what its numbers show."""
    b, s = data.get("bench"), data["summary"]
    need = ("ring_server", "batched_server", "ring_polled")
    if not b or any("over_inline_ns" not in s.get(k, {}) for k in need):
        return []
    margin = margin_ns(b)
    gap = (b["ring_loop_us"] - b["native_loop_us"]) * 1000
    k_pub, req = param(data, "batched_server", "publish_every"), param(data, "ring_req_server", "request_lines")
    lines = [f"- The goal allows the ring's loop 10 % over native-hello's: {margin:.0f} ns a request on the "
             f"recorded bench (native-hello's loop {b['native_loop_us']} µs, commit {b['bench_commit']}), where "
             f"the ring's loop cost {b['ring_loop_us']} µs ({num(gap)} ns over native-hello's)"
             + (f" and its pool {b['ring_pool_us']} µs a request." if b.get("ring_pool_us") else ".")]
    ys = s["ring_server"]["yardstick_ns"]
    if ys.get("near") or ys.get("far"):
        lines.append("- A crossing here is one cache line passed between the vCPUs (each run's own yardstick). In "
                     "the server-like ring row it cost " + "; ".join(
                         f"{ys[w]['min']:.0f}–{ys[w]['max']:.0f} ns in the {ys[w]['n']} runs where it was "
                         + ("at most" if w == "near" else "over") + " the margin"
                         for w in ("near", "far") if ys.get(w)) + ".")
    parts = []
    for key, what in (("ring_server", "the ring as built"),
                      ("batched_server", f"publishing once per {k_pub} jobs"),
                      ("ring_req_server", f"the ring as built, {req} request lines"),
                      ("batched_req_server", f"publishing once per {k_pub} jobs, {req} request lines"),
                      ("ring_polled", "the ring as built, one completion a drain")):
        if key not in s:
            continue
        by = []
        for w, when in (("near", "crossing ≤ margin"), ("far", "crossing > margin")):
            if s[key].get(f"over_inline_ns_{w}"):
                ok, n = s[key][f"within_margin_{w}"]
                by.append(f"{when} {num(s[key][f'over_inline_ns_{w}']['median'])} ns ({ok} of {n} within)")
        if by:
            parts.append(f"  - {what}: " + "; ".join(by))
    if parts:
        lines.append("- Over inline (median), and the runs within the margin, by what a crossing cost:")
        lines += parts
    if "batched_1_server" in s:
        for w, when in (("near", "at most"), ("far", "over")):
            rounds = [r for r in data.get("rounds", []) if "batched_server" in r and "batched_1_server" in r
                      and placement_of(r["batched_server"], margin) == w
                      and placement_of(r["batched_1_server"], margin) == w]
            diffs = [r["batched_server"]["busy_ns_per_job"] - r["batched_1_server"]["busy_ns_per_job"]
                     for r in rounds]
            if diffs:
                lines.append(f"- Publishing once per {k_pub} jobs instead of every job changed the loop's ns a job "
                             f"by {fmt(spread(diffs))}, paired by round over the {len(diffs)} "
                             f"round{'s' if len(diffs) != 1 else ''} where a crossing cost {when} the margin in "
                             f"both runs (lower in {sum(1 for x in diffs if x < 0)}).")
    near_ok, far_ok = s["ring_server"]["within_margin_near"], s["ring_server"]["within_margin_far"]
    moved = s["ring_server"]["moved_runs"]
    counts = (f"{near_ok[0]} of {near_ok[1]} runs with a crossing ≤ the margin, {far_ok[0]} of {far_ok[1]} with "
              f"one over it" + (f", {moved} with their vCPUs moved" if moved else ""))
    if near_ok[1] and far_ok[1] and near_ok[0] == near_ok[1] and far_ok[0] == 0:
        lines.append(f"- So, draining as the server does, the ring as built met the margin exactly where a crossing "
                     f"did ({counts}): on this machine the goal is within the handoff's reach only while the host "
                     "keeps a crossing under the margin.")
    elif near_ok[1] or far_ok[1]:
        lines.append(f"- Draining as the server does, the ring as built met the margin in {counts}.")
    srv = data.get("server")
    if srv:
        p = srv["passes_per_req"]
        jpp = s["ring_server"]["jobs_per_pass"]["median"]
        lines.append(f"- The server's loop at the goal's cell handles about {1 / p['median']:.0f} requests a pass "
                     f"({1 / p['max']:.0f}–{1 / p['min']:.0f} over its rounds; `{PLACEMENT_ROW}` in "
                     f"experiments/results/placement/, commit {srv['commit']}), and so about as many completions "
                     f"a drain; the server-like ring row here drained {jpp:.0f}.")
    dear = [s[k]["over_inline_ns"]["max"] for k in ("ring_server", "ring_req_server") if k in s]
    if dear and 0 < max(dear) < gap:
        lines.append(f"- The dearest server-like ring run here added {max(dear):.0f} ns to the loop, with no parks "
                     f"or wake-ups (these runs never sleep). If the bench's crossings cost no more than here, at "
                     f"least {gap - max(dear):.0f} of the {gap:.0f} ns the server's loop spent over native-hello's "
                     "went on more than these rings' operations and a job's crossings: on its parks and wake-ups, "
                     "its fatter jobs, or its own work around the handoff.")
    return lines


def describe(data):
    m = data["meta"]
    return (f"`{m['command']}`, {m['time']}, commit {m['commit']}: {m['cpu_model']}, {m['nproc']} CPUs, "
            f"kernel {m['kernel']}; load average {m['loadavg_before']:.2f} before, steal {m['steal_pct']} % "
            f"of CPU time. {m['rounds']} rounds of {m['seconds']} s a configuration, each round every "
            "configuration once in a shuffled order; the loop and the worker pinned to the two CPUs; "
            f"{param(data, 'inline', 'window')} jobs in flight (the server's default --queue-size), a "
            f"{param(data, 'inline', 'response')}-byte response (cserve's hello). Loop busy ns "
            "a job: the loop's clock over its drains that found work and its handling of them. Medians "
            "(min–max) over the rounds; the excess over the inline row of the same job is paired by round. "
            "A crossing: one cache line passed between the two threads, a run's own yardstick (the mean of "
            "the pingpongs just before and after it); its runs are split by whether it cost at most goal 3's "
            f"margin (below) or more, and a run whose two yardsticks differ by more than {MOVED}x saw its "
            "vCPUs move and is in neither.")


def markdown(data):
    v = verdict(data)
    return "\n".join([describe(data), ""] + table(data) + ([""] + v if v else []))


def render(data):
    """The record's Markdown, its summary computed afresh from its runs (a
    change to the analysis needs no re-run)."""
    data = dict(data, summary=summarise(data["rounds"], margin_ns(data.get("bench")), bases(data)))
    return markdown(data)


def write_markdown(json_path, text=None):
    """The .md beside a record: its title and render(record)."""
    if text is None:
        text = render(json.load(open(json_path)))
    with open(os.path.join(os.path.dirname(json_path), "loop_floor.md"), "w") as f:
        f.write("# The handoff's own cost to the loop (experiments/loop_floor.py)\n\n" + text + "\n")


def readme_body(json_path, doc=None):
    """The "loop-floor" block (experiments/lib/generated.py) from a record."""
    return "\n" + render(json.load(open(json_path))) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", help="the loop_floor binary (make build/micro/loop_floor builds it)")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--seconds", type=float, default=1.0, help="a configuration, a round")
    ap.add_argument("--seed", type=int, default=None, help="the shuffle's seed (default: from the clock)")
    ap.add_argument("--bench", default=BENCH, help="the recorded make bench to set the result beside")
    ap.add_argument("--placement", default=PLACEMENT,
                    help="the recorded placement run that says how many completions the server drains a pass")
    ap.add_argument("--out", default=os.path.join(ROOT, "experiments", "results", "loop-floor"))
    ap.add_argument("--readme", metavar="JSON", help="rewrite the generated block (handoffs/README.md) from this record")
    ap.add_argument("--markdown", metavar="JSON", help="rewrite the .md beside this record from it")
    ap.add_argument("--readme-path", action="append",
                    help="a Markdown file with the block (repeatable; default: where experiments/lib/generated.py puts it)")
    a = ap.parse_args()
    if a.markdown:
        write_markdown(a.markdown)
        return
    if a.readme:
        generated.write("loop-floor", a.readme, a.readme_path)
        return
    if not a.bin:
        ap.error("--bin or --readme is required")
    seed = a.seed if a.seed is not None else int(datetime.datetime.now().timestamp())
    rng = random.Random(seed)
    load, steal0 = os.getloadavg()[0], steal_jiffies()
    rounds = []
    for r in range(a.rounds):
        order = list(ROWS)
        rng.shuffle(order)
        rounds.append({key: run_one(a.bin, args, a.seconds) for key, _, args, _ in order})
        print(f"loop_floor.py: round {r + 1}/{a.rounds} done", file=sys.stderr)
    cpu = provenance.cpu_info()
    meta = {"command": f"python3 -m experiments.loop_floor --bin {a.bin} --rounds {a.rounds} --seconds {a.seconds}",
            "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "commit": provenance.short_commit(), "cpu_model": cpu["model"], "nproc": cpu["nproc"],
            "kernel": platform.release(), "rounds": a.rounds, "seconds": a.seconds, "seed": seed,
            "loadavg_before": load, "steal_pct": steal_pct(steal0, steal_jiffies())}
    bench = bench_loops(a.bench)
    data = {"meta": meta, "labels": {key: label for key, label, _, _ in ROWS},
            "args": {key: args for key, _, args, _ in ROWS}, "bases": {key: base for key, _, _, base in ROWS},
            "rounds": rounds,
            "summary": summarise(rounds, margin_ns(bench)), "bench": bench, "server": server_passes(a.placement)}
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "loop_floor.json")
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
    text = render(data)
    write_markdown(path, text)
    print(text)
    print(f"loop_floor.py: wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()

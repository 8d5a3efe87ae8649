"""Where the threads run: the loop's cost per request under each placement of
the loop, the pool thread and the client on two CPUs.

    python3 -m experiments.placement [--rounds 5] [--duration 3] [--conns 256] [--pipeline 16]
                                     [--only PLACEMENT]... [--out experiments/results/placement]
    python3 -m experiments.placement --show experiments/results/placement/placement.json
    python3 -m experiments.placement --readme experiments/results/placement/placement.json

make bench's loop goal compares the ring's loop with native-hello's at hello
-c256, pipelining depth 16. On two CPUs the ring's three busy threads (loop,
pool, wrk) cannot each have a core, while native-hello's two (loop, wrk) can.
This runs that cell for the ring (no flags) and for native-hello with each
thread pinned (sched_setaffinity via taskset, read back and recorded) to one
of the first two CPUs this process may use, and unpinned, in shuffled
interleaved rounds:

    ring    either CPU | loop+pool+wrk | loop+pool / wrk | loop / pool+wrk | loop+wrk / pool
    native  either CPU | loop+wrk      | loop / wrk

For each run: wrk's rate; the loop's and pool's µs of CPU per request (the
server's own clocks over the window, --stats-json); each thread's share of a
core (experiments/lib/threadcpu.py); the loop's writes and event-loop passes per
request (its counters); and the server threads' context switches and
migrations per thousand requests (/proc/PID/task/TID/status and sched, read at
the window's ends). Pinning the pool beside the loop takes away the line
transfers between their cores, but makes the two share one CPU's time; the
run shows what each placement costs, not which of those causes it.
--show prints the table from a record; --readme rewrites the docs' block and
--markdown the .md beside the record, both from the record alone."""
import argparse
import datetime
import json
import math
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from experiments import bench
from experiments.lib import generated
from experiments.lib.threadcpu import last_cpu

# name -> (server, {role: cpu index 0 or 1, or None for any of the two})
PLACEMENTS = {
    "ring: either CPU": ("ring", {"loop": None, "pool": None, "client": None}),
    "ring: loop+pool+wrk": ("ring", {"loop": 0, "pool": 0, "client": 0}),
    "ring: loop+pool / wrk": ("ring", {"loop": 0, "pool": 0, "client": 1}),
    "ring: loop / pool+wrk": ("ring", {"loop": 0, "pool": 1, "client": 1}),
    "ring: loop+wrk / pool": ("ring", {"loop": 0, "pool": 1, "client": 0}),
    "native: either CPU": ("native", {"loop": None, "client": None}),
    "native: loop / wrk": ("native", {"loop": 0, "client": 1}),
    "native: loop+wrk": ("native", {"loop": 0, "client": 0}),
}


def role_of(comm):
    """The role a thread plays, from its name: cserve names its threads, and
    experiments/lib/threadcpu.py reports wrk's under its command name."""
    if comm == "cserve-loop":
        return "loop"
    if comm.startswith("cserve-pool"):
        return "pool"
    return "client" if comm == "wrk" else None


def server_threads(pid):
    """{role: tid} of a cserve process's loop thread and its pool thread, if
    it has one; anything else (two loops, two pools) is not this experiment."""
    found, names = {}, []
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue  # the thread ended
        names.append(comm)
        role = role_of(comm)
        if role in ("loop", "pool"):
            found.setdefault(role, []).append(int(t))
    if len(found.get("loop", ())) != 1 or len(found.get("pool", ())) > 1:
        raise SystemExit(f"placement: expected one cserve-loop and at most one pool thread, found {sorted(names)}")
    return {role: tids[0] for role, tids in found.items()}


def sched_counts(tid):
    """The thread's voluntary and involuntary switches, and its migrations
    (None where the kernel has no /proc/.../sched)."""
    out = {}
    with open(f"/proc/{tid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
                out[k] = int(v)
    out["migrations"] = None
    try:
        with open(f"/proc/{tid}/sched") as f:
            for line in f:
                if line.startswith("se.nr_migrations"):
                    out["migrations"] = int(line.split(":")[1])
    except OSError:
        pass
    return out


def settle(tids, sets, timeout=10.0):
    """Wait until each thread has run on a CPU of its set. A thread asleep
    when pinned moves only as it next wakes, and that move would count as a
    migration in the window."""
    deadline = time.monotonic() + timeout
    while True:
        off = {role: cpu for role, cpu in ((r, last_cpu(t)) for r, t in tids.items()) if cpu not in sets[role]}
        if not off:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"placement: threads still off their CPUs after {timeout:.0f} s: {off}")
        time.sleep(0.01)


def pin(tid, cpus):
    os.sched_setaffinity(tid, cpus)
    got = sorted(os.sched_getaffinity(tid))
    if got != sorted(cpus):
        raise SystemExit(f"placement: thread {tid} has CPUs {got} after asking for {sorted(cpus)}")
    return got


def run_one(name, srv, cpus, a):
    kind, where = PLACEMENTS[name]
    both = cpus[:2]
    sets = {role: [both[i]] if i is not None else both for role, i in where.items()}
    tids = server_threads(srv.proc.pid)
    for role, tid in tids.items():
        pin(tid, sets[role])
    prefix = ["taskset", "-c", ",".join(map(str, sets["client"]))]
    marks, affinity = [], {}

    def window(client_pid):
        # Read afresh from the kernel, not taken from the pinning above.
        found = server_threads(srv.proc.pid)
        if not marks:
            settle(found, sets)  # wrk's load, under way, wakes them
        marks.append({role: sched_counts(tid) for role, tid in found.items()})
        if not affinity:  # where each thread may run, as the window opens
            affinity.update({role: sorted(os.sched_getaffinity(tid)) for role, tid in found.items()})
            affinity["client"] = sorted(os.sched_getaffinity(client_pid))
    rec = bench.run_cell(srv, a.conns, a.pipeline, a, client_prefix=prefix, window=window, keep_stats=True)
    st = rec.pop("stats", None)
    if not st:
        raise SystemExit(f"placement: {name}: the server wrote no stats for the window")
    h = rec.get("handoff") or {}
    loop_th = next(th for w in st.get("workers", []) for th in w.get("threads", []) if th.get("role") == "loop")
    c = loop_th.get("counters") or {}
    reqs = loop_th.get("requests") or 0
    # The server's own count for its window, which brackets the two marks.
    # A count the window cannot divide (no requests in it) is None, not left out.
    sched = {}
    if len(marks) == 2:
        for role in marks[0]:
            sched[role] = {k: (round(1000.0 * (marks[1][role][k] - marks[0][role][k]) / reqs, 3)
                               if reqs and marks[0][role][k] is not None and marks[1][role].get(k) is not None
                               else None)
                           for k in marks[0][role]}
    # Every role of the placement has a share: the sampler leaves out threads
    # under 1 % of a core (and all of them when wrk reported no rate), which
    # here reads as 0. A role's threads add up (wrk's main thread is "wrk" too).
    shares = dict.fromkeys(where, 0.0)
    for row in rec["threads"]:
        role = role_of(row["name"])
        if role in shares:
            shares[role] = round(shares[role] + row["median_pct"], 1)
    return {"placement": name, "server": kind, "rps": rec["rps"], "errors": rec["errors"],
            "loadavg": rec["loadavg"], "wrk_cmd": rec["wrk_cmd"], "affinity": affinity,
            "requests": reqs, "window_s": max((w.get("window_s") or 0) for w in st.get("workers", [])),
            "loop_us_per_req": loop_th.get("us_per_request"),
            "pool_us_per_req": h.get("pool_us_per_req") if "pool" in tids else None,
            "pct_of_core": shares, "sched_per_1k_requests": sched,
            "loop_writes_per_req": round(c.get("writes", 0) / reqs, 4) if reqs else None,
            "loop_passes_per_req": round(c.get("passes", 0) / reqs, 4) if reqs else None}


def median_spread(vals):
    """bench.median_spread as the record's dict, with how many values it had."""
    med, lo, hi = bench.median_spread(vals)
    return None if med is None else {"median": med, "min": lo, "max": hi, "n": sum(v is not None for v in vals)}


def summarise(records):
    out = []
    for name in PLACEMENTS:
        rs = [r for r in records if r["placement"] == name]
        if not rs:
            continue
        row = {"placement": name, "server": rs[0]["server"]}
        for k in ("rps", "loop_us_per_req", "pool_us_per_req", "loop_writes_per_req", "loop_passes_per_req"):
            row[k] = median_spread([r[k] for r in rs])
        for role in ("loop", "pool", "client"):
            row[f"{role}_pct"] = median_spread([r["pct_of_core"].get(role) for r in rs])
        for k in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches", "migrations"):
            row[k] = median_spread([(r["sched_per_1k_requests"].get("loop") or {}).get(k) for r in rs])
        out.append(row)
    return out


def fmt(ms, digits=2, scale=1.0, suffix=""):
    if not ms:
        return "—"
    f = f"{{:.{digits}f}}"
    return (f.format(ms["median"] * scale) + suffix + " (" + f.format(ms["min"] * scale) + "–"
            + f.format(ms["max"] * scale) + ")")


def table(summary):
    lines = ["| placement | rps | loop µs/req | pool µs/req | loop / pool / wrk % of a core "
             "| loop writes /req | loop passes /req | loop sleeps /1k req | loop preempted /1k req "
             "| loop migrations /1k req |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in summary:
        pct = " / ".join(f"{r[f'{role}_pct']['median']:.0f}" if r[f"{role}_pct"] else "—"
                         for role in ("loop", "pool", "client"))
        lines.append(f"| {r['placement']} | {fmt(r['rps'], 1, 1e-3, 'k')} | {fmt(r['loop_us_per_req'])} "
                     f"| {fmt(r['pool_us_per_req'])} | {pct} | {fmt(r['loop_writes_per_req'], 3)} "
                     f"| {fmt(r['loop_passes_per_req'], 4)} | {fmt(r['voluntary_ctxt_switches'], 1)} "
                     f"| {fmt(r['nonvoluntary_ctxt_switches'], 1)} | {fmt(r['migrations'], 2)} |")
    return lines


def describe(data, json_path):
    m, args = data["meta"], data["meta"]["args"]
    cpus = ",".join(map(str, m["cpus"]))
    mc = m["machine"]
    machine = (f"{mc['cpu_model']}, {mc['nproc']} CPUs, kernel {mc['kernel']}; Python {mc['python']}, "
               f"{mc['wrk']}; commit {mc['commit']} (`{mc['cserve']}`); load average "
               f"{m['loadavg_min']}–{m['loadavg_max']} (1 min), steal {m['steal_pct']} % of CPU time")
    return (f"`{m['command']}`, {m['time']} ({os.path.relpath(json_path, ROOT)}). Machine: {machine}. "
            f"hello, `wrk -t1 -c{args.get('conns', 256)}`, pipelining depth {args['pipeline']}; "
            f"{args['rounds']} interleaved rounds, shuffled, {args['warmup']}+{args['duration']} s a run; "
            f"CPUs {cpus}, the servers started confined to them. Median (min–max). \"a / b\": the threads before the slash share one of the "
            "two CPUs, those after it the other; \"either CPU\": each thread may run on both. Writes and "
            "passes are the loop's own counters; sleeps, preemptions and migrations the loop thread's "
            "voluntary and involuntary context switches and its moves between CPUs, per thousand of its "
            "requests in the server's window.")


def write_markdown(json_path):
    """The .md beside a record: its description and table."""
    with open(json_path) as f:
        data = json.load(f)
    with open(os.path.splitext(json_path)[0] + ".md", "w") as f:
        f.write("# The loop's cost per request by thread placement (experiments/placement.py)\n\n"
                + describe(data, json_path) + "\n\n" + "\n".join(table(data["summary"])) + "\n")


def readme_body(json_path, doc=None):
    """The "placement" block (experiments/lib/generated.py) from a record."""
    with open(json_path) as f:
        data = json.load(f)
    return "\n".join(["", describe(data, json_path), ""] + table(data["summary"]) + [""])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=float, default=0.5)
    ap.add_argument("--duration", type=float, default=3.0)  # with the warm-up, 0.5 s before wrk ends
    ap.add_argument("--pipeline", type=int, default=16)  # 1: none
    ap.add_argument("--conns", type=int, default=256)
    ap.add_argument("--cserve", default=os.path.join(ROOT, "cserve"))
    ap.add_argument("--only", action="append", choices=list(PLACEMENTS), help="run only these placements")
    ap.add_argument("--out", default=os.path.join(ROOT, "experiments", "results", "placement"))
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--show", metavar="JSON", help="print the table of a recorded run")
    ap.add_argument("--readme", metavar="JSON", help="only rewrite the placement block (docs/results.md)")
    ap.add_argument("--markdown", metavar="JSON", help="only rewrite the .md beside a recorded JSON")
    a = ap.parse_args()
    if a.markdown:
        write_markdown(a.markdown)
        return
    if a.show or a.readme:
        path = a.show or a.readme
        if a.readme:
            generated.write("placement", path)
        else:
            with open(path) as f:
                data = json.load(f)
            print(describe(data, path) + "\n\n" + "\n".join(table(data["summary"])))
        return
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("placement: needs two CPUs it may run on")
    # run_cell asks cserve for its window while wrk still runs: wrk's whole
    # seconds must leave room after the window (bench.run_cell).
    if math.ceil(a.warmup + a.duration) - (a.warmup + a.duration) < 0.25:
        raise SystemExit("placement: warmup + duration must end at least 0.25 s before a whole second "
                         "(wrk runs for whole seconds, and the window must close before it stops)")
    names = a.only or list(PLACEMENTS)
    tmp = tempfile.mkdtemp(prefix="cserve-placement-")
    servers = {}
    meta = {"time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": shlex.join(["python3", "-m", "experiments.placement"] + sys.argv[1:]),
            "machine": bench.machine(a.cserve), "cpus": cpus[:2], "args": vars(a)}
    steal0 = bench.steal_jiffies()
    rng = random.Random(a.seed)
    records = []
    try:
        for kind in sorted({PLACEMENTS[n][0] for n in names}):
            # Confined from the start to the two CPUs: the ring decides at
            # start-up whether a core is spare for spinning (spin_policy.h).
            confine = ["taskset", "-c", ",".join(map(str, cpus[:2]))]
            servers[kind] = bench.Server(kind, "hello", confine + bench.cserve_cmd(a.cserve, kind, "hello"),
                                         "cserve", tmp)
        for rnd in range(a.rounds):
            order = names[:]
            rng.shuffle(order)
            for i, name in enumerate(order):
                rec = run_one(name, servers[PLACEMENTS[name][0]], cpus, a)
                rec["round"] = rnd
                records.append(rec)
                print(f"round {rnd + 1}/{a.rounds} [{i + 1}/{len(order)}] {name:<24} {rec['rps'] or 0:>10.0f} rps "
                      f"loop {rec['loop_us_per_req']} us/req", flush=True)
    finally:
        for srv in servers.values():
            srv.stop()
    steal1 = bench.steal_jiffies()
    meta["steal_pct"] = bench.steal_pct(steal0, steal1)
    loads = [r["loadavg"] for r in records]
    meta["loadavg_min"], meta["loadavg_max"] = min(loads), max(loads)
    summary = summarise(records)
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "placement.json")
    data = {"meta": meta, "records": records, "summary": summary}
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
    write_markdown(path)
    print("\n".join(table(summary)))


if __name__ == "__main__":
    main()

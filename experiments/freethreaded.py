"""The GIL build, the free-threaded build and Granian on the free-threaded
CPython, side by side in one run: does the pool stage scale with
--blocking-threads once the GIL is gone, what does free-threading cost one
thread, which stage binds, and one process of N threads against N processes
of one thread.

    /usr/bin/python3 -m experiments.freethreaded              # the full run: 3 rounds, ~13 min on 2 vCPUs
    /usr/bin/python3 -m experiments.freethreaded --quick      # 1 round, short windows: a smoke run (~2 min)
    /usr/bin/python3 -m experiments.freethreaded --readme     # rewrite the docs' block from the record
    /usr/bin/python3 -m experiments.freethreaded --markdown   # rewrite the .md beside the record

Servers: ./cserve (`make all`, the GIL CPython it embeds), build-ft/cserve
(`make BUILD=build-ft PYTHON=/opt/cserve-py313t/bin/python3.13t`, the
free-threaded CPython of scripts/build-freethreaded-python.sh), the same
binary with PYTHON_GIL=1 (the free-threaded interpreter with its GIL back
on: what free-threading costs a thread apart from the version and build of
CPython), and Granian installed into a venv of that python3.13t
(build-ft/granian-venv; made here if missing; without it the run goes on
and the record says so). Both binaries are made (a no-op when up to date).

Matrix: {GIL cserve, free-threaded cserve, Granian 3.13t} x {cpu, hello} x
{not pipelined (wrk -c64), pipelined (depth 16, -c16)} x {1, 2, 4 threads}.
cpu is apps/cpu.py with a fixed number of loop iterations per request
(`?n=`, the same work on both interpreters, not the same time). cserve's
threads are --blocking-threads (ring handoff, one worker); Granian's are its
--blocking-threads, with --workers 1 and --runtime-threads 1 (one I/O
thread, as cserve has one loop). Plus, on cpu not pipelined, the
free-threaded cserve as N processes of one thread (--workers N
--blocking-threads 1) against its row of one process of N threads.

Per run: the server starts, wrk runs warm-up + window + margin; in the
window the threads of the server (its child processes too) and of wrk are
sampled from /proc (threadcpu), /proc/stat gives the machine's busy and
stolen cores, and the RSS of the server's processes is summed at the
window's end. Roles by thread name: cserve-loop is the loop, cserve-pool-*
the pool; Granian's tokio-rt-worker threads are its loop, its other busy
threads (those running Python) its pool. A stage binds when it uses >= 90 %
of a core: the loop (its busiest thread), the pool (its threads' sum over
what they can use at once: one core with a GIL, one core per thread
without), the client; else the machine when >= 1.9 cores are busy; else
the run is unsaturated. A loop that binds with a pool behind it is the
loop-bound regime the handoff exists for.

Rounds run the whole matrix, each in an order rotated from the last. A run
that lost more than 0.05 core to steal is run again, up to 3 times, then
kept and marked. Every attempt goes into the JSONL; the table gives median
(min-max) over the kept runs."""
import datetime
import json
import math
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

from experiments.lib import entry, generated, provenance
from experiments.lib.serverctl import (client_cmd, free_port, load_window, read_stats, server_cmd, start,
                                       stop, threadcpu, wait_ready)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"
FT_PYTHON = "/opt/cserve-py313t/bin/python3.13t"
FT_BINARY = "build-ft/cserve"
GRANIAN_VENV = os.path.join(ROOT, "build-ft", "granian-venv")
OUT = os.path.join(ROOT, "experiments", "results", "freethreaded")
QUICK_OUT = os.path.join(ROOT, "experiments", "results", "tmp", "freethreaded")
RECORD = os.path.join(OUT, "freethreaded.jsonl")

CPU_ITERATIONS = 600        # apps/cpu.py loop iterations per request
THREADS = (1, 2, 4)
PROCESSES = (2, 4)
STEAL_LIMIT = 0.05          # cores
RERUNS = 3
STAGE_BOUND, MACHINE_BOUND = 90.0, 1.9

BUILDS = {  # name -> how the table names it
    "gil": "cserve, GIL",
    "ft": "cserve, free-threaded",
    "ft-gil": "cserve, free-threaded, PYTHON_GIL=1",
    "granian": "Granian, free-threaded",
}


# ------------------------------------------------------------------ the plan

def config(build, app, pipelined, bt, workers=1):
    """One configuration, in serverctl's terms plus this experiment's keys."""
    r = {"build": build, "bt": bt, "workers": workers, "pipelined": pipelined,
         "app": f"cpun{CPU_ITERATIONS}" if app == "cpu" else "hello", "app_name": app,
         "client": "wrk-p16" if pipelined else "wrk", "conns": 16 if pipelined else 64}
    if build == "granian":
        r.update(server="granian", python=os.path.join(GRANIAN_VENV, "bin", "python"))
    else:
        r.update(server="cserve", handoff="ring")
        if build != "gil":
            r["binary"] = FT_BINARY
        if build == "ft-gil":
            r["env"] = {"PYTHON_GIL": "1"}
        if workers > 1:
            r["args"] = ["--workers", str(workers)]
    return r


def label(r):
    return f"{r['build']} {r['app_name']} {'p16' if r['pipelined'] else 'p1'} {r['workers']}x{r['bt']}"


def plan(granian=True):
    """Every configuration of one round, in the table's order."""
    rows = []
    for build in ("gil", "ft") + (("granian",) if granian else ()):
        for app in ("cpu", "hello"):
            for pipelined in (False, True):
                rows += [config(build, app, pipelined, bt) for bt in THREADS]
    rows.append(config("ft-gil", "cpu", False, 1))
    rows += [config("ft", "cpu", False, 1, workers=n) for n in PROCESSES]
    return rows


def rounds_order(rows, rounds):
    """[(round, config)]: every round runs all of rows, each starting where
    the last one's rotation left off (so no configuration always runs first,
    or right after the same neighbour's warm-up)."""
    out = []
    for rnd in range(rounds):
        k = (rnd * len(rows)) // max(1, rounds)
        out += [(rnd, r) for r in rows[k:] + rows[:k]]
    return out


# ------------------------------------------------------------------ a run

def rss_kib(pid):
    """VmRSS summed over pid and its descendant processes (KiB)."""
    total = 0
    for p in threadcpu.descendants(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def role(r, t, runtime_tids):
    """The stage a server thread belongs to. cserve names its threads.
    Granian's first tokio-rt-worker of a process (the lowest tid) is its
    runtime, the I/O thread; its blocking threads, which run Python, are
    named "python" or, past the first, tokio-rt-worker too."""
    comm = t["name"]
    if r["server"] == "cserve":
        if comm.startswith("cserve-loop"):
            return "loop"
        return "pool" if comm.startswith("cserve-pool") else "other"
    return "loop" if t["tid"] in runtime_tids else "pool"


def shares(r, rows, client_pid):
    """Per-thread share of a core over the window (mean %), by role."""
    out = {"loop": [], "pool": [], "other": [], "client": []}
    first = {}
    for t in rows:
        if t["name"].startswith("tokio"):
            first[t["pid"]] = min(first.get(t["pid"], t["tid"]), t["tid"])
    runtime_tids = set(first.values())
    for t in rows:
        key = "client" if t["pid"] == client_pid else role(r, t, runtime_tids)
        out[key].append({"name": t["name"], "pid": t["pid"], "pct": t["mean_pct"]})
    for v in out.values():
        v.sort(key=lambda t: -t["pct"])
    return out


def gil_on(r):
    return r["build"] in ("gil", "ft-gil")


def stage_pcts(r, sh):
    """(loop, pool, client) as % of what each stage can use: the busiest loop
    thread; per process, the pool threads' sum over the cores they can use
    at once (one with a GIL), the busiest process's; the client."""
    loop = max((t["pct"] for t in sh["loop"]), default=0.0)
    per_proc = {}
    for t in sh["pool"]:
        per_proc[t["pid"]] = per_proc.get(t["pid"], 0.0) + t["pct"]
    cap = 1 if gil_on(r) else r["bt"]
    pool = max(per_proc.values(), default=0.0) / cap
    client = max((t["pct"] for t in sh["client"]), default=0.0)
    return round(loop, 1), round(pool, 1), round(client, 1)


def binds(loop, pool, client, busy_cores):
    """Which stage binds: a stage at >= 90 % of what it can use, else the
    machine (>= 1.9 cores busy), else none."""
    if loop is not None and loop >= STAGE_BOUND:
        return "loop"
    if pool is not None and pool >= STAGE_BOUND:
        return "pool"
    if client is not None and client >= STAGE_BOUND:
        return "client"
    if busy_cores is not None and busy_cores >= MACHINE_BOUND:
        return "machine"
    return "unsaturated"


def run_one(r, a, tmp):
    port = free_port()
    stats_file = os.path.join(tmp, "stats.json")
    cserve = r["server"] == "cserve"
    cmd = server_cmd(r, port, stats_file if cserve else None)
    proc, log = start(cmd, os.path.join(tmp, "server.log"), env_extra=r.get("env"))
    rec = {"kind": "run", "label": label(r), "config": r,
           "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "server_cmd": shlex.join(cmd)}
    try:
        if not wait_ready(proc, port, listeners=r["workers"] if cserve else 1):
            log.seek(0)
            rec["error"] = "server did not start: " + log.read()[-1500:]
            return rec
        time.sleep(0.3)  # threads named, pools and workers started
        total = a.warmup + a.duration + a.margin
        wrk = client_cmd(r, port, total)
        rec["wrk_cmd"] = shlex.join(wrk)
        wp = subprocess.Popen(wrk, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        series, rec["window_cpu"], mtime = load_window(proc, wp, a.warmup, a.duration, a.duration / 4, True,
                                                       stats_file if cserve else None)
        rec["rss_kib"] = rss_kib(proc.pid)
        rec["processes"] = len(threadcpu.descendants(proc.pid))
        out, _ = wp.communicate(timeout=total + 30)
        n, secs, rps = threadcpu.parse_wrk(out)
        rec.update(rps=rps, wrk_requests=n, errors="Socket errors" in out or "Non-2xx" in out)
        rows = threadcpu.summarise(series, rps, min_pct=1.0)
        rec["threads"] = rows
        sh = shares(r, rows, wp.pid)
        rec["shares"] = sh
        loop, pool, client = stage_pcts(r, sh)
        busy = (rec["window_cpu"] or {}).get("busy_cores")
        rec.update(loop_pct=loop, pool_stage_pct=pool, client_pct=client,
                   pool_us_per_req=round(sum(t["pct"] for t in sh["pool"]) / 100 / rps * 1e6, 2) if rps else None,
                   binds=binds(loop, pool, client, busy))
        if cserve:
            st = read_stats(stats_file, mtime)
            rec["stats_threads"] = [{k: th.get(k) for k in ("name", "role", "cpu_s", "utilisation", "requests",
                                                             "us_per_request")} | {"worker": w.get("worker")}
                                    for w in (st or {}).get("workers", []) for th in w.get("threads", [])]
        if not n:
            rec["error"] = "client reported no requests: " + out[-500:]
    except Exception as e:  # record the failure, keep going
        rec["error"] = f"{type(e).__name__}: {e}"
    finally:
        rec["server_exit"] = stop(proc)
        log.seek(0)
        text = log.read()
        log.close()
        m = re.search(r"apps/cpu\.py: ([\d.]+) iterations per µs", text)
        rec["cpu_iterations_per_us"] = float(m.group(1)) if m else None
        if "error" in rec:
            rec["server_log_tail"] = text[-1500:]
    return rec


# ------------------------------------------------------------------ builds

def sh_out(cmd):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        return (p.stdout + p.stderr).strip()
    except (OSError, subprocess.TimeoutExpired):
        return None


def prepare(log_path):
    """Make both binaries and Granian's venv; (granian_version or None, why not)."""
    if not os.access(FT_PYTHON, os.X_OK):
        raise SystemExit(f"freethreaded: no {FT_PYTHON}; build it with scripts/build-freethreaded-python.sh")
    with open(log_path, "w") as log:
        for make in (["make", "-j2", "all"],
                     ["make", "-j2", "BUILD=build-ft", f"PYTHON={FT_PYTHON}", FT_BINARY]):
            print("freethreaded: " + shlex.join(make), file=sys.stderr, flush=True)
            if subprocess.run(make, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT).returncode:
                raise SystemExit(f"freethreaded: {shlex.join(make)} failed; see {log_path}")
        py = os.path.join(GRANIAN_VENV, "bin", "python")
        if not os.access(py, os.X_OK):
            print(f"freethreaded: making {os.path.relpath(GRANIAN_VENV, ROOT)}", file=sys.stderr, flush=True)
            subprocess.run([FT_PYTHON, "-m", "venv", GRANIAN_VENV], stdout=log, stderr=subprocess.STDOUT)
        if subprocess.run([py, "-c", "import granian"], capture_output=True).returncode:
            # Only a wheel: the newest release may have none for cp313t, and
            # its source build needs a Rust toolchain.
            subprocess.run([py, "-m", "pip", "install", "--only-binary", "granian", "granian"],
                           stdout=log, stderr=subprocess.STDOUT)
    v = sh_out([os.path.join(GRANIAN_VENV, "bin", "python"), "-c", "import granian; print(granian.__version__)"])
    if v and re.fullmatch(r"[\w.+-]+", v):
        return v, None
    return None, f"Granian could not be installed into a venv of {FT_PYTHON} (see {log_path})"


def meta_record(a, granian, why_not):
    sha, dirty = provenance.git_commit()
    cpu = provenance.cpu_info()
    return {"kind": "meta", "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": shlex.join(["/usr/bin/python3", "-m", "experiments.freethreaded"] + sys.argv[1:]),
            "commit": sha[:12] + ("-dirty" if dirty else ""), "quick": a.quick, "rounds": a.rounds,
            "durations": {"warmup": a.warmup, "window": a.duration, "margin": a.margin},
            "cpu_iterations": CPU_ITERATIONS,
            "machine": {"host": platform.node(), "cpu_model": cpu["model"], "nproc": cpu["nproc"],
                        "kernel": platform.release()},
            "versions": {"gil": sh_out([os.path.join(ROOT, "cserve"), "--version"]),
                         "ft": sh_out([os.path.join(ROOT, FT_BINARY), "--version"]),
                         "granian": granian, "wrk": (sh_out(["wrk", "-v"]) or "").split("\n")[0][:60]},
            "granian_missing": why_not}


# ------------------------------------------------------------------ summary

def load(path):
    meta, runs = None, []
    with open(path) as f:
        for line in f:
            if line.strip():
                rec = json.loads(line)
                if rec["kind"] == "meta":
                    meta = rec
                else:
                    runs.append(rec)
    return meta, runs


def spread(vals):
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def summarise(runs):
    """{label: row} over the kept runs (not superseded, no error)."""
    groups = {}
    for r in runs:
        if not r.get("superseded") and "error" not in r:
            groups.setdefault(r["label"], []).append(r)
    out = {}
    for lab, rs in groups.items():
        c = rs[0]["config"]
        npool = max(len(r["shares"]["pool"]) for r in rs)
        row = {"label": lab, "config": c, "runs": len(rs), "stolen": sum(bool(r.get("stolen")) for r in rs),
               "rps": spread([r["rps"] for r in rs]),
               "loop": spread([r["loop_pct"] for r in rs]), "pool_stage": spread([r["pool_stage_pct"] for r in rs]),
               "client": spread([r["client_pct"] for r in rs]),
               # the i-th busiest pool thread's share, median over the runs
               "pool_threads": [statistics.median([r["shares"]["pool"][i]["pct"] if i < len(r["shares"]["pool"])
                                                   else 0.0 for r in rs]) for i in range(npool)],
               "pool_us_per_req": spread([r.get("pool_us_per_req") for r in rs]),
               "busy": spread([(r.get("window_cpu") or {}).get("busy_cores") for r in rs]),
               "steal": spread([(r.get("window_cpu") or {}).get("steal_cores") for r in rs]),
               "foreign": spread([(r.get("window_cpu") or {}).get("foreign_cores") for r in rs]),
               "rss_mib": spread([r["rss_kib"] / 1024 for r in rs if r.get("rss_kib")]),
               "processes": rs[0].get("processes")}
        med = lambda k: (row[k] or {}).get("median")  # noqa: E731
        row["binds"] = binds(med("loop"), med("pool_stage"), med("client"), med("busy"))
        out[lab] = row
    return out


def fmt(s, digits=0, scale=1.0, suffix=""):
    if not s:
        return "—"
    f = f"{{:,.{digits}f}}"
    one = f.format(s["median"] * scale) + suffix
    if s["n"] < 2:
        return one
    return f"{one} ({f.format(s['min'] * scale)}–{f.format(s['max'] * scale)})"


def bind_text(row):
    b = row["binds"]
    return "loop, a handoff behind it" if b == "loop" else b


def rate_table(summ):
    L = ["| server | app | client | threads | requests/s | loop % | pool threads % | pool stage % "
         "| client % | busy cores | steal cores | RSS MiB | binds |",
         "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for lab, row in summ.items():
        c = row["config"]
        if c["workers"] > 1:
            continue
        pool = " / ".join(f"{p:.0f}" for p in row["pool_threads"]) or "—"
        mark = " (stolen)" if row["stolen"] else ""
        L.append(f"| {BUILDS[c['build']]} | {c['app_name']} | {'pipelined' if c['pipelined'] else 'not pipelined'} "
                 f"| {c['bt']} | {fmt(row['rps'])}{mark} | {fmt(row['loop'])} | {pool} | {fmt(row['pool_stage'])} "
                 f"| {fmt(row['client'])} | {fmt(row['busy'], 2)} | {fmt(row['steal'], 2)} "
                 f"| {fmt(row['rss_mib'], 1)} | {bind_text(row)} |")
    return L


def layout_table(summ):
    L = ["| free-threaded cserve, cpu | processes × threads | requests/s | RSS MiB (all processes) | binds |",
         "|---|---:|---:|---:|---|"]
    for n in PROCESSES:
        for w, bt in ((1, n), (n, 1)):
            row = summ.get(f"ft cpu p1 {w}x{bt}")
            if row:
                L.append(f"| {'one process' if w == 1 else 'processes'} | {w} × {bt} | {fmt(row['rps'])} "
                         f"| {fmt(row['rss_mib'], 1)} | {bind_text(row)} |")
    return L


def ratio(summ, a, b, key="rps"):
    ra, rb = summ.get(a), summ.get(b)
    if not ra or not rb or not ra.get(key) or not rb.get(key) or not rb[key]["median"]:
        return None
    return ra[key]["median"] / rb[key]["median"]


def findings(summ):
    """Sentences computed from the summary: the numbers the docs' prose points to."""
    out = []

    def x(v):
        return "—" if v is None else f"{v:.2f}×"
    for build in ("gil", "ft", "granian"):
        if f"{build} cpu p1 1x1" in summ:
            out.append(f"Pool scaling, {BUILDS[build]}, cpu not pipelined: 2 threads {x(ratio(summ, f'{build} cpu p1 1x2', f'{build} cpu p1 1x1'))}, "
                       f"4 threads {x(ratio(summ, f'{build} cpu p1 1x4', f'{build} cpu p1 1x1'))} the rate of 1.")
    for app in ("cpu", "hello"):
        for p in ("p1", "p16"):
            r = ratio(summ, f"ft {app} {p} 1x1", f"gil {app} {p} 1x1")
            if r is not None:
                out.append(f"One thread, free-threaded / GIL build, {app} {'pipelined' if p == 'p16' else 'not pipelined'}: "
                           f"{x(r)} the rate.")
    pu = ratio(summ, "ft cpu p1 1x1", "gil cpu p1 1x1", key="pool_us_per_req")
    if pu is not None:
        out.append(f"The pool's CPU per cpu request, free-threaded / GIL build: {x(pu)}.")
    r = ratio(summ, "ft cpu p1 1x1", "ft-gil cpu p1 1x1")
    if r is not None:
        out.append(f"One thread, free-threaded build without / with its GIL (PYTHON_GIL=1), cpu: {x(r)} the rate.")
    for n in PROCESSES:
        rr = ratio(summ, f"ft cpu p1 {n}x1", f"ft cpu p1 1x{n}")
        rm = ratio(summ, f"ft cpu p1 {n}x1", f"ft cpu p1 1x{n}", key="rss_mib")
        if rr is not None:
            out.append(f"{n} processes × 1 thread against 1 process × {n} threads (free-threaded, cpu): "
                       f"{x(rr)} the rate, {x(rm)} the RSS.")
    foreign = [row["foreign"]["median"] for row in summ.values() if row.get("foreign")]
    if foreign:
        out.append(f"CPU of other processes on the machine during the windows (busy cores less the server's "
                   f"and the client's): median over the rows {statistics.median(foreign):.2f}, at most "
                   f"{max(foreign):.2f} cores.")
    seed = [lab for lab, row in summ.items() if row["binds"] == "loop"]
    out.append("Loop-bound with a handoff behind it: " + (", ".join(f"`{s}`" for s in seed) if seed else "no row") + ".")
    return out


def describe(meta, path):
    m, d = meta["machine"], meta["durations"]
    v = meta["versions"]
    s = (f"`{meta['command']}`, {meta['time']} ({os.path.relpath(path, ROOT)}). Machine: {m['cpu_model']}, "
         f"{m['nproc']} CPUs, kernel {m['kernel']}; commit {meta['commit']}. GIL build: `{v['gil']}`; "
         f"free-threaded build: `{v['ft']}`; Granian {v['granian'] or 'not run'}; {v['wrk']}. "
         f"{meta['rounds']} round(s), order rotated each round; {d['warmup']} s warm-up, {d['window']} s window "
         f"per run. cpu: apps/cpu.py, {meta['cpu_iterations']} loop iterations a request; not pipelined: "
         "wrk -c64; pipelined: depth 16, -c16. Median (min–max) over the rounds. % are of one core over the "
         "window (/proc): loop = the busiest loop thread (Granian: its tokio runtime threads), pool threads = "
         "each thread that runs Python, busiest first; pool stage = their sum over the cores they can use at "
         "once (one with a GIL); busy and steal cores from /proc/stat. binds: a stage at ≥ 90 %, else the "
         "machine at ≥ 1.9 busy cores, else unsaturated. Granian's threads are its --blocking-threads, with "
         "--workers 1 and --runtime-threads 1.")
    if meta.get("quick"):
        s += " **A --quick smoke run: one short round, not a measurement.**"
    if meta.get("granian_missing"):
        s += f" No Granian rows: {meta['granian_missing']}."
    return s


def block(path):
    meta, runs = load(path)
    summ = summarise(runs)
    stolen = sum(bool(r.get("stolen")) for r in runs if not r.get("superseded"))
    L = [describe(meta, path), ""] + rate_table(summ) + ["", "One process of N threads against N processes "
                                                         "of one thread (`--workers N --blocking-threads 1`):",
                                                         ""] + layout_table(summ)
    L += ["", "Findings, from the table:", ""] + [f"- {s}" for s in findings(summ)]
    if stolen:
        L += [f"- {stolen} run(s) lost more than {STEAL_LIMIT} core to steal after {RERUNS} reruns, kept and "
              "marked (stolen)."]
    return L


def write_markdown(path):
    with open(os.path.splitext(path)[0] + ".md", "w") as f:
        f.write("# GIL and free-threaded CPython side by side (experiments/freethreaded.py)\n\n"
                + "\n".join(block(path)) + "\n")


def readme_body(path, doc=None):
    """The "freethreaded" block (experiments/lib/generated.py) from a record."""
    return "\n".join([""] + block(path) + [""])


# ------------------------------------------------------------------ main

FULL, QUICK = (3, 3.0, 1.0), (1, 1.0, 0.5)   # rounds, window s, warm-up s


def main():
    ap = entry.parser(__doc__, None, FULL, QUICK, "one round, short windows: a smoke run")
    ap.add_argument("--allow-dirty", action="store_true", help="a full run on a dirty tree (its commit says so)")
    ap.add_argument("--readme", nargs="?", const=RECORD, metavar="JSONL",
                    help="only rewrite the docs' block from a record")
    ap.add_argument("--markdown", nargs="?", const=RECORD, metavar="JSONL", help="only rewrite the record's .md")
    a = ap.parse_args()
    if a.readme:
        generated.write("freethreaded", a.readme)
        return 0
    if a.markdown:
        write_markdown(a.markdown)
        return 0
    entry.resolve(a)
    # wrk runs whole seconds: the margin makes the total one, and leaves the
    # load on while the stats window is written.
    total = a.warmup + a.duration
    a.margin = math.ceil(total + 0.5) - total
    out_dir = a.out or (QUICK_OUT if a.quick else OUT)
    _, dirty = provenance.git_commit()
    if dirty and not a.quick and not a.allow_dirty:
        raise SystemExit("freethreaded: the tree is dirty; a full run records one clean commit "
                         "(commit first, or pass --allow-dirty)")
    os.makedirs(out_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="cserve-ft-")
    granian, why_not = prepare(os.path.join(tmp, "build.log"))
    if why_not:
        print(f"freethreaded: {why_not}; running without Granian", file=sys.stderr)
    meta = meta_record(a, granian, why_not)
    order = rounds_order(plan(granian is not None), a.rounds)
    per = a.warmup + a.duration + a.margin + 1.2
    print(f"freethreaded: {len(order)} runs, ~{len(order) * per / 60:.1f} min (plus reruns); "
          f"results in {os.path.relpath(out_dir, ROOT)}", file=sys.stderr, flush=True)
    path = os.path.join(out_dir, "freethreaded.jsonl")
    failures = 0
    with open(path, "w") as f:
        f.write(json.dumps(meta) + "\n")
        for i, (rnd, r) in enumerate(order, 1):
            for attempt in range(RERUNS + 1):
                rec = run_one(r, a, tmp)
                rec.update(round=rnd, attempt=attempt)
                steal = (rec.get("window_cpu") or {}).get("steal_cores") or 0.0
                stolen = "error" not in rec and steal > STEAL_LIMIT
                if stolen and attempt < RERUNS:
                    rec["superseded"] = True  # run again; this one stays in the record
                elif stolen:
                    rec["stolen"] = True
                f.write(json.dumps(rec) + "\n")
                f.flush()
                if not rec.get("superseded"):
                    break
            failures += "error" in rec
            print(f"[{i}/{len(order)}] r{rnd} {rec['label']:<24} " + (
                f"ERROR {rec['error'][:160]}" if "error" in rec else
                f"{rec['rps'] or 0:>9,.0f} rps  loop {rec['loop_pct']:.0f}%  pool {rec['pool_stage_pct']:.0f}%  "
                f"wrk {rec['client_pct']:.0f}%  busy {rec['window_cpu']['busy_cores']:.2f}  steal {steal:.2f}  "
                f"RSS {rec['rss_kib'] / 1024:.0f} MiB  -> {rec['binds']}"
                + (" (stolen)" if rec.get("stolen") else "") + (f" [{attempt} reruns]" if attempt else "")),
                file=sys.stderr, flush=True)
    write_markdown(path)
    print("\n".join(block(path)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

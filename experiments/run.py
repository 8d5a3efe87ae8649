#!/usr/bin/python3
"""The sweep harness: start a server, load it with wrk, read its per-thread
CPU from inside (cserve --stats-json) and outside (scripts/threadcpu.py), and
append one JSON line per run to experiments/results/<sweep>.jsonl.

    experiments/run.py                      # every sweep, full length (~15-25 min here)
    experiments/run.py --quick              # smoke: a few rows, 2 s each (~1 min)
    experiments/run.py --sweep connections --sweep peers --duration 15
    experiments/run.py --list               # print the runs without running them

Per run: the server starts (optionally under `taskset -c SERVER_CPUS`), its
threads may be pinned one by one (--pin cserve-loop=0,cserve-pool-0=1), then
`wrk -t1 -cC -d(W+D+M)s --latency` runs (optionally under `taskset -c
WRK_CPUS`). After W seconds of warm-up the harness sends SIGUSR2 (cserve
starts a new stats window) and samples /proc per thread for D seconds; then
SIGUSR1 makes cserve write the window's stats, while wrk is still loading it
(M seconds of margin), so the window holds steady state only. rps is the
window's (cserve: loop requests / window_s) and wrk's whole-run rate.

Machine: 2-core KVM guests here; wrk, the loop and the pool are three busy
threads on two cores, so every record carries its placement, and report.py
also gives the pipeline model's dedicated-core prediction 1/max(c_loop, c_pool).
"""
import argparse
import datetime
import json
import os
import platform
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import threadcpu  # noqa: E402

PY = "/usr/bin/python3"  # the interpreter cserve embeds; peers run on it too
CSERVE = os.environ.get("CSERVE_BIN", os.path.join(ROOT, "cserve"))

# app name -> (cserve --chdir, module:callable, URL path)
APPS = {
    "hello": (None, None, "/"),
    "cpu5": ("apps", "cpu:application", "/?us=5"),
    "cpu20": ("apps", "cpu:application", "/?us=20"),
    "cpu100": ("apps", "cpu:application", "/?us=100"),
    "gil-sleep200": ("apps", "gil_release:application", "/?us=200&mode=sleep"),
    "gil-hash50": ("apps", "gil_release:application", "/?us=50&mode=hash"),
    "flask": ("apps", "flask_hello:application", "/"),
    "django": ("apps/django_hello", "djhello.wsgi:application", "/"),
}


def app_for_peer(app):
    d, spec, path = APPS[app]
    return (d or "apps"), (spec or "hello:application"), path


def server_cmd(run, port, stats_file):
    s, app = run["server"], run["app"]
    if s == "cserve":
        d, spec, _ = APPS[app]
        binary = os.path.join(ROOT, run["binary"]) if run.get("binary") else CSERVE
        cmd = [binary, "--bind", f"127.0.0.1:{port}", "--stats-json", stats_file]
        cmd += run.get("args", [])
        if run.get("mode") == "inline":
            cmd.append("--inline")
        elif run.get("mode") == "native":
            cmd += ["--app", "native-hello"]
        else:
            cmd += ["--handoff", run["handoff"], "--blocking-threads", str(run.get("bt", 1))]
        if spec and run.get("mode") != "native":
            cmd += ["--chdir", os.path.join(ROOT, d), spec]
        return cmd
    d, spec, _ = app_for_peer(app)
    wd = os.path.join(ROOT, d)
    if s == "granian":
        return [PY, "-m", "granian", "--interface", "wsgi", "--workers", "1", "--blocking-threads", "1",
                "--runtime-threads", "1", "--no-ws", "--log-level", "warning", "--host", "127.0.0.1",
                "--port", str(port), "--working-dir", wd, spec]
    if s == "uwsgi":
        # --http-socket: uWSGI's native HTTP parser in the worker, no router process.
        # (--http11-socket adds keep-alive, but one thread then serves one
        # connection at a time and starves the rest under wrk -c16.)
        return ["uwsgi", "--http-socket", f"127.0.0.1:{port}", "--plugin", "python3", "--chdir", wd,
                "--wsgi", spec, "--processes", "1", "--threads", "1", "--disable-logging",
                "--listen", "1024", "--die-on-term"]
    if s == "gunicorn":
        return [PY, "-m", "gunicorn", "-k", "gthread", "--workers", "1", "--threads", "1",
                "-b", f"127.0.0.1:{port}", "--chdir", wd, "--log-level", "warning", "--backlog", "1024", spec]
    raise ValueError(s)


def label(run):
    if run["server"] != "cserve":
        return f"{run['server']} {run['app']} c{run['conns']}"
    mode = run.get("mode") or f"{run['handoff']} bt{run.get('bt', 1)}"
    extra = " ".join(run.get("args", []))
    if run.get("binary"):
        extra = (extra + " " + run["binary"]).strip()
    extra = f" {extra}" if extra else ""
    return f"cserve {mode}{extra} {run['app']} c{run['conns']} [{placement_name(run)}]"


def placement_name(run):
    p = run.get("placement") or {}
    parts = []
    if p.get("server"):
        parts.append(f"server@{p['server']}")
    for k, v in sorted((p.get("threads") or {}).items()):
        parts.append(f"{k}@{v}")
    if p.get("wrk"):
        parts.append(f"wrk@{p['wrk']}")
    return ",".join(parts) or "unpinned"


# ---------------------------------------------------------------- sweeps

HANDOFFS = ["ring", "dgram", "condvar", "eventfd"]


def sweeps(quick):
    def cs(**kw):
        r = {"server": "cserve", "handoff": "ring", "bt": 1, "app": "hello", "conns": 64}
        r.update(kw)
        return r
    S = {}
    if quick:
        S["connections"] = [cs(handoff=h, conns=16) for h in ("ring", "dgram")]
        S["appcost"] = [cs(app="cpu20", conns=16)]
        S["modes"] = [cs(mode=m, conns=16) for m in ("inline", "native")]
        S["peers"] = [{"server": p, "app": "hello", "conns": 16} for p in ("granian", "uwsgi")]
        return S
    S["connections"] = [cs(handoff=h, conns=c) for h in HANDOFFS for c in (1, 16, 64, 256)]
    S["threads"] = ([cs(handoff=h, bt=b) for h in ("ring", "dgram") for b in (1, 2, 4)] +
                    [cs(app="gil-sleep200", bt=b, conns=16) for b in (1, 2, 4)])
    S["appcost"] = [cs(handoff=h, app=a) for h in ("ring", "dgram")
                    for a in ("hello", "cpu5", "cpu20", "cpu100")]
    S["modes"] = [cs(conns=c, **m) for c in (16, 64)
                  for m in ({}, {"mode": "inline"}, {"mode": "native"})]
    S["peers"] = ([cs(conns=c) for c in (16, 64, 256)] +
                  [{"server": p, "app": "hello", "conns": c} for p in ("granian", "uwsgi", "gunicorn")
                   for c in (16, 64, 256)])
    S["frameworks"] = ([cs(app=a, args=x) for a in ("flask", "django") for x in ([], ["--loop-spin", "20"])] +
                       [{"server": "granian", "app": a, "conns": 64} for a in ("flask", "django")])
    # The instruments' own cost: the same run with the counters compiled out
    # (make INSTRUMENTS=0 BUILD=build-noinst), alternated to share the noise.
    S["instruments"] = [cs(conns=c, **b) for _ in range(3) for c in (16, 64)
                        for b in ({}, {"binary": "build-noinst/cserve"})]
    # Spin budgets: the pool thread's (--spin) and the loop's (--loop-spin).
    S["spin"] = [cs(app=a, args=x) for a in ("hello", "cpu20") for x in (
        ["--spin", "0"], [], ["--spin", "50us"], ["--loop-spin", "2"], ["--loop-spin", "10"])]
    S["placement"] = [cs(handoff=h, placement=p) for h in ("ring", "dgram") for p in (
        {},
        {"server": "0", "wrk": "1"},                                     # loop+pool share a core
        {"threads": {"cserve-loop": "0", "cserve-pool-0": "1"}, "wrk": "1"},  # wrk shares with the pool
        {"threads": {"cserve-loop": "0", "cserve-pool-0": "1"}, "wrk": "0"},  # wrk shares with the loop
    )]
    return S


# ---------------------------------------------------------------- one run

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(proc, port, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def pin_threads(pid, mapping, children):
    """sched_setaffinity on each thread whose comm matches; returns {comm: cpus} applied."""
    done = {}
    pids = threadcpu.descendants(pid) if children else [pid]
    for p in pids:
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                comm = open(f"/proc/{p}/task/{tid}/comm").read().strip()
            except OSError:
                continue
            if comm in mapping:
                cpus = {int(c) for c in mapping[comm].split(",")}
                os.sched_setaffinity(int(tid), cpus)
                done[comm] = mapping[comm]
    return done


def parse_latency(text):
    """{p50_us, p75_us, p90_us, p99_us, avg_us, max_us} from wrk --latency."""
    def us(v):
        m = re.match(r"([\d.]+)(us|ms|s|m)$", v)
        return float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6, "m": 6e7}[m.group(2)] if m else None
    out = {}
    for p in ("50", "75", "90", "99"):
        m = re.search(rf"^\s+{p}(?:\.000)?%\s+(\S+)", text, re.M)
        if m:
            out[f"p{p}_us"] = us(m.group(1))
    m = re.search(r"Latency\s+(\S+)\s+(\S+)\s+(\S+)", text)
    if m:
        out["avg_us"], out["max_us"] = us(m.group(1)), us(m.group(3))
    errs = re.search(r"Socket errors: (.*)", text)
    out["socket_errors"] = errs.group(1) if errs else None
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    out["non_2xx"] = int(non2xx.group(1)) if non2xx else 0
    return out


def read_stats(path, since_mtime, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.stat(path).st_mtime_ns > since_mtime:
                time.sleep(0.05)  # let the writer finish (it should rename; be safe)
                with open(path) as f:
                    return json.load(f)
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    return None


def stats_summary(st):
    """Per-thread rows and per-request handoff counters from cserve's JSON."""
    if not st:
        return None, None
    threads, loop_reqs = [], 0
    for w in st.get("workers", []):
        for th in w.get("threads", []):
            if th.get("role") == "loop":
                loop_reqs += th.get("requests") or 0
    window = max((w.get("window_s") or 0) for w in st.get("workers", [])) if st.get("workers") else 0
    for w in st.get("workers", []):
        for th in w.get("threads", []):
            row = {k: th.get(k) for k in ("name", "role", "tid", "cpu_s", "utilisation", "requests", "us_per_request")}
            row["worker"] = w.get("worker")
            c = th.get("counters") or {}
            per = {}
            for k, v in c.items():
                if isinstance(v, (int, float)) and loop_reqs and k not in ("events_per_wait",):
                    per[k] = round(v / loop_reqs, 4)
            for k, v in (c.get("handoff") or {}).items():
                if isinstance(v, (int, float)) and loop_reqs:
                    per["handoff." + k] = round(v / loop_reqs, 4)
            if "events_per_wait" in c:
                per["events_per_wait"] = c["events_per_wait"]
            row["per_request"] = per
            row["counters"] = c
            threads.append(row)
    return threads, {"loop_requests": loop_reqs, "window_s": window,
                     "rps": round(loop_reqs / window, 1) if window else None}


def machine():
    model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    def out(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
        except Exception:
            return None
    return {"host": platform.node(), "nproc": os.cpu_count(), "model": model, "kernel": platform.release(),
            "python": out([PY, "-c", "import sys; print(sys.version.split()[0])"]),
            "cserve": out([CSERVE, "--version"]), "wrk": (out(["wrk", "-v"]) or "").split("\n")[0][:60]}


def commit():
    try:
        c = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True).stdout.strip() or "no-commit"
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return c + ("-dirty" if dirty else "")
    except OSError:
        return "unknown"


def run_one(run, a, mach, rev):
    port = free_port()
    tmpdir = tempfile.mkdtemp(prefix="cserve-exp-")
    stats_file = os.path.join(tmpdir, "stats.json")
    cmd = server_cmd(run, port, stats_file)
    pl = run.get("placement") or {}
    if pl.get("server"):
        cmd = ["taskset", "-c", pl["server"]] + cmd
    log = open(os.path.join(tmpdir, "server.log"), "w+")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    rec = {"time": datetime.datetime.now().isoformat(timespec="seconds"), "label": label(run), "config": run,
           "machine": mach, "commit": rev, "server_cmd": shlex.join(cmd), "placement": placement_name(run),
           # Other work on the box invalidates a rate: record the 1-minute load
           # average before the run (an idle 2-vCPU guest reads < 0.3).
           "loadavg_before": round(os.getloadavg()[0], 2)}
    is_cserve = run["server"] == "cserve"
    children = not is_cserve  # gunicorn/granian run the app in a child process
    try:
        if not wait_ready(proc, port):
            log.seek(0)
            rec["error"] = "server did not start: " + log.read()[-2000:]
            return rec
        time.sleep(0.3)  # threads named, pools started
        if pl.get("threads"):
            rec["pinned"] = pin_threads(proc.pid, pl["threads"], children)
        total = a.warmup + a.duration + a.margin
        wrk = ["wrk", "-t1", f"-c{run['conns']}", f"-d{int(round(total))}s", "--latency",
               f"http://127.0.0.1:{port}{APPS[run['app']][2]}"]
        if pl.get("wrk"):
            wrk = ["taskset", "-c", pl["wrk"]] + wrk
        rec["wrk_cmd"] = shlex.join(wrk)
        wp = subprocess.Popen(wrk, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(a.warmup)
        mtime = 0
        if is_cserve:
            proc.send_signal(signal.SIGUSR2)  # new window: warm-up excluded
        # The load generator is sampled too: on two cores it can be the bound.
        series = threadcpu.sample([proc.pid, wp.pid], a.interval, a.duration, children=children)
        if is_cserve:
            try:
                mtime = os.stat(stats_file).st_mtime_ns
            except OSError:
                mtime = 0
            proc.send_signal(signal.SIGUSR1)  # write the window, while wrk still loads
        wout, _ = wp.communicate(timeout=total + 30)
        rec["wrk_output"] = wout
        n, secs, rps = threadcpu.parse_wrk(wout)
        rec["wrk_requests"], rec["wrk_seconds"], rec["rps_wrk"] = n, secs, rps
        rec["latency"] = parse_latency(wout)
        st = read_stats(stats_file, mtime) if is_cserve else None
        rec["stats_threads"], rec["stats_window"] = stats_summary(st)
        if st:
            rec["stats_meta"] = {k: st.get(k) for k in ("version", "handoff", "inline", "app", "instruments")}
        rps_window = (rec["stats_window"] or {}).get("rps")
        rec["rps"] = rps_window or rps
        rec["threadcpu"] = threadcpu.summarise(series, rec["rps"], min_pct=1.0)
    except Exception as e:  # record the failure, keep sweeping
        rec["error"] = f"{type(e).__name__}: {e}"
    finally:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except OSError:
                pass
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.seek(0)
        tail = log.read()[-1500:]
        if "error" in rec or proc.returncode not in (0, -signal.SIGTERM, None):
            rec["server_log_tail"] = tail
        rec["server_exit"] = proc.returncode
    return rec


def brief(rec):
    if "error" in rec:
        return f"{rec['label']}: ERROR {rec['error'][:200]}"
    th = {t["name"]: t for t in rec.get("stats_threads") or []}
    parts = [f"{rec['label']}: {rec['rps'] or 0:,.0f} rps (wrk {rec['rps_wrk'] or 0:,.0f})"]
    for t in rec.get("stats_threads") or []:
        if t["utilisation"] is not None:
            parts.append(f"{t['name']} {100 * t['utilisation']:.0f}% {t['us_per_request'] or 0:.2f}us")
    if not th:
        for t in rec.get("threadcpu") or []:
            parts.append(f"{t['name']}[{t['tid']}] {t['median_pct']:.0f}% {t['us_per_request'] or 0:.2f}us")
    p99 = (rec.get("latency") or {}).get("p99_us")
    if p99:
        parts.append(f"p99 {p99:.0f}us")
    return "  ".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a smoke run: few rows, short durations")
    ap.add_argument("--sweep", action="append", help="run only these sweeps (repeatable)")
    ap.add_argument("--duration", type=float, help="measured seconds per run (full 10, quick 2)")
    ap.add_argument("--warmup", type=float, help="seconds of load before the window (full 2, quick 0.5)")
    ap.add_argument("--margin", type=float, default=1.0, help="load seconds after the window")
    ap.add_argument("--interval", type=float, default=1.0, help="threadcpu sampling interval")
    ap.add_argument("--out", help="results folder (default experiments/results, quick: experiments/results/quick)")
    ap.add_argument("--wrk-cpus", help="taskset for wrk in every run that does not set its own")
    ap.add_argument("--server-cpus", help="taskset for the server in every run that does not set its own")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    a.duration = a.duration or (2.0 if a.quick else 10.0)
    a.warmup = a.warmup if a.warmup is not None else (0.5 if a.quick else 2.0)
    if a.quick and a.interval >= a.duration:
        a.interval = a.duration / 4
    out = a.out or os.path.join(ROOT, "experiments", "results", "quick" if a.quick else "")

    S = sweeps(a.quick)
    names = a.sweep or list(S)
    have_granian = subprocess.run([PY, "-c", "import granian"], capture_output=True).returncode == 0
    todo = []
    for name in names:
        if name not in S:
            sys.exit(f"unknown sweep {name!r}; have {', '.join(S)}")
        for r in S[name]:
            if r["server"] == "granian" and not have_granian:
                print(f"skip {label(r)}: granian not installed for {PY} (make deps)", file=sys.stderr)
                continue
            if a.wrk_cpus or a.server_cpus:
                pl = dict(r.get("placement") or {})
                if a.wrk_cpus and "wrk" not in pl:
                    pl["wrk"] = a.wrk_cpus
                if a.server_cpus and "server" not in pl and "threads" not in pl:
                    pl["server"] = a.server_cpus
                r = dict(r, placement=pl)
            todo.append((name, r))
    per = a.warmup + a.duration + a.margin + 2
    print(f"{len(todo)} runs, ~{len(todo) * per / 60:.1f} min; results in {out}", file=sys.stderr)
    if a.list:
        for name, r in todo:
            print(f"{name:<12} {label(r)}")
        return
    if not os.access(CSERVE, os.X_OK) and any(r["server"] == "cserve" for _, r in todo):
        sys.exit(f"no {CSERVE}: run make first")
    os.makedirs(out, exist_ok=True)
    mach, rev = machine(), commit()
    if os.getloadavg()[0] > 0.5:
        print(f"WARNING: load average {os.getloadavg()[0]:.2f}: something else is running; "
              "rates from this run are not comparable (recorded per run as loadavg_before)", file=sys.stderr)
    failures = 0
    for i, (name, r) in enumerate(todo, 1):
        rec = run_one(r, a, mach, rev)
        rec["sweep"] = name
        rec["durations"] = {"warmup": a.warmup, "window": a.duration, "margin": a.margin, "quick": a.quick}
        with open(os.path.join(out, f"{name}.jsonl"), "a") as f:
            f.write(json.dumps(rec) + "\n")
        failures += "error" in rec
        print(f"[{i}/{len(todo)}] {name}: {brief(rec)}", file=sys.stderr, flush=True)
    sys.exit(1 if failures == len(todo) else 0)


if __name__ == "__main__":
    main()

"""Starting a server under test and talking to it: the command lines for
cserve and its peers, readiness, thread pinning, wrk's output, and cserve's
--stats-json window. Shared by run.py, openloop.py, startup.py and timeline.py."""
import functools
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from . import pinning, provenance
from . import threadcpu  # noqa: F401  (re-exported for the harness)

PY = "/usr/bin/python3"  # the interpreter cserve embeds; peers run on it too
CSERVE = os.environ.get("CSERVE_BIN", os.path.join(ROOT, "cserve"))
WRK_DIR = os.path.join(ROOT, "experiments", "wrk")
PIPELOAD = os.environ.get("CSERVE_PIPELOAD", os.path.join(ROOT, "build", "pipeload"))  # loadgen/pipeload.c (make all)

# app name -> (--chdir, module:callable, URL path); cpuN (N µs on this
# interpreter), cpunN (N iterations: the same work on every interpreter),
# gil-sleepN and mix-MODEFAST-SLOW-PCT (apps/mix.py: PCT % of the requests
# cost SLOW µs, the rest FAST; MODE sleep or cpu) are parametric.
APPS = {
    "hello": (None, None, "/"),
    "flask": ("apps", "flask_hello:application", "/"),
    "django": ("apps/django_hello", "djhello.wsgi:application", "/"),
    "upload": ("apps", "upload:application", "/"),
}


def app_spec(app):
    if app in APPS:
        return APPS[app]
    m = re.fullmatch(r"cpu(\d+(?:\.\d+)?)", app)
    if m:
        return ("apps", "cpu:application", f"/?us={m.group(1)}")
    m = re.fullmatch(r"cpun(\d+)", app)
    if m:
        return ("apps", "cpu:application", f"/?n={m.group(1)}")
    m = re.fullmatch(r"mix-(sleep|cpu)(\d+)-(\d+)-(\d+(?:\.\d+)?)", app)
    if m:
        return ("apps", "mix:application", f"/?mode={m.group(1)}&fast={m.group(2)}&slow={m.group(3)}&pct={m.group(4)}")
    m = re.fullmatch(r"gil-(sleep|hash)(\d+)", app)
    if m:
        return ("apps", "gil_release:application", f"/?us={m.group(2)}&mode={m.group(1)}")
    raise ValueError(f"unknown app {app!r}")


def server_cmd(run, port, stats_file=None):
    s, app = run["server"], run["app"]
    d, spec, _ = app_spec(app)
    if s == "cserve":
        binary = os.path.join(ROOT, run["binary"]) if run.get("binary") else CSERVE
        cmd = [binary, "--bind", f"127.0.0.1:{port}", "--log-level", "warning"]
        if run.get("workers", 1) > 1:
            cmd += ["--workers", str(run["workers"])]
        if stats_file:
            cmd += ["--stats-json", stats_file]
        cmd += run.get("args", [])
        if run.get("mode") == "inline":
            cmd.append("--inline")
        elif run.get("mode") == "native":
            return cmd + ["--app", "native-hello"]
        else:
            cmd += ["--handoff", run["handoff"], "--blocking-threads", str(run.get("bt", 1))]
        if spec:
            cmd += ["--chdir", os.path.join(ROOT, d), spec]
        return cmd
    wd = os.path.join(ROOT, d or "apps")
    spec = spec or "hello:application"
    workers, bt = run.get("workers", 1), run.get("bt", 1)
    if s == "granian":
        # run["python"]: another interpreter's Granian (a free-threaded venv's);
        # bt and workers as cserve's --blocking-threads and --workers.
        return [run.get("python", PY), "-m", "granian", "--interface", "wsgi",
                "--workers", str(workers), "--blocking-threads", str(bt),
                "--runtime-threads", "1", "--no-ws", "--log-level", "warning", "--host", "127.0.0.1",
                "--port", str(port), "--working-dir", wd, spec]
    if s == "uwsgi":
        # --http11-socket: uWSGI's HTTP parser in the worker, no router
        # process, and keep-alive (--http-socket closes each connection after
        # one response, which costs the client a connect per request).
        # More than one process: under a master, as uWSGI is deployed.
        return ["uwsgi", "--http11-socket", f"127.0.0.1:{port}", "--plugin", "python3", "--chdir", wd,
                "--wsgi", spec, "--processes", str(workers), "--threads", str(bt), "--disable-logging",
                "--listen", "1024", "--die-on-term"] + (["--master"] if workers > 1 else [])
    if s == "gunicorn":
        return [PY, "-m", "gunicorn", "-k", "gthread", "--workers", str(workers), "--threads", str(bt),
                "-b", f"127.0.0.1:{port}", "--chdir", wd, "--log-level", "warning", "--backlog", "1024", spec]
    raise ValueError(s)


def start_client(proc, cfg, cmd, children):
    """Place the server's threads by cfg["placement"] (lib/pinning.py;
    default shared) and start the client command on its CPUs. Returns
    (client Popen, the placement's record, check): check() lists the
    server threads not where their role belongs, for after the window."""
    pids = threadcpu.descendants(proc.pid) if children else [proc.pid]
    if cfg.get("placement") == "per-worker":  # every worker up before it is pinned
        deadline = time.monotonic() + 5
        while len(pinning.worker_pids(pids)) < cfg.get("workers", 1) and time.monotonic() < deadline:
            time.sleep(0.05)
            pids = threadcpu.descendants(proc.pid)
    sets, placed = pinning.place(pids, cfg.get("placement"), cfg.get("bt", 1))
    wp = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          preexec_fn=pinning.client_preexec(sets))
    if sets:
        placed["client_cpus"] = sorted(os.sched_getaffinity(wp.pid))

    def check():
        if sets:
            placed["unpinned"] = pinning.unpinned(pids, sets)
    return wp, placed, check


def wrk_duration(seconds):
    """wrk's -d for a load that must last at least `seconds`. wrk takes whole
    seconds; rounding down (4.5 -> 4) would end the load inside the margin
    after the window, so the window's last /proc sample would race the
    client's exit and miss its CPU, which then reads as foreign CPU."""
    return f"-d{math.ceil(seconds - 1e-9)}s"


@functools.lru_cache(maxsize=None)
def _importable(module, python=PY):
    try:
        return subprocess.run([python, "-c", f"import {module}"], capture_output=True).returncode == 0
    except OSError:  # no such interpreter
        return False


def unavailable(run):
    """Why server_cmd(run) could not run on this machine (None: it can): a
    missing build, server or framework, with what installs it."""
    s, py = run["server"], run.get("python", PY)  # py: the interpreter that imports the app
    if s == "cserve" and run.get("binary") and not os.access(os.path.join(ROOT, run["binary"]), os.X_OK):
        return f"no {run['binary']} (make BUILD=build-noinst INSTRUMENTS=0 build-noinst/cserve)"
    if s in ("granian", "gunicorn") and not _importable(s, py):
        return f"{s} is not installed for {py} (make deps)"
    if s == "uwsgi" and not shutil.which("uwsgi"):
        return "no uwsgi (scripts/setup-experiments.sh)"
    if (run.get("client") == "pipeload" or run.get("beside")) and not os.access(PIPELOAD, os.X_OK):
        return f"no {os.path.relpath(PIPELOAD, ROOT)} (make all)"
    if run.get("placement") not in (None, "shared"):
        try:
            pinning.cpu_sets(run["placement"], run.get("bt", 1))
        except ValueError as e:
            return str(e)
    if run["app"] in ("flask", "django") and not _importable(run["app"], py):
        return f"{run['app']} is not installed for {py} (make deps)"
    return None


def client_cmd(run, port, seconds):
    url = f"http://127.0.0.1:{port}{app_spec(run['app'])[2]}"
    cmd = ["wrk", f"-t{run.get('wrk_threads', 1)}", f"-c{run['conns']}", wrk_duration(seconds), "--latency"]
    client = run.get("client", "wrk")
    if client == "wrk-p16":
        cmd += ["-s", os.path.join(WRK_DIR, "pipeline.lua"), url, "--", "16"]
    elif client == "wrk-browser":
        cmd += ["-s", os.path.join(WRK_DIR, "browser.lua"), url]
    elif client == "wrk":
        cmd.append(url)
    else:
        raise ValueError(client)
    return cmd


def start(cmd, log_path, env_extra=None):
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", **(env_extra or {}))
    log = open(log_path, "w+")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True), log


def stop(proc, timeout=15):
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except OSError:
            pass
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port):
    """How many TCP sockets listen on port (/proc/net/tcp and tcp6)."""
    n = 0
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                next(f)
                for line in f:
                    fields = line.split()  # sl local_address rem_address st ...; st 0A: LISTEN
                    n += fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port
        except OSError:
            pass
    return n


def wait_ready(proc, port, timeout=30.0, listeners=1):
    """Until the server accepts on port and, for cserve --workers N over TCP
    (listeners N), every worker's SO_REUSEPORT socket listens: a slot
    listens only once its worker has imported the app, and a client that
    connected before then would have all its connections on the workers
    that did, for the whole run. False if the server exits or the timeout
    passes first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            if listening(port) >= listeners:
                return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def thread_ids(pid, keep):
    """{comm: tid} of pid's threads whose name passes keep(comm)."""
    tids = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            name = f.read().strip()
        if keep(name):
            tids[name] = int(tid)
    return tids


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


def load_window(proc, wp, warmup, duration, interval, children, stats_file=None):
    """The measured window of one run, while the client wp loads the server
    proc: wait out the warm-up, then (cserve, stats_file given) start a new
    stats window, sample every thread of both (the client too: on two vCPUs
    it can be the bound) for duration seconds, and (cserve) have the server
    write its window while the client still loads. Returns (series,
    window_cpu, mtime): threadcpu's samples, provenance.window_cpu's steal
    and foreign CPU over the window, and the stats file's mtime before the
    write, for read_stats. window_cpu["sched"]: every thread's on-CPU time
    and run delay over the window (pinning.sched_window)."""
    time.sleep(warmup)
    if stats_file:
        proc.send_signal(signal.SIGUSR2)  # a new stats window: warm-up excluded
    pids = threadcpu.descendants(proc.pid) + threadcpu.descendants(wp.pid)
    ss0 = pinning.schedstat(pids)
    ps0, t0 = provenance.proc_stat(), time.monotonic()
    series = threadcpu.sample([proc.pid, wp.pid], interval, duration, children=children)
    ps1, t1 = provenance.proc_stat(), time.monotonic()
    ss1 = pinning.schedstat(pids)
    own = sum(e["cpu_s"] for e in series.values())
    window_cpu = provenance.window_cpu(ps0, ps1, t1 - t0, own)
    window_cpu["sched"] = pinning.sched_window(ss0, ss1, t1 - t0, set(threadcpu.descendants(wp.pid)))
    window_cpu["seconds"] = round(t1 - t0, 4)
    mtime = 0
    if stats_file:
        try:
            mtime = os.stat(stats_file).st_mtime_ns
        except OSError:
            mtime = 0
        proc.send_signal(signal.SIGUSR1)  # write the window while wrk still loads
    return series, window_cpu, mtime


def finish_window(rec, wp, timeout, series, stats_file=None, mtime=0):
    """After load_window: the client's output and counts, its latency, the
    server's own stats window (cserve, stats_file given), and each thread's
    share of a core, into rec. rps is the server's own window where it has
    one, else the client's whole run; cross-server comparisons use rps_wrk,
    the same instrument for all. Returns the stats read (None without)."""
    wout, _ = wp.communicate(timeout=timeout)
    rec["wrk_output"] = wout
    n, secs, rps = threadcpu.parse_wrk(wout)
    rec["wrk_requests"], rec["wrk_seconds"], rec["rps_wrk"] = n, secs, rps
    rec["latency"] = parse_latency(wout)
    st = read_stats(stats_file, mtime) if stats_file else None
    rec["stats_threads"], rec["stats_window"] = stats_summary(st)
    rec["rps"] = (rec["stats_window"] or {}).get("rps") or rps
    rec["threadcpu"] = threadcpu.summarise(series, rec["rps"], min_pct=1.0)
    if not n:
        rec["error"] = "client reported no requests: " + wout[-500:]
    return st


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
                     "rps": round(loop_reqs / window, 1) if window else None,
                     # each worker's pool threads at the window's end (--blocking-threads auto: as it settled)
                     "blocking_threads": [w.get("blocking_threads") for w in st.get("workers", [])]}



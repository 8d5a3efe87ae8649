"""make bench: a short side-by-side of the handoffs, native-hello and Granian,
and a PASS/FAIL check of the bench's goals.

    python3 -m experiments.bench [--quick] [--rounds 3] [--warmup 0.5] [--duration 1.5]
                         [--baseline-bin PATH] [--out experiments/results/bench]

Cells: hello at -c16/-c64/-c256, each without and with HTTP pipelining (depth
16, a wrk Lua script), for the ring (no flags), dgram, condvar, eventfd,
native-hello (`--app native-hello`, no Python) and Granian (1 worker, 1
blocking thread); Flask (apps/flask_hello.py) at -c16/-c64 for the four
handoffs and Granian. --baseline-bin adds that binary's ring and dgram rows
(before/after builds, interleaved with the rest).

Every server is started once and stays up; each round runs every cell once in
a freshly shuffled order (so drift and other load on the box spread over all
rows), `wrk -t1` for warmup+duration seconds. During the last `duration`
seconds it samples /proc/PID/task/*/stat (experiments/lib/threadcpu.py) for per-thread
CPU, and cserve's own window (SIGUSR2 at the start, SIGUSR1 at the end,
--stats-json) gives the handoff syscalls per request on each side. The rate
is wrk's (the same yardstick for every server). Reported: median and min-max
over the rounds. Machine metadata, load average and steal time during the
run go into the JSON and the Markdown under --out.
"""
import argparse
import datetime
import json
import math
import os
import platform
import random
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from experiments.lib import beside, threadcpu
from experiments.lib import generated, provenance
from experiments.lib.serverctl import free_port, read_stats, wait_ready

PY = "/usr/bin/python3"
# The experiments' own pipelining script (`-- DEPTH` after the URL).
PIPELINE_LUA = os.path.join(ROOT, "experiments", "wrk", "pipeline.lua")
HANDOFFS = ["ring", "dgram", "condvar", "eventfd"]
LOOP_SIDE = ("submit_syscalls", "drain_syscalls", "sleep_syscalls")
POOL_SIDE = ("take_syscalls", "complete_syscalls")


class Server:
    """One server process, up for the whole bench."""

    def __init__(self, name, app, cmd, kind, tmp):
        self.name, self.app, self.kind = name, app, kind
        self.port = free_port()
        self.stats = os.path.join(tmp, f"{name}-{app}.json")
        cmd = [c.replace("{port}", str(self.port)).replace("{stats}", self.stats) for c in cmd]
        self.cmd = cmd
        self.log = open(os.path.join(tmp, f"{name}-{app}.log"), "w+")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
                                     env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
        if not wait_ready(self.proc, self.port):
            self.log.seek(0)
            raise RuntimeError(f"{name}/{app} did not start: {shlex.join(cmd)}\n{self.log.read()[-1500:]}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # our own child, by pid
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def cserve_cmd(binary, handoff, app):
    cmd = [binary, "--bind", "127.0.0.1:{port}", "--stats-json", "{stats}"]
    if handoff == "native":
        return cmd + ["--app", "native-hello"]
    spec = {"hello": "hello:application", "flask": "flask_hello:app"}[app]
    return cmd + ["--handoff", handoff, "--blocking-threads", "1", "--chdir", os.path.join(ROOT, "apps"), spec]


def granian_cmd(app):
    spec = {"hello": "hello:application", "flask": "flask_hello:app"}[app]
    return [PY, "-m", "granian", "--interface", "wsgi", "--workers", "1", "--blocking-threads", "1",
            "--runtime-threads", "1", "--no-ws", "--log-level", "warning", "--host", "127.0.0.1",
            "--port", "{port}", "--working-dir", os.path.join(ROOT, "apps"), spec]


def handoff_per_request(st):
    """(loop-side, pool-side) handoff syscalls per request, loop/pool CPU us per request."""
    if not st:
        return None
    reqs, loop_sc, pool_sc, loop_us, pool_us, pool_wakes = 0, 0, 0, None, 0.0, 0
    for w in st.get("workers", []):
        for th in w.get("threads", []):
            h = (th.get("counters") or {}).get("handoff") or {}
            if th.get("role") == "loop":
                reqs += th.get("requests") or 0
                loop_sc += sum(h.get(k, 0) for k in LOOP_SIDE)
                loop_us = th.get("us_per_request")
            else:
                pool_sc += sum(h.get(k, 0) for k in POOL_SIDE)
                pool_wakes += h.get("complete_syscalls", 0)
                pool_us += th.get("us_per_request") or 0
    if not reqs:
        return None
    return {"requests": reqs, "loop_syscalls_per_req": round(loop_sc / reqs, 4),
            "pool_syscalls_per_req": round(pool_sc / reqs, 4),
            # of those, the ones that tell the loop (the rest are the pool's own waits)
            "pool_wake_syscalls_per_req": round(pool_wakes / reqs, 4), "loop_us_per_req": loop_us,
            "pool_us_per_req": round(pool_us, 3)}


def steal_jiffies():
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]), sum(int(x) for x in fields[1:])


def steal_pct(before, after):
    """Steal time between two steal_jiffies() readings, in % of all CPU time."""
    return round(100.0 * (after[0] - before[0]) / max(1, after[1] - before[1]), 2)


def run_cell(srv, conns, pipe, a, client_prefix=(), window=None, keep_stats=False):
    """One wrk run against srv. client_prefix goes before wrk's command (a
    taskset, say); window(client_pid), if given, is called as the measured
    window starts and again as it ends (before cserve is asked for its
    counters). keep_stats: the server's stats for the window go into the
    record too, as "stats" (None if it wrote none)."""
    # wrk takes whole seconds; half a second more than warm-up and window, so
    # the window ends while the client still loads (serverctl.wrk_duration)
    total = math.ceil(a.warmup + a.duration + 0.5)
    wrk = ["wrk", "-t1", f"-c{conns}", f"-d{total}s", f"http://127.0.0.1:{srv.port}/"]
    if pipe > 1:
        wrk[1:1] = ["-s", PIPELINE_LUA]
        wrk += ["--", str(pipe)]
    wrk = list(client_prefix) + wrk
    rec = {"server": srv.name, "app": srv.app, "conns": conns, "pipeline": pipe, "wrk_cmd": shlex.join(wrk),
           "loadavg": round(os.getloadavg()[0], 2)}
    wp = subprocess.Popen(wrk, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(a.warmup)
    is_cserve = srv.kind == "cserve"
    if is_cserve:
        srv.proc.send_signal(signal.SIGUSR2)  # a new stats window: warm-up excluded
    if window:
        window(wp.pid)
    # Where the pool thread ran against the loop (lib/beside.py): on two
    # CPUs the unpipelined ring's rate moves with it.
    with beside.Beside(srv.proc.pid, "cserve-loop", "cserve-pool-0") if is_cserve else nullcontext() as bs:
        series = threadcpu.sample([srv.proc.pid, wp.pid], min(0.5, a.duration / 2), a.duration,
                                  children=not is_cserve)
    rec["beside"] = bs.share() if bs else None
    if window:
        window(wp.pid)
    mtime = 0
    if is_cserve:
        try:
            mtime = os.stat(srv.stats).st_mtime_ns
        except OSError:
            pass
        srv.proc.send_signal(signal.SIGUSR1)  # write the window while wrk still runs
    out, _ = wp.communicate(timeout=total + 30)
    n, secs, rps = threadcpu.parse_wrk(out)
    rec["rps"] = rps
    rec["errors"] = "Socket errors" in out or "Non-2xx" in out
    rec["threads"] = threadcpu.summarise(series, rps, min_pct=1.0) if rps else []
    if is_cserve:
        st = read_stats(srv.stats, mtime)
        rec["handoff"] = handoff_per_request(st)
        if keep_stats:
            rec["stats"] = st
    return rec


def cells(a):
    out = []
    conns = [64] if a.quick else [16, 64, 256]
    for c in conns:
        for p in (1, 16):
            for s in HANDOFFS + ["native", "granian"] + (["base-ring", "base-dgram"] if a.baseline_bin else []):
                out.append((s, "hello", c, p))
    for c in ([16] if a.quick else [16, 64]):
        for s in HANDOFFS + ["granian"] + (["base-ring", "base-dgram"] if a.baseline_bin else []):
            out.append((s, "flask", c, 1))
    return out


def median_spread(vals):
    vals = [v for v in vals if v is not None]
    if not vals:
        return None, None, None
    return statistics.median(vals), min(vals), max(vals)


def summarise(records):
    """{(server, app, conns, pipe): {rps, rps_min, rps_max, loop_us, ...}} over the rounds."""
    groups = {}
    for r in records:
        groups.setdefault((r["server"], r["app"], r["conns"], r["pipeline"]), []).append(r)
    out = {}
    for k, rs in groups.items():
        m, lo, hi = median_spread([r.get("rps") for r in rs])
        row = {"rps": m, "rps_min": lo, "rps_max": hi, "rounds": len(rs),
               "each_rps": [r.get("rps") for r in rs], "each_beside": [r.get("beside") for r in rs]}
        # per-thread us/request: the median over rounds of each thread role's row
        roles = {}
        for r in rs:
            for t in r.get("threads") or []:
                if t["name"] == "wrk":
                    role = "wrk"
                elif t["name"].startswith("cserve-loop"):
                    role = "loop"
                elif t["name"].startswith("cserve-pool"):
                    role = "pool"
                else:
                    role = t["name"]
                roles.setdefault(role, []).append(t.get("us_per_request"))
        row["us_per_req"] = {role: round(median_spread(v)[0], 2) for role, v in roles.items()
                             if median_spread(v)[0] is not None and len(v) >= max(1, len(rs) // 2)}
        for f in ("loop_syscalls_per_req", "pool_syscalls_per_req", "loop_us_per_req"):
            v = [(r.get("handoff") or {}).get(f) for r in rs]
            row[f] = median_spread(v)[0]
        out[k] = row
    return out


def utilisation(row):
    """{thread role: % of one core} for a summary row: its CPU per request times its rate."""
    if not row or not row.get("rps"):
        return {}
    return {role: round(us * row["rps"] / 1e4) for role, us in (row.get("us_per_req") or {}).items()
            if us is not None}


# The ring's rate over Granian's that the bench's goals ask for, per app.
GRANIAN_GOAL = {"hello": 1.5, "flask": 1.0}
FULL = os.path.join(ROOT, "experiments", "results", "full")
SPREAD_GOAL = 0.10    # the ring's unpipelined hello, (max - min) / median over the rounds
BASELINE_GOAL = 0.95  # the ring's rate over the baseline binary's ring, every cell


def rounds_beside(row):
    """' (rounds: 150k, pool beside the loop 98%; ...)' for a summary row
    whose runs recorded where the pool thread ran, slowest first; '' if none did."""
    pairs = sorted((r, b) for r, b in zip(row.get("each_rps") or [], row.get("each_beside") or [])
                   if r and b is not None)
    if not pairs:
        return ""
    return " (rounds: " + "; ".join(f"{r / 1e3:.0f}k, pool beside the loop {b:.0%}" for r, b in pairs) + ")"


def goals(summ, a):
    """The bench's goals: [(name, pass, detail)]."""
    res = []
    conns = [64] if a.quick else [16, 64, 256]
    hello_cells = [("hello", c, p) for c in conns for p in (1, 16)]
    flask_cells = [("flask", c, 1) for c in ([16] if a.quick else [16, 64])]

    def rps(s, app, c, p):
        return (summ.get((s, app, c, p)) or {}).get("rps")

    worst = []
    for app, c, p in hello_cells + flask_cells:
        ring = rps("ring", app, c, p)
        best = max((rps(s, app, c, p) or 0) for s in HANDOFFS[1:])
        if ring and best:
            worst.append((ring / best, f"{app} c{c}{' p16' if p > 1 else ''}"))
    ok = bool(worst) and all(x >= 0.95 for x, _ in worst)
    res.append(("ring >= best other backend (within 5%) in every cell", ok,
                ", ".join(f"{n} {x:.2f}x" for x, n in worst)))
    for app, want, cl in (("hello", GRANIAN_GOAL["hello"], hello_cells), ("flask", GRANIAN_GOAL["flask"], flask_cells)):
        ratios = []
        for _, c, p in cl:
            ring, gr = rps("ring", app, c, p), rps("granian", app, c, p)
            if ring and gr:
                ratios.append((ring / gr, f"c{c}{' p16' if p > 1 else ''}"))
        ok = bool(ratios) and all(x >= want for x, _ in ratios)
        res.append((f"ring >= {want}x Granian on {app} in every cell", ok,
                    ", ".join(f"{n} {x:.2f}x" for x, n in ratios)))
    c_hi = max(conns)
    ring_row, nat_row = summ.get(("ring", "hello", c_hi, 16)) or {}, summ.get(("native", "hello", c_hi, 16)) or {}
    ring_loop = (ring_row.get("us_per_req") or {}).get("loop")
    nat_loop = (nat_row.get("us_per_req") or {}).get("loop")
    ok = bool(ring_loop and nat_loop) and ring_loop <= 1.1 * nat_loop
    busy = utilisation(ring_row)
    res.append((f"loop us/request with the ring <= 1.1x native-hello's at c{c_hi} pipelined", ok,
                f"ring loop {ring_loop} us, native loop {nat_loop} us"
                + (f" ({ring_loop / nat_loop:.2f}x)" if ring_loop and nat_loop else "")
                + (f"; with the ring the loop is at {busy['loop']} % of a core and the pool at {busy['pool']} %, "
                   f"native-hello's loop at {utilisation(nat_row).get('loop')} %"
                   if busy.get("loop") is not None and busy.get("pool") is not None else "")))
    det, ok = [], True
    for p in (1, 16):
        row = summ.get(("ring", "hello", c_hi, p)) or {}
        ls, ps = row.get("loop_syscalls_per_req"), row.get("pool_syscalls_per_req")
        det.append(f"{'p16' if p > 1 else 'p1'}: loop {ls}, pool {ps}")
        ok = ok and ls is not None and ps is not None and ls <= 0.05 and ps <= 0.05
    res.append((f"handoff syscalls per request <= 0.05 per side at c{c_hi} (ring)", ok, "; ".join(det)))
    # Between rounds: the ring's unpipelined hello may not collapse in one
    # of them. On two CPUs where the kernel put the pool thread decides it
    # (experiments/results/placement-c16), so each round's rate is shown
    # with the share of its window the pool thread was on the loop's CPU.
    spread = []
    for c in [x for x in conns if x <= 64]:
        row = summ.get(("ring", "hello", c, 1)) or {}
        if row.get("rps") and row.get("rps_min") is not None:
            spread.append(((row["rps_max"] - row["rps_min"]) / row["rps"], f"c{c}", rounds_beside(row)))
    res.append(("the ring's unpipelined hello rate spreads <= 10% between rounds (max-min over median)",
                bool(spread) and all(x <= SPREAD_GOAL for x, _, _ in spread),
                ", ".join(f"{n} {x:.0%}{each}" for x, n, each in spread)))
    if a.baseline_bin:
        ratios = []
        for app, c, p in hello_cells + flask_cells:
            ring, base = rps("ring", app, c, p), rps("base-ring", app, c, p)
            if ring and base:
                ratios.append((ring / base, f"{app} c{c}{' p16' if p > 1 else ''}"))
        res.append(("ring >= 0.95x the baseline's ring in every cell", bool(ratios) and
                    all(x >= BASELINE_GOAL for x, _ in ratios), ", ".join(f"{n} {x:.2f}x" for x, n in ratios)))
    return res


def git_rev(path):
    """The short commit of the checkout that holds path (with -dirty, as
    lib/provenance.git_commit judges it), or None."""
    d = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    rev = provenance.short_commit(d)
    return None if rev.startswith("unknown") else rev


def machine(cserve):
    model = ""
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break

    def out(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
        except OSError:
            return None
    rev = git_rev(ROOT) or "unknown"
    return {"host": platform.node(), "nproc": os.cpu_count(), "cpu_model": model, "kernel": platform.release(),
            "python": out([PY, "-c", "import sys; print(sys.version.split()[0])"]),
            "granian": out([PY, "-c", "import granian; print(granian.__version__)"]),
            "flask": out([PY, "-c", "import flask, importlib.metadata as m; print(m.version('flask'))"]),
            "cserve": out([cserve, "--version"]), "wrk": (out(["wrk", "-v"]) or "").split("\n")[0][:60],
            "commit": rev}


def ordered(summ):
    """The servers and the cells of summ, in table order."""
    servers = sorted({k[0] for k in summ}, key=lambda s: (HANDOFFS + ["native", "granian", "base-ring",
                                                                          "base-dgram"]).index(s))
    cols = sorted({(k[1], k[2], k[3]) for k in summ}, key=lambda c: (c[0] != "hello", c[2], c[1]))
    return servers, cols


def cell_name(app, c, p):
    return f"{app} c{c}{' p16' if p > 1 else ''}"


def machine_line(meta, rounds, warmup, duration):
    m = meta["machine"]

    def built(version):
        """How a binary's --version says it was built (libpython, malloc), if it says."""
        found = re.search(r"(libpython \w+); (malloc: \w+)", version or "")
        return f" ({found.group(1)}, {found.group(2)})" if found else ""
    return (f"Machine: {m['cpu_model']}, {m['nproc']} CPUs, kernel {m['kernel']}; Python {m['python']}, "
            f"Granian {m['granian']}, Flask {m['flask']}, {m['wrk']}; commit {m['commit']}"
            f"{built(m.get('cserve'))}. "
            f"Load average during the run: {meta['loadavg_min']}–{meta['loadavg_max']} (1 min); "
            f"steal {meta['steal_pct']} % of CPU time. {rounds} interleaved rounds, shuffled; "
            f"wrk -t1, {warmup}+{duration} s per cell. Median (min–max) requests/s."
            + (f" Rows base-ring and base-dgram: the binary {meta['baseline']['bin']}"
               f"{built(meta['baseline'].get('version'))}, from the checkout at "
               f"commit {meta['baseline']['commit']}, in the same rounds." if meta.get("baseline") else ""))


def rate_table(summ):
    servers, cols = ordered(summ)
    L = ["| server | " + " | ".join(cell_name(*c) for c in cols) + " |", "|---|" + "---:|" * len(cols)]
    for s in servers:
        cells_ = []
        for app, c, p in cols:
            r = summ.get((s, app, c, p))
            cells_.append(f"{r['rps'] / 1000:.1f}k ({r['rps_min'] / 1000:.1f}–{r['rps_max'] / 1000:.1f})"
                          if r and r["rps"] else "—")
        L.append(f"| {s} | " + " | ".join(cells_) + " |")
    return L


def goal_lines(gl):
    return [f"- **{'PASS' if ok else 'FAIL'}** {name}: {detail}" for name, ok, detail in gl]


def markdown(meta, summ, gl, a):
    L = [f"# make bench — {meta['time']}", "", f"`{meta['command']}`", "",
         machine_line(meta, a.rounds, a.warmup, a.duration), ""]
    L += rate_table(summ)
    servers, cols = ordered(summ)
    L += ["", "Per-thread CPU, µs per request (median over rounds; /proc), and cserve's handoff syscalls per "
          "request (loop side / pool side, from --stats-json):", "",
          "The last column is each thread's share of one core (its µs per request times the rate): a stage near "
          "100 % bounds the cell; where none is, the threads together fill the two vCPUs.", "",
          "| server | cell | loop | pool | wrk | other | handoff sc/req loop | pool | % of a core: loop / pool / wrk / other |",
          "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for s in servers:
        for app, c, p in cols:
            r = summ.get((s, app, c, p))
            if not r:
                continue
            u = r["us_per_req"]
            other = round(sum(v for k, v in u.items() if k not in ("loop", "pool", "wrk")), 2)
            def v(x):
                return "—" if x is None else x

            def share(row):
                pct = utilisation(row)
                pct["other"] = round(sum(x for k, x in pct.items() if k not in ("loop", "pool", "wrk"))) or None
                return " / ".join(str(pct[k]) if pct.get(k) is not None else "—"
                                  for k in ("loop", "pool", "wrk", "other"))
            L.append(f"| {s} | {cell_name(app, c, p)} | {v(u.get('loop'))} | {v(u.get('pool'))} | "
                     f"{v(u.get('wrk'))} | {other or '—'} | {v(r.get('loop_syscalls_per_req'))} | "
                     f"{v(r.get('pool_syscalls_per_req'))} | {share(r)} |")
    L += ["", "## Goals", ""] + goal_lines(gl)
    return "\n".join(L) + "\n"


def readme_body(json_path, doc=None):
    """The rates and goals recorded in json_path, as docs/results.md shows
    them (the "bench" and "bench-replica" blocks of experiments/lib/generated.py)."""
    with open(json_path) as f:
        data = json.load(f)
    summ = {(r["server"], r["app"], r["conns"], r["pipeline"]): r for r in data["summary"]}
    meta, args = data["meta"], data["meta"]["args"]
    gl = [(g["goal"], g["pass"], g["detail"]) for g in data["goals"]]
    block = ["",
             f"`{meta['command']}`, {meta['time']} ({os.path.relpath(json_path, ROOT)}; the per-thread "
             f"table is beside it in the .md). " + machine_line(meta, args["rounds"], args["warmup"],
                                                                 args["duration"]), ""]
    block += rate_table(summ) + ["", "The bench's goals, as `make bench` judged them on this record:", ""]
    block += goal_lines(gl) + [""]
    vs = against_full(meta)
    return "\n".join(block + ([vs, ""] if vs else []))


def against_full(meta, full=FULL):
    """The record set beside the full run (experiments/results/full), which
    measures the same ring-over-Granian ratios with more repeats, intervals
    and the in-flight rule: whichever is older, and the full run's ratios
    against the bench's Granian goals. None without a full run."""
    try:
        n = json.load(open(os.path.join(full, "numbers.json")))
    except (OSError, ValueError):
        return None

    def text(k):
        return (n.get(k) or {}).get("text_ci") or "not measured"
    day, started = meta["time"][:10], (n.get("started") or {}).get("value") or "?"
    when = "later than" if started > day else "earlier than" if started < day else "of the same day as"
    want = GRANIAN_GOAL["hello"]
    held, missed = [], []
    for c in (16, 64, 256):
        v = (n.get(f"ratio_ring_granian_c{c}") or {}).get("value")
        (held if v is not None and v >= want else missed).append(f"c{c}")
    def cells(xs):
        return " and ".join(xs) if len(xs) < 3 else ", ".join(xs[:-1]) + " and " + xs[-1]
    goal = (f"the goal of {want}× on hello holds there at " + (cells(held) or "no cell")
            + (f", not at {cells(missed)}" if missed else ""))
    return (f"**This record against the full run.** The full run ({os.path.relpath(full, ROOT)}: "
            f"{text('provenance_commits')}, {started}) is {when} this record. It measures ring ÷ Granian, "
            f"unpipelined, on hello at c16 {text('ratio_ring_granian_c16')}, c64 {text('ratio_ring_granian_c64')} "
            f"and c256 {text('ratio_ring_granian_c256')}, and on Flask at c16 {text('ratio_ring_granian_flask')}: "
            f"{goal}. The verdicts above are this record's; the paper and the headline results cite the full "
            "run's.")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: c64 only (+ flask c16), 1 round, short cells")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=float, default=0.5)
    ap.add_argument("--duration", type=float, default=1.5)
    ap.add_argument("--pipeline", type=int, default=16)
    ap.add_argument("--cserve", default=os.path.join(ROOT, "cserve"))
    ap.add_argument("--baseline-bin", help="another cserve binary: its ring and dgram rows are added")
    ap.add_argument("--out", default=os.path.join(ROOT, "experiments", "results", "bench"))
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--readme", metavar="JSON", help="only rewrite the bench block (docs/results.md) from a record")
    ap.add_argument("--readme-replica", metavar="JSON",
                    help="only rewrite the second bench block (docs/results.md: the same bench on another machine)")
    a = ap.parse_args()
    if a.readme or a.readme_replica:
        if a.readme:
            generated.write("bench", a.readme)
        if a.readme_replica:
            generated.write("bench-replica", a.readme_replica)
        return
    if a.quick:
        a.rounds, a.warmup, a.duration = 1, 0.3, 0.7
    rng = random.Random(a.seed)
    tmp = tempfile.mkdtemp(prefix="cserve-bench-")

    todo = cells(a)
    servers = {}
    started = time.time()
    meta = {"time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": shlex.join(["python3", "-m", "experiments.bench"] + sys.argv[1:]), "machine": machine(a.cserve),
            "args": vars(a)}
    if a.baseline_bin:
        meta["baseline"] = {"bin": a.baseline_bin, "commit": git_rev(a.baseline_bin) or "unknown",
                            "version": subprocess.run([a.baseline_bin, "--version"], capture_output=True,
                                                      text=True).stdout.strip()}
    steal0 = steal_jiffies()
    records, loads = [], []
    try:
        for s, app, _, _ in todo:
            if (s, app) in servers:
                continue
            if s == "granian":
                servers[(s, app)] = Server(s, app, granian_cmd(app), "granian", tmp)
            elif s.startswith("base-"):
                servers[(s, app)] = Server(s, app, cserve_cmd(a.baseline_bin, s[5:], app), "cserve", tmp)
            else:
                servers[(s, app)] = Server(s, app, cserve_cmd(a.cserve, s, app), "cserve", tmp)
        for rnd in range(a.rounds):
            order = todo[:]
            rng.shuffle(order)
            for i, (s, app, c, p) in enumerate(order):
                rec = run_cell(servers[(s, app)], c, p, a)
                rec["round"] = rnd
                records.append(rec)
                loads.append(rec["loadavg"])
                print(f"round {rnd + 1}/{a.rounds} [{i + 1}/{len(order)}] {s:<10} {app:<5} c{c:<3} "
                      f"p{p:<2} {rec['rps'] or 0:>10.0f} rps", flush=True)
    finally:
        for srv in servers.values():
            srv.stop()
    steal1 = steal_jiffies()
    meta["seconds"] = round(time.time() - started, 1)
    meta["loadavg_min"], meta["loadavg_max"] = (min(loads), max(loads)) if loads else (None, None)
    meta["steal_pct"] = steal_pct(steal0, steal1)
    summ = summarise(records)
    gl = goals(summ, a)
    os.makedirs(a.out, exist_ok=True)
    stamp = "quick" if a.quick else "bench"
    with open(os.path.join(a.out, f"{stamp}.json"), "w") as f:
        json.dump({"meta": meta, "records": records,
                   "summary": [dict(zip(("server", "app", "conns", "pipeline"), k), **v) for k, v in summ.items()],
                   "goals": [{"goal": n, "pass": ok, "detail": d} for n, ok, d in gl]}, f, indent=1)
    md = markdown(meta, summ, gl, a)
    with open(os.path.join(a.out, f"{stamp}.md"), "w") as f:
        f.write(md)
    print()
    for name, ok, detail in gl:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    print(f"\n{meta['seconds']} s; results in {os.path.relpath(a.out, ROOT)}/{stamp}.{{json,md}}")


if __name__ == "__main__":
    main()

"""Syscalls per request, per thread, by syscall: checks a handoff's syscall
budget from outside the process (ring: ≪ 0.1 per request on the handoff path;
dgram: send + recv on each side, plus the EAGAIN recv that ends a drain).

    python3 -m experiments.strace_per_request --pid PID --url http://127.0.0.1:PORT/ [-c 16] [-d 5]
                          [--tool strace|perf-trace] [--children] [--wrk-cpus 1] [--json OUT]

It attaches one `strace -c -p TID` per thread (so the counts stay per thread;
`strace -c -f` would sum the threads), runs `wrk -t1 -cC -dD` against URL,
detaches, reads the request count from wrk's output and prints calls and
errors (EAGAIN, mostly) per request for every syscall of every thread.

Caveat, and why --tool perf-trace exists: ptrace stops the thread at every
syscall, so under strace the server runs many times slower and the *timing*
shapes change — a ring consumer that would have caught the next job while
spinning now parks, and a loop that drains more completions per pass now
drains fewer. Counts under strace are an upper bound for the park/wake
syscalls; `perf trace -s` (syscall tracepoints, no ptrace) disturbs far less.
Cross-check either with the in-process handoff counters (--stats-json).
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from experiments.lib.threadcpu import descendants, parse_wrk


def threads_of(pids):
    out = []
    for pid in pids:
        try:
            tids = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    out.append((pid, tid, f.read().strip()))
            except OSError:
                pass
    return out


def parse_strace_c(text):
    """{syscall: (calls, errors)} from `strace -c` output."""
    out = {}
    for line in text.splitlines():
        t = line.split()
        if len(t) < 5 or not re.match(r"^[\d.]+$", t[0]) or t[-1] == "total":
            continue
        name = t[-1]
        calls = int(t[3])
        errors = int(t[4]) if len(t) >= 6 else 0
        out[name] = (calls, errors)
    return out


def parse_perf_trace_s(text):
    """{tid: (comm, {syscall: (calls, errors)})} from `perf trace -s` output."""
    out, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^\s*(.+?) \((\d+)\), \d+ events", line)
        if m:
            cur = out.setdefault(int(m.group(2)), (m.group(1), {}))[1]
            continue
        t = line.split()
        if cur is not None and len(t) >= 4 and t[1].isdigit() and t[2].isdigit():
            cur[t[0]] = (int(t[1]), int(t[2]))
    return out


def run_wrk(url, conns, secs, cpus):
    cmd = ["wrk", "-t1", f"-c{conns}", f"-d{secs}s", url]
    if cpus:
        cmd = ["taskset", "-c", cpus] + cmd
    return cmd, subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--url", required=True)
    ap.add_argument("-c", "--connections", type=int, default=16)
    ap.add_argument("-d", "--duration", type=float, default=5)
    ap.add_argument("--tool", choices=("strace", "perf-trace"), default="strace")
    ap.add_argument("--children", action="store_true", help="also trace descendant processes")
    ap.add_argument("--wrk-cpus", help="taskset CPU list for wrk")
    ap.add_argument("--min", type=float, default=0.001, help="hide syscalls under this many per request")
    ap.add_argument("--json")
    a = ap.parse_args()

    pids = descendants(a.pid) if a.children else [a.pid]
    ths = threads_of(pids)
    tmp = tempfile.mkdtemp(prefix="strace-pr-")
    tracers = []
    if a.tool == "strace":
        for pid, tid, comm in ths:
            out = os.path.join(tmp, f"{tid}.txt")
            tracers.append((tid, comm, out, subprocess.Popen(
                ["strace", "-c", "-q", "-p", str(tid), "-o", out],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
    else:
        out = os.path.join(tmp, "perf-trace.txt")
        tracers.append((None, None, out, subprocess.Popen(
            ["perf", "trace", "-s", "-o", out, "-p", ",".join(map(str, pids))],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
    time.sleep(1.0)  # let every tracer attach before the load starts
    try:
        wrk_cmd, wrk_out = run_wrk(a.url, a.connections, int(a.duration), a.wrk_cpus)
    finally:
        time.sleep(0.2)
        for *_, p in tracers:
            p.send_signal(signal.SIGINT)
        for *_, p in tracers:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
    reqs, secs, rps = parse_wrk(wrk_out)
    if not reqs:
        sys.exit("strace_per_request: no requests counted by wrk:\n" + wrk_out)

    per_thread = []
    if a.tool == "strace":
        for tid, comm, out, _ in tracers:
            with open(out) as f:
                per_thread.append((tid, comm, parse_strace_c(f.read())))
    else:
        with open(tracers[0][2]) as f:
            for tid, (comm, calls) in sorted(parse_perf_trace_s(f.read()).items()):
                per_thread.append((tid, comm, calls))

    print(f"{a.tool}: {' '.join(wrk_cmd)}: {reqs} requests in {secs:.2f} s ({rps:.0f} rps under the tracer)")
    res = {"tool": a.tool, "wrk": " ".join(wrk_cmd), "requests": reqs, "seconds": secs, "rps": rps, "threads": []}
    for tid, comm, calls in per_thread:
        total = sum(c for c, _ in calls.values())
        if total / reqs < a.min:
            continue
        print(f"\n{comm} [{tid}]: {total / reqs:.3f} syscalls per request\n"
              f"  {'syscall':<18} {'calls/req':>10} {'errors/req':>11}")
        rows = []
        for name, (c, e) in sorted(calls.items(), key=lambda kv: -kv[1][0]):
            if c / reqs < a.min:
                continue
            rows.append({"syscall": name, "calls_per_request": round(c / reqs, 4),
                         "errors_per_request": round(e / reqs, 4), "calls": c, "errors": e})
            print(f"  {name:<18} {c / reqs:>10.3f} {e / reqs:>11.3f}")
        res["threads"].append({"tid": tid, "name": comm, "syscalls_per_request": round(total / reqs, 4),
                               "by_syscall": rows})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()

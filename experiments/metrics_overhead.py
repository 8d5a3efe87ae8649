#!/usr/bin/env python3
"""What --metrics-bind costs: the default app (apps/hello.py) and handoff
served with and without it, /metrics scraped every second while it is on,
in interleaved rounds of `wrk -t1 -c64 -d5s`, each round on a fresh server.
Each round records the CPU the hypervisor stole while it ran (/proc/stat);
a round that lost more than --max-steal of a core is run again (up to three
times) and, if it still does, kept but marked. Prints every round and, per
mode, the median with the min-max, and the median of the per-round ratios
(with/without run back to back, so slow drifts of the machine cancel);
writes the same to experiments/results/metrics_overhead/overhead.txt with
the machine and the commit.

    /usr/bin/python3 -m experiments.metrics_overhead [--rounds 5] [--duration 5]
    /usr/bin/python3 -m experiments.metrics_overhead --readme    # docs/instruments.md's block"""
import argparse
import os
import pathlib
import platform
import re
import signal
import socket
import statistics
import subprocess
import threading
import time
import urllib.request

from experiments.lib import generated

ROOT = pathlib.Path(__file__).resolve().parents[1]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def steal_jiffies():
    with open("/proc/stat") as f:
        return int(f.readline().split()[8])


def proc_cpu_s(pid):
    """user + system CPU seconds of every thread of process pid so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_round(metrics, duration):
    port = free_port()
    args = [str(ROOT / "cserve"), "--bind", f"127.0.0.1:{port}"]
    mport = None
    if metrics:
        mport = free_port()
        args += ["--metrics-bind", f"127.0.0.1:{mport}"]
    srv = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stop = threading.Event()
    scrapes = [0]

    def scrape():
        while not stop.wait(1.0):
            with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5) as r:
                r.read()
            scrapes[0] += 1
    s0 = t0 = None
    try:
        wait_port(port)
        if metrics:
            wait_port(mport)
            t = threading.Thread(target=scrape, daemon=True)
            t.start()
        s0, t0, c0 = steal_jiffies(), time.monotonic(), proc_cpu_s(srv.pid)
        out = subprocess.run(["wrk", "-t1", "-c64", f"-d{duration}s", f"http://127.0.0.1:{port}/"],
                             capture_output=True, text=True, check=True).stdout
        steal = (steal_jiffies() - s0) / os.sysconf("SC_CLK_TCK") / (time.monotonic() - t0)
        cpu = proc_cpu_s(srv.pid) - c0
    finally:
        stop.set()
        srv.send_signal(signal.SIGTERM)
        srv.wait(timeout=30)
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    n = re.search(r"(\d+) requests in", out)
    if not m or not n or "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError("wrk reported errors or no rate:\n" + out)
    return float(m.group(1)), scrapes[0], steal, 1e6 * cpu / int(n.group(1))


def scrape_cost(path, count):
    """CPU µs the server spends per scrape of path, on an idle server
    scraped count times back to back, less what the idle server spends
    over the same time without scrapes (its loop's twice-a-second
    snapshots): what one scrape adds, whatever else the server does."""
    port, mport = free_port(), free_port()
    srv = subprocess.Popen([str(ROOT / "cserve"), "--bind", f"127.0.0.1:{port}",
                            "--metrics-bind", f"127.0.0.1:{mport}"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        wait_port(mport)
        time.sleep(1)
        c0, t0 = proc_cpu_s(srv.pid), time.monotonic()
        for _ in range(count):
            with urllib.request.urlopen(f"http://127.0.0.1:{mport}{path}", timeout=5) as r:
                r.read()
        busy_cpu, busy_s = proc_cpu_s(srv.pid) - c0, time.monotonic() - t0
        c0, t0 = proc_cpu_s(srv.pid), time.monotonic()
        time.sleep(max(busy_s, 3))
        idle_per_s = (proc_cpu_s(srv.pid) - c0) / (time.monotonic() - t0)
    finally:
        srv.send_signal(signal.SIGTERM)
        srv.wait(timeout=30)
    return 1e6 * (busy_cpu - idle_per_s * busy_s) / count, 1e6 * idle_per_s


RECORD = ROOT / "experiments/results/metrics_overhead/overhead.txt"


def readme_body(record, doc=None):
    """The "metrics-overhead" block (experiments/lib/generated.py): the
    record's first line (what ran, where) and its summary lines."""
    lines = pathlib.Path(record).read_text().splitlines()
    summary = [ln for ln in lines[1:] if not ln.startswith("round ")]
    return "\n".join(["", lines[0] + ":", ""] + [f"- {ln}" for ln in summary] + [""])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--readme", action="store_true", help="only rewrite the block in docs/instruments.md")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--max-steal", type=float, default=0.05, help="cores (default 0.05)")
    ap.add_argument("--scrapes", type=int, default=2000, help="scrapes timed per endpoint (default 2000)")
    a = ap.parse_args()
    if a.readme:
        generated.write("metrics-overhead")
        return
    subprocess.run(["make", "-s", "all"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    rates = {False: [], True: []}
    cpus = {False: [], True: []}
    lines = []
    ratios = []
    stolen = 0
    for i in range(a.rounds):
        pair = {}
        for metrics in ((False, True) if i % 2 == 0 else (True, False)):  # alternate who goes first
            for attempt in range(4):
                rps, scrapes, steal, us = one_round(metrics, a.duration)
                if steal <= a.max_steal:
                    break
                print(f"round {i + 1}: {steal:.2f} core stolen, run again", flush=True)
            stolen += steal > a.max_steal
            rates[metrics].append(rps)
            cpus[metrics].append(us)
            pair[metrics] = (rps, us)
            line = (f"round {i + 1} {'with' if metrics else 'without'} --metrics-bind: {rps:.0f} requests/s, "
                    f"{us:.2f} server CPU µs per request, steal {steal:.3f} core" + ("  (over the bound)" if steal > a.max_steal else "") +
                    (f" ({scrapes} scrapes)" if metrics else ""))
            print(line, flush=True)
            lines.append(line)
        ratios.append((pair[True][0] / pair[False][0], pair[True][1] / pair[False][1]))
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                         text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    head = (f"python3 -m experiments.metrics_overhead at commit {rev}{' (modified)' if dirty else ''}, "
            f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}: {cpu}, {os.cpu_count()} CPUs, "
            f"kernel {platform.release()}; wrk -t1 -c64 -d{a.duration}s, {a.rounds} interleaved rounds each, "
            f"/metrics scraped every second while on; a round losing > {a.max_steal} core to steal is rerun "
            f"up to 3 times ({stolen} still over it)")
    summary = []
    for metrics in (False, True):
        r = rates[metrics]
        summary.append(f"{'with' if metrics else 'without'} --metrics-bind: median {statistics.median(r):.0f} "
                       f"requests/s (min {min(r):.0f}, max {max(r):.0f})")
    delta = statistics.median(rates[True]) / statistics.median(rates[False]) - 1
    summary.append(f"difference of the medians: {100 * delta:+.1f}%")
    for k, what in ((0, "rate"), (1, "server CPU per request")):
        r = [x[k] for x in ratios]
        summary.append(f"per-round {what}, with/without: median {100 * (statistics.median(r) - 1):+.1f}% "
                       f"(min {100 * (min(r) - 1):+.1f}%, max {100 * (max(r) - 1):+.1f}%)")
    for metrics in (False, True):
        u = cpus[metrics]
        summary.append(f"{'with' if metrics else 'without'} --metrics-bind: median {statistics.median(u):.2f} "
                       f"server CPU µs per request (min {min(u):.2f}, max {max(u):.2f})")
    # The deterministic part: what one scrape costs, what the snapshots cost
    # an idle server, and so what scraping once a second takes from a server
    # that keeps one core busy (the rate rounds above are too noisy on a
    # shared machine to resolve that directly).
    costs = {}
    for path in ("/metrics", "/stats.json"):
        per_scrape, idle = scrape_cost(path, a.scrapes)
        costs[path] = per_scrape
        summary.append(f"{path}: {per_scrape:.0f} CPU µs per scrape ({a.scrapes} scrapes of an idle server, "
                       f"less its own CPU while idle: {idle:.0f} µs per second, counted in clock ticks of "
                       f"{1e6 / os.sysconf('SC_CLK_TCK'):.0f} µs)")
    summary.append(f"one /metrics scrape per second costs {costs['/metrics'] / 1e4:.3f}% of one core")
    out = ROOT / "experiments/results/metrics_overhead"
    out.mkdir(parents=True, exist_ok=True)
    (out / "overhead.txt").write_text("\n".join([head, *lines, *summary]) + "\n")
    print(head)
    print("\n".join(summary))


if __name__ == "__main__":
    main()

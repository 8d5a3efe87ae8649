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

    /usr/bin/python3 scripts/metrics_overhead.py [--rounds 5] [--duration 5]"""
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
        s0, t0 = steal_jiffies(), time.monotonic()
        out = subprocess.run(["wrk", "-t1", "-c64", f"-d{duration}s", f"http://127.0.0.1:{port}/"],
                             capture_output=True, text=True, check=True).stdout
        steal = (steal_jiffies() - s0) / os.sysconf("SC_CLK_TCK") / (time.monotonic() - t0)
    finally:
        stop.set()
        srv.send_signal(signal.SIGTERM)
        srv.wait(timeout=30)
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not m or "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError("wrk reported errors or no rate:\n" + out)
    return float(m.group(1)), scrapes[0], steal


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--max-steal", type=float, default=0.05, help="cores (default 0.05)")
    a = ap.parse_args()
    subprocess.run(["make", "-s", "all"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    rates = {False: [], True: []}
    lines = []
    ratios = []
    stolen = 0
    for i in range(a.rounds):
        pair = {}
        for metrics in ((False, True) if i % 2 == 0 else (True, False)):  # alternate who goes first
            for attempt in range(4):
                rps, scrapes, steal = one_round(metrics, a.duration)
                if steal <= a.max_steal:
                    break
                print(f"round {i + 1}: {steal:.2f} core stolen, run again", flush=True)
            stolen += steal > a.max_steal
            rates[metrics].append(rps)
            pair[metrics] = rps
            line = (f"round {i + 1} {'with' if metrics else 'without'} --metrics-bind: {rps:.0f} requests/s, "
                    f"steal {steal:.3f} core" + ("  (over the bound)" if steal > a.max_steal else "") +
                    (f" ({scrapes} scrapes)" if metrics else ""))
            print(line, flush=True)
            lines.append(line)
        ratios.append(pair[True] / pair[False])
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                         text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    head = (f"scripts/metrics_overhead.py at commit {rev}{' (modified)' if dirty else ''}, "
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
    summary.append(f"per-round ratio with/without: median {100 * (statistics.median(ratios) - 1):+.1f}% "
                   f"(min {100 * (min(ratios) - 1):+.1f}%, max {100 * (max(ratios) - 1):+.1f}%)")
    out = ROOT / "experiments/results/metrics_overhead"
    out.mkdir(parents=True, exist_ok=True)
    (out / "overhead.txt").write_text("\n".join([head, *lines, *summary]) + "\n")
    print(head)
    print("\n".join(summary))


if __name__ == "__main__":
    main()

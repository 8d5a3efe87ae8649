"""Per-thread CPU sampler: a `ps -M` (per-thread CPU) for Linux.

    python3 -m experiments.lib.threadcpu --pid PID [--children] [--interval 1] [--duration N]
                 [--requests N | --wrk WRK_OUTPUT] [--json OUT] [--source stat|schedstat]

Every interval it reads /proc/PID/task/*/stat (utime + stime, clock ticks) for
each thread — and with --children, for every descendant process too (gunicorn,
granian and `cserve --workers N` run their Python in child processes) — and
turns the differences into CPU % per interval per thread. It prints the median
per thread (robust to the first and last partial
seconds), the mean, and, given the request count (or a wrk output file to read
it and the duration from), µs of CPU per request: median CPU fraction / rps.

--source schedstat reads /proc/.../schedstat instead (on-CPU nanoseconds, no
tick quantisation); stat is the default because it is what `ps`/`top` use.

This is the cross-check, from outside the process, for cserve's in-process
CLOCK_THREAD_CPUTIME_ID figures (--stats-json). Importable: sample() and
summarise() are what experiments/run.py uses.
"""
import argparse
import json
import os
import re
import statistics
import sys
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("latin-1")
    except OSError:  # the thread or process exited between listdir and open
        return None


def _stat_fields(text):
    # comm is in parentheses and may hold spaces or ')': split after the last ')'.
    r = text.rfind(")")
    comm = text[text.find("(") + 1:r]
    rest = text[r + 2:].split()
    return comm, rest  # rest[0] is field 3 (state)


def last_cpu(tid):
    """The CPU thread tid last ran on (/proc/TID/stat, field 39), or None
    once it has ended."""
    t = _read(f"/proc/{tid}/stat")
    return None if t is None else int(_stat_fields(t)[1][36])


def descendants(pid):
    """pid and every live descendant process, by scanning /proc for ppids."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        t = _read(f"/proc/{d}/stat")
        if t is None:
            continue
        _, rest = _stat_fields(t)
        children.setdefault(int(rest[1]), []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, ()))
    return out


def rss_kib(pids):
    """VmRSS summed over pids (KiB); a process that ended counts 0."""
    total = 0
    for pid in pids:
        t = _read(f"/proc/{pid}/status")
        for line in (t or "").splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


def snapshot(pids, source="stat"):
    """{(pid, tid): (comm, cpu_seconds)} for every thread of every pid."""
    snap = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            t = _read(f"/proc/{pid}/task/{tid}/stat")
            if t is None:
                continue
            comm, rest = _stat_fields(t)
            if source == "schedstat":
                s = _read(f"/proc/{pid}/task/{tid}/schedstat")
                if s is None:
                    continue
                cpu = int(s.split()[0]) / 1e9
            else:
                # utime, stime are fields 14, 15 (1-based) = rest[11], rest[12]
                cpu = (int(rest[11]) + int(rest[12])) / CLK_TCK
            snap[(pid, int(tid))] = (comm, cpu)
    return snap


def sample(pid, interval=1.0, duration=10.0, children=False, source="stat", stop=None):
    """Sample for duration seconds; returns {(pid, tid): {"name", "pct": [..], "cpu_s"}}.
    pid may be a list of root pids (e.g. the server and the load generator).
    stop: an optional threading.Event that ends sampling early."""
    roots = pid if isinstance(pid, (list, tuple)) else [pid]

    def tree():
        return [q for r in roots for q in descendants(r)] if children else list(roots)
    pids = tree()
    prev, t_prev = snapshot(pids, source), time.monotonic()
    series = {}
    deadline = t_prev + duration
    while True:
        now = time.monotonic()
        if now >= deadline - 1e-3 or (stop is not None and stop.is_set()):
            break
        wait = min(interval, deadline - now)
        if stop is not None:
            if stop.wait(wait):
                break
        else:
            time.sleep(wait)
        if children:  # workers can be (re)spawned while we sample
            pids = tree()
        cur, t_cur = snapshot(pids, source), time.monotonic()
        dt = t_cur - t_prev
        if dt < interval * 0.5:  # a truncated last interval is mostly quantisation
            break
        for key, (comm, cpu) in cur.items():
            if key not in prev:
                continue  # born during this interval: start counting next one
            ent = series.setdefault(key, {"name": comm, "pct": [], "cpu_s": 0.0})
            ent["name"] = comm
            d = cpu - prev[key][1]
            ent["pct"].append(100.0 * d / dt)
            ent["cpu_s"] += d
        prev, t_prev = cur, t_cur
    return series


def parse_wrk(text):
    """(requests, seconds, rps) from wrk's output."""
    m = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)\b", text)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
    if not m:
        return None, None, float(rps.group(1)) if rps else None
    scale = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[m.group(3)]
    n, secs = int(m.group(1)), float(m.group(2)) * scale
    return n, secs, float(rps.group(1)) if rps else n / secs


def summarise(series, rps=None, min_pct=0.5):
    """Rows sorted by pid then median CPU: name, pid, tid, median/mean/min/max %,
    us_per_request (median fraction / rps). Threads under min_pct median are dropped."""
    rows = []
    for (pid, tid), ent in series.items():
        p = ent["pct"]
        if not p:
            continue
        med = statistics.median(p)
        if med < min_pct and max(p) < min_pct:
            continue
        rows.append({
            "name": ent["name"], "pid": pid, "tid": tid, "samples": len(p),
            "median_pct": round(med, 2), "mean_pct": round(statistics.fmean(p), 2),
            "min_pct": round(min(p), 2), "max_pct": round(max(p), 2),
            "cpu_s": round(ent["cpu_s"], 4),
            "us_per_request": round(med / 100.0 / rps * 1e6, 3) if rps else None,
        })
    rows.sort(key=lambda r: (r["pid"], -r["median_pct"]))
    return rows


def print_table(rows, out=sys.stdout, rps=None):
    hdr = f"{'thread':<18} {'pid':>7} {'tid':>7} {'n':>3} {'median%':>8} {'mean%':>7} {'min%':>6} {'max%':>6}"
    if rps:
        hdr += f" {'us/req':>8}"
    print(hdr, file=out)
    for r in rows:
        line = (f"{r['name']:<18} {r['pid']:>7} {r['tid']:>7} {r['samples']:>3} {r['median_pct']:>8.1f} "
                f"{r['mean_pct']:>7.1f} {r['min_pct']:>6.1f} {r['max_pct']:>6.1f}")
        if rps:
            line += f" {r['us_per_request']:>8.2f}"
        print(line, file=out)
    tot = sum(r["median_pct"] for r in rows)
    print(f"{'sum of medians':<18} {'':>7} {'':>7} {'':>3} {tot:>8.1f}" +
          (f" {'':>7} {'':>6} {'':>6} {tot / 100.0 / rps * 1e6:>8.2f}" if rps else ""), file=out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--children", action="store_true", help="also sample descendant processes")
    ap.add_argument("--source", choices=("stat", "schedstat"), default="stat")
    ap.add_argument("--requests", type=int, help="requests served during the sampled duration")
    ap.add_argument("--wrk", help="a wrk output file: its request count and duration give the rate")
    ap.add_argument("--min-pct", type=float, default=0.5, help="hide threads below this median %%")
    ap.add_argument("--json", help="write the summary as JSON here")
    a = ap.parse_args()
    if not os.path.isdir(f"/proc/{a.pid}"):
        sys.exit(f"threadcpu: no process {a.pid}")
    series = sample(a.pid, a.interval, a.duration, a.children, a.source)
    rps = None
    if a.requests:
        rps = a.requests / a.duration
    elif a.wrk:
        with open(a.wrk) as f:
            _, _, rps = parse_wrk(f.read())
    rows = summarise(series, rps, a.min_pct)
    print_table(rows, rps=rps)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"pid": a.pid, "interval": a.interval, "duration": a.duration,
                       "source": a.source, "children": a.children, "rps": rps,
                       "threads": rows}, f, indent=1)


if __name__ == "__main__":
    main()

"""Reduce an on-CPU `perf record` to µs of CPU per request, per thread, by
syscall and by function: where the loop's and the Python thread's time
goes.

    perf script -i perf.data -F comm,tid,period,ip,sym,dso | \\
        python3 -m experiments.lib.perf_reduce [--requests N | --stats-json STATS | --wrk WRK --seconds S] [--markdown] [--json OUT]

ON-CPU SAMPLES ONLY. The input must come from `perf record -e cpu-clock`
(a software hrtimer event that ticks only while the thread is running; with
-F 999 the kernel turns the frequency into a fixed period of ~1.001 ms of CPU,
which `period` carries). So a thread's samples add up to its CPU time, each
sample is CPU actually spent, and a share of samples is a share of CPU. A
wall-clock sampler (macOS `sample`, `perf record` with off-CPU/sched events,
py-spy in its default mode, gdb polling) also samples a thread while it is
blocked — in epoll_wait, futex, a blocking recv — and charges that waiting as
if it were work (experiments/sampler_trap.py shows the difference on one
run). In a pipeline the slower stage keeps the other
one waiting, so the wait share says how busy the *other* thread is, not what
this one costs. Never feed this script anything but cpu-clock (or task-clock)
samples; it refuses other events if `event` is in the input.

Scaling: each thread's rows are its samples' CPU (sum of periods) divided by
the requests served in the profiled window. Requests come from, in order:
--stats-json (cserve's own per-thread `requests` for a window made to match
the perf window with SIGUSR2/SIGUSR1), --requests, or --wrk's rate times
--seconds. With --stats-json the in-process µs/request is printed beside the
sample-based one as a cross-check.

Syscalls are named by the kernel entry frame in the call chain
(__x64_sys_NAME / __do_sys_NAME / __se_sys_NAME); everything under it,
including scheduling inside a blocking call, belongs to that syscall. Kernel
samples without one are interrupts, page faults or the entry/exit path.
"""
import argparse
import collections
import functools
import json
import os
import re
import subprocess
import sys

SYS_RE = re.compile(r"^(?:__x64_sys_|__ia32_sys_|__do_sys_|__se_sys_|ksys_)(\w+)$")
ALIAS = {"recv": "recvfrom", "send": "sendto", "epoll_pwait": "epoll_wait",
         "epoll_pwait2": "epoll_wait", "pread64": "pread", "pwrite64": "pwrite"}
HEADER_RE = re.compile(r"^(\S.*?)\s+(\d+)\s+(?:(\S+):\s+)?(\d+)\s*(?:(\S+):)?\s*$")
FRAME_RE = re.compile(r"^\s+([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$")


def parse(stream):
    """Yield (comm, tid, period, frames) per sample; frames leaf first as (sym, dso)."""
    comm = tid = period = None
    frames = []
    for line in stream:
        line = line.rstrip("\n")
        if not line.strip():
            if comm is not None:
                yield comm, tid, period, frames
            comm, frames = None, []
            continue
        if not line[0].isspace():
            if comm is not None:
                yield comm, tid, period, frames
            # "comm tid period" (fields as -F comm,tid,period,ip,sym,dso), with an
            # optional "event:" column; the ip/sym/dso may follow on the same line
            # when there is no callchain.
            m = re.match(r"^(.*?)\s+(\d+)\s+(\d+)(?:\s+([\w-]+(?::\w+)?):)?\s*(.*)$", line)
            if not m:
                comm = None
                continue
            comm, tid, period = m.group(1).strip(), int(m.group(2)), int(m.group(3))
            ev = m.group(4)
            if ev and not ev.startswith(("cpu-clock", "task-clock")):
                sys.exit(f"perf_reduce: event {ev!r} is not an on-CPU clock event; refusing (see the docstring)")
            frames = []
            rest = m.group(5)
            if rest:
                fm = FRAME_RE.match(" " + rest)
                if fm:
                    frames.append((fm.group(2), fm.group(3)))
            continue
        fm = FRAME_RE.match(line)
        if fm and comm is not None:
            frames.append((fm.group(2), fm.group(3)))
    if comm is not None:
        yield comm, tid, period, frames


@functools.lru_cache(maxsize=None)
def own_functions(binary):
    """For a cserve that holds libpython statically (make PYTHON_LINK=static,
    the default for Debian's python3): the names of cserve's own functions,
    so that the interpreter's functions in the same executable count as
    Python, as they do when they come from libpython3.X.so. cserve's objects
    are compiled with -g, so `nm -l` gives each of its functions a source
    line, under the checkout that its main() (core/server/main.c) comes from; the
    archive's functions have none (Debian's) or lines elsewhere (an archive
    built with -g). None for a binary that holds no interpreter (it links
    the shared library) or cannot be read. It reads the binary as it is when
    the profile is reduced: reduce before rebuilding."""
    if not os.path.isfile(binary):
        return None
    try:
        out = subprocess.run(["nm", "-l", "--defined-only", binary], capture_output=True, text=True,
                             timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines, holds_python = {}, False
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) < 3 or parts[1] not in "tTwW":
            continue
        name, _, where = parts[2].partition("\t")
        if name == "Py_Initialize":
            holds_python = True
        if where:
            lines.setdefault(name.split(".")[0], where)
    main_src = lines.get("main", "").rsplit(":", 1)[0]
    if not holds_python or not main_src.endswith("/core/server/main.c"):
        return None
    root = main_src[:-len("core/server/main.c")]
    return {name for name, where in lines.items() if where.startswith(root)}


def user_class(sym, dso):
    """dso_class, except that a cserve function not of cserve's own source
    is the static interpreter's (own_functions)."""
    c = dso_class(dso)
    if c == "cserve" and sym not in ("[unknown]", "") and "@plt" not in sym:
        own = own_functions(dso)
        if own is not None and sym.split(".")[0].split("+")[0] not in own:
            return "python"
    return c


def dso_class(dso):
    d = dso.rsplit("/", 1)[-1]
    if "kernel" in d or d.startswith("["):
        return "kernel" if "kernel" in d else "unknown"
    if d.startswith("libpython") or re.match(r"python3(\.\d+)?$", d):
        return "python"
    if d.startswith(("libc.so", "libc-", "ld-linux", "libpthread", "libm.so")):
        return "libc"
    if d.startswith("libjemalloc"):
        return "jemalloc"
    if d.startswith("cserve"):
        return "cserve"
    if d.endswith(".so") or ".so." in d:
        return "other-lib:" + d
    return d


STRIP = re.compile(r"^(?:__x64_sys_|__ia32_sys_|__do_sys_|__se_sys_|__sys_|ksys_|do_|__GI___libc_|__GI___|__libc_|__)")
RETURN_PATH = ("exit_to_user_mode", "syscall_exit", "__schedule", "schedule", "irqentry_exit")


def _sysname(sym):
    name = STRIP.sub("", sym.split("@")[0]).split(".")[0]
    return ALIAS.get(name, name)


def classify(frames):
    """(bucket, leaf_function). bucket is 'sys:NAME', 'kernel:...', or 'user:<dso class>'.

    The syscall is the kernel frame called by do_syscall_64 (__x64_sys_X, or
    its inlined body: __sys_sendto, ksys_write, do_writev, do_epoll_wait,
    do_futex, ...). When that frame is the return path (a reschedule on the
    way out, exit_to_user_mode_loop), the libc wrapper below it names the
    call. Scheduling inside a blocking call, and the loopback receive
    processing a send does inline, stay with the syscall that did them."""
    if not frames:
        return "unknown", "[unknown]"
    leaf_sym, leaf_dso = frames[0]
    if "kernel" not in leaf_dso:
        return "user:" + user_class(leaf_sym, leaf_dso), leaf_sym
    for i, (sym, dso) in enumerate(frames):
        m = SYS_RE.match(sym)
        if m:
            name = m.group(1)
            return "sys:" + ALIAS.get(name, name), leaf_sym
        if sym.startswith("do_syscall_64"):
            below = frames[i - 1][0] if i > 0 else ""
            if i > 0 and not below.startswith(RETURN_PATH):
                return "sys:" + _sysname(below), leaf_sym
            for usym, udso in frames[i + 1:]:
                if "kernel" not in udso and not usym.startswith("entry_SYSCALL"):
                    if usym not in ("[unknown]", "syscall"):
                        return "sys:" + _sysname(usym), leaf_sym
                    break
            return "kernel:syscall return path", leaf_sym
    return "kernel:irq/fault/softirq", leaf_sym


def reduce(samples, by="name"):
    """{thread_key: {"name", "tids", "cpu_s", "n", "buckets": Counter(s), "funcs": Counter(s)}}."""
    threads = {}
    for comm, tid, period, frames in samples:
        key = comm if by == "name" else f"{comm}[{tid}]"
        t = threads.setdefault(key, {"name": comm, "tids": set(), "cpu_s": 0.0, "n": 0,
                                     "buckets": collections.Counter(), "funcs": collections.Counter()})
        s = period / 1e9
        t["tids"].add(tid)
        t["cpu_s"] += s
        t["n"] += 1
        bucket, leaf = classify(frames)
        t["buckets"][bucket] += s
        fdso = frames[0][1].rsplit("/", 1)[-1] if frames else "?"
        if bucket == "user:python" and fdso.startswith("cserve"):
            fdso += ", static libpython"
        t["funcs"][f"{leaf} ({fdso})"] += s
    return threads


def load_stats(path):
    """{thread name: thread dict} summed over workers (requests, cpu_s)."""
    with open(path) as f:
        st = json.load(f)
    out = {}
    for w in st.get("workers", []):
        for th in w.get("threads", []):
            o = out.setdefault(th["name"], {"requests": 0, "cpu_s": 0.0})
            o["requests"] += th.get("requests") or 0
            o["cpu_s"] += th.get("cpu_s") or 0.0
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input", nargs="?", default="-", help="perf script output (default stdin)")
    ap.add_argument("--requests", type=int, help="requests served during the perf window")
    ap.add_argument("--stats-json", help="cserve --stats-json file whose window matches the perf window")
    ap.add_argument("--wrk", help="wrk output: its rate times --seconds gives the requests")
    ap.add_argument("--seconds", type=float, help="length of the perf window")
    ap.add_argument("--by", choices=("name", "tid"), default="name",
                    help="merge threads of one name (workers>1: all loops together) or not")
    ap.add_argument("--top", type=int, default=12, help="functions listed per thread")
    ap.add_argument("--min-share", type=float, default=0.01, help="hide threads under this share of samples")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()

    stream = sys.stdin if a.input == "-" else open(a.input, errors="replace")
    threads = reduce(parse(stream), a.by)
    stats = load_stats(a.stats_json) if a.stats_json else {}
    req_default = a.requests
    if req_default is None and a.wrk and a.seconds:
        from experiments.lib.threadcpu import parse_wrk
        _, _, rps = parse_wrk(open(a.wrk).read())
        req_default = rps * a.seconds if rps else None

    total = sum(t["n"] for t in threads.values()) or 1
    out = []
    for key, t in sorted(threads.items(), key=lambda kv: -kv[1]["cpu_s"]):
        if t["n"] / total < a.min_share:
            continue
        st = stats.get(t["name"])
        reqs = st["requests"] if st and st["requests"] else req_default
        scale = 1e6 / reqs if reqs else None  # µs per request per CPU-second
        rows = []
        for b, s in t["buckets"].most_common():
            rows.append((b, s))
        out.append({
            "thread": key, "tids": sorted(t["tids"]), "samples": t["n"], "cpu_s": round(t["cpu_s"], 4),
            "requests": reqs,
            "us_per_request": round(t["cpu_s"] * scale, 3) if scale else None,
            "stats_us_per_request": round(st["cpu_s"] / st["requests"] * 1e6, 3) if st and st["requests"] else None,
            "by_bucket": [{"bucket": b, "cpu_s": round(s, 4), "share": round(s / t["cpu_s"], 4),
                           "us_per_request": round(s * scale, 3) if scale else None} for b, s in rows],
            "by_function": [{"function": f, "cpu_s": round(s, 4), "share": round(s / t["cpu_s"], 4),
                             "us_per_request": round(s * scale, 3) if scale else None}
                            for f, s in t["funcs"].most_common(a.top)],
        })

    for th in out:
        unit = "µs/req" if th["us_per_request"] is not None else "share"
        title = (f"{th['thread']} (tids {','.join(map(str, th['tids']))}): {th['samples']} samples, "
                 f"{th['cpu_s']:.3f} s CPU, requests {th['requests']}, "
                 f"{th['us_per_request']} µs/req from samples"
                 + (f", {th['stats_us_per_request']} µs/req in-process" if th["stats_us_per_request"] else ""))
        if a.markdown:
            print(f"\n**{title}**\n\n| by syscall / kernel / user space | {unit} | share |\n|---|---:|---:|")
        else:
            print(f"\n== {title}\n{'by syscall / kernel / user space':<44} {unit:>8} {'share':>7}")
        for r in th["by_bucket"]:
            v = r["us_per_request"] if r["us_per_request"] is not None else r["share"]
            print(f"| {r['bucket']} | {v:.3f} | {100 * r['share']:.1f} % |" if a.markdown
                  else f"{r['bucket']:<44} {v:>8.3f} {100 * r['share']:>6.1f}%")
        if a.markdown:
            print(f"| **total** | **{th['us_per_request'] or 1.0:.3f}** | 100 % |")
            print(f"\n| top functions (self) | {unit} | share |\n|---|---:|---:|")
        else:
            print(f"{'total':<44} {th['us_per_request'] or 1.0:>8.3f}\n-- top functions (self)")
        for r in th["by_function"]:
            v = r["us_per_request"] if r["us_per_request"] is not None else r["share"]
            fn = r["function"].replace("|", "\\|")
            print(f"| `{fn}` | {v:.3f} | {100 * r['share']:.1f} % |" if a.markdown
                  else f"{r['function'][:60]:<60} {v:>8.3f} {100 * r['share']:>6.1f}%")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"threads": out}, f, indent=1)


if __name__ == "__main__":
    main()

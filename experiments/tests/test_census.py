"""The descriptor census that attributes a profile's syscalls
(experiments/lib/perfsplit.py: census) against what the real server does:
strace -f -yy names the descriptor of every recvfrom, sendto, read, write
and sendmsg each of cserve's threads makes under each handoff, and where the
census says a thread's calls of a syscall are all (or none) the handoff's,
every traced call is on the handoff's descriptors (or none is). Under dgram
the loop's recvfroms are mixed, and its counters' share matches the traced
calls' within a few per cent. A few seconds; needs strace."""
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from experiments.lib import perfsplit
from experiments.lib.serverctl import CSERVE, PIPELOAD, ROOT, free_port, start, stop, wait_ready

LINE = re.compile(r"^(\d+)\s+(recvfrom|sendto|read|write|sendmsg)\((\d+)<([^>]*)>")


def kind(desc):
    if desc.startswith(("/", "pipe:")):
        return "file"
    if desc.startswith("UNIX"):
        return "unix"
    if desc.startswith("TCP"):
        return "tcp"
    if "eventfd" in desc:
        return "eventfd"
    return "other"


def wait_for(what, cond, timeout=30.0):
    """Poll cond() until it is true; fail with what was awaited and the last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v or time.monotonic() > deadline:
            assert v, f"{what}: not so after {timeout:.0f} s (last {v!r})"
            return v
        time.sleep(0.02)


def thread_roles(pid):
    """{tid: role} of the server's threads (None for neither loop nor pool)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            out[int(tid)] = perfsplit.role(open(f"/proc/{pid}/task/{tid}/comm").read().strip())
        except OSError:
            pass  # the thread ended
    return out


def traced(pid):
    """Whether every thread of pid has a tracer attached."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            status = open(f"/proc/{pid}/task/{tid}/status").read()
        except OSError:
            continue
        if re.search(r"^TracerPid:\s+0$", status, re.M):
            return False
    return True


def trace(handoff, tmp_path):
    port = free_port()
    stats = tmp_path / f"{handoff}.json"
    proc, log = start([CSERVE, "--bind", f"127.0.0.1:{port}", "--log-level", "warning", "--handoff", handoff,
                       "--stats-json", str(stats), "--chdir", os.path.join(ROOT, "apps"), "hello:application"],
                      str(tmp_path / "server.log"))
    try:
        assert wait_ready(proc, port)
        roles = wait_for("a loop and a pool thread", lambda: (lambda r: {"loop", "pool"} <= set(r.values()) and r)(
            thread_roles(proc.pid)))
        out = tmp_path / f"{handoff}.strace"
        st = subprocess.Popen(["strace", "-f", "-yy", "-qq", "-e", "trace=recvfrom,sendto,read,write,sendmsg",
                               "-p", str(proc.pid), "-o", str(out)])
        wait_for("strace attached to every thread", lambda: traced(proc.pid))
        proc.send_signal(signal.SIGUSR2)  # the counters' window: the traced load only
        subprocess.run([PIPELOAD, "-c", "4", "-p", "4", "-n", "2000", f"http://127.0.0.1:{port}/"], check=True,
                       capture_output=True, timeout=60)
        mtime = os.stat(stats).st_mtime_ns if stats.exists() else 0
        proc.send_signal(signal.SIGUSR1)
        # the server renames the window's file into place: a new mtime is a whole file
        wait_for("the stats window written", lambda: stats.exists() and os.stat(stats).st_mtime_ns != mtime)
        st.send_signal(signal.SIGINT)
        st.wait(timeout=10)
    finally:
        stop(proc)
        log.close()
    calls = {}
    for line in open(out):
        m = LINE.match(line)
        if m and roles.get(int(m.group(1))):
            key = (roles[int(m.group(1))], m.group(2))
            calls.setdefault(key, {}).setdefault(kind(m.group(4)), 0)
            calls[key][kind(m.group(4))] += 1
    import json
    threads = [t for w in json.load(open(stats))["workers"] for t in w["threads"]]
    return calls, perfsplit.census(handoff, threads)


@pytest.mark.parametrize("handoff", ["dgram", "eventfd", "ring", "condvar"])
def test_census_matches_the_descriptors_strace_sees(handoff, tmp_path):
    if not shutil.which("strace"):
        pytest.skip("no strace")
    calls, cen = trace(handoff, tmp_path)
    assert calls, "strace saw no calls"
    handoff_kinds = {"unix", "eventfd"}
    for (role, sc), kinds in calls.items():
        # A file or a pipe (the stats window written on SIGUSR1, the signal
        # self-pipe) is neither a client's socket nor the handoff's, and is
        # not written per request: the census leaves them out.
        kinds = {k: n for k, n in kinds.items() if k != "file"}
        if not kinds:
            continue
        share = cen[role].get(sc, 0.0)
        if share == perfsplit.FRAMED:  # mixed, its split left to the samples' frames
            continue
        on_handoff = sum(n for k, n in kinds.items() if k in handoff_kinds)
        total = sum(kinds.values())
        if share >= 1.0:
            assert on_handoff == total, (role, sc, kinds)
        elif share <= 0.0:
            assert on_handoff == 0, (role, sc, kinds)
        else:  # dgram's loop: the counters' share against the traced calls'
            assert abs(on_handoff / total - share) < 0.05, (role, sc, kinds, share)
    if handoff == "dgram":
        assert 0 < cen["loop"]["recvfrom"] < 1 and calls[("pool", "recvfrom")].keys() == {"unix"}

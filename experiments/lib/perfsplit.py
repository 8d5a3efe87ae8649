"""An on-CPU profile (scripts/profile.sh's perf.txt: `perf record -e
cpu-clock -g`, one line per sample with its call chain) split per thread
into the categories the seed note's tables use: the socket's recv, its send,
epoll, the handoff's syscalls, user space, and the kernel's rest, each in µs
of CPU per request.

experiments/lib/perf_reduce.py names each sample's syscall (or user-space library);
this adds the split of one syscall between two callers, which the seed note
made by subtraction: a sendto or recvfrom on the handoff's socketpair
(unix_* frames in the chain) or an eventfd read or write is the handoff's,
on the client's TCP socket the request's. futex and sched_yield are the
handoff's (the ring's park and wake, a pool's spin-then-park; Granian's
blocking-thread backoff is the same thing). A sample that landed in a
syscall's entry before the socket layer has no unix_/tcp_ frame and stays
with recv/send: the handoff's share is a slight undercount on dgram."""
import os

from .serverctl import ROOT

CATEGORIES = ("recv", "send", "epoll", "handoff", "user", "kernel other")
RECV = {"recvfrom", "read", "readv", "recvmsg", "recvmmsg", "accept4", "accept"}
SEND = {"sendto", "write", "writev", "sendmsg", "sendmmsg", "sendfile", "sendfile64", "splice"}
EPOLL = {"epoll_wait", "epoll_ctl", "epoll_pwait", "epoll_pwait2"}
HANDOFF = {"futex", "sched_yield", "futex_wait", "futex_wake"}


def _perf_reduce():
    from experiments.lib import perf_reduce
    return perf_reduce


def category(bucket, frames):
    """One sample's category from perf_reduce.classify's bucket and its call
    chain (leaf first, (symbol, dso) pairs)."""
    if bucket.startswith("user:") or bucket == "unknown":
        return "user"
    if not bucket.startswith("sys:"):
        return "kernel other"
    name = bucket[4:]
    syms = [s for s, _ in frames]
    if name in HANDOFF or any(s.startswith(("unix_", "eventfd_")) for s in syms):
        return "handoff"
    if name in EPOLL:
        return "epoll"
    if name in RECV:
        return "recv"
    if name in SEND:
        return "send"
    return "kernel other"


def split(perf_txt):
    """{thread name: {"cpu_s", category: cpu seconds, "python": the user
    share in the interpreter}} over every sample of perf_txt."""
    pr = _perf_reduce()
    out = {}
    with open(perf_txt, errors="replace") as f:
        for comm, _tid, period, frames in pr.parse(f):
            bucket, _leaf = pr.classify(frames)
            t = out.setdefault(comm, {"cpu_s": 0.0, "python": 0.0, **{c: 0.0 for c in CATEGORIES}})
            s = period / 1e9
            t["cpu_s"] += s
            t[category(bucket, frames)] += s
            if bucket == "user:python":
                t["python"] += s
    return out


def per_request(cpu, requests):
    """The split's seconds as µs per request (requests: the window's)."""
    if not requests:
        return None
    return {k: round(v / requests * 1e6, 3) for k, v in cpu.items()}

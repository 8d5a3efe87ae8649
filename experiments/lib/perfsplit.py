"""An on-CPU profile (scripts/profile.sh's perf.txt: `perf record -e
cpu-clock -g`, one line per sample with its call chain) split per thread
into the categories the seed note's tables use: the socket's recv, its send,
epoll, the handoff's syscalls, user space, and the kernel's rest, each in µs
of CPU per request.

experiments/lib/perf_reduce.py names each sample's syscall (or user-space
library). Which descriptor a call was on decides whether it is the
handoff's, by syscall and descriptor, not by the frames a sample happens to
carry: a sample in a syscall's entry, its file lookup or its return path has
no socket-family frame, yet belongs to the call. The descriptors each of
cserve's threads reaches by each syscall (census()):

  pool thread   every recvfrom, sendto, read and write is on the handoff's
                descriptors (dgram's socketpairs, eventfd's and the ring's
                eventfds): the pool does no client I/O
  loop thread   read and write are on eventfds (the client's sockets are
                reached by recv, send, sendmsg and sendfile only); recvfrom
                and sendto are the client's, except under dgram, where the
                loop's submit sendto and completion recvfrom are on its
                socketpairs. The share of its recvfroms that are the
                handoff's comes from the run's own counters (drain syscalls
                against client reads, both exact); its sendtos are mixed in
                a proportion the counters do not give (a client write is a
                send or a sendmsg), so those are split as the samples that
                show a family are ("framed")
  either        futex and sched_yield are the handoff's (the ring's park and
                wake, a pool's spin-then-park)

A sample in a syscall whose calls on that thread are all the handoff's
counts whole as handoff; in one that is never the handoff's, as recv or
send; in dgram's mixed loop calls, a sample with a unix_ frame is the
handoff's, one with a tcp_ frame the client's, and one with neither is
split by the calls' shares. Without a census (a peer's threads), the
frames decide, as the only evidence there is. Files and pipes (the stats
window, the signal self-pipe) are written once per window, not per
request; a loop writing an access log per request would need its own
census (the profiles run without one).

tally() keeps, per thread, each syscall's seconds by the socket family its
samples show, so a record can be split again with another census
(split_tally); split() does both for a perf.txt."""
CATEGORIES = ("recv", "send", "epoll", "handoff", "user", "kernel other")
RECV = {"recvfrom", "read", "readv", "recvmsg", "recvmmsg", "accept4", "accept"}
SEND = {"sendto", "write", "writev", "sendmsg", "sendmmsg", "sendfile", "sendfile64", "splice"}
EPOLL = {"epoll_wait", "epoll_ctl", "epoll_pwait", "epoll_pwait2"}
HANDOFF = {"futex", "sched_yield", "futex_wait", "futex_wake"}
FAMILIES = ("unix", "eventfd", "tcp", "none")


def _perf_reduce():
    from experiments.lib import perf_reduce
    return perf_reduce


def family(frames):
    """The socket family (or eventfd) a sample's call chain shows, else "none"."""
    for s, _ in frames:
        if s.startswith("unix_"):
            return "unix"
        if s.startswith("eventfd_"):
            return "eventfd"
        if s.startswith(("tcp_", "inet_")):
            return "tcp"
    return "none"


def _io(name):
    return "recv" if name in RECV else "send"


def shares(bucket, fam, handoff_share=None):
    """{category: share} of one sample: its bucket (perf_reduce.classify),
    its family, and handoff_share, the share of this thread's calls of
    that syscall that are on the handoff's descriptors (None: unknown)."""
    if bucket.startswith("user:") or bucket == "unknown":
        return {"user": 1.0}
    if not bucket.startswith("sys:"):
        return {"kernel other": 1.0}
    name = bucket[4:]
    if name in HANDOFF:
        return {"handoff": 1.0}
    if name in EPOLL:
        return {"epoll": 1.0}
    if name not in RECV and name not in SEND:
        return {"kernel other": 1.0}
    if handoff_share is None:  # no census: the frames are all there is
        return {"handoff": 1.0} if fam in ("unix", "eventfd") else {_io(name): 1.0}
    if handoff_share >= 1.0:
        return {"handoff": 1.0}
    if handoff_share <= 0.0:
        return {_io(name): 1.0}
    if fam in ("unix", "eventfd"):
        return {"handoff": 1.0}
    if fam == "tcp":
        return {_io(name): 1.0}
    return {"handoff": handoff_share, _io(name): 1.0 - handoff_share}


def census(handoff, threads):
    """{role: {syscall: share of the calls on the handoff's descriptors}} for
    cserve's threads under `handoff`, from a stats window's threads (role
    and counters); see the module docstring. None for a peer (no handoff)."""
    if not handoff:
        return None
    loop = {"read": 1.0, "write": 1.0, "recvfrom": 0.0, "sendto": 0.0, "sendmsg": 0.0, "sendfile": 0.0}
    pool = {"recvfrom": 1.0, "sendto": 1.0, "read": 1.0, "write": 1.0}
    if handoff == "dgram":
        c = {}
        for t in threads or []:
            if t.get("role") == "loop":
                for k in ("reads", "writes"):
                    c[k] = c.get(k, 0) + ((t.get("counters") or {}).get(k) or 0)
                h = (t.get("counters") or {}).get("handoff") or {}
                for k in ("submit_syscalls", "drain_syscalls"):
                    c[k] = c.get(k, 0) + (h.get(k) or 0)
        recvs = c.get("drain_syscalls", 0) + c.get("reads", 0)
        loop["recvfrom"] = c.get("drain_syscalls", 0) / recvs if recvs else FRAMED
        loop["sendto"] = FRAMED
    return {"loop": loop, "pool": pool}


FRAMED = "framed"  # a mixed syscall whose calls' shares the counters do not give


def _framed_share(fams):
    """The handoff's share of a mixed syscall's samples that show a family."""
    h = fams.get("unix", 0.0) + fams.get("eventfd", 0.0)
    t = fams.get("tcp", 0.0)
    return h / (h + t) if h + t > 0 else 0.5


def role(comm):
    return "loop" if comm == "cserve-loop" else "pool" if comm.startswith("cserve-pool") else None


def tally(perf_txt):
    """{thread name: {"cpu_s", "python", "buckets": {bucket: {family: s}}}}
    over every sample of perf_txt: what split_tally needs, kept in records."""
    pr = _perf_reduce()
    out = {}
    with open(perf_txt, errors="replace") as f:
        for comm, _tid, period, frames in pr.parse(f):
            bucket, _leaf = pr.classify(frames)
            t = out.setdefault(comm, {"cpu_s": 0.0, "python": 0.0, "buckets": {}})
            s = period / 1e9
            t["cpu_s"] += s
            if bucket == "user:python":
                t["python"] += s
            fam = family(frames) if bucket.startswith("sys:") else "none"
            b = t["buckets"].setdefault(bucket, {})
            b[fam] = b.get(fam, 0.0) + s
    return out


def split_tally(tl, cen=None):
    """{thread name: {"cpu_s", "python", category: seconds}} from tally()'s
    output and a census (census(); None: the frames decide)."""
    out = {}
    for comm, t in tl.items():
        row = {"cpu_s": t["cpu_s"], "python": t["python"], **{c: 0.0 for c in CATEGORIES}}
        r = role(comm)
        mine = (cen or {}).get(r) if r else None
        for bucket, fams in t["buckets"].items():
            name = bucket[4:] if bucket.startswith("sys:") else None
            hs = None if mine is None else mine.get(name, 0.0 if name else None)
            if hs == FRAMED:
                hs = _framed_share(fams)
            for fam, s in fams.items():
                for cat, w in shares(bucket, fam, hs).items():
                    row[cat] += s * w
        out[comm] = row
    return out


def split(perf_txt, cen=None):
    """split_tally(tally(perf_txt), cen)."""
    return split_tally(tally(perf_txt), cen)


def per_request(cpu, requests):
    """The split's seconds as µs per request (requests: the window's)."""
    if not requests:
        return None
    return {k: round(v / requests * 1e6, 3) for k, v in cpu.items() if isinstance(v, (int, float))}

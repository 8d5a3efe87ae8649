"""What the tests read of a process from /proc, where any process may exit
between two reads: a worker being replaced, a draining one, a child the app
forked. Every read here tolerates that.

- The walks (children, descendants) and the probes (state, alive,
  cmdline, read) treat a process that is gone as absent: they skip it or
  return None, never raise.
- The measures of a process the test expects alive (rss_kib, fd_count,
  fd_targets, status_ids) raise Gone, an AssertionError that says which
  process exited and what was being read, instead of a FileNotFoundError
  from the middle of a listing.
"""
import os
import time

# What reading /proc/PID/... raises once PID has exited: the directory is
# gone (FileNotFoundError), or a file opened before the exit reads as ESRCH
# (ProcessLookupError).
GONE = (FileNotFoundError, ProcessLookupError)


class Gone(AssertionError):
    def __init__(self, pid, what):
        super().__init__(f"pid {pid} exited (reading /proc/{pid}/{what})")
        self.pid = pid


def read(pid, name, binary=False):
    """/proc/PID/NAME's content, or None when the process is gone."""
    try:
        with open(f"/proc/{pid}/{name}", "rb" if binary else "r") as f:
            return f.read()
    except GONE:
        return None


def state(pid):
    """The state letter of /proc/PID/stat (R, S, D, Z, ...), or None when
    the process is gone (reaped, or never was)."""
    st = read(pid, "stat")
    if not st:
        return None
    # the command may hold spaces and parentheses: the state follows the last ')'
    return st[st.rindex(")") + 2]


def alive(pid):
    """True while pid runs: present, and not a zombie waiting for its reaper."""
    return state(pid) not in (None, "Z", "X")


def cmdline(pid):
    """argv of pid as a list of str (its process title when it set one), or
    None when it is gone."""
    raw = read(pid, "cmdline", binary=True)
    if raw is None:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def children(pid):
    """pid's running child processes (of all its threads), sorted; [] when
    pid is gone. A thread that exits during the listing is skipped, and so
    is a child that has exited (a zombie its parent has not reaped yet)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except GONE:
        return []
    out = set()
    for t in tasks:
        kids = read(pid, f"task/{t}/children")
        if kids:
            out.update(int(c) for c in kids.split())
    return sorted(c for c in out if alive(c))


def descendants(pid):
    """pid's children, theirs, and so on (a process that exits meanwhile is
    left out with its subtree)."""
    out = []
    for c in children(pid):
        out += [c] + descendants(c)
    return out


def _status(pid):
    text = read(pid, "status")
    if text is None:
        raise Gone(pid, "status")
    return text


def rss_kib(pid):
    """VmRSS of pid in KiB."""
    for line in _status(pid).splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise Gone(pid, "status (no VmRSS: a zombie)")


def status_ids(pid):
    """{"Uid": [real, effective, saved, filesystem], "Gid": [...],
    "Groups": [...]} from /proc/PID/status."""
    ids = {}
    for line in _status(pid).splitlines():
        key = line.split(":", 1)[0]
        if key in ("Uid", "Gid", "Groups"):
            ids[key] = [int(x) for x in line.split()[1:]]
    return ids


def fd_count(pid):
    """How many descriptors pid holds."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except GONE:
        raise Gone(pid, "fd") from None


def fd_targets(pid):
    """What each of pid's descriptors names (readlink of /proc/PID/fd/N),
    as a set; a descriptor closed during the listing is left out."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except GONE:
        raise Gone(pid, "fd") from None
    out = set()
    for fd in fds:
        try:
            out.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except GONE:
            if not os.path.isdir(f"/proc/{pid}"):
                raise Gone(pid, f"fd/{fd}") from None
    return out


def thread_names(pid):
    """The names (comm) of pid's threads, sorted; a thread that exits during
    the listing is left out."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except GONE:
        raise Gone(pid, "task") from None
    names = (read(pid, f"task/{t}/comm") for t in tasks)
    return sorted(n.strip() for n in names if n is not None)


def settled_fds(pid, quiet=0.5, timeout=5.0):
    """pid's descriptor count once it has stopped changing for `quiet`
    seconds (connections a client just closed take a moment to close on the
    server's side), or the last count at `timeout`."""
    deadline = time.monotonic() + timeout
    last, since = fd_count(pid), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        n = fd_count(pid)
        if n != last:
            last, since = n, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
    return last

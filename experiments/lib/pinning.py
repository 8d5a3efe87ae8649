"""Placement, a parameter of every run: which CPUs each thread may use, by
the thread's name, and what each thread did with its CPU in the window.

Roles, by thread name (cserve names its threads): `cserve-loop` is the loop,
`cserve-pool-N` a pool thread; a peer's `tokio-rt-worker` is its loop and
its other threads its Python; the client is every thread of the client's
process (wrk, pipeload); anything else of the server is "other" (threads an
app starts, cserve's helpers).

Placements, over the CPUs this process may use, in order (c0, c1, ...):
  shared      nothing pinned: the scheduler puts every thread anywhere
  loop-alone  the loop alone on c1; the pool, the client and every other
              thread on c0 (two CPUs: the loop has a core of its own and
              the pool and the client share the other)
  dedicated   every stage on cores of its own: c0 for the harness and
              other threads, the loop on c1, pool thread k on c(2+k), the
              client on the rest (a machine with cores to spare:
              scripts/many_core.sh)
  per-worker  every thread of worker process k (cserve --workers) on ck,
              the client anywhere
The server's threads are pinned with sched_setaffinity on each TID after
start-up and before the load; the client is started pinned (its threads
inherit it). A thread the server starts after that keeps its inherited
mask: at the window's end every server thread is read back, and one not
where its role belongs is recorded (`unpinned`), a caveat on that run.

In the window each thread's /proc/PID/task/TID/schedstat gives its on-CPU
time and its run delay (time runnable, waiting for a CPU), as fractions of
the window: a stage that is busy but preempted shows a large run delay, a
stage waiting for work neither (it sleeps)."""
import os

PLACEMENTS = ("shared", "loop-alone", "dedicated", "per-worker")
CLIENT_NAMES = ("wrk", "pipeload")


def is_client(comm):
    return comm.startswith(CLIENT_NAMES)


def role_of(comm):
    """loop, pool or other, from a server thread's name."""
    if comm == "cserve-loop" or comm.startswith("tokio-rt-worker"):
        return "loop"
    if comm.startswith("cserve-pool"):
        return "pool"
    return "other"


def cpu_sets(placement, pool_threads=1, cpus=None):
    """{role: [cpus]} for a placement ("loop", "pool" or "pool:K", "client",
    "other"), or None for shared. cpus: the CPUs to place on (default: this
    process's, sorted). Raises ValueError where the machine has too few."""
    if placement in (None, "shared", "per-worker"):  # per-worker pins by process: pin_per_worker
        return None
    cpus = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
    if placement == "loop-alone":
        if len(cpus) < 2:
            raise ValueError("loop-alone needs two CPUs")
        c0, c1 = cpus[0], cpus[1]
        return {"loop": [c1], "pool": [c0], "client": [c0], "other": [c0]}
    if placement == "dedicated":
        need = 2 + pool_threads + 1
        if len(cpus) < need:
            raise ValueError(f"dedicated needs {need} CPUs (harness, loop, {pool_threads} pool, client)")
        out = {"loop": [cpus[1]], "client": cpus[2 + pool_threads:], "other": [cpus[0]],
               "pool": cpus[2:2 + pool_threads]}
        for k in range(pool_threads):
            out[f"pool:{k}"] = [cpus[2 + k]]
        return out
    raise ValueError(f"unknown placement {placement!r}; have {', '.join(PLACEMENTS)}")


def _cpus_of(sets, comm):
    role = role_of(comm)
    if role == "pool" and comm.startswith("cserve-pool-"):
        k = comm.rsplit("-", 1)[-1]
        return sets.get(f"pool:{k}", sets["pool"])
    return sets[role]


def tasks(pid):
    """pid's thread ids (as strings), empty once it has ended."""
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:  # the process ended
        return []


def thread_name(pid, tid):
    """Thread tid's name, or None once it has ended."""
    try:
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def pin_server(pids, sets):
    """Pin every thread of pids (the server's processes) by its role; returns
    [{"tid", "name", "role", "cpus"}], each mask read back from the kernel."""
    done = []
    for pid in pids:
        for tid in tasks(pid):
            comm = thread_name(pid, tid)
            if comm is None:
                continue
            want = _cpus_of(sets, comm)
            try:
                os.sched_setaffinity(int(tid), want)
                got = sorted(os.sched_getaffinity(int(tid)))
            except OSError:  # the thread ended between the listing and the call
                continue
            if got != sorted(want):
                raise RuntimeError(f"thread {comm} ({tid}) has CPUs {got} after asking for {sorted(want)}")
            done.append({"tid": int(tid), "name": comm, "role": role_of(comm), "cpus": got})
    return done


def client_preexec(sets):
    """A Popen preexec_fn that starts the client on its CPUs (None: shared)."""
    if not sets:
        return None
    cpus = sets["client"]
    return lambda: os.sched_setaffinity(0, cpus)


def unpinned(pids, sets):
    """Server threads not on their role's CPUs (started after pinning, or
    moved): [{"tid", "name", "cpus"}], read at the window's end."""
    out = []
    for pid in pids:
        for tid in tasks(pid):
            comm = thread_name(pid, tid)
            if comm is None:
                continue
            try:
                got = sorted(os.sched_getaffinity(int(tid)))
            except OSError:
                continue
            if got != sorted(_cpus_of(sets, comm)):
                out.append({"tid": int(tid), "name": comm, "cpus": got})
    return out


def switches(pid, tid):
    """(voluntary, involuntary) context switches of a thread so far, from
    /proc/PID/task/TID/status: the times it slept (blocked for a wake-up)
    and the times it was preempted while runnable. (None, None) where the
    thread ended."""
    vol = inv = None
    try:
        with open(f"/proc/{pid}/task/{tid}/status") as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches:"):
                    vol = int(line.split(":")[1])
                elif line.startswith("nonvoluntary_ctxt_switches:"):
                    inv = int(line.split(":")[1])
    except (OSError, ValueError):
        pass
    return vol, inv


def schedstat(pids):
    """{(pid, tid): (comm, on-CPU ns, run-delay ns, timeslices, voluntary
    switches, involuntary switches)} of every thread of pids, from
    /proc/PID/task/TID/schedstat and status."""
    out = {}
    for pid in pids:
        for tid in tasks(pid):
            comm = thread_name(pid, tid)
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    run, delay, slices = (int(x) for x in f.read().split()[:3])
            except (OSError, ValueError):
                continue
            if comm is not None:
                out[(pid, int(tid))] = (comm, run, delay, slices) + switches(pid, tid)
    return out


def sched_window(before, after, seconds, client_pids=()):
    """Per thread alive at both ends: its on-CPU time and run delay as
    fractions of the window, its timeslices, its voluntary and involuntary
    context switches in the window (where schedstat() read them), and its
    role (the client's by process). Sorted by role, then on-CPU, busiest
    first; threads idle in the window (under 1 % on CPU and in delay) are
    dropped."""
    rows = []
    for key, (comm, run1, delay1, sl1, *cs1) in after.items():
        if key not in before or seconds <= 0:
            continue
        _, run0, delay0, sl0, *cs0 = before[key]
        on, delay = (run1 - run0) / 1e9 / seconds, (delay1 - delay0) / 1e9 / seconds
        if on < 0.01 and delay < 0.01:
            continue
        role = "client" if key[0] in client_pids else role_of(comm)
        row = {"name": comm, "pid": key[0], "tid": key[1], "role": role, "on_cpu": round(on, 4),
               "run_delay": round(delay, 4), "slices": sl1 - sl0}
        if len(cs0) == 2 and len(cs1) == 2 and None not in cs0 + cs1:
            row["vcs"], row["ivcs"] = cs1[0] - cs0[0], cs1[1] - cs0[1]
        rows.append(row)
    order = {"loop": 0, "pool": 1, "client": 2, "other": 3}
    rows.sort(key=lambda r: (order[r["role"]], -r["on_cpu"]))
    return rows


def stage_sched(rows):
    """{stage: {"on_cpu", "run_delay"}}: the loop's busiest thread, the pool's
    threads summed (the GIL), the client's threads summed."""
    out = {}
    for role in ("loop", "pool", "client"):
        rs = [r for r in rows or [] if r["role"] == role]
        if not rs:
            continue
        if role == "loop":
            top = max(rs, key=lambda r: r["on_cpu"])
            out[role] = {"on_cpu": top["on_cpu"], "run_delay": top["run_delay"]}
        else:
            out[role] = {"on_cpu": sum(r["on_cpu"] for r in rs), "run_delay": sum(r["run_delay"] for r in rs)}
    return out


def worker_pids(pids):
    """The processes of pids that have a cserve-loop thread, in pid order."""
    return sorted(p for p in pids if any(thread_name(p, t) == "cserve-loop" for t in tasks(p)))


def pin_per_worker(pids, cpus=None):
    """per-worker: every thread of the k-th worker process (worker_pids) on
    CPU k (modulo the CPUs), the other processes and the client unpinned.
    Returns the pinned threads, as pin_server does."""
    cpus = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
    workers = worker_pids(pids)
    done = []
    for k, pid in enumerate(workers):
        cpu = [cpus[k % len(cpus)]]
        for tid in tasks(pid):
            comm = thread_name(pid, tid)
            try:
                os.sched_setaffinity(int(tid), cpu)
            except OSError:
                continue
            done.append({"tid": int(tid), "name": comm, "role": role_of(comm or ""), "cpus": cpu})
    return done


def place(pids, placement, pool_threads=1):
    """Pin the server's threads (pids: its processes) for a placement.
    Returns (sets, record): cpu_sets()'s mapping (None: shared) and what a
    run records: the placement's name, its CPU sets and each pinned thread.
    "per-worker" (pin_per_worker) pins by process, not by role: its sets are
    None (the client runs anywhere)."""
    if placement == "per-worker":
        return None, {"name": placement, "threads": pin_per_worker(pids)}
    sets = cpu_sets(placement, pool_threads)
    rec = {"name": placement or "shared"}
    if sets:
        rec["cpus"] = {k: v for k, v in sets.items() if ":" not in k}
        rec["threads"] = pin_server(pids, sets)
    return sets, rec

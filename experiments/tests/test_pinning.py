"""Placement as a parameter of a run (experiments/lib/pinning.py): the CPU
sets of each placement, the per-thread on-CPU time and run delay from
schedstat, a thread found off its role's CPUs, and one short real run
(~3 s: ./cserve, build/pipeload, two CPUs) whose record shows each thread
where the loop-alone placement put it."""
import os
import subprocess
import sys
import threading
import time

import pytest

from experiments.lib import configs, model, pinning, probe


def test_cpu_sets_of_each_placement():
    assert pinning.cpu_sets("shared") is None and pinning.cpu_sets(None) is None
    s = pinning.cpu_sets("loop-alone", cpus=[4, 2, 7])
    assert s == {"loop": [4], "pool": [2], "client": [2], "other": [2]}
    d = pinning.cpu_sets("dedicated", pool_threads=2, cpus=range(8))
    assert d["other"] == [0] and d["loop"] == [1] and d["pool:0"] == [2] and d["pool:1"] == [3]
    assert d["client"] == [4, 5, 6, 7]
    with pytest.raises(ValueError):
        pinning.cpu_sets("loop-alone", cpus=[0])
    with pytest.raises(ValueError):
        pinning.cpu_sets("dedicated", pool_threads=4, cpus=range(6))
    with pytest.raises(ValueError):
        pinning.cpu_sets("nowhere", cpus=range(4))


def test_roles_by_thread_name():
    assert pinning.role_of("cserve-loop") == "loop" and pinning.role_of("cserve-pool-3") == "pool"
    assert pinning.role_of("tokio-rt-worker") == "loop" and pinning.role_of("python3") == "other"
    assert pinning.is_client("wrk") and pinning.is_client("pipeload") and not pinning.is_client("cserve-loop")
    sets = pinning.cpu_sets("dedicated", pool_threads=2, cpus=range(6))
    assert pinning._cpus_of(sets, "cserve-pool-1") == [3] and pinning._cpus_of(sets, "cserve-loop") == [1]


def test_sched_window_fractions_and_roles():
    before = {(1, 10): ("cserve-loop", 0, 0, 0), (1, 11): ("cserve-pool-0", 0, 0, 0),
              (2, 20): ("pipeload", 0, 0, 0), (1, 12): ("idle", 5, 5, 1)}
    after = {(1, 10): ("cserve-loop", 1_800_000_000, 150_000_000, 40),
             (1, 11): ("cserve-pool-0", 600_000_000, 900_000_000, 900),
             (2, 20): ("pipeload", 1_000_000_000, 500_000_000, 70),
             (1, 12): ("idle", 5, 5, 1), (1, 13): ("born-late", 9, 9, 9)}
    rows = pinning.sched_window(before, after, 2.0, client_pids={2})
    assert [r["name"] for r in rows] == ["cserve-loop", "cserve-pool-0", "pipeload"]
    loop = rows[0]
    assert loop["on_cpu"] == 0.9 and loop["run_delay"] == 0.075 and loop["slices"] == 40
    st = pinning.stage_sched(rows)
    assert st["pool"] == {"on_cpu": 0.3, "run_delay": 0.45} and st["client"]["on_cpu"] == 0.5


def wait_for(what, cond, timeout=30.0):
    """Poll cond() until it is true; fail with what was awaited and the last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v or time.monotonic() > deadline:
            assert v, f"{what}: not so after {timeout:.0f} s (last {v!r})"
            return v
        time.sleep(0.01)


def test_schedstat_reads_this_process():
    def spin(stop):
        while not stop.is_set():
            pass
    stop = threading.Event()
    t = threading.Thread(target=spin, args=(stop,))
    t.start()
    try:
        key = (os.getpid(), t.native_id)
        a = pinning.schedstat([os.getpid()])
        # the window ends once the spinning thread has had 30 ms of CPU, however long that takes
        b = wait_for("the spinner on CPU", lambda: (lambda b: b[key][1] - a[key][1] >= 30_000_000 and b)(
            pinning.schedstat([os.getpid()])))
    finally:
        stop.set()
        t.join()
    rows = pinning.sched_window(a, b, 0.3)
    spin = next(r for r in rows if (r["pid"], r["tid"]) == key)
    assert spin["on_cpu"] == round((b[key][1] - a[key][1]) / 1e9 / 0.3, 4) >= 0.1, rows
    assert spin["run_delay"] == round((b[key][2] - a[key][2]) / 1e9 / 0.3, 4) and spin["slices"] >= 1, rows


def test_a_thread_off_its_cpus_is_reported():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        # its one thread is the interpreter's, past exec
        wait_for("the child's interpreter", lambda: b"time.sleep(30)" in open(f"/proc/{p.pid}/cmdline", "rb").read())
        sets, rec = pinning.place([p.pid], "loop-alone")
        assert rec["name"] == "loop-alone" and [t["cpus"] for t in rec["threads"]] == [sets["other"]]
        assert pinning.unpinned([p.pid], sets) == []
        os.sched_setaffinity(p.pid, sets["loop"])  # moved off its role's CPUs
        off = pinning.unpinned([p.pid], sets)
        assert [(t["tid"], t["cpus"]) for t in off] == [(p.pid, sets["loop"])]
    finally:
        p.kill()
        p.wait()


def test_label_names_a_placement_other_than_shared():
    c = {"server": "cserve", "handoff": "ring", "bt": 1, "app": "hello", "conns": 64, "client": "wrk"}
    assert configs.label(c) == "cserve ring bt1 hello c64 wrk" == configs.label(dict(c, placement="shared"))
    assert configs.label(dict(c, placement="loop-alone")) == "cserve ring bt1 hello c64 wrk @loop-alone"


def test_a_loop_alone_run_records_where_each_thread_ran():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    cfg = {"server": "cserve", "handoff": "ring", "bt": 1, "app": "hello", "conns": 16, "client": "pipeload",
           "depth": 16, "placement": "loop-alone"}
    rec = probe.measure(cfg, "t", 0.3, 1.0)
    assert "error" not in rec, rec.get("error")
    c0, c1 = sorted(os.sched_getaffinity(0))[:2]
    pl = rec["placement"]
    assert pl["name"] == "loop-alone" and pl["cpus"]["loop"] == [c1] and pl["client_cpus"] == [c0]
    where = {t["name"]: t["cpus"] for t in pl["threads"]}
    assert where["cserve-loop"] == [c1] and where["cserve-pool-0"] == [c0] and pl["unpinned"] == []
    rows = rec["window_cpu"]["sched"]
    roles = {r["role"] for r in rows}
    assert {"loop", "pool", "client"} <= roles, rows
    m = model.metrics(rec)
    # both accounts of the loop's CPU are there; how close they come depends
    # on the machine's load over two windows a few ms apart, which is no test's
    assert m["placement"] == "loop-alone" and m["loop_on_cpu"] > 0 and m["client_on_cpu"] > 0
    assert m["loop_util"] is not None and m["loop_util"] > 0
    assert m["in_flight_share"] is not None and m["loop_bound_strict"] in (True, False)

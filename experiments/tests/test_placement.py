"""experiments/placement.py on the real server, briefly (wrk, taskset and two
CPUs): each thread runs where its placement says, read back from the kernel
by thread name during the window, a thread pinned to one CPU never
migrates, and every role has its entries however little CPU it got. On a
fake run (no server, fixed counters): the counts per request are over the
server's own window and count, and a role the sampler dropped reads 0;
the window opens only once every pinned thread has run on its CPU.
How fast any placement is, is the experiment's to measure, not a test's."""
import json
import os
import subprocess
import sys
import threading

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
from experiments import placement

NAMES = ["ring: loop+pool / wrk", "ring: loop / pool+wrk", "native: loop+wrk"]


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("placement needs two CPUs")
    out = tmp_path_factory.mktemp("placement")
    cmd = [sys.executable, "-m", "experiments.placement", "--rounds", "1",
           "--warmup", "0.2", "--duration", "0.5", "--out", str(out)]
    for n in NAMES:
        cmd += ["--only", n]
    subprocess.run(cmd, check=True, timeout=120, cwd=ROOT, capture_output=True)
    return json.loads((out / "placement.json").read_text()), (out / "placement.md").read_text()


def test_each_thread_runs_where_its_placement_puts_it(record):
    data, md = record
    a, b = data["meta"]["cpus"]
    want = {"ring: loop+pool / wrk": {"loop": [a], "pool": [a], "client": [b]},
            "ring: loop / pool+wrk": {"loop": [a], "pool": [b], "client": [b]},
            "native: loop+wrk": {"loop": [a], "client": [a]}}
    assert sorted(r["placement"] for r in data["records"]) == sorted(NAMES)
    for r in data["records"]:
        assert r["affinity"] == want[r["placement"]], r["placement"]
        for role, counts in r["sched_per_1k_requests"].items():
            if counts["migrations"] is not None:  # the kernel has /proc/PID/sched
                assert counts["migrations"] == 0, (r["placement"], role)
        assert set(r["pct_of_core"]) == set(want[r["placement"]]), r
    for n in NAMES:
        assert f"| {n} |" in md


def test_every_record_has_the_servers_window(record):
    data, _ = record
    for r in data["records"]:
        assert r["rps"] is not None and r["window_s"] > 0, r
        assert (r["pool_us_per_req"] is None) == (r["server"] == "native")
        assert set(r["sched_per_1k_requests"]) == ({"loop"} if r["server"] == "native" else {"loop", "pool"})


class _Args:
    pipeline = 16
    conns = 256


def _fake_run(monkeypatch, threads, reqs=2000):
    """run_one on a ring server whose window served reqs requests, with the
    sampler's rows threads; the kernel's counts rise by fixed steps."""
    tids = {"loop": 11, "pool": 12}
    steps = iter([{"voluntary_ctxt_switches": 10, "nonvoluntary_ctxt_switches": 5, "migrations": 0},
                  {"voluntary_ctxt_switches": 30, "nonvoluntary_ctxt_switches": 5, "migrations": 0},
                  {"voluntary_ctxt_switches": 110, "nonvoluntary_ctxt_switches": 9, "migrations": 0},
                  {"voluntary_ctxt_switches": 50, "nonvoluntary_ctxt_switches": 5, "migrations": 0}])
    monkeypatch.setattr(placement, "server_threads", lambda pid: dict(tids))
    monkeypatch.setattr(placement, "pin", lambda tid, cpus: sorted(cpus))
    monkeypatch.setattr(placement, "settle", lambda found, sets: None)
    monkeypatch.setattr(placement, "sched_counts", lambda tid: next(steps))
    monkeypatch.setattr(placement.os, "sched_getaffinity", lambda tid: {0})

    def run_cell(srv, conns, pipe, a, client_prefix=(), window=None, keep_stats=False):
        window(99)
        window(99)
        loop = {"role": "loop", "requests": reqs, "us_per_request": 3.5,
                "counters": {"writes": reqs // 4, "passes": reqs // 8}}
        return {"rps": 50000.0, "errors": False, "loadavg": 0.0, "wrk_cmd": "wrk", "threads": threads,
                "handoff": {"pool_us_per_req": 7.0},
                "stats": {"workers": [{"window_s": 0.5, "threads": [loop]}]}}
    monkeypatch.setattr(placement.bench, "run_cell", run_cell)

    class Srv:
        class proc:
            pid = 1
    return placement.run_one("ring: loop+pool / wrk", Srv, [0, 1], _Args)


def test_counts_are_per_request_of_the_servers_window(monkeypatch):
    r = _fake_run(monkeypatch, [{"name": "cserve-loop", "median_pct": 90.0},
                                {"name": "cserve-pool", "median_pct": 40.0},
                                {"name": "wrk", "median_pct": 60.0}, {"name": "wrk", "median_pct": 2.0}])
    assert r["requests"] == 2000 and r["window_s"] == 0.5
    assert r["loop_writes_per_req"] == 0.25 and r["loop_passes_per_req"] == 0.125
    assert r["loop_us_per_req"] == 3.5 and r["pool_us_per_req"] == 7.0
    # (110 - 10) and (50 - 30) switches over 2000 requests, per thousand
    assert r["sched_per_1k_requests"]["loop"]["voluntary_ctxt_switches"] == 50.0
    assert r["sched_per_1k_requests"]["pool"]["voluntary_ctxt_switches"] == 10.0
    assert r["sched_per_1k_requests"]["loop"]["nonvoluntary_ctxt_switches"] == 2.0
    assert r["pct_of_core"] == {"loop": 90.0, "pool": 40.0, "client": 62.0}


def test_a_role_without_a_sample_reads_zero(monkeypatch):
    # the sampler drops threads under 1 % of a core, all of them when wrk gave no rate
    r = _fake_run(monkeypatch, [], reqs=0)
    assert r["pct_of_core"] == {"loop": 0.0, "pool": 0.0, "client": 0.0}
    assert r["loop_writes_per_req"] is None
    assert r["sched_per_1k_requests"]["loop"] == {"voluntary_ctxt_switches": None,
                                                  "nonvoluntary_ctxt_switches": None, "migrations": None}
    assert [row["client_pct"]["median"] for row in placement.summarise([r])] == [0.0]


def test_settle_waits_for_a_thread_on_its_cpus():
    me = threading.get_native_id()
    assert placement.last_cpu(me) in os.sched_getaffinity(0)
    placement.settle({"loop": me}, {"loop": [placement.last_cpu(me)] + sorted(os.sched_getaffinity(0))})
    with pytest.raises(SystemExit, match="off their CPUs"):
        placement.settle({"loop": me}, {"loop": [-1]}, timeout=0.05)


def test_placements_name_two_cpus_and_every_thread():
    for name, (server, where) in placement.PLACEMENTS.items():
        roles = {"loop", "client"} | ({"pool"} if server == "ring" else set())
        assert set(where) == roles, name
        assert all(v in (None, 0, 1) for v in where.values()), name

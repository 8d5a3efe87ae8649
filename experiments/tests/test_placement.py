"""experiments/placement.py on the real server, briefly (~10 s; wrk, taskset
and two CPUs): each thread runs where its placement says, read back from
the kernel by thread name during the window, and a thread pinned to one CPU
never migrates; the counts per request are over the server's own window."""
import json
import os
import subprocess
import sys

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
        assert r["pct_of_core"]["client"] > 0 and r["pct_of_core"]["loop"] > 0
    for n in NAMES:
        assert f"| {n} |" in md


def test_rates_are_per_request_of_the_servers_window(record):
    data, _ = record
    for r in data["records"]:
        assert r["rps"] > 0 and not r["errors"], r
        # the server's count for its window, against wrk's rate over the same length:
        # a half-second window on a loaded machine drifts by tens of per cent, a
        # wrong unit or window (per second, both directions) by a factor of 2 or more
        assert 0.55 < r["requests"] / (r["rps"] * r["window_s"]) < 1.8, r
        assert r["loop_us_per_req"] > 0 and r["loop_writes_per_req"] > 0 and r["loop_passes_per_req"] > 0
        assert (r["pool_us_per_req"] is None) == (r["server"] == "native")
        assert set(r["sched_per_1k_requests"]) == ({"loop"} if r["server"] == "native" else {"loop", "pool"})


def test_placements_name_two_cpus_and_every_thread():
    for name, (server, where) in placement.PLACEMENTS.items():
        roles = {"loop", "client"} | ({"pool"} if server == "ring" else set())
        assert set(where) == roles, name
        assert all(v in (None, 0, 1) for v in where.values()), name

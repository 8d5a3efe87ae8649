"""experiments/micro/loop_floor.c as the live scheduler runs it: beside a
slow worker the loop's busy time is a small part of the pace (the polls
that found nothing are left out), and a server-like loop, away on its
sockets for a pass, finds completions piled up when it drains. What the
driver decides, whatever the scheduler does, is checked by
experiments/tests/test_loop_floor.py."""
import json
import os
import pathlib
import subprocess

import pytest

import perf
from experiments import loop_floor

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = ROOT / "build" / "micro" / "loop_floor"
TWO_CPUS = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two threads pinned to two CPUs")


@pytest.fixture(scope="module")
def binary():
    subprocess.run(["make", "-s", "build/micro/loop_floor"], cwd=ROOT, check=True, capture_output=True,
                   timeout=300)
    return str(BIN)


def _run(binary, *args):
    p = subprocess.run([binary, "--seconds", "0.2", *args], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@TWO_CPUS
def test_the_loops_busy_time_is_a_small_part_of_a_slow_workers_pace(binary):
    """A ring, 64 jobs in flight, a worker of 20 us a job. Median over the
    rounds: the loop polls more than once a job and finds nothing, and its
    busy time is under a quarter of the wall time per job."""
    def run():
        r = _run(binary, "--mode", "ring", "--window", "64", "--worker-ns", "20000")
        return {"idle_polls_per_job": r["idle_polls"] / r["jobs"],
                "busy_share_of_wall": r["busy_ns_per_job"] / r["wall_ns_per_job"]}

    m = perf.report("the loop beside a 20 us worker", perf.interleaved({"ring": run}))["ring"]
    assert m["idle_polls_per_job"] > 1
    assert m["busy_share_of_wall"] < 0.25


@TWO_CPUS
def test_completions_pile_up_between_a_server_like_loops_drains(binary):
    """Every configuration of loop_floor's record whose loop spends a pass
    on its sockets before each drain (--pass-ns). Median over the rounds:
    more than 8 jobs drained a pass."""
    rows = {key: args for key, _, args, _ in loop_floor.ROWS if "--pass-ns" in args}
    assert rows, "loop_floor.ROWS has no server-like row"

    def arm(args):
        return lambda: {"jobs_per_pass": _run(binary, *args)["jobs_per_pass"]}

    m = perf.report("jobs a server-like pass drains", perf.interleaved({k: arm(a) for k, a in rows.items()}))
    for key in rows:
        assert m[key]["jobs_per_pass"] > 8, (key, m[key])

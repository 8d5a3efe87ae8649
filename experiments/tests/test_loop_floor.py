"""experiments/micro/loop_floor.c and experiments/loop_floor.py (~5 s): every
mode moves jobs and checks each response is its job's; the loop's busy time
leaves out the polls that found nothing (else a slow worker would look like
a dear loop); the record's differences are paired per round; and the
verdict sets the recorded ring rows beside the bench's two loops."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
import loop_floor  # noqa: E402

BIN = os.path.join(ROOT, "build", "micro", "loop_floor")


@pytest.fixture(scope="module")
def binary():
    subprocess.run(["make", "-s", "build/micro/loop_floor"], cwd=ROOT, check=True, capture_output=True,
                   timeout=300)
    return BIN


def run(binary, *args):
    p = subprocess.run([binary, "--seconds", "0.2", *args], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("args", [row[2] for row in loop_floor.ROWS])
def test_every_configuration_moves_jobs(binary, args):
    r = run(binary, "--window", "64", *args)
    assert r["jobs"] > 0 and r["busy_ns_per_job"] > 0
    assert 1 <= r["jobs_per_pass"] <= r["batch"]
    if r["mode"] == "inline":
        assert r["worker_cpu_ns_per_job"] == 0 and r["idle_polls"] == 0
    else:
        assert r["worker_cpu_ns_per_job"] > 0  # a second thread really wrote the responses


def test_busy_time_leaves_out_idle_polls(binary):
    # The worker spends 20 us a job, the loop almost nothing: the loop's CPU
    # per job is the worker's pace (it polls), its busy time a small part.
    r = run(binary, "--mode", "ring", "--window", "64", "--worker-ns", "20000")
    assert r["idle_polls"] > r["jobs"]
    assert r["loop_cpu_ns_per_job"] > 15000
    assert r["busy_ns_per_job"] < 0.25 * r["loop_cpu_ns_per_job"]


def test_bad_arguments_are_refused(binary):
    for args in (["--mode", "ring", "--window", "100"], ["--mode", "nope"], ["--mode", "inline", "--batch", "0"],
                 ["--mode", "inline", "--response", "2"]):
        p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=30)
        assert p.returncode == 2, args


def fake(key, busy):
    return {"busy_ns_per_job": busy, "loop_cpu_ns_per_job": busy, "worker_cpu_ns_per_job": busy,
            "jobs_per_pass": 16.0}


def test_differences_are_paired_per_round():
    # The inline baseline drifts with the machine: the ring's excess is the
    # median of per-round differences (10, 10, 10), not the difference of
    # medians (40 - 20 = 20).
    # And each row is paired with its own inline row (the same job).
    rounds = [{"inline": fake("inline", b), "ring": fake("ring", b + 10), "inline_req": fake("inline_req", 500),
               "ring_req": fake("ring_req", 505)} for b in (10, 20, 70)]
    s = loop_floor.summarise(rounds)
    assert s["ring"]["over_inline_ns"] == {"median": 10, "min": 10, "max": 10}
    assert s["ring"]["busy_ns_per_job"]["median"] == 30
    assert s["ring_req"]["over_inline_ns"]["median"] == 5
    assert "over_inline_ns" not in s["inline"] and "over_inline_ns" not in s["inline_req"]


def verdict_for(**over):
    summ = {k: {"over_inline_ns": {"median": v, "min": v, "max": v}} for k, v in over.items()}
    data = {"summary": summ, "bench": {"ring_loop_us": 1.2, "native_loop_us": 0.8, "bench_commit": "abc"}}
    return "\n".join(loop_floor.verdict(data))


def test_verdict_reads_the_bench_and_the_ring_rows():
    text = verdict_for(ring=40.0, ring_paced=180.0, ring_req=45.0, ring_req_paced=300.0, batched=17.0,
                       batched_1=80.0)
    assert "80 ns per request" in text and "400 ns more" in text
    assert "adds 40 ns per job" in text and "and 180 ns" in text and "adds 45 and 300 ns" in text
    assert "add 17 ns instead of 80" in text
    assert "holds only where" in text and "up to 300 of the server's 400 ns; at least 100 lie" in text


def test_verdict_says_which_side_of_the_allowance():
    assert "Every configuration exceeds" in verdict_for(ring=90.0, ring_paced=180.0, ring_req=95.0,
                                                        ring_req_paced=300.0)
    assert "Every configuration is within" in verdict_for(ring=10.0, ring_paced=20.0, ring_req=15.0,
                                                          ring_req_paced=30.0)
    assert loop_floor.verdict({"summary": {}, "bench": None}) == []

"""experiments/micro/loop_floor.c and experiments/loop_floor.py (~5 s): every
mode moves jobs and checks each response is its job's (two-thread modes
bracketed by the yardstick pingpong); the loop's busy time
leaves out the polls that found nothing (else a slow worker would look like
a dear loop); the record's differences are paired per round and put in
units of each run's own yardstick; and the verdict sets the ring rows
beside the bench's two loops and counts the runs that fit goal 3."""
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
    if "inline" not in args and len(os.sched_getaffinity(0)) < 2:
        pytest.skip("two threads pinned to two CPUs")
    r = run(binary, "--window", "64", *args)
    assert r["jobs"] > 0 and r["busy_ns_per_job"] > 0
    assert 1 <= r["jobs_per_pass"] <= r["batch"]
    if r["mode"] == "inline":
        assert r["worker_cpu_ns_per_job"] == 0 and r["idle_polls"] == 0
    else:
        assert r["worker_cpu_ns_per_job"] > 0  # a second thread really wrote the responses
    if r["mode"] in ("ring", "batched"):  # bracketed by the yardstick
        assert r["yardstick_before_ns"] > 0 and r["yardstick_after_ns"] > 0


def test_busy_time_leaves_out_idle_polls(binary):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("two threads pinned to two CPUs")
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


def verdict_for(transfer=50.0, server=None, rounds=(), **over):
    summ = {k: {"over_inline_ns": {"median": v * transfer, "min": 0, "max": 2 * v * transfer},
                "over_inline_transfers": {"median": v, "min": v, "max": v}} for k, v in over.items()}
    summ["pingpong"] = {"busy_ns_per_job": {"median": transfer, "min": transfer, "max": transfer}}
    data = {"summary": summ, "bench": {"ring_loop_us": 1.2, "native_loop_us": 0.8, "bench_commit": "abc"},
            "server": server, "rounds": list(rounds)}
    return "\n".join(loop_floor.verdict(data))


ROWS4 = dict(ring=0.8, ring_paced=3.6, ring_req=0.4, ring_req_paced=4.0)


def a_round(transfer, ring, paced, after=None):
    r = {"pingpong": fake("pingpong", transfer), "inline": fake("inline", 40),
         "ring": fake("ring", 40 + ring), "ring_paced": fake("ring_paced", 40 + paced)}
    for k in ("ring", "ring_paced"):
        r[k].update(yardstick_before_ns=transfer, yardstick_after_ns=after or transfer)
    return r


def test_verdict_reads_the_bench_and_the_ring_rows_in_transfers():
    text = verdict_for(batched=0.2, batched_1=0.6, **ROWS4)
    assert "80 ns per request" in text and "400 ns more" in text
    assert "adds 0.8 transfers per job" in text and "(40 ns)" in text and "0.4 with 8 lines" in text
    assert "adds 3.6 (180 ns) and 4.0 (200 ns)" in text
    assert "add 0.2 transfers instead of 0.6" in text
    assert "requests a pass" not in text and "of 0 rounds" not in text  # no placement record, no rounds
    assert "fit the allowance while" not in text


def test_verdict_counts_the_rounds_the_crossings_fit():
    # The allowance is 80 ns: a near round (transfer 50, ring 40 over
    # inline) fits, a far one (transfer 240, ring 200) does not; one
    # completion a pass fits in neither.
    rounds = [a_round(50, 40, 180), a_round(240, 200, 800), a_round(60, 45, 190), a_round(50, 60, 200, after=200)]
    text = verdict_for(rounds=rounds, **ROWS4)
    assert "at most about 100 ns" in text                      # 80 ns / 0.8 transfers
    assert "within it in 3 of 4 runs (a transfer 50–60 ns, 1 of them with their vCPUs moved)" in text
    assert "over it in the rest (a transfer 240 ns)" in text
    assert "exceeded the allowance in every run" in text and "only while the host keeps" in text
    text = verdict_for(rounds=[a_round(240, 200, 800)], **ROWS4)
    assert "within it in 0 of 1 runs" in text and "out of reach throughout this record" in text


def test_transfers_use_each_runs_own_yardstick():
    # Two rounds, the ring 2 transfers over inline in each at very different
    # transfer costs; a third whose yardsticks disagree is left out of the
    # transfer figures (and counted as moved), not of the ns.
    rounds = [a_round(50, 100, 300), a_round(250, 500, 900), a_round(50, 900, 900, after=250)]
    s = loop_floor.summarise(rounds)
    assert s["ring"]["over_inline_transfers"] == {"median": 2.0, "min": 2.0, "max": 2.0}
    assert s["ring"]["moved_runs"] == 1 and s["ring"]["over_inline_ns"]["max"] == 900
    assert "over_inline_transfers" not in s["inline"]


def test_verdict_places_the_server_by_its_passes():
    streaming = {"passes_per_req": {"median": 0.01, "min": 0.005, "max": 0.04}, "commit": "c0"}
    text = verdict_for(server=streaming, **ROWS4)
    assert "about 100 requests a pass" in text and "(25 in its slowest round" in text
    assert "dearest such round here (80 ns)" in text and "at least 320 of the 400 ns" in text  # 400 - 2*0.8*50
    text = verdict_for(transfer=300.0, server=streaming, **ROWS4)  # dearest round 480 ns > the 400 ns gap
    assert "could account for all 400 ns" in text
    slow = {"passes_per_req": {"median": 0.05, "min": 0.01, "max": 0.2}, "commit": "c0"}
    text = verdict_for(server=slow, **ROWS4)
    assert "(5 in its slowest round" in text and "cannot apportion" in text
    assert loop_floor.verdict({"summary": {}, "bench": None}) == []


def test_server_passes_reads_the_placement_record(tmp_path):
    rec = {"meta": {"commit": "abc", "time": "t"},
           "summary": [{"placement": "native: either CPU", "loop_passes_per_req": {"median": 9, "min": 9, "max": 9}},
                       {"placement": loop_floor.PLACEMENT_ROW,
                        "loop_passes_per_req": {"median": 0.01, "min": 0.005, "max": 0.04, "n": 5}}]}
    (tmp_path / "p.json").write_text(json.dumps(rec))
    got = loop_floor.server_passes(str(tmp_path / "p.json"))
    assert got["passes_per_req"] == {"median": 0.01, "min": 0.005, "max": 0.04} and got["commit"] == "abc"
    assert loop_floor.server_passes(str(tmp_path / "none.json")) is None

"""experiments/queueing.py's closed-system simulation against what queueing
theory says exactly, and experiments/binding.py's plan, report and refusal
of an uncommitted prediction, from canned records. Pure Python; a second."""
import os
import subprocess

from experiments import binding as b
from experiments import queueing as q
from experiments.lib.serverctl import PY, ROOT

SMALL = {"requests": 6000, "warm": 500}


def test_uniform_waits_give_littles_law_exactly_whichever_the_binding():
    # 32 connections, 8 threads, every request 5 ms asleep: 8 served a time,
    # so each waits for 3 rounds before its own; late and early alike.
    for binding in ("early", "late"):
        r = q.simulate(32, 8, "sleep", 5000, 5000, 0, binding, **SMALL)
        assert abs(r["rate"] / (8 / 5e-3) - 1) < 0.005  # counted over the window after the warm-up
        assert r["p50_ms"] == r["p99_ms"] == r["mean_ms"] == 20.0  # Little: 32 in the system over 8 per 5 ms


def test_a_slow_few_hold_up_the_queue_they_joined_only_when_bound_early():
    # The io-mix: bound on arrival, a fast request can wait behind a 100 ms
    # one on its thread while others are free (a long tail); one queue lets
    # it go to whichever frees first, and the fast ones queue behind each
    # other instead (a higher median). The rate is the app's in both.
    early = q.simulate(32, 8, "sleep", 1000, 100000, 5, "early", **SMALL)
    late = q.simulate(32, 8, "sleep", 1000, 100000, 5, "late", **SMALL)
    assert late["p99_ms"] < 0.8 * early["p99_ms"] and late["p50_ms"] > 2 * early["p50_ms"]
    assert abs(late["rate"] / early["rate"] - 1) < 0.05


def test_with_the_gil_a_thread_with_queued_work_holds_it_for_the_switch_interval():
    # 4 threads, every request 300 µs of Python: bound early, a thread runs
    # its own queue without letting the GIL go until a waiter has waited
    # the switch interval, so latency spreads over that interval; late, the
    # GIL passes at every request and every request waits the same.
    early = q.simulate(32, 4, "cpu", 300, 300, 0, "early", **SMALL)
    late = q.simulate(32, 4, "cpu", 300, 300, 0, "late", **SMALL)
    assert abs(late["p50_ms"] - 32 * 0.3) < 1e-9 and abs(late["p99_ms"] - 32 * 0.3) < 1e-9
    assert early["p99_ms"] > early["p50_ms"] + q.SWITCH_US / 1000 and early["p50_ms"] < late["p50_ms"]
    # A shorter switch interval passes the GIL sooner: a shorter tail
    shorter = q.simulate(32, 4, "cpu", 300, 300, 0, "early", switch_us=100.0, **SMALL)
    assert shorter["p99_ms"] < early["p99_ms"]


def test_the_plan_runs_every_handoff_early_and_late_beside_the_peers():
    plan = b.plan(baseline="build-base/x/cserve")
    labels = [b.label(c) for c in plan]
    assert len(labels) == len(set(labels)) == len(b.CELLS) * (2 * len(b.HANDOFFS) + len(b.PEERS))
    cs = [c for c in plan if c["cell"] == "cpu-mix" and c["server"] == "cserve"]
    assert sorted((c["row"], c["handoff"]) for c in cs) == sorted((r, h) for r in ("cserve", "baseline")
                                                                   for h in b.HANDOFFS)
    assert all(c["binary"] == "build-base/x/cserve" for c in cs if c["row"] == "baseline")
    assert all(c["bt"] == b.CELLS[c["cell"]]["threads"] and c["conns"] == b.CONNS for c in plan)
    # each uniform cell costs its mix's mean
    from experiments import dispatch
    for mix, uni in (("io-mix", "io-uniform"), ("cpu-mix", "cpu-uniform")):
        m, u = (dispatch.mean_cost_us(b.CELLS[x]["app"])[0] for x in (mix, uni))
        assert abs(u / m - 1) < 0.01


def rec(cell, row, handoff, p50, p99, rate=1000.0):
    c = b.cfg(cell, row, handoff, "build-base/x/cserve" if row == "baseline" else None)
    return {"label": b.label(c), "config": c, "rps": rate, "rps_wrk": rate, "round": 0, "attempt": 0,
            "threadcpu": [], "machine": {"nproc": 2}, "server_cmd": "x",
            "latency": {"p50_us": p50 * 1e3, "p90_us": p99 * 500, "p99_us": p99 * 1e3,
                        "avg_us": 32 / rate * 1e6},
            "window_cpu": {"foreign_cores": 0.0, "steal_cores": 0.0, "busy_cores": 0.5, "seconds": 4.0}}


def test_the_report_sets_each_row_beside_the_prediction_for_its_binding():
    pred = {"cells": {"io-mix": {"early": {"rate": 1300.0, "p50_ms": 4.0, "p99_ms": 200.0},
                                 "late": {"rate": 1300.0, "p50_ms": 15.0, "p99_ms": 125.0}}}}
    recs = [rec("io-mix", "cserve", h, 16.0, 130.0) for h in b.HANDOFFS]
    recs += [rec("io-mix", "baseline", h, 5.0, 190.0 + 10 * i) for i, h in enumerate(b.HANDOFFS)]
    recs += [rec("io-mix", "gunicorn", None, 17.0, 127.0)]
    md = b.markdown({"prediction": {"commit": "abcdef1"}, "rounds": 1, "warmup": 1.0, "duration": 4.0,
                     "baseline": "62f0f80"}, recs, pred)
    assert "| io-mix cserve/ring 8 | late | 1,000 (1,000–1,000) | 16.0 | 130.0 (130.0–130.0) |" in md
    assert "1,300 / 15.0 / 125.0 | +4 % |" in md and "1,300 / 4.0 / 200.0 | -5 % |" in md
    assert "Late ÷ early p99: predicted 0.62×, measured 0.63×" in md  # 130 over the median of 190..220
    n = b.numbers({}, recs, pred)
    assert n["late_early_p99:io-mix"]["text"] == "0.63×" and n["p99:io-mix:gunicorn"]["text"] == "127.0 ms"
    assert n["late_early_p99:cpu-mix"]["text"] == "not measured"


def test_measuring_refuses_a_prediction_not_committed(tmp_path):
    (tmp_path / "prediction.json").write_text("{}")
    p = subprocess.run([PY, "-m", "experiments.binding", "--out", str(tmp_path)], cwd=ROOT, capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode != 0 and "is not committed as it is" in p.stderr


def test_wrk_view_adds_what_wrks_correction_adds():
    # wrk's stats_correct: the interval is the run over the requests per
    # connection; a latency of at least twice it gets samples one interval
    # apart down to just above the interval.
    assert sorted(q.wrk_view([10.0, 50.0], 20.0, 1)) == [10.0, 20.0, 30.0, 40.0, 50.0]
    assert q.wrk_view([10.0, 15.0], 20.0, 1) == [10.0, 15.0]        # none reaches twice the interval
    r = q.simulate(32, 8, "sleep", 1000, 100000, 5, "early", **SMALL)
    assert r["p99_ms_wrk"] <= r["p99_ms"] and r["p50_ms_wrk"] >= r["p50_ms"]


def test_a_simulation_needs_a_window():
    import pytest
    for bad in ({"requests": 100, "warm": 100}, {"requests": 100, "warm": 10, "conns": 0}):
        kw = dict({"conns": 4}, **bad)
        with pytest.raises(ValueError):
            q.simulate(kw.pop("conns"), 2, "sleep", 1000, 1000, 0, "late", **kw)


def test_the_hold_ablation_pairs_every_shape_with_and_without_the_hold():
    from experiments import hold_ablation as h
    plan = h.plan()
    labels = [h.label(c) for c in plan]
    assert len(labels) == len(set(labels)) == len(h.HANDOFFS) * len(h.CONNS) * 2
    off = [c for c in plan if c["hold"] == "0"]
    assert all(c["args"] == ["--loop-hold", "0"] for c in off) and all("args" not in c for c in plan
                                                                        if c["hold"] == "default")


def test_the_swing_sets_each_shape_of_one_build_beside_the_other():
    from experiments import swing as s
    a = s.cfg("88e5b43", "build-base/a/cserve", "ring", 1)
    b = s.cfg("28e9b81", "build-base/b/cserve", "ring", 1)
    assert s.label(a) != s.label(b) and a["binary"] != b["binary"] and a["conns"] == 1 and a["client"] == "wrk"
    rows = {"x": {"config": a, "rps": 20000.0, "c_loop": 20.0, "c_client": 20.0},
            "y": {"config": b, "rps": 10000.0, "c_loop": 40.0, "c_client": 30.0}}
    import unittest.mock as mock
    with mock.patch.object(s.probe, "summarise", return_value=rows):
        n = s.numbers({"builds": ["88e5b43", "28e9b81"]}, [])
    assert (n["rate_ratio"]["text"], n["loop_ratio"]["text"], n["client_ratio"]["text"]) == ("0.50×", "2.00×", "1.50×")

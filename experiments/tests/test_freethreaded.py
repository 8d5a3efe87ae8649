"""experiments/freethreaded.py's pure parts: which stage binds, each stage's
share, the thread roles, the rotated rounds and the table from a record.
No server runs; well under a second."""
import json

from experiments import freethreaded as ft
from experiments.lib import generated


def test_binds_names_the_first_saturated_stage_then_the_machine():
    assert ft.binds(95, 95, 95, 2.0) == "loop"
    assert ft.binds(50, 92, 95, 2.0) == "pool"
    assert ft.binds(50, 60, 91, 1.0) == "client"
    assert ft.binds(50, 60, 70, 1.95) == "machine"
    assert ft.binds(50, 60, 70, 1.5) == "unsaturated"
    assert ft.binds(None, None, None, None) == "unsaturated"


def shares_of(build, bt, pools):
    r = ft.config(build, "cpu", False, bt)
    return r, {"loop": [{"pct": 30.0}], "client": [{"pct": 20.0}], "other": [],
               "pool": [{"pid": 1, "pct": p} for p in pools]}


def test_the_pool_stage_is_one_core_with_a_gil_and_one_per_thread_without():
    # Two threads sharing a GIL at 48 % each: the GIL is held 96 % of the time.
    assert ft.stage_pcts(*shares_of("gil", 2, [48, 48])) == (30.0, 96.0, 20.0)
    assert ft.stage_pcts(*shares_of("ft-gil", 2, [48, 48]))[1] == 96.0
    # Without it, the same two threads use half of their two cores.
    assert ft.stage_pcts(*shares_of("ft", 2, [48, 48]))[1] == 48.0


def test_granians_first_tokio_thread_is_its_runtime():
    r = ft.config("granian", "cpu", False, 2)
    rows = [{"name": "tokio-rt-worker", "pid": 7, "tid": 10, "mean_pct": 17.0},
            {"name": "python", "pid": 7, "tid": 11, "mean_pct": 31.0},
            {"name": "tokio-rt-worker", "pid": 7, "tid": 16, "mean_pct": 51.0},
            {"name": "wrk", "pid": 9, "tid": 9, "mean_pct": 13.0}]
    sh = ft.shares(r, rows, client_pid=9)
    assert [t["pct"] for t in sh["loop"]] == [17.0]
    assert [t["pct"] for t in sh["pool"]] == [51.0, 31.0]
    assert [t["pct"] for t in sh["client"]] == [13.0]


def test_rounds_run_every_configuration_once_each_rotated():
    rows = ft.plan(granian=False)
    order = ft.rounds_order(rows, 3)
    assert len(order) == 3 * len(rows)
    for rnd in range(3):
        labels = [ft.label(r) for k, r in order if k == rnd]
        assert sorted(labels) == sorted(ft.label(r) for r in rows)
    firsts = {ft.label(r) for k, r in order if order.index((k, r)) % len(rows) == 0}
    assert len(firsts) == 3
    assert not any(r["build"] == "granian" for r in rows)


def test_the_table_and_findings_come_from_the_record(tmp_path):
    meta = {"kind": "meta", "time": "t", "command": "/usr/bin/python3 -m experiments.freethreaded", "commit": "abc",
            "quick": False, "rounds": 2, "durations": {"warmup": 1, "window": 3, "margin": 1},
            "cpu_iterations": ft.CPU_ITERATIONS, "granian_missing": None,
            "machine": {"cpu_model": "cpu", "nproc": 2, "kernel": "k"},
            "versions": {"gil": "g", "ft": "f", "granian": "2", "wrk": "wrk"}}
    recs = [meta]
    for build, bt, rps, workers in (("gil", 1, 1000, 1), ("gil", 2, 1000, 1), ("ft", 1, 800, 1),
                                    ("ft", 2, 1500, 1), ("ft", 1, 1600, 2)):
        r = ft.config(build, "cpu", False, bt, workers=workers)
        for rnd, scale in ((0, 1.0), (1, 1.1)):
            pool = 95.0 if bt == 1 else 60.0
            recs.append({"kind": "run", "label": ft.label(r), "config": r, "round": rnd, "rps": rps * scale,
                         "loop_pct": 20.0, "pool_stage_pct": pool, "client_pct": 15.0, "pool_us_per_req": 100.0,
                         "rss_kib": 1024 * 10 * workers, "processes": workers,
                         "shares": {"pool": [{"pct": pool}] * bt},
                         "window_cpu": {"busy_cores": 1.95 if bt > 1 else 1.4, "steal_cores": 0.0,
                                        "foreign_cores": 0.01}})
    recs.append(dict(recs[-1], superseded=True, rps=1.0))  # a rerun's first try: not counted
    path = tmp_path / "freethreaded.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in recs))
    text = "\n".join(ft.block(str(path)))
    assert "| cserve, GIL | cpu | not pipelined | 1 | 1,050 (1,000–1,100) |" in text
    assert "| processes | 2 × 1 | 1,680 (1,600–1,760) | 20.0 (20.0–20.0) |" in text
    assert "Pool scaling, cserve, free-threaded, cpu not pipelined: 2 threads 1.88×" in text
    assert "One thread, free-threaded / GIL build, cpu not pipelined: 0.80× the rate." in text
    assert "2 processes × 1 thread against 1 process × 2 threads (free-threaded, cpu): 1.07× the rate, " \
           "2.00× the RSS." in text
    assert "| pool |" in text and "| machine |" in text
    doc = tmp_path / "doc.md"
    begin, end = generated.begin("freethreaded"), generated.end("freethreaded")
    doc.write_text(f"before\n{begin}\nold\n{end}\nafter\n")
    generated.write("freethreaded", str(path), [str(doc)])
    assert doc.read_text().startswith(f"before\n{begin}\n\n`/usr/bin/python3 -m experiments.freethreaded`")
    assert doc.read_text().endswith(f"{end}\nafter\n")

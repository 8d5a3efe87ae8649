"""experiments/auto_threads.py's pure parts: the plan, the threads a run
settled on, and the goal's two findings and the table from summarised rows.
No server runs; well under a second."""
from experiments import auto_threads as at


def test_the_plan_is_every_count_and_auto_for_both_apps_on_their_paths():
    labs = [lab for lab, _ in at.plan(False)]
    assert len(labs) == len(set(labs)) == 2 * (len(at.COUNTS) + 1)
    for lab, c in at.plan(False):
        assert c["conns"] == at.CONNS and c["path"].startswith("/?us=")
        assert lab.startswith(c["family"] + " ")
    assert at.plan(False)[0][1]["path"] == "/?us=10000&mode=sleep"
    assert {c["bt"] for _, c in at.plan(True)} == {1, 4, 32, "auto"}


def test_settled_reads_the_worker_s_threads_at_the_window_s_end():
    rec = {"stats_window": {"blocking_threads": [{"auto": True, "active": 24, "started": 24, "max": 32}]}}
    assert at.settled(rec) == 24
    assert at.settled({"stats_window": {"blocking_threads": [None]}}) is None
    assert at.settled({}) is None


def row(app, bt, rps, settled):
    return {"label": at.label(at.cfg(app, bt)), "config": at.cfg(app, bt), "rps": rps, "rps_range": (rps, rps),
            "regime": "unsaturated", "regime_n": 3, "regime_of": 3, "all_disturbed": False, "pool_util": 0.1,
            "loop_util": 0.1, "settled_all": settled}


def rows(io_auto, cpu_settled):
    rs = [row("io", n, 100.0 * n, [n] * 3) for n in at.COUNTS[:-1]] + [row("io", 32, 2400.0, [32] * 3),
                                                                         row("io", "auto", io_auto, [24, 24, 25])]
    rs += [row("cpu", n, 1000.0 - n, [n] * 3) for n in at.COUNTS] + [row("cpu", "auto", 990.0, cpu_settled)]
    return {r["label"]: r for r in rs}


def test_the_findings_read_the_goal():
    rs = rows(2300.0, [1, 1, 1])
    best, auto, ratio = at.verdict(rs, "io")
    assert best["config"]["bt"] == 32 and auto["config"]["bt"] == "auto" and abs(ratio - 2300 / 2400) < 1e-9
    io, cpu = at.findings(rs)
    assert "96 % of the best hand-picked count (32 threads, 2,400/s), within 10 %; it settled on 24–25 threads" in io
    assert cpu.startswith("CPU-bound app: auto stayed at one thread in 3 of 3 runs")
    io, cpu = at.findings(rows(2000.0, [1, 2, 1]))
    assert "83 %" in io and "not within 10 %" in io
    assert "in 2 of 3 runs" in cpu


def test_the_table_has_a_row_per_configuration_in_the_plan_s_order():
    lines = at.table(rows(2300.0, [1, 1, 1]))
    assert len(lines) == 2 + 2 * (len(at.COUNTS) + 1)
    assert lines[2].startswith("| io | 1 | 100 (100–100) | 4 % |")
    assert "| io | auto | 2,300 (2,300–2,300) | 96 % | 10 / 10 | 24–25 |" in "\n".join(lines)

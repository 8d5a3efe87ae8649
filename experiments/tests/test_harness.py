"""The harness's own logic, on synthetic inputs (pure Python, well under a
second): the regime rule, the model's out-of-sample discipline, the
bootstrap, the run plan, the trace reduction and the simulation."""
import os
import types

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
from experiments.lib import configs, model, stats


def rec(server="cserve", loop=None, pools=(), client=None, rps=100000.0, app="hello", bt=1, conns=16,
        client_kind="wrk", handoff="ring", sweep="x", mode=None, peer_threads=()):
    """A run record shaped like run.py's, with the utilisations given."""
    cfg = {"server": server, "app": app, "conns": conns, "client": client_kind}
    if server == "cserve":
        cfg.update(handoff=handoff, bt=bt)
        if mode:
            cfg["mode"] = mode
    reqs = int(rps)
    th = []
    if server == "cserve":
        th.append({"name": "cserve-loop", "role": "loop", "cpu_s": loop, "utilisation": loop, "requests": reqs,
                   "counters": {}})
        for i, u in enumerate(pools):
            th.append({"name": f"cserve-pool-{i}", "role": "pool", "cpu_s": u, "utilisation": u,
                       "requests": reqs // max(1, len(pools)), "counters": {}})
    # peer_threads: (name, utilisation) or (name, utilisation, pid): one process unless told
    tc = [{"name": t[0], "median_pct": 100 * t[1], "us_per_request": t[1] / rps * 1e6,
           "pid": t[2] if len(t) > 2 else 1} for t in peer_threads]
    if client is not None:
        tc.append({"name": "wrk", "median_pct": 100 * client, "us_per_request": client / rps * 1e6})
    r = {"label": configs.label(cfg), "config": cfg, "rps": rps, "rps_wrk": rps, "latency": {},
         "stats_threads": th or None, "stats_window": {"window_s": 1.0}, "threadcpu": tc,
         "window_cpu": {"foreign_cores": 0.0, "steal_cores": 0.0}, "sweep": sweep}
    return r


@pytest.mark.parametrize("kw, want", [
    (dict(loop=0.95, pools=[0.3], client=0.5), "loop-bound"),
    (dict(loop=0.5, pools=[0.92], client=0.5), "pool-bound"),
    # The pool stage is the GIL: two threads at 0.47 each are one saturated stage.
    (dict(loop=0.5, pools=[0.47, 0.47], client=0.5, bt=2), "pool-bound"),
    (dict(loop=0.7, pools=[0.3], client=0.95), "client-bound"),
    # The client is a stage like the others: the busiest saturated stage names
    # the regime (the loop is kept beside it, see regime_also).
    (dict(loop=0.93, pools=[0.3], client=0.95), "client-bound"),
    (dict(loop=0.96, pools=[0.3], client=0.95), "loop-bound"),
    # Nothing saturated and the machine not measured full: unsaturated.
    (dict(loop=0.8, pools=[0.7], client=0.8), "unsaturated"),
])
def test_regime_is_read_from_utilisation(kw, want):
    assert model.metrics(rec(**kw))["regime"] == want


def test_a_peers_stages_follow_cserves_rule():
    # Granian: its tokio thread is its loop, its Python thread its pool.
    r = rec(server="granian", peer_threads=[("tokio-rt-worker", 0.6), ("python3", 1.0)], client=0.5)
    m = model.metrics(r)
    assert m["regime"] == "pool-bound" and m["loop_util"] == 0.6 and m["pool_util"] == 1.0
    r = rec(server="granian", peer_threads=[("tokio-rt-worker", 0.95), ("python3", 0.6)], client=0.5)
    assert model.metrics(r)["regime"] == "loop-bound"
    # gunicorn's two Python threads of one interpreter share its GIL: 52 % and
    # 50 % are one saturated pool, though neither thread is at 90 %.
    r = rec(server="gunicorn", peer_threads=[("python3", 0.52), ("python3", 0.50)], client=0.5)
    m = model.metrics(r)
    assert m["regime"] == "pool-bound" and abs(m["pool_util"] - 1.02) < 1e-9 and m["loop_util"] is None
    # Two processes are two interpreters: 60 % each is not a saturated pool.
    r = rec(server="uwsgi", peer_threads=[("uwsgi", 0.6, 11), ("uwsgi", 0.6, 12)], client=0.5)
    m = model.metrics(r)
    assert m["regime"] == "unsaturated" and abs(m["pool_util"] - 0.6) < 1e-9


def calib_records():
    # loop 10 µs, pool 4 µs (+0.9 µs per app µs), client 6 µs per request, at 50k rps.
    rps = 50000.0
    out = []
    for h in ("ring", "dgram"):
        out.append(rec(loop=10e-6 * rps, pools=[4e-6 * rps], client=6e-6 * rps, rps=rps, handoff=h,
                       client_kind="wrk-p16", sweep="calib"))
        out.append(rec(loop=10e-6 * rps, pools=[22e-6 * rps], client=6e-6 * rps, rps=rps, handoff=h,
                       app="cpu20", client_kind="wrk-p16", sweep="calib"))
    out.append(rec(loop=12e-6 * rps, pools=[4e-6 * rps], client=8e-6 * rps, rps=rps, conns=64, sweep="calib"))
    out.append(rec(mode="native", loop=5e-6 * rps, client=6e-6 * rps, rps=rps, client_kind="wrk-p16",
                   sweep="calib"))
    return out


def test_model_fit_uses_the_calibration_costs():
    p = model.fit(calib_records())
    assert p["c_loop"]["ring/wrk-p16"] == pytest.approx(10)
    assert p["c_pool0"]["ring"] == pytest.approx(4)
    assert p["slope"]["ring"] == pytest.approx(0.9)
    assert p["c_client"]["wrk-p16"] == pytest.approx(6)
    assert p["native"]["wrk-p16"] == pytest.approx(5)


def test_model_bounds():
    p = model.fit(calib_records())
    cfg = {"server": "cserve", "handoff": "ring", "bt": 1, "app": "cpu40", "conns": 16, "client": "wrk-p16"}
    # Pool: 4 + 0.9 * 40 = 40 µs -> 25k; loop 100k; shared 2e6/(10+40+6) = 35.7k.
    rate, bound, c = model.predict(p, cfg, {"foreign": 0.0}, 2)
    assert bound == "pool" and rate == pytest.approx(25000)
    # The same pool cost with two blocking threads: still one GIL, the same bound
    # (regime() sums pool utilisation; pred must not divide by threads).
    rate2, _, _ = model.predict(p, dict(cfg, bt=2), {"foreign": 0.0}, 2)
    assert rate2 == pytest.approx(rate)
    # Hello on a busy machine: foreign CPU shrinks the shared bound.
    rate3, bound3, _ = model.predict(p, dict(cfg, app="hello"), {"foreign": 1.0}, 2)
    assert bound3 == "machine" and rate3 == pytest.approx(1e6 / (10 + 4 + 6))
    # Steal takes cores from N exactly as foreign CPU does.
    rate4, bound4, c4 = model.predict(p, dict(cfg, app="hello"), {"foreign": 0.25, "steal": 0.75}, 2)
    assert bound4 == "machine" and c4["n"] == pytest.approx(1.0) and rate4 == pytest.approx(rate3)


def test_cpu_app_has_its_own_intercept_when_cpu0_is_calibrated():
    # The cpu app costs 7 µs at N=0 (its own parsing and call), hello 4 µs:
    # cpuN's line runs through cpu0 and cpu20 (7 + 0.75 N), hello keeps 4.
    rps = 50000.0
    cal = calib_records() + [rec(loop=11e-6 * rps, pools=[7e-6 * rps], client=6e-6 * rps, rps=rps, handoff=h,
                                 app="cpu0", client_kind="wrk-p16", sweep="calib") for h in ("ring", "dgram")]
    p = model.fit(cal)
    assert p["c_pool0"]["ring"] == pytest.approx(4)
    assert p["cpu_pool0"]["ring"] == pytest.approx(7)
    assert p["slope"]["ring"] == pytest.approx(0.75)
    assert p["c_loop"]["ring/wrk-p16"] == pytest.approx(10)  # hello's, not cpu0's
    assert model.pool_cost(p, "ring", "cpu8") == pytest.approx(7 + 0.75 * 8)
    assert model.pool_cost(p, "ring", "hello") == pytest.approx(4)
    assert model.pool_cost(p, "eventfd", "cpu8") == pytest.approx(7 + 0.75 * 8)  # uncalibrated: the ring's
    # Without cpu0 (older results) hello is the intercept, as before.
    assert model.pool_cost(model.fit(calib_records()), "ring", "cpu8") == pytest.approx(4 + 0.9 * 8)


def test_calibration_runs_are_never_scored_as_predictions():
    from experiments import report
    cal = calib_records()
    test = [rec(loop=0.5, pools=[0.2], client=0.3, rps=50000, app="cpu6", client_kind="wrk-p16", sweep="appcost")]
    sweeps = {"calib": cal, "appcost": test}
    p = model.fit(cal)
    summ = report.summarise(sweeps, p, 2)
    for s in summ.values():
        if "calib" in s["sweeps"]:
            assert s["pred_err"] == []
    assert summ[test[0]["label"]]["pred_err"]


def test_bootstrap_interval_is_deterministic_and_brackets_the_median():
    xs = [100, 104, 97, 111, 102]
    m, lo, hi = stats.median_ci(xs)
    assert (m, lo, hi) == stats.median_ci(list(xs))
    assert lo <= m <= hi and lo >= min(xs) and hi <= max(xs) and lo < hi
    r, rlo, rhi = stats.ratio_ci(xs, xs)
    assert r == 1 and rlo < 1 < rhi
    assert stats.overlap((1, 0.9, 1.1), (1.05, 1.0, 1.2)) and not stats.overlap((1, 0.9, 1.0), (2, 1.9, 2.1))


def test_plan_interleaves_shuffled_rounds_and_runs_each_configuration_once_per_round(monkeypatch):
    from experiments import run
    monkeypatch.setattr(run, "unavailable", lambda r: None)  # the plan, not this machine's installs
    a = types.SimpleNamespace(quick=False, sweep=None, repeats=5, headline_repeats=5, seed="t", placement=None,
                              wrk_threads=1)
    order = run.plan(a)
    labels = [configs.label(r) for _, _, r in order]
    uniq = set(labels)
    assert all(labels.count(lab) == 5 for lab in uniq)
    rounds = [[configs.label(r) for rep, _, r in order if rep == k] for k in range(5)]
    assert all(sorted(x) == sorted(uniq) for x in rounds)  # every round: each configuration once
    assert rounds[0] != rounds[1]                           # shuffled differently per round
    assert [configs.label(r) for _, _, r in run.plan(a)] == labels  # reproducible from the seed


def test_headline_rows_get_their_extra_runs_inside_the_interleaved_rounds(monkeypatch):
    from experiments import run
    monkeypatch.setattr(run, "unavailable", lambda r: None)  # the plan, not this machine's installs
    a = types.SimpleNamespace(quick=False, sweep=None, repeats=5, headline_repeats=configs.HEADLINE_REPEATS,
                              seed="t", placement=None, wrk_threads=1)
    order = run.plan(a)
    labels = [configs.label(r) for _, _, r in order]
    heads = {configs.label(r) for r in configs.headline()}
    assert heads <= set(labels)  # every headline row is a configuration of the plan
    for lab in set(labels):
        assert labels.count(lab) == (configs.HEADLINE_REPEATS if lab in heads else 5), lab
    # Spread, not appended: each fifth of the order (one round) holds every
    # configuration, and each headline row twice.
    n = len(order) // 5
    for k in range(5):
        chunk = labels[k * n:(k + 1) * n]
        assert set(chunk) == set(labels)
        assert all(chunk.count(h) == configs.HEADLINE_REPEATS // 5 for h in heads)
    reps = sorted(rep for rep, _, r in order if configs.label(r) == "cserve ring bt1 hello c64 wrk")
    assert reps == list(range(configs.HEADLINE_REPEATS))  # the extra runs' repeat numbers count on


def test_timeline_reduction_skips_a_span_whose_switch_in_was_lost():
    from experiments import timeline
    line = ("{c:>16} {p:>6} [000] {t:.6f}: sched:sched_switch: prev_comm={c} prev_pid={p} prev_prio=120 "
            "prev_state=S ==> next_comm={n} next_pid={q} next_prio=120")
    L, W = ("cserve-loop", 10), ("wrk", 20)
    ev = [(L, W, 1.000000), (W, L, 1.000010), (L, W, 1.000030), (L, W, 1.000050), (W, L, 1.000060)]
    text = "\n".join(line.format(c=a[0], p=a[1], n=b[0], q=b[1], t=t) for a, b, t in ev)
    spans, switches, _, _, _ = timeline.all_spans(text, {"cserve-loop": 10, "wrk": 20})
    loop = sorted((round(a), round(b)) for n, a, b in spans if n == "cserve-loop")
    # 0-0 (ran since the start), 10-30, 60-60 (on a CPU at the end); the
    # switch-out at 50 has no switch-in (a lost event): no 30-50 or 0-50 span.
    assert loop == [(0, 0), (10, 30), (60, 60)]
    assert switches == 5


def test_simulation_reproduces_the_pipeline_bounds():
    from experiments import des
    # Dedicated cores, no wake-ups: the slower stage sets the rate.
    r = des.simulate(10.0, 5.0, 1.0, 64, 1, 3, 0.0, 0.0, seconds=0.02)
    assert r == pytest.approx(1e6 / 10, rel=0.05)
    # One core for everyone: the sum of the costs.
    r1 = des.simulate(10.0, 5.0, 1.0, 64, 1, 1, 0.0, 0.0, seconds=0.02)
    assert r1 == pytest.approx(1e6 / 16, rel=0.05)


def test_perf_reduce_counts_a_static_interpreter_as_python():
    """With libpython linked into cserve (PYTHON_LINK=static) the interpreter's
    samples carry cserve's DSO; they must still land in user:python, and
    cserve's own functions (they have source lines) in user:cserve."""
    import subprocess
    binary = os.path.join(os.path.dirname(os.path.dirname(HERE)), "cserve")
    if not os.path.isfile(binary):
        pytest.skip("./cserve not built")
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    if "libpython static" not in version:
        pytest.skip("./cserve links the shared libpython: " + version.strip())
    from experiments.lib import perf_reduce as pr
    text = (f"cserve-pool-0 101 1000000 cpu-clock: \n\t  1 _PyEval_EvalFrameDefault ({binary})\n\n"
            f"cserve-pool-0 101 1000000 cpu-clock: \n\t  2 PyObject_Malloc ({binary})\n\n"
            f"cserve-pool-0 101 1000000 cpu-clock: \n\t  3 job_done ({binary})\n\n"
            f"cserve-loop 100 1000000 cpu-clock: \n\t  4 conn_hold ({binary})\n\n")
    threads = pr.reduce(pr.parse(text.splitlines(True)))
    pool, loop = threads["cserve-pool-0"], threads["cserve-loop"]
    assert pool["buckets"]["user:python"] == pytest.approx(0.002)
    assert pool["buckets"]["user:cserve"] == pytest.approx(0.001)
    assert loop["buckets"] == {"user:cserve": pytest.approx(0.001)}
    assert "_PyEval_EvalFrameDefault (cserve, static libpython)" in pool["funcs"]


def test_bench_commit_is_dirty_for_sources_not_for_recorded_results(tmp_path):
    """bench.git_rev (lib/provenance.git_commit) stamps a record with the
    checkout's commit: a changed or new source (asked from a subfolder too)
    marks it -dirty, while recorded results (experiments/results, a new one
    or an older one removed) change no build and leave it clean; no
    checkout, no commit."""
    import subprocess
    from experiments import bench

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    (tmp_path / "core").mkdir()
    (tmp_path / "experiments" / "results" / "old").mkdir(parents=True)
    (tmp_path / "core" / "loop.c").write_text("int x;\n")
    (tmp_path / "experiments" / "results" / "old" / "run.json").write_text("{}\n")
    git("init", "-q")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    rev = bench.git_rev(str(tmp_path))
    assert rev and not rev.endswith("-dirty")
    (tmp_path / "experiments" / "results" / "old" / "run.json").unlink()
    assert bench.git_rev(str(tmp_path)) == rev
    (tmp_path / "experiments" / "results" / "new.json").write_text("{}\n")
    assert bench.git_rev(str(tmp_path)) == rev
    (tmp_path / "core" / "new.c").write_text("int z;\n")
    assert bench.git_rev(str(tmp_path)) == rev + "-dirty"
    (tmp_path / "core" / "new.c").unlink()
    (tmp_path / "core" / "loop.c").write_text("int y;\n")
    assert bench.git_rev(str(tmp_path / "experiments")) == rev + "-dirty"
    assert bench.git_rev(str(tmp_path.parent / "not-a-checkout")) is None


def test_a_bench_record_is_set_beside_the_full_run(tmp_path):
    """A bench block ends with the full run's ring-over-Granian ratios and
    which of them meet the bench's goal, and says which record is the
    older: a bench's PASS does not stand alone beside a later full run
    that measures otherwise. A ratio the full run left out meets nothing."""
    import json
    from experiments import bench

    def r(v, text):
        return {"value": v, "text": text, "text_ci": text}
    (tmp_path / "numbers.json").write_text(json.dumps({
        "started": r("2026-12-05", "2026-12-05"), "provenance_commits": r(["abc"], "commit `abc`"),
        "ratio_ring_granian_c16": r(1.6, "1.60× [1.5×, 1.7×]"), "ratio_ring_granian_c64": r(1.4, "1.40× [1.3×, 1.5×]"),
        "ratio_ring_granian_c256": r(None, "left out: kept 80 %"), "ratio_ring_granian_flask": r(1.2, "1.20×")}))
    line = bench.against_full({"time": "2026-12-01T17:21:27+00:00"}, str(tmp_path))
    assert "is later than this record" in line and "c64 1.40× [1.3×, 1.5×]" in line
    assert "holds there at c16, not at c64 and c256." in line and "left out: kept 80 %" in line
    assert "is earlier than this record" in bench.against_full({"time": "2026-12-09T00:00:00+00:00"}, str(tmp_path))
    assert bench.against_full({"time": "2026-12-01T00:00:00+00:00"}, str(tmp_path / "none")) is None


def test_the_bench_judges_the_rings_spread_and_the_baseline_from_its_summary():
    """The two goals a baseline run adds: the ring's unpipelined hello may
    not spread more than 10 % between rounds at c16 and c64, and the ring
    keeps 0.95x the baseline binary's ring in every cell."""
    import types
    from experiments import bench
    a = types.SimpleNamespace(quick=False, baseline_bin="build-base/x/cserve")
    summ = {}
    for c in (16, 64, 256):
        for p in (1, 16):
            summ[("ring", "hello", c, p)] = {"rps": 100.0, "rps_min": 95.0, "rps_max": 104.0}
            summ[("base-ring", "hello", c, p)] = {"rps": 100.0}
    for c in (16, 64):
        summ[("ring", "flask", c, 1)] = {"rps": 10.0}
        summ[("base-ring", "flask", c, 1)] = {"rps": 10.4}
    g = {n: (ok, d) for n, ok, d in bench.goals(summ, a)}
    ok, d = g["the ring's unpipelined hello rate spreads <= 10% between rounds (max-min over median)"]
    assert ok and d == "c16 9%, c64 9%"
    ok, d = g["ring >= 0.95x the baseline's ring in every cell"]
    assert ok and "flask c16 0.96x" in d and "hello c64 p16 1.00x" in d
    summ[("ring", "hello", 64, 1)]["rps_min"] = 33.0  # one round fell to a third
    summ[("base-ring", "flask", 64, 1)]["rps"] = 11.0
    g = {n: (ok, d) for n, ok, d in bench.goals(summ, a)}
    assert g["the ring's unpipelined hello rate spreads <= 10% between rounds (max-min over median)"] == (
        False, "c16 9%, c64 71%")
    assert g["ring >= 0.95x the baseline's ring in every cell"][0] is False
    a.baseline_bin = None
    assert not any("baseline" in n for n, _, _ in bench.goals(summ, a))


def test_the_spread_goal_shows_each_round_with_where_the_pool_thread_ran():
    """Each round's rate beside the share of its window the pool thread
    was on the loop's CPU, slowest first; rows without it read as before."""
    import types
    from experiments import bench
    a = types.SimpleNamespace(quick=False, baseline_bin=None)
    summ = {("ring", "hello", c, 1): {"rps": 100e3, "rps_min": 60e3, "rps_max": 104e3,
                                      "each_rps": [104e3, 60e3, 100e3], "each_beside": [0.97, 0.02, None]}
            for c in (16, 64)}
    summ[("ring", "hello", 64, 1)].pop("each_beside")
    g = {n: (ok, d) for n, ok, d in bench.goals(summ, a)}
    ok, d = g["the ring's unpipelined hello rate spreads <= 10% between rounds (max-min over median)"]
    assert not ok
    assert d == "c16 44% (rounds: 60k, pool beside the loop 2%; 104k, pool beside the loop 97%), c64 44%"


def test_beside_counts_the_samples_with_both_threads_on_one_cpu():
    """share() over the samples that read both threads; a missing thread
    (native-hello has no pool) starts no sampler and reads None."""
    import threading
    import time
    from experiments.lib import beside, threadcpu
    assert beside.share([(0, 0), (0, 1), (None, 1), (1, 1)]) == 2 / 3
    assert beside.share([(None, 0)]) is None and beside.share([]) is None
    cpus = {11: 0, 12: 0}
    seen = threading.Event()

    def read(tid):
        seen.set()
        return cpus[tid]
    with beside.Beside(7, "loop", "pool", interval=0.001, read=read,
                       tid_of=lambda pid, name: {"loop": 11, "pool": 12}[name]) as b:
        assert seen.wait(5)
    assert b.samples and b.share() == 1.0
    with beside.Beside(7, "loop", "pool", read=read, tid_of=lambda pid, name: None) as b:
        time.sleep(0.01)
    assert b.samples == [] and b.share() is None
    me = beside.find_tid(os.getpid(), open(f"/proc/{os.getpid()}/comm").read().strip())
    assert me is not None and threadcpu.last_cpu(me) in os.sched_getaffinity(0)


def with_window(r, busy=None, steal=0.0, foreign=0.0, nproc=2):
    r = dict(r, window_cpu={"busy_cores": busy, "steal_cores": steal, "foreign_cores": foreign},
             machine={"nproc": nproc})
    return r


def test_regime_machine_bound_needs_a_full_machine_else_unsaturated_with_idle_cores():
    # Nothing saturated, 1.95 of 2 cores busy: the machine is the bound.
    m = model.metrics(with_window(rec(loop=0.8, pools=[0.6], client=0.55), busy=1.95))
    assert m["regime"] == "machine-bound" and m["idle"] == pytest.approx(0.05)
    # 1.4 busy: 0.6 core idle, nobody saturated: unsaturated, idle cores shown.
    m = model.metrics(with_window(rec(loop=0.6, pools=[0.3], client=0.5), busy=1.4))
    assert m["regime"] == "unsaturated" and m["idle"] == pytest.approx(0.6)
    # Steal is not idle: 1.5 busy + 0.45 stolen leaves 0.05 idle.
    m = model.metrics(with_window(rec(loop=0.8, pools=[0.3], client=0.4), busy=1.5, steal=0.45))
    assert m["regime"] == "machine-bound"


def test_two_saturated_stages_are_both_kept_busiest_first():
    m = model.metrics(with_window(rec(loop=0.94, pools=[0.2], client=0.98), busy=1.99))
    assert m["regime"] == "client-bound" and m["regime_also"] == ["loop-bound"]
    r = rec(server="granian", peer_threads=[("tokio-rt-worker", 0.6), ("python3", 1.0)], client=0.93)
    m = model.metrics(r)
    assert m["regime"] == "pool-bound" and m["regime_also"] == ["client-bound"]


def test_disturbed_runs_are_left_out_and_counted():
    from experiments import report
    clean = [with_window(rec(loop=0.5, pools=[0.3], client=0.5, rps=100000.0 + i), busy=1.3, steal=0.01)
             for i in range(3)]
    stolen = [with_window(rec(loop=0.5, pools=[0.3], client=0.5, rps=5000.0), busy=1.0, steal=0.8),
              with_window(rec(loop=0.5, pools=[0.3], client=0.5, rps=6000.0), busy=1.3, foreign=0.06)]
    assert not any(model.disturbed(r) for r in clean) and all(model.disturbed(r) for r in stolen)
    summ = report.summarise({"x": clean + stolen}, model.fit([]), 2)
    s = summ[clean[0]["label"]]
    assert s["n"] == 3 and s["disturbed"] == 2 and s["rps"][0] == pytest.approx(100001.0)
    assert "(+2 disturbed)" in report.table(summ, "x")
    # A quick run keeps them (plumbing, not rates).
    assert report.summarise({"x": clean + stolen}, model.fit([]), 2, exclude_disturbed=False)[s["label"]]["n"] == 5


def test_a_disturbed_calibration_run_moves_no_cost():
    cal = calib_records()
    bad = with_window(rec(loop=30e-6 * 50000, pools=[4e-6 * 50000], client=6e-6 * 50000, rps=50000.0,
                          client_kind="wrk-p16", sweep="calib"), busy=1.0, steal=0.5)
    assert model.fit(cal + [bad, bad])["c_loop"]["ring/wrk-p16"] == pytest.approx(10)


def test_runner_reruns_a_disturbed_run_within_its_bounds_then_leaves_it_out():
    from experiments import run
    a = types.SimpleNamespace(disturb_limit=0.05, reruns=2, rerun_cap=10)
    ok = with_window(rec(loop=0.5, client=0.5), busy=1.0, steal=0.02)
    bad = with_window(rec(loop=0.5, client=0.5), busy=1.0, steal=0.3)
    assert run.rerun_decision(ok, 0, 0, a) == "keep"
    assert run.rerun_decision(dict(bad, error="x"), 0, 0, a) == "keep"  # a failure is not steal
    assert run.rerun_decision(bad, 0, 0, a) == "rerun"
    assert run.rerun_decision(bad, 1, 0, a) == "rerun"
    assert run.rerun_decision(bad, 2, 0, a) == "exclude"   # per-run bound
    assert run.rerun_decision(bad, 0, 10, a) == "exclude"  # the run's cap on reruns in all
    a.disturb_limit = 0.5
    assert run.rerun_decision(bad, 0, 0, a) == "keep"


def test_small_samples_give_ranges_large_ones_bootstrap_intervals():
    xs = [100, 104, 97, 111, 102]
    assert stats.median_ci(xs) == (102, 97, 111) and stats.interval_kind(5) == "range"
    assert stats.ratio_ci(xs, [50, 52, 49]) == (102 / 50, 97 / 52, 111 / 49)
    big = [100 + (i * 7) % 13 for i in range(20)]
    m, lo, hi = stats.median_ci(big)
    assert stats.interval_kind(20) == "CI" and stats.interval_kind(20, 5) == "range"
    assert min(big) < lo <= m <= hi < max(big)
    from experiments.lib import numbers
    assert numbers.interval_text(2.0, 1.5, 3.0, "ratio", "range") == "2.00× (range 1.50×–3.00×)"
    assert numbers.interval_text(2.0, 1.5, 3.0, "ratio", "CI") == "2.00× [95 % CI 1.50×, 3.00×]"


def test_agreement_counts_median_differences_and_regime_flips_not_overlaps():
    pairs = [("a", 100, 105, "loop-bound", "loop-bound"),     # 5 %: agrees
             ("b", 100, 130, "unsaturated", "unsaturated"),   # 30 %: differs
             ("c", 100, 95, "client-bound", "unsaturated"),   # flips
             ("d", None, 90, "x", "x")]                        # not measured in A: not counted
    ag = stats.agreement(pairs)
    assert (ag["of"], ag["differ"], ag["flips"]) == (3, 1, 1)


def test_ratios_agree_across_runs_only_when_each_spread_holds_the_other_median():
    from experiments import report

    def r(v, lo, hi):
        return {"value": v, "lo": lo, "hi": hi, "text_ci": f"{v}"}
    a = {"ratio_x": r(2.0, 1.5, 2.5), "ratio_y": r(1.0, 0.9, 1.1), "ratio_z": r(1.2, 1.0, 1.4),
         "ratio_x:n": {"value": [5, 5]}, "rps:q": r(1.0, 1.0, 1.0)}
    b = {"ratio_x": r(2.2, 2.1, 2.3),   # A's range holds B's median, B's does not hold A's: not agreed
         "ratio_y": r(1.05, 0.8, 1.2),  # each holds the other's: agreed
         "ratio_z": {"value": None, "text_ci": "not measured in this run"}}  # not in both: not counted
    text, hold, same, firm, of = report.ratio_agreement(a, b)
    assert (hold, same, firm, of) == (1, 2, 1, 2)  # x: both above 1x though B's range misses A's median; y: both span it
    assert "| x | 2.0 | 2.2 | +10 % | no | above / above |" in text
    assert "| y | 1.0 | 1.05 | +5 % | yes | spans / spans |" in text
    c = {"ratio_y": r(1.3, 1.2, 1.4)}
    assert report.ratio_agreement({"ratio_y": a["ratio_y"]}, c)[2:4] == (0, 0)  # spans 1x in A, above it in B


def test_between_runs_a_ratio_spans_both_intervals_and_a_count_both_values():
    from experiments.lib import numbers

    def r(v, lo, hi):
        return {"value": v, "lo": lo, "hi": hi, "text": f"{v}", "text_ci": f"{v}"}
    N = {"ratio_x": r(1.5, 1.3, 1.7), "ratio_y": r(2.0, None, None), "ratio_z": r(1.1, 1.0, 1.2),
         "ratio_x:n": {"value": [5, 5]}, "count:loop-bound": {"value": 1}, "count:pool-bound": {"value": 39},
         "count:client-bound": {"value": 12}}
    other = {"ratio_x": r(3.6, 3.0, 4.0), "ratio_y": r(1.8, None, None),
             "count:loop-bound": {"value": 1}, "count:pool-bound": {"value": 35}}
    numbers.between_run_numbers(N, other)
    assert N["between:ratio_x"]["text"] == "1.30–4.00× across two runs"   # the low end of one, the high of the other
    assert N["between:ratio_y"]["value"] == [1.8, 2.0]                    # no intervals: the two medians
    assert N["between:ratio_z"]["text"] == "1.1 (this run only)"
    assert "between:ratio_x:n" not in N
    assert N["range:count:pool-bound"]["text"] == "35–39" and N["range:count:loop-bound"]["text"] == "1"
    assert N["range:count:client-bound"]["text"] == "12 (this run only)"


def test_model_region_says_where_a_prediction_leaves_its_calibration():
    calib = configs.full()["calib"]

    def cs(**kw):
        return dict({"server": "cserve", "handoff": "ring", "bt": 1, "app": "hello", "conns": 16,
                     "client": "wrk-p16"}, **kw)
    assert model.region(cs(conns=64), calib) == "identity"                    # a calibrated shape, other conns
    assert model.region(cs(client="wrk"), calib) == "identity"                # calibrated at c64
    assert model.region(cs(app="cpu8"), calib) == "interpolates"              # between cpu0 and cpu20
    assert model.region(cs(app="cpu40"), calib) == "extrapolates"             # dearer than any calibrated
    assert model.region(cs(handoff="condvar"), calib) == "extrapolates"       # costs borrowed from the ring
    assert model.region(cs(handoff="dgram", client="wrk", conns=64), calib) == "extrapolates"  # its c1 row is not fitted
    assert model.region(cs(conns=256, client="wrk"), calib) == "extrapolates"  # beyond the calibrated connections
    assert model.region(cs(client="wrk-browser", conns=64), calib) == "extrapolates"
    assert model.region({"server": "granian", "app": "hello", "conns": 64}, calib) is None


def test_sleeps_and_wakes_per_request_are_counted_by_regime():
    r = rec(loop=0.5, pools=(0.3,), client=0.5)
    loop = next(t for t in r["stats_threads"] if t["role"] == "loop")
    pool = next(t for t in r["stats_threads"] if t["role"] == "pool")
    loop["per_request"] = {"handoff.loop_parks": 0.75, "handoff.wakes_sent": 0.5, "handoff.loop_holds": 0.25}
    pool["per_request"] = {"handoff.parks": 0.5, "handoff.loop_wakes": 0.25}
    m = model.metrics(r)
    assert (m["sleeps_per_req"], m["wakes_per_req"], m["holds_per_req"]) == (1.25, 0.75, 0.25)
    summ = {"a": {"n": 3, "regime": "unsaturated", "sleeps_per_req": (1.0,), "wakes_per_req": (2.0,),
                  "holds_per_req": (0.0,)},
            "b": {"n": 3, "regime": "unsaturated", "sleeps_per_req": (3.0,), "wakes_per_req": (4.0,),
                  "holds_per_req": (0.5,)},
            "c": {"n": 3, "regime": "pool-bound", "sleeps_per_req": (0.1,), "wakes_per_req": (0.1,),
                  "holds_per_req": (0.0,)},
            "peer": {"n": 3, "regime": "unsaturated", "sleeps_per_req": (None,)}}
    assert model.waiting_by_regime(summ) == {"pool-bound": (1, 0.1, 0.1, 0.0), "unsaturated": (2, 2.0, 3.0, 0.25)}


def test_socket_errors_are_read_from_wrk():
    r = rec(loop=0.5, client=0.5)
    r["wrk_output"] = "  Socket errors: connect 0, read 95012, write 3, timeout 7\nRequests/sec: 1"
    assert model.metrics(r)["sock_err"] == 95012 + 3 + 7
    r["wrk_output"] = "Requests/sec: 1"
    assert model.metrics(r)["sock_err"] == 0


def test_a_row_from_another_commit_names_it():
    from experiments import report
    s = {"label": "cserve ring bt1 hello c64 wrk", "commits": ["bfa2c7d"]}
    assert report.label_cell(s, "5d5434ff0ffb") == "cserve ring bt1 hello c64 wrk (commit bfa2c7d)"
    assert report.label_cell(dict(s, commits=["5d5434f"]), "5d5434ff0ffb") == s["label"]


def test_open_loop_knee_is_the_clients_where_oha_saturates():
    from experiments.lib import extras
    pts = [{"offered": 10000, "achieved": 10000, "p99_us": 100, "client_cores": 0.3},
           {"offered": 20000, "achieved": 19500, "p99_us": 300, "client_cores": 0.6},
           {"offered": 30000, "achieved": 25000, "p99_us": 9000, "client_cores": 0.97}]
    # 19,500 of 20,000 is 97.5 %: met under the one rule (>= KNEE_ACHIEVED of the offer).
    assert extras.knee(pts) == 20000
    assert extras.knee_owner(pts, 20000) == "the client's"
    pts[2]["client_cores"] = 0.7
    assert extras.knee_owner(pts, 20000) == "the server's"


@pytest.mark.parametrize("seconds, want", [(4.5, "-d5s"), (4.0, "-d4s"), (2.1, "-d3s"), (1.8, "-d2s")])
def test_the_client_loads_past_the_window_not_a_rounded_down_second_short(seconds, want):
    # warm-up 1 + window 3 + margin 0.5 = 4.5 s: wrk -d4s would stop inside
    # the margin, and the window's last /proc sample would miss the client's
    # CPU (it read as foreign CPU, and the run was rerun as disturbed).
    from experiments.lib import probe, serverctl
    run = {"server": "cserve", "handoff": "ring", "app": "hello", "conns": 16, "client": "wrk"}
    assert want in serverctl.client_cmd(run, 8000, seconds)
    assert want in probe.wrk_cmd(dict(run, path="/"), 8000, seconds)


def test_worker_and_thread_counts_reach_every_server_and_the_label():
    from experiments.lib import serverctl
    one = {"server": "granian", "app": "hello", "conns": 64, "client": "wrk"}
    assert configs.label(one) == "granian hello c64 wrk"  # the recorded one-process labels stay
    assert configs.label(dict(one, workers=2, bt=16)) == "granian w2 bt16 hello c64 wrk"
    cs = {"server": "cserve", "handoff": "ring", "bt": 16, "workers": 2, "app": "hello", "conns": 64,
          "client": "wrk"}
    assert configs.label(cs) == "cserve ring bt16 w2 hello c64 wrk"
    assert configs.label(dict(cs, workers=1, bt=1)) == "cserve ring bt1 hello c64 wrk"

    def flag(cmd, name):
        return cmd[cmd.index(name) + 1]
    c = serverctl.server_cmd(cs, 8000)
    assert flag(c, "--workers") == "2" and flag(c, "--blocking-threads") == "16"
    assert "--workers" not in serverctl.server_cmd(dict(cs, workers=1), 8000)
    g = serverctl.server_cmd(dict(one, workers=2, bt=16), 8000)
    assert flag(g, "--workers") == "2" and flag(g, "--blocking-threads") == "16"
    u = serverctl.server_cmd(dict(one, server="uwsgi", workers=2, bt=16), 8000)
    assert flag(u, "--processes") == "2" and flag(u, "--threads") == "16" and "--master" in u
    assert "--http11-socket" in u
    gu = serverctl.server_cmd(dict(one, server="gunicorn", workers=2, bt=16), 8000)
    assert flag(gu, "--workers") == "2" and flag(gu, "--threads") == "16" and flag(gu, "-k") == "gthread"


def test_a_configuration_that_cannot_run_here_says_what_is_missing():
    from experiments.lib import serverctl
    cs = {"server": "cserve", "handoff": "ring", "app": "hello", "conns": 16, "client": "wrk"}
    assert "no nope/cserve (make BUILD=build-noinst" in serverctl.unavailable(dict(cs, binary="nope/cserve"))
    peer = {"server": "granian", "app": "hello", "conns": 16, "client": "wrk"}
    assert "not installed for /nonexistent/python" in serverctl.unavailable(dict(peer, python="/nonexistent/python"))


def test_requests_in_flight_by_littles_law():
    r = rec(loop=0.5, pools=[0.3], client=0.5, rps=10000.0, conns=64)
    r["latency"] = {"avg_us": 6400.0}  # 10,000/s × 6.4 ms = 64 in flight of 64 connections
    assert model.in_flight(r) == (64.0, 1.0)
    # One connection served at a time, as uWSGI with one thread: 1 in flight of 64.
    r["latency"] = {"avg_us": 100.0}
    assert model.in_flight(r) == (1.0, 1 / 64)
    # wrk pipelined times each response from its batch's write: no connection count.
    p = rec(loop=0.5, pools=[0.3], client=0.5, rps=10000.0, conns=16, client_kind="wrk-p16")
    p["latency"] = {"avg_us": 1000.0}
    assert model.in_flight(p) == (10.0, None)
    # pipeload times a batch: rate × latency / depth connections busy.
    q = rec(loop=0.5, pools=[0.3], client=0.5, rps=16000.0, conns=16, client_kind="pipeload")
    q["config"]["depth"] = 16
    q["latency"] = {"avg_us": 16000.0}
    n, share = model.in_flight(q)
    assert share == 1.0 and n == 16 * 17 / 2


def test_a_row_that_keeps_few_in_flight_is_left_out_of_ratios():
    # Too few in flight while the client has time to spare: the server's doing.
    row = {"in_flight_share": (0.02, None, None), "regime": "unsaturated", "regime_also": [],
           "client_on_cpu": (0.35, None, None), "client_run_delay": (0.05, None, None)}
    assert model.keeps_too_few(row)
    # A client busy or waiting for a CPU holds the connections itself.
    assert not model.keeps_too_few(dict(row, client_run_delay=(0.6, None, None)))
    assert not model.keeps_too_few(dict(row, regime="client-bound"))
    assert not model.keeps_too_few(dict(row, in_flight_share=(0.95, None, None)))
    assert not model.keeps_too_few(dict(row, in_flight_share=(None, None, None)))
    # In numbers: the ratio says why it is not there.
    from experiments import report
    cs_runs = [rec(loop=0.5, pools=[0.3], client=0.5, rps=20000.0 + i, conns=64) for i in range(3)]
    uw_runs = [rec(server="uwsgi", peer_threads=[("uwsgi", 0.5)], client=0.35, rps=12000.0 + i, conns=64)
               for i in range(3)]
    for r in cs_runs:
        r["config"]["binary"] = configs.NOINST
        r["label"] = configs.label(r["config"])
        r["latency"] = {"avg_us": 64 / r["rps"] * 1e6}
    for r in uw_runs:
        r["config"]["bt"] = configs.UWSGI_THREADS
        r["label"] = configs.label(r["config"])
        r["latency"] = {"avg_us": 80.0}  # 12,000/s × 80 µs: 1 of 64 in flight
    for r in cs_runs + uw_runs:
        r["window_cpu"]["sched"] = [{"name": "wrk", "role": "client", "on_cpu": 0.35, "run_delay": 0.0,
                                     "pid": 9, "tid": 9, "slices": 1}]
    from experiments.lib import numbers
    summ = report.summarise({"peers": cs_runs + uw_runs}, model.fit([]), 2)
    n = numbers.compute(summ, model.fit([]), [], {})
    assert n["ratio_ring_uwsgi_c64_noinst"]["text"] == \
        "left out: `uwsgi bt64 hello c64 wrk` kept 2 % of the client's requests in flight"
    for r in uw_runs:  # serving every connection: compared
        r["latency"] = {"avg_us": 64 / r["rps"] * 1e6}
    summ = report.summarise({"peers": cs_runs + uw_runs}, model.fit([]), 2)
    assert numbers.compute(summ, model.fit([]), [], {})["ratio_ring_uwsgi_c64_noinst"]["value"] > 1.5


def test_ready_waits_for_every_workers_listener():
    """cserve --workers N listens on slot k only once worker k has imported
    the app: a client started when the first accepted would pin every
    connection to it. wait_ready(listeners=N) holds out for N listeners."""
    import socket
    from experiments.lib import serverctl

    alive = types.SimpleNamespace(poll=lambda: None)
    socks = []
    try:
        for _ in range(2):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            s.bind(("127.0.0.1", socks[0].getsockname()[1] if socks else 0))
            socks.append(s)
        port = socks[0].getsockname()[1]
        socks[0].listen()
        assert serverctl.listening(port) == 1
        assert serverctl.wait_ready(alive, port, timeout=0.3, listeners=1)
        assert not serverctl.wait_ready(alive, port, timeout=0.3, listeners=2)
        socks[1].listen()
        assert serverctl.listening(port) == 2
        assert serverctl.wait_ready(alive, port, timeout=0.3, listeners=2)
    finally:
        for s in socks:
            s.close()

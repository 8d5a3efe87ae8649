"""The loop-bound regime's prediction and its report (experiments/prediction.py,
experiments/regime.py) on synthetic records: the placed model's bound, the
calibration read from either client's records, a crossover grid that
brackets the predicted cost, the rule that calls a configuration loop-bound
(a majority of its runs), the measured crossover, and the measuring step's
refusal of a prediction that is not committed. Pure Python but for a
temporary git repository; about a second."""
import json
import os
import subprocess
import sys

import pytest

from experiments import prediction, regime
from experiments.lib import entry, model, probe

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_placed_model_bounds():
    # The loop alone on a core: it bounds where it costs more than the pool and the client together.
    assert model.predict_placed(10.0, 4.0, 5.0, "loop-alone") == (1e5, "loop")
    r, b = model.predict_placed(10.0, 6.0, 5.0, "loop-alone")
    assert b == "pool+client" and abs(r - 1e6 / 11) < 1e-6
    assert model.predict_placed(3.0, 1.0, 4.0, "dedicated", client_threads=2)[1] == "loop"
    assert model.predict_placed(3.0, 1.0, 4.0, "shared", cpus=2)[1] == "client"
    assert model.predict_placed(3.0, 2.0, 2.5, "shared", cpus=2)[1] == "machine"
    assert model.predict_placed(None, 1.0, 1.0, "shared") == (None, None)


def run(label, cfg, loop_cpu, pool, client, rps=50000.0, loop_on=None, lost=0.0, pool_core=None):
    """A probe record: cserve's own window, /proc's client thread, schedstat."""
    reqs = int(rps)
    th = [{"name": "cserve-loop", "role": "loop", "cpu_s": loop_cpu, "utilisation": loop_cpu, "requests": reqs,
           "counters": {}},
          {"name": "cserve-pool-0", "role": "pool", "cpu_s": pool, "utilisation": pool, "requests": reqs,
           "counters": {}}]
    on = loop_cpu if loop_on is None else loop_on
    sched = [{"name": "cserve-loop", "role": "loop", "on_cpu": on, "run_delay": 0.0, "tid": 1, "pid": 1,
              "slices": 1},
             {"name": "cserve-pool-0", "role": "pool", "on_cpu": pool, "run_delay": 0.0, "tid": 2, "pid": 1,
              "slices": 1},
             {"name": "pipeload", "role": "client", "on_cpu": client, "run_delay": 0.0, "tid": 3, "pid": 2,
              "slices": 1}]
    return {"label": label, "config": cfg, "rps": rps, "rps_wrk": rps, "stats_threads": th,
            "stats_window": {"window_s": 1.0, "rps": rps}, "latency": {"avg_us": 16 * 16 / rps * 1e6},
            "threadcpu": [{"name": "pipeload", "median_pct": 100 * client, "us_per_request": client / rps * 1e6,
                           "pid": 2}],
            "window_cpu": {"busy_cores": loop_cpu + pool + client, "steal_cores": lost, "foreign_cores": 0.0,
                           "sched": sched},
            "placement": {"name": cfg.get("placement", "shared")}, "machine": {"nproc": 2}}


def calib_records():
    """Calibration of three shapes and the crossover's pool line (on
    prediction.CROSS, the chunked body), the costs chosen: loop 20 µs,
    client 8 µs, pool 5 µs (hello, the crossover's shape and the 8 KiB
    head) and 6 + 0.5 × N µs (cpuN)."""
    recs = []
    x = prediction.CROSS
    for h in ("ring", "dgram"):
        rps = 40000.0
        for app, pool_us in (("hello", 5.0), ("cpu0", 6.0), ("cpu20", 16.0)):
            c = regime.cfg(h, x["cookie"], x["conns"], x["depth"], app, chunks=x["chunks"])
            recs.append(run(prediction.label(c), c, 20e-6 * rps, pool_us * 1e-6 * rps, 8e-6 * rps, rps))
        c = regime.cfg(h, 8192, 16, 16)
        recs.append(run(prediction.label(c), c, 20e-6 * rps, 5e-6 * rps, 8e-6 * rps, rps))
        c = regime.cfg(h, 0, 64, 1)
        recs.append(run(prediction.label(c), c, 0.4, 0.2, 0.5, 100000.0))  # loop 4, pool 2, client 5 µs
    return recs


def test_prediction_from_calibration(tmp_path):
    path = tmp_path / "calib.jsonl"
    entry.write_records(str(path), {"kind": "meta", "commit": "abc", "date": "d"}, calib_records())
    p = prediction.make(entry.load(str(path))[1], {"commit": "abc"}, str(path))
    heads = {prediction.label(x["config"]): x for x in p["configs"] if x["family"] == "heads"}
    big = heads["dgram head +8 KiB p16 c16 @loop-alone"]
    assert big["bound"] == "loop" and big["regime"] == "loop-bound" and abs(big["rate"] - 50000) < 1e-6
    assert abs(big["pool_util"] - 0.25) < 1e-9
    small = heads["ring head +0 KiB c64 @loop-alone"]
    assert small["bound"] == "pool+client" and small["regime"] == "pool+client-bound"
    x = next(x for x in p["crossover"] if x["handoff"] == "ring")
    # 6 + 0.5 N + 8 = 20 at N = 12; the pool at 90 % of a core where it is 9 × the client's 8 µs.
    assert abs(x["app_us"] - 12) < 1e-9 and abs(x["slope"] - 0.5) < 1e-9 and abs(x["c_pool0"] - 6) < 1e-9
    assert abs(x["pool_at_us"] - (72 - 6) / 0.5) < 1e-9
    g = x["grid"]
    assert min(g) < 12 < max(g) and any(12 * 0.5 <= v < 12 for v in g) and any(12 < v <= 12 * 2 for v in g)
    assert max(g) == 132.0  # the pool's 90 % point closes the grid
    cross = [c for c in p["configs"] if c["family"] == "crossover" and c["config"]["handoff"] == "ring"]
    assert [c["app_us"] for c in cross] == g
    assert all(c["config"]["placement"] == "loop-alone" and c["config"]["client"] == "pipeload" for c in cross)
    assert [c["regime"] for c in cross][:2] == ["loop-bound", "loop-bound"] and cross[-1]["bound"] == "pool+client"
    assert p["calibration"]["sha256"] and "Crossover, ring" in prediction.markdown(p)


def test_grid_without_a_crossover_still_reaches_the_pool():
    assert prediction.grid(-3.0, 40.0, False) == [0.0, 10.0, 20.0, 40.0]
    assert prediction.grid(10.0, 5.0, False) == [0.0, 5.0, 8.0, 12.5, 20.0]
    assert prediction.grid(10.0, 90.0, True) == [0.0, 20.0]


def test_wrk_calibration_maps_to_the_same_shapes():
    # loopbound.py's records (wrk with heads.lua) calibrate the same shapes.
    c = {"server": "cserve", "handoff": "ring", "bt": 1, "app": "hello", "wrk_threads": 1, "family": "heads",
         "script": "heads.lua", "script_args": [4096, 16], "conns": 16}
    assert prediction.shape(c) == ("ring", 4096, 16, 16, "hello", 0, 1)
    assert prediction.shape(regime.cfg("ring", 4096, 16, 16)) == ("ring", 4096, 16, 16, "hello", 0, 1)
    assert prediction.shape(regime.cfg("ring", None, 16, 16, chunks=1024)) == ("ring", None, 16, 16, "hello", 1024, 1)
    assert prediction.shape(regime.cfg("ring", None, 16, 1, "upload", chunks=16, chunk_bytes=4096)) == (
        "ring", None, 16, 1, "upload", 16, 4096)
    assert prediction.shape({"script": "pipeline.lua", "script_args": [16], "conns": 16}) is None


def _pred_and_runs(strict_votes):
    """A prediction of one loop-bound configuration and its crossover grid,
    and runs of it: strict_votes[i] says whether run i is loop-bound."""
    recs = calib_records()
    p = prediction.make(recs, {}, __file__)
    lab = "dgram head +8 KiB p16 c16 @loop-alone"
    cfg = next(x["config"] for x in p["configs"] if prediction.label(x["config"]) == lab)
    runs = [run(lab, cfg, 0.97 if v else 0.80, 0.3, 0.4, 48000.0) for v in strict_votes]
    return p, runs, lab


def test_loop_bound_by_the_rule_in_a_majority_of_runs():
    p, runs, lab = _pred_and_runs([True, True, False])
    rs = regime.rows(runs, p)
    assert rs[lab]["strict_n"] == 2 and rs[lab]["strict"] and rs[lab]["tested"]
    assert abs(rs[lab]["err"] - (50000 / 48000 - 1)) < 1e-9
    assert "1 of 1 configurations" in regime.finding(rs, p, {}) and lab in regime.finding(rs, p, {})
    p, runs, lab = _pred_and_runs([True, False, False])
    rs = regime.rows(runs, p)
    assert not rs[lab]["strict"] and not rs[lab]["tested"]
    # The pool at 72 % of a core is not slack, whatever the loop does.
    m = model.metrics(run("x", regime.cfg("ring", 0, 16, 16, placement="loop-alone"), 0.99, 0.72, 0.2))
    assert m["loop_bound_strict"] is False and m["stages"]["pool+client"] == pytest.approx(0.92)
    assert m["regime"] == "loop-bound" and m["regime_also"] == ["pool+client-bound"]


def test_measured_crossover_is_bracketed_or_said_not_to_be():
    p = prediction.make(calib_records(), {}, __file__)
    grid = next(x for x in p["crossover"] if x["handoff"] == "ring")["grid"]
    recs = []
    for c in (c for c in p["configs"] if c["family"] == "crossover" and c["config"]["handoff"] == "ring"):
        lab = prediction.label(c["config"])
        loop_bound = c["app_us"] < 12
        recs += [run(lab, c["config"], 0.97 if loop_bound else 0.6, 0.4 if loop_bound else 0.9, 0.1)] * 3
    rs = regime.rows(recs, p)
    lo, hi, cross = regime.measured_crossover(rs, "ring")
    assert lo == max(g for g in grid if g < 12) and hi == min(g for g in grid if g > 12)
    assert f"measured between {lo:g} and {hi:g} µs" in "; ".join(regime.crossover_text(p, rs))
    every = [r for r in recs if r["config"]["app"] != f"cpu{max(grid):g}"]
    for r in every:
        r["stats_threads"][0]["utilisation"] = 0.97
        r["window_cpu"]["sched"][0]["on_cpu"] = 0.97
        r["stats_threads"][1]["utilisation"] = r["window_cpu"]["sched"][1]["on_cpu"] = 0.3
    rs = regime.rows(every, p)
    assert "not bracketed" in "; ".join(regime.crossover_text(p, rs))


def test_above_the_crossover_each_cost_says_what_bound_it():
    # Past the loop's last loop-bound cost the rows may saturate nothing
    # before the pool's core takes over: the text says which, cost by cost,
    # and does not call the first cost past the loop's the pool's.
    p = prediction.make(calib_records(), {}, __file__)
    grid = next(x for x in p["crossover"] if x["handoff"] == "ring")["grid"]
    recs = []
    for c in (c for c in p["configs"] if c["family"] == "crossover" and c["config"]["handoff"] == "ring"):
        us = c["app_us"]
        loop, pool, client = (0.97, 0.4, 0.1) if us < 12 else (0.6, 0.5, 0.1) if us < max(grid) else (0.5, 0.85, 0.13)
        recs += [run(prediction.label(c["config"]), c["config"], loop, pool, client)] * 3
    rs = regime.rows(recs, p)
    above = [g for g in grid if g > 12]
    groups = regime.after_loop(rs, "ring")
    assert groups == [(("unsaturated", ()), above[:-1]), (("pool+client-bound", ()), above[-1:])]
    text = regime.numbers({}, recs, p)["after_loop:ring"]["text"]
    assert text.startswith(f"nothing saturated at {above[0]:g}")
    assert text.endswith(f"then the shared pool-and-client core was the bound at {max(grid):g} µs "
                         "of app work")
    assert "above it, nothing saturated" in "; ".join(regime.crossover_text(p, rs))


def test_numbers_set_the_heads_apart_from_the_chunked_body():
    p, runs, lab = _pred_and_runs([True, True, False])
    n = regime.numbers({}, runs, p)
    assert n["heads_loop_bound"]["text"] == "1 of 1 configurations"
    assert n["heads_loop_max"]["text"] == "97 %" and n["heads_loop_max_config"]["text"] == f"`{lab}`"
    assert n["chunks"]["text"] == "none"
    c = regime.cfg("ring", None, 16, 16, placement="loop-alone", chunks=4096)
    p["configs"].append({"config": c, "family": "chunked", "regime": "loop-bound"})
    n = regime.numbers({}, runs + [run(prediction.label(c), c, 1.0, 0.1, 0.2)], p)
    assert n["chunks"]["text"] == "4,096" and n["heads_loop_bound"]["text"] == "1 of 1 configurations"


def test_realistic_prediction_sets_uploads_and_deep_pipelines_apart(tmp_path):
    # --realistic's calibration: every upload the app reads and every deep
    # pipeline is predicted, in a family of its own, with no crossover.
    plan = regime.calib_plan(False, realistic=True)
    assert len(plan) == len(regime.HANDOFFS) * (len(regime.UPLOADS) * len(regime.SHAPES) + len(regime.DEEP_SHAPES))
    assert "dgram small head body 16×4 KiB p16 c16 upload" in [lab for lab, _ in plan]
    assert "ring small head p256 c4" in [lab for lab, _ in plan]
    recs = [run(lab, c, 0.9, 0.3, 0.5) for lab, c in plan]
    path = tmp_path / "calib.jsonl"
    entry.write_records(str(path), {"kind": "meta", "commit": "abc", "date": "d"}, recs)
    p = prediction.make(entry.load(str(path))[1], {"commit": "abc"}, str(path))
    fams = {prediction.label(x["config"]): x["family"] for x in p["configs"]}
    assert len(fams) == len(plan) and p["crossover"] == []
    up = next(x["config"] for x in p["configs"] if x["family"] == "upload")
    assert up["app"] == "upload" and up["chunk_bytes"] >= 1024 and up["path"] == "/"
    assert sorted(set(fams.values())) == ["deep", "upload"]
    n = regime.numbers({}, [run(prediction.label(x["config"]), x["config"], 0.9, 0.3, 0.5) for x in p["configs"]], p)
    assert n["upload_loop_bound"]["text"].endswith(f"of {len(regime.UPLOADS) * len(regime.SHAPES) * 2} configurations")
    assert n["heads_loop_bound"]["text"] == "0 of 0 configurations"


def test_probe_sends_the_chunk_size_to_pipeload():
    c = regime.cfg("ring", None, 16, 1, "upload", chunks=16, chunk_bytes=1024)
    cmd = probe.wrk_cmd(c, 8000, 1.0)
    assert cmd[cmd.index("-k") + 1] == "16" and cmd[cmd.index("-K") + 1] == "1024"
    assert "-K" not in probe.wrk_cmd(regime.cfg("ring", None, 16, 16, chunks=4096), 8000, 1.0)


def test_numbers_and_report_without_a_measurement_say_so(tmp_path):
    p = prediction.make(calib_records(), {}, __file__)
    n = regime.numbers(None, [], p)
    # per handoff the 8 KiB head, the chunked body, and the three grid points below the crossover
    assert n["predicted_loop_bound"]["value"] == 10 and n["loop_bound"]["text"] == "not measured yet"
    assert n["crossover:ring"]["text"] == "not measured yet"
    p2, runs, lab = _pred_and_runs([True, True, False])
    n = regime.numbers({}, runs, p2)
    assert n["loop_bound"]["text"] == "1 of 1 configurations" and lab in n["loop_bound_example"]["text"]
    assert n["crossover:ring"]["text"] == "not measured (predicted 12.0 µs)"
    assert "Not measured yet" in regime.brief_md(None, [], p)


def _git(root, *args):
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True,
                   env=dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
                            GIT_COMMITTER_EMAIL="t@t"))


def test_committed_means_tracked_and_unchanged(tmp_path):
    _git(tmp_path, "init", "-q")
    f = tmp_path / "prediction.json"
    f.write_text("{}")
    assert prediction.committed(str(f), str(tmp_path)) == (None, False)
    _git(tmp_path, "add", "prediction.json")
    assert prediction.committed(str(f), str(tmp_path))[0] is None  # staged is not committed
    _git(tmp_path, "commit", "-q", "-m", "p")
    sha, clean = prediction.committed(str(f), str(tmp_path))
    assert clean and len(sha) == 40
    f.write_text('{"edited": 1}')
    assert prediction.committed(str(f), str(tmp_path)) == (sha, False)


def test_measuring_refuses_an_uncommitted_prediction(tmp_path):
    (tmp_path / "prediction.json").write_text(json.dumps(prediction.make(calib_records(), {}, __file__)))
    p = subprocess.run([sys.executable, "-m", "experiments.regime", "--out", str(tmp_path)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "is not committed" in p.stderr
    assert not (tmp_path / "regime.jsonl").exists()
    p = subprocess.run([sys.executable, "-m", "experiments.regime", "--out", str(tmp_path / "none")], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "--calibrate" in p.stderr


def test_the_recorded_regime_report_is_what_its_records_make():
    # A hand edit to regime.md, regime.brief.md or numbers.json (or a stale one) fails.
    pred = regime.load_prediction(regime.OUT)
    if pred is None:
        pytest.skip("no prediction recorded")
    path = os.path.join(regime.OUT, "regime.jsonl")
    meta, recs = entry.load(path) if os.path.exists(path) else (None, [])
    assert open(os.path.join(regime.OUT, "regime.md")).read() == regime.markdown(meta, recs, pred)
    assert open(os.path.join(regime.OUT, "regime.brief.md")).read() == regime.brief_md(meta, recs, pred)
    assert json.load(open(os.path.join(regime.OUT, "numbers.json"))) == regime.numbers(meta, recs, pred)
    assert open(os.path.join(regime.OUT, "prediction.md")).read() == prediction.markdown(pred)


def test_dedicated_prediction_gives_the_pool_a_core_of_its_own():
    # Dedicated: the pool's side is the pool alone, 6 + 0.5 N = 20 at N = 28;
    # the client's threads are in its configurations and its bound.
    recs = calib_records()
    for r in recs:
        r["config"] = dict(r["config"], wrk_threads=2)
        r["label"] = prediction.label(r["config"])
    p = prediction.make(recs, {}, __file__, placement="dedicated")
    x = next(x for x in p["crossover"] if x["handoff"] == "ring")
    assert abs(x["app_us"] - 28) < 1e-9 and min(x["grid"]) < 28 < max(x["grid"])
    small = next(c for c in p["configs"] if prediction.label(c["config"]) == "ring head +0 KiB c64 t2 @dedicated")
    # loop 4 µs, pool 2, client 5 on two threads: the loop binds at 250,000/s
    assert small["bound"] == "loop" and abs(small["rate"] - 250000) < 1e-6
    assert small["config"]["wrk_threads"] == 2


def test_the_crossover_figure_is_drawn_from_the_records(tmp_path):
    pytest.importorskip("matplotlib")
    p = prediction.make(calib_records(), {}, __file__)
    recs = []
    for c in (c for c in p["configs"] if c["family"] == "crossover"):
        recs.append(run(prediction.label(c["config"]), c["config"], 0.97 if c["app_us"] < 12 else 0.6, 0.4, 0.1))
    made = regime.figure(str(tmp_path), recs, p)
    assert sorted(os.path.basename(m) for m in made) == ["crossover.png", "crossover.svg"]
    assert regime.figure(str(tmp_path / "none"), [], p) == []  # nothing measured: no figure

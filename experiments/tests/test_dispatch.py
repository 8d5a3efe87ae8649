"""experiments/dispatch.py's pure parts: apps/mix.py's distribution, the
plan, the app's ceiling, the goals' PASS/FAIL from summarised records, and
the report and the docs block from a canned record. No server runs and
nothing is timed (the distribution's check runs the app's module in a
child interpreter: the tests may not import apps/)."""
import json
import os
import subprocess
import types

from experiments import dispatch as d
from experiments.lib import entry, probe
from experiments.lib.serverctl import PY, ROOT


def test_the_mix_draws_its_slow_share_from_a_seeded_generator():
    code = ("import random, mix\n"
            "mode, fast, slow, pct = mix.params('mode=cpu&fast=50&slow=5000&pct=5')\n"
            "rng = random.Random(1)\n"
            "slow_n = sum(mix.draw(pct, rng) for _ in range(20000))\n"
            "out = []\n"
            "body = b''.join(mix.application({'QUERY_STRING': 'mode=sleep&fast=0&slow=0&pct=100'}, "
            "lambda s, h: out.append((s, h))))\n"
            "print(mode, fast, slow, pct, slow_n, body, out[0][0], mix.params('pct=x&mode=nope'))\n")
    p = subprocess.run([PY, "-c", code], cwd=os.path.join(ROOT, "apps"), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    mode, fast, slow, pct, slow_n, body, status = p.stdout.split()[:7]
    assert (mode, fast, slow, pct) == ("cpu", "50.0", "5000.0", "5.0")
    # the same seed draws the same sequence: about pct % of 20000, exactly reproducible
    assert 900 <= int(slow_n) <= 1100
    assert body == "b'slow\\n'" and status == "200"
    # a malformed value keeps the default: sleep, 1 ms, 100 ms, 5 %
    assert p.stdout.strip().endswith("('sleep', 1000.0, 100000.0, 5.0)")


def test_the_plan_runs_every_cserve_row_beside_its_baseline_and_the_peers_at_its_threads():
    cfgs = d.plan(baseline="build-base/x/cserve")
    labs = [d.label(c) for c in cfgs]
    assert len(labs) == len(set(labs))
    io = [c for c in cfgs if c["cell"] == "io-mix"]
    assert {(c["row"], c["bt"]) for c in io} == {("cserve", 8), ("baseline", 8), ("gunicorn", 8), ("granian", 8),
                                                  ("uwsgi", 8)}
    assert all(c["conns"] == 32 and c["workers"] == 1 and c["path"].startswith("/?mode=sleep&fast=1000") for c in io)
    assert [c for c in io if c["row"] == "baseline"][0]["binary"] == "build-base/x/cserve"
    auto = [c for c in cfgs if c["cell"] == "auto-sleep"]
    assert {c["server"] for c in auto} == {"cserve"} and all(c["warmup"] == d.AUTO_WARMUP[0] for c in auto)
    assert all(c.get("warm_apart") for c in cfgs if c["cell"].startswith("auto-"))
    assert not any(c.get("warm_apart") for c in cfgs if not c["cell"].startswith("auto-"))
    assert {c["bt"] for c in auto} == {16, 32, 64, "auto", "auto:64"}
    fair = [c for c in cfgs if c["cell"] == "fairness"]
    assert len(fair) == 2 * 5 and all(c["bt"] == 1 and c["conns"] == 1 for c in fair)
    assert all(c["beside"] == {"conns": 1, "depth": d.DEPTH} for c in fair if c["phase"] == "beside")
    assert all(c["client"] == "burst" for c in cfgs if c["cell"] == "burst")
    quick = [d.label(c) for c in d.plan(quick=True)]
    assert "io-mix gunicorn 8" in quick and "burst cserve auto:8" in quick and not any("baseline" in x for x in quick)
    assert all(c["warmup"] == d.AUTO_WARMUP[1] for c in d.plan(quick=True) if c["cell"] == "auto-sleep")


def test_the_apps_ceiling_is_its_threads_over_its_mean_wait_or_one_over_its_python():
    assert d.mean_cost_us(d.IO_MIX) == (0.95 * 1000 + 0.05 * 100000, "sleep")
    assert round(d.ceiling(d.cfg("io-mix", "cserve", 8)), 6) == round(8 / 5950e-6, 6)
    assert round(d.ceiling(d.cfg("cpu-mix", "cserve", 4)), 6) == round(1e6 / (0.95 * 50 + 0.05 * 5000), 6)
    assert d.pool_size(d.cfg("auto-sleep", "cserve", "auto:64")) == 64
    assert d.pool_size(d.cfg("auto-sleep", "cserve", "auto")) == 64  # the connections: the cap is the build's
    assert d.ceiling(d.cfg("auto-sleep", "cserve", 16)) == 16 / 5e-3
    assert d.quantile([1, 2, 3, 4, 5], 0.5) == 3 and d.quantile([0, 10], 0.99) == 9.9 and d.quantile([], 0.5) is None


# ------------------------------------------------------------------ canned records

def wrk(cell, row, bt, rate, p99_ms, p50_ms=2.0, phase=None, rnd=0, share=1.0, lost=0.0, a_rate=None,
        starved=False):
    c = d.cfg(cell, row, bt, phase, binary="build-base/x/cserve" if row == "baseline" else None)
    secs = 5.0
    rec = {"label": d.label(c), "config": c, "rps": rate, "rps_wrk": rate, "round": rnd, "attempt": 0,
           "wrk_requests": int(rate * secs), "threadcpu": [], "machine": {"nproc": 2}, "server_cmd": f"x {row}",
           "latency": {"p50_us": p50_ms * 1e3, "p90_us": p99_ms * 500, "p99_us": p99_ms * 1e3,
                       "avg_us": c["conns"] * share / rate * 1e6 if rate else None},
           "window_cpu": {"foreign_cores": lost, "steal_cores": 0.0, "busy_cores": 0.5, "seconds": secs}}
    if lost > 0.05:
        rec["disturbed"] = True
    if a_rate is not None:
        rec["wrk_output"] = "pipeload-json: " + json.dumps({"requests": a_rate * 6, "seconds": 6.0})
    if starved:
        rec["starved"] = True
    return rec


def burst(row, bt, last_s, rnd=0):
    c = d.cfg("burst", row, bt, binary="build-base/x/cserve" if row == "baseline" else None)
    lat = [last_s * (i + 1) / 40 for i in range(40)]
    return {"label": d.label(c), "config": c, "round": rnd, "attempt": 0, "machine": {"nproc": 2},
            "rps": 40 / last_s, "rps_wrk": 40 / last_s, "server_cmd": f"x {row}",
            "burst": {"requests": 40, "answered": 40, "makespan_s": last_s, "latency_s": lat},
            "window_cpu": {"foreign_cores": 0.0, "steal_cores": 0.0, "busy_cores": 0.1, "seconds": last_s}}


def canned():
    recs = []
    for i in range(3):
        recs += [wrk("io-mix", "cserve", 8, 1300 + i, 110, rnd=i), wrk("io-mix", "baseline", 8, 1200, 180, rnd=i),
                 wrk("io-mix", "gunicorn", 8, 1250, 127, rnd=i), wrk("io-mix", "granian", 8, 1280, 150, rnd=i),
                 # uWSGI serves a quarter of the connections: the lowest p99, but no yardstick
                 wrk("io-mix", "uwsgi", 8, 1290, 5, share=0.25, rnd=i),
                 wrk("cpu-mix", "cserve", 4, 2600, 60, rnd=i), wrk("cpu-mix", "gunicorn", 4, 1700, 41, rnd=i),
                 wrk("auto-sleep", "cserve", 16, 3100, 22, rnd=i), wrk("auto-sleep", "cserve", 64, 9000, 8, rnd=i),
                 wrk("auto-sleep", "cserve", "auto", 8500, 11, rnd=i),
                 wrk("auto-sleep", "cserve", "auto:64", 8000, 13, rnd=i),
                 burst("cserve", 8, 2.5, rnd=i), burst("cserve", "auto:8", 4.0, rnd=i),
                 burst("baseline", 8, 2.5, rnd=i), burst("baseline", "auto:8", 20.0, rnd=i),
                 wrk("fairness", "cserve", 1, 190, 6, 5.3, "alone", rnd=i),
                 wrk("fairness", "cserve", 1, 120, 12, 9.0, "beside", a_rate=70, rnd=i),
                 wrk("fairness", "baseline", 1, 190, 6, 5.3, "alone", rnd=i),
                 wrk("fairness", "baseline", 1, 6, 180, 171, "beside", a_rate=180, rnd=i),
                 wrk("fairness", "uwsgi", 1, 190, 6, 5.3, "alone", rnd=i),
                 wrk("fairness", "uwsgi", 1, 0, 0, 0, "beside", a_rate=190, starved=True, rnd=i)]
    # a disturbed run is left out of the medians
    recs.append(wrk("io-mix", "cserve", 8, 100, 900, rnd=3, lost=0.5))
    return recs


def test_goals_pass_and_fail_from_the_records():
    g = {(name, build): (met, text) for name, build, met, text in d.goals(d.summarise(canned()))}
    met, text = g[("io-mix", "cserve")]
    # p99 against gunicorn's (uWSGI left a quarter of the connections busy), rate against Granian's
    assert met and "against the best peer's 127 (gunicorn 8)" in text and "1,301/s against the best peer's 1,280/s" \
        in text
    met, text = g[("io-mix", "baseline")]
    assert met is False and "p99 180 ms" in text
    assert g[("cpu-mix", "cserve")][0] is False  # faster than gunicorn, but its p99 above
    assert g[("cpu-mix", "baseline")][0] is None  # no baseline row in the cell
    # p50 against the baseline's in the same run: 2.00 ms both on io-mix; none on cpu-mix
    met, text = g[("io-mix p50", "cserve")]
    assert met and text == "p50 2.00 ms, 1.00× the baseline's 2.00 ms"
    assert g[("cpu-mix p50", "cserve")][0] is None and ("io-mix p50", "baseline") not in g
    faster = [wrk("io-mix", "baseline", 8, 1200, 180, p50_ms=1.5, rnd=r["round"]) if r["label"] == "io-mix baseline 8"
              else r for r in canned()]
    met, text = {(n, b): (m, t) for n, b, m, t in d.goals(d.summarise(faster))}[("io-mix p50", "cserve")]
    assert met is False and "1.33× the baseline's 1.50 ms" in text
    # 32 in flight at about 1,300/s: a mean near 24.6 ms, the p50 0.08× of it;
    # 1.65 ms at that shape needs a mean near 20.3 ms: 1,577/s, over the
    # app's ceiling of 8 threads at 5.95 ms each
    assert "at its p50 of 0.08× its mean latency (in flight over rate), 1.65 ms needs 1,577/s, 1.17× the app's " \
        "ceiling" in text, text
    met, text = g[("auto-sleep auto", "cserve")]
    assert met and text.startswith("rate 0.94× and p99 1.38× the best fixed count's (64 threads")
    assert g[("auto-sleep auto:64", "cserve")][0] is False  # 0.89× the rate
    assert ("auto-mix auto", "cserve") not in g  # a cell not run (--cells) has no goal line
    assert g[("burst", "cserve")][0] is True and "1.60× 8 fixed threads' 2.50 s" in g[("burst", "cserve")][1]
    assert g[("burst", "baseline")][0] is False
    met, text = g[("fairness", "cserve")]
    assert met and "B's median 9.00 ms beside A, 1.70× its 5.30 ms alone" in text and "share of the answers 63 %" \
        in text
    assert g[("fairness", "baseline")][0] is False


def test_how_the_loop_and_the_pool_slept_is_counted_per_request_from_the_stats_window():
    def rec(holds, dozes, parks, wakes, disturbed=False):
        r = wrk("cpu-mix", "cserve", 4, 2900, 44)
        r["stats_threads"] = [
            {"role": "loop", "counters": {"handoff": {"loop_holds": holds, "loop_dozes": dozes, "loop_parks": parks}}},
            {"role": "pool", "requests": 600, "counters": {"handoff": {"loop_wakes": wakes / 2, "parks": wakes}}},
            {"role": "pool", "requests": 400, "counters": {"handoff": {"loop_wakes": wakes / 2, "parks": 100}}}]
        if disturbed:
            r["disturbed"] = True
        return r
    recs = [rec(20, 300, 700, 400), rec(10, 500, 900, 600), rec(30, 100, 500, 200), rec(0, 0, 9000, 9000, True),
            wrk("cpu-mix", "gunicorn", 4, 1500, 44)]
    assert d.sleep_lines(recs, "cpu-mix") == [
        "- cserve 4: holds 0.02, dozes 0.30, parks 0.70; woken by the pool 0.40; the pool threads parked 0.50"]
    assert d.sleep_lines(recs, "io-mix") == []


def test_a_starved_b_fails_and_a_disturbed_run_is_left_out():
    rows = d.summarise(canned())
    u = rows["fairness uwsgi 1 beside"]
    assert u["starved"] == 3 and u["med"].get("p50_ms") is None and u["med"]["share"] == 0.0
    cs = rows["io-mix cserve 8"]
    assert cs["runs"] == 4 and cs["used"] == 3 and cs["disturbed_runs"] == 1 and cs["range"]["rate"] == (1300, 1302)
    b = rows["burst cserve auto:8"]
    assert b["med"]["last_s"] == 4.0 and abs(b["med"]["p99_ms"] - 3961.0) < 1e-6  # 3.9 s + 0.61 of the 0.1 s to the last


def test_the_report_and_the_block_come_from_a_canned_record(tmp_path):
    path = str(tmp_path / "dispatch.jsonl")
    meta = {"kind": "meta", "commit": "abcdef0", "date": "d", "command": "c", "machine": {"nproc": 2},
            "rounds": 3, "warmup": 2.0, "duration": 5.0, "baseline": "62f0f80", "quick": False}
    entry.write_records(path, meta, canned())
    md = d.write_report(path)
    assert open(str(tmp_path / "dispatch.md")).read() == md
    assert "- **PASS** io-mix, cserve (p99 at or below the best peer's and rate at least the best peer's)" in md
    assert "- **FAIL** burst, baseline (the last answer within 2× of 8 fixed threads'): auto:8 answered the last " \
           "after 20.00 s" in md
    assert "| cserve | 8 | 3 of 4 | 1,301 (1,300–1,302) | 2.00 / 55.0 / 110 |" in md
    assert "| cserve 62f0f80 | auto:8 | 3 of 3 | 20.00 |" in md
    # each run of a mix, in order, the disturbed one marked
    assert "- cserve 8: 1,300, 1,301, 1,302, 100†" in md and "- gunicorn 4: 1,700, 1,700, 1,700" in md
    assert "| uwsgi | 1 | beside | 3 of 3 | 0 (starved in 3) | — / — / — | 0 % | 190 |" in md
    assert "not measured; its threads' floor 2.50 s" in md
    doc = os.path.join(ROOT, "docs", "results.md")
    body = d.readme_body(path, doc)
    assert os.path.relpath(str(tmp_path / "dispatch.md"), os.path.dirname(doc)) in body
    assert "- **PASS** fairness, cserve" in body and "| server | threads | rate /s |" in body
    assert d.readme_body(str(tmp_path / "none.jsonl"), doc).startswith("No record yet")


def test_the_companion_client_starts_first_and_only_its_counts_are_kept():
    c = d.cfg("fairness", "cserve", 1, "beside")
    cmd = probe.wrk_cmd(c, 8000, 3.0)
    assert cmd[:2] == ["sh", "-c"]
    a, b = cmd[2].split(f"sleep {probe.BESIDE_LEAD:g};")
    assert "pipeload -t 1 -c 1 -p 64 -d 4 " in a and "grep '^pipeload-json:'" in a
    assert "wrk -t1 -c1 -d3s --latency 'http://127.0.0.1:8000/?us=5000&mode=sleep'; wait" in b and "pipeload" not in b
    out = "Requests/sec: 5\npipeload-json: {\"requests\": 12, \"seconds\": 4.0}\n"
    assert probe.beside_counts(out) == {"requests": 12, "seconds": 4.0} and probe.beside_counts("x") is None


def test_a_warm_apart_run_warms_with_a_client_of_its_own(monkeypatch):
    """wrk's rate and percentiles cover its whole run: an auto cell's growth
    in the warm-up must not be in them, so its warm-up is a client of its
    own and the measured one starts WARM_LEAD before the window."""
    ran, started, windows = [], [], []
    server = types.SimpleNamespace(pid=1)
    monkeypatch.setattr(probe, "with_server", lambda cfg, label, body: body({}, server, 8080, "stats.json") or {})
    monkeypatch.setattr(probe.time, "sleep", lambda s: None)
    monkeypatch.setattr(probe.subprocess, "run", lambda cmd, **kw: ran.append(cmd))
    monkeypatch.setattr(probe, "start_client", lambda proc, cfg, cmd, children: started.append(cmd) or
                        (None, {}, lambda: None))
    monkeypatch.setattr(probe, "load_window", lambda proc, wp, lead, duration, *a: windows.append(lead) or
                        ([], {}, 0))
    monkeypatch.setattr(probe.threadcpu, "rss_kib", lambda pids: 0)
    monkeypatch.setattr(probe.threadcpu, "descendants", lambda pid: [])
    monkeypatch.setattr(probe, "finish_window", lambda *a: None)
    auto = d.cfg("auto-sleep", "cserve", "auto")
    probe.measure(auto, "x", 8.0, 5.0)
    assert len(ran) == 1 and "-d8s" in ran[0] and "-d6s" in started[0] and windows == [probe.WARM_LEAD]
    ran.clear(), started.clear(), windows.clear()
    probe.measure(d.cfg("io-mix", "cserve", 8), "x", 2.0, 5.0)
    assert ran == [] and "-d8s" in started[0] and windows == [2.0]

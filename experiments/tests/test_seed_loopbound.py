"""Pure logic of experiments/loopbound.py and experiments/seed.py on synthetic
records: the client stage of wrk -t2, the summary's clean-run medians and
reruns, the loop-bound finding, the profile categories, and the verdicts on
the seed note's claims. No server, no client; well under a second.
Run as `python3 -m pytest experiments/tests` from the repository root."""
from experiments import loopbound
from experiments.lib import entry, model, perfsplit, probe, seed_claims, seed_report


def rec(loop=0.5, pool=0.3, wrk=(40.0,), rps=100000.0, lost=0.0, busy=1.0, label="x", cfg=None, nproc=2):
    cfg = cfg or {"server": "cserve", "handoff": "ring", "bt": 1, "app": "hello", "conns": 16, "client": "wrk",
                  "family": "heads", "script_args": [0, 1]}
    reqs = int(rps)
    th = [{"name": "cserve-loop", "role": "loop", "cpu_s": loop, "utilisation": loop, "requests": reqs,
           "counters": {}}]
    if pool is not None:
        th.append({"name": "cserve-pool-0", "role": "pool", "cpu_s": pool, "utilisation": pool, "requests": reqs,
                   "counters": {"handoff": {"take_syscalls": reqs, "complete_syscalls": reqs}}})
    return {"label": label, "config": cfg, "rps": rps, "rps_wrk": rps, "stats_threads": th,
            "stats_window": {"window_s": 1.0, "rps": rps},
            "threadcpu": [{"name": "wrk", "median_pct": p, "us_per_request": 1.0} for p in wrk],
            "window_cpu": {"busy_cores": busy, "steal_cores": lost, "foreign_cores": 0.0},
            "machine": {"nproc": nproc}}


def test_two_wrk_threads_are_two_stages():
    # Two wrk threads at 60 % each: 1.2 cores of client, but no thread saturated.
    m = probe.run_metrics(rec(loop=0.5, pool=0.3, wrk=(60.0, 60.0), busy=1.5))
    assert abs(m["client_cores"] - 1.2) < 1e-9 and abs(m["client_util"] - 0.6) < 1e-9
    assert m["regime"] == "unsaturated"
    # One at 95 %: client-bound.
    assert probe.run_metrics(rec(wrk=(95.0, 20.0), busy=1.5))["regime"] == "client-bound"


def test_regime_rule_order():
    assert probe.run_metrics(rec(loop=0.95, pool=0.3, busy=1.7))["regime"] == "loop-bound"
    m = probe.run_metrics(rec(loop=0.92, pool=0.3, wrk=(96.0,), busy=1.95))
    assert m["regime"] == "client-bound" and m["regime_also"] == ["loop-bound"]
    assert probe.run_metrics(rec(loop=0.6, pool=0.5, busy=1.95))["regime"] == "machine-bound"
    assert probe.run_metrics(rec(loop=0.6, pool=0.5, busy=1.5))["regime"] == "unsaturated"


def test_summary_medians_over_clean_runs():
    rs = [rec(rps=100.0, label="a"), rec(rps=200.0, label="a"), dict(rec(rps=5.0, label="a"), disturbed=True)]
    s = probe.summarise(rs)["a"]
    assert s["rps"] == 150.0 and s["disturbed_runs"] == 1 and not s["all_disturbed"]
    only_bad = [dict(rec(rps=5.0, label="b"), disturbed=True)]
    assert probe.summarise(only_bad)["b"]["all_disturbed"]


def test_reruns_then_kept_and_marked():
    calls = []

    def runner(cfg, lab):
        calls.append(lab)
        return rec(label=lab, lost=0.5)  # always disturbed
    out = probe.run_rounds([("a", {}), ("b", {})], 1, "s", runner, reruns=2, rerun_cap=10, log=lambda s: None)
    assert len(calls) == 6 and all(r["disturbed"] for r in out)
    assert sorted(r["attempt"] for r in out if r["label"] == "a") == [0, 1, 2]
    clean = probe.run_rounds([("a", {})], 3, "s", lambda c, lab: rec(label=lab), log=lambda s: None)
    assert len(clean) == 3 and not any(r.get("disturbed") for r in clean)
    assert model.DISTURB_LIMIT == 0.05


def _row(label, regime, loop=0.5, cfg=None):
    r = probe.summarise([rec(label=label, cfg=cfg)])[label]
    r.update(regime=regime, loop_util=loop)
    return r


def test_loopbound_finding():
    rows = [_row("ring a", "machine-bound", 0.7), _row("dgram b", "client-bound", 0.4)]
    found, text = loopbound.finding(rows)
    assert not found and "No configuration" in text and "ring a" in text
    rows.append(_row("ring c", "loop-bound", 0.95))
    found, text = loopbound.finding(rows)
    assert found and "ring c" in text


def test_perf_categories():
    tcp = [("tcp_sendmsg", "[kernel.kallsyms]"), ("__sys_sendto", "[kernel.kallsyms]")]
    unix = [("unix_dgram_sendmsg", "[kernel.kallsyms]"), ("__sys_sendto", "[kernel.kallsyms]")]
    efd = [("eventfd_write", "[kernel.kallsyms]"), ("ksys_write", "[kernel.kallsyms]")]
    assert [perfsplit.family(f) for f in (tcp, unix, efd, [])] == ["tcp", "unix", "eventfd", "none"]
    # No census (a peer): the frames decide.
    assert perfsplit.shares("sys:sendto", "tcp") == {"send": 1.0}
    assert perfsplit.shares("sys:sendto", "unix") == {"handoff": 1.0}
    assert perfsplit.shares("sys:recvfrom", "none") == {"recv": 1.0}
    # A census: calls all on the handoff's descriptors count whole, frames or not.
    assert perfsplit.shares("sys:recvfrom", "none", 1.0) == {"handoff": 1.0}
    assert perfsplit.shares("sys:recvfrom", "tcp", 0.0) == {"recv": 1.0}
    assert perfsplit.shares("sys:recvfrom", "none", 0.25) == {"handoff": 0.25, "recv": 0.75}
    assert perfsplit.shares("sys:write", "eventfd", 0.25) == {"handoff": 1.0}
    assert perfsplit.shares("sys:futex", "none", 0.0) == {"handoff": 1.0}
    assert perfsplit.shares("sys:epoll_wait", "none") == {"epoll": 1.0}
    assert perfsplit.shares("user:python", "none") == {"user": 1.0}
    assert perfsplit.shares("kernel:syscall return path", "none") == {"kernel other": 1.0}
    assert perfsplit.per_request({"user": 1.0}, 1_000_000) == {"user": 1.0}


def _sample(comm, tid, syscall, fam_frame=None):
    k = "[kernel.kallsyms]"
    frames = ([f"\tffffffff81000001 {fam_frame} ({k})"] if fam_frame else []) + [
        f"\tffffffff81000002 __x64_sys_{syscall} ({k})", f"\tffffffff81000003 do_syscall_64 ({k})",
        "\t00007f0000000001 recv (/usr/lib/x86_64-linux-gnu/libc.so.6)"]
    return f"{comm} {tid} 1000000\n" + "\n".join(frames) + "\n\n"


def test_every_socketpair_syscall_counts_as_handoff(tmp_path):
    # A known case: dgram's pool thread has 100 samples (1 ms each) in
    # recvfrom, 30 of them with a unix_ frame; all of them are on its
    # socketpair, so all 0.1 s are the handoff's (frames alone: 0.03 s).
    # The loop has 100 samples in recvfrom, 20 unix_, 40 tcp_, 40 with no
    # family frame, and its counters say a quarter of its recvfroms were
    # completions: 0.02 + 0.25 x 0.04 = 0.03 s handoff, the rest recv.
    text = (_sample("cserve-pool-0", 2, "recvfrom", "unix_dgram_recvmsg") * 30 +
            _sample("cserve-pool-0", 2, "recvfrom") * 70 +
            _sample("cserve-loop", 1, "recvfrom", "unix_dgram_recvmsg") * 20 +
            _sample("cserve-loop", 1, "recvfrom", "tcp_recvmsg") * 40 +
            _sample("cserve-loop", 1, "recvfrom") * 40 +
            _sample("cserve-loop", 1, "epoll_wait") * 10 +
            # sendto: its submits and its client sends, in a proportion the
            # counters do not give: the unframed samples go as the framed (1:3)
            _sample("cserve-loop", 1, "sendto", "unix_dgram_sendmsg") * 10 +
            _sample("cserve-loop", 1, "sendto", "tcp_sendmsg") * 30 +
            _sample("cserve-loop", 1, "sendto") * 20)
    (tmp_path / "perf.txt").write_text(text)
    threads = [{"role": "loop", "counters": {"reads": 3000, "writes": 3000,
                                             "handoff": {"drain_syscalls": 1000, "submit_syscalls": 1000}}},
               {"role": "pool", "counters": {"handoff": {"take_syscalls": 1000, "complete_syscalls": 1000}}}]
    cen = perfsplit.census("dgram", threads)
    assert cen["loop"]["recvfrom"] == 0.25 and cen["pool"]["recvfrom"] == 1.0 and cen["loop"]["write"] == 1.0
    assert cen["loop"]["sendto"] == perfsplit.FRAMED
    out = perfsplit.split(str(tmp_path / "perf.txt"), cen)
    pool, loop = out["cserve-pool-0"], out["cserve-loop"]
    assert abs(pool["handoff"] - 0.1) < 1e-9 and pool["recv"] == 0
    assert abs(loop["recv"] - 0.07) < 1e-9 and abs(loop["epoll"] - 0.01) < 1e-9
    assert abs(loop["handoff"] - (0.03 + 0.015)) < 1e-9 and abs(loop["send"] - 0.045) < 1e-9
    # The frames alone undercount the pool's handoff, as the old split did.
    old = perfsplit.split(str(tmp_path / "perf.txt"))
    assert abs(old["cserve-pool-0"]["handoff"] - 0.03) < 1e-9
    # Other handoffs: the loop's recvfrom is all the client's, its eventfd writes all the handoff's.
    ring = perfsplit.census("ring", [])
    assert ring["loop"]["recvfrom"] == 0.0 and ring["loop"]["write"] == 1.0 and ring["pool"]["write"] == 1.0
    assert perfsplit.census(None, []) is None


def test_seed_figures_add_up():
    for k, v in seed_claims.LOOP_US.items():
        parts = sum(x for c, x in v.items() if c != "total" and x is not None)
        assert abs(parts - v["total"]) <= 0.15, k
    for k, v in seed_claims.POOL_US.items():
        assert abs(v["handoff"] + v["user"] + v["other"] - v["total"]) <= 0.15, k
    for c, v in seed_claims.BY_CONNS.items():
        r = v["pool"][0] / v["granian"][0]
        assert seed_claims.RATIO_RANGE[0] - 0.01 <= r <= seed_claims.RATIO_RANGE[1] + 0.01, c
    assert [k for k, _ in seed_claims.CLAIMS] == ["loop_saturated", "granian_io_saturated", "ratio", "dgram_cost",
                                                  "bridge_cheaper", "ring_saves", "ring_ratio", "pool_next"]


def _seed_rows(loop, pool, g_rps, d_rps, r_rps, regime="loop-bound"):
    rows = {}
    for kind, rps in (("dgram", d_rps), ("ring", r_rps), ("granian", g_rps)):
        lab = f"{kind} c16"
        rows[lab] = {"label": lab, "config": {"conns": 16, "kind": kind}, "regime": regime, "regime_n": 1,
                     "regime_of": 1, "regime_also": [], "rps_wrk": rps, "io": loop, "py": pool, "idle": 0.0,
                     "client_cores": 0.3, "steal": 0.0, "foreign": 0.0, "all_disturbed": False}
    return rows


def _prof(name, io_h, py_h, py_user):
    io = "tokio-rt-worker" if name == "granian" else "cserve-loop"
    py = "python3" if name == "granian" else "cserve-pool-0"
    z = {c: 0.0 for c in perfsplit.CATEGORIES}
    return {"name": name, "threads": {io: dict(z, handoff=io_h, cpu_s=1.0),
                                      py: dict(z, handoff=py_h, user=py_user, cpu_s=0.5)}}


def verdict_map(rows, profs):
    return {k: v for k, _, _, _, v, _ in seed_report.verdicts(rows, profs, {})}


def test_verdicts_when_the_note_holds():
    rows = _seed_rows(0.98, 0.7, g_rps=180.0, d_rps=132.0, r_rps=165.0)
    profs = [_prof("dgram", 1.2, 1.4, 3.7), _prof("ring", 0.1, 0.1, 3.6), _prof("granian", 0.07, 0.3, 4.0)]
    v = verdict_map(rows, profs)
    assert v["loop_saturated"] == "confirmed" and v["ratio"] == "confirmed"
    assert v["dgram_cost"] == "confirmed" and v["bridge_cheaper"] == "confirmed"
    assert v["ring_saves"] == "confirmed" and v["ring_ratio"] == "confirmed"
    assert v["pool_next"] == "contradicted"  # the ring row is still loop-bound


def test_verdicts_when_it_does_not():
    rows = _seed_rows(0.5, 0.3, g_rps=100.0, d_rps=120.0, r_rps=150.0, regime="client-bound")
    profs = [_prof("dgram", 6.0, 0.2, 3.7), _prof("ring", 5.0, 0.2, 5.0), _prof("granian", 0.07, 0.3, 4.0)]
    v = verdict_map(rows, profs)
    # The client set the rate: the note's regime is not reproduced, so the
    # claims resting on it are not contradicted; the costs still are.
    assert v["loop_saturated"] == "not reproduced here" and v["granian_io_saturated"] == "not reproduced here"
    assert v["ratio"] == "not reproduced here" and v["dgram_cost"] == "contradicted"
    assert v["bridge_cheaper"] == "contradicted" and v["ring_saves"] == "contradicted"
    assert v["pool_next"] == "not reproduced here"
    # dgram already past 0.9x Granian: the ring has no gap to close, so the prediction is untested
    assert v["ring_ratio"] == "not comparable"
    assert verdict_map(rows, [])["dgram_cost"] == "not measured"


def test_which_thread_bounds_is_untested_where_nothing_saturated():
    for regime in ("unsaturated", "machine-bound", "client-bound"):
        v = verdict_map(_seed_rows(0.7, 0.3, g_rps=100.0, d_rps=70.0, r_rps=80.0, regime=regime), [])
        assert v["loop_saturated"] == "not reproduced here" and v["granian_io_saturated"] == "not reproduced here"
        assert v["pool_next"] == "not reproduced here" and v["ratio"] == "not reproduced here"
        assert v["ring_ratio"] == "not reproduced here"
    # Another server thread the bound: that contradicts the note.
    v = verdict_map(_seed_rows(0.6, 0.95, g_rps=100.0, d_rps=70.0, r_rps=80.0, regime="pool-bound"), [])
    assert v["loop_saturated"] == "contradicted" and v["pool_next"] == "confirmed"
    assert v["ratio"] == "not reproduced here"  # the pooled row's loop did not saturate
    # a saturated loop beside a client that saturated first still counts
    rows = _seed_rows(0.95, 0.4, g_rps=100.0, d_rps=70.0, r_rps=80.0, regime="client-bound")
    for r in rows.values():
        r["regime_also"] = ["loop-bound"]
    v = verdict_map(rows, [])
    assert v["loop_saturated"] == "confirmed" and v["pool_next"] == "contradicted"
    # a missing Python-thread figure is not slack
    for r in rows.values():
        r["py"] = None
    assert verdict_map(rows, [])["loop_saturated"] == "not comparable"


def test_combine():
    assert seed_report.combine([(16, "confirmed"), (64, "contradicted")]) == "partly confirmed"
    assert seed_report.combine([(16, "n/a"), (64, "contradicted")]) == "contradicted (at 1 of 2 connection counts)"
    assert seed_report.combine([(16, "n/a")]) == "not comparable"
    assert seed_report.combine([(16, "not reproduced"), (64, "n/a")]) == "not reproduced here"
    assert seed_report.combine([(16, "not reproduced"), (64, "confirmed")]) == \
        "confirmed (at 1 of 2 connection counts)"
    assert seed_report.combine([]) == "not measured"


def test_recorded_reports_are_what_their_records_make():
    # A hand edit to a number in loopbound.md or seed.md (or a stale .md) fails.
    import os
    from experiments import seed
    for d, name, make in (
            (loopbound.OUT, "loopbound",
             lambda meta, recs: loopbound.markdown(meta, list(probe.summarise(recs).values()), meta.get("quick"))),
            (seed.OUT, "seed", None)):
        path = os.path.join(d, f"{name}.jsonl")
        if not os.path.exists(path):
            continue
        if name == "seed":
            meta, runs, profs = seed.load(path)
            profs = [dict(p, threads=seed.split_profile(p)) if "error" not in p else p for p in profs]
            want = seed_report.markdown(meta, probe.summarise(runs, extra=seed.io_py), profs)
        else:
            meta, recs = entry.load(path)
            want = make(meta, recs)
        assert open(os.path.join(d, f"{name}.md")).read() == want, f"{name}.md is not what {name}.jsonl makes"
        if name == "loopbound":
            assert open(os.path.join(d, "loopbound.brief.md")).read() == \
                loopbound.brief_md(meta, list(probe.summarise(recs).values())), \
                "loopbound.brief.md is not what loopbound.jsonl makes"


def test_the_production_record_is_what_its_runs_make():
    # production.md (the full table) and production.brief.md (the paper's)
    # from production.jsonl: a hand edit or a stale file fails.
    import os
    from experiments import production
    path = os.path.join(production.OUT, "production.jsonl")
    if not os.path.exists(path):
        return
    meta, recs = entry.load(path)
    assert open(os.path.join(production.OUT, "production.md")).read() == \
        production.markdown(meta, recs, meta.get("quick"))
    assert open(os.path.join(production.OUT, "production.brief.md")).read() == production.brief_md(meta, recs)


def test_verdict_constants_moved_name_the_verdicts_they_change():
    # dgram's handoff at 2.5x the note's on both threads: contradicted at the
    # rule's factor of two, confirmed at three; nothing else moves.
    rows = _seed_rows(0.98, 0.7, g_rps=180.0, d_rps=132.0, r_rps=165.0)
    io, py = seed_claims.LOOP_US["pool"]["handoff"] * 2.5, seed_claims.POOL_US["pool"]["handoff"] * 2.5
    profs = [_prof("dgram", io, py, 3.7), _prof("ring", 0.1, 0.1, 3.6), _prof("granian", 0.07, 0.3, 4.0)]
    assert verdict_map(rows, profs)["dgram_cost"] == "contradicted"
    moved = {(n, round(x, 2)): changed for n, x, changed in seed_report.sensitivity(rows, profs, {})}
    assert moved[("COST_FACTOR", 3.0)] == [("dgram_cost", "contradicted", "confirmed")]
    assert moved[("COST_FACTOR", 1.5)] == [] and moved[("RATIO_TOL", 0.05)] == []

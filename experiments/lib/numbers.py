"""Every number the prose quotes, computed from the results: report.py writes
them to numbers.json, experiments/paper.py substitutes `{{key}}` placeholders with
their text, and experiments/tests/test_prose_numbers.py fails when prose holds
a number that does not come from here.

Keys:
  <metric>:<config label>   every table cell's median, e.g.
                            `rps:cserve ring bt1 hello c64 wrk`; its "text_ci"
                            is "median (range lo–hi)" below stats.MIN_BOOT
                            repeats and "median [95 % CI lo, hi]" from there on
  derived keys below         ratios with bootstrap intervals, the crossover,
                            the model's error, counts of regimes, provenance.
Each entry: {"value": float|str, "lo", "hi", "text"}."""
from . import configs, model, stats

FMT = {"rps": "{:,.0f}", "rps_wrk": "{:,.0f}", "p50_us": "{:.0f} µs", "p99_us": "{:.0f} µs",
       "loop_util": "pct", "pool_util": "pct", "client_util": "pct", "cores": "{:.2f}",
       "c_loop": "{:.2f} µs", "c_pool": "{:.2f} µs", "c_client": "{:.2f} µs",
       "loop_wait_us": "{:.2f} µs", "loop_work_us": "{:.2f} µs", "foreign": "{:.2f}", "steal": "{:.2f}",
       "idle": "{:.2f}", "sock_err": "{:,.0f}", "in_flight_share": "pct"}
REGIMES = ("loop-bound", "pool-bound", "client-bound", "pool+client-bound", "machine-bound", "unsaturated")


def _fmt(v, kind):
    if v is None:
        return "—"
    if kind == "pct":
        return f"{100 * v:.0f} %"
    if kind == "ratio":
        return f"{v:.2f}×"
    return kind.format(v) if "{" in kind else str(v)


def _none(text):
    """A derived number the data did not produce, in words (never a gap)."""
    return {"value": None, "lo": None, "hi": None, "text": text, "text_ci": text}


NOINST = "build-noinst/cserve"  # the uninstrumented build's label part (lib/configs.py)
IDLE_NOTE = 0.3  # cores: unsaturated rows leaving more than this idle are counted for the prose


def interval_text(v, lo, hi, kind, iv="range"):
    """A median with its interval, saying which kind: "v (range lo–hi)" or
    "v [95 % CI lo, hi]" (stats.interval_kind)."""
    txt = _fmt(v, kind)
    if lo is None or hi is None or lo == hi:
        return txt
    if iv == "CI":
        return f"{txt} [95 % CI {_fmt(lo, kind)}, {_fmt(hi, kind)}]"
    return f"{txt} (range {_fmt(lo, kind)}–{_fmt(hi, kind)})"


def words(key, text, value=None, N=None):
    N[key] = {"value": value if value is not None else text, "text": text, "text_ci": text}


def regime_numbers(summ, put, N):
    """The unsaturated rows' idle cores, and where two stages saturated."""
    uns = [s for s in summ.values() if s["n"] and s["regime"] == "unsaturated" and s["idle"][0] is not None]
    if uns:
        idle = [s["idle"][0] for s in uns]
        put("unsaturated_idle_min", min(idle), kind="{:.2f}")
        put("unsaturated_idle_max", max(idle), kind="{:.2f}")
        put("unsaturated_idle_over_note", sum(i > IDLE_NOTE for i in idle), kind="{:d}")
    put("const:idle_note", IDLE_NOTE, kind="{:.1f}")
    both = sorted(f"`{s['label']}` ({s['regime']}; also {', '.join(s['regime_also'])})"
                  for s in summ.values() if s["n"] and s.get("regime_also"))
    words("list:two_saturated", "; ".join(both) if both else "none", N=N)
    put("count:two_saturated", len(both), kind="{:d}")


def span_text(lo, hi, kind):
    """"lo to hi", or the one value where the two print alike (never "94 % to 94 %")."""
    a, b = _fmt(lo, kind), _fmt(hi, kind)
    return a if a == b else f"{a} to {b}"


def _series(parts):
    """"a", "a and b", "a, b and c"."""
    parts = list(parts)
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _with_handoff(s):
    """A cserve configuration with a pool thread behind the loop (inline and
    native-hello run the app on the loop: no handoff)."""
    return s["config"].get("server") == "cserve" and s["config"].get("handoff") and not s["config"].get("mode")


def reading_numbers(summ, put, N):
    """Phrases for the prose whose grammar depends on the data: the regime
    tally (no "1 were", no "0 were"), spans that collapse to one value, and
    whether any configuration with a handoff saturated its loop."""
    rows = [s for s in summ.values() if s["n"]]
    regs = [s["regime"] for s in rows]
    names = {"loop-bound": "loop-bound", "pool-bound": "pool-bound", "client-bound": "client-bound",
             "pool+client-bound": "pool+client-bound",
             "machine-bound": "machine-bound", "unsaturated": "unsaturated"}
    have = [f"{regs.count(r)} {names[r]}" for r in REGIMES if regs.count(r)]
    other = len(regs) - sum(regs.count(r) for r in REGIMES)
    if other:
        have.append(f"{other} bound by one of a peer's own threads")
    none = [names[r] for r in REGIMES if not regs.count(r)]
    text = _series(have) if have else "none with included runs"
    if none:
        text += "; " + ("none was " + _series(none).replace(" and ", " or ") if len(none) > 1 else f"none was {none[0]}")
    words("regime_tally", text, N=N)
    idle = [s["idle"][0] for s in rows if s["regime"] == "unsaturated" and s["idle"][0] is not None]
    if idle:
        words("unsaturated_idle_span", span_text(min(idle), max(idle), "{:.2f}"), [min(idle), max(idle)], N)
    ns = [s["n"] for s in rows]
    if ns:
        words("n_span", span_text(min(ns), max(ns), "{:d}"), [min(ns), max(ns)], N)
    sat = [s["loop_util"][0] for s in rows if s["regime"] == "loop-bound"]
    if sat:
        words("loop_bound_util_span", span_text(min(sat), max(sat), "pct"), [min(sat), max(sat)], N)
    # Loop-bound (or a loop at saturation beside another stage) with a pool thread behind it.
    handoff = [s for s in rows if _with_handoff(s) and model.saturated(s, "loop-bound")]
    put("count:loop_bound_with_handoff", len(handoff), kind="{:d}")
    if handoff:
        text = ("the loop saturated with a handoff in " + _series(f"`{s['label']}` ({s['regime']})"
                                                                  for s in sorted(handoff, key=lambda s: s["label"])))
    else:
        text = "no configuration with a handoff saturated its loop"
    words("loop_bound_with_handoff", text, [s["label"] for s in handoff], N)
    # The same question run by run: a configuration's label is its runs'
    # majority, so a minority of runs with a saturated loop is counted here.
    runs = [(s, s.get("runs_loop_saturated", 0)) for s in rows if _with_handoff(s)]
    put("runs_loop_saturated_with_handoff", sum(k for _, k in runs), kind="{:d}")
    put("runs_with_handoff", sum(s["n"] for s, _ in runs), kind="{:d}")
    put("configs_loop_saturated_some_run", sum(1 for _, k in runs if k), kind="{:d}")


def disturbance_numbers(summ, put, N):
    """How many runs other tenants disturbed (left out), and the steal and
    foreign CPU of those kept."""
    lost = [x for s in summ.values() for x in s.get("lost_all", [])]
    put("runs_measured", len(lost), kind="{:d}")
    put("runs_disturbed", sum(s.get("disturbed", 0) for s in summ.values()), kind="{:d}")
    put("runs_included", sum(s["n"] for s in summ.values()), kind="{:d}")
    if lost:
        put("lost_max_all", max(lost), kind="{:.2f}")
    emptied = sorted(s["label"] for s in summ.values() if not s["n"] and s.get("disturbed"))
    put("count:configs_all_disturbed", len(emptied), kind="{:d}")
    words("list:configs_all_disturbed", ", ".join(f"`{x}`" for x in emptied) if emptied else "none", N=N)
    steal = [s["steal"][0] for s in summ.values() if s["n"] and s["steal"][0] is not None]
    if steal:
        put("steal_max", max(steal), kind="{:.2f}")
        put("steal_median", stats.median(steal), kind="{:.2f}")
    few = [s["n"] for s in summ.values() if s["n"]]
    if few:
        put("n_min", min(few), kind="{:d}")
        put("n_max", max(few), kind="{:d}")


def provenance_numbers(summ, meta, N):
    """Which commits the included runs come from: one sentence for the prose."""
    commits = {}
    for s in summ.values():
        for c in s.get("commits") or []:
            commits[c] = commits.get(c, 0) + s["n"]
    if not commits:
        return
    run = meta[-1]["commit"][:7] if meta else None
    if len(commits) == 1:
        c = next(iter(commits))
        text = f"every included run comes from commit `{c}`"
    else:
        text = "the included runs come from commits " + ", ".join(f"`{c}`" for c in sorted(commits)) + \
            (f" (the run's own: `{run}`; each table names a row's commit where it differs)" if run else "")
    words("provenance_commits", text, sorted(commits), N)


def compute(summ, params, meta, extra):
    N = {}

    def put(key, v, lo=None, hi=None, kind="{:.2f}", iv="range"):
        if v is None:
            return
        N[key] = {"value": v, "lo": lo, "hi": hi, "text": _fmt(v, kind), "text_ci": interval_text(v, lo, hi, kind, iv)}

    for lab, s in summ.items():
        if not s["n"]:
            continue
        for k, kind in FMT.items():
            m, lo, hi = s[k]
            put(f"{k}:{lab}", m, lo, hi, kind, stats.interval_kind(s["n"]))
        N[f"regime:{lab}"] = {"value": s["regime"], "text": s["regime"], "text_ci": s["regime"]}
        N[f"n:{lab}"] = {"value": s["n"], "text": str(s["n"]), "text_ci": str(s["n"])}
        if s["pred"] is not None:
            put(f"pred:{lab}", s["pred"], kind="{:,.0f}")

    by = {s["label"]: s for s in summ.values()}

    def short(lab):
        """Where a row kept too few of the client's requests in flight to
        be compared (model.IN_FLIGHT_MIN), the words that say so."""
        if model.keeps_too_few(by[lab]):
            return f"`{lab}` kept {100 * by[lab]['in_flight_share'][0]:.0f} % of the client's requests in flight"
        return None

    def ratio(key, a, b, metric="rps_wrk"):
        few = [w for w in (short(a) if a in by and by[a]["n"] else None,
                           short(b) if b in by and by[b]["n"] else None) if w]
        if few:  # not like for like: shown, not compared
            N[key] = _none("left out: " + " and ".join(few))
            N[key + ":n"] = _none("n = 0")
            return
        if a in by and b in by and by[a]["n"] and by[b]["n"]:
            r, lo, hi = stats.ratio_ci(by[a][metric + "_all"], by[b][metric + "_all"])
            put(key, r, lo, hi, "ratio", stats.interval_kind(by[a]["n"], by[b]["n"]))
            N[key]["n"] = [by[a]["n"], by[b]["n"]]
            N[key + ":n"] = {"value": N[key]["n"], "text": f"n = {by[a]['n']} and {by[b]['n']}",
                             "text_ci": f"n = {by[a]['n']} and {by[b]['n']}"}
        elif a in by and b in by:  # measured, but a side has no included run
            N[key] = _none("no clean runs on one side")
            N[key + ":n"] = _none("n = 0")
        else:  # a configuration this run did not make
            N[key] = _none("not measured in this run")
            N[key + ":n"] = _none("n = 0")

    for c in (16, 64, 256):
        for h in ("ring", "dgram"):
            ratio(f"ratio_{h}_granian_c{c}", f"cserve {h} bt1 hello c{c} wrk", f"granian hello c{c} wrk")
            # Across servers the uninstrumented build is the fair one.
            ratio(f"ratio_{h}_granian_c{c}_noinst", f"cserve {h} bt1 {NOINST} hello c{c} wrk",
                  f"granian hello c{c} wrk")
            ratio(f"ratio_{h}_uwsgi_c{c}_noinst", f"cserve {h} bt1 {NOINST} hello c{c} wrk",
                  f"uwsgi bt{configs.UWSGI_THREADS} hello c{c} wrk")
        ratio(f"ratio_ring_dgram_c{c}", f"cserve ring bt1 hello c{c} wrk", f"cserve dgram bt1 hello c{c} wrk")
    for a in ("flask", "django"):
        for h in ("ring", "dgram"):
            ratio(f"ratio_{h}_granian_{a}", f"cserve {h} bt1 {a} c16 wrk", f"granian {a} c16 wrk")
        ratio(f"ratio_ring_granian_{a}_noinst", f"cserve ring bt1 {NOINST} {a} c16 wrk", f"granian {a} c16 wrk")
    ratio("ratio_instruments_on_off", "cserve ring bt1 hello c64 wrk",
          "cserve ring bt1 build-noinst/cserve hello c64 wrk", "rps")
    # What a server with no Python at all reaches against Granian: the
    # ceiling any handoff could approach with this client on this machine.
    ratio("ratio_native_granian_c64", "cserve native hello c64 wrk", "granian hello c64 wrk")
    ratio("ratio_native_granian_c64_noinst", f"cserve native {NOINST} hello c64 wrk", "granian hello c64 wrk")
    for h in ("condvar", "eventfd"):
        ratio(f"ratio_ring_{h}_c64", "cserve ring bt1 hello c64 wrk", f"cserve {h} bt1 hello c64 wrk")
    ratio("ratio_native_ring_p16", "cserve native hello c16 wrk-p16", "cserve ring bt1 hello c16 wrk-p16", "rps")

    # The crossover: the cheapest app cost at which the pool stage saturates.
    for h in ("ring", "dgram"):
        # The fine-step set: pipelined client, 16 connections.
        rows = sorted(((configs.app_us(s["config"]["app"]), s) for s in summ.values()
                       if "appcost" in s["sweeps"] and s["config"].get("handoff") == h and s["n"]
                       and s["config"]["conns"] == 16), key=lambda t: t[0])
        pb = [us for us, s in rows if s["regime"] == "pool-bound"]
        lb = [us for us, s in rows if s["regime"] == "loop-bound"]
        if pb:
            # Bracketed: the costliest app below the first pool-bound one that
            # was not pool-bound. Where the grid's lowest point is already
            # pool-bound, the crossover is somewhere under it: not bracketed.
            below = [us for us, s in rows if us < min(pb) and s["regime"] != "pool-bound"]
            key = f"crossover_pool_us_{h}"
            if below:
                words(key, f"between {max(below):.0f} and {min(pb):.0f} µs", [max(below), min(pb)], N)
            else:
                words(key, f"at or below {min(pb):.0f} µs (the grid's lowest point: not bracketed)",
                       [None, min(pb)], N)
        elif rows:  # measured, and no app cost saturated the pool: say so
            N[f"crossover_pool_us_{h}"] = _none("none in the sweep")
        if lb:
            put(f"max_loop_bound_us_{h}", max(lb), kind="{:.0f} µs")

    regs = [s["regime"] for s in summ.values() if s["n"]]
    for name in REGIMES:
        put(f"count:{name}", regs.count(name), kind="{:d}")
    put("count:configs", len(regs), kind="{:d}")
    # The rest: a peer bound by one of its own threads (e.g. Granian's Python thread).
    put("count:other", len(regs) - sum(regs.count(n) for n in REGIMES), kind="{:d}")
    for name in REGIMES:
        labs = sorted(s["label"] for s in summ.values() if s["n"] and s["regime"] == name)
        text = ", ".join(f"`{lab}`" for lab in labs) if labs else "none"
        N[f"list:{name}"] = {"value": labs, "text": text, "text_ci": text}
    regime_numbers(summ, put, N)
    reading_numbers(summ, put, N)
    # Each peer's idle cores over its rows (a server that leaves cores idle
    # ran unsaturated: its rate is not its bound).
    for srv in sorted({s["config"]["server"] for s in summ.values() if s["config"]["server"] != "cserve"}):
        idle = [s["idle"][0] for s in summ.values() if s["n"] and s["config"]["server"] == srv
                and s["idle"][0] is not None]
        if idle:
            words(f"idle_span:{srv}", span_text(min(idle), max(idle), "{:.2f}"), [min(idle), max(idle)], N)
    for t in model.SAT_SWEEP:
        for name in REGIMES:
            put(f"count_at:{t:.2f}:{name}", sum(1 for s in summ.values() if s["n"] and s.get("regime_at", {}).get(t)
                                                == name), kind="{:d}")
    put("count:loop_bound_strict", sum(1 for s in summ.values() if s["n"] and s.get("loop_bound_strict")),
        kind="{:d}")
    # What each handoff costs the loop and the pool, hello, pipelined: one phrase for the abstract.
    parts = []
    for h in configs.HANDOFFS:
        s = by.get(f"cserve {h} bt1 hello c16 wrk-p16")
        if s and s["n"] and s["c_loop"][0] is not None and s["c_pool"][0] is not None:
            parts.append(f"{h} {s['c_loop'][0]:.2f} and {s['c_pool'][0]:.2f} µs")
    words("handoff_costs", "; ".join(parts) if parts else "not measured", N=N)
    put("const:loop_on", model.LOOP_ON, kind="pct")
    put("const:pool_slack", model.POOL_SLACK, kind="pct")
    put("const:in_flight_min", model.IN_FLIGHT_MIN, kind="pct")
    disturbance_numbers(summ, put, N)
    # How close the loop came to saturating with a pool thread behind it.
    with_pool = [s for s in summ.values() if s["n"] and _with_handoff(s) and s["loop_util"][0] is not None]
    if with_pool:
        top = max(with_pool, key=lambda s: s["loop_util"][0])
        put("loop_util_max_with_pool", *top["loop_util"], kind="pct")
        N["loop_util_max_with_pool_config"] = {"value": top["label"], "text": f"`{top['label']}`",
                                               "text_ci": f"`{top['label']}`"}
    sat = [s["loop_util"][0] for s in summ.values() if s["n"] and s["regime"] == "loop-bound"]
    if sat:
        put("loop_bound_util_min", min(sat), kind="pct")
        put("loop_bound_util_max", max(sat), kind="pct")
    elif regs:
        N["loop_bound_util_min"] = N["loop_bound_util_max"] = _none("none")

    tested = [e for s in summ.values() for e in s.get("pred_err_tested", [])]
    if tested:
        q = stats.quantiles([abs(e) for e in tested])
        put("model_tested_abs_err_median", q[0.5], kind="pct")
        put("model_tested_abs_err_p95", q[0.95], kind="pct")
    put("model_tested_runs", len(tested), kind="{:d}")
    bounds = [b for s in summ.values() for b in s.get("pred_tested_bounds", [])]
    for b in ("pool", "loop", "machine", "client", "pool+client"):
        put(f"model_tested_runs:{b}", bounds.count(b), kind="{:d}")
        errs_b = [abs(e) for s in summ.values() for e, bb in zip(s.get("pred_err_tested", []),
                                                                 s.get("pred_tested_bounds", [])) if bb == b]
        if errs_b:
            put(f"model_tested_abs_err_median:{b}", stats.median(errs_b), kind="pct")
        else:
            N[f"model_tested_abs_err_median:{b}"] = _none("no run tested it")
    for reg, (n, sl, wk, hd) in model.waiting_by_regime(summ).items():
        put(f"waiting_configs:{reg}", n, kind="{:d}")
        for k, v in (("sleeps", sl), ("wakes", wk), ("holds", hd)):
            put(f"waiting_{k}:{reg}", v, kind="{:.2f}")
    for reg, (n, every, tested) in model.region_errors(summ).items():
        put(f"model_region_configs:{reg}", n, kind="{:d}")
        for key, es in ((f"model_region_err:{reg}", every), (f"model_region_err_tested:{reg}", tested)):
            if es:
                put(key, stats.median(es), kind="pct")
            else:
                N[key] = _none("no run")
    errs = [e for s in summ.values() for e in s["pred_err"]]
    if errs:
        put("model_at_or_above", sum(e >= 0 for e in errs), kind="{:d}")
        q = stats.quantiles([abs(e) for e in errs])
        put("model_abs_err_median", q[0.5], kind="pct")
        put("model_abs_err_p75", q[0.75], kind="pct")
        put("model_abs_err_p95", q[0.95], kind="pct")
        put("model_runs", len(errs), kind="{:d}")
        bad = [(abs(stats.median(s["pred_err"])), s["label"]) for s in summ.values() if s["pred_err"]]
        worst = max(bad)
        N["model_worst_config"] = {"value": worst[1], "text": worst[1], "text_ci": worst[1]}
        put("model_worst_err", worst[0], kind="pct")
    for k, d in params.items():
        for kk, v in d.items():
            put(f"param:{k}[{kk}]", v, kind="{:.2f} µs" if k != "slope" else "{:.2f}")

    fore = [s["foreign"][0] for s in summ.values() if s["n"] and s["foreign"][0] is not None]
    if fore:
        put("foreign_max", max(fore), kind="{:.2f}")
        put("foreign_median", stats.median(fore), kind="{:.2f}")

    if meta:
        m = meta[-1]
        for k, v in (("commit", m["commit"][:12]), ("cpu_model", m["machine"]["cpu_model"]),
                     ("kernel", m["machine"]["kernel"]), ("started", m["started"][:10])):
            N[k] = {"value": v, "text": v, "text_ci": v}
        put("nproc", m["machine"]["nproc"], kind="{:d}")
        put("repeats", m["repeats"], kind="{:d}")
        put("headline_repeats", max(m.get("headline_repeats") or 0, m["repeats"]), kind="{:d}")
        put("window_s", m["durations"]["window"], kind="{:g} s")
        for k, v in (m["machine"].get("versions") or {}).items():
            if v:
                v = v.split(" Copyright")[0]  # wrk -v: the version, not the notice
                N[f"version:{k}"] = {"value": v, "text": v, "text_ci": v}
    # The method's constants, so the prose never types them either.
    put("const:saturation", model.SAT, kind="pct")
    put("const:pipeline_depth", 16, kind="{:d}")
    put("const:ci_level", 0.95, kind="pct")
    put("const:bootstrap_resamples", stats.B, kind="{:d}")
    put("const:min_boot", stats.MIN_BOOT, kind="{:d}")
    put("const:disturb_limit", model.DISTURB_LIMIT, kind="{:.2f}")
    put("const:idle_max", model.IDLE_MAX, kind="{:.2f}")
    if meta:
        put("const:machine_busy", meta[-1]["machine"]["nproc"] - model.IDLE_MAX, kind="{:.1f}")
    provenance_numbers(summ, meta, N)

    from . import extras
    extras.numbers(extra, put, N)
    return N


def between_run_numbers(N, other):
    """Between two runs (N here, other the agreement run's numbers): each
    ratio's interval across both, from the lower end of the lower to the
    upper end of the higher (between:ratio_*), and each regime count as the
    range the two runs give (range:count:*). One run's interval says how its
    own repeats scatter; this says how far another day's guest moved it."""
    for k, a in list(N.items()):
        if k.startswith("ratio_") and ":" not in k:
            b = other.get(k) or {}
            vals = [x for x in (a, b) if isinstance(x.get("value"), float)]
            if len(vals) < 2:
                words(f"between:{k}", a.get("text_ci", a.get("text")) + " (this run only)", N=N)
                continue
            lo = min(x["lo"] if x.get("lo") is not None else x["value"] for x in vals)
            hi = max(x["hi"] if x.get("hi") is not None else x["value"] for x in vals)
            words(f"between:{k}", f"{lo:.2f}–{hi:.2f}× across two runs", value=[lo, hi], N=N)
        elif k.startswith("count:") and isinstance(a.get("value"), int):
            b = (other.get(k) or {}).get("value")
            if not isinstance(b, int):
                words(f"range:{k}", f"{a['value']} (this run only)", value=[a["value"]] * 2, N=N)
                continue
            lo, hi = sorted((a["value"], b))
            words(f"range:{k}", f"{lo}" if lo == hi else f"{lo}–{hi}", value=[lo, hi], N=N)


def agreement_numbers(N, agreement):
    """Add to N (compute()'s result) what report --compare found against a
    second run: its medians and labels, its ratios, its day and steal."""
    def put(key, v, kind):
        if v is not None:
            N[key] = {"value": v, "lo": None, "hi": None, "text": _fmt(v, kind), "text_ci": _fmt(v, kind)}
    put("agree", agreement["agree"], kind="{:d}")
    put("agree_of", agreement["of"], kind="{:d}")
    for k in ("differ", "flips", "overlap", "ratios_hold", "ratios_side", "ratios_firm", "ratios_of"):
        if k in agreement:
            put(f"agree_{k}", agreement[k], kind="{:d}")
    for k in ("n_a", "n_b"):
        if agreement.get(k):
            t = "–".join(str(x) for x in (agreement[k][0], agreement[k][-1])) \
                if agreement[k][0] != agreement[k][-1] else str(agreement[k][0])
            N[f"agree_{k}"] = {"value": agreement[k], "text": t, "text_ci": t}
    put("const:agree_diff", stats.DIFF, kind="pct")
    N["compare_dir"] = {"value": agreement["other"], "text": agreement["other"], "text_ci": agreement["other"]}
    om = agreement.get("other_meta") or {}
    for k, v in (("started", (om.get("started") or "")[:10]), ("commit", (om.get("commit") or "")[:12]),
                 ("cpu_model", (om.get("machine") or {}).get("cpu_model"))):
        if v:
            N[f"agree_other_{k}"] = {"value": v, "text": v, "text_ci": v}
    for k, v in (agreement.get("other_numbers") or {}).items():
        N[f"agree_other:{k}"] = v
    # Each ratio as both runs give it: the headline states both, or only the
    # direction they share (a claim one run's interval makes alone does not
    # hold across guests).
    for k, a in list(N.items()):
        if not k.startswith("ratio_") or ":" in k:
            continue
        if not isinstance(a.get("value"), float):  # left out or not measured here: its words say why
            words(f"both:{k}", a["text"], N=N)
            words(f"direction:{k}", a["text"], N=N)
            continue
        b = (agreement.get("other_numbers") or {}).get(k) or {}
        if not isinstance(b.get("value"), float):
            words(f"both:{k}", f"{a['text_ci']} (this run only)", N=N)
            words(f"direction:{k}", "shown by this run only", N=N)
            continue
        words(f"both:{k}", f"{a['text_ci']} here and {b['text_ci']} on the agreement run's guest", N=N)
        side = [("above" if x["lo"] is not None and x["lo"] > 1 else "below" if x["hi"] is not None and x["hi"] < 1
                 else "spans") for x in (a, b)]
        words(f"direction:{k}", "above one in both runs" if side == ["above"] * 2 else
               "below one in both runs" if side == ["below"] * 2 else "not settled by the two runs", N=N)
    between_run_numbers(N, agreement.get("other_numbers") or {})
    for k, v in (agreement.get("few") or {}).items():  # report.few_conns: few connections, B ÷ A
        if k == "n":
            put("agree_few_n", v, kind="{:d}")
        else:
            put(f"agree_few_{k}", v, kind="ratio")
    if agreement.get("other_steal"):
        put("agree_other_steal_median", stats.median(agreement["other_steal"]), kind="{:.2f}")
        put("agree_other_steal_max", max(agreement["other_steal"]), kind="{:.2f}")

"""Per-run metrics, the regime a run was in (from measured utilisation only),
and the pipeline model fitted on the `calib` sweep and used out of sample.

Regime, per run (never from comparing costs). The stages are the loop, the
pool and the client; a peer's are found by the same rule (_peer_stages: its
threads that run Python summed per interpreter, Granian's tokio threads its
loop):
  a stage at >= 90 % of a core   -> bound by that stage ("loop-bound",
                                    "pool-bound", "client-bound"). Where two
                                    or more stages saturate, the busiest one
                                    names the regime and the others are kept
                                    beside it (metrics()["regime_also"]), so
                                    a table shows both
  else the machine's idle cores <= 0.1 (1.9 of 2 vCPUs busy, steal counted
       as not idle)               -> "machine-bound"
  else                            -> "unsaturated" (neither a stage nor the
                                    machine is full: wake-up gaps set the rate;
                                    the idle cores are shown beside it)
The 90 % is a convention: the counts are also shown at 85 and 95 %
(SAT_SWEEP). The pool stage is the GIL: Python work is serialised whatever
the number of blocking threads, so the pool's utilisation is the SUM over
pool threads against one core, and the model's pool bound is 1/c_pool with
c_pool the summed pool CPU per request. (regime() and pred() use the same
convention.)

Each run also records its placement (lib/pinning.py) and every thread's
on-CPU time and run delay in the window: a stage at 90 % of a core with a
large run delay was runnable and waiting for a CPU, not for work. The
loop-alone experiments call a run loop-bound by a stricter rule,
loop_bound_strict(): the loop on CPU at least 95 % of the window and the
pool under 70 %.

A run whose window lost more than DISTURB_LIMIT cores to steal and foreign CPU
together is *disturbed* (disturbed()): run.py reruns it, and report.py leaves
it out of every median and counts it.

Model (predict_placed): on shared cores rate = min(1/c_loop, 1/c_pool,
1/c_client, N/(c_loop + c_pool + c_client)), N = the vCPUs minus the foreign
CPU and the steal measured in the run's window; with the loop alone on a
core, min(1/c_loop, 1/(c_pool + c_client)) (the other core is the pool's and
the client's, a stage of its own: "pool+client").
The costs come from the calib sweep only (lib/configs.py), never from the run
predicted:
  c_loop[handoff, client]  the loop's µs/request, hello, in calib
  c_pool(hello) = c_pool0[handoff]                             (hello in calib)
  c_pool(cpuN)  = cpu_pool0[handoff] + slope[handoff] * N      (cpu0 and cpu20 in calib;
                  the cpu app has a fixed cost of its own, so hello is not its intercept;
                  results without cpu0 fall back to hello's cost as the intercept)
  c_client[client]         the client's µs/request in calib
(calib's one-connection runs are left out of these: they are des.py's wake-up
calibration, not the steady-state costs.) The machine bound assumes a full
machine: only machine-bound runs test it (bound_tested()).
"""
from . import configs, pinning, stats

SAT = 0.90
SAT_SWEEP = (0.85, 0.90, 0.95)  # the thresholds the regime counts are shown at
IDLE_MAX = 0.10        # cores: at most this idle -> machine-bound
DISTURB_LIMIT = 0.05   # cores lost to steal + foreign CPU in the window -> disturbed
# The loop-bound rule of the loop-alone experiments (experiments/regime.py):
# the loop on CPU at least LOOP_ON of the window, the pool below POOL_SLACK.
LOOP_ON = 0.95
POOL_SLACK = 0.70
IN_FLIGHT_MIN = 0.90   # a row keeping fewer of the client's requests in flight is left out of ratios


def lost_cores(rec):
    """Cores the run's window lost to other tenants: steal plus foreign CPU
    (None where the window was not measured)."""
    w = rec.get("window_cpu")
    if not w:
        return None
    return (w.get("steal_cores") or 0.0) + (w.get("foreign_cores") or 0.0)


def disturbed(rec, limit=DISTURB_LIMIT):
    """Did other tenants take more than `limit` cores during the window?"""
    lost = lost_cores(rec)
    return lost is not None and lost > limit


def _wrk_threads(rec):
    """The client's threads (wrk's or pipeload's)."""
    return [t for t in rec.get("threadcpu") or [] if pinning.is_client(t["name"])]


def depth(cfg):
    """Requests per connection the client keeps in flight: its pipelining
    depth (wrk-p16, a heads.lua script's second argument, pipeload's
    depth), else 1."""
    if cfg.get("client") == "wrk-p16":
        return 16
    if cfg.get("client") == "pipeload":
        return int(cfg.get("depth", 1))
    args = cfg.get("script_args") or []
    if cfg.get("script") == "pipeline.lua" and args:
        return int(args[0])
    if cfg.get("script") == "heads.lua" and len(args) > 1:
        return int(args[1])
    return 1


def in_flight(rec):
    """(requests in flight, the share of the client's connections the server
    kept busy), by Little's law from the client's rate and mean latency.
    wrk times each response from its request's write (a pipelined one from
    its batch's), so rate × latency is the requests in flight; one request
    per connection makes that the connections busy. pipeload times a batch
    from its write to its last response, so rate × latency / depth is the
    connections busy. wrk pipelined gives no connection count (answered
    requests of a batch leave flight one by one): its share is None.
    (None, None) where the client printed no latency."""
    cfg = rec["config"]
    rate, avg = rec.get("rps_wrk"), (rec.get("latency") or {}).get("avg_us")
    if not rate or not avg:
        return None, None
    n = rate * avg / 1e6
    d = depth(cfg)
    if cfg.get("client") == "pipeload":
        return n / d * (d + 1) / 2, n / d / cfg["conns"]  # requests: a batch's answered half on average
    return n, (n / cfg["conns"] if d == 1 else None)


def _peer_stages(srv):
    """A peer's stages by the rule cserve's pool follows: its threads that
    run Python, summed per process (one interpreter, one GIL; the busiest
    process counts), are its pool; Granian's tokio threads (its Rust I/O)
    are its loop, the busiest of them. gunicorn's and uWSGI's threads all
    run Python (their I/O too), so all of them are the pool: an upper bound
    on the GIL's time, since their C parts count. Returns (loop thread row
    or None, pool's utilisation, pool's µs per request)."""
    loops = [t for t in srv if pinning.role_of(t["name"]) == "loop"]
    per = {}
    for t in srv:
        if pinning.role_of(t["name"]) != "loop":
            per.setdefault(t.get("pid"), []).append(t)
    top = max(per.values(), key=lambda ts: sum(t["median_pct"] for t in ts), default=[])
    pool = sum(t["median_pct"] for t in top) / 100 if top else None
    c_pool = sum(t["us_per_request"] or 0 for t in top) if top else None
    return (max(loops, key=lambda t: t["median_pct"]) if loops else None), pool, c_pool


def metrics(rec):
    """Flat per-run numbers (None where not measured)."""
    m = {"rps": rec.get("rps"), "rps_wrk": rec.get("rps_wrk")}
    lat = rec.get("latency") or {}
    if rec["config"].get("client") == "wrk-p16":
        lat = {}  # wrk times a pipelined batch, not a request: no latency column
    m.update(p50_us=lat.get("p50_us"), p99_us=lat.get("p99_us"))
    w = rec.get("window_cpu") or {}
    m.update(foreign=w.get("foreign_cores"), steal=w.get("steal_cores"), busy=w.get("busy_cores"))
    m["idle"] = idle_cores(rec)
    m["lost"] = lost_cores(rec)
    m["sock_err"] = socket_errors(rec)
    rps = m["rps"] or 0
    wrk = _wrk_threads(rec)
    m["client_util"] = sum(t["median_pct"] for t in wrk) / 100 if wrk else None
    m["c_client"] = m["client_util"] / rps * 1e6 if (wrk and rps) else None
    srv = [t for t in rec.get("threadcpu") or [] if not pinning.is_client(t["name"])]
    m["cores"] = sum(t["median_pct"] for t in srv) / 100 if srv else None  # process-level
    th = rec.get("stats_threads") or []
    loops = [t for t in th if t["role"] == "loop"]
    pools = [t for t in th if t["role"] == "pool"]
    reqs = sum(t["requests"] or 0 for t in loops)
    m["stages"] = {}
    if th:
        win = (rec.get("stats_window") or {}).get("window_s") or 0
        m["c_loop"] = sum(t["cpu_s"] for t in loops) / reqs * 1e6 if reqs else None
        m["c_pool"] = sum(t["cpu_s"] for t in pools) / reqs * 1e6 if reqs and pools else None
        m["loop_util"] = max((t["utilisation"] or 0 for t in loops), default=None)
        m["pool_util"] = sum(t["utilisation"] or 0 for t in pools) if pools else None
        m["stages"] = {"loop": m["loop_util"]}
        if pools:
            m["stages"]["pool"] = m["pool_util"]
        c = (loops[0].get("counters") or {}) if loops else {}
        m["loop_wait_us"] = c.get("wait_ns", 0) / reqs / 1e3 if reqs and "wait_ns" in c else None
        m["loop_work_us"] = c.get("pass_ns", 0) / reqs / 1e3 if reqs and "pass_ns" in c else None
        m["window_s"] = win
        # Per request, how often a thread slept (the loop parked, a pool
        # thread parked) and was woken across the handoff (the loop woke a
        # pool thread, a pool thread woke the loop), and the loop's holds:
        # where nothing saturates, this is where the time went.
        lp = (loops[0].get("per_request") or {}) if loops else {}
        pp = [t.get("per_request") or {} for t in pools]
        if "handoff.loop_parks" in lp:
            m["sleeps_per_req"] = lp["handoff.loop_parks"] + sum(x.get("handoff.parks", 0) for x in pp)
            m["wakes_per_req"] = lp.get("handoff.wakes_sent", 0) + sum(x.get("handoff.loop_wakes", 0) for x in pp)
            m["holds_per_req"] = lp.get("handoff.loop_holds", 0)
    else:  # a peer: its threads from /proc, by the same stages (_peer_stages)
        loop, m["pool_util"], m["c_pool"] = _peer_stages(srv)
        m["loop_util"] = loop["median_pct"] / 100 if loop else None
        m["c_loop"] = loop["us_per_request"] if loop else None
        m["stages"] = {k: v for k, v in (("loop", m["loop_util"]), ("pool", m["pool_util"])) if v is not None}
        m["loop_wait_us"] = m["loop_work_us"] = None
    m["in_flight"], m["in_flight_share"] = in_flight(rec)
    sched = pinning.stage_sched((rec.get("window_cpu") or {}).get("sched"))
    for stage in ("loop", "pool", "client"):
        m[f"{stage}_on_cpu"] = (sched.get(stage) or {}).get("on_cpu")
        m[f"{stage}_run_delay"] = (sched.get(stage) or {}).get("run_delay")
    m["placement"] = (rec.get("placement") or {}).get("name", "shared")
    if m["placement"] == "loop-alone" and sched:
        # The core the pool and the client share is a stage of its own here:
        # every thread's time on it (all but the loop's) against one core.
        rows = (rec.get("window_cpu") or {}).get("sched") or []
        m["stages"]["pool+client"] = m["pool_client_core"] = sum(r["on_cpu"] for r in rows if r["role"] != "loop")
    m["regime"], m["regime_also"] = regime_detail(m, rec["config"])
    m["loop_bound_strict"] = loop_bound_strict(m)
    return m


def keeps_too_few(row):
    """Did the server keep fewer than IN_FLIGHT_MIN of the client's
    connections busy while the client had time to spare (a run's metrics or
    a table row, its medians as (m, lo, hi))? A client busy or waiting for a
    CPU most of the window (on CPU + run delay >= SAT, or saturated) holds
    connections itself between a response and the next request: the count
    is then the client's, not the server's."""
    def v(k):
        x = row.get(k)
        return x[0] if isinstance(x, tuple) else x
    f = v("in_flight_share")
    if f is None or f >= IN_FLIGHT_MIN or saturated(row, "client-bound"):
        return False
    on, delay = v("client_on_cpu"), v("client_run_delay")
    return not (on is not None and delay is not None and on + delay >= SAT)


def loop_bound_strict(m):
    """The loop-alone experiments' rule: the loop on CPU at least LOOP_ON of
    the window (its schedstat; its own clock where there is none) and the
    pool under POOL_SLACK. None where either is not measured."""
    on = m.get("loop_on_cpu") if m.get("loop_on_cpu") is not None else m.get("loop_util")
    if on is None or m.get("pool_util") is None:
        return None
    return on >= LOOP_ON and m["pool_util"] < POOL_SLACK


def idle_cores(rec):
    """The machine's idle cores in the window: vCPUs less busy less steal."""
    w = rec.get("window_cpu") or {}
    n = (rec.get("machine") or {}).get("nproc")
    if n is None or w.get("busy_cores") is None:
        return None
    return max(0.0, n - w["busy_cores"] - (w.get("steal_cores") or 0.0))


def socket_errors(rec):
    """wrk's socket errors (connect + read + write + timeout) in the run, 0 where it printed none."""
    import re
    out = rec.get("wrk_output")
    if out is None:
        return None
    mm = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    return sum(int(x) for x in mm.groups()) if mm else 0


def regime_detail(m, cfg, sat_at=SAT):
    """(regime, [other saturated stages' regimes]). Every stage, the client
    included, is checked alike, a peer's as cserve's (_peer_stages); the
    busiest saturated one names the regime. sat_at: the threshold (the
    counts are also shown at each of SAT_SWEEP)."""
    stages = {k: v for k, v in (m.get("stages") or {}).items() if v is not None}
    if m.get("client_util") is not None:
        stages["client"] = m["client_util"]
    sat = sorted(((u, k) for k, u in stages.items() if u >= sat_at), reverse=True)
    if sat:
        names = [f"{k}-bound" for _, k in sat]
        return names[0], names[1:]
    if m.get("idle") is not None and m["idle"] <= IDLE_MAX:
        return "machine-bound", []
    return "unsaturated", []


def regime(m, cfg):
    return regime_detail(m, cfg)[0]


def saturated(r, regime_name):
    """Did the stage named by `regime_name` saturate in r (a run's metrics or
    a table row): as its regime, or beside the one that names it?"""
    return r["regime"] == regime_name or regime_name in (r.get("regime_also") or [])


def bound_tested(bound, regime_name):
    """Does a run in `regime_name` satisfy the assumptions of the model's
    `bound` ("loop", "pool", "machine")? A stage bound is tested on runs
    where that stage saturated; the machine bound on machine-bound runs."""
    want = {"loop": "loop-bound", "pool": "pool-bound", "machine": "machine-bound", "client": "client-bound",
            "pool+client": "pool+client-bound"}.get(bound)
    return want is not None and regime_name == want


# ------------------------------------------------------------------ the model

def _med(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def _client_kind(cfg):
    k = cfg.get("client", "wrk")
    return "wrk" if k == "wrk-browser" else k  # browser heads: the plain client's cost (approximation)


def fit(calib, exclude_disturbed=True):
    """Stage costs from the calib records (all repeats but the disturbed
    ones; medians)."""
    groups = {}
    for r in calib:
        if "error" in r or (exclude_disturbed and disturbed(r)):
            continue
        groups.setdefault(r["label"], []).append((r["config"], metrics(r)))
    p = {"c_loop": {}, "c_pool0": {}, "cpu_pool0": {}, "slope": {}, "c_client": {}, "native": {}}
    pool_pts = {}
    clients = {}
    for _, rows in groups.items():
        cfg = rows[0][0]
        k = _client_kind(cfg)
        if cfg["conns"] == 1:
            continue  # one connection: all wake-ups; des.py fits its wake latency on these
        clients.setdefault(k, []).extend(m["c_client"] for _, m in rows)
        if cfg.get("mode") == "native":
            p["native"][k] = _med(m["c_loop"] for _, m in rows)
            continue
        if cfg["server"] != "cserve" or cfg.get("mode"):
            continue
        h, app, us = cfg["handoff"], cfg["app"], configs.app_us(cfg["app"])
        if app == "hello":
            p["c_loop"][f"{h}/{k}"] = _med(m["c_loop"] for _, m in rows)
        if us is not None and k == "wrk-p16":
            c = _med(m["c_pool"] for _, m in rows)
            if app == "hello":
                p["c_pool0"][h] = c
            else:
                pool_pts.setdefault(h, []).append((us, c))
    for h, pts in pool_pts.items():
        pts.sort()
        # The cpu app's intercept: its cpu0 run, else (older results) hello's.
        if pts and pts[0][0] == 0:
            p["cpu_pool0"][h] = pts[0][1]
        elif h in p["c_pool0"]:
            pts.insert(0, (0.0, p["c_pool0"][h]))
        if len(pts) >= 2 and pts[-1][0] > pts[0][0]:
            p["slope"][h] = (pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0])
    p["c_client"] = {k: _med(v) for k, v in clients.items()}
    return p


def _c_loop(p, h, k):
    v = p["c_loop"].get(f"{h}/{k}")
    if v is not None:
        return v
    # Not calibrated for this client: the handoff's pipelined cost plus the
    # client-kind difference measured on the ring.
    base, ring_k, ring_p = p["c_loop"].get(f"{h}/wrk-p16"), p["c_loop"].get(f"ring/{k}"), \
        p["c_loop"].get("ring/wrk-p16")
    if None in (base, ring_k, ring_p):
        return None
    return base + ring_k - ring_p


def pool_cost(p, h, app):
    """The pool's µs/request for `app` on handoff h from the calibration (an
    uncalibrated handoff takes the ring's), or None (not hello or cpuN)."""
    us = configs.app_us(app)
    if us is None:
        return None
    if app == "hello":  # calibrated itself: no line needed
        return p["c_pool0"].get(h, p["c_pool0"].get("ring"))
    if h not in p["slope"]:
        h = "ring"
    c0, s = p["cpu_pool0"].get(h, p["c_pool0"].get(h)), p["slope"].get(h)
    return None if c0 is None or s is None else c0 + s * us


REGIONS = ("identity", "interpolates", "extrapolates")


def _shape(cfg):
    """What a configuration's predicted costs depend on: the loop's (handoff,
    or native), the pool's (the app) and the client's kind."""
    return (cfg.get("mode") or cfg.get("handoff"), cfg["app"], _client_kind(cfg))


def region(cfg, calib):
    """Where a cserve configuration's prediction sits against the
    calibration (calib: the calib sweep's configurations; its one-connection
    rows are not fitted):
      identity      a calibrated shape (handoff or native, app, client) at a
                    connection count the calibration covers: the model restates
                    the costs it was fitted on
      interpolates  its handoff and client calibrated, the app's cost within
                    the calibrated ones and the connections within theirs
      extrapolates  anything else: an app dearer than any calibrated, a cost
                    borrowed from another handoff or client (condvar, eventfd,
                    browser heads), or connections outside the calibrated range
    None for a peer (not modelled)."""
    if cfg["server"] != "cserve":
        return None
    fitted = [c for c in calib if c.get("server", "cserve") == "cserve" and c["conns"] > 1]
    if not fitted:
        return "extrapolates"
    lo, hi = min(c["conns"] for c in fitted), max(c["conns"] for c in fitted)
    if not lo <= cfg["conns"] <= hi or cfg.get("client") == "wrk-browser":
        return "extrapolates"
    if _shape(cfg) in {_shape(c) for c in fitted}:
        return "identity"
    h, k, us = cfg.get("mode") or cfg.get("handoff"), _client_kind(cfg), configs.app_us(cfg["app"])
    same = [c for c in fitted if (c.get("mode") or c.get("handoff")) == h]
    costs = [configs.app_us(c["app"]) for c in same if configs.app_us(c["app"]) is not None]
    if (us is not None and costs and min(costs) <= us <= max(costs)
            and any(_client_kind(c) == k for c in same)):
        return "interpolates"
    return "extrapolates"


def region_errors(summ):
    """{region: (configurations, |error| of every included run, of the runs
    that test the bound)} over report.summarise's predicted rows outside
    calib (each carries its region)."""
    out = {r: (0, [], []) for r in REGIONS}
    for s in summ.values():
        if s.get("region") in out and s.get("pred") is not None:
            n, every, tested = out[s["region"]]
            out[s["region"]] = (n + 1, every + [abs(e) for e in s["pred_err"]],
                                tested + [abs(e) for e in s["pred_err_tested"]])
    return out


def waiting_by_regime(summ):
    """{regime: (configurations, median sleeps, wake-ups and holds per
    request)} over report.summarise's cserve rows with a handoff that
    counted them (metrics: sleeps_per_req and the rest). Where nothing
    saturates, the threads spend the window asleep and waking each other."""
    out = {}
    for s in summ.values():
        if s["n"] and (s.get("sleeps_per_req") or (None,))[0] is not None:
            out.setdefault(s["regime"], []).append(s)
    return {reg: (len(rows),) + tuple(stats.median([r[f"{k}_per_req"][0] for r in rows])
                                      for k in ("sleeps", "wakes", "holds"))
            for reg, rows in sorted(out.items())}


def predict(p, cfg, m, nproc):
    """(rate, bound name, costs) for one run's configuration, or (None, why, {})."""
    if cfg["server"] != "cserve":
        return None, "peer: not modelled", {}
    k = _client_kind(cfg)
    c_client = p["c_client"].get(k)
    us = configs.app_us(cfg["app"])
    if cfg.get("mode") == "native":
        c_loop, c_pool = p["native"].get(k) or p["native"].get("wrk-p16"), 0.0
        if k != "wrk-p16" and c_loop is not None and None not in (_c_loop(p, "ring", k), _c_loop(p, "ring", "wrk-p16")):
            c_loop = p["native"].get(k) or c_loop + _c_loop(p, "ring", k) - _c_loop(p, "ring", "wrk-p16")
    elif cfg.get("mode") or us is None:
        return None, "app or mode not in calib", {}
    else:
        c_loop, c_pool = _c_loop(p, cfg["handoff"], k), pool_cost(p, cfg["handoff"], cfg["app"])
    if c_loop is None or c_pool is None or c_client is None:
        return None, "missing calibration", {}
    n = max(0.5, nproc - (m.get("foreign") or 0.0) - (m.get("steal") or 0.0))
    costs = {"c_loop": c_loop, "c_pool": c_pool, "c_client": c_client, "n": n}
    rate, name = predict_placed(c_loop, c_pool, c_client, cfg.get("placement") or "shared", n)
    return rate, name, costs


def predict_placed(c_loop, c_pool, c_client, placement, cpus=2, client_threads=1):
    """(rate, bound) of the pipeline from its stages' µs per request, where
    each stage runs by placement (lib/pinning.py):
      loop-alone  the loop on a core of its own; the pool and the client
                  share the other: min(1/c_loop, 1/(c_pool + c_client))
      dedicated   every stage on cores of its own: min(1/c_loop, 1/c_pool,
                  client_threads/c_client)
      shared      any thread anywhere on `cpus` cores: each stage at most a
                  core, all of them at most the machine
    bound: "loop", "pool", "client", "pool+client" (the core those two
    share) or "machine". None where a cost is missing."""
    if None in (c_loop, c_pool, c_client) or min(c_loop, c_client) <= 0:
        return None, None
    b = {"loop": 1e6 / c_loop}
    if placement == "loop-alone":
        b["pool+client"] = 1e6 / (c_pool + c_client)
    elif placement == "dedicated":
        if c_pool > 0:
            b["pool"] = 1e6 / c_pool
        b["client"] = client_threads * 1e6 / c_client
    else:
        if c_pool > 0:
            b["pool"] = 1e6 / c_pool
        b["client"] = 1e6 / c_client
        b["machine"] = cpus * 1e6 / (c_loop + c_pool + c_client)
    name = min(b, key=b.get)
    return b[name], name

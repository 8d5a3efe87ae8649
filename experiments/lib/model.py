"""Per-run metrics, the regime a run was in (from measured utilisation only),
and the pipeline model fitted on the `calib` sweep and used out of sample.

Regime, per run (never from comparing costs):
  a server stage at >= 90 % of a core  -> bound by that stage ("loop-bound",
                                          "pool-bound"; for a peer, its busiest thread)
  else the client at >= 90 % of a core -> "client-bound"
  else                                 -> "shared CPUs" (no stage saturated: the
                                          machine's cores and the wake-up gaps set the rate)
The pool stage is the GIL: Python work is serialised whatever the number of
blocking threads, so the pool's utilisation is the SUM over pool threads
against one core, and the model's pool bound is 1/c_pool with c_pool the
summed pool CPU per request. (regime() and pred() use the same convention.)

Model: rate = min(1/c_loop, 1/c_pool, N/(c_loop + c_pool + c_client)),
N = the vCPUs minus the foreign CPU measured in the run's window. The costs
come from the calib sweep only (lib/configs.py), never from the run predicted:
  c_loop[handoff, client]  the loop's µs/request, hello, in calib
  c_pool(hello) = c_pool0[handoff]                             (hello in calib)
  c_pool(cpuN)  = cpu_pool0[handoff] + slope[handoff] * N      (cpu0 and cpu20 in calib;
                  the cpu app has a fixed cost of its own, so hello is not its intercept;
                  results without cpu0 fall back to hello's cost as the intercept)
  c_client[client]         the client's µs/request in calib
(calib's one-connection runs are left out of these: they are des.py's wake-up
calibration, not the steady-state costs.)
"""
from . import configs

SAT = 0.90


def _wrk_threads(rec):
    return [t for t in rec.get("threadcpu") or [] if t["name"].startswith("wrk")]


def metrics(rec):
    """Flat per-run numbers (None where not measured)."""
    m = {"rps": rec.get("rps"), "rps_wrk": rec.get("rps_wrk")}
    lat = rec.get("latency") or {}
    if rec["config"].get("client") == "wrk-p16":
        lat = {}  # wrk times a pipelined batch, not a request: no latency column
    m.update(p50_us=lat.get("p50_us"), p99_us=lat.get("p99_us"))
    w = rec.get("window_cpu") or {}
    m.update(foreign=w.get("foreign_cores"), steal=w.get("steal_cores"), busy=w.get("busy_cores"))
    rps = m["rps"] or 0
    wrk = _wrk_threads(rec)
    m["client_util"] = sum(t["median_pct"] for t in wrk) / 100 if wrk else None
    m["c_client"] = m["client_util"] / rps * 1e6 if (wrk and rps) else None
    srv = [t for t in rec.get("threadcpu") or [] if not t["name"].startswith("wrk")]
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
    else:  # a peer: its threads from /proc, busiest first
        srv.sort(key=lambda t: -t["median_pct"])
        for t in srv[:2]:
            m["stages"][t["name"]] = t["median_pct"] / 100
        m["c_loop"] = srv[0]["us_per_request"] if srv else None
        m["c_pool"] = srv[1]["us_per_request"] if len(srv) > 1 else None
        m["loop_util"] = srv[0]["median_pct"] / 100 if srv else None
        m["pool_util"] = srv[1]["median_pct"] / 100 if len(srv) > 1 else None
        m["loop_wait_us"] = m["loop_work_us"] = None
    m["regime"] = regime(m, rec["config"])
    return m


def regime(m, cfg):
    stages = {k: v for k, v in (m.get("stages") or {}).items() if v is not None}
    if stages:
        name, u = max(stages.items(), key=lambda kv: kv[1])
        if u >= SAT:
            return f"{name}-bound" if cfg["server"] == "cserve" else f"{cfg['server']} {name}-bound"
    if (m.get("client_util") or 0) >= SAT:
        return "client-bound"
    return "shared CPUs"


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


def fit(calib):
    """Stage costs from the calib records (all repeats; medians)."""
    groups = {}
    for r in calib:
        if "error" in r:
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
    n = max(0.5, nproc - (m.get("foreign") or 0.0))
    bounds = {"loop": 1e6 / c_loop, "shared CPUs": n * 1e6 / (c_loop + c_pool + c_client)}
    if c_pool > 0:
        bounds["pool"] = 1e6 / c_pool
    name = min(bounds, key=bounds.get)
    return bounds[name], name, {"c_loop": c_loop, "c_pool": c_pool, "c_client": c_client, "n": n}

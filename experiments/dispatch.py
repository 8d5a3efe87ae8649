#!/usr/bin/python3
"""Which pool thread runs which request: mixed costs, a self-sizing pool, a
burst and a pipelining neighbour, one worker each, cserve beside gunicorn
(gthread), Granian and uWSGI at the same thread counts, in interleaved,
shuffled rounds of one run.

  io-mix    apps/mix.py: 95 % of the requests wait 1 ms, 5 % wait 100 ms
            (time.sleep, the GIL released); 8 threads, wrk -t1 -c32
  cpu-mix   apps/mix.py: 95 % run 50 µs, 5 % run 5 ms of Python (the GIL
            held); 4 threads, wrk -t1 -c32: with one thread nothing is
            dispatched, and with four a 5 ms request can hold a thread
            that fast requests are queued behind while the GIL is free
  auto-sleep  cserve only: --blocking-threads auto and auto:64 against 16,
            32 and 64 fixed threads, apps/gil_release.py asleep 5 ms, c64
  auto-mix  cserve only: auto and auto:64 against 8, 16 and 32 on io-mix
  burst     40 requests of a 0.5 s sleep sent at once on 40 fresh
            connections (Connection: close) to an idle server: the time
            until the last is answered; cserve auto:8 against 8 fixed
            threads, the peers at 8
  fairness  one pool thread (the peers one thread), apps/gil_release.py
            asleep 5 ms: client B (wrk -t1 -c1) alone, then B beside
            connection A (build/pipeload -c1 -p64, started first): B's
            latency and its share of the requests answered

Rows: cserve (the uninstrumented build, ring handoff) and, with --baseline
REV, cserve built from REV (build-base/REV, as experiments/production.py
builds it), every cserve row twice; the peers as serverctl starts them,
one worker each. The auto cells run after a longer warm-up (auto settles
within it) and record the threads auto ended on.

    /usr/bin/python3 -m experiments.dispatch [--baseline REV] [--rounds 5] [--cells io-mix,burst,...] [--out DIR]
        # the full run with a baseline: ~10 min a round on 2 vCPUs, ~1 h for 5 rounds with reruns
    /usr/bin/python3 -m experiments.dispatch --quick     # plumbing: a few rows once, into a scratch folder
    /usr/bin/python3 -m experiments.dispatch --report    # the .md from the .jsonl
    /usr/bin/python3 -m experiments.dispatch --readme    # the block in docs/results.md from the record

Per run: the rate, p50/p90/p99 (wrk --latency; the burst's from its own
client), the requests in flight, the account's server CPU per request
(lib/account.py), the stage that bounds it by lib/model.py's rule and the
rate against what the app allows at that thread count, and the window's
steal and foreign CPU: a run that lost more than model.DISTURB_LIMIT core
is rerun up to twice, then kept and marked (lib/probe.py). Medians over the
clean runs with their range (min–max). Writes DIR/dispatch.jsonl (a
provenance line, then one line per run) and DIR/dispatch.md.

The goals (each a PASS/FAIL line computed from the records, for cserve and
for the baseline): on both mixes p99 at or below the best peer's and the
rate at least the best peer's (the peers that kept at least
model.IN_FLIGHT_MIN of the connections in flight); auto's rate at least
0.9× the best fixed count's and its p99 within 1.5× that count's, on both
auto cells; the burst's last answer within 2× of 8 fixed threads'; B's
median beside the pipeline within 2× of B's median alone; and, for cserve
beside a baseline, its p50 on each mix at most 1.1× the baseline's."""
import math
import os
import selectors
import signal
import socket
import statistics
import sys
import tempfile
import time

from experiments import auto_threads, production
from experiments.lib import account, entry, generated, model, probe, provenance, stats, threadcpu
from experiments.lib.serverctl import ROOT, app_spec, read_stats, stats_summary

OUT = os.path.join(ROOT, "experiments", "results", "dispatch")
QUICK_OUT = os.path.join(tempfile.gettempdir(), "cserve-dispatch-quick")
RECORD = os.path.join(OUT, "dispatch.jsonl")
PEERS = ("gunicorn", "granian", "uwsgi")
BUILDS = ("cserve", "baseline")
IO_MIX = "mix-sleep1000-100000-5"
CPU_MIX = "mix-cpu50-5000-5"
SLEEP5 = "gil-sleep5000"
BURST_APP = "gil-sleep500000"
BURST_N = 40
DEPTH = 64            # connection A's pipeline in the fairness cell
AUTO_WARMUP = (8.0, 3.0)   # the auto cells' warm-up, full and quick: auto settles within it
BURST_IDLE = 1.0      # s idle after the first request, before the burst
BURST_TIMEOUT = 60.0  # s the burst client waits for the last answer at most
# name -> the cell: its app, connections, cserve's thread settings, the
# peers' threads (None: cserve only), and what it is
CELLS = {
    "io-mix": {"app": IO_MIX, "conns": 32, "cserve": [8], "peers": 8,
               "what": "95 % of the requests wait 1 ms, 5 % wait 100 ms (time.sleep, the GIL released)"},
    "cpu-mix": {"app": CPU_MIX, "conns": 32, "cserve": [4], "peers": 4,
                "what": "95 % of the requests run 50 µs, 5 % run 5 ms of Python (the GIL held)"},
    "auto-sleep": {"app": SLEEP5, "conns": 64, "cserve": [16, 32, 64, "auto", "auto:64"], "peers": None,
                   "what": "every request waits 5 ms (time.sleep, the GIL released); auto against fixed counts"},
    "auto-mix": {"app": IO_MIX, "conns": 32, "cserve": [8, 16, 32, "auto", "auto:64"], "peers": None,
                 "what": "io-mix's app; auto against fixed counts"},
    "burst": {"app": BURST_APP, "conns": BURST_N, "cserve": [8, "auto:8"], "peers": 8,
              "what": f"{BURST_N} requests of a 0.5 s sleep sent at once to an idle server"},
    "fairness": {"app": SLEEP5, "conns": 1, "cserve": [1], "peers": 1, "phases": ["alone", "beside"],
                 "what": f"B (one connection, closed loop) alone and beside A (one connection, {DEPTH} "
                         "requests pipelined); every request waits 5 ms"},
}
# --quick: per cell, the thread settings of cserve's rows and the peers it runs
QUICK = {"io-mix": ([8], ("gunicorn",)), "cpu-mix": ([4], ()), "auto-sleep": ([16, "auto"], ()),
         "burst": ([8, "auto:8"], ()),
         "fairness": ([1], ())}
GOALS = {"mix_p99": 1.0, "mix_rate": 1.0, "mix_p50": 1.1, "auto_rate": 0.9, "auto_p99": 1.5, "burst": 2.0, "fair": 2.0}


def cfg(cell, row, bt, phase=None, binary=None, quick=False, cells=CELLS):
    """One run's configuration: row cserve, baseline (binary: its build) or a peer."""
    c = cells[cell]
    server = "cserve" if row in BUILDS else row
    out = {"cell": cell, "row": row, "server": server, "app": c["app"], "bt": bt, "workers": 1,
           "conns": c["conns"], "client": "burst" if cell == "burst" else "wrk", "wrk_threads": 1,
           "path": app_spec(c["app"])[2]}
    if server == "cserve":
        out.update(handoff="ring", binary=binary or production.NOINST)
    if cell.startswith("auto-"):
        out["warmup"] = AUTO_WARMUP[1 if quick else 0]
        out["warm_apart"] = True  # auto's growth in the warm-up is not in the measured p99
    if phase:
        out["phase"] = phase
        if phase == "beside":
            out["beside"] = {"conns": 1, "depth": DEPTH}
    return out


def label(c):
    return " ".join([c["cell"], c["row"], str(c["bt"])] + ([c["phase"]] if c.get("phase") else []))


def plan(quick=False, baseline=None, cells=None):
    """[cfg] of every run of a round, cell by cell."""
    out = []
    for cell in cells or CELLS:
        c = CELLS[cell]
        bts, peers = (QUICK[cell] if cell in QUICK else ([], ())) if quick else (c["cserve"], PEERS)
        if c["peers"] is None:
            peers = ()
        rows = [(r, bt) for r in (("cserve", "baseline") if baseline else ("cserve",)) for bt in bts]
        rows += [(p, c["peers"]) for p in peers]
        for r, bt in rows:
            for ph in c.get("phases") or [None]:
                out.append(cfg(cell, r, bt, ph, baseline if r == "baseline" else None, quick))
    return out


# ------------------------------------------------------------------ the app's ceiling

def mean_cost_us(app):
    """(mean µs of the app's work per request, mode "sleep" or "cpu") from the app's name."""
    q = dict(p.split("=") for p in app_spec(app)[2].lstrip("/?").split("&"))
    if "fast" in q:
        p = float(q["pct"]) / 100
        return (1 - p) * float(q["fast"]) + p * float(q["slow"]), q["mode"]
    return float(q["us"]), q["mode"]


def pool_size(c):
    """The threads a configuration may run at once: its fixed count, auto's
    MAX, or (auto's default cap, which a build sets) the connections."""
    bt = c["bt"]
    if isinstance(bt, int):
        return bt
    return int(bt.split(":")[1]) if ":" in bt else c["conns"]


def ceiling(c):
    """Requests a second the app allows: with the GIL released, as many in
    flight as threads and connections allow, each its mean wait; with the
    GIL held, one at a time."""
    us, mode = mean_cost_us(c["app"])
    if mode == "cpu":
        return 1e6 / us
    return min(c["conns"], pool_size(c)) * 1e6 / us


# ------------------------------------------------------------------ the burst

def _complete(buf):
    """(status, done) of an HTTP/1.1 response read so far."""
    head, sep, body = buf.partition(b"\r\n\r\n")
    if not sep:
        return None, False
    status = int(head.split(b" ", 2)[1])
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            return status, len(body) >= int(v)
    return status, False


def burst(port, path, n, timeout=BURST_TIMEOUT):
    """n connections opened, then one request sent on each at once; returns
    ([each answered request's latency s, from its send], s from the first
    send to the last answer, {status: count}). A request unanswered within
    timeout is left out of both."""
    req = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n").encode()
    socks = [socket.create_connection(("127.0.0.1", port), timeout=timeout) for _ in range(n)]
    sel, sent, bufs, done, statuses = selectors.DefaultSelector(), [], {}, {}, {}
    t0 = time.monotonic()
    for i, s in enumerate(socks):
        s.sendall(req)
        sent.append(time.monotonic())
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, i)
        bufs[i] = b""
    deadline = t0 + timeout
    while sel.get_map():  # a socket leaves the map when its response is complete or it closes
        left = deadline - time.monotonic()
        if left <= 0:
            break
        for key, _ in sel.select(left):
            i, s = key.data, key.fileobj
            try:
                data = s.recv(65536)
            except OSError:
                data = b""
            bufs[i] += data
            status, ok = _complete(bufs[i])
            if ok or not data:
                now = time.monotonic()
                sel.unregister(s)
                s.close()
                statuses[status] = statuses.get(status, 0) + 1
                if ok and status == 200:
                    done[i] = now
    for s in socks:
        s.close()
    lat = sorted(done[i] - sent[i] for i in done)
    return lat, (max(done.values()) - t0 if done else None), statuses


def _own_cpu(pids):
    return sum(cpu for _, cpu in threadcpu.snapshot(pids, "schedstat").values())


def one_request(port, path, timeout=30.0):
    lat, _, _ = burst(port, path, 1, timeout)
    return bool(lat)


def burst_run(c, lab):
    """One burst run against a fresh server: the record, or one with "error"."""
    def body(rec, proc, port, stats_file):
        if not one_request(port, c["path"]):
            rec["error"] = "the server did not answer a first request"
            return
        time.sleep(BURST_IDLE)  # an idle server: auto back where an idle pool sits
        pids = threadcpu.descendants(proc.pid) + [os.getpid()]
        own0, ps0, t0 = _own_cpu(pids), provenance.proc_stat(), time.monotonic()
        lat, makespan, statuses = burst(port, c["path"], c["conns"])
        ps1, t1 = provenance.proc_stat(), time.monotonic()
        rec["window_cpu"] = provenance.window_cpu(ps0, ps1, t1 - t0, _own_cpu(pids) - own0)
        rec["window_cpu"]["seconds"] = round(t1 - t0, 4)
        rec["burst"] = {"requests": c["conns"], "answered": len(lat), "makespan_s": makespan,
                        "latency_s": [round(x, 6) for x in lat], "statuses": {str(k): v for k, v in statuses.items()}}
        # the burst's rate, where probe's log line and the model look for one
        rec["rps"] = rec["rps_wrk"] = len(lat) / makespan if makespan else None
        if c["server"] == "cserve":
            mtime = os.stat(stats_file).st_mtime_ns if os.path.exists(stats_file) else 0
            proc.send_signal(signal.SIGUSR1)
            rec["stats_threads"], rec["stats_window"] = stats_summary(read_stats(stats_file, mtime))
        if len(lat) < c["conns"]:
            rec["error"] = f"{c['conns'] - len(lat)} of {c['conns']} requests unanswered (statuses {statuses})"
    return probe.with_server(c, lab, body, "cserve-dispatch-")


def measure_run(a):
    """The runner for entry.measure: the burst's own client, else probe.measure
    (the configuration's warm-up where it has one). Beside A, a B that got
    no answer at all is a result (starved), not an error."""
    def run(c, lab):
        if c["client"] == "burst":
            return burst_run(c, lab)
        rec = probe.measure(c, lab, c.get("warmup", a.warmup), a.duration)
        if c.get("beside") and rec.get("error", "").startswith("client reported no requests") \
                and probe.beside_counts(rec.get("wrk_output")):
            del rec["error"]
            rec["starved"] = True
        return rec
    return run


# ------------------------------------------------------------------ the figures

def quantile(xs, q):
    """The q-quantile of xs, linear between order statistics (None when empty)."""
    xs = sorted(xs)
    if not xs:
        return None
    k = (len(xs) - 1) * q
    lo = math.floor(k)
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (k - lo)


def figures(rec):
    """One run's figures: rate (answered a second), p50/p90/p99 ms, and by
    cell the burst's last answer (s), the requests in flight and server CPU
    per request (the account), B's share beside A and A's rate, the threads
    cserve ended on."""
    c = rec["config"]
    out = {"threads": auto_threads.settled(rec)}
    b = rec.get("burst")
    if b:
        lat = b["latency_s"]
        out.update(rate=b["answered"] / b["makespan_s"] if b["makespan_s"] else None, last_s=b["makespan_s"],
                   answered=b["answered"], **{f"p{q}_ms": _ms(quantile(lat, q / 100)) for q in (50, 90, 99)})
        return out
    lat = rec.get("latency") or {}
    out["rate"] = rec.get("rps_wrk") or 0.0
    for q in (50, 90, 99):
        v = lat.get(f"p{q}_us")
        out[f"p{q}_ms"] = v / 1000 if v is not None and not rec.get("starved") else None
    if out["rate"]:
        out["in_flight"], out["in_flight_share"] = model.in_flight(rec)
        out["server_cpu_us"] = account.flat(account.of_run(rec)).get("server.cpu_us")
    if c.get("beside"):
        a = probe.beside_counts(rec.get("wrk_output")) or {}
        if a.get("seconds"):
            # by rates: A runs a little longer than B, on both sides of B's run
            out["a_rate"] = a["requests"] / a["seconds"]
            mine = out["rate"]
            out["share"] = mine / (mine + out["a_rate"]) if mine + out["a_rate"] else None
    return out


def _ms(s):
    return None if s is None else s * 1000


def _regime(rec):
    if "burst" in rec or not rec.get("rps_wrk"):
        return None
    return probe.run_metrics(rec)["regime"]


def summarise(recs):
    """label -> row: the configuration, the runs (used: the clean ones, or
    all, marked, where none was clean), each figure's median and range
    (min–max) over the runs used, the steal and foreign CPU's median, the
    majority regime, and how many of the runs used B starved in."""
    out = {}
    for lab, (row, use) in probe.runs_used(recs).items():
        figs = [figures(r) for r in use]
        row.update(starved=sum(1 for r in use if r.get("starved")), med={}, range={},
                   lost=stats.median([model.lost_cores(r) for r in use]),
                   threads_all=sorted(f["threads"] for f in figs if f.get("threads") is not None))
        for k in sorted({k for f in figs for k in f}):
            vals = [f.get(k) for f in figs if f.get(k) is not None]
            row["med"][k] = stats.median(vals)
            row["range"][k] = (min(vals), max(vals)) if vals else (None, None)
        regs = [x for x in (_regime(r) for r in use) if x]
        row["regime"] = max(sorted(set(regs)), key=regs.count) if regs else None
        out[lab] = row
    return out


def cells(rows):
    """{cell: [row]} in the plan's order (cells, then rows as planned)."""
    order = {lab: i for i, lab in enumerate(label(c) for c in plan(baseline="b"))}
    out = {}
    for r in sorted(rows.values(), key=lambda r: (list(CELLS).index(r["config"]["cell"]),
                                                  order.get(r["label"].replace(" baseline ", " cserve "), 999),
                                                  r["config"]["row"] == "baseline")):
        out.setdefault(r["config"]["cell"], []).append(r)
    return out


# ------------------------------------------------------------------ the goals

def _find(rs, row, bt=None, phase=None):
    for r in rs:
        c = r["config"]
        if c["row"] == row and (bt is None or c["bt"] == bt) and c.get("phase") == phase:
            return r
    return None


def _peers(rs):
    """The peers that serve as yardsticks: a rate, a p99, and at least
    model.IN_FLIGHT_MIN of the connections kept in flight."""
    out = []
    for r in rs:
        m = r["med"]
        if r["config"]["row"] in PEERS and m.get("rate") and m.get("p99_ms") is not None and \
                (m.get("in_flight_share") or 0) >= model.IN_FLIGHT_MIN:
            out.append(r)
    return out


def _name(r):
    c = r["config"]
    return f"{c['row']} {c['bt']}"


def p50_goal(rs, cell):
    """cserve's p50 on a mix against the baseline's (early binding), in
    the same run: late binding may not buy its tail with its median."""
    bt = CELLS[cell]["cserve"][0]
    cs, base = _find(rs, "cserve", bt), _find(rs, "baseline", bt)
    name = f"{cell} p50"
    if not cs or not base or cs["med"].get("p50_ms") is None or not base["med"].get("p50_ms"):
        return (name, "cserve", None, "not measured (a row is missing)")
    x = cs["med"]["p50_ms"] / base["med"]["p50_ms"]
    text = f"p50 {_fmt_ms(cs['med']['p50_ms'])} ms, {x:.2f}× the baseline's {_fmt_ms(base['med']['p50_ms'])} ms"
    return (name, "cserve", x <= GOALS["mix_p50"], text + p50_needs(cs, GOALS["mix_p50"] * base["med"]["p50_ms"]))


def p50_needs(r, goal_ms):
    """Where a p50 goal fails, what meeting it would take at the same shape,
    by Little's law: the mean latency is the requests in flight over the
    rate; a p50 at the same ratio to that mean, at goal_ms, needs the rate
    that brings the mean down in proportion. Against the app's ceiling
    (`ceiling`), it says whether the goal asks for a faster server or for
    a different order of service (a p50 below the mean: some requests
    served far ahead of others)."""
    m = r["med"]
    if not m.get("in_flight") or not m.get("rate") or m["p50_ms"] <= goal_ms:
        return ""
    shape = m["p50_ms"] / (m["in_flight"] / m["rate"] * 1e3)
    need = m["in_flight"] / (goal_ms / shape / 1e3)
    return (f"; at its p50 of {shape:.2f}× its mean latency (in flight over rate), {_fmt_ms(goal_ms)} ms "
            f"needs {need:,.0f}/s, {need / ceiling(r['config']):.2f}× the app's ceiling")


def burst_goal(rs, build):
    """auto:8's last answer against 8 fixed threads', for build."""
    fixed, au = _find(rs, build, 8), _find(rs, build, "auto:8")
    if not (fixed and au and fixed["med"].get("last_s") and au["med"].get("last_s")):
        return ("burst", build, None, "not measured (a row is missing or unanswered)")
    x = au["med"]["last_s"] / fixed["med"]["last_s"]
    return ("burst", build, x <= GOALS["burst"],
            f"auto:8 answered the last after {au['med']['last_s']:.2f} s, {x:.2f}× 8 fixed "
            f"threads' {fixed['med']['last_s']:.2f} s")


def fairness_goal(rs, build):
    """B's median beside A against B's alone, for build."""
    alone, beside = _find(rs, build, 1, "alone"), _find(rs, build, 1, "beside")
    if not (alone and beside and alone["med"].get("p50_ms")):
        return ("fairness", build, None, "not measured (a row is missing)")
    if beside["starved"] or beside["med"].get("p50_ms") is None:
        return ("fairness", build, False, "B got no answer beside A")
    x = beside["med"]["p50_ms"] / alone["med"]["p50_ms"]
    return ("fairness", build, x <= GOALS["fair"],
            f"B's median {_fmt_ms(beside['med']['p50_ms'])} ms beside A, {x:.2f}× its "
            f"{_fmt_ms(alone['med']['p50_ms'])} ms alone; B's share of the answers "
            f"{_pct(beside['med'].get('share'))}")


def goals(rows):
    """[(goal, build, met, text)] for each build present (cserve, baseline):
    met is True, False, or None where a row it needs is missing."""
    by = cells(rows)
    out = []
    for build in BUILDS:
        if not any(r["config"]["row"] == build for r in rows.values()):
            continue
        for cell in [x for x in ("io-mix", "cpu-mix") if x in by]:  # a cell not run (--cells): no line
            rs = by[cell]
            cs = _find(rs, build, CELLS[cell]["cserve"][0])
            peers = _peers(rs)
            if not cs or not peers or cs["med"].get("rate") is None:
                out.append((cell, build, None, "not measured (a row is missing)"))
                continue
            fast = max(peers, key=lambda r: r["med"]["rate"])
            tight = min(peers, key=lambda r: r["med"]["p99_ms"])
            p99, rate = cs["med"].get("p99_ms"), cs["med"]["rate"]
            ok = p99 is not None and p99 <= GOALS["mix_p99"] * tight["med"]["p99_ms"] and \
                rate >= GOALS["mix_rate"] * fast["med"]["rate"]
            out.append((cell, build, ok, f"p99 {_fmt_ms(p99)} ms against the best peer's {_fmt_ms(tight['med']['p99_ms'])} "
                                         f"({_name(tight)}); rate {rate:,.0f}/s against the best peer's "
                                         f"{fast['med']['rate']:,.0f}/s ({_name(fast)})"))
        if build == "cserve":
            for cell in [x for x in ("io-mix", "cpu-mix") if x in by]:
                out.append(p50_goal(by[cell], cell))
        for cell in [x for x in ("auto-sleep", "auto-mix") if x in by]:
            rs = [r for r in by.get(cell, []) if r["config"]["row"] == build]
            fixed = [r for r in rs if isinstance(r["config"]["bt"], int) and r["med"].get("rate")]
            for bt in [x for x in CELLS[cell]["cserve"] if not isinstance(x, int)]:
                au = _find(rs, build, bt)
                name = f"{cell} {bt}"
                if not fixed or not au or not au["med"].get("rate"):
                    out.append((name, build, None, "not measured (a row is missing)"))
                    continue
                best = max(fixed, key=lambda r: r["med"]["rate"])
                x, y = au["med"]["rate"] / best["med"]["rate"], au["med"]["p99_ms"] / best["med"]["p99_ms"]
                ok = x >= GOALS["auto_rate"] and y <= GOALS["auto_p99"]
                out.append((name, build, ok, f"rate {x:.2f}× and p99 {y:.2f}× the best fixed count's "
                                             f"({best['config']['bt']} threads: {best['med']['rate']:,.0f}/s, "
                                             f"p99 {_fmt_ms(best['med']['p99_ms'])} ms); ended on "
                                             f"{_threads(au['threads_all'])} threads"))
        if "burst" in by:
            out.append(burst_goal(by["burst"], build))
        if "fairness" in by:
            out.append(fairness_goal(by["fairness"], build))
    return out


GOAL_TEXT = {
    "io-mix": "p99 at or below the best peer's and rate at least the best peer's",
    "cpu-mix": "p99 at or below the best peer's and rate at least the best peer's",
    "p50": f"p50 at most {GOALS['mix_p50']:g}× the baseline's",
    "auto": f"rate at least {GOALS['auto_rate']:g}× the best fixed count's, p99 within {GOALS['auto_p99']:g}×",
    "burst": f"the last answer within {GOALS['burst']:g}× of 8 fixed threads'",
    "fairness": f"B's median beside A within {GOALS['fair']:g}× of alone",
}


def goal_lines(rows):
    out = []
    for name, build, met, text in goals(rows):
        verdict = "—" if met is None else "PASS" if met else "FAIL"
        want = GOAL_TEXT["auto" if name.startswith("auto") else "p50" if name.endswith(" p50") else name]
        who = "cserve" if build == "cserve" else "baseline"
        out.append(f"**{verdict}** {name}, {who} ({want}): {text}.")
    return out


# ------------------------------------------------------------------ the report

def _fmt_ms(x):
    if x is None:
        return "—"
    return f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 100 else f"{x:,.0f}"


def _pct(x):
    return "—" if x is None else f"{100 * x:.0f} %"


def _threads(ns):
    if not ns:
        return "—"
    return str(ns[0]) if ns[0] == ns[-1] else f"{ns[0]}–{ns[-1]}"


def _range(r, k, fmt):
    m, (lo, hi) = r["med"].get(k), r["range"].get(k, (None, None))
    if m is None:
        return "—"
    return fmt(m) + ("" if lo == hi else f" ({fmt(lo)}–{fmt(hi)})")


def _rate(x):
    return f"{x:,.0f}"


def _server(r, meta):
    c = r["config"]
    name = {"cserve": "cserve", "baseline": f"cserve {(meta or {}).get('baseline') or 'baseline'}"}.get(c["row"], c["row"])
    return name + (" †" if r["all_disturbed"] else "") + (" ‡" if r["errors"] else "")


def bound(r):
    """What bounds a row: lib/model.py's regime from each stage's share of
    a core, and the rate against what the app allows at its thread count."""
    c, m = r["config"], r["med"]
    if c["cell"] == "burst":
        floor = math.ceil(c["conns"] / pool_size(c)) * mean_cost_us(c["app"])[0] / 1e6
        return f"not measured; its threads' floor {floor:.2f} s"
    if not m.get("rate"):
        return "—"
    return f"{r['regime'] or '—'}; {100 * m['rate'] / ceiling(c):.0f} % of the app's ceiling ({ceiling(c):,.0f}/s)"


def table(rs, meta, compact=False):
    cell = rs[0]["config"]["cell"]
    if cell == "burst":
        L = ["| server | threads | runs used | last answered, s | p50 / p90 / p99 ms | threads at the end "
             "| bound | steal + foreign |", "|---|---|---:|---:|---:|---:|---|---:|"]
        for r in rs:
            L.append(f"| {_server(r, meta)} | {r['config']['bt']} | {r['used']} of {r['runs']} | "
                     f"{_range(r, 'last_s', lambda x: f'{x:.2f}')} | {_lat(r)} | {_threads(r['threads_all'])} | "
                     f"{bound(r)} | {_lost(r)} |")
        return L
    if cell == "fairness":
        L = ["| server | threads | B | runs used | B's rate /s | B's p50 / p90 / p99 ms | B's share | A's rate /s "
             "| steal + foreign |", "|---|---|---|---:|---:|---:|---:|---:|---:|"]
        for r in rs:
            c = r["config"]
            starved = f" (starved in {r['starved']})" if r["starved"] else ""
            L.append(f"| {_server(r, meta)} | {c['bt']} | {c['phase']} | {r['used']} of {r['runs']} | "
                     f"{_range(r, 'rate', _rate)}{starved} | {_lat(r)} | "
                     f"{_pct(r['med'].get('share')) if c['phase'] == 'beside' else '—'} | "
                     f"{_range(r, 'a_rate', _rate) if c['phase'] == 'beside' else '—'} | {_lost(r)} |")
        return L
    if compact:
        L = ["| server | threads | rate /s | p50 / p90 / p99 ms | bound |", "|---|---|---:|---:|---|"]
    else:
        L = ["| server | threads | runs used | rate /s | p50 / p90 / p99 ms | in flight | server CPU µs/req "
             "| threads at the end | bound | steal + foreign |", "|---|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    for r in rs:
        m = r["med"]
        if compact:
            L.append(f"| {_server(r, meta)} | {r['config']['bt']} | {_range(r, 'rate', _rate)} | {_lat(r)} | "
                     f"{bound(r)} |")
            continue
        L.append(f"| {_server(r, meta)} | {r['config']['bt']} | {r['used']} of {r['runs']} | "
                 f"{_range(r, 'rate', _rate)} | {_lat(r)} | {_num(m.get('in_flight'), '{:.1f}')} | "
                 f"{_num(m.get('server_cpu_us'), '{:.0f}')} | {_threads(r['threads_all'])} | {bound(r)} | "
                 f"{_lost(r)} |")
    return L


def _num(x, fmt):
    return "—" if x is None else fmt.format(x)


def _lat(r):
    return " / ".join(_fmt_ms(r["med"].get(f"p{q}_ms")) for q in (50, 90, 99))


def _lost(r):
    return _num(r["lost"], "{:.2f}")


def provenance_line(meta):
    return (f"{probe.meta_line(meta)} {meta['rounds']} interleaved, shuffled round(s); {meta['warmup']:g} s warm-up "
            f"({AUTO_WARMUP[1 if meta.get('quick') else 0]:g} s in the auto cells"
            + (", by a client of its own, so that the measured client's rate and percentiles begin with the pool "
               "grown" if meta.get("auto_warm_apart") else ", counted in wrk's rate and percentiles") +
            f"), {meta['duration']:g} s window "
            f"per run, each run a fresh server of one worker. A run that lost more than {model.DISTURB_LIMIT} core "
            "to steal and foreign CPU was rerun up to twice, then kept and marked (†: every run of the row was). "
            "Figures: medians over the runs used (the clean ones), with their range (min–max) in parentheses.")


def run_lines(recs, cell):
    """Each run of a mix cell, in the order run: its rate and its server CPU
    per request, so that a cell whose runs fall into two modes shows them
    (the median of a few runs hides which way each fell). †: disturbed."""
    by = {}
    for r in sorted((r for r in recs if r["config"]["cell"] == cell and "rps_wrk" in r), key=lambda r: r.get("time", "")):
        f = figures(r)
        cpu = f.get("server_cpu_us")
        by.setdefault(_name(r), []).append(f"{f['rate']:,.0f}" + (f" ({cpu:.0f})" if cpu else "")
                                           + ("†" if r.get("disturbed") else ""))
    return [f"- {name}: {', '.join(v)}" for name, v in by.items()]


def sleep_lines(recs, cell):
    """How cserve's loop and pool threads slept in a mix cell, per request,
    medians over the runs (cserve's --stats-json window): the loop's holds
    (deaf to the sockets while every thread has work), dozes (a timed wait
    for the next completion), parks (asleep until woken), and the wake-ups
    the pool threads sent it, each a syscall made by a pool thread, with
    the GIL held on a GIL-bound app; then the pool threads' parks, each
    ended by a wake-up the loop sent with the next request: a thread that
    found its queue empty after a request (late binding at a depth of one)
    waits a round trip through the loop for its next."""
    by = {}
    for r in recs:
        if r["config"]["cell"] != cell or r.get("disturbed"):
            continue
        st = r.get("stats_threads") or []
        loop = [t for t in st if t.get("role") == "loop"]
        pools = [t for t in st if t.get("role") == "pool"]
        done = sum(t.get("requests") or 0 for t in pools)
        if not loop or not done:
            continue
        lc = (loop[0].get("counters") or {}).get("handoff") or {}
        ph = [((t.get("counters") or {}).get("handoff") or {}) for t in pools]
        f = by.setdefault(_name(r), {"holds": [], "dozes": [], "parks": [], "wakes": [], "pool_parks": []})
        for k, v in (("holds", lc.get("loop_holds", 0)), ("dozes", lc.get("loop_dozes", 0)),
                     ("parks", lc.get("loop_parks", 0)), ("wakes", sum(h.get("loop_wakes", 0) for h in ph)),
                     ("pool_parks", sum(h.get("parks", 0) for h in ph))):
            f[k].append(v / done)
    return [f"- {name}: holds {stats.median(f['holds']):.2f}, dozes {stats.median(f['dozes']):.2f}, parks "
            f"{stats.median(f['parks']):.2f}; woken by the pool {stats.median(f['wakes']):.2f}; the pool threads "
            f"parked {stats.median(f['pool_parks']):.2f}" for name, f in by.items()]


def markdown(meta, recs):
    rows = summarise(recs)
    L = ["# Dispatch: mixed costs, a self-sizing pool, a burst and a pipelining neighbour", ""]
    if meta.get("quick"):
        L += ["**Smoke run, not a measurement** (`--quick`: a few rows once, short windows, on whatever else "
              "the machine was doing).", ""]
    L += [provenance_line(meta), ""]
    L += [f"cserve is the uninstrumented build, ring handoff"
          + (f"; the baseline is cserve built from {meta['baseline']}" if meta.get("baseline") else "")
          + ". gunicorn runs the gthread worker, Granian one runtime thread, uWSGI `--http11-socket` "
          "(it serves one connection per thread while the others wait: its in-flight column says how many). "
          "Client: `wrk -t1 --latency` (the rate and the percentiles are wrk's: it corrects them for coordinated "
          "omission, adding samples for a latency longer than a connection's mean interval, the same for every "
          "server), the burst's own (each request's latency from its send), and beside B connection A, "
          "`build/pipeload`, started first. B's share: its rate over B's and A's together. In flight: the rate "
          "times wrk's mean latency (its correction can lift it past the connections). Server CPU: every "
          "server thread's, from its schedstat, per request (lib/account.py). Bound: the stage at 90 % of a "
          f"core or more by lib/model.py's rule, else unsaturated, and the rate against the app's ceiling "
          "(with the GIL released: min(connections, threads) over the mean wait; with it held: one over the "
          "mean cost; auto's default cap counts as the connections). A failed p50 goal also says what meeting it "
          "would take at the same shape (Little's law: the mean latency is the in-flight over the rate): a "
          "rate near or past the ceiling means the goal asks for another order of service, not a faster "
          "server. ‡: a row with failed runs.", ""]
    L += ["## Goals", ""] + [f"- {x}" for x in goal_lines(rows)]
    for cell, rs in cells(rows).items():
        c = (meta.get("cells") or CELLS).get(cell, CELLS.get(cell, {}))
        L += ["", f"## {cell}", "", f"{c.get('what', '')}; {c.get('conns')} connection(s).", ""] + table(rs, meta)
        if cell in ("io-mix", "cpu-mix"):
            L += ["", "Each run in the order run: rate /s (server CPU µs a request).", ""] + run_lines(recs, cell)
            sl = sleep_lines(recs, cell)
            if sl:
                L += ["", "How cserve's loop and pool threads slept, per request (medians of the runs' "
                      "--stats-json windows; a pool thread parks when it finds its queue empty, and waits for "
                      "the loop to bind it its next request and wake it):",
                      ""] + sl
    dist = sum(r["disturbed_runs"] for r in rows.values())
    L += ["", f"Runs disturbed by other tenants: {dist} of {sum(r['runs'] for r in rows.values())}; runs that "
          f"failed: {sum(r['errors'] for r in rows.values())}."]
    cmds = {}
    for r in recs:
        cmds.setdefault((r["config"]["cell"], r["config"]["row"]), r.get("server_cmd"))
    L += ["", "Commands (the port differs per run):", ""]
    L += [f"- {cell}, {row}: `{production._relative(v, meta.get('root', ROOT))}`" for (cell, row), v in cmds.items() if v]
    return "\n".join(L) + "\n"


def readme_body(record, doc):
    """The "dispatch" block in docs/results.md: the goals and a compact
    table per cell; or, before the first record, how to make it."""
    if not os.path.exists(record):
        return ("No record yet: `/usr/bin/python3 -m experiments.dispatch --baseline REV` makes "
                f"`{os.path.relpath(record, ROOT)}`, then `--readme` writes this block.")
    meta, recs = entry.load(record)
    rows = summarise(recs)
    rel = os.path.relpath(os.path.join(os.path.dirname(record), "dispatch.md"), os.path.dirname(doc))
    L = [provenance_line(meta) + f" Every cell, the account and the commands: [dispatch.md]({rel}).", ""]
    L += [f"- {x}" for x in goal_lines(rows)]
    for cell, rs in cells(rows).items():
        L += ["", f"{cell}: {CELLS[cell]['what']}; {CELLS[cell]['conns']} connection(s).", ""]
        L += table(rs, meta, compact=True)
    return "\n".join(L)


def write_report(path):
    meta, recs = entry.load(path)
    md = markdown(meta, recs)
    with open(os.path.splitext(path)[0] + ".md", "w") as f:
        f.write(md)
    return md


FULL, QUICK_KNOBS = (5, 5.0, 2.0), (1, 1.5, 0.5)   # rounds, window s, warm-up s


def main():
    ap = entry.parser(__doc__, None, FULL, QUICK_KNOBS, "a few rows of each kind once, short windows (plumbing), "
                      "into a scratch folder", "dispatch")
    ap.add_argument("--readme", nargs="?", const=RECORD, metavar="JSONL",
                    help="only rewrite docs/results.md's block from a record")
    ap.add_argument("--baseline", help="a git revision: cserve built from it, beside every cserve row")
    ap.add_argument("--cells", help=f"comma-separated of {', '.join(CELLS)} (default all)")
    a = ap.parse_args()
    a.out = a.out or (QUICK_OUT if a.quick else OUT)
    path = os.path.join(a.out, "dispatch.jsonl")
    if a.readme:
        for p in generated.write("dispatch", a.readme):
            print(f"dispatch: wrote the block in {os.path.relpath(p, ROOT)}")
        return 0
    if a.report:
        print(write_report(path))
        return 0
    chosen = a.cells.split(",") if a.cells else None
    if chosen and set(chosen) - set(CELLS):
        raise SystemExit(f"dispatch: unknown cells {sorted(set(chosen) - set(CELLS))}")
    entry.resolve(a)
    production.build_noinst()
    baseline = production.build_baseline(a.baseline) if a.baseline else None
    todo = entry.runnable("dispatch", plan(a.quick, baseline, chosen), label)
    meta, recs = entry.measure(a, "dispatch", todo, runner=measure_run(a), per_run_extra=3.0,
                               meta_extra={"baseline": a.baseline, "cells": CELLS, "auto_warm_apart": True})
    entry.write_records(path, meta, recs)
    print(write_report(path))
    return entry.status(recs)


if __name__ == "__main__":
    sys.exit(main())

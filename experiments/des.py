"""A small discrete-event simulation of the pipeline, to plan past two cores.

    python3 -m experiments.des --dir DIR [--quick]     (reads DIR/*.jsonl, appends DIR/des.jsonl)

What it simulates: a client thread (wrk -t1: C connections, one request in
flight each, or 16 pipelined), a loop thread (half its per-request cost to
read and hand off, half to write the response), a pool thread (the app), on
N cores. A thread with nothing to do spins for its spin budget (holding the
core; the ring's pool spins, dgram's blocks at once), then sleeps; waking a
sleeping thread takes L_wake µs of scheduler latency before it can run.
Runnable threads queue FIFO for a core. Batching in epoll, caches and the GIL
hand-over are not modelled.

Calibration (this machine's measurements, never the run being predicted):
  c_loop, c_pool(app), c_client   the pipeline model's fit on the calib sweep (lib/model.py)
  L_wake[handoff]                 fitted so the simulated one-connection rate matches the
                                  calib sweep's c1 run for that handoff (c1 is all wake-ups)
Validation: every other cserve run with a modelled app, simulated on this
machine's vCPU count minus its measured foreign CPU; the error distribution
is recorded. Predictions (labelled so): dedicated cores (each thread its own
core), and 4, 8, 16 cores with one worker per two cores and the client on
other machines. Results: DIR/des.jsonl, DIR/des.md.
"""
import argparse
import heapq
import json
import os
import sys

from experiments.lib import configs, model, stats
from experiments import report

SPIN = {"ring": 10.0}  # a fixed pool spin budget (µs) standing in for the ring's adaptive default


class Thread:
    __slots__ = ("name", "inbox", "state", "cost_of", "on_done", "spin", "spin_ev")

    def __init__(self, name, cost_of, on_done, spin=0.0):
        self.name, self.cost_of, self.on_done, self.spin = name, cost_of, on_done, spin
        self.inbox = []
        self.state = "asleep"  # asleep | waking | ready | running | spinning
        self.spin_ev = None


class Sim:
    def __init__(self, ncores, l_wake):
        self.t, self.ev, self.seq = 0.0, [], 0
        self.free, self.readyq, self.l_wake = ncores, [], l_wake
        self.busy = {}
        self.done = 0

    def at(self, dt, fn, *args):
        self.seq += 1
        heapq.heappush(self.ev, (self.t + dt, self.seq, fn, args))
        return self.seq

    def deliver(self, th, item):
        th.inbox.append(item)
        if th.state == "asleep":
            th.state = "waking"
            self.at(self.l_wake, self.make_ready, th)
        elif th.state == "spinning":
            th.spin_ev = None  # the pending spin timeout is ignored
            self.run_next(th)

    def make_ready(self, th):
        th.state = "ready"
        if self.free:
            self.free -= 1
            self.run_next(th)
        else:
            self.readyq.append(th)

    def run_next(self, th):
        th.state = "running"
        item = th.inbox.pop(0)
        c = th.cost_of(item)
        self.busy[th.name] = self.busy.get(th.name, 0.0) + c
        self.at(c, self.finish, th, item)

    def finish(self, th, item):
        th.on_done(item)
        if th.inbox:
            return self.run_next(th)
        if th.spin > 0:
            th.state = "spinning"
            tok = self.at(th.spin, self.spin_end, th)
            th.spin_ev = tok
            self.busy[th.name] = self.busy.get(th.name, 0.0) + th.spin  # upper bound; refined below
            return
        self.release(th)

    def spin_end(self, th):
        if th.state == "spinning":
            self.release(th)

    def release(self, th):
        th.state = "asleep"
        if self.readyq:
            self.run_next(self.readyq.pop(0))
        else:
            self.free += 1

    def run(self, until):
        while self.ev:
            t, seq, fn, args = heapq.heappop(self.ev)
            if t > until:
                break
            if fn == self.spin_end and args[0].spin_ev != seq:
                continue  # a cancelled spin timeout
            self.t = t
            fn(*args)


def simulate(c_loop, c_pool, c_client, conns, depth, ncores, l_wake, spin, workers=1, seconds=0.05):
    """Requests/s of `workers` independent pipelines sharing ncores (client per worker, or
    none when c_client is None: the client is on other machines)."""
    sim = Sim(ncores, l_wake)  # simulated time is in µs
    horizon = seconds * 1e6
    warm = horizon * 0.2
    counted = [0]
    for _ in range(workers):
        _worker(sim, c_loop, c_pool, c_client, conns, depth, spin, warm, counted)
    sim.run(horizon)
    return counted[0] / ((horizon - warm) / 1e6)


def _worker(sim, c_loop, c_pool, c_client, conns, depth, spin, warm, counted):
    """One client -> loop -> pool -> loop -> client pipeline (its own closures)."""
    resp = {}
    th = {}

    def client_done(conn):
        for _ in range(depth):
            sim.deliver(th["loop"], ("req", conn))

    def loop_done(item):
        kind, conn = item
        if kind == "req":
            sim.deliver(th["pool"], conn)
            return
        if sim.t > warm:
            counted[0] += 1
        if "client" not in th:
            sim.deliver(th["loop"], ("req", conn))  # a client elsewhere answers at once
            return
        resp[conn] = resp.get(conn, 0) + 1
        if resp[conn] == depth:  # the whole pipelined batch is back
            resp[conn] = 0
            sim.deliver(th["client"], conn)

    th["loop"] = Thread("loop", lambda it: c_loop / 2, loop_done)
    th["pool"] = Thread("pool", lambda it: c_pool, lambda conn: sim.deliver(th["loop"], ("done", conn)), spin)
    if c_client is not None:
        th["client"] = Thread("client", lambda it: c_client * depth, client_done)
        for i in range(conns):
            sim.deliver(th["client"], i)
    else:
        for i in range(conns):
            sim.deliver(th["loop"], ("req", i))


def fit_wake(p, h, k, measured_c1, ncores):
    c_loop, c_pool, c_client = model._c_loop(p, h, k), model.pool_cost(p, h, "hello"), p["c_client"].get(k)
    if None in (c_loop, c_pool, c_client, measured_c1):
        return None
    lo, hi = 0.0, 500.0
    for _ in range(18):  # bisection: the c1 rate falls as L_wake grows
        mid = (lo + hi) / 2
        r = simulate(c_loop, c_pool, c_client, 1, 1, ncores, mid, SPIN.get(h, 0.0), seconds=0.05)
        lo, hi = (mid, hi) if r > measured_c1 else (lo, mid)
    return (lo + hi) / 2


def stage_bounds(c_loop, c_pool, c_client, workers):
    """Each stage's own bound (requests/s) for `workers` pipelines, the
    client's only where it shares nothing with them (c_client None: the
    client is elsewhere and unbounded), and the analytic model's rate: the
    smallest."""
    b = {"loop": workers * 1e6 / c_loop, "pool": workers * 1e6 / c_pool if c_pool else None,
         "client": 1e6 / c_client if c_client else None}
    b = {k: v for k, v in b.items() if v is not None}
    name = min(b, key=b.get)
    return {"bounds": b, "model_rps": b[name], "binding": name}


TIE = 0.02  # the DES and the model within this of each other's error: the same prediction


def compare_with_model(out):
    """The DES against the analytic model on the same runs: the absolute
    error of each, in how many runs each was the closer by more than TIE, and
    the runs where the DES was (what it adds)."""
    both = [r for r in out if r["kind"] == "row" and r.get("model_err") is not None]
    if not both:
        return None
    qd = stats.quantiles([abs(r["err"]) for r in both])
    qm = stats.quantiles([abs(r["model_err"]) for r in both])
    return {"kind": "compare", "n": len(both), "des_abs_err_median": qd[0.5], "des_abs_err_p95": qd[0.95],
            "model_abs_err_median": qm[0.5], "model_abs_err_p95": qm[0.95],
            "des_closer": sum(abs(r["err"]) < abs(r["model_err"]) - TIE for r in both),
            "model_closer": sum(abs(r["model_err"]) < abs(r["err"]) - TIE for r in both),
            "des_closer_labels": sorted(r["label"] for r in both if abs(r["err"]) < abs(r["model_err"]) - TIE)}


def des_md(out, wake):
    """des.md: the DES beside the analytic model on the same runs, and the
    predictions with the stage that binds each."""
    lines = ["<!-- generated by experiments/des.py; do not edit -->", ""]
    c = [r for r in out if r["kind"] == "compare"]
    if c:
        c = c[0]
        lines += [f"| on the same runs | runs | abs. error, median | abs. error, p95 | closer by > {100 * TIE:.0f} points in |",
                  "|---|---:|---:|---:|---:|",
                  f"| analytic model (lib/model.py) | {c['n']} | {100 * c['model_abs_err_median']:.0f} % | "
                  f"{100 * c['model_abs_err_p95']:.0f} % | {c['model_closer']} |",
                  f"| simulation (des.py) | {c['n']} | {100 * c['des_abs_err_median']:.0f} % | "
                  f"{100 * c['des_abs_err_p95']:.0f} % | {c['des_closer']} |", "",
                  "The simulation is the closer in: " + (", ".join(f"`{x}`" for x in c["des_closer_labels"]) or "none")
                  + ".", "",
                  "Per run: `des_rows.md` in the results folder. Wake latency fitted per handoff (µs): "
                  + (", ".join(f"{k} {x:.1f}" for k, x in sorted(wake.items())) or "none") + ".", ""]
    # The paper's table: dedicated cores and the most cores; every scenario is in des_rows.md.
    most = max((r.get("cores", 0) for r in out if r["kind"] == "prediction"), default=0)
    preds = [r for r in out if r["kind"] == "prediction" and r.get("cores") in (3, most)]
    if preds:
        lines += ["| PREDICTION (simulated, not measured) | cores | loop bound | pool bound | client bound | "
                  "model (binds) | simulated |", "|---|---:|---:|---:|---:|---|---:|"]
        for r in preds:
            b = r.get("bounds", {})
            cell = (lambda k: f"{b[k]:,.0f}" if k in b else "elsewhere")
            lines.append(f"| {r['scenario']} | {r.get('cores', '')} | {cell('loop')} | {cell('pool')} | "
                         f"{cell('client')} | {r.get('model_rps', 0):,.0f} ({r.get('binding', '?')}) | "
                         f"{r['rps']:,.0f} |")
        lines += ["", "Dedicated: the client, the loop and the pool each on a core of its own; the client "
                  "(wrk, closed loop) is still in the pipeline, and where its bound is the smallest the "
                  "prediction is the client's, not the server's. Four cores and more: one worker per two "
                  "cores, the client on other machines. The workers share nothing in the simulation (no "
                  "listening socket, memory bandwidth, interrupts or client), so these rates scale with "
                  "the workers by construction; they are the per-worker rate times the workers, not a "
                  "prediction of what the cores share. Every scenario: `des_rows.md`."]
    return lines


def des_rows_md(out):
    """Per run configuration: measured, the model's rate and the DES's, and both errors."""
    lines = ["<!-- generated by experiments/des.py; do not edit -->", "",
             "| run | measured rps | model rps | simulated rps | model error | simulation error |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in out:
        if r["kind"] != "row":
            continue
        m = "—" if r.get("model_rps") is None else f"{r['model_rps']:,.0f}"
        me = "—" if r.get("model_err") is None else f"{100 * r['model_err']:+.0f} %"
        lines.append(f"| {r['label']} | {r['measured_rps']:,.0f} | {m} | {r['sim_rps']:,.0f} | {me} | "
                     f"{100 * r['err']:+.0f} % |")
    preds = [r for r in out if r["kind"] == "prediction"]
    if preds:
        lines += ["", "| PREDICTION (simulated, not measured) | cores | workers | model rps (binds) | simulated rps |",
                  "|---|---:|---:|---|---:|"]
        lines += [f"| {r['scenario']} | {r.get('cores', '')} | {r.get('workers', '')} | "
                  f"{r.get('model_rps', 0):,.0f} ({r.get('binding', '?')}) | {r['rps']:,.0f} |" for r in preds]
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    sweeps = report.load(a.dir)
    meta = report.load_jsonl(a.dir, "meta")
    nproc = (meta[-1]["machine"]["nproc"] if meta else os.cpu_count()) or 2
    clean = not (a.quick or (meta and meta[-1].get("quick")))  # disturbed runs left out, as report.py does
    p = model.fit(sweeps.get("calib", []), clean)
    summ = report.summarise(sweeps, p, nproc, report.load_plan(a.dir, sweeps), clean)
    # L_wake per handoff from the calib one-connection runs (full plan);
    # without one, the plain-client calib run at its own connection count.
    wake = {}
    for s in summ.values():
        c = s["config"]
        if "calib" in s["sweeps"] and c["server"] == "cserve" and not c.get("mode") and c["app"] == "hello" \
                and c["client"] == "wrk" and s["n"]:
            if c["conns"] == 1 or c["handoff"] not in wake:
                k = "wrk"
                lw = fit_wake(p, c["handoff"], k, s["rps"][0], nproc) if c["conns"] == 1 else None
                if lw is not None:
                    wake[c["handoff"]] = lw
    l_default = stats.median(list(wake.values())) if wake else 5.0
    out = []
    errs = []
    for s in summ.values():
        c = s["config"]
        us = configs.app_us(c["app"])
        # One pool thread only: the simulation has no GIL hand-over between pool threads.
        if "calib" in s["sweeps"] or c["server"] != "cserve" or c.get("mode") or us is None or not s["n"] \
                or c.get("bt", 1) != 1 or c.get("args"):
            continue
        k = model._client_kind(c)
        h = c["handoff"]
        c_loop = model._c_loop(p, h, k)
        cp = model.pool_cost(p, h, c["app"])
        c_client = p["c_client"].get(k)
        if None in (c_loop, cp, c_client):
            continue
        n = max(1, round(nproc - (s["foreign"][0] or 0) - (s["steal"][0] or 0)))
        r = simulate(c_loop, cp, c_client, c["conns"], 16 if k == "wrk-p16" else 1, n,
                     wake.get(h, l_default), SPIN.get(h, 0.0), seconds=0.02 if a.quick else 0.05)
        e = r / s["rps"][0] - 1
        errs.append(e)
        out.append({"kind": "row", "label": s["label"], "sim_rps": r, "measured_rps": s["rps"][0], "err": e,
                    "cores": n, "model_rps": s["pred"], "model_bound": s["pred_bound"], "regime": s["regime"],
                    "model_err": None if s["pred"] is None else s["pred"] / s["rps"][0] - 1})
    comparison = compare_with_model(out)
    if comparison:
        out.append(comparison)
    if errs:
        q = stats.quantiles([abs(e) for e in errs])
        out.append({"kind": "validation", "n": len(errs), "abs_err_median": q[0.5], "abs_err_p95": q[0.95],
                    "l_wake_us": wake, "l_wake_default_us": l_default})
    # Predictions: hello and a 20 µs app, ring and dgram, beyond two shared cores.
    for h in ("ring", "dgram"):
        c_loop = model._c_loop(p, h, "wrk")
        if h not in p["slope"]:
            continue  # not calibrated: no prediction of its own
        for app_us in (0, 20):
            cp = model.pool_cost(p, h, configs.app_cost(app_us))
            if None in (c_loop, cp):
                continue
            lw = wake.get(h, l_default)
            cc = p["c_client"].get("wrk")
            out.append(dict(stage_bounds(c_loop, cp, cc, 1), kind="prediction", scenario=f"{h} app{app_us} dedicated",
                            rps=simulate(c_loop, cp, cc, 64, 1, 3, lw, SPIN.get(h, 0.0)), cores=3, workers=1,
                            note="PREDICTION: each of client, loop, pool on its own core"))
            for cores in (4, 8, 16):
                out.append(dict(stage_bounds(c_loop, cp, None, cores // 2), kind="prediction",
                                scenario=f"{h} app{app_us} {cores} cores", cores=cores, workers=cores // 2,
                                rps=simulate(c_loop, cp, None, 64, 1, cores, lw, SPIN.get(h, 0.0),
                                             workers=cores // 2, seconds=0.02),
                                note=f"PREDICTION: {cores // 2} workers, client on other machines"))
    with open(os.path.join(a.dir, "des.jsonl"), "w") as f:
        for r in out:
            f.write(json.dumps(r) + "\n")
    lines = des_md(out, wake)
    with open(os.path.join(a.dir, "des.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(a.dir, "des_rows.md"), "w") as f:
        f.write("\n".join(des_rows_md(out)) + "\n")
    print(f"des: {len(errs)} validated, {sum(r['kind'] == 'prediction' for r in out)} predictions", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

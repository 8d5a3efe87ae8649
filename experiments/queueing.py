"""Queueing predictions for early and late binding, made before the run
that measures them (experiments/binding.py).

A closed system, as wrk drives a server: N connections, each sends its
next request the moment its last is answered; k pool threads. Two ways to
give a request to a thread:

  early  bound on arrival to the thread with the fewest outstanding
         requests (join the shortest queue; ties to the lowest index, as
         the dispatcher before late binding did), and run there in order:
         k queues of one server each, fed by JSQ
  late   one queue in arrival order; a thread that frees takes its head:
         one queue of k servers

A request's cost is drawn from apps/mix.py's two-point distribution (slow
with probability pct, else fast). In "sleep" mode the app waits with the
GIL released: the threads run in parallel. In "cpu" mode it runs Python
with the GIL held: one thread runs at a time, and a thread that has waited
the switch interval (CPython's 5 ms) with no switch in between makes the
holder drop it; it passes to the thread that has waited longest. With
early binding a thread whose queue holds its next request runs it without
letting the GIL go (the pool takes a queued job without waiting); with
late binding it waits for the loop to hand it one, and lets the GIL go.

What is left out, on purpose: the server's own CPU per request (the loop,
the handoff, the WSGI call), the client's, and the two shared vCPUs. So
the predicted rate is the app's ceiling, and the latencies are those of
the queue alone; the run measures how much the server adds. The figures
are medians over SEEDS independent simulations of REQUESTS requests
each, the first WARM of each left out.

    /usr/bin/python3 -m experiments.queueing [--out DIR]   # DIR/prediction.json and .md
    /usr/bin/python3 -m experiments.queueing --wrk-view    # after the run: as wrk reports latency

wrk corrects the latencies it reports for coordinated omission
(wrk_view); --wrk-view puts the same simulations through that correction,
after the run, beside the committed prediction."""
import argparse
import heapq
import os
import random
import statistics
import sys
from collections import deque

from experiments.lib import provenance
from experiments.lib.serverctl import ROOT

OUT = os.path.join(ROOT, "experiments", "results", "binding")
SWITCH_US = 5000.0      # CPython's default switch interval
REQUESTS, WARM, SEEDS = 60000, 5000, 3


def _quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


def simulate(conns, threads, mode, fast, slow, pct, binding, requests=REQUESTS, warm=WARM, seed=1,
             switch_us=SWITCH_US):
    """One simulation: {"rate": requests a second, "p50_ms", "p99_ms",
    "mean_ms"} of the requests after the first `warm`."""
    if conns < 1 or threads < 1 or requests <= warm:
        raise ValueError("queueing: need a connection, a thread, and more requests than the warm-up")
    rng = random.Random(seed)

    def cost():
        return slow if rng.random() * 100.0 < pct else fast
    # A request: [sent, remaining µs]. queues: one per thread (early) or one (late).
    queues = [deque() for _ in range(threads if binding == "early" else 1)]
    current = [None] * threads                   # the request each thread is running
    lat, now, done = [], 0.0, 0
    t_first = None

    def qlen(i):  # outstanding on thread i (early): its queue and what it runs
        return len(queues[i]) + (current[i] is not None)

    def arrive(t):
        req = [t, cost()]
        if binding == "early":
            i = min(range(threads), key=lambda j: (qlen(j), j))
            queues[i].append(req)
        else:
            queues[0].append(req)

    def take(i):  # thread i takes its next request, if it has none
        if current[i] is None:
            q = queues[i] if binding == "early" else queues[0]
            if q:
                current[i] = q.popleft()

    def finish(i, t):
        nonlocal done, t_first
        req, current[i] = current[i], None
        done += 1
        if done > warm:
            if t_first is None:
                t_first = t
            lat.append(t - req[0])
        arrive(t)

    for _ in range(conns):
        arrive(0.0)
    if mode == "sleep":
        heap = []
        for i in range(threads):
            take(i)
            if current[i] is not None:
                heapq.heappush(heap, (current[i][1], i))
        while done < requests:
            now, i = heapq.heappop(heap)
            finish(i, now)
            for j in range(threads):  # the new arrival may wake an idle thread, and i takes its next
                if current[j] is None:
                    take(j)
                    if current[j] is not None:
                        heapq.heappush(heap, (now + current[j][1], j))
    else:
        gil, since = deque(), {}                     # threads waiting for the GIL, longest first
        holder, last_switch = None, 0.0
        while done < requests:
            for j in range(threads):                 # an idle thread that can take a request asks for the GIL
                if current[j] is None and j != holder:
                    take(j)
                    if current[j] is not None and j not in since:
                        gil.append(j)
                        since[j] = now
            if holder is None:
                holder = gil.popleft()
                del since[holder]
                last_switch = now
            # A waiter asks the holder to drop the GIL once it has waited the
            # switch interval with no switch in between.
            drop_at = max(last_switch, since[gil[0]]) + switch_us if gil else float("inf")
            run = min(current[holder][1], max(0.0, drop_at - now))
            now += run
            current[holder][1] -= run
            if current[holder][1] <= 1e-9:
                finish(holder, now)
                # Early binding: the holder's own queue has its next request,
                # which it runs without letting the GIL go (the pool takes a
                # queued job without waiting), unless asked to drop it. Late:
                # it waits for the loop to hand it one, and the GIL goes.
                if binding == "early":
                    take(holder)
                    if current[holder] is not None and now < drop_at:
                        continue
                if current[holder] is not None:
                    gil.append(holder)
                    since[holder] = now
                holder = None
            else:                                    # asked to drop it: to the back of the line
                gil.append(holder)
                since[holder] = now
                holder = None
    span = now - t_first if t_first is not None else 0.0
    seen = wrk_view(lat, span, conns)
    return {"rate": len(lat) / span * 1e6 if span else None, "p50_ms": _quantile(lat, 0.50) / 1000,
            "p99_ms": _quantile(lat, 0.99) / 1000, "mean_ms": statistics.fmean(lat) / 1000,
            "p50_ms_wrk": _quantile(seen, 0.50) / 1000, "p99_ms_wrk": _quantile(seen, 0.99) / 1000}


def wrk_view(lat, span, conns):
    """The latencies as wrk 4 reports them: it corrects its histogram for
    coordinated omission (stats_correct), taking the interval as the run's
    time over the requests per connection, and for every latency L at
    least twice that interval adds samples at L - interval, L - 2 interval
    and so on while above one interval. The measured percentiles went
    through this; the queue's own do not."""
    if not lat or not span:
        return list(lat)
    interval = span / (len(lat) / conns)
    out = list(lat)
    for x in lat:
        if x >= 2 * interval:
            m = x - interval
            while m > interval:
                out.append(m)
                m -= interval
    return out


def predict(conns, threads, mode, fast, slow, pct, binding, seeds=SEEDS, **kw):
    """The medians over `seeds` simulations, each figure apart."""
    runs = [simulate(conns, threads, mode, fast, slow, pct, binding, seed=s + 1, **kw) for s in range(seeds)]
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def make(cells):
    """The prediction: per cell (binding.CELLS), early and late."""
    from experiments import dispatch
    out = {"kind": "prediction", "made_on": provenance.git_commit()[0], "switch_us": SWITCH_US,
           "requests": REQUESTS, "warm": WARM, "seeds": SEEDS, "cells": {}}
    for name, c in cells.items():
        q = dict(p.split("=") for p in dispatch.app_spec(c["app"])[2].lstrip("/?").split("&"))
        args = (c["conns"], c["threads"], q["mode"], float(q["fast"]), float(q["slow"]), float(q["pct"]))
        out["cells"][name] = {"app": c["app"], "conns": c["conns"], "threads": c["threads"], "mode": q["mode"],
                              "early": predict(*args, "early"), "late": predict(*args, "late")}
    return out


def markdown(p):
    L = ["# Early against late binding, predicted", "",
         "<!-- generated by experiments/queueing.py; do not edit -->", "",
         f"Made at commit {str(p['made_on'])[:7]}, before the run, by simulating the closed system "
         "(experiments/queueing.py): the queue alone, without the server's own cost; medians over "
         f"{p['seeds']} simulations of {p['requests']:,} requests each.", "",
         "| cell | app | threads | binding | rate /s | p50 ms | p99 ms | mean ms |",
         "|---|---|---:|---|---:|---:|---:|---:|"]
    for name, c in p["cells"].items():
        for b in ("early", "late"):
            x = c[b]
            L.append(f"| {name} | `{c['app']}` | {c['threads']} | {b} | {x['rate']:,.0f} | {x['p50_ms']:.2f} | "
                     f"{x['p99_ms']:.2f} | {x['mean_ms']:.2f} |")
    return "\n".join(L) + "\n"


def write(out, cells):
    from experiments import prediction
    p = make(cells)
    return prediction.save(out, p, markdown(p))


def wrk_markdown(p):
    L = ["# Early against late binding, the prediction as wrk reports latency", "",
         "<!-- generated by experiments/queueing.py --wrk-view; do not edit -->", "",
         "Made after the run: the committed prediction's simulations again (the same seeds), their "
         "latencies put through wrk's correction for coordinated omission (`wrk_view`), which the measured "
         "percentiles went through and the committed prediction's did not.", "",
         "| cell | binding | p50 ms | p99 ms | late ÷ early p99 |", "|---|---|---:|---:|---:|"]
    for name, c in p["cells"].items():
        r = c["late"]["p99_ms_wrk"] / c["early"]["p99_ms_wrk"]
        for b in ("early", "late"):
            x = c[b]
            L.append(f"| {name} | {b} | {x['p50_ms_wrk']:.2f} | {x['p99_ms_wrk']:.2f} | "
                     + (f"{r:.2f}× |" if b == "late" else "|"))
    return "\n".join(L) + "\n"


def main():
    from experiments import binding
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=OUT, help=f"results folder (default {os.path.relpath(OUT, ROOT)})")
    ap.add_argument("--wrk-view", action="store_true",
                    help="after the run: the same simulations as wrk reports latency, into "
                    "prediction-wrk.json/.md (the committed prediction stays as it is)")
    a = ap.parse_args()
    if a.wrk_view:
        from experiments import prediction
        p = make(binding.CELLS)
        print(wrk_markdown(prediction.save(a.out, p, wrk_markdown(p), "prediction-wrk")))
        return 0
    print(markdown(write(a.out, binding.CELLS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

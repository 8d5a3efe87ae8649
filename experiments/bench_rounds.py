"""The pipelined cells of a recorded `make bench`, round by round.

    python3 -m experiments.bench_rounds [BENCH_JSON]     (default experiments/results/bench/bench.json)

For the ring and condvar in each pipelined hello cell, per round: the rate,
each thread's share of a core (its CPU per request from /proc times the
rate: the loop, the pool thread, wrk) and the pool side's handoff syscalls
per request. Those are its own waits (sched_yield, futex parks) and its
eventfd writes to a loop parked in epoll_wait; records from a bench.py that
keeps them apart also give the writes alone. The medians in bench.md hide
how far the rounds of one cell spread, and what each thread was doing in
the slow ones. Pure Python over the record."""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVERS = ("ring", "condvar")


def share(rec, prefix):
    for t in rec.get("threads") or []:
        if t["name"].startswith(prefix):
            return t["us_per_request"] * rec["rps"] / 1e4 if t.get("us_per_request") and rec.get("rps") else None
    return None


def fmt(v, spec):
    return "—" if v is None else format(v, spec)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "experiments", "results", "bench", "bench.json")
    d = json.load(open(path))
    recs = [r for r in d["records"] if r["app"] == "hello" and r["pipeline"] > 1 and r["server"] in SERVERS]
    print(f"From {os.path.relpath(os.path.abspath(path), ROOT)} (`{d['meta']['command']}`, {d['meta']['time']}).\n")
    print("| cell | round | server | rps | loop % | pool % | wrk % | pool handoff syscalls/req | of which eventfd writes |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    cells = sorted({(r["conns"], r["pipeline"]) for r in recs})
    for conns, pipe in cells:
        for rnd in sorted({r["round"] for r in recs}):
            for srv in SERVERS:
                for r in recs:
                    if (r["conns"], r["pipeline"], r["round"], r["server"]) != (conns, pipe, rnd, srv):
                        continue
                    h = r.get("handoff") or {}
                    print(f"| c{conns} p{pipe} | {rnd + 1} | {srv} | {r['rps'] or 0:,.0f} | "
                          f"{fmt(share(r, 'cserve-loop'), '.0f')} | {fmt(share(r, 'cserve-pool'), '.0f')} | "
                          f"{fmt(share(r, 'wrk'), '.0f')} | {fmt(h.get('pool_syscalls_per_req'), '.4f')} | "
                          f"{fmt(h.get('pool_wake_syscalls_per_req'), '.4f')} |")


if __name__ == "__main__":
    main()

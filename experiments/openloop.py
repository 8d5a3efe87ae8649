"""Open-loop load: latency (p50/p99/p99.9, corrected for coordinated
omission) against offered rate, for cserve ring, cserve dgram and Granian.

    python3 -m experiments.openloop --out DIR [--quick] [--repeats N]

A closed-loop client (wrk) sends the next request only when a response
arrives, so a slow server slows the client and the latency it reports is
mostly its own queue depth. oha with `-q RATE --latency-correction` sends on
a schedule and measures each request from when it SHOULD have been sent, so
the knee — where the offered rate passes what the server's bound allows —
shows as latency that explodes instead of a rate that quietly drops.

Per server and repeat: one server process; a short wrk run finds its
closed-loop capacity C; then oha offers fractions of C in a shuffled order.
One JSON line per point in DIR/openloop.jsonl. Skips (with a message, exit 0)
when oha is not installed: scripts/setup-experiments.sh installs it.
"""
import argparse
import datetime
import json
import os
import random
import subprocess
import sys
import tempfile
import time

from experiments.lib import provenance
from experiments.lib.serverctl import free_port, server_cmd, start, stop, threadcpu, wait_ready

SERVERS = {
    "cserve ring": {"server": "cserve", "handoff": "ring", "bt": 1, "app": "hello", "conns": 64},
    "cserve dgram": {"server": "cserve", "handoff": "dgram", "bt": 1, "app": "hello", "conns": 64},
    "granian": {"server": "granian", "app": "hello", "conns": 64},
}
FRACTIONS = [0.2, 0.4, 0.6, 0.75, 0.9, 1.0, 1.15]


def oha_json(oha, url, rate, seconds, conns, server_pid, children):
    """Run oha; sample the server's and oha's threads meanwhile (on two vCPUs
    the open-loop client can be the bound too: the record says)."""
    cmd = [oha, "--no-tui", "-z", f"{seconds}s", "-q", str(rate), "-c", str(conns),
           "--latency-correction", "--output-format", "json", url]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(min(0.2, seconds / 5))
    series = threadcpu.sample([server_pid, p.pid], seconds / 4, seconds * 0.7, children=children)
    out, err = p.communicate(timeout=seconds + 60)
    if p.returncode != 0:
        raise RuntimeError(f"oha exit {p.returncode}: {err[-400:]}")
    cpu = {"client": 0.0, "server": 0.0}
    for (pid, _), e in series.items():
        share = (sum(e["pct"]) / len(e["pct"]) / 100) if e["pct"] else 0.0
        cpu["client" if pid == p.pid else "server"] += share
    return cmd, json.loads(out), {k: round(v, 3) for k, v in cpu.items()}


def parse(j, seconds):
    s = j.get("summary", {})
    lp = j.get("latencyPercentiles", {})
    us = (lambda v: None if v is None else v * 1e6)  # oha reports seconds
    total = sum((j.get("statusCodeDistribution") or {}).values())
    return {"achieved": total / seconds if total else s.get("requestsPerSec"),
            "success_rate": s.get("successRate"), "p50_us": us(lp.get("p50")), "p99_us": us(lp.get("p99")),
            "p999_us": us(lp.get("p99.9")), "max_us": us(s.get("slowest")), "responses": total,
            "errors": j.get("errorDistribution") or {}}


def capacity(port, path, seconds):
    out = subprocess.run(["wrk", "-t1", "-c64", f"-d{seconds}s", f"http://127.0.0.1:{port}{path}"],
                         capture_output=True, text=True).stdout
    return threadcpu.parse_wrk(out)[2]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int)
    ap.add_argument("--seconds", type=float)
    ap.add_argument("--seed", default="cserve")
    a = ap.parse_args()
    oha = provenance.oha_path()
    if not oha:
        print("openloop: no oha (scripts/setup-experiments.sh installs it); skipped", file=sys.stderr)
        return 0
    reps = a.repeats or (1 if a.quick else 3)
    secs = a.seconds or (1 if a.quick else 3)
    fracs = [0.3, 1.0] if a.quick else FRACTIONS
    servers = list(SERVERS) if not a.quick else ["cserve ring"]
    if subprocess.run(["/usr/bin/python3", "-c", "import granian"], capture_output=True).returncode:
        servers = [s for s in servers if s != "granian"]
    os.makedirs(a.out, exist_ok=True)
    sha, dirty = provenance.git_commit()
    n = 0
    for rep in range(reps):
        order = list(servers)
        random.Random(f"{a.seed}-ol-{rep}").shuffle(order)
        for name in order:
            cfg = SERVERS[name]
            port = free_port()
            tmp = tempfile.mkdtemp(prefix="cserve-ol-")
            proc, log = start(server_cmd(cfg, port), os.path.join(tmp, "log"))
            try:
                if not wait_ready(proc, port):
                    raise RuntimeError("server did not start")
                time.sleep(0.3)
                cap = capacity(port, "/", 1 if a.quick else 2)
                rates = [max(100, int(f * cap)) for f in fracs]
                random.Random(f"{a.seed}-{name}-{rep}").shuffle(rates)
                for rate in rates:
                    ps0, t0 = provenance.proc_stat(), time.monotonic()
                    cmd, j, cores = oha_json(oha, f"http://127.0.0.1:{port}/", rate, secs, 64, proc.pid,
                                             cfg["server"] != "cserve")
                    ps1, t1 = provenance.proc_stat(), time.monotonic()
                    rec = {"server": name, "config": cfg, "repeat": rep, "offered": rate,
                           "capacity_closed_loop": cap, "oha_cmd": " ".join(cmd), "commit": sha, "dirty": dirty,
                           "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                           # busy cores in the whole window; foreign = busy minus the
                           # server's and oha's own (threadcpu's means over the run).
                           "window_cpu": provenance.window_cpu(ps0, ps1, t1 - t0,
                                                               (cores["client"] + cores["server"]) * (t1 - t0)),
                           "client_cores": cores["client"], "server_cores": cores["server"]}
                    rec.update(parse(j, secs))
                    with open(os.path.join(a.out, "openloop.jsonl"), "a") as f:
                        f.write(json.dumps(rec) + "\n")
                    n += 1
                    print(f"openloop r{rep} {name} offered {rate:,}: achieved {rec['achieved'] or 0:,.0f} "
                          f"p99 {rec['p99_us'] or 0:,.0f} µs", file=sys.stderr, flush=True)
            except Exception as e:  # record, keep going
                with open(os.path.join(a.out, "openloop.jsonl"), "a") as f:
                    f.write(json.dumps({"server": name, "repeat": rep, "error": f"{type(e).__name__}: {e}"}) + "\n")
                print(f"openloop {name}: ERROR {e}", file=sys.stderr)
            finally:
                stop(proc)
                log.close()
    print(f"openloop: {n} points", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

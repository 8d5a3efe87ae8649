"""The handoff timeline: who runs and who sleeps, ring vs dgram, from a
scheduler trace (`perf sched record`: every context switch and wake-up).

    python3 -m experiments.timeline --out DIR [--quick] [--conns 16]

Per handoff: cserve serves hello under wrk -c16 (closed loop); perf records
the scheduler's sched_switch/sched_waking events system-wide for a short
while; the trace is reduced to on-CPU spans per thread (cserve-loop,
cserve-pool-0, wrk) and to switches and wake-ups per request. One JSON line
per handoff in DIR/timeline.jsonl: the spans of a short excerpt (for the
figure) and the per-request counts over the whole trace.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from experiments.lib import provenance
from experiments.lib.serverctl import client_cmd, free_port, server_cmd, start, stop, thread_ids, threadcpu, wait_ready

SWITCH = re.compile(r"^\s*(\S.*?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:sched_switch:.*?prev_comm=(.*?) "
                    r"prev_pid=(\d+).*?prev_state=(\S+) ==> next_comm=(.*?) next_pid=(\d+)")
# sched_waking: this kernel's perf records it in place of sched_wakeup.
WAKE = re.compile(r"^.*?\s([\d.]+):\s+sched:sched_wak(?:ing|eup):\s+comm=(.*?) pid=(\d+)")


def reduce(text, tids, excerpt_us):
    """On-CPU spans (name, start_us, end_us) within the excerpt, and totals."""
    spans, switches, wakes, t0, last = all_spans(text, tids)
    # The excerpt: from a span of the loop thread, excerpt_us long.
    # Skip the trace's first quarter (perf's own start-up disturbs it).
    quarter = ((last or 0) - (t0 or 0)) / 4
    first = min((s[1] for s in spans if s[0] == "cserve-loop" and s[1] >= quarter), default=0)
    ex = [(n, max(0.0, a - first), min(excerpt_us, b - first)) for n, a, b in spans
          if b > first and a < first + excerpt_us]
    return ex, switches, wakes


def all_spans(text, tids):
    """Every on-CPU span of the named threads (µs from the first event),
    the switch and wake-up counts, the first and last timestamps."""
    names = {str(t): n for n, t in tids.items()}
    on = {}
    spans, switches, wakes = [], 0, 0
    t0 = last = None
    seen = set()
    for line in text.splitlines():
        m = SWITCH.match(line)
        if m:
            ts = float(m.group(4)) * 1e6
            t0 = ts if t0 is None else t0
            prev, nxt = m.group(6), m.group(9)
            if prev in names:
                switches += 1
                if prev in on:
                    spans.append((names[prev], on.pop(prev) - t0, ts - t0))
                elif prev not in seen:  # first seen switching out: ran since the trace began
                    spans.append((names[prev], 0.0, ts - t0))
                # else: its switch-in was lost (perf drops events when its buffer
                # overflows); no span rather than a wrong one.
                seen.add(prev)
            if nxt in names:
                on[nxt] = ts
                seen.add(nxt)
            last = ts
            continue
        w = WAKE.match(line)
        if w and w.group(3) in names:
            wakes += 1
    for tid, a in on.items():  # still on a CPU when the trace ended
        spans.append((names[tid], a - t0, last - t0))
    # A thread with no switch at all is left out (not drawn as running
    # throughout): the caller records it as without events.
    reduce.silent = sorted(n for tid, n in names.items() if tid not in seen)
    return spans, switches, wakes, t0, last


def one(handoff, a, perf):
    cfg = {"server": "cserve", "handoff": handoff, "bt": 1, "app": "hello", "conns": a.conns, "client": "wrk"}
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="cserve-tl-")
    proc, log = start(server_cmd(cfg, port), os.path.join(tmp, "log"))
    rec = {"handoff": handoff, "conns": a.conns, "trace_s": a.seconds}
    try:
        if not wait_ready(proc, port):
            raise RuntimeError("server did not start")
        time.sleep(0.3)
        tids = thread_ids(proc.pid, lambda n: n in ("cserve-loop", "cserve-pool-0"))
        wrk = subprocess.Popen(client_cmd(cfg, port, a.seconds + 2), stdout=subprocess.PIPE, text=True)
        tids["wrk"] = wrk.pid  # wrk -t1: its worker thread is the busy one; see below
        time.sleep(0.7)
        for tid in os.listdir(f"/proc/{wrk.pid}/task"):
            if int(tid) != wrk.pid:
                tids["wrk"] = int(tid)  # wrk's load thread (the main one only waits)
        data = os.path.join(tmp, "perf.data")
        # -m: a larger ring buffer per CPU; perf drops events when it fills.
        subprocess.run([perf, "sched", "record", "-m", "2048", "-o", data, "--", "sleep", str(a.seconds)],
                       capture_output=True, check=True)
        out = wrk.communicate()[0]
        n, secs, rps = threadcpu.parse_wrk(out)
        text = subprocess.run([perf, "sched", "script", "-i", data], capture_output=True, text=True).stdout
        spans, sw, wk = reduce(text, tids, a.excerpt_us)
        if not sw:
            raise RuntimeError("the trace holds no switch of the server's threads (perf lost its events?)")
        reqs = (rps or 0) * a.seconds
        rec.update(threads=["wrk", "cserve-loop", "cserve-pool-0"], spans=spans, tids=tids,
                   threads_without_switches=reduce.silent, span_us=a.excerpt_us,
                   rps_wrk=rps, switches_per_request=sw / reqs if reqs else None,
                   wakeups_per_request=wk / reqs if reqs else None,
                   perf_cmd=f"perf sched record -m 2048 -o perf.data -- sleep {a.seconds}")
    except Exception as e:
        rec["error"] = f"{type(e).__name__}: {e}"
    finally:
        stop(proc)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--conns", type=int, default=16)
    ap.add_argument("--seconds", type=float)
    ap.add_argument("--excerpt-us", type=float, default=400.0)
    a = ap.parse_args()
    a.seconds = a.seconds or (0.3 if a.quick else 1.0)
    perf = shutil.which("perf")
    if not perf:
        print("timeline: no perf (make deps); skipped", file=sys.stderr)
        return 0
    os.makedirs(a.out, exist_ok=True)
    sha, dirty = provenance.git_commit()
    path = os.path.join(a.out, "timeline.jsonl")
    open(path, "w").close()  # one trace per handoff per run: replace the previous
    for h in ("ring", "dgram"):
        for attempt in range(3):  # perf on a busy guest sometimes loses a whole trace's events
            rec = one(h, a, perf)
            if "error" not in rec:
                break
        rec["attempts"] = attempt + 1
        rec.update(commit=sha, dirty=dirty)
        with open(path, "a") as f:
            f.write(json.dumps(rec) + "\n")
        print(f"timeline {h}: " + (rec.get("error") or f"{rec['switches_per_request']:.2f} switches, "
              f"{rec['wakeups_per_request']:.2f} wake-ups per request, {len(rec['spans'])} spans"), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

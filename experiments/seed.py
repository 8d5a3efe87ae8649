#!/usr/bin/python3
"""The seed note's shapes on this machine, and its claims judged against them.

The seed (lib/seed_claims.py: the m0serve design note, its figures quoted
there) measured one worker and one handler thread serving a bare WSGI hello
under `wrk -t2` with browser-like headers at 16, 64 and 256 connections. The
same shapes here:

  rows      cserve ring and dgram (1 worker, 1 blocking thread), cserve
            --inline (the app on the loop), cserve --app native-hello (no
            Python), Granian --workers 1 --blocking-threads 1; wrk -t2 -cC
            with experiments/wrk/browser.lua, C in 16 / 64 / 256. Per run:
            the rate, the I/O thread's and the Python thread's share of a
            core, the server's cores, the client's, steal and foreign CPU;
            the regime by lib/model.py's rule (the client stage is its
            busiest wrk thread). Interleaved, shuffled rounds; disturbed runs
            (> 0.05 core of steal + foreign) rerun up to twice, then kept
            and marked (lib/probe.py).
  profiles  at 64 connections, an on-CPU profile of native-hello, ring,
            dgram and Granian (scripts/profile.sh: perf cpu-clock), split
            per thread into µs per request of recv, send, epoll, handoff
            syscalls, user space and the kernel's rest (lib/perfsplit.py).
            Skipped, with a message, where perf is missing.

    /usr/bin/python3 -m experiments.seed [--quick] [--rounds 3] [--out DIR]
    /usr/bin/python3 -m experiments.seed --report [--out DIR]   # seed.md from the records

Writes DIR/seed.jsonl (a provenance line, then one line per run and one per
profile), DIR/profile-NAME.md (perf_reduce's full tables) and DIR/seed.md:
the seed's tables beside these, and the verdict on each claim, computed from
the records (experiments/lib/seed_report.py). Full: 3 rounds of 15 runs and
4 profiles, ~7 min plus reruns; --quick: c64 once, two short profiles,
~1 min, plumbing only.
"""
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

from experiments.lib import entry, perfsplit, probe, seed_report
from experiments.lib.serverctl import PY, ROOT, WRK_DIR, free_port, server_cmd, start, stop, threadcpu, \
    wait_ready

OUT = os.path.join(ROOT, "experiments", "results", "seed")
KINDS = ("ring", "dgram", "inline", "native", "granian")
CONNS = (16, 64, 256)
PROFILED = ("native", "ring", "dgram", "granian")
PROFILE_SH = os.path.join(ROOT, "scripts", "profile.sh")


def cfg(kind, conns):
    base = {"app": "hello", "conns": conns, "wrk_threads": 2, "script": "browser.lua", "kind": kind}
    if kind == "granian":
        return dict(base, server="granian", workers=1, bt=1)
    c = dict(base, server="cserve")
    if kind in ("inline", "native"):
        c["mode"] = kind
    else:
        c.update(handoff=kind, bt=1)
    return c


def label(c):
    return f"{c['kind']} c{c['conns']}"


def plan(quick):
    return [(label(cfg(k, c)), cfg(k, c)) for c in ((64,) if quick else CONNS) for k in KINDS]


def io_py(rec):
    """The I/O thread's and the Python thread's share of a core in one run:
    cserve's loop and pool from its own window (inline: the loop is both,
    reported as I/O), Granian's tokio thread and its other threads from
    /proc; with the handoff syscalls per request on each side (cserve)."""
    out = {}
    th = rec.get("stats_threads") or []
    if th:
        loops = [t for t in th if t["role"] == "loop"]
        pools = [t for t in th if t["role"] == "pool"]
        out["io"] = max((t["utilisation"] or 0 for t in loops), default=None)
        out["py"] = sum(t["utilisation"] or 0 for t in pools) if pools else None
        reqs = sum(t["requests"] or 0 for t in loops)
        if reqs and pools:
            h = lambda t, ks: sum(((t.get("counters") or {}).get("handoff") or {}).get(k, 0) for k in ks)  # noqa: E731
            out["loop_sc"] = sum(h(t, ("submit_syscalls", "drain_syscalls", "sleep_syscalls")) for t in loops) / reqs
            out["pool_sc"] = sum(h(t, ("take_syscalls", "complete_syscalls")) for t in pools) / reqs
        return out
    srv = [t for t in rec.get("threadcpu") or [] if not t["name"].startswith("wrk")]
    io = [t for t in srv if t["name"].startswith("tokio")]
    py = [t for t in srv if not t["name"].startswith("tokio")]
    out["io"] = sum(t["median_pct"] for t in io) / 100 if io else None
    out["py"] = sum(t["median_pct"] for t in py) / 100 if py else None
    return out


# ------------------------------------------------------------------ profiles

def _profile(name, args, secs, tmp):
    cmd = ["sh", PROFILE_SH, "-d", str(secs), "-c", "64", "-t", "2", "-s", os.path.join(WRK_DIR, "browser.lua"),
           "-o", tmp] + args
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode or not os.path.exists(os.path.join(tmp, "perf.txt")):
        return {"error": f"profile.sh failed: {(p.stderr or p.stdout)[-600:]}"}
    return {"profile_cmd": shlex.join(cmd)}


def _granian_profile(secs, tmp):
    c = cfg("granian", 64)
    port = free_port()
    proc, log = start(server_cmd(c, port), os.path.join(tmp, "granian.log"))
    try:
        if not wait_ready(proc, port):
            return {"error": "granian did not start"}
        time.sleep(0.5)
        kids = [p for p in threadcpu.descendants(proc.pid) if p != proc.pid]
        pid = kids[-1] if kids else proc.pid  # the worker: Python and the tokio runtime
        return _profile("granian", ["-p", str(pid), "-u", f"http://127.0.0.1:{port}/"], secs, tmp)
    finally:
        stop(proc)
        log.close()


def profile(name, secs, out_dir):
    """One profile record: per thread, µs per request by category."""
    tmp = tempfile.mkdtemp(prefix=f"cserve-seed-prof-{name}-")
    rec = {"kind": "profile", "name": name, "conns": 64, "seconds": secs}
    try:
        if name == "granian":
            rec.update(_granian_profile(secs, tmp))
        else:
            c = cfg(name, 64)
            args = ["--", "--app", "native-hello"] if name == "native" else \
                ["--", "--handoff", name, "--blocking-threads", "1", "--chdir", os.path.join(ROOT, "apps"),
                 "hello:application"]
            rec.update(_profile(name, args, secs, tmp))
            rec["config"] = c
        if "error" in rec:
            return rec
        wrk_txt = open(os.path.join(tmp, "wrk.txt")).read()
        _, _, rps = threadcpu.parse_wrk(wrk_txt)
        rec["rps_wrk"] = rps
        reqs, threads = None, []
        win = os.path.join(tmp, "window.json")
        if os.path.exists(win):
            st = json.load(open(win))
            threads = [t for w in st.get("workers", []) for t in w.get("threads", [])]
            reqs = sum(t.get("requests") or 0 for t in threads if t.get("role") == "loop")
            rec["requests_from"] = "cserve's window"
        if not reqs and rps:
            reqs = rps * secs
            rec["requests_from"] = "wrk's rate × the perf window"
        rec["requests"] = reqs
        # Each syscall's seconds by the socket family its samples show, and
        # which descriptors each thread's calls reach (the window's counters):
        # the split is made from these at report time (split_profile).
        rec["tally"] = perfsplit.tally(os.path.join(tmp, "perf.txt"))
        rec["census"] = perfsplit.census(c.get("handoff"), threads) if name != "granian" else None
        rec["threads"] = split_profile(rec)
        if os.path.exists(os.path.join(tmp, "report.md")):
            shutil.copy(os.path.join(tmp, "report.md"), os.path.join(out_dir, f"profile-{name}.md"))
    except Exception as e:  # record it, go on with the others
        rec["error"] = f"{type(e).__name__}: {e}"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rec


def split_profile(p):
    """A profile record's threads in µs per request by category: from its
    tally and census where it has them (perfsplit), else as recorded."""
    if not p.get("tally"):
        return p.get("threads")
    cpu = perfsplit.split_tally(p["tally"], p.get("census"))
    total = sum(x["cpu_s"] for x in cpu.values())
    return {t: perfsplit.per_request(v, p.get("requests")) for t, v in cpu.items() if v["cpu_s"] >= 0.02 * total}


# ------------------------------------------------------------------ main

def load(path):
    meta, runs, profs = None, [], []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("kind") == "meta":
                meta = r
            elif r.get("kind") == "profile":
                profs.append(r)
            else:
                runs.append(r)
    return meta, runs, profs


def write_report(out):
    meta, runs, profs = load(os.path.join(out, "seed.jsonl"))
    profs = [dict(p, threads=split_profile(p)) if "error" not in p else p for p in profs]
    rows = probe.summarise(runs, extra=io_py)
    md = seed_report.markdown(meta, rows, profs)
    with open(os.path.join(out, "seed.md"), "w") as f:
        f.write(md)
    with open(os.path.join(out, "seed.brief.md"), "w") as f:  # what the paper includes
        f.write(seed_report.brief(meta, rows, profs, md))
    return md


FULL, QUICK = (3, 3.0, 1.0), (1, 1.0, 0.3)   # rounds, window s, warm-up s


def main():
    ap = entry.parser(__doc__, OUT, FULL, QUICK, "c64 once, two short profiles (plumbing)", "seed")
    ap.add_argument("--profile-seconds", type=int, help="perf window per profile (full 4, quick 1)")
    ap.add_argument("--profiles-only", action="store_true",
                    help="keep seed.jsonl's runs, take the profiles again, rewrite seed.md")
    a = ap.parse_args()
    if a.report:
        print(write_report(a.out))
        return 0
    entry.need_cserve()
    entry.resolve(a)
    a.profile_seconds = a.profile_seconds or (1 if a.quick else 4)
    have_granian = subprocess.run([PY, "-c", "import granian"], capture_output=True).returncode == 0
    if not have_granian:
        print("seed: granian not installed for /usr/bin/python3 (make deps): its rows are skipped", file=sys.stderr)
    os.makedirs(a.out, exist_ok=True)
    if a.profiles_only:
        meta, recs, _ = load(os.path.join(a.out, "seed.jsonl"))
        recs = [{k: v for k, v in r.items() if k != "kind"} for r in recs]
        pm = probe.meta("")  # the profiles' own commit and date, beside the runs'
        meta["profiles"] = {"commit": pm["commit"], "dirty": pm["dirty"], "date": pm["date"],
                            "command": "/usr/bin/python3 -m experiments.seed --profiles-only"}
    else:
        todo = [(lab, c) for lab, c in plan(a.quick) if have_granian or c["server"] != "granian"]
        meta, recs = entry.measure(a, "seed", todo, meta_extra={"profile_seconds": a.profile_seconds})
    profs = []
    if not shutil.which("perf"):
        print("seed: no perf (make deps): the per-category profiles are skipped; seed.md says so", file=sys.stderr)
        meta["profiles_skipped"] = "perf not installed"
    else:
        names = ("ring", "granian") if a.quick else PROFILED
        for n in names:
            if n == "granian" and not have_granian:
                continue
            p = profile(n, a.profile_seconds, a.out)
            profs.append(p)
            print(f"seed profile {n}: " + (p["error"] if "error" in p else
                  ", ".join(f"{t} {sum(v.get(c, 0) for c in perfsplit.CATEGORIES):.2f} µs/req"
                            for t, v in (p.get("threads") or {}).items() if v)), file=sys.stderr, flush=True)
    entry.write_records(os.path.join(a.out, "seed.jsonl"), meta, recs, profs)
    print(write_report(a.out))
    return entry.status(recs + profs)


if __name__ == "__main__":
    sys.exit(main())

"""Small measured sweeps outside the main plan (experiments/loopbound.py,
experiments/seed.py): one server per run, a wrk command of the sweep's own
(threads, a Lua script and its arguments), per-thread CPU from inside
(cserve --stats-json) and outside (/proc), and the window's steal and
foreign CPU. Records have the shape run.py writes, so lib/model.py's
metrics() and regime rule read them unchanged.

Rounds are interleaved and shuffled (each round runs every configuration
once, in an order drawn from the seed and the round). A run whose window lost
more than model.DISTURB_LIMIT cores to steal and foreign CPU is run again at
the end of the queue, up to `reruns` times; after that it is kept, marked
"disturbed", and the summary takes its medians over the clean runs (over all
of them, marked, where none was clean)."""
import datetime
import json
import math
import os
import random
import re
import shlex
import shutil
import subprocess
import tempfile
import time

from . import model, pinning, provenance, stats
from .serverctl import (CSERVE, PIPELOAD, ROOT, WRK_DIR, app_spec, finish_window, free_port, load_window, server_cmd,
                        start, start_client, stop, threadcpu, wait_ready, wrk_duration)

APPS_DIR = os.path.join(ROOT, "apps")


def cserve_cmd(cfg, port, stats_file):
    """cserve's command line for a probe configuration: mode native | inline
    | (handoff, bt); args: more options (a list); app "hello" (apps/hello.py), "files" (apps/files.py) or
    any app the main sweeps know (serverctl.app_spec); binary (default
    ./cserve) and workers as in the main sweeps."""
    binary = os.path.join(ROOT, cfg["binary"]) if cfg.get("binary") else CSERVE
    cmd = [binary, "--bind", f"127.0.0.1:{port}", "--log-level", "warning", "--stats-json", stats_file]
    if cfg.get("workers", 1) > 1:
        cmd += ["--workers", str(cfg["workers"])]
    cmd += cfg.get("args", [])
    if cfg.get("mode") == "native":
        return cmd + ["--app", "native-hello"]
    if cfg.get("mode") == "inline":
        cmd.append("--inline")
    else:
        cmd += ["--handoff", cfg["handoff"], "--blocking-threads", str(cfg.get("bt", 1))]
    if cfg["app"] in ("hello", "files"):
        return cmd + ["--chdir", APPS_DIR, f"{cfg['app']}:application"]
    d, spec, _ = app_spec(cfg["app"])
    return cmd + ["--chdir", os.path.join(ROOT, d), spec]


def command(cfg, port, stats_file):
    if cfg["server"] == "cserve":
        return cserve_cmd(cfg, port, stats_file)
    return server_cmd(dict(cfg, conns=cfg["conns"]), port)  # a peer, as the main sweeps start it


def wrk_cmd(cfg, port, seconds):
    """The client's command: wrk -tT -cC with the configuration's Lua script
    (experiments/wrk/) and its arguments; or, with client "pipeload",
    build/pipeload with cfg's depth and (where set) a browser-like head
    with a Cookie of cfg["cookie"] bytes, and (where set) a chunked body
    of cfg["chunks"] chunks of cfg["chunk_bytes"] bytes (default one)."""
    url = f"http://127.0.0.1:{port}{cfg.get('path', '/')}"
    if cfg.get("beside"):
        return beside_cmd(cfg, dict(cfg, beside=None), port, seconds, url)
    if cfg.get("client") == "pipeload":
        cmd = [PIPELOAD, "-t", str(cfg.get("wrk_threads", 1)), "-c", str(cfg["conns"]),
               "-p", str(cfg.get("depth", 1)), "-d", f"{seconds:g}"]
        if cfg.get("cookie") is not None:
            cmd += ["-B", "-b", str(cfg["cookie"])]
        if cfg.get("chunks"):
            cmd += ["-k", str(cfg["chunks"])]
        if cfg.get("chunk_bytes", 1) > 1:
            cmd += ["-K", str(cfg["chunk_bytes"])]
        return cmd + [url]
    cmd = ["wrk", f"-t{cfg.get('wrk_threads', 1)}", f"-c{cfg['conns']}", wrk_duration(seconds), "--latency"]
    if cfg.get("script"):
        cmd += ["-s", os.path.join(WRK_DIR, cfg["script"])]
    cmd.append(url)
    if cfg.get("script_args"):
        cmd += ["--"] + [str(x) for x in cfg["script_args"]]
    return cmd


BESIDE_LEAD = 0.5  # s the companion client runs before the measured one starts
WARM_LEAD = 0.5    # s of a warm_apart configuration's measured client before its window


def beside_cmd(cfg, alone, port, seconds, url):
    """The measured client (wrk_cmd of `alone`) with another beside it on
    the same server: build/pipeload on cfg["beside"]["conns"] connections
    of cfg["beside"]["depth"] pipelined requests, started BESIDE_LEAD
    seconds first (its pipeline is there when the measured client comes)
    and running until the measured client is done. Both run under one
    shell, so the window counts both as the client; of the companion's
    output only its "pipeload-json:" line is kept (beside_counts reads
    it), so the measured client's summary is what the harness parses."""
    b = cfg["beside"]
    other = [PIPELOAD, "-t", "1", "-c", str(b["conns"]), "-p", str(b["depth"]),
             "-d", f"{math.ceil(seconds) + 2 * BESIDE_LEAD:g}", url]
    return ["sh", "-c", f"{shlex.join(other)} | grep '^pipeload-json:' & sleep {BESIDE_LEAD:g}; "
                        f"{shlex.join(wrk_cmd(alone, port, seconds))}; wait"]


def beside_counts(output):
    """The companion client's counts (pipeload's JSON line) from a run's
    output, or None."""
    m = re.search(r"^pipeload-json: (\{.*\})$", output or "", re.M)
    return json.loads(m.group(1)) if m else None


def with_server(cfg, label, body, tmp_prefix="cserve-probe-"):
    """One run against a fresh server of cfg: start it on a free port, wait
    until it accepts, then body(rec, proc, port, stats_file) measures into
    rec; stop it. Returns the record (label, config, the server's command,
    whatever body added), or one with "error" (and the server's log's
    tail) where the server did not start or body raised."""
    port = free_port()
    tmpdir = tempfile.mkdtemp(prefix=tmp_prefix)
    stats_file = os.path.join(tmpdir, "stats.json")
    cmd = command(cfg, port, stats_file)
    proc, log = start(cmd, os.path.join(tmpdir, "server.log"))
    rec = {"time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "label": label, "config": cfg, "server_cmd": shlex.join(cmd), "machine": {"nproc": os.cpu_count()}}
    try:
        if not wait_ready(proc, port, listeners=cfg.get("workers", 1) if cfg["server"] == "cserve" else 1):
            log.seek(0)
            rec["error"] = "server did not start: " + log.read()[-2000:]
            return rec
        body(rec, proc, port, stats_file)
    except Exception as e:  # record the failure, keep sweeping
        rec["error"] = f"{type(e).__name__}: {e}"
    finally:
        rec["server_exit"] = stop(proc)
        log.seek(0)
        tail = log.read()[-1500:]
        log.close()
        if "error" in rec:
            rec["server_log_tail"] = tail
        shutil.rmtree(tmpdir, ignore_errors=True)
    return rec


def measure(cfg, label, warmup, duration, margin=0.5, interval=None):
    """One run: the record (run.py's shape), or one with "error"."""
    is_cserve = cfg["server"] == "cserve"
    # a peer's app, cserve's workers, or the clients under beside_cmd's shell, in children
    children = not is_cserve or cfg.get("workers", 1) > 1 or bool(cfg.get("beside"))

    def body(rec, proc, port, stats_file):
        time.sleep(0.3)
        lead = warmup
        if cfg.get("warm_apart") and warmup > WARM_LEAD:
            # The warm-up by a client of its own: wrk's rate and percentiles
            # cover its whole run, so the measured client then starts on a
            # warmed server (a self-sizing pool already grown) and its
            # figures are the window's, not the warm-up's.
            warm = wrk_cmd(cfg, port, warmup - WARM_LEAD)
            rec["warm_cmd"] = shlex.join(warm)
            subprocess.run(warm, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=warmup + 30,
                           check=True)
            lead = WARM_LEAD
        total = lead + duration + margin
        wrk = wrk_cmd(cfg, port, total)
        rec["wrk_cmd"] = shlex.join(wrk)
        wp, rec["placement"], check = start_client(proc, cfg, wrk, children)
        series, rec["window_cpu"], mtime = load_window(proc, wp, lead, duration, interval or duration / 4,
                                                       children, stats_file if is_cserve else None)
        check()
        rec["rss_kib"] = threadcpu.rss_kib(threadcpu.descendants(proc.pid))  # at the window's end, loaded
        finish_window(rec, wp, total + 30, series, stats_file if is_cserve else None, mtime)
    return with_server(cfg, label, body)


def run_metrics(rec):
    """model.metrics(rec), with the client stage as its busiest thread
    (wrk -t2 is two stages of one core each, not one of two) and the client's
    cores beside it; the regime recomputed on that."""
    m = model.metrics(rec)
    wrk = [t for t in rec.get("threadcpu") or [] if pinning.is_client(t["name"])]
    m["client_cores"] = sum(t["median_pct"] for t in wrk) / 100 if wrk else None
    if len(wrk) > 1:
        m["client_util"] = max(t["median_pct"] for t in wrk) / 100
        m["regime"], m["regime_also"] = model.regime_detail(m, rec["config"])
    if rec["config"].get("script_args") and len(rec["config"]["script_args"]) > 1 \
            and int(rec["config"]["script_args"][1]) > 1:
        m["p50_us"] = m["p99_us"] = None  # wrk times a pipelined batch, not a request
    return m


def run_rounds(todo, rounds, seed, runner, reruns=2, rerun_cap=None, limit=model.DISTURB_LIMIT, log=print):
    """todo: [(label, cfg)]. Runs `rounds` interleaved, shuffled rounds with
    runner(cfg, label) -> record; reruns disturbed runs (see the module
    docstring). Returns the records, each with round, attempt and, where
    other tenants took more than `limit` cores in its window, "disturbed"."""
    order = []
    for rnd in range(rounds):
        batch = list(todo)
        random.Random(f"{seed}-{rnd}").shuffle(batch)
        order += [(rnd, lab, cfg, 0) for lab, cfg in batch]
    cap = len(order) // 4 if rerun_cap is None else rerun_cap
    out, used, i = [], 0, 0
    while order:
        rnd, lab, cfg, attempt = order.pop(0)
        i += 1
        rec = runner(cfg, lab)
        rec.update(round=rnd, attempt=attempt)
        bad = "error" not in rec and model.disturbed(rec, limit)
        what = ""
        if bad:
            rec["disturbed"] = True
            if attempt < reruns and used < cap:
                used += 1
                order.append((rnd, lab, cfg, attempt + 1))
                what = " (disturbed: rerun)"
            else:
                what = " (disturbed: kept, marked)"
        out.append(rec)
        log(f"[{i}/{i + len(order)}] r{rnd} {brief(rec)}{what}")
    return out


def brief(rec):
    if "error" in rec:
        return f"{rec['label']}: ERROR {rec['error'][:200]}"
    m = run_metrics(rec)
    w = rec.get("window_cpu") or {}

    def p(x):
        return "—" if x is None else f"{100 * x:.0f}%"
    return (f"{rec['label']}: {rec['rps'] or 0:,.0f} rps  loop {p(m.get('loop_util'))} pool {p(m.get('pool_util'))} "
            f"client {p(m.get('client_util'))}  steal {w.get('steal_cores', 0):.2f} foreign "
            f"{w.get('foreign_cores', 0):.2f}  {m['regime']}")


def _med(xs):
    return stats.median([x for x in xs if x is not None])


def runs_used(records):
    """label -> (the row's head, the runs its medians take): the head holds
    the label, the configuration, the runs, the failed ones, the disturbed
    ones, how many are used and whether all were disturbed; the runs used
    are the clean ones, or all that did not fail where none was clean."""
    groups = {}
    for r in records:
        groups.setdefault(r["label"], []).append(r)
    out = {}
    for lab, rs in groups.items():
        ok = [r for r in rs if "error" not in r]
        clean = [r for r in ok if not r.get("disturbed")]
        use = clean or ok
        out[lab] = ({"label": lab, "config": rs[0]["config"], "runs": len(rs), "errors": len(rs) - len(ok),
                     "used": len(use), "disturbed_runs": sum(1 for r in ok if r.get("disturbed")),
                     "all_disturbed": bool(ok) and not clean}, use)
    return out


def summarise(records, extra=None):
    """label -> row: medians over the clean runs (all runs, marked, where none
    was clean) of the rate, the stages' utilisation, the client's cores,
    steal, foreign and idle cores, the loop's and the pool's µs per request;
    the majority regime over those runs, and the other stages that saturated.
    extra(rec) -> {name: number}: more per-run figures, their medians added."""
    out = {}
    for lab, (row, use) in runs_used(records).items():
        ms = [run_metrics(r) for r in use]
        for k in ("rps", "rps_wrk", "loop_util", "pool_util", "client_util", "client_cores", "cores", "steal",
                  "foreign", "idle", "c_loop", "c_pool", "c_client", "loop_wait_us", "p50_us", "p99_us",
                  "sock_err", "in_flight_share", "loop_on_cpu", "loop_run_delay", "pool_run_delay",
                  "client_on_cpu", "client_run_delay"):
            vals = [m.get(k) for m in ms]
            row[k] = _med(vals)
            vv = [v for v in vals if v is not None]
            row[k + "_range"] = (min(vv), max(vv)) if vv else (None, None)
        if extra:
            ex = [extra(r) for r in use]
            for k in sorted({k for e in ex for k in e}):
                row[k] = _med([e.get(k) for e in ex])
        regs = [m["regime"] for m in ms]
        if regs:
            best = max(sorted(set(regs)), key=regs.count)
            row["regime"], row["regime_n"], row["regime_of"] = best, regs.count(best), len(regs)
            also = [a for m in ms if m["regime"] == best for a in m.get("regime_also") or []]
            row["regime_also"] = sorted(set(also))
        else:
            row["regime"], row["regime_n"], row["regime_of"], row["regime_also"] = "error", 0, 0, []
        out[lab] = row
    return out


def meta(command_line, binary=CSERVE):
    """Provenance for a record file: commit (and dirty), machine, kernel, date, command."""
    sha, dirty = provenance.git_commit()
    mach = provenance.machine(binary)
    mach.pop("cpu_flags", None)
    # root: the checkout the record was made in, so its commands can be shown
    # relative to it wherever the record is read.
    return {"kind": "meta", "commit": sha, "dirty": dirty, "command": command_line, "root": ROOT,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": mach}


def header(title, writer, meta, tail):
    """A generated report's first lines: its title, the do-not-edit mark,
    and, once there is a record, its provenance and rounds, then tail."""
    L = [f"# {title}", "", f"<!-- generated by {writer}; do not edit -->", ""]
    if meta:
        L += [meta_line(meta), "", f"{meta.get('rounds')} interleaved, shuffled rounds; {meta.get('warmup')} s "
              f"warm-up, {meta.get('duration')} s window per run. {tail}", ""]
    return L


def meta_line(m):
    """One line of provenance for a generated .md."""
    mach = m.get("machine") or {}
    v = mach.get("versions") or {}
    return (f"Machine: {mach.get('cpu_model')}, {mach.get('nproc')} vCPUs, kernel {mach.get('kernel')}; "
            f"CPython {v.get('cpython')}, Granian {v.get('granian')}, {v.get('wrk')}; "
            f"commit {m.get('commit', 'unknown')[:7]}{' (dirty tree)' if m.get('dirty') else ''}; "
            f"{m.get('date')}; `{m.get('command')}`.")

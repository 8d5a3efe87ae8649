#!/usr/bin/python3
"""The production shape: every server with two worker processes, as a team
deploys it, on three apps, at 16, 64 and 256 connections of one closed-loop
client, with the account of what a request costs each thread.

  rows     cserve (the uninstrumented build, its default mode); cserve
           --inline (the app on the loop thread: the same server with no
           handoff, on the apps that hold the GIL); Granian; uWSGI
           (--http11-socket: keep-alive, under a master) with the app's
           threads, which serves one connection per thread while the rest
           wait, and uWSGI with threads enough for every connection
           (ceil(connections / workers) per process, where that is more);
           gunicorn (gthread) at 64 connections; at 64 connections on Flask
           and Django, cserve on the free-threaded CPython as one process
           of 2 pool threads (FT_BINARY in a venv of FT_PYTHON with Flask
           and Django: FT_VENV, made here); and --baseline REV: cserve
           built from another revision (build-base/REV, made here), the
           yardstick of the context switches
  apps     Flask and Django (apps/flask_hello.py, apps/django_hello) on one
           thread per worker, since the GIL runs their Python one thread at
           a time; and an app that waits on I/O (apps/gil_release.py, 1 ms
           of time.sleep with the GIL released: a database or upstream
           call) on 16 threads per worker
  client   wrk -t1 -cC --latency, C in 16, 64, 256

    /usr/bin/python3 -m experiments.production [--quick] [--rounds 6] [--baseline REV] [--out DIR]
        [--apps flask,django,io] [--conns 16,64,256] [--rows cserve,inline,...]
        [--variant NAME=BINARY[,ARG...][@PLACEMENT]]...
    /usr/bin/python3 -m experiments.production --report [--out DIR]   # the .md from the .jsonl
    /usr/bin/python3 -m experiments.production --readme               # the generated blocks

--variant adds a cserve row of another build, other flags or another
placement to every cell (designs side by side:
`--variant nohold=build-noinst/cserve,--loop-hold,0`,
`--variant pinned=build-noinst/cserve@per-worker`: each worker's threads on
a CPU of its own, lib/pinning.py).

Per run: wrk's rate and latency percentiles, its socket errors and non-2xx
responses; the server's processes' RSS summed at the window's end; and the
account (lib/account.py): per group of threads (cserve's loop, the threads
that run Python, the rest, the client), on-CPU µs, run delay µs, voluntary
and involuntary context switches per request, from each thread's schedstat
and status over the window; the machine's idle cores, steal and foreign
CPU. Rounds are interleaved and shuffled; a run whose window lost more than
0.05 core to steal and foreign CPU is rerun up to twice, then kept and
marked (lib/probe.py). Writes DIR/production.jsonl (a provenance line, then
one line per run) and DIR/production.md.
"""
import math
import os
import subprocess
import sys

from experiments.lib import account, configs, entry, generated, model, pinning, probe, stats
from experiments.lib.serverctl import ROOT, app_spec

OUT = os.path.join(ROOT, "experiments", "results", "production")
WORKERS = 2
IO_US = 1000            # the I/O app's wait per request
IO_APP = f"gil-sleep{IO_US}"
APPS = {"flask": 1, "django": 1, IO_APP: 16}   # app -> threads per worker
APP_KEYS = {"flask": "flask", "django": "django", "io": IO_APP}
CONNS = (16, 64, 256)
NOINST = configs.NOINST
FT_PYTHON = "/opt/cserve-py313t/bin/python3.13t"
FT_BINARY = "build-ft/cserve"
FT_VENV = os.path.join(ROOT, "build-ft", "production-venv")
# The GIL build's side of the free-threaded comparison: a venv of the
# interpreter cserve embeds with the same Flask and Django as FT_VENV (the
# system's are older than 3.13 runs: Django 3.2 imports cgi, gone in 3.13).
GIL_VENV = os.path.join(ROOT, "build-ft", "production-gil-venv")
FT_PACKAGES = ("flask>=3.1,<3.2", "django>=5.2,<6")  # releases that run on 3.11 and on 3.13t
FT_THREADS = 2
ROWS = ("cserve", "inline", "granian", "uwsgi", "uwsgi-all", "gunicorn", "ft", "ft-procs", "gil-venv")
PEERS = ("granian", "uwsgi", "uwsgi-all", "gunicorn")
CPU_APPS = ("flask", "django")


def base_cfg(server, app, conns, bt, **kw):
    c = {"server": server, "app": app, "bt": bt, "workers": WORKERS, "conns": conns, "client": "wrk",
         "wrk_threads": 1, "path": app_spec(app)[2]}
    c.update(kw)
    return c


def cfg(server, app, bt, conns=64):
    """A peer's or cserve's default row (kept for the tests' and callers' sake)."""
    if server == "cserve":
        return row("cserve", app, conns)
    return base_cfg(server, app, conns, bt, row=server)


def all_threads(conns):
    return math.ceil(conns / WORKERS)


def row(kind, app, conns, variants=None, baseline=None):
    """The configuration of one row in one cell, or None where the row does
    not apply there."""
    bt = APPS[app]
    if kind == "cserve":
        return base_cfg("cserve", app, conns, bt, handoff="ring", binary=NOINST, row=kind)
    if kind == "inline":
        return base_cfg("cserve", app, conns, bt, mode="inline", binary=NOINST, row=kind) \
            if app in CPU_APPS else None
    if kind in ("granian", "uwsgi"):
        return base_cfg(kind, app, conns, bt, row=kind)
    if kind == "uwsgi-all":
        n = all_threads(conns)
        return base_cfg("uwsgi", app, conns, n, row=kind) if n > bt else None
    if kind == "gunicorn":
        return base_cfg("gunicorn", app, conns, bt, row=kind) if conns == 64 else None
    if kind in ("ft", "ft-procs", "gil-venv"):
        if app not in CPU_APPS or conns != 64:
            return None
        if kind == "ft":  # one process of FT_THREADS threads, the GIL off
            return base_cfg("cserve", app, conns, FT_THREADS, workers=1, handoff="ring", binary=FT_BINARY,
                            args=["--virtualenv", FT_VENV], python=os.path.join(FT_VENV, "bin", "python"),
                            row=kind)
        if kind == "ft-procs":  # the same interpreter as FT_THREADS processes of one thread
            return base_cfg("cserve", app, conns, bt, workers=FT_THREADS, handoff="ring", binary=FT_BINARY,
                            args=["--virtualenv", FT_VENV], python=os.path.join(FT_VENV, "bin", "python"),
                            row=kind)
        # as many GIL workers of one thread, the same Flask and Django
        return base_cfg("cserve", app, conns, bt, workers=FT_THREADS, handoff="ring", binary=NOINST,
                        args=["--virtualenv", GIL_VENV], python=os.path.join(GIL_VENV, "bin", "python"), row=kind)
    if kind == "baseline":
        return base_cfg("cserve", app, conns, bt, handoff="ring", binary=baseline, row=kind)
    if variants and kind in variants:
        binary, args, placement = variants[kind]
        c = base_cfg("cserve", app, conns, bt, handoff="ring", binary=binary, args=list(args), row=kind)
        if placement:
            c["placement"] = placement
        return c
    raise ValueError(kind)


def label(c):
    return f"{c['row']} {c['app']} c{c['conns']}"


def plan(quick, apps=None, conns=None, rows=None, variants=None, baseline=None):
    if quick:
        return [row(k, IO_APP, 64) for k in ("cserve", "granian")]
    kinds = list(rows or ROWS) + list(variants or ()) + (["baseline"] if baseline else [])
    out = []
    for app in apps or APPS:
        for n in conns or CONNS:
            for k in kinds:
                c = row(k, app, n, variants, baseline)
                if c:
                    out.append(c)
    return out


def app_name(app):
    return f"I/O wait ({IO_US // 1000} ms, GIL released)" if app.startswith("gil-sleep") else app.capitalize()


def row_name(c):
    k = c.get("row") or c["server"]
    if k == "uwsgi":
        return f"uwsgi {c['bt']} thread{'s' if c['bt'] > 1 else ''}"
    if k == "uwsgi-all":
        return f"uwsgi {c['bt']} threads"
    if k == "ft":
        return f"cserve 3.13t, 1×{c['bt']}"
    if k == "gil-venv":
        return f"cserve 3.11, {c['workers']}×1"
    if k == "ft-procs":
        return f"cserve 3.13t, {c['workers']}×1"
    if k == "inline":
        return "cserve --inline"
    return k


# ------------------------------------------------------------------ the baseline build

def build_noinst():
    """Build NOINST, the binary the cserve rows run, from this tree: a record
    never measures a binary left by a run on an older commit."""
    subprocess.run(["make", "-s", "-j2", "BUILD=build-noinst", "INSTRUMENTS=0", NOINST], cwd=ROOT, check=True)


def build_baseline(rev, instrumented=False):
    """cserve's uninstrumented build of revision rev, in build-base/REV
    (git archive of rev, then its own make), or with instrumented its
    ./cserve as the full sweep runs it, in build-base/REV-inst: the path of
    the binary, relative to the root."""
    sha = subprocess.run(["git", "rev-parse", "--short=12", rev], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.strip()
    d = os.path.join(ROOT, "build-base", sha + ("-inst" if instrumented else ""))
    binary = os.path.join(d, "cserve") if instrumented else os.path.join(d, "build-noinst", "cserve")
    target = ["cserve"] if instrumented else ["BUILD=build-noinst", "INSTRUMENTS=0", "build-noinst/cserve"]
    if not os.access(binary, os.X_OK):
        os.makedirs(d, exist_ok=True)
        arch = subprocess.Popen(["git", "archive", sha], cwd=ROOT, stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", d], stdin=arch.stdout, check=True)
        if arch.wait():
            raise SystemExit(f"production: git archive {sha} failed")
        subprocess.run(["make", "-s", "-j2", *target], cwd=d, check=True, stdout=subprocess.DEVNULL)
    return os.path.relpath(binary, ROOT)


def prepare_ft(log):
    """Build FT_BINARY, and the venvs of FT_PYTHON and of the GIL build's
    interpreter with FT_PACKAGES; why not (a string) where they cannot be
    had."""
    if not os.access(FT_PYTHON, os.X_OK):
        return f"no {FT_PYTHON} (scripts/build-freethreaded-python.sh)"
    with open(log, "a") as f:
        if subprocess.run(["make", "-s", "-j2", "BUILD=build-ft", f"PYTHON={FT_PYTHON}", FT_BINARY], cwd=ROOT,
                          stdout=f, stderr=subprocess.STDOUT).returncode:
            return f"make {FT_BINARY} failed (see {log})"
        for python, venv in ((FT_PYTHON, FT_VENV), ("/usr/bin/python3", GIL_VENV)):
            py = os.path.join(venv, "bin", "python")
            if not os.access(py, os.X_OK):
                subprocess.run([python, "-m", "venv", venv], stdout=f, stderr=subprocess.STDOUT)
            if subprocess.run([py, "-c", "import flask, django"], capture_output=True).returncode:
                subprocess.run([py, "-m", "pip", "install", "-q", *FT_PACKAGES], stdout=f, stderr=subprocess.STDOUT)
            if subprocess.run([py, "-c", "import flask, django"], capture_output=True).returncode:
                return f"Flask and Django do not import in {venv} (see {log})"
    return None


def ft_versions(venv=FT_VENV):
    py = os.path.join(venv, "bin", "python")
    try:
        out = subprocess.run([py, "-c", "import sys, flask, django, importlib.metadata as m; "
                                        "print(sys.version.split()[0], m.version('flask'), django.__version__, "
                                        "getattr(sys, '_is_gil_enabled', lambda: True)())"],
                             capture_output=True, text=True, timeout=60).stdout.split()
    except OSError:
        return None
    if len(out) != 4:
        return None
    return {"python": out[0], "flask": out[1], "django": out[2], "gil_enabled": out[3] == "True"}


def io_sleep_us(n=400):
    """What the I/O app's wait takes here: the median of n time.sleep calls
    of IO_US, on a thread of a fresh /usr/bin/python3 (the kernel's default
    timer slack, as the app's threads have): with a thread per request in
    flight, a worker's threads can answer at most threads / this a
    second."""
    code = ("import time, statistics\nd=[]\nfor _ in range(%d):\n t=time.perf_counter(); time.sleep(%g); "
            "d.append(time.perf_counter()-t)\nprint(statistics.median(d)*1e6)" % (n, IO_US / 1e6))
    try:
        return round(float(subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True,
                                          timeout=60).stdout), 1)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def io_bound(meta, conns, bt=APPS[IO_APP]):
    """Requests a second the I/O app allows with `conns` connections of a
    closed-loop client on WORKERS x bt threads: as many requests in flight
    as the fewer of the two, each the measured wait at least (None where
    not measured)."""
    us = (meta or {}).get("io_sleep_us")
    return min(conns, WORKERS * bt) / us * 1e6 if us else None


def io_line(meta, rows):
    """The I/O cells' rate goal against what the app itself allows."""
    if not (meta or {}).get("io_sleep_us"):
        return None
    parts = []
    for (app, conns), srv in cells(rows):
        bp = best_peer(srv)
        if app != IO_APP or not bp or not bp["rates"]:
            continue
        bound, need = io_bound(meta, conns), 1.1 * bp["rate_ci"][0]
        parts.append(f"c{conns}: at most {bound:,.0f}/s ({min(conns, WORKERS * APPS[IO_APP])} in flight), and 1.1× "
                     f"the best peer ({row_name(bp['config'])}) is {need:,.0f}/s"
                     + (", past that bound" if need > bound else ""))
    if not parts:
        return None
    return (f"The I/O app's bound: its wait takes {meta['io_sleep_us']:.0f} µs here (time.sleep of {IO_US} µs "
            f"with the kernel's default timer slack), and a request in flight holds a thread, so with "
            f"{WORKERS} workers of {APPS[IO_APP]} threads and C connections no server answers more than "
            f"min(C, {WORKERS * APPS[IO_APP]}) over that wait a second: " + "; ".join(parts) + ".")


# ------------------------------------------------------------------ the report

def extra(rec):
    """p90, the requests in flight by Little's law (the rate times the mean
    latency: about the connections when every one is served), RSS, and the
    account's figures per request (lib/account.py)."""
    lat = rec.get("latency") or {}
    rate, avg = rec.get("rps_wrk"), lat.get("avg_us")
    out = {"p90_us": lat.get("p90_us"), "non_2xx": lat.get("non_2xx"),
           "in_flight": rate * avg / 1e6 if rate and avg else None,
           "rss_mib": rec["rss_kib"] / 1024 if rec.get("rss_kib") else None}
    out.update(account.flat(account.of_run(rec)))
    return out


def summarise(recs):
    """label -> probe.summarise's row, plus the rate's median and interval over
    the clean runs (a 95 % bootstrap CI from ten up, else the range), the
    clean runs' rates and server CPU per request (for ratios)."""
    rows = probe.summarise(recs, extra=extra)
    by = {}
    for r in recs:
        by.setdefault(r["label"], []).append(r)
    for lab, row_ in rows.items():
        ok = [r for r in by[lab] if "error" not in r]
        use = [r for r in ok if not r.get("disturbed")] or ok
        row_["rates"] = [r["rps_wrk"] for r in use if r.get("rps_wrk")]
        row_["rate_ci"] = stats.median_ci(row_["rates"])
        row_["cpus"] = [v for v in (account.flat(account.of_run(r)).get("server.cpu_us") for r in use) if v]
        row_["sock_err_max"] = max((model.socket_errors(r) or 0 for r in use), default=None)
        row_["non_2xx_max"] = max(((r.get("latency") or {}).get("non_2xx") or 0 for r in use), default=None)
    return rows


def cells(rows):
    """[((app, conns), {row kind: row})] in the plan's order."""
    out = {}
    for lab, r in rows.items():
        c = r["config"]
        out.setdefault((c["app"], c["conns"]), {})[c.get("row") or c["server"]] = r
    order = {a: i for i, a in enumerate(APPS)}
    return sorted(out.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0][1]))


def kinds_of(srv):
    fixed = [k for k in ("cserve", "baseline", "inline") if k in srv]
    return fixed + sorted(k for k in srv if k not in ROWS + ("baseline",)) + \
        [k for k in ROWS if k in srv and k not in fixed]


def _ms(us):
    if us is None:
        return "—"
    return f"{us / 1000:.2f}" if us < 10000 else f"{us / 1000:.1f}" if us < 100000 else f"{us / 1000:,.0f}"


def num(x, fmt="{:.2f}"):
    return "—" if x is None else fmt.format(x)


def ratio_text(num_, den):
    r, lo, hi = stats.ratio_ci(num_, den)
    if r is None:
        return "—"
    kind = stats.interval_kind(len(num_), len(den))
    return f"{r:.2f}× [{lo:.2f}, {hi:.2f}]" if kind == "CI" else f"{r:.2f}× ({lo:.2f}–{hi:.2f})"


def rate_text(r):
    m, lo, hi = r["rate_ci"]
    kind = stats.interval_kind(len(r["rates"]))
    return f"{m:,.0f} [{lo:,.0f}, {hi:,.0f}]" if kind == "CI" else f"{m:,.0f} ({lo:,.0f}–{hi:,.0f})"


def short_of(r):
    """Where a row kept fewer than model.IN_FLIGHT_MIN of the client's
    connections in flight while the client had time to spare, the words
    that say so ("2 of 64 in flight"); else None. Such a row did not take
    the client's load (uWSGI with one thread a worker serves one connection
    a thread while the rest wait), so, as in the paper, it is shown but left
    out of every ratio and of the best peer."""
    if not model.keeps_too_few(r):
        return None
    n = r.get("in_flight")
    conns = r["config"]["conns"]
    return (f"{n:.0f} of {conns} in flight" if n is not None else
            f"{100 * r['in_flight_share']:.0f} % of {conns} in flight")


def comparable(srv):
    """The peer rows that may be compared: measured, and not short of load."""
    return [srv[k] for k in PEERS if k in srv and srv[k]["rates"] and not short_of(srv[k])]


def best_peer(srv, key="rps_wrk"):
    """The comparable peer row with the highest median rate (uWSGI at
    whichever thread count serves more and keeps the client's connections
    in flight), or None."""
    peers = comparable(srv)
    return max(peers, key=lambda r: r[key] or 0) if peers else None


def peers_left_out(srv):
    """"name: 2 of 64 in flight" for each measured peer row left out."""
    return [f"{row_name(srv[k]['config'])}: {short_of(srv[k])}" for k in PEERS
            if k in srv and srv[k]["rates"] and short_of(srv[k])]


def table(rows, compact=False):
    if compact:
        L = ["| cell | server | rate (range or [95 % CI]) | cserve ÷ it | p99 ms | in flight | server CPU µs/req "
             "| switches/req |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    else:
        L = ["| cell | server | runs used | rate: median (range) or [95 % CI] | cserve ÷ it | p50 / p90 / p99 ms "
             "| in flight | server CPU µs/req | switches/req (vol + invol) | idle cores | RSS MiB "
             "| socket errors (max) | non-2xx (max) | steal + foreign |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (app, conns), srv in cells(rows):
        cs = srv.get("cserve")
        cell = f"{app_name(app)}, c{conns}"
        for k in kinds_of(srv):
            r = srv[k]
            name = row_name(r["config"]) + (" †" if r["all_disturbed"] else "")
            if r["regime"] == "error" or not r["rates"]:
                L.append(f"| {cell} | {name} | error |" + " |" * (5 if compact else 11))
                continue
            few = short_of(r) or (cs and cs["rates"] and short_of(cs))
            ratio = ("—" if k == "cserve" or not cs or not cs["rates"] else "left out ‡" if few
                     else ratio_text(cs["rates"], r["rates"]))
            flight = num(r.get("in_flight"), "{:.0f}") + (" ‡" if short_of(r) else "")
            sw = num(r.get("server.cs"), "{:.2f}")
            if compact:
                L.append(f"| {cell} | {name} | {rate_text(r)} | {ratio} | {_ms(r['p99_us'])} "
                         f"| {flight} | {num(r.get('server.cpu_us'), '{:.1f}')} | {sw} |")
            else:
                lost = (r["steal"] or 0) + (r["foreign"] or 0)
                L.append(f"| {cell} | {name} | {r['used']} of {r['runs']} | {rate_text(r)} | {ratio} | "
                         f"{_ms(r['p50_us'])} / {_ms(r.get('p90_us'))} / {_ms(r['p99_us'])} | "
                         f"{flight} | {num(r.get('server.cpu_us'), '{:.1f}')} | "
                         f"{sw} ({num(r.get('server.vcs'))} + {num(r.get('server.ivcs'))}) | "
                         f"{num(r.get('idle_cores'))} | {num(r.get('rss_mib'), '{:.0f}')} | "
                         f"{r['sock_err_max']:,} | {r['non_2xx_max']:,} | {lost:.2f} |")
    if any(short_of(r) for _, srv in cells(rows) for r in srv.values() if r["rates"]):
        L += ["", IN_FLIGHT_NOTE]
    return L


IN_FLIGHT_NOTE = (f"‡ kept fewer than {100 * model.IN_FLIGHT_MIN:.0f} % of the client's connections in flight "
                  "while the client had time to spare (Little's law; the paper's rule): shown, but left out of "
                  "every ratio and of the best peer.")


def account_table(rows):
    """Per cell and row: each group's CPU, run delay and switches per request."""
    L = ["| cell | server | loop: CPU µs / vol / invol | app threads: CPU µs / vol / invol | other: CPU µs "
         "| server run delay µs | client: CPU µs / vol / invol | idle cores |",
         "|---|---|---:|---:|---:|---:|---:|---:|"]

    def g(r, name):
        if r.get(f"{name}.cpu_us") is None:
            return "—"
        return f"{r[f'{name}.cpu_us']:.1f} / {r[f'{name}.vcs']:.2f} / {r[f'{name}.ivcs']:.2f}"
    for (app, conns), srv in cells(rows):
        for k in kinds_of(srv):
            r = srv[k]
            if not r["rates"]:
                continue
            L.append(f"| {app_name(app)}, c{conns} | {row_name(r['config'])} | {g(r, 'loop')} | {g(r, 'app')} | "
                     f"{num(r.get('other.cpu_us'), '{:.1f}')} | {num(r.get('server.delay_us'), '{:.1f}')} | "
                     f"{g(r, 'client')} | {num(r.get('idle_cores'))} |")
    return L


def goals(rows):
    """Per cell, the goals' figures: cserve's rate over the best peer's
    (uWSGI at whichever thread count serves more), its CPU per request over
    --inline's and over the best peer's, its p99 against Granian's, and its
    rate and switches per request against the baseline's. [(cell, {name: (value,
    met)})]"""
    out = []
    for (app, conns), srv in cells(rows):
        cs = srv.get("cserve")
        if not cs or not cs["rates"]:
            continue
        g = {}
        out_ = peers_left_out(srv)
        if out_:
            g["peers left out"] = ("; ".join(out_), None)
        bp = best_peer(srv)
        if bp and short_of(cs):  # cserve itself did not take the load: nothing to compare
            g["rate ÷ best peer"] = (f"left out: cserve {short_of(cs)}", None)
        elif bp:
            r, lo, hi = stats.ratio_ci(cs["rates"], bp["rates"])
            g["rate ÷ best peer"] = (f"{r:.2f}× ({row_name(bp['config'])})", r >= 1.1)
            if bp.get("server.cpu_us") and cs.get("server.cpu_us"):
                # the best peer by CPU per request, the lowest, of those compared
                peers = [p for p in comparable(srv) if p.get("server.cpu_us")]
                low = min(peers, key=lambda p: p["server.cpu_us"])
                x = cs["server.cpu_us"] / low["server.cpu_us"]
                g["CPU/req ÷ best peer's"] = (f"{x:.2f}× ({row_name(low['config'])})", x <= 0.85)
        il = srv.get("inline")
        if il and il.get("server.cpu_us") and cs.get("server.cpu_us"):
            x = cs["server.cpu_us"] / il["server.cpu_us"]
            g["CPU/req ÷ --inline's"] = (f"{x:.2f}×", x <= 1.1)
        gr = srv.get("granian")
        if gr and gr.get("p99_us") and cs.get("p99_us"):
            g["p99 vs Granian's"] = (f"{_ms(cs['p99_us'])} vs {_ms(gr['p99_us'])} ms", cs["p99_us"] <= gr["p99_us"])
        b = srv.get("baseline")
        if b and b["rates"] and not short_of(cs):
            r, lo, hi = stats.ratio_ci(cs["rates"], b["rates"])
            g["rate ÷ baseline's"] = (f"{r:.2f}× ({lo:.2f}–{hi:.2f})", r >= BASELINE_RATE)
        if b and b.get("server.cs") and cs.get("server.cs") is not None:
            x = cs["server.cs"] / b["server.cs"]
            g["switches/req ÷ baseline's"] = (f"{x:.2f}×", x <= 0.5 if app in CPU_APPS else None)
        out.append(((app, conns), g))
    return out


GOAL_COLS = ("rate ÷ best peer", "CPU/req ÷ --inline's", "CPU/req ÷ best peer's", "p99 vs Granian's",
             "rate ÷ baseline's", "switches/req ÷ baseline's", "peers left out")
# A change may not cost the production shape more than this of the
# baseline's rate (the median of the rounds' ratios).
BASELINE_RATE = 0.95


GOALS_RULE = (f"A peer that kept fewer than {100 * model.IN_FLIGHT_MIN:.0f} % of the client's connections in "
              "flight while the client had time to spare is no best peer: the last column names it, with the "
              "connections it kept in flight.")


def goals_table(rows):
    L = ["| cell | " + " | ".join(GOAL_COLS) + " |", "|---|" + "---:|" * (len(GOAL_COLS) - 1) + "---|"]
    for (app, conns), g in goals(rows):
        def c(k):
            if k not in g:
                return "—"
            text, met = g[k]
            return text + ("" if met is None else " ✓" if met else " ✗")
        L.append(f"| {app_name(app)}, c{conns} | " + " | ".join(c(k) for k in GOAL_COLS) + " |")
    return L


def ft_lines(rows):
    """The free-threaded row against the GIL build's two workers with the
    same Flask and Django, per app: rate, RSS and CPU per request; and
    against the free-threaded build's own two processes, which tells the
    threads' cost apart from the interpreter's."""
    out = []
    for (app, conns), srv in cells(rows):
        ft, cs, procs = srv.get("ft"), srv.get("gil-venv"), srv.get("ft-procs")
        if not ft or not cs or not ft["rates"] or not cs["rates"]:
            continue
        rr = ratio_text(ft["rates"], cs["rates"])
        rss = ft["rss_mib"] / cs["rss_mib"] if ft.get("rss_mib") and cs.get("rss_mib") else None
        line = (f"{app_name(app)}, c{conns}: one free-threaded process of {ft['config']['bt']} threads "
                f"{rr} the rate of {WORKERS} GIL workers, {num(rss)}× their RSS "
                f"({num(ft.get('rss_mib'), '{:.0f}')} against {num(cs.get('rss_mib'), '{:.0f}')} MiB); server CPU "
                f"{num(ft.get('server.cpu_us'), '{:.0f}')} against {num(cs.get('server.cpu_us'), '{:.0f}')} µs a "
                f"request")
        if procs and procs["rates"]:
            line += (f"; the free-threaded build as {procs['config']['workers']} processes of one thread "
                     f"{ratio_text(procs['rates'], cs['rates'])} the GIL workers' rate, "
                     f"{num(procs.get('server.cpu_us'), '{:.0f}')} µs a request")
        out.append(line + ".")
    return out


def gap_lines(rows):
    """Per cell with a baseline: where the default's CPU per request went
    against the baseline's and --inline's, from the account: the loop's
    blocks (each a wake-up), the app threads' preemptions, and each group's
    CPU, per request."""
    out = []
    for (app, conns), srv in cells(rows):
        cs, b, il = srv.get("cserve"), srv.get("baseline"), srv.get("inline")
        if not cs or not b or cs.get("server.cpu_us") is None or b.get("server.cpu_us") is None:
            continue

        def f(r, k, fmt="{:.2f}"):
            return num(r.get(k), fmt)
        line = (f"{app_name(app)}, c{conns}: the baseline's loop blocked {f(b, 'loop.vcs')} times a request and "
                f"its app threads were preempted {f(b, 'app.ivcs')} times; cserve's now {f(cs, 'loop.vcs')} and "
                f"{f(cs, 'app.ivcs')}. CPU µs a request, baseline → cserve: loop {f(b, 'loop.cpu_us', '{:.1f}')} → "
                f"{f(cs, 'loop.cpu_us', '{:.1f}')}, app threads {f(b, 'app.cpu_us', '{:.1f}')} → "
                f"{f(cs, 'app.cpu_us', '{:.1f}')}, client {f(b, 'client.cpu_us', '{:.1f}')} → "
                f"{f(cs, 'client.cpu_us', '{:.1f}')}")
        if il and il.get("server.cpu_us") is not None:
            line += (f"; `--inline` {f(il, 'server.cpu_us', '{:.1f}')} in its one thread a worker, preempted "
                     f"{f(il, 'loop.ivcs')} times a request, its client {f(il, 'client.cpu_us', '{:.1f}')}")
        out.append(line + ".")
    return out


def markdown(meta, recs, quick):
    rows = summarise(recs)
    L = ["# The production shape: two workers each, Flask, Django and an I/O-bound app", ""]
    if quick:
        L += ["**Smoke run, not a measurement** (`--quick`: one round, short windows, on whatever else the "
              "machine was doing).", ""]
    L += [probe.meta_line(meta), ""]
    ftv = meta.get("ft")
    L += [f"Every server with {WORKERS} worker processes; Flask and Django on one thread per worker, the I/O "
          f"app ({IO_US // 1000} ms of `time.sleep`, the GIL released) on 16 threads per worker. cserve is the "
          "uninstrumented build in its default mode (ring handoff); `--inline` runs the app on the loop thread. "
          "uWSGI runs `--http11-socket` (keep-alive) under a master: with the app's threads it serves one "
          "connection per thread while the others wait (its in-flight column says how many), and with "
          "threads enough for every connection (connections ÷ workers per process). gunicorn runs the "
          "gthread worker. "
          + (f"The free-threaded row is one cserve process of {FT_THREADS} pool threads on CPython "
             f"{ftv['python']} (free-threaded, GIL {'on' if ftv['gil_enabled'] else 'off'} with both imported), "
             f"Flask {ftv['flask']}, Django {ftv['django']}, in a venv; beside it {FT_THREADS} workers of the "
             f"GIL build with the same releases in a venv of its CPython {(meta.get('gil_venv') or {}).get('python')} "
             "(the rows without a venv run the system's Flask and Django, whose Django does not run on 3.13: "
             "it imports `cgi`, removed in 3.13). " if ftv else "")
          + (f"The baseline is cserve built from {meta['baseline']}. " if meta.get("baseline") else "")
          + "Client: `wrk -t1 -cC --latency`, the rate is wrk's. "
          f"{meta['rounds']} interleaved, shuffled rounds; {meta['warmup']} s warm-up, {meta['duration']} s "
          f"window per run. A run that lost more than {model.DISTURB_LIMIT} core to steal and foreign CPU "
          "was rerun up to twice, then kept and marked (†: every run of the row was disturbed). Rates: "
          "median with a 95 % bootstrap interval from ten clean runs up (in brackets), else the range (in "
          "parentheses); cserve ÷ it: the ratio of the medians, its interval the same way. Everything else: "
          "medians over the runs used. In flight: the rate times wrk's mean latency (Little's law); about "
          "the connection count when every connection is served. Server CPU and switches per request: every "
          "thread of every server process, from its schedstat and status over the window, over the "
          "requests wrk counted (lib/account.py); switches are voluntary (the thread blocked and someone "
          "woke it) plus involuntary (it was preempted). RSS: the server's processes summed at the "
          "window's end.", ""]
    L += table(rows)
    L += ["", "## Goals", "", "cserve's default row against the best peer (by rate; by CPU per request, the "
          "peer that spends least), `--inline`, Granian's p99 and the baseline's switches. ✓ met, ✗ not. "
          + GOALS_RULE, ""]
    L += goals_table(rows)
    io = io_line(meta, rows)
    if io:
        L += ["", io]
    ft = ft_lines(rows)
    if ft:
        L += ["", "## Free-threaded", ""] + [f"- {x}" for x in ft]
    if meta.get("ft_missing"):
        L += ["", f"The free-threaded row did not run: {meta['ft_missing']}."]
    L += ["", "## The account: what a request costs each thread", "",
          "Per request, medians over the runs used: the loop (cserve's loop thread, Granian's tokio thread), "
          "the threads that run Python (cserve's pool threads; every thread of uWSGI and gunicorn, which do "
          "their own I/O; Granian's Python threads), cserve's other threads, the client. CPU µs on CPU; "
          "vol: voluntary switches (blocks, each a wake-up); invol: preemptions. Run delay: µs the server's "
          "threads were runnable and waiting for a CPU. Idle cores: the machine's, over the window.", ""]
    L += account_table(rows)
    gap = gap_lines(rows)
    if gap:
        L += ["", "Where the CPU went:", ""] + [f"- {x}" for x in gap]
    dist = sum(r["disturbed_runs"] for r in rows.values())
    L += ["", f"Runs disturbed by other tenants: {dist} of {sum(r['runs'] for r in rows.values())} (each rerun "
          f"up to twice; a row's medians leave its disturbed runs out unless all were)."]
    by_row = {}
    for r in recs:
        c = r["config"]
        if r.get("server_cmd") and c.get("conns") == 64:
            by_row.setdefault(c.get("row") or c["server"], r["server_cmd"])
    if by_row:
        L += ["", "Commands (one app's, at 64 connections; the port differs per run):", ""]
        L += [f"- {k}: `{_relative(v, meta.get('root', ROOT))}`" for k, v in by_row.items()]
    return "\n".join(L) + "\n"


def _relative(cmd, root):
    return cmd.replace(root + "/", "")


def brief(meta, recs, link, servers=True):
    """The goals and (servers) the compact table of every server, for the
    paper and docs/results.md; link: where the full table is, relative to
    the reader."""
    rows = summarise(recs)
    L = [f"`{meta['command']}`, {meta['date']}, commit {meta['commit'][:7]}"
         f"{' (dirty tree)' if meta.get('dirty') else ''}, {meta['machine'].get('nproc')} vCPUs "
         f"({meta['machine'].get('cpu_model')}); {meta['rounds']} interleaved rounds, `wrk -t1` at 16, 64 and "
         f"256 connections. Every server with {WORKERS} workers; Flask and Django on one thread per worker, the "
         f"I/O app ({IO_US // 1000} ms wait, the GIL released) on 16; uWSGI also with a thread per connection. "
         "Rate: median with a 95 % bootstrap interval [in brackets] from ten clean runs, else the range (in "
         "parentheses). CPU and switches per request: every server thread, from the kernel's counts. "
         + ("The account" if servers else "Every server's rate, p99, requests in flight, CPU and switches, the "
            "account") + f" per thread, p50/p90, RSS, steal and the commands: [{os.path.basename(link)}]({link}). "
         + GOALS_RULE, ""]
    L += goals_table(rows)
    io = io_line(meta, rows)
    if io:
        L += ["", io]
    gap = [x for x in gap_lines(rows) if ", c64:" in x]
    if gap:
        L += ["", "Where the CPU went, at 64 connections: " + " ".join(gap)]
    ft = ft_lines(rows)
    if ft:
        L += [""] + [" ".join(ft)]
    if servers:
        L += [""] + table(rows, compact=True)
    return "\n".join(L)


def write_report(out):
    meta, recs = entry.load(os.path.join(out, "production.jsonl"))
    md = markdown(meta, recs, meta.get("quick"))
    with open(os.path.join(out, "production.md"), "w") as f:
        f.write(md)
    with open(os.path.join(out, "production.brief.md"), "w") as f:
        f.write(brief_md(meta, recs))
    return md


def brief_md(meta, recs):
    """production.brief.md: what the paper includes (its title line is dropped
    there), so its link is written from paper/. The goals only: the table of
    every server would take the paper two pages; the link holds it."""
    return ("# The production shape, in brief\n\n<!-- generated by experiments/production.py; do not edit -->\n\n"
            + brief(meta, recs, "../experiments/results/production/production.md", servers=False) + "\n")


def readme_body(record, doc):
    """The generated block in docs/results.md."""
    meta, recs = entry.load(record)
    rel = os.path.relpath(os.path.join(os.path.dirname(record), "production.md"), os.path.dirname(doc))
    return brief(meta, recs, rel)


FULL, QUICK = (6, 3.0, 1.0), (1, 1.0, 0.5)   # rounds, window s, warm-up s


def parse_variants(items):
    """NAME=BINARY[,ARG...][@PLACEMENT] -> {NAME: (BINARY, [ARG...], PLACEMENT or None)}."""
    out = {}
    for it in items or ():
        name, _, rest = it.partition("=")
        rest, _, placement = rest.partition("@")
        parts = rest.split(",")
        if not name or not parts[0] or name in ROWS + ("baseline",) or \
                (placement and placement not in pinning.PLACEMENTS):
            raise SystemExit(f"production: --variant NAME=BINARY[,ARG...][@PLACEMENT], NAME not a row's: {it!r}")
        out[name] = (parts[0], parts[1:], placement or None)
    return out


def main():
    ap = entry.parser(__doc__, OUT, FULL, QUICK, "2 configurations once, short windows (plumbing)", "production")
    ap.add_argument("--readme", action="store_true", help="rewrite the generated blocks from the record")
    ap.add_argument("--apps", help="comma-separated of flask, django, io (default all)")
    ap.add_argument("--conns", help="comma-separated connection counts (default 16,64,256)")
    ap.add_argument("--rows", help=f"comma-separated of {', '.join(ROWS)} (default all)")
    ap.add_argument("--variant", action="append",
                    help="NAME=BINARY[,ARG...][@PLACEMENT]: another cserve row in every cell (a placement of "
                         "lib/pinning.py, e.g. per-worker)")
    ap.add_argument("--baseline", help="a git revision: cserve built from it, a row in every cell")
    a = ap.parse_args()
    if a.report:
        print(write_report(a.out))
        return 0
    if a.readme:
        for p in generated.write("production", os.path.join(a.out, "production.jsonl")):
            print(f"production: wrote the block in {os.path.relpath(p, ROOT)}")
        return 0
    entry.resolve(a)
    apps = [APP_KEYS[x] for x in a.apps.split(",")] if a.apps else None
    conns = [int(x) for x in a.conns.split(",")] if a.conns else None
    rows = a.rows.split(",") if a.rows else None
    if rows and set(rows) - set(ROWS):
        raise SystemExit(f"production: unknown rows {sorted(set(rows) - set(ROWS))}")
    variants = parse_variants(a.variant)
    build_noinst()
    baseline = build_baseline(a.baseline) if a.baseline else None
    meta_extra = {"baseline": a.baseline, "variants": {k: [b] + v + ([f"@{p}"] if p else [])
                                                       for k, (b, v, p) in variants.items()}}
    if not a.quick and (rows is None or "ft" in rows):
        os.makedirs(os.path.join(ROOT, "build-ft"), exist_ok=True)
        meta_extra["ft_missing"] = prepare_ft(os.path.join(ROOT, "build-ft", "production.log"))
        meta_extra["ft"] = ft_versions()
        meta_extra["gil_venv"] = ft_versions(GIL_VENV)
    todo = entry.runnable("production", plan(a.quick, apps, conns, rows, variants, baseline), label)
    meta_extra["io_sleep_us"] = io_sleep_us()
    meta, recs = entry.measure(a, "production", todo, per_run_extra=2.0, meta_extra=meta_extra)
    entry.write_records(os.path.join(a.out, "production.jsonl"), meta, recs)
    print(write_report(a.out))
    return entry.status(recs)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""The production shape: every server with two worker processes, as a team
deploys it, on three apps, against the same closed-loop client.

  servers  cserve (the uninstrumented build, ring handoff), Granian, gunicorn
           (gthread worker) and uWSGI (--http11-socket: keep-alive, under a
           master), each with 2 workers
  apps     Flask and Django (apps/flask_hello.py, apps/django_hello): one
           thread per worker, since the GIL runs their Python one thread at a
           time; and an app that waits on I/O (apps/gil_release.py, 1 ms of
           time.sleep with the GIL released: a database or upstream call) on
           16 threads per worker
  client   wrk -t1 -c64 --latency

    /usr/bin/python3 -m experiments.production [--quick] [--rounds 10] [--out DIR]
    /usr/bin/python3 -m experiments.production --report [--out DIR]   # the .md from the .jsonl
    /usr/bin/python3 -m experiments.production --readme               # the generated blocks

Per run: wrk's rate and latency percentiles (p50, p90, p99), its socket
errors and non-2xx responses; the server's CPU over all its processes and the
client's, from /proc; steal and foreign CPU in the window. Rounds are
interleaved and shuffled; a run whose window lost more than 0.05 core to
steal and foreign CPU is rerun up to twice, then kept and marked
(lib/probe.py). Ten rounds give each row a 95 % bootstrap interval
(lib/stats.py; fewer rounds print ranges). Writes DIR/production.jsonl (a
provenance line, then one line per run) and DIR/production.md.
Full: 10 rounds of 12 configurations, ~15 min plus reruns; --quick: the
I/O app on cserve and Granian once, plumbing only.
"""
import os
import sys

from experiments.lib import configs, entry, generated, model, probe, stats
from experiments.lib.serverctl import ROOT, app_spec

OUT = os.path.join(ROOT, "experiments", "results", "production")
SERVERS = ("cserve", "granian", "gunicorn", "uwsgi")
WORKERS = 2
IO_US = 1000            # the I/O app's wait per request
APPS = (("flask", 1), ("django", 1), (f"gil-sleep{IO_US}", 16))  # (app, threads per worker)
CONNS = 64
NOINST = configs.NOINST


def cfg(server, app, bt):
    c = {"server": server, "app": app, "bt": bt, "workers": WORKERS, "conns": CONNS, "client": "wrk",
         "wrk_threads": 1, "path": app_spec(app)[2]}
    if server == "cserve":
        c.update(handoff="ring", binary=NOINST)
    return c


def app_name(app):
    return f"I/O wait ({IO_US // 1000} ms, GIL released)" if app.startswith("gil-sleep") else app.capitalize()


def plan(quick):
    if quick:
        app, bt = APPS[2]
        return [cfg(s, app, bt) for s in ("cserve", "granian")]
    return [cfg(s, app, bt) for app, bt in APPS for s in SERVERS]


# ------------------------------------------------------------------ the report

def extra(rec):
    """p90, and the requests in flight by Little's law: the rate times the
    mean latency. A closed-loop client keeps one request per connection in
    flight, so a server that serves all of them shows about the connection
    count; one that serves a few connections while the rest wait, fewer."""
    lat = rec.get("latency") or {}
    rate, avg = rec.get("rps_wrk"), lat.get("avg_us")
    return {"p90_us": lat.get("p90_us"), "non_2xx": lat.get("non_2xx"),
            "in_flight": rate * avg / 1e6 if rate and avg else None}


def summarise(recs):
    """label -> probe.summarise's row, plus the rate's median and interval over
    the clean runs (a 95 % bootstrap CI from ten up, else the range), the
    clean runs' rates (for ratios) and p90."""
    rows = probe.summarise(recs, extra=extra)
    by = {}
    for r in recs:
        by.setdefault(r["label"], []).append(r)
    for lab, row in rows.items():
        ok = [r for r in by[lab] if "error" not in r]
        use = [r for r in ok if not r.get("disturbed")] or ok
        row["rates"] = [r["rps_wrk"] for r in use if r.get("rps_wrk")]
        row["rate_ci"] = stats.median_ci(row["rates"])
        row["sock_err_max"] = max((model.socket_errors(r) or 0 for r in use), default=None)
        row["non_2xx_max"] = max(((r.get("latency") or {}).get("non_2xx") or 0 for r in use), default=None)
    return rows


def _ms(us):
    if us is None:
        return "—"
    return f"{us / 1000:.2f}" if us < 10000 else f"{us / 1000:.1f}" if us < 100000 else f"{us / 1000:,.0f}"


def _interval(ci, fmt):
    m, lo, hi = ci
    if m is None:
        return "—"
    return f"{fmt.format(m)} ({fmt.format(lo)}–{fmt.format(hi)})" if lo is not None else fmt.format(m)


def ratio_text(num, den):
    r, lo, hi = stats.ratio_ci(num, den)
    if r is None:
        return "—"
    kind = stats.interval_kind(len(num), len(den))
    return f"{r:.2f}× [{lo:.2f}, {hi:.2f}]" if kind == "CI" else f"{r:.2f}× ({lo:.2f}–{hi:.2f})"


def by_app(rows):
    """[(app, {server: row})] in the plan's order."""
    out = {}
    for c in plan(False) + plan(True):
        lab = configs.label(c)
        if lab in rows:
            out.setdefault(c["app"], {})[c["server"]] = rows[lab]
    return list(out.items())


def findings(rows):
    """Per app: the servers by rate, and each peer against cserve by the
    ratio of medians with its interval; 'separated' where the interval
    leaves out 1."""
    out = []
    for app, srv in by_app(rows):
        ranked = sorted((s for s in srv if srv[s]["rates"]), key=lambda s: -srv[s]["rps_wrk"])
        if not ranked:
            continue
        parts = []
        cs = srv.get("cserve")
        for s in ranked:
            if s == "cserve" or not cs or not cs["rates"]:
                continue
            r, lo, hi = stats.ratio_ci(cs["rates"], srv[s]["rates"])
            kind = stats.interval_kind(len(cs["rates"]), len(srv[s]["rates"]))
            sep = "apart" if (lo > 1 or hi < 1) else "not apart"
            parts.append(f"cserve ÷ {s} {r:.2f}× ({kind} {lo:.2f}–{hi:.2f}: {sep})")
        out.append(f"{app_name(app)}: by rate {', '.join(ranked)}" + (f"; {'; '.join(parts)}" if parts else "")
                   + ".")
    return out


def table(rows, compact=False):
    if compact:
        L = ["| app | server | rate (range or [95 % CI]) | cserve ÷ it | p50 / p99 ms | in flight | socket errors |",
             "|---|---|---:|---:|---:|---:|---:|"]
    else:
        L = ["| app | server | runs used | rate: median (range) or [95 % CI] | cserve ÷ it | p50 / p90 / p99 ms "
             "| in flight | server cores | client cores | socket errors (max) | non-2xx (max) | steal + foreign |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for app, srv in by_app(rows):
        cs = srv.get("cserve")
        for s in SERVERS:
            r = srv.get(s)
            if r is None:
                continue
            if r["regime"] == "error" or not r["rates"]:
                L.append(f"| {app_name(app)} | {s} | error |" + " |" * (4 if compact else 9))
                continue
            m, lo, hi = r["rate_ci"]
            kind = stats.interval_kind(len(r["rates"]))
            rate = f"{m:,.0f} [{lo:,.0f}, {hi:,.0f}]" if kind == "CI" else f"{m:,.0f} ({lo:,.0f}–{hi:,.0f})"
            ratio = "—" if s == "cserve" or not cs else ratio_text(cs["rates"], r["rates"])
            mark = " †" if r["all_disturbed"] else ""
            if compact:
                L.append(f"| {app_name(app)} | {s}{mark} | {rate} | {ratio} | {_ms(r['p50_us'])} / {_ms(r['p99_us'])} "
                         f"| {probe_num(r['in_flight'], '{:.0f}')} | {r['sock_err_max']:,} |")
            else:
                lost = (r["steal"] or 0) + (r["foreign"] or 0)
                L.append(f"| {app_name(app)} | {s}{mark} | {r['used']} of {r['runs']} | {rate} | {ratio} | "
                         f"{_ms(r['p50_us'])} / {_ms(r['p90_us'])} / {_ms(r['p99_us'])} | "
                         f"{probe_num(r['in_flight'], '{:.0f}')} | {probe_num(r['cores'])} | "
                         f"{probe_num(r['client_cores'])} | {r['sock_err_max']:,} | {r['non_2xx_max']:,} | {lost:.2f} |")
    return L


def probe_num(x, fmt="{:.2f}"):
    return "—" if x is None else fmt.format(x)


def markdown(meta, recs, quick):
    rows = summarise(recs)
    L = ["# The production shape: two workers each, Flask, Django and an I/O-bound app", ""]
    if quick:
        L += ["**Smoke run, not a measurement** (`--quick`: one round, short windows, on whatever else the "
              "machine was doing).", ""]
    L += [probe.meta_line(meta), "",
          f"Every server with {WORKERS} worker processes; Flask and Django on one thread per worker, the I/O "
          f"app ({IO_US // 1000} ms of `time.sleep`, the GIL released) on 16 threads per worker. cserve is the "
          "uninstrumented build with the ring handoff; uWSGI runs `--http11-socket` (keep-alive) under a "
          "master; gunicorn the gthread worker. Client: `wrk -t1 -c64 --latency`, the rate is wrk's. "
          f"{meta['rounds']} interleaved, shuffled rounds; {meta['warmup']} s warm-up, {meta['duration']} s "
          f"window per run. A run that lost more than {model.DISTURB_LIMIT} core to steal and foreign CPU "
          "was rerun up to twice, then kept and marked (†: every run of the row was disturbed; the medians "
          "are then over those). Rates: median with a 95 % bootstrap interval from ten clean runs up "
          "(in brackets), else the range (in parentheses); cserve ÷ it: the ratio of the medians, its "
          "interval the same way. Latency and cores: medians over the runs used. In flight: the rate "
          "times wrk's mean latency (Little's law), the requests the server had at once; with one "
          f"request per connection it is about {CONNS} when every connection is served, fewer when "
          "some wait while others are served. The server's cores are summed over all its processes "
          "and threads.", ""]
    L += table(rows)
    f = findings(rows)
    if f:
        L += ["", "**Findings.** " + " ".join(f)]
    dist = sum(r["disturbed_runs"] for r in rows.values())
    L += ["", f"Runs disturbed by other tenants: {dist} of {sum(r['runs'] for r in rows.values())} (each rerun "
          f"up to twice; a row's medians leave its disturbed runs out unless all were)."]
    # One command line per server, the I/O app's where it ran (the port differs per run).
    by_srv = {}
    for r in recs:
        if r.get("server_cmd") and (r["config"]["app"].startswith("gil-sleep") or r["config"]["server"] not in by_srv):
            by_srv[r["config"]["server"]] = r["server_cmd"]
    if by_srv:
        L += ["", "Commands (the I/O app's; the port differs per run):", ""]
        L += [f"- {s}: `{_relative(by_srv[s], meta.get('root', ROOT))}`" for s in SERVERS if s in by_srv]
    return "\n".join(L) + "\n"


def _relative(cmd, root):
    return cmd.replace(root + "/", "")


def brief(meta, recs, link):
    """The compact table and the findings, for the paper and docs/results.md; link:
    where the full table is, relative to the reader."""
    rows = summarise(recs)
    L = [f"`{meta['command']}`, {meta['date']}, commit {meta['commit'][:7]}"
         f"{' (dirty tree)' if meta.get('dirty') else ''}, {meta['machine'].get('nproc')} vCPUs "
         f"({meta['machine'].get('cpu_model')}); {meta['rounds']} interleaved rounds, `wrk -t1 -c64`. Every "
         f"server with {WORKERS} workers; Flask and Django on one thread per worker, the I/O app "
         f"({IO_US // 1000} ms wait, the GIL released) on 16. Rate: median with a 95 % bootstrap interval "
         "[in brackets] from ten clean runs, else the range (in parentheses). In flight: rate × mean "
         f"latency, about {CONNS} when every connection is served. p90, cores, steal and the "
         f"commands: [{os.path.basename(link)}]({link}).", ""]
    L += table(rows, compact=True)
    f = findings(rows)
    if f:
        L += ["", " ".join(f)]
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
    there), so its link is written from paper/."""
    return ("# The production shape, in brief\n\n<!-- generated by experiments/production.py; do not edit -->\n\n"
            + brief(meta, recs, "../experiments/results/production/production.md") + "\n")


def readme_body(record, doc):
    """The generated block in docs/results.md."""
    meta, recs = entry.load(record)
    rel = os.path.relpath(os.path.join(os.path.dirname(record), "production.md"), os.path.dirname(doc))
    return brief(meta, recs, rel)


FULL, QUICK = (10, 3.0, 1.0), (1, 1.0, 0.5)   # rounds, window s, warm-up s


def main():
    ap = entry.parser(__doc__, OUT, FULL, QUICK, "2 configurations once, short windows (plumbing)", "production")
    ap.add_argument("--readme", action="store_true", help="rewrite the generated blocks from the record")
    a = ap.parse_args()
    if a.report:
        print(write_report(a.out))
        return 0
    if a.readme:
        for p in generated.write("production", os.path.join(a.out, "production.jsonl")):
            print(f"production: wrote the block in {os.path.relpath(p, ROOT)}")
        return 0
    entry.resolve(a)
    todo = entry.runnable("production", plan(a.quick), configs.label)
    meta, recs = entry.measure(a, "production", todo, per_run_extra=2.0)
    entry.write_records(os.path.join(a.out, "production.jsonl"), meta, recs)
    print(write_report(a.out))
    return entry.status(recs)


if __name__ == "__main__":
    sys.exit(main())

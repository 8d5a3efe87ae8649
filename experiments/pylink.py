#!/usr/bin/python3
"""What the shared libpython costs: the production shape (production.py,
two workers, wrk -t1 -c64) on Flask and Django, the uninstrumented cserve
of the default build (the system's shared libpython3.X.so, row cserve)
against the same sources built with PYTHON_LINK=static (row static), in
interleaved, shuffled rounds.

    /usr/bin/python3 -m experiments.pylink [--rounds 5] [--duration 3]   # build both, measure
    /usr/bin/python3 -m experiments.pylink --readme                      # the block in docs/python.md

Builds build-noinst/cserve and build-static-noinst/cserve, checks that each
binary's --version says the link it is meant to have, then runs
experiments.production with the static build as a --variant, into
results/production-pylink/ (production.jsonl and production.md, beside the
prediction committed before the run).
"""
import argparse
import os
import subprocess
import sys

from experiments import production
from experiments.lib import generated, model, stats
from experiments.lib.serverctl import ROOT

OUT = os.path.join(ROOT, "experiments", "results", "production-pylink")
RECORD = os.path.join(OUT, "production.jsonl")
BUILDS = {  # row -> (binary, make variables, the link its --version must name)
    "cserve": (production.NOINST, ["BUILD=build-noinst", "INSTRUMENTS=0"], "shared"),
    "static": ("build-static-noinst/cserve", ["BUILD=build-static-noinst", "INSTRUMENTS=0", "PYTHON_LINK=static"],
               "static"),
}
APPS = "flask,django"
CONNS = 64


def build():
    for binary, knobs, link in BUILDS.values():
        subprocess.run(["make", "-s", "-j2", *knobs, binary], cwd=ROOT, check=True)
        v = subprocess.run([os.path.join(ROOT, binary), "--version"], capture_output=True, text=True).stdout
        if f"libpython {link}" not in v:
            sys.exit(f"pylink: {binary} is not linked {link}: {v.strip()}")


def readme_body(record, doc):
    """The block in docs/python.md: per app, each link's rate, p50, p99,
    server CPU per request and lost CPU, and the shared build's rate over
    the static one's."""
    meta, recs = production.entry.load(record)
    rows = production.summarise(recs)
    disturbed = sum(1 for r in recs if r.get("disturbed"))
    # A record most of whose runs lost CPU to other work resolves little: say so where it is shown.
    shared = ", a guest shared with other work while it ran: a pilot" if 2 * disturbed > len(recs) else ""
    L = [f"`{meta['command']}`, {meta['date']}, commit {meta['commit'][:7]}"
         f"{' (dirty tree)' if meta.get('dirty') else ''}, {meta['machine'].get('nproc')} vCPUs "
         f"({meta['machine'].get('cpu_model')}){shared}. "
         f"{meta['rounds']} interleaved, shuffled rounds of {meta.get('duration', '?')} s windows; "
         f"{production.WORKERS} workers of one thread, `wrk -t1 -c{CONNS}`. Runs disturbed by other "
         f"tenants (more than {model.DISTURB_LIMIT} core lost): {disturbed} of {len(recs)}. "
         "Rate: median (min–max) over the clean runs, or over all where none was clean; p50, p99 and server CPU per request: medians; lost: steal and foreign CPU in the "
         "window (/proc/stat), % of one core. shared ÷ static: the ratio of the rates, (range) over the runs' "
         "pairs. Full tables: [production.md](" +
         os.path.relpath(os.path.join(os.path.dirname(record), "production.md"), os.path.dirname(doc)) + ").", "",
         "| app | libpython | rate /s | p50 ms | p99 ms | server CPU µs/req | lost | shared ÷ static |",
         "|---|---|---:|---:|---:|---:|---:|---:|"]
    for (app, _conns), srv in production.cells(rows):
        sh, st = srv.get("cserve"), srv.get("static")
        for name, r in (("shared", sh), ("static", st)):
            if not r:
                continue
            cpu = stats.median(r["cpus"]) if r["cpus"] else None
            lost = ((r["steal"] or 0) + (r["foreign"] or 0)) * 100
            ratio = production.ratio_text(sh["rates"], st["rates"]) if name == "shared" and sh and st else ""
            L.append(f"| {production.app_name(app)} | {name} | {production.rate_text(r)} | "
                     f"{production._ms(r['p50_us'])} | {production._ms(r['p99_us'])} | "
                     f"{production.num(cpu, '{:,.0f}')} | {lost:.1f} % | {ratio} |")
    return "\n".join(L)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--readme", action="store_true", help="rewrite the block in docs/python.md from the record")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=3.0)
    a = ap.parse_args()
    if a.readme:
        for p in generated.write("pylink", RECORD):
            print(f"pylink: wrote the block in {os.path.relpath(p, ROOT)}")
        return 0
    build()
    cmd = [sys.executable, "-m", "experiments.production", "--apps", APPS, "--conns", str(CONNS),
           "--rows", "cserve", "--variant", f"static={BUILDS['static'][0]}", "--rounds", str(a.rounds),
           "--duration", str(a.duration), "--out", OUT]
    return subprocess.run(cmd, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())

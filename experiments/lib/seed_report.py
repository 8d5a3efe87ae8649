"""experiments/results/seed/seed.md: the seed note's tables (lib/seed_claims.py,
quoted) beside cserve's and Granian's measured on the same shapes
(experiments/seed.py's records), and a verdict on each of the note's claims,
computed from the records.

Verdict rules (each stated in the .md beside its verdict):
  a stage is saturated at >= model.SAT of a core;
  a rate ratio matches the note when it lies within RATIO_TOL of the note's
  figure (its range widened by RATIO_TOL each side);
  a cost in µs matches the note within a factor of COST_FACTOR either way;
  the ring "saves most" of the handoff when its handoff µs (loop + pool)
  are at most SAVE_SHARE of dgram's.
A claim that rests on the note's regime (a server thread saturated: its
loop, with slack on the Python thread) is tested only where that regime is
reproduced here: where the client or the machine set the rate instead, or
nothing saturated, the claim is "not reproduced here", never
"contradicted"; it is contradicted where a server thread other than the one
it names is the bound. Over several connection counts: "confirmed" where
every tested count agrees, "contradicted" where none does, "partly
confirmed" between, each saying at how many counts it was tested; "not
reproduced here" where the regime held at none; "not comparable" where the
claim's premise does not hold here (dgram already as fast as the note's
target); "not measured" where the record lacks the figure (a profile
skipped without perf, a quick run's missing rows). Costs (µs per request)
do not rest on a regime and are judged as measured."""
from . import model, seed_claims as S

RATIO_TOL = 0.10
COST_FACTOR = 2.0
SAVE_SHARE = 0.5
SAT = model.SAT

NAMES = {"ring": "cserve ring, 1 blocking thread", "dgram": "cserve dgram, 1 blocking thread",
         "granian": "Granian, 1 worker, 1 blocking thread", "native": "cserve native-hello, no Python",
         "inline": "cserve --inline (app on the loop)"}
SEED_ROW = {"dgram": "pool", "granian": "granian", "native": "native", "inline": "inline"}


def pct(x):
    return "—" if x is None else f"{100 * x:.0f} %"


def num(x, fmt="{:.2f}"):
    return "—" if x is None else fmt.format(x)


def krps(x):
    return "—" if x is None else f"{x / 1000:.1f}k"


def row(rows, kind, conns):
    r = rows.get(f"{kind} c{conns}")
    return r if r and r.get("regime") != "error" else None


def conns_of(rows):
    return sorted({r["config"]["conns"] for r in rows.values()})


def ratio(a, b):
    """a's rate over b's, both by wrk (the same instrument for every server)."""
    if not a or not b or not a.get("rps_wrk") or not b.get("rps_wrk"):
        return None
    return a["rps_wrk"] / b["rps_wrk"]


# ------------------------------------------------------------------ profiles

def prof_threads(profs, name):
    """(I/O thread split, Python thread split) of the profile `name`, or (None, None)."""
    p = next((p for p in profs if p.get("name") == name and "error" not in p), None)
    if not p or not p.get("threads"):
        return None, None
    th = {k: v for k, v in p["threads"].items() if v}
    io = next((v for k, v in th.items() if k.startswith(("cserve-loop", "tokio"))), None)
    others = [v for k, v in th.items() if not k.startswith(("cserve-loop", "tokio", "wrk"))]
    py = max(others, key=lambda v: v.get("cpu_s", 0)) if others else None
    return io, py


def total(split):
    return None if not split else sum(split.get(k, 0) for k in ("recv", "send", "epoll", "handoff", "user",
                                                                  "kernel other"))


# ------------------------------------------------------------------ verdicts

NOT_TESTED = "the note's regime (a server thread saturated) was not reproduced: "
NOT_REPRODUCED = "not reproduced here"
SERVER_STAGES = ("loop-bound", "pool-bound", "pool+client-bound")


def combine(per):
    """[(conns, verdict)] -> one verdict over the connection counts. Counts
    where the claim could not be tested ("n/a": its premise fails; "not
    reproduced": the note's regime does not hold) are left out; the rest
    decide, and the verdict says how many counts that was when some were."""
    vs = [v for _, v in per if v in ("confirmed", "contradicted")]
    if not per:
        return "not measured"
    if not vs:
        return NOT_REPRODUCED if any(v == "not reproduced" for _, v in per) else "not comparable"
    of = f" (at {len(vs)} of {len(per)} connection counts)" if len(vs) < len(per) else ""
    if all(v == "confirmed" for v in vs):
        return "confirmed" + of
    if all(v == "contradicted" for v in vs):
        return "contradicted" + of
    return "partly confirmed" + of


def bound_verdict(r, stage):
    """Whether a row bears out "stage is the bound, the other thread has
    slack": confirmed when that stage saturated (first or beside another)
    and the Python thread did not; contradicted when another server stage
    bound it; "not reproduced" when no server stage saturated (the client
    or the machine set the rate, or nothing saturated: which thread bounds
    the server is then not tested); "n/a" when a figure is missing."""
    if r.get("io") is None or r.get("py") is None:
        return "n/a"
    regimes = [r["regime"]] + list(r.get("regime_also") or [])
    if f"{stage}-bound" in regimes:
        return "confirmed" if r["py"] < SAT else "contradicted"
    if any(x in SERVER_STAGES for x in regimes):
        return "contradicted"
    return "not reproduced"


def regime_reproduced(r):
    """Does the row hold the note's regime: the loop saturated?"""
    return bool(r) and model.saturated(r, "loop-bound")


def why_row(r):
    """What bound a row here, in words from its record."""
    if not r:
        return "no record"
    also = f" (also {', '.join(r['regime_also'])})" if r.get("regime_also") else ""
    return (f"{r['regime']}{also}: idle {num(r['idle'])} core, client {num(r.get('client_cores'))} cores, "
            f"steal + foreign {num((r.get('steal') or 0) + (r.get('foreign') or 0))}")


# Each verdict constant moved both ways: the verdicts that change with it
# are named in seed.md, so none rests on where one line was drawn unseen.
SWEEP = {"RATIO_TOL": (0.05, 0.20), "COST_FACTOR": (1.5, 3.0), "SAVE_SHARE": (1 / 3, 2 / 3)}


def verdicts(rows, profs, meta, RATIO_TOL=RATIO_TOL, COST_FACTOR=COST_FACTOR, SAVE_SHARE=SAVE_SHARE):
    """[(key, claim, the seed's figure, here, verdict, why)] for every claim in
    seed_claims.CLAIMS; the rules' constants default to the module's."""
    cs = conns_of(rows)
    claims = dict(S.CLAIMS)
    out = []

    # The pooled server's loop saturated, its Python thread not.
    per, here, why = [], [], []
    for c in cs:
        for k in ("dgram", "ring"):
            r = row(rows, k, c)
            if not r or r.get("io") is None:
                continue
            v = bound_verdict(r, "loop")
            per.append((c, v))
            here.append(f"{k} c{c}: loop {pct(r['io'])}, pool {pct(r.get('py'))}")
            if v != "confirmed":
                why.append(f"{k} c{c} {why_row(r)}")
    seed_fig = "; ".join(f"c{c}: loop {pct(v['pool'][1])}, pool {pct(v['pool'][2])}" for c, v in S.BY_CONNS.items())
    out.append(("loop_saturated", claims["loop_saturated"], seed_fig, "; ".join(here) or "—", combine(per),
                NOT_TESTED + "; ".join(why) if why else "the loop saturated with slack on the pool, as in the note"))

    # Granian's I/O thread saturated, its blocking thread not.
    per, here, why = [], [], []
    for c in cs:
        r = row(rows, "granian", c)
        if not r or r.get("io") is None:
            continue
        v = bound_verdict(r, "loop")
        per.append((c, v))
        here.append(f"c{c}: I/O {pct(r['io'])}, Python {pct(r.get('py'))}")
        if v != "confirmed":
            why.append(f"c{c} {why_row(r)}")
    seed_fig = "; ".join(f"c{c}: I/O {pct(v['granian'][1])}, Python {pct(v['granian'][2])}"
                         for c, v in S.BY_CONNS.items())
    out.append(("granian_io_saturated", claims["granian_io_saturated"], seed_fig, "; ".join(here) or "—",
                combine(per), NOT_TESTED + "; ".join(why) if why else "as in the note"))

    # The pooled server's rate over Granian's: the note's, with its loop
    # saturated; where the pooled row's loop is not, the rate is another
    # stage's and the ratio says nothing of the note's.
    lo, hi = S.RATIO_RANGE[0] - RATIO_TOL, S.RATIO_RANGE[1] + RATIO_TOL
    per, here = [], []
    for c in cs:
        x = ratio(row(rows, "dgram", c), row(rows, "granian", c))
        if x is None:
            continue
        if not regime_reproduced(row(rows, "dgram", c)):
            per.append((c, "not reproduced"))
        else:
            per.append((c, "confirmed" if lo <= x <= hi else "contradicted"))
        here.append(f"c{c}: dgram {x:.2f}× ({row(rows, 'dgram', c)['regime']})")
    out.append(("ratio", claims["ratio"], f"{S.RATIO_RANGE[0]:.2f}–{S.RATIO_RANGE[1]:.2f}×",
                "; ".join(here) or "—", combine(per),
                f"the rule: a match is within {lo:.2f}–{hi:.2f}× (the note's range ± {RATIO_TOL:.2f}), tested where "
                "the dgram row's loop saturated, as in the note; dgram is the note's handoff; rates by wrk for "
                "both servers; cserve's rows are its instrumented build"))

    # The dgram handoff's cost on each side.
    io, py = prof_threads(profs, "dgram")
    d = row(rows, "dgram", 64) or next((row(rows, "dgram", c) for c in cs if row(rows, "dgram", c)), None)
    sc = (f"; {num(d.get('loop_sc'))} handoff syscalls a request on the loop, {num(d.get('pool_sc'))} on the pool"
          if d and d.get("loop_sc") is not None else "")
    if io and py:
        lo_ok = 1 / COST_FACTOR <= io["handoff"] / S.LOOP_US["pool"]["handoff"] <= COST_FACTOR
        po_ok = 1 / COST_FACTOR <= py["handoff"] / S.POOL_US["pool"]["handoff"] <= COST_FACTOR
        v = "confirmed" if lo_ok and po_ok else "contradicted" if not (lo_ok or po_ok) else "partly confirmed"
        here = f"loop {io['handoff']:.2f} µs, pool {py['handoff']:.2f} µs (c64 profile){sc}"
        why = f"the rule: a match is within a factor of {COST_FACTOR:g} either way; a different kernel and machine price the syscalls"
    else:
        v, here, why = "not measured", "no dgram profile" + sc, "perf profile missing"
    out.append(("dgram_cost", claims["dgram_cost"],
                f"loop {S.LOOP_US['pool']['handoff']:.2f} µs, pool {S.POOL_US['pool']['handoff']:.2f} µs",
                here, v, why))

    # The bridge cheaper than Granian's crossing (the Python thread's user space).
    _, rpy = prof_threads(profs, "ring")
    _, gpy = prof_threads(profs, "granian")
    if rpy and gpy:
        v = "confirmed" if rpy["user"] < gpy["user"] else "contradicted"
        here = f"cserve pool {rpy['user']:.2f} µs, Granian's Python thread {gpy['user']:.2f} µs (user space, c64)"
        why = ("both on CPython " + str(((meta or {}).get("machine") or {}).get("versions", {}).get("cpython"))
               + " here; user space of the Python thread includes the interpreter's own work in both")
    else:
        v, here, why = "not measured", "a ring or Granian profile is missing", "perf profile missing"
    out.append(("bridge_cheaper", claims["bridge_cheaper"],
                f"{S.POOL_US['pool']['user']:.1f} against {S.POOL_US['granian']['user']:.1f} µs", here, v, why))

    # The ring saves most of the handoff.
    rio, rpy = prof_threads(profs, "ring")
    dio, dpy = prof_threads(profs, "dgram")
    if rio and rpy and dio and dpy:
        r_h, d_h = rio["handoff"] + rpy["handoff"], dio["handoff"] + dpy["handoff"]
        v = "confirmed" if d_h > 0 and r_h <= SAVE_SHARE * d_h else "contradicted"
        here = (f"ring loop {rio['handoff']:.2f} + pool {rpy['handoff']:.2f} µs against dgram "
                f"{dio['handoff']:.2f} + {dpy['handoff']:.2f} µs")
        why = f"the rule: it saves most when the ring's handoff µs are at most {SAVE_SHARE:.0%} of dgram's"
    else:
        v, here, why = "not measured", "ring or dgram profile missing", "perf profile missing"
    out.append(("ring_saves", claims["ring_saves"], "a prediction (not measured in the note)", here, v, why))

    # The ring's row against Granian.
    # The note predicts a gain: from its pooled row's 0.73-0.76x to about
    # 0.9x. Where dgram is already there, the ring cannot show that gain.
    per, here = [], []
    for c in cs:
        x = ratio(row(rows, "ring", c), row(rows, "granian", c))
        d = ratio(row(rows, "dgram", c), row(rows, "granian", c))
        if x is None:
            continue
        if d is not None and d >= 0.9 - RATIO_TOL:
            per.append((c, "n/a"))
        elif not regime_reproduced(row(rows, "dgram", c)):
            per.append((c, "not reproduced"))
        else:
            per.append((c, "confirmed" if x >= 0.9 - RATIO_TOL else "contradicted"))
        here.append(f"c{c}: ring {x:.2f}×" + (f" (dgram {d:.2f}×)" if d is not None else ""))
    out.append(("ring_ratio", claims["ring_ratio"], "about 0.9× (a prediction)", "; ".join(here) or "—",
                combine(per), f"the rule: met when at least {0.9 - RATIO_TOL:.2f}×, tested only where dgram, "
                "the note's starting point, is below it (where dgram is already there, the ring has no gap "
                "to close) and its loop saturated, as in the note"))

    # With the ring, the pool the bound.
    per, here, why = [], [], []
    for c in cs:
        r = row(rows, "ring", c)
        if not r:
            continue
        here.append(f"c{c}: loop {pct(r.get('io'))}, pool {pct(r.get('py'))}, {r['regime']}")
        if model.saturated(r, "pool-bound"):
            per.append((c, "confirmed"))
        elif model.saturated(r, "loop-bound"):
            per.append((c, "contradicted"))
        else:
            per.append((c, "not reproduced"))
            why.append(f"c{c} {why_row(r)}")
    out.append(("pool_next", claims["pool_next"], "a prediction (not measured in the note)",
                "; ".join(here) or "—", combine(per),
                ("no server thread saturates, so which one bounds is not tested: " + "; ".join(why)) if why
                else "the ring row's saturated stage"))
    return out


# ------------------------------------------------------------------ markdown

def sensitivity(rows, profs, meta):
    """[(constant, value, [(claim key, verdict at the rule's value, verdict
    at this one)])] for each constant of SWEEP moved to each of its values."""
    base = {k: v for k, *_, v, _ in verdicts(rows, profs, meta)}
    out = []
    for name, values in SWEEP.items():
        for x in values:
            got = {k: v for k, *_, v, _ in verdicts(rows, profs, meta, **{name: x})}
            out.append((name, x, [(k, base[k], got[k]) for k in base if got[k] != base[k]]))
    return out


def platform_line(meta):
    m = (meta or {}).get("machine") or {}
    v = m.get("versions") or {}
    P = S.PLATFORM
    return (f"The note measured on an {P['machine']} under {P['os']} ({P['poller']}), CPython {P['cpython']}, "
            f"Granian {P['granian']}, {P['client']}. Here: {m.get('cpu_model')}, {m.get('nproc')} vCPUs shared "
            f"by the server and the client, Linux {m.get('kernel')} (epoll), CPython {v.get('cpython')}, "
            f"Granian {v.get('granian')}; the same wrk shape (-t2, browser-like head). cserve's rows are its "
            "instrumented build (its per-thread window needs it).")


def markdown(meta, rows, profs):
    cs = conns_of(rows)
    L = ["# The seed's claims, measured here", ""]
    if (meta or {}).get("quick"):
        L += ["**Smoke run, not a measurement** (`--quick`: one round at c64, short windows and profiles, on "
              "whatever else the machine was doing).", ""]
    from . import probe
    L += [f"The seed is {S.NOTE}, about m0serve, a WSGI server in Mojo with the same design as cserve: one "
          "event-loop thread for sockets and HTTP, Python on a pool thread, a handoff between them (two datagram "
          "socketpairs). Its figures below are quoted from it (experiments/lib/seed_claims.py); the others are "
          "measured here by `experiments/seed.py` on the same shapes.", "",
          platform_line(meta), "", probe.meta_line(meta or {}), "",
          f"{(meta or {}).get('rounds')} interleaved, shuffled rounds; {(meta or {}).get('duration')} s windows. "
          "Medians over the clean runs (a run losing more than "
          f"{model.DISTURB_LIMIT} core to steal and foreign CPU was rerun up to twice, then kept and marked †).", ""]

    # Per thread at the note's connection count.
    c0 = 16 if 16 in cs else (cs[0] if cs else None)
    L += [f"**Per thread, {c0} connections** (the note's table at 16 connections):", "",
          "| server | note: rps | note: I/O / Python | here: rps | here: I/O / Python | here: cores | here: regime |",
          "|---|---:|---:|---:|---:|---:|---|"]
    for k in ("dgram", "ring", "granian", "native", "inline"):
        r = row(rows, k, c0) if c0 else None
        s = S.PER_THREAD_C16.get(SEED_ROW.get(k, ""))
        sv = (krps(s["rps"]), f"{pct(s['io'])} / {pct(s['py'])}") if s else ("—", "—")
        hv = (krps(r["rps_wrk"]), f"{pct(r.get('io'))} / {pct(r.get('py'))}", num(r.get("cores")),
              f"{r['regime']} ({r['regime_n']}/{r['regime_of']})") if r else ("—",) * 4
        L.append(f"| {NAMES[k]}{' †' if r and r['all_disturbed'] else ''} | {sv[0]} | {sv[1]} | " + " | ".join(hv) + " |")
    L += ["", "The note's pooled row is m0serve with its datagram handoff, set beside cserve's dgram; the ring "
          "row is the design the note proposes. I/O is the loop (Granian: its tokio thread), Python the pool "
          "thread (Granian: its blocking thread); inline and native have one thread. Rates by wrk.", ""]

    # Over connections.
    L += ["**Over connections** (rate, and the I/O / Python threads' share of a core):", "",
          "| connections | note: pooled / Granian | here: dgram | here: ring | here: Granian | dgram ÷ Granian "
          "| ring ÷ Granian |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for c in sorted(set(cs) | set(S.BY_CONNS)):
        s = S.BY_CONNS.get(c)
        sv = f"{krps(s['pool'][0])} / {krps(s['granian'][0])} ({s['pool'][0] / s['granian'][0]:.2f}×)" if s else "—"
        cells = []
        for k in ("dgram", "ring", "granian"):
            r = row(rows, k, c)
            cells.append(f"{krps(r['rps_wrk'])} ({pct(r.get('io'))} / {pct(r.get('py'))})" if r else "—")
        rd, rr = ratio(row(rows, "dgram", c), row(rows, "granian", c)), ratio(row(rows, "ring", c),
                                                                             row(rows, "granian", c))
        L.append(f"| {c} | {sv} | " + " | ".join(cells) + f" | {num(rd, '{:.2f}×')} | {num(rr, '{:.2f}×')} |")

    # The machine behind each row.
    L += ["", "**What bound each row here** (the repo's regime rule: a stage at ≥ "
          f"{100 * SAT:.0f} % of a core, the client's busiest thread included; else machine-bound with ≤ "
          f"{model.IDLE_MAX} core idle; else unsaturated):", "",
          "| row | regime (runs) | idle cores | client cores | steal + foreign | loop run delay | in flight |",
          "|---|---|---:|---:|---:|---:|---:|"]
    for c in cs:
        for k in ("dgram", "ring", "granian", "native", "inline"):
            r = row(rows, k, c)
            if not r:
                continue
            also = f"; also {', '.join(r['regime_also'])}" if r.get("regime_also") else ""
            L.append(f"| {k} c{c}{' †' if r['all_disturbed'] else ''} | {r['regime']} ({r['regime_n']}/"
                     f"{r['regime_of']}{also}) | {num(r['idle'])} | {num(r.get('client_cores'))} | "
                     f"{num((r.get('steal') or 0) + (r.get('foreign') or 0))} | {pct(r.get('loop_run_delay'))} | "
                     f"{pct(r.get('in_flight_share'))} |")

    # Profiles.
    have = [p for p in profs if "error" not in p]
    L += [""]
    if not have:
        why = (meta or {}).get("profiles_skipped") or "; ".join(p.get("error", "")[:120] for p in profs) or "none run"
        L += [f"**Profiles:** not measured here ({why}).", ""]
    else:
        cats = ("recv", "send", "epoll", "handoff", "user", "kernel other")
        pm = (meta or {}).get("profiles")
        if pm:  # retaken after the runs (--profiles-only): their own provenance
            L += [f"The profiles were taken apart from the runs: commit {pm.get('commit', 'unknown')[:7]}"
                  f"{' (dirty tree)' if pm.get('dirty') else ''}; {pm.get('date')}; `{pm.get('command')}`.", ""]
        L += ["**The I/O thread's µs of CPU per request**, 64 connections (the note: Instruments' on-CPU "
              "profile; here: perf cpu-clock, split by lib/perfsplit.py; the note's last row is its clock reads, "
              "here the kernel's entry and exit paths and interrupts):", "",
              "| category | note: hello | note: m0serve | note: Granian | here: native | here: ring | here: dgram "
              "| here: Granian |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
        ios = {n: prof_threads(profs, n)[0] for n in ("native", "ring", "dgram", "granian")}
        for cat in cats + ("total",):
            seed_cat = "other" if cat == "kernel other" else cat
            sv = [S.LOOP_US[k].get(seed_cat) for k in ("native", "pool", "granian")]
            hv = [total(ios[n]) if cat == "total" else (ios[n] or {}).get(cat) if ios[n] else None
                  for n in ("native", "ring", "dgram", "granian")]
            L.append(f"| {cat} | " + " | ".join(num(x) for x in sv) + " | " + " | ".join(num(x) for x in hv) + " |")
        L += ["", "**The Python thread's µs of CPU per request**, same profiles (user space: the environ build, "
              "the call, the response; of it, the interpreter's own functions in brackets):", "",
              "| category | note: m0serve pool | note: Granian blocking | here: ring pool | here: dgram pool "
              "| here: Granian Python |", "|---|---:|---:|---:|---:|---:|"]
        pys = {n: prof_threads(profs, n)[1] for n in ("ring", "dgram", "granian")}
        for cat in ("handoff", "user", "other", "total"):
            sv = [S.POOL_US[k].get(cat) for k in ("pool", "granian")]
            hv = []
            for n in ("ring", "dgram", "granian"):
                p = pys[n]
                if not p:
                    hv.append("—")
                elif cat == "total":
                    hv.append(num(total(p)))
                elif cat == "other":
                    hv.append(num(sum(p.get(x, 0) for x in ("recv", "send", "epoll", "kernel other"))))
                elif cat == "user":
                    hv.append(f"{num(p['user'])} ({num(p.get('python'))})")
                else:
                    hv.append(num(p.get(cat)))
            L.append(f"| {cat} | " + " | ".join(num(x) for x in sv) + " | " + " | ".join(hv) + " |")
        bad = [f"{p['name']}: {p['error'][:120]}" for p in profs if "error" in p]
        L += ["", "Requests per profile: cserve's own window (Granian: wrk's rate over the perf window)."
              + (" Profiles that failed: " + "; ".join(bad) + "." if bad else ""), ""]

    # Verdicts.
    L += ["**The note's claims, one by one** (computed from the records above by "
          "experiments/lib/seed_report.py):", "",
          "| claim | the note | here | verdict | why |", "|---|---|---|---|---|"]
    for key, claim, seedv, here, v, why in verdicts(rows, profs, meta):
        L.append(f"| {claim} | {seedv} | {here} | **{v}** | {why} |")
    moved = []
    for name, x, changed in sensitivity(rows, profs, meta):
        what = "; ".join(f"{k}: {a} → {b}" for k, a, b in changed) or "no verdict changes"
        moved.append(f"{name.lower()} {x:.2f}: {what}")
    L += ["", f"The rules' constants moved (ratio tolerance {RATIO_TOL:.2f}, cost factor {COST_FACTOR:g}, share "
          f"saved {SAVE_SHARE:.2f}, each to a value either side): " + "; ".join(moved) + "."]
    pooled = [r for c in cs for k in ("dgram", "ring") for r in [row(rows, k, c)] if r]
    regs = {}
    for r in pooled:
        regs[r["regime"]] = regs.get(r["regime"], 0) + 1
    L += ["", "Where they differ, the note and this machine differ in three ways: the loop (epoll on Linux "
          "against kqueue on macOS, cserve's C parser against m0serve's; on loopback a TCP send here also "
          "carries the receiver's processing, which lands in the sender's send row), the interpreter build "
          "(the CPython each machine has) and the machine (a guest whose vCPUs the server shares with the "
          "client, against a laptop with cores to spare). The pooled rows here (dgram and ring, every "
          "connection count) were " + (", ".join(f"{k}: {v}" for k, v in sorted(regs.items())) or "not measured")
          + "; a claim about which thread bounds the server holds here only where a thread saturated."]
    return "\n".join(L) + "\n"


def brief(meta, rows, profs, full):
    """What the paper prints of full (markdown()'s text): the per-thread table
    at 16 connections, the I/O thread's µs per request, and the verdicts
    without their reasons; seed.md has the rest."""
    blocks = full.split("\n\n")
    keep = []
    for i, b in enumerate(blocks):
        if b.startswith("**Per thread") or b.startswith("**The I/O thread's"):
            keep += [b, blocks[i + 1]]  # the heading, then its table
    L = keep + ["**The note's claims**, each with its verdict here (the reasons, the rules and every other "
                "table: `experiments/results/seed/seed.md`):",
                "| claim | here | verdict |\n|---|---|---|\n" + "\n".join(
                    f"| {claim} | {here} | **{v}** |" for _, claim, _, here, v, _ in verdicts(rows, profs, meta))]
    return "\n\n".join(L) + "\n"

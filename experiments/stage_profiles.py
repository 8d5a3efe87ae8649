"""Summarise experiments/stage_profiles.sh's profiles into OUT/summary.md.

    python3 -m experiments.stage_profiles OUT ROUNDS

Reads OUT/PART-SERVER-N.{md,json} (experiments/lib/perf_reduce.py's reports) and
OUT/stats-loop-cost-SERVER-N.json (cserve's counters for the same window)."""
import json
import re
import statistics
import sys


def load(out, name):
    report = json.load(open(f"{out}/{name}.json"))
    md = open(f"{out}/{name}.md").read()
    m = re.search(r"Requests/sec: ([0-9.]+)", md)
    try:
        stats = json.load(open(f"{out}/stats-{name}.json"))
    except OSError:
        stats = {}
    loop = next((t for w in stats.get("workers", []) for t in w.get("threads", []) if t.get("role") == "loop"),
                None)
    return {"rps": float(m.group(1)) if m else 0.0, "threads": report["threads"], "loop_stats": loop, "md": md}


def thread(row, prefix):
    return next((t for t in row["threads"] if t["thread"].startswith(prefix)), None)


def bucket(t, name):
    return sum(b["us_per_request"] or 0.0 for b in t["by_bucket"] if b["bucket"] == name)


def counter_per_request(row, key):
    st = row["loop_stats"]
    if not st or not st.get("requests"):
        return None
    return st["counters"].get(key, 0) / st["requests"]


def fmt(v, spec):
    return "—" if v is None else format(v, spec)


def share(us, rps):
    return None if us is None else us * rps / 1e4  # % of one core


def medians(threads, field, key):
    """{name: median µs/req over rounds} of one thread's by_bucket/by_function
    (a name below a round's cut-off counts as 0 there)."""
    vals = {}
    for t in threads:
        for b in t[field]:
            vals.setdefault(b[key], []).append(b["us_per_request"] or 0.0)
    return {k: statistics.median(v + [0.0] * (len(threads) - len(v))) for k, v in vals.items()}


def diff_table(title, a, b, top, totals, names=("ring", "native")):
    keys = sorted(set(a) | set(b), key=lambda k: -abs(a.get(k, 0) - b.get(k, 0)))
    lines = [f"| {title} | {names[0]} | {names[1]} | {names[0]} − {names[1]} |", "|---|---:|---:|---:|"]
    for k in keys[:top]:
        lines.append(f"| `{k}` | {a.get(k, 0):.3f} | {b.get(k, 0):.3f} | {a.get(k, 0) - b.get(k, 0):+.3f} |")
    lines.append(f"| the whole thread | {totals[0]:.3f} | {totals[1]:.3f} | {totals[0] - totals[1]:+.3f} |")
    return lines


def loop_cost(out, rounds):
    rows = {m: [load(out, f"loop-cost-{m}-{i}") for i in range(1, rounds + 1)] for m in ("ring", "native")}
    machine = next((ln for ln in rows["ring"][0]["md"].split("\n") if ln.startswith("machine:")), "machine: ?")
    lines = ["## The loop's time per request: ring against native-hello", "",
             f"hello, `wrk -t1 -c256`, pipelining depth 16, {rounds} interleaved rounds; "
             f"{machine.rstrip(';')}. µs of CPU per request from the on-CPU samples, and in-process: the "
             "thread's own clock over the same window (cpu-clock samples miss part of a thread that runs in "
             "short bursts). A thread's share of a core is the in-process figure times the rate; writes and "
             "passes per request are the loop's own counters for the window.", "",
             "| round | server | rps | loop µs/req | in-process | loop % of a core | pool µs/req | in-process | "
             "pool % of a core | loop writes/req | loop passes/req |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for i in range(rounds):
        for m in ("ring", "native"):
            r = rows[m][i]
            lt, pt = thread(r, "cserve-loop") or {}, thread(r, "cserve-pool") or {}
            lu, pu = lt.get("stats_us_per_request"), pt.get("stats_us_per_request")
            lines.append(f"| {i + 1} | {m} | {r['rps']:,.0f} | {fmt(lt.get('us_per_request'), '.2f')} | "
                         f"{fmt(lu, '.2f')} | {fmt(share(lu, r['rps']), '.0f')} | "
                         f"{fmt(pt.get('us_per_request'), '.2f')} | {fmt(pu, '.2f')} | {fmt(share(pu, r['rps']), '.0f')} | "
                         f"{fmt(counter_per_request(r, 'writes'), '.4f')} | "
                         f"{fmt(counter_per_request(r, 'passes'), '.4f')} |")
    loops = {m: [thread(r, "cserve-loop") for r in rows[m]] for m in rows}
    totals = [statistics.median(t["us_per_request"] for t in loops[m]) for m in ("ring", "native")]
    lines += ["", "Medians over the rounds, the loop thread, µs per request:", ""]
    lines += diff_table("kernel entry / user space", medians(loops["ring"], "by_bucket", "bucket"),
                        medians(loops["native"], "by_bucket", "bucket"), 8, totals)
    lines += ["", "The functions (self time) whose cost differs most:", ""]
    lines += diff_table("function (self)", medians(loops["ring"], "by_function", "function"),
                        medians(loops["native"], "by_function", "function"), 15, totals)
    return lines


def flask(out, rounds):
    lines = ["## Flask: the ring's pool thread against Granian's threads", "",
             f"Flask (apps/flask_hello.py), `wrk -t1 -c16`, {rounds} interleaved rounds. For each server thread "
             "above 1 % of the samples: µs of CPU per request, the part of it in the interpreter "
             "(libpython: Flask, Werkzeug and CPython itself) and the rest (the server's own code, libc, the "
             "kernel); for cserve's threads also their own clock's figure (Granian has none), and the share of a "
             "core from it where there is one.", "",
             "| round | server | rps | thread | µs/req | in libpython | the rest | in-process µs/req | % of a core |",
             "|---:|---|---:|---|---:|---:|---:|---:|---:|"]
    for i in range(1, rounds + 1):
        for m in ("ring", "granian"):
            r = load(out, f"flask-{m}-{i}")
            for t in r["threads"]:
                us = t["us_per_request"] or 0.0
                py = bucket(t, "user:python")
                own = t.get("stats_us_per_request")
                lines.append(f"| {i} | {m} | {r['rps']:,.0f} | {t['thread']} | {us:.1f} | {py:.1f} | "
                             f"{us - py:.1f} | {fmt(own, '.1f')} | {share(own or us, r['rps']):.0f} |")
    return lines


def main():
    out, rounds = sys.argv[1], int(sys.argv[2])
    lines = ["# Where the bound stages' time goes (experiments/stage_profiles.sh)", "",
             "On-CPU profiles (`perf record -e cpu-clock`, scripts/profile.sh), reduced by "
             "experiments/lib/perf_reduce.py. Each profile beside this file (`PART-SERVER-ROUND.md`) has its command, "
             "rate, machine and commit.", ""]
    lines += loop_cost(out, rounds) + [""] + flask(out, rounds)
    text = "\n".join(lines) + "\n"
    open(f"{out}/summary.md", "w").write(text)
    print(text)


if __name__ == "__main__":
    main()

"""spin_compare.py — parks and wakes per request for the ring's spin settings.

Runs ./cserve (hello app, 1 worker, 1 pool thread) under `wrk -t1 -cC -dDs`
for each setting in turn, ROUNDS times interleaved, and reads the handoff
counters from --stats-json. Per-request counts (pool parks, wakes the loop
sent, loop wakes the pool sent) are robust to a noisy shared machine; rps is
printed too but is not what to look at there.

    python3 -m experiments.spin_compare [--rounds 3] [--seconds 3]
        [--conns 64] [--out FILE.json] [-- SETTING ...]
    python3 -m experiments.spin_compare --show FILE.json
A SETTING is a quoted list of extra cserve flags; "" is the default; a
first word bin=PATH runs another build (e.g. the previous commit's).
"""
import argparse, json, os, re, signal, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
from experiments.lib import provenance
from experiments.lib.serverctl import free_port, wait_ready


def one(flags, seconds, conns):
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        js = os.path.join(tmp, "stats.json")
        words, binary = flags.split(), os.path.join(ROOT, "cserve")
        if words and words[0].startswith("bin="):
            binary, words = words[0][4:], words[1:]
        srv = subprocess.Popen([binary, "--bind", f"127.0.0.1:{port}", "--stats-json", js] + words,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            if not wait_ready(srv, port, 10):
                raise SystemExit("cserve did not start")
            out = subprocess.run(["wrk", "-t1", f"-c{conns}", f"-d{seconds}s",
                                  f"http://127.0.0.1:{port}/"], capture_output=True, text=True).stdout
        finally:
            srv.send_signal(signal.SIGINT)
            srv.wait(20)
        d = json.load(open(js))
    rps = float(re.search(r"Requests/sec:\s*([\d.]+)", out).group(1))
    loop = pool = None
    for t in d["workers"][0]["threads"]:
        if t["role"] == "loop":
            loop = t
        elif t["role"] == "pool":
            pool = t
    n = max(loop["requests"], 1)
    lh, ph = loop["counters"]["handoff"], pool["counters"]["handoff"]
    return {"flags": flags, "rps": rps, "requests": n,
            "pool_parks_per_req": ph["parks"] / n,
            "wakes_sent_per_req": lh["wakes_sent"] / n,
            "loop_parks_per_req": lh["loop_parks"] / n,
            "loop_wakes_per_req": ph["loop_wakes"] / n,
            "pool_spins_per_req": ph["spins"] / n,
            "loop_us_per_req": loop["us_per_request"], "pool_us_per_req": pool["us_per_request"],
            "loop_dozes_per_req": lh.get("loop_dozes", 0) / n}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--out")
    ap.add_argument("--show", help="print the medians of a recorded FILE.json")
    ap.add_argument("settings", nargs="*", default=["", "--spin 10us", "--spin 0"])
    a = ap.parse_args()
    if a.show:
        d = json.load(open(a.show))
        print("recorded:", d["meta"])
        medians(d["runs"], list(dict.fromkeys(m["flags"] for m in d["runs"])))
        return
    runs = []
    for r in range(a.rounds):
        for s in a.settings:
            m = one(s, a.seconds, a.conns)
            m["round"] = r
            runs.append(m)
            print(f"round {r} {s or '(default)':12} rps {m['rps']:9.0f}  pool parks/req "
                  f"{m['pool_parks_per_req']:.3f}  wakes sent/req {m['wakes_sent_per_req']:.3f}  "
                  f"loop wakes/req {m['loop_wakes_per_req']:.3f}  loop/pool us/req "
                  f"{m['loop_us_per_req']:.2f}/{m['pool_us_per_req']:.2f}", flush=True)
    meta = {"load_avg": os.getloadavg(), "ncpu": os.cpu_count(), "conns": a.conns,
            "seconds": a.seconds, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "commit": provenance.short_commit(), "kernel": os.uname().release}
    medians(runs, a.settings)
    if a.out:
        json.dump({"meta": meta, "runs": runs}, open(a.out, "w"), indent=1)


def medians(runs, settings):
    # The handoff's own syscalls: the pool's futex_wait, the loop's
    # futex_wake, the pool's eventfd write (the loop's read matches it).
    for m in runs:
        m["sum"] = m["pool_parks_per_req"] + m["wakes_sent_per_req"] + m["loop_wakes_per_req"]
    print("medians (sum = pool parks + wakes sent + loop wakes per request):")
    for s in settings:
        rs = [m for m in runs if m["flags"] == s]
        med = lambda k: sorted(m[k] for m in rs)[len(rs) // 2]
        print(f"  {s or '(default)':12} rps {med('rps'):9.0f}  pool parks/req {med('pool_parks_per_req'):.3f}  "
              f"wakes sent/req {med('wakes_sent_per_req'):.3f}  loop wakes/req {med('loop_wakes_per_req'):.3f}"
              + f"  sum {med('sum'):.3f}"
              + (f"  loop parks/req {med('loop_parks_per_req'):.3f}" if "loop_parks_per_req" in rs[0] else "")
              + (f"  loop dozes/req {med('loop_dozes_per_req'):.3f}" if "loop_dozes_per_req" in rs[0] else "")
              + (f"  loop/pool us/req {med('loop_us_per_req'):.2f}/{med('pool_us_per_req'):.2f}"
                 f" (loop {min(m['loop_us_per_req'] for m in rs):.2f}-{max(m['loop_us_per_req'] for m in rs):.2f})"
                 if "loop_us_per_req" in rs[0] else ""))


if __name__ == "__main__":
    main()

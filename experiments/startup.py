"""Start-up to first response and graceful stop, timed by hyperfine, for
cserve and each peer (the same app, apps/hello.py).

    python3 -m experiments.startup --out DIR [--quick] [--runs N]

start: `lifecycle.py up` starts the server and returns at its first 200
       (hyperfine's --prepare kills the previous one, untimed).
stop:  --prepare starts a server and waits for it to answer (untimed);
       `lifecycle.py down` sends SIGTERM and returns when it is gone.
Both include a shell and lifecycle.py's own interpreter start; `lifecycle.py noop` is
timed too and its median is subtracted (recorded beside). One JSON line per
server in DIR/startup.jsonl, with hyperfine's full JSON.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

from experiments.lib import provenance
from experiments.lib.serverctl import ROOT, free_port

# hyperfine runs it in the checkout (cwd=ROOT), where the package is found.
LC = "/usr/bin/python3 -m experiments.lifecycle"
SERVERS = {
    "cserve-ring": {"server": "cserve", "handoff": "ring", "bt": 1, "app": "hello", "conns": 1},
    "cserve-dgram": {"server": "cserve", "handoff": "dgram", "bt": 1, "app": "hello", "conns": 1},
    "granian": {"server": "granian", "app": "hello", "conns": 1},
    "uwsgi": {"server": "uwsgi", "app": "hello", "conns": 1},
    "gunicorn": {"server": "gunicorn", "app": "hello", "conns": 1},
}


def hyperfine(cmd, prepare, runs, tmp, name):
    out = os.path.join(tmp, f"{name}.json")
    args = ["hyperfine", "--runs", str(runs), "--warmup", "1", "--export-json", out, "--style", "none"]
    if prepare:
        args += ["--prepare", prepare]
    args.append(cmd)
    p = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    if p.returncode:
        raise RuntimeError(p.stderr[-400:])
    return json.load(open(out))["results"][0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int)
    a = ap.parse_args()
    if not shutil.which("hyperfine"):
        print("startup: no hyperfine (make deps); skipped", file=sys.stderr)
        return 0
    runs = a.runs or (3 if a.quick else 15)
    names = ["cserve-ring"] if a.quick else list(SERVERS)
    os.makedirs(a.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="cserve-hf-")
    sha, dirty = provenance.git_commit()
    base = hyperfine(f"{LC} noop", None, runs, tmp, "noop")
    for name in names:
        cfg = SERVERS[name]
        if cfg["server"] == "granian" and subprocess.run(["/usr/bin/python3", "-c", "import granian"],
                                                         capture_output=True).returncode:
            continue
        if cfg["server"] in ("uwsgi", "gunicorn") and not shutil.which(cfg["server"]):
            continue
        port = free_port()
        pid = os.path.join(tmp, f"{name}.pid")
        rec = {"server": name, "config": cfg, "commit": sha, "dirty": dirty, "runs": runs,
               "baseline_median_s": base["median"]}
        try:
            st = hyperfine(f"{LC} up {name} {port} {pid}", f"{LC} kill {pid}", runs, tmp, name + "-up")
            subprocess.run(f"{LC} kill {pid}", shell=True, cwd=ROOT)
            sp = hyperfine(f"{LC} down {pid}", f"{LC} kill {pid}; {LC} up {name} {port} {pid}", runs, tmp,
                           name + "-down")
            subprocess.run(f"{LC} kill {pid}", shell=True, cwd=ROOT)
            rec.update(start_median_s=st["median"] - base["median"], stop_median_s=sp["median"] - base["median"],
                       start_times_s=st["times"], stop_times_s=sp["times"],
                       hyperfine_start_cmd=st["command"], hyperfine_stop_cmd=sp["command"])
        except Exception as e:
            rec["error"] = f"{type(e).__name__}: {e}"
        with open(os.path.join(a.out, "startup.jsonl"), "a") as f:
            f.write(json.dumps(rec) + "\n")
        print(f"startup {name}: " + (rec.get("error") or
              f"start {rec['start_median_s'] * 1e3:.0f} ms, stop {rec['stop_median_s'] * 1e3:.0f} ms"),
              file=sys.stderr)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

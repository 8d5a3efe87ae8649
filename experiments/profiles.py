"""On-CPU profiles (scripts/profile.sh: perf cpu-clock, reduced to µs per
request per thread) for cserve ring, cserve dgram, native-hello (the loop with
no Python) and Granian (its worker process), into DIR/profile-NAME.md.

    python3 -m experiments.profiles --out DIR [--quick]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

from experiments.lib.serverctl import ROOT, free_port, server_cmd, start, stop, threadcpu, wait_ready

PROFILE = os.path.join(ROOT, "scripts", "profile.sh")
CSERVE = {"ring": ["--handoff", "ring"], "dgram": ["--handoff", "dgram"], "native": ["--app", "native-hello"]}


def profile(name, args, out, secs):
    tmp = tempfile.mkdtemp(prefix=f"cserve-prof-{name}-")
    p = subprocess.run(["sh", PROFILE, "-d", str(secs), "-c", "64", "-o", tmp] + args,
                       capture_output=True, text=True)
    if p.returncode or not os.path.exists(os.path.join(tmp, "report.md")):
        print(f"profiles {name}: ERROR {p.stderr[-400:]}", file=sys.stderr)
        return False
    shutil.copy(os.path.join(tmp, "report.md"), os.path.join(out, f"profile-{name}.md"))
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"profiles {name}: {os.path.join(out, f'profile-{name}.md')}", file=sys.stderr)
    return True


def granian(out, secs):
    cfg = {"server": "granian", "app": "hello", "conns": 64}
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="cserve-prof-granian-")
    proc, log = start(server_cmd(cfg, port), os.path.join(tmp, "log"))
    try:
        if not wait_ready(proc, port):
            print("profiles granian: did not start", file=sys.stderr)
            return False
        time.sleep(0.5)
        # The worker process (Python and the tokio runtime) is the main one's child.
        kids = [p for p in threadcpu.descendants(proc.pid) if p != proc.pid]
        pid = kids[-1] if kids else proc.pid
        return profile("granian", ["-p", str(pid), "-u", f"http://127.0.0.1:{port}/"], out, secs)
    finally:
        stop(proc)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if not shutil.which("perf"):
        print("profiles: no perf (make deps); skipped", file=sys.stderr)
        return 0
    os.makedirs(a.out, exist_ok=True)
    secs = 1 if a.quick else 4
    names = ["ring"] if a.quick else list(CSERVE)
    ok = all([profile(n, ["--"] + CSERVE[n], a.out, secs) for n in names])
    if not a.quick and subprocess.run(["/usr/bin/python3", "-c", "import granian"], capture_output=True).returncode == 0:
        ok = granian(a.out, secs) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Soak: the long forms of the load and fault tests, then a timed run per
handoff backend that watches the server's RSS and fd count for drift.

    CSERVE_BIN=./cserve /usr/bin/python3 tests/soak.py [--minutes 2] [--skip-pytest]

1. pytest tests/integration/test_load.py test_faults.py with CSERVE_SOAK=1
   (10^6 requests per load test, 2000 rounds per vanishing-client test, ...).
2. For each backend: hello with pipelining in rounds of 10^5 requests for
   --minutes, a mix of the POST-body load between rounds; every response
   verified byte for byte. RSS and fds are sampled after each round; after the
   first quarter (warm-up) RSS must not grow by more than --rss-slack-mib and
   fds must stay at baseline. Exit status 0 only if everything held.
"""
import argparse
import os
import pathlib
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
INTEG = HERE / "integration"
sys.path.insert(0, str(INTEG))

import conftest  # noqa: E402  (start_server, BIN, ALL_HANDOFFS)
import loadgen  # noqa: E402
import procfs  # noqa: E402
from test_load import post_mix_specs  # noqa: E402


def timed_run(handoff, minutes, slack_mib):
    srv = conftest.start_server(app="fault_apps:app", handoff=handoff)
    try:
        pid = srv.proc.pid
        hello = loadgen.hello_specs(srv.port, "/hello")
        mix = post_mix_specs(srv.port)
        base_fds = procfs.settled_fds(pid)
        samples = []
        total = 0
        t_end = time.monotonic() + minutes * 60
        rnd = 0
        while time.monotonic() < t_end:
            specs, n = (mix, 20_000) if rnd % 5 == 4 else (hello, 100_000)
            res = loadgen.run(srv.port, specs, n, 64, 16, timeout=300)
            total += res.done
            if res.errors or res.done != res.expected:
                print(f"[{handoff}] round {rnd}: {res}; errors {res.errors[:3]}")
                return False
            fds = procfs.settled_fds(pid, quiet=0.2, timeout=5)
            rss = procfs.rss_kib(pid)
            samples.append(rss)
            print(f"[{handoff}] round {rnd}: {res.rps:.0f} rps, RSS {rss} KiB, fds {fds} (base {base_fds})",
                  flush=True)
            if fds > base_fds:
                print(f"[{handoff}] fd count {fds} above baseline {base_fds}")
                return False
            rnd += 1
        warm = samples[max(0, len(samples) // 4 - 1)] if samples else 0
        growth = (max(samples) - warm) if samples else 0
        print(f"[{handoff}] {total} requests in {rnd} rounds; RSS after warm-up {warm} KiB, "
              f"max {max(samples) if samples else 0} KiB, growth {growth} KiB")
        if growth > slack_mib * 1024:
            print(f"[{handoff}] RSS grew {growth} KiB after warm-up (> {slack_mib} MiB)")
            return False
        return srv.stop() == 0
    finally:
        srv.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=2.0, help="timed run per backend")
    ap.add_argument("--rss-slack-mib", type=float, default=16.0)
    ap.add_argument("--skip-pytest", action="store_true")
    ap.add_argument("--handoffs", default=",".join(conftest.HANDOFFS))
    a = ap.parse_args()
    ok = True
    if not a.skip_pytest:
        env = dict(os.environ, CSERVE_SOAK="1")
        rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-s",
                              str(INTEG / "test_load.py"), str(INTEG / "test_faults.py")],
                             cwd=str(HERE.parent), env=env)
        print(f"soak pytest: exit {rc}")
        ok = rc == 0
    for h in a.handoffs.split(","):
        if not timed_run(h, a.minutes, a.rss_slack_mib):
            ok = False
    print("SOAK", "PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

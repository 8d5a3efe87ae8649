"""A WSGI app that releases the GIL for a tunable time: what blocking threads
(--blocking-threads N) are for. `?us=N` (default: the GIL_US environment
variable, else 100) and `?mode=sleep|hash` (default: GIL_MODE, else sleep).

sleep: time.sleep(us) — the thread is off-CPU with the GIL released (an I/O
       wait stand-in: a database or an upstream call).
hash:  hashlib.sha256 over a buffer sized, by calibration at import, to take
       about us of CPU; hashlib releases the GIL for inputs over 2 KiB, so the
       thread is on-CPU without the GIL (a C extension doing work)."""
import hashlib
import os
import sys
import time

DEFAULT_US = float(os.environ.get("GIL_US", "100"))
DEFAULT_MODE = os.environ.get("GIL_MODE", "sleep")
_BUF = bytes(range(256)) * 4096  # 1 MiB


def _calibrate():
    n = len(_BUF)
    best = None
    for _ in range(5):
        t0 = time.thread_time_ns()
        hashlib.sha256(_BUF).digest()
        dt = time.thread_time_ns() - t0
        best = dt if best is None else min(best, dt)
    return n / (best / 1000.0)  # bytes per µs


BYTES_PER_US = _calibrate()
print(f"apps/gil_release.py: sha256 {BYTES_PER_US:.0f} bytes per µs", file=sys.stderr)


def _params(environ):
    us, mode = DEFAULT_US, DEFAULT_MODE
    for part in environ.get("QUERY_STRING", "").split("&"):
        k, _, v = part.partition("=")
        if k == "us":
            try:
                us = float(v)
            except ValueError:
                pass
        elif k == "mode" and v in ("sleep", "hash"):
            mode = v
    return us, mode


def application(environ, start_response):
    us, mode = _params(environ)
    if mode == "sleep":
        time.sleep(us / 1e6)
        body = b"slept\n"
    else:
        view = memoryview(_BUF)
        n = max(4096, int(us * BYTES_PER_US))
        h = hashlib.sha256()
        while n > 0:  # buffers larger than 1 MiB: feed it repeatedly
            k = min(n, len(_BUF))
            h.update(view[:k])
            n -= k
        body = h.hexdigest()[:16].encode() + b"\n"
    start_response("200 OK", [("Content-Type", "text/plain"),
                              ("Content-Length", str(len(body)))])
    return [body]

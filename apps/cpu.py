"""A CPU-bound WSGI app with a tunable cost: the pool-bound end of the
experiments. The cost is in microseconds of pure-Python work holding the GIL:
`?us=N` on the request, else the CPU_US environment variable, else 20. Or it
is a fixed amount of work: `?n=N` runs N iterations of the loop, whatever they
cost on this interpreter (to compare interpreters on the same work).

The work is a fixed number of iterations of an integer loop, calibrated once
at import against this thread's CPU clock (time.thread_time_ns), so a request
costs the same *work* whatever the machine's load is; the clock is not read
per request (that would add a clock_gettime syscall to every request's
profile). The calibration is printed to stderr so runs can record it."""
import os
import sys
import time

DEFAULT_US = float(os.environ.get("CPU_US", "20"))


def _spin(n):
    x = 1
    for _ in range(n):
        x = (x * 1103515245 + 12345) & 0xFFFFFFFF
    return x


def _calibrate():
    n = 200_000
    runs = []
    for _ in range(5):  # median of five: the typical price, not the luckiest
        t0 = time.thread_time_ns()
        _spin(n)
        runs.append(time.thread_time_ns() - t0)
    return n / (sorted(runs)[2] / 1000.0)  # iterations per µs


ITERS_PER_US = _calibrate()
print(f"apps/cpu.py: {ITERS_PER_US:.2f} iterations per µs", file=sys.stderr)


def spin_us(us):
    """us microseconds of the calibrated GIL-holding work (apps/mix.py's)."""
    return _spin(int(us * ITERS_PER_US))


def _iterations(environ):
    for part in environ.get("QUERY_STRING", "").split("&"):
        if part.startswith("us=") or part.startswith("n="):
            try:
                v = float(part.partition("=")[2])
            except ValueError:
                break
            return int(v) if part[0] == "n" else int(v * ITERS_PER_US)
    return int(DEFAULT_US * ITERS_PER_US)


def application(environ, start_response):
    x = _spin(_iterations(environ))
    body = b"%d\n" % (x & 0xFF)
    start_response("200 OK", [("Content-Type", "text/plain"),
                              ("Content-Length", str(len(body)))])
    return [body]

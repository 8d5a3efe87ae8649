"""A WSGI app whose per-request cost is drawn at random from a fixed
two-point distribution: most requests are fast, a few are slow, as mixed
traffic is. Each request draws once: slow with probability PCT %, else fast.

  ?mode=sleep|cpu   sleep: time.sleep (the GIL released: an I/O wait);
                    cpu: apps/cpu.py's calibrated Python loop (the GIL held)
  ?fast=US          the fast requests' cost in µs
  ?slow=US          the slow requests' cost in µs
  ?pct=P            the slow requests' share in percent

Each defaults to the environment (MIX_MODE, MIX_FAST_US, MIX_SLOW_US,
MIX_PCT), else sleep, 1000, 100000 and 5. The draws come from one generator
per process seeded with MIX_SEED (default 1), so every server under test
draws the same sequence; which connection gets which draw depends on the
arrival order. The response names the draw (fast or slow)."""
import os
import random
import time

import cpu

DEFAULTS = {"mode": os.environ.get("MIX_MODE", "sleep"), "fast": float(os.environ.get("MIX_FAST_US", "1000")),
            "slow": float(os.environ.get("MIX_SLOW_US", "100000")), "pct": float(os.environ.get("MIX_PCT", "5"))}
_RNG = random.Random(int(os.environ.get("MIX_SEED", "1")))


def params(query):
    """(mode, fast µs, slow µs, slow %) from a query string over DEFAULTS."""
    p = dict(DEFAULTS)
    for part in query.split("&"):
        k, _, v = part.partition("=")
        if k == "mode" and v in ("sleep", "cpu"):
            p["mode"] = v
        elif k in ("fast", "slow", "pct"):
            try:
                p[k] = float(v)
            except ValueError:
                pass
    return p["mode"], p["fast"], p["slow"], p["pct"]


def draw(pct, rng=_RNG):
    """True (slow) with probability pct %."""
    return rng.random() * 100.0 < pct


def application(environ, start_response):
    mode, fast, slow, pct = params(environ.get("QUERY_STRING", ""))
    is_slow = draw(pct)
    us = slow if is_slow else fast
    if mode == "sleep":
        time.sleep(us / 1e6)
    else:
        cpu.spin_us(us)
    body = b"slow\n" if is_slow else b"fast\n"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]

"""Pipelined requests through the pool threads, as the live scheduler runs
them: a long pipeline's responses leave together and its requests reach
the pool in batches (few writes, few hand-off wake-ups), and the pool
thread behind a closing response is freed at once, not when the
lingering close ends. What the code decides, whatever the scheduler does,
is checked by tests/integration/test_pipelining.py."""
import json
import time

from httpclient import Reader
from pipelined import long_pipeline
import perf

APP = "wsgi_apps:application"
HANDOFFS = ["ring", "dgram", "condvar", "eventfd"]  # the integration suite's


def _get(path, extra=""):
    return f"GET {path} HTTP/1.1\r\nHost: x\r\n{extra}\r\n".encode()


def test_a_long_pipeline_costs_few_writes_and_wakes(server_factory, tmp_path):
    """3000 pipelined requests, each hand-off an arm. Median over the
    rounds: under one write per four requests (responses leave together)
    and under one wake of the pool per four requests (parsed requests reach
    it in batches). How the pool wakes the loop, and a dgram submit's send,
    are the backend's and not judged."""
    n = 3000

    def arm(handoff):
        def run():
            path = tmp_path / f"stats-{handoff}-{time.monotonic_ns()}.json"
            srv = server_factory("--stats-json", str(path), app=APP, handoff=handoff)
            long_pipeline(srv, n)
            assert srv.stop() == 0
            (w,) = json.loads(path.read_text())["workers"]
            loop = [t for t in w["threads"] if t["role"] == "loop"][0]
            c = loop["counters"]
            return {"writes_per_request": c["writes"] / n,
                    "pool_wakes_per_request": c["handoff"]["wakes_sent"] / n}
        return run

    m = perf.report(f"{n} pipelined requests on one connection",
                    perf.interleaved({h: arm(h) for h in HANDOFFS}))
    for h in HANDOFFS:
        assert m[h]["writes_per_request"] < 0.25, (h, m[h])
        assert m[h]["pool_wakes_per_request"] < 0.25, (h, m[h])


def test_a_closing_response_frees_its_pool_thread_at_once(server_factory):
    """On the only pool thread, a streamed response pipelined behind a
    closing one has posted a flush; the client keeps the closed connection
    open. Median over the rounds: another connection's request is answered
    within a second, not once the lingering close's 2 s timer has fired."""
    def run():
        srv = server_factory(app=APP)
        a = srv.connect(timeout=30)
        a.sendall(_get("/app_close") + _get("/stream?n=50&size=10"))
        first = a.recv(65536)
        assert first.startswith(b"HTTP/1.1 200"), first
        time.sleep(0.2)  # a pace to measure: the stream's first flush is posted and unanswered
        t0 = time.monotonic()
        with srv.connect(timeout=30) as b:
            b.sendall(_get("/hello", extra="Connection: close\r\n"))
            data = b""
            while chunk := b.recv(65536):
                data += chunk
        took_ms = (time.monotonic() - t0) * 1e3
        a.close()
        assert data.startswith(b"HTTP/1.1 200") and data.endswith(b"hello"), data
        return {"other_answered_ms": took_ms}

    m = perf.report("a request beside a closing response's lingering connection",
                    perf.interleaved({"default": run}))["default"]
    assert m["other_answered_ms"] < 1000

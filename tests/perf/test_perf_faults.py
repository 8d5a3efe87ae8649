"""How soon the server exits on SIGTERM under load: what is in flight is at
most one short request per client, so the stop takes a few request times,
not the keep-alive or graceful timeouts. What the code decides, whatever
the scheduler does (every request answered or retryable, no graceful
timeout reached, exit status 0), is checked by
tests/integration/test_faults.py's test_sigterm_under_load_drops_nothing."""
import signal
import threading
import time

from httpclient import Reader
import perf

APP = "fault_apps:app"


def test_sigterm_under_load_exits_within_a_few_request_times(server_factory):
    """8 keep-alive clients back to back on a 3 ms app, two pool threads,
    --graceful-timeout 10. Median over the rounds: the server exits within
    3 s of SIGTERM (under the keep-alive's 5 s and the graceful 10 s)."""
    def run():
        srv = server_factory("--graceful-timeout", "10", "--blocking-threads", "2", app=APP)
        stop = threading.Event()
        served = [0] * 8

        def client(t):
            try:
                with srv.connect(timeout=30) as s:
                    rd = Reader(s)
                    while not stop.is_set():
                        s.sendall(b"GET /work?ms=3&id=%d HTTP/1.1\r\nHost: l\r\n\r\n" % t)
                        r = rd.read_response()
                        served[t] += 1
                        if (r.header("connection") or "").lower() == "close":
                            return
            except (OSError, EOFError):
                return

        threads = [threading.Thread(target=client, args=(t,), daemon=True) for t in range(8)]
        for th in threads:
            th.start()
        deadline = time.monotonic() + 30
        while min(served) < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        t0 = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        rc = srv.proc.wait(timeout=30)
        took = time.monotonic() - t0
        stop.set()
        for th in threads:
            th.join(timeout=30)
        assert rc == 0, srv.log_text()[-2000:]
        return {"exit_s": took}

    m = perf.report("SIGTERM under 8 keep-alive clients of 3 ms requests",
                    perf.interleaved({"default": run}))["default"]
    assert m["exit_s"] < 3.0

"""--blocking-threads auto under a live load, as the scheduler runs it: how
soon the pool grows past one thread and what it then serves. What the
sizing rule decides, whatever the scheduler does (grows while requests
wait, to its bound and no further, stays at one on the GIL, retires when
idle, each change logged), is checked by
tests/integration/test_auto_threads.py and tests/unit/test_sizing_rule.c."""
import json
import socket
import threading
import time
import urllib.request

from httpclient import Reader
import perf

APP = "auto_apps:application"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pool(mport):
    with urllib.request.urlopen(f"http://127.0.0.1:{mport}/stats.json", timeout=10) as r:
        w = json.loads(r.read())["workers"]
    return w[0]["blocking_threads"] if w else None


def wait_pool(mport, check, what, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        try:
            b = pool(mport)
        except OSError:
            b = None
        if b and check(b):
            return b
        assert time.monotonic() < deadline, f"{what}: never within {timeout} s: {b}"
        time.sleep(0.05)


class Load:
    """conns keep-alive connections, each sending `path` one request at a
    time, until stop()."""

    def __init__(self, port, path, conns):
        self.port, self.path, self.done = port, path, 0
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(conns)]
        for t in self.threads:
            t.start()

    def run(self):
        req = f"GET {self.path} HTTP/1.1\r\nHost: t\r\n\r\n".encode()
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
                reader = Reader(s)
                while not self.stopping.is_set():
                    s.sendall(req)
                    reader.read_response()
                    with self.lock:
                        self.done += 1
        except (OSError, EOFError):
            pass

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=15)


def test_a_waiting_load_grows_the_pool_within_seconds_and_is_served_at_once(server_factory):
    """Requests that sleep 50 ms with the GIL released, on 24 connections:
    one thread serves at most 20 a second. Median over the rounds: the pool
    grows past one thread within 3 s (three windows), and once it has four
    or more it serves more than three times what one thread can; a fixed
    single thread, alongside, serves at most 20 a second."""
    def rate(load, seconds=2.0):
        before, t0 = load.done, time.monotonic()
        time.sleep(seconds)  # the measurement's span
        return (load.done - before) / (time.monotonic() - t0)

    def auto():
        mport = free_port()
        srv = server_factory("--blocking-threads", "auto", "--metrics-bind", f"127.0.0.1:{mport}", app=APP)
        wait_pool(mport, lambda b: True, "publishes its figures")
        load = Load(srv.port, "/?sleep=0.05", conns=24)
        try:
            t0 = time.monotonic()
            wait_pool(mport, lambda b: b["active"] > 1, "grows past one thread")
            grown_in = time.monotonic() - t0
            wait_pool(mport, lambda b: b["active"] >= 4, "keeps growing while requests wait")
            r = rate(load)
            threads = pool(mport)["active"]
        finally:
            load.stop()
        srv.stop()
        return {"grown_past_one_s": grown_in, "requests_per_s": r, "threads": threads}

    def fixed_one():
        srv = server_factory("--blocking-threads", "1", app=APP)
        load = Load(srv.port, "/?sleep=0.05", conns=24)
        try:
            r = rate(load)
        finally:
            load.stop()
        srv.stop()
        return {"requests_per_s": r}

    m = perf.report("24 connections of requests sleeping 50 ms",
                    perf.interleaved({"auto": auto, "--blocking-threads 1": fixed_one}))
    assert m["auto"]["grown_past_one_s"] < 3.0
    assert m["auto"]["requests_per_s"] > 3 * 20
    assert m["--blocking-threads 1"]["requests_per_s"] <= 21

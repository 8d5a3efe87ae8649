"""The metrics listener and the live verdict as the scheduler runs them:
the verdict under loads that saturate a stage (a CPU-bound app holds the
GIL, pipelined hellos fill a core), how soon the listener answers beside
slow clients, and the CPU the server uses while out of descriptors. What
the code decides whatever the scheduler does (the verdict on no load and on
requests waiting on a gate, slow clients closed at their deadline, the
metrics thread pausing its accepts) is checked by
tests/integration/test_metrics.py; the verdict's table by
tests/unit/test_verdict.c."""
import json
import os
import pathlib
import socket
import subprocess
import sys
import threading
import time
import urllib.request

from httpclient import Reader
import perf

ROOT = pathlib.Path(__file__).resolve().parents[2]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stats(mport):
    with urllib.request.urlopen(f"http://127.0.0.1:{mport}/stats.json", timeout=30) as r:
        return json.loads(r.read())


def metrics_server(factory, *args, **kw):
    mport = free_port()
    srv = factory("--metrics-bind", f"127.0.0.1:{mport}", *args, **kw)
    deadline = time.monotonic() + 30
    while True:
        try:
            if stats(mport)["workers"]:
                return srv, mport
        except OSError:
            pass
        assert time.monotonic() < deadline, "the worker never published its figures"
        time.sleep(0.1)


class Load:
    def __init__(self, port, path, conns):
        self.port, self.path = port, path
        self.stopping = threading.Event()
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
        except (OSError, EOFError):
            pass

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=15)


def verdict_after(mport, seconds=3.5):
    time.sleep(seconds)  # the span measured: the verdict's window is three seconds
    return stats(mport)["verdict"]["figures"]


def test_verdict_follows_a_saturating_load(server_factory):
    """A CPU-bound app (5 ms of Python a request, 4 connections, 2 threads)
    holds the GIL: median pool_util >= 0.9 (gil-bound). Three loadgen
    processes of pipelined hellos fill a stage or the machine: median of
    the busiest of loop, pool and machine >= 0.9."""
    def cpu_app():
        srv, mport = metrics_server(server_factory, "--blocking-threads", "2", app="cpu:application",
                                    chdir=ROOT / "apps")
        load = Load(srv.port, "/?us=5000", conns=4)
        try:
            f = verdict_after(mport)
        finally:
            load.stop()
        srv.stop()
        return {"pool_util": f["pool_util"]}

    def hello():
        srv, mport = metrics_server(server_factory)
        loads = [subprocess.Popen([sys.executable, str(ROOT / "tests/integration/loadgen.py"), "--port",
                                   str(srv.port), "-n", "100000000", "-c", "16", "-d", "16"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(3)]
        try:
            f = verdict_after(mport)
        finally:
            for p in loads:
                p.kill()
                p.wait(timeout=10)
        srv.stop()
        return {"busiest": max(f["loop_util"], f["pool_util"], f["machine_busy"])}

    m = perf.report("the verdict's figures under saturating loads",
                    perf.interleaved({"cpu app": cpu_app, "pipelined hellos": hello}))
    assert m["cpu app"]["pool_util"] >= 0.9
    assert m["pipelined hellos"]["busiest"] >= 0.9


def test_the_listener_answers_at_once_beside_slow_clients(server_factory):
    """16 clients each send half a head to the metrics listener and stop;
    median over the rounds: the slowest of five /stats.json beside them
    comes within a second (their deadline is two)."""
    def run():
        srv, mport = metrics_server(server_factory)
        slow = [socket.create_connection(("127.0.0.1", mport), timeout=30) for _ in range(16)]
        try:
            for s in slow:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-")
            worst = 0.0
            for _ in range(5):
                t0 = time.monotonic()
                stats(mport)
                worst = max(worst, time.monotonic() - t0)
        finally:
            for s in slow:
                s.close()
        srv.stop()
        return {"slowest_ms": worst * 1e3}

    m = perf.report("/stats.json beside 16 slow clients", perf.interleaved({"default": run}))
    assert m["default"]["slowest_ms"] < 1000


def _process_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_out_of_descriptors_the_server_idles(server_factory):
    """The process out of descriptors (RLIMIT_NOFILE 64, 80 connections),
    three metrics clients pending: the loop and the metrics thread pause
    their accepts instead of polling again at once. Median over the rounds:
    the server uses under a quarter of a core."""
    import resource

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    def run():
        srv, mport = metrics_server(server_factory, preexec_fn=low_limit)
        conns = []
        try:
            for _ in range(80):
                conns.append(socket.create_connection(("127.0.0.1", srv.port), timeout=5))
            deadline = time.monotonic() + 30
            while "metrics: accept: " not in srv.log_text():
                if len(conns) < 83:
                    conns += [socket.create_connection(("127.0.0.1", mport), timeout=5) for _ in range(3)]
                assert time.monotonic() < deadline, srv.log_text()[-2000:]
                time.sleep(0.05)
            t0, c0 = time.monotonic(), _process_cpu_s(srv.proc.pid)
            time.sleep(2.0)  # the span measured
            used = (_process_cpu_s(srv.proc.pid) - c0) / (time.monotonic() - t0)
        finally:
            for c in conns:
                c.close()
        srv.stop()
        return {"cpu_share": used}

    m = perf.report("the server out of descriptors", perf.interleaved({"default": run}))
    assert m["default"]["cpu_share"] < 0.25

"""--blocking-threads auto against the real binary: with requests that wait
with the GIL released and more clients than threads, the pool grows past one
thread within seconds and serves more at once; with requests that hold the
GIL it stays at one; idle, it retires back to one; each change is logged with
the figures behind it and published (/stats.json, the --stats table); a
request pipelined behind one that ran on a thread since retired still runs,
and one connection's requests never run at once on two threads;
a reload's new worker starts again at one thread; the watchdog watches a
thread started later; the option's forms and the ones refused."""
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request

import pytest

from conftest import BIN, ROOT, free_port
from httpclient import Reader
from loadgen import wait_until
from test_metrics import Load

APP = "auto_apps:application"
GIL_OFF = "GIL disabled" in subprocess.run([BIN, "--version"], capture_output=True, text=True).stdout
# What a step says it rests on (core/services/sizing_rule.c): the verdict, or without a GIL the cores.
GROW_RULE = "requests wait for busy threads and cores are idle (no GIL)" if GIL_OFF else "threads-short"
IDLE_S = 5.0    # SIZING_IDLE_MS (core/services/sizing_rule.h)
WINDOW_S = 1.0  # SIZING_WINDOW_MS


def auto_server(server_factory, *extra, bound="auto"):
    mport = free_port()
    srv = server_factory("--blocking-threads", bound, "--metrics-bind", f"127.0.0.1:{mport}", *extra, app=APP)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            if pool(mport):
                return srv, mport
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError("the worker never published its figures")


def stats(mport):
    with urllib.request.urlopen(f"http://127.0.0.1:{mport}/stats.json", timeout=5) as r:
        return json.loads(r.read())


def pool(mport):
    """The worker's published blocking_threads (None before it publishes)."""
    w = stats(mport)["workers"]
    return w[0]["blocking_threads"] if w else None


def wait_pool(mport, check, timeout, what):
    deadline = time.monotonic() + timeout
    seen = []
    while True:
        b = pool(mport)
        seen.append(b["active"])
        if check(b):
            return b, time.monotonic()
        assert time.monotonic() < deadline, f"{what}: never within {timeout} s; active seen: {seen}"
        time.sleep(0.2)


def grown_to_two(server_factory, *extra):
    """An auto:2 server grown to two threads by load that then stopped."""
    srv, mport = auto_server(server_factory, *extra, bound="auto:2")
    load = Load(srv.port, "/?sleep=0.05", conns=8)
    try:
        wait_pool(mport, lambda b: b["active"] == 2, 8, "grows to two")
    finally:
        load.stop()
    time.sleep(0.5)
    return srv, mport


def changes(log):
    return re.findall(r"info: (blocking threads \d+ -> \d+ \(auto.*)", log)


def test_grows_while_requests_wait_and_retires_when_idle(server_factory):
    """Requests that sleep 50 ms with the GIL released, on 24 connections:
    one thread serves at most 20 a second. The pool grows past one thread
    within a few seconds, each step logged as threads-short (without a
    GIL: as cores idle) with its figures, and then serves several times that rate; with the load gone it
    retires to one thread once the idle time has passed."""
    srv, mport = auto_server(server_factory)
    b = pool(mport)
    assert b == {**b, "auto": True, "active": 1, "started": 1, "max": 32, "changes": 0}, b
    load = Load(srv.port, "/?sleep=0.05", conns=24)
    try:
        t0 = time.monotonic()
        b, t1 = wait_pool(mport, lambda b: b["active"] > 1, 8, "grows past one thread")
        grown_in = t1 - t0
        b, _ = wait_pool(mport, lambda b: b["active"] >= 4, 8, "keeps growing while requests wait")
        time.sleep(WINDOW_S)
        before, t_before = load.done, time.monotonic()
        time.sleep(2.0)
        rate = (load.done - before) / (time.monotonic() - t_before)
    finally:
        load.stop()
    assert rate > 3 * 20, f"{rate:.0f} requests a second: not more at once than one thread serves"
    grown = b["active"]
    b, t2 = wait_pool(mport, lambda b: b["active"] == 1, IDLE_S + 4 * WINDOW_S + 4, "retires when idle")
    # The log is read once the pool is back at one thread: a window that
    # closes just after the load stops may still grow the pool (its requests
    # were waiting), and that step is logged and counted like the others.
    log = srv.log_text()
    steps = changes(log)
    assert b["started"] >= grown and b["changes"] == len(steps), (b, steps)
    grows = [s for s in steps if "(auto, at most" in s]
    assert grows and steps[0].startswith(f"blocking threads 1 -> 2 (auto, at most 32): {GROW_RULE}"), log[-3000:]
    for s in grows:
        assert GROW_RULE in s and "requests waiting on average" in s and "over 1.0 s" in s, s
        assert re.search(r"a request waiting for a busy pool \d+% of the time", s), s
    for s in steps:
        assert s in grows or re.fullmatch(r"blocking threads \d+ -> \d+ \(auto\): pool threads? \d+( to \d+)? "
                                          r"took no request for 5 s; parked, kept for reuse", s), s
    last = steps[-1]
    assert re.fullmatch(r"blocking threads \d+ -> 1 \(auto\): pool threads? 1( to \d+)? took no request for "
                        r"5 s; parked, kept for reuse", last), last
    assert b["last_change"] == last
    print(f"\nauto: past one thread in {grown_in:.1f} s, {grown} threads, {rate:.0f} requests/s; steps: {steps}")


@pytest.mark.skipif(GIL_OFF, reason="a free-threaded build with the GIL off: a CPU-bound app rightly grows "
                                     "while cores are idle (tests/unit/test_sizing_rule.c covers that rule)")
def test_stays_at_one_when_requests_hold_the_gil(server_factory):
    """Requests that hold the GIL for 5 ms of CPU each, on 16 connections:
    requests wait, but the pool's thread is on the GIL (or waits for a CPU),
    never short of threads: the pool stays at one thread and logs no change."""
    srv, mport = auto_server(server_factory)
    load = Load(srv.port, "/?spin=0.005", conns=16)
    try:
        seen = set()
        end = time.monotonic() + 6 * WINDOW_S
        while time.monotonic() < end:
            seen.add(pool(mport)["active"])
            time.sleep(0.25)
    finally:
        load.stop()
    assert load.done > 50
    assert seen == {1}, seen
    assert pool(mport)["changes"] == 0 and not changes(srv.log_text()), srv.log_text()[-2000:]


def test_pipelined_behind_a_retired_thread_still_runs(server_factory):
    """A connection's first request, on pool thread 1, answers with a 16 MiB
    file the client does not read; 31 requests pipelined behind it run on
    thread 1 at once, and 8 more wait in the connection's buffer for room.
    Thread 1, idle, is retired. Once the client reads, the waiting requests
    go to the app behind the ones done on thread 1: to a thread that takes
    requests, not to the retired one, and every response comes."""
    srv, mport = grown_to_two(server_factory)
    # Thread 0 busy meanwhile, so that the connection's requests go to thread 1.
    hold = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    hold.sendall(b"GET /?sleep=3 HTTP/1.1\r\nHost: t\r\n\r\n")
    time.sleep(0.5)
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
    c.settimeout(30)
    c.connect(("127.0.0.1", srv.port))
    big, n = 16 << 20, 40
    c.sendall(b"GET /?file=%d HTTP/1.1\r\nHost: t\r\n\r\n" % big +
              b"".join(b"GET /?n=%d HTTP/1.1\r\nHost: t\r\n\r\n" % i for i in range(1, n)))
    assert Reader(hold).read_response().status == 200
    wait_pool(mport, lambda b: b["active"] == 1, IDLE_S + 4 * WINDOW_S + 4, "retires thread 1")
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    reader = Reader(c)
    r = reader.read_response()
    assert r.status == 200 and len(r.body) == big
    for i in range(1, n):
        r = reader.read_response()
        assert r.status == 200 and r.body == b"ok\n", (i, r)
    c.close()
    hold.close()


def test_a_pipeline_stays_on_one_thread_when_its_old_one_is_started_again(server_factory):
    """A connection's first 33 requests ran on pool thread 1 and answered
    with files the client reads slowly; thread 1, idle, is retired. As the
    client reads, the requests behind them go to thread 0, the first of them
    asleep for seconds; load on other connections starts thread 1 again.
    The connection's requests still running on thread 0, the next ones go
    there too, behind them: the app sees each start after the one before
    it ended, never two of one connection's requests at once."""
    srv, mport = grown_to_two(server_factory)
    hold = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    hold.sendall(b"GET /?sleep=3 HTTP/1.1\r\nHost: t\r\n\r\n")  # thread 0 busy: the next go to 1
    time.sleep(0.5)
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
    c.settimeout(60)
    c.connect(("127.0.0.1", srv.port))
    # Larger than the socket buffers hold (4 MiB sent, 1 MiB received at
    # most here): no response ends before the client reads it.
    first, big, files, logged = 16 << 20, 8 << 20, 33, range(33, 43)
    c.sendall(b"".join(b"GET /?file=%d HTTP/1.1\r\nHost: t\r\n\r\n" % (first if i == 0 else big)
                       for i in range(files)) +
              b"".join(b"GET /?log=%d%s HTTP/1.1\r\nHost: t\r\n\r\n" % (k, b"&sleep=8" if k == 33 else b"")
                       for k in logged))
    assert Reader(hold).read_response().status == 200
    hold.close()
    wait_pool(mport, lambda b: b["active"] == 1, IDLE_S + 4 * WINDOW_S + 4, "retires thread 1")
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    reader = Reader(c)
    r = reader.read_response()  # its end tops the pipeline up: request 33 goes to thread 0 and sleeps
    assert r.status == 200 and len(r.body) == first
    time.sleep(0.3)
    load = Load(srv.port, "/?sleep=0.05", conns=8)  # on while request 33 sleeps: thread 1 stays in use
    try:
        wait_pool(mport, lambda b: b["active"] == 2, 6, "starts thread 1 again")
        for i in range(1, files):
            r = reader.read_response()
            assert r.status == 200 and len(r.body) == big, i
        for k in logged:
            r = reader.read_response()
            assert r.status == 200 and r.body == b"ok\n", (k, r)
    finally:
        load.stop()
    c.close()
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(b"GET /?order HTTP/1.1\r\nHost: t\r\n\r\n")
        seen = Reader(s).read_response().body.decode().splitlines()
    assert seen == [f"{e} {k}" for k in logged for e in ("start", "end")], seen


class Reconnecting(Load):
    """Load whose connections reconnect when the server closes them (a
    draining worker answers with Connection: close)."""

    def run(self):
        req = f"GET {self.path} HTTP/1.1\r\nHost: t\r\n\r\n".encode()
        while not self.stopping.is_set():
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
                    reader = Reader(s)
                    while not self.stopping.is_set():
                        s.sendall(req)
                        r = reader.read_response()
                        with self.lock:
                            self.done += 1
                        if r.header("connection") == "close":
                            break
            except (OSError, EOFError):
                time.sleep(0.05)


def test_a_reload_under_load_starts_again_at_one_and_grows(server_factory):
    """SIGHUP while the pool has grown: the new worker starts with one
    thread and grows again on its own figures (its steps logged under its
    pid); the old one drains and exits with every thread it started."""
    srv, mport = auto_server(server_factory, "--graceful-timeout", "10")
    load = Reconnecting(srv.port, "/?sleep=0.05", conns=16)
    try:
        wait_pool(mport, lambda b: b["active"] > 1, 8, "grows past one thread")
        old = stats(mport)["workers"][0]["pid"]
        srv.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 20
        while True:
            w = stats(mport)["workers"][0]
            if w["pid"] != old and w["blocking_threads"]["active"] > 1:
                break
            assert time.monotonic() < deadline, f"the new worker never grew: {w['pid']} {w['blocking_threads']}"
            time.sleep(0.2)
    finally:
        load.stop()
    assert load.done > 0
    firsts = set(re.findall(r"\[cserve (\d+)\] info: blocking threads 1 -> 2 \(auto", srv.log_text()))
    assert {str(old), str(w["pid"])} <= firsts, srv.log_text()[-3000:]
    # The old worker drained and joined every thread it had started.
    assert wait_until(lambda: f"[cserve {old}] info: stopped" in srv.log_text(), 15), srv.log_text()[-3000:]


def test_app_timeout_watches_a_thread_started_later(server_factory):
    """--app-timeout with auto: a request stuck on pool thread 1, started
    when the pool grew, is reported by the watchdog (that thread named) and
    answered 503, as on a thread the worker started with."""
    srv, mport = grown_to_two(server_factory, "--app-timeout", "2", "--graceful-timeout", "2")
    hold = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    hold.sendall(b"GET /?sleep=1 HTTP/1.1\r\nHost: t\r\n\r\n")  # thread 0, under the timeout
    time.sleep(0.3)
    stuck = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    t0 = time.monotonic()
    stuck.sendall(b"GET /?sleep=60 HTTP/1.1\r\nHost: t\r\n\r\n")
    r = Reader(stuck).read_response()
    assert r.status == 503 and time.monotonic() - t0 < 6, r
    assert "app watchdog: pool thread 1 has been in the app" in srv.log_text(), srv.log_text()[-3000:]
    assert Reader(hold).read_response().status == 200
    hold.close()
    stuck.close()


def test_stats_show_auto(server_factory, tmp_path):
    """The --stats table's head and --stats-json say auto, the threads taking
    requests, started, and the most."""
    out = tmp_path / "stats.json"
    srv = server_factory("--blocking-threads", "auto:6", "--stats", "--stats-json", str(out), app=APP)
    with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/", timeout=5) as r:
        assert r.read() == b"ok\n"
    srv.stop()
    assert "blocking threads auto: 1 taking requests, 1 started, at most 6" in srv.log_text()
    w = json.loads(out.read_text())["workers"][0]
    assert w["blocking_threads"] == {"auto": True, "active": 1, "started": 1, "max": 6}
    assert [t["role"] for t in w["threads"]] == ["loop", "pool"]


@pytest.mark.parametrize("value,line", [("auto", "auto:32"), ("auto:8", "auto:8"), ("auto:1", "auto:1"),
                                        ("3", "3")])
def test_check_config_shows_the_form(value, line):
    """--check-config (and the variable) print the form given: auto, its
    bound, or a fixed count, and where it came from."""
    for how in ("option", "env"):
        env = dict(os.environ)
        args = [BIN, "--check-config", "--chdir", str(ROOT / "tests/integration/apps"), APP]
        if how == "option":
            args[1:1] = ["--blocking-threads", value]
        else:
            env["CSERVE_BLOCKING_THREADS"] = value
        p = subprocess.run(args, capture_output=True, text=True, timeout=30, env=env)
        assert p.returncode == 0, p.stderr
        source = "command line" if how == "option" else "environment: CSERVE_BLOCKING_THREADS"
        assert f"blocking-threads: {line} ({source})\n" in p.stdout, p.stdout


@pytest.mark.parametrize("value", ["auto:0", "auto:", "auto:x", "autox", "auto:257", "auto:-1", "Auto"])
def test_bad_forms_are_refused(value):
    """A bound out of range or a form that is neither N nor auto[:MAX]: one
    line, exit status 2, before anything listens."""
    p = subprocess.run([BIN, "--blocking-threads", value, "--check-config"], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 2 and "--blocking-threads" in p.stderr and p.stderr.count("\n") == 1, p.stderr

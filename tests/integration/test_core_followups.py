"""Follow-ups to the connection core redesign: each test pins one defect.

1. A connection parked on the loop's pending list (the hand-off full) was not
   watched: a client that reset it still had its request run later.
2. SIGUSR1 with --workers N made every worker write the whole --stats-json
   file, each overwriting the others: the supervisor must merge their parts.
3. SIGTERM while accepts were paused (out of descriptors) closed the listener
   without trying to accept: connections already in its backlog were reset,
   even when descriptors had been freed since.
4. The ring's spin counters and gauges (handoffs/handoff.h) were missing
   from the reports; a gauge is reported as its value, not over the window.
"""
import json
import os
import signal
import socket
import struct
import time

import pytest

from conftest import BIN, ROOT, Server, free_port
from httpclient import request
from loadgen import wait_until

LOGAPP = "logging_apps:application"


def _get(path):
    return f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()


def _runlog(path):
    try:
        return path.read_text().split()
    except FileNotFoundError:
        return []


def _wait_log(path, entries, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(e in _runlog(path) for e in entries):
            return
        time.sleep(0.02)
    raise AssertionError(f"the app never ran {entries}: {_runlog(path)}")


# ---------------------------------------------- 1: a parked connection is watched

@pytest.mark.parametrize("handoff", ["ring", "condvar"])
def test_reset_while_queued_is_never_run(server_factory, tmp_path, monkeypatch, handoff):
    """One pool thread, a queue of 2: two slow requests fill it, a third is
    parked. Its client resets; when the queue drains the app must not run it."""
    log = tmp_path / "runs"
    monkeypatch.setenv("CSERVE_TEST_RUNLOG", str(log))
    srv = server_factory("--blocking-threads", "1", "--queue-size", "2", app=LOGAPP, handoff=handoff)
    busy = [srv.connect() for _ in range(2)]
    busy[0].sendall(_get("/slow1?s=3"))  # still running when the reset arrives, however late
    _wait_log(log, ["/slow1"])  # running: the second one waits in the queue
    busy[1].sendall(_get("/slow2?s=0.2"))
    time.sleep(0.1)
    parked = srv.connect()
    parked.sendall(_get("/reset"))
    time.sleep(0.2)  # read and parked: the hand-off holds two jobs already
    parked.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    parked.close()  # RST
    for s in busy:
        s.settimeout(10)
        assert s.recv(4096).startswith(b"HTTP/1.1 200 ")
    # The queue drained; a request sent now is run, so anything parked before
    # it would have been run by now too.
    with srv.connect() as s:
        s.sendall(_get("/after"))
        s.settimeout(10)
        assert s.recv(4096).startswith(b"HTTP/1.1 200 ")
    _wait_log(log, ["/after"])
    for s in busy:
        s.close()
    assert "/reset" not in _runlog(log), _runlog(log)


# ------------------------------------- 2: SIGUSR1 with --workers merges the parts

def _loop_requests(st):
    return sum(th["requests"] for w in st["workers"] for th in w["threads"] if th["role"] == "loop")


def _wait_json(path, since_ns=0, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.stat(path).st_mtime_ns > since_ns:
                with open(path) as f:
                    return json.load(f)  # written whole and renamed into place
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"{path} not (re)written within {timeout}s")


def _hello_n(srv, n):
    for _ in range(n):  # a connection each: SO_REUSEPORT spreads them over the workers
        resp = request(srv.port, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", timeout=10)
        assert (resp.version, resp.status) == ("HTTP/1.1", 200), resp


def test_sigusr1_with_workers_merges_every_worker(server_factory, tmp_path):
    path = tmp_path / "stats.json"
    srv = server_factory("--workers", "2", "--stats-json", str(path))
    _hello_n(srv, 60)
    time.sleep(0.2)
    srv.proc.send_signal(signal.SIGUSR1)
    st = _wait_json(path)
    assert len(st["workers"]) == 2, st.keys()
    assert _loop_requests(st) == 60
    m1 = os.stat(path).st_mtime_ns
    _hello_n(srv, 40)
    time.sleep(0.2)
    srv.proc.send_signal(signal.SIGUSR1)
    st = _wait_json(path, since_ns=m1)
    assert len(st["workers"]) == 2 and _loop_requests(st) == 100
    assert srv.proc.poll() is None, "SIGUSR1 must not stop the server"
    assert srv.stop() == 0
    st = json.load(open(path))
    assert len(st["workers"]) == 2 and _loop_requests(st) == 100
    assert not list(tmp_path.glob("stats.json.*")), list(tmp_path.iterdir())  # no part left behind


# ------------------------------ 3: SIGTERM takes the backlog even when paused

def test_sigterm_takes_the_backlog_while_accepts_are_paused(tmp_path):
    port = free_port()
    srv = Server(["prlimit", "--nofile=40:40", BIN, "--bind", f"127.0.0.1:{port}",
                  "--app", "native-hello", "--header-timeout", "30"], port, cwd=str(ROOT))
    held = []
    waiting = socket.socket()
    try:
        srv.wait_ready()
        # Idle connections until the server has no descriptor left (its
        # accept after the last one fails): the next one waits in the backlog.
        while "pausing accepts" not in srv.log_text():
            assert len(held) < 60, srv.log_text()
            held.append(srv.connect())
            time.sleep(0.02)
        waiting = srv.connect()
        waiting.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        for s in held[:10]:  # free descriptors, well within the 100 ms pause (more than the backlog ahead of `waiting`)
            s.close()
        time.sleep(0.02)
        srv.proc.send_signal(signal.SIGTERM)
        waiting.settimeout(5)
        try:
            resp = waiting.recv(4096)
        except ConnectionResetError:
            resp = b"reset"
        assert resp.startswith(b"HTTP/1.1 200 "), resp
        waiting.close()  # its lingering close ends
        assert srv.proc.wait(timeout=15) == 0
    finally:
        for s in held:
            s.close()
        waiting.close()
        srv.close()


# ------------------------------------------ 4: the ring's spin counters and gauges

def _handoff_by_role(st):
    (w,) = st["workers"]
    return {th["role"]: th["counters"]["handoff"] for th in w["threads"]}


def test_ring_spin_counters_and_gauges_are_reported(server_factory, tmp_path):
    path = tmp_path / "stats.json"
    srv = server_factory("--stats-json", str(path), "--blocking-threads", "1", handoff="ring")
    _hello_n(srv, 60)  # one at a time: the pool thread waits between them
    time.sleep(0.2)
    srv.proc.send_signal(signal.SIGUSR1)
    a = _handoff_by_role(_wait_json(path))
    for key in ("loop_spins", "loop_spin_hits", "loop_spin_budget_ns"):
        assert isinstance(a["loop"][key], int), (key, a["loop"])
    for key in ("spin_hits", "spin_budget_ns"):
        assert isinstance(a["pool"][key], int), (key, a["pool"])
    assert a["pool"]["spin_hits"] <= a["pool"]["taken"]
    budget = a["pool"]["spin_budget_ns"]
    assert budget > 0, "the adaptive budget (the default) learnt nothing from 60 waits"
    # A new window with no traffic: counters start again from 0, but the
    # budget (unchanged: the pool thread took nothing) is still what it is.
    m = os.stat(path).st_mtime_ns
    windows = srv.log_text().count("stats: new measurement window")
    srv.proc.send_signal(signal.SIGUSR2)
    # SIGUSR1 only once the new window is open: sent while SIGUSR2 is still
    # pending, it would be read first (the lower signal number) and report
    # the old window
    assert wait_until(lambda: srv.log_text().count("stats: new measurement window") > windows, 10), \
        "SIGUSR2 opened no new window"
    srv.proc.send_signal(signal.SIGUSR1)
    b = _handoff_by_role(_wait_json(path, since_ns=m))
    assert b["pool"]["taken"] == 0 and b["pool"]["spin_hits"] == 0
    assert b["pool"]["spin_budget_ns"] == budget, (budget, b["pool"])
    assert srv.stop() == 0

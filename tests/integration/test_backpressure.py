"""Backpressure: --queue-size bounds the jobs queued on each pool thread,
and a connection whose request finds every queue full is parked on the
loop's pending list until a slot frees.

- The bound holds: a parked request goes to whichever pool thread frees a
  slot first, not behind the long jobs of a full queue.
- A parked connection is still watched: a client that resets it leaves, the
  others are served in order, every descriptor comes back, and the app
  never runs the request it left behind.
- A hand-off that refuses with nothing in flight (the test build's
  CSERVE_FAULT_SUBMIT) is retried on the loop's timed pass, with no other
  event to wake it, on every backend; when the retried submit then fails
  the request gets a 503, and if its client has gone meanwhile that
  connection is dropped and nothing else (the ASan build turns a use after
  free there into a crash).
"""
import socket
import struct
import time

import pytest

from httpclient import Reader, get, req
from loadgen import wait_until
from procfs import fd_count, settled_fds

HANG_S = 30  # a deadline that only detects a hang

APP = "recording_apps:app"
LOGAPP = "logging_apps:application"
WSGI_APP = "wsgi_apps:application"


def lines(path):
    with open(path) as f:
        return f.read().split("\n")[:-1]


def rst_close(sock):
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def hello_ok(port):
    r = get(port, "/hello", timeout=5)
    assert r.status == 200 and r.body == b"hello", r


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


# ---- the bound ----------------------------------------------------------------

def _sleepers(srv, logfile, plan):
    """Send /sleep requests on fresh connections, one at a time, each only
    after the previous one is (visibly) with the app or queued."""
    socks = []
    for i, secs in enumerate(plan):
        s = srv.connect(timeout=15)
        s.sendall(req("GET", f"/sleep?s={secs}&id={i}&log={logfile}"))
        socks.append(s)
        time.sleep(0.05)
    return socks


def test_queue_size_bounds_each_pool_thread_and_parks_the_rest(server_factory, logfile):
    """--queue-size 2, two pool threads, long jobs 0 and 2 on thread 0, short
    jobs 1 and 3 on thread 1 (join-shortest-queue, ties to thread 0): both
    queues are full, so job 4 waits in the loop's pending queue and goes to
    whichever thread frees a slot first, thread 1 after ~1.6 s. Without the
    bound (a server that ignores --queue-size) job 4 is queued at once
    behind the long jobs on thread 0 and starts after ~6 s. Job 1 lasts
    0.8 s so that it is still running when job 2 arrives (0.05 s later)
    even if the client runs late."""
    srv = server_factory("--queue-size", "2", "--blocking-threads", "2", app=APP)
    socks = _sleepers(srv, logfile, [3.0, 0.8, 3.0, 0.8, 0.1])
    try:
        for i, s in enumerate(socks):
            r = Reader(s).read_response()
            assert r.status == 200 and r.body == f"slept {i}".encode(), r
        order = lines(logfile)
        assert sorted(order) == [f"start {i}" for i in range(5)], order
        assert order.index("start 4") < order.index("start 2"), \
            f"job 4 was queued behind thread 0's long jobs, not held until a slot freed: {order}"
    finally:
        for s in socks:
            s.close()


# ---- a parked connection that leaves ---------------------------------------------

def test_a_parked_connection_can_leave(server_factory, logfile):
    """--queue-size 2 with one pool thread: one job with the app, one queued,
    three parked in the pending queue. The client of a parked one resets
    its connection: the others are still served in order and every
    descriptor comes back."""
    srv = server_factory("--queue-size", "2", "--blocking-threads", "1", app=APP)
    base = settled_fds(srv.proc.pid)
    # 1 s jobs: job 1 cannot have started while _sleepers sends the rest
    socks = _sleepers(srv, logfile, [1.0] * 5)
    assert wait_until(lambda: lines(logfile) == ["start 0"], 0.9), lines(logfile)
    rst_close(socks[3])  # leaves while parked
    for i in (0, 1, 2, 4):
        r = Reader(socks[i]).read_response()
        assert r.status == 200 and r.body == f"slept {i}".encode(), r
        socks[i].close()
    assert wait_until(lambda: fd_count(srv.proc.pid) <= base, 10), "fds not back to baseline"
    hello_ok(srv.port)


def test_a_parked_connection_that_left_never_reaches_the_app(server_factory, logfile):
    srv = server_factory("--queue-size", "2", "--blocking-threads", "1", app=APP)
    socks = _sleepers(srv, logfile, [1.0] * 5)  # job 3 is still parked long after the reset
    rst_close(socks[3])
    for i in (0, 1, 2, 4):
        Reader(socks[i]).read_response()
        socks[i].close()
    assert "start 3" not in lines(logfile), lines(logfile)


@pytest.mark.parametrize("handoff", ["ring", "condvar"])
def test_reset_while_queued_is_never_run(server_factory, tmp_path, monkeypatch, handoff):
    """One pool thread, a queue of 2: two slow requests fill it, a third is
    parked. Its client resets; when the queue drains the app must not run it."""
    log = tmp_path / "runs"
    monkeypatch.setenv("LOGGING_APPS_RUNLOG", str(log))
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


# ---- a submit that fails after waiting for room ----------------------------------

def test_a_refused_request_is_retried_without_another_event(server_factory, hooks_bin, monkeypatch, handoff):
    """CSERVE_FAULT_SUBMIT=600 makes submits report a full queue for 600 ms
    and fail after that, with no job in flight: no completion will come to
    wake the loop. Its timed pass (at most a second apart) retries the
    parked request, which then fails and is answered 503; no other client
    connects meanwhile. Only the hooks binary (conftest.py) reads the
    variable."""
    monkeypatch.setenv("CSERVE_FAULT_SUBMIT", "600")
    srv = server_factory(app=WSGI_APP, handoff=handoff, binary=hooks_bin)
    with srv.connect(timeout=HANG_S) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        resp = Reader(s).read_response()
    assert resp.status == 503, resp
    log = srv.log_text()
    assert "handoff submit failed" in log, log
    assert "Sanitizer" not in log, log


def test_submit_error_after_backpressure_with_client_gone(server_factory, hooks_bin, monkeypatch, handoff):
    """As above, but the client closes its connection (a FIN: the request
    stands, RFC 9112 9.6's half-close) before the retried submit fails: the
    503 goes into a dead socket. The server must drop that connection, every
    descriptor comes back, and it still serves (503: the fault still holds)."""
    monkeypatch.setenv("CSERVE_FAULT_SUBMIT", "600")
    srv = server_factory(app=WSGI_APP, handoff=handoff, binary=hooks_bin)
    base = settled_fds(srv.proc.pid)
    s = srv.connect(timeout=HANG_S)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    s.close()  # gone while the request is parked (the fault refuses for 600 ms)
    assert wait_until(lambda: "handoff submit failed" in srv.log_text(), HANG_S), srv.log_text()
    assert wait_until(lambda: fd_count(srv.proc.pid) <= base, HANG_S), "the connection was never dropped"
    assert srv.proc.poll() is None, srv.log_text()
    with srv.connect(timeout=HANG_S) as s2:
        s2.sendall(b"GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        resp = Reader(s2).read_response()
        assert resp.status == 503, resp
    log = srv.log_text()
    assert "Sanitizer" not in log, log
    assert srv.stop() == 0, srv.log_text()

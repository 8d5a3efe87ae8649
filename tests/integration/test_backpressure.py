"""Backpressure: --queue-size bounds the jobs queued on each pool thread,
and a connection whose request no thread may take (its queue full, or its
running request too long to queue behind: core/conn/dispatch.c) is parked
on the loop's pending list until a thread frees.

- Parked requests go, oldest first, to whichever pool thread frees first,
  not behind a request that runs long.
- A parked connection is still watched: a client that resets it leaves, the
  others are served in order, every descriptor comes back, and the app
  never runs the request it left behind.
- So is a connection whose request is bound to a thread's queue: a reset
  drops it at once, and the thread hands the request back unrun.
- A hand-off that refuses with nothing in flight (the test build's
  CSERVE_FAULT_SUBMIT) is retried on the loop's timed pass, with no other
  event to wake it, on every backend; when the retried submit then fails
  the request gets a 503, and if its client has gone meanwhile that
  connection is dropped and nothing else (the ASan build turns a use after
  free there into a crash).

The apps' requests end when the test creates their gate file, and the test
waits for the server's state (the app's log, the worker's /stats.json on
--metrics-bind) before each step, so the order of events is the test's.
"""
import os
import signal
import socket
import struct

import pytest

from conftest import free_port
from httpclient import Reader, get, req, worker_stats
from loadgen import wait_until
from procfs import fd_count, fd_targets, settled_fds

APP = "recording_apps:app"
LOGAPP = "logging_apps:application"
WSGI_APP = "wsgi_apps:application"
HANG_S = 30  # a deadline that only detects a hang


def lines(path):
    with open(path) as f:
        return f.read().split("\n")[:-1]


def rst_close(sock):
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def hello_ok(port):
    r = get(port, "/hello", timeout=HANG_S)
    assert r.status == 200 and r.body == b"hello", r


def _get(path):
    return f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()


def _runlog(path):
    try:
        return path.read_text().split()
    except FileNotFoundError:
        return []


def _wait_log(path, entries):
    assert wait_until(lambda: all(e in _runlog(path) for e in entries), HANG_S), \
        f"the app never ran {entries}: {_runlog(path)}"


class Watched:
    """A server with --metrics-bind, and its worker's published figures."""

    def __init__(self, server_factory, *args, **kw):
        self.mport = free_port()
        self.srv = server_factory(*args, "--metrics-bind", f"127.0.0.1:{self.mport}", **kw)
        self.sent = 0  # request bytes the test sent

    def worker(self):
        return worker_stats(self.mport)

    def wait(self, cond, what):
        seen = []

        def ok():
            w = self.worker()
            seen[:] = [w and {k: w[k] for k in ("bytes_in", "connections_open")}]
            return w is not None and cond(w)
        assert wait_until(ok, HANG_S), f"{what}: never so, last seen {seen}"

    def send(self, sock, data):
        """Send data and wait until the loop has read it all (bytes_in): the
        loop parses what it reads at once, so a request in it is then with
        the app, in a pool thread's queue, or parked."""
        sock.sendall(data)
        self.sent += len(data)
        self.wait(lambda w: w["bytes_in"] >= self.sent, f"the loop reads {self.sent} bytes")

    def wait_open(self, n):
        self.wait(lambda w: w["connections_open"] == n, f"{n} connections open")


def _gated(srv, logfile, tmp_path, plan):
    """One connection per request of plan, sent in turn, each once the loop
    has read the one before: plan[i] True gates request i on a file (its
    path returned), False ends it at once. Request i records "start i"."""
    socks, gates = [], []
    for i, gated in enumerate(plan):
        gate = tmp_path / f"gate-{i}"
        q = f"s={HANG_S}&gate={gate}" if gated else "s=0"
        s = srv.srv.connect(timeout=HANG_S)
        srv.send(s, req("GET", f"/sleep?{q}&id={i}&log={logfile}"))
        socks.append(s)
        gates.append(gate)
    return socks, gates


# ---- the bound ----------------------------------------------------------------

def test_requests_wait_in_the_loop_for_the_first_thread_that_frees(server_factory, logfile, tmp_path):
    """--queue-size 2, two pool threads, jobs 0 and 1 with the app until
    their gates open (one on each thread): a thread running a request that
    has run long takes nothing more (core/conn/dispatch.c), so jobs 2, 3 and
    4 wait in the loop's pending list, in arrival order. Once job 1 ends,
    job 2 (the oldest) goes to the thread that freed, and jobs 3 and 4 run
    there after it while job 0 still runs: none was queued behind job 0.
    Bound early, by joining the shortest queue, job 2 would wait behind
    job 0 on thread 0 and could not start."""
    srv = Watched(server_factory, "--queue-size", "2", "--blocking-threads", "2", app=APP)
    socks, gates = _gated(srv, logfile, tmp_path, [True, True, True, False, False])
    try:
        _wait_log_lines(logfile, {"start 0", "start 1"})
        assert sorted(lines(logfile)) == ["start 0", "start 1"], lines(logfile)
        gates[1].touch()
        r = Reader(socks[1]).read_response()
        assert r.status == 200 and r.body == b"slept 1", r
        assert wait_until(lambda: "start 2" in lines(logfile), HANG_S), \
            f"job 2 was queued behind thread 0's job, not held until a thread freed: {lines(logfile)}"
        assert lines(logfile)[2:] == ["start 2"], lines(logfile)
        gates[2].touch()
        for i in (2, 3, 4):
            r = Reader(socks[i]).read_response()
            assert r.status == 200 and r.body == f"slept {i}".encode(), r
        assert lines(logfile)[2:] == ["start 2", "start 3", "start 4"], lines(logfile)
        gates[0].touch()
        r = Reader(socks[0]).read_response()
        assert r.status == 200 and r.body == b"slept 0", r
    finally:
        for g in gates:
            g.touch()
        for s in socks:
            s.close()


def _wait_log_lines(logfile, want):
    assert wait_until(lambda: want <= set(lines(logfile)), HANG_S), f"want {want}: {lines(logfile)}"


# ---- a parked connection that leaves ---------------------------------------------

def _one_leaves(server_factory, logfile, tmp_path):
    """--queue-size 2 with one pool thread: job 0 with the app (until its
    gate opens), jobs 1 to 4 waiting for the thread (queued behind job 0 or
    parked in the loop). The client of job 3
    resets its connection; once the loop has closed it, job 0 ends. Returns
    the server, the descriptors it held before."""
    srv = Watched(server_factory, "--queue-size", "2", "--blocking-threads", "1", app=APP)
    base = settled_fds(srv.srv.proc.pid)
    socks, gates = _gated(srv, logfile, tmp_path, [True, False, False, False, False])
    _wait_log_lines(logfile, {"start 0"})
    assert lines(logfile) == ["start 0"], lines(logfile)
    rst_close(socks[3])  # leaves while parked
    srv.wait_open(4)
    gates[0].touch()
    for i in (0, 1, 2, 4):
        r = Reader(socks[i]).read_response()
        assert r.status == 200 and r.body == f"slept {i}".encode(), r
        socks[i].close()
    return srv, base


def test_a_parked_connection_can_leave(server_factory, logfile, tmp_path):
    """The others are still served in order and every descriptor comes back."""
    srv, base = _one_leaves(server_factory, logfile, tmp_path)
    assert lines(logfile) == ["start 0", "start 1", "start 2", "start 4"], lines(logfile)
    assert wait_until(lambda: fd_count(srv.srv.proc.pid) <= base, HANG_S), "fds not back to baseline"
    hello_ok(srv.srv.port)


def test_a_parked_connection_that_left_never_reaches_the_app(server_factory, logfile, tmp_path):
    srv, _ = _one_leaves(server_factory, logfile, tmp_path)
    # Job 4 was parked behind job 3 and has run: job 3 would have run before it.
    assert "start 3" not in lines(logfile), lines(logfile)


@pytest.mark.parametrize("handoff", ["ring", "condvar"])
def test_reset_while_queued_is_never_run(server_factory, tmp_path, monkeypatch, handoff):
    """One pool thread, a queue of 2: two requests fill it (the first with
    the app until its gate opens), a third is parked. Its client resets;
    when the queue drains the app must not run it."""
    log = tmp_path / "runs"
    gate = tmp_path / "gate"
    monkeypatch.setenv("LOGGING_APPS_RUNLOG", str(log))
    srv = Watched(server_factory, "--blocking-threads", "1", "--queue-size", "2", app=LOGAPP, handoff=handoff)
    busy = [srv.srv.connect(timeout=HANG_S) for _ in range(2)]
    srv.send(busy[0], _get(f"/slow1?gate={gate}"))
    _wait_log(log, ["/slow1"])  # running: the second one waits in the queue
    srv.send(busy[1], _get("/slow2"))
    parked = srv.srv.connect(timeout=HANG_S)
    srv.send(parked, _get("/reset"))  # read and parked: the hand-off holds two jobs already
    rst_close(parked)
    srv.wait_open(2)
    gate.touch()
    for s in busy:
        assert Reader(s).read_response().status == 200
    # The queue drained; a request sent now is run, so anything parked before
    # it would have been run by now too.
    with srv.srv.connect(timeout=HANG_S) as s:
        s.sendall(_get("/after"))
        assert Reader(s).read_response().status == 200
    _wait_log(log, ["/after"])
    for s in busy:
        s.close()
    assert "/reset" not in _runlog(log), _runlog(log)


def _server_inode(port, client):
    """The inode of the server's end of client's connection to port (from
    /proc/net/tcp: the socket whose local port is port and whose peer is
    client's own address), as in the server's /proc/PID/fd links."""
    host, cport = client.getsockname()
    peer = f"{socket.inet_aton(host)[::-1].hex().upper()}:{cport:04X}"
    with open("/proc/net/tcp") as f:
        for row in f.read().splitlines()[1:]:
            col = row.split()
            if col[1].endswith(f":{port:04X}") and col[2] == peer:
                return int(col[9])
    raise AssertionError(f"no server socket for {host}:{cport}")


def _pool(srv):
    """The worker's one pool thread, as /stats.json shows it now."""
    seen = []
    srv.wait(lambda w: seen.append(w) is None, "the worker's figures")
    return [t for t in seen[-1]["threads"] if t["role"] == "pool"][0]


def _warm(srv, n=100):
    """n fast requests on a connection of their own: the pool thread's pace."""
    with srv.srv.connect(timeout=HANG_S) as s:
        r = Reader(s)
        for _ in range(n):
            s.sendall(_get("/warm"))
            assert r.read_response().status == 200
    srv.sent += n * len(_get("/warm"))


def test_reset_while_bound_is_never_run(server_factory, tmp_path, monkeypatch, handoff):
    """One pool thread measured fast. A connection pipelines two requests:
    the first runs until its gate opens, the second is bound behind it, in
    the thread's queue (the pace allows it: core/conn/dispatch.c). The
    client resets. The loop drops the connection at once, not at its next
    write (its socket leaves the worker's descriptors while the first
    request still runs), and when the thread comes to the second request
    it hands it back without calling the app (the pool's `skipped`).

    Whether the second request binds is the pace's to decide, and a pool
    thread that lost its CPU reads slow: until it binds, the pair is sent
    again, after more fast requests (the gate opened and the answers read),
    so what is checked is always the bound case. A miss's gated request
    ran long and set the thread's slow side, whose excess falls back by an
    eighth a request (dispatch.h, DISPATCH_SLOW_FALL): a hundred fast ones
    bring it back under the budget from any length the gate allows."""
    log = tmp_path / "runs"
    monkeypatch.setenv("LOGGING_APPS_RUNLOG", str(log))
    srv = Watched(server_factory, "--blocking-threads", "1", app=LOGAPP, handoff=handoff)
    pid, port = srv.srv.proc.pid, srv.srv.port
    for attempt in range(50):
        _warm(srv)
        gate = tmp_path / f"gate-{attempt}"
        s = srv.srv.connect(timeout=HANG_S)
        # (its own deadline past HANG_S: ended by the gate, never by time)
        srv.send(s, _get(f"/slow{attempt}?gate={gate}&s={3 * HANG_S}") + _get(f"/behind{attempt}"))
        _wait_log(log, [f"/slow{attempt}"])
        if _pool(srv)["queue_depth"] == 2:
            break
        gate.touch()  # not bound: finish both, and measure again
        r = Reader(s)
        assert r.read_response().status == 200 and r.read_response().status == 200
        s.close()
    else:
        raise AssertionError("the second request never bound in 50 attempts")
    inode = f"socket:[{_server_inode(port, s)}]"
    assert inode in fd_targets(pid)
    rst_close(s)
    assert wait_until(lambda: inode not in fd_targets(pid), HANG_S), "the reset connection stayed open"
    assert _pool(srv)["queue_depth"] == 2, "the first request ended before the gate opened"
    gate.touch()
    assert wait_until(lambda: _pool(srv)["queue_depth"] == 0, HANG_S), "the thread's queue never emptied"
    with srv.srv.connect(timeout=HANG_S) as s:
        s.sendall(_get("/after"))
        assert Reader(s).read_response().status == 200
    runs = _runlog(log)
    assert f"/behind{attempt}" not in runs, runs
    assert _pool(srv)["counters"]["skipped"] == 1, _pool(srv)["counters"]


def test_reset_read_with_its_request_is_never_run(server_factory, tmp_path, monkeypatch, handoff):
    """The loop reads a request and its client's reset in one event: here
    the worker is stopped (SIGSTOP) while one client sends a gated request
    and another, on a connection it has already used (so the loop watches
    it, and one edge brings the bytes and the reset together), sends a
    request and resets; then continued, so the loop finds both at once and,
    with the thread measured fast, would bind the second behind the first.
    It is not run: once the gate opens and the first is answered, a request
    sent after it runs, and the reset one never did."""
    log = tmp_path / "runs"
    gate = tmp_path / "gate"
    monkeypatch.setenv("LOGGING_APPS_RUNLOG", str(log))
    srv = Watched(server_factory, "--blocking-threads", "1", app=LOGAPP, handoff=handoff)
    pid = srv.srv.proc.pid
    _warm(srv)
    first, gone = _get(f"/slow?gate={gate}&s={3 * HANG_S}"), _get("/reset")
    a = srv.srv.connect(timeout=HANG_S)
    b = srv.srv.connect(timeout=HANG_S)
    srv.send(b, _get("/used"))
    assert Reader(b).read_response().status == 200
    os.kill(pid, signal.SIGSTOP)
    try:
        a.sendall(first)
        b.sendall(gone)
        rst_close(b)
    finally:
        os.kill(pid, signal.SIGCONT)
    srv.sent += len(first) + len(gone)
    srv.wait(lambda w: w["bytes_in"] >= srv.sent, "the loop reads both requests")
    _wait_log(log, ["/slow"])
    gate.touch()
    assert Reader(a).read_response().status == 200
    a.close()
    with srv.srv.connect(timeout=HANG_S) as s:
        s.sendall(_get("/after"))
        assert Reader(s).read_response().status == 200
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

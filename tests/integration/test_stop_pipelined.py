"""A stop (SIGTERM) or a reload (SIGHUP: the worker retires, its successor
serves) answers every request the app ran: 20 requests pipelined on one
connection, the first held in the app until the test lets it go, then the
signal. The requests already with the app are answered in order, only the
last response says "Connection: close" (a client discards whatever follows
one, RFC 9112 §9.6), the connection closes after it, and a request not yet
handed to the app is not run: the set of requests the app ran is the set of
responses the client read.

The second request is held too, until the client has read the first
response: the responses after the stop leave in more than one write, and
the connection stays open after the first. Two depths: on a fresh
connection the loop hands the app two requests (it does not know the
responses' size yet); after one request answered on the connection, all
twenty are with the app when the signal comes.

A request pipelined behind one already answered, and not with the app
when the signal comes, is not run either, whether it waits for the one
pool thread on the loop's pending list or is still in the connection's
buffer behind a response whose head promised keep-alive before the
signal (a reload's worker keeps such a connection open otherwise): the
connection closes after what was answered. There the order is arranged,
not raced: each request that matters is held on a file gate, and the
test goes on once the loop has read what was sent (its bytes_in) or the
app has marked a start."""
import signal
import socket
import time

import pytest

from conftest import free_port
from gate import Gate, marks
from httpclient import Reader, bytes_read, req
from loadgen import wait_until

APP = "recording_apps:app"
GATED_APP = "auto_apps:application"
N = 20
HANG_S = 30  # a deadline that only detects a hang


def _ran(log):
    """The ids of the requests the app started, in the order it started them."""
    with open(log) as f:
        return [int(line.split()[1]) for line in f if line.startswith("start ") and line.split()[1].isdigit()]


def _read(r, ids, conn, n=None):
    """Read n responses off r (None: up to the close) into ids (from the
    bodies) and conn (the Connection header of each)."""
    while n is None or n > 0:
        try:
            resp = r.read_response()
        except EOFError:
            assert n is None, f"closed after {ids}"
            assert r.buf == b"", f"a partial response before the close: {r.buf[:200]!r}"
            return
        assert resp.status == 200, resp
        word, _, rid = resp.body.decode().partition(" ")
        assert word == "slept", resp
        ids.append(int(rid))
        conn.append(resp.header("connection", "").lower())
        n = None if n is None else n - 1


@pytest.mark.parametrize("warm", [False, True], ids=["fresh", "warm"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["sigterm", "sighup"])
def test_a_stop_answers_every_request_the_app_ran(server_factory, logfile, tmp_path, sig, warm):
    srv = server_factory("--blocking-threads", "1", "--graceful-timeout", "60", app=APP)
    gate1, gate2 = tmp_path / "gate1", tmp_path / "gate2"
    worker = srv.proc.pid  # one worker: the process itself (after a reload, its successor's supervisor)
    s = srv.connect(timeout=30)
    try:
        if warm:
            s.sendall(req("GET", f"/sleep?id=0&s=0&log={logfile}"))
            assert Reader(s).read_response().body == b"slept 0"
        held = b"".join(req("GET", f"/sleep?id={i}&s=60&gate={g}&log={logfile}")
                        for i, g in ((1, gate1), (2, gate2)))
        rest = b"".join(req("GET", f"/sleep?id={i}&s=0&log={logfile}") for i in range(3, N + 1))
        s.sendall(held + rest)
        assert wait_until(lambda: 1 in _ran(logfile), 30), f"the first request never reached the app: {_ran(logfile)}"
        srv.proc.send_signal(sig)
        # The stop has begun (a reload's once the successor serves): the loop says so.
        assert wait_until(lambda: "stopping:" in srv.log_text(), 30), srv.log_text()[-3000:]
        ids, conn, r = [], [], Reader(s)
        gate1.touch()
        _read(r, ids, conn, 1)
        gate2.touch()
        _read(r, ids, conn)
        # The draining worker is done with the app: what it ran is all in the log.
        _stopped(srv, sig, worker)
        ran = _ran(logfile)
        if warm:
            ran.remove(0)
        assert ids, "no response before the close"
        assert ids == list(range(1, len(ids) + 1)), f"responses out of order: {ids}"
        assert sorted(ran) == ids, f"the app ran {sorted(ran)}, the client read {ids}"
        assert not (set(range(1, N + 1)) - set(ids)) & set(ran), "a request the client never read was run"
        assert conn[-1] == "close", f"the last response does not say close: {conn}"
        assert "close" not in conn[:-1], f"a response before the last says close: {conn}"
    finally:
        s.close()


def _stopped(srv, sig, worker):
    """Wait until the signalled worker is done with the app."""
    if sig == signal.SIGTERM:
        assert srv.proc.wait(timeout=HANG_S) == 0, srv.log_text()[-3000:]
    else:
        assert wait_until(lambda: f"[cserve {worker}] info: stopped" in srv.log_text(), HANG_S), \
            srv.log_text()[-3000:]


class _Held:
    """One pool thread, held by B's request on a gate for long enough that
    its measured time puts the thread's depth at one, every way the
    dispatcher counts it (over DISPATCH_ALONE_NS): nothing binds behind the
    request it runs. Then A's pipeline, read by the loop, waits for it."""

    def __init__(self, server_factory, tmp_path, a_requests):
        self.mport = free_port()
        self.srv = server_factory("--blocking-threads", "1", "--graceful-timeout", "60",
                                  "--metrics-bind", f"127.0.0.1:{self.mport}", app=GATED_APP)
        self.mark = tmp_path / "mark"
        self.gate_b = Gate(tmp_path / "gate_b")
        self.socks = []
        self.sent = 0  # bytes sent to the server, all connections together
        self.b = self.connect()
        self.send(self.b, req("GET", f"/?log=b&mark={self.mark}&gate={self.gate_b.path}"))
        assert wait_until(lambda: marks(self.mark) == 1, HANG_S), "B never reached the app"
        time.sleep(0.1)  # B's time, and so the pace, is at least this
        self.a = self.connect()
        self.send(self.a, b"".join(a_requests))
        self.loop_read()

    def connect(self):
        s = socket.create_connection(("127.0.0.1", self.srv.port), timeout=HANG_S)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.socks.append(s)
        return s

    def send(self, s, data):
        s.sendall(data)
        self.sent += len(data)

    def loop_read(self):
        assert wait_until(lambda: bytes_read(self.mport) >= self.sent, HANG_S), "the loop never read it all"

    def release_b(self):
        self.gate_b.open()
        assert Reader(self.b).read_response().status == 200

    def close(self):
        self.gate_b.open()
        for s in self.socks:
            s.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["sigterm", "sighup"])
def test_a_pipelined_request_waiting_for_the_thread_is_not_run(server_factory, tmp_path, sig):
    """A pipelines A1 (held) and A2 while B holds the thread; D comes
    next. B ends: A1 runs in A's turn, alone (a first turn is one request),
    and D waits. A1 ends: A2, framed from A's buffer, waits behind D on the
    pending list, and D runs (its start proves A2 parked: the same pass).
    The signal then closes A with A2 unrun; D, with the app, is answered."""
    gate_1, gate_d = Gate(tmp_path / "gate_1"), Gate(tmp_path / "gate_d")
    h = None
    try:
        mark = tmp_path / "mark"
        h = _Held(server_factory, tmp_path,
                  [req("GET", f"/?log=a1&mark={mark}&gate={gate_1.path}"), req("GET", "/?log=a2")])
        d = h.connect()
        h.send(d, req("GET", f"/?log=d&mark={mark}&gate={gate_d.path}"))
        h.loop_read()
        h.release_b()
        assert wait_until(lambda: marks(mark) == 2, HANG_S), "A1 never reached the app"
        gate_1.open()
        ra = Reader(h.a)
        assert ra.read_response().body == b"ok\n"
        assert wait_until(lambda: marks(mark) == 3, HANG_S), "D never reached the app"
        worker = h.srv.proc.pid
        h.srv.proc.send_signal(sig)
        with pytest.raises(EOFError):
            ra.read_response()  # A2 unanswered: a hang here is A2 still waiting to run
        gate_d.open()
        rd = Reader(d).read_response()
        assert rd.body == b"ok\n" and rd.header("connection", "").lower() == "close", rd
        _stopped(h.srv, sig, worker)
        assert marks(mark) == 3, "A2 ran after the stop"
    finally:
        gate_1.open()
        gate_d.open()
        if h:
            h.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["sigterm", "sighup"])
def test_a_pipelined_request_behind_a_kept_alive_response_is_not_run(server_factory, tmp_path, sig):
    """A pipelines A1 and A2 while B holds the thread. B ends: A1 runs
    alone (a first turn) and streams: its head, made before the signal,
    promises keep-alive, and its first block is read; then it waits on a
    gate. The signal; the gate opens; A1's response ends, and A closes
    with A2, still in its buffer, unrun. (A reload's worker would keep A
    open for a request sent after the response, not for one before it.)"""
    gate_1 = Gate(tmp_path / "gate_1")
    h = None
    try:
        mark = tmp_path / "mark"
        h = _Held(server_factory, tmp_path,
                  [req("GET", f"/?log=a1&mark={mark}&gate={gate_1.path}&stream"), req("GET", f"/?log=a2&mark={mark}")])
        h.release_b()
        ra = Reader(h.a)
        ra.buffer_until(b"part\n")
        assert b"connection: close" not in ra.buf.lower(), ra.buf
        worker = h.srv.proc.pid
        h.srv.proc.send_signal(sig)
        assert wait_until(lambda: "stopping:" in h.srv.log_text(), HANG_S), h.srv.log_text()[-3000:]
        gate_1.open()
        assert ra.read_response().body == b"part\nok\n"
        with pytest.raises(EOFError):
            ra.read_response()
        _stopped(h.srv, sig, worker)
        assert marks(mark) == 2, "A2 ran after the stop"
    finally:
        gate_1.open()
        if h:
            h.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["sigterm", "sighup"])
def test_a_request_sent_on_its_own_after_a_stray_crlf_is_answered(server_factory, tmp_path, sig):
    """A POST whose body a stray CRLF follows (old clients send one; empty
    lines before a request line are ignored, RFC 9112 §2.2), answered;
    then B holds the one pool thread, and A sends its next request on its
    own, after reading that answer. It waits for the thread (the POST's
    0.1 s of sleep put the thread's depth at one) when the signal comes:
    it is no pipelined request, so it runs and is answered, with close."""
    mport = free_port()
    srv = server_factory("--blocking-threads", "1", "--graceful-timeout", "60",
                         "--metrics-bind", f"127.0.0.1:{mport}", app=GATED_APP)
    gate_b, mark = Gate(tmp_path / "gate_b"), tmp_path / "mark"
    a = b = None
    try:
        a = socket.create_connection(("127.0.0.1", srv.port), timeout=HANG_S)
        post = b"POST /?sleep=0.1 HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc\r\n"
        a.sendall(post)
        ra = Reader(a)
        assert ra.read_response().body == b"ok\n"
        b = socket.create_connection(("127.0.0.1", srv.port), timeout=HANG_S)
        get_b = req("GET", f"/?log=b&mark={mark}&gate={gate_b.path}")
        b.sendall(get_b)
        assert wait_until(lambda: marks(mark) == 1, HANG_S), "B never reached the app"
        get_a = req("GET", f"/?log=a1&mark={mark}")
        a.sendall(get_a)
        sent = len(post) + len(get_b) + len(get_a)
        assert wait_until(lambda: bytes_read(mport) >= sent, HANG_S), "the loop never read A's request"
        worker = srv.proc.pid
        srv.proc.send_signal(sig)
        assert wait_until(lambda: "stopping:" in srv.log_text(), HANG_S), srv.log_text()[-3000:]
        gate_b.open()
        assert Reader(b).read_response().status == 200
        r = ra.read_response()
        assert r.body == b"ok\n" and r.header("connection", "").lower() == "close", r
        _stopped(srv, sig, worker)
        assert marks(mark) == 2
    finally:
        gate_b.open()
        for s in (a, b):
            if s:
                s.close()

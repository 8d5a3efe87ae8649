"""The dispatcher's late binding and its turns (core/conn/dispatch.c,
core/conn/README.md, "Which thread runs a request"), against the real
binary, driven so that what it decides is certain: a request held on a file
gate stays on its pool thread as long as the test says, and the requests
that arrive meanwhile are placed by the dispatcher alone.

- A request goes to a pool thread only when that thread will start it
  soon: with two threads and a request held on thread 0, fast requests on
  other connections are all answered by thread 1 while it is still held;
  none is queued behind it.
- Connections take turns: a connection pipelining slow requests (more
  than half a turn each) to the one pool thread gets nothing more queued
  ahead while another connection's request waits; that request runs right
  after the pipelined one that ran when it came. (How many cheap ones a
  turn takes depends on measured time: tests/unit/test_dispatch.c.)
- Out of a turn, a pipeline of requests slower than a turn's worth binds
  only within the budget's depth, though new requests on a pool of one
  thread bind deeper: a connection that comes meanwhile waits behind no
  more of it than that.

How much these bounds cost or save under load is a benchmark's
(experiments/), not asserted here. The depth rule itself:
tests/unit/test_dispatch.c."""
import socket

from conftest import free_port
from gate import Gate, marks
from httpclient import Reader, bytes_read
from loadgen import wait_until

APP = "auto_apps:application"
HANG_S = 30  # a deadline that only detects a hang


def request(target):
    return f"GET {target} HTTP/1.1\r\nHost: t\r\n\r\n".encode()


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=HANG_S)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def app_order(port):
    """The app's notes (?log=K: "start K", "end K"), in the order made."""
    with connect(port) as s:
        s.sendall(request("/?order"))
        return Reader(s).read_response().body.decode().splitlines()


def test_fast_requests_are_not_queued_behind_a_held_one(server_factory, tmp_path, handoff):
    """Two pool threads. The server's first request is held on a gate: it
    runs on thread 0, whose pace nobody has measured, so nothing is queued
    behind it. Then eight fast requests on eight connections, sent at once:
    each is answered while the held one still runs (joining the shortest
    queue alone would put every second one behind it, ties going to thread
    0, and those would wait for the gate)."""
    srv = server_factory("--blocking-threads", "2", handoff=handoff, app=APP)
    gate, mark = Gate(tmp_path / "gate"), tmp_path / "mark"
    held = connect(srv.port)
    fast = []
    try:
        held.sendall(request(f"/?mark={mark}&gate={gate.path}"))
        assert wait_until(lambda: marks(mark), HANG_S), "the held request never reached the app"
        for _ in range(8):
            fast.append(connect(srv.port))
        for s in fast:
            s.sendall(request("/?size=3"))
        for i, s in enumerate(fast):
            try:
                r = Reader(s).read_response()
            except socket.timeout:
                raise AssertionError(f"fast request {i} was not answered while the gated one ran: "
                                     "queued behind it") from None
            assert r.status == 200 and r.body == b"xxx", (i, r)
        held.setblocking(False)
        try:
            early = held.recv(1)
        except BlockingIOError:
            early = None
        assert early is None, "the held request was answered before its gate opened"
        held.setblocking(True)
    finally:
        gate.open()
        for s in fast:
            s.close()
    assert Reader(held).read_response().status == 200
    held.close()


def pipeline_beside(server_factory, tmp_path, sleep, held, n=32):
    """One pool thread. Connection A pipelines n requests, each sleeping
    sleep seconds in the app, the held-th held on a gate; once it runs,
    connection B sends one request, and the gate opens once the loop has
    read B's. Every response is checked; returns the app's starts in order
    (A's as "a0".."a{n-1}", B's as "b")."""
    mport = free_port()
    srv = server_factory("--blocking-threads", "1", "--metrics-bind", f"127.0.0.1:{mport}", app=APP)
    gate, mark = Gate(tmp_path / "gate"), tmp_path / "mark"
    a = connect(srv.port)
    try:
        data = b"".join(request(f"/?log=a{i}&sleep={sleep}" +
                                (f"&mark={mark}&gate={gate.path}" if i == held else ""))
                        for i in range(n))
        a.sendall(data)
        assert wait_until(lambda: marks(mark), HANG_S), "A's held request never reached the app"
        b = connect(srv.port)
        data += request("/?log=b")
        b.sendall(request("/?log=b"))
        assert wait_until(lambda: bytes_read(mport) >= len(data), HANG_S), "the loop never read B's request"
    finally:
        gate.open()
    ra = Reader(a)
    for i in range(n):
        r = ra.read_response()
        assert r.status == 200 and r.body == b"ok\n", (i, r)
    assert Reader(b).read_response().status == 200
    a.close()
    b.close()
    return [line.split()[1] for line in app_order(srv.port) if line.startswith("start ")]


def test_a_pipeline_takes_turns_with_a_waiting_connection(server_factory, tmp_path):
    """One pool thread. Connection A pipelines 32 requests, each 20 ms of
    the app's time (more than the dispatcher's budget, so the thread's
    depth is one: nothing is queued behind the request it runs); A's third
    request is held on a gate. Connection B then sends one request, and
    the gate opens once the loop has read it. B's request waits in the
    loop, and A's next request does not go ahead of it: B's starts right
    after A's third ends, before A's fourth (a bound of one request: the
    one running when B came). Without turns, A's pipeline would take the
    thread for all 32 (ahead of time, or as each of its own ends)."""
    held = 2
    starts = pipeline_beside(server_factory, tmp_path, 0.02, held)
    before_b = starts.index("b")
    assert starts[:before_b] == [f"a{i}" for i in range(held + 1)], \
        f"B's request ran after {before_b} of A's, not right after A's held one: {starts}"


def test_a_pipeline_of_slow_requests_binds_within_the_budget(server_factory, tmp_path):
    """One pool thread, so new requests bind deep (20 ms at the pace). A
    pipeline's next ones out of a turn bind as deep only while a turn's
    worth of them fits (128 us at the pace): connection A pipelines 32
    requests of 1 ms each, which never fit, so A has at most the budget's
    depth (2 ms at a pace of at least 1 ms: three) with the thread. A's
    sixth request is held on a gate; B's request comes while it is held
    (the gate opens once the loop has read it), and runs behind at most
    the two of A's bound behind the held one. Were A's pipeline bound as
    deep as a new request, B would wait behind a score of A's. This guards
    the slow side only: a cheap pipeline's deeper binding is counted, where
    the clock is the test's, in tests/unit/test_conn_pipeline.c."""
    held = 5
    starts = pipeline_beside(server_factory, tmp_path, 0.001, held)
    before_b = starts.index("b")
    assert starts[:before_b] == [f"a{i}" for i in range(before_b)] and before_b <= held + 3, \
        f"B's request ran after {before_b} of A's, more than the budget's depth past A's held one: {starts}"

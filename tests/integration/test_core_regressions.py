"""Regressions in the connection core: each test pins one defect of issue 8.

1. --inline framed a body sent after "Expect: 100-continue" as the next
   request (a desync: request smuggling); framing must not depend on the mode.
2. A submit that failed after the connection had waited for room freed the
   connection inside a call whose caller then read it (use after free; the
   ASan build turns it into a crash, the release build into a dead server).
7. A request whose app never answers held its client forever: the app's time
   is bounded by --io-timeout like every other stall.
8. A pipelined connection paid a write and a hand-off wake-up per request.
"""
import json
import socket
import struct
import threading
import time

import pytest

from httpclient import Reader

APP = "wsgi_apps:application"


def _post_head(path, length, extra=""):
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n{extra}\r\n").encode()


# ------------------------------------------------------------ 1: --inline framing

def test_inline_expect_continue_reads_the_body(server_factory):
    srv = server_factory("--inline", app=APP)
    with srv.connect() as s:
        s.sendall(_post_head("/raw_echo", 5, "Expect: 100-continue\r\n"))
        s.settimeout(3)
        interim = s.recv(4096)
        assert interim.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), interim
        s.sendall(b"hello")
        r = Reader(s)
        r.buf = interim[len(b"HTTP/1.1 100 Continue\r\n\r\n"):]
        resp = r.read_response()
        assert resp.status == 200 and resp.body == b"hello"
        s.sendall(b"GET /raw_echo HTTP/1.1\r\nHost: x\r\n\r\n")
        resp = r.read_response()
        assert resp.status == 200 and resp.body == b""


def test_inline_expect_continue_body_is_not_a_request(server_factory):
    """The body of an Expect: 100-continue POST holds a request line: it must
    reach the app as bytes, never be served as a request of its own."""
    srv = server_factory("--inline", app=APP)
    inner = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
    with srv.connect() as s:
        s.sendall(_post_head("/raw_echo", len(inner), "Expect: 100-continue\r\n"))
        time.sleep(0.3)  # the head alone first, as a client waiting for 100 does
        s.sendall(inner)
        s.sendall(b"GET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        r = Reader(s)
        first = r.read_response()
        assert first.status == 200 and first.body == inner
        second = r.read_response()
        assert second.status == 200
        env = json.loads(second.body)
        assert env["PATH_INFO"] == "/after", env["PATH_INFO"]
        assert r.closed()


@pytest.mark.parametrize("chunked", [False, True])
def test_inline_body_then_next_request(server_factory, chunked):
    """A body that arrives in pieces after its head, then the next request on
    the same connection: each is framed where it really ends."""
    srv = server_factory("--inline", app=APP)
    body = b"0123456789" * 50
    if chunked:
        head = b"POST /raw_echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        wire = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (body[:7], body[7:300], body[300:])) + b"0\r\n\r\n"
    else:
        head = _post_head("/raw_echo", len(body))
        wire = body
    with srv.connect() as s:
        s.sendall(head)
        for i in range(0, len(wire), 97):
            time.sleep(0.01)
            s.sendall(wire[i:i + 97])
        s.sendall(b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
        r = Reader(s)
        resp = r.read_response()
        assert resp.status == 200 and resp.body == body
        resp = r.read_response()
        assert resp.status == 200 and json.loads(resp.body)["PATH_INFO"] == "/next"


# ------------------------------------------------------------ 2: submit error after waiting

def test_submit_error_after_backpressure_with_client_gone(server_factory, monkeypatch):
    """CSERVE_FAULT_SUBMIT=600 makes submits report a full queue for 600 ms
    and fail after that: the request waits for room, the client resets, and
    the retried submit fails while the socket is dead. The server must answer
    the failure by dropping that connection and nothing else."""
    monkeypatch.setenv("CSERVE_FAULT_SUBMIT", "600")
    srv = server_factory(app=APP, handoff="ring")
    s = srv.connect()
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.3)  # parsed, refused twice, now waiting for room
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()  # RST: the loop's next pass retries, fails, and writes a 503 into a dead socket
    time.sleep(1.5)  # the loop's next timed pass retries (at most 1 s apart)
    assert srv.proc.poll() is None, srv.log_text()
    with srv.connect() as s2:
        s2.sendall(b"GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        resp = Reader(s2).read_response()
        assert resp.status == 503  # the fault still holds: still refused, but answered
    log = srv.log_text()
    assert "handoff submit failed" in log
    assert "Sanitizer" not in log, log
    assert srv.stop() == 0, srv.log_text()


# ------------------------------------------------------------ 7: an app that never answers

def test_app_that_never_answers_is_cut_off(server_factory, handoff):
    # killed: the app is still asleep at the end, past any graceful stop
    srv = server_factory("--io-timeout", "1", app=APP, handoff=handoff, killed=True)
    with srv.connect(timeout=10) as s:
        s.sendall(b"GET /sleep?s=30 HTTP/1.1\r\nHost: x\r\n\r\n")
        t0 = time.monotonic()
        r = Reader(s)
        with pytest.raises((EOFError, ConnectionResetError)):
            r.read_response()
        assert time.monotonic() - t0 < 5
    # the stuck thread does not take the server with it (other workers, or
    # the same one once the sleep ends, serve the next request)
    srv.proc.kill()


# ------------------------------------------------------------ 8: a long pipeline

def _pipeline(srv, n):
    req = b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"
    s = srv.connect(timeout=20)

    def send():
        for i in range(0, n, 100):
            s.sendall(req * min(100, n - i))

    t = threading.Thread(target=send)
    t.start()
    r = Reader(s)
    for _ in range(n):
        resp = r.read_response()
        assert resp.status == 200 and resp.body == b"hello"
    t.join()
    s.close()


def test_pipeline_batches_writes_and_wakes(server_factory, tmp_path, handoff):
    n = 3000
    path = tmp_path / "stats.json"
    srv = server_factory("--stats-json", str(path), app=APP, handoff=handoff)
    _pipeline(srv, n)
    time.sleep(0.2)
    assert srv.stop() == 0
    st = json.loads(path.read_text())
    threads = st["workers"][0]["threads"]
    loop = [t for t in threads if t["role"] == "loop"][0]
    pool = [t for t in threads if t["role"] == "pool"]
    assert loop["requests"] == n
    writes = loop["counters"]["writes"]
    ho = loop["counters"]["handoff"]
    loop_wakes = sum(p["counters"]["handoff"]["loop_wakes"] for p in pool)
    print(f"writes/req {writes / n:.3f} pool wakes/req {ho['wakes_sent'] / n:.3f} "
          f"loop wakes/req {loop_wakes / n:.3f} submit syscalls/req {ho['submit_syscalls'] / n:.3f}")
    # Responses leave together, not one write each.
    assert writes / n < 0.25, writes
    # Parsed requests reach the pool thread in batches: no wake-up each. (How
    # the pool wakes the loop, and a dgram submit's send, are the backend's.)
    assert ho["wakes_sent"] / n < 0.25, ho

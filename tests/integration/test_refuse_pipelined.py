"""A stuck app (--app-timeout) makes its worker refuse, and a connection
that pipelines still gets every response the app made for it: the
responses are written in order, none but the last says "Connection:
close" (a client discards whatever follows one, RFC 9112 §9.6), and the
connection closes after the last, as in a stop (test_stop_pipelined.py).

The responses are still in the server when the watchdog fires: the first
request on the connection answers a file larger than the socket buffers
can hold (its client's receive buffer is kept small, and it reads nothing
until the watchdog has fired), and the pipelined requests behind it have
been run by then, their responses waiting behind the file's. Two places
for the stuck request:

- behind: the last request on the same connection, on the one pool
  thread; once the responses before it are written it gets the 503 that
  closes (its thread is stuck).
- beside: on another connection, sent once the pipelining connection's
  requests have run (their responses still waiting behind the file), on
  the other pool thread: the pipelining connection closes after its last
  response, and the stuck request gets the 503 that closes.

Each stimulus waits for the app's marks of the one before, so the
watchdog cannot fire before the pipelined requests ran."""
import socket

import pytest

from conftest import start_server
from gate import Gate, marks
from httpclient import Reader, req
from loadgen import wait_until

APP = "auto_apps:application"
FILE = 32 << 20  # far more than the server's send buffer and the client's receive buffer
RCVBUF = 64 << 10
# --app-timeout (s): only the stuck request is in the app that long (the
# file's request writes 32 MiB on its first use: not within a second on a
# busy machine, perhaps).
TIMEOUT = 3
HANG_S = 30  # only detects a hang: nothing here legitimately takes this long
OK = 3  # the small responses behind the file


def _client(port):
    s = socket.socket()
    # Before connect: a fixed receive buffer, not autotuned to megabytes.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
    s.settimeout(HANG_S)
    s.connect(("127.0.0.1", port))
    return s


def _read_file(r):
    """The file's response off r, its body drained rather than kept."""
    resp = r.read_response(method="HEAD")  # the head alone
    assert resp.status == 200 and int(resp.header("content-length")) == FILE, resp
    have = min(FILE, len(r.buf))
    r.buf, left = r.buf[have:], FILE - have
    chunk = bytearray(1 << 20)
    while left:
        got = r.sock.recv_into(chunk, min(left, len(chunk)))
        if not got:
            raise EOFError(f"closed with {left} bytes of the file unread")
        left -= got
    return resp


def _read_pipeline(r):
    """The file's response, then the small ones behind it: their
    Connection headers, in order."""
    conn = [_read_file(r).header("connection", "").lower()]
    for i in range(OK):
        try:
            resp = r.read_response()
        except EOFError:
            raise AssertionError(f"closed after {i} of the {OK} responses behind the file, "
                                 "whose requests the app ran") from None
        assert resp.status == 200 and resp.body == b"ok\n", resp
        conn.append(resp.header("connection", "").lower())
    return conn


def _closes(r):
    r.sock.settimeout(HANG_S)
    try:
        assert r.buf == b"" and r.sock.recv(4096) == b"", "a response after the last"
    except ConnectionResetError:
        pass


@pytest.mark.parametrize("where", ["behind", "beside"])
def test_a_refusing_worker_answers_what_the_app_ran(where, tmp_path):
    srv = start_server("--blocking-threads", "1" if where == "behind" else "2", "--app-timeout", str(TIMEOUT),
                       "--graceful-timeout", str(HANG_S), app=APP)
    gate, mark, stuck_mark = Gate(tmp_path / "gate"), tmp_path / "mark", tmp_path / "stuck-mark"
    stuck_req = req("GET", f"/?mark={stuck_mark}&gate={gate.path}")
    oks = req("GET", f"/?mark={mark}") * OK
    p = s = None
    try:
        p = _client(srv.port)
        if where == "behind":
            # One thread runs a connection's requests in order: the ones
            # before the stuck request have run once it is in the app.
            p.sendall(req("GET", f"/?file={FILE}") + oks + stuck_req)
        else:
            p.sendall(req("GET", f"/?file={FILE}") + oks)
            assert wait_until(lambda: marks(mark) == OK, HANG_S), (marks(mark), srv.log_text()[-3000:])
            s = _client(srv.port)
            s.sendall(stuck_req)
        assert wait_until(lambda: marks(mark) == OK and marks(stuck_mark), HANG_S), \
            (marks(mark), srv.log_text()[-3000:])
        assert wait_until(lambda: "app watchdog" in srv.log_text(), HANG_S), srv.log_text()[-3000:]
        rp = Reader(p)
        conn = _read_pipeline(rp)
        assert "close" not in conn[:-1], f"a response before the last says close: {conn}"
        if where == "behind":
            resp = rp.read_response()
            assert resp.status == 503 and resp.header("connection") == "close", resp
        else:
            rs = Reader(s)
            resp = rs.read_response()
            assert resp.status == 503 and resp.header("connection") == "close", resp
            _closes(rs)
        _closes(rp)
    finally:
        gate.open()
        for c in (p, s):
            if c:
                c.close()
        srv.close()

"""A request's wsgi.input and write() used from threads other than the one
the server called the app on (a thread the app starts, or another request's
pool thread). PEP 3333 promises no thread safety here, but such an app must
not crash the server, corrupt a response, or read bytes that are not its
body's: the request's own thread is the only one that talks to the loop,
and no other thread touches the body window while it does."""
import json
import socket

import pytest

from conftest import HANDOFFS
from httpclient import Reader, chunked, req

APP = "thread_apps:application"
RECORDS = 25600  # 16 bytes each: 400 KiB, several body windows


def body_records():
    return b"".join(b"%015d\n" % i for i in range(RECORDS))


def modes():
    return [pytest.param(["--handoff", h], id=h) for h in HANDOFFS] + \
        [pytest.param(["--inline"], id="inline")]


def exchange(port, raw, timeout=60.0):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(raw)
        return Reader(s).read_response()


@pytest.mark.parametrize("mode", modes())
@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_input_read_from_two_threads_yields_only_whole_body_records(server_factory, mode, framing):
    srv = server_factory(*mode, app=APP)
    body = body_records()
    if framing == "chunked":
        raw = req("POST", f"/input_two_threads?{RECORDS}", [("Transfer-Encoding", "chunked")],
                  chunked(body, [1000, 4093, 77, 16384]))
    else:
        raw = req("POST", f"/input_two_threads?{RECORDS}", [("Content-Length", str(len(body)))],
                  body)
    for _ in range(3):  # the race is a matter of timing: give it a few chances
        resp = exchange(srv.port, raw)
        assert resp.status == 200, resp
        out = json.loads(resp.body)
        assert out["errors"] == [], out
        # every read is one whole record of this body, none torn or foreign ...
        assert out["nbad"] == 0, out
        # ... each thread's in body order, and together each record once
        assert out["in_order"] and out["duplicates"] == 0 and out["missing"] == 0, out
        assert out["complete"], out
    # the server still serves
    again = exchange(srv.port, req("POST", "/input_two_threads?1", [("Content-Length", "16")],
                                   b"%015d\n" % 0))
    assert json.loads(again.body)["complete"]


def _lines_in_order(lines, who, n):
    got = [int(l.split()[1]) for l in lines if l.startswith(who + " ")]
    assert got == list(range(n)), (who, got[:10], len(got))


@pytest.mark.parametrize("handoff", HANDOFFS)
def test_write_from_another_requests_pool_thread_does_not_corrupt_the_response(server_factory,
                                                                               handoff):
    srv = server_factory("--blocking-threads", "2", app=APP, handoff=handoff)
    n = 3000
    with socket.create_connection(("127.0.0.1", srv.port), timeout=60) as a:
        a.sendall(req("GET", f"/write_owner?{n}"))
        seen = b""
        while b"start\n" not in seen:  # the owner is running and has stashed write()
            chunk = a.recv(65536)
            assert chunk, "owner closed early"
            seen += chunk
        thief = exchange(srv.port, req("GET", f"/write_thief?{n}"))
        assert thief.status == 200, thief
        tout = json.loads(thief.body)
        reader = Reader(a)
        reader.buf = seen
        resp = reader.read_response()
    assert resp.status == 200
    lines = resp.body.decode("latin-1").splitlines()
    assert lines[0] == "start" and lines[-1] == "end", (lines[:3], lines[-3:])
    _lines_in_order(lines, "owner", n)
    _lines_in_order(lines, "thief", tout["wrote"])
    assert len(lines) == 2 + n + tout["wrote"]
    assert tout["errors"] == [] and tout["wrote"] == n, tout


@pytest.mark.parametrize("mode", modes())
def test_write_from_an_app_thread_and_the_request_thread_keeps_every_block(server_factory, mode):
    srv = server_factory(*mode, app=APP)
    n = 2000
    resp = exchange(srv.port, req("GET", f"/write_two_threads?{n}"))
    assert resp.status == 200
    lines = resp.body.decode("latin-1").splitlines()
    assert json.loads(lines[-1]) == []
    _lines_in_order(lines, "owner", n)
    _lines_in_order(lines, "other", n)
    assert len(lines) == 2 * n + 1

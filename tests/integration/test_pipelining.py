"""Pipelined requests on one connection, through the pool threads.

- A response that ends the connection (Connection: close, a cut-short body,
  an HTTP/1.0 body delimited by the close) is the last thing on the wire:
  the responses of the requests pipelined behind it are not sent (after a
  cut-short or close-delimited body the client would read them as part of
  that body, a desync; after "Connection: close" the server must send
  nothing more, RFC 9112 §9.6), it is not held back waiting for them, and
  the pool thread running one of them is freed at once.
- Each pipelined request has the whole --io-timeout for itself.
- A long pipeline is served whole: every request once at the loop, once
  through the hand-off, once in the app, every response read in order.

How soon the pool thread behind a closing response is freed, and how few
writes and wake-ups a long pipeline costs, are the scheduler's:
tests/perf/test_perf_pipelining.py.

(Where the loop answers requests itself, --app native-hello and --inline:
test_pipeline_coalesce.py.)
"""
import json
import socket
import time

import pytest

from httpclient import Reader
from pipelined import long_pipeline

APP = "wsgi_apps:application"


def _read_to_close(s, timeout=30.0):
    s.settimeout(timeout)
    data = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got = s.recv(65536)
        except socket.timeout:
            break
        if not got:
            return data, True
        data += got
    return data, False


def _get(path, version="1.1", extra=""):
    return f"GET {path} HTTP/{version}\r\nHost: x\r\n{extra}\r\n".encode()


# ------------------------------------------------ a closing response mid-pipeline

@pytest.mark.parametrize("middle, version, extra, after_head", [
    # cut short: declares 100 bytes, sends 10, the server must close after them
    ("/short_cl", "1.1", "", b"0123456789"),
    # the app said Connection: close
    ("/app_close", "1.1", "", b"ok"),
    # the app raised before start_response: 500 with Connection: close
    ("/raise_before", "1.1", "", None),
    # HTTP/1.0 keep-alive, no length: the body ends at the close
    ("/stream", "1.0", "Connection: keep-alive\r\n", None),
])
def test_nothing_follows_a_closing_response_in_a_pipeline(server_factory, middle, version,
                                                          extra, after_head):
    srv = server_factory(app=APP)
    wire = _get("/hello") + _get(middle, version, extra) + _get("/hello") + _get("/hello")
    with srv.connect() as s:
        s.sendall(wire)
        data, closed = _read_to_close(s)
    assert closed, data
    # The first response, then the closing one, then nothing.
    first_end = data.index(b"hello") + len(b"hello")
    rest = data[first_end:]
    assert rest.count(b"HTTP/1.") == 1, rest
    head, _, body = rest.partition(b"\r\n\r\n")
    assert b"hello" not in body, rest
    if after_head is not None:
        assert body == after_head, rest


def test_closing_response_frees_the_pool_thread_behind_it(server_factory):
    """A request pipelined behind a closing response, streamed on the only
    pool thread, is released with its connection: another connection's
    request is served on that thread while the client keeps the closed
    connection open (the lingering close would otherwise hold the thread
    until the client closes or its timer fires)."""
    srv = server_factory(app=APP)
    a = srv.connect(timeout=30)
    a.sendall(_get("/app_close") + _get("/stream?n=50&size=10"))
    first = a.recv(65536)
    assert first.startswith(b"HTTP/1.1 200"), first
    with srv.connect(timeout=30) as b:
        b.sendall(_get("/hello", extra="Connection: close\r\n"))
        data, closed = _read_to_close(b)
    a.close()
    assert closed and data.startswith(b"HTTP/1.1 200") and data.endswith(b"hello"), data


@pytest.mark.parametrize("closing", [
    [_get("/app_close")],                  # the current response closes
    [_get("/hello"), _get("/app_close")],  # a coalesced one behind it closes
])
def test_closing_response_is_not_held_for_requests_behind_it(server_factory, closing, tmp_path):
    """CONN_HOLD waits for the pipelined requests still running so that their
    responses leave in one write; none may follow a closing response, so
    waiting for them only delayed it (by as long as the app took, up to the
    I/O timeout). The request behind is held in the app until the test has
    seen the connection close (its gate is created only after)."""
    srv = server_factory(app=APP)
    gate = tmp_path / "gate"
    try:
        with srv.connect() as s:
            s.sendall(b"".join(closing) + _get(f"/sleep?s=60&gate={gate}"))
            data, closed = _read_to_close(s, timeout=30)
        assert closed and data.count(b"HTTP/1.1 200") == len(closing), data
    finally:
        gate.touch()


# --------------------------------------------- the app's silence timer per request

def test_pipelined_request_gets_its_own_io_timeout(server_factory):
    """--io-timeout bounds the app's silence. A request that finished is
    progress: the one pipelined behind it has the whole timeout again, as it
    would on its own. Two pipelined requests of 2.5 s each under a 4 s
    timeout: timed from the first one's start, the second would pass the
    timeout (5 s) however the threads are scheduled; each on its own has
    1.5 s to spare."""
    srv = server_factory("--io-timeout", "4", app=APP)
    with srv.connect(timeout=30) as s:
        s.sendall(_get("/sleep?s=2.5") + _get("/sleep?s=2.5", extra="Connection: close\r\n"))
        data, closed = _read_to_close(s, timeout=30)
    assert closed
    assert data.count(b"HTTP/1.1 200") == 2 and data.endswith(b"slept"), data


# --------------------------------------------------------------- a long pipeline

def test_a_long_pipeline_is_served_whole(server_factory, tmp_path, handoff):
    """3000 pipelined requests: every response read, in order, and every
    request counted once by the loop, submitted and drained once through
    the hand-off. (How few writes and wake-ups they cost:
    tests/perf/test_perf_pipelining.py.)"""
    n = 3000
    path = tmp_path / "stats.json"
    srv = server_factory("--stats-json", str(path), app=APP, handoff=handoff)
    long_pipeline(srv, n)
    assert srv.stop() == 0
    st = json.loads(path.read_text())
    threads = st["workers"][0]["threads"]
    loop = [t for t in threads if t["role"] == "loop"][0]
    ho = loop["counters"]["handoff"]
    assert loop["requests"] == n
    assert ho["submitted"] == ho["drained"] == n, ho

"""An app that breaks the WSGI contract must never break HTTP framing.

Every case drives the real server (apps/hostile_app.py) in every handoff mode
and with --inline, one server per mode for the module, and checks the exact
wire behaviour: the status, that a response whose framing is intact leaves the
connection serving (a second request on it gets its own answer), and that one
the app spoiled closes it with no stray byte after what it framed. After
every case a fresh connection is served too.

An app error is answered with 500 when nothing was sent yet; once the head
went out the connection is closed, never kept alive behind a body that is
short or long.
"""

import pytest

from conftest import HANDOFFS, start_server
from httpclient import Reader, read_all, read_head, req

APP = "hostile_app:app"
MODES = [*HANDOFFS, "inline"]
FILE_DATA = bytes(range(65, 65 + 55))


@pytest.fixture(scope="module", params=MODES)
def srv(request):
    mode = request.param
    # An idle connection outlives every wait here: a close the test sees is
    # the response's, not the keep-alive timer's.
    idle = ["--keepalive-timeout", "60"]
    if mode == "inline":
        s = start_server("--inline", *idle, app=APP)
    else:
        s = start_server(*idle, app=APP, handoff=mode)
    s.mode = mode
    yield s
    s.close()


def _get(path, method="GET", headers=()):
    return req(method, path, headers)


class Conn:
    def __init__(self, srv):
        self.srv = srv
        self.sock = srv.connect()
        self.reader = Reader(self.sock)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.sock.close()
        # Whatever the case did, the server still serves a new connection.
        with self.srv.connect() as s:
            s.sendall(_get("/ok"))
            resp = Reader(s).read_response()
        assert (resp.status, resp.body) == (200, b"/ok")

    def send(self, raw):
        self.sock.sendall(raw)

    def response(self, method="GET"):
        return self.reader.read_response(method)

    def serves_next(self):
        """The connection is still in step: the next request gets its own answer."""
        self.send(_get("/ok"))
        resp = self.response()
        # Its own status line, first: no byte of the previous response before it.
        assert resp.raw_head.startswith(b"HTTP/1.1 200 OK\r\n"), resp.raw_head
        assert resp.body == b"/ok", resp

    def rest_until_close(self, timeout=5.0):
        """The bytes after what was read, up to the server's close (required)."""
        data, eof = read_all(self.reader, timeout)
        assert eof, f"the connection stayed open after {data!r}"
        return data

    def closed(self):
        assert self.rest_until_close() == b""


def _app_error(srv, path, method="GET"):
    """Refused as an app error before anything was sent: a 500 that closes."""
    with Conn(srv) as c:
        c.send(_get(path, method))
        resp = c.response(method)
        assert resp.status == 500, resp
        assert resp.interim == [], resp
        assert len(resp.header_all("content-length")) <= 1, resp
        assert resp.header("connection") == "close"
        c.closed()


# ------------------------------------------------- Content-Length is a promise

def test_file_wrapper_after_write_sends_only_what_content_length_has_left(srv):
    with Conn(srv) as c:
        c.send(_get("/fw_after_write"))
        resp = c.response()
        assert resp.status == 200
        assert resp.header("content-length") == "55"
        assert resp.body == b"prefix:" + FILE_DATA[:48]
        c.serves_next()


@pytest.mark.parametrize("path, head_len, body", [
    ("/fw_short", "100", FILE_DATA[:40]),
    ("/iter_short", "20", b"0123456789"),
])
def test_a_body_short_of_its_content_length_closes_the_connection(srv, path, head_len, body):
    with Conn(srv) as c:
        c.send(_get(path))
        head = read_head(c.reader)
        assert head.status == 200
        assert head.header("content-length") == head_len
        assert c.rest_until_close() == body


def test_a_body_past_its_content_length_is_cut_there_and_the_connection_closed(srv):
    with Conn(srv) as c:
        c.send(_get("/iter_long"))
        head = read_head(c.reader)
        assert (head.status, head.header("content-length")) == (200, "5")
        assert c.rest_until_close() == b"01234"


# ------------------------------------------------------------- 100 Continue

@pytest.mark.parametrize("path", ["/write_then_read", "/yield_then_read"])
def test_no_100_continue_once_the_response_began(srv, path):
    """The app answers before it reads a body the client holds back for
    "100 Continue": once the head is out a 100 would land inside the body.
    The client sends its body when it sees either."""
    with Conn(srv) as c:
        c.send(req("POST", path, [("Content-Length", "5"), ("Expect", "100-continue")]))
        head = read_head(c.reader)
        if head.status == 100:
            # --inline reads the whole body before the app runs: the 100
            # comes first, as it should.
            assert srv.mode == "inline"
            c.send(b"hello")
            head = read_head(c.reader)
        else:
            assert srv.mode != "inline"
            assert c.reader._read_exact(5) == b"first"
            c.send(b"hello")
        assert head.status == 200
        assert head.header("content-length") == "10"
        if srv.mode == "inline":
            assert c.reader._read_exact(10) == b"firsthello"
            c.serves_next()
        else:
            # The head went out before the body was read, so it said close.
            assert head.header("connection") == "close"
            assert c.rest_until_close() == b"hello"


# ---------------------------------------------------------- broken contracts

@pytest.mark.parametrize("path", ["/raise_before", "/twice", "/not_iterable", "/yield_str"])
def test_an_app_error_before_the_first_byte_is_a_500(srv, path):
    _app_error(srv, path)


@pytest.mark.parametrize("path", ["/raise_after", "/exc_info_after"])
def test_an_app_error_after_the_first_byte_cuts_the_body_and_closes(srv, path):
    with Conn(srv) as c:
        c.send(_get(path))
        head = read_head(c.reader)
        assert head.status == 200
        assert head.header("transfer-encoding") == "chunked"
        rest = c.rest_until_close()
        # The block that was made, and never the last chunk.
        assert rest == b"7\r\npartial\r\n", rest


def test_a_close_that_raises_ends_the_connection_after_the_response(srv):
    with Conn(srv) as c:
        c.send(_get("/close_raises"))
        resp = c.response()
        assert (resp.status, resp.body) == (200, b"complete")
        c.closed()


def test_start_response_again_with_exc_info_replaces_an_unsent_response(srv):
    with Conn(srv) as c:
        c.send(_get("/exc_info_before"))
        resp = c.response()
        assert (resp.status, resp.body) == (503, b"oops")
        c.serves_next()


def test_start_response_from_another_thread(srv):
    with Conn(srv) as c:
        c.send(_get("/other_thread"))
        resp = c.response()
        assert (resp.status, resp.body) == (200, b"threaded")
        c.serves_next()


def test_write_between_blocks_of_the_iterable_keeps_the_order(srv):
    with Conn(srv) as c:
        c.send(_get("/write_in_iter"))
        resp = c.response()
        assert (resp.status, resp.body) == (200, b"abc")
        c.serves_next()

"""An app that breaks the WSGI contract must never break HTTP framing.

Every case drives the real server (apps/broken_contract_apps.py) in every handoff mode
and with --inline, one server per mode for the module, and checks the exact
wire behaviour: the status, that a response whose framing is intact leaves the
connection serving (a second request on it gets its own answer), and that one
the app spoiled closes it with no stray byte after what it framed. After
every case a fresh connection is served too.

An app error is answered with 500 when nothing was sent yet; once the head
went out the connection is closed, never kept alive behind a body that is
short or long.
"""
import urllib.parse

import pytest

from conftest import HANDOFFS, start_server
from httpclient import Reader, read_all, read_head, req

APP = "broken_contract_apps:app"
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

    def __exit__(self, exc_type, *exc):
        self.sock.close()
        if exc_type is not None:
            return
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


# ------------------------------------------------------ the app's head, checked

def _header_path(name, value, **kw):
    return "/header?" + urllib.parse.urlencode({"name": name, "value": value, **kw})


@pytest.mark.parametrize("path", ["/two_cl", "/mutated_headers"])
def test_two_content_lengths_are_an_app_error(srv, path):
    """Given to start_response, or added to its list after it returned."""
    _app_error(srv, path)


@pytest.mark.parametrize("path, problem", [
    ("/two_cl", "ValueError: two Content-Length headers"),
    (_header_path("Upgrade", "websocket"), "ValueError: 'Upgrade' is a hop-by-hop header"),
    ("/status?s=103+Early+Hints", "ValueError: status '103 Early Hints' is informational"),
])
def test_an_app_error_is_logged_once_in_the_apps_terms(srv, path, problem):
    tagged = f"{path}{'&' if '?' in path else '?'}case={srv.mode}-{len(srv.log_text())}"
    _app_error(srv, tagged)
    log = srv.log_text()
    assert log.count(f"app failed (GET {tagged})") == 1, log[-2000:]
    after = log[log.index(f"app failed (GET {tagged})"):]
    assert problem in after, after[:2000]


@pytest.mark.parametrize("status", ["100 Continue", "101 Switching Protocols", "103 Early Hints",
                                    "199 Whatever"])
def test_an_informational_status_is_not_a_final_response(srv, status):
    _app_error(srv, "/status?" + urllib.parse.urlencode({"s": status}))


@pytest.mark.parametrize("status", ["200", "2000 OK", "abc", "200 OK\r\nX-Injected: 1",
                                    "600 Beyond", "099 Low", "200 OK\x00"])
def test_an_invalid_status_line_is_an_app_error(srv, status):
    _app_error(srv, "/status?" + urllib.parse.urlencode({"s": status}))


@pytest.mark.parametrize("name, value", [
    ("Keep-Alive", "timeout=5"),
    ("Proxy-Connection", "keep-alive"),
    ("TE", "trailers"),
    ("Trailer", "X-Checksum"),
    ("Upgrade", "websocket"),
    ("Connection", "upgrade"),
    ("Connection", "close, X-Private"),
    ("Transfer-Encoding", "gzip"),
    ("Transfer-Encoding", "gzip, chunked"),
])
def test_a_hop_by_hop_field_is_an_app_error(srv, name, value):
    _app_error(srv, _header_path(name, value, body="x"))


@pytest.mark.parametrize("name, value", [
    ("X-Split", "a\r\nX-Injected: 1"),
    ("X-Split", "a\nb"),
    ("X-Nul", "a\x00b"),
    ("X Space", "v"),
    ("X:Colon", "v"),
    ("", "v"),
])
def test_a_malformed_field_is_an_app_error(srv, name, value):
    _app_error(srv, _header_path(name, value))


@pytest.mark.parametrize("value", ["abc", "-1", " 5", "5, 5", "", "1" * 19])
def test_a_malformed_content_length_is_an_app_error(srv, value):
    _app_error(srv, _header_path("X-Case", "1", cl=value, body="hello"))


def test_transfer_encoding_chunked_with_content_length_is_an_app_error(srv):
    _app_error(srv, _header_path("Transfer-Encoding", "chunked", cl="5", body="hello"))


@pytest.mark.parametrize("status, cl, body", [
    ("204 No Content", None, "x"),
    ("304 Not Modified", None, "x"),
    ("204 No Content", "5", ""),
])
def test_a_body_on_a_bodiless_status_is_an_app_error(srv, status, cl, body):
    kw = {"status": status, "body": body}
    if cl is not None:
        kw["cl"] = cl
    _app_error(srv, _header_path("X-Case", "1", **kw))


@pytest.mark.parametrize("status", ["204 No Content", "304 Not Modified"])
def test_a_bodiless_status_without_a_body_keeps_the_connection(srv, status):
    with Conn(srv) as c:
        c.send(_get(_header_path("X-Case", "1", status=status)))
        resp = c.response()
        assert resp.status == int(status[:3])
        assert resp.header("transfer-encoding") is None
        c.serves_next()


def test_head_drops_the_body_and_keeps_the_apps_content_length(srv):
    with Conn(srv) as c:
        c.send(_get(_header_path("X-Case", "1", cl="5", body="hello"), "HEAD"))
        resp = c.response("HEAD")
        assert (resp.status, resp.header("content-length")) == (200, "5")
        c.serves_next()


def test_connection_close_from_the_app_is_honoured(srv):
    with Conn(srv) as c:
        c.send(_get(_header_path("Connection", "close", cl="5", body="hello")))
        resp = c.response()
        assert (resp.status, resp.body) == (200, b"hello")
        assert resp.header_all("connection") == ["close"]
        c.closed()


def test_connection_keep_alive_from_the_app_is_the_servers_to_say(srv):
    with Conn(srv) as c:
        c.send(_get(_header_path("Connection", "keep-alive", cl="5", body="hello")))
        resp = c.response()
        assert (resp.status, resp.body) == (200, b"hello")
        assert resp.header_all("connection") == []
        c.serves_next()


def test_transfer_encoding_chunked_from_a_streaming_app_is_framed_once(srv):
    with Conn(srv) as c:
        c.send(_get(_header_path("Transfer-Encoding", "chunked", body="hello", stream="1")))
        resp = c.response()
        assert (resp.status, resp.body) == (200, b"hello")
        assert resp.header_all("transfer-encoding") == ["chunked"]
        c.serves_next()


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

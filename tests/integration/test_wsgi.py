"""WSGI (PEP 3333) as an app sees it: the environ's keys and values,
wsgi.input's methods, start_response (exc_info before and after the head),
write(), the framing of what the app returns, close() on every path, app
errors answered with 500 or a closed connection, wsgi.errors and
wsgi.file_wrapper.

Everything here crosses the handoff, so the module-scoped `wsrv` fixture runs
the tests over every backend (one server per backend). A subset runs again
with --inline and with --blocking-threads 4 (class TestModes), and the app
suite runs once under wsgiref.validate (test_validator_*).
"""
import io
import json
import os
import re
import socket
import time

import pytest

from conftest import HANDOFFS, start_server
from httpclient import (Reader, chunked, get, post, read_all, read_chunk, read_head, req,
                        request)

APP = "wsgi_apps:application"
HANG_S = 30  # only detects a hang: nothing here legitimately takes this long


@pytest.fixture(scope="module", params=HANDOFFS)
def wsrv(request):
    srv = start_server(app=APP, handoff=request.param)
    request.addfinalizer(srv.close)
    return srv


def _json(resp):
    assert resp.status == 200, resp
    return json.loads(resp.body)


def _env(srv, path="/environ", headers=(), sock_out=None):
    with srv.connect() as s:
        hdrs = "".join(f"{k}: {v}\r\n" for k, v in headers)
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n{hdrs}\r\n".encode("latin-1"))
        if sock_out is not None:
            sock_out.append(s.getsockname())
        return _json(Reader(s).read_response())


def _log_grows(srv, before, pattern, timeout=HANG_S):
    """Wait (bounded) until the log text after offset `before` matches pattern."""
    deadline = time.monotonic() + timeout
    while True:
        new = srv.log_text()[before:]
        if re.search(pattern, new):
            return new
        if time.monotonic() > deadline:
            raise AssertionError(f"log did not show {pattern!r}; new log text:\n{new[-3000:]}")
        time.sleep(0.05)


def _still_serves(srv):
    resp = get(srv.port, "/hello")
    assert resp.status == 200 and resp.body == b"hello"


def _wait_marker(path, text, timeout=HANG_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path) and text in open(path).read():
            return open(path).read()
        time.sleep(0.02)
    raise AssertionError(f"{path} never contained {text!r}: "
                         f"{open(path).read() if os.path.exists(path) else '<missing>'}")


# ---------------------------------------------------------------- environ

def test_environ_full_contents(wsrv):
    addr = []
    env = _env(wsrv, "/environ/sub?a=1&b=%20", headers=[("User-Agent", "t/1"), ("Accept", "*/*")],
               sock_out=addr)
    assert env["REQUEST_METHOD"] == "GET"
    assert env["SCRIPT_NAME"] == ""
    assert env["PATH_INFO"] == "/environ/sub"
    assert env["QUERY_STRING"] == "a=1&b=%20"
    assert "CONTENT_TYPE" not in env and "CONTENT_LENGTH" not in env
    assert env["SERVER_NAME"] == "127.0.0.1"
    assert env["SERVER_PORT"] == str(wsrv.port)
    assert env["SERVER_PROTOCOL"] == "HTTP/1.1"
    assert env["REMOTE_ADDR"] == "127.0.0.1"
    assert env["REMOTE_PORT"] == str(addr[0][1])
    assert isinstance(env["SERVER_SOFTWARE"], str) and env["SERVER_SOFTWARE"]
    assert env["HTTP_HOST"] == "localhost"
    assert env["HTTP_USER_AGENT"] == "t/1" and env["HTTP_ACCEPT"] == "*/*"
    assert env["wsgi.version"] == [1, 0] and env["_types"]["wsgi.version"] == "tuple"
    assert env["wsgi.url_scheme"] == "http"
    assert env["wsgi.input_terminated"] is True
    assert env["wsgi.multithread"] is False  # --blocking-threads 1
    assert env["wsgi.multiprocess"] is False  # --workers 1
    assert env["wsgi.run_once"] is False
    assert "wsgi.file_wrapper" in env and "wsgi.errors" in env
    assert env["_input_methods"] == ["read", "readline", "readlines", "__iter__"]
    assert env["_errors_methods"] == ["write", "writelines", "flush"]
    for k, v in env.items():
        if "." not in k and not k.startswith("_"):
            assert env["_types"][k] == "str", k


def test_environ_content_type_and_length_when_sent(wsrv):
    raw = req("POST", "/environ", [("Content-Type", "application/x-www-form-urlencoded"),
                                   ("Content-Length", "3")], b"a=b")
    env = _json(request(wsrv.port, raw))
    assert env["REQUEST_METHOD"] == "POST"
    assert env["CONTENT_TYPE"] == "application/x-www-form-urlencoded"
    assert env["CONTENT_LENGTH"] == "3"
    assert "HTTP_CONTENT_TYPE" not in env and "HTTP_CONTENT_LENGTH" not in env


def test_environ_chunked_body_has_no_content_length(wsrv):
    raw = req("POST", "/environ", [("Transfer-Encoding", "chunked")], chunked(b"abc"))
    env = _json(request(wsrv.port, raw))
    assert "CONTENT_LENGTH" not in env and "HTTP_CONTENT_LENGTH" not in env


def test_environ_path_info_percent_decoded_incl_slash(wsrv):
    env = _env(wsrv, "/environ/a%20b/c%2Fd/%7Euser")
    assert env["PATH_INFO"] == "/environ/a b/c/d/~user"


def test_environ_path_info_non_ascii_bytes_as_latin1(wsrv):
    env = _env(wsrv, "/environ/caf%C3%A9/%FF")
    assert env["PATH_INFO"] == "/environ/caf\u00c3\u00a9/\u00ff"
    assert env["PATH_INFO"].encode("latin-1").decode("utf-8", "replace").startswith("/environ/café")


def test_environ_query_string_raw_and_empty(wsrv):
    env = _env(wsrv, "/environ?x=%2F%20+y&&z=caf%C3%A9")
    assert env["QUERY_STRING"] == "x=%2F%20+y&&z=caf%C3%A9"
    assert env["PATH_INFO"] == "/environ"
    assert _env(wsrv, "/environ")["QUERY_STRING"] == ""


def test_environ_http_header_joining_rules(wsrv):
    env = _env(wsrv, "/environ", headers=[
        ("X-Dup", "a"), ("x-dup", "b"),
        ("Cookie", "a=1"), ("Cookie", "b=2"),
        ("X-Forwarded-For", "10.0.0.1"), ("X_Forwarded_For", "6.6.6.6"),
        ("x-lower-case", "v"), ("X_Only_Underscore", "gone"),
    ])
    assert env["HTTP_X_DUP"] == "a, b"
    assert env["HTTP_COOKIE"] == "a=1; b=2"
    assert env["HTTP_X_FORWARDED_FOR"] == "10.0.0.1"  # the underscore field cannot spoof it
    assert env["HTTP_X_LOWER_CASE"] == "v"
    assert "HTTP_X_ONLY_UNDERSCORE" not in env
    assert not any("6.6.6.6" in str(v) for v in env.values())


def test_environ_http10_protocol(wsrv):
    with wsrv.connect() as s:
        s.sendall(b"GET /environ HTTP/1.0\r\n\r\n")
        env = _json(Reader(s).read_response())
    assert env["SERVER_PROTOCOL"] == "HTTP/1.0"


# ------------------------------------------------------------ wsgi.input

BODY = b"line1\nline2 is longer\n\nlast-no-newline"


def _reference(mode, n=7):
    f = io.BytesIO(BODY)
    if mode == "read":
        return [f.read(), f.read()]
    if mode == "read-1":
        return [f.read(-1)]
    if mode == "readlines":
        return f.readlines()
    if mode == "iter":
        return list(f)
    op = {"readn": lambda: f.read(n), "readline": f.readline, "readline_n": lambda: f.readline(n)}[mode]
    out = []
    while True:
        p = op()
        out.append(p)
        if not p:
            return out


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
@pytest.mark.parametrize("mode", ["read", "read-1", "readn", "readline", "readline_n", "readlines", "iter"])
def test_wsgi_input_methods(wsrv, mode, framing):
    if framing == "chunked":
        hdr, body = [("Transfer-Encoding", "chunked")], chunked(BODY, [3, 1, 8])
    else:
        hdr, body = [("Content-Length", str(len(BODY)))], BODY
    d = _json(request(wsrv.port, req("POST", f"/echo?mode={mode}&n=7", hdr, body)))
    assert [p.encode("latin-1") for p in d["pieces"]] == _reference(mode)


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_wsgi_input_readline_longer_than_buffers(wsrv, framing):
    body = b"x" * 200000 + b"\n" + b"y" * 70000
    if framing == "chunked":
        hdr, raw = [("Transfer-Encoding", "chunked")], chunked(body, [10000, 999])
    else:
        hdr, raw = [("Content-Length", str(len(body)))], body
    d = _json(request(wsrv.port, req("POST", "/echo?mode=readline", hdr, raw), timeout=HANG_S))
    assert [len(p) for p in d["pieces"]] == [200001, 70000, 0]
    assert d["body"].encode("latin-1") == body


def test_wsgi_input_empty_body_reads_eof(wsrv):
    d = _json(post(wsrv.port, "/echo?mode=readline", b""))
    assert d["pieces"] == [""]


# ------------------------------------------------------ start_response

def test_start_response_exc_info_before_headers_replaces_status(wsrv):
    resp = get(wsrv.port, "/exc_before")
    assert resp.status == 503
    assert resp.header("x-second") == "yes" and resp.header("x-first") is None
    assert resp.body == b"replaced"
    _still_serves(wsrv)


def test_start_response_exc_info_after_headers_reraises_and_closes(wsrv):
    before = len(wsrv.log_text())
    with wsrv.connect() as s:
        s.sendall(req("GET", "/exc_after"))
        r = Reader(s)
        head = read_head(r)
        assert head.status == 200 and head.header("transfer-encoding") == "chunked"
        assert read_chunk(r) == b"partial-body"
        rest, eof = read_all(r, timeout=HANG_S)
        assert eof, "connection not closed after exc_info re-raise"
        assert b"should-never-be-sent" not in rest
        assert not rest.endswith(b"0\r\n\r\n"), rest  # no terminating chunk
    _log_grows(wsrv, before, r"exc-after-headers")
    _still_serves(wsrv)


def test_write_callable_only(wsrv):
    resp = get(wsrv.port, "/write")
    assert resp.status == 200 and resp.body == b"written-1;written-2;"


def test_write_callable_and_returned_iterable(wsrv):
    resp = get(wsrv.port, "/write?ret=list")
    assert resp.status == 200 and resp.body == b"written-1;written-2;returned-1;returned-2"


def test_latin1_header_values(wsrv):
    resp = get(wsrv.port, "/latin1")
    assert b"\r\nX-Latin: caf\xe9 na\xefve \xff\r\n" in resp.raw_head
    assert resp.header("x-latin") == "caf\xe9 na\xefve \xff"


def test_hop_by_hop_connection_close_from_app_closes(wsrv):
    with wsrv.connect() as s:
        s.sendall(req("GET", "/app_close"))
        r = Reader(s)
        resp = r.read_response()
        assert resp.status == 200 and resp.body == b"ok"
        assert resp.header_all("connection") in ([], ["close"])
        assert r.closed(timeout=HANG_S)


def test_hop_by_hop_headers_from_app_are_an_app_error(wsrv):
    """PEP 3333 forbids them: the response is refused (500), none of them on the wire."""
    with wsrv.connect() as s:
        s.sendall(req("GET", "/hop") + req("GET", "/hello"))
        r = Reader(s)
        resp = r.read_response()
        assert resp.status == 500 and resp.header("x-kept") is None
        for h in ("keep-alive", "upgrade", "trailer", "proxy-connection", "te", "transfer-encoding"):
            assert resp.header(h) is None, (h, resp.headers)
        assert resp.header("connection") == "close"
        assert r.closed(timeout=HANG_S)


def test_more_bytes_than_content_length_excess_dropped_and_logged(wsrv):
    before = len(wsrv.log_text())
    with wsrv.connect() as s:
        s.sendall(req("GET", "/long_cl") + req("GET", "/hello"))
        r = Reader(s)
        resp = r.read_response()
        assert resp.header("content-length") == "5" and resp.body == b"01234"
        # the excess never reaches the wire: the next response parses cleanly
        # (or, at worst, the server closed the connection instead)
        try:
            nxt = r.read_response()
        except (EOFError, ConnectionResetError):
            nxt = None
        if nxt is not None:
            assert nxt.raw_head.startswith(b"HTTP/1.1 200 ") and nxt.body == b"hello"
    _log_grows(wsrv, before, r"warning: app sent more than its Content-Length 5; the excess is dropped")


def test_fewer_bytes_than_content_length_closes(wsrv):
    with wsrv.connect() as s:
        s.sendall(req("GET", "/short_cl"))
        r = Reader(s)
        head = read_head(r)
        assert head.header("content-length") == "100"
        rest, eof = read_all(r, timeout=HANG_S)
        assert eof and rest == b"0123456789"


# --------------------------------------------------------------- close()

def test_close_called_normal(wsrv, tmp_path):
    marker = tmp_path / "m"
    resp = get(wsrv.port, f"/closer?marker={marker}")
    assert resp.status == 200 and resp.body == b"onetwothree"
    text = _wait_marker(marker, "closed")
    assert text.split()[-1] == "closed" and text.count("yield") == 3


def test_close_called_on_app_error_mid_iteration(wsrv, tmp_path):
    marker = tmp_path / "m"
    with wsrv.connect() as s:
        s.sendall(req("GET", f"/closer?marker={marker}&case=error"))
        read_all(Reader(s), timeout=HANG_S)
    _wait_marker(marker, "closed")
    _still_serves(wsrv)


def test_close_called_on_client_disconnect_mid_stream(wsrv, tmp_path):
    marker = tmp_path / "m"
    s = wsrv.connect()
    s.sendall(req("GET", f"/closer?marker={marker}&case=slow"))
    r = Reader(s)
    assert read_head(r).status == 200
    assert read_chunk(r)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    s.close()  # RST
    # Streamed to the end, the 200 items take at least 10 s and close() comes
    # after "yield 199"; the server stops at its first failed write instead.
    text = _wait_marker(marker, "closed")
    assert text.count("yield") < 200, text
    _still_serves(wsrv)


# ------------------------------------------------------------- streaming

def test_streaming_chunk_arrives_before_generator_finishes(wsrv, tmp_path):
    gate, marker = tmp_path / "gate", tmp_path / "marker"
    with wsrv.connect(timeout=HANG_S) as s:
        s.sendall(req("GET", f"/gated?gate={gate}&marker={marker}"))
        r = Reader(s)
        assert read_head(r).header("transfer-encoding") == "chunked"
        assert read_chunk(r) == b"first"
        # the generator is still blocked: the second chunk does not exist yet
        assert not marker.exists()
        gate.write_text("go")
        assert read_chunk(r) == b"second"
        assert read_chunk(r) == b""
    assert "second-produced" in marker.read_text()


# ---------------------------------------------------------- app errors

def test_app_exception_before_start_response_is_500_with_traceback(wsrv):
    before = len(wsrv.log_text())
    resp = get(wsrv.port, "/raise_before")
    assert resp.status == 500
    new = _log_grows(wsrv, before, r"boom-before-start-response")
    assert "RuntimeError" in new and "Traceback" in new
    _still_serves(wsrv)


def test_app_exception_after_start_response_before_body_is_500(wsrv):
    before = len(wsrv.log_text())
    resp = get(wsrv.port, "/raise_after_start")
    assert resp.status == 500
    _log_grows(wsrv, before, r"RuntimeError.*boom-after-start-response")
    _still_serves(wsrv)


def test_app_exception_after_headers_closes_without_terminating_chunk(wsrv):
    before = len(wsrv.log_text())
    with wsrv.connect() as s:
        s.sendall(req("GET", "/raise_mid"))
        r = Reader(s)
        assert read_head(r).status == 200
        assert read_chunk(r) == b"chunk-one"
        rest, eof = read_all(r, timeout=HANG_S)
        assert eof and b"0\r\n\r\n" not in rest, rest
    _log_grows(wsrv, before, r"boom-mid-iteration")
    _still_serves(wsrv)


def test_non_bytes_body_item_is_500_and_logged(wsrv):
    before = len(wsrv.log_text())
    resp = get(wsrv.port, "/nonbytes")
    assert resp.status == 500
    assert b"a str, not bytes" not in resp.body
    _log_grows(wsrv, before, r"error: app failed \(GET /nonbytes\)\n"
                             r"TypeError: the app's body item 0 is str, not bytes")
    _still_serves(wsrv)


@pytest.mark.parametrize("status", ["OK", "2000 Too Long", "20 Short", "abc Letters", "200"])
def test_bad_status_is_500_and_logged(wsrv, status):
    before = len(wsrv.log_text())
    resp = get(wsrv.port, "/bad_status?s=" + status.replace(" ", "%20"))
    assert resp.status == 500
    _log_grows(wsrv, before, r"error: app failed \(GET /bad_status\?s=[^)]*\)\n(?s:.*)"
                             + re.escape(f"ValueError: status '{status}' is not 'NNN reason'"))
    _still_serves(wsrv)


BAD_HEADER_LOG = {
    "crlf": "ValueError: header 'X-Bad' has a control character in its value",
    "ctl": "ValueError: header 'X-Bad' has a control character in its value",
    "del": "ValueError: header 'X-Bad' has a control character in its value",
    "token": "ValueError: header name 'X Bad' is not a token",
    "separator": "ValueError: header name 'X-Bad/1' is not a token",
    "name": "TypeError: header name must be str, not bytes",
    "value": "TypeError: header value must be str, not int",
}


@pytest.mark.parametrize("kind", sorted(BAD_HEADER_LOG))
def test_bad_header_is_500_and_logged(wsrv, kind):
    before = len(wsrv.log_text())
    resp = get(wsrv.port, f"/bad_header?kind={kind}")
    assert resp.status == 500
    assert resp.header("injected") is None and resp.header("x-bad") is None
    _log_grows(wsrv, before, rf"error: app failed \(GET /bad_header\?kind={kind}\)\n(?s:.*)"
                             + re.escape(BAD_HEADER_LOG[kind]))
    _still_serves(wsrv)


def test_header_with_tab_obs_text_and_token_punctuation_is_sent(wsrv):
    """The other side of the checks above: HTAB and obs-text are allowed in
    a value (RFC 9110 5.5) and every tchar in a name, and go out as latin-1."""
    with wsrv.connect() as s:
        s.sendall(req("GET", "/bad_header?kind=fine"))
        r = Reader(s).read_response()
    assert r.status == 200, r
    assert r.header("x-ok!#$%&'*+.^_`|~") == "a\tb \xe9", r.headers


def test_wsgi_errors_goes_to_log(wsrv):
    before = len(wsrv.log_text())
    assert get(wsrv.port, "/errors?tag=e7q").status == 200
    _log_grows(wsrv, before, r"wsgi-errors-line-e7q")


# --------------------------------------------------------- file_wrapper

@pytest.mark.parametrize("size,cl", [(0, "1"), (1000, "0"), (3 * 1024 * 1024 + 17, "1"), (3 * 1024 * 1024 + 17, "0")])
def test_file_wrapper_sends_exact_bytes(wsrv, tmp_path, size, cl):
    path = tmp_path / "f.bin"
    data = os.urandom(size)
    path.write_bytes(data)
    with wsrv.connect(timeout=HANG_S) as s:
        s.sendall(req("GET", f"/filewrap?path={path}&cl={cl}") + req("GET", "/hello"))
        r = Reader(s)
        resp = r.read_response()
        assert resp.status == 200
        if cl == "1":
            assert resp.header("content-length") == str(size)
        assert len(resp.body) == size and resp.body == data
        assert r.read_response().body == b"hello"  # framing intact afterwards


# -------------------------------------------------- --inline / threads 4

MODES = {"inline": ["--inline"], "threads4": ["--blocking-threads", "4"]}


@pytest.fixture(scope="class", params=list(MODES))
def msrv(request):
    srv = start_server(*MODES[request.param], app=APP)
    srv.mode = request.param
    request.addfinalizer(srv.close)
    return srv


class TestModes:
    def test_environ_multithread_flag(self, msrv):
        env = _env(msrv)
        assert env["wsgi.multithread"] is (msrv.mode == "threads4")
        assert env["PATH_INFO"] == "/environ"

    def test_chunked_upload_and_readline(self, msrv):
        raw = req("POST", "/echo?mode=readline", [("Transfer-Encoding", "chunked")], chunked(BODY, [2]))
        d = _json(request(msrv.port, raw))
        assert [p.encode("latin-1") for p in d["pieces"]] == _reference("readline")

    def test_pipelined_and_streamed(self, msrv):
        with msrv.connect() as s:
            s.sendall(req("GET", "/stream?n=3&size=2") + req("GET", "/hello") + req("HEAD", "/head"))
            r = Reader(s)
            assert r.read_response().body == b"aabbcc"
            assert r.read_response().body == b"hello"
            assert r.read_response("HEAD").header("content-length") == "20"

    def test_app_exception_is_500(self, msrv):
        assert get(msrv.port, "/raise_before").status == 500
        _still_serves(msrv)

    def test_close_called(self, msrv, tmp_path):
        marker = tmp_path / "m"
        assert get(msrv.port, f"/closer?marker={marker}").body == b"onetwothree"
        _wait_marker(marker, "closed")

    def test_concurrent_slow_requests_all_served(self, msrv):
        socks = []
        try:
            for _ in range(4):
                s = msrv.connect(timeout=HANG_S)
                s.sendall(req("GET", "/sleep?s=0.2"))
                socks.append(s)
            for s in socks:
                assert Reader(s).read_response().body == b"slept"
        finally:
            for s in socks:
                s.close()


# ------------------------------------------------------------ validator

VALIDATED_REQUESTS = [
    req("GET", "/hello"),
    req("GET", "/environ/x%2Fy?q=1", [("Cookie", "a=1"), ("Cookie", "b=2")]),
    req("POST", "/echo?mode=readn&n=5", [("Content-Length", str(len(BODY)))], BODY),
    req("POST", "/echo?mode=readline", [("Transfer-Encoding", "chunked")], chunked(BODY, [4])),
    req("POST", "/echo?mode=readline_n&n=3", [("Content-Length", str(len(BODY)))], BODY),
    req("POST", "/echo?mode=readlines", [("Content-Length", str(len(BODY)))], BODY),
    req("POST", "/echo?mode=iter", [("Content-Length", str(len(BODY)))], BODY),
    req("POST", "/raw_echo", [("Content-Length", "5")], b"12345"),
    req("POST", "/digest", [("Transfer-Encoding", "chunked")], chunked(b"d" * 100000, [4096])),
    req("GET", "/stream?n=3&size=4"),
    req("GET", "/big?mode=list&size=200000"),
    req("GET", "/big?mode=gen&size=200000"),
    req("GET", "/big?mode=cl&size=200000"),
    req("HEAD", "/head"),
    req("GET", "/status?code=204"),
    req("GET", "/status?code=304"),
    req("GET", "/write"),
    req("GET", "/write?ret=list"),
    req("GET", "/latin1"),
    req("GET", "/errors?tag=validated"),
    req("GET", "/exc_before"),
    req("GET", "/threads"),
]


def test_validator_app_suite_has_no_warnings_or_errors(tmp_path):
    srv = start_server(app="validated:application")
    try:
        fpath = tmp_path / "file.bin"
        fpath.write_bytes(os.urandom(100000))
        marker = tmp_path / "closed"
        reqs = VALIDATED_REQUESTS + [req("GET", f"/filewrap?path={fpath}&cl=1"),
                                     req("GET", f"/closer?marker={marker}")]
        with srv.connect(timeout=HANG_S) as s:
            s.sendall(b"".join(reqs))  # pipelined, and one by one below
            r = Reader(s)
            piped = [r.read_response("HEAD" if raw.startswith(b"HEAD") else "GET") for raw in reqs]
        single = [request(srv.port, raw, method="HEAD" if raw.startswith(b"HEAD") else "GET")
                  for raw in reqs]
        for resps in (piped, single):
            statuses = [x.status for x in resps]
            assert statuses == [200] * 14 + [204, 304] + [200] * 4 + [503, 200, 200, 200], statuses
        assert piped[-2].body == fpath.read_bytes()
        _wait_marker(marker, "closed")
        # One pool thread runs the requests in order and the validator's
        # warnings share sys.stderr with wsgi.errors: once this later
        # request's line is in the log, so is anything the earlier ones wrote.
        before = len(srv.log_text())
        assert get(srv.port, "/errors?tag=validator-end").status == 200
        _log_grows(srv, before, r"wsgi-errors-line-validator-end")
        log = srv.log_text()
        for bad in ("AssertionError", "WSGIWarning", "garbage collected without being closed"):
            assert bad not in log, log[-3000:]
    finally:
        srv.close()

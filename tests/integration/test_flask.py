"""A real Flask app served unmodified, over every handoff: routes, query
strings, JSON and form posts (chunked too), 404, redirects, a streamed
response, a view's error answered with 500 and logged, keep-alive."""
import json

import pytest

from conftest import HANDOFFS, start_server
from httpclient import Reader, get, read_chunk, read_head, req, request
from loadgen import wait_until

HANG_S = 30  # only detects a hang: nothing here legitimately takes this long


@pytest.fixture(scope="module", params=HANDOFFS)
def fsrv(request):
    srv = start_server(app="flask_app:application", handoff=request.param)
    request.addfinalizer(srv.close)
    return srv


def test_flask_index_route(fsrv):
    resp = get(fsrv.port, "/")
    assert resp.status == 200 and resp.body == b"flask index"
    assert resp.header("content-type").startswith("text/html")
    assert resp.header("content-length") == str(len(resp.body))


def test_flask_route_with_variable_and_query(fsrv):
    resp = get(fsrv.port, "/user/ada%20lovelace?lang=en&x=%2F")
    assert resp.status == 200
    assert json.loads(resp.body) == {"user": "ada lovelace", "args": {"lang": "en", "x": "/"}}


def test_flask_json_post(fsrv):
    body = json.dumps({"numbers": [1, 2, 3], "name": "caf\u00e9"}).encode()
    raw = req("POST", "/json", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))], body)
    resp = request(fsrv.port, raw)
    assert resp.status == 201
    assert json.loads(resp.body) == {"received": {"numbers": [1, 2, 3], "name": "caf\u00e9"},
                                     "doubled": [2, 4, 6]}


def test_flask_json_post_chunked(fsrv):
    body = json.dumps({"numbers": [5]}).encode()
    chunked = b"".join(b"%x\r\n%s\r\n" % (1, body[i:i + 1]) for i in range(len(body))) + b"0\r\n\r\n"
    raw = req("POST", "/json", [("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")], chunked)
    resp = request(fsrv.port, raw)
    assert resp.status == 201 and json.loads(resp.body)["doubled"] == [10]


def test_flask_form_post(fsrv):
    body = b"name=Grace+Hopper&color=%23ff0000"
    raw = req("POST", "/form", [("Content-Type", "application/x-www-form-urlencoded"),
                                ("Content-Length", str(len(body)))], body)
    resp = request(fsrv.port, raw)
    assert resp.status == 200 and resp.body == b"name=Grace Hopper color=#ff0000"


def test_flask_404(fsrv):
    resp = get(fsrv.port, "/no/such/page")
    assert resp.status == 404
    assert b"Not Found" in resp.body


def test_flask_redirect(fsrv):
    resp = get(fsrv.port, "/old")
    assert resp.status == 302
    assert resp.header("location") in ("/", "http://localhost/")


def test_flask_streaming_with_stream_with_context(fsrv):
    with fsrv.connect(timeout=HANG_S) as s:
        s.sendall(req("GET", "/stream?n=4&tag=zz"))
        r = Reader(s)
        head = read_head(r)
        assert head.status == 200 and head.header("transfer-encoding") == "chunked"
        body = b""
        while c := read_chunk(r):
            body += c
        assert body == b"zz-0;zz-1;zz-2;zz-3;"


def test_flask_view_error_is_500_and_logged(fsrv):
    before = len(fsrv.log_text())
    resp = get(fsrv.port, "/boom")
    assert resp.status == 500
    assert wait_until(lambda: "flask-view-error" in fsrv.log_text()[before:], HANG_S), \
        fsrv.log_text()[before:][-3000:]


def test_flask_keepalive_several_requests_one_connection(fsrv):
    with fsrv.connect() as s:
        r = Reader(s)
        for i in range(5):
            s.sendall(req("GET", f"/user/u{i}"))
            resp = r.read_response()
            assert resp.status == 200 and json.loads(resp.body)["user"] == f"u{i}"

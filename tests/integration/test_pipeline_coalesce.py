"""Where the loop answers requests itself (--app native-hello, --inline), the
requests pipelined in one segment are answered together and their responses
leave in one write (core/conn/conn_request.c, answer_pipelined), not one send()
each; order and framing stay those of one request at a time, and a response
that ends the connection (Connection: close, an error) ends the batch."""
import json
import socket
import time

import pytest

MODES = {
    "native-hello": dict(args=("--app", "native-hello"), app=None),
    "inline": dict(args=("--inline",), app="wsgi_apps:application"),
}


def _req(method="GET", path="/", extra=""):
    return f"{method} {path} HTTP/1.1\r\nHost: x\r\n{extra}\r\n".encode()


def _path(mode, i):
    # --inline: a status per request, so the order of the answers shows.
    return f"/status?code={(200, 201, 404)[i % 3]}" if mode == "inline" else "/"


def _want(mode, i):
    return (200, 201, 404)[i % 3] if mode == "inline" else 200


def _parse(data, methods):
    """Split data into responses, framed as a client would for `methods`.
    Returns (responses, rest); each response is (status, headers, body)."""
    out = []
    while len(out) < len(methods):
        end = data.find(b"\r\n\r\n")
        if end < 0:
            break
        lines = data[:end].decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
        pos = end + 4
        if methods[len(out)] == "HEAD" or status in (204, 304):
            body_len = 0
        elif "content-length" in headers:
            body_len = int(headers["content-length"])
        else:
            raise AssertionError(f"unframed response: {lines}")
        if len(data) < pos + body_len:
            break
        out.append((status, headers, data[pos:pos + body_len]))
        data = data[pos + body_len:]
    return out, data


def _exchange(srv, payload, methods, expect_eof=False, timeout=10.0):
    """Send payload in one send(); read until len(methods) responses are in
    (and, with expect_eof, until the server closes)."""
    with srv.connect() as s:
        s.sendall(payload)
        s.settimeout(timeout)
        data = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got, _ = _parse(data, methods)
            if len(got) == len(methods) and not expect_eof:
                break
            try:
                d = s.recv(65536)
            except socket.timeout:
                break
            if not d:
                break
            data += d
        return _parse(data, methods)


def _loop_counters(path):
    doc = json.loads(path.read_text())
    workers = doc["workers"] if "workers" in doc else [doc]
    loops = [th for w in workers for th in w["threads"] if th["role"] == "loop"]
    assert len(loops) == 1, loops
    return loops[0]["requests"], loops[0]["counters"]["writes"]


@pytest.mark.parametrize("mode", list(MODES))
def test_a_pipeline_is_answered_in_order_with_few_writes(server_factory, tmp_path, mode):
    stats = tmp_path / "stats.json"
    m = MODES[mode]
    srv = server_factory(*m["args"], "--stats-json", str(stats), app=m["app"])
    n = 64
    payload = b"".join(_req(path=_path(mode, i)) for i in range(n))
    got, rest = _exchange(srv, payload, ["GET"] * n)
    assert [r[0] for r in got] == [_want(mode, i) for i in range(n)]
    assert rest == b""
    assert srv.stop() == 0
    requests, writes = _loop_counters(stats)
    assert requests == n, requests
    # One write per response would be 1.0; batches of up to 32 responses
    # make it 2/64 when the 64 requests are read at once.
    assert writes / requests < 0.25, (writes, requests)


@pytest.mark.parametrize("mode", list(MODES))
def test_connection_close_ends_the_pipeline(server_factory, mode):
    m = MODES[mode]
    srv = server_factory(*m["args"], app=m["app"])
    reqs = [_req(path=_path(mode, i), extra="Connection: close\r\n" if i == 9 else "")
            for i in range(20)]
    got, rest = _exchange(srv, b"".join(reqs), ["GET"] * 20, expect_eof=True)
    assert [r[0] for r in got] == [_want(mode, i) for i in range(10)]
    assert got[9][1].get("connection") == "close"
    assert rest == b"", rest[:200]  # nothing after the closing response


@pytest.mark.parametrize("mode", list(MODES))
def test_a_head_in_the_middle_gets_no_body(server_factory, mode):
    m = MODES[mode]
    srv = server_factory(*m["args"], app=m["app"])
    methods = ["GET"] * 5 + ["HEAD"] + ["GET"] * 5
    path = "/head" if mode == "inline" else "/"
    payload = b"".join(_req(method=meth, path=path) for meth in methods)
    got, rest = _exchange(srv, payload, methods)
    assert len(got) == len(methods) and rest == b""
    for meth, (status, headers, body) in zip(methods, got):
        assert status == 200
        assert int(headers["content-length"]) > 0
        if mode == "inline":
            assert headers["x-method"] == meth
        assert (body == b"") == (meth == "HEAD"), (meth, body)


@pytest.mark.parametrize("mode", list(MODES))
def test_a_bad_request_in_the_middle_gets_the_earlier_answers_then_400(server_factory, mode):
    m = MODES[mode]
    srv = server_factory(*m["args"], app=m["app"])
    good = [_req(path=_path(mode, i)) for i in range(6)]
    bad = b"GET / HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n"
    payload = b"".join(good[:3]) + bad + b"".join(good[3:])
    got, rest = _exchange(srv, payload, ["GET"] * 7, expect_eof=True)
    assert [r[0] for r in got] == [_want(mode, i) for i in range(3)] + [400]
    assert got[3][1].get("connection") == "close"
    assert rest == b""


def test_inline_pipelined_bodies_reach_their_own_requests(server_factory):
    """--inline: each request answered ahead of the write reads its own body
    (a view into the receive buffer), not a neighbour's; a chunked one waits
    for the ordinary path and still comes back in its place."""
    srv = server_factory("--inline", app="wsgi_apps:application")
    parts, bodies = [], []
    for i in range(8):
        body = f"body-{i}-".encode() * (i + 1)
        bodies.append(body.decode())
        if i == 5:
            chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
            parts.append(_req("POST", "/echo", "Transfer-Encoding: chunked\r\n") + chunked)
        else:
            parts.append(_req("POST", "/echo", f"Content-Length: {len(body)}\r\n") + body)
    got, rest = _exchange(srv, b"".join(parts), ["POST"] * 8)
    assert [r[0] for r in got] == [200] * 8 and rest == b""
    assert [json.loads(r[2])["body"] for r in got] == bodies

"""Reference handling in the WSGI bridge (core/python/wsgi_*.c).

- The per-server environ values are owned by the environ template alone: no
  reference leaked at start-up (PyDict_SetItemString does not steal).
- Requests with many header fields leave nothing behind: the interpreter's
  object and block counts stop growing after warm-up.
- A list body is not read through borrowed pointers while the GIL is
  dropped: an app thread that empties and refills the list while the server
  streams it cannot make the server read freed memory, and the body sent is
  the list as the app returned it.
- A body read on a thread other than the one running the request is whole
  or raises; it never ends early without a word."""
import json

import pytest

from httpclient import Reader, get, post, req
from loadgen import wait_until

APP = "bridge_apps:application"


def test_environ_template_values_hold_no_leaked_reference(server_factory, handoff):
    srv = server_factory(app=APP, handoff=handoff)
    counts = json.loads(get(srv.port, "/refcounts", timeout=30).body)
    for key, (actual, expected) in counts.items():
        assert actual == expected, f"{key}: {actual} references, {expected} expected: one leaked"


def test_many_requests_with_many_headers_do_not_grow_the_heap(server_factory):
    srv = server_factory(app=APP)
    headers = "".join(f"X-Field-{i}: value-{i}-{'v' * (i % 17)}\r\n" for i in range(60))
    headers += "Cookie: a=1\r\nCookie: b=2\r\nAccept: x\r\nAccept: y\r\n"
    one = f"GET /x HTTP/1.1\r\nHost: h\r\n{headers}\r\n".encode()

    def burst(n):
        with srv.connect(timeout=30) as s:
            s.sendall(one * n)
            r = Reader(s)
            for _ in range(n):
                assert r.read_response().status == 404

    def counts():
        return json.loads(get(srv.port, "/counts", timeout=30).body)

    burst(500)  # warm-up: caches, free lists, interned header names
    before = counts()
    burst(3000)
    after = counts()
    # A leak of even one object per request would be >= 3000 here; the
    # slack covers the bookkeeping of the /counts request itself.
    assert after["objects"] - before["objects"] < 100, (before, after)
    assert after["blocks"] - before["blocks"] < 300, (before, after)


def test_list_mutated_by_another_thread_while_streamed(server_factory, handoff, tmp_path):
    # The list bridge_apps._mutated returns: 256 blocks of 64 KiB, A..Z.
    expected = b"".join(bytes([65 + i % 26]) * 65536 for i in range(256))
    srv = server_factory(app=APP, handoff=handoff)
    for attempt in range(2):
        go = tmp_path / f"go-{attempt}"
        with srv.connect(timeout=60) as s:
            s.sendall(req("GET", f"/mutated?{go}", headers=[("Connection", "close")]))
            head = b""
            while b"\r\n\r\n" not in head:  # the head: the app has returned its list
                data = s.recv(65536)
                assert data, "closed before the head"
                head += data
            go.touch()
            # Not reading: the server waits for us mid-list, GIL dropped,
            # while the app's thread empties and refills the list; read only
            # once that thread has finished.
            done = tmp_path / f"go-{attempt}.done"
            assert wait_until(done.exists, 60), "the app's mutating thread did not finish"
            body = head[head.index(b"\r\n\r\n") + 4:]
            while True:
                data = s.recv(1 << 20)
                if not data:
                    break
                body += data
        assert len(body) == len(expected) and body == expected, \
            f"body differs from the list the app returned ({len(body)} of {len(expected)} bytes)"
    assert get(srv.port, "/counts", timeout=30).status == 200  # still serving


@pytest.mark.parametrize("size", [1000, 1 << 20])
def test_body_read_on_another_thread_is_whole_or_an_error(server_factory, handoff, size):
    """Only the thread running the request can ask the loop for more of the
    body. Another thread gets what is already read ahead, and then an error,
    never a body that silently ends early."""
    srv = server_factory(app=APP, handoff=handoff)
    r = post(srv.port, "/read_in_thread", b"x" * size, timeout=60)
    got = json.loads(r.body)
    if "error" in got:
        assert size > 65536 and "thread" in got["error"], got
    else:
        assert got["length"] == size, f"the body ended after {got['length']} of {size} bytes"


def test_file_wrapper_fileno_out_of_range_is_not_truncated(server_factory):
    """A fileno() beyond a C int names no descriptor; cut to 32 bits it would
    name another open file, which the loop would then send."""
    srv = server_factory(app=APP)
    r = get(srv.port, "/big_fileno", timeout=30)
    assert r.status == 200 and r.body == b"public\n", r.body

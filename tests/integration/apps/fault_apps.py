"""WSGI apps for the load and fault tests (test_load.py, test_faults.py).

One callable, `app`, routed on PATH_INFO. Query parameters:
  log=PATH  the iterable's close() appends "<route> <id>\\n" to PATH, so a test
            can see close() was called for every request, also the ones whose
            client vanished
  id=X      an identifier echoed in close() records and in /work bodies
"""
import gc
import hashlib
import os
import threading
import time
from urllib.parse import parse_qs

HELLO = b"Hello, World!"
_grown = []             # /grow appends here and never lets go: an app that leaks
_finalized = [0]        # /cycle objects whose __del__ ran (cycles collected)
_lock = threading.Lock()


def _q(environ):
    return {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}


def _record(q, route):
    path = q.get("log")
    if path:
        with open(path, "a") as f:
            f.write(f"{route} {q.get('id', '-')}\n")


class _Recorded:
    """An iterable whose close() is recorded; gen() is the body."""

    def __init__(self, q, route, gen):
        self.q, self.route, self.gen = q, route, gen

    def __iter__(self):
        return self.gen

    def close(self):
        _record(self.q, self.route)


def _ok(start_response, body, ctype="text/plain"):
    start_response("200 OK", [("Content-Type", ctype), ("Content-Length", str(len(body)))])
    return [body]


def _read_body(environ):
    return environ["wsgi.input"].read()


def _digest(environ, start_response, q):
    # Fixed-length body (51 bytes) for any request body: sha1 hex, space, length.
    body = _read_body(environ)
    out = hashlib.sha1(body).hexdigest().encode() + b" " + b"%010d" % len(body)
    return _ok(start_response, out)


def _upload(environ, start_response, q):
    # Reads the body lazily, inside the iterable, so close() must run even when
    # the client vanishes half-way through the upload. "upload-start" tells the
    # test the app is running before it vanishes.
    _record(q, "upload-start")
    inp = environ["wsgi.input"]
    delay = float(q.get("delay", "0"))  # sleep before reading: the client may leave meanwhile

    def gen():
        if delay:
            time.sleep(delay)
        n = 0
        while True:
            chunk = inp.read(8192)
            if not chunk:
                break
            n += len(chunk)
        yield b"%d" % n
    start_response("200 OK", [("Content-Type", "text/plain")])
    return _Recorded(q, "upload", gen())


def _stream(environ, start_response, q):
    # A large streamed response (no Content-Length: chunked to 1.1 clients).
    size = int(q.get("size", 10 * 1024 * 1024))
    chunk = b"x" * 65536

    def gen():
        left = size
        while left > 0:
            n = min(left, len(chunk))
            yield chunk[:n]
            left -= n
    start_response("200 OK", [("Content-Type", "application/octet-stream")])
    return _Recorded(q, "stream", gen())


def _raise(environ, start_response, q):
    raise RuntimeError(q.get("msg", "boom"))


def _raise_mid(environ, start_response, q):
    def gen():
        yield b"partial-body;"
        raise ValueError(q.get("msg", "mid-stream failure"))
    start_response("200 OK", [("Content-Type", "text/plain")])
    return _Recorded(q, "raise-mid", gen())


def _nonbytes(environ, start_response, q):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return _Recorded(q, "nonbytes", iter(["a str, not bytes"]))


def _nonbytes_list(environ, start_response, q):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return ["a str in a list", 42]


class _Node:
    def __init__(self):
        self.payload = bytearray(b"\x5a" * (256 * 1024))  # pages touched
        self.other = None

    def __del__(self):
        with _lock:
            _finalized[0] += 1


def _cycle(environ, start_response, q):
    # Two nodes referring to each other (256 KiB each): only the cycle
    # collector frees them. 1000 requests = 500 MB if nothing collects.
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return _ok(start_response, b"cycle")


def _cycle_stats(environ, start_response, q):
    if q.get("collect"):
        gc.collect()
    return _ok(start_response, b"%d" % _finalized[0])


def _grow(environ, start_response, q):
    _grown.append(bytes(10 * 1024))
    return _ok(start_response, b"%d" % len(_grown))


def _sleep(environ, start_response, q):
    _record(q, "sleep-start")
    time.sleep(float(q.get("s", "30")))
    return _ok(start_response, b"slept")


def _work(environ, start_response, q):
    ms = float(q.get("ms", "0"))
    if ms:
        time.sleep(ms / 1000.0)
    return _ok(start_response, ("id=" + q.get("id", "-")).encode())


def _pid(environ, start_response, q):
    return _ok(start_response, b"%d" % os.getpid())


def _hello(environ, start_response, q):
    return _ok(start_response, HELLO)


ROUTES = {
    "/hello": _hello,
    "/digest": _digest,
    "/upload": _upload,
    "/stream": _stream,
    "/raise": _raise,
    "/raise-mid": _raise_mid,
    "/nonbytes": _nonbytes,
    "/nonbytes-list": _nonbytes_list,
    "/cycle": _cycle,
    "/cycle-stats": _cycle_stats,
    "/grow": _grow,
    "/sleep": _sleep,
    "/work": _work,
    "/pid": _pid,
}


def app(environ, start_response):
    q = _q(environ)
    route = ROUTES.get(environ["PATH_INFO"])
    if route is None:
        start_response("404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", "9")])
        return [b"not found"]
    return route(environ, start_response, q)

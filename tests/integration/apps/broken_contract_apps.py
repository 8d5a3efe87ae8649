"""Apps that break the WSGI contract on purpose, one per PATH_INFO (see
test_hostile_app.py). The query string, where used, parametrises a case.

/ok                  a well-behaved answer: the body is the path, so a test
                     can tell its own answer from a stray one
/fw_after_write      write() 7 bytes, then a 55-byte file via wsgi.file_wrapper;
                     Content-Length 55 covers both only if the file is cut at 48
/fw_short            Content-Length 100, a 40-byte file
/iter_short          Content-Length 20, yields 10 bytes
/iter_long           Content-Length 5, yields 10 bytes
/write_then_read     Content-Length 10: write(b"first"), then reads 5 body bytes
                     and returns them
/yield_then_read     the same from a generator
/header?name=N&value=V[&status=S][&cl=L][&body=B][&stream=1]
                     one app header (N, V), optional status, Content-Length
                     and body (body= is sent through a generator with stream=1)
/status?s=S          start_response(S) with an empty body
/two_cl              two Content-Length fields
/mutated_headers     adds a second Content-Length to its list after
                     start_response accepted it
/raise_before        a generator that raises before its first block
/raise_after         one that raises after its first block
/close_raises        a complete body whose close() raises
/twice               start_response twice without exc_info
/exc_info_before     start_response again with exc_info before anything is sent
/exc_info_after      the same after the first block went out
/other_thread        start_response called from another thread
/not_iterable        returns an int
/yield_str           yields a str
/write_in_iter       write() between a generator's blocks
"""
import os
import sys
import tempfile
import threading
import urllib.parse

_FILE_DATA = bytes(range(65, 65 + 55))          # 55 bytes "ABC..."
_tmpdir = tempfile.mkdtemp(prefix="cserve-hostile-")
_FILE55 = os.path.join(_tmpdir, "f55")
_FILE40 = os.path.join(_tmpdir, "f40")
with open(_FILE55, "wb") as _f:
    _f.write(_FILE_DATA)
with open(_FILE40, "wb") as _f:
    _f.write(_FILE_DATA[:40])


class _CloseRaises:
    def __iter__(self):
        yield b"complete"

    def close(self):
        raise RuntimeError("close() fails on purpose")


def app(environ, start_response):
    path = environ["PATH_INFO"]
    q = dict(urllib.parse.parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True))

    if path == "/ok":
        body = path.encode()
        start_response("200 OK", [("Content-Type", "text/plain"),
                                  ("Content-Length", str(len(body)))])
        return [body]

    if path == "/fw_after_write":
        write = start_response("200 OK", [("Content-Length", "55")])
        write(b"prefix:")
        return environ["wsgi.file_wrapper"](open(_FILE55, "rb"))

    if path == "/fw_short":
        start_response("200 OK", [("Content-Length", "100")])
        return environ["wsgi.file_wrapper"](open(_FILE40, "rb"))

    if path == "/iter_short":
        start_response("200 OK", [("Content-Length", "20")])
        return iter([b"0123456789"])

    if path == "/iter_long":
        start_response("200 OK", [("Content-Length", "5")])
        return iter([b"0123456789"])

    if path == "/write_then_read":
        write = start_response("200 OK", [("Content-Length", "10")])
        write(b"first")
        return [environ["wsgi.input"].read(5)]

    if path == "/yield_then_read":
        start_response("200 OK", [("Content-Length", "10")])

        def gen():
            yield b"first"
            yield environ["wsgi.input"].read(5)
        return gen()

    if path == "/header":
        headers = [(q["name"], q["value"])]
        if "cl" in q:
            headers.append(("Content-Length", q["cl"]))
        start_response(q.get("status", "200 OK"), headers)
        body = q.get("body", "").encode()
        if q.get("stream"):
            return iter([body[:1], body[1:]])
        return [body] if body else []

    if path == "/status":
        start_response(q["s"], [])
        return []

    if path == "/two_cl":
        start_response("200 OK", [("Content-Length", "5"), ("Content-Length", "50")])
        return [b"hello"]

    if path == "/mutated_headers":
        headers = [("Content-Length", "5")]
        start_response("200 OK", headers)
        headers.append(("Content-Length", "50"))
        return [b"hello"]

    if path == "/raise_before":
        start_response("200 OK", [])

        def gen():
            raise RuntimeError("fails before the first block")
            yield b"never"
        return gen()

    if path == "/raise_after":
        start_response("200 OK", [])

        def gen():
            yield b"partial"
            raise RuntimeError("fails after the first block")
        return gen()

    if path == "/close_raises":
        start_response("200 OK", [("Content-Length", "8")])
        return _CloseRaises()

    if path == "/twice":
        start_response("200 OK", [])
        start_response("200 OK", [])
        return [b"never"]

    if path == "/exc_info_before":
        start_response("200 OK", [("Content-Length", "5")])
        try:
            raise ValueError("the app changes its mind")
        except ValueError:
            start_response("503 Service Unavailable", [("Content-Length", "4")], sys.exc_info())
        return [b"oops"]

    if path == "/exc_info_after":
        start_response("200 OK", [])

        def gen():
            yield b"partial"
            try:
                raise ValueError("too late to change the response")
            except ValueError:
                start_response("500 Internal Server Error", [], sys.exc_info())
            yield b"never"
        return gen()

    if path == "/other_thread":
        t = threading.Thread(target=start_response,
                             args=("200 OK", [("Content-Length", "8")]))
        t.start()
        t.join()
        return [b"threaded"]

    if path == "/not_iterable":
        start_response("200 OK", [])
        return 42

    if path == "/yield_str":
        start_response("200 OK", [])
        return iter(["text"])

    if path == "/write_in_iter":
        write = start_response("200 OK", [])

        def gen():
            yield b"a"
            write(b"b")
            yield b"c"
        return gen()

    start_response("404 Not Found", [("Content-Length", "0")])
    return []

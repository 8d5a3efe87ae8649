"""Apps for test_auto_threads.py (--blocking-threads auto): a request that
waits with the GIL released (`?sleep=S`, seconds: time.sleep), one that holds
it (`?spin=S`: pure-Python work for S seconds of this thread's CPU), a
body of N bytes (`?size=N`) or a file of N bytes sent with wsgi.file_wrapper
(`?file=N`), in any combination; `?log=K` notes when request K starts and
ends, and `?order` answers those notes so far, one per line. `?mark=PATH`
appends "start" to PATH when the request reaches the app, so a test can wait
for it there; `?gate=PATH` then blocks until the test lets go of its lock on
PATH (flock: the thread waits in the kernel with the GIL released, using no
CPU and waking never, so the request certainly waits as long as the test
says). With `?stream`, the response's head and a first block ("part\n") go
out first, and the gate is waited on in the body, before its last block
("ok\n"): the head is made while the request still runs."""
import fcntl
import os
import tempfile
import threading
import time

_FILES = {}
_NOTES = []
_NOTES_LOCK = threading.Lock()


def _note(what):
    with _NOTES_LOCK:
        _NOTES.append(what)


def _file(n):
    """A file of n bytes, made once per size (removed at exit)."""
    if n not in _FILES:
        fd, path = tempfile.mkstemp(prefix="cserve-auto-")
        with os.fdopen(fd, "wb") as f:
            f.write(b"f" * n)
        _FILES[n] = path
        import atexit
        atexit.register(os.unlink, path)
    return _FILES[n]


def _query(environ):
    q = {}
    for part in environ.get("QUERY_STRING", "").split("&"):
        k, _, v = part.partition("=")
        if k:
            q[k] = v
    return q


def _wait_gate(q):
    if "gate" in q:
        with open(q["gate"], "rb") as f:
            fcntl.flock(f, fcntl.LOCK_SH)


def _stream(q):
    yield b"part\n"
    _wait_gate(q)
    if "log" in q:
        _note(f"end {q['log']}")
    yield b"ok\n"


def application(environ, start_response):
    q = _query(environ)
    if "order" in q:
        with _NOTES_LOCK:
            body = "".join(f"{n}\n" for n in _NOTES).encode()
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return [body]
    if "mark" in q:
        with open(q["mark"], "a") as f:
            f.write("start\n")
    if "log" in q:
        _note(f"start {q['log']}")
    if "stream" in q:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return _stream(q)
    _wait_gate(q)
    if "sleep" in q:
        time.sleep(float(q["sleep"]))
    if "spin" in q:
        end = time.thread_time() + float(q["spin"])
        x = 1
        while time.thread_time() < end:
            for _ in range(1000):
                x = (x * 1103515245 + 12345) & 0xFFFFFFFF
    if "log" in q:
        _note(f"end {q['log']}")
    if "file" in q:
        n = int(q["file"])
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(n))])
        return environ["wsgi.file_wrapper"](open(_file(n), "rb"))
    body = b"x" * int(q["size"]) if "size" in q else b"ok\n"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]

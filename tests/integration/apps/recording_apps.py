"""Apps that record what happened to each request (test_backpressure.py,
test_http.py and others): each route writes one line per event to the file
named by ?log=, so a test can see what the app saw.

  /sleep?s=&id=      records "start <id>", sleeps, answers "slept <id>"; with
                     gate=PATH it waits instead until PATH exists (at most
                     s= seconds, 30 by default): the test decides when it ends
  /read?id=          reads wsgi.input to the end with read(65536); records
                     "read <id> <n>" or "raised <id> <ExceptionType> <n>" (then
                     re-raises, as an app that does not catch it would)
  /big?size=         size bytes of b"z", Content-Length set, one block
  /hello             "hello"
"""
import os
import threading
import time
from urllib.parse import parse_qs

_lock = threading.Lock()


def _q(environ):
    return {k: v[-1] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}


def _record(q, line):
    path = q.get("log")
    if path:
        with _lock, open(path, "a") as f:
            f.write(line + "\n")


def _wait_for(path, timeout):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)


def _ok(start_response, body):
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


def app(environ, start_response):
    q = _q(environ)
    path = environ["PATH_INFO"]
    rid = q.get("id", "-")
    if path == "/sleep":
        _record(q, f"start {rid}")
        if q.get("gate"):
            _wait_for(q["gate"], float(q.get("s", "30")))
        else:
            time.sleep(float(q.get("s", "0.5")))
        return _ok(start_response, f"slept {rid}".encode())
    if path == "/read":
        inp = environ["wsgi.input"]
        n = 0
        try:
            while True:
                chunk = inp.read(65536)
                if not chunk:
                    break
                n += len(chunk)
        except Exception as e:
            _record(q, f"raised {rid} {type(e).__name__} {n}")
            raise
        _record(q, f"read {rid} {n}")
        return _ok(start_response, b"%d" % n)
    if path == "/big":
        return _ok(start_response, b"z" * int(q.get("size", str(8 << 20))))
    return _ok(start_response, b"hello")

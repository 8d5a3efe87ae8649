"""Apps for test_hold.py: /work (the GIL held for us= microseconds) and
/wait (ms= milliseconds of time.sleep, the GIL released, as a database call
waits), which counts the requests in the app at once; /most answers the
most there were at once since the last /most, and starts the count again;
/slack answers the timer slack of the thread the app runs on (ns)."""
import threading
import time

from wsgi_apps import work

_lock = threading.Lock()
_now = 0
_most = 0


def wait(environ, start_response):
    global _now, _most
    ms = float(dict(p.split("=", 1) for p in environ.get("QUERY_STRING", "").split("&") if "=" in p).get("ms", "1"))
    with _lock:
        _now += 1
        _most = max(_most, _now)
    try:
        time.sleep(ms / 1000)
    finally:
        with _lock:
            _now -= 1
    body = b"waited"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


def most(environ, start_response):
    global _most
    with _lock:
        body, _most = str(_most).encode(), _now
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


def slack(environ, start_response):
    with open(f"/proc/{threading.get_native_id()}/timerslack_ns") as f:
        body = f.read().strip().encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


ROUTES = {"/work": work, "/wait": wait, "/most": most, "/slack": slack}


def application(environ, start_response):
    return ROUTES[environ.get("PATH_INFO", "/")](environ, start_response)

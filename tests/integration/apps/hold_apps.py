"""Apps for test_hold.py: /work (the GIL held for us= microseconds) and
/wait (ms= milliseconds of time.sleep, the GIL released, as a database call
waits), which counts the requests in the app at once; /most answers the
most there were at once since the last /most, and starts the count again;
/slack answers the timer slack of the thread the app runs on (ns);
/stream yields parts= parts, each after us= microseconds with the GIL
held, and keeps how long each yield kept it from its next part (the
server writing the part, and waiting for the loop to have written the
one before); /blocked answers their mean in microseconds, and starts
again."""
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


_blocked = []


def stream(environ, start_response):
    q = dict(p.split("=", 1) for p in environ.get("QUERY_STRING", "").split("&") if "=" in p)
    parts, us = int(q.get("parts", "8")), float(q.get("us", "300"))
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(parts * 8))])

    def body():
        for _ in range(parts):
            end = time.perf_counter() + us / 1e6
            while time.perf_counter() < end:
                pass
            t = time.perf_counter()
            yield b"streamed"
            with _lock:
                _blocked.append(time.perf_counter() - t)
    return body()


def blocked(environ, start_response):
    with _lock:
        mean = sum(_blocked) / len(_blocked) if _blocked else 0.0
        _blocked.clear()
    body = f"{mean * 1e6:.0f}".encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


ROUTES = {"/stream": stream, "/blocked": blocked, "/work": work, "/wait": wait, "/most": most, "/slack": slack}


def application(environ, start_response):
    return ROUTES[environ.get("PATH_INFO", "/")](environ, start_response)

"""Apps for test_freethreaded.py: state shared by the pool threads, which a
free-threaded Python runs in parallel.

/gil           "True" or "False": sys._is_gil_enabled() as the app sees it,
               after it has used every object cserve gives it
/cache?k=N     a dict shared by all requests, filled on a miss; the body is
               the cached value, which must be f(N) whichever thread filled it
/count         a counter under a threading.Lock; the body is its new value
/total         the counter's value
/log?i=N       one line through the logging module (to wsgi.errors)
/headers       the HTTP_X_FT_* keys of environ, as "KEY=value" lines, sorted
"""
import json
import logging
import sys
import threading

cache = {}
counter = 0
counter_lock = threading.Lock()
log = logging.getLogger("ft_apps")


def f(n):
    # Enough work that misses of different threads overlap.
    return sum(i * i for i in range(n % 97 + 50)) + n


def _gil(environ):
    # Touch what cserve hands the app (wsgi.input, the file wrapper type,
    # start_response) before asking, so that nothing of ours that is used
    # can have turned the GIL back on.
    environ["wsgi.input"].read()
    environ["wsgi.file_wrapper"]
    enabled = getattr(sys, "_is_gil_enabled", lambda: True)()
    return str(enabled).encode()


def application(environ, start_response):
    global counter
    path = environ["PATH_INFO"]
    query = environ.get("QUERY_STRING", "")
    args = dict(p.split("=", 1) for p in query.split("&") if "=" in p)
    if path == "/gil":
        body = _gil(environ)
    elif path == "/cache":
        n = int(args["k"])
        v = cache.get(n)
        if v is None:
            v = cache.setdefault(n, f(n))
        body = str(v).encode()
    elif path == "/count":
        with counter_lock:
            counter += 1
            body = str(counter).encode()
    elif path == "/total":
        with counter_lock:
            body = str(counter).encode()
    elif path == "/log":
        log.warning("ft-log-line %s %s", args["i"], "x" * 64)
        body = b"logged"
    elif path == "/headers":
        keys = sorted(k for k in environ if k.startswith("HTTP_X_FT_"))
        body = "\n".join(f"{k}={environ[k]}" for k in keys).encode()
    else:
        body = json.dumps({"path": path}).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


logging.basicConfig(stream=sys.stderr, format="%(message)s")

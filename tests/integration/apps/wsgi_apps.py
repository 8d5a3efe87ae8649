"""Small WSGI apps for the integration suite, selected by the first path segment.

`application` dispatches on PATH_INFO's first segment (e.g. /environ, /echo,
/stream). Query parameters (parsed from the raw QUERY_STRING) tune each app.
Apps that record something for a test (close() called, a generator stopped)
write a marker file whose path comes from the `marker` query parameter.

Every well-behaved app sets Content-Type (except 204/304) and reads the body
only with read(n) when `strict=1`, so the same apps pass wsgiref.validate
(see validated.py).
"""
import hashlib
import json
import os
import sys
import threading
import time
from urllib.parse import parse_qs

CT = ("Content-Type", "text/plain")
CT_JSON = ("Content-Type", "application/json")


def _q(environ):
    return {k: v[-1] for k, v in parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True).items()}


def _mark(path, text):
    if path:
        with open(path, "a") as f:
            f.write(text + "\n")


def _wait_for(path, timeout=10.0):
    """Block until file `path` exists (the test's go-ahead); bounded."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path):
            return True
        time.sleep(0.01)
    return False


def _jsonable(v):
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, tuple):
        return list(v)
    return repr(type(v))


# --------------------------------------------------------------- basic apps

def hello(environ, start_response):
    body = b"hello"
    start_response("200 OK", [CT, ("Content-Length", str(len(body)))])
    return [body]


def environ_app(environ, start_response):
    """The environ as JSON: str values as they are, other values by type,
    plus a few facts about wsgi.input / wsgi.errors."""
    out = {k: _jsonable(v) for k, v in environ.items()}
    out["_input_methods"] = [m for m in ("read", "readline", "readlines", "__iter__")
                             if hasattr(environ["wsgi.input"], m)]
    out["_errors_methods"] = [m for m in ("write", "writelines", "flush")
                              if hasattr(environ["wsgi.errors"], m)]
    out["_types"] = {k: type(v).__name__ for k, v in environ.items()}
    body = json.dumps(out).encode()
    start_response("200 OK", [CT_JSON, ("Content-Length", str(len(body)))])
    return [body]


def echo(environ, start_response):
    """Echo the request body, read by the method named in ?mode=:
    read | read-1 | readn (read(n) with ?n=, default 7) | readline |
    readline_n | readlines | iter. The body is returned as JSON
    {"pieces": [...latin-1 strings...], "body": "..."} so tests can see how
    the reads split it."""
    q = _q(environ)
    mode = q.get("mode", "read")
    inp = environ["wsgi.input"]
    n = int(q.get("n", "7"))
    pieces = []
    if mode == "read":
        pieces.append(inp.read())
        pieces.append(inp.read())  # at EOF: b""
    elif mode == "read-1":
        pieces.append(inp.read(-1))
    elif mode == "readn":
        for _ in range(100000):
            p = inp.read(n)
            pieces.append(p)
            if not p:
                break
    elif mode == "readline":
        for _ in range(100000):
            p = inp.readline()
            pieces.append(p)
            if not p:
                break
    elif mode == "readline_n":
        for _ in range(100000):
            p = inp.readline(n)
            pieces.append(p)
            if not p:
                break
    elif mode == "readlines":
        pieces = inp.readlines()
    elif mode == "iter":
        pieces = list(inp)
    for p in pieces:
        assert type(p) is bytes, type(p)
    body = json.dumps({"pieces": [p.decode("latin-1") for p in pieces],
                       "body": b"".join(pieces).decode("latin-1")}).encode()
    start_response("200 OK", [CT_JSON, ("Content-Length", str(len(body)))])
    return [body]


def raw_echo(environ, start_response):
    """Echo the body bytes as they are (read(n) loop), with Content-Length."""
    inp = environ["wsgi.input"]
    chunks = []
    while True:
        c = inp.read(65536)
        if not c:
            break
        chunks.append(c)
    body = b"".join(chunks)
    start_response("200 OK", [CT, ("Content-Length", str(len(body)))])
    return [body]


def digest(environ, start_response):
    """sha256 and length of the body (read(65536) loop), for big uploads."""
    inp = environ["wsgi.input"]
    h = hashlib.sha256()
    total = 0
    while True:
        c = inp.read(65536)
        if not c:
            break
        h.update(c)
        total += len(c)
    body = json.dumps({"len": total, "sha256": h.hexdigest(),
                       "content_length": environ.get("CONTENT_LENGTH")}).encode()
    start_response("200 OK", [CT_JSON, ("Content-Length", str(len(body)))])
    return [body]


def noread(environ, start_response):
    """Answers without reading the body (Expect: 100-continue must not get 100)."""
    body = b"not read"
    start_response("200 OK", [CT, ("Content-Length", str(len(body)))])
    return [body]


def stream(environ, start_response):
    """A generator without Content-Length: ?n= chunks of ?size= bytes."""
    q = _q(environ)
    n, size = int(q.get("n", "5")), int(q.get("size", "10"))
    start_response("200 OK", [CT])

    def gen():
        for i in range(n):
            yield bytes([ord("a") + i % 26]) * size
    return gen()


def empties(environ, start_response):
    """A generator that yields empty items between data: an empty item must
    not be sent as a (terminating) zero-length chunk."""
    start_response("200 OK", [CT])

    def gen():
        yield b""
        yield b"a"
        yield b""
        yield b"b"
        yield b""
    return gen()


def gated(environ, start_response):
    """Yields b"first", then waits until the file ?gate= exists (the client
    creates it after it has received the first chunk), then yields b"second".
    Writes "second-produced" to ?marker= just before yielding the second."""
    q = _q(environ)
    start_response("200 OK", [CT])

    def gen():
        yield b"first"
        ok = _wait_for(q["gate"], float(q.get("timeout", "10")))
        _mark(q.get("marker"), "second-produced" if ok else "gate-timeout")
        yield b"second"
    return gen()


def big(environ, start_response):
    """?size= bytes (default 8 MiB) of a deterministic pattern, ?mode=gen
    (generator, no Content-Length), list (one list, server adds the
    Content-Length) or cl (generator with Content-Length)."""
    q = _q(environ)
    size = int(q.get("size", str(8 << 20)))
    mode = q.get("mode", "gen")
    data = pattern(size)
    headers = [CT]
    if mode == "cl":
        headers.append(("Content-Length", str(size)))
    start_response("200 OK", headers)
    if mode == "list":
        return [data[i:i + 65536] for i in range(0, size, 65536)]

    def gen():
        for i in range(0, size, 65536):
            yield data[i:i + 65536]
    return gen()


def pattern(size):
    block = bytes(range(256)) * 256
    return (block * (size // len(block) + 1))[:size]


def head(environ, start_response):
    body = b"head body 0123456789"
    start_response("200 OK", [CT, ("Content-Length", str(len(body))), ("X-Method", environ["REQUEST_METHOD"])])
    return [body]


def status(environ, start_response):
    """?code=204|304|...; 204/304 get no Content-Type and an empty body."""
    code = int(_q(environ).get("code", "200"))
    reasons = {204: "No Content", 304: "Not Modified", 200: "OK", 404: "Not Found", 201: "Created"}
    headers = [] if code in (204, 304) else [CT]
    start_response(f"{code} {reasons.get(code, 'Whatever')}", headers)
    return []


def sleep(environ, start_response):
    """Sleeps s= seconds; with mark=PATH, first appends "start" to PATH, so
    a test can wait for the request to be in the app. With gate=PATH it
    waits instead until PATH exists (at most s= seconds, 30 by default), so
    the test decides when the request ends."""
    q = _q(environ)
    _mark(q.get("mark"), "start")
    if q.get("gate"):
        _wait_for(q["gate"], float(q.get("s", "30")))
    else:
        time.sleep(float(q.get("s", "0.5")))
    body = b"slept"
    start_response("200 OK", [CT, ("Content-Length", str(len(body)))])
    return [body]


def work(environ, start_response):
    """Keeps the pool thread busy (the GIL held) for us= microseconds."""
    end = time.perf_counter() + float(_q(environ).get("us", "50")) / 1e6
    while time.perf_counter() < end:
        pass
    body = b"worked"
    start_response("200 OK", [CT, ("Content-Length", str(len(body)))])
    return [body]


def pid(environ, start_response):
    body = str(os.getpid()).encode()
    start_response("200 OK", [CT, ("Content-Length", str(len(body)))])
    return [body]


def write_app(environ, start_response):
    """Uses the write() callable: ?ret=none returns [] after write();
    ?ret=list returns more items after write()."""
    q = _q(environ)
    write = start_response("200 OK", [CT])
    write(b"written-1;")
    write(b"written-2;")
    if q.get("ret") == "list":
        return [b"returned-1;", b"returned-2"]
    return []


def latin1(environ, start_response):
    body = b"ok"
    start_response("200 OK", [CT, ("Content-Length", "2"), ("X-Latin", "caf\xe9 na\xefve \xff")])
    return [body]


def errors(environ, start_response):
    environ["wsgi.errors"].write("wsgi-errors-line-%s\n" % _q(environ).get("tag", "x"))
    environ["wsgi.errors"].flush()
    body = b"ok"
    start_response("200 OK", [CT, ("Content-Length", "2")])
    return [body]


def short_cl(environ, start_response):
    """Declares Content-Length 100 but sends 10 bytes: the server must close."""
    start_response("200 OK", [CT, ("Content-Length", "100")])
    return [b"0123456789"]


def app_close(environ, start_response):
    """Sets Connection: close itself (hop-by-hop): the server closes after."""
    start_response("200 OK", [CT, ("Content-Length", "2"), ("Connection", "close")])
    return [b"ok"]


def long_cl(environ, start_response):
    """Declares Content-Length 5 but yields 10 bytes: the excess is dropped."""
    start_response("200 OK", [CT, ("Content-Length", "5")])
    return [b"01234", b"56789"]


def hop(environ, start_response):
    """Sets hop-by-hop headers, which PEP 3333 forbids: an app error."""
    start_response("200 OK", [CT, ("Content-Length", "2"), ("Keep-Alive", "timeout=99"),
                              ("Upgrade", "h2c"), ("Trailer", "X-T"), ("Proxy-Connection", "keep-alive"),
                              ("TE", "trailers"), ("X-Kept", "yes")])
    return [b"ok"]


# ------------------------------------------------------------ exc_info apps

def exc_before(environ, start_response):
    """start_response, then an error before anything is sent, then
    start_response again with exc_info: the second status/headers win."""
    start_response("200 OK", [CT, ("X-First", "yes")])
    try:
        raise ValueError("replaced before headers")
    except ValueError:
        body = b"replaced"
        start_response("503 Service Unavailable", [CT, ("Content-Length", str(len(body))), ("X-Second", "yes")],
                       sys.exc_info())
    return [body]


def exc_after(environ, start_response):
    """Headers are sent with the first chunk; then start_response(exc_info)
    must re-raise, and the connection is closed mid-body."""
    start_response("200 OK", [CT])

    def gen():
        yield b"partial-body"
        try:
            raise KeyError("exc-after-headers")
        except KeyError:
            start_response("500 Internal Server Error", [CT], sys.exc_info())
        yield b"should-never-be-sent"
    return gen()


def raise_before(environ, start_response):
    raise RuntimeError("boom-before-start-response")


def raise_after_start(environ, start_response):
    """start_response called, then an exception before any body: still 500."""
    start_response("200 OK", [CT])
    raise RuntimeError("boom-after-start-response")


def raise_mid(environ, start_response):
    """Chunked body: first chunk sent, then the generator raises."""
    q = _q(environ)
    start_response("200 OK", [CT])

    def gen():
        yield b"chunk-one"
        if q.get("gate"):
            _wait_for(q["gate"], 5)
        raise RuntimeError("boom-mid-iteration")
    return gen()


def nonbytes(environ, start_response):
    start_response("200 OK", [CT])
    return ["a str, not bytes"]


def bad_status(environ, start_response):
    start_response(_q(environ).get("s", "OK"), [CT])
    return [b"x"]


def bad_header(environ, start_response):
    kind = _q(environ).get("kind", "crlf")
    if kind == "crlf":
        headers = [CT, ("X-Bad", "a\r\nInjected: yes")]
    elif kind == "ctl":
        headers = [CT, ("X-Bad", "a\x01b")]
    elif kind == "del":
        headers = [CT, ("X-Bad", "a\x7fb")]
    elif kind == "token":
        headers = [CT, ("X Bad", "v")]  # SP is not a token character (RFC 9110 5.6.2)
    elif kind == "separator":
        headers = [CT, ("X-Bad/1", "v")]
    elif kind == "fine":
        # HTAB, obs-text and every token punctuation character are allowed
        headers = [CT, ("X-Ok!#$%&'*+.^_`|~", "a\tb \xe9")]
    elif kind == "name":
        headers = [CT, (b"X-Bytes-Name", "v")]
    else:
        headers = [CT, ("X-Bad", 42)]
    start_response("200 OK", headers)
    return [b"x"]


# ------------------------------------------------------------- close() apps

class ClosingBody:
    """An iterable whose close() writes "closed" to the marker file."""

    def __init__(self, items, marker, fail_at=None, delay=0.0):
        self.items, self.marker, self.fail_at, self.delay = items, marker, fail_at, delay

    def __iter__(self):
        for i, item in enumerate(self.items):
            if self.fail_at is not None and i == self.fail_at:
                raise RuntimeError("boom-in-closing-body")
            if self.delay and i:
                time.sleep(self.delay)
            _mark(self.marker, "yield %d" % i)
            yield item

    def close(self):
        _mark(self.marker, "closed")


def closer(environ, start_response):
    """?marker=PATH (required); ?case=normal|error|slow.
    normal: three items, list-like; error: raises at item 1;
    slow: 200 items of 64 KiB, 0.05 s apart (client disconnects early)."""
    q = _q(environ)
    marker = q["marker"]
    case = q.get("case", "normal")
    start_response("200 OK", [CT])
    if case == "error":
        return ClosingBody([b"one", b"two", b"three"], marker, fail_at=1)
    if case == "slow":
        return ClosingBody([b"z" * 65536] * 200, marker, delay=0.05)
    return ClosingBody([b"one", b"two", b"three"], marker)


def filewrap(environ, start_response):
    """Serves the file ?path= via wsgi.file_wrapper (?cl=1 adds Content-Length)."""
    q = _q(environ)
    path = q["path"]
    size = os.path.getsize(path)
    headers = [("Content-Type", "application/octet-stream")]
    if q.get("cl") == "1":
        headers.append(("Content-Length", str(size)))
    start_response("200 OK", headers)
    f = open(path, "rb")
    return environ["wsgi.file_wrapper"](f, 65536)


def threads(environ, start_response):
    body = json.dumps({"thread": threading.current_thread().name,
                       "ident": threading.get_ident()}).encode()
    start_response("200 OK", [CT_JSON, ("Content-Length", str(len(body)))])
    return [body]


def cat(environ, start_response):
    """The file at ?path=, read and closed again (an app that reads, say,
    its server's pid file)."""
    with open(_q(environ)["path"], "rb") as f:
        body = f.read()
    start_response("200 OK", [CT, ("Content-Length", str(len(body)))])
    return [body]


def chdir(environ, start_response):
    """os.chdir(?to=): an app that changes the process's directory."""
    os.chdir(_q(environ)["to"])
    body = os.getcwd().encode()
    start_response("200 OK", [CT, ("Content-Length", str(len(body)))])
    return [body]


ROUTES = {
    "hello": hello,
    "cat": cat,
    "chdir": chdir,
    "environ": environ_app,
    "echo": echo,
    "raw_echo": raw_echo,
    "digest": digest,
    "noread": noread,
    "stream": stream,
    "gated": gated,
    "empties": empties,
    "big": big,
    "head": head,
    "status": status,
    "sleep": sleep,
    "work": work,
    "pid": pid,
    "write": write_app,
    "latin1": latin1,
    "errors": errors,
    "short_cl": short_cl,
    "app_close": app_close,
    "long_cl": long_cl,
    "hop": hop,
    "exc_before": exc_before,
    "exc_after": exc_after,
    "raise_before": raise_before,
    "raise_after_start": raise_after_start,
    "raise_mid": raise_mid,
    "nonbytes": nonbytes,
    "bad_status": bad_status,
    "bad_header": bad_header,
    "closer": closer,
    "filewrap": filewrap,
    "threads": threads,
}


def application(environ, start_response):
    seg = environ.get("PATH_INFO", "/").lstrip("/").split("/", 1)[0]
    app = ROUTES.get(seg)
    if app is None:
        # Unknown paths (incl. percent-decoded ones) answer with the environ.
        app = environ_app
    return app(environ, start_response)


# Things the CLI tests import by name.
not_callable = 42

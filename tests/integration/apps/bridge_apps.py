"""Apps that look at the WSGI bridge's reference handling (test_bridge_refs.py).

/refcounts  For each per-server environ value, its reference count next to
            the count the same layout has in pure Python (a value held by a
            template dict and by one copy of it, as cserve's environ is):
            a reference the bridge leaked shows as one more.
/counts     The interpreter's object and memory-block counts after a full
            collection, for a leak test that sends many requests.
/mutated    A list body of distinct blocks, larger than the socket buffers,
            so the server writes it in many flushes and waits for the client;
            a thread of the app empties and refills the list meanwhile.
/read_in_thread  Reads wsgi.input on a thread the app starts.
/big_fileno A wsgi.file_wrapper whose fileno() is out of a descriptor's range.
"""
import gc
import json
import os
import sys
import threading
import time

SERVER_KEYS = ["SERVER_NAME", "SERVER_PORT", "SERVER_SOFTWARE", "wsgi.url_scheme", "wsgi.version"]
BLOCK = 64 * 1024
BLOCKS = 256  # 16 MiB: more than loopback's socket buffers hold


def _json(start_response, obj):
    body = json.dumps(obj).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def _refcounts(environ):
    out = {}
    for key in SERVER_KEYS:
        actual = sys.getrefcount(environ[key])
        # The same layout in Python: a fresh equal object held by a template
        # dict and by one copy of that dict (and by nothing else).
        template = {key: _fresh_copy(environ[key])}
        copy = template.copy()
        expected = sys.getrefcount(copy[key])
        del template, copy
        out[key] = [actual, expected]
    return out


def _fresh_copy(value):
    """An equal object that nothing else refers to (not interned, not cached)."""
    if isinstance(value, str):
        return (value + "\x00")[:-1]
    return tuple(list(value))


def _block(i):
    return bytes([65 + i % 26]) * BLOCK


def _mutated(environ, start_response):
    """The test creates the file named by QUERY_STRING once the head has
    arrived, then stops reading until the mutating thread has finished (it
    creates QUERY_STRING + ".done"): meanwhile the server has filled the
    socket and the pool thread waits for the loop, GIL dropped, mid-list."""
    go = environ["QUERY_STRING"]
    blocks = [_block(i) for i in range(BLOCKS)]

    def mutate():
        while not os.path.exists(go):
            time.sleep(0.002)
        # First replace every item in place (the item array stays, its
        # pointers change: a server still using the old array pointer sends
        # 'z's), then free the array too and allocate the same sizes again
        # (freed memory reused at once: garbage or a crash).
        for i in range(BLOCKS):
            blocks[i] = b"z" * BLOCK
        for _ in range(10):
            time.sleep(0.01)
            blocks.clear()
            blocks.extend(b"z" * BLOCK for _ in range(BLOCKS))
        # Done: the test waits for this before it stops the server, so no
        # thread of the app is still allocating when the interpreter
        # finalises (LeakSanitizer would report what it holds).
        open(go + ".done", "w").close()

    threading.Thread(target=mutate, daemon=True).start()
    start_response("200 OK", [("Content-Type", "application/octet-stream")])
    return blocks


def _read_in_thread(environ, start_response):
    """Read the whole body on a thread of the app's own, not the one that
    called the app; report what it got."""
    result = {}

    def read():
        try:
            result["length"] = len(environ["wsgi.input"].read())
        except Exception as e:  # reported to the test
            result["error"] = f"{type(e).__name__}: {e}"
    t = threading.Thread(target=read)
    t.start()
    t.join()
    return _json(start_response, result)


class _BigFileno:
    """A file-like whose fileno() is a regular file's descriptor plus 2**32:
    no descriptor at all, but its low 32 bits name a real file (a secret the
    app keeps open) whose bytes must not become the response."""

    def __init__(self):
        import tempfile
        self.secret = tempfile.TemporaryFile()
        self.secret.write(b"SECRET: not the response\n")
        self.secret.flush()
        self.sent = False

    def fileno(self):
        return (1 << 32) + self.secret.fileno()

    def tell(self):
        return 0

    def read(self, n=-1):
        if self.sent:
            return b""
        self.sent = True
        return b"public\n"

    def close(self):
        self.secret.close()


def _big_fileno(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return environ["wsgi.file_wrapper"](_BigFileno())


def application(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/refcounts":
        return _json(start_response, _refcounts(environ))
    if path == "/counts":
        gc.collect()
        return _json(start_response, {"objects": len(gc.get_objects()),
                                      "blocks": sys.getallocatedblocks()})
    if path == "/big_fileno":
        return _big_fileno(environ, start_response)
    if path == "/read_in_thread":
        return _read_in_thread(environ, start_response)
    if path == "/mutated":
        return _mutated(environ, start_response)
    start_response("404 Not Found", [("Content-Type", "text/plain")])
    return [b"no such app\n"]

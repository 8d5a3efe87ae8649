"""The app tests/integration/test_hostile_client.py serves to clients that
pipeline and never read: /big (a 200 KiB list body), /slow?S (sleeps S
seconds), /stream?N (N MiB from a generator), /echo (the length of the
body it read), else a 5-byte hello."""
import time

BIG = b"x" * (200 * 1024)


def application(environ, start_response):
    path = environ.get("PATH_INFO", "/")
    if path == "/big":
        # A list body: the whole response is buffered in the job (no flush
        # below the pool's flush threshold).
        start_response("200 OK", [("Content-Type", "application/octet-stream"),
                                  ("Content-Length", str(len(BIG)))])
        return [BIG]
    if path == "/slow":
        time.sleep(float(environ.get("QUERY_STRING", "") or 0.5))
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "4")])
        return [b"slow"]
    if path == "/stream":
        # A generator of 1 MiB blocks, as many as the query says, no length.
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        block = b"s" * (1024 * 1024)
        return (block for _ in range(int(environ.get("QUERY_STRING", "") or 1)))
    if path == "/echo":
        body = environ["wsgi.input"].read()
        start_response("200 OK", [("Content-Type", "text/plain"),
                                  ("Content-Length", str(len(str(len(body)))))])
        return [str(len(body)).encode()]
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "5")])
    return [b"hello"]

"""The default app: the smallest WSGI application, and the one every
experiment's cheap-app row measures. 13 bytes, with Content-Length."""

BODY = b"Hello, World!"
HEADERS = [("Content-Type", "text/plain"), ("Content-Length", str(len(BODY)))]


def application(environ, start_response):
    start_response("200 OK", HEADERS)
    return [BODY]

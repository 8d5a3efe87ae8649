"""An app that takes uploads: it reads the request body to its end, as a
form or file handler does, and answers with the body's length. The
experiments send it chunked bodies in KiB-sized chunks (pipeload -k -K),
so the loop decodes the framing and the app copies every byte once."""

READ = 65536  # one wsgi.input.read; the body may be longer


def application(environ, start_response):
    stream, n = environ["wsgi.input"], 0
    while True:
        chunk = stream.read(READ)
        if not chunk:
            break
        n += len(chunk)
    body = b"%d\n" % n
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]

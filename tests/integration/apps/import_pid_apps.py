"""An app that records, at import, the pid of the process importing it:
one line appended to the file IMPORT_PID_FILE names. / answers the pid of
the worker serving the request."""
import os

with open(os.environ["IMPORT_PID_FILE"], "a") as f:
    f.write(f"{os.getpid()}\n")


def application(environ, start_response):
    body = str(os.getpid()).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]

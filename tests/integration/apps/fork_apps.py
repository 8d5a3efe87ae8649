"""Apps that fork (test_app_fork.py): a child that outlives the request
holding every descriptor it inherited, multiprocessing's fork start method,
subprocess under load, and an exec'd child that lists what it inherited.

The server's descriptors are duplicated into every child a fork makes; the
server must still work when those copies outlive its own."""
import multiprocessing
import os
import subprocess
import time
from urllib.parse import parse_qs


def _square(x):
    return x * x


def _send_square(conn, x):
    conn.send(_square(x))
    conn.close()


def _reply(start_response, body, status="200 OK"):
    body = body.encode() if isinstance(body, str) else body
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


def sleeper(environ, start_response):
    """A child that sleeps ?secs= seconds holding all it inherited, then
    exits without running anything of the parent's (os._exit). The body is
    its pid, so the test can end it early."""
    secs = float(parse_qs(environ.get("QUERY_STRING", "")).get("secs", ["10"])[0])
    pid = os.fork()
    if pid == 0:
        try:
            time.sleep(secs)
        finally:
            os._exit(0)
    return _reply(start_response, str(pid))


def spawn(environ, start_response):
    """subprocess.run of `true`: a fork (or vfork) and an exec per request.
    close_fds=False so that only close-on-exec keeps the server's
    descriptors out of the child."""
    rc = subprocess.run(["true"], close_fds=False).returncode
    return _reply(start_response, "true %d" % rc)


def fds(environ, start_response):
    """What an exec'd child inherits: a shell lists its own /proc/PID/fd
    (close_fds=False: nothing but close-on-exec filters them), one line per
    descriptor, "N -> TARGET"."""
    out = subprocess.run(["/bin/sh", "-c", 'cd /proc/$$/fd && for f in *; do '
                          'echo "$f -> $(readlink "$f")"; done'],
                         close_fds=False, stdout=subprocess.PIPE, check=True).stdout
    return _reply(start_response, out)


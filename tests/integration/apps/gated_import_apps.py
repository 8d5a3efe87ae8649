"""Apps whose import goes one way in the first process that imports them
and another in every later one, for the tests of --workers N where each
worker imports the app. The first importer creates GATE_DIR/first; the
later ones append their pid to GATE_DIR/later, then:

gated:  block on an exclusive flock of GATE_DIR/lock until the test, which
        holds that lock, lets it go (an import that takes as long as the
        test wants);
failing: raise (an import that fails in every worker but the first).

/ answers the pid of the worker serving the request."""
import fcntl
import os

_DIR = os.environ["GATE_DIR"]


def _first():
    try:
        os.close(os.open(os.path.join(_DIR, "first"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


_is_first = _first()
if not _is_first:
    with open(os.path.join(_DIR, "later"), "a") as f:
        f.write(f"{os.getpid()}\n")
    if os.environ.get("GATE_MODE") == "failing":
        raise RuntimeError("import-fails-in-this-worker")
    with open(os.path.join(_DIR, "lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released by the test
        fcntl.flock(lock, fcntl.LOCK_UN)


def application(environ, start_response):
    body = str(os.getpid()).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]

"""Apps that use a request's wsgi.input and write() from threads other than
the one the server called the app on (test_app_threads.py)."""
import json
import threading

REC = 16  # body records are b"%015d\n" % index


def record(i):
    return b"%015d\n" % i


def _check_reads(reads):
    """Each read must be one whole record; the records read by one thread
    must come in body order."""
    bad, order_ok, idx = [], True, []
    last = -1
    for b in reads:
        if len(b) != REC or not b[:-1].isdigit() or b[-1:] != b"\n":
            bad.append(repr(b))
            continue
        i = int(b[:-1])
        if b != record(i):
            bad.append(repr(b))
            continue
        if i <= last:
            order_ok = False
        last = i
        idx.append(i)
    return bad, order_ok, idx


def input_two_threads(environ, start_response):
    """Read wsgi.input with read(16) on this thread and, at the same time,
    on a second one that retries whenever the server refuses it."""
    inp = environ["wsgi.input"]
    total = int(environ.get("QUERY_STRING", "0") or 0)
    done = threading.Event()
    mine, theirs = [], []
    refused, errors = [0], []

    def other():
        while not done.is_set():
            try:
                b = inp.read(REC)
            except RuntimeError:
                refused[0] += 1
                continue
            except Exception as e:  # anything else is a finding
                errors.append(f"{type(e).__name__}: {e}")
                return
            if not b:
                return
            theirs.append(b)

    t = threading.Thread(target=other)
    t.start()
    try:
        while True:
            b = inp.read(REC)
            if not b:
                break
            mine.append(b)
    except Exception as e:
        errors.append(f"request thread: {type(e).__name__}: {e}")
    done.set()
    t.join()
    bad_m, order_m, idx_m = _check_reads(mine)
    bad_t, order_t, idx_t = _check_reads(theirs)
    seen = sorted(idx_m + idx_t)
    out = {
        "mine": len(mine), "theirs": len(theirs), "refused": refused[0], "errors": errors,
        "bad": (bad_m + bad_t)[:5], "nbad": len(bad_m) + len(bad_t),
        "in_order": order_m and order_t,
        "complete": seen == list(range(total)),
        "missing": total - len(set(seen)), "duplicates": len(seen) - len(set(seen)),
    }
    body = json.dumps(out).encode()
    start_response("200 OK", [("Content-Type", "application/json"),
                              ("Content-Length", str(len(body)))])
    return [body]


# ---- write() of one request called from another request's pool thread

_stash = {}
_stashed = threading.Event()
_stolen = threading.Event()


def write_owner(environ, start_response):
    """Streams numbered blocks with write(), and lets /write_thief write into
    this response at the same time."""
    n = int(environ.get("QUERY_STRING", "0") or 0)
    _stolen.clear()
    write = start_response("200 OK", [("Content-Type", "text/plain")])
    _stash["write"] = write
    write(b"start\n")
    _stashed.set()
    for i in range(n):
        write(b"owner %06d\n" % i)
    _stolen.wait(30)
    _stash.clear()
    _stashed.clear()
    return [b"end\n"]


def write_thief(environ, start_response):
    n = int(environ.get("QUERY_STRING", "0") or 0)
    ok = _stashed.wait(30)
    wrote, errors = 0, []
    if ok:
        write = _stash["write"]
        for i in range(n):
            try:
                write(b"thief %06d\n" % i)
                wrote += 1
            except Exception as e:
                errors.append(f"{type(e).__name__}: {e}")
                break
    _stolen.set()
    body = json.dumps({"stashed": ok, "wrote": wrote, "errors": errors}).encode()
    start_response("200 OK", [("Content-Type", "application/json"),
                              ("Content-Length", str(len(body)))])
    return [body]


def write_two_threads(environ, start_response):
    """write() on this thread and on a thread of the app at the same time."""
    n = int(environ.get("QUERY_STRING", "0") or 0)
    write = start_response("200 OK", [("Content-Type", "text/plain")])
    errors = []

    def other():
        try:
            for i in range(n):
                write(b"other %06d\n" % i)
        except Exception as e:
            errors.append(f"{type(e).__name__}: {e}")

    t = threading.Thread(target=other)
    t.start()
    for i in range(n):
        write(b"owner %06d\n" % i)
    t.join()
    return [json.dumps(errors).encode() + b"\n"]


ROUTES = {
    "input_two_threads": input_two_threads,
    "write_owner": write_owner,
    "write_thief": write_thief,
    "write_two_threads": write_two_threads,
}


def application(environ, start_response):
    seg = environ.get("PATH_INFO", "/").lstrip("/").split("/", 1)[0]
    return ROUTES[seg](environ, start_response)

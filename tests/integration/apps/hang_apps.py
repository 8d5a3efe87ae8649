"""/hang blocks for ever in a function whose name the watchdog test looks for
in the logged stack (with ?mark=PATH it first appends "start" to PATH, so a
test can wait for the request to be in the app); /spin loops for ever in
pure Python, holding the GIL and burning a core; /pid answers the worker's pid (which worker a
connection landed on); anything else answers "ok" at once.

HANG_APPS_SLOW_REIMPORT=PATH: an import made once PATH exists (a
replacement worker's, after the test created it) first waits until
PATH + ".go" exists (at most 60 s), so the worker it replaces is the one
that publishes its figures until the test lets the replacement start.
HANG_APPS_BROKEN_REIMPORT=PATH: an import made while PATH exists raises
(a replacement worker that fails to start).
HANG_APPS_GATE_NEW_WORKER=PATH: a worker that starts while PATH exists,
importing the app or forked from a process that has it, waits until the
test removes PATH (at most 60 s): a replacement worker that cannot serve
until the test says so."""
import os
import threading
import time

_never = threading.Event()

_slow = os.environ.get("HANG_APPS_SLOW_REIMPORT", "/nonexistent")
if os.path.exists(_slow):
    _until = time.monotonic() + 60
    while not os.path.exists(_slow + ".go") and time.monotonic() < _until:
        time.sleep(0.02)
if os.path.exists(os.environ.get("HANG_APPS_BROKEN_REIMPORT", "/nonexistent")):
    raise RuntimeError("HANG_APPS_BROKEN_REIMPORT exists")


def _wait_for_the_gate():
    gate, deadline = os.environ.get("HANG_APPS_GATE_NEW_WORKER", "/nonexistent"), time.monotonic() + 60
    while os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.01)


_wait_for_the_gate()
os.register_at_fork(after_in_child=_wait_for_the_gate)


def stuck_in_this_function_for_ever():
    _never.wait()


def spinning_in_this_function_for_ever():
    x = 1
    while True:
        x = (x * 1103515245 + 12345) & 0xFFFFFFFF


def application(environ, start_response):
    if environ["PATH_INFO"] == "/spin":
        spinning_in_this_function_for_ever()
    if environ["PATH_INFO"] == "/hang":
        mark = dict(kv.partition("=")[::2] for kv in environ.get("QUERY_STRING", "").split("&")).get("mark")
        if mark:
            with open(mark, "a") as f:
                f.write("start\n")
        stuck_in_this_function_for_ever()
    body = str(os.getpid()).encode() if environ["PATH_INFO"] == "/pid" else b"ok"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]

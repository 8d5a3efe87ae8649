"""Follow-ups to the connection core redesign: each test pins one defect.

1. A connection parked on the loop's pending list (the hand-off full) was not
   watched: a client that reset it still had its request run later.
"""
import socket
import struct
import time

import pytest

LOGAPP = "logging_apps:application"


def _get(path):
    return f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()


def _runlog(path):
    try:
        return path.read_text().split()
    except FileNotFoundError:
        return []


def _wait_log(path, entries, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(e in _runlog(path) for e in entries):
            return
        time.sleep(0.02)
    raise AssertionError(f"the app never ran {entries}: {_runlog(path)}")


# ---------------------------------------------- 1: a parked connection is watched

@pytest.mark.parametrize("handoff", ["ring", "condvar"])
def test_reset_while_queued_is_never_run(server_factory, tmp_path, monkeypatch, handoff):
    """One pool thread, a queue of 2: two slow requests fill it, a third is
    parked. Its client resets; when the queue drains the app must not run it."""
    log = tmp_path / "runs"
    monkeypatch.setenv("CSERVE_TEST_RUNLOG", str(log))
    srv = server_factory("--blocking-threads", "1", "--queue-size", "2", app=LOGAPP, handoff=handoff)
    busy = [srv.connect() for _ in range(2)]
    busy[0].sendall(_get("/slow1?s=0.8"))
    _wait_log(log, ["/slow1"])  # running: the second one waits in the queue
    busy[1].sendall(_get("/slow2?s=0.2"))
    time.sleep(0.1)
    parked = srv.connect()
    parked.sendall(_get("/reset"))
    time.sleep(0.2)  # read and parked: the hand-off holds two jobs already
    parked.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    parked.close()  # RST
    for s in busy:
        s.settimeout(10)
        assert s.recv(4096).startswith(b"HTTP/1.1 200 ")
    # The queue drained; a request sent now is run, so anything parked before
    # it would have been run by now too.
    with srv.connect() as s:
        s.sendall(_get("/after"))
        s.settimeout(10)
        assert s.recv(4096).startswith(b"HTTP/1.1 200 ")
    _wait_log(log, ["/after"])
    for s in busy:
        s.close()
    assert "/reset" not in _runlog(log), _runlog(log)

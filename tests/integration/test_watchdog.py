"""--app-timeout: a pool thread stuck in the app on one request is reported
with every thread's Python stack, the connection waiting on it is closed
(it never gets an answer otherwise), the worker is replaced, and requests on
other paths keep being served meanwhile."""
import socket
import subprocess
import time

import pytest

from conftest import BIN, start_server
from loadgen import wait_until


def get(port, path):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data


@pytest.mark.parametrize("workers", [1, 2])
def test_a_stuck_request_is_reported_closed_and_its_worker_replaced(workers):
    # Two pool threads: the loop gives new requests to the one not stuck.
    srv = start_server("--workers", str(workers), "--blocking-threads", "2", "--app-timeout", "1",
                       "--graceful-timeout", "2", app="hang_apps:application")
    try:
        stuck = socket.create_connection(("127.0.0.1", srv.port), timeout=15)
        t0 = time.monotonic()
        stuck.sendall(b"GET /hang HTTP/1.1\r\nHost: x\r\n\r\n")
        # Meanwhile the other paths are served.
        served = 0
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline and "every thread's Python stack" not in srv.log_text():
            assert get(srv.port, "/ok").endswith(b"\r\n\r\nok")
            served += 1
        assert served > 0
        # The stuck connection is closed, after the timeout, without an answer.
        assert stuck.recv(100) == b""
        waited = time.monotonic() - t0
        assert 0.9 <= waited < 10, waited
        stuck.close()
        assert "app watchdog: pool thread 0 has been in the app" in srv.log_text()
        # The stack, from faulthandler, follows that line (maybe still being written).
        assert wait_until(lambda: "stuck_in_this_function_for_ever" in srv.log_text(), 10), srv.log_text()[-4000:]
        assert wait_until(lambda: "serves" in srv.log_text(), 15), srv.log_text()[-3000:]
        for _ in range(10):
            assert get(srv.port, "/ok").endswith(b"\r\n\r\nok")
    finally:
        srv.close()


def test_app_timeout_is_refused_without_pool_threads():
    r = subprocess.run([BIN, "--inline", "--app-timeout", "5"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--app-timeout" in r.stderr

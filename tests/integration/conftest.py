"""Shared fixtures: start the real ./cserve binary on a free port and talk to it.

CSERVE_BIN      the binary under test (default: ./cserve at the repo root)
CSERVE_HANDOFFS comma-separated backends the `handoff` fixture runs over
                (default: all four)
"""
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
APPS = pathlib.Path(__file__).resolve().parent / "apps"
BIN = os.environ.get("CSERVE_BIN", str(ROOT / "cserve"))
if not os.path.isabs(BIN):
    BIN = str(ROOT / BIN)
ALL_HANDOFFS = ["ring", "dgram", "condvar", "eventfd"]
HANDOFFS = [h for h in os.environ.get("CSERVE_HANDOFFS", ",".join(ALL_HANDOFFS)).split(",") if h]

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A running cserve. Its stderr goes to a file (self.log_text() reads it)."""

    def __init__(self, args, port, cwd):
        self.port = port
        self.args = args
        self._log = tempfile.NamedTemporaryFile(prefix="cserve-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(args, cwd=cwd, stdout=self._log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout=15.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"cserve exited {self.proc.returncode}:\n{self.log_text()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"cserve did not listen on {self.port}:\n{self.log_text()}")

    def log_text(self):
        with open(self._log.name, "r", errors="replace") as f:
            return f.read()

    def connect(self, timeout=5.0):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def stop(self, sig=signal.SIGTERM, timeout=15.0):
        """Send sig, wait for exit; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"cserve did not exit within {timeout}s of {sig!r}:\n{self.log_text()}")
        return self.proc.returncode

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        try:
            os.unlink(self._log.name)
        except OSError:
            pass


def start_server(*extra, app=None, chdir=APPS, handoff="ring", port=None, wait=True, env=None):
    """Start cserve with extra args. app: "module:callable" found under chdir
    (default: tests/integration/apps), or None for the built-in default app."""
    port = port or free_port()
    args = [BIN, "--bind", f"127.0.0.1:{port}", "--handoff", handoff]
    if app is not None:
        args += ["--chdir", str(chdir), app]
    args += list(extra)
    srv = Server(args, port, cwd=str(ROOT))
    if wait:
        srv.wait_ready()
    return srv


@pytest.fixture(params=HANDOFFS)
def handoff(request):
    return request.param


@pytest.fixture
def server_factory():
    """server_factory(*args, app=..., handoff=...) -> Server; all are killed at teardown."""
    started = []

    def make(*args, **kw):
        srv = start_server(*args, **kw)
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.close()

"""Shared fixtures: start the real ./cserve binary on a free port and talk to it.

CSERVE_BIN      the binary under test (default: ./cserve at the repo root)
CSERVE_HOOKS_BIN the binary of the tests that drive the test hooks (the
                fault hooks a TEST_HOOKS=1 build reads from its environment;
                default: CSERVE_BIN when that is given, else
                build-hooks/cserve, which make integration-test builds)
CSERVE_HANDOFFS comma-separated backends the `handoff` fixture runs over
                (default: all four)

These and the suite's other own variables (HARNESS_VARIABLES) are taken out
of the environment before the first test, so the servers the tests start
do not see them: cserve warns about a CSERVE_* variable that is no option's.
"""
import os
import pathlib
import re
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
# The variables only a TEST_HOOKS=1 build reads (core/server/worker.c,
# core/python/pool.c); a release build has not even their names. A binary
# given as CSERVE_BIN alone (a sanitizer or free-threaded build: a test
# build) is the hooks binary too.
HOOK_VARIABLES = ("CSERVE_FAULT_SUBMIT", "CSERVE_TEST_FAIL_POOL_THREAD")
HOOKS_BIN = (os.environ.get("CSERVE_HOOKS_BIN") or os.environ.get("CSERVE_BIN")
             or str(ROOT / "build-hooks" / "cserve"))
if not os.path.isabs(HOOKS_BIN):
    HOOKS_BIN = str(ROOT / HOOKS_BIN)
# make integration-test passes its PYTHON_LINK (how BIN links libpython)
PYTHON_LINK = os.environ.get("CSERVE_PYTHON_LINK", "auto")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

# Read by this suite (here, or by the test modules as they are imported), not by cserve.
HARNESS_VARIABLES = ("CSERVE_BIN", "CSERVE_HOOKS_BIN", "CSERVE_HANDOFFS", "CSERVE_PYTHON_LINK", "CSERVE_SOAK", "CSERVE_LOAD_SCALE")


@pytest.fixture(scope="session", autouse=True)
def _harness_variables_not_passed_on():
    """After collection (the modules have read theirs), before any server starts."""
    for k in HARNESS_VARIABLES:
        os.environ.pop(k, None)


def hook_variables_in(path):
    """Which of HOOK_VARIABLES the binary at path holds, by its bytes."""
    with open(path, "rb") as f:
        data = f.read()
    return [v for v in HOOK_VARIABLES if v.encode() in data]


@pytest.fixture(scope="session")
def hooks_bin():
    """HOOKS_BIN, checked to be a build with the test hooks in."""
    if not os.path.isfile(HOOKS_BIN):
        pytest.fail(f"no {HOOKS_BIN}: `make cserve-hooks` builds it (or CSERVE_HOOKS_BIN names one "
                    "built with TEST_HOOKS=1)", pytrace=False)
    found = hook_variables_in(HOOKS_BIN)
    if found != list(HOOK_VARIABLES):
        pytest.fail(f"{HOOKS_BIN} was built without TEST_HOOKS=1 (it reads {found or 'none'} of "
                    f"{list(HOOK_VARIABLES)}): `make cserve-hooks` builds one", pytrace=False)
    return HOOKS_BIN


# What ASan, UBSan, LSan and TSan print when they find something.
SANITIZER_RE = re.compile(r"ERROR: AddressSanitizer[^\n]*|runtime error:[^\n]*|"
                          r"ERROR: LeakSanitizer[^\n]*|WARNING: ThreadSanitizer[^\n]*")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A running cserve. Its stderr goes to a file (self.log_text() reads it)."""

    def __init__(self, args, port, cwd, killed=False, stop_timeout=20.0, env=None, preexec_fn=None):
        self.port = port
        self.args = args
        self.killed = killed            # the test kills it: exit status not checked
        self.stop_timeout = stop_timeout
        self._log = tempfile.NamedTemporaryFile(prefix="cserve-", suffix=".log", delete=False)
        self.t_spawn = time.monotonic()  # the server cannot have started before this
        self.proc = subprocess.Popen(args, cwd=cwd, stdout=self._log, stderr=subprocess.STDOUT,
                                     env=env, preexec_fn=preexec_fn)

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

    def wait_workers(self, args, timeout=30.0):
        """With --workers N > 1 and no --preload, the workers after the
        first start once it serves, each importing the app itself: wait
        until every one says it serves, so that a signal the test sends
        next reaches N workers, not whichever have started."""
        args = list(args)
        n = int(args[args.index("--workers") + 1]) if "--workers" in args else 1
        if n < 2 or "--preload" in args:
            return
        deadline = time.monotonic() + timeout
        while len(set(re.findall(r"\] info: worker (\d+): serving", self.log_text()))) < n:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{n} workers never all served:\n{self.log_text()[-3000:]}")
            time.sleep(0.02)

    def log_text(self):
        with open(self._log.name, "r", errors="replace") as f:
            return f.read()

    def connect(self, timeout=5.0):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def stop(self, sig=signal.SIGTERM, timeout=15.0):
        """Send sig, wait for exit; returns the exit status. A server that
        outlives the timeout is SIGKILLed and the test fails."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
                raise AssertionError(f"cserve did not exit within {timeout}s of {sig!r}:\n{self.log_text()}")
        return self.proc.returncode

    def sanitizer_reports(self):
        """Lines of the server's log where a sanitizer spoke."""
        text = self.log_text()
        return [m.group(0) for m in SANITIZER_RE.finditer(text)]

    def close(self):
        """The teardown: SIGTERM (unless the test already stopped it), exit
        status 0 required, no sanitizer report in the log. SIGKILL only when
        SIGTERM is not obeyed in time, and that fails the test. A test that
        kills the server on purpose says so with killed=True (start_server /
        server_factory): then the exit status is not checked, the log still is."""
        try:
            if self.proc.poll() is None:
                rc = self.stop(signal.SIGTERM, timeout=self.stop_timeout)
            else:
                rc = self.proc.returncode
            reports = self.sanitizer_reports()
            if reports:
                raise AssertionError(f"sanitizer report in the server log ({reports[0]!r}):\n"
                                     f"{self.log_text()[-8000:]}")
            if not self.killed and rc != 0:
                raise AssertionError(f"cserve exited with status {rc}, not 0:\n{self.log_text()[-4000:]}")
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=10)
            try:
                os.unlink(self._log.name)
            except OSError:
                pass


def start_server(*extra, app=None, chdir=APPS, handoff="ring", port=None, wait=True, env=None,
                 killed=False, preexec_fn=None, binary=None):
    """Start cserve (binary, default BIN) with extra args. app: "module:callable" found under chdir
    (default: tests/integration/apps), or None for the built-in default app.
    killed=True: the test kills the server itself (close() then does not
    require exit status 0)."""
    port = port or free_port()
    args = [binary or BIN, "--bind", f"127.0.0.1:{port}", "--handoff", handoff]
    if app is not None:
        args += ["--chdir", str(chdir), app]
    args += list(extra)
    srv = Server(args, port, cwd=str(ROOT), killed=killed, env=env, preexec_fn=preexec_fn)
    if wait:
        srv.wait_ready()
        srv.wait_workers(extra)
    return srv


@pytest.fixture(params=HANDOFFS)
def handoff(request):
    return request.param


@pytest.fixture
def logfile():
    """A fresh empty file, for an app that records what it saw into the file
    named by ?log= (apps/recording_apps.py)."""
    fd, path = tempfile.mkstemp(prefix="cserve-applog-")
    os.close(fd)
    yield path
    os.unlink(path)


@pytest.fixture
def server_factory():
    """server_factory(*args, app=..., handoff=..., killed=False, binary=...) -> Server.
    At teardown each is stopped with SIGTERM and must exit 0 with a clean log
    (Server.close)."""
    started = []

    def make(*args, **kw):
        srv = start_server(*args, **kw)
        started.append(srv)
        return srv

    yield make
    errors = []
    for srv in started:
        try:
            srv.close()
        except AssertionError as e:
            errors.append(str(e))
    if errors:
        pytest.fail("\n\n".join(errors), pytrace=False)

"""A pool thread that cannot start (core/python/pool.c pool_start).

pool_start runs with the GIL held, and every pool thread it has started is
already waiting for that GIL. When thread k > 0 fails to start, the threads
before it must be stopped without a deadlock: the server exits at once with
one line naming the problem and a non-zero status, instead of hanging.

pthread_create's failure is forced with CSERVE_TEST_FAIL_POOL_THREAD=k (the
start of thread k fails with EAGAIN): RLIMIT_NPROC counts every thread of the
user and does not bind root, so it cannot pick k reliably. Only a build with
the test hooks reads it: these tests run the hooks binary (conftest.py)."""
import os
import subprocess

import pytest

from conftest import APPS, ROOT, free_port
from httpclient import get
from loadgen import wait_until

HANDOFFS = ["ring", "dgram", "condvar", "eventfd"]
HANG_S = 30  # only detects a hang: exiting or serving takes a fraction of it


def run_until_exit(binary, extra_env=None, threads=4, handoff="ring", preexec_fn=None, timeout=HANG_S):
    port = free_port()
    env = dict(os.environ, **(extra_env or {}))
    args = [binary, "--bind", f"127.0.0.1:{port}", "--chdir", str(APPS), "--handoff", handoff,
            "--blocking-threads", str(threads), "wsgi_apps:application"]
    proc = subprocess.Popen(args, cwd=str(ROOT), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, preexec_fn=preexec_fn)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"cserve hung for {timeout} s after a pool thread failed to start:\n{out}")
    return proc.returncode, out


@pytest.mark.parametrize("handoff", HANDOFFS)
@pytest.mark.parametrize("failing", [1, 3])
def test_failed_pool_thread_exits_promptly_with_one_line(hooks_bin, handoff, failing):
    rc, out = run_until_exit(hooks_bin, {"CSERVE_TEST_FAIL_POOL_THREAD": str(failing)}, threads=4,
                                   handoff=handoff)
    assert rc != 0, out
    # cserve's own log lines (an ASan build may add a leak report after them:
    # worker.c does not free the loop and handoff on this path).
    errors = [ln for ln in out.splitlines() if "[cserve " in ln and "] error: " in ln]
    assert len(errors) == 1, out
    assert f"cannot start pool thread {failing + 1} of 4" in errors[0], out


def test_first_pool_thread_failing_exits_too(hooks_bin):
    rc, out = run_until_exit(hooks_bin, {"CSERVE_TEST_FAIL_POOL_THREAD": "0"}, threads=2)
    assert rc != 0 and "cannot start pool thread 1 of 2" in out, out


def test_empty_hook_is_inert(hooks_bin):
    """An empty value is not read as thread 0 (strtoul("") is 0): it serves
    (a request answered by the app needs the pool threads started)."""
    port = free_port()
    env = dict(os.environ, CSERVE_TEST_FAIL_POOL_THREAD="")
    proc = subprocess.Popen([hooks_bin, "--bind", f"127.0.0.1:{port}", "--chdir", str(APPS),
                             "--blocking-threads", "2", "wsgi_apps:application"], cwd=str(ROOT),
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    def served():
        if proc.poll() is not None:
            return "exited"
        try:
            return get(port, "/hello", timeout=HANG_S).body == b"hello"
        except OSError:
            return False

    try:
        assert wait_until(served, HANG_S) is True, proc.stdout.read() if proc.poll() is not None else ""
    finally:
        proc.terminate()
        proc.wait(timeout=HANG_S)

"""Helpers for test_deploy*.py and test_nginx.py: start cserve with a given
environment, wait for it on TCP or a unix socket, ask the deploy_info app."""
import atexit
import json
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import time

from conftest import APPS, BIN, ROOT

EMBEDDED_PY = os.environ.get("PYTHON", "/usr/bin/python3")

# Every Proc's log goes into one folder that is removed when the test
# process exits: a test reads a log after its server has stopped, and not
# every test calls close(), so no single call may delete it.
LOG_DIR = tempfile.mkdtemp(prefix="cserve-deploy-")
atexit.register(shutil.rmtree, LOG_DIR, ignore_errors=True)


class Proc:
    """cserve with its stderr in a file; stop() sends SIGTERM and waits."""

    def __init__(self, args, env=None, cwd=ROOT, **kw):
        self.log = tempfile.NamedTemporaryFile(dir=LOG_DIR, suffix=".log", delete=False)
        self.proc = subprocess.Popen(args, cwd=str(cwd), env=env, stdout=self.log, stderr=subprocess.STDOUT, **kw)

    def text(self):
        return pathlib.Path(self.log.name).read_text(errors="replace")

    def wait_exit(self, timeout=20):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError("cserve did not exit:\n" + self.text())

    def stop(self, timeout=20):
        if self.proc.poll() is None:
            self.proc.terminate()
        return self.wait_exit(timeout)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def wait_connect(proc, addr, timeout=20):
    """A connected socket to addr (a (host, port) pair or a unix path)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.proc.poll() is not None:
            raise AssertionError(f"cserve exited {proc.proc.returncode}:\n{proc.text()}")
        s = socket.socket(socket.AF_UNIX if isinstance(addr, str) else socket.AF_INET)
        s.settimeout(10)
        try:
            s.connect(addr)
            return s
        except OSError:
            s.close()
            time.sleep(0.03)
    raise AssertionError(f"cserve never accepted on {addr}:\n{proc.text()}")


def http_get(sock, target):
    """One GET on sock (Connection: close); returns (status, body bytes)."""
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode())
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    sock.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def info(proc, addr, imports=()):
    """The deploy_info app's answer, as a dict."""
    q = "&".join(f"import={m}" for m in imports)
    status, body = http_get(wait_connect(proc, addr), "/?" + q)
    assert status == 200, (status, body, proc.text())
    return json.loads(body)


def serve_info(args=(), env=None, bin_=BIN, addr=None, **kw):
    """cserve serving deploy_info:application on a free port (or addr)."""
    from conftest import free_port
    if addr is None:
        addr = ("127.0.0.1", free_port())
    bind = f"unix:{addr}" if isinstance(addr, str) else f"{addr[0]}:{addr[1]}"
    p = Proc([bin_, "--bind", bind, "--chdir", str(APPS), *args, "deploy_info:application"], env=env, **kw)
    return p, addr


def clean_env(**extra):
    """The environment without anything that selects a virtualenv or Python."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONHOME", "PYTHONPATH", "LISTEN_FDS", "LISTEN_PID")}
    env.update(extra)
    return env


def embedded_sys_path():
    """sys.path as the embedded interpreter's own python sees it, minus the
    script directory entry."""
    out = subprocess.run([EMBEDDED_PY, "-c", "import sys, json; print(json.dumps(sys.path[1:]))"],
                         env=clean_env(), capture_output=True, text=True, check=True, cwd="/").stdout
    return json.loads(out)


def build_preload(tmp_path, source):
    """A shared library built from C source, for LD_PRELOAD (skips the test
    where there is no C compiler)."""
    import shutil
    import pytest
    if not shutil.which("cc"):
        pytest.skip("no C compiler for the preloaded library")
    src, lib = tmp_path / "preload.c", tmp_path / "preload.so"
    src.write_text(source)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src), "-ldl"], check=True)
    return str(lib)


def preload_env(lib, **extra):
    """clean_env() with lib preloaded. An ASan build wants its runtime
    first; the preloaded calls only wrap libc's."""
    asan = ":".join(x for x in (os.environ.get("ASAN_OPTIONS"), "verify_asan_link_order=0") if x)
    return clean_env(LD_PRELOAD=lib, ASAN_OPTIONS=asan, **extra)


def one_line_error(proc):
    lines = [ln for ln in proc.text().splitlines() if ln.strip()]
    assert len(lines) == 1, proc.text()
    return lines[0]

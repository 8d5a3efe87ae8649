"""Before binding a unix: path, cserve probes what is there: a live server
is refused (exit 2, one line), a stale socket replaced (test_deploy_options
covers both). The probe never waits on that server: one whose backlog is
full, which would keep a blocking connect waiting until it accepts, is
refused at once too, for --bind and for --metrics-bind."""
import socket
import subprocess

import pytest

from conftest import APPS, BIN, ROOT, free_port

HANG_S = 30


def full_listener(path):
    """A listening socket at path that never accepts, its backlog full:
    one more connect would have to wait (or fail with EAGAIN)."""
    live = socket.socket(socket.AF_UNIX)
    live.bind(path)
    live.listen(0)
    queued = []
    while True:
        c = socket.socket(socket.AF_UNIX)
        c.setblocking(False)
        try:
            c.connect(path)
        except BlockingIOError:
            c.close()
            return live, queued
        queued.append(c)


@pytest.mark.parametrize("flag", ["--bind", "--metrics-bind"])
def test_a_live_socket_with_a_full_backlog_is_refused_at_once(tmp_path, flag):
    path = str(tmp_path / "full.sock")
    live, queued = full_listener(path)
    args = ["--bind", f"127.0.0.1:{free_port()}"] if flag == "--metrics-bind" else []
    try:
        p = subprocess.run([BIN, "--chdir", str(APPS), *args, flag, f"unix:{path}", "wsgi_apps:application"],
                           cwd=str(ROOT), capture_output=True, text=True, timeout=HANG_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{flag} unix: at a live socket with a full backlog: start-up hung")
    finally:
        for c in queued:
            c.close()
        live.close()
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2, p.stderr
    assert len(lines) == 1 and "a server is listening on this socket" in lines[0] and flag in lines[0], p.stderr

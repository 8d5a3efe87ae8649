"""The socket-activation recipe of docs/deploying.md for a machine without a
running systemd, run as written there: the folder made for the service's
user, `systemd-socket-activate` making the socket and starting cserve as
that user at the first connection, the socket's mode opened to nginx's
group (the tool makes it srw-r--r--), and the check connecting as nginx's
workers do, as www-data and not root (root connects whatever the socket's
mode, so a check run as root passes a socket nginx cannot open). Only the
folder, the user (nobody for myapp), the binary and the app are replaced."""
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile

import pytest

from conftest import APPS, BIN, ROOT

DOC = ROOT / "docs" / "deploying.md"
MARKER = "<!-- socket activation recipe: tests/integration/test_recipe_activation.py runs the block below as written -->"
HANG_S = 30

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the recipe makes a folder for another user and runs as it: root"),
    pytest.mark.skipif(not (shutil.which("systemd-socket-activate") and shutil.which("setpriv")
                            and shutil.which("curl")), reason="systemd-socket-activate, setpriv or curl missing"),
]


def recipe_lines():
    text = DOC.read_text()
    assert text.count(MARKER) == 1, f"{DOC} lost its socket activation recipe marker"
    block = []
    for line in text.split(MARKER, 1)[1].lstrip("\n").splitlines():
        if not line.startswith("    "):
            break
        block.append(line.strip())
    assert len(block) == 5 and block[-1] == "kill %1; wait", block
    return block[:4]


def localise(line, run_dir):
    for old, new in [("/run/myapp", run_dir), ("-o myapp", "-o nobody"), ("--reuid myapp", "--reuid nobody"),
                     ("/srv/myapp/venv/bin/cserve", BIN), ("--chdir /srv/myapp", f"--chdir {APPS}"),
                     (" app:app &", " wsgi_apps:application &")]:
        line = line.replace(old, new)
    assert "myapp/" not in line.replace(run_dir, "") and " app:app" not in line, f"{DOC} changed: {line}"
    return line


def as_user(user, group, *argv):
    return ["setpriv", "--reuid", user, "--regid", group, "--clear-groups", *argv]


def test_the_socket_activation_recipe_serves_nginx_s_user():
    if subprocess.run(as_user("nobody", "www-data", "test", "-x", BIN)).returncode != 0 or \
            subprocess.run(as_user("nobody", "www-data", "test", "-r", str(APPS / "wsgi_apps.py"))).returncode != 0:
        pytest.skip(f"{BIN} or the test apps are not readable by nobody in this checkout")
    make_dir, serve, open_mode, check = recipe_lines()
    assert serve.endswith(" &"), serve
    base = tempfile.mkdtemp(prefix="cserve-activation-")
    os.chmod(base, 0o755)
    run_dir = os.path.join(base, "myapp")
    server = None
    try:
        subprocess.run(["bash", "-c", localise(make_dir, run_dir)], check=True, timeout=HANG_S)
        server = subprocess.Popen(["bash", "-c", localise(serve, run_dir).removesuffix("&").strip()],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        subprocess.run(["bash", "-c", localise(open_mode, run_dir)], check=True, timeout=HANG_S)
        sock = os.path.join(run_dir, "cserve.sock")
        got = subprocess.run(["bash", "-c", localise(check, run_dir)], capture_output=True, text=True,
                             timeout=HANG_S)
        mode = stat.filemode(os.stat(sock).st_mode) if os.path.exists(sock) else "none"
        assert got.returncode == 0 and '"SERVER_SOFTWARE"' in got.stdout, (mode, got.returncode, got.stderr)
        assert mode == "srw-rw----", mode
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                out, _ = server.communicate(timeout=HANG_S)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                out, _ = server.communicate()
            print(out.decode(errors="replace")[-2000:])
        shutil.rmtree(base, ignore_errors=True)

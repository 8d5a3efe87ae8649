"""--check-config refuses what a start refuses, with the same one line and
exit 2: a pid file or access log in a missing folder, a --bind address that
is not this host's, a unix: socket in a missing folder, a --stats-json file
that cannot be written (which a start refuses at start, not at exit). What
a server running now holds (its port) does not fail --check-config: it is
run beside the server it checks."""
import os
import re
import socket
import subprocess

import pytest

from conftest import APPS, BIN, ROOT, free_port

APP = "wsgi_apps:application"
MISSING = "/nonexistent-cserve-dir"
PREFIX = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[cserve \d+\] error: ")

CASES = [
    # (id, arguments, what the one error line says)
    ("pid_file_missing_folder", ["--pid-file", f"{MISSING}/p.pid"], f"--pid-file {MISSING}/p.pid"),
    ("access_log_missing_folder", ["--access-log", f"{MISSING}/a.log"], f"--access-log={MISSING}/a.log"),
    ("access_log_equals_missing_folder", [f"--access-log={MISSING}/a.log"], f"--access-log={MISSING}/a.log"),
    # TEST-NET-1 (RFC 5737): never an address of this host
    ("bind_not_this_host", ["--bind", "192.0.2.1:8000"], "cannot listen on 192.0.2.1:8000"),
    ("bind_unix_missing_folder", ["--bind", f"unix:{MISSING}/s.sock"], f"cannot listen on unix:{MISSING}/s.sock"),
    ("bind_unix_over_a_file", ["--bind", "unix:/etc/hostname"], "not a socket"),
    ("metrics_unix_missing_folder", ["--metrics-bind", f"unix:{MISSING}/m.sock"],
     f"cannot listen on unix:{MISSING}/m.sock"),
    ("stats_json_missing_folder", ["--stats-json", f"{MISSING}/s.json"], f"--stats-json {MISSING}/s.json"),
    # a folder no one writes, root included
    ("stats_json_unwritable", ["--stats-json", "/proc/cserve-s.json"], "--stats-json /proc/cserve-s.json"),
]


def env():
    return {k: v for k, v in os.environ.items() if not k.startswith("CSERVE_")}


def one_error_line(rc, err, needle):
    lines = [ln for ln in err.splitlines() if ln.strip() and " warning: " not in ln]
    assert rc == 2, (rc, err)
    assert len(lines) == 1 and PREFIX.match(lines[0]) and needle in lines[0], err


@pytest.mark.parametrize("args,needle", [pytest.param(a, n, id=i) for i, a, n in CASES])
def test_check_config_refuses_it(args, needle):
    r = subprocess.run([BIN, "--check-config", "--chdir", str(APPS), *args, APP], cwd=str(ROOT),
                       capture_output=True, text=True, timeout=30, env=env())
    one_error_line(r.returncode, r.stderr, needle)
    assert "app imports" not in r.stdout


@pytest.mark.parametrize("args,needle", [pytest.param(a, n, id=i) for i, a, n in CASES])
def test_a_start_refuses_it_before_it_serves(args, needle):
    port = free_port()
    bind = [] if any(a == "--bind" for a in args) else ["--bind", f"127.0.0.1:{port}"]
    proc = subprocess.Popen([BIN, *bind, "--chdir", str(APPS), *args, APP], cwd=str(ROOT),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env())
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate(timeout=10)
        raise AssertionError(f"cserve {args} started instead of refusing:\n{err}")
    one_error_line(proc.returncode, err, needle)
    assert " serving " not in err


def test_check_config_passes_writable_paths_and_leaves_nothing_behind(tmp_path):
    r = subprocess.run([BIN, "--check-config", "--chdir", str(APPS), "--pid-file", str(tmp_path / "p.pid"),
                        f"--access-log={tmp_path / 'a.log'}", "--stats-json", str(tmp_path / "s.json"),
                        "--bind", f"unix:{tmp_path / 's.sock'}", "--metrics-bind", f"unix:{tmp_path / 'm.sock'}",
                        APP], cwd=str(ROOT), capture_output=True, text=True, timeout=30, env=env())
    assert r.returncode == 0 and "app imports: yes" in r.stdout, r.stderr
    assert list(tmp_path.iterdir()) == [], "the checks left files behind"


def test_a_port_a_running_server_holds_passes_check_config():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        r = subprocess.run([BIN, "--check-config", "--bind", f"127.0.0.1:{port}", "--chdir", str(APPS), APP],
                           cwd=str(ROOT), capture_output=True, text=True, timeout=30, env=env())
    assert r.returncode == 0 and "app imports: yes" in r.stdout, r.stderr

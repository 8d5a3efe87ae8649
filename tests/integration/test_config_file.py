"""--config FILE (or CSERVE_CONFIG): options from a TOML file, read by the
embedded Python's tomllib. Keys are the long options' names; an unknown key
is refused with the option meant; the command line wins over CSERVE_<NAME>,
which wins over the file, which wins over the defaults; --check-config
names each value's source."""
import os
import re

import subprocess

import pytest

from conftest import APPS, BIN, ROOT, Server, free_port
from httpclient import get

PREFIX = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[cserve \d+\] error: ")


def run(*args, env=None, cwd=ROOT):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CSERVE_")}
    clean.update(env or {})
    return subprocess.run([BIN, *args], cwd=str(cwd), capture_output=True, text=True, timeout=30, env=clean)


def check(path, *args, env=None):
    r = run("--check-config", "--config", str(path), *args, env=env)
    assert r.returncode == 0, r.stderr
    return set(r.stdout.splitlines())


def refused(path, needle):
    r = run("--check-config", "--config", str(path))
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert len(lines) == 1 and PREFIX.match(lines[0]) and needle in lines[0], r.stderr
    return lines[0]


def test_command_line_over_environment_over_file_over_defaults(tmp_path):
    f = tmp_path / "cserve.toml"
    f.write_text('workers = 2\nblocking-threads = 4\nhandoff = "condvar"\n')
    got = check(f, "--handoff", "dgram", env={"CSERVE_WORKERS": "3"})
    assert {f"config: {f} (command line)", "workers: 3 (environment: CSERVE_WORKERS)",
            f"blocking-threads: 4 (file: {f})", "handoff: dgram (command line)",
            "backlog: 1024 (default)"} <= got, got


def test_cserve_config_names_the_file(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("blocking-threads = 3\n")
    r = run("--check-config", env={"CSERVE_CONFIG": str(f)})
    assert r.returncode == 0, r.stderr
    assert {f"config: {f} (environment: CSERVE_CONFIG)", f"blocking-threads: 3 (file: {f})"} \
        <= set(r.stdout.splitlines()), r.stdout


def test_each_kind_of_value(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('stats = true\ninline = false\nforwarded-allow-ips = ["10.0.0.0/8", "unix"]\n'
                 'access-log = "-"\napp-timeout = 2.5\nmax-body-size = 4096\n'
                 f'app = "{APPS}/wsgi_apps.py:application"\n')
    got = check(f)
    assert {f"stats: yes (file: {f})", "inline: no (default)",
            f"forwarded-allow-ips: 10.0.0.0/8,unix (file: {f})", f"access-log: stdout (-) (file: {f})",
            f"app-timeout: 2.500 (file: {f})", f"max-body-size: 4096 (file: {f})",
            f"app: {APPS}/wsgi_apps.py:application (file: {f})", "app imports: yes"} <= got, got
    # an app on the command line replaces the file's
    assert "app: apps/hello.py:application (command line)" in check(f, "apps/hello.py:application")
    f.write_text("access-log = true\n")
    assert f"access-log: stderr (file: {f})" in check(f)


@pytest.mark.parametrize("text,needle", [
    ("blocking-thread = 4\n", "unknown key 'blocking-thread': did you mean blocking-threads?"),
    ("worker = 2\n", "unknown key 'worker': did you mean workers?"),
    ("zqxjvwk = 1\n", "unknown key 'zqxjvwk'"),
    ("help = true\n", "a file does not set 'help'"),
    ("workers = \n", "(at line 1, column 11)"),                   # TOML's own error
    ("[server]\nworkers = 2\n", "unknown key 'server'"),
    ("workers = true\n", "workers needs a value, not true"),
    ("stats = \"yes\"\n", "stats is a flag: true or false"),
    ('bind = ["127.0.0.1:1", "127.0.0.1:2"]\n', "bind takes one value, not an array"),
    ('workers = "lots"\n', "'lots'"),
])
def test_a_bad_file_is_refused_with_one_line(tmp_path, text, needle):
    f = tmp_path / "c.toml"
    f.write_text(text)
    line = refused(f, needle)
    assert str(f) in line, line


def test_a_missing_file_is_refused(tmp_path):
    refused(tmp_path / "nosuch.toml", "No such file or directory")


def test_the_example_file_checks():
    f = ROOT / "docs" / "cserve.example.toml"
    got = check(f)
    assert f"workers: 2 (file: {f})" in got and f"access-log: stdout (-) (file: {f})" in got, got


def test_a_server_started_from_a_file_serves_as_it_says(tmp_path):
    port = free_port()
    f = tmp_path / "c.toml"
    f.write_text(f'bind = "127.0.0.1:{port}"\nchdir = "{APPS}"\napp = "wsgi_apps:application"\n'
                 f'blocking-threads = 2\n')
    srv = Server([BIN, "--config", str(f)], port, cwd=str(ROOT),
                 env={k: v for k, v in os.environ.items() if not k.startswith("CSERVE_")})
    try:
        srv.wait_ready()
        assert get(port, "/hello").body == b"hello"
        assert "2 blocking threads" in srv.log_text(), srv.log_text()
        assert srv.stop() == 0
    finally:
        srv.close()


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "huge"])
def test_only_a_regular_file_of_bounded_size_is_read(tmp_path, kind):
    """A FIFO would hang start-up waiting for a writer, /dev/zero (through
    a symlink) would fill the memory: both are refused at once, as are a
    folder and a file over 1 MiB. run()'s timeout is the hang detector."""
    f = tmp_path / "cserve.toml"
    if kind == "fifo":
        os.mkfifo(f)
    elif kind == "device":
        f.symlink_to("/dev/zero")
    elif kind == "folder":
        f.mkdir()
    else:
        f.write_text("# padding\n" * 120000)
    needle = {"fifo": "not a regular file", "device": "not a regular file", "folder": "a folder",
              "huge": "larger than 1 MiB"}[kind]
    refused(f, needle)

"""'-' is standard output where a log is written: --access-log - (the word
after it, not the app), --access-log=- and CSERVE_ACCESS_LOG=- write the
access log to stdout, in a worker a reload starts too, and never to a file
named '-'. The outputs that are files rewritten whole (--stats-json,
--pid-file) refuse '-' rather than create one."""
import os
import re
import signal
import subprocess

import pytest

from conftest import APPS, BIN, free_port
from httpclient import get
from loadgen import wait_until

APP = "wsgi_apps:application"


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CSERVE_")}
    env.update(extra)
    return env


class Split:
    """cserve with its stdout and stderr in two files."""

    def __init__(self, tmp_path, args, env):
        self.port = free_port()
        self.out, self.err = tmp_path / "stdout", tmp_path / "stderr"
        self.proc = subprocess.Popen([BIN, "--bind", f"127.0.0.1:{self.port}", "--chdir", str(APPS), *args],
                                     cwd=str(tmp_path), stdout=self.out.open("w"), stderr=self.err.open("w"),
                                     env=env)

    def text(self):
        return self.out.read_text(), self.err.read_text()

    def wait(self, what, cond, timeout=20):
        assert wait_until(lambda: self.proc.poll() is not None or cond(*self.text()), timeout), \
            f"no {what}:\n{self.text()}"
        assert self.proc.poll() is None, f"cserve exited {self.proc.returncode}:\n{self.text()}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=20)


@pytest.mark.parametrize("args,env", [
    (["--access-log", "-", APP], {}),
    ([APP, "--access-log", "-"], {}),
    (["--access-log=-", APP], {}),
    ([APP], {"CSERVE_ACCESS_LOG": "-"}),
], ids=["space", "after-the-app", "equals", "variable"])
def test_the_access_log_dash_is_stdout(tmp_path, args, env):
    srv = Split(tmp_path, args, clean_env(**env))
    try:
        srv.wait("start-up line", lambda out, err: " serving " in err)
        assert get(srv.port, "/hello").body == b"hello"
        srv.wait("access line on stdout", lambda out, err: '"GET /hello HTTP/1.1" 200' in out)
    finally:
        rc = srv.stop()
    out, err = srv.text()
    assert rc == 0, (out, err)
    assert "GET /hello" not in err, err
    assert not (tmp_path / "-").exists() and not (APPS / "-").exists(), "the access log went to a file named '-'"


def test_a_worker_a_reload_starts_writes_to_stdout_too(tmp_path):
    srv = Split(tmp_path, ["--access-log", "-", APP], clean_env())
    try:
        srv.wait("start-up line", lambda out, err: " serving " in err)
        srv.proc.send_signal(signal.SIGHUP)
        srv.wait("reloaded worker", lambda out, err: re.search(r"new worker \(pid \d+\) serves", err))
        assert get(srv.port, "/hello").body == b"hello"
        srv.wait("access line on stdout", lambda out, err: '"GET /hello HTTP/1.1" 200' in out)
    finally:
        rc = srv.stop()
    out, err = srv.text()
    assert rc == 0 and "GET /hello" not in err, (out, err)
    assert not (tmp_path / "-").exists() and not (APPS / "-").exists()


@pytest.mark.parametrize("option", ["--stats-json", "--pid-file"])
def test_a_whole_file_output_refuses_the_dash(tmp_path, option):
    r = subprocess.run([BIN, "--check-config", f"{option}=-"], cwd=str(tmp_path), capture_output=True, text=True,
                       timeout=30, env=clean_env())
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[cserve \d+\] error: ", lines[0]) and f"{option} needs a file, not '-'" in lines[0], lines[0]
    assert not (tmp_path / "-").exists()

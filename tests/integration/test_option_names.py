"""Long options are matched by their whole name: a start of one
(--blocking-thread) or a near miss (--acess-log) is refused, exit 2, with
one line naming the option meant; nothing is read as an abbreviation."""
import os
import re
import subprocess

import pytest

from conftest import APPS, BIN, ROOT

PREFIX = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[cserve \d+\] error: ")


def check_config(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CSERVE_")}
    return subprocess.run([BIN, "--check-config", "--chdir", str(APPS), *args, "wsgi_apps:application"],
                          cwd=str(ROOT), capture_output=True, text=True, timeout=30, env=env)


@pytest.mark.parametrize("args,meant", [
    (["--blocking-thread", "4"], "--blocking-threads"),   # a start of the name
    (["--worker", "2"], "--workers"),
    (["--max-body=100"], "--max-body-size"),              # the =VALUE form too
    (["--access-log-form", "json"], "--access-log-format"),
    (["--acess-log"], "--access-log"),                    # a typo, not a start
    (["--graceful-timout", "3"], "--graceful-timeout"),
])
def test_a_near_miss_is_refused_with_the_option_meant(args, meant):
    r = check_config(*args)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert len(lines) == 1 and PREFIX.match(lines[0]), r.stderr
    assert f"did you mean {meant}?" in lines[0], lines[0]
    assert "app imports" not in r.stdout


def test_a_name_near_no_option_gets_no_guess():
    r = check_config("--zqxjvwk")
    assert r.returncode == 2 and "unknown option '--zqxjvwk'" in r.stderr and "did you mean" not in r.stderr, \
        r.stderr


@pytest.mark.parametrize("args,line", [
    (["--blocking-threads", "4"], "blocking-threads: 4 (command line)"),
    (["--access-log", "--access-log-format", "json"], "access-log-format: json (command line)"),
    # a value is not an option, whatever it looks like
    (["--root-path", "/--work"], "root-path: /--work (command line)"),
    (["-w", "2"], "workers: 2 (command line)"),
    (["-w2"], "workers: 2 (command line)"),
])
def test_whole_names_and_short_options_are_read(args, line):
    r = check_config(*args)
    assert r.returncode == 0, r.stderr
    assert line in r.stdout.splitlines(), r.stdout

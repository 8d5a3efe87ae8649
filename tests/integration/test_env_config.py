"""Every long option can be set as CSERVE_<NAME>; the command line wins over
the variable, option by option, and of two values on the command line the
last one (--bind unix: or HOST:PORT alike); --check-config prints the
effective configuration, where each value came from (default, environment
or command line), the virtualenv in use, and whether the app imports. The
table below must name every option --help lists, so an option added without
its variable (or without a row here) fails."""
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys

import pytest

from conftest import APPS, BIN, ROOT, start_server
from loadgen import wait_until

# option -> (value of CSERVE_<NAME>, the --check-config line it must give,
#            other variables the value needs)
TABLE = {
    "bind": ("127.0.0.1:8123", "bind: 127.0.0.1:8123", {}),
    "chdir": (str(APPS), f"chdir: {APPS}", {}),
    "socket-mode": ("660", "socket-mode: 660", {"CSERVE_BIND": "unix:/tmp/cserve-env-test.sock"}),
    "user": ("nobody", "user: nobody", {}),
    "group": ("nogroup", "group: nogroup", {}),
    "virtualenv": (None, "virtualenv: {venv}", {}),
    "app": ("native-hello", "app: native-hello", {}),
    "inline": ("yes", "inline: yes", {}),
    "workers": ("3", "workers: 3", {}),
    "blocking-threads": ("4", "blocking-threads: 4", {}),
    "handoff": ("condvar", "handoff: condvar", {}),
    "spin": ("7us", "spin: 7 us", {}),
    "loop-spin": ("9", "loop-spin: 9 us", {}),
    "loop-doze": ("11", "loop-doze: 11 us", {}),
    "loop-hold": ("12", "loop-hold: 12 us", {}),
    "queue-size": ("64", "queue-size: 64", {}),
    "backlog": ("77", "backlog: 77", {}),
    "max-header-size": ("4096", "max-header-size: 4096", {}),
    "max-body-size": ("12345", "max-body-size: 12345", {}),
    "header-timeout": ("3", "header-timeout: 3.000", {}),
    "keepalive-timeout": ("4", "keepalive-timeout: 4.000", {}),
    "io-timeout": ("6", "io-timeout: 6.000", {}),
    "graceful-timeout": ("8", "graceful-timeout: 8.000", {}),
    "max-requests": ("1000", "max-requests: 1000", {}),
    "max-requests-jitter": ("50", "max-requests-jitter: 50", {}),
    "workers-lifetime": ("3600", "workers-lifetime: 3600.000", {}),
    "workers-max-rss": ("512", "workers-max-rss: 512", {}),
    "pid-file": ("/tmp/cserve-env.pid", "pid-file: /tmp/cserve-env.pid", {}),
    "access-log": ("/tmp/cserve-env-access.log", "access-log: /tmp/cserve-env-access.log", {}),
    "log-level": ("warning", "log-level: warning", {}),
    "stats": ("true", "stats: yes", {}),
    "stats-json": ("/tmp/cserve-env-stats.json", "stats-json: /tmp/cserve-env-stats.json", {}),
    "stats-window": ("2", "stats-window: 2", {}),
    "metrics-bind": ("127.0.0.1:9109", "metrics-bind: 127.0.0.1:9109", {}),
    "metrics-allow-ips": ("10.0.0.0/8,unix", "metrics-allow-ips: 10.0.0.0/8,unix", {}),
    "forwarded-allow-ips": ("10.0.0.0/8,unix", "forwarded-allow-ips: 10.0.0.0/8,unix", {}),
    "forwarded-headers": ("forwarded", "forwarded-headers: forwarded", {}),
    "root-path": ("/api", "root-path: /api", {}),
    "app-timeout": ("20", "app-timeout: 20.000", {}),
    "access-log-format": ("json", "access-log-format: json", {}),
    "reload": ("1", "reload: yes", {}),
    "config": (str(APPS / "empty.toml"), f"config: {APPS}/empty.toml", {}),  # sets nothing
    "preload": ("1", "preload: yes", {}),
}
NOT_VARIABLES = {"help", "version", "check-config"}

# option -> (a command-line value unlike both the default and TABLE's, the
#            --check-config line it must give over TABLE's variable)
COMMAND_LINE = {
    "bind": ("127.0.0.1:8124", "bind: 127.0.0.1:8124"),
    "chdir": ("/tmp", "chdir: /tmp"),
    "socket-mode": ("600", "socket-mode: 600"),
    "user": ("root", "user: root"),
    "group": ("root", "group: root"),
    "virtualenv": (None, "virtualenv: {venv}"),
    "app": (f"{APPS}/wsgi_apps.py:application", f"app: {APPS}/wsgi_apps.py:application"),
    "workers": ("2", "workers: 2"),
    "blocking-threads": ("2", "blocking-threads: 2"),
    "handoff": ("dgram", "handoff: dgram"),
    "spin": ("5", "spin: 5 iterations"),
    "loop-spin": ("3", "loop-spin: 3 us"),
    "loop-doze": ("13", "loop-doze: 13 us"),
    "loop-hold": ("14", "loop-hold: 14 us"),
    "queue-size": ("128", "queue-size: 128"),
    "backlog": ("78", "backlog: 78"),
    "max-header-size": ("2048", "max-header-size: 2048"),
    "max-body-size": ("54321", "max-body-size: 54321"),
    "header-timeout": ("5", "header-timeout: 5.000"),
    "keepalive-timeout": ("7", "keepalive-timeout: 7.000"),
    "io-timeout": ("9", "io-timeout: 9.000"),
    "graceful-timeout": ("10", "graceful-timeout: 10.000"),
    "max-requests": ("2000", "max-requests: 2000"),
    "max-requests-jitter": ("60", "max-requests-jitter: 60"),
    "workers-lifetime": ("7200", "workers-lifetime: 7200.000"),
    "workers-max-rss": ("256", "workers-max-rss: 256"),
    "pid-file": ("/tmp/cserve-cli.pid", "pid-file: /tmp/cserve-cli.pid"),
    "access-log": ("/tmp/cserve-cli-access.log", "access-log: /tmp/cserve-cli-access.log"),
    "log-level": ("error", "log-level: error"),
    "stats-json": ("/tmp/cserve-cli-stats.json", "stats-json: /tmp/cserve-cli-stats.json"),
    "stats-window": ("3", "stats-window: 3"),
    "metrics-bind": ("127.0.0.1:9110", "metrics-bind: 127.0.0.1:9110"),
    "metrics-allow-ips": ("unix", "metrics-allow-ips: unix"),
    "forwarded-allow-ips": ("unix", "forwarded-allow-ips: unix"),
    "forwarded-headers": ("x-forwarded-proto", "forwarded-headers: x-forwarded-proto"),
    "root-path": ("/v2", "root-path: /v2"),
    "app-timeout": ("40", "app-timeout: 40.000"),
    "access-log-format": ("common", "access-log-format: common"),
    "config": (str(ROOT / "docs" / "cserve.example.toml"), f"config: {ROOT}/docs/cserve.example.toml"),
}
# Flags: the command line can only turn them on, as their variable does.
FLAGS = {"inline", "stats", "reload", "preload"}


def help_options():
    out = subprocess.run([BIN, "--help"], capture_output=True, text=True, check=True).stdout
    return re.findall(r"^\s+(?:-\w, )?--([a-z][a-z-]*)", out, re.M), out


def env_name(option):
    return "CSERVE_" + option.upper().replace("-", "_")


def check_config(env, *args, bin_=BIN):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CSERVE_") and k != "VIRTUAL_ENV"}
    clean.update(env)
    return subprocess.run([bin_, "--check-config", *args], capture_output=True, text=True, env=clean, timeout=30)


CONFIG_LINE = re.compile(r"^([a-z-]+): (.*) \((default[^)]*|command line|environment: [A-Z_]+)\)$")


def config(out):
    """--check-config's lines as {name: (the "name: value" line, where it came from)}."""
    got = {}
    for ln in out.splitlines():
        m = CONFIG_LINE.match(ln)
        if m:
            got[m.group(1)] = (f"{m.group(1)}: {m.group(2)}", m.group(3))
    return got


def lines(out):
    return {line for line, _ in config(out).values()}


def test_the_table_covers_every_option_in_help():
    options, text = help_options()
    assert set(options) - NOT_VARIABLES == set(TABLE), "options in --help without a row here (or stale rows)"
    assert "CSERVE_<NAME>" in text


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    d = tmp_path_factory.mktemp("venv") / "v"
    py = os.environ.get("PYTHON", "/usr/bin/python3")
    subprocess.run([py, "-m", "venv", "--without-pip", str(d)], check=True)
    return str(d)


def test_check_config_says_every_value_is_a_default_when_nothing_is_given():
    r = check_config({})
    assert r.returncode == 0, r.stderr
    got = config(r.stdout)
    assert set(TABLE) <= set(got), r.stdout
    assert all(src.startswith("default") for _, src in got.values()), r.stdout


@pytest.mark.parametrize("option", sorted(TABLE))
def test_each_option_is_read_from_its_variable(option, venv):
    value, line, extra = TABLE[option]
    if value is None:
        value, line = venv, line.format(venv=venv)
    default = check_config({})
    assert default.returncode == 0, default.stderr
    assert line not in lines(default.stdout), "the test value must differ from the default"
    env = {env_name(option): value, **extra}
    r = check_config(env)
    assert r.returncode == 0, r.stderr
    assert config(r.stdout).get(option) == (line, f"environment: {env_name(option)}"), r.stdout


def test_every_option_has_a_command_line_row():
    assert set(COMMAND_LINE) | FLAGS == set(TABLE)


@pytest.fixture(scope="module")
def venv2(tmp_path_factory):
    d = tmp_path_factory.mktemp("venv2") / "v"
    py = os.environ.get("PYTHON", "/usr/bin/python3")
    subprocess.run([py, "-m", "venv", "--without-pip", str(d)], check=True)
    return str(d)


@pytest.mark.parametrize("option", sorted(COMMAND_LINE))
def test_each_option_on_the_command_line_wins_over_its_variable(option, venv, venv2):
    env_value, env_line, extra = TABLE[option]
    if env_value is None:
        env_value, env_line = venv, env_line.format(venv=venv)
    value, line = COMMAND_LINE[option]
    if value is None:
        value, line = venv2, line.format(venv=venv2)
    assert line != env_line
    r = check_config({env_name(option): env_value, **extra}, f"--{option}={value}")
    assert r.returncode == 0, r.stderr
    assert config(r.stdout).get(option) == (line, "command line"), r.stdout


@pytest.mark.parametrize("env,args,line", [
    # a TCP --bind on the command line replaces a unix: CSERVE_BIND, and the
    # variable's socket mode, meant for that socket, with it
    ({"CSERVE_BIND": "unix:/tmp/cserve-env-test.sock"}, ["--bind", "127.0.0.1:8125"], "bind: 127.0.0.1:8125"),
    ({"CSERVE_BIND": "unix:/tmp/cserve-env-test.sock", "CSERVE_SOCKET_MODE": "660"}, ["--bind", "127.0.0.1:8125"],
     "socket-mode: -"),
    ({"CSERVE_BIND": "127.0.0.1:8125"}, ["--bind", "unix:/tmp/cserve-cli.sock"], "bind: unix:/tmp/cserve-cli.sock"),
    # of two --bind, the last
    ({}, ["--bind", "unix:/tmp/cserve-cli.sock", "--bind", "127.0.0.1:8126"], "bind: 127.0.0.1:8126"),
    ({}, ["--bind", "127.0.0.1:8126", "--bind", "unix:/tmp/cserve-cli.sock"], "bind: unix:/tmp/cserve-cli.sock"),
    ({}, ["--workers", "2", "--workers", "3"], "workers: 3"),
])
def test_the_last_value_wins_and_a_bind_of_either_kind_replaces_the_other(env, args, line):
    r = check_config(env, *args)
    assert r.returncode == 0, r.stderr
    assert line in lines(r.stdout), r.stdout


def test_an_app_given_twice_on_the_command_line_is_refused_whatever_cserve_app_says():
    r = check_config({"CSERVE_APP": "native-hello"}, "--app", "native-hello", f"{APPS}/wsgi_apps.py:application")
    assert r.returncode == 2 and "given twice" in r.stderr, r.stderr


def test_the_command_line_wins_over_the_variable():
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CSERVE_")}
    clean.update(CSERVE_WORKERS="3", CSERVE_APP="native-hello")
    r = subprocess.run([BIN, "--check-config", "--workers", "2", "--chdir", str(APPS), "wsgi_apps:application"],
                       capture_output=True, text=True, env=clean, timeout=30)
    assert r.returncode == 0, r.stderr
    got = config(r.stdout)
    assert got["workers"] == ("workers: 2", "command line"), r.stdout
    assert got["app"] == ("app: wsgi_apps:application", "command line"), r.stdout
    assert "app imports: yes" in r.stdout


def test_a_bad_variable_names_itself():
    r = check_config({"CSERVE_WORKERS": "lots"})
    assert r.returncode == 2
    assert "CSERVE_WORKERS" in r.stderr and "lots" in r.stderr
    r = check_config({"CSERVE_STATS": "perhaps"})
    assert r.returncode == 2 and "CSERVE_STATS" in r.stderr


def test_check_config_says_when_the_app_does_not_import(tmp_path):
    (tmp_path / "broken.py").write_text("raise ImportError('no such thing as this')\n")
    r = subprocess.run([BIN, "--check-config", "--chdir", str(tmp_path), "broken:app"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert "no such thing as this" in r.stderr


@pytest.mark.parametrize("value,line", [("0", "access-log: off"), ("off", "access-log: off"),
                                        ("1", "access-log: stderr"), ("yes", "access-log: stderr"),
                                        ("/tmp/cserve-env-a.log", "access-log: /tmp/cserve-env-a.log")])
def test_the_access_log_variable_takes_the_flag_words_too(value, line):
    r = check_config({"CSERVE_ACCESS_LOG": value})
    assert r.returncode == 0, r.stderr
    assert line in lines(r.stdout), r.stdout


def test_the_ring_knobs_print_what_they_do_not_their_sentinels():
    """Unset, --spin and --loop-spin are adaptive and --loop-doze is the
    ring's own default, in the units the options take."""
    doze_ns = int(re.search(r"#define RING_DOZE_MAX_NS (\d+)L", (ROOT / "handoffs" / "ring_order.h").read_text()).group(1))
    got = lines(check_config({}).stdout)
    assert {"spin: adaptive", "loop-spin: adaptive", f"loop-doze: {doze_ns // 1000} us"} <= got, got
    got = lines(check_config({}, "--loop-doze", "0", "--loop-spin", "0", "--spin", "0").stdout)
    assert {"spin: 0 iterations", "loop-spin: 0 us (never)", "loop-doze: 0 us (never)"} <= got, got


def test_check_config_names_the_virtualenv_in_use_and_why(venv, venv2, tmp_path):
    """--virtualenv, else $VIRTUAL_ENV, else the virtualenv cserve is
    installed in: the one start-up would use, not just the option."""
    app = f"{APPS}/wsgi_apps.py:application"
    r = check_config({"VIRTUAL_ENV": venv}, app)
    assert config(r.stdout)["virtualenv"] == (f"virtualenv: {venv}", "environment: VIRTUAL_ENV"), r.stdout
    r = check_config({"VIRTUAL_ENV": venv}, "--virtualenv", venv2, app)
    assert config(r.stdout)["virtualenv"] == (f"virtualenv: {venv2}", "command line"), r.stdout
    installed = pathlib.Path(venv) / "bin" / "cserve"
    shutil.copy(BIN, installed)
    try:
        r = check_config({}, app, bin_=str(installed))
    finally:
        installed.unlink()
    assert config(r.stdout)["virtualenv"] == (f"virtualenv: {venv}", "default: the virtualenv cserve is installed in"), \
        r.stdout
    got = config(check_config({}, app).stdout)["virtualenv"]
    assert got[0] == "virtualenv: -" and got[1].startswith("default: none"), got


@pytest.mark.parametrize("option", ["--graceful-timeout", "--app-timeout", "--keepalive-timeout"])
def test_a_time_too_long_to_keep_is_refused_not_wrapped(option):
    r = subprocess.run([BIN, "--check-config", option, "5000000"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and option in r.stderr and "up to" in r.stderr


@pytest.mark.parametrize("typo,meant", [("CSERVE_WORKER", "CSERVE_WORKERS (--workers)"),
                                        ("CSERVE_BLOCKING_THREAD", "CSERVE_BLOCKING_THREADS (--blocking-threads)"),
                                        ("CSERVE_ACCES_LOG", "CSERVE_ACCESS_LOG (--access-log)")])
def test_a_variable_that_is_no_option_is_warned_about_with_the_closest(typo, meant):
    r = check_config({typo: "2"})
    assert r.returncode == 0, r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if "warning:" in ln]
    assert len(warnings) == 1 and typo in warnings[0] and f"Did you mean {meant}?" in warnings[0], r.stderr
    assert all(src.startswith("default") for _, src in config(r.stdout).values()), "the typo was read"


def test_a_variable_like_no_option_is_warned_about_without_a_guess():
    r = check_config({"CSERVE_ZQXJ": "1"})
    assert r.returncode == 0 and "CSERVE_ZQXJ is no option's variable" in r.stderr and "Did you" not in r.stderr, \
        r.stderr


def test_the_warning_is_said_once_not_by_every_worker():
    """The first process says it; workers, and those a reload execs, do not."""
    srv = start_server("--workers", "2", env=dict(os.environ, CSERVE_WORKER="3"))
    try:
        srv.proc.send_signal(signal.SIGHUP)
        assert wait_until(lambda: srv.log_text().count(" serves; pid ") >= 2, 20), srv.log_text()
        assert srv.log_text().count("CSERVE_WORKER is no option's variable") == 1, srv.log_text()
    finally:
        srv.close()

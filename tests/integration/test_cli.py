"""The command line: --help (the knobs for experiments in a section of their
own, last, as in docs/options.md), --version, option and app
errors (exit 2, one line, never listening), --bind unix:, --app native-hello,
the default app."""
import os
import re
import socket
import subprocess
import tempfile
import time

import pytest

from conftest import APPS, BIN, ROOT, Server, free_port
from deploy_support import EMBEDDED_PY
from httpclient import Reader, get, req

OPTIONS = ["--bind", "--chdir", "--workers", "--blocking-threads", "--handoff", "--spin", "--inline",
           "--app", "--backlog", "--max-header-size", "--max-body-size", "--header-timeout",
           "--keepalive-timeout", "--io-timeout", "--graceful-timeout", "--access-log", "--log-level",
           "--stats", "--stats-json", "--stats-window", "--metrics-bind", "--version", "--help"]
BACKENDS = ["ring", "dgram", "condvar", "eventfd"]


def run(*args, timeout=15):
    return subprocess.run([BIN, *args], cwd=str(ROOT), capture_output=True, text=True, timeout=timeout)


def test_help_lists_every_option_and_backend():
    p = run("--help")
    assert p.returncode == 0, p.stderr
    for opt in OPTIONS:
        assert re.search(re.escape(opt) + r"\b", p.stdout), f"--help does not list {opt}"
    for b in BACKENDS:
        assert re.search(r"\b" + b + r"\b", p.stdout), f"--help does not list backend {b}"


# The knobs the measurements vary, which a deployment leaves at their
# defaults: --help lists them in a section of their own, last. --handoff is
# not one: choosing the handoff at run time is what the server is for.
EXPERIMENT_KNOBS = ["--app native-hello", "--spin", "--loop-spin", "--loop-doze", "--loop-hold", "--queue-size",
                    "--stats-window"]
OPTION_LINE = re.compile(r"^\s+(?:-\w, )?(--[a-z][a-z-]*(?: native-hello)?)")


def help_sections(text):
    """--help's option lines, in order, as (heading of their section, option);
    a heading is the first line of a paragraph that starts at the margin."""
    heading, found, prev = None, [], ""
    for line in text.splitlines():
        m = OPTION_LINE.match(line)
        if m:
            found.append((heading, m.group(1)))
        elif line and not line[0].isspace() and not prev:
            heading = line
        prev = line
    return found


def test_help_lists_the_experiment_knobs_last_in_a_section_of_their_own():
    p = run("--help")
    assert p.returncode == 0, p.stderr
    found = help_sections(p.stdout)
    headings = [h for h, _ in found if h and "experiment" in h.lower()]
    assert headings, f"--help has no experiments heading:\n{p.stdout}"
    first = next(i for i, (h, _) in enumerate(found) if h == headings[0])
    section = [opt for _, opt in found[first:]]
    assert all(h == headings[0] for h, _ in found[first:]), "an option section after the experiments one"
    assert sorted(section) == sorted(EXPERIMENT_KNOBS), f"the experiments section lists {section}"
    before = [opt for _, opt in found[:first]]
    assert "--handoff" in before and "--handoff" not in section
    assert not set(EXPERIMENT_KNOBS) & set(before), f"an experiment knob among the deployment options: {before}"


def test_options_md_puts_the_same_knobs_in_its_experiments_section_last():
    text = (ROOT / "docs" / "options.md").read_text()
    head, sep, section = text.partition("\n## For experiments\n")
    assert sep, "docs/options.md has no '## For experiments' section"
    assert "\n## " not in section, "a section after the experiments one"
    rows = lambda t: [m.group(1) for m in re.finditer(r"^\| `(--[a-z-]+(?: native-hello)?)", t, re.M)]
    assert sorted(rows(section)) == sorted(EXPERIMENT_KNOBS), rows(section)
    assert "--handoff" in rows(head) and not set(EXPERIMENT_KNOBS) & set(rows(head)), rows(head)


def test_version():
    p = run("--version")
    assert p.returncode == 0
    assert re.fullmatch(r"cserve \d+\.\d+\.\d+ \(Python 3\.\d+\.\d+\S*( free-threaded)? at /\S*.*\)\n?", p.stdout), p.stdout


def _never_listens(args, port, timeout=15):
    """Run cserve; while it runs keep trying to connect to port. Returns the
    CompletedProcess-like (rc, stderr) and whether anything ever accepted."""
    errf = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen([BIN, *args], cwd=str(ROOT), stdout=subprocess.DEVNULL, stderr=errf)
    accepted = False
    deadline = time.monotonic() + timeout
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                accepted = True
            except OSError:
                pass
            time.sleep(0.01)
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
            raise AssertionError(f"cserve {args} still running after {timeout}s")
    finally:
        errf.seek(0)
        err = errf.read()
        errf.close()
    return proc.returncode, err, accepted


APPARG = "wsgi_apps:application"
ERRORS = [
    # (id, arguments after --bind/--chdir, text the one error line must name)
    ("unknown_option", ["--no-such-option", APPARG], "--no-such-option"),
    ("bad_number_workers", ["--workers", "abc", APPARG], "abc"),
    ("bad_number_blocking_threads", ["--blocking-threads", "-3", APPARG], "-3"),
    ("bad_number_equals_form", ["--backlog=12x", APPARG], "12x"),
    ("unknown_handoff", ["--handoff", "carrier-pigeon", APPARG], "carrier-pigeon"),
    ("bad_bind_address", [APPARG, "--bind", "not-an-address"], "not-an-address"),
    ("missing_option_value", [APPARG, "--workers"], "--workers"),
    ("module_not_found", ["nosuch:app"], "nosuch"),
    ("attribute_missing", ["wsgi_apps:missing_attr"], "missing_attr"),
    ("not_callable", ["wsgi_apps:not_callable"], "not_callable"),
    ("app_file_missing", ["no/such/file.py:application"], "no/such/file.py"),
    ("app_path_without_py", ["apps/wsgi_apps:application"], ".py"),
    ("chdir_missing", ["--chdir", "/nonexistent-cserve-dir", APPARG], "/nonexistent-cserve-dir"),
    ("access_log_unopenable", ["--access-log=/nonexistent-cserve-dir/a.log", APPARG], "--access-log"),
    ("bind_unix_over_a_file", ["--bind", "unix:/etc/hostname", APPARG], "not a socket"),
    ("metrics_allow_ips_bad", ["--metrics-bind", "127.0.0.1:1", "--metrics-allow-ips", "10.0.0.0/33", APPARG],
     "--metrics-allow-ips"),
    ("forwarded_allow_ips_bad", ["--forwarded-allow-ips", "not-an-ip", APPARG], "not-an-ip"),
]
# Every line cserve writes: its UTC time to the millisecond, pid, level.
PREFIX = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[cserve \d+\] (debug|info|warning|error): ")


@pytest.mark.parametrize("args,needle", [pytest.param(a, n, id=i) for i, a, n in ERRORS])
def test_error_exits_2_with_one_line_and_never_listens(args, needle):
    port = free_port()
    full = ["--bind", f"127.0.0.1:{port}", "--chdir", str(APPS)] + args
    rc, err, accepted = _never_listens(full, port)
    assert rc == 2, (rc, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert needle in lines[0], lines[0]
    assert PREFIX.match(lines[0]) and " error: " in lines[0], lines[0]
    assert not accepted, "the port was listened on despite the error"


def _one_error_line(args, needle):
    p = subprocess.run([BIN, "--chdir", str(APPS), *args, APPARG], cwd=str(ROOT), capture_output=True, text=True,
                       timeout=15)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert len(lines) == 1 and PREFIX.match(lines[0]) and needle in lines[0], p.stderr


def test_an_address_in_use_is_a_start_up_error_like_the_others():
    """Exit 2 and one line, as a bad option or app gets."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        _one_error_line(["--bind", f"127.0.0.1:{held.getsockname()[1]}"], "Address already in use")


def test_a_pid_file_that_cannot_be_written_is_a_start_up_error_like_the_others():
    # (written once the server listens, so not in the never-listens table)
    _one_error_line(["--bind", f"127.0.0.1:{free_port()}", "--pid-file", "/nonexistent-cserve-dir/p.pid"],
                    "--pid-file")


def test_an_import_that_raises_shows_its_traceback_then_one_error_line():
    """The app's own code raised while importing (Django's AppConfig.ready,
    say): the traceback names the file and line; the last line is the one
    error line, with the Python and the virtualenv the import used."""
    port = free_port()
    rc, err, accepted = _never_listens(["--bind", f"127.0.0.1:{port}", "--chdir", str(APPS),
                                        "raises_on_import:application"], port)
    assert rc == 2 and not accepted, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert any(re.search(r'File ".*raises_on_import\.py", line \d+', ln) for ln in lines), err
    assert PREFIX.match(lines[-1]) and " error: cannot import app" in lines[-1] and "boom-on-import" in lines[-1]
    # cserve's own lines around the traceback carry the one prefix
    assert PREFIX.match(lines[0]) and "raises_on_import" in lines[0], lines[0]
    assert "no virtualenv" in lines[-1], lines[-1]


def test_the_import_error_line_names_the_virtualenv_once(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([EMBEDDED_PY, "-m", "venv", "--without-pip", str(venv)], check=True)
    env = dict(os.environ, VIRTUAL_ENV=str(venv))
    p = subprocess.run([BIN, "--chdir", str(APPS), "raises_on_import:application"], cwd=str(ROOT),
                       capture_output=True, text=True, timeout=15, env=env)
    assert p.returncode == 2, p.stderr
    last = p.stderr.splitlines()[-1]
    assert last.count(str(venv)) == 1 and f"virtualenv {venv} (from VIRTUAL_ENV)" in last, last


def test_app_file_whose_name_is_no_module_name_is_refused(tmp_path):
    (tmp_path / "my-site.py").write_text("def application(e, s):\n    return []\n")
    port = free_port()
    rc, err, accepted = _never_listens(["--bind", f"127.0.0.1:{port}", str(tmp_path / "my-site.py") + ":application"],
                                       port)
    assert rc == 2 and not accepted, (rc, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "'my-site.py' is not a Python module name" in lines[0], err


def test_bind_unix_socket(tmp_path):
    path = str(tmp_path / "cserve.sock")
    srv = Server([BIN, "--bind", f"unix:{path}", "--chdir", str(APPS), "wsgi_apps:application"], 0, cwd=str(ROOT))
    try:
        deadline = time.monotonic() + 15
        s = None
        while time.monotonic() < deadline:
            assert srv.proc.poll() is None, srv.log_text()
            try:
                s = socket.socket(socket.AF_UNIX)
                s.settimeout(5)
                s.connect(path)
                break
            except OSError:
                s.close()
                s = None
                time.sleep(0.05)
        assert s is not None, "unix socket never accepted:\n" + srv.log_text()
        with s:
            s.sendall(req("GET", "/hello") + req("GET", "/environ?u=1"))
            r = Reader(s)
            a = r.read_response()
            b = r.read_response()
        assert a.status == 200 and a.body == b"hello"
        assert b.status == 200 and b'"PATH_INFO": "/environ"' in b.body
        assert srv.stop() == 0
    finally:
        srv.close()


def _same_as_default(resp):
    assert resp.status == 200 and resp.reason == "OK"
    assert resp.body == b"Hello, World!"
    assert resp.header("content-type") == "text/plain"
    assert resp.header("content-length") == "13"


def test_default_app_with_only_bind(server_factory):
    srv = server_factory()
    _same_as_default(get(srv.port, "/"))
    _same_as_default(get(srv.port, "/any/path?x=1"))


def test_native_hello_same_as_default_app(server_factory):
    py = server_factory()
    native = server_factory("--app", "native-hello")
    a, b = get(py.port, "/"), get(native.port, "/")
    _same_as_default(a)
    _same_as_default(b)
    assert (a.status, a.body, a.header("content-type"), a.header("content-length")) == \
        (b.status, b.body, b.header("content-type"), b.header("content-length"))
    assert b.header("server") == "cserve" and b.header("date")


def test_the_default_app_spelt_as_help_shows_it_is_served():
    # --help names the default app as a file path; typed as shown, it serves.
    port = free_port()
    srv = Server([BIN, "--bind", f"127.0.0.1:{port}", "apps/hello.py:application"], port, cwd=str(ROOT))
    try:
        srv.wait_ready()
        _same_as_default(get(port, "/"))
        assert srv.stop() == 0
    finally:
        srv.close()


def test_app_file_path_is_imported_from_its_own_folder(tmp_path):
    # path/to/file.py:CALLABLE imports the file as its stem with its folder
    # first on sys.path, so its sibling modules import as under `python file.py`.
    site = tmp_path / "site"
    site.mkdir()
    (site / "helper.py").write_text("GREETING = b'from the sibling'\n")
    (site / "mysite.py").write_text(
        "import sys\n"
        "import helper\n"
        "def application(environ, start_response):\n"
        "    start_response('200 OK', [('Content-Type', 'text/plain')])\n"
        "    return [helper.GREETING, b'|', __name__.encode(), b'|', sys.path[0].encode()]\n")
    port = free_port()
    srv = Server([BIN, "--bind", f"127.0.0.1:{port}", "--chdir", str(tmp_path), "site/mysite.py:application"],
                 port, cwd=str(ROOT))
    try:
        srv.wait_ready()
        resp = get(port, "/")
        assert resp.status == 200, srv.log_text()
        assert resp.body == b"from the sibling|mysite|" + str(site.resolve()).encode()
        assert srv.stop() == 0
    finally:
        srv.close()


def test_options_accept_equals_form(tmp_path):
    port = free_port()
    srv = Server([BIN, f"--bind=127.0.0.1:{port}", "--handoff=eventfd", f"--chdir={APPS}",
                  "--blocking-threads=2", "wsgi_apps:application"], port, cwd=str(ROOT))
    try:
        srv.wait_ready()
        resp = get(port, "/environ")
        assert resp.status == 200 and b'"wsgi.multithread": true' in resp.body
    finally:
        srv.close()


def test_no_arguments_serves_default_app_on_8000():
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", 8000))
        except OSError:
            pytest.skip("port 8000 is busy on this machine")
    srv = Server([BIN], 8000, cwd=str(ROOT))
    try:
        srv.wait_ready()
        _same_as_default(get(8000, "/"))
        assert srv.stop() == 0
    finally:
        srv.close()


def config_value(out, name):
    """The value --check-config prints for name (without where it came from)."""
    for ln in out.splitlines():
        if ln.startswith(name + ": "):
            return re.sub(r" \((default|command line|environment: CSERVE_\w+)\)$", "", ln[len(name) + 2:])
    raise AssertionError(f"no {name} line in:\n{out}")


ACCESS_LOG_FORMS = [
    # (arguments, the access log, the app)
    (["--access-log", "/tmp/cserve-cli-a.log", APPARG], "/tmp/cserve-cli-a.log", APPARG),
    ([APPARG, "--access-log", "/tmp/cserve-cli-a.log"], "/tmp/cserve-cli-a.log", APPARG),
    (["--access-log", "access.log"], "access.log", "(the default app)"),
    (["--access-log", APPARG], "stderr", APPARG),
    (["--access-log", "--workers", "2", APPARG], "stderr", APPARG),
    (["--access-log=/tmp/cserve-cli-a.log", APPARG], "/tmp/cserve-cli-a.log", APPARG),
]


@pytest.mark.parametrize("args,log,app", ACCESS_LOG_FORMS)
def test_access_log_takes_a_file_after_a_space_and_leaves_the_app(args, log, app):
    """--access-log FILE reads as every other option's value does; a word in
    the app's form after it stays the app."""
    p = subprocess.run([BIN, "--check-config", "--chdir", str(APPS), *args], cwd=str(ROOT), capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert config_value(p.stdout, "access-log") == log, p.stdout
    assert config_value(p.stdout, "app") == app, p.stdout


def test_access_log_file_after_a_space_gets_the_requests(tmp_path):
    log = tmp_path / "access.log"
    port = free_port()
    srv = Server([BIN, "--bind", f"127.0.0.1:{port}", "--chdir", str(APPS), "--access-log", str(log), APPARG],
                 port, cwd=str(ROOT))
    try:
        srv.wait_ready()
        assert get(port, "/hello").body == b"hello"
        assert srv.stop() == 0
    finally:
        srv.close()
    assert '"GET /hello HTTP/1.1" 200' in log.read_text()

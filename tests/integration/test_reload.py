"""Reload and recycling: SIGHUP starts workers that import the app afresh
and drains the old ones; --max-requests replaces a worker after N requests;
a new worker that fails to import leaves the old ones serving. Every
replacement starts the new worker first, so under load no request fails.

The app's body is read from its module at import, so a changed file is
seen only by a worker that imported it again. Its /held requests record the
worker's pid in slow.pids and are held until the test creates "release", so
a worker drains for as long as the test needs, however slow the machine."""
import os
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import BIN
from conftest import start_server
from deploy_support import http_get
import loadgen
from loadgen import wait_until
from procfs import alive, children, cmdline, descendants

APP = '''import os, time
time.sleep(float(os.environ.get("RELOAD_APP_IMPORT_SECONDS", "0")))
os.environ.setdefault("RELOAD_APP_SETTINGS", "VERSION")
BODY = b"VERSION"
def application(environ, start_response):
    if environ["PATH_INFO"] == "/chdir":
        os.chdir("/")
    if environ["PATH_INFO"] == "/settings":
        body = os.environ["RELOAD_APP_SETTINGS"].encode()
        start_response("200 OK", [("Content-Length", str(len(body)))])
        return [body]
    if environ["PATH_INFO"] == "/held":
        with open("slow.pids", "a") as f:  # which worker holds a held request
            f.write(f"{os.getpid()}\\n")
        deadline = time.monotonic() + 60
        while not os.path.exists("release") and time.monotonic() < deadline:
            time.sleep(0.01)  # held until the test creates "release"
    start_response("200 OK", [("Content-Type", "text/plain"),
                              ("Content-Length", str(len(BODY)))])
    return [BODY]
'''


def write_app(d, version, broken=False):
    text = APP.replace("VERSION", version)
    if broken:
        text += 'raise RuntimeError("the new version does not import")\n'
    path = d / "reload_app.py"
    tmp = d / "reload_app.py.tmp"
    tmp.write_text(text)
    os.replace(tmp, path)
    # The new import must not be served from a stale .pyc whose recorded
    # mtime and size match (same second, same length): drop the cache.
    shutil.rmtree(d / "__pycache__", ignore_errors=True)


def get(port, path="/"):
    """(status, body) of one GET on a new connection."""
    return http_get(socket.create_connection(("127.0.0.1", port), timeout=5), path)


def served_lines(srv):
    """How many times a new worker took over (one worker alone hands over
    once, then its supervisor promotes)."""
    text = srv.log_text()
    return len(re.findall(r"pid \d+ serves|the new worker \(pid \d+\) serves", text))


def start_wrk(port, seconds, conns=64):
    wrk = shutil.which("wrk")
    if not wrk:
        pytest.skip("wrk is not installed (scripts/setup.sh test installs it)")
    return subprocess.Popen([wrk, "-t1", f"-c{conns}", f"-d{seconds}s", f"http://127.0.0.1:{port}/"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wrk_result(proc):
    out, _ = proc.communicate(timeout=120)
    m = re.search(r"(\d+) requests in", out)
    assert m, out
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return int(m.group(1)), (tuple(map(int, errors.groups())) if errors else (0, 0, 0, 0)), \
        (int(non2xx.group(1)) if non2xx else 0), out


@pytest.mark.parametrize("workers", [1, 2])
def test_reload_under_load_drops_nothing_and_serves_the_new_code(tmp_path, workers):
    write_app(tmp_path, "v0")
    srv = start_server("--workers", str(workers), "--graceful-timeout", "10", app="reload_app:application",
                       chdir=tmp_path)
    try:
        assert get(srv.port)[1] == b"v0"
        wrk = start_wrk(srv.port, 25)
        wait_until(lambda: get(srv.port)[1] == b"v0", 5)
        expected = 0
        for version in range(1, 6):
            write_app(tmp_path, f"v{version}")
            srv.proc.send_signal(signal.SIGHUP)
            expected += workers
            assert wait_until(lambda: served_lines(srv) >= expected, 20), srv.log_text()[-3000:]
            assert wait_until(lambda: get(srv.port)[1] == f"v{version}".encode(), 10), srv.log_text()[-3000:]
        assert wrk.poll() is None, "wrk ended before the fifth reload: the load did not cover them"
        requests, errors, non2xx, out = wrk_result(wrk)
        assert requests > 0, out
        assert errors == (0, 0, 0, 0), out + srv.log_text()[-3000:]
        assert non2xx == 0, out
        assert get(srv.port) == (200, b"v5")
        assert srv.proc.poll() is None
    finally:
        srv.close()


@pytest.mark.parametrize("workers", [1, 3])
def test_a_reload_that_fails_to_import_keeps_the_old_code_serving(tmp_path, workers):
    """Every old worker keeps serving, and the failure is told once: one
    new worker tries the code, so one traceback and one error line, however
    many workers there are."""
    write_app(tmp_path, "old")
    srv = start_server("--workers", str(workers), app="reload_app:application", chdir=tmp_path)
    try:
        wrk = start_wrk(srv.port, 6, conns=16)
        write_app(tmp_path, "new", broken=True)
        srv.proc.send_signal(signal.SIGHUP)
        assert wait_until(lambda: "reload failed" in srv.log_text(), 20), srv.log_text()
        for _ in range(20):
            assert get(srv.port) == (200, b"old")
        requests, errors, non2xx, out = wrk_result(wrk)
        assert requests > 0 and errors == (0, 0, 0, 0) and non2xx == 0, out
        log = srv.log_text()  # the wrk run's seconds later: any other worker's try would be here
        assert log.count("Traceback (most recent call last)") == 1, log
        assert log.count("cannot import app") == 1, log
        assert log.count("reload failed") == 1, log
        if workers > 1:
            assert f"the other {workers - 1} workers keep the old code too" in log, log
        # The app mended, the next reload takes.
        write_app(tmp_path, "mended")
        srv.proc.send_signal(signal.SIGHUP)
        assert wait_until(lambda: get(srv.port)[1] == b"mended", 20), srv.log_text()[-3000:]
    finally:
        srv.close()


@pytest.mark.parametrize("workers", [1, 2])
def test_max_requests_recycles_workers_under_load_without_errors(workers):
    srv = start_server("--workers", str(workers), "--max-requests", "500", "--max-requests-jitter", "50",
                       "--graceful-timeout", "10")
    try:
        wrk = start_wrk(srv.port, 6)
        requests, errors, non2xx, out = wrk_result(wrk)
        assert errors == (0, 0, 0, 0) and non2xx == 0, out + srv.log_text()[-3000:]
        # A worker asks to be replaced once it served 500 to 550 requests
        # (it serves on until its replacement accepts), and is replaced. The
        # loop counts at the end of a pass, which may finish many responses.
        counts = [int(n) for n in re.findall(r"served (\d+) requests \(--max-requests\)", srv.log_text())]
        assert len(counts) >= 2, (requests, srv.log_text()[-3000:])
        assert all(500 <= n <= 550 + 256 for n in counts), counts
        assert wait_until(lambda: served_lines(srv) >= len(counts) - workers, 10), srv.log_text()[-3000:]
        assert get(srv.port)[0] == 200
    finally:
        srv.close()


def test_workers_lifetime_replaces_a_worker_that_keeps_serving():
    srv = start_server("--workers", "2", "--workers-lifetime", "1")
    try:
        assert wait_until(lambda: served_lines(srv) >= 2, 15), srv.log_text()
        assert "lived its --workers-lifetime" in srv.log_text()
        assert get(srv.port)[0] == 200
    finally:
        srv.close()


def test_workers_max_rss_replaces_a_worker_over_it():
    # Any Python worker is over 1 MB resident: it is replaced within seconds.
    srv = start_server("--workers-max-rss", "1")
    try:
        assert wait_until(lambda: served_lines(srv) >= 1, 15), srv.log_text()
        assert "over --workers-max-rss" in srv.log_text()
        assert get(srv.port)[0] == 200
    finally:
        srv.close()


def test_pid_file_holds_the_main_pid_and_goes_at_exit(tmp_path):
    pid_file = tmp_path / "cserve.pid"
    srv = start_server("--pid-file", str(pid_file), "--workers", "2")
    try:
        assert int(pid_file.read_text()) == srv.proc.pid
        srv.proc.send_signal(signal.SIGHUP)  # the supervisor's pid stays the server's
        assert wait_until(lambda: served_lines(srv) >= 2, 20), srv.log_text()
        assert int(pid_file.read_text()) == srv.proc.pid
    finally:
        srv.close()
    assert not pid_file.exists()


def _title(pid):
    """pid's process title (its first argument), "" once it has exited."""
    return (cmdline(pid) or [""])[0]


def test_process_titles_name_the_supervisor_and_each_worker(tmp_path):
    srv = start_server("--workers", "2")
    try:
        # The socket listens before the supervisor names itself.
        assert wait_until(lambda: _title(srv.proc.pid).startswith("cserve: supervisor ["), 10)
        assert wait_until(lambda: len(children(srv.proc.pid)) == 2, 10)
        assert wait_until(lambda: sorted(_title(p).split(" [")[0] for p in children(srv.proc.pid)) ==
                          ["cserve: worker 0", "cserve: worker 1"], 10)
        assert get(srv.port)[0] == 200
    finally:
        srv.close()
    alone = start_server()
    try:  # one worker alone keeps the command line it was started with
        assert "--bind" in (cmdline(alone.proc.pid) or []), cmdline(alone.proc.pid)
    finally:
        alone.close()


def test_dev_reload_restarts_on_a_changed_module(tmp_path):
    """--reload: the app's folders are watched; a .py file written in place
    or renamed over (as editors save) brings up a worker with the new code;
    other files change nothing."""
    (tmp_path / "helper.py").write_text('WORD = b"first"\n')
    (tmp_path / "devapp.py").write_text(
        "import helper\n"
        "def application(environ, start_response):\n"
        "    start_response('200 OK', [('Content-Length', str(len(helper.WORD)))])\n"
        "    return [helper.WORD]\n")
    srv = start_server("--reload", app="devapp:application", chdir=tmp_path)
    try:
        assert get(srv.port)[1] == b"first"
        (tmp_path / "notes.txt").write_text("not python")
        shutil.rmtree(tmp_path / "__pycache__", ignore_errors=True)
        (tmp_path / "helper.py").write_text('WORD = b"second"\n')  # in place
        assert wait_until(lambda: get(srv.port)[1] == b"second", 15), srv.log_text()[-2000:]
        shutil.rmtree(tmp_path / "__pycache__", ignore_errors=True)
        (tmp_path / "helper.py.swp").write_text('WORD = b"third!"\n')
        os.replace(tmp_path / "helper.py.swp", tmp_path / "helper.py")  # renamed over
        assert wait_until(lambda: get(srv.port)[1] == b"third!", 15), srv.log_text()[-2000:]
        assert srv.log_text().count("helper.py changed") == 2, srv.log_text()[-2000:]
        assert "notes.txt" not in srv.log_text()
    finally:
        srv.close()


def test_dev_reload_is_refused_with_several_workers():
    r = subprocess.run([BIN, "--reload", "--workers", "2"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2 and "--reload" in r.stderr


def test_a_successor_asking_to_be_recycled_during_the_handover_is_heard():
    """One worker alone hands over to its successor and drains a slow
    request; meanwhile the successor reaches --max-requests and asks its
    parent for a replacement. The parent, not yet a supervisor, must take
    that request (not die of the signal) and act on it once it supervises."""
    srv = start_server("--max-requests", "3", "--blocking-threads", "2", "--graceful-timeout", "10",
                       app="hostile_client_apps:application")
    try:
        slow = socket.create_connection(("127.0.0.1", srv.port), timeout=15)
        slow.sendall(b"GET /slow?3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        for _ in range(3):  # the first worker reaches its limit and hands over
            assert get(srv.port)[0] == 200
        assert wait_until(lambda: "the new worker (pid" in srv.log_text(), 10), srv.log_text()
        for _ in range(4):  # served by the successor, which reaches its own limit
            assert get(srv.port)[0] == 200
        data = b""
        while chunk := slow.recv(65536):
            data += chunk
        assert data.startswith(b"HTTP/1.1 200") and data.endswith(b"slow"), data
        assert srv.proc.poll() is None, srv.log_text()
        # Once supervising, it replaces the successor as asked.
        assert wait_until(lambda: re.search(r"worker 0: pid \d+ serves; pid \d+ drains", srv.log_text()), 15), \
            srv.log_text()
        assert get(srv.port)[0] == 200
    finally:
        srv.close()


def test_a_reload_during_a_reload_is_not_lost(tmp_path):
    """SIGHUP while new workers are still importing: the newer code is
    served once both reloads are through."""
    write_app(tmp_path, "v1")
    env = dict(os.environ, RELOAD_APP_IMPORT_SECONDS="1")
    srv = start_server("--workers", "2", app="reload_app:application", chdir=tmp_path, env=env)
    try:
        first = set(children(srv.proc.pid))
        write_app(tmp_path, "v2")
        srv.proc.send_signal(signal.SIGHUP)
        # the new workers have started (and import for a second each); should
        # a slow machine let them finish first, the second reload still applies
        assert wait_until(lambda: len(set(children(srv.proc.pid)) - first) == 2, 30), srv.log_text()[-3000:]
        write_app(tmp_path, "v3")
        srv.proc.send_signal(signal.SIGHUP)
        assert wait_until(lambda: all(get(srv.port)[1] == b"v3" for _ in range(6)), 30), srv.log_text()[-3000:]
    finally:
        srv.close()


def test_a_reload_after_the_app_changed_directory_imports_the_new_code(tmp_path):
    """One worker alone runs the app in the process that starts its
    successor: after the app's os.chdir, the new worker is still started in
    the directory cserve serves from, so it imports the app from there (and
    so does the next, started by the process that is now its supervisor)."""
    write_app(tmp_path, "v1")
    srv = start_server(app="reload_app:application", chdir=tmp_path)
    try:
        for version in ("v2", "v3"):
            assert get(srv.port, "/chdir")[0] == 200
            write_app(tmp_path, version)
            srv.proc.send_signal(signal.SIGHUP)
            assert wait_until(lambda: get(srv.port)[1] == version.encode(), 15), srv.log_text()[-3000:]
        assert "failed" not in srv.log_text(), srv.log_text()[-3000:]
    finally:
        srv.close()


def test_a_reload_while_the_lone_worker_drains_is_not_lost(tmp_path):
    write_app(tmp_path, "v1")
    # threads enough that a GET the old worker takes never queues behind /held
    srv = start_server("--graceful-timeout", "60", "--blocking-threads", "4", app="reload_app:application",
                       chdir=tmp_path)
    try:
        slow = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        slow.sendall(b"GET /held HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert wait_until(lambda: (tmp_path / "slow.pids").exists(), 30), "the request never reached the app"
        write_app(tmp_path, "v2")
        srv.proc.send_signal(signal.SIGHUP)  # the lone worker hands over, drains /held
        assert wait_until(lambda: get(srv.port)[1] == b"v2", 30), srv.log_text()[-3000:]
        write_app(tmp_path, "v3")
        srv.proc.send_signal(signal.SIGHUP)  # comes while it still drains
        (tmp_path / "release").touch()  # the drain ends; the reload it held is then carried out
        assert slow.recv(16).startswith(b"HTTP/1.1 200")
        assert wait_until(lambda: get(srv.port)[1] == b"v3", 30), srv.log_text()[-3000:]
    finally:
        srv.close()


def test_every_draining_worker_is_waited_for(tmp_path):
    """Two reloads while slow requests drain on both first workers: the
    supervisor keeps track of every replaced worker, and a stop waits for
    them; none is left behind."""
    write_app(tmp_path, "v1")
    # Threads enough that a GET never queues behind the slow requests.
    srv = start_server("--workers", "2", "--blocking-threads", "16", "--graceful-timeout", "60",
                       app="reload_app:application", chdir=tmp_path)
    pids_file = tmp_path / "slow.pids"

    def holders():  # the pid of the worker serving each slow request so far
        return pids_file.read_text().split() if pids_file.exists() else []
    try:
        assert wait_until(lambda: len(children(srv.proc.pid)) == 2, 10), srv.log_text()
        # Which worker accepts a connection is the kernel's choice: open
        # slow requests until both workers hold one.
        slow = []
        while len(set(holders())) < 2:
            assert len(slow) < 12, "12 connections reached one worker"
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
            s.sendall(b"GET /held HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            slow.append(s)
            assert wait_until(lambda: len(holders()) == len(slow), 30)
        for v in ("v2", "v3"):
            write_app(tmp_path, v)
            srv.proc.send_signal(signal.SIGHUP)
            assert wait_until(lambda: all(get(srv.port)[1] == v.encode() for _ in range(4)), 20), \
                srv.log_text()[-3000:]
        family = descendants(srv.proc.pid)
        assert len(family) >= 4, family  # two serving, the first two draining (v2 may still be leaving)
        srv.proc.send_signal(signal.SIGTERM)
        (tmp_path / "release").touch()
        for s in slow:
            assert s.recv(16).startswith(b"HTTP/1.1 200")
        srv.proc.wait(30)
        assert not [p for p in family if alive(p)], "a worker outlived its supervisor"
    finally:
        srv.close()


def test_a_slot_whose_worker_died_while_its_replacement_failed_gets_a_worker(tmp_path):
    """With --preload: the respawn is forked from the app the supervisor
    imported, the old code (without it, a respawn imports what is on disk)."""
    write_app(tmp_path, "v1")
    env = dict(os.environ, RELOAD_APP_IMPORT_SECONDS="1")
    srv = start_server("--workers", "2", "--preload", app="reload_app:application", chdir=tmp_path, env=env)
    try:
        assert wait_until(lambda: len(children(srv.proc.pid)) == 2, 10)
        first = set(children(srv.proc.pid))
        victim = sorted(first)[0]
        write_app(tmp_path, "v2", broken=True)
        srv.proc.send_signal(signal.SIGHUP)
        # the replacements have started (they import for a second, then fail)
        assert wait_until(lambda: set(children(srv.proc.pid)) - first, 30), srv.log_text()[-3000:]
        os.kill(victim, signal.SIGKILL)  # dies while its replacement imports (and fails)
        assert wait_until(lambda: "reload failed" in srv.log_text(), 15), srv.log_text()
        assert wait_until(lambda: len(children(srv.proc.pid)) == 2, 15), srv.log_text()[-3000:]
        for _ in range(12):  # connections reach both slots' listeners
            assert get(srv.port) == (200, b"v1")
    finally:
        srv.close()


def test_a_recycle_whose_replacement_failed_is_asked_for_again(tmp_path):
    """Recycling a worker that a reload started imports the app again (the
    supervisor's own import is the old code). When that new worker fails,
    the old one keeps serving and asks again later, until one starts."""
    write_app(tmp_path, "v1")
    srv = start_server("--workers", "2", "--max-requests", "3", app="reload_app:application", chdir=tmp_path)
    try:
        srv.proc.send_signal(signal.SIGHUP)  # from now on the slots' workers are exec'd
        assert wait_until(lambda: srv.log_text().count(" serves; pid ") >= 2, 20), srv.log_text()
        write_app(tmp_path, "v1", broken=True)  # the replacements will fail
        for _ in range(8):
            get(srv.port)
        assert wait_until(lambda: "recycling failed" in srv.log_text(), 15), srv.log_text()
        write_app(tmp_path, "v2")  # mended: a later ask succeeds
        assert wait_until(lambda: get(srv.port)[1] == b"v2" and get(srv.port)[1] == b"v2", 30), \
            srv.log_text()[-3000:]
    finally:
        srv.close()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_reload_imports_in_the_environment_cserve_started_with(tmp_path, workers):
    """The first import's os.environ.setdefault (Django's settings module
    idiom) does not stick to the workers a reload starts."""
    write_app(tmp_path, "v1")
    srv = start_server("--workers", workers, app="reload_app:application", chdir=tmp_path)
    try:
        assert get(srv.port, "/settings") == (200, b"v1")
        write_app(tmp_path, "v2")
        srv.proc.send_signal(signal.SIGHUP)
        assert wait_until(lambda: all(get(srv.port, "/settings") == (200, b"v2") for _ in range(4)), 20), \
            srv.log_text()[-3000:]
    finally:
        srv.close()


DJANGO_WSGI = '''import os
from django.core.wsgi import get_wsgi_application
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")
application = get_wsgi_application()
'''
# docs/operating.md's recipe: import the URLconf, and so every view, at start-up
DJANGO_EAGER = '''from django.urls import get_resolver
get_resolver().url_patterns
'''


# Django's imports nest deeper than the 256 frames LSan records, and it
# imports its views during the first request: its one-time allocations never
# show the frame tests/lsan.supp names (import_app), so an ASan build's leak
# check would fail on Django, not on cserve. The reloads themselves are
# checked under ASan by the tests above.
@pytest.mark.skipif(loadgen.sanitizer(BIN) == "asan", reason="LSan cannot attribute Django's deep imports")
@pytest.mark.parametrize("eager", [False, True])
def test_a_django_view_that_cannot_import_fails_the_reload_only_when_wsgi_py_imports_the_urls(tmp_path, eager):
    """Django imports the URLconf and its views on the first request, not in
    get_wsgi_application(): a view module that no longer imports passes a
    reload and then fails every request, unless wsgi.py imports the URLconf
    itself (the recipe docs/operating.md gives); then the reload fails and
    the old workers keep serving."""
    pytest.importorskip("django")
    site = tmp_path / "mysite"
    site.mkdir()
    (site / "__init__.py").write_text("")
    (site / "settings.py").write_text('SECRET_KEY = "test-only"\nALLOWED_HOSTS = ["*"]\nROOT_URLCONF = "mysite.urls"\n'
                                      'INSTALLED_APPS = []\nMIDDLEWARE = []\n')
    (site / "urls.py").write_text("from django.urls import path\nfrom . import views\n"
                                  'urlpatterns = [path("", views.index)]\n')
    (site / "wsgi.py").write_text(DJANGO_WSGI + (DJANGO_EAGER if eager else ""))

    def views(text):
        (site / "views.py").write_text(text)
        shutil.rmtree(site / "__pycache__", ignore_errors=True)
    views('from django.http import HttpResponse\n'
          'def index(request):\n    return HttpResponse(b"v1", headers={"Content-Length": "2"})\n')
    srv = start_server("--workers", "2", app="mysite.wsgi:application", chdir=tmp_path)
    try:
        assert get(srv.port) == (200, b"v1")
        views('import no_such_module\n' + (site / "views.py").read_text())
        srv.proc.send_signal(signal.SIGHUP)
        if eager:
            assert wait_until(lambda: "reload failed" in srv.log_text(), 20), srv.log_text()
            assert "No module named 'no_such_module'" in srv.log_text()
            assert all(get(srv.port) == (200, b"v1") for _ in range(6))
        else:
            assert wait_until(lambda: srv.log_text().count(" serves; pid ") >= 2, 20), srv.log_text()
            assert "reload failed" not in srv.log_text()
            assert wait_until(lambda: all(get(srv.port)[0] == 500 for _ in range(6)), 10), srv.log_text()[-3000:]
    finally:
        srv.close()

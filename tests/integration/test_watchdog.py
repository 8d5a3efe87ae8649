"""--app-timeout: a pool thread stuck in the app on one request is reported
(by the request's method and path) with every thread's Python stack and its worker replaced; the worker lets
go of its clients at once (it accepts no more; the stuck request and those
waiting behind it get a 503 that closes; idle connections close; nothing
it accepted is left open), and requests on other paths keep being served
meanwhile."""
import http.client
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time

import pytest

import procfs
from conftest import APPS, BIN, free_port, start_server
from deploy_support import Proc, clean_env, wait_connect
from httpclient import Reader
from loadgen import wait_until
from procfs import children
from test_nginx import CONF, NGINX, localise, recipe

TIMEOUT = 1  # --app-timeout (s), where only the stuck request is in the app
# --app-timeout (s) where other requests are served while one is stuck: they
# must be answered before the watchdog fires, which on a busy machine takes
# more than the milliseconds they need on a quiet one.
SERVED_TIMEOUT = 5
HANG_S = 30  # only detects a hang: nothing here legitimately takes this long


def _succeeded(log):
    """True once a successor serves and the worker it replaces drains (the
    word "serves" alone is also in the warning a root server gives)."""
    return re.search(r"serves; (this one|pid \d+) drains", log) is not None


def _started(mark):
    """True once the /hang?mark= request is in the app."""
    return os.path.exists(mark) and "start" in open(mark).read()


def get(port, path):
    with socket.create_connection(("127.0.0.1", port), timeout=HANG_S) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data


@pytest.mark.parametrize("workers", [1, 2])
def test_a_stuck_request_is_reported_answered_and_its_worker_replaced(workers, tmp_path):
    # Two pool threads: the loop gives new requests to the one not stuck.
    srv = start_server("--workers", str(workers), "--blocking-threads", "2", "--app-timeout",
                       str(SERVED_TIMEOUT), "--graceful-timeout", "2", app="hang_apps:application")
    try:
        mark = tmp_path / "hang.mark"
        stuck = socket.create_connection(("127.0.0.1", srv.port), timeout=HANG_S)
        t0 = time.monotonic()
        stuck.sendall(f"GET /hang?mark={mark}&token=s3cret HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert wait_until(lambda: _started(mark), HANG_S), srv.log_text()[-3000:]
        # Meanwhile the other paths are served: a few requests, each a
        # matter of milliseconds, long before the watchdog may fire (from
        # then on a request read by the stuck worker is answered 503).
        for _ in range(3):
            assert get(srv.port, "/ok").endswith(b"\r\n\r\nok")
        assert "app watchdog" not in srv.log_text(), srv.log_text()[-3000:]
        # The stuck request is answered, never before the timeout: 503, closing.
        resp = Reader(stuck).read_response()
        waited = time.monotonic() - t0
        assert resp.status == 503 and resp.header("connection") == "close", resp
        assert stuck.recv(100) == b""
        assert waited >= SERVED_TIMEOUT * 0.9, waited
        stuck.close()
        assert "app watchdog: pool thread 0 has been in the app" in srv.log_text()
        # The line names the request by method and path; the query string,
        # which may carry a secret, stays out of the log.
        assert "on one request, GET /hang (--app-timeout)" in srv.log_text(), srv.log_text()[-3000:]
        assert "s3cret" not in srv.log_text()
        # The stack, from faulthandler, follows that line (maybe still being written).
        assert wait_until(lambda: "stuck_in_this_function_for_ever" in srv.log_text(), HANG_S), \
            srv.log_text()[-4000:]
        assert wait_until(lambda: _succeeded(srv.log_text()), HANG_S), srv.log_text()[-3000:]
        for _ in range(10):
            assert get(srv.port, "/ok").endswith(b"\r\n\r\nok")
    finally:
        srv.close()


def _on(port, pid, timeout=HANG_S):
    """A keep-alive connection to the worker whose pid is pid (with
    --workers the kernel spreads connections over the workers' listeners)."""
    for _ in range(200):
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        s.sendall(b"GET /pid HTTP/1.1\r\nHost: x\r\n\r\n")
        r = Reader(s)
        if int(r.read_response().body) == pid:
            return s, r
        s.close()
    raise AssertionError(f"no connection reached pid {pid}")


def _pid_on_a_new_connection(port):
    with socket.create_connection(("127.0.0.1", port), timeout=HANG_S) as s:
        s.sendall(b"GET /pid HTTP/1.1\r\nHost: x\r\n\r\n")
        return int(Reader(s).read_response().body)


def _all_workers_serve(srv, workers):
    """Wait until every worker has answered a request: each is past its
    start, so a gate for new workers holds only the ones started later."""
    seen = set()

    def all_seen():
        expected = {srv.proc.pid} if workers == 1 else set(children(srv.proc.pid))
        seen.add(_pid_on_a_new_connection(srv.port))
        return len(expected) == workers and expected <= seen
    assert wait_until(all_seen, HANG_S, interval=0), (seen, children(srv.proc.pid))


def _tcp_peers(pid, port):
    """The connected TCP sockets on the server's port that process pid
    holds open (its listener is not one); empty once it has exited."""
    conns = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            f = line.split()
            if int(f[1].rsplit(":", 1)[1], 16) == port and f[3] != "0A":  # 0A: LISTEN
                conns.add(f[9])
    held = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except FileNotFoundError:
                continue
            if link.startswith("socket:[") and link[8:-1] in conns:
                held.add(link)
    except FileNotFoundError:
        pass
    return held


def _closes(r, within):
    """The peer closes (EOF or reset) within `within` seconds, sending nothing more."""
    r.sock.settimeout(within)
    try:
        assert r.buf == b"" and r.sock.recv(4096) == b""
    except ConnectionResetError:
        pass
    except socket.timeout:
        raise AssertionError(f"the connection is still open after {within} s") from None


@pytest.mark.parametrize("workers", [1, 2])
def test_a_stuck_worker_lets_go_of_its_clients(workers, tmp_path):
    """One pool thread, stuck: the stuck request, the requests queued behind
    it (two pipelined on one connection) and a head completed after the
    watchdog fired each get one 503 that closes; an idle keep-alive
    connection is closed at once, while the successor cannot serve yet (its
    import is gated); a new connection is served by the successor; and once
    the stuck worker has drained it holds no client's socket (not even one
    whose head never ends)."""
    successor_gate = tmp_path / "successor-gate"
    srv = start_server("--workers", str(workers), "--blocking-threads", "1", "--app-timeout", str(TIMEOUT),
                       "--graceful-timeout", "2", "--keepalive-timeout", "120", app="hang_apps:application",
                       env=dict(os.environ, HANG_APPS_GATE_NEW_WORKER=str(successor_gate)))
    try:
        _all_workers_serve(srv, workers)
        successor_gate.touch()
        mark = tmp_path / "hang.mark"
        stuck = socket.create_connection(("127.0.0.1", srv.port), timeout=HANG_S)
        stuck.sendall(b"GET /pid HTTP/1.1\r\nHost: x\r\n\r\n")
        rs = Reader(stuck)
        pid = int(rs.read_response().body)
        idle, ri = _on(srv.port, pid)
        queued, rq = _on(srv.port, pid)
        partial, rp = _on(srv.port, pid)
        slow, rl = _on(srv.port, pid)
        slow.sendall(b"GET /ok HTTP/1.1\r\n")  # and never more: open past the drain
        stuck.sendall(f"GET /hang?mark={mark} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        # In the app: the one pool thread is taken, whatever comes next waits.
        assert wait_until(lambda: _started(mark), HANG_S), srv.log_text()[-3000:]
        queued.sendall(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n" * 2)
        partial.sendall(b"GET /ok HTTP/1.1\r\nHost: x\r\n")
        assert wait_until(lambda: "app watchdog" in srv.log_text(), HANG_S), srv.log_text()[-3000:]
        partial.sendall(b"\r\n")  # a head that completes now: refused too
        for name, r in (("stuck", rs), ("queued", rq), ("partial", rp)):
            resp = r.read_response()
            assert resp.status == 503 and resp.header("connection") == "close", (name, resp)
            _closes(r, HANG_S)  # nothing after the 503: the pipelined second request is not answered
        # At once: the successor cannot serve yet, so the stuck worker has
        # not been told to stop and drain.
        _closes(ri, HANG_S)
        assert not _succeeded(srv.log_text()), srv.log_text()[-3000:]
        successor_gate.unlink()
        # A new client waits in the listener's backlog for the successor.
        assert get(srv.port, "/ok").endswith(b"\r\n\r\nok")
        assert wait_until(lambda: _succeeded(srv.log_text()), HANG_S), srv.log_text()[-3000:]
        assert wait_until(lambda: "graceful timeout" in srv.log_text(), HANG_S), srv.log_text()[-3000:]
        assert wait_until(lambda: not _tcp_peers(pid, srv.port), HANG_S), _tcp_peers(pid, srv.port)
        _closes(rl, HANG_S)
        for s in (stuck, idle, queued, partial, slow):
            s.close()
    finally:
        srv.close()


def _thread_names(pid):
    """The names of pid's threads (empty once it has exited)."""
    names = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return names
    for tid in tids:
        comm = procfs.read(pid, f"task/{tid}/comm")
        if comm is not None:
            names.append(comm.strip())
    return sorted(names)


def _metrics_status(path):
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(path)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        return Reader(s).read_response().status


@pytest.mark.parametrize("workers", [1, 2])
def test_no_thread_of_a_stuck_worker_runs_on(workers, tmp_path):
    """A view that spins for ever holding the GIL: its worker is replaced
    and no thread of it keeps running. With --workers 2 the stuck process
    exits once drained. One worker alone keeps its pid (the pid file's,
    systemd's), but execs itself to supervise its successor: the pid then
    runs the supervisor's threads only, and still holds the pid file, the
    metrics listener and the unix: socket it removes at exit."""
    pid_file, msock = tmp_path / "pid", str(tmp_path / "metrics.sock")
    srv = start_server("--workers", str(workers), "--blocking-threads", "1", "--app-timeout", str(TIMEOUT),
                       "--graceful-timeout", "1", "--pid-file", str(pid_file), "--metrics-bind", f"unix:{msock}",
                       app="hang_apps:application")
    try:
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=15)
        s.sendall(b"GET /pid HTTP/1.1\r\nHost: x\r\n\r\n")
        r = Reader(s)
        stuck = int(r.read_response().body)
        s.sendall(b"GET /spin HTTP/1.1\r\nHost: x\r\n\r\n")
        assert r.read_response().status == 503
        s.close()
        if workers == 1:
            assert stuck == srv.proc.pid
            assert wait_until(lambda: _thread_names(stuck) == ["cserve-metrics", "cserve-super"], 30), \
                (_thread_names(stuck), srv.log_text()[-3000:])
            assert pid_file.read_text() == f"{stuck}\n"
            assert _metrics_status(msock) == 200
        else:
            assert wait_until(lambda: not procfs.alive(stuck), 30), (_thread_names(stuck), srv.log_text()[-3000:])
        assert procfs.alive(srv.proc.pid)
        served = int(get(srv.port, "/pid").rsplit(b"\r\n\r\n", 1)[1])
        assert served != stuck
    finally:
        srv.close()
    assert not pid_file.exists() and not os.path.exists(msock)


def test_a_lone_stuck_worker_tries_again_when_its_successor_fails(tmp_path):
    """One worker alone, stuck, whose first successor fails to import the
    app: it refuses every request, so it cannot go on as the only server;
    it starts another successor after the back-off, and a client waiting
    in the listener's backlog meanwhile is served by that one."""
    broken = tmp_path / "broken"
    env = dict(os.environ, HANG_APPS_BROKEN_REIMPORT=str(broken))
    srv = start_server("--blocking-threads", "2", "--app-timeout", str(TIMEOUT), "--graceful-timeout", "2",
                       app="hang_apps:application", env=env)
    try:
        stuck = socket.create_connection(("127.0.0.1", srv.port), timeout=HANG_S)
        broken.touch()
        stuck.sendall(b"GET /hang HTTP/1.1\r\nHost: x\r\n\r\n")
        assert Reader(stuck).read_response().status == 503
        assert wait_until(lambda: "before it served" in srv.log_text(), HANG_S), srv.log_text()[-3000:]
        assert "the old one cannot serve" in srv.log_text(), srv.log_text()[-3000:]
        broken.unlink()
        # Accepted by nobody until a successor serves: the back-off (1 s)
        # and the next look (at most 1 s), then the successor's start.
        assert get(srv.port, "/ok").endswith(b"\r\n\r\nok")
        assert wait_until(lambda: _succeeded(srv.log_text()), HANG_S), srv.log_text()[-3000:]
        stuck.close()
    finally:
        srv.close()


def _app_timeout_line(*args):
    r = subprocess.run([BIN, "--check-config", *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return next(ln for ln in r.stdout.splitlines() if ln.startswith("app-timeout:"))


def test_app_timeout_is_on_by_default_where_there_are_pool_threads():
    """30 s by default, as gunicorn's --timeout; 0 turns it off; --inline
    and native-hello have no pool threads to watch: off there, not refused."""
    assert _app_timeout_line() == "app-timeout: 30.000 (default)"
    assert _app_timeout_line("--workers", "2", "--blocking-threads", "auto") == "app-timeout: 30.000 (default)"
    assert _app_timeout_line("--app-timeout", "0") == "app-timeout: off (command line)"
    assert _app_timeout_line("--inline") == "app-timeout: off (default)"
    assert _app_timeout_line("--inline", "--app-timeout", "0") == "app-timeout: off (command line)"
    assert _app_timeout_line("--app", "native-hello") == "app-timeout: off (default)"


def test_app_timeout_is_refused_without_pool_threads():
    r = subprocess.run([BIN, "--inline", "--app-timeout", "5"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--app-timeout" in r.stderr


NGINX_TIMEOUT = SERVED_TIMEOUT  # --app-timeout behind nginx (s): another client is served meanwhile


@pytest.mark.skipif(NGINX is None or os.geteuid() != 0,
                    reason="nginx (scripts/setup.sh installs nginx-light) and root (its workers run as www-data)")
def test_behind_nginx_the_stuck_client_is_answered_and_others_served():
    """Through the documented nginx recipe, one worker with two pool
    threads: a request stuck in the app gets cserve's 503 (not nginx's 502)
    after the timeout, another client is served while it waits, and a
    client after it is served by the successor."""
    d = tempfile.mkdtemp(prefix="cserve-nginx-watchdog-")
    os.chmod(d, 0o777)
    os.makedirs(os.path.join(d, "tmp"), mode=0o777)
    static = os.path.join(d, "static")
    os.makedirs(static, mode=0o755)
    sock, port = os.path.join(d, "cserve.sock"), free_port()
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(CONF.format(d=d, recipe=localise(recipe(), sock, port, static)))
    srv = Proc([BIN, "--bind", f"unix:{sock}", "--socket-mode", "660", "--user", "nobody", "--group", "www-data",
                "--blocking-threads", "2", "--app-timeout", str(NGINX_TIMEOUT), "--graceful-timeout", "3",
                "--chdir", str(APPS), "hang_apps:application"], env=clean_env())
    ngx = None
    try:
        wait_connect(srv, sock).close()
        ngx = Proc([NGINX, "-p", d, "-c", os.path.join(d, "nginx.conf"), "-g", "daemon off;"], env=clean_env())
        wait_connect(ngx, ("127.0.0.1", port)).close()

        def fetch(path):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=HANG_S)
            try:
                c.request("GET", path)
                r = c.getresponse()
                return r.status, r.read()
            finally:
                c.close()

        result = {}
        mark = os.path.join(d, "hang.mark")  # d is writable by the app's user

        def stuck():
            result["stuck"] = fetch(f"/hang?mark={mark}")

        th = threading.Thread(target=stuck)
        th.start()
        # Once the stuck request is in the app, a few requests, each a matter
        # of milliseconds, long before the watchdog may fire.
        assert wait_until(lambda: _started(mark), HANG_S), srv.text()[-3000:]
        served = [fetch("/ok") for _ in range(3)]
        assert "app watchdog" not in srv.text(), srv.text()[-3000:]
        th.join(NGINX_TIMEOUT + HANG_S)
        status, body = result["stuck"]
        assert status == 503 and b"Service Unavailable" in body, (status, body, srv.text()[-2000:])
        assert all(r == (200, b"ok") for r in served), served
        # The successor serves (the stuck worker closed its idle upstream
        # connections when it answered: nginx opens a new one).
        assert wait_until(lambda: _succeeded(srv.text()), HANG_S), srv.text()[-3000:]
        assert fetch("/ok") == (200, b"ok"), srv.text()[-3000:]
    finally:
        if ngx:
            ngx.stop()
        srv.stop()
        shutil.rmtree(d, ignore_errors=True)
